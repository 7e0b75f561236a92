//! The loop's limits and its files end to end: a kill at any point resumes, the token and
//! wall-clock budgets hold, sections a person adds survive, templates can be overridden, the
//! demo stays in its folder, and a long log is searched, read and answered.

use crate::common::*;
use crate::loop_::*;
use predicates::prelude::*;

/// Kills the run at each crash point, resumes it, and checks the final workspace equals an
/// uninterrupted run's: no phase skipped, none applied twice.
#[test]
fn resume_after_a_kill_at_any_point() {
    let reference = T::new();
    demo_files(&reference);
    demo_cmd(&reference).assert().success();
    let expected_trace: Vec<String> =
        reference.trace().iter().map(|e| format!("{}/{}", e["event"], e["step"])).collect();
    for point in [
        "commit:journaled",
        "write:plan.md",
        "write:memory.md",
        "write:state.json",
        "commit:trace-line",
        "phase:act:after-tool",
    ] {
        let t = T::new();
        demo_files(&t);
        let out = demo_cmd(&t).env("AGENTLOOP_CRASH_AT", point).output().unwrap();
        let crashed = !out.status.success();
        // Resume until the run ends (each crash point fires at most once per process).
        let mut rounds = 0;
        loop {
            let out = t
                .al(&[
                    "--script",
                    "examples/critique/script.yaml",
                    "--config",
                    "examples/critique/agentloop.yaml",
                    "run",
                ])
                .env("AGENTLOOP_SEED", "7")
                .output()
                .unwrap();
            rounds += 1;
            if out.status.success() {
                break;
            }
            assert!(rounds < 3, "{point}: {}", stderr(&out));
        }
        let got: Vec<String> = t.trace().iter().map(|e| format!("{}/{}", e["event"], e["step"])).collect();
        assert_eq!(got, expected_trace, "crash at {point} (crashed: {crashed})");
        assert_eq!(t.read("ws/memory.md"), reference.read("ws/memory.md"), "{point}");
        assert_eq!(t.read("ws/result.json"), reference.read("ws/result.json"), "{point}");
        assert_eq!(t.read("ws/artifacts/critique.md"), reference.read("ws/artifacts/critique.md"));
    }
}

#[test]
fn token_budget_holds() {
    let t = T::new();
    endless_script(&t, "x", 10);
    let s = t
        .read("script.yaml")
        .replace("rationale: y}", "rationale: y}\n    usage: {input_tokens: 400, output_tokens: 100}");
    t.write("script.yaml", &s);
    let out =
        t.al(&["--script", "script.yaml", "--max-tokens", "1000", "run", "--force", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let r = t.json("ws/result.json");
    assert!(r["reason"].as_str().unwrap().contains("token budget exhausted"), "{r}");
    assert_eq!(r["stop"], "max_tokens", "the limit that ran out");
    assert!(r["usage"]["input_tokens"].as_u64().unwrap() <= 1200);
    // The way on names the flag that raises it, and --continue without raising it is refused.
    let out = t.al(&["--script", "script.yaml", "run"]).output().unwrap();
    assert!(stdout(&out).contains("run --continue --max-tokens 2000` goes on"), "{}", stdout(&out));
    let out = t.al(&["--script", "script.yaml", "--max-tokens", "1000", "run", "--continue"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("max_tokens is still over"), "{}", stderr(&out));
    // The cost budget needs a priced model: see models::cost_budget_holds_over_a_priced_provider.
}

#[test]
fn wall_clock_timeout_escalates() {
    let t = T::new();
    crate::shell_sandbox::bwrap_or_none(&t);
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [sleep]}\n");
    let mut s = String::from(FRAME);
    s.push_str("plan:\n");
    for _ in 0..5 {
        s.push_str(
            "  - answer: {next_action: {tool: shell, args: {argv: [sleep, '1']}}, expected_outcome: x, rationale: y}\n",
        );
    }
    s.push_str("reflect:\n");
    for i in 0..5 {
        s.push_str(&format!("  - answer: {{decision: continue, reason: wait {i}}}\n"));
    }
    t.write("script.yaml", &s);
    let out = t
        .al(&["--script", "script.yaml", "--timeout", "1s", "run", "--goal", "g"])
        .env("AGENTLOOP_MAX_REPEATS", "0")
        .env_remove("AGENTLOOP_NOW")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(t.json("ws/result.json")["reason"].as_str().unwrap().contains("timeout"));
}

#[test]
fn sections_a_person_adds_survive_the_loop() {
    let t = T::new();
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: listed}
"#,
    );
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    t.al(&["--script", "script.yaml", "frame"]).assert().success();
    t.write("ws/skills.md", "# Skills\n(edited by hand)\n");
    let memory = t.read("ws/memory.md") + "\n## Notes from Ana\nPrefer primary sources.\n- and keep it short\n";
    t.write("ws/memory.md", &memory);
    t.al(&["--script", "script.yaml", "plan"]).assert().success().stderr(predicate::str::contains("skills.md differs"));
    assert_eq!(t.read("ws/skills.md"), "# Skills\n(edited by hand)\n", "the loop never rewrites skills.md");
    let plan = t.read("ws/plan.md") + "\n## Reviewer\nLooks fine.\n";
    t.write("ws/plan.md", &plan);
    t.al(&["act"]).assert().success();
    t.al(&["--script", "script.yaml", "reflect"]).assert().success();
    assert!(
        t.read("ws/memory.md").contains("## Notes from Ana\nPrefer primary sources.\n- and keep it short"),
        "{}",
        t.read("ws/memory.md")
    );
    assert!(t.read("ws/plan.md").contains("## Reviewer\nLooks fine."));
}

