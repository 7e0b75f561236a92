//! Wire-shape negotiation with OpenAI-compatible servers, against fakes on 127.0.0.1 that
//! behave like the real servers do: llama-cpp-python (HTTP 500 on `tool_choice: "required"`
//! and on a null assistant `content`) and llama.cpp's llama-server (a named function is
//! silently treated as "auto"). Backoff is set to ten minutes in these tests, so a rejected
//! shape that were retried with backoff would hang the test instead of passing; the request
//! counts show that none was.

use crate::common::*;
use serde_json::{json, Value};

/// A valid answer for each phase's forced tool (the run writes x.md and finishes).
fn answer(tool: &str) -> Value {
    match tool {
        "frame_answer" => json!({"goal": "write x", "definition_of_done": ["x written", "x is short", "run ends"]}),
        "plan_answer" => json!({
            "next_action": {"tool": "file_write", "args": {"path": "artifacts/x.md", "content": "hello"}},
            "expected_outcome": "x written", "rationale": "the one thing to do"
        }),
        _ => {
            json!({"satisfied": [{"item": 1, "steps": [1], "artifacts": ["artifacts/x.md"]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "x written", "outcome": "wrote x",
            "artifacts": ["artifacts/x.md"]})
        }
    }
}

/// The tool a request forces (from the tools, else the json_schema name).
fn tool_reply(name: &str, args: &str) -> Reply {
    Reply::json(
        200,
        json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "smollm2",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    )
}

fn text_reply(text: &str) -> Reply {
    Reply::json(
        200,
        json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    )
}

/// llama-cpp-python 0.3.36: every error is an HTTP 500 `internal_server_error`; `"required"`
/// fails an assertion with an empty message; a null or missing assistant `content` fails
/// request validation; a named function is honoured. The first plan answer is malformed, so
/// the corrective retry sends an assistant tool-call message back.
fn llama_cpp_python() -> Server {
    let plans = std::sync::atomic::AtomicUsize::new(0);
    Server::start_with(move |_, req| {
        let body = req.json();
        let err = |msg: &str| {
            Reply::json(
                500,
                json!({"error": {"message": msg, "type": "internal_server_error", "param": null, "code": null}}),
            )
        };
        if body["tool_choice"] == "required" {
            return err("");
        }
        for m in body["messages"].as_array().unwrap() {
            if m["role"] == "assistant" && !m["content"].is_string() {
                return err("1 validation error:\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'content'), 'msg': 'Input should be a valid string'}");
            }
        }
        let tool = forced_tool(&body);
        if tool == "plan_answer" && plans.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            return tool_reply(&tool, "{\"next_action\": {\"tool\": ");
        }
        tool_reply(&tool, &answer(&tool).to_string())
    })
}

/// llama.cpp's llama-server: honours `"required"`; a named function is treated as "auto",
/// and this (weak) model then answers in prose.
fn llama_server() -> Server {
    Server::start_with(|_, req| {
        let body = req.json();
        if body["tool_choice"].is_object() {
            return text_reply("I will now think about the task.");
        }
        let tool = forced_tool(&body);
        tool_reply(&tool, &answer(&tool).to_string())
    })
}

fn run(t: &T, ws: &str, url: &str) -> std::process::Output {
    t.cmd()
        .args(["-w", ws, "--provider", "openai", "--base-url", url, "--model", "smollm2", "run", "--goal", "write x"])
        .env("AGENTLOOP_LLM__BACKOFF_MS", "600000")
        // The requests each phase's own call sends, in order, are what these tests read, so
        // Reflect and Plan are asked apart.
        .env("AGENTLOOP_LLM__FUSE_PHASES", "false")
        .output()
        .unwrap()
}

/// How each recorded request asked for the answer.
fn shapes(s: &Server) -> Vec<String> {
    (0..s.count())
        .map(|i| {
            let b = s.request(i).json();
            match (&b["tool_choice"], &b["response_format"]["type"]) {
                (Value::Null, Value::String(rf)) => rf.clone(),
                (Value::Null, _) => "prompt".into(),
                (Value::String(c), _) => c.clone(),
                (c, _) => format!("named:{}", c["function"]["name"].as_str().unwrap_or("")),
            }
        })
        .collect()
}

fn wire_forms(t: &T, ws: &str) -> Vec<String> {
    std::fs::read_to_string(t.path(&format!("{ws}/trace.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|e| e["wire_form"].as_str().map(String::from))
        .collect()
}

fn cache(t: &T) -> Value {
    serde_json::from_str(&t.read("cache/agentloop/wire.json")).unwrap()
}

#[test]
fn llama_cpp_python_gets_named_calls_and_string_content() {
    let t = T::new();
    // Corrections as tool results, so the retry carries an assistant tool-call message back
    // (on a local server nobody probed, `auto` sends them as user messages).
    t.write("ws/agentloop.yaml", "llm:\n  tool_messages: tool\n");
    let s = llama_cpp_python();
    let out = run(&t, "ws", &s.url);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", stderr(&out), t.read("ws/trace.jsonl"));
    assert_eq!(t.read("ws/artifacts/x.md"), "hello");
    assert_eq!(
        shapes(&s),
        ["named:frame_answer", "named:plan_answer", "named:plan_answer", "named:reflect_answer"],
        "the named form works at once; nothing is retried"
    );
    // The corrective retry carries the malformed call back with `content: ""`, never null.
    let retry = s.request(2).json();
    let assistant = retry["messages"].as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap().clone();
    assert_eq!(assistant["content"], "");
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], "{\"next_action\": {\"tool\": ");
    assert_eq!(wire_forms(&t, "ws"), ["tool_named", "tool_named", "tool_named"]);
    let base = s.url.clone();
    assert_eq!(cache(&t)["servers"][base]["smollm2"]["form"], "tool_named");
}

#[test]
fn a_rejected_cached_form_moves_on_at_once_and_the_cache_is_corrected() {
    let t = T::new();
    let s = llama_cpp_python();
    // A cache that says "required" (learned from another server at this address, say).
    t.write(
        "cache/agentloop/wire.json",
        &json!({"version": 1, "servers": {s.url.clone(): {"smollm2": {"form": "tool_required", "learned": NOW}}}})
            .to_string(),
    );
    let out = run(&t, "ws", &s.url);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The empty HTTP 500 on "required" cost one request, no retry and no backoff (ten minutes).
    assert_eq!(
        shapes(&s),
        ["required", "named:frame_answer", "named:plan_answer", "named:plan_answer", "named:reflect_answer"]
    );
    assert_eq!(cache(&t)["servers"][s.url.clone()]["smollm2"]["form"], "tool_named");
}

#[test]
fn llama_server_gets_required_and_the_next_run_starts_there() {
    let t = T::new();
    let s = llama_server();
    let out = run(&t, "ws", &s.url);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", stderr(&out), t.read("ws/trace.jsonl"));
    // The named form was answered in prose: the same call went out at once as "required",
    // which is kept for the rest of the run.
    assert_eq!(shapes(&s), ["named:frame_answer", "required", "required", "required"]);
    assert_eq!(wire_forms(&t, "ws"), ["tool_required", "tool_required", "tool_required"]);
    let frame = t.trace().into_iter().find(|e| e["phase"] == "frame").unwrap();
    assert_eq!(frame["usage"]["input_tokens"], 200, "the prose answer's tokens are counted too");
    assert_eq!(cache(&t)["servers"][s.url.clone()]["smollm2"]["form"], "tool_required");
    // A second run reads the cache: its first request is already "required".
    let out = run(&t, "ws2", &s.url);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(shapes(&s)[4..], ["required", "required", "required"]);
}

#[test]
fn outages_keep_the_retry_policy() {
    let t = T::new();
    let s = Server::start(vec![
        Reply::json(503, json!({"error": {"message": "loading model", "type": "unavailable"}})),
        Reply::json(429, json!({"error": {"message": "slow down", "type": "rate_limit"}})),
        tool_reply("report_color", "{\"color\": \"blue\"}"),
    ]);
    let out = t
        .al(&["--provider", "openai", "--base-url", &s.url, "models", "test", "--json"])
        .env("AGENTLOOP_LLM__BACKOFF_MS", "10")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // The first form was retried through the 503 and the 429, not abandoned.
    assert!(shapes(&s)[..3].iter().all(|f| f == "named:report_color"), "{:?}", shapes(&s));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["wire_forms"][0]["status"], 200);
    assert_eq!(v["wire_form"], "tool_named");

    // A connection refused is an outage too: retried, then exit 5; no form is tried instead.
    let t = T::new();
    let out = t
        .al(&["--provider", "openai", "--base-url", "http://127.0.0.1:9", "run", "--goal", "g"])
        .env("AGENTLOOP_LLM__ATTEMPTS", "2")
        .env("AGENTLOOP_LLM__BACKOFF_MS", "10")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot reach") && stderr(&out).contains("after 2 attempts"), "{}", stderr(&out));
}

#[test]
fn an_unclear_500_moves_on_once_then_is_an_outage() {
    let t = T::new();
    // A plain 500 twice (is it the shape or the server?), then an answer.
    let s = Server::start(vec![
        Reply::text(500, "text/plain", "Internal Server Error"),
        Reply::text(500, "text/plain", "Internal Server Error"),
        tool_reply("frame_answer", &answer("frame_answer").to_string()),
        tool_reply("plan_answer", &answer("plan_answer").to_string()),
        tool_reply("reflect_answer", &answer("reflect_answer").to_string()),
    ]);
    let out = t
        .al(&["--provider", "openai", "--base-url", &s.url, "--model", "m", "run", "--goal", "write x"])
        .env("AGENTLOOP_LLM__BACKOFF_MS", "10")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // named: unclear 500 → the next form once; required: 500 again → retried with backoff.
    assert_eq!(shapes(&s), ["named:frame_answer", "required", "required", "required", "required"]);
}

#[test]
fn every_form_rejected_is_one_clear_provider_error() {
    let t = T::new();
    let s = Server::start(vec![Reply::json(
        422,
        json!({"detail": [{"loc": ["body", "messages"], "msg": "field required", "type": "value_error.missing"}]}),
    )]);
    let out = t
        .al(&["--provider", "openai", "--base-url", &s.url, "run", "--goal", "g"])
        .env("AGENTLOOP_LLM__STRUCTURED", "tools")
        .env("AGENTLOOP_LLM__BACKOFF_MS", "600000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(s.count(), 3, "llm.structured: tools allows the three tool forms only");
    let err = stderr(&out);
    assert!(err.contains("rejected every request form it was sent (tool_named: HTTP 422"), "{err}");
    assert!(err.contains("tool_auto: HTTP 422"), "{err}");
    assert!(err.contains("llm.structured: tools allows the tool forms only (auto allows all six)"), "{err}");
}

#[test]
fn structured_json_and_strict_shape_the_first_request() {
    let t = T::new();
    let s = Server::start_with(|_, req| {
        let body = req.json();
        text_reply(&answer(&forced_tool(&body)).to_string())
    });
    t.write("ws/agentloop.yaml", "llm:\n  structured: json\n  strict: true\n");
    let out = run(&t, "ws", &s.url);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = s.request(0).json();
    assert!(first.get("tools").is_none());
    let rf = &first["response_format"];
    assert_eq!(rf["type"], "json_schema");
    assert_eq!(rf["json_schema"]["name"], "frame_answer");
    assert_eq!(rf["json_schema"]["strict"], true);
    assert_eq!(rf["json_schema"]["schema"]["additionalProperties"], false);
    assert_eq!(wire_forms(&t, "ws"), ["json_schema", "json_schema", "json_schema"]);

    // llm.strict: true on the tool forms: the strict schema with `strict: true`.
    let t = T::new();
    let s = llama_cpp_python();
    t.write("ws/agentloop.yaml", "llm:\n  strict: true\n");
    let out = run(&t, "ws", &s.url);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let f = &s.request(0).json()["tools"][0]["function"];
    assert_eq!(f["strict"], true);
    let props = f["parameters"]["properties"].as_object().unwrap().len();
    assert_eq!(f["parameters"]["required"].as_array().unwrap().len(), props);
}

#[test]
fn a_corrupt_cache_is_ignored_and_replaced() {
    let t = T::new();
    let s = llama_server();
    t.write("cache/agentloop/wire.json", "{not json");
    let out = t
        .cmd()
        .args(["-v", "-w", "ws", "--provider", "openai", "--base-url", &s.url, "--model", "smollm2"])
        .args(["run", "--goal", "write x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("debug: wire cache ignored:") && err.contains("is not a wire cache"), "{err}");
    assert!(err.contains("debug: openai: tool_named was answered without the `frame_answer` call"), "{err}");
    assert_eq!(cache(&t)["servers"][s.url.clone()]["smollm2"]["form"], "tool_required");
}

#[test]
fn models_test_prints_what_a_llama_cpp_python_server_accepts() {
    let t = T::new();
    // Like llama-cpp-python: no json_schema response_format (pydantic rejects the type).
    let s = Server::start_with(|_, req| {
        let body = req.json();
        let err = |msg: &str| Reply::json(500, json!({"error": {"message": msg, "type": "internal_server_error"}}));
        if body["tool_choice"] == "required" {
            return err("");
        }
        if body["response_format"]["type"] == "json_schema" {
            return err("1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}");
        }
        if body.get("tools").is_some() {
            return template_reply(Template::default(), &body);
        }
        if body.get("response_format").is_some() {
            return text_reply("{\"color\": \"blue\"}");
        }
        text_reply("Here's the code:\n```python\ndef report_color(c):")
    });
    let out =
        t.al(&["--provider", "openai", "--base-url", &s.url, "--model", "smollm2", "models", "test"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let table: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("form ")).collect();
    assert_eq!(
        table,
        [
            "form           request                                         HTTP  result",
            "tool_named     tool_choice {type: function, function: {name}}  200   tool call: {\"color\":\"blue\"}  <- used",
            "tool_required  tool_choice \"required\"                          500   rejected: HTTP 500 (internal_server_error): (no message)",
            "tool_auto      tool_choice \"auto\" + instruction                200   tool call: {\"color\":\"blue\"}",
            "json_schema    response_format json_schema                     500   rejected: HTTP 500 (internal_server_error): 1 validation error:…",
            "json_object    response_format json_object                     200   JSON in text: {\"color\":\"blue\"}",
            "json_prompt    JSON instruction only                           200   no answer: Here's the code:…",
        ],
        "{text}"
    );
    assert!(text.contains("tool calling  works (tool_named)"), "{text}");
    assert_eq!(s.count(), 8, "each form once, the empty 500 included: no retries; then the two probes");
    assert_eq!(cache(&t)["servers"][s.url.clone()]["smollm2"]["form"], "tool_named");
}

/// A local server's JSON grammar lets a model type a raw newline or tab inside a string and
/// escape a lone surrogate; strict JSON refuses both. Such answers are taken as written, first
/// time: no corrective retry, and the file holds the newline the model meant.
#[test]
fn answers_a_json_grammar_allows_are_taken_as_written() {
    let s = Server::start_with(|_, req| {
        let tool = forced_tool(&req.json());
        let args = match tool.as_str() {
            "frame_answer" => "{\"goal\": \"write x\",\n \"definition_of_done\": [\"x written\", \"x is\tshort\", \"run ends \\ud800\"]}".to_string(),
            "plan_answer" => "{\"next_action\": {\"tool\": \"file_write\", \"args\": {\"path\": \"artifacts/x.md\", \"content\": \"line one\nline two\n\"}}, \"rationale\": \"the\tone thing\"}".to_string(),
            _ => answer(&tool).to_string(),
        };
        tool_reply(&tool, &args)
    });
    let t = T::new();
    let out = run(&t, "ws", &s.url);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(s.count(), 3, "one call per phase: no answer was refused");
    assert_eq!(t.read("ws/artifacts/x.md"), "line one\nline two\n");
    assert!(t.read("ws/memory.md").contains("run ends \u{fffd}"), "{}", t.read("ws/memory.md"));
}

/// A report_color call with the colour a chat template's "model" reports, and the prompt
/// tokens of what the template rendered.
fn template_reply(t: Template, body: &Value) -> Reply {
    let (color, tokens) = t.answer(body);
    Reply::json(
        200,
        json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "smollm2",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "report_color", "arguments": json!({"color": color}).to_string()}}]}}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 10}}),
    )
}

