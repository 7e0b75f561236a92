//! Skills in both formats, precedence, validation, the catalog and `skills fetch`.

use crate::common::*;
use predicates::prelude::*;
use serde_json::Value;

fn agent_skill(t: &T, dir: &str, name: &str, description: &str) {
    t.write(
        &format!("{dir}/{name}/SKILL.md"),
        &format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\nDo the thing.\n"),
    );
}

#[test]
fn both_formats_load_side_by_side_with_precedence() {
    let t = T::new();
    agent_skill(&t, "ws/skills", "pdf-tools", "Work with PDF files.");
    t.write("ws/skills/scripts-only/readme.txt", "not a skill");
    t.write("seed/registry.json", r#"{"version": "1.0.0", "skills": [{"id": "moltbook", "path": "moltbook/", "enabled": true}, {"id": "off", "path": "off/", "enabled": false}]}"#);
    t.write(
        "seed/moltbook/skill.json",
        r#"{"id": "moltbook", "name": "Moltbook", "version": "1.0.0", "description": "Post to Moltbook.", "triggers": ["moltbook", "social network"], "requires": {"tools": ["http_call"], "env_vars": ["MOLTBOOK_API_KEY"]}, "enabled": true}"#,
    );
    t.write("seed/moltbook/skill.md", "# Moltbook\nUse the API.\n");
    t.write("seed/moltbook/heartbeat.md", "check often");
    t.write("seed/off/skill.json", r#"{"id": "off", "description": "disabled"}"#);
    // A user-level skill overridden by the workspace one of the same name.
    agent_skill(&t, "xdg/agentloop/skills", "pdf-tools", "User version.");
    agent_skill(&t, "xdg/agentloop/skills", "critique", "User override of the bundled critique.");
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let out = t.al(&["--skills-dir", "seed", "skills", "list", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let skills: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let by = |n: &str| skills.iter().find(|s| s["name"] == n).cloned();
    assert_eq!(by("pdf-tools").unwrap()["description"], "Work with PDF files.");
    assert_eq!(by("critique").unwrap()["description"], "User override of the bundled critique.");
    assert_eq!(by("moltbook").unwrap()["format"], "seed");
    assert_eq!(by("moltbook").unwrap()["files"], serde_json::json!(["heartbeat.md", "skill.md"]));
    assert!(by("off").is_none());
    assert!(by("web-research").is_some() && by("daily-digest").is_some());
    // Activation checks requires.env_vars with a clear message.
    let out = t
        .al(&["--skills-dir", "seed", "tools", "call", "skill_read", "--args", "{\"name\": \"moltbook\"}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    assert!(stdout(&out).contains("needs the environment variable(s) MOLTBOOK_API_KEY"));
    let out = t
        .al(&[
            "--skills-dir",
            "seed",
            "tools",
            "call",
            "skill_read",
            "--args",
            "{\"name\": \"moltbook\", \"file\": \"heartbeat.md\"}",
        ])
        .env("MOLTBOOK_API_KEY", "x")
        .output()
        .unwrap();
    assert!(stdout(&out).contains("check often"));
    let out = t
        .al(&[
            "--skills-dir",
            "seed",
            "tools",
            "call",
            "skill_read",
            "--args",
            "{\"name\": \"moltbook\", \"file\": \"../../secret\"}",
        ])
        .env("MOLTBOOK_API_KEY", "x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
}

#[test]
fn invalid_skills_are_reported_not_fatal() {
    let t = T::new();
    agent_skill(&t, "coll", "good-one", "Fine.");
    agent_skill(&t, "coll", "Bad_Name", "Bad name.");
    t.write("coll/folder-a/SKILL.md", "---\nname: folder-b\ndescription: mismatch\n---\nbody\n");
    t.write("coll/too-long/SKILL.md", &format!("---\nname: too-long\ndescription: {}\n---\nbody\n", "x".repeat(1025)));
    t.write("coll/no-front/SKILL.md", "# Just markdown\n");
    t.write("coll/bad-yaml/SKILL.md", "---\nname: [unclosed\n---\n");
    t.write("coll/extra-keys/SKILL.md", "---\nname: extra-keys\ndescription: Has extras.\nmodel: opus\n---\nbody\n");
    t.write(
        "coll/nested/group/deep-one/SKILL.md",
        "---\nname: deep-one\ndescription: Nested two levels down.\n---\nbody\n",
    );
    t.write("coll/node_modules/hidden/SKILL.md", "---\nname: hidden\ndescription: must be skipped\n---\n");
    t.write("coll/.git/x/SKILL.md", "---\nname: x\ndescription: skipped\n---\n");
    let out = t.cmd().args(["skills", "check", "coll"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let s = stdout(&out);
    for want in [
        "ok      good-one",
        "ok      extra-keys",
        "ok      deep-one",
        "Bad_Name/SKILL.md: field `name`: `Bad_Name` may hold only lowercase",
        "folder-a/SKILL.md: field `name`: `folder-b` must equal the folder name `folder-a`",
        "ok      too-long",
        "too-long/SKILL.md: field `description`: is 1025 characters, over the Agent Skills limit of 1024 (loaded as it is)",
        "no-front/SKILL.md: no YAML frontmatter",
        "bad-yaml/SKILL.md: the frontmatter is not valid YAML",
        "warning: ",
        "field `model`: is not an Agent Skills field (ignored)",
    ] {
        assert!(s.contains(want), "missing {want:?} in:\n{s}");
    }
    assert!(!s.contains("hidden") && !s.contains("ok      x"));
    // gen still lists every valid skill and warns about the rest on stderr.
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let out = t.al(&["--skills-dir", "coll", "skills", "gen"]).output().unwrap();
    assert!(out.status.success());
    assert!(stdout(&out).contains("### good-one") && stdout(&out).contains("### deep-one"));
    assert!(stdout(&out).contains("### too-long"), "a long description loads with a warning");
    assert!(stderr(&out).contains("Bad_Name"));
    agent_skill(&t, "clean", "only-good", "Fine.");
    t.cmd().args(["skills", "check", "clean"]).assert().success();
}

#[test]
fn skills_gen_is_golden_and_byte_identical() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let a = t.al(&["skills", "gen"]).output().unwrap();
    let b = t.al(&["skills", "gen"]).output().unwrap();
    assert_eq!(a.stdout, b.stdout);
    golden("skills.md", &stdout(&a));
    assert_eq!(t.read("ws/skills.md"), stdout(&a), "init writes the same catalog");
    t.al(&["skills", "gen", "-o", "out.md"]).assert().success();
    assert_eq!(t.read("out.md"), stdout(&a), "-o is relative to the current folder");
    let j = t.al(&["skills", "gen", "--format", "json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(v["skills"].as_array().unwrap().len(), 3);
}

#[test]
fn skills_show_and_builtin_bodies() {
    let t = T::new();
    t.cmd()
        .args(["skills", "show", "daily-digest"])
        .assert()
        .success()
        .stdout(predicate::str::contains("state/daily-digest.json"));
    t.cmd().args(["skills", "show", "nope"]).assert().code(2);
    let out = t.cmd().args(["skills", "check"]).output().unwrap();
    assert!(out.status.success(), "bundled skills are valid: {}", stdout(&out));
}

#[test]
fn skills_fetch_from_a_local_server() {
    let t = T::new();
    let s = Server::start(vec![Reply::text(
        200,
        "text/markdown",
        "---\nname: poster\ndescription: Post updates somewhere.\n---\n# Poster\nSteps.\n",
    )]);
    t.write("ws/agentloop.yaml", "tools:\n  http: {allow_private: true}\n");
    let out = t.al(&["skills", "fetch", "poster", &format!("{}/skill.md", s.url)]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(t.read("xdg/agentloop/skills/poster/skill.md").contains("# Poster"));
    let meta: Value = t.json("xdg/agentloop/skills/poster/skill.json");
    assert_eq!(meta["description"], "Post updates somewhere.");
    let reg: Value = t.json("xdg/agentloop/skills/registry.json");
    assert_eq!(reg["skills"][0]["id"], "poster");
    t.al(&["skills", "list"]).assert().success().stdout(predicate::str::contains("poster"));
    t.al(&["skills", "fetch", "x", "file:///etc/passwd"]).assert().code(2);
    // Without allow_private the loopback server is refused.
    std::fs::remove_file(t.path("ws/agentloop.yaml")).unwrap();
    t.al(&["skills", "fetch", "poster2", &format!("{}/skill.md", s.url)])
        .assert()
        .failure()
        .stderr(predicate::str::contains("allow_private"));
}

#[test]
fn triggers_suggest_skills_to_frame() {
    let t = T::new();
    t.write("s.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: false}\n");
    t.al(&["--script", "s.yaml", "--record", "rec.jsonl", "run", "--goal", "Please critique this essay"])
        .assert()
        .code(3);
    // The frame prompt named the matching skill (transcript.md holds every prompt as sent).
    let transcript = t.read("ws/transcript.md");
    assert!(transcript.contains("Skills whose triggers match the goal: critique."), "{transcript}");
    // A goal no trigger matches suggests nothing.
    t.al(&["--script", "s.yaml", "run", "--new", "--goal", "Count the words"]).assert().code(3);
    assert!(!t.read("ws/transcript.md").contains("triggers match"));
}

/// The bundled web-research and daily-digest skills, activated and followed in scripted runs
/// against a local server.
#[test]
fn bundled_research_and_digest_skills_run() {
    let t = T::new();
    let s = Server::start(vec![Reply::text(200, "text/html", "<html><body><article><h1>Feed</h1><ul><li><a href=\"/a\">Item A</a></li><li><a href=\"/b\">Item B</a></li></ul></article></body></html>")]);
    t.write("ws/agentloop.yaml", "tools:\n  http: {allow_private: true}\n");
    let url = format!("{}/feed", s.url);
    let script = format!(
        r##"frame:
  - answer: {{goal: digest the feed, definition_of_done: [feed fetched, digest written, state saved], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: skill_read, args: {{name: daily-digest}}}}, expected_outcome: steps, rationale: the goal is a digest}}
  - answer: {{next_action: {{tool: file_read, args: {{path: artifacts/digest-state.json}}}}, expected_outcome: seen items or none, rationale: skill step 1}}
  - answer: {{next_action: {{tool: web_fetch, args: {{url: "{url}"}}}}, expected_outcome: items, rationale: skill step 2}}
  - answer: {{next_action: {{tool: file_write, args: {{path: artifacts/digest-2026-01-01.md, content: "# Digest 2026-01-01\n\n- Item A\n- Item B\n"}}}}, expected_outcome: digest, rationale: skill step 4}}
  - answer: {{next_action: {{tool: file_write, args: {{path: artifacts/digest-state.json, content: "{{\"seen\": [\"Item A\", \"Item B\"]}}"}}}}, expected_outcome: state, rationale: skill step 5}}
reflect:
  - answer: {{decision: continue, reason: skill active}}
  - answer: {{decision: continue, reason: first run}}
  - answer: {{satisfied: [{{item: 1, steps: [3]}}], decision: continue, reason: fetched}}
  - answer: {{satisfied: [{{item: 2, steps: [4]}}], decision: continue, reason: written}}
  - answer: {{satisfied: [{{item: 3, steps: [5]}}], decision: done, reason: all met, outcome: 2 new items, artifacts: [artifacts/digest-2026-01-01.md]}}
"##
    );
    t.write("digest.yaml", &script);
    let out = t
        .al(&["--script", "digest.yaml", "run", "--goal", "Every morning, a daily digest of my feed"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let acts: Vec<Value> = t.trace().into_iter().filter(|e| e["phase"] == "act").collect();
    assert!(acts[0]["result_summary"].as_str().unwrap().contains("Daily digest"));
    assert_eq!(acts[1]["result_status"], "error", "no state on the first run");
    assert!(t.read("ws/artifacts/digest-2026-01-01.md").contains("Item A"));
    assert_eq!(t.json("ws/state.json")["active_skills"], serde_json::json!(["daily-digest"]));
    // web-research activates and its body is carried into the next plan prompt.
    let t2 = T::new();
    t2.write(
        "r.yaml",
        "frame:\n  - answer: {goal: research, definition_of_done: [a, b, c], can_proceed: true}\nplan:\n  - answer: {next_action: {tool: skill_read, args: {name: web-research}}, expected_outcome: x, rationale: y}\n  - answer: {next_action: {tool: finish, args: {summary: s}}, expected_outcome: x, rationale: y}\nreflect:\n  - answer: {decision: continue, reason: go}\n  - answer: {satisfied: [{item: 1, steps: [2]}, {item: 2, steps: [2]}, {item: 3, steps: [2]}], decision: done, reason: ok, outcome: s}\n",
    );
    let out = t2
        .al(&["--script", "r.yaml", "--record", "rec.jsonl", "run", "--goal", "Research the history of cron"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plans: Vec<Value> = t2.trace().into_iter().filter(|e| e["event"] == "plan").collect();
    assert!(
        plans[1]["prompt_bytes"].as_u64().unwrap() > plans[0]["prompt_bytes"].as_u64().unwrap() + 500,
        "the skill body is in the second plan prompt"
    );
}
