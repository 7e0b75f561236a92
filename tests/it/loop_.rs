//! The Frame → Plan → Act → Reflect loop end to end with the scripted model and real tools.

use crate::common::*;
use predicates::prelude::*;

pub(crate) fn demo_cmd(t: &T) -> assert_cmd::Command {
    let mut c = t.al(&[
        "--script",
        "examples/critique/script.yaml",
        "--config",
        "examples/critique/agentloop.yaml",
        "run",
        "--goal",
        "Write a two-paragraph critique of the bundled article",
        "--context",
        "examples/critique/context.md",
    ]);
    c.env("AGENTLOOP_SEED", "7");
    c
}

#[test]
pub(crate) fn happy_path_matches_the_golden_workspace() {
    let t = T::new();
    demo_files(&t);
    let out = demo_cmd(&t).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("Wrote a two-paragraph critique"));
    for f in [
        "memory.md",
        "plan.md",
        "decisions.md",
        "result.json",
        "trace.jsonl",
        "state.json",
        "transcript.md",
        "artifacts/critique.md",
    ] {
        golden(&format!("demo/{f}"), &t.read(&format!("ws/{f}")));
    }
    // Events: every committed entry streamed live; --json prints the completion event.
    let t2 = T::new();
    demo_files(&t2);
    let out = demo_cmd(&t2).arg("--events").output().unwrap();
    let lines: Vec<serde_json::Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), t2.trace().len(), "every entry is streamed, run.started first");
    assert_eq!(lines[0]["event"], "run.started");
    let t3 = T::new();
    demo_files(&t3);
    let out = demo_cmd(&t3).arg("--json").output().unwrap();
    let ev: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ev["type"], "agent.completed");
    assert_eq!(ev["payload"]["artifacts"][0], "artifacts/critique.md");
    // The same command again runs nothing (exit 11); asked for with --follow-up it starts a
    // follow-up: the first run moves to runs/<id>/ and its outcome is carried into the new one.
    let first = ev["payload"]["run_id"].as_str().unwrap().to_string();
    demo_cmd(&t3).assert().code(11);
    demo_cmd(&t3).arg("--follow-up").assert().success();
    assert_eq!(t3.json(&format!("ws/runs/{first}/result.json"))["status"], "done");
    let context = t3.read("ws/context.md");
    assert!(context.contains("## Carried from earlier runs") && context.contains(&format!("Run {first}")), "{context}");
    assert_ne!(t3.json("ws/state.json")["run_id"], first.as_str());
}

