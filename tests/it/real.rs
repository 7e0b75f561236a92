//! The real-model check behind `make test-real`: a few goals run against a real
//! OpenAI-compatible server. Ignored by default (CI and `make test` stay offline); without
//! `AGENTLOOP_REAL_BASE_URL` it is skipped with a note.
//!
//! - `AGENTLOOP_REAL_BASE_URL`: the server, e.g. `http://127.0.0.1:8088/v1`
//! - `AGENTLOOP_REAL_MODEL`: the model id (default `smollm2`)
//! - `AGENTLOOP_REAL_LOG`: the server's log (optional): HTTP 5xx lines it gains during the runs
//!   fail the check. `models test` runs first and sends rejected shapes on purpose, so the
//!   log is read only from after it.
//!
//! - `AGENTLOOP_REAL_CHAT_FORMAT`: the server's chat format (optional): with
//!   `chatml-function-calling` (upstream llama-cpp-python, whose template drops `role: tool`
//!   messages) `models test` must flag the dropped tool result; with another format it must not.
//!
//! Asserted: `models test` finds a form that answers; every run ends `done` or `escalated`
//! (exit 0, 3 or 4; a provider failure, exit 5, fails the check) with a consistent workspace;
//! at least one action was executed over all runs; no HTTP 5xx during the runs. And what small
//! models need: every answer the grammar produced was taken or refused for a reason the model
//! was shown (each corrective retry's prompt holds the error, never "not a JSON object" for an
//! answer that was not cut off); no request ran past its bound unrecorded (each answer within
//! its phase's token cap, each read timeout in the trace and the transcript).

use crate::common::*;
use serde_json::Value;

/// Goals a very small model has a chance with; files they need are written first.
const GOALS: &[(&str, &[(&str, &str)])] = &[
    ("Write a one-line note saying hello into artifacts/hello.md", &[]),
    ("Read notes.txt and write its first line into artifacts/first.md", &[("notes.txt", "apples\npears\nplums\n")]),
    (
        "Find which line of todo.txt mentions milk and record it in artifacts/milk.md",
        &[("todo.txt", "bread\nmilk, two litres\neggs\n")],
    ),
];

const CONFIG: &str = "allowed_tools: [file_read, file_write, grep]\nmax_steps: 3\ntimeout: 20m\n";

