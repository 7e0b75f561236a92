//! `llm.fuse_phases`: `run` asks Reflect's question and the next Plan's in one call after each
//! action. The bundled demo run, fused, writes what the unfused one writes; the trace keeps a
//! reflect and a plan entry per step; a bad fused answer gets the corrective retry; and the
//! `plan` and `reflect` commands stay single calls. It is the default (`auto`) for a model
//! server, `false` in the config or the environment turns it off, a script written per phase
//! stays unfused, and a recording of a fused run replays fused.

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
    // The demo's script is written per phase: under the default (`auto`) it is asked so.
    assert!(plain.trace().iter().all(|e| e["data"]["fused"].is_null()), "a per-phase script is not fused");
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

fn reply(i: usize, tool: &str, args: Value) -> Reply {
    Reply::json(
        200,
        json!({"id": format!("c{i}"), "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": format!("call_{i}"), "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    )
}

/// A model server scripted per phase for a two-step run: frame, write a.md, reflect
/// (continue), write b.md, reflect (done).
fn two_step_server() -> Server {
    let write = |name: &str| {
        json!({"next_action": {"tool": "file_write", "args": {"path": format!("artifacts/{name}"), "content": name}},
            "expected_outcome": "written", "rationale": "r"})
    };
    Server::start(vec![
        reply(
            0,
            "frame_answer",
            json!({"goal": "g", "definition_of_done": ["a written", "b written", "both short"], "can_proceed": true}),
        ),
        reply(1, "plan_answer", write("a.md")),
        reply(
            2,
            "reflect_answer",
            json!({"satisfied": [{"item": 1, "steps": [1], "artifacts": ["artifacts/a.md"]}], "decision": "continue", "reason": "a done"}),
        ),
        reply(3, "plan_answer", write("b.md")),
        reply(
            4,
            "reflect_answer",
            json!({"satisfied": [{"item": 2, "steps": [2], "artifacts": ["artifacts/b.md"]}, {"item": 3, "steps": [1, 2]}],
            "decision": "done", "reason": "both", "outcome": "wrote a and b", "artifacts": ["artifacts/a.md", "artifacts/b.md"]}),
        ),
    ])
}

fn server_run(t: &T, url: &str, extra: &[&str]) -> assert_cmd::Command {
    let mut c = t.al(&["--provider", "openai", "--base-url", url, "--model", "m"]);
    c.args(extra).args(["run", "--goal", "write a and b"]).env("OPENAI_API_KEY", "sk-test-fused");
    c
}

/// The forced tool of each request the server got.
fn forced(s: &Server) -> Vec<String> {
    (0..s.count())
        .map(|i| s.request(i).json()["tool_choice"]["function"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_model_server_is_asked_reflect_and_the_next_plan_in_one_call_by_default() {
    let t = T::new();
    let s = two_step_server();
    let out = server_run(&t, &s.url, &["--record", "rec.jsonl"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(forced(&s), ["frame_answer", "plan_answer", "reflect_plan_answer", "reflect_plan_answer"]);
    // A local server caches the prompt's prefix and its template prints the tools first: the
    // Plan call of a fused run sends the fused tool first, byte for byte as the fused calls
    // send it alone, so a switch between the two keeps that part of the prefix.
    let tools = |i: usize| -> Vec<String> {
        let b = s.request(i).json();
        b["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(tools(1), ["reflect_plan_answer", "plan_answer"]);
    assert_eq!(
        (tools(2), tools(3)),
        (vec!["reflect_plan_answer".to_string()], vec!["reflect_plan_answer".to_string()])
    );
    assert_eq!(s.request(1).json()["tools"][0], s.request(2).json()["tools"][0]);
    let trace = t.trace();
    let fused: Vec<&Value> = trace.iter().filter(|e| e["data"]["fused"] == true).collect();
    assert_eq!(
        fused.iter().map(|e| (e["event"].as_str().unwrap(), e["step"].as_u64().unwrap())).collect::<Vec<_>>(),
        [("reflect", 1), ("plan", 2), ("reflect", 2)]
    );
    assert_eq!((t.read("ws/artifacts/a.md"), t.read("ws/artifacts/b.md")), ("a.md".into(), "b.md".into()));
    assert_eq!(t.json("ws/result.json")["status"], "done");
    // The recording holds the fused answers, so replaying it (the scripted model, `auto`) asks
    // the fused call again and writes the same trace.
    let recorded = t.read("rec.jsonl");
    assert_eq!(recorded.lines().filter(|l| l.contains("\"phase\":\"reflect+plan\"")).count(), 2, "{recorded}");
    std::fs::rename(t.path("ws"), t.path("ws_recorded")).unwrap();
    let out = t.al(&["--script", "rec.jsonl", "run", "--goal", "write a and b"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shape = |v: &[Value]| {
        v.iter().map(|e| (e["event"].clone(), e["step"].clone(), e["data"]["fused"].clone())).collect::<Vec<_>>()
    };
    assert_eq!(shape(&t.trace()), shape(&trace));
    assert_eq!(t.read("ws/artifacts/b.md"), "b.md");
}

#[test]
fn fuse_phases_false_in_the_config_or_the_environment_asks_each_phase_apart() {
    for how in ["config", "env"] {
        let t = T::new();
        let s = two_step_server();
        let mut c = server_run(&t, &s.url, &[]);
        if how == "config" {
            t.write("ws/agentloop.yaml", "llm:\n  fuse_phases: false\n");
        } else {
            c.env("AGENTLOOP_LLM__FUSE_PHASES", "false");
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{how}: {}", stderr(&out));
        assert_eq!(
            forced(&s),
            ["frame_answer", "plan_answer", "reflect_answer", "plan_answer", "reflect_answer"],
            "{how}"
        );
        assert!(t.trace().iter().all(|e| e["data"]["fused"].is_null()), "{how}: nothing fused");
        assert_eq!(t.read("ws/artifacts/b.md"), "b.md", "{how}");
    }
    // A value that is none of auto, true, false is refused naming the key, before any call.
    let t = T::new();
    let s = two_step_server();
    let out = server_run(&t, &s.url, &[]).env("AGENTLOOP_LLM__FUSE_PHASES", "sometimes").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("llm.fuse_phases") && e.contains("`sometimes` is not one of auto, true, false"), "{e}");
    assert_eq!(s.count(), 0);
}
