//! OpenTelemetry traces: a scripted run exports OTLP/HTTP spans to a real OTLP decoder — a small
//! Python receiver on a free 127.0.0.1 port that parses `ExportTraceServiceRequest` with the
//! `opentelemetry-proto` package's protobuf classes (tests/otel/receiver.py). Skipped, saying so,
//! where that package is not installed (.ci/run installs it). The trust rule and a dead
//! collector need no receiver.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The receiver: its port and the JSON lines of the spans it decoded.
struct Receiver {
    child: Child,
    port: u16,
    spans: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    /// None (and why, on stderr) when python3 or opentelemetry-proto is missing.
    fn start(dir: &Path, test: &str) -> Option<Receiver> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otel/receiver.py");
        let (port_file, spans) = (dir.join("otlp.port"), dir.join("spans.jsonl"));
        let Ok(mut child) =
            Command::new("python3").arg(script).arg(&port_file).arg(&spans).stdin(Stdio::null()).spawn()
        else {
            crate::common::missing(&format!("{test}: python3 is not installed"));
            return None;
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                return Some(Receiver { child, port: p.trim().parse().unwrap(), spans });
            }
            if let Some(status) = child.try_wait().unwrap() {
                assert_eq!(status.code(), Some(3), "the OTLP receiver failed");
                crate::common::missing(&format!(
                    "{test}: the Python package opentelemetry-proto is not installed (pip install opentelemetry-proto; .ci/run installs it)"
                ));
                return None;
            }
            assert!(Instant::now() < deadline, "the OTLP receiver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.spans)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn named<'a>(spans: &'a [Value], prefix: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"].as_str().unwrap().starts_with(prefix)).collect()
}

/// A run that reads notes.txt and finishes; each answer states its tokens, cache ones included.
const SCRIPT: &str = r#"frame:
  - answer: {goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: true}
    usage: {input_tokens: 100, output_tokens: 20, cache_read_tokens: 7, cache_write_tokens: 3}
plan:
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}}
    usage: {input_tokens: 200, output_tokens: 30, cache_read_tokens: 50}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], facts: ["the notes say hello"], decision: done, reason: all good, outcome: "digest written"}
    usage: {input_tokens: 300, output_tokens: 40}
"#;

const CALLER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn workspace(otel: &str) -> T {
    let t = T::new();
    t.write("ws/notes.txt", "hello from the notes\n");
    t.write("ws/script.yaml", SCRIPT);
    t.write("ws/agentloop.yaml", &format!("llm: {{provider: scripted, script: script.yaml}}\n{otel}"));
    t
}

