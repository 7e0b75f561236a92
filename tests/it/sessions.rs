//! Named sessions (`run --session NAME`): each run is a turn of the session, and the model's
//! request for the next turn holds the earlier ones — what each was asked and what it answered
//! — across invocations, while another session (or a run of none) stays apart.

use crate::common::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// A fake Anthropic API: each run frames, then looks at the workspace (a step that backs the
/// ticks), and Reflect ends it done with the answer `answer-N` (N counts the runs).
fn model() -> Server {
    let runs = Arc::new(Mutex::new(0usize));
    Server::start_with(move |i, req| {
        let body = req.json();
        let tool = body["tool_choice"]["name"].as_str().unwrap_or("").to_string();
        let n = {
            let mut r = runs.lock().unwrap();
            if tool == "frame_answer" {
                *r += 1;
            }
            *r
        };
        let input = match tool.as_str() {
            "frame_answer" => {
                json!({"goal": "answer the message", "definition_of_done": ["read the message", "answered it", "said it plainly"], "can_proceed": true})
            }
            "plan_answer" => json!({"next_action": {"tool": "list_dir", "args": {}},
                "expected_outcome": "the files", "rationale": "look first"}),
            "reflect_answer" => {
                json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "answered",
                "outcome": format!("answer-{n}")})
            }
            other => panic!("no answer for `{other}`"),
        };
        Reply::json(
            200,
            json!({"id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "tool_use", "id": format!("tu_{i}"), "name": tool, "input": input}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}),
        )
    })
}

fn run(t: &T, m: &Server, args: &[&str]) -> std::process::Output {
    let mut c = t.al(&["--provider", "anthropic", "--base-url", &m.url, "run"]);
    c.args(args).env("ANTHROPIC_API_KEY", "sk-ant-test");
    c.output().unwrap()
}

/// context.md as the `n`th frame request (0-based) quoted it: what a run's first model call
/// was told of the task. (Long-term memory's recall, apart from it, may name any earlier run.)
fn frame_request(m: &Server, n: usize) -> String {
    let frames: Vec<Value> =
        (0..m.count()).map(|i| m.request(i).json()).filter(|b| b["tool_choice"]["name"] == "frame_answer").collect();
    let text = frames[n]["messages"][0]["content"][0]["text"].as_str().unwrap_or_default().to_string();
    let start = text.find("<context.md>").unwrap_or_else(|| panic!("{}", frames[n]));
    let end = text.find("</context.md>").unwrap_or(text.len());
    text[start..end].to_string()
}

#[test]
fn a_session_goes_on_as_one_conversation_and_another_stays_apart() {
    let t = T::new();
    let m = model();
    let out = run(&t, &m, &["--session", "alpha", "--goal", "What is the capital of France?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = t.json("ws/state.json");
    assert_eq!(first["session"], "alpha");
    assert_eq!(t.json("ws/result.json")["outcome"], "answer-1");
    assert_eq!(t.trace()[0]["data"]["session"], "alpha");
    // Another session in the same workspace: it sees nothing of alpha.
    let out = run(&t, &m, &["--session", "beta", "--goal", "Name a colour"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let beta = frame_request(&m, 1);
    assert!(!beta.contains("capital of France") && !beta.contains("answer-1"), "{beta}");
    // The next turn of alpha, in a new invocation: its request holds alpha's exchange, and
    // nothing of beta's.
    let out = run(&t, &m, &["--session", "alpha", "--goal", "And of Italy?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let next = frame_request(&m, 2);
    assert!(next.contains("Session `alpha`: the conversation so far"), "{next}");
    assert!(next.contains("What is the capital of France?") && next.contains("**Agent**: answer-1"), "{next}");
    assert!(!next.contains("Name a colour") && !next.contains("answer-2"), "{next}");
    assert!(t.read("ws/context.md").contains(&format!("**User** (run {})", first["run_id"].as_str().unwrap())));
    // Nothing was carried as facts: a session's context is its conversation.
    assert!(!t.read("ws/memory.md").contains("(from run "), "{}", t.read("ws/memory.md"));
    // The same message again is a new turn, not a repeat of the run before.
    let out = run(&t, &m, &["--session", "alpha", "--goal", "And of Italy?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let again = frame_request(&m, 3);
    assert!(again.contains("answer-1") && again.contains("answer-3"), "{again}");
    assert!(stdout(&t.al(&["status"]).output().unwrap()).contains("session     alpha"));
    assert_eq!(json_status(&t)["session"], "alpha");
    // A run of no session carries facts as a follow-up does, and no conversation.
    let out = run(&t, &m, &["--goal", "Something else"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!frame_request(&m, 4).contains("conversation so far"));
}

fn json_status(t: &T) -> Value {
    serde_json::from_slice(&t.al(&["status", "--json"]).output().unwrap().stdout).unwrap()
}

#[test]
fn a_session_name_is_checked_before_anything_is_written() {
    let t = T::new();
    let out = t.al(&["run", "--session", "a b/c", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--session: `a b/c` is not a session name"), "{}", stderr(&out));
    assert!(stderr(&out).contains("hint:"), "{}", stderr(&out));
    assert!(!t.exists("ws"));
    let out = t.al(&["run", "--session", "s"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "--session needs --goal: {}", stderr(&out));
}
