//! The seed's operating modes: long-term memory in the loop, dream, rest, negotiation,
//! frustration (see loop_.rs), compaction, and `finish` ending the loop.

use crate::common::*;
use predicates::prelude::*;
use serde_json::Value;

fn script(reflect: &str) -> String {
    format!(
        r#"frame:
  - answer: {{goal: g, definition_of_done: [notes read, summary written, facts noted]}}
plan:
  - answer: {{next_action: {{tool: file_read, args: {{path: notes.txt}}}}}}
reflect:
  - answer: {reflect}
"#
    )
}

fn run(t: &T, args: &[&str]) -> std::process::Output {
    let mut a = vec!["--script", "script.yaml", "run"];
    a.extend_from_slice(args);
    t.al(&a).output().unwrap()
}

#[test]
fn what_one_run_learns_is_recalled_by_the_next() {
    let t = T::new();
    t.write("ws/notes.txt", "the deploy key is in vault payments\n");
    t.write(
        "script.yaml",
        &script(r#"{satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: summarised, remember: ["Deploy keys for payments live in the vault named payments"]}"#),
    );
    let out = run(&t, &["--goal", "Summarise the deploy notes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
    // The lesson and the outcome are in long-term memory, with where they came from.
    let list = json_out(&t.al(&["memory", "list", "--json"]).output().unwrap());
    let learned = list.as_array().unwrap().iter().find(|e| e["topic"] == "learned").expect("a learned entry");
    assert_eq!(learned["provenance"]["run_id"], first.as_str());
    assert_eq!(learned["provenance"]["step"], 1);
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["topic"] == "outcomes" && e["provenance"]["run_id"] == first.as_str()));
    // A new run about the same thing is shown that entry, and the trace says so.
    let out = run(&t, &["--new", "--goal", "Rotate the payments deploy keys"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let trace = t.trace();
    let frame = trace.iter().find(|e| e["phase"] == "frame").unwrap();
    let shown: Vec<&str> =
        frame["data"]["memory_shown"].as_array().expect("memory_shown").iter().filter_map(Value::as_str).collect();
    assert!(shown.contains(&learned["id"].as_str().unwrap()), "{shown:?}");
    let plan = trace.iter().find(|e| e["phase"] == "plan").unwrap();
    assert!(plan["data"]["memory_shown"].as_array().is_some_and(|a| !a.is_empty()));
    // Off means off.
    t.write("ws/agentloop.yaml", "memory: {enabled: false}\n");
    let out = run(&t, &["--new", "--goal", "Rotate the payments deploy keys again"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(t.trace().iter().all(|e| e["data"]["memory_shown"].is_null()));
}

/// Long-term memory belongs to its workspace: a new workspace recalls nothing another project
/// learned, unless both share a store (`memory.scope: user`, or the same `memory.dir`).
#[test]
fn memory_belongs_to_its_workspace_unless_shared() {
    let t = T::new();
    let learn = r#"{satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: summarised, remember: ["Deploy keys for payments live in the vault named payments"]}"#;
    t.write("script.yaml", &script(learn));
    for ws in ["ws", "other"] {
        t.write(&format!("{ws}/notes.txt"), "n\n");
    }
    let run_in = |ws: &str, goal: &str| {
        let out = t.cmd().args(["-w", ws, "--script", "script.yaml", "run", "--new", "--goal", goal]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        t.read(&format!("{ws}/trace.jsonl"))
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["phase"] == "frame")
            .and_then(|e| e["data"]["memory_shown"].as_array().cloned())
            .unwrap_or_default()
    };
    run_in("ws", "Summarise the payments deploy notes");
    assert!(t.exists("ws/.agentloop/memory/topics.json"), "the workspace's own store");
    assert!(!t.exists("home/.local/share/agentloop"), "nothing in the user's data folder");
    assert!(run_in("other", "Rotate the payments deploy keys").is_empty(), "another project's memory is not recalled");
    assert!(!run_in("ws", "Rotate the payments deploy keys").is_empty(), "its own is");
    // Shared when configured: the user's store (scope) or one folder both name.
    t.write("xdg/agentloop/config.yaml", "memory: {scope: user}\n");
    run_in("ws", "Summarise the payments deploy notes");
    assert!(t.exists("home/.local/share/agentloop/memory/topics.json"));
    assert!(!run_in("other", "Rotate the payments deploy keys").is_empty(), "shared by scope: user");
    t.write("xdg/agentloop/config.yaml", "memory: {dir: ../shared-memory}\n");
    run_in("ws", "Summarise the payments deploy notes");
    assert!(!run_in("other", "Rotate the payments deploy keys").is_empty(), "shared by one memory.dir");
    assert!(t.exists("shared-memory/topics.json"));
    // The key is listed and checked.
    let out = t.al(&["config", "show"]).output().unwrap();
    assert!(stdout(&out).contains("memory.scope = \"workspace\"  # default"), "{}", stdout(&out));
    t.write("ws/agentloop.yaml", "memory: {scope: everyone}\n");
    t.al(&["status"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("memory.scope").and(predicate::str::contains("`workspace` or `user`")));
}

/// An untrusted workspace may keep its memory inside itself but not reach a store it shares
/// with other projects.
#[test]
fn an_untrusted_workspace_may_not_share_memory() {
    let t = T::new();
    t.write("ws/agentloop.yaml", "memory: {scope: workspace, dir: notes/memory}\n");
    let out = t.untrusted().args(["-w", "ws", "config", "show"]).output().unwrap();
    assert!(out.status.success() && !stderr(&out).contains("memory"), "{}", stderr(&out));
    for (yaml, key) in [
        ("memory: {scope: user}\n", "memory.scope"),
        ("memory: {dir: ../elsewhere}\n", "memory.dir"),
        ("tools: {memory: {dir: /tmp/elsewhere}}\n", "tools.memory.dir"),
    ] {
        t.write("ws/agentloop.yaml", yaml);
        let out = t.untrusted().args(["-w", "ws", "config", "show"]).output().unwrap();
        assert!(stderr(&out).contains(key), "{yaml}: {}", stderr(&out));
    }
}

#[test]
fn memory_command_adds_searches_forgets_and_prunes() {
    let t = T::new();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    let id = stdout(
        &t.al(&[
            "memory",
            "add",
            "--topic",
            "notes",
            "--title",
            "Deploys",
            "Deploys happen on Tuesdays",
            "--keywords",
            "tuesdays",
            "--ttl",
            "30d",
        ])
        .output()
        .unwrap(),
    )
    .trim()
    .to_string();
    assert_eq!(id, "notes/content_001");
    t.al(&["memory", "add", "--topic", "notes", "Lunch is at noon"]).assert().success();
    let hits = json_out(&t.al(&["memory", "search", "when are deploys", "--json"]).output().unwrap());
    assert_eq!(hits[0]["id"], "notes/content_001");
    // Each keyword once: the given `--keywords` are not repeated by the ones found in the text.
    let list = json_out(&t.al(&["memory", "list", "--json"]).output().unwrap());
    let kw: Vec<&str> = list[0]["keywords"].as_array().unwrap().iter().filter_map(|k| k.as_str()).collect();
    let mut once = kw.clone();
    once.sort();
    once.dedup();
    assert_eq!(kw.len(), once.len(), "{kw:?}");
    // Words are matched by their stem: LOOP.md's "payments deploy keys" finds "Deploys".
    let hits = json_out(&t.al(&["memory", "search", "payments deploy keys", "-k", "5", "--json"]).output().unwrap());
    assert_eq!(hits[0]["id"], "notes/content_001", "{hits}");
    assert_eq!(hits.as_array().unwrap().len(), 1, "{hits}");
    t.al(&["memory", "show", "notes/content_001"]).assert().success().stdout(predicate::str::contains("Tuesdays"));
    t.al(&["memory", "show", "../etc"]).assert().code(2);
    // 60 days later the first has expired.
    let later = |args: &[&str]| t.al(args).env("AGENTLOOP_NOW", "2026-03-05T00:00:00Z").output().unwrap();
    let list = json_out(&later(&["memory", "list", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), 1);
    let pruned = json_out(&later(&["memory", "prune", "--json"]));
    assert_eq!(pruned["deleted"], serde_json::json!(["notes/content_001"]));
    t.al(&["memory", "forget", "notes/content_002"]).assert().success();
    t.al(&["memory", "forget", "notes/content_002"]).assert().code(2);
}

#[test]
fn dream_consolidates_each_finished_run_once() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    for (goal, fact) in [("day one", "alpha rose"), ("day two", "alpha rose")] {
        t.write(
            "script.yaml",
            &script(&format!(r#"{{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], facts: ["{fact}", "only {goal}"], decision: done, reason: ok, outcome: "{goal} done"}}"#)),
        );
        assert_eq!(run(&t, &["--new", "--goal", goal]).status.code(), Some(0));
    }
    let out = t.al(&["dream", "--no-model", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json_out(&out);
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    let facts: Vec<Value> = json_out(&t.al(&["memory", "list", "--topic", "facts", "--json"]).output().unwrap())
        .as_array()
        .unwrap()
        .clone();
    // "alpha rose" came from both runs: one entry naming both.
    let alpha: Vec<&Value> =
        facts.iter().filter(|f| f["content"].as_str().unwrap().starts_with("alpha rose")).collect();
    assert_eq!(alpha.len(), 1, "{facts:?}");
    assert_eq!(
        alpha[0]["keywords"].as_array().unwrap().iter().filter(|k| k.as_str().unwrap().starts_with("run-")).count(),
        2
    );
    assert_eq!(facts.len(), 3);
    // Idempotent: nothing left to consolidate.
    let v = json_out(&t.al(&["dream", "--no-model", "--json"]).output().unwrap());
    assert_eq!(v["runs"].as_array().unwrap().len(), 0);
}

#[test]
fn a_resting_agent_makes_no_model_call() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    // The agent left to rest by whoever runs it (it would rest itself after the second run).
    t.write("ws/agentloop.yaml", "rest: {window: 24h, max_runs: 2}\nmodes: {auto: false}\n");
    t.write("script.yaml", &script("{satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: fine}"));
    for i in 0..2 {
        assert_eq!(run(&t, &["--new", "--goal", &format!("run {i}")]).status.code(), Some(0));
    }
    let before = t.read("ws/trace.jsonl");
    let out = run(&t, &["--new", "--goal", "run 3"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    assert!(stderr(&out).contains("resting") && stderr(&out).contains("2026-01-02T00:00:00"), "{}", stderr(&out));
    assert_eq!(t.read("ws/trace.jsonl"), before, "nothing was written");
    let st = json_out(&t.al(&["status", "--json"]).output().unwrap());
    assert_eq!(st["rest"]["runs"], 2);
    assert!(st["rest"]["until"].as_str().unwrap().starts_with("2026-01-02T00:00:00"));
    // A day later the window has moved on.
    let out = t
        .al(&["--script", "script.yaml", "run", "--new", "--goal", "run 3"])
        .env("AGENTLOOP_NOW", "2026-01-02T00:00:01Z")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn negotiation_refuses_a_run_that_cannot_fit_and_dry_run_calls_no_model() {
    let t = T::new();
    t.write("script.yaml", &script("{decision: done}"));
    let out = t.al(&["--script", "script.yaml", "--max-tokens", "300", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(stderr(&out).contains("smallest run") && stderr(&out).contains("max_tokens is 300"));
    assert!(!t.exists("ws"), "nothing was created");
    let out = t
        .al(&["--script", "script.yaml", "--max-tokens", "300", "run", "--goal", "g", "--dry-run", "--json"])
        .output()
        .unwrap();
    // The estimate and prompts are printed, and the dry run refuses as the run would.
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let v = json_out(&out);
    assert_eq!(v["fits"], false);
    assert!(v["estimate"]["min_tokens"].as_u64().unwrap() > 300);
    assert!(v["prompts"]["frame"].as_str().unwrap().contains("Frame the task"));
    assert!(v["prompts"]["catalog"].as_str().unwrap().contains("file_read"));
    assert!(!t.exists("ws"));
    // --force starts it anyway (and the budget then stops it as a budget).
    let out =
        t.al(&["--script", "script.yaml", "--max-tokens", "300", "run", "--goal", "g", "--force"]).output().unwrap();
    assert_ne!(out.status.code(), Some(9));
    assert!(stderr(&out).contains("starting anyway (--force): the smallest run"), "{}", stderr(&out));
}

/// `run --dry-run` shows the first prompt exactly as the run sends it: context.md as the run
/// writes it, the skills whose triggers match; a cost cap over a model with no price is
/// refused by both (it could not hold), naming the model and the `prices:` key (a model served
/// from a loopback address is free instead: `models::`).
#[test]
fn dry_run_shows_the_prompt_the_run_sends_and_an_uncountable_cost_cap_is_refused() {
    let t = T::new();
    t.write("script.yaml", &script("{satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: fine}"));
    t.write("ws/notes.txt", "n\n");
    let goal = "Write a critique of the notes";
    let out = t.al(&["--script", "script.yaml", "run", "--goal", goal, "--dry-run", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let frame = json_out(&out)["prompts"]["frame"].as_str().unwrap().to_string();
    assert!(frame.contains("Skills whose triggers match the goal: critique"), "{frame}");
    let out = t.al(&["--script", "script.yaml", "run", "--goal", goal]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let transcript = t.read("ws/transcript.md");
    let first_line = frame.lines().find(|l| l.contains("Skills whose triggers match")).unwrap();
    assert!(transcript.contains(first_line), "the dry run's prompt is the one sent:\n{first_line}\n---\n{transcript}");
    // An unpriced model with a cost cap: refused at start (exit 9), and by the dry run.
    let unpriced =
        ["--provider", "openai", "--base-url", "http://192.0.2.1:9/v1", "--model", "my-local", "--max-cost", "0.5"];
    let out = t.cmd().args(["-w", "fresh"]).args(unpriced).args(["run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("model `my-local` has no price") && stderr(&out).contains("prices:"),
        "{}",
        stderr(&out)
    );
    assert!(!t.exists("fresh"), "nothing created");
    let out = t.cmd().args(["-w", "fresh"]).args(unpriced).args(["run", "--goal", "g", "--dry-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(stdout(&out).contains("fits budget  no: max_cost_usd is $0.50 but model `my-local` has no price"));
    // A hosted provider's model name one letter off a known one fails before a run is created;
    // a new version of a known model does not.
    let typo = ["--provider", "anthropic", "--base-url", "http://127.0.0.1:9", "--model", "claude-sonet-4-5"];
    let out = t
        .cmd()
        .args(["-w", "fresh"])
        .args(typo)
        .args(["run", "--goal", "g"])
        .env("ANTHROPIC_API_KEY", "k")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("model `claude-sonet-4-5` looks like a mistyping of `claude-sonnet-4-5`"),
        "{}",
        stderr(&out)
    );
    assert!(!t.exists("fresh"), "nothing created");
}

#[test]
fn finish_ends_the_loop_even_when_reflect_says_continue() {
    let t = T::new();
    t.write(
        "script.yaml",
        r#"frame:
  - answer: {goal: g, definition_of_done: [a, b, c]}
plan:
  - answer: {next_action: {tool: file_write, args: {path: answer.md, content: "42"}}}
  - answer: {next_action: {tool: finish, args: {summary: "the answer is 42"}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: continue, reason: written}
  - answer: {decision: continue, reason: keep going}
"#,
    );
    let out = run(&t, &["--goal", "g"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = t.json("ws/result.json");
    assert_eq!(r["status"], "done");
    assert_eq!(r["outcome"], "the answer is 42");
}

#[test]
fn compaction_keeps_every_fact_in_the_archive() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("ws/agentloop.yaml", "memory: {compact_facts: 4, compact_with: mechanical}\n");
    let facts: Vec<String> = (1..=6).map(|i| format!("\"fact number {i}\"")).collect();
    t.write(
        "script.yaml",
        &script(&format!(
            "{{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], facts: [{}], decision: done, reason: ok, outcome: fine}}",
            facts.join(", ")
        )),
    );
    let out = run(&t, &["--goal", "g"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
    let memory = t.read("ws/memory.md");
    assert!(
        memory.contains(&format!(
            "Summary of earlier facts (4 facts from run {id} step 1; all in artifacts/facts-archive.md): fact number 1; fact number 2"
        )),
        "{memory}"
    );
    assert!(memory.contains("fact number 6") && !memory.contains("- fact number 1 (step 1)"), "{memory}");
    let archive = t.read("ws/artifacts/facts-archive.md");
    for i in 1..=4 {
        assert!(archive.contains(&format!("fact number {i} (step 1)")), "{archive}");
    }
}

/// Compacting again, in the same run or in a follow-up that carried the summary, folds the
/// earlier summary into one: no summary inside a summary, words cut whole, every run named.
#[test]
fn compaction_summarises_once_at_whole_words_naming_the_runs() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("ws/agentloop.yaml", "memory: {compact_facts: 4, compact_with: mechanical}\n");
    let long = "a remarkably long observation about the quarterly figures that keeps going well past sixty characters";
    let mut ids = Vec::new();
    for (day, goal) in ["first", "second"].iter().enumerate() {
        let facts: Vec<String> = (1..=7).map(|i| format!("\"{long} item{day}{i}\"")).collect();
        t.write(
            "script.yaml",
            &format!(
                r#"frame:
  - answer: {{goal: g, definition_of_done: [notes read, summary written, facts noted]}}
plan:
  - answer: {{next_action: {{tool: file_read, args: {{path: notes.txt}}}}}}
  - answer: {{next_action: {{tool: file_read, args: {{path: notes.txt}}}}}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1]}}], facts: [{}], decision: continue, reason: more}}
  - answer: {{satisfied: [{{item: 2, steps: [2]}}, {{item: 3, steps: [2]}}], facts: [{}], decision: done, reason: ok, outcome: fine}}
"#,
                facts[..4].join(", "),
                facts[4..].join(", ")
            ),
        );
        let out = run(&t, &["--goal", goal]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        ids.push(t.json("ws/state.json")["run_id"].as_str().unwrap().to_string());
    }
    let memory = t.read("ws/memory.md");
    assert_eq!(memory.matches("Summary of earlier facts").count(), 1, "one summary, none nested: {memory}");
    let line = memory.lines().find(|l| l.contains("Summary of earlier facts")).unwrap();
    for id in &ids {
        assert!(line.contains(&format!("run {id}")), "names run {id}: {line}");
    }
    // Every word of the summary's text is a whole word of the facts.
    let body = line.split_once("): ").unwrap().1;
    for w in body.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        assert!(long.split(' ').any(|x| x == w) || w.starts_with("item"), "`{w}` is cut: {line}");
    }
    assert!(body.chars().count() <= 601, "{body}");
}

/// A fact learned again — later in the run, or by a follow-up it is carried into — stays one
/// line listing every source.
#[test]
fn a_fact_learned_in_several_runs_is_kept_once_with_every_source() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    let mut ids = Vec::new();
    for goal in ["one", "two", "three"] {
        t.write(
            "script.yaml",
            &script("{satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], facts: [\"the feed has 12 items\", \"The feed has 12 items.\"], decision: done, reason: ok, outcome: fine}"),
        );
        let out = run(&t, &["--goal", goal]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        ids.push(t.json("ws/state.json")["run_id"].as_str().unwrap().to_string());
    }
    let memory = t.read("ws/memory.md");
    let lines: Vec<&str> = memory.lines().filter(|l| l.to_lowercase().contains("the feed has 12 items")).collect();
    assert_eq!(lines.len(), 1, "{memory}");
    assert!(
        lines[0].contains(&format!("step 1, from run {}; step 1, from run {}; step 1)", ids[0], ids[1])),
        "{}",
        lines[0]
    );
}

#[test]
fn agent_profiles_carry_identity_skills_and_budgets() {
    let t = T::new();
    t.write("ws/identity.md", "You are Ada, a careful release engineer.\n");
    t.write("ws/agents/ada.yaml", "system_prompt_file: identity.md\nsystem_prompt: Prefer small steps.\nskills: {only: [critique]}\nmax_loops: 3\nmemory: {enabled: false}\n");
    let out = t.al(&["agents", "show", "ada", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json_out(&out);
    assert_eq!(v["config"]["max_steps"], 3, "max_loops is max_steps");
    assert!(v["sources"]["max_steps"].as_str().unwrap().ends_with("(agent profile)"));
    assert_eq!(v["system_prompt"], "You are Ada, a careful release engineer.\n\nPrefer small steps.");
    // Only the profile's skills are offered.
    let out = t.al(&["--agent", "ada", "skills", "gen", "--format", "json"]).output().unwrap();
    let cat = json_out(&out);
    let names: Vec<&str> = cat["skills"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["critique"]);
    // The identity reaches every phase's system prompt (the transcript shows what was sent).
    t.write("script.yaml", &script("{satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: fine}"));
    t.write("ws/notes.txt", "n\n");
    let out = t.al(&["--agent", "ada", "--script", "script.yaml", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let transcript = t.read("ws/transcript.md");
    assert_eq!(transcript.matches("You are Ada, a careful release engineer.").count(), 3, "frame, plan, reflect");
    assert_eq!(t.json("ws/state.json")["limits"]["max_steps"], 3);
    let r = t.json("ws/result.json");
    assert_eq!(r["tools_called"], serde_json::json!(["file_read"]));
    assert!(r["duration_ms"].is_u64());
    // The run records its agent: state, result, the trace's run.started, runs and status.
    assert_eq!(r["agent"], "ada");
    assert_eq!(t.json("ws/state.json")["agent"], "ada");
    assert_eq!(t.trace()[0]["data"]["agent"], "ada");
    let runs: serde_json::Value = serde_json::from_slice(&t.al(&["runs", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(runs[0]["agent"], "ada");
    let status: serde_json::Value =
        serde_json::from_slice(&t.al(&["status", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(status["agent"], "ada");
    // --skills narrows for one invocation; an unknown name is refused, not ignored.
    t.al(&["--skills", "nope", "--script", "script.yaml", "run", "--new", "--goal", "g"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nope"));
    t.write("ws/agents/bad.yaml", "max_loops: 3\nmax_steps: 4\n");
    t.al(&["agents", "show", "bad"]).assert().code(2).stderr(predicate::str::contains("max_loops"));
    t.write("ws/agents/lost.yaml", "system_prompt_file: nowhere.md\n");
    t.al(&["agents", "show", "lost"]).assert().code(2).stderr(predicate::str::contains("system_prompt_file"));
}

#[test]
fn diagnostics_go_to_a_rotated_log_with_secrets_redacted() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("ws/agentloop.yaml", "logging: {level: debug, file: logs/agentloop.log, format: json, max_bytes: 2048, keep: 2}\nmax_tokens: 100000\n");
    t.write("script.yaml", &script("{satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: fine}"));
    for i in 0..3 {
        let out = t
            .al(&[
                "--script",
                "script.yaml",
                "run",
                "--new",
                "--goal",
                &format!("check hunter2secret {i} aHVudGVyMnNlY3JldA=="),
            ])
            .env("DEPLOY_TOKEN", "hunter2secret")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let log = t.read("ws/logs/agentloop.log");
    let all = format!("{log}{}", t.read("ws/logs/agentloop.log.1"));
    assert!(t.exists("ws/logs/agentloop.log.1") && !t.exists("ws/logs/agentloop.log.3"), "rotated, 2 kept");
    assert!(!all.contains("hunter2secret") && all.contains("[REDACTED]"), "{all}");
    assert!(!all.contains("aHVudGVyMnNlY3JldA"), "the log redacts a secret's encodings too: {all}");
    let lines: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.iter().all(|l| l["ts"].is_string() && l["level"].is_string()));
    assert!(all.contains("config sources: ") && all.contains("logging.file from"), "{all}");
    assert!(all.contains("negotiation: smallest run"), "{all}");
    // A person reads it: no `None`, no `Some(..)`, an unset limit said in words.
    assert!(!all.contains("None") && !all.contains("Some("), "{all}");
    assert!(all.contains("limits: tokens 100000, cost none"), "{all}");
    t.write("ws/agentloop.yaml", "logging: {level: loud}\n");
    t.al(&["status"]).assert().code(2).stderr(predicate::str::contains("logging.level"));
}

#[test]
fn a_configured_secret_is_written_nowhere() {
    let t = T::new();
    let key = "sk-live-abcdef1234567890";
    let b64 = "c2stbGl2ZS1hYmNkZWYxMjM0NTY3ODkw"; // base64 of the key
    let page = format!("echo: {key} and {b64}");
    let s = Server::start(vec![Reply::text(200, "text/plain", &page)]);
    t.write("ws/agentloop.yaml", "tools:\n  http:\n    allow_private: true\n");
    t.write(
        "script.yaml",
        &format!(
            r#"frame:
  - answer: {{goal: g, definition_of_done: [a, b, c]}}
plan:
  - answer: {{next_action: {{tool: http_call, args: {{method: GET, url: "{}/echo"}}}}}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], facts: ["the page echoed {key}"], decision: done, reason: "saw {b64}", outcome: "key {key}"}}
"#,
            s.url
        ),
    );
    let out = t
        .al(&["--script", "script.yaml", "--record", "rec.jsonl", "run", "--goal", "g"])
        .env("OPENAI_API_KEY", key)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut files = vec![t.path("rec.jsonl")];
    let mut stack = vec![t.path("ws")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path())
            } else {
                files.push(e.path())
            }
        }
    }
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        assert!(!text.contains(key) && !text.contains(b64), "{} holds the key:\n{text}", f.display());
    }
    assert!(t.read("ws/memory.md").contains("[REDACTED]"));
    assert!(!stdout(&out).contains(key));
}
