//! Reading a workspace: a timeline that fits the terminal, every run's trace, the list of runs,
//! help that points at the global options, and configuration mistakes that do not block a look.

use crate::common::*;
use serde_json::{json, Value};

/// The note of a failed act entry ends with the fix, as errors do.
const FAILURE: &str = "file_read: notes/monday.txt does not exist in the workspace; the files \
there are notes/tuesday.txt and notes/wednesday.txt, so plan a file_read of one of those instead";

fn entry(run: &str, step: u32, phase: &str, extra: Value) -> String {
    let mut e = json!({"ts": "2026-01-01T09:30:05.123Z", "run_id": run, "step": step, "phase": phase, "event": phase});
    for (k, v) in extra.as_object().unwrap() {
        e[k] = v.clone();
    }
    format!("{e}\n")
}

fn write_trace(t: &T) {
    let mut s = entry("RUN1", 0, "run", json!({"event": "run.started"}));
    s += &entry(
        "RUN1",
        1,
        "plan",
        json!({"tool": "file_read", "reason": "The notes hold the figures the digest needs.", "duration_ms": 1250, "usage": {"input_tokens": 2410, "output_tokens": 120}, "cost_usd": 0.009}),
    );
    s += &entry(
        "RUN1",
        1,
        "act",
        json!({"tool": "file_read", "result_status": "error", "error": FAILURE, "duration_ms": 3}),
    );
    s += &entry(
        "RUN1",
        1,
        "run",
        json!({"event": "run.finished", "decision": "escalated", "reason": "repeated failures"}),
    );
    t.write("ws/trace.jsonl", &s);
}

/// Every event agentloop writes shows whole: `limits.changed`, `frustration`, and the longest,
/// `frustration.reframe`, which widens its own row. A longer event of another writer is cut.
#[test]
fn trace_show_names_every_event_whole() {
    let t = T::new();
    let mut s = entry("RUN1", 0, "run", json!({"event": "run.started"}));
    s += &entry("RUN1", 2, "run", json!({"event": "limits.changed", "reason": "max_steps 6 -> 9"}));
    s += &entry("RUN1", 3, "reflect", json!({"event": "frustration", "reason": "the same failure twice"}));
    s += &entry("RUN1", 3, "frame", json!({"event": "frustration.reframe", "reason": "reframed"}));
    s += &entry("RUN1", 4, "act", json!({"event": "an.event.of.a.later.version", "reason": "new"}));
    t.write("ws/trace.jsonl", &s);
    let (code, shown, err) = t.on_terminal(&["--color", "never", "trace", "show"], 80);
    assert_eq!(code, Some(0), "{err}");
    for whole in [" limits.changed ", " frustration ", " frustration.reframe "] {
        assert!(shown.contains(whole), "{whole}: {shown}");
    }
    assert!(!shown.contains("limits.c…") && !shown.contains("frustrat…"), "{shown}");
    assert!(shown.contains(" an.event.of.a.late… "), "{shown}");
}

