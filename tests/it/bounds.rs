//! Bounds on what a handed-over workspace or a server can make agentloop do: control characters
//! in goals and reasons are shown, never sent to the terminal; a template override that loops
//! for ever is stopped naming its file; one MCP call saves and holds a bounded amount.

use crate::common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// An OSC 52 clipboard write, a clear-screen, an 8-bit CSI and a right-to-left override.
const EVIL: &str = "evil \x1b]52;c;ZXZpbA==\x07 \x1b[2J \u{9b}31m \u{202e}txt.exe";
/// How [`EVIL`] reads in human output.
const SHOWN: &str = "evil ␛]52;c;ZXZpbA==␇ ␛[2J <U+009B>31m <U+202E>txt.exe";

/// A run whose goal (from Frame) and reasons (from Reflect) carry [`EVIL`]; YAML's double-quoted
/// escapes write the same characters.
const SCRIPT: &str = r#"frame:
  - answer: {goal: "evil \e]52;c;ZXZpbA==\a \e[2J \x9b31m \u202Etxt.exe", definition_of_done: [read the notes, know what they say, say so], can_proceed: true}
plan:
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}, expected_outcome: the notes, rationale: read them}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: "evil \e]52;c;ZXZpbA==\a \e[2J \x9b31m \u202Etxt.exe", outcome: "read \e]52;c;ZXZpbA==\a"}
"#;

/// No escape, bell, C1 control or bidi override in the bytes.
fn assert_inert(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let bad: Vec<char> = text
        .chars()
        .filter(|c| {
            matches!(c, '\x00'..='\x08' | '\x0b'..='\x0c' | '\x0e'..='\x1f' | '\x7f'..='\u{9f}')
                || ('\u{202a}'..='\u{202e}').contains(c)
                || ('\u{2066}'..='\u{2069}').contains(c)
        })
        .collect();
    assert!(bad.is_empty(), "{what} sends {bad:?} to the terminal:\n{text}");
}

#[test]
fn status_runs_and_trace_show_control_characters_instead_of_sending_them() {
    let t = T::new();
    t.write("script.yaml", SCRIPT);
    t.write("ws/notes.txt", "some notes\n");
    let out = t.al(&["--script", "script.yaml", "run", "--goal", EVIL]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_inert("run", &out.stdout);
    assert_inert("run (stderr)", &out.stderr);
    // The workspace holds the characters as they were written.
    assert_eq!(t.json("ws/state.json")["goal"], EVIL);
    assert_eq!(t.json("ws/state.json")["reason"], EVIL);

    for args in [&["status"][..], &["runs"], &["trace", "show"], &["trace", "show", "--wide"], &["trace", "stats"]] {
        let out = t.al(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_inert(&format!("{args:?}"), &out.stdout);
        assert_inert(&format!("{args:?} (stderr)"), &out.stderr);
    }
    let status = stdout(&t.al(&["status"]).output().unwrap());
    assert!(status.contains(&format!("goal        {SHOWN}\n")), "{status}");
    assert!(status.contains(&format!("status      done ({SHOWN})\n")), "{status}");
    let runs = stdout(&t.al(&["runs"]).output().unwrap());
    let shown60: String = SHOWN.chars().take(60).collect();
    assert!(runs.trim_end().ends_with(shown60.trim_end()), "{runs}");
    let trace = stdout(&t.al(&["trace", "show", "--wide"]).output().unwrap());
    assert!(trace.contains(SHOWN), "{trace}");
    // With colour, the printer's own bold header is the only escape sequence written.
    let coloured = stdout(&t.al(&["--color", "always", "trace", "show", "--wide"]).output().unwrap());
    assert!(coloured.starts_with("\x1b[1mtime "), "{coloured}");
    assert_eq!(coloured.matches('\x1b').count(), 2, "{coloured}");
    assert!(coloured.contains(SHOWN), "{coloured}");

    // JSON output keeps the text exactly: the same string once decoded, and still inert.
    let out = t.al(&["status", "--json"]).output().unwrap();
    assert_inert("status --json", &out.stdout);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["goal"], EVIL);
    assert_eq!(v["reason"], EVIL);
    let out = t.al(&["runs", "--json"]).output().unwrap();
    assert_inert("runs --json", &out.stdout);
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()[0]["goal"], EVIL);
    let out = t.al(&["trace", "show", "--json"]).output().unwrap();
    assert_inert("trace show --json", &out.stdout);
    let reasons: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["reason"] == EVIL)
        .collect();
    assert!(!reasons.is_empty(), "{}", stdout(&out));
}