#[test]
pub(crate) fn documented_jq_recipes_work_on_the_trace() {
    let t = T::new();
    demo_files(&t);
    demo_cmd(&t).assert().success();
    // Each recipe is in docs/WORKSPACE.md's "Recipes" section.
    let trace = t.trace();
    let tools: Vec<&str> = trace.iter().filter(|e| e["phase"] == "act").map(|e| e["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["skill_read", "file_read", "file_write"]);
    let tokens: u64 =
        trace.iter().filter(|e| e["phase"] != "run").filter_map(|e| e["usage"]["output_tokens"].as_u64()).sum();
    assert_eq!(tokens, 1120);
    let out = t.al(&["trace", "show", "--json", "--phase", "reflect"]).output().unwrap();
    let decisions: Vec<String> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["decision"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(decisions, ["continue", "continue", "done"]);
    // Then every recipe as docs/WORKSPACE.md writes it, run by the shell against this workspace.
    if std::process::Command::new("jq").arg("--version").output().is_err() {
        missing("the documented recipes: jq is not installed (.ci/run installs it)");
        return;
    }
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/WORKSPACE.md")).unwrap();
    let section = &readme[readme.find("### Recipes").expect("a Recipes section")..];
    let block = &section[section.find("```sh\n").unwrap() + 6..];
    let block = &block[..block.find("```").unwrap()];
    let bin_dir = assert_cmd::cargo::cargo_bin("agentloop").parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut checked = 0;
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (command, what) = line.split_once(" # ").map(|(c, w)| (c.trim(), w.trim())).unwrap_or((line.trim(), ""));
        let out = std::process::Command::new("sh")
            .args(["-c", command])
            .current_dir(t.root())
            .env_clear()
            .env("AGENTLOOP_TRUST_ALL", "1")
            .env("PATH", &path)
            .env("HOME", t.path("home"))
            .env("AGENTLOOP_NOW", NOW)
            .output()
            .unwrap();
        assert!(out.status.success(), "recipe `{command}` failed: {}", stderr(&out));
        let text = stdout(&out);
        match what {
            "tools used, in order" => assert_eq!(text, "skill_read\nfile_read\nfile_write\n"),
            "output tokens" => assert_eq!(text.trim(), "1120"),
            "decisions" => assert_eq!(text, "continue\ncontinue\ndone\n"),
            "budgets used and left" => assert!(text.contains("\"steps\"") && text.contains("\"used\""), "{text}"),
            // The demo has no error: nothing on stdout, and stderr says so.
            "what went wrong" => assert!(text.is_empty() && stderr(&out).contains("no errors"), "{text}"),
            "watch a live run" => assert!(text.starts_with("time "), "{text}"),
            other => panic!("a documented recipe this test does not know: `{other}` ({command})"),
        }
        checked += 1;
    }
    assert_eq!(checked, 6, "every recipe in docs/WORKSPACE.md ran");
}

pub(crate) const FRAME: &str =
    "frame:\n  - answer: {goal: g, definition_of_done: [read the file, write the note, say done], can_proceed: true}\n";

pub(crate) fn write_script(t: &T, body: &str) {
    t.write("script.yaml", &format!("{FRAME}{body}"));
    t.write("ws/notes.txt", "some notes\n");
}

pub(crate) fn run(t: &T) -> std::process::Output {
    t.al(&["--script", "script.yaml", "run", "--goal", "g"]).output().unwrap()
}

#[test]
pub(crate) fn tool_error_then_recovery() {
    let t = T::new();
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: file_read, args: {path: missing.txt}}, expected_outcome: x, rationale: y}
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}, expected_outcome: x, rationale: retry the right file}
  - answer: {next_action: {tool: file_write, args: {path: artifacts/n.md, content: note}}, expected_outcome: x, rationale: y}
reflect:
  - answer: {decision: continue, reason: the file was missing; try notes.txt}
  - answer: {satisfied: [{item: 1, steps: [2]}], decision: continue, reason: read}
  - answer: {satisfied: [{item: 2, steps: [3]}, {item: 3, steps: [3]}], decision: done, reason: all met, outcome: note written, artifacts: [artifacts/n.md]}
"#,
    );
    let out = run(&t);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let acts: Vec<serde_json::Value> = t.trace().into_iter().filter(|e| e["phase"] == "act").collect();
    assert_eq!(acts[0]["result_status"], "error");
    assert!(acts[0]["error"].as_str().unwrap().contains("missing.txt: no such file"));
    assert_eq!(acts[1]["result_status"], "ok");
    assert_eq!(t.json("ws/result.json")["steps_taken"], 3);
}

/// A reframe asked for when no step is left spends no framing call: the run stops at once on
/// max_steps, naming what reflect asked.
#[test]
pub(crate) fn a_reframe_with_no_step_left_makes_no_model_call() {
    let t = T::new();
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}
reflect:
  - answer: {decision: reframe, reason: the goal was misread}
"#,
    );
    t.write("ws/agentloop.yaml", "max_steps: 1\n");
    let out = run(&t);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let r = t.json("ws/result.json");
    assert!(
        r["reason"].as_str().unwrap().contains("max_steps reached: 1 of 1 steps used (reflect asked to reframe"),
        "{r}"
    );
    assert_eq!(t.trace().iter().filter(|e| e["phase"] == "frame").count(), 1, "no second framing");
}

