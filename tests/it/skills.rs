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
        "loads   extra-keys (coll/extra-keys), against the Agent Skills spec",
        "ok      deep-one",
        "Bad_Name/SKILL.md: field `name`: `Bad_Name` may hold only lowercase",
        "folder-a/SKILL.md: field `name`: `folder-b` must equal the folder name `folder-a`",
        "loads   too-long (coll/too-long), against the Agent Skills spec",
        "too-long/SKILL.md: field `description`: is 1025 characters, over the Agent Skills limit of 1024 (loaded as it is)",
        "no-front/SKILL.md: no YAML frontmatter",
        "bad-yaml/SKILL.md: the frontmatter is not valid YAML",
        "warning: ",
        "field `model`: is not an Agent Skills field (ignored; the spec refuses it)",
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
    // Each diagnostic is worded once: a skipped skill says so, never "warning: error:".
    let err = stderr(&out);
    assert!(err.contains("Bad_Name/SKILL.md: field `name`: `Bad_Name` may hold only lowercase"), "{err}");
    assert!(!err.contains("warning: warning:") && !err.contains("warning: error:"), "{err}");
    assert!(err.lines().any(|l| l.starts_with("warning: ") && l.ends_with("(skipped)")), "{err}");
    let list = t.al(&["--skills-dir", "coll", "skills", "list"]).output().unwrap();
    let err = stderr(&list);
    assert!(err.contains("field `model`: is not an Agent Skills field"), "{err}");
    assert!(!err.contains("warning: warning:") && !err.contains("warning: error:"), "{err}");
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
        "frame:\n  - answer: {goal: research, definition_of_done: [a, b, c], can_proceed: true}\nplan:\n  - answer: {next_action: {tool: skill_read, args: {name: web-research}}, expected_outcome: x, rationale: y}\n  - answer: {next_action: {tool: finish, args: {summary: s}}, expected_outcome: x, rationale: y}\nreflect:\n  - answer: {decision: continue, reason: go}\n  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: s}\n",
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

/// The Agent Skills edge cases: (folder, file name, bytes, valid). "valid" is the reference
/// validator's verdict (`skills-ref`, Python): name rules, description length, frontmatter
/// shapes, metadata types, a byte-order mark, the case of the file name, the folder-name match.
fn spec_cases() -> Vec<(&'static str, &'static str, Vec<u8>, bool)> {
    let fm = |body: &str| format!("---\n{body}\n---\n# Body\nSteps.\n").into_bytes();
    let long_desc = format!("name: long-desc\ndescription: {}", "x".repeat(1025));
    let max_desc = format!("name: max-desc\ndescription: {}", "x".repeat(1024));
    let long_name = "a".repeat(65);
    // The folder must carry the name too; a test's one small leak buys a `&'static str`.
    let max_name: &'static str = Box::leak("b".repeat(64).into_boxed_str());
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend(fm("name: bom\ndescription: Starts with a byte-order mark."));
    let compat = format!("name: long-compat\ndescription: d\ncompatibility: {}", "c".repeat(501));
    vec![
        ("plain", "SKILL.md", fm("name: plain\ndescription: A plain skill."), true),
        ("Upper", "SKILL.md", fm("name: Upper\ndescription: Uppercase name."), false),
        ("-lead", "SKILL.md", fm("name: -lead\ndescription: Leading hyphen."), false),
        ("trail-", "SKILL.md", fm("name: trail-\ndescription: Trailing hyphen."), false),
        ("two--hyphens", "SKILL.md", fm("name: two--hyphens\ndescription: Two hyphens."), false),
        ("under_score", "SKILL.md", fm("name: under_score\ndescription: Underscore."), false),
        ("café", "SKILL.md", fm("name: café\ndescription: A lowercase letter beyond ASCII."), true),
        ("long-name", "SKILL.md", fm(&format!("name: {long_name}\ndescription: 65 characters.")), false),
        (max_name, "SKILL.md", fm(&format!("name: {max_name}\ndescription: 64 characters.")), true),
        ("folder-a", "SKILL.md", fm("name: folder-b\ndescription: Names another folder."), false),
        ("no-name", "SKILL.md", fm("description: No name."), false),
        ("no-desc", "SKILL.md", fm("name: no-desc"), false),
        ("empty-desc", "SKILL.md", fm("name: empty-desc\ndescription:"), false),
        ("long-desc", "SKILL.md", fm(&long_desc), false),
        ("max-desc", "SKILL.md", fm(&max_desc), true),
        ("num-desc", "SKILL.md", fm("name: num-desc\ndescription: 42"), true),
        ("no-front", "SKILL.md", b"# Just markdown\n".to_vec(), false),
        ("unclosed", "SKILL.md", b"---\nname: unclosed\ndescription: d\n".to_vec(), false),
        ("bad-yaml", "SKILL.md", fm("name: [unclosed"), false),
        ("list-front", "SKILL.md", fm("- name\n- description"), false),
        ("dup-key", "SKILL.md", fm("name: dup-key\nname: dup-key\ndescription: d"), false),
        ("flow-meta", "SKILL.md", fm("name: flow-meta\ndescription: d\nmetadata: {a: b}"), false),
        ("unknown-key", "SKILL.md", fm("name: unknown-key\ndescription: d\nmodel: opus"), false),
        (
            "meta-types",
            "SKILL.md",
            fm("name: meta-types\ndescription: d\nmetadata:\n  version: 1.0\n  count: 3\n  on: true"),
            true,
        ),
        ("meta-list", "SKILL.md", fm("name: meta-list\ndescription: d\nmetadata:\n  - a"), true),
        ("all-fields", "SKILL.md", fm("name: all-fields\ndescription: d\nlicense: MIT\ncompatibility: Needs git\nallowed-tools: Bash(git:*) Read\nmetadata:\n  author: x"), true),
        ("compat-empty", "SKILL.md", fm("name: compat-empty\ndescription: d\ncompatibility: \"\""), true),
        ("long-compat", "SKILL.md", fm(&compat), false),
        ("compat-list", "SKILL.md", fm("name: compat-list\ndescription: d\ncompatibility:\n  - x"), false),
        ("bom", "SKILL.md", bom, false),
        ("lower", "skill.md", fm("name: lower\ndescription: Only a lowercase skill.md."), true),
        ("crlf", "SKILL.md", b"---\r\nname: crlf\r\ndescription: Windows line ends.\r\n---\r\nbody\r\n".to_vec(), true),
        ("no-skill-md", "README.md", b"# Not a skill\n".to_vec(), false),
    ]
}

