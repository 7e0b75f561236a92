//! Providers against fake servers on 127.0.0.1 that speak the real wire formats.

use crate::common::*;
use predicates::prelude::*;
use serde_json::{json, Value};

const KEY: &str = "sk-ant-test-SECRET-1234";

fn anthropic_tool_reply(name: &str, input: Value) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "toolu_01", "name": name, "input": input}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 50, "cache_read_input_tokens": 1000}
        }),
    )
    .header("request-id", "req_123")
}

fn openai_tool_reply(name: &str, args: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}]}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 10, "total_tokens": 130, "prompt_tokens_details": {"cached_tokens": 100}}
        }),
    )
    .header("x-request-id", "req_oai")
}

fn anthropic(t: &T, base: &str, args: &[&str]) -> assert_cmd::Command {
    let mut c = t.al(&["--provider", "anthropic", "--base-url", base]);
    c.args(args).env("ANTHROPIC_API_KEY", KEY).env("AGENTLOOP_LLM__BACKOFF_MS", "10");
    c
}

#[test]
fn anthropic_request_matches_the_messages_api() {
    let t = T::new();
    let s = Server::start(vec![anthropic_tool_reply("report_color", json!({"color": "blue"}))]);
    let out = anthropic(&t, &s.url, &["models", "test", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tool_calling"], true);
    assert_eq!(v["request_id"], "req_123");
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 100, "output_tokens": 20, "cache_write_tokens": 50, "cache_read_tokens": 1000})
    );
    // 100*3 + 20*15 + 50*3.75 + 1000*0.3 per million
    assert_eq!(v["cost_usd"], 0.0010875);
    let req = s.request(0);
    assert_eq!(req.method, "POST");
    assert_eq!(req.url, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some(KEY));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(
        req.json(),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 256,
            "system": [{"type": "text", "text": "You are a connectivity check. Call the tool exactly as asked.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Call report_color with color set to \"blue\"."}]}],
            "tools": [{"name": "report_color", "description": "Report a colour.", "input_schema": {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}, "cache_control": {"type": "ephemeral"}}],
            "tool_choice": {"type": "tool", "name": "report_color"},
            "temperature": 0.0
        })
    );
}