#[test]
#[ignore = "needs a real model server: make test-real"]
fn real_server_runs_end_cleanly() {
    let Some(base) = std::env::var("AGENTLOOP_REAL_BASE_URL").ok().filter(|v| !v.trim().is_empty()) else {
        eprintln!("skipped: set AGENTLOOP_REAL_BASE_URL (e.g. http://127.0.0.1:8088/v1) to run the real-model check");
        return;
    };
    let model = std::env::var("AGENTLOOP_REAL_MODEL").unwrap_or_else(|_| "smollm2".into());
    let log = std::env::var("AGENTLOOP_REAL_LOG").ok().filter(|v| !v.trim().is_empty());
    let t = T::new();
    let llm = ["--provider", "openai", "--base-url", base.as_str(), "--model", model.as_str()];

    let out = t.cmd().args(["-w", "probe"]).args(llm).args(["models", "test"]).output().unwrap();
    eprintln!("{}", stdout(&out));
    assert!(out.status.success(), "models test: {}", stderr(&out));
    assert!(!stdout(&out).contains("no form gave the answer"), "no request form answered");
    if let Some(format) = std::env::var("AGENTLOOP_REAL_CHAT_FORMAT").ok().filter(|v| !v.trim().is_empty()) {
        let dropped = stdout(&out).contains("the tool result was dropped");
        // The upstream handler renders no `role: tool` message: models test must say so.
        assert_eq!(dropped, format == "chatml-function-calling", "chat format {format}: {}", stdout(&out));
    }

    let log_from = log.as_ref().map(|l| std::fs::metadata(l).map(|m| m.len()).unwrap_or(0));
    let mut actions = 0;
    for (i, (goal, files)) in GOALS.iter().enumerate() {
        let ws = format!("ws{i}");
        t.write(&format!("{ws}/agentloop.yaml"), CONFIG);
        for (name, text) in *files {
            t.write(&format!("{ws}/{name}"), text);
        }
        let out = t
            .cmd()
            .env_remove("AGENTLOOP_NOW")
            .args(["-w", ws.as_str()])
            .args(llm)
            .args(["run", "--goal", goal])
            .output()
            .unwrap();
        let code = out.status.code().unwrap_or(-1);
        let trace: Vec<Value> =
            t.read(&format!("{ws}/trace.jsonl")).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let acts = check_workspace(&t, &ws, &trace);
        check_small_model_needs(&t, &ws, &trace);
        actions += acts;
        let result = t.json(&format!("{ws}/result.json"));
        let mut forms: Vec<&str> = trace.iter().filter_map(|e| e["wire_form"].as_str()).collect();
        forms.dedup();
        eprintln!(
            "run {i}: exit {code}, {}, {} steps, {acts} actions ({}), forms {forms:?}, corrective retries {}: {}",
            result["status"].as_str().unwrap_or("?"),
            result["steps_taken"],
            trace
                .iter()
                .filter(|e| e["phase"] == "act")
                .map(|e| format!(
                    "{}:{}",
                    e["tool"].as_str().unwrap_or("?"),
                    e["result_status"].as_str().unwrap_or("?")
                ))
                .collect::<Vec<_>>()
                .join(" "),
            trace.iter().filter(|e| e["attempt"].as_u64() == Some(2)).count(),
            result["reason"].as_str().unwrap_or("")
        );
        assert!([0, 3, 4].contains(&code), "run {i} ({goal}): exit {code}: {}", stderr(&out));
    }
    assert!(actions >= 1, "no action was executed in any run");

    if let (Some(log), Some(from)) = (log, log_from) {
        let text = std::fs::read(&log).unwrap_or_default();
        let text = String::from_utf8_lossy(&text[(from as usize).min(text.len())..]).into_owned();
        let requests = text.lines().filter(|l| l.contains("\"POST ")).count();
        let errors: Vec<&str> = text.lines().filter(|l| is_5xx(l)).collect();
        eprintln!("server log: {requests} requests during the runs, {} answered with HTTP 5xx", errors.len());
        assert!(errors.is_empty(), "HTTP 5xx during the runs:\n{}", errors.join("\n"));
    }
}

/// What a small model needs of the loop, read from a run's trace and transcript: refusals it was
/// shown, answers within their cap, timeouts on record.
fn check_small_model_needs(t: &T, ws: &str, trace: &[Value]) {
    let transcript = t.read(&format!("{ws}/transcript.md"));
    // Every corrective retry shows the model the error it made.
    // Split at the transcript's own headings: an answer a retry echoes may hold a `## ` line.
    let sections: Vec<&str> = transcript.split("\n## step ").collect();
    let unshown: Vec<String> = sections
        .iter()
        .filter(|s| s.contains("model call (attempt 2,") && !s.contains("error:"))
        .map(|s| s.chars().take(3000).collect())
        .collect();
    assert!(
        unshown.is_empty(),
        "{ws}: a corrective retry without the error in its prompt:\n{}",
        unshown.join("\n---\n")
    );
    for e in trace {
        let error = e["error"].as_str().unwrap_or("");
        // The grammar emits JSON: a refusal as "not a JSON object" means an answer was dropped
        // that the grammar allowed, unless the cap cut it off (and the model was told so).
        assert!(
            !error.contains("not a JSON object") || error.contains("cut off"),
            "{ws}: an answer the grammar allowed was refused: {error}"
        );
        // Each answer within its call's cap (llm.max_tokens 4096: plan and a fused Reflect+Plan
        // call half, the rest a quarter); a fused call's usage is on its reflect entry.
        if let (Some(phase), Some(out)) = (e["phase"].as_str(), e["usage"]["output_tokens"].as_u64()) {
            let cap = if phase == "plan" || e["data"]["fused"] == true { 2048 } else { 1024 };
            let attempts = e["attempt"].as_u64().unwrap_or(1);
            if e["event"] != "run.finished" {
                assert!(out <= cap * attempts, "{ws}: {phase} generated {out} tokens, over {attempts} × {cap}");
            }
        }
    }
    // Every read timeout is on record in both places.
    let timeouts = trace.iter().filter(|e| e["event"] == "model.timeout").count();
    assert_eq!(transcript.matches("model call timed out").count(), timeouts, "{ws}: timeouts not in the transcript");
}