#[test]
pub(crate) fn reframe_reenters_frame_and_counts() {
    let t = T::new();
    t.write(
        "script.yaml",
        r#"frame:
  - answer: {goal: first framing, definition_of_done: [a, b, c], can_proceed: true}
  - answer: {goal: second framing, definition_of_done: [x, y, z], can_proceed: true}
plan:
  - answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}
  - answer: {next_action: {tool: finish, args: {summary: finished}}, expected_outcome: x, rationale: y}
reflect:
  - answer: {decision: reframe, reason: the goal was misread}
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: finished}
"#,
    );
    let out = run(&t);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let trace = t.trace();
    let reframe = trace.iter().find(|e| e["event"] == "reframe").expect("reframe entry");
    assert_eq!(reframe["reason"], "the goal was misread");
    assert!(t.read("ws/memory.md").contains("second framing"));
    assert_eq!(t.json("ws/state.json")["reframes"], 1);
}

#[test]
pub(crate) fn max_reframes_escalates_with_budget_code() {
    let t = T::new();
    t.write(
        "script.yaml",
        "- {phase: frame, answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}}\n- {phase: plan, answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}}\n- {phase: reflect, answer: {decision: reframe, reason: again}}\n",
    );
    let out = t.al(&["--script", "script.yaml", "--max-reframes", "0", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(t.json("ws/result.json")["reason"].as_str().unwrap().contains("max_reframes"));
    assert_eq!(t.json("ws/result.json")["stop"], "max_reframes");
}

pub(crate) fn endless_script(t: &T, tool_args: &str, n: usize) {
    let mut s = String::from(FRAME);
    s.push_str("plan:\n");
    for i in 0..n {
        s.push_str(&format!("  - answer: {{next_action: {{tool: file_write, args: {{path: artifacts/s{i}.md, content: {tool_args}}}}}, expected_outcome: x, rationale: y}}\n"));
    }
    s.push_str("reflect:\n");
    for _ in 0..n {
        s.push_str("  - answer: {decision: continue, reason: more}\n");
    }
    t.write("script.yaml", &s);
}

#[test]
pub(crate) fn max_steps_escalates_with_budget_code() {
    let t = T::new();
    endless_script(&t, "x", 10);
    let out = t.al(&["--script", "script.yaml", "--max-steps", "3", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let r = t.json("ws/result.json");
    assert_eq!(r["status"], "escalated");
    assert!(r["reason"].as_str().unwrap().contains("max_steps reached: 3 of 3"));
    assert_eq!(r["steps_taken"], 3);
    let last = t.trace().pop().unwrap();
    assert_eq!(last["event"], "run.finished");
    // stdout carries a done run's answer only: how this run ended is said on stderr.
    assert_eq!(stdout(&out), "");
    let said = format!("escalated: {}\n", r["reason"].as_str().unwrap());
    assert!(stderr(&out).starts_with(&said), "{}", stderr(&out));
    // With -q, `run -q > answer.txt` captures nothing, and stderr holds the reason alone.
    let t = T::new();
    endless_script(&t, "x", 10);
    let out = t.al(&["--script", "script.yaml", "--max-steps", "3", "run", "--goal", "g", "-q"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!((stdout(&out).as_str(), stderr(&out).as_str()), ("", said.as_str()));
}

#[test]
pub(crate) fn repeated_identical_action_escalates() {
    let t = T::new();
    let mut s = String::from(FRAME);
    s.push_str("plan:\n");
    for _ in 0..5 {
        s.push_str("  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}, expected_outcome: x, rationale: y}\n");
    }
    s.push_str("reflect:\n");
    for _ in 0..5 {
        s.push_str("  - answer: {decision: continue, reason: read it again}\n");
    }
    t.write("script.yaml", &s);
    t.write("ws/notes.txt", "same\n");
    t.write("ws/agentloop.yaml", "frustration: {reframe: false}\n");
    let out = run(&t);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(t.json("ws/result.json")["reason"].as_str().unwrap().contains("repeated 3 times"));
}

#[test]
pub(crate) fn consecutive_failures_reframe_once_then_escalate() {
    let t = T::new();
    let mut s = String::from(FRAME);
    s.push_str("  - answer: {goal: g2, definition_of_done: [a, b, c]}\n");
    s.push_str("plan:\n");
    for i in 0..8 {
        s.push_str(&format!("  - answer: {{next_action: {{tool: file_read, args: {{path: gone{i}.txt}}}}, expected_outcome: x, rationale: y}}\n"));
    }
    s.push_str("reflect:\n");
    for _ in 0..8 {
        s.push_str("  - answer: {decision: continue, reason: try another}\n");
    }
    t.write("script.yaml", &s);
    let out = run(&t);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(t.json("ws/result.json")["reason"].as_str().unwrap().contains("3 consecutive tool failures"));
    // Frustration: the score rose with each error, one forced reframe came first, then escalation.
    let trace = t.trace();
    let forced: Vec<&serde_json::Value> = trace.iter().filter(|e| e["event"] == "frustration.reframe").collect();
    assert_eq!(forced.len(), 1);
    assert!(forced[0]["reason"].as_str().unwrap().contains("3 consecutive tool failures"));
    assert_eq!(trace.iter().filter(|e| e["event"] == "reframe").count(), 1, "Frame ran again");
    let scores: Vec<u64> =
        trace.iter().filter(|e| e["event"] == "frustration").map(|e| e["data"]["score"].as_u64().unwrap()).collect();
    assert_eq!(scores, [1, 2, 3, 1, 2, 3]);
    assert_eq!(trace.iter().filter(|e| e["phase"] == "act").count(), 6);
    let state = t.json("ws/state.json");
    assert_eq!((state["frustration"].as_u64(), state["frustration_reframed"].as_bool()), (Some(3), Some(true)));
}

#[test]
pub(crate) fn premature_done_is_refused_then_escalates() {
    let t = T::new();
    endless_script(&t, "x", 6);
    let mut s = t.read("script.yaml");
    s = s.replace(
        "  - answer: {decision: continue, reason: more}\n",
        "  - answer: {satisfied: [{item: 1, steps: [1]}], decision: done, reason: looks fine, outcome: done early}\n",
    );
    t.write("script.yaml", &s);
    t.write("ws/agentloop.yaml", "frustration: {reframe: false}\n");
    let out = run(&t);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let reflects: Vec<serde_json::Value> = t.trace().into_iter().filter(|e| e["phase"] == "reflect").collect();
    assert_eq!(reflects[0]["decision"], "continue");
    assert!(reflects[0]["reason"].as_str().unwrap().contains("`done` refused: open items: write the note; say done"));
    assert_eq!(reflects.len(), 3, "two refusals, then escalation");
    assert!(t.json("ws/result.json")["reason"].as_str().unwrap().contains("declared done 3 times"));
}

#[test]
pub(crate) fn hostile_model_garbage_gets_one_correction_then_escalates() {
    let t = T::new();
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: rm_rf, args: {}}, expected_outcome: x, rationale: y}
  - tool_calls: [{name: plan_answer, arguments: "{not json"}]
"#,
    );
    let out = run(&t);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let r = t.json("ws/result.json");
    assert!(r["reason"].as_str().unwrap().contains("no valid plan answer"), "{r}");
    assert!(t.read("ws/memory.md").contains("## Open Question"));
}

#[test]
pub(crate) fn corrective_retry_recovers_a_bad_tool_choice() {
    let t = T::new();
    // Arguments a tool does not take are refused before Act where its parameters are in the
    // answer's schema (with `catalog`, the default here, they are a failed step: tool_schemas.rs).
    t.write("ws/agentloop.yaml", "llm:\n  tool_schemas: answer\n");
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: file_write, args: {path: artifacts/x.md}}, expected_outcome: x, rationale: y}
  - answer: {next_action: {tool: file_write, args: {path: artifacts/x.md, content: x}}, expected_outcome: x, rationale: y}
reflect:
  - answer: {satisfied: [{item: "1", steps: [1]}, {item: 2, steps: [1]}, {item: "say done", steps: [1]}], decision: Done, reason: ok, outcome: all good}
"#,
    );
    let out = run(&t);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plan = t.trace().into_iter().find(|e| e["phase"] == "plan").unwrap();
    assert_eq!(plan["attempt"], 2);
    assert_eq!(plan["tool"], "file_write");
}