#[test]
fn trace_show_fits_80_columns_and_never_cuts_an_error() {
    let t = T::new();
    write_trace(&t);
    let (code, shown, err) = t.on_terminal(&["--color", "never", "trace", "show"], 80);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 5, "{shown}");
    for l in &lines {
        assert!(l.chars().count() <= 80, "wider than 80 columns: {l:?}");
    }
    // One column each: the time of day, the event said once, then the note.
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["time", "step", "event", "tool", "status", "took", "cost", "note"]);
    assert!(lines[2].starts_with("09:30:05    1 plan           file_read"), "{shown}");
    assert!(lines[2].contains("1.2s $0.0090  The notes hold"), "{shown}");
    assert!(lines[4].contains(" finished ") && lines[4].contains("escalated"), "{shown}");
    // --errors: the whole error, wrapped onto indented lines, the fix included.
    let (code, shown, err) = t.on_terminal(&["--color", "never", "trace", "show", "--errors"], 80);
    assert_eq!(code, Some(0), "{err}");
    assert!(shown.lines().all(|l| l.chars().count() <= 80), "{shown}");
    let note: Vec<&str> = shown.lines().skip(2).map(str::trim).collect();
    assert_eq!(note.join(" "), FAILURE, "{shown}");
    // Piped, --errors keeps the note whole on its line; without it, notes stop at 80 characters.
    let piped = stdout(&t.al(&["trace", "show", "--errors"]).output().unwrap());
    assert!(piped.lines().nth(1).unwrap().ends_with(FAILURE), "{piped}");
    let piped = stdout(&t.al(&["trace", "show"]).output().unwrap());
    assert!(!piped.contains(FAILURE) && piped.contains(&FAILURE[..80]), "{piped}");
    // --wide: the full timestamp and the tokens.
    let wide = stdout(&t.al(&["trace", "show", "--wide"]).output().unwrap());
    assert!(wide.contains("2026-01-01T09:30:05.123Z") && wide.contains("2410→120") && wide.contains(FAILURE), "{wide}");
}

#[test]
fn all_runs_and_the_runs_list_cover_the_archived_runs() {
    let t = T::new();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    // An empty workspace says so (on stderr), and lists nothing.
    let out = t.al(&["runs"]).output().unwrap();
    assert!(out.status.success() && out.stdout.is_empty(), "{}", stderr(&out));
    assert!(stderr(&out).contains("no runs in ws yet; start one with `agentloop -w ws run --goal"), "{}", stderr(&out));
    t.al(&["runs", "--json"]).assert().success().stdout("[]\n");
    t.write("ws/notes.txt", "monday\n");
    let mut ids = Vec::new();
    for (day, fact) in ["alpha", "beta", "gamma"].iter().enumerate() {
        t.write("script.yaml", &daily_script(fact));
        let goal = format!("Digest of day {}", day + 1);
        let out = t.al(&["--script", "script.yaml", "run", "--goal", &goal]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        ids.push(t.json("ws/state.json")["run_id"].as_str().unwrap().to_string());
    }
    let ids_in = |out: &std::process::Output| -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for l in stdout(out).lines() {
            let id = serde_json::from_str::<Value>(l).unwrap()["run_id"].as_str().unwrap().to_string();
            if seen.last() != Some(&id) {
                seen.push(id);
            }
        }
        seen
    };
    // Without --all-runs: the workspace's trace, the current run only.
    assert_eq!(ids_in(&t.al(&["trace", "show", "--json"]).output().unwrap()), [ids[2].clone()]);
    // --all-runs: the archived runs oldest first, then the current one.
    assert_eq!(ids_in(&t.al(&["trace", "show", "--json", "--all-runs"]).output().unwrap()), ids);
    let shown = stdout(&t.al(&["trace", "show", "--all-runs"]).output().unwrap());
    assert_eq!(shown.lines().filter(|l| l.starts_with("── run ")).count(), 2, "{shown}");
    let stats = |args: &[&str]| -> Value {
        let mut a = vec!["trace", "stats", "--json"];
        a.extend_from_slice(args);
        let out = t.al(&a).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(stats(&[])["runs"], 1);
    let all = stats(&["--all-runs"]);
    assert_eq!(all["runs"], 3);
    assert_eq!(all["tools"]["file_read"]["entries"], 3);
    // An archived trace that links out of the workspace is not read.
    let first = format!("ws/runs/{}/trace.jsonl", ids[0]);
    t.write("outside.jsonl", &entry(&ids[0], 1, "act", json!({"error": "OUTSIDE SECRET"})));
    std::fs::remove_file(t.path(&first)).unwrap();
    std::os::unix::fs::symlink(t.path("outside.jsonl"), t.path(&first)).unwrap();
    let out = t.al(&["trace", "show", "--all-runs", "--wide"]).output().unwrap();
    assert!(out.status.success() && !stdout(&out).contains("OUTSIDE SECRET"), "{}", stdout(&out));
    assert!(stderr(&out).contains("is a link out of the workspace; skipped"), "{}", stderr(&out));
    // `runs`: a header, then newest first; the current run is marked.
    let out = t.al(&["runs"]).output().unwrap();
    let listed = stdout(&out);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["run", "status", "steps", "cost", "started", "goal"]);
    let order: Vec<&str> =
        lines[1..].iter().map(|l| l.split_whitespace().next().unwrap().trim_end_matches('*')).collect();
    assert_eq!(order, [ids[2].as_str(), ids[1].as_str(), ids[0].as_str()], "{listed}");
    assert!(lines[1].starts_with(&format!("{}*", ids[2])) && lines[1].ends_with("Digest of day 3"), "{listed}");
    // --json keeps its order: the current run, then the archived ones oldest first.
    let rows: Vec<Value> = serde_json::from_slice(&t.al(&["runs", "--json"]).output().unwrap().stdout).unwrap();
    let order: Vec<&str> = rows.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(order, [ids[2].as_str(), ids[0].as_str(), ids[1].as_str()]);
}