fn models_test(t: Template) -> (String, Value) {
    let s = Server::start_with(move |_, req| template_reply(t, &req.json()));
    let args = ["--provider", "openai", "--base-url", &s.url, "--model", "smollm2", "models", "test"];
    let out = T::new().al(&args).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let out = T::new().al(&args).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    (text, serde_json::from_slice(&out.stdout).unwrap())
}

fn probe(v: &Value, name: &str) -> Value {
    v["probes"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("{name}: {v}")).clone()
}

/// A template that shows the model every message: the value, the tool result and the system
/// message all come back, and only then does models test say "works".
#[test]
fn models_test_says_works_when_every_probe_passes() {
    let (text, v) = models_test(Template::default());
    assert!(text.contains("tool calling  works (tool_named)"), "{text}");
    assert_eq!(v["works"], true, "{v}");
    let names: Vec<&str> = v["probes"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["value", "tool_result", "system"]);
    assert!(v["probes"].as_array().unwrap().iter().all(|p| p["passed"] == true && p["fix"].is_null()), "{v}");
    assert_eq!(probe(&v, "tool_result")["answered"], "periwinkle");
    assert_eq!(probe(&v, "system")["answered"], "vermilion");
}

/// A template that drops `role: tool` messages (upstream chatml-function-calling, llama-2,
/// gemma): every form answers, but the tool-result probe fails and names the fix.
#[test]
fn models_test_flags_a_template_that_drops_tool_results() {
    let (text, v) = models_test(Template { drops_tool: true, ..Default::default() });
    assert!(
        text.contains("tool calling  answers (tool_named), but does not work: tool_result failed (below)"),
        "{text}"
    );
    assert!(text.contains("tool_result  FAIL  the tool result was dropped: the prompt counted"), "{text}");
    assert!(text.contains("fix: the server's chat template drops `role: tool` messages"), "{text}");
    assert_eq!(v["works"], false);
    let p = probe(&v, "tool_result");
    assert_eq!((p["passed"].clone(), p["answered"].clone()), (json!(false), json!("default")), "{p}");
    assert!(p["fix"].as_str().unwrap().contains("--jinja"), "{p}");
    assert!(p["fix"].as_str().unwrap().contains("chatml-function-calling"), "{p}");
    assert_eq!(probe(&v, "system")["passed"], true);
    assert_eq!(probe(&v, "value")["passed"], true);
}