#[test]
pub(crate) fn frame_that_cannot_proceed_escalates_with_the_question() {
    let t = T::new();
    t.write("script.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: false, open_question: Which account should I post from?}\n");
    let out = run(&t);
    assert_eq!(out.status.code(), Some(3));
    assert!(t.read("ws/memory.md").contains("Which account should I post from?"));
    assert!(t.json("ws/result.json")["reason"].as_str().unwrap().contains("Which account"));
    assert_eq!(t.json("ws/result.json")["open_question"], "Which account should I post from?");
}

#[test]
pub(crate) fn stepping_by_hand_honours_an_edited_plan() {
    let t = T::new();
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: file_write, args: {path: artifacts/planned.md, content: planned}}, expected_outcome: x, rationale: y}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: edited run}
"#,
    );
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    t.al(&["act"]).assert().code(2).stderr(predicate::str::contains("expects `frame` next"));
    t.al(&["--script", "script.yaml", "frame"]).assert().success();
    t.al(&["--script", "script.yaml", "plan"]).assert().success();
    let original = t.read("ws/plan.md");
    // Hand edits that cannot run are broken files (exit 8) found before the step is used.
    t.write("ws/plan.md", &original.replace("file_write", "file_wrte"));
    t.al(&["act"])
        .assert()
        .code(8)
        .stderr(predicate::str::contains("plan.md: the edited Next Action cannot run: unknown tool `file_wrte`"));
    t.write("ws/plan.md", &original.replace("\"content\"", "\"contents\""));
    t.al(&["act"]).assert().code(8).stderr(predicate::str::contains("contents"));
    let block =
        original[original.find("```json next-action").unwrap()..].split_inclusive("```\n").take(1).collect::<String>();
    let twice = original.replace(&block, &format!("{block}\n{block}"));
    let out = t.al(&["act"]).output().unwrap();
    assert_eq!(out.status.code(), Some(8));
    t.write("ws/plan.md", &twice);
    let out = t.al(&["act"]).output().unwrap();
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("two Next Action blocks") && stderr(&out).matches("plan.md:").count() == 2,
        "{}",
        stderr(&out)
    );
    assert_eq!(t.json("ws/state.json")["next"], "act", "no step was used");
    let plan = original.replace("planned.md", "edited.md");
    t.write("ws/plan.md", &plan);
    t.al(&["act"]).assert().success().stdout(predicate::str::contains("wrote 7 characters to artifacts/edited.md"));
    assert!(t.exists("ws/artifacts/edited.md") && !t.exists("ws/artifacts/planned.md"));
    let act = t.trace().into_iter().find(|e| e["phase"] == "act").unwrap();
    assert_eq!(act["data"]["edited_by_hand"], true);
    let shown = stdout(&t.al(&["trace", "show", "--phase", "act"]).output().unwrap());
    assert!(shown.contains("[edited by hand] wrote 7 characters"), "{shown}");
    t.al(&["--script", "script.yaml", "reflect"]).assert().success();
    assert_eq!(t.json("ws/result.json")["status"], "done");
}