#[test]
fn escalation_trigger_phrases_stop_the_run() {
    let t = T::new();
    write_script(
        &t,
        "plan:\n  - answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}\nreflect:\n  - answer: {decision: continue, reason: I Need Human Input on which account to use}\n",
    );
    let out = run(&t);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(t.json("ws/result.json")["reason"].as_str().unwrap().contains("escalation trigger `need human input`"));
    assert!(t.read("ws/memory.md").contains("## Open Question\nI Need Human Input on which account to use"));
}

#[test]
fn the_token_budget_is_checked_before_reflect_too() {
    let t = T::new();
    write_script(
        &t,
        "plan:\n  - answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}\n    usage: {input_tokens: 5000, output_tokens: 10}\nreflect:\n  - answer: {decision: continue, reason: more}\n",
    );
    let out =
        t.al(&["--script", "script.yaml", "--max-tokens", "1000", "run", "--force", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let trace = t.trace();
    assert!(!trace.iter().any(|e| e["event"] == "reflect" && e["decision"].is_string()), "no reflect call was made");
    assert!(t.json("ws/result.json")["reason"].as_str().unwrap().contains("token budget exhausted"));
}

#[test]
fn templates_can_be_overridden_and_undefined_variables_fail() {
    let t = T::new();
    let builtin =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/context.md.j2"))
            .unwrap();
    t.write("ws/templates/context.md.j2", &builtin.replace("# Context", "# Brief (team template)"));
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    assert!(t.read("ws/context.md").starts_with("# Brief (team template)"));
    t.write("ws2/templates/context.md.j2", "# Context\n{{ goal }} {{ no_such_variable }}\n");
    t.cmd().args(["init", "ws2", "--goal", "g"]).assert().code(2).stderr(
        predicate::str::contains("template context.md.j2 failed to render").and(predicate::str::contains("undefined")),
    );
}

#[test]
fn the_demo_runs_from_the_binary_alone() {
    let t = T::new();
    let out = t.cmd().args(["demo", "d"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("Wrote a two-paragraph critique"));
    assert!(t.read("d/demo-ws/artifacts/critique.md").contains("# Critique"));
    let r = t.json("d/demo-ws/result.json");
    assert_eq!(r["status"], "done");
    // Its report is written and named; nothing claims a provider answered or anything was spent.
    assert!(stderr(&out).contains("the report: d/demo-ws/report.html"), "{}", stderr(&out));
    let html = t.read("d/demo-ws/report.html");
    assert!(html.contains("<h1 id=\"goal\">Write a two-paragraph critique of the bundled article</h1>"));
    assert!(html.contains("<dd>scripted</dd>") && html.contains("none (a scripted run spends nothing)"));
    assert_eq!((r["model"].clone(), r["cost_usd"].clone()), (serde_json::json!("scripted"), serde_json::Value::Null));
    let ws = |args: &[&str]| {
        let out = t.cmd().args(["-w", "d/demo-ws"]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
    };
    let status = ws(&["status"]);
    assert!(status.contains("model       scripted (answers replayed from a script, offline)\n"), "{status}");
    assert!(status.contains("cost        none (a scripted run spends nothing) of unlimited\n"), "{status}");
    let v: serde_json::Value = serde_json::from_str(&ws(&["status", "--json"])).unwrap();
    assert_eq!(
        (v["model"].clone(), v["budgets"]["cost_usd"]["scripted"].clone()),
        (serde_json::json!("scripted"), serde_json::json!(true))
    );
    assert!(ws(&["runs"]).contains(" scripted "), "runs shows no price");
    assert!(ws(&["trace", "stats"]).lines().last().unwrap().ends_with(" scripted"));
    for e in t.read("d/demo-ws/trace.jsonl").lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()) {
        assert!(e.get("model").is_none_or(|m| m == "scripted") && e.get("cost_usd").is_none(), "{e}");
    }
    let all = [ws(&["trace", "show"]), status, t.read("d/demo-ws/transcript.md"), html].concat();
    assert!(!all.contains("claude") && !all.contains("$0.0"), "no provider model, no price");
}

/// The demo writes nothing outside its folder, even for a user whose config shares long-term
/// memory across workspaces: its memories stay in demo-ws/.agentloop/memory/, and its scripted
/// runs are not counted as anyone's usage.
#[test]
fn the_demo_writes_nothing_outside_its_folder() {
    let t = T::new();
    t.write("xdg/agentloop/config.yaml", "memory: {scope: user}\n");
    let listing = |t: &T| -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![t.root().to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.starts_with(t.path("d")) {
                    continue;
                }
                if p.is_dir() {
                    stack.push(p.clone());
                }
                out.push(p.strip_prefix(t.root()).unwrap().display().to_string());
            }
        }
        out.sort();
        out
    };
    let before = listing(&t);
    for _ in 0..2 {
        let out = t.cmd().args(["demo", "d"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert_eq!(listing(&t), before, "nothing written outside d/");
    let topics = t.read("d/demo-ws/.agentloop/memory/topics.json");
    assert!(topics.contains("outcomes"), "{topics}");
}

/// A line deep inside a 4,000-line log: grep finds it, file_read reads around it by offset and
/// limit, the answer is written at the workspace's top level, and the run is done.
#[test]
fn a_deep_log_line_is_found_read_and_answered() {
    let t = T::new();
    let log: String = (1..=4000)
        .map(|i| if i == 3217 { "3217 ERROR disk full on /dev/sda1\n".to_string() } else { format!("{i} INFO ok\n") })
        .collect();
    t.write("ws/logs/app.log", &log);
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: grep, args: {pattern: ERROR, path: logs}}, expected_outcome: the error line's number, rationale: find it}
  - answer: {next_action: {tool: file_read, args: {path: logs/app.log, offset: 3216, limit: 3}}, expected_outcome: the lines around it, rationale: read around it}
  - answer: {next_action: {tool: file_write, args: {path: answer.txt, content: "line 3217: disk full on /dev/sda1\n"}}, expected_outcome: the answer saved, rationale: y}
reflect:
  - answer: {decision: continue, reason: "grep found logs/app.log:3217"}
  - answer: {satisfied: [{item: 1, steps: [2]}], decision: continue, reason: the line is read}
  - answer: {satisfied: [{item: 2, steps: [3]}, {item: 3, steps: [3]}], decision: done, reason: all met, outcome: the disk is full, artifacts: [answer.txt]}
"#,
    );
    let out = run(&t);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let acts: Vec<serde_json::Value> = t.trace().into_iter().filter(|e| e["phase"] == "act").collect();
    assert_eq!(
        acts[0]["result_summary"],
        "logs/app.log:3217:3217 ERROR disk full on /dev/sda1 [1 match in 1 file (1 file searched)]"
    );
    assert_eq!(
        acts[1]["result_summary"],
        "3216 INFO ok 3217 ERROR disk full on /dev/sda1 3218 INFO ok [lines 3216-3218 of 4000 in logs/app.log; read on with file_read {\"path\": \"logs/app.log\", \"offset\": 3219, \"limit\": 3}]"
    );
    assert_eq!(t.read("ws/answer.txt"), "line 3217: disk full on /dev/sda1\n");
    let result = t.json("ws/result.json");
    assert_eq!(result["status"], "done");
    assert_eq!(result["artifacts"], serde_json::json!(["answer.txt"]));
}

#[test]
fn on_a_terminal_progress_says_when_a_model_call_or_tool_starts() {
    // A pseudo-terminal from util-linux's `script`; without it the check says so and skips.
    if std::process::Command::new("script").arg("--version").output().is_err() {
        missing("`script` (util-linux) is not installed");
        return;
    }
    let t = T::new();
    demo_files(&t);
    let bin = assert_cmd::cargo::cargo_bin("agentloop");
    let line = format!(
        "{} -w ws --script examples/critique/script.yaml --config examples/critique/agentloop.yaml run --goal critique --context examples/critique/context.md 2>&1 >/dev/null",
        bin.display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(t.root())
        .env("AGENTLOOP_NOW", NOW)
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("XDG_CACHE_HOME", t.path("cache"))
        .output()
        .unwrap();
    let text = stdout(&out).replace('\r', "");
    let lines: Vec<&str> = text.lines().collect();
    let asking = lines.iter().position(|l| l.starts_with("[step 1] plan    asking scripted (")).expect(&text);
    let planned = lines.iter().position(|l| l.starts_with("[step 1] plan    skill_read")).expect(&text);
    assert!(asking < planned, "the start is said before the answer:\n{text}");
    let running = lines.iter().position(|l| *l == "[step 1] act     running skill_read…").expect(&text);
    let acted = lines.iter().position(|l| l.starts_with("[step 1] act     skill_read → ok")).expect(&text);
    assert!(running < acted, "{text}");
    // A phase's own entry names its phase once.
    assert!(!text.contains("plan    plan ") && !text.contains("act     act "), "{text}");
}