#[test]
fn subcommand_help_is_its_own_and_globals_work_after_it() {
    let t = T::new();
    let help = stdout(&t.cmd().args(["run", "--help"]).output().unwrap());
    assert!(help.contains("--goal") && help.contains("Global options (-w DIR"), "{help}");
    for global in ["--workspace", "--max-cost", "--provider", "--allowed-tools"] {
        let listed = help.lines().any(|l| l.trim_start().trim_start_matches("-w, ").starts_with(global));
        assert!(!listed, "{global} repeated in run --help:\n{help}");
    }
    assert!(help.lines().count() < 80, "{} lines", help.lines().count());
    let top = stdout(&t.cmd().arg("--help").output().unwrap());
    assert!(top.contains("--workspace") && top.contains("--max-cost"), "{top}");
    // A global option after the subcommand is still taken.
    write_trace(&t);
    let out = t.cmd().args(["trace", "show", "--json", "--workspace", "ws", "--errors"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 1);
    // The man page names commands, not pages that do not exist.
    let man = stdout(&t.cmd().arg("man").output().unwrap());
    assert!(!man.contains("(1)"), "a page reference");
    assert!(man.contains("\nagentloop run\n") && man.contains("prints a command's own options"));
}

#[test]
fn configuration_mistakes_say_the_near_key_and_do_not_block_reading() {
    let t = T::new();
    write_trace(&t);
    t.write("ws/agentloop.yaml", "max_stpes: 3\n");
    let out = t.al(&["config", "show"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("ws/agentloop.yaml at key `max_stpes`") && err.contains("did you mean `max_steps`?"), "{err}");
    assert!(!err.contains("config show` prints"), "the hint sends to a command that fails the same way: {err}");
    t.write("ws/agentloop.yaml", "llm:\n  modle: x\n");
    let err = stderr(&t.al(&["config", "show"]).output().unwrap());
    assert!(err.contains("did you mean `llm.model`?"), "{err}");
    std::fs::remove_file(t.path("ws/agentloop.yaml")).unwrap();
    // An unknown AGENTLOOP_* variable: commands that only read warn and go on...
    for args in [&["trace", "show"][..], &["config", "show"], &["runs"]] {
        let out = t.al(args).env("AGENTLOOP_FOO", "1").env("AGENTLOOP_MAX_STPES", "3").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("warning: invalid configuration in environment variable AGENTLOOP_FOO"), "{err}");
        assert!(
            err.contains(
                "AGENTLOOP_MAX_STPES names no configuration key, so it is ignored (did you mean AGENTLOOP_MAX_STEPS?)"
            ),
            "{err}"
        );
        let out = t.al(args).env("AGENTLOOP_MAX_STEPS", "lots").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("this command only reads, so it goes on without AGENTLOOP_MAX_STEPS"));
    }
    // ...and it is not taken: the default stands.
    let out = t.al(&["config", "show", "--json"]).env("AGENTLOOP_MAX_STEPS", "many").output().unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["config"]["max_steps"], 20);
    // ...commands that act refuse a bad value for a real key, naming it...
    let out =
        t.al(&["--script", "none.yaml", "run", "--goal", "g"]).env("AGENTLOOP_MAX_STEPS", "lots").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("error: invalid configuration in environment variable AGENTLOOP_MAX_STEPS"));
    assert!(stderr(&out).contains("hint: unset AGENTLOOP_MAX_STEPS"), "{}", stderr(&out));
    assert!(!t.exists("ws/state.json"));
    // ...but a variable that names no key does not stop them: it is ignored with a warning.
    let out = t.al(&["--script", "none.yaml", "run", "--goal", "g"]).env("AGENTLOOP_FOO", "1").output().unwrap();
    let err = stderr(&out);
    assert!(err.contains("warning: invalid configuration in environment variable AGENTLOOP_FOO"), "{err}");
    assert!(err.contains("AGENTLOOP_FOO names no configuration key, so it is ignored"), "{err}");
    assert!(!err.contains("error: invalid configuration in environment variable"), "{err}");
}