/// The reference validator's command: `agentskills` (skills-ref's entry point) or the module.
fn skills_ref() -> Option<Vec<String>> {
    let works = |cmd: &[&str]| {
        std::process::Command::new(cmd[0]).args(&cmd[1..]).arg("--help").output().is_ok_and(|o| o.status.success())
    };
    [vec!["agentskills"], vec!["python3", "-m", "skills_ref.cli"]]
        .into_iter()
        .find(|c| works(c))
        .map(|c| c.into_iter().map(String::from).collect())
}

#[test]
fn skills_check_agrees_with_the_reference_validator() {
    let t = T::new();
    let cases = spec_cases();
    for (folder, file, bytes, _) in &cases {
        std::fs::create_dir_all(t.path(&format!("cases/{folder}"))).unwrap();
        std::fs::write(t.path(&format!("cases/{folder}/{file}")), bytes).unwrap();
    }
    let mut wrong = Vec::new();
    for (folder, _, _, valid) in &cases {
        let out = t.cmd().args(["skills", "check", &format!("cases/{folder}")]).output().unwrap();
        let code = out.status.code();
        assert!(matches!(code, Some(0 | 1)), "{folder}: exit {code:?}: {}", stderr(&out));
        if (code == Some(0)) != *valid {
            wrong.push(format!("{folder}: agentloop says {code:?}, the spec says valid={valid}\n{}", stdout(&out)));
        }
    }
    assert!(wrong.is_empty(), "agentloop disagrees on:\n{}", wrong.join("\n"));
    let Some(cmd) = skills_ref() else {
        return missing("skills-ref (python3 -m pip install skills-ref) to compare with the reference validator");
    };
    for (folder, _, _, valid) in &cases {
        let out = std::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .args(["validate", &format!("cases/{folder}")])
            .current_dir(t.root())
            .output()
            .unwrap();
        if out.status.success() != *valid {
            wrong.push(format!("{folder}: skills-ref says valid={}: {}", out.status.success(), stderr(&out)));
        }
    }
    assert!(wrong.is_empty(), "the reference validator judges otherwise:\n{}", wrong.join("\n"));
}

#[test]
fn skills_are_read_as_the_validator_reads_them() {
    let t = T::new();
    t.write(
        "coll/typed/SKILL.md",
        "---\nname: typed\ndescription: 42\ncompatibility: 7\nmetadata:\n  version: 1.10\n  count: 3\n  on: true\n  nothing: ~\n  nested:\n    a: b\n---\nbody\n",
    );
    t.write("coll/lower/skill.md", "---\nname: lower\ndescription: Only a lowercase file.\n---\nLower body.\n");
    t.write("coll/lower/notes.txt", "extra");
    std::fs::create_dir_all(t.path("coll/bom")).unwrap();
    std::fs::write(t.path("coll/bom/SKILL.md"), b"\xef\xbb\xbf---\nname: bom\ndescription: d\n---\nbody\n").unwrap();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let out = t.al(&["--skills-dir", "coll", "skills", "show", "typed", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["description"], "42");
    assert_eq!(v["compatibility"], "7");
    assert_eq!(v["version"], "1.10", "the text as written, not the number");
    assert_eq!(v["metadata"], serde_json::json!({"version": "1.10", "count": "3", "on": "true", "nothing": "~"}));
    assert!(stderr(&out).contains("value of `nested` is a list or mapping, not text (ignored)"), "{}", stderr(&out));
    // A folder with only a lowercase skill.md is a skill, its file not among its resources.
    let out = t.al(&["--skills-dir", "coll", "skills", "show", "lower", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["body"], "Lower body.");
    assert_eq!(v["files"], serde_json::json!(["notes.txt"]));
    // A byte-order mark before `---` is named, and the skill skipped.
    let out = t.cmd().args(["skills", "check", "coll"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let s = stdout(&out);
    assert!(s.contains("ok      lower (coll/lower)") && s.contains("ok      typed"), "{s}");
    assert!(s.contains("error: coll/bom/SKILL.md: starts with a byte-order mark (U+FEFF)"), "{s}");
    // An empty folder holds no skill: an error, not "0 valid".
    std::fs::create_dir_all(t.path("empty")).unwrap();
    let out = t.cmd().args(["skills", "check", "empty"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("error: empty: holds no skill"), "{}", stdout(&out));
    // A SKILL.md named directly stands for its folder.
    t.cmd().args(["skills", "check", "coll/typed/SKILL.md"]).assert().success();
    let out = t.cmd().args(["skills", "check", "coll/lower/notes.txt"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