#[test]
pub(crate) fn a_broken_next_action_names_the_file_and_line() {
    let t = T::new();
    write_script(
        &t,
        "plan:\n  - answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}\n",
    );
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    t.al(&["--script", "script.yaml", "frame"]).assert().success();
    t.al(&["--script", "script.yaml", "plan"]).assert().success();
    let plan = t.read("ws/plan.md").replace("\"tool\": \"list_dir\",", "\"tool\": \"list_dir\"");
    t.write("ws/plan.md", &plan);
    t.al(&["act"]).assert().code(8).stderr(
        predicate::str::contains("ws/plan.md:")
            .and(predicate::str::contains("hint: the Next Action must be one block")),
    );
    let memory = t.read("ws/memory.md").replace("- [ ] read the file", "* read the file");
    t.write("ws/memory.md", &memory);
    t.al(&["--script", "script.yaml", "reflect", "--force"])
        .assert()
        .code(8)
        .stderr(predicate::str::contains("memory.md:").and(predicate::str::contains("not a checkbox")));
}

#[test]
pub(crate) fn disallowed_tool_in_an_edited_plan_is_refused_and_recorded() {
    let t = T::new();
    write_script(
        &t,
        "plan:\n  - answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}\n",
    );
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    t.al(&["--script", "script.yaml", "frame"]).assert().success();
    t.al(&["--script", "script.yaml", "plan"]).assert().success();
    t.al(&["act", "--allowed-tools", "file_read"])
        .assert()
        .code(6)
        .stdout(predicate::str::contains("not in allowed_tools"));
    let act = t.trace().into_iter().find(|e| e["phase"] == "act").unwrap();
    assert_eq!(act["result_status"], "error");
}

