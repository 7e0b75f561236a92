//! One stable prompt prefix for every Plan and Reflect call of a run: the same answer tools in
//! the same order, the same system message, the same task part, so a server's prompt cache
//! (llama.cpp's prefix match, OpenAI's automatic caching, Anthropic's cache breakpoints) serves
//! it from the second of them on; Frame, first, sends its own tool alone. A provider that does
//! not cache gets each phase's smallest prompt.

use crate::common::*;
use serde_json::{json, Value};

/// A server that answers whichever answer tool a request forces: frame, one plan
/// (file_write), then reflect `done`; Anthropic replies say 1,000 tokens came from the cache.
pub fn server(anthropic: bool) -> Server {
    Server::start_with(move |i, req| {
        let body = req.json();
        let tool = body["tool_choice"]["name"]
            .as_str()
            .or(body["tool_choice"]["function"]["name"].as_str())
            .unwrap_or("")
            .to_string();
        let args = match tool.as_str() {
            "frame_answer" => json!({"goal": "g", "definition_of_done": ["a", "b", "c"], "can_proceed": true}),
            "plan_answer" => {
                json!({"next_action": {"tool": "file_write", "args": {"path": "artifacts/x.md", "content": "hello"}},
                "expected_outcome": "x", "rationale": "y"})
            }
            _ => {
                json!({"satisfied": [{"item": 1, "steps": [1], "artifacts": ["artifacts/x.md"]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "ok", "outcome": "wrote x",
                "artifacts": ["artifacts/x.md"]})
            }
        };
        if anthropic {
            let read = if i == 0 { 0 } else { 1000 };
            Reply::json(
                200,
                json!({"id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "tool_use", "id": format!("tu_{i}"), "name": tool, "input": args}],
                    "stop_reason": "tool_use",
                    "usage": {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": if i == 0 { 1000 } else { 0 },
                        "cache_read_input_tokens": read}}),
            )
        } else {
            Reply::json(
                200,
                json!({"id": format!("c{i}"), "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": "", "tool_calls": [{"id": format!("call_{i}"), "type": "function",
                        "function": {"name": tool, "arguments": args.to_string()}}]}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20}}),
            )
        }
    })
}

fn run(t: &T, s: &Server, anthropic: bool, unshared: bool) -> std::process::Output {
    // The prefix each phase's own call sends is the point here, so Reflect and Plan are asked
    // apart (a fused run's one prefix is `fused::`'s and the bench's).
    t.write("ws/agentloop.yaml", "llm:\n  structured: tools\n  fuse_phases: false\n");
    let provider = if anthropic { "anthropic" } else { "openai" };
    let mut c = t.al(&["--provider", provider, "--base-url", &s.url, "run", "--goal", "write x", "--max-steps", "3"]);
    c.env(if anthropic { "ANTHROPIC_API_KEY" } else { "OPENAI_API_KEY" }, "sk-test-prefix");
    if unshared {
        c.env("AGENTLOOP_UNSHARED_PREFIX", "1");
    }
    c.output().unwrap()
}

fn names(tools: &Value, key: &str) -> Vec<String> {
    tools.as_array().unwrap().iter().map(|t| t.pointer(key).and_then(Value::as_str).unwrap().to_string()).collect()
}

