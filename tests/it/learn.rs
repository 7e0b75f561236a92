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
    // skills.md, as agentloop wrote it, is written anew with the skill in it.
    assert!(stderr(&out).contains("refreshed"), "{}", stderr(&out));
    assert!(t.read("ws/skills.md").contains("notes-digest"));
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
    assert!(!stderr(&out).contains("differs from the tool and skill catalog"), "{}", stderr(&out));
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

/// One morning: fetch the feed, (day 1 only: look around first), write the dated digest.
fn morning(feed: &str, date: &str, first: bool, tokens: u64) -> String {
    let look = if first {
        "  - answer: {next_action: {tool: list_dir, args: {path: .}}}\n    usage: {input_tokens: 900, output_tokens: 50}\n"
    } else {
        ""
    };
    let wait = if first { "  - answer: {decision: continue, reason: looked}\n" } else { "" };
    format!(
        r#"frame:
  - answer: {{goal: digest the feed, definition_of_done: [feed fetched, digest written, items noted], can_proceed: true}}
    usage: {{input_tokens: {tokens}, output_tokens: 40}}
plan:
{look}  - answer: {{next_action: {{tool: web_fetch, args: {{url: "{feed}"}}}}}}
    usage: {{input_tokens: {tokens}, output_tokens: 40}}
  - answer: {{next_action: {{tool: file_write, args: {{path: "artifacts/digest-{date}.md", content: "digest of {date}"}}}}}}
    usage: {{input_tokens: {tokens}, output_tokens: 40}}
reflect:
{wait}  - answer: {{decision: continue, reason: fetched}}
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [2]}}, {{item: 3, steps: [2]}}], facts: ["the feed was read on {date}"], decision: done, reason: written, outcome: "digest of {date}"}}
learn:
  - answer: {{description: "Digest the morning feed into artifacts/digest-DATE.md. Use for the morning feed digest.", triggers: [feed digest], instructions: "1. Fetch the feed with web_fetch.\n2. Write artifacts/digest-DATE.md with file_write."}}
"#
    )
}

