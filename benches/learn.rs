//! `make bench`'s learning part: what a skill learned from a done run saves the next run of the
//! same job, in steps and in the prompt tokens agentloop sends.
//!
//! Day 1 runs "Morning notes digest" against a local OpenAI-compatible fake (tiny_http on
//! 127.0.0.1) whose model has no skill to follow: it looks around first (the folder, context.md),
//! then reads notes.txt, writes the digest and finishes. `agentloop skills learn notes-digest`
//! then drafts a skill from that run (one call to the same fake). Day 2 runs the same goal afresh
//! (`run --new`). The fake's model follows a skill only when agentloop shows it one: when a plan
//! request names the learned skill it calls `skill_read`, and from then on it takes the numbered
//! steps of the skill's instructions as they appear in the request (`N. … with TOOL`), so the
//! skill must reach the prompt and stay in view for day 2 to be shorter. Everything else — the
//! prompts, the catalog line the skill adds, the instructions kept in view — is what agentloop
//! really sends; tokens are estimated as the requests' compact JSON bytes / 4, as benches/loop.rs
//! counts them. The bench fails unless day 2 takes fewer steps and fewer tokens than day 1.

#![allow(clippy::print_stdout, clippy::disallowed_methods, clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// What the fake saw and decided in one run.
#[derive(Default)]
struct Day {
    /// Every request body, for the token count.
    bodies: Vec<Value>,
    /// The actions planned so far, in order.
    plans: Vec<(String, Value)>,
    reflections: usize,
}

/// Tokens of a request as sent: its tools and messages, compact JSON bytes / 4, rounded up.
fn tokens(body: &Value) -> u64 {
    let part = |k: &str| body.get(k).map_or(0, |v| v.to_string().len() as u64);
    (part("tools") + part("messages")).div_ceil(4)
}

/// The numbered steps of the learned skill's instructions in view in this request, as tools in
/// order (`2. Write … with file_write.` → file_write); empty when no skill text is in view.
fn skill_steps(request: &str) -> Vec<String> {
    let Some(at) = request.find("Read notes.txt with file_read") else {
        return Vec::new();
    };
    let tail = &request[at.saturating_sub(3)..];
    let mut tools = Vec::new();
    for n in 1..=9 {
        let Some(i) = tail.find(&format!("{n}. ")) else { break };
        let line = tail[i..].split("\\n").next().unwrap_or("");
        match line.rsplit_once(" with ") {
            Some((_, t)) => tools.push(t.trim_end_matches(['.', '"']).to_string()),
            None => break,
        }
    }
    tools
}

/// The action a tool stands for in this job.
fn action(tool: &str) -> (String, Value) {
    let args = match tool {
        "file_read" => json!({"path": "notes.txt"}),
        "file_write" => json!({"path": "artifacts/digest.md", "content": "- a\n- b\n- c\n"}),
        "finish" => json!({"summary": "digest written", "artifacts": ["artifacts/digest.md"]}),
        other => panic!("the skill names a tool this job does not use: {other}"),
    };
    (tool.to_string(), args)
}

/// The model's next action: the skill's next step when one is in view, `skill_read` when the
/// skill is offered but not read, else the day-1 path that looks around first.
fn plan(day: &Day, request: &str) -> (String, Value) {
    let done = day.plans.len();
    let read = day.plans.iter().any(|(t, _)| t == "skill_read");
    if read {
        let steps = skill_steps(request);
        assert!(!steps.is_empty(), "the skill's instructions left the prompt after skill_read");
        return match steps.get(done - 1) {
            Some(t) => action(t),
            None => action("finish"),
        };
    }
    if done == 0 && request.contains("notes-digest") {
        return ("skill_read".into(), json!({"name": "notes-digest"}));
    }
    match done {
        0 => ("list_dir".into(), json!({"path": "."})),
        1 => ("file_read".into(), json!({"path": "context.md"})),
        2 => action("file_read"),
        3 => action("file_write"),
        _ => action("finish"),
    }
}

/// Reflect: ticks every item once the finish is planned (citing the read and the write), else
/// goes on.
fn reflect(day: &Day) -> Value {
    let last = day.plans.last().map(|(t, _)| t.as_str());
    if last != Some("finish") {
        return json!({"decision": "continue", "reason": "more to do"});
    }
    let step = |tool: &str, path: &str| {
        day.plans.iter().position(|(t, a)| t == tool && a["path"] == path).map(|i| i as u32 + 1).unwrap_or(1)
    };
    let (read, write) = (step("file_read", "notes.txt"), step("file_write", "artifacts/digest.md"));
    json!({"satisfied": [
            {"item": 1, "steps": [read]},
            {"item": 2, "steps": [write], "artifacts": ["artifacts/digest.md"]},
            {"item": 3, "steps": [write]}],
        "decision": "done", "reason": "digest written", "outcome": "digest written"})
}

