//! A model's or a person's text in the paper trail never makes structure: an outcome, a fact or
//! an answer over several lines, with a heading, a list or a fence in it, stays one item of
//! memory.md and context.md, is read back whole by the next run, and stays one fact in a
//! learned skill's references/facts.md.

use crate::common::*;

const OUTCOME: &str =
    "Digest for 2026-03-01\n## Example News (2026-03-01)\n- Rust 1.90 released\n```\ncargo update\n```\n1. first item";

/// Day 1: a digest whose fact and outcome hold a heading, a list and a fence.
fn day_one() -> String {
    let indented = |s: &str| s.lines().map(|l| format!("        {l}\n")).collect::<String>();
    format!(
        r#"frame:
  - answer: {{goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: file_read, args: {{path: notes.txt}}}}}}
reflect:
  - answer:
      satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}]
      facts: ["the feed has 12 items\n## Feed (raw)\n- not a list"]
      decision: done
      reason: all good
      outcome: |-
{}"#,
        indented(OUTCOME)
    )
}

/// Day 2: framing asks which topics matter, a person answers, the digest is written.
const DAY_TWO: &str = r#"frame:
  - answer: {goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: false, open_question: "Which topics matter?"}
  - answer: {goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: true}
plan:
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: all good, outcome: "Digest for 2026-03-02"}
"#;

/// Day 3: the digest, then `skills learn`'s draft.
const DAY_THREE: &str = r#"frame:
  - answer: {goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: true}
plan:
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: all good, outcome: "Digest for 2026-03-03"}
learn:
  - answer: {description: "The morning digest.", triggers: [digest], instructions: "1. Read notes.txt."}
"#;

const ANSWER: &str = "Rust releases\n# and security advisories";

/// The lines of a markdown file that start a heading, in order.
fn headings(md: &str) -> Vec<&str> {
    md.lines().filter(|l| l.starts_with('#')).collect()
}

/// The items of the list under `## heading`: each top-level `- ` line with the indented lines
/// after it.
fn items(md: &str, heading: &str) -> Vec<String> {
    let start = md.find(&format!("\n## {heading}\n")).unwrap_or_else(|| panic!("## {heading} in\n{md}"));
    let body = &md[start + heading.len() + 5..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let mut out: Vec<String> = Vec::new();
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        match (line.strip_prefix("- "), out.last_mut()) {
            (Some(first), _) => out.push(first.to_string()),
            (None, Some(item)) if line.starts_with("  ") => item.push_str(&format!("\n{}", &line[2..])),
            _ => panic!("a line of ## {heading} outside any item: {line:?}\n{md}"),
        }
    }
    out
}

/// The outcome as an item's lines show it: each line that would make structure escaped.
const OUTCOME_SHOWN: &str = "Digest for 2026-03-01\n\\## Example News (2026-03-01)\n\\- Rust 1.90 released\n\\```\ncargo update\n\\```\n1\\. first item";

const MEMORY_HEADINGS: [&str; 9] = [
    "# Memory",
    "## Goal",
    "## Definition of Done",
    "## Constraints",
    "## Assumptions and Unknowns",
    "## Hypothesis",
    "## Learned Facts",
    "## Status",
    "## Decision Log",
];

#[test]
fn an_outcome_and_an_answer_over_several_lines_stay_one_item_across_runs() {
    let t = T::new();
    t.write("ws/notes.txt", "news\n");
    let run = |script: &str, slot: &str| {
        t.write("script.yaml", script);
        t.al(&["--script", "script.yaml", "run", "--goal", "Today's digest", "--slot", slot]).output().unwrap()
    };
    let out = run(&day_one(), "2026-03-01");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
    let memory = t.read("ws/memory.md");
    assert_eq!(headings(&memory), MEMORY_HEADINGS, "{memory}");
    assert_eq!(items(&memory, "Learned Facts"), ["the feed has 12 items\n\\## Feed (raw)\n\\- not a list (step 1)"]);

    // Day 2 carries the outcome whole, and a person's answer over two lines is one fact.
    let out = run(DAY_TWO, "2026-03-02");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let out = t.al(&["--script", "script.yaml", "answer", ANSWER]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let second = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
    let memory = t.read("ws/memory.md");
    assert_eq!(headings(&memory), MEMORY_HEADINGS, "{memory}");
    let outcome = format!("Run {first} (Today's digest) ended done: {OUTCOME_SHOWN}");
    let feed = format!("the feed has 12 items\n\\## Feed (raw)\n\\- not a list (step 1) (from run {first})");
    let answered = "A person answered \"Which topics matter?\": Rust releases\n\\# and security advisories (step 0)";
    assert_eq!(items(&memory, "Learned Facts"), [feed.as_str(), &outcome, answered], "{memory}");
    let context = t.read("ws/context.md");
    assert_eq!(
        headings(&context),
        ["# Context", "## Goal", "## Run", "## Background", "## Carried from earlier runs"],
        "{context}"
    );
    assert_eq!(items(&context, "Carried from earlier runs"), [feed.as_str(), &outcome], "{context}");

    // Day 3 reads day 2's memory.md back: each item whole, carried again as one.
    let out = run(DAY_THREE, "2026-03-03");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let memory = t.read("ws/memory.md");
    assert_eq!(headings(&memory), MEMORY_HEADINGS, "{memory}");
    let facts = items(&memory, "Learned Facts");
    assert_eq!(facts.len(), 4, "{memory}");
    assert_eq!(facts[0], feed, "{memory}");
    assert_eq!(facts[1], format!("{outcome} (from run {second})"), "{memory}");
    assert_eq!(facts[2], format!("{answered} (from run {second})"), "{memory}");
    assert!(facts[3].starts_with(&format!("Run {second} (Today's digest) ended done: Digest for 2026-03-02")));
    let context = t.read("ws/context.md");
    assert_eq!(items(&context, "Carried from earlier runs"), facts, "{context}");

    // A learned skill's facts: each one item, the answer whole, no heading but the title.
    let out = t.al(&["--script", "script.yaml", "skills", "learn", "digest"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let facts_md = t.read("ws/skills/digest/references/facts.md");
    let title = format!("# Key facts of run {}", t.json("ws/state.json")["run_id"].as_str().unwrap());
    assert_eq!(headings(&facts_md), [title.as_str()], "{facts_md}");
    let listed: Vec<&str> = facts_md.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(
        listed,
        ["- the feed has 12 items", "- A person answered \"Which topics matter?\": Rust releases"],
        "{facts_md}"
    );
    assert!(facts_md.contains("Rust releases\n  \\# and security advisories\n"), "{facts_md}");
}
