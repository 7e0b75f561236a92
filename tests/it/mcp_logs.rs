//! Where an MCP server's stderr goes: a run keeps it in its workspace's `artifacts/` (entered
//! without following links); a command outside any run keeps it in the user's state folder, so
//! `mcp check` typed in a home folder leaves no `artifacts/` there; `demo` starts none of the
//! servers the user's configuration names.

use crate::common::*;

/// A user configuration naming a stdio server that notes each start in `started.log` and
/// exits at once (it fails every check).
fn failing_server(t: &T) {
    use std::os::unix::fs::PermissionsExt;
    let log = t.path("started.log").display().to_string();
    t.write("bad.sh", &format!("#!/bin/sh\necho started >> {log}\necho 'bad: cannot start' >&2\nexit 1\n"));
    std::fs::set_permissions(t.path("bad.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    t.write(
        "xdg/agentloop/config.yaml",
        &format!("mcp:\n  servers:\n    bad:\n      command: {}\n", t.path("bad.sh").display()),
    );
}

#[test]
fn a_check_outside_a_run_logs_to_the_state_folder_and_demo_starts_no_server() {
    let t = T::new();
    failing_server(&t);
    std::fs::create_dir_all(t.path("home/here")).unwrap();
    let out = t.cmd().args(["mcp", "check"]).current_dir(t.path("home/here")).output().unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = t.path("home/.local/state/agentloop/mcp-logs/bad.log");
    assert!(stderr(&out).contains(&log.display().to_string()), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&log).unwrap().contains("bad: cannot start"));
    assert!(!t.exists("home/here/artifacts"), "no artifacts/ where the command was typed");
    assert!(t.exists("started.log"));
    // The demo is the bundled example alone: the user's server is neither started nor warned of.
    std::fs::remove_file(t.path("started.log")).unwrap();
    let out = t.cmd().args(["demo", "d"]).current_dir(t.path("home/here")).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("MCP server"), "{}", stderr(&out));
    assert!(!t.exists("started.log"), "the demo started the user's MCP server");
}

#[test]
fn a_runs_server_log_is_in_its_artifacts_and_never_written_through_a_link() {
    let t = T::new();
    failing_server(&t);
    t.write("ws/script.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\n");
    t.write("ws/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\n");
    let out = t.al(&["run", "--goal", "g", "--max-steps", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("its log: artifacts/mcp-bad.log"), "{}", stderr(&out));
    assert!(t.read("ws/artifacts/mcp-bad.log").contains("bad: cannot start"));
    // A log planted as a link is not written through: the server fails to start, naming it.
    std::fs::remove_file(t.path("ws/artifacts/mcp-bad.log")).unwrap();
    t.write("outside.txt", "mine\n");
    std::os::unix::fs::symlink(t.path("outside.txt"), t.path("ws/artifacts/mcp-bad.log")).unwrap();
    let out = t.al(&["mcp", "check"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("link") || stderr(&out).contains("link"), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(t.read("outside.txt"), "mine\n");
}
