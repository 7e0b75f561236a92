//! `skills learn`: a done run's path becomes a valid Agent Skills folder that names the run it
//! came from, holds no secret, and is offered to a later run whose goal matches its triggers.

use crate::common::*;
use predicates::prelude::*;
use serde_json::Value;

const SECRET: &str = "s3cr3t-feed-token-4242";

/// Day 1: read the notes, write the digest, learn a fact; the learn call's draft at the end.
fn day_one() -> String {
    format!(
        r#"frame:
  - answer: {{goal: digest the notes, definition_of_done: [notes read, digest written, fact noted], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: file_read, args: {{path: notes.txt}}}}}}
  - answer: {{next_action: {{tool: file_write, args: {{path: artifacts/digest.md, content: "three items"}}}}}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1]}}], decision: continue, reason: read}}
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [2]}}, {{item: 3, steps: [2]}}], facts: ["the notes hold three items"], decision: done, reason: written, outcome: digest written}}
learn:
  - answer: {{description: "Digest a notes file into artifacts/digest.md. Use for the morning notes digest.", triggers: [notes digest, morning notes], instructions: "1. Read notes.txt with file_read.\n2. Write the digest to artifacts/digest.md with file_write (token {SECRET})."}}
"#
    )
}

#[test]
fn a_done_run_becomes_a_valid_skill_a_later_goal_triggers() {
    let t = T::new();
    t.write("ws/notes.txt", "a\nb\nc\n");
    t.write("script.yaml", &day_one());
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "Morning notes digest"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run_id = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();

    let out = t
        .al(&["--script", "script.yaml", "skills", "learn", "notes-digest", "--json"])
        .env("FEED_TOKEN", SECRET)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["run_id"], run_id.as_str());
    assert_eq!(v["tools"], serde_json::json!(["file_read", "file_write"]));
    let skill = t.read("ws/skills/notes-digest/SKILL.md");
    for want in [
        "name: notes-digest\n",
        "description: \"Digest a notes file into artifacts/digest.md. Use for the morning notes digest.\"",
        "triggers: \"notes digest, morning notes\"",
        "requires-tools: \"file_read file_write\"",
        &format!("learned-from-run: \"{run_id}\""),
        "## Steps\n\n1. Read notes.txt with file_read.",
        "## Tools used\n\n- file_read\n- file_write\n",
        "- [x] digest written\n",
        "[references/facts.md](references/facts.md)",
    ] {
        assert!(skill.contains(want), "{want:?} in\n{skill}");
    }
    // No secret: the token the draft carried is redacted.
    assert!(!skill.contains(SECRET) && skill.contains("[REDACTED]"), "{skill}");
    let facts = t.read("ws/skills/notes-digest/references/facts.md");
    assert!(facts.contains(&run_id) && facts.contains("- the notes hold three items"), "{facts}");
    // Valid as `skills check` (the reference validator's rules) judges it.
    t.al(&["skills", "check", "ws/skills/notes-digest"]).assert().success();
    // The same name again, a bad name: refused, nothing written.
    t.al(&["--script", "script.yaml", "skills", "learn", "notes-digest"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already exists"));
    t.al(&["skills", "learn", "Notes_Digest"]).assert().code(2).stderr(predicate::str::contains("no skill name"));

    // Day 2: a goal holding a trigger is offered the skill at Frame, and reads it.
    t.write(
        "script.yaml",
        r#"frame:
  - answer: {goal: digest the notes, definition_of_done: [skill followed, digest written, done], can_proceed: true}
plan:
  - answer: {next_action: {tool: skill_read, args: {name: notes-digest}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: followed, outcome: digest from the skill}
"#,
    );
    let out = t
        .al(&["--script", "script.yaml", "run", "--goal", "Morning notes digest", "--slot", "day-2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let transcript = t.read("ws/transcript.md");
    let offered = transcript.lines().find(|l| l.starts_with("Skills whose triggers match the goal: "));
    assert!(offered.is_some_and(|l| l.contains("notes-digest")), "{offered:?}");
    let act = t.trace().into_iter().find(|e| e["event"] == "act").unwrap();
    assert_eq!(act["result_status"], "ok", "{act}");
    assert_eq!(t.json("ws/state.json")["active_skills"], serde_json::json!(["notes-digest"]));
    // `runs diff` shows what the day cost against the first.
    let out = t.al(&["runs", "diff", "--json"]).output().unwrap();
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((d["then"]["steps"].as_u64(), d["now"]["steps"].as_u64()), (Some(2), Some(1)), "{d}");
}
