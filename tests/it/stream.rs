//! Streamed answers (`llm.stream`, `--stream`) against fake servers on 127.0.0.1 that write
//! real event streams over chunked HTTP, piece by piece: OpenAI Chat Completions chunks (with
//! `: ping` comments, tool-call ids and names repeated in every piece as llama-cpp-python does,
//! or sent once as OpenAI does, usage present or absent) and Anthropic Messages events (with
//! `event:` lines and `ping` events). The pieces reach `--events` as `model.delta` entries;
//! trace.jsonl is the same as for a run that does not stream.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

const KEY: &str = "sk-ant-test-SECRET-1234";

/// What the fake server writes back for one request.
enum Answer {
    /// An event stream: these pieces, each written and flushed as its own HTTP chunk; `cut`
    /// drops the connection after them instead of ending the body.
    Sse { pieces: Vec<String>, cut: bool },
    /// A plain JSON body (a server that ignores `stream: true`).
    Json(Value),
    /// A JSON body with another status (an error).
    Status(u16, Value),
    /// An event stream of `: ping` comments, one every `gap` ms, `n` of them: alive, no answer.
    Trickle { n: usize, gap: u64 },
}

struct SseServer {
    url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl SseServer {
    fn start(f: impl Fn(usize, &Value) -> Answer + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let rec = requests.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let l = line.trim_end().to_ascii_lowercase();
                    if l.is_empty() {
                        break;
                    }
                    if let Some(v) = l.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0u8; len];
                if reader.read_exact(&mut body).is_err() {
                    continue;
                }
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let i = {
                    let mut g = rec.lock().unwrap();
                    g.push(body.clone());
                    g.len() - 1
                };
                let answer = match f(i, &body) {
                    Answer::Json(v) => Answer::Status(200, v),
                    other => other,
                };
                match answer {
                    Answer::Json(_) => unreachable!("sent as Status"),
                    Answer::Status(code, v) => {
                        let b = v.to_string();
                        let _ = write!(
                            conn,
                            "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}",
                            b.len()
                        );
                    }
                    Answer::Trickle { n, gap } => {
                        let _ = write!(
                            conn,
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                        );
                        for _ in 0..n {
                            if write!(conn, "8\r\n: ping\n\n\r\n").and_then(|_| conn.flush()).is_err() {
                                break;
                            }
                            std::thread::sleep(std::time::Duration::from_millis(gap));
                        }
                    }
                    Answer::Sse { pieces, cut } => {
                        let _ = write!(conn, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n");
                        for p in pieces {
                            let _ = write!(conn, "{:x}\r\n{p}\r\n", p.len());
                            let _ = conn.flush();
                            std::thread::sleep(std::time::Duration::from_millis(2));
                        }
                        if !cut {
                            let _ = write!(conn, "0\r\n\r\n");
                        }
                    }
                }
                let _ = conn.flush();
                let _ = conn.shutdown(std::net::Shutdown::Both);
            }
        });
        SseServer { url, requests }
    }
    fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
    fn request(&self, i: usize) -> Value {
        self.requests.lock().unwrap()[i].clone()
    }
}

