//! `llm.fuse_phases`: `run` asks Reflect's question and the next Plan's in one call after each
//! action. The bundled demo run, fused, writes what the unfused one writes; the trace keeps a
//! reflect and a plan entry per step; a bad fused answer gets the corrective retry; and the
//! `plan` and `reflect` commands stay single calls.

use crate::common::*;
use serde_json::{json, Value};

/// The demo's script (keyed by phase) as a fused run asks for it: frame, the first plan, then
/// each reflection with the next plan beside it, under the fused call's own queue.
fn fused_script(bad_first: bool) -> String {
    let src =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/critique/script.yaml"))
            .unwrap();
    let s: Value = serde_yaml_ng::from_str(&src).unwrap();
    let (plans, reflections) = (s["plan"].as_array().unwrap(), s["reflect"].as_array().unwrap());
    let mut fused: Vec<Value> = reflections
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut answer = json!({"reflect": r["answer"]});
            if let Some(p) = plans.get(i + 1) {
                answer["plan"] = p["answer"].clone();
            }
            json!({"answer": answer, "usage": r["usage"]})
        })
        .collect();
    if bad_first {
        let mut bad = fused[0].clone();
        bad["answer"]["plan"]["next_action"] = json!({"tool": "no_such_tool", "args": {}});
        fused.insert(0, bad);
    }
    let script = json!({"frame": s["frame"], "plan": [plans[0]], "reflect+plan": fused});
    serde_yaml_ng::to_string(&script).unwrap()
}

fn fused_run(t: &T, bad_first: bool) -> std::process::Output {
    demo_files(t);
    t.write("examples/critique/fused.yaml", &fused_script(bad_first));
    let config = t.read("examples/critique/agentloop.yaml") + "llm:\n  fuse_phases: true\n";
    t.write("examples/critique/fused-config.yaml", &config);
    t.al(&[
        "--script",
        "examples/critique/fused.yaml",
        "--config",
        "examples/critique/fused-config.yaml",
        "run",
        "--goal",
        "Write a two-paragraph critique of the bundled article",
        "--context",
        "examples/critique/context.md",
    ])
    .env("AGENTLOOP_SEED", "7")
    .output()
    .unwrap()
}

fn calls(trace: &[Value]) -> usize {
    trace.iter().filter(|e| e["usage"].is_object() && e["phase"] != "run").count()
}

#[test]
fn a_fused_run_asks_once_per_step_and_writes_what_an_unfused_run_writes() {
    let plain = T::new();
    demo_files(&plain);
    let plain_out = crate::loop_::demo_cmd(&plain).output().unwrap();
    assert_eq!(plain_out.status.code(), Some(0), "{}", stderr(&plain_out));
    let t = T::new();
    let out = fused_run(&t, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&plain_out));
    for f in ["plan.md", "decisions.md", "memory.md", "artifacts/critique.md"] {
        assert_eq!(t.read(&format!("ws/{f}")), plain.read(&format!("ws/{f}")), "{f} differs from the unfused run's");
    }
    // Frame, the first plan, then one call per step: 5 calls where the unfused run made 7.
    let trace = t.trace();
    assert_eq!(calls(&plain.trace()), 7);
    assert_eq!(calls(&trace), 5);
    let of =
        |phase: &str| trace.iter().filter(|e| e["phase"] == phase && e["event"] == phase).cloned().collect::<Vec<_>>();
    let (plans, reflections) = (of("plan"), of("reflect"));
    assert_eq!((plans.len(), reflections.len()), (3, 3));
    // The first plan is a call of its own; the later ones came with a reflection and carry no
    // usage of their own (the call's is on the reflect entry), both marked.
    assert!(plans[0]["usage"].is_object() && plans[0]["data"]["fused"].is_null(), "{}", plans[0]);
    for p in &plans[1..] {
        assert_eq!(p["data"]["fused"], true, "{p}");
        assert!(p["usage"].is_null() && p["model"] == "scripted", "{p}");
    }
    for r in &reflections {
        assert_eq!(r["data"]["fused"], true, "{r}");
        assert!(r["usage"].is_object(), "{r}");
    }
    assert_eq!(
        plans.iter().map(|p| p["tool"].as_str().unwrap()).collect::<Vec<_>>(),
        ["skill_read", "file_read", "file_write"]
    );
    // Usage is counted once: the run's total is its calls' sum, the unfused run's less the two
    // plans (2,980 and 3,120 input tokens) that needed no call of their own.
    let input: u64 =
        trace.iter().filter(|e| e["phase"] != "run").filter_map(|e| e["usage"]["input_tokens"].as_u64()).sum();
    let total = |t: &T| t.json("ws/result.json")["usage"]["input_tokens"].as_u64().unwrap();
    assert_eq!(input, total(&t));
    assert_eq!(total(&t), total(&plain) - 2980 - 3120);
    // `trace show --phase plan` lists every plan, as it does for an unfused run.
    let shown = stdout(&t.al(&["trace", "show", "--json", "--phase", "plan"]).output().unwrap());
    assert_eq!(shown.lines().count(), 3, "{shown}");
}

#[test]
fn a_bad_fused_answer_gets_the_corrective_retry() {
    let t = T::new();
    let out = fused_run(&t, true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let trace = t.trace();
    let first = trace.iter().find(|e| e["event"] == "reflect").unwrap();
    assert_eq!(first["attempt"], 2, "{first}");
    let transcript = t.read("ws/transcript.md");
    assert!(transcript.contains("no_such_tool"), "the refused answer is on record");
    let plans: Vec<&Value> = trace.iter().filter(|e| e["event"] == "plan").collect();
    assert_eq!(plans[1]["tool"], "file_read", "the corrected answer's plan is the one taken");
}

#[test]
fn plan_and_reflect_alone_stay_single_calls_with_fusing_on() {
    let t = T::new();
    demo_files(&t);
    t.write("ws-config.yaml", "llm:\n  fuse_phases: true\n");
    let script = "examples/critique/script.yaml";
    let cfg = ["--config", "ws-config.yaml", "--script", script];
    t.cmd().args(["init", "ws", "--goal", "Write a two-paragraph critique of the bundled article"]).assert().success();
    for phase in ["frame", "plan", "act", "reflect", "plan"] {
        let mut a = cfg.to_vec();
        a.push(phase);
        let out = t.al(&a).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{phase}: {}", stderr(&out));
    }
    let trace = t.trace();
    let models: Vec<&Value> = trace.iter().filter(|e| e["usage"].is_object() && e["phase"] != "run").collect();
    assert_eq!(models.len(), 4, "frame, plan, reflect and plan: one call each");
    assert!(trace.iter().all(|e| e["data"]["fused"].is_null()), "nothing fused");
    assert_eq!(t.json("ws/state.json")["next"], "act");
}