#[test]
fn anthropic_retries_429_with_retry_after_then_succeeds() {
    let t = T::new();
    let s = Server::start(vec![
        Reply::json(429, json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}))
            .header("retry-after", "1"),
        Reply::json(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})),
        anthropic_tool_reply("report_color", json!({"color": "blue"})),
    ]);
    let start = std::time::Instant::now();
    let out = anthropic(&t, &s.url, &["-v", "models", "test"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(s.count(), 3);
    assert!(start.elapsed() >= std::time::Duration::from_millis(950), "retry-after honoured");
    // -v shows each request's endpoint and attempt, and every retry wait with its cause.
    let err = stderr(&out);
    assert!(err.contains(&format!("debug: provider anthropic: POST {}/v1/messages (attempt 1 of 4", s.url)), "{err}");
    assert!(err.contains("attempt 3 of 4"), "{err}");
    assert!(
        err.contains("provider anthropic: HTTP 429 (rate_limit_error): slow down")
            && err.contains("; attempt 2 of 4 in 1.0s"),
        "{err}"
    );
}

#[test]
fn server_errors_until_attempts_run_out_exit_5() {
    let t = T::new();
    let s = Server::start(vec![Reply::json(
        500,
        json!({"type": "error", "error": {"type": "api_error", "message": "internal"}}),
    )
    .header("request-id", "req_500")]);
    let out = anthropic(&t, &s.url, &["models", "test"]).env("AGENTLOOP_LLM__ATTEMPTS", "3").output().unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(s.count(), 3);
    let err = stderr(&out);
    assert!(err.contains("HTTP 500 (api_error): internal; request id req_500 (after 3 attempts)"), "{err}");
}

#[test]
fn unauthorized_is_not_retried_and_the_key_never_shows() {
    let t = T::new();
    let s = Server::start(vec![Reply::json(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key {KEY}")}}),
    )]);
    let out = anthropic(&t, &s.url, &["models", "test"]).output().unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(s.count(), 1);
    let err = stderr(&out);
    assert!(err.contains("authentication_error") && !err.contains(KEY) && err.contains("[REDACTED]"), "{err}");
}

#[test]
fn non_json_and_oversized_bodies_are_errors() {
    let t = T::new();
    let s = Server::start(vec![Reply::text(200, "text/html", "<html>gateway</html>")]);
    anthropic(&t, &s.url, &["models", "test"]).assert().code(5).stderr(predicate::str::contains("not JSON"));
    let big =
        Server::start(vec![Reply::text(200, "application/json", &format!("{{\"x\": \"{}\"}}", "a".repeat(5000)))]);
    anthropic(&t, &big.url, &["models", "test"])
        .env("AGENTLOOP_LLM__MAX_RESPONSE_BYTES", "1000")
        .assert()
        .code(5)
        .stderr(predicate::str::contains("larger than llm.max_response_bytes"));
    let t2 = T::new();
    t2.al(&["--provider", "anthropic", "--base-url", "http://127.0.0.1:9", "models", "test"])
        .env("ANTHROPIC_API_KEY", KEY)
        .env("AGENTLOOP_LLM__ATTEMPTS", "2")
        .env("AGENTLOOP_LLM__BACKOFF_MS", "10")
        .assert()
        .code(5)
        .stderr(predicate::str::contains("cannot reach"));
}

#[test]
fn openai_request_and_cached_usage() {
    let t = T::new();
    let s = Server::start(vec![openai_tool_reply("report_color", "{\"color\": \"blue\"}")]);
    let out = t
        .al(&[
            "--provider",
            "openai",
            "--base-url",
            &format!("{}/v1", s.url),
            "--model",
            "gpt-4o-mini",
            "models",
            "test",
            "--json",
        ])
        .env("OPENAI_API_KEY", "sk-oai-SECRET")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tool_calling"], true);
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 20, "output_tokens": 10, "cache_write_tokens": 0, "cache_read_tokens": 100})
    );
    let req = s.request(0);
    assert_eq!(req.url, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer sk-oai-SECRET"));
    assert_eq!(
        req.json(),
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "You are a connectivity check. Call the tool exactly as asked."},
                {"role": "user", "content": "Call report_color with color set to \"blue\"."}
            ],
            "max_tokens": 256,
            "temperature": 0.0,
            "tools": [{"type": "function", "function": {"name": "report_color", "description": "Report a colour.", "parameters": {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}}}],
            "tool_choice": {"type": "function", "function": {"name": "report_color"}}
        })
    );
    // One request per form; the named form answered first, so it is the one runs use; then
    // the two probes in that form.
    assert_eq!(s.count(), 8);
    assert_eq!(s.request(7).json()["tool_choice"], json!({"type": "function", "function": {"name": "report_color"}}));
    assert_eq!(v["wire_form"], "tool_named");
    let forms: Vec<&str> = v["wire_forms"].as_array().unwrap().iter().map(|f| f["form"].as_str().unwrap()).collect();
    assert_eq!(forms, ["tool_named", "tool_required", "tool_auto", "json_schema", "json_object", "json_prompt"]);
}

#[test]
fn ollama_needs_no_key_and_uses_ollama_host() {
    let t = T::new();
    let s = Server::start(vec![openai_tool_reply("report_color", "{\"color\": \"blue\"}")]);
    let out = t
        .al(&["--provider", "ollama", "--model", "qwen2.5:0.5b", "models", "test"])
        .env("OLLAMA_HOST", &s.url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let req = s.request(0);
    assert_eq!(req.url, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), None);
}