/// A valid answer for each phase's forced tool (the run writes x.md and finishes).
fn answer(tool: &str) -> Value {
    match tool {
        "frame_answer" => json!({"goal": "write x", "definition_of_done": ["x written", "x is short", "run ends"]}),
        "plan_answer" => json!({
            "next_action": {"tool": "file_write", "args": {"path": "artifacts/x.md", "content": "hello"}},
            "expected_outcome": "x written", "rationale": "the one thing to do"
        }),
        "report_color" => json!({"color": "blue"}),
        // A run asks Reflect and the next Plan in one call (`llm.fuse_phases`); the reflection
        // decides done, so there is no plan half.
        "reflect_plan_answer" => json!({"reflect": answer("reflect_answer")}),
        _ => {
            json!({"satisfied": [{"item": 1, "steps": [1], "artifacts": ["artifacts/x.md"]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "x written", "outcome": "wrote x",
            "artifacts": ["artifacts/x.md"]})
        }
    }
}

/// Splits text into pieces of at most `n` characters.
fn split(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

fn data(v: Value) -> String {
    format!("data: {v}\n\n")
}

/// An OpenAI stream for one tool call. `llama`: id and name in every piece, no usage chunk,
/// `data:` without a space; otherwise OpenAI's way (id and name once, a usage chunk).
fn openai_stream(tool: &str, args: &str, llama: bool) -> Vec<String> {
    let mut out = vec![": ping\n\n".to_string()];
    out.push(data(json!({"id": "chatcmpl-9", "object": "chat.completion.chunk", "model": "m-1",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Thinking. "}, "finish_reason": null}]})));
    for (i, piece) in split(args, 7).into_iter().enumerate() {
        let mut call = json!({"index": 0, "function": {"arguments": piece}});
        if llama || i == 0 {
            call["id"] = json!("call_abc");
            call["type"] = json!("function");
            call["function"]["name"] = json!(tool);
        }
        let chunk = json!({"id": "chatcmpl-9", "object": "chat.completion.chunk", "model": "m-1",
            "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]});
        out.push(if llama { format!("data:{chunk}\r\n\r\n") } else { data(chunk) });
        if i == 1 {
            out.push(": ping\n\n".into());
        }
    }
    out.push(data(json!({"id": "chatcmpl-9", "object": "chat.completion.chunk", "model": "m-1",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], "usage": null})));
    if !llama {
        out.push(data(json!({"id": "chatcmpl-9", "object": "chat.completion.chunk", "model": "m-1", "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})));
    }
    out.push("data: [DONE]\n\n".into());
    out
}

/// The same answer as one JSON body.
fn openai_json(tool: &str, args: &str, llama: bool) -> Value {
    let mut v = json!({"id": "chatcmpl-9", "object": "chat.completion", "model": "m-1",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Thinking. ",
            "tool_calls": [{"id": "call_abc", "type": "function", "function": {"name": tool, "arguments": args}}]}}]});
    if !llama {
        v["usage"] = json!({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110});
    }
    v
}

fn ev(name: &str, v: Value) -> String {
    format!("event: {name}\ndata: {v}\n\n")
}

fn anthropic_stream(tool: &str, args: &str) -> Vec<String> {
    let mut out = vec![ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_7", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 50, "cache_read_input_tokens": 1000}}}),
    )];
    out.push(ev("ping", json!({"type": "ping"})));
    out.push(ev(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    for t in ["Let me ", "answer."] {
        out.push(ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
        ));
    }
    out.push(ev("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
    out.push(ev(
        "content_block_start",
        json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_9", "name": tool, "input": {}}}),
    ));
    out.push(ev(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
    ));
    for p in split(args, 9) {
        out.push(ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": p}}),
        ));
    }
    out.push(ev("ping", json!({"type": "ping"})));
    out.push(ev("content_block_stop", json!({"type": "content_block_stop", "index": 1})));
    out.push(ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    ));
    out.push(ev("message_stop", json!({"type": "message_stop"})));
    out
}

fn anthropic_json(tool: &str, args: &str) -> Value {
    json!({"id": "msg_7", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Let me answer."},
            {"type": "tool_use", "id": "toolu_9", "name": tool, "input": serde_json::from_str::<Value>(args).unwrap()}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 50, "cache_read_input_tokens": 1000}})
}

/// The forced tool of a request in either format.
/// A server answering every phase in `format` (openai, llama, anthropic), streamed when the
/// request asks for it and the server is not told to ignore it.
fn phase_server(format: &'static str, ignore_stream: bool) -> SseServer {
    SseServer::start(move |_, body| {
        let tool = forced_tool(body);
        let args = answer(&tool).to_string();
        let stream = body["stream"] == true && !ignore_stream;
        match (format, stream) {
            ("anthropic", true) => Answer::Sse { pieces: anthropic_stream(&tool, &args), cut: false },
            ("anthropic", false) => Answer::Json(anthropic_json(&tool, &args)),
            (_, true) => Answer::Sse { pieces: openai_stream(&tool, &args, format == "llama"), cut: false },
            (_, false) => Answer::Json(openai_json(&tool, &args, format == "llama")),
        }
    })
}

fn cmd(t: &T, format: &str, url: &str, ws: &str) -> assert_cmd::Command {
    let mut c = t.cmd();
    c.args(["-w", ws, "--base-url", url]).env("AGENTLOOP_LLM__BACKOFF_MS", "10");
    if format == "anthropic" {
        c.args(["--provider", "anthropic"]).env("ANTHROPIC_API_KEY", KEY);
    } else {
        c.args(["--provider", "openai", "--model", "m-1"]);
    }
    c
}

/// trace.jsonl without what differs between two runs of the same answers (time, ids).
fn trace_of(t: &T, ws: &str) -> Vec<Value> {
    t.read(&format!("{ws}/trace.jsonl"))
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            for k in ["ts", "run_id", "duration_ms"] {
                v.as_object_mut().unwrap().remove(k);
            }
            v
        })
        .collect()
}

/// Streams a whole run and checks the pieces and the trace against a run without streaming.
fn streamed_run_matches_a_plain_one(format: &'static str) {
    // Two folders, so the second run recalls nothing from the first.
    let (p, t) = (T::new(), T::new());
    let s = phase_server(format, false);
    let out = cmd(&p, format, &s.url, "ws").args(["run", "--goal", "write x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plain_requests = s.count();
    assert!((0..plain_requests).all(|i| s.request(i).get("stream").is_none()));

    let out =
        cmd(&t, format, &s.url, "ws").args(["--stream", "run", "--goal", "write x", "--events"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(s.count(), 2 * plain_requests, "one request per call, streamed or not");
    let first = s.request(plain_requests);
    assert_eq!(first["stream"], true);
    if format == "anthropic" {
        assert!(first.get("stream_options").is_none());
    } else {
        assert_eq!(first["stream_options"], json!({"include_usage": true}));
    }

    // The trace is the one a plain run writes: same entries, usage, models, no pieces.
    assert_eq!(trace_of(&t, "ws"), trace_of(&p, "ws"));
    let trace = t.read("ws/trace.jsonl");
    assert!(!trace.contains("model.delta"));
    let usage = &trace_of(&t, "ws").into_iter().find(|e| e["event"] == "frame").unwrap()["usage"];
    match format {
        "anthropic" => assert_eq!(
            usage,
            &json!({"input_tokens": 100, "output_tokens": 20, "cache_write_tokens": 50, "cache_read_tokens": 1000})
        ),
        "llama" => assert_eq!(usage["output_tokens"], 0, "no usage sent: zero counts, no error"),
        _ => assert_eq!(usage["output_tokens"], 10),
    }

    // --events: the pieces, interleaved with the committed entries, join into each answer.
    let events: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let deltas: Vec<&Value> = events.iter().filter(|e| e["event"] == "model.delta").collect();
    assert!(deltas.len() > 10, "{deltas:?}");
    for phase in ["frame", "plan", "reflect"] {
        // Reflect is asked with the next Plan in one call (`llm.fuse_phases`), its pieces
        // under `reflect`.
        let tool = if phase == "reflect" { "reflect_plan_answer".to_string() } else { format!("{phase}_answer") };
        let args: String = deltas
            .iter()
            .filter(|e| e["phase"] == phase && e["data"]["tool"] == tool.as_str())
            .map(|e| e["data"]["arguments"].as_str().unwrap())
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&args).unwrap(), answer(&tool), "{phase}");
        let first = deltas.iter().find(|e| e["phase"] == phase).unwrap();
        assert_eq!(first["attempt"], 1);
        assert!(first["run_id"].as_str().is_some_and(|r| !r.is_empty()));
        assert_eq!(first["step"], events.iter().find(|e| e["event"] == phase).unwrap()["step"]);
        // Each call's pieces come before the entry that commits its answer.
        let at = |p: &dyn Fn(&Value) -> bool| events.iter().position(p).unwrap();
        assert!(at(&|e| e["event"] == "model.delta" && e["phase"] == phase) < at(&|e| e["event"] == phase));
    }
    let text: String =
        deltas.iter().filter(|e| e["phase"] == "frame").filter_map(|e| e["data"]["text"].as_str()).collect();
    assert_eq!(text, if format == "anthropic" { "Let me answer." } else { "Thinking. " });
    let ids: Vec<&str> = deltas.iter().filter_map(|e| e["data"]["call_id"].as_str()).collect();
    assert!(ids.iter().all(|i| *i == if format == "anthropic" { "toolu_9" } else { "call_abc" }), "{ids:?}");
    assert_eq!(t.read("ws/artifacts/x.md"), "hello");
}

#[test]
fn openai_streamed_run_matches_a_plain_one() {
    streamed_run_matches_a_plain_one("openai");
}

#[test]
fn llama_cpp_python_streams_with_repeated_ids_and_no_usage() {
    streamed_run_matches_a_plain_one("llama");
}

#[test]
fn anthropic_streamed_run_matches_a_plain_one() {
    streamed_run_matches_a_plain_one("anthropic");
}

#[test]
fn a_server_that_ignores_stream_true_still_works() {
    for format in ["openai", "anthropic"] {
        let t = T::new();
        let s = phase_server(format, true);
        let out =
            cmd(&t, format, &s.url, "ws").args(["--stream", "run", "--goal", "write x", "--events"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{format}: {}", stderr(&out));
        assert_eq!(s.request(0)["stream"], true);
        assert!(!stdout(&out).contains("model.delta"), "a JSON answer has no pieces");
        assert_eq!(t.read("ws/artifacts/x.md"), "hello");
    }
}

#[test]
fn the_stream_key_in_config_and_env_turns_streaming_on() {
    let t = T::new();
    let s = phase_server("openai", false);
    t.write("ws/agentloop.yaml", "llm: {stream: true}\n");
    let out = cmd(&t, "openai", &s.url, "ws").args(["models", "test", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(s.request(0)["stream"], true);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tool_calling"], true, "{v}");
    let out = cmd(&t, "openai", &s.url, "ws2").env("AGENTLOOP_LLM__STREAM", "false").args(["models", "test"]).output();
    assert!(out.unwrap().status.success());
    assert!(s.request(s.count() - 1).get("stream").is_none());
    t.write("ws3/agentloop.yaml", "llm: {stream: sometimes}\n");
    let out = cmd(&t, "openai", &s.url, "ws3").args(["models", "test"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("llm.stream"), "{}", stderr(&out));
}

#[test]
fn a_stream_that_breaks_before_any_piece_is_sent_again() {
    let t = T::new();
    let s = SseServer::start(|i, body| {
        let tool = forced_tool(body);
        match i {
            // Headers, a ping, then the connection drops.
            0 => Answer::Sse { pieces: vec![": ping\n\n".into()], cut: true },
            // An overloaded_error event before any content.
            1 => Answer::Sse {
                pieces: vec![
                    ev("ping", json!({"type": "ping"})),
                    ev(
                        "error",
                        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                    ),
                ],
                cut: false,
            },
            _ => Answer::Sse { pieces: anthropic_stream(&tool, &answer(&tool).to_string()), cut: false },
        }
    });
    let out = cmd(&t, "anthropic", &s.url, "ws").args(["--stream", "models", "test", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(s.count(), 3);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tool_calling"], true, "{v}");
    assert_eq!(v["request_id"], "msg_7");
}

#[test]
fn a_stream_that_breaks_after_pieces_were_shown_is_not_sent_again() {
    let t = T::new();
    let s = SseServer::start(|_, body| {
        let mut pieces = openai_stream(&forced_tool(body), &answer("frame_answer").to_string(), false);
        pieces.truncate(4);
        Answer::Sse { pieces, cut: true }
    });
    let out = cmd(&t, "openai", &s.url, "ws").args(["--stream", "run", "--goal", "g", "--events"]).output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(s.count(), 1, "not retried");
    let err = stderr(&out);
    assert!(err.contains("after part of the answer had been shown live; not sent again"), "{err}");
    assert!(stdout(&out).contains("\"model.delta\""));
    let finished = t.trace().into_iter().find(|e| e["event"] == "run.finished").unwrap();
    assert!(finished["reason"].as_str().unwrap().contains("shown live"), "{finished}");
}

#[test]
fn malformed_event_streams_are_clear_errors_not_panics() {
    for (name, pieces) in [
        ("not json", vec!["data: {\"choices\": [\n\n".to_string()]),
        ("no end", vec![": ping\n\n".to_string(), "event: x\n\n".to_string()]),
        ("binary", vec!["data: \u{1}\u{2}\u{3}\n\n".to_string()]),
    ] {
        let t = T::new();
        let pieces2 = pieces.clone();
        let s = SseServer::start(move |_, _| Answer::Sse { pieces: pieces2.clone(), cut: false });
        let out = cmd(&t, "openai", &s.url, "ws")
            .env("AGENTLOOP_LLM__ATTEMPTS", "2")
            .args(["--stream", "models", "test"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(5), "{name}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("the stream from") && !err.contains("panicked"), "{name}: {err}");
    }
}

#[test]
fn a_stream_larger_than_the_cap_is_refused() {
    let t = T::new();
    let s = SseServer::start(|_, body| {
        let mut pieces = vec![];
        for _ in 0..200 {
            pieces.push(data(json!({"choices": [{"index": 0, "delta": {"content": "x".repeat(100)}}]})));
        }
        pieces.extend(openai_stream(&forced_tool(body), "{\"color\": \"blue\"}", false));
        Answer::Sse { pieces, cut: false }
    });
    let out = cmd(&t, "openai", &s.url, "ws")
        .env("AGENTLOOP_LLM__MAX_RESPONSE_BYTES", "4096")
        .args(["--stream", "models", "test"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("larger than llm.max_response_bytes"), "{}", stderr(&out));
}

#[test]
fn a_name_that_does_not_resolve_is_retried_like_a_refused_connection() {
    let t = T::new();
    t.write("ws/.keep", "");
    let out = t
        .cmd()
        .args(["-w", "ws", "--provider", "openai", "--model", "m", "--base-url", "http://agentloop-test.invalid:9/v1"])
        .args(["-v", "models", "test"])
        .env("AGENTLOOP_LLM__BACKOFF_MS", "10")
        .env("AGENTLOOP_LLM__ATTEMPTS", "3")
        .env("AGENTLOOP_LOGGING__FILE", "log.txt")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("cannot resolve agentloop-test.invalid") || err.contains("host not found"), "{err}");
    assert!(err.contains("(after 3 attempts)"), "{err}");
    let log = std::fs::read_to_string(t.path("ws/log.txt")).unwrap_or_default();
    let retries =
        log.lines().filter(|l| l.contains("cannot reach http://agentloop-test.invalid:9/v1/chat/completions"));
    assert_eq!(retries.filter(|l| l.contains("; attempt ")).count(), 2, "{log}");
}

#[test]
fn a_terminal_sees_the_answer_grow_on_the_progress_line() {
    // `script` gives the command a terminal for stderr; without it there is nothing to show.
    if std::process::Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` command to provide a terminal");
        return;
    }
    let t = T::new();
    let s = phase_server("anthropic", false);
    let bin = assert_cmd::cargo::cargo_bin("agentloop");
    let line = format!(
        "{} -w ws --provider anthropic --base-url {} --stream run --goal 'write x' >/dev/null",
        bin.display(),
        s.url
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(t.root())
        .env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("XDG_CACHE_HOME", t.path("cache"))
        .env("AGENTLOOP_NOW", NOW)
        .env("ANTHROPIC_API_KEY", KEY)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("[step 0] frame   ▸ Let me answer.{\""), "{shown}");
    assert!(shown.contains("[step 1] plan    ▸ Let me answer."), "{shown}");
    assert!(!shown.contains(KEY));
}

#[test]
fn a_stream_that_only_pings_cannot_outlast_the_run_timeout() {
    let t = T::new();
    let s = SseServer::start(|_, _| Answer::Trickle { n: 400, gap: 50 });
    let start = std::time::Instant::now();
    let mut c = cmd(&t, "openai", &s.url, "ws");
    // The real clock: the run's duration is measured.
    let out =
        c.args(["--stream", "--timeout", "2s", "run", "--goal", "g"]).env_remove("AGENTLOOP_NOW").output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(start.elapsed() < std::time::Duration::from_secs(8), "took {:?}", start.elapsed());
    assert!(stderr(&out).contains("wall-clock limit"), "{}", stderr(&out));
    let r = t.json("ws/result.json");
    assert_eq!(r["stop"], "timeout", "{r}");
    assert!(r["duration_ms"].as_u64().unwrap() >= 1500, "the time the run took, not 0: {r}");
}

#[test]
fn streaming_goes_through_wire_negotiation_and_drops_stream_options_a_server_refuses() {
    let t = T::new();
    let s = SseServer::start(|_, body| {
        if body.get("stream_options").is_some() {
            return Answer::Status(
                400,
                json!({"error": {"message": "Unrecognized request argument supplied: stream_options", "type": "invalid_request_error"}}),
            );
        }
        let tool = forced_tool(body);
        // Like llama-server: a named function is answered without the call.
        if body["tool_choice"]["type"] == "function" {
            let text = json!({"id": "x", "choices": [{"index": 0, "delta": {"content": "I will not call it."}, "finish_reason": "stop"}]});
            return Answer::Sse { pieces: vec![data(text), "data: [DONE]\n\n".into()], cut: false };
        }
        Answer::Sse { pieces: openai_stream(&tool, &answer(&tool).to_string(), true), cut: false }
    });
    let out =
        cmd(&t, "openai", &s.url, "ws").args(["--stream", "run", "--goal", "write x", "--events"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let forms: Vec<String> = t.trace().iter().filter_map(|e| e["wire_form"].as_str().map(String::from)).collect();
    assert_eq!(forms, ["tool_required", "tool_required", "tool_required"]);
    // stream_options went once, was refused, and never went again; every request streamed.
    let with: Vec<usize> = (0..s.count()).filter(|i| s.request(*i).get("stream_options").is_some()).collect();
    assert_eq!(with, [0]);
    assert!((0..s.count()).all(|i| s.request(i)["stream"] == true));
    assert!(stdout(&out).contains("I will not call it."), "the unanswered form's text was shown live too");
}
