//! How an error prints: `error: MESSAGE` (what failed, naming the file or key), one
//! `  Caused by: ...` line per error behind it (the system's, the parser's), then `hint:` lines;
//! nothing said twice, and the exit code is the kind's.

use crate::common::*;

/// Runs `agentloop ARGS` in `t`'s folder: the exit code and the lines of stderr.
fn fails(t: &T, args: &[&str]) -> (Option<i32>, Vec<String>) {
    let out = t.cmd().env("NO_COLOR", "1").args(args).output().unwrap();
    (out.status.code(), stderr(&out).lines().map(String::from).collect())
}

#[test]
fn an_invalid_config_file_names_the_file_and_shows_the_parsers_error() {
    let t = T::new();
    t.write("ws/agentloop.yaml", "budgets:\n  max_steps: [\n");
    let (code, lines) = fails(&t, &["-w", "ws", "config", "show"]);
    assert_eq!(code, Some(2), "{lines:?}");
    assert_eq!(lines[0], "error: invalid YAML in ws/agentloop.yaml", "{lines:?}");
    assert!(lines[1].starts_with("  Caused by: ") && lines[1].contains("line 3 column 1"), "{lines:?}");
    assert_eq!(lines.len(), 2, "{lines:?}");

    t.write("bad.json", "{\"max_steps\": }");
    let (code, lines) = fails(&t, &["-w", "ws2", "--config", "bad.json", "config", "show"]);
    assert_eq!(code, Some(2), "{lines:?}");
    assert_eq!(lines[..2], ["error: invalid JSON in bad.json", "  Caused by: expected value at line 1 column 15"]);
}

#[test]
fn an_unreadable_config_file_shows_the_systems_error() {
    let t = T::new();
    std::fs::create_dir_all(t.path("folder.yaml")).unwrap();
    let (code, lines) = fails(&t, &["-w", "ws", "--config", "folder.yaml", "config", "show"]);
    assert_eq!(code, Some(1), "{lines:?}");
    assert_eq!(lines, ["error: cannot read folder.yaml", "  Caused by: Is a directory (os error 21)"]);

    std::fs::write(t.path("latin1.yaml"), b"max_steps: \xff\n").unwrap();
    let (code, lines) = fails(&t, &["-w", "ws", "--config", "latin1.yaml", "config", "show"]);
    assert_eq!(code, Some(1), "{lines:?}");
    assert_eq!(lines, ["error: cannot read latin1.yaml", "  Caused by: stream did not contain valid UTF-8"]);
}

#[test]
fn the_cause_comes_before_the_hints() {
    let t = T::new();
    t.write("ws/state.json", "{not json");
    let (code, lines) = fails(&t, &["-w", "ws", "status"]);
    assert_eq!(code, Some(8), "{lines:?}");
    assert_eq!(lines[0], "error: cannot read ws/state.json", "{lines:?}");
    assert_eq!(lines[1], "  Caused by: key must be a string at line 1 column 2", "{lines:?}");
    assert!(lines[2].starts_with("hint: restore the file from a backup"), "{lines:?}");
    assert_eq!(lines.len(), 3, "{lines:?}");

    std::fs::create_dir_all(t.path("ws2")).unwrap();
    let (code, lines) = fails(&t, &["-w", "ws2", "tools", "call", "file_read", "--args", "{bad"]);
    assert_eq!(code, Some(2), "{lines:?}");
    assert_eq!(
        lines,
        [
            "error: --args is not valid JSON",
            "  Caused by: key must be a string at line 1 column 2",
            "hint: pass a JSON object, e.g. --args '{\"path\": \"context.md\"}'",
        ]
    );
}

#[test]
fn a_cause_the_message_already_says_is_not_said_again() {
    let t = T::new();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    let (code, lines) = fails(&t, &["-w", "ws", "runs", "prune", "--older-than", "soon"]);
    assert_eq!(code, Some(2), "{lines:?}");
    assert_eq!(
        lines,
        ["error: --older-than: `soon` is not a duration (expected number at 0); use e.g. 90, 90s, 10m or 1h"]
    );
}

#[test]
fn a_template_that_does_not_parse_shows_the_template_engines_error() {
    let t = T::new();
    t.write("ws/templates/plan.md.j2", "{% if %}\n");
    t.write("s.yaml", "[]\n");
    let (code, lines) = fails(&t, &["-w", "ws", "--script", "s.yaml", "run", "--goal", "g"]);
    assert_eq!(code, Some(2), "{lines:?}");
    assert_eq!(lines[0], "error: template ws/templates/plan.md.j2 does not parse", "{lines:?}");
    assert!(
        lines[1].starts_with("  Caused by: syntax error: ") && lines[1].ends_with("(in plan.md.j2:1)"),
        "{lines:?}"
    );
}

#[test]
fn event_mode_answers_the_causes_and_hints_as_data() {
    let t = T::new();
    t.write("root/agentloop.yaml", "budgets:\n  max_steps: [\n");
    let out =
        t.cmd().args(["handle", "-w", "root"]).write_stdin(r#"{"command":"health","config":{}}"#).output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    let v = json_out(&out);
    crate::schemas::check("handle-response.json", &v);
    let causes = v["causes"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(causes.len(), 1, "{v}");
    let cause = causes[0].as_str().unwrap();
    assert!(cause.contains("line 3 column 1"), "{v}");
    // The one line a router shows still says it all.
    let error = v["error"].as_str().unwrap();
    assert!(error.starts_with("configuration error: invalid YAML in ") && error.ends_with(cause), "{v}");
}
