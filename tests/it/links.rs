//! No write follows a link: a workspace from elsewhere may hold symbolic links to files outside
//! it, and nothing agentloop writes — the paper trail's appends, spills, archive moves, journal
//! replays, reports, the log — goes through one. A link is refused (exit 8, naming the path and
//! the fix) or skipped, and the file it points to is unchanged. The model's file tools cannot
//! overwrite the audit record (transcript.md) either.

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::symlink;

/// What a file outside the workspace holds before the test; it must hold it after.
const VICTIM: &str = "# a file outside the workspace\nexport KEEP=1\n";

/// A run that reads notes.txt and finishes.
const SCRIPT: &str = r#"frame:
  - answer: {goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: true}
plan:
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], facts: ["notes say monday"], decision: done, reason: all good, outcome: digest}
"#;

fn setup() -> T {
    let t = T::new();
    t.write("ws/notes.txt", "monday\n");
    t.write("script.yaml", SCRIPT);
    t.write("outside/victim.txt", VICTIM);
    t
}

fn run(t: &T, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--script", "script.yaml", "run"];
    all.extend_from_slice(args);
    t.al(&all).output().unwrap()
}

fn files_in(t: &T, rel: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(t.path(rel))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A run whose transcript.md, decisions.md or trace.jsonl is a link to a file outside stops
/// with exit 8 naming the file and the fix; the file outside is unchanged.
#[test]
fn a_commit_never_appends_through_a_linked_paper_trail_file() {
    for name in ["transcript.md", "decisions.md", "trace.jsonl"] {
        let t = setup();
        t.al(&["init", "--goal", "digest the notes"]).assert().success();
        let _ = std::fs::remove_file(t.path(&format!("ws/{name}")));
        symlink(t.path("outside/victim.txt"), t.path(&format!("ws/{name}"))).unwrap();
        let out = run(&t, &[]);
        assert_eq!(t.read("outside/victim.txt"), VICTIM, "{name}: nothing written through the link");
        assert_eq!(out.status.code(), Some(8), "{name}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(&format!("{name} is a symbolic link; agentloop never writes through links")), "{err}");
        assert!(err.contains("hint: replace it with a real file"), "{err}");
    }
}

/// Output over the cap spills to artifacts/; when artifacts/ is a link to a folder outside,
/// nothing is written there and the note says why.
#[test]
fn a_spill_never_goes_through_a_linked_artifacts_folder() {
    let t = setup();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    std::fs::create_dir_all(t.path("outside/art")).unwrap();
    symlink(t.path("outside/art"), t.path("ws/artifacts")).unwrap();
    // The user's own config (trusted wherever the workspace came from) lets the fetch reach
    // the local server.
    t.write("xdg/agentloop/config.yaml", "tools:\n  http:\n    allow_private: true\n");
    let page: String = (1..=1500).map(|i| format!("paragraph {i} of the page\n")).collect();
    let s = Server::start(vec![Reply::text(200, "text/plain", &page)]);
    let args = json!({"url": format!("{}/long", s.url), "max_length": 100000}).to_string();
    let out = t.al(&["tools", "call", "web_fetch", "--args", &args]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(files_in(&t, "outside/art").is_empty(), "nothing spilled through the link");
    assert_eq!(v["artifacts"], json!([]), "{v}");
    let text = v["output"].as_str().unwrap_or_default();
    assert!(text.contains("artifacts/ is a symbolic link, and agentloop never writes through links"), "{text}");
}

/// A new run archives the previous one into runs/<id>/; a symlinked runs/ (or run folder) is
/// refused with exit 8 before anything moves: the old run stays where it was.
#[test]
fn a_run_is_never_archived_through_a_linked_runs_folder() {
    for linked in ["runs", "runs/<id>"] {
        let t = setup();
        let out = run(&t, &["--goal", "first"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let first = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
        std::fs::create_dir_all(t.path("outside/runs")).unwrap();
        let link = linked.replace("<id>", &first);
        if link != "runs" {
            std::fs::create_dir_all(t.path("ws/runs")).unwrap();
        }
        symlink(t.path("outside/runs"), t.path(&format!("ws/{link}"))).unwrap();
        let out = run(&t, &["--goal", "second"]);
        assert_eq!(out.status.code(), Some(8), "{link}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(&format!("{link}/ is a symbolic link; agentloop never writes through links")), "{err}");
        assert!(err.contains("hint: replace it with a real folder"), "{err}");
        assert!(files_in(&t, "outside/runs").is_empty(), "{link}: nothing moved out of the workspace");
        assert_eq!(t.json("ws/state.json")["run_id"], first.as_str(), "the old run stays in place");
        assert!(t.exists("ws/trace.jsonl") && t.exists("ws/memory.md"));
    }
}

/// A run folder under runs/ that is a link is not listed by `runs`, not restored, and
/// `report --all` writes no report through it.
#[test]
fn a_linked_run_folder_is_skipped_not_followed() {
    let t = setup();
    let out = run(&t, &["--goal", "first"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut state = t.json("ws/state.json");
    state["run_id"] = json!("20250101-000000-outside");
    t.write("outside/run/state.json", &serde_json::to_string_pretty(&state).unwrap());
    for f in ["memory.md", "plan.md", "context.md", "trace.jsonl"] {
        t.write(&format!("outside/run/{f}"), &t.read(&format!("ws/{f}")));
    }
    std::fs::create_dir_all(t.path("ws/runs")).unwrap();
    symlink(t.path("outside/run"), t.path("ws/runs/20250101-000000-outside")).unwrap();
    let before = files_in(&t, "outside/run");

    let out = t.al(&["runs", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(rows.iter().all(|r| r["run_id"] != "20250101-000000-outside"), "{rows:?}");
    assert!(stderr(&out).contains("is a symbolic link; skipped"), "{}", stderr(&out));

    let out = t.al(&["report", "--all"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(files_in(&t, "outside/run"), before, "no report written through the link");

    let out =
        t.al(&["--script", "script.yaml", "run", "--continue", "--run", "20250101-000000-outside"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(files_in(&t, "outside/run"), before, "nothing moved out of the folder outside");
}

/// A commit journal left in the workspace is replayed when the lock is taken; its appends and
/// files never go through a linked file or folder: the replay stops with exit 8 and the
/// record is kept for when the link is gone.
#[test]
fn a_journal_replay_never_writes_through_a_link() {
    let cases = [
        ("transcript.md", json!({"files": [], "trace": [], "appends": [["transcript.md", "REPLAYED\n"]]})),
        ("artifacts", json!({"files": [["artifacts/facts-archive.md", "REPLAYED\n"]], "trace": []})),
    ];
    for (link, journal) in cases {
        let t = setup();
        t.al(&["init", "--goal", "digest the notes"]).assert().success();
        std::fs::create_dir_all(t.path("outside/art")).unwrap();
        let target = if link == "artifacts" { "outside/art" } else { "outside/victim.txt" };
        let _ = std::fs::remove_dir_all(t.path(&format!("ws/{link}")));
        let _ = std::fs::remove_file(t.path(&format!("ws/{link}")));
        symlink(t.path(target), t.path(&format!("ws/{link}"))).unwrap();
        t.write("ws/.agentloop.journal.json", &journal.to_string());
        let out = run(&t, &[]);
        assert_eq!(out.status.code(), Some(8), "{link}: {}", stderr(&out));
        assert!(stderr(&out).contains("is a symbolic link; agentloop never writes through links"), "{}", stderr(&out));
        assert_eq!(t.read("outside/victim.txt"), VICTIM, "{link}");
        assert!(files_in(&t, "outside/art").is_empty(), "{link}");
        assert!(t.read("ws/.agentloop.journal.json").contains("REPLAYED"), "the record is kept");
        // With the link replaced by a real file or folder, the replay goes through.
        std::fs::remove_file(t.path(&format!("ws/{link}"))).unwrap();
        if link == "artifacts" {
            std::fs::create_dir(t.path("ws/artifacts")).unwrap();
        }
        let out = t.al(&["--script", "script.yaml", "run"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{link}: {}", stderr(&out));
        let written = if link == "artifacts" { "ws/artifacts/facts-archive.md" } else { "ws/transcript.md" };
        assert!(t.read(written).starts_with("REPLAYED\n"), "{link}: {}", t.read(written));
    }
}

/// The diagnostics log is not written through a linked folder inside the workspace, nor
/// through a log file that is a link: logging is off, with a warning.
#[test]
fn the_log_never_writes_through_a_link() {
    for (file, link, target) in
        [("logs/agent.log", "logs", "outside/logs"), ("agent.log", "agent.log", "outside/victim.txt")]
    {
        let t = setup();
        std::fs::create_dir_all(t.path("outside/logs")).unwrap();
        std::fs::create_dir_all(t.path("ws")).unwrap();
        symlink(t.path(target), t.path(&format!("ws/{link}"))).unwrap();
        t.write("xdg/agentloop/config.yaml", &format!("logging:\n  file: {file}\n  level: debug\n"));
        let out = run(&t, &["--goal", "digest the notes"]);
        assert_eq!(out.status.code(), Some(0), "{file}: {}", stderr(&out));
        assert!(stderr(&out).contains("is a symbolic link; agentloop never writes through links"), "{}", stderr(&out));
        assert!(stderr(&out).contains("logging is off"), "{}", stderr(&out));
        assert!(files_in(&t, "outside/logs").is_empty(), "{file}");
        assert_eq!(t.read("outside/victim.txt"), VICTIM, "{file}");
    }
}

/// The model's file tools cannot write the audit record or the other files agentloop writes
/// at the top of the workspace: a tool error names the file, which is unchanged.
#[test]
fn file_write_cannot_touch_the_transcript_or_the_report() {
    let t = setup();
    t.write("ws/transcript.md", "## step 1\n");
    t.write("ws/report.html", "<html></html>\n");
    for (path, mode) in [("transcript.md", "overwrite"), ("transcript.md", "append"), ("report.html", "overwrite")] {
        let args = json!({"path": path, "content": "rewritten history", "mode": mode}).to_string();
        let out = t.al(&["tools", "call", "file_write", "--args", &args]).output().unwrap();
        assert_eq!(out.status.code(), Some(6), "{path} {mode}: {}", stdout(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let err = v["error"].as_str().unwrap_or_default();
        assert!(
            err.contains(&format!("`{path}` is part of the run's paper trail, which only agentloop writes")),
            "{v}"
        );
    }
    assert_eq!(t.read("ws/transcript.md"), "## step 1\n");
    assert_eq!(t.read("ws/report.html"), "<html></html>\n");
}

/// Event mode keeps its runs in runs/<id>/; a symlinked runs/ makes a start event fail with an
/// error naming the link, and nothing is written where it points.
#[test]
fn event_mode_never_starts_a_run_through_a_linked_runs_folder() {
    let t = setup();
    // The user's own config, so the test holds whatever the workspace's config may do.
    t.write("xdg/agentloop/config.yaml", "llm: {provider: scripted, script: script.yaml}\n");
    std::fs::create_dir_all(t.path("root")).unwrap();
    t.write("root/script.yaml", SCRIPT);
    std::fs::create_dir_all(t.path("outside/runs")).unwrap();
    symlink(t.path("outside/runs"), t.path("root/runs")).unwrap();
    let req = json!({"protocol": 2, "job_id": "j1", "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "digest the notes"}, "dedupe_key": "agentic:start:links-1", "timestamp": "0001-01-01T00:00:00Z"}});
    let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap_or(Value::Null);
    assert_eq!(v["status"], "error", "{v} {}", stderr(&out));
    let err = v["error"].as_str().unwrap_or_default();
    assert!(err.contains("runs/ is a symbolic link; agentloop never writes through links"), "{v}");
    assert!(files_in(&t, "outside/runs").is_empty(), "nothing written through the link");
    assert_eq!(out.status.code(), Some(0), "an error response, as for any event that fails");
}

/// A new run in a workspace whose artifacts/ is a link is refused before it starts: exit 8,
/// naming the folder and the fix, and nothing is created where the link points.
#[test]
fn a_run_does_not_start_with_a_linked_artifacts_folder() {
    let t = setup();
    std::fs::create_dir_all(t.path("outside/art")).unwrap();
    symlink(t.path("outside/art"), t.path("ws/artifacts")).unwrap();
    let out = run(&t, &["--goal", "digest the notes"]);
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("artifacts/ is a symbolic link; agentloop never writes through links"), "{err}");
    assert!(err.contains("hint: replace it with a real folder"), "{err}");
    assert!(files_in(&t, "outside/art").is_empty());
    assert!(!t.exists("ws/state.json"), "no run started");
}

/// A workspace's own files read for a prompt or a report (context.md, memory.md, plan.md,
/// state.json, a template override) are read through a link only when it stays inside: a
/// context.md pointing at a secret outside is refused (exit 8) before anything reaches the model
/// or a report, and a link inside the workspace still works.
#[test]
fn no_read_for_a_prompt_or_a_report_follows_a_link_out() {
    for name in ["context.md", "memory.md", "plan.md", "templates/prompt-frame.j2"] {
        let t = setup();
        t.write("outside/secret.txt", "AWS_SECRET=hunter2-outside\n");
        t.al(&["init", "--goal", "digest the notes"]).assert().success();
        let path = t.path(&format!("ws/{name}"));
        let _ = std::fs::remove_file(&path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(t.path("outside/secret.txt"), &path).unwrap();
        let out = run(&t, &[]);
        assert_eq!(out.status.code(), Some(8), "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("is a symbolic link to a file outside the workspace"),
            "{name}: {}",
            stderr(&out)
        );
        let report = t.al(&["report"]).output().unwrap();
        assert!(
            !stdout(&report).contains("hunter2") && !t.exists("ws/report.html")
                || !t.read("ws/report.html").contains("hunter2")
        );
    }
    // Nor does a folder on the way: a `templates/` that links to a folder outside.
    let t = setup();
    t.write("outside/tpl/prompt-system.j2", "OUTSIDE-TEMPLATE hunter2\n");
    symlink(t.path("outside/tpl"), t.path("ws/templates")).unwrap();
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "digest the notes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    assert!(stderr(&out).contains("is reached through a symbolic link to a folder outside"), "{}", stderr(&out));
    assert!(!t.exists("ws/transcript.md") || !t.read("ws/transcript.md").contains("hunter2"));
    // A link that stays inside the workspace is the workspace's own business.
    let t = setup();
    t.al(&["init", "--goal", "digest the notes"]).assert().success();
    std::fs::rename(t.path("ws/context.md"), t.path("ws/notes-context.md")).unwrap();
    symlink("notes-context.md", t.path("ws/context.md")).unwrap();
    let out = run(&t, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A skill folder outside the workspace that holds a secret beside its instructions, as a
/// user's own `~/.claude/skills/deploy/` does.
fn outside_skill(t: &T) {
    t.write(
        "outside/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploys the service.\n---\nRead prod.env, then deploy.\n",
    );
    t.write("outside/skills/deploy/prod.env", "DEPLOY_TOKEN=hunter2-prod\n");
}

/// `skill_read` of `file` in skill `name`, through the real tool.
fn skill_read(t: &T, name: &str, file: &str) -> std::process::Output {
    let args = json!({"name": name, "file": file}).to_string();
    t.untrusted().args(["-w", "ws", "tools", "call", "skill_read", "--args", &args]).output().unwrap()
}

/// A workspace's `skills/` that is itself a link, or a link below it (a folder on the way to a
/// skill, a skill's folder, its SKILL.md or a file in it) is skipped with a warning: the skill
/// it leads to is not offered, and nothing it holds is read, wherever the link points.
#[test]
fn a_linked_skills_folder_is_not_followed() {
    let t = setup();
    outside_skill(&t);
    symlink(t.path("outside/skills"), t.path("ws/skills")).unwrap();
    let out = t.untrusted().args(["-w", "ws", "skills", "check"]).output().unwrap();
    assert!(stdout(&out).contains("ws/skills: is a symbolic link (or reached through one)"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("ok      deploy"), "{}", stdout(&out));
    let out = skill_read(&t, "deploy", "prod.env");
    assert!(!stdout(&out).contains("hunter2"), "{}", stdout(&out));
    assert!(stdout(&out).contains("no skill named `deploy`"), "{}", stdout(&out));

    // Below a real skills/: a folder on the way, a skill's folder, its SKILL.md.
    for (link, to) in [
        ("ws/skills/vendor", "outside/skills"),
        ("ws/skills/deploy", "outside/skills/deploy"),
        ("ws/skills/deploy/SKILL.md", "outside/skills/deploy/SKILL.md"),
    ] {
        let t = setup();
        outside_skill(&t);
        std::fs::create_dir_all(t.path(link).parent().unwrap()).unwrap();
        symlink(t.path(to), t.path(link)).unwrap();
        let out = t.untrusted().args(["-w", "ws", "skills", "check"]).output().unwrap();
        assert!(stdout(&out).contains("is a symbolic link (or reached through one)"), "{link}: {}", stdout(&out));
        assert!(!stdout(&out).contains("ok      deploy"), "{link}: {}", stdout(&out));
        let out = skill_read(&t, "deploy", "prod.env");
        assert!(!stdout(&out).contains("hunter2"), "{link}: {}", stdout(&out));
    }

    // A file in a real skill folder that is a link is not read, even one to a file beside it.
    let t = setup();
    outside_skill(&t);
    t.write("ws/skills/deploy/SKILL.md", &std::fs::read_to_string(t.path("outside/skills/deploy/SKILL.md")).unwrap());
    t.write("ws/skills/deploy/notes.md", "deploy on tuesdays\n");
    symlink(t.path("outside/skills/deploy/prod.env"), t.path("ws/skills/deploy/prod.env")).unwrap();
    symlink("notes.md", t.path("ws/skills/deploy/again.md")).unwrap();
    let out = t.untrusted().args(["-w", "ws", "skills", "show", "deploy"]).output().unwrap();
    assert!(stdout(&out).contains("files        notes.md\n"), "links are not listed: {}", stdout(&out));
    for file in ["prod.env", "again.md"] {
        let out = skill_read(&t, "deploy", file);
        assert!(!stdout(&out).contains("hunter2") && !stdout(&out).contains("tuesdays"), "{}", stdout(&out));
        assert!(
            stdout(&out).contains(&format!("access denied: `{file}` in skill `deploy` is a symbolic link")),
            "{}",
            stdout(&out)
        );
    }
    let out = skill_read(&t, "deploy", "notes.md");
    assert!(stdout(&out).contains("deploy on tuesdays"), "a real file is read: {}", stdout(&out));

    // A `skills.dirs` entry of the user's own config that lands in the workspace is the same.
    let t = setup();
    outside_skill(&t);
    symlink(t.path("outside/skills"), t.path("ws/more")).unwrap();
    t.write("xdg/agentloop/config.yaml", "skills: {dirs: [more]}\n");
    let out = skill_read(&t, "deploy", "prod.env");
    assert!(!stdout(&out).contains("hunter2"), "{}", stdout(&out));
    assert!(stdout(&out).contains("no skill named `deploy`"), "{}", stdout(&out));
}

/// A relative `system_prompt_file` in the user's own profile or config names a file of the
/// workspace, which may come from elsewhere: it is read as the workspace's own, so a link that
/// leads out (the file, or a folder on the way) is refused (exit 8) before anything reaches the
/// model. A link inside the workspace, and a file of the user's own by absolute path, still work.
#[test]
fn a_relative_identity_file_is_read_as_the_workspaces_own() {
    for (config, file, link, to) in [
        ("xdg/agentloop/agents/ada.yaml", "identity.md", "ws/identity.md", "secret.txt"),
        ("xdg/agentloop/config.yaml", "identity.md", "ws/identity.md", "secret.txt"),
        ("xdg/agentloop/config.yaml", "./prompts/identity.md", "ws/prompts", "outside/prompts"),
    ] {
        let t = setup();
        t.write("secret.txt", "AWS_SECRET=hunter2-identity\n");
        t.write("outside/prompts/identity.md", "AWS_SECRET=hunter2-identity\n");
        t.write(config, &format!("system_prompt_file: {file}\n"));
        symlink(t.path(to), t.path(link)).unwrap();
        let agent: &[&str] = if config.contains("/agents/") { &["--agent", "ada"] } else { &[] };
        let out = t
            .untrusted()
            .args(["-w", "ws"])
            .args(agent)
            .args(["--script", "script.yaml", "run", "--goal", "digest the notes"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(8), "{config} {file}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("system_prompt_file:") && stderr(&out).contains("symbolic link"),
            "{}",
            stderr(&out)
        );
        assert!(!t.exists("ws/transcript.md"), "{config} {file}: nothing reached the model");
    }
    // A link inside the workspace is its own business; the user's own file is read as named.
    let t = setup();
    t.write("ws/notes/identity.md", "You are Ada.\n");
    symlink("notes/identity.md", t.path("ws/identity.md")).unwrap();
    t.write("xdg/agentloop/agents/ada.yaml", "system_prompt_file: identity.md\n");
    t.write("mine.md", "Prefer small steps.\n");
    t.write(
        "xdg/agentloop/config.yaml",
        &format!("system_prompt: x\nsystem_prompt_file: {}\n", t.path("mine.md").display()),
    );
    let out = t.untrusted().args(["-w", "ws", "--script", "script.yaml", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(t.read("ws/transcript.md").contains("Prefer small steps."));
    let out = t
        .untrusted()
        .args(["-w", "ws", "--agent", "ada", "--script", "script.yaml", "run", "--new", "--goal", "g"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(t.read("ws/transcript.md").contains("You are Ada."));
}

/// A workspace's memory store reached through a link (`.agentloop`, `.agentloop/memory`) is
/// refused for reads as for writes: `memory search` stops with exit 8 naming the link, and a
/// run's prompts show none of the other project's memories.
#[test]
fn a_linked_memory_store_is_not_read() {
    for (link, to) in [("ws/.agentloop", "other/.agentloop"), ("ws/.agentloop/memory", "other/.agentloop/memory")] {
        let t = setup();
        std::fs::create_dir_all(t.path("other")).unwrap();
        t.cmd()
            .args(["-w", "other", "memory", "add", "--topic", "ops", "Deploy keys rotate on hunter2day"])
            .assert()
            .success();
        std::fs::create_dir_all(t.path(link).parent().unwrap()).unwrap();
        symlink(t.path(to), t.path(link)).unwrap();
        for args in
            [vec!["memory", "search", "deploy keys"], vec!["memory", "list"], vec!["memory", "show", "ops/content_001"]]
        {
            let out = t.untrusted().args(["-w", "ws"]).args(&args).output().unwrap();
            assert_eq!(out.status.code(), Some(8), "{link} {args:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("is a symbolic link; agentloop reads the workspace's own stores only"),
                "{}",
                stderr(&out)
            );
            assert!(!stdout(&out).contains("hunter2day"), "{link} {args:?}: {}", stdout(&out));
        }
        let out = t
            .untrusted()
            .args(["-w", "ws", "--script", "script.yaml", "run", "--goal", "digest the deploy keys notes"])
            .output()
            .unwrap();
        assert!(
            !t.exists("ws/transcript.md") || !t.read("ws/transcript.md").contains("hunter2day"),
            "{link}: {}",
            stderr(&out)
        );
    }
}
