//! A trace line too long to hold (issue 51, item 16). A handed workspace's trace.jsonl may end
//! in hundreds of MB with no newline (a sparse file ships cheaply in a tar): `trace show`,
//! `trace stats` and `report` pass such a line over without holding it, name it by its number
//! as they name a corrupt line, and read on.

use crate::common::*;
use serde_json::Value;
use std::io::Write;

/// The cap on one line (`trace::lines::MAX_LINE`).
const MAX_LINE: u64 = 64 << 20;

const SCRIPT: &str = r#"frame:
  - answer: {goal: look, definition_of_done: [looked, listed, noted], can_proceed: true}
plan:
  - answer: {next_action: {tool: list_dir, args: {}}, rationale: look}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: looked, outcome: looked}
"#;

/// A done run in `ws`; returns its trace's lines.
fn run(t: &T) -> Vec<String> {
    t.write("script.yaml", SCRIPT);
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "look around"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    t.read("ws/trace.jsonl").lines().map(String::from).collect()
}

/// Appends `long` zero bytes to the trace as a hole (no byte of it is written, and none is a
/// newline), then `after`, if any, as lines of their own.
fn append_long_line(t: &T, long: u64, after: &[String]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(t.path("ws/trace.jsonl")).unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len + long).unwrap();
    for line in after {
        write!(f, "\n{line}").unwrap();
    }
    if !after.is_empty() {
        writeln!(f).unwrap();
    }
}

/// What `trace show`, `trace stats` and `report` say of a line over the cap.
fn skipped(line: usize, bytes: u64) -> String {
    format!("trace.jsonl:{line}: skipped a corrupt line ({bytes} bytes, longer than the 64 MiB a line may hold)")
}

/// The peak resident memory of `agentloop -w ws ARGS`, in MiB, as /usr/bin/time measures it
/// (None where there is none).
fn peak_mib(t: &T, args: &[&str]) -> Option<u64> {
    let time = std::path::Path::new("/usr/bin/time");
    if !time.exists() {
        crate::common::missing("/usr/bin/time (apt-get install time) to measure a reader's peak memory");
        return None;
    }
    let report = t.path("time.txt");
    let out = std::process::Command::new(time)
        .arg("-o")
        .arg(&report)
        .args(["-f", "%M"])
        .arg(assert_cmd::cargo::cargo_bin("agentloop"))
        .args(["-w", "ws"])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("XDG_CACHE_HOME", t.path("cache"))
        .env("AGENTLOOP_NOW", NOW)
        .env("AGENTLOOP_TRUST_ALL", "1")
        .current_dir(t.root())
        .output()
        .ok()?;
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let kb: u64 = std::fs::read_to_string(&report).ok()?.trim().parse().ok()?;
    Some(kb >> 10)
}

/// 512 MB with no newline after a real run: every reader names the line and shows the run, in
/// memory about the cap (it took 1 GB, and 2.1 GB for 1 GB).
#[test]
fn a_trace_ending_in_512_mb_without_a_newline_is_read_in_bounded_memory() {
    let t = T::new();
    let lines = run(&t);
    const LONG: u64 = 512 << 20;
    append_long_line(&t, LONG, &[]);
    let said = skipped(lines.len() + 1, LONG);

    let out = t.al(&["trace", "show", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().collect::<Vec<_>>(), lines, "every entry of the run, as stored");
    assert!(stderr(&out).contains(&said), "{}", stderr(&out));
    let out = t.al(&["trace", "show"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), lines.len() + 1, "a header and the entries: {}", stdout(&out));
    assert!(stderr(&out).contains(&said), "{}", stderr(&out));

    let out = t.al(&["trace", "stats", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["total"]["entries"], lines.len() as u64, "{stats}");
    assert!(stderr(&out).contains(&said), "{}", stderr(&out));

    let out = t.al(&["report"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let html = t.read("ws/report.html");
    assert!(html.contains("trace.jsonl has 1 line(s) that could not be read"), "the report says so");

    // Memory: a line's cap (64 MiB) and the read blocks, never the line (about 100 MiB for the
    // fast reader behind `trace show` and `trace stats`, 85 MiB for `report`).
    for args in [&["trace", "show", "--json"][..], &["trace", "stats"], &["report"]] {
        if let Some(mib) = peak_mib(&t, args) {
            assert!(mib < 160, "{args:?} held {mib} MiB reading a 512 MiB line");
        }
    }
}

/// A line one byte over the cap between entries: named by its number, and the entries after it
/// are read; a line exactly at the cap (an entry padded with blanks) is read as any other.
#[test]
fn entries_after_a_trace_line_over_the_cap_are_read_and_one_at_the_cap_is_kept() {
    let t = T::new();
    let lines = run(&t);
    let mut after: Value = serde_json::from_str(&lines[0]).unwrap();
    after["event"] = "after.long".into();
    let after = after.to_string();
    let at_cap = format!("{after}{}", " ".repeat(MAX_LINE as usize - after.len()));
    append_long_line(&t, MAX_LINE + 1, &[after.clone(), at_cap]);
    let said = skipped(lines.len() + 1, MAX_LINE + 1);

    let out = t.al(&["trace", "show", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stdout(&out);
    let shown: Vec<&str> = shown.lines().collect();
    assert_eq!(shown.len(), lines.len() + 2, "{}", stderr(&out));
    assert_eq!(shown[lines.len()], after);
    assert_eq!(shown[lines.len() + 1], after, "the line at the cap, trimmed as every line is");
    assert!(stderr(&out).contains(&said), "{}", stderr(&out));
    assert_eq!(stderr(&out).matches("skipped").count(), 1, "{}", stderr(&out));

    let out = t.al(&["trace", "stats", "--json"]).output().unwrap();
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["total"]["entries"], lines.len() as u64 + 2, "{stats}");
    assert!(stderr(&out).contains(&said), "{}", stderr(&out));

    t.al(&["report"]).assert().success();
    assert!(t.read("ws/report.html").contains("trace.jsonl has 1 line(s) that could not be read"));
}

/// `trace show --follow` passes over a line over the cap appended while it follows, names it,
/// and stops at the entry after it that ends the run.
#[test]
fn trace_show_follow_passes_over_a_line_over_the_cap() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let before = t.read("ws/trace.jsonl").lines().count();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .args(["-w", "ws", "trace", "show", "--json", "--follow"])
        .current_dir(t.root())
        .env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let finished = serde_json::json!({"ts": "2026-01-01T00:00:01.000Z", "run_id": "R", "step": 0, "phase": "run", "event": "run.finished"});
    append_long_line(&t, MAX_LINE + 1, &[finished.to_string()]);
    // A watchdog: a follower that never stops must fail the test, not hang it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("trace show --follow did not stop at run.finished");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().last(), Some(finished.to_string().as_str()));
    assert!(stderr(&out).contains(&skipped(before + 1, MAX_LINE + 1)), "{}", stderr(&out));
}