/// An access-log line with a 5xx status: `"POST /v1/chat/completions HTTP/1.1" 500 ...`.
fn is_5xx(line: &str) -> bool {
    line.split_once("HTTP/1.1\" ").is_some_and(|(_, rest)| rest.starts_with('5'))
}

/// The workspace of a finished run is whole: result and state agree, every trace line
/// parses, the run has a start and an end, every planned action was executed, and the status
/// command reads it. Returns the number of actions executed.
fn check_workspace(t: &T, ws: &str, trace: &[Value]) -> usize {
    let result = t.json(&format!("{ws}/result.json"));
    let status = result["status"].as_str().unwrap_or("");
    assert!(["done", "escalated"].contains(&status), "{ws}: result.json status {status:?}");
    let state = t.json(&format!("{ws}/state.json"));
    assert_eq!(state["run_id"], result["run_id"], "{ws}: state.json and result.json name one run");
    for f in ["context.md", "memory.md", "plan.md", "decisions.md"] {
        assert!(t.exists(&format!("{ws}/{f}")), "{ws}: {f} is missing");
    }
    assert_eq!(trace.first().map(|e| e["event"].clone()), Some("run.started".into()), "{ws}: trace start");
    assert_eq!(trace.last().map(|e| e["event"].clone()), Some("run.finished".into()), "{ws}: trace end");
    assert_eq!(trace.last().unwrap()["decision"], status, "{ws}: the trace ends with the result's status");
    // Planned actions: plan entries that chose a tool (a failed plan records an error instead).
    let steps = |phase: &str| -> Vec<u64> {
        trace
            .iter()
            .filter(|e| e["phase"] == phase && e["tool"].is_string())
            .filter_map(|e| e["step"].as_u64())
            .collect()
    };
    assert_eq!(steps("plan"), steps("act"), "{ws}: every planned action is executed");
    let out = t.cmd().args(["-w", ws, "status", "--json"]).output().unwrap();
    assert!(out.status.success(), "{ws}: status: {}", stderr(&out));
    steps("act").len()
}

/// Each answer schema (frame, plan, reflect, and reflect with plan) is a grammar llama.cpp's own
/// parser takes, as the harness's llama-cpp-python server builds it for a forced tool call: a
/// grammar it refused would leave the model unconstrained. Needs the harness (its venv and model).
#[test]
#[ignore = "needs ../shared/harness: make test-real"]
fn every_answer_schema_is_a_grammar_llama_cpp_takes() {
    let h = std::env::var("HARNESS_DIR").unwrap_or_else(|_| {
        let cache =
            std::env::var("XDG_CACHE_HOME").unwrap_or_else(|_| format!("{}/.cache", std::env::var("HOME").unwrap()));
        format!("{cache}/agentloop-harness")
    });
    let python = format!("{h}/venv/bin/python");
    let model = format!("{h}/models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !std::path::Path::new(&python).exists() || !std::path::Path::new(&model).exists() {
        crate::common::missing(&format!("the harness's venv and model in {h}"));
        return;
    }
    let t = T::new();
    let dir = t.root().join("schemas");
    let dumped = std::process::Command::new(env!("CARGO"))
        .args(["test", "--test", "it", "contracts::dump_answer_schemas", "--", "--exact"])
        .env("AGENTLOOP_DUMP_SCHEMAS", &dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(dumped.status.success(), "{}", String::from_utf8_lossy(&dumped.stderr));
    let files: Vec<String> = ["frame", "plan", "reflect", "fused", "plan-catalog", "fused-catalog"]
        .iter()
        .map(|n| dir.join(format!("{n}.json")).to_string_lossy().into_owned())
        .collect();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/harness/grammars.py");
    let out = std::process::Command::new(&python).arg(script).arg(&model).args(&files).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(said.matches(" ok").count(), 6, "{said}");
}