#[test]
fn a_run_exports_genai_spans_under_the_callers_trace() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rx) = Receiver::start(dir.path(), "a_run_exports_genai_spans_under_the_callers_trace") else { return };
    let t = workspace(&format!("otel: {{endpoint: '{}', headers: {{x-api-key: sekrit-collector-key}}}}\n", rx.url()));
    let out = t.al(&["run", "--goal", "digest the notes"]).env("TRACEPARENT", CALLER).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let run_id = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
    let spans = rx.spans();
    for s in &spans {
        assert_eq!(s["path"], "/v1/traces");
        assert_eq!(s["content_type"], "application/x-protobuf");
        assert_eq!(s["api_key"], "sekrit-collector-key", "otel.headers go with each export");
        assert_eq!(s["resource"]["service.name"], "agentloop");
        assert_eq!(s["scope"], "agentloop");
        assert!(s["schema_url"].as_str().unwrap().ends_with("/1.38.0"), "{s}");
        // The caller's trace, not a new one.
        assert_eq!(s["trace_id"], "0af7651916cd43dd8448eb211c80319c", "{s}");
        assert!(s["attributes"].get("gen_ai.input.messages").is_none(), "content without capture_content: {s}");
        assert!(s["attributes"].get("gen_ai.tool.call.arguments").is_none(), "{s}");
    }
    let [agent] = named(&spans, "invoke_agent")[..] else { panic!("one invoke_agent span: {spans:#?}") };
    assert_eq!(agent["name"], "invoke_agent agentloop");
    assert_eq!(agent["parent_span_id"], "b7ad6b7169203331", "a child of TRACEPARENT's span");
    let a = &agent["attributes"];
    assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(a["gen_ai.agent.name"], "agentloop");
    assert_eq!(a["gen_ai.provider.name"], "scripted");
    assert_eq!(a["gen_ai.request.model"], "scripted");
    assert_eq!(a["gen_ai.conversation.id"], run_id.as_str());
    assert_eq!(agent["status"], 0, "a done run's span is not an error");
    assert_eq!(a["agentloop.run.stop"], "done");
    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 3, "one chat span per model call: {spans:#?}");
    // (input + cache read + cache write, output, cache read, cache write) per call, in order.
    let want = [("frame", 110, 20, 7, 3), ("plan", 250, 30, 50, 0), ("reflect", 300, 40, 0, 0)];
    let mut chats = chats.clone();
    chats.sort_by_key(|c| c["start"].as_u64().unwrap());
    for (c, (phase, input, output, read, write)) in chats.iter().zip(want) {
        let a = &c["attributes"];
        assert_eq!(c["name"], "chat scripted", "{c}");
        assert_eq!(c["kind"], 3, "a chat span is a CLIENT span");
        assert_eq!(c["parent_span_id"], agent["span_id"], "{c}");
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.provider.name"], "scripted");
        assert_eq!(a["gen_ai.request.model"], "scripted");
        assert_eq!(a["gen_ai.response.model"], "scripted");
        assert_eq!(a["agentloop.phase"], phase);
        assert_eq!(a["gen_ai.usage.input_tokens"], input, "{c}");
        assert_eq!(a["gen_ai.usage.output_tokens"], output, "{c}");
        // v1.38 has no cache-token attributes: agentloop's own names carry them.
        assert_eq!(a["agentloop.usage.cache_read_tokens"], read, "{c}");
        assert_eq!(a["agentloop.usage.cache_write_tokens"], write, "{c}");
        assert!(a.get("gen_ai.usage.cache_read.input_tokens").is_none(), "{c}");
        assert!(a.get("server.address").is_none(), "the scripted model is no server: {c}");
        assert!(a["gen_ai.response.finish_reasons"].as_array().is_some_and(|r| r.len() == 1), "{c}");
    }
    let [tool] = named(&spans, "execute_tool")[..] else { panic!("one execute_tool span: {spans:#?}") };
    assert_eq!(tool["name"], "execute_tool file_read");
    assert_eq!(tool["parent_span_id"], agent["span_id"]);
    assert_eq!(tool["attributes"]["gen_ai.operation.name"], "execute_tool");
    assert_eq!(tool["attributes"]["gen_ai.tool.name"], "file_read");
    assert_eq!(tool["attributes"]["gen_ai.tool.call.id"], format!("{run_id}:step:1"));
    assert_eq!(spans.len(), 5, "{spans:#?}");
    // The header's value is a secret: config show hides it, the workspace never holds it.
    let shown = stdout(&t.al(&["config", "show"]).output().unwrap());
    assert!(shown.contains("otel.headers.x-api-key") && !shown.contains("sekrit-collector-key"), "{shown}");
    let state = t.read("ws/state.json");
    assert!(state.contains("\"trace_parent\": \"00-0af7651916cd43dd8448eb211c80319c-"), "{state}");
    assert!(!t.read("ws/trace.jsonl").contains("sekrit"));
}