/// The longest common byte prefix of two texts.
fn common(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

#[test]
fn every_call_of_a_run_starts_with_the_same_tools_system_message_and_task() {
    let t = T::new();
    let s = server(false);
    let out = run(&t, &s, false, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bodies: Vec<Value> = (0..s.count()).map(|i| s.request(i).json()).collect();
    let forced: Vec<&str> = bodies.iter().map(|b| b["tool_choice"]["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(forced, ["frame_answer", "plan_answer", "reflect_answer"]);
    // Frame, the first call, has nothing to share a prefix with: its own tool alone.
    assert_eq!(names(&bodies[0]["tools"], "/function/name"), ["frame_answer"]);
    for b in &bodies {
        assert_eq!(b["messages"][0], bodies[0]["messages"][0], "one system message for every phase");
        assert_eq!(b["messages"][0]["role"], "system");
    }
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("<skills.md>") && system.contains("file_write"), "the catalog is in it: {system}");
    // Plan and Reflect send the same answer tools, byte for byte; the phase's own is forced by name.
    for b in &bodies[1..] {
        assert_eq!(names(&b["tools"], "/function/name"), ["plan_answer", "reflect_answer"]);
    }
    assert_eq!(bodies[1]["tools"], bodies[2]["tools"]);
    // The task (context.md with the goal) starts every user message; the phase's part follows.
    let users: Vec<&str> = bodies.iter().map(|b| b["messages"][1]["content"].as_str().unwrap()).collect();
    let shared = users.iter().map(|u| common(users[0], u)).min().unwrap();
    assert!(users[0][..shared].contains("write x") && users[0][..shared].contains("</context.md>"), "{}", users[0]);
    for (u, phase) in users.iter().zip(["frame", "plan", "reflect"]) {
        assert!(u.trim_end().ends_with(&format!("This is the {phase} phase. Answer only by calling the `{phase}_answer` tool once with arguments that match its schema.")), "{u}");
        assert_eq!(u.matches("<context.md>").count(), 1, "context.md once: {u}");
    }
    // memory.md and plan.md are quoted as the next step needs them: no empty sections, no goal
    // (context.md states it), no note for people editing the Next Action by hand.
    for u in &users[1..] {
        let memory = &u[u.find("<memory.md>").unwrap()..u.find("</memory.md>").unwrap()];
        assert!(memory.contains("## Definition of Done") && !memory.contains("## Goal"), "{memory}");
        let own = &u[u.find("</context.md>").unwrap()..];
        assert!(!own.contains("(none") && !own.contains("You may edit it before"), "{u}");
    }
    assert!(users[2].contains("## Next Action\nStep 1.\n"), "{}", users[2]);
    assert_eq!(t.read("ws/artifacts/x.md"), "hello");
}

#[test]
fn the_hidden_switch_sends_each_phase_its_own_tool_and_system_message() {
    let t = T::new();
    let s = server(false);
    let out = run(&t, &s, false, true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bodies: Vec<Value> = (0..s.count()).map(|i| s.request(i).json()).collect();
    let tools: Vec<Vec<String>> = bodies.iter().map(|b| names(&b["tools"], "/function/name")).collect();
    assert_eq!(tools, [vec!["frame_answer"], vec!["plan_answer"], vec!["reflect_answer"]]);
    assert!(bodies[0]["messages"][0]["content"].as_str().unwrap().starts_with("You are the frame phase"));
    assert_ne!(bodies[0]["messages"][0], bodies[1]["messages"][0]);
}

#[test]
fn a_provider_that_does_not_cache_gets_each_phase_its_smallest_prompt() {
    // Anthropic with caching off bills every token of every call: no shared prefix is sent.
    let t = T::new();
    let s = server(true);
    // Each phase's own smallest prompt is the point, so Reflect and Plan are asked apart.
    t.write("ws/agentloop.yaml", "llm:\n  structured: tools\n  cache: false\n  fuse_phases: false\n");
    let mut c =
        t.al(&["--provider", "anthropic", "--base-url", &s.url, "run", "--goal", "write x", "--max-steps", "3"]);
    c.env("ANTHROPIC_API_KEY", "sk-test-prefix");
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bodies: Vec<Value> = (0..s.count()).map(|i| s.request(i).json()).collect();
    let tools: Vec<Vec<String>> = bodies.iter().map(|b| names(&b["tools"], "/name")).collect();
    assert_eq!(tools, [vec!["frame_answer"], vec!["plan_answer"], vec!["reflect_answer"]]);
    let systems: Vec<&str> = bodies.iter().map(|b| b["system"][0]["text"].as_str().unwrap()).collect();
    assert!(systems[0].starts_with("You are the frame phase"), "{}", systems[0]);
    // The catalog only where a tool is chosen: Plan.
    assert!(!systems[0].contains("<skills.md>") && !systems[2].contains("<skills.md>"), "{systems:?}");
    assert!(systems[1].contains("<skills.md>") && systems[1].contains("- file_write(path, content"), "{}", systems[1]);
    for b in &bodies {
        assert!(b["system"][0].get("cache_control").is_none() && b["tools"][0].get("cache_control").is_none());
    }
    assert_eq!(t.read("ws/artifacts/x.md"), "hello");
}

#[test]
fn anthropic_requests_mark_the_shared_prefix_for_caching_and_stats_show_cache_reads_per_phase() {
    let t = T::new();
    let s = server(true);
    let out = run(&t, &s, true, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bodies: Vec<Value> = (0..s.count()).map(|i| s.request(i).json()).collect();
    assert_eq!(bodies.len(), 3);
    let eph = json!({"type": "ephemeral"});
    for (i, b) in bodies.iter().enumerate() {
        let tools = b["tools"].as_array().unwrap();
        let want: &[&str] = if i == 0 { &["frame_answer"] } else { &["plan_answer", "reflect_answer"] };
        assert_eq!(names(&b["tools"], "/name"), want);
        assert_eq!(tools.last().unwrap()["cache_control"], eph);
        assert_eq!(b["system"][0]["cache_control"], eph);
        assert_eq!(b["system"], bodies[0]["system"]);
        // The task part is its own block, the end of the cached prefix; the phase's follows.
        let content = b["messages"][0]["content"].as_array().unwrap();
        assert_eq!(content.len(), 2);
        assert_eq!(content[0]["cache_control"], eph);
        assert_eq!(content[0]["text"], bodies[0]["messages"][0]["content"][0]["text"]);
        assert!(content[1].get("cache_control").is_none());
    }
    // From the second call on, the whole marked prefix is the same bytes.
    assert_eq!(bodies[1]["tools"], bodies[2]["tools"]);
    let stats = t.al(&["trace", "stats", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&stats.stdout).unwrap();
    for phase in ["plan", "reflect"] {
        assert_eq!(v["phases"][phase]["cache_read_tokens"], 1000, "{v}");
    }
    assert_eq!(v["phases"]["frame"]["cache_write_tokens"], 1000);
    let text = stdout(&t.al(&["trace", "stats"]).output().unwrap());
    let plan = text.lines().find(|l| l.starts_with("plan ")).unwrap();
    assert!(text.lines().nth(1).unwrap().contains("cached_in"), "{text}");
    assert!(plan.split_whitespace().any(|w| w == "1000"), "the plan row shows its cache reads: {text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

#[test]
fn a_small_context_window_shortens_the_catalog_the_same_way_for_every_call() {
    let t = T::new();
    let s = server(false);
    // Room for the tools and a shortened catalog, not the whole one.
    t.write(
        "ws/skills/notes/SKILL.md",
        "---\nname: notes\ndescription: Take careful notes. Then more words that a short catalog cuts.\n---\nBody.\n",
    );
    t.write("ws/agentloop.yaml", "llm:\n  max_tokens: 512\n  context_window: 3300\n");
    let mut c = t.al(&["--provider", "openai", "--base-url", &s.url, "run", "--goal", "write x", "--max-steps", "3"]);
    c.env("OPENAI_API_KEY", "sk-test-prefix");
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bodies: Vec<Value> = (0..s.count()).map(|i| s.request(i).json()).collect();
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("shortened to fit the context window"), "{system}");
    assert!(system.contains("file_write") && !system.contains("- parameters:"), "{system}");
    for b in &bodies {
        assert_eq!(b["messages"][0], bodies[0]["messages"][0]);
    }
    // Without the key, one line a tool (with its parameters, `llm.tool_schemas: catalog`) and a skill.
    let t = T::new();
    let s = server(false);
    let out = run(&t, &s, false, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let system = s.request(0).json()["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(!system.contains("shortened") && !system.contains("- parameters:"), "{system}");
    assert!(
        system.contains("- file_write(path, content, mode?: overwrite|append") && system.contains("- critique: "),
        "{system}"
    );
}
