//! A fake chat model on 127.0.0.1 that speaks the OpenAI chat-completions and Anthropic
//! messages wire formats and answers any run: Frame names three Definition-of-Done items, Plan
//! writes `artifacts/out.md`, Reflect ticks every item with that step and ends done with an
//! outcome naming what the prompt carried (so a test sees what reached the model). A
//! `models test` probe asking for a value gets it back. Tests that follow the documents use it
//! wherever a line names a provider; `free_local_model_takes_a_cost_cap` checks the price rule
//! for a model served from a loopback address.

use crate::common::*;
use serde_json::{json, Value};

/// The outcome line the fake model reports: what the run's first prompt said of the date and
/// slot, and the carried facts that reached it (so a test can see them on stdout).
fn outcome(prompt: &str) -> String {
    let pick = |label: &str| {
        // The value's first word: `Date: 2026-01-01 (UTC, ...)` gives the date.
        prompt
            .lines()
            .find_map(|l| l.trim().strip_prefix(label).and_then(|v| v.split_whitespace().next()).map(String::from))
            .unwrap_or_default()
    };
    let answered = if prompt.contains("A person answered") { "yes" } else { "no" };
    format!("Digest for {} (slot {}); a person's answer reached the model: {answered}", pick("Date:"), pick("Slot:"))
}

/// The whole text a request sends (system, messages, tool results), for [`outcome`].
fn prompt_text(body: &Value) -> String {
    let mut out = body["system"].to_string();
    for m in body["messages"].as_array().into_iter().flatten() {
        match &m["content"] {
            Value::String(s) => out.push_str(s),
            v => out.push_str(&v.to_string()),
        }
        out.push('\n');
    }
    out.replace("\\n", "\n")
}

/// How the fake model behaves beyond the plain run.
#[derive(Clone, Copy, Default)]
pub struct Behaviour {
    /// Reflect asks a person which topics matter (escalates) until an answer reaches the prompt.
    pub asks_once: bool,
    /// Reflect learns this many facts a run, all new (named by the run's date), so what a
    /// follow-up carries overflows its cap.
    pub facts: usize,
}

/// The arguments the fake model gives for the answer tool `tool`.
fn answer(tool: &str, body: &Value, b: Behaviour) -> Value {
    let prompt = prompt_text(body);
    if tool == "reflect_answer" && b.asks_once && !prompt.contains("A person answered") {
        return json!({"decision": "escalate", "reason": "need human input: which topics matter most?"});
    }
    if tool == "reflect_answer" && b.facts > 0 {
        let date = prompt.lines().find_map(|l| l.trim().strip_prefix("Date:")).unwrap_or("").trim();
        let facts: Vec<String> = (1..=b.facts).map(|i| format!("item {i} of {date} was reported (step 1)")).collect();
        return json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1], "artifacts": ["artifacts/out.md"]}, {"item": 3, "steps": [1]}],
            "facts": facts, "decision": "done", "reason": "every item is met", "outcome": outcome(&prompt)});
    }
    match tool {
        "frame_answer" => {
            json!({"goal": "the goal", "definition_of_done": ["sources read", "digest written", "result said"], "can_proceed": true})
        }
        "plan_answer" => {
            json!({"next_action": {"tool": "file_write", "args": {"path": "artifacts/out.md", "content": "the digest\n"}},
            "expected_outcome": "written", "rationale": "the goal asks for it"})
        }
        "reflect_answer" => {
            json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1], "artifacts": ["artifacts/out.md"]}, {"item": 3, "steps": [1]}],
            "facts": ["the digest was written (step 1)"], "decision": "done", "reason": "every item is met",
            "outcome": outcome(&prompt_text(body))})
        }
        _ => {
            let (value, _) = Template::default().answer(body);
            json!({"color": value})
        }
    }
}

/// The forced tool a request names (either wire format), or its first tool.
/// Starts the fake model. `/v1/messages` answers in Anthropic's format, anything else in
/// OpenAI's (Ollama's `/v1/chat/completions` included).
pub fn model_server() -> Server {
    model_server_with(Behaviour::default())
}

/// [`model_server`] with a behaviour.
pub fn model_server_with(b: Behaviour) -> Server {
    Server::start_with(move |_, req| {
        let body = req.json();
        let tool = forced_tool(&body);
        let args = answer(&tool, &body, b);
        if req.url.ends_with("/messages") {
            return Reply::json(
                200,
                json!({"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": tool, "input": args}],
                    "stop_reason": "tool_use", "usage": {"input_tokens": 1000, "output_tokens": 100}}),
            );
        }
        Reply::json(
            200,
            json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}}],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}),
        )
    })
}

/// A model with no price served from a loopback address (or by Ollama) costs nothing, so a cost
/// cap takes it; the same model on another host is refused in words (no raw JSON, no advice
/// to rest), naming the `prices:` fix; a price configured for it counts.
#[test]
fn free_local_model_takes_a_cost_cap() {
    let t = T::new();
    let s = model_server();
    let local = ["--provider", "openai", "--base-url", &s.url, "--model", "qwen2.5:7b", "--max-cost", "0.50"];
    let out = t.al(&local).args(["run", "--goal", "Digest of the notes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let frame = t.trace().into_iter().find(|e| e["phase"] == "frame").unwrap();
    assert_eq!(frame["cost_usd"], 0.0, "a local model's call costs $0: {frame}");
    let st: Value = serde_json::from_slice(&t.al(&["status", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(
        (st["budgets"]["cost_usd"]["used"].as_f64(), st["budgets"]["cost_usd"]["incomplete"].as_bool()),
        (Some(0.0), Some(false)),
        "{st}"
    );
    // Ollama, wherever OLLAMA_HOST points, is one's own server.
    let out = t
        .cmd()
        .args(["-w", "ollama", "--provider", "ollama", "--model", "qwen2.5:7b", "--max-cost", "0.50"])
        .args(["run", "--goal", "Digest of the notes"])
        .env("OLLAMA_HOST", &s.url)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Another host: refused before anything starts, in words, with the fix.
    let remote =
        ["--provider", "openai", "--base-url", "http://192.0.2.1:9/v1", "--model", "qwen2.5:7b", "--max-cost", "0.50"];
    let out = t.cmd().args(["-w", "remote"]).args(remote).args(["run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("model `qwen2.5:7b` has no price") && err.contains("prices:"), "{err}");
    assert!(!err.contains("canProceed") && !err.contains("estimatedCost") && !err.contains("agentloop rest"), "{err}");
    assert!(!t.exists("remote"), "nothing was created");
    // A price the user gives for a local model counts against the cap.
    t.write("priced/agentloop.yaml", "prices: {\"qwen2.5\": {input: 100000, output: 100000}}\n");
    let out = t.cmd().args(["-w", "priced"]).args(local).args(["run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("costs about $") && err.contains("max_cost_usd is $0.5000"), "{err}");
    assert!(err.contains("hint: raise --max-cost"), "{err}");
}