#[test]
fn content_goes_on_spans_only_with_capture_content() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rx) = Receiver::start(dir.path(), "content_goes_on_spans_only_with_capture_content") else { return };
    let t = workspace("otel: {capture_content: true}\n");
    // The standard variables name the collector and the service.
    let out = t
        .al(&["run", "--goal", "digest the notes about zebras"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url())
        .env("OTEL_SERVICE_NAME", "nightly-digest")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let spans = rx.spans();
    assert_eq!(spans.len(), 5, "{spans:#?}");
    assert!(spans.iter().all(|s| s["resource"]["service.name"] == "nightly-digest"));
    let roots = named(&spans, "invoke_agent");
    assert_eq!(roots[0]["parent_span_id"], "", "without TRACEPARENT the run is a trace of its own");
    for c in named(&spans, "chat ") {
        let input = c["attributes"]["gen_ai.input.messages"].as_str().expect("input messages");
        assert!(input.contains("zebras"), "{input}");
        let msgs: Value = serde_json::from_str(input).unwrap();
        assert_eq!(msgs[0]["parts"][0]["type"], "text");
        let output: Value = serde_json::from_str(c["attributes"]["gen_ai.output.messages"].as_str().unwrap()).unwrap();
        assert_eq!(output[0]["role"], "assistant");
        assert_eq!(output[0]["parts"][0]["type"], "tool_call", "{output}");
        assert!(c["attributes"]["gen_ai.system_instructions"].is_string());
    }
    let tool = named(&spans, "execute_tool")[0];
    assert!(tool["attributes"]["gen_ai.tool.call.arguments"].as_str().unwrap().contains("notes.txt"));
    assert!(tool["attributes"]["gen_ai.tool.call.result"].as_str().unwrap().contains("hello from the notes"));
}

#[test]
fn event_mode_turns_join_the_trace_the_start_began() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rx) = Receiver::start(dir.path(), "event_mode_turns_join_the_trace_the_start_began") else { return };
    let t = T::new();
    t.write(
        "root/script.yaml",
        r#"frame:
  - answer: {goal: fetch, definition_of_done: [page fetched, page read, noted], can_proceed: true}
plan:
  - answer: {next_action: {tool: fetcher, args: {url: "http://example.com"}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: fetched, outcome: fetched}
"#,
    );
    t.write(
        "root/agentloop.yaml",
        &format!("llm: {{provider: scripted, script: script.yaml}}\notel: {{endpoint: '{}'}}\ntools:\n  external:\n    fetcher:\n      description: Fetch a page.\n      parameters: {{type: object, properties: {{url: {{type: string}}}}, required: [url]}}\n", rx.url()),
    );
    let send = |req: Value, traceparent: Option<&str>| -> Value {
        let mut c = t.cmd();
        c.args(["-w", "root", "handle"]).write_stdin(req.to_string());
        if let Some(tp) = traceparent {
            c.env("TRACEPARENT", tp);
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let v = send(
        serde_json::json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "fetch example.com"}}}),
        Some(CALLER),
    );
    let run = v["state_updates"]["last_run_id"].as_str().unwrap().to_string();
    // The router's next turn carries no TRACEPARENT: the run's state does.
    let v = send(
        serde_json::json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.tool_result", "payload": {"run_id": run, "step": 1, "tool": "fetcher", "status": "ok", "result": "page text"}}}),
        None,
    );
    assert_eq!(v["events"][0]["type"], "agent.completed", "{v}");
    let spans = rx.spans();
    assert!(spans.iter().all(|s| s["trace_id"] == "0af7651916cd43dd8448eb211c80319c"), "{spans:#?}");
    let turns = named(&spans, "invoke_agent");
    assert_eq!(turns.len(), 2, "one span per turn: {spans:#?}");
    let (first, second) =
        if turns[0]["parent_span_id"] == "b7ad6b7169203331" { (turns[0], turns[1]) } else { (turns[1], turns[0]) };
    assert_eq!(first["parent_span_id"], "b7ad6b7169203331");
    assert_eq!(first["attributes"]["agentloop.run.stop"], "waiting");
    assert_eq!(second["parent_span_id"], first["span_id"], "the later turn is the start turn's child");
    assert!(turns.iter().all(|s| s["attributes"]["gen_ai.conversation.id"] == run.as_str()));
    // The external tool's result arrives in the second turn: its span is that turn's child.
    let tool = named(&spans, "execute_tool")[0];
    assert_eq!(tool["parent_span_id"], second["span_id"]);
    assert_eq!(tool["attributes"]["gen_ai.tool.call.id"], format!("{run}:step:1"));
}