/// A template that drops the system message (llama-cpp-python's gemma format): the prompt
/// token count stays far below the system message's size, and models test says so.
#[test]
fn models_test_flags_a_template_that_drops_the_system_message() {
    let (text, v) = models_test(Template { drops_system: true, ..Default::default() });
    assert!(text.contains("but does not work: system failed (below)"), "{text}");
    assert!(text.contains("system       FAIL  the system message was dropped: the prompt counted"), "{text}");
    assert_eq!(v["works"], false);
    let p = probe(&v, "system");
    assert_eq!(p["passed"], false, "{p}");
    assert!(p["fix"].as_str().unwrap().contains("gemma"), "{p}");
    assert!(p["prompt_tokens"].as_u64().unwrap() < 200, "{p}");
    assert_eq!(probe(&v, "tool_result")["passed"], true);
}

/// A model that answers every call in the right shape but with the wrong value ("default" for
/// "blue") does not "work".
#[test]
fn models_test_flags_an_answer_without_the_value_asked_for() {
    let (text, v) = models_test(Template { wrong_value: true, ..Default::default() });
    assert!(text.contains("but does not work: value failed (below)"), "{text}");
    assert!(
        text.contains("value        FAIL  the call carried color=\"default\", not the \"blue\" asked for"),
        "{text}"
    );
    assert_eq!((v["works"].clone(), v["tool_calling"].clone()), (json!(false), json!(false)));
    assert_eq!(probe(&v, "value")["answered"], "default");
    assert_eq!(probe(&v, "tool_result")["passed"], true);
}