/// Whole outputs people read, held byte for byte: `status`, `trace show`, `config show` and the
/// error messages of common mistakes (`UPDATE_GOLDEN=1` rewrites them after a deliberate change).
#[test]
pub(crate) fn status_trace_config_and_errors_are_golden() {
    let t = T::new();
    demo_files(&t);
    demo_cmd(&t).assert().success();
    golden("status.txt", &stdout(&t.al(&["status"]).output().unwrap()));
    golden("trace-show.txt", &stdout(&t.al(&["trace", "show"]).output().unwrap()));
    golden("trace-stats.txt", &stdout(&t.al(&["trace", "stats"]).output().unwrap()));
    golden("config-show.txt", &stdout(&t.al(&["config", "show"]).output().unwrap()));
    let mut errors = String::new();
    let mut case = |what: &str, args: &[&str], setup: &dyn Fn()| {
        setup();
        let out = t.cmd().args(args).output().unwrap();
        errors.push_str(&format!(
            "$ agentloop {}   # {what}\nexit {}\n{}\n",
            args.join(" "),
            out.status.code().unwrap_or(-1),
            stderr(&out)
        ));
    };
    case("a mistyped workspace", &["-w", "wss", "status"], &|| {});
    case("an unknown config key", &["-w", "ws", "status"], &|| t.write("ws/agentloop.yaml", "max_stpes: 3\n"));
    case("a wrong type", &["-w", "ws", "status"], &|| t.write("ws/agentloop.yaml", "max_steps: many\n"));
    case("no provider", &["-w", "fresh", "run", "--goal", "g"], &|| {
        std::fs::remove_file(t.path("ws/agentloop.yaml")).unwrap()
    });
    case("a phase out of turn", &["-w", "ws", "act"], &|| {});
    case("a bad duration flag", &["-w", "ws", "status", "--timeout", "soon"], &|| {});
    golden("errors.txt", &errors);
}

#[test]
pub(crate) fn every_hint_leads_out_of_the_situation() {
    let t = T::new();
    write_script(
        &t,
        "plan:\n  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}, expected_outcome: notes, rationale: read}\n  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}, expected_outcome: notes, rationale: read again}\n",
    );
    t.al(&["init", "--goal", "g"]).assert().success();
    // Out of turn: the hint names the phase the run expects, with the workspace given.
    let out = t.al(&["act"]).output().unwrap();
    assert!(stderr(&out).contains("hint: run `agentloop -w ws frame`, or pass --force"), "{}", stderr(&out));
    t.al(&["--script", "script.yaml", "frame"]).assert().success();
    t.al(&["--script", "script.yaml", "plan"]).assert().success();
    // The Next Action deleted by hand: act says how to get one, and that way works (no act → plan → act loop).
    let plan = t.read("ws/plan.md");
    let start = plan.find("```json next-action").unwrap();
    let end = start + plan[start..].find("\n```\n").unwrap() + 5;
    t.write("ws/plan.md", &format!("{}{}", &plan[..start], &plan[end..]));
    let out = t.al(&["act"]).output().unwrap();
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    let hint = stderr(&out);
    assert!(hint.contains("`agentloop -w ws plan --force`"), "{hint}");
    t.al(&["--script", "script.yaml", "plan", "--force"]).assert().success();
    t.al(&["act"]).assert().success();
}