#[test]
fn a_collector_that_is_down_neither_fails_nor_holds_up_a_run() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let t = workspace(&format!("otel: {{endpoint: 'http://127.0.0.1:{port}'}}\n"));
    let began = Instant::now();
    let out = t.al(&["run", "--goal", "digest the notes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(began.elapsed() < Duration::from_secs(15), "took {:?}", began.elapsed());
    // Said once, naming where the spans were to go.
    let err = stderr(&out);
    assert_eq!(err.matches("warning").count(), 1, "{err}");
    let said = format!("warning: OpenTelemetry: spans were not exported to http://127.0.0.1:{port}/v1/traces");
    assert!(err.contains(&said), "{err}");
    assert_eq!(t.json("ws/result.json")["status"], "done");
}

#[test]
fn only_the_users_own_config_may_point_spans_somewhere() {
    let t =
        workspace("otel: {endpoint: 'http://collector.example', headers: {authorization: x}, capture_content: true}\n");
    let out = t.untrusted().args(["-w", "ws", "run", "--goal", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    for key in ["`otel.endpoint`", "`otel.headers.authorization`", "`otel.capture_content`"] {
        assert!(err.contains(key), "{key}: {err}");
    }
    assert!(err.contains("a host you did not name"), "{err}");
    assert!(!t.exists("ws/state.json"));
    // Turning content off only narrows: allowed from anywhere.
    let t = workspace("");
    t.write("ws/agentloop.yaml", "otel: {capture_content: false}\n");
    let out = t.untrusted().args(["-w", "ws", "--script", "ws/script.yaml", "run", "--goal", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A request's config is held to the same rule.
    let t = workspace("");
    std::fs::rename(t.path("ws"), t.path("root")).unwrap();
    let req = serde_json::json!({"protocol": 2, "command": "handle", "config": {"otel": {"endpoint": "http://evil.example"}}, "event": {"type": "agentic.start", "payload": {"goal": "x"}}});
    let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "error", "{v}");
    assert!(v["error"].as_str().unwrap().contains("otel.endpoint"), "{v}");
}

/// A `TRACEPARENT` that is not one — 100 kB of garbage, or a valid-looking one padded past
/// 512 bytes — is one warning, whether traces are exported or not, showing its start on one
/// line and its size; the run goes on as its own.
#[test]
fn a_garbage_traceparent_is_one_short_warning() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let garbage = format!("x\n{}", "x".repeat(100_000));
    let padded = format!("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-{}", "y".repeat(1000));
    for (otel, tp) in [
        (String::new(), &garbage),
        (format!("otel: {{endpoint: 'http://127.0.0.1:{port}'}}\n"), &garbage),
        (format!("otel: {{endpoint: 'http://127.0.0.1:{port}'}}\n"), &padded),
    ] {
        let t = workspace(&otel);
        let out = t.al(&["run", "--goal", "digest the notes"]).env("TRACEPARENT", tp).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let err = stderr(&out);
        let said: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: TRACEPARENT")).collect();
        assert_eq!(said.len(), 1, "{err:.2000}");
        assert!(said[0].len() < 400, "{:.2000}", said[0]);
        assert!(said[0].contains(&format!("… ({} bytes)` is not a W3C traceparent", tp.len())), "{}", said[0]);
        assert!(!err.contains(&"x".repeat(200)), "the value is not printed whole");
        assert_eq!(t.json("ws/result.json")["status"], "done");
    }
}

/// The GenAI semantic conventions v1.38.0, per operation: the attributes a span must carry
/// (Required), and those it must carry when their condition holds (Conditionally Required)
/// where agentloop always has what the condition asks for (the agent, the run, the model).
/// `error.type` when the span failed and `server.port` with `server.address` are checked for
/// every span.
const REQUIRED: [(&str, i64, &[&str]); 3] = [
    (
        "invoke_agent",
        1, // INTERNAL: the agent runs in this process
        &[
            "gen_ai.operation.name",
            "gen_ai.provider.name",
            "gen_ai.agent.name",
            "gen_ai.conversation.id",
            "gen_ai.request.model",
        ],
    ),
    ("chat", 3, &["gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model"]),
    ("execute_tool", 1, &["gen_ai.operation.name"]),
];

/// The `gen_ai.*` attributes v1.38.0 defines that an agent's spans may carry: any other
/// `gen_ai.*` name is from another version (extensions go under `agentloop.*`).
const DEFINED: &[&str] = &[
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.agent.name",
    "gen_ai.agent.id",
    "gen_ai.agent.description",
    "gen_ai.conversation.id",
    "gen_ai.request.model",
    "gen_ai.request.max_tokens",
    "gen_ai.request.temperature",
    "gen_ai.request.top_p",
    "gen_ai.request.seed",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.output.type",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.type",
    "gen_ai.tool.description",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.tool.definitions",
];

/// Checks one exported span against [`REQUIRED`] and [`DEFINED`]; every problem, named.
fn conformance(s: &Value) -> Vec<String> {
    let a = s["attributes"].as_object().unwrap();
    let name = s["name"].as_str().unwrap();
    let mut bad = Vec::new();
    let op = a.get("gen_ai.operation.name").and_then(Value::as_str).unwrap_or("");
    let Some((_, kind, required)) = REQUIRED.iter().find(|(o, ..)| *o == op) else {
        return vec![format!("{name}: operation `{op}` is not one of {:?}", REQUIRED.map(|r| r.0))];
    };
    if !name.starts_with(&format!("{op} ")) {
        bad.push(format!("{name}: the name does not start with `{op} `"));
    }
    if s["kind"] != *kind {
        bad.push(format!("{name}: span kind {} where {kind} is due", s["kind"]));
    }
    for key in *required {
        if a.get(*key).is_none_or(|v| v.is_null() || v == "") {
            bad.push(format!("{name}: `{key}` is required"));
        }
    }
    let failed = s["status"] == 2;
    if failed != a.contains_key("error.type") {
        bad.push(format!("{name}: status {} with error.type {:?}", s["status"], a.get("error.type")));
    }
    if a.contains_key("server.address") && !a.get("server.port").is_some_and(Value::is_i64) {
        bad.push(format!("{name}: `server.port` is required with `server.address`"));
    }
    for key in a.keys().filter(|k| k.starts_with("gen_ai.")) {
        if !DEFINED.contains(&key.as_str()) {
            bad.push(format!("{name}: `{key}` is not defined by v1.38.0"));
        }
    }
    bad
}

/// A model server of `kind` (anthropic, openai) that frames, reads notes.txt, then reflects
/// done, unless `fail`: then every call is a 500. Each answer's body id (`msg_<n>`,
/// `chatcmpl-<n>`) differs from its request-id header (`req_<n>`).
fn provider(kind: &'static str, fail: bool) -> Server {
    Server::start_with(move |i, req| {
        if fail {
            return Reply::json(
                500,
                serde_json::json!({"type": "error", "error": {"type": "api_error", "message": "down"}}),
            )
            .header("request-id", &format!("req_{i}"))
            .header("x-request-id", &format!("req_{i}"));
        }
        let body = req.json();
        let tool = if kind == "anthropic" {
            body["tool_choice"]["name"].as_str().unwrap().to_string()
        } else {
            body["tool_choice"]["function"]["name"]
                .as_str()
                .or(body["tools"][0]["function"]["name"].as_str())
                .unwrap()
                .to_string()
        };
        let args = match tool.as_str() {
            "frame_answer" => {
                serde_json::json!({"goal": "digest", "definition_of_done": ["notes read", "digest written", "facts noted"], "can_proceed": true})
            }
            "plan_answer" => serde_json::json!({"next_action": {"tool": "file_read", "args": {"path": "notes.txt"}}}),
            _ => {
                serde_json::json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}],
                "decision": "done", "reason": "read", "outcome": "digest written"})
            }
        };
        let reply = if kind == "anthropic" {
            Reply::json(
                200,
                serde_json::json!({"id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": "toolu_01", "name": tool, "input": args}],
                "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 20}}),
            )
        } else {
            Reply::json(
                200,
                serde_json::json!({"id": format!("chatcmpl-{i}"), "object": "chat.completion", "model": "gpt-4o-mini",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
            )
        };
        reply.header("request-id", &format!("req_{i}")).header("x-request-id", &format!("req_{i}"))
    })
}

/// Every span of a done run and of a run whose provider failed, over both wire formats, holds
/// what the conventions require of its operation; the failed run's span is an error.
#[test]
fn every_span_carries_what_the_conventions_require_of_its_operation() {
    let dir = tempfile::tempdir().unwrap();
    let test = "every_span_carries_what_the_conventions_require_of_its_operation";
    let Some(rx) = Receiver::start(dir.path(), test) else { return };
    // Spans the receiver had before the run at hand.
    let mut seen = 0;
    for kind in ["anthropic", "openai"] {
        for fail in [false, true] {
            let server = provider(kind, fail);
            let t = T::new();
            t.write("ws/notes.txt", "hello from the notes\n");
            let out = t
                .al(&["--provider", kind, "--base-url", &server.url, "run", "--goal", "digest the notes"])
                .env("ANTHROPIC_API_KEY", "k")
                .env("OPENAI_API_KEY", "k")
                .env("AGENTLOOP_LLM__BACKOFF_MS", "10")
                .env("AGENTLOOP_LLM__ATTEMPTS", "2")
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url())
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(if fail { 5 } else { 0 }), "{kind}: {}", stderr(&out));
            // This run's spans: the ones the receiver got since the last run (each command
            // exports all of its spans before it exits).
            let spans = rx.spans().split_off(seen);
            seen += spans.len();
            let bad: Vec<String> = spans.iter().flat_map(conformance).collect();
            assert!(bad.is_empty(), "{kind}, provider failing: {fail}: {bad:#?}\n{spans:#?}");

            let [agent] = named(&spans, "invoke_agent")[..] else { panic!("one invoke_agent span: {spans:#?}") };
            assert_eq!(agent["attributes"]["gen_ai.provider.name"], kind);
            let chats = named(&spans, "chat ");
            let port = server.url.rsplit(':').next().unwrap().parse::<u64>().unwrap();
            for c in &chats {
                let a = &c["attributes"];
                assert_eq!(a["gen_ai.provider.name"], kind, "{c}");
                assert_eq!(a["server.address"], "127.0.0.1", "{c}");
                assert_eq!(a["server.port"], port, "{c}");
            }
            if fail {
                assert_eq!(agent["status"], 2, "a provider failure is the run's error: {agent}");
                assert_eq!(agent["attributes"]["error.type"], "provider", "{agent}");
                assert_eq!(agent["attributes"]["agentloop.run.stop"], "provider", "{agent}");
                assert!(!chats.is_empty() && chats.iter().all(|c| c["status"] == 2), "{chats:#?}");
                assert!(chats.iter().all(|c| c["attributes"].get("gen_ai.response.id").is_none()), "{chats:#?}");
            } else {
                assert_eq!(agent["status"], 0, "{agent}");
                assert_eq!(chats.len(), 3, "{spans:#?}");
                assert_eq!(named(&spans, "execute_tool").len(), 1, "{spans:#?}");
                // The completion's own id, never the request-id header's.
                let prefix = if kind == "anthropic" { "msg_" } else { "chatcmpl-" };
                for c in &chats {
                    let id = c["attributes"]["gen_ai.response.id"].as_str().unwrap_or_default();
                    assert!(id.starts_with(prefix), "{kind}: gen_ai.response.id `{id}`: {c}");
                }
            }
        }
    }
}