/// The fake's answer to one forced call.
fn answer(day: &mut Day, tool: &str, body: &Value) -> Value {
    let request = body.to_string();
    match tool {
        "frame_answer" => json!({"goal": "digest the morning notes", "can_proceed": true,
            "definition_of_done": ["notes.txt read", "artifacts/digest.md holds the digest", "the digest lists every note"]}),
        "plan_answer" => {
            let (t, args) = plan(day, &request);
            day.plans.push((t.clone(), args.clone()));
            json!({"next_action": {"tool": t, "args": args}, "rationale": "the next step"})
        }
        "reflect_answer" => {
            day.reflections += 1;
            reflect(day)
        }
        "learn_answer" => json!({
            "description": "Digest notes.txt into artifacts/digest.md. Use for the morning notes digest.",
            "triggers": ["notes digest"],
            "instructions": "1. Read notes.txt with file_read.\n2. Write the digest to artifacts/digest.md with file_write."}),
        other => panic!("the fake has no answer for {other}"),
    }
}

/// Starts the fake; every request lands in the current `Day`.
fn fake(day: Arc<Mutex<Day>>) -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let addr = server.server_addr().to_ip().unwrap().to_string();
    std::thread::spawn(move || {
        for mut req in server.incoming_requests() {
            let mut text = String::new();
            let _ = req.as_reader().read_to_string(&mut text);
            let body: Value = serde_json::from_str(&text).unwrap_or_default();
            let tool = body.pointer("/tool_choice/function/name").and_then(Value::as_str).unwrap_or("").to_string();
            let prompt_tokens = tokens(&body);
            let args = {
                let mut d = day.lock().unwrap();
                let a = answer(&mut d, &tool, &body);
                d.bodies.push(body);
                a
            };
            let reply = json!({"id": "chatcmpl-learn", "object": "chat.completion", "created": 1, "model": "fake",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "",
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 40, "total_tokens": prompt_tokens + 40}});
            let header = tiny_http::Header::from_bytes("content-type", "application/json").unwrap();
            let _ = req.respond(tiny_http::Response::from_string(reply.to_string()).with_header(header));
        }
    });
    addr
}

/// Runs agentloop in `dir` and checks it exited 0.
fn al(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentloop"))
        .current_dir(dir)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .args(["-q", "-w", "ws", "--config", "agentloop.yaml"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "agentloop {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Steps and tokens of the run that just ended, and resets the fake for the next.
fn take(day: &Arc<Mutex<Day>>, dir: &std::path::Path) -> (u64, u64, usize) {
    let result: Value = serde_json::from_slice(&std::fs::read(dir.join("ws/result.json")).unwrap()).unwrap();
    assert_eq!(result["status"], "done", "{result}");
    let mut d = day.lock().unwrap();
    let figures = (result["steps_taken"].as_u64().unwrap_or(0), d.bodies.iter().map(tokens).sum(), d.bodies.len());
    *d = Day::default();
    figures
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let day = Arc::new(Mutex::new(Day::default()));
    let addr = fake(day.clone());
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(dir.join("ws/notes.txt"), "a\nb\nc\n").unwrap();
    let cfg = format!("llm:\n  provider: openai\n  base_url: http://{addr}/v1\n  model: fake\n  attempts: 1\n");
    std::fs::write(dir.join("agentloop.yaml"), cfg).unwrap();

    al(dir, &["run", "--goal", "Morning notes digest"]);
    let one = take(&day, dir);
    al(dir, &["skills", "learn", "notes-digest"]);
    let learn: u64 = day.lock().unwrap().bodies.iter().map(tokens).sum();
    *day.lock().unwrap() = Day::default();
    al(dir, &["run", "--new", "--goal", "Morning notes digest"]);
    let two = take(&day, dir);

    println!("learning: a skill learned from day 1, used on day 2 (prompt tokens = request JSON bytes / 4)");
    println!("  {:<28} {:>6} {:>9} {:>8}", "", "steps", "requests", "tokens");
    println!("  {:<28} {:>6} {:>9} {:>8}", "day 1 (no skill)", one.0, one.2, one.1);
    println!("  {:<28} {:>6} {:>9} {:>8}", "day 2 (learned skill)", two.0, two.2, two.1);
    println!("  {:<28} {:>6} {:>9} {:>8}", "skills learn (once)", "", 1, learn);
    let saved = 1.0 - two.1 as f64 / one.1 as f64;
    println!("  saving on day 2: {} step(s), {:.0}% of prompt tokens", one.0 - two.0, saved * 100.0);
    assert!(two.0 < one.0, "day 2 must take fewer steps than day 1");
    assert!(two.1 < one.1, "day 2 must send fewer prompt tokens than day 1");
}