/// A model that claims every item at its first reflection, citing a step that failed, a step
/// that never ran, files it never touched or that lie outside the workspace, and nothing at all,
/// never reaches done: each tick is refused with why, the model is told, and the run escalates.
#[test]
pub(crate) fn an_overclaiming_model_never_reaches_done() {
    let t = T::new();
    let claim = r#"  - answer: {satisfied: [{item: 1, steps: [1, 9]}, {item: 2, artifacts: [secret.txt, link.md, ../outside.txt, /etc/passwd]}, {item: 3}], decision: done, reason: everything is done, outcome: all of it}
"#;
    write_script(
        &t,
        &format!(
            "plan:\n  - answer: {{next_action: {{tool: file_read, args: {{path: missing.txt}}}}}}\n  - answer: {{next_action: {{tool: list_dir, args: {{}}}}}}\n  - answer: {{next_action: {{tool: file_read, args: {{path: notes.txt}}}}}}\nreflect:\n{claim}{claim}{claim}"
        ),
    );
    t.write("ws/secret.txt", "never read\n");
    t.write("outside.md", "not the workspace's\n");
    std::os::unix::fs::symlink(t.path("outside.md"), t.path("ws/link.md")).unwrap();
    t.write("ws/agentloop.yaml", "frustration: {reframe: false}\n");
    let out = run(&t);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let r = t.json("ws/result.json");
    assert_eq!(r["stop"], "escalated");
    assert!(r["reason"].as_str().unwrap().contains("declared done 3 times"), "{r}");
    let dod = r["definition_of_done"].as_array().unwrap();
    assert_eq!(dod.len(), 3);
    assert!(
        dod.iter().all(|i| i["done"] == false && i["evidence"] == serde_json::json!({"steps": [], "artifacts": []})),
        "{r}"
    );
    // Each refusal is in the trace, naming the item and why.
    let refused: Vec<serde_json::Value> = t.trace().into_iter().filter(|e| e["event"] == "tick.refused").collect();
    assert_eq!(refused.len(), 9, "three items refused at each of three reflections");
    let first: Vec<(u64, Vec<String>)> = refused[..3]
        .iter()
        .map(|e| {
            let reasons = e["data"]["reasons"].as_array().unwrap();
            (e["data"]["item"].as_u64().unwrap(), reasons.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        })
        .collect();
    assert_eq!(
        first,
        [
            (1, vec!["step 1's action failed".to_string(), "step 9 is not a step of this run that ran an action".into()]),
            (
                2,
                vec![
                    "`secret.txt` was not written or read by an action of this run".to_string(),
                    "`link.md` leads outside the workspace".into(),
                    "`../outside.txt` is outside the workspace".into(),
                    "`/etc/passwd` is outside the workspace".into(),
                ]
            ),
            (
                3,
                vec!["no evidence: cite the step whose action showed it (`steps`) and/or a file this run wrote or read (`artifacts`)".to_string()]
            ),
        ]
    );
    assert_eq!(refused[0]["phase"], "reflect");
    assert_eq!(refused[0]["data"]["text"], "read the file");
    assert_eq!(refused[0]["data"]["cited"], serde_json::json!({"steps": [1, 9], "artifacts": []}));
    // decisions.md says it; the next Plan and Reflect prompts tell the model.
    let decisions = t.read("ws/decisions.md");
    assert!(
        decisions.contains("Ticks refused (the items stay open):\n- item 1 (read the file): step 1's action failed"),
        "{decisions}"
    );
    let transcript = t.read("ws/transcript.md");
    let plan2 = &transcript[transcript.find("## step 1 · plan").expect("the second plan call")..];
    assert!(plan2.contains("<refused-ticks>") && plan2.contains("- item 3 (say done): no evidence"), "{plan2}");
    assert!(transcript.contains(
        "Ticks refused at the last reflection (the items stay open):\n- item 1 (read the file): step 1's action failed; step 9"
    ));
    assert!(
        transcript.contains("- item 2 (write the note): `secret.txt` was not written or read by an action of this run")
    );
    let memory = t.read("ws/memory.md");
    assert!(memory.contains("- [ ] read the file\n- [ ] write the note\n- [ ] say done\n"), "{memory}");
}

/// A model that ticks each item citing the step whose action showed it and the files it wrote
/// or read reaches done; the evidence lands in memory.md, result.json and the report.
#[test]
pub(crate) fn an_honest_model_citing_real_steps_and_files_is_done() {
    let t = T::new();
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: file_read, args: {path: ./notes.txt}}}
  - answer: {next_action: {tool: file_write, args: {path: artifacts/note.md, content: a note}}}
  - answer: {next_action: {tool: finish, args: {summary: noted}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1], artifacts: [notes.txt]}], decision: continue, reason: read}
  - answer: {satisfied: [{item: 2, steps: [2], artifacts: [./artifacts/note.md]}], decision: continue, reason: written}
  - answer: {satisfied: [{item: 3, steps: [2]}], decision: done, reason: all met, outcome: noted, artifacts: [artifacts/note.md]}