#[test]
fn auto_provider_says_what_to_set() {
    let t = T::new();
    t.al(&["models", "test"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("set ANTHROPIC_API_KEY").and(predicate::str::contains("OLLAMA_HOST")));
    let s = Server::start(vec![openai_tool_reply("report_color", "{\"color\": \"blue\"}")]);
    t.al(&["models", "test", "--json"])
        .env("OLLAMA_HOST", &s.url)
        .assert()
        .success()
        .stdout(predicate::str::contains("\"provider\": \"ollama\""));
}

fn loop_script_server(kind: &str) -> Server {
    let kind = kind.to_string();
    Server::start_with(move |i, req| {
        let body = req.json();
        let anthropic = kind == "anthropic";
        let tool = if anthropic {
            body["tool_choice"]["name"].as_str().unwrap().to_string()
        } else {
            body["tool_choice"]["function"]["name"].as_str().unwrap().to_string()
        };
        let args = match tool.as_str() {
            "frame_answer" => {
                json!({"goal": "g", "definition_of_done": ["a", "b", "c"], "can_proceed": true})
            }
            "plan_answer" if i == 1 => {
                json!({"next_action": {"tool": "file_wrte", "args": "{\"path\": \"artifacts/x.md\"}"}, "expected_outcome": "x", "rationale": "y"})
            }
            "plan_answer" => {
                json!({"next_action": {"tool": "file_write", "args": {"path": "artifacts/x.md", "content": "hello"}}, "expected_outcome": "x", "rationale": "y"})
            }
            _ => {
                json!({"satisfied": [{"item": 1, "steps": [1], "artifacts": ["artifacts/x.md"]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "ok", "outcome": "wrote x", "artifacts": ["artifacts/x.md"]})
            }
        };
        if anthropic {
            anthropic_tool_reply(&tool, args)
        } else if i == 1 {
            // Malformed arguments: the loop must correct, not crash.
            openai_tool_reply(&tool, "{\"next_action\": {\"tool\": ")
        } else {
            openai_tool_reply(&tool, &args.to_string())
        }
    })
}

#[test]
fn full_loop_over_anthropic_records_usage_cost_and_no_key() {
    let t = T::new();
    let s = loop_script_server("anthropic");
    let out = anthropic(&t, &s.url, &["run", "--goal", "write x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let frame = t.trace().into_iter().find(|e| e["phase"] == "frame").unwrap();
    assert_eq!(frame["usage"]["cache_read_tokens"], 1000);
    assert_eq!(frame["cost_usd"], 0.0010875);
    assert!(frame["prompt_bytes"].as_u64().unwrap() > 100);
    // The corrective retry sent the error back as a tool_result.
    let retry = s.request(2).json();
    let msgs = retry["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][0]["is_error"], true);
    for entry in walk(t.path("ws")) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(!text.contains(KEY), "key leaked into {}", entry.display());
    }
}

fn walk(dir: std::path::PathBuf) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn full_loop_over_openai_corrects_malformed_arguments() {
    let t = T::new();
    // Corrections as tool results (on a local server nobody probed, `auto` sends user messages).
    t.write("ws/agentloop.yaml", "llm:\n  tool_messages: tool\n");
    let s = loop_script_server("openai");
    let out = t.al(&["--provider", "openai", "--base-url", &s.url, "run", "--goal", "write x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let retry = s.request(2).json();
    let msgs = retry["messages"].as_array().unwrap();
    assert_eq!(msgs[2]["role"], "assistant");
    assert_eq!(msgs[2]["tool_calls"][0]["function"]["arguments"], "{\"next_action\": {\"tool\": ");
    assert_eq!(msgs[3]["role"], "tool");
    assert_eq!(msgs[3]["tool_call_id"], "call_1");
    assert_eq!(t.read("ws/artifacts/x.md"), "hello");
}

#[test]
fn openai_json_in_text_fallback_for_servers_without_tools() {
    let t = T::new();
    let s = Server::start_with(|_, req| {
        let body = req.json();
        if body.get("tools").is_some() {
            return Reply::json(
                400,
                json!({"error": {"message": "tools are not supported by this model", "type": "invalid_request_error"}}),
            );
        }
        if body["response_format"]["type"] == "json_schema" {
            return Reply::json(
                400,
                json!({"error": {"message": "response_format.type must be json_object", "type": "invalid_request_error"}}),
            );
        }
        Reply::json(
            200,
            json!({"choices": [{"message": {"role": "assistant", "content": "Here:\n```json\n{\"color\": \"blue\"}\n```"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 5}}),
        )
    });
    let out = t.al(&["--provider", "openai", "--base-url", &s.url, "models", "test", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tool_calling"], true);
    assert_eq!(v["tool_call"]["arguments"]["color"], "blue");
    assert_eq!(v["wire_form"], "json_object");
    let statuses: Vec<u64> =
        v["wire_forms"].as_array().unwrap().iter().map(|f| f["status"].as_u64().unwrap()).collect();
    assert_eq!(statuses, [400, 400, 400, 400, 200, 200]);
    assert_eq!(s.count(), 8, "each form once, then the two probes in json_object");
    assert_eq!(s.request(7).json()["response_format"], json!({"type": "json_object"}));
    assert_eq!(s.request(4).json()["response_format"], json!({"type": "json_object"}));
}

#[test]
fn scripted_runs_out_with_a_clear_error() {
    let t = T::new();
    t.write("s.yaml", "- phase: frame\n  answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\n");
    let out = t.al(&["--script", "s.yaml", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert!(t.json("ws/result.json")["reason"]
        .as_str()
        .unwrap()
        .contains("ran out: all 1 response used and phase `plan` asked for another"));
    t.write("bad.yaml", "- {phase: frame, answr: {}}\n");
    t.al(&["--script", "bad.yaml", "models", "test"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("response 1").and(predicate::str::contains("answr")));
}

#[test]
fn record_then_replay_offline_is_identical() {
    let t = T::new();
    let s = loop_script_server("anthropic");
    let out = anthropic(&t, &s.url, &["--record", "rec.jsonl", "run", "--goal", "write x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let recorded = t.read("rec.jsonl");
    assert!(!recorded.contains(KEY));
    assert_eq!(recorded.lines().count(), 4);
    let original: Vec<Value> = t.trace();
    std::fs::rename(t.path("ws"), t.path("ws_original")).unwrap();
    let out = t.al(&["--script", "rec.jsonl", "run", "--goal", "write x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let strip = |v: &Vec<Value>| {
        v.iter()
            .map(|e| {
                let mut e = e.clone();
                // The same but for who answered and what it cost (checked below).
                for k in ["run_id", "model", "cost_usd"] {
                    e.as_object_mut().unwrap().remove(k);
                }
                e
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&t.trace()), strip(&original));
    // The replay spent nothing: its model is `scripted`, never the recorded one, and it has no
    // cost; transcript.md says where each replayed answer came from.
    let replay = t.trace();
    for e in replay.iter().filter(|e| e.get("usage").is_some() && e["event"] != "run.finished") {
        assert_eq!(e["model"], "scripted", "{e}");
        assert!(e.get("cost_usd").is_none(), "a replay has no cost: {e}");
    }
    let r = t.json("ws/result.json");
    assert_eq!((r["model"].clone(), r["cost_usd"].clone()), (json!("scripted"), Value::Null));
    assert!(original.iter().any(|e| e["cost_usd"].as_f64().is_some_and(|c| c > 0.0)), "the recorded run was priced");
    assert!(t
        .read("ws/transcript.md")
        .contains("model call (attempt 1, scripted, replaying an answer recorded from claude-sonnet-4-5-20250929)"));
}

#[test]
fn cost_budget_holds_over_a_priced_provider() {
    let t = T::new();
    // Every Reflect says continue: only the cost budget ends the run (0.0010875 USD a call).
    let s = Server::start_with(|_, req| {
        let tool = req.json()["tool_choice"]["name"].as_str().unwrap().to_string();
        let args = match tool.as_str() {
            "frame_answer" => json!({"goal": "g", "definition_of_done": ["a", "b", "c"], "can_proceed": true}),
            "plan_answer" => {
                json!({"next_action": {"tool": "list_dir", "args": {}}, "expected_outcome": "x", "rationale": "y"})
            }
            _ => json!({"decision": "continue", "reason": "more"}),
        };
        anthropic_tool_reply(&tool, args)
    });
    let out = anthropic(&t, &s.url, &["--max-cost", "0.004", "run", "--force", "--goal", "g"])
        .env("AGENTLOOP_MAX_REPEATS", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let r = t.json("ws/result.json");
    assert!(r["reason"].as_str().unwrap().contains("cost budget exhausted"), "{r}");
    assert_eq!(r["stop"], "max_cost_usd");
    assert!(r["cost_usd"].as_f64().unwrap() >= 0.004, "{r}");
    assert_eq!(r["model"], "claude-sonnet-4-5-20250929");
}

#[test]
fn tool_calls_printed_as_text_are_understood() {
    let t = T::new();
    let s = Server::start(vec![Reply::json(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": "<tool_call>\n{\"name\": \"report_color\", \"arguments\": {\"color\": \"blue\"}}\n</tool_call>"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 5}}),
    )]);
    let out = t.al(&["--provider", "openai", "--base-url", &s.url, "models", "test", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tool_call"]["arguments"], json!({"color": "blue"}), "{v}");
}

#[test]
fn servers_without_tools_or_json_mode_still_work() {
    let t = T::new();
    let s = Server::start_with(|_, req| {
        let body = req.json();
        if body.get("tools").is_some() {
            return Reply::json(400, json!({"error": {"message": "this model does not support tools"}}));
        }
        if body.get("response_format").is_some() {
            return Reply::json(400, json!({"error": {"message": "'response_format' is not supported"}}));
        }
        // A model that reports what the prompt asks for; the tool result reaches it as text.
        let (color, _) = Template::default().answer(&req.json());
        Reply::json(
            200,
            json!({"choices": [{"message": {"role": "assistant", "content": json!({"color": color}).to_string()}, "finish_reason": "stop"}]}),
        )
    });
    let out = t.al(&["--provider", "openai", "--base-url", &s.url, "models", "test"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("tool calling  works through JSON in text (json_prompt)"), "{text}");
    assert!(
        text.contains("tool_named     tool_choice {type: function, function: {name}}  400   rejected: HTTP 400: this model does not support tools"),
        "{text}"
    );
    assert!(text.contains("json_prompt    JSON instruction only"), "{text}");
    assert!(text.trim_end().ends_with("<- used"), "{text}");
    assert_eq!(s.count(), 8);
}

#[test]
fn a_hanging_server_cannot_outlast_the_run_timeout() {
    let t = T::new();
    let s = Server::start_with(|_, _| {
        std::thread::sleep(std::time::Duration::from_secs(8));
        Reply::json(500, json!({}))
    });
    let start = std::time::Instant::now();
    let out = t
        .al(&["--provider", "openai", "--base-url", &s.url, "--timeout", "2s", "run", "--goal", "g"])
        .env_remove("AGENTLOOP_NOW")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(start.elapsed() < std::time::Duration::from_secs(6), "took {:?}", start.elapsed());
    assert!(t.json("ws/result.json")["reason"].as_str().unwrap().contains("timeout"));
}

/// A weak local model behind an OpenAI-compatible server: it never uses native tool calls,
/// prints its calls as `<tool_call>` text, writes lists as strings and capitalises words.
#[test]
fn a_weak_local_model_still_finishes() {
    let t = T::new();
    let s = Server::start_with(|_, req| {
        let body = req.json();
        let mut system = body["messages"][0]["content"].as_str().unwrap_or("").to_string();
        // The one tool a request offers is the one it wants (Frame sends its own alone).
        if let Some([only]) = body["tools"].as_array().map(Vec::as_slice) {
            system.push_str(&format!(" `{}`", only["function"]["name"].as_str().unwrap_or("")));
        }
        let (name, args) = if system.contains("`frame_answer`") {
            (
                "frame_answer",
                json!({"goal": "write a note", "definition_of_done": "1. note written\n2. note is short\n3. run finished", "can_proceed": "true"}),
            )
        } else if system.contains("`plan_answer`") {
            let user = body["messages"][1]["content"].as_str().unwrap_or("");
            if user.contains("Step 1.") || user.contains("step 1:") {
                (
                    "plan_answer",
                    json!({"next_action": {"name": "finish", "arguments": {"summary": "note written"}}, "expected_outcome": "done", "rationale": "all set"}),
                )
            } else {
                (
                    "plan_answer",
                    json!({"next_action": {"name": "file_write", "arguments": "{\"path\": \"artifacts/note.md\", \"content\": \"short note\"}"}, "expected_outcome": "a note", "rationale": "write it"}),
                )
            }
        } else {
            let user = body["messages"][1]["content"].as_str().unwrap_or("");
            if user.contains("Reflect on step 1") {
                (
                    "reflect_answer",
                    json!({"satisfied": [{"item": 1, "step": 1}, {"item": "2", "evidence": "step 1, artifacts/note.md"}], "decision": "Continue", "reason": "note written"}),
                )
            } else {
                (
                    "reflect_answer",
                    json!({"satisfied": [{"item": "3", "steps": "step 1"}], "decision": "DONE", "reason": "finished", "outcome": "Wrote artifacts/note.md", "artifacts": "artifacts/note.md"}),
                )
            }
        };
        let content = format!("<tool_call>\n{}\n</tool_call>", json!({"name": name, "arguments": args}));
        Reply::json(
            200,
            json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 900, "completion_tokens": 60}}),
        )
    });
    let out = t
        .al(&[
            "--provider",
            "openai",
            "--base-url",
            &s.url,
            "--model",
            "qwen2.5:0.5b",
            "run",
            "--goal",
            "write a short note",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}\n{}", stderr(&out), t.read("ws/trace.jsonl"));
    assert_eq!(t.read("ws/artifacts/note.md"), "short note");
    let r = t.json("ws/result.json");
    assert_eq!(r["status"], "done");
    assert_eq!(r["cost_usd"], 0.0, "a model on a loopback address costs nothing");
}

#[test]
fn a_model_that_ignores_tools_is_asked_in_the_next_form() {
    let t = T::new();
    // Prose to every tool request; a schema-constrained JSON answer to json_schema.
    let s = Server::start_with(|_, req| {
        let body = req.json();
        let content = if body.get("tools").is_some() {
            "Sure! The colour is blue.".to_string()
        } else {
            json!({"goal": "g", "definition_of_done": ["a", "b", "c"], "can_proceed": false, "open_question": "which colour?"})
                .to_string()
        };
        Reply::json(
            200,
            json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}),
        )
    });
    let out = t
        .al(&["--provider", "openai", "--base-url", &s.url, "run", "--goal", "g", "--max-steps", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let shapes: Vec<String> = (0..s.count())
        .map(|i| {
            let b = s.request(i).json();
            match (&b["tool_choice"], &b["response_format"]["type"]) {
                (Value::Null, Value::String(rf)) => rf.clone(),
                (Value::String(c), _) => c.clone(),
                (c, _) => c["type"].as_str().unwrap_or("?").to_string(),
            }
        })
        .collect();
    assert_eq!(shapes, ["function", "required", "auto", "json_schema"], "answers without the call move on at once");
    let frame = t.trace().into_iter().find(|e| e["phase"] == "frame").unwrap();
    assert_eq!(frame["wire_form"], "json_schema");
    assert_eq!(frame["usage"]["input_tokens"], 28, "the usage of every answer is counted");
}

/// A provider that answers 404 (a model it does not have) ends the run with a way on that names
/// `--model`, chosen by the status kept in state.json when the call failed; a refusal whose words
/// merely say "HTTP 404" is another status and gets the plain way on.
#[test]
fn a_model_the_provider_does_not_have_is_named_in_the_way_on() {
    for (status, message, way) in [
        (404, "The model `gpt-x` does not exist", "run --continue --model NAME`"),
        (401, "HTTP 404 is not what this is", "run --continue` tries the provider again"),
    ] {
        let t = T::new();
        let s = Server::start(vec![Reply::json(
            status,
            json!({"error": {"message": message, "type": "invalid_request_error"}}),
        )]);
        let out = t.al(&["--provider", "openai", "--base-url", &s.url, "run", "--goal", "g"]).output().unwrap();
        assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(all.contains(way), "{status}: {all}");
        let state = t.json("ws/state.json");
        assert_eq!(state["provider_status"], json!(status), "{state}");
    }
}

/// A probe's answer that the server stopped at the probe's token cap is said to be cut off there,
/// not "no call came back".
#[test]
fn a_probe_answer_cut_off_at_its_cap_is_said_to_be() {
    let t = T::new();
    let cut = Reply::json(
        200,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "tiny",
            "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "report_color", "arguments": "{\"color\": \"bl"}}]}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 256, "total_tokens": 376}
        }),
    );
    let s = Server::start(vec![cut]);
    let base = format!("{}/v1", s.url);
    let out = t
        .al(&["--provider", "openai", "--base-url", &base, "--model", "tiny", "models", "test", "--json"])
        .env("OPENAI_API_KEY", "sk-x")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)));
    let probes = v["probes"].as_array().unwrap_or_else(|| panic!("{v}"));
    let value = probes.iter().find(|p| p["name"] == "value").unwrap_or_else(|| panic!("{v}"));
    let detail = value["detail"].as_str().unwrap();
    assert!(detail.contains("cut off at the probe's cap of 256 tokens"), "{value}");
}