#[test]
fn a_goal_cannot_forge_the_lines_after_it_in_status() {
    let t = T::new();
    let out = t.al(&["init", "--goal", "tidy up\nstatus      done"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = stdout(&t.al(&["status"]).output().unwrap());
    assert!(status.contains("goal        tidy up␤status      done\n"), "{status}");
    assert_eq!(status.lines().filter(|l| l.starts_with("status ")).count(), 1, "{status}");
}

#[test]
fn a_template_override_that_loops_for_ever_is_stopped_naming_its_file() {
    let t = T::new();
    t.write("script.yaml", SCRIPT);
    t.write("ws/notes.txt", "some notes\n");
    t.write(
        "ws/templates/prompt-frame.j2",
        "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}\n",
    );
    let start = Instant::now();
    let out = t
        .al(&["--script", "script.yaml", "--timeout", "2s", "run", "--goal", "g"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("templates/prompt-frame.j2 used more than 10000000 steps of template work (nested loops?)"),
        "{err}"
    );
    assert!(err.contains("hint: fix the override or remove ws/templates/prompt-frame.j2"), "{err}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    // A template that only needs many steps, within the budget, renders.
    let builtin = include_str!("../../templates/prompt-frame.j2");
    t.write(
        "ws/templates/prompt-frame.j2",
        &format!("{{% for a in range(1000) %}}{{% for b in range(100) %}}{{% endfor %}}{{% endfor %}}{builtin}"),
    );
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A string that doubles at each step outgrows memory in a few dozen steps, far inside the fuel
/// and without writing a byte: what one render holds is bounded too, and going over is the
/// documented error (exit 2, 78 in `handle`), not an abort.
#[test]
fn a_template_override_that_doubles_a_string_is_stopped_naming_its_file() {
    let t = T::new();
    t.write("script.yaml", SCRIPT);
    t.write("ws/notes.txt", "some notes\n");
    t.write(
        "ws/templates/prompt-frame.j2",
        &format!("{{% set s = 'abcdefgh' %}}{}{{{{ s|length }}}}\n", "{% set s = s ~ s %}".repeat(40)),
    );
    let out =
        t.al(&["--script", "script.yaml", "run", "--goal", "g"]).timeout(Duration::from_secs(60)).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "templates/prompt-frame.j2 held more than 256 MiB of memory or worked longer than 5s and was stopped"
        ),
        "{err}"
    );
    assert!(err.contains("remove ws/templates/prompt-frame.j2"), "{err}");
    let start = serde_json::json!({"command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "g"}}});
    t.write("root/agentloop.yaml", &format!("templates_dir: {}\n", t.path("ws/templates").display()));
    let out = t
        .cmd()
        .args(["--script", "script.yaml", "-w", "root", "handle"])
        .write_stdin(start.to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
    assert!(stdout(&out).contains("held more than 256 MiB"), "{}", stdout(&out));
}

/// One step of template work can do a great deal of it (a filter over a 20 MB string, in a
/// loop well inside the fuel and the memory budget): a render's time is bounded too, so the run
/// stops with the documented error in seconds instead of outliving `--timeout`.
#[test]
fn a_template_override_that_works_on_and_on_is_stopped_in_seconds() {
    let t = T::new();
    t.write("script.yaml", SCRIPT);
    t.write("ws/notes.txt", "some notes\n");
    let builtin = include_str!("../../templates/prompt-frame.j2");
    t.write(
        "ws/templates/prompt-frame.j2",
        &format!(
            "{{% set s = 'x' * 20000000 %}}{{% for i in range(5000) %}}{{% set u = s|replace('x', 'yy') %}}{{% endfor %}}{builtin}"
        ),
    );
    let began = std::time::Instant::now();
    let out = t
        .al(&["--script", "script.yaml", "--timeout", "5s", "run", "--goal", "g"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("templates/prompt-frame.j2 held more than 256 MiB of memory or worked longer than 5s"),
        "{err}"
    );
    assert!(began.elapsed() < Duration::from_secs(30), "it ran {:?}", began.elapsed());
}

/// A template override that writes much at every step (a one-line `decision.md.j2`) cannot
/// grow the paper trail without bound: a file of it stops at 64 MiB, the run stops naming it,
/// and nothing of the refused phase is written.
#[test]
fn what_a_run_writes_to_its_paper_trail_is_bounded_in_total() {
    let t = T::new();
    t.write("ws/notes.txt", "some notes\n");
    let mut script =
        String::from("frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\nplan:\n");
    for i in 0..8 {
        script.push_str(&format!("  - answer: {{next_action: {{tool: file_read, args: {{path: notes.txt}}}}, expected_outcome: x, rationale: y{i}}}\n"));
    }
    script.push_str("reflect:\n");
    for i in 0..8 {
        script.push_str(&format!("  - answer: {{decision: continue, reason: more {i}}}\n"));
    }
    t.write("script.yaml", &script);
    t.write("ws/templates/decision.md.j2", "{{ 'x' * 20000000 }}\n");
    let out = t
        .al(&["--script", "script.yaml", "run", "--goal", "g"])
        .env("AGENTLOOP_MAX_REPEATS", "0")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("decisions.md would grow to")
            && err.contains("past the 64 MiB a file of the paper trail may hold"),
        "{err}"
    );
    let size = std::fs::metadata(t.path("ws/decisions.md")).unwrap().len();
    assert!(size <= 64 << 20, "decisions.md holds {size} bytes");
}

/// A workspace with the fake MCP server (its flood tools listed) as `fake`.
fn flood_server() -> T {
    let t = T::new();
    t.write("ws/.keep", "");
    t.write(
        "ws/agentloop.yaml",
        &format!(
            "mcp:\n  servers:\n    fake:\n      command: python3\n      args: [{}]\n      env: {{FAKE_MCP_FLOOD: '1'}}\n",
            crate::mcp::fake_server()
        ),
    );
    t
}

fn call(t: &T, tool: &str, args: Value) -> Value {
    let out = t.al(&["mcp", "call", "fake", tool, "--args", &args.to_string()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(&out)))
}

fn artifacts(t: &T, ext: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(t.path("ws/artifacts"))
        .map(|d| {
            d.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == ext)).collect()
        })
        .unwrap_or_default()
}

#[test]
fn one_mcp_call_saves_at_most_ten_files_and_reads_at_most_a_hundred_items() {
    let t = flood_server();
    let v = call(&t, "images", json!({"count": 5000}));
    assert_eq!(v["artifacts"].as_array().unwrap().len(), 10, "{}", v["artifacts"]);
    assert_eq!(artifacts(&t, "png").len(), 10);
    let output = v["output"].as_str().unwrap();
    // 1 text and 5,000 images: the first 100 items are read, 10 images saved.
    assert!(output.contains("[4901 more content items left out: one call may return 100]"), "{output}");
    assert_eq!(output.matches("not saved: one call may save 10 files]").count(), 89, "{output}");
}

#[test]
fn one_mcp_call_holds_at_most_8_mib_of_text_and_files() {
    let t = flood_server();
    // 10 MiB of text: 8 MiB is kept (the output cap then spills it to a file), the rest counted.
    let v = call(&t, "big_text", json!({"bytes": 10 << 20}));
    let spilled: Vec<&str> = v["artifacts"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(spilled.len(), 1, "{v}");
    let kept = t.read(&format!("ws/{}", spilled[0]));
    assert!(kept.len() <= (8 << 20) + 200, "{} bytes", kept.len());
    assert!(
        kept.ends_with("[2097152 more bytes of text left out: one call may hold 8 MiB]"),
        "{}",
        &kept[kept.len() - 200..]
    );
    // Three images of 3 MiB: two fit in 8 MiB, the third is described, not saved.
    let v = call(&t, "big_files", json!({"count": 3, "bytes": 3 << 20}));
    assert_eq!(v["artifacts"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(artifacts(&t, "png").len(), 2);
    assert!(v["output"].as_str().unwrap().contains("not saved: one call may hold 8 MiB]"), "{v}");
}
