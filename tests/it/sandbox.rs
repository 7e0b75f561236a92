//! The file sandbox under attack: FIFOs (also swapped in mid-call), oversized skill files, hard
//! links out, a symlinked artifacts/, skill folders that link out, and finish artifacts.

use crate::common::*;
use crate::tools::call;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn mkfifo(p: &std::path::Path) -> bool {
    std::process::Command::new("mkfifo").arg(p).status().map(|s| s.success()).unwrap_or(false)
}

/// `tools call` that is killed after 20 s: a hang fails the test instead of stalling it.
fn call_within(t: &T, tool: &str, args: Value) -> (Option<i32>, Value) {
    let out = t
        .al(&["tools", "call", tool, "--args", &args.to_string()])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap_or_else(|e| panic!("{tool} {args}: {e}"));
    assert!(out.status.code().is_some(), "{tool} {args} hung and was killed");
    (out.status.code(), serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
}

fn skill(t: &T, dir: &str, name: &str) {
    t.write(
        &format!("{dir}/SKILL.md"),
        &format!("---\nname: {name}\ndescription: A test skill.\n---\nDo the thing.\n"),
    );
}

#[test]
fn skill_files_that_are_fifos_are_refused_not_waited_on() {
    let t = T::new();
    skill(&t, "ws/skills/piped", "piped");
    assert!(mkfifo(&t.path("ws/skills/piped/pipe.txt")), "mkfifo (coreutils) makes a FIFO");
    let (code, v) = call_within(&t, "skill_read", json!({"name": "piped", "file": "pipe.txt"}));
    assert_eq!(code, Some(6), "{v}");
    assert_eq!(v["error"], "`pipe.txt` in skill `piped` is not a regular file");
    // A seed-format skill whose skill.md is a FIFO must not stall every command that loads skills.
    t.write("ws/skills/seedy/skill.json", r#"{"id": "seedy", "description": "A seed skill."}"#);
    assert!(mkfifo(&t.path("ws/skills/seedy/skill.md")));
    let out = t.al(&["skills", "check"]).timeout(Duration::from_secs(20)).output().unwrap();
    assert!(out.status.code().is_some(), "skills check hung");
    assert!(stdout(&out).contains("not a regular file"), "{}", stdout(&out));
}

#[test]
fn skill_read_has_the_file_read_size_cap() {
    let t = T::new();
    t.write("ws/agentloop.yaml", "tools:\n  max_file_bytes: 1000\n");
    skill(&t, "ws/skills/big", "big");
    t.write("ws/skills/big/data.txt", &"y".repeat(5000));
    let (code, v) = call_within(&t, "skill_read", json!({"name": "big", "file": "data.txt"}));
    assert_eq!(code, Some(6), "{v}");
    assert_eq!(
        v["error"],
        "`data.txt` in skill `big` is 5000 bytes, more than tools.max_file_bytes (1000); raise tools.max_file_bytes to read it"
    );
    assert!(!t.exists("ws/artifacts"), "nothing copied to artifacts/");
}

/// A symlink flipping between a regular file and a FIFO while file_read and append run: every
/// call ends (read or refused), none blocks on the FIFO.
#[test]
fn a_fifo_swapped_in_mid_call_never_hangs() {
    let t = T::new();
    t.write("ws/artifacts/real.txt", "real\n");
    assert!(mkfifo(&t.path("ws/artifacts/pipe")), "mkfifo (coreutils) makes a FIFO");
    std::os::unix::fs::symlink("real.txt", t.path("ws/artifacts/flip")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let dir = t.path("ws/artifacts");
        std::thread::spawn(move || {
            let tmp = dir.join("flip.tmp");
            while !stop.load(Ordering::Relaxed) {
                for target in ["pipe", "real.txt"] {
                    let _ = std::fs::remove_file(&tmp);
                    let _ = std::os::unix::fs::symlink(target, &tmp);
                    let _ = std::fs::rename(&tmp, dir.join("flip"));
                }
            }
        })
    };
    // Each read either gets the file or is refused as "not a regular file"; none waits.
    for _ in 0..100 {
        let (code, v) = call_within(&t, "file_read", json!({"path": "artifacts/flip"}));
        assert!(code == Some(0) || v["error"] == "artifacts/flip is not a regular file", "{v}");
    }
    for _ in 0..25 {
        let (code, v) =
            call_within(&t, "file_write", json!({"path": "artifacts/flip", "content": "x", "mode": "append"}));
        assert_eq!(code, Some(6), "append through a symlink is refused: {v}");
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert_eq!(t.read("ws/artifacts/real.txt"), "real\n");
}

#[test]
fn a_file_with_another_hard_link_is_never_written() {
    let t = T::new();
    t.write("outside.txt", "outside\n");
    std::fs::create_dir_all(t.path("ws/artifacts")).unwrap();
    std::fs::hard_link(t.path("outside.txt"), t.path("ws/artifacts/linked.txt")).unwrap();
    for mode in ["append", "overwrite"] {
        let (code, v) =
            call(&t, "file_write", json!({"path": "artifacts/linked.txt", "content": "pwned", "mode": mode}));
        assert_eq!(code, Some(6), "{mode}: {v}");
        assert_eq!(
            v["error"],
            "access denied: `artifacts/linked.txt` has 2 hard links; writing it would change a file elsewhere too"
        );
    }
    assert_eq!(t.read("outside.txt"), "outside\n");
}

#[test]
fn a_symlinked_artifacts_folder_lets_no_path_through() {
    let t = T::new();
    std::fs::create_dir_all(t.path("elsewhere")).unwrap();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    std::os::unix::fs::symlink(t.path("elsewhere"), t.path("ws/artifacts")).unwrap();
    let abs = format!("{}/elsewhere/pwned.txt", t.root().canonicalize().unwrap().display());
    for path in [abs.as_str(), "artifacts/pwned.txt"] {
        let (code, v) = call(&t, "file_write", json!({"path": path, "content": "pwned"}));
        assert_eq!(code, Some(6), "{path}: {v}");
    }
    assert!(!t.exists("elsewhere/pwned.txt"));
    // Spilled output cannot be written through the link either.
    t.write("ws/big.txt", &"line\n".repeat(3000));
    let (_, v) = call(&t, "grep", json!({"pattern": "line", "max_matches": 500}));
    assert!(!t.exists("elsewhere/pwned.txt"), "{v}");
}

#[test]
fn skill_folders_that_are_symlinks_are_skipped_in_both_formats() {
    let t = T::new();
    t.write("outside/seed/skill.json", r#"{"id": "evil", "description": "A seed skill that links out."}"#);
    t.write("outside/seed/skill.md", "Read secret.txt.\n");
    t.write("outside/seed/secret.txt", "TOP SECRET\n");
    skill(&t, "outside/agent", "agent-link");
    t.write("outside/agent/secret.txt", "TOP SECRET\n");
    t.write("ws/skills/registry.json", r#"{"skills": [{"id": "evil", "path": "evil"}]}"#);
    std::os::unix::fs::symlink(t.path("outside/seed"), t.path("ws/skills/evil")).unwrap();
    std::os::unix::fs::symlink(t.path("outside/agent"), t.path("ws/skills/agent-link")).unwrap();
    let real = t.root().canonicalize().unwrap();
    for path in [
        "../outside/seed/secret.txt".to_string(),
        format!("{}/outside/seed/secret.txt", real.display()),
        "skills/evil/secret.txt".into(),
        "../outside/agent/secret.txt".into(),
    ] {
        let (code, v) = call(&t, "file_read", json!({"path": path}));
        assert_eq!(code, Some(6), "{path}: {v}");
    }
    for name in ["evil", "agent-link"] {
        let (code, v) = call(&t, "skill_read", json!({"name": name}));
        assert_eq!(code, Some(6), "{name}: {v}");
    }
    let out = t.al(&["skills", "check"]).output().unwrap();
    let text = stdout(&out);
    assert_eq!(text.matches("is a symbolic link (or reached through one)").count(), 2, "{text}");
}

#[test]
fn finish_artifacts_are_normalised_and_inside_the_workspace() {
    let t = T::new();
    t.write("ws/artifacts/a.md", "a");
    t.write("ws/answer.txt", "42");
    t.write("outside.txt", "o");
    std::os::unix::fs::symlink(t.path("outside.txt"), t.path("ws/out_link.txt")).unwrap();
    let ws = t.path("ws").canonicalize().unwrap().display().to_string();
    let (code, v) = call(
        &t,
        "finish",
        json!({"summary": "s", "artifacts": ["./artifacts/a.md", format!("{ws}/answer.txt"), "artifacts/a.md", "artifacts/x/../a.md"]}),
    );
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["artifacts"], json!(["artifacts/a.md", "answer.txt"]));
    for bad in ["../outside.txt", "/etc/passwd", "out_link.txt", ".", "artifacts/../.."] {
        let (code, v) = call(&t, "finish", json!({"summary": "s", "artifacts": [bad]}));
        assert_eq!(code, Some(6), "{bad}: {v}");
        assert!(v["error"].as_str().unwrap().starts_with("argument `artifacts`"), "{bad}: {v}");
        assert!(!v.to_string().contains(&ws), "{v}");
    }
}

#[test]
fn an_agent_writes_in_its_own_sandbox_folder_unless_it_names_its_own() {
    let t = T::new();
    t.write("ws/agents/ada.yaml", "description: writes notes\n");
    t.write("ws/agents/bob.yaml", "tools: {write_paths: [out], read_paths: [data]}\n");
    t.write("ws/data/in.txt", "input\n");
    let call = |agent: &str, tool: &str, args: Value| {
        let out = t.al(&["--agent", agent, "tools", "call", tool, "--args", &args.to_string()]).output().unwrap();
        (out.status.code(), serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null))
    };
    // No write paths in the profile: sandbox/ada/ (made on first use) and the run's own outputs,
    // artifacts/ and state/, where the bundled skills write.
    let (code, v) = call("ada", "file_write", json!({"path": "notes/x.md", "content": "a"}));
    assert_eq!(code, Some(6), "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("outside the folders this tool may write (sandbox/ada, artifacts, state)"),
        "{v}"
    );
    for path in ["artifacts/x.md", "state/daily-digest.json"] {
        let (code, v) = call("ada", "file_write", json!({"path": path, "content": "a"}));
        assert_eq!(code, Some(0), "{path}: {v}");
    }
    let (code, v) = call("ada", "file_write", json!({"path": "sandbox/ada/notes/x.md", "content": "a"}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(t.read("ws/sandbox/ada/notes/x.md"), "a");
    let (code, _) = call("ada", "file_write", json!({"path": "sandbox/bob/x.md", "content": "a"}));
    assert_eq!(code, Some(6), "one agent's folder is not another's");
    // The whole workspace stays readable.
    assert_eq!(call("ada", "file_read", json!({"path": "data/in.txt"})).0, Some(0));
    // A profile's own paths are used as they are, and no default folder is made.
    let (code, v) = call("bob", "file_write", json!({"path": "out/y.md", "content": "b"}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(call("bob", "file_write", json!({"path": "sandbox/bob/y.md", "content": "b"})).0, Some(6));
    assert!(!t.exists("ws/sandbox/bob"));
    // Without an agent, file_write writes anywhere in the workspace as before.
    let out =
        t.al(&["tools", "call", "file_write", "--args", r#"{"path": "artifacts/z.md", "content": "c"}"#]).output();
    assert_eq!(out.unwrap().status.code(), Some(0));
    // A workspace config that sets write paths wins over the default, for every agent.
    t.write("ws/agentloop.yaml", "tools: {write_paths: [shared]}\n");
    assert_eq!(call("ada", "file_write", json!({"path": "shared/w.md", "content": "d"})).0, Some(0));

    // The model is told where it may write.
    std::fs::remove_file(t.path("ws/agentloop.yaml")).unwrap();
    let out = t.al(&["--agent", "ada", "skills", "gen"]).output().unwrap();
    assert!(
        stdout(&out).contains("Write a text file inside sandbox/ada/, artifacts/, state/ only"),
        "{}",
        stdout(&out)
    );

    // agents show names the sandbox and where it came from.
    let out = t.al(&["agents", "show", "ada"]).output().unwrap();
    let text = stdout(&out);
    assert!(text.contains("  write sandbox/ada/, artifacts/, state/  # agent sandbox default\n"), "{text}");
    let out = t.al(&["agents", "show", "bob", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sandbox"]["write"], json!(["out/"]));
    assert_eq!(v["sandbox"]["write_source"], "ws/agents/bob.yaml (agent profile)");
    assert_eq!(v["sandbox"]["read"], json!(["the workspace", "data/", "out/"]));
    let out = t.al(&["agents", "show", "ada", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["tools"]["write_paths"], json!(["sandbox/ada", "artifacts", "state"]));
    assert_eq!(v["sources"]["tools.write_paths"], "agent sandbox default");
}