"#,
    );
    let out = run(&t);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(t.trace().iter().all(|e| e["event"] != "tick.refused"));
    let memory = t.read("ws/memory.md");
    assert!(
        memory.contains(
            "- [x] read the file\n  evidence: step 1, notes.txt\n- [x] write the note\n  evidence: step 2, artifacts/note.md\n- [x] say done\n  evidence: step 2\n"
        ),
        "{memory}"
    );
    let r = t.json("ws/result.json");
    assert_eq!(
        r["definition_of_done"],
        serde_json::json!([
            {"text": "read the file", "done": true, "evidence": {"steps": [1], "artifacts": ["notes.txt"]}},
            {"text": "write the note", "done": true, "evidence": {"steps": [2], "artifacts": ["artifacts/note.md"]}},
            {"text": "say done", "done": true, "evidence": {"steps": [2], "artifacts": []}},
        ])
    );
    t.al(&["report"]).assert().success();
    let html = t.read("ws/report.html");
    assert!(
        html.contains("write the note <span class=\"evidence\">evidence: step 2, artifacts/note.md</span>"),
        "{html}"
    );
}

/// result.json's artifacts are files that exist in the workspace when the run ends: what
/// `finish` and the done decision claimed that is no such file (`*`, a glob, a folder, a file
/// never written) is listed apart under claimed_missing, in result.json, state.json and the
/// report alike.
#[test]
pub(crate) fn only_existing_files_are_artifacts_and_the_rest_is_listed_apart() {
    let t = T::new();
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: file_write, args: {path: artifacts/note.md, content: a note}}}
  - answer: {next_action: {tool: finish, args: {summary: noted, artifacts: ["*", artifacts/note.md, "id.png", artifacts]}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1], artifacts: [artifacts/note.md]}], decision: continue, reason: written}
  - answer: {satisfied: [{item: 3, steps: [1]}], decision: done, reason: all met, outcome: noted, artifacts: [./artifacts/note.md, "*.jpg", ../outside.txt]}
"#,
    );
    t.write("outside.txt", "not the run's");
    let out = run(&t);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = t.json("ws/result.json");
    assert_eq!(r["artifacts"], serde_json::json!(["artifacts/note.md"]), "{r}");
    assert_eq!(r["claimed_missing"], serde_json::json!(["*", "id.png", "artifacts", "*.jpg", "../outside.txt"]), "{r}");
    assert_eq!(t.json("ws/state.json")["claimed_missing"], r["claimed_missing"]);
    t.al(&["report"]).assert().success();
    let html = t.read("ws/report.html");
    let missing = &html[html.find("Claimed but not found in the workspace").expect("the claims are shown apart")..];
    let missing = &missing[..missing.find("</ul>").unwrap()];
    for name in ["<code>*</code>", "<code>id.png</code>", "<code>*.jpg</code>"] {
        assert!(missing.contains(name), "{name}: {missing}");
    }
    assert!(!missing.contains("note.md"), "an existing file is an artifact, not a missing claim");
}

/// After a run stops on a limit, `status` shows the way on (`run --continue` with the flag that
/// raises it), never an open question to answer: nobody is asked anything.
#[test]
pub(crate) fn status_after_a_budget_stop_names_run_continue_not_answer() {
    let t = T::new();
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}
reflect:
  - answer: {decision: continue, reason: more to do}
"#,
    );
    t.write("ws/agentloop.yaml", "max_steps: 1\n");
    let out = run(&t);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let out = t.al(&["status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("run --continue --max-steps"), "{text}");
    for wrong in ["needs a human", "agentloop answer", "open question"] {
        assert!(!text.to_lowercase().contains(wrong), "{wrong}: {text}");
    }
    let out = t.al(&["status", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["open_question"].is_null(), "{v}");
    assert!(v["answer_with"].is_null(), "{v}");
}