/// `trace show --json` prints each kept entry's line as the trace stores it (a hand-written
/// line keeps its spacing, key order and extra fields). A trace longer than one read block
/// comes out whole and in file order, and a corrupt line deep in it is reported by its number.
#[test]
fn trace_show_json_prints_the_stored_lines_in_order_over_many_blocks() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let by_hand = r#"{"ts": "2026-01-01T09:00:00Z", "step" : 0, "run_id": "R", "phase": "act", "event": "act", "noted_by": "hand", "args": {"b": 1, "a": 2}}"#;
    let mut trace = format!("{by_hand}\n");
    // One line longer than a block, then about 12 MB more: several blocks, each split between
    // threads.
    trace += &entry("R", 0, "plan", json!({"reason": "y".repeat(9 << 20)}));
    let pad = "x".repeat(900);
    let n = 12_000u32;
    for i in 1..=n {
        trace += &entry("R", i, if i % 2 == 0 { "act" } else { "plan" }, json!({"reason": pad}));
        if i == 10_000 {
            // It names the phase, so the byte test lets it through to be read.
            trace += "{\"phase\":\"act\", not json\n";
        }
    }
    t.write("ws/trace.jsonl", &trace);
    let out = t.al(&["trace", "show", "--json", "--phase", "act"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], by_hand);
    let steps: Vec<u64> =
        lines[1..].iter().map(|l| serde_json::from_str::<Value>(l).unwrap()["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, (2..=u64::from(n)).step_by(2).collect::<Vec<_>>());
    assert_eq!(lines[1], entry("R", 2, "act", json!({"reason": pad})).trim_end());
    // Line 1 is the hand-written one, line 2 the long one, lines 3 to 10,002 the first 10,000
    // entries.
    let err = stderr(&out);
    assert!(err.contains("trace.jsonl:10003: skipped a corrupt line"), "{err}");
    assert_eq!(err.matches("skipped a corrupt line").count(), 1, "{err}");
    let stats: Value = serde_json::from_slice(&t.al(&["trace", "stats", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(stats["total"]["entries"], u64::from(n) + 2);
    assert_eq!(stats["phases"]["act"]["entries"], u64::from(n) / 2 + 1);
}

/// Without --run or --all-runs, `trace show` shows the run of the trace's last entry, found off
/// the ends of the file however long the trace: a one-run trace is shown whole (a corrupt or
/// blank line at either end changes nothing), and one whose first entry is of another run is
/// counted through and said on stderr, its other runs' entries left out wherever they stand.
#[test]
fn trace_show_finds_the_latest_run_off_the_ends_of_a_long_trace() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let pad = "x".repeat(2000);
    let body = |run: &str, from: u32, n: u32| -> String {
        (from..from + n).map(|i| entry(run, i, "act", json!({"reason": pad}))).collect()
    };
    // One run, over 1 MiB, a corrupt line at its head and a blank one at its end.
    t.write("ws/trace.jsonl", &format!("{{\"phase\": \"act\" not json\n{}\n  \n", body("R2", 1, 600)));
    let out = t.al(&["trace", "show", "--json", "--phase", "act"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 600);
    assert!(!stderr(&out).contains("earlier run"), "{}", stderr(&out));
    assert!(stderr(&out).contains("trace.jsonl:1: skipped a corrupt line"), "{}", stderr(&out));
    // R1, then R2, a stray R3 entry among R2's, and R2 to the end: R2 is shown, all of it.
    let trace = body("R1", 1, 300) + &body("R2", 1, 300) + &body("R3", 1, 1) + &body("R2", 301, 300);
    t.write("ws/trace.jsonl", &trace);
    let out = t.al(&["trace", "show", "--json"]).output().unwrap();
    let runs: Vec<String> =
        stdout(&out).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["run_id"].to_string()).collect();
    assert_eq!(runs.len(), 600);
    assert!(runs.iter().all(|r| r == "\"R2\""), "{runs:?}");
    assert!(stderr(&out).contains("showing the latest run, R2; 2 earlier run(s)"), "{}", stderr(&out));
    // --all-runs shows every entry.
    let all = t.al(&["trace", "show", "--json", "--all-runs"]).output().unwrap();
    assert_eq!(stdout(&all).lines().count(), 901);
}

/// A corrupt line that names another run (a field of the wrong type, or cut short yet closed
/// by a `}`) does not decide which run is the latest: `trace show` shows the real run's
/// entries and names the corrupt lines, and `trace stats` counts the same entries.
#[test]
fn a_corrupt_line_naming_another_run_does_not_hide_the_latest_run() {
    let t = T::new();
    t.write("ws/notes.txt", "monday\n");
    t.write("script.yaml", &daily_script("alpha rose 3%"));
    t.al(&["--script", "script.yaml", "run", "--goal", "Digest"]).assert().success();
    let run = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
    let real = t.read("ws/trace.jsonl");
    let n = real.lines().count();
    let corrupt = [
        r#"{"ts":"2026-01-01T09:30:05Z","run_id":"OTHER","step":"three","event":"act"}"#,
        r#"{"ts":"2026-01-01T09:30:05Z","run_id":"OTHER","step":3,"event":"act","args":{"path":"a"}"#,
    ];
    t.write("ws/trace.jsonl", &format!("{real}{}\n{}\n", corrupt[0], corrupt[1]));
    for args in [&["trace", "show"][..], &["trace", "show", "--run", "last"], &["trace", "stats"]] {
        let mut json = args.to_vec();
        json.push("--json");
        let out = t.al(&json).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        // (A filtered read passes over lines that cannot match, corrupt or not.)
        let filtered = args.contains(&"--run");
        for line in [n + 1, n + 2] {
            let named = err.contains(&format!("trace.jsonl:{line}: skipped a corrupt line"));
            assert!(named != filtered, "{args:?}: {err}");
        }
        assert!(!err.contains("no entries match") && !err.contains("earlier run"), "{args:?}: {err}");
        if args[1] == "stats" {
            let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(stats["total"]["entries"], n as u64, "{stats}");
            continue;
        }
        let shown: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(shown.len(), n, "{args:?}");
        assert!(shown.iter().all(|e| e["run_id"] == run.as_str()), "{args:?}");
    }
    // The timeline too: every entry of the run, under its header.
    let out = t.al(&["trace", "show"]).output().unwrap();
    assert_eq!(stdout(&out).lines().count(), n + 1, "{}\n{}", stdout(&out), stderr(&out));
}