#[test]
fn three_mornings_of_a_feed_learn_revalidate_and_show_what_changed() {
    let t = T::new();
    // The feed: v1 on day 1, v2 from day 2 on; answers 304 to a matching If-None-Match.
    let day = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let d = day.clone();
    let s = Server::start_with(move |_, r| {
        let tag = if d.load(std::sync::atomic::Ordering::SeqCst) == 1 { "\"v1\"" } else { "\"v2\"" };
        if r.header("if-none-match") == Some(tag) {
            return Reply::text(304, "text/plain", "").header("ETag", tag).header("Cache-Control", "no-cache");
        }
        let body = if tag == "\"v1\"" { "item a\n" } else { "item a\nitem b\n" };
        Reply::text(200, "text/plain", body).header("ETag", tag).header("Cache-Control", "no-cache")
    });
    t.write("ws/agentloop.yaml", "tools:\n  http:\n    allow_private: true\n");
    let feed = format!("{}/feed", s.url);
    let run = |date: &str, first: bool, tokens: u64| {
        t.write("script.yaml", &morning(&feed, date, first, tokens));
        let out = t
            .al(&["--script", "script.yaml", "run", "--goal", "Morning feed digest", "--slot", date])
            .env("AGENTLOOP_NOW", format!("{date}T06:00:00Z"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{date}: {}", stderr(&out));
    };
    run("2026-01-01", true, 1000);
    t.al(&["--script", "script.yaml", "skills", "learn", "feed-digest"]).assert().success();
    t.al(&["skills", "check", "ws/skills/feed-digest"]).assert().success();

    // Day 2: the feed changed (a full answer), the skill is offered, fewer steps and tokens.
    day.store(2, std::sync::atomic::Ordering::SeqCst);
    run("2026-01-02", false, 600);
    let offered = t.read("ws/transcript.md");
    assert!(offered.lines().any(|l| l.starts_with("Skills whose triggers") && l.contains("feed-digest")));
    let d2: Value = serde_json::from_slice(&t.al(&["runs", "diff", "--json"]).output().unwrap().stdout).unwrap();
    assert!(d2["now"]["steps"].as_u64() < d2["then"]["steps"].as_u64(), "{d2}");
    assert!(d2["now"]["tokens"].as_u64() < d2["then"]["tokens"].as_u64(), "{d2}");
    assert_eq!(d2["artifacts"]["changed"][0]["path_then"], "artifacts/digest-2026-01-01.md", "{d2}");
    assert!(d2["changes"].as_u64() > Some(0));

    // Day 3: the feed is unchanged: a conditional request, a 304, the body from the cache.
    run("2026-01-03", false, 600);
    let last = s.request(s.count() - 1);
    assert_eq!(last.header("if-none-match"), Some("\"v2\""), "{last:?}");
    let fetch = t.trace().into_iter().find(|e| e["event"] == "act" && e["tool"] == "web_fetch").unwrap();
    assert_eq!(fetch["data"]["http_cache"]["hit"], "revalidated", "{fetch}");
    assert_eq!(fetch["data"]["http_cache"]["age_seconds"], 86400, "{fetch}");
    // What changed since day 2: only the dated digest and the day's fact.
    let d3: Value = serde_json::from_slice(&t.al(&["runs", "diff", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(d3["facts"]["added"], serde_json::json!(["the feed was read on 2026-01-03"]), "{d3}");
    t.al(&["report"]).assert().success();
    assert!(t.read("ws/report.html").contains("id=\"since-last-run\""));
}

/// A planted skill cannot steer every later run: a learned one-letter trigger is left out (and
/// a draft with no other is refused), a hand-written short trigger matches nothing, a trigger
/// matches whole words only, and the model cannot write a skill with its file tools.
#[test]
fn a_trigger_too_short_to_mean_anything_is_offered_nowhere_and_skills_are_not_the_models_to_write() {
    let t = T::new();
    t.write("ws/notes.txt", "a\nb\nc\n");
    let script = day_one().replace("triggers: [notes digest, morning notes]", "triggers: [e, notes digest]");
    t.write("script.yaml", &script);
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "Morning notes digest"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = t.al(&["--script", "script.yaml", "skills", "learn", "notes-digest"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("left out trigger(s) shorter than 3 letters or digits: \"e\""), "{}", stderr(&out));
    assert!(t.read("ws/skills/notes-digest/SKILL.md").contains("triggers: \"notes digest\"\n"));
    // Only short ones: nothing is written.
    t.write("script.yaml", &day_one().replace("triggers: [notes digest, morning notes]", "triggers: [e, x1]"));
    let out = t.al(&["--script", "script.yaml", "skills", "learn", "other"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("no trigger of meaningful length"), "{}", stderr(&out));
    assert!(!t.exists("ws/skills/other"));
    // Hand-written: `e` matches no goal; `digest` matches the word, not `digested`.
    t.write(
        "ws/skills/short/SKILL.md",
        "---\nname: short\ndescription: Short trigger.\nmetadata:\n  triggers: \"e\"\n---\n# short\n",
    );
    t.write(
        "ws/skills/word/SKILL.md",
        "---\nname: word\ndescription: Word trigger.\nmetadata:\n  triggers: \"digest\"\n---\n# word\n",
    );
    let offered = |goal: &str| {
        let out = t.al(&["--script", "script.yaml", "run", "--new", "--goal", goal, "--dry-run"]).output().unwrap();
        let text = stdout(&out);
        text.lines().find(|l| l.starts_with("Skills whose triggers match the goal: ")).unwrap_or("").to_string()
    };
    let line = offered("Make the weekly digest");
    assert!(line.contains("word") && !line.contains("short"), "{line}");
    let line = offered("Check what was digested");
    assert!(!line.contains("word") && !line.contains("short"), "{line}");
    // The model's file tools may not write a skill.
    let out = t
        .al(&["tools", "call", "file_write", "--args", r#"{"path": "skills/evil/SKILL.md", "content": "x"}"#])
        .output()
        .unwrap();
    assert!(
        stdout(&out).contains("access denied: `skills/` holds agentloop's agent profiles, prompt templates or skills"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(!t.exists("ws/skills/evil"));
}
