//! `run --output-schema FILE`: the final output in the user's shape, over both wire formats
//! against fake servers on 127.0.0.1. The finish variant of Plan's answer schema carries the
//! user's schema; an output that does not match gets one corrective retry, then the run
//! escalates naming what did not match; a schema strict mode cannot take is refused at start.

use crate::common::*;
use serde_json::{json, Value};

const SCHEMA: &str = r#"{"type": "object", "properties": {"title": {"type": "string"}, "score": {"type": "integer", "minimum": 0, "maximum": 10}}, "required": ["title", "score"], "additionalProperties": false}"#;

/// A model that frames, reads the task (a step that can back its ticks: a `finish`
/// held while items are open backs none), ticks every item on it, then finishes with `output`
/// and reflects done.
fn server(kind: &'static str, output: Value) -> Server {
    let reflections = std::sync::atomic::AtomicUsize::new(0);
    let plans = std::sync::atomic::AtomicUsize::new(0);
    Server::start_with(move |_, req| {
        let body = req.json();
        let anthropic = kind == "anthropic";
        // The forced tool is named by tool_choice (every call sends all the answer tools).
        let tool = if anthropic {
            body["tool_choice"]["name"].as_str().unwrap().to_string()
        } else {
            body["tool_choice"]["function"]["name"]
                .as_str()
                .or(body["tools"][0]["function"]["name"].as_str())
                .unwrap()
                .to_string()
        };
        let finish = json!({"next_action": {"tool": "finish", "args": {"summary": "rated x", "output": output}},
            "expected_outcome": "done", "rationale": "the rating is known"});
        let args = match tool.as_str() {
            "frame_answer" => {
                // A new run: its first plan and reflection come next.
                plans.store(0, std::sync::atomic::Ordering::SeqCst);
                reflections.store(0, std::sync::atomic::Ordering::SeqCst);
                json!({"goal": "rate x", "definition_of_done": ["x rated", "title given", "score given"]})
            }
            "plan_answer" if plans.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 => {
                json!({"next_action": {"tool": "file_read", "args": {"path": "context.md"}}, "expected_outcome": "the task", "rationale": "read first"})
            }
            "plan_answer" => finish,
            _ => {
                let reflect = if reflections.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "continue", "reason": "looked"})
                } else {
                    json!({"decision": "done", "reason": "rated", "outcome": "rated x"})
                };
                if tool == "reflect_plan_answer" {
                    json!({"reflect": reflect, "plan": finish})
                } else {
                    reflect
                }
            }
        };
        if anthropic {
            Reply::json(
                200,
                json!({"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "tool_use", "id": "toolu_01", "name": tool, "input": args}],
                    "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 20}}),
            )
        } else {
            Reply::json(
                200,
                json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
                    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
            )
        }
    })
}

/// `run --output-schema schema.json`, with `llm.strict: true` when `strict`.
fn run(t: &T, kind: &str, url: &str, extra: &[&str], strict: bool) -> std::process::Output {
    let mut c = t.cmd();
    if strict {
        c.env("AGENTLOOP_LLM__STRICT", "true");
    }
    c.args(["-w", "ws", "--provider", if kind == "anthropic" { "anthropic" } else { "openai" }, "--base-url", url]);
    // Each call is a new run of the same goal, asked for as such (the same command repeated
    // would print the ended run and run nothing).
    c.args(extra).args(["run", "--goal", "rate x", "--follow-up", "--output-schema", "schema.json"]);
    c.env("ANTHROPIC_API_KEY", "k").env("OPENAI_API_KEY", "k").env("AGENTLOOP_LLM__BACKOFF_MS", "10");
    c.output().unwrap()
}

/// The `args` schema of the finish variant in Plan's answer schema as sent.
fn finish_args(kind: &str, body: &Value) -> Value {
    let tools = body["tools"].as_array().unwrap();
    let params = if kind == "anthropic" {
        tools.iter().find(|t| t["name"] == "plan_answer").unwrap()["input_schema"].clone()
    } else {
        tools.iter().find(|t| t["function"]["name"] == "plan_answer").unwrap()["function"]["parameters"].clone()
    };
    let variants = params["properties"]["next_action"]["anyOf"].as_array().unwrap().clone();
    let finish = variants.into_iter().find(|v| v["properties"]["tool"]["enum"][0] == "finish").unwrap();
    finish["properties"]["args"].clone()
}

#[test]
fn a_valid_output_ends_done_in_result_json_and_on_stdout_over_both_wire_formats() {
    for kind in ["anthropic", "openai"] {
        let t = T::new();
        t.write("schema.json", SCHEMA);
        let s = server(kind, json!({"title": "x", "score": 7}));
        // OpenAI-compatible with llm.strict: true: the strict form carries the schema too.
        // OpenAI with llm.strict: true and tools strict mode can take: finish's strict form holds it.
        let tools: &[&str] = if kind == "openai" { &["--allowed-tools", "file_read,finish"] } else { &["-q"] };
        let out = run(&t, kind, &s.url, tools, kind == "openai");
        assert_eq!(out.status.code(), Some(0), "{kind}: {}", stderr(&out));
        assert_eq!(stdout(&out).trim(), r#"{"title":"x","score":7}"#, "{kind}");
        let result = t.json("ws/result.json");
        assert_eq!(result["stop"], "done");
        assert_eq!(result["output"], json!({"title": "x", "score": 7}));
        assert_eq!(t.json("ws/state.json")["output_schema"]["required"], json!(["title", "score"]));
        // The plan request (the second) held finish to the user's schema.
        let args = finish_args(kind, &s.request(1).json());
        assert_eq!(args["properties"]["output"]["properties"]["score"]["maximum"], 10, "{kind}");
        assert!(args["required"].as_array().unwrap().contains(&json!("output")), "{kind}");
        if kind == "openai" {
            assert_eq!(s.request(1).json()["tools"][0]["function"]["strict"], true);
            assert_eq!(args["properties"]["output"]["additionalProperties"], false);
            assert_eq!(args["additionalProperties"], false);
        }
        // --json: the completion event carries the output.
        let t2 = T::new();
        t2.write("schema.json", SCHEMA);
        let s2 = server(kind, json!({"title": "x", "score": 7}));
        let out = run(&t2, kind, &s2.url, &["--json"], false);
        assert_eq!(out.status.code(), Some(0), "{kind}: {}", stderr(&out));
        let ev: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(ev["type"], "agent.completed");
        assert_eq!(ev["payload"]["output"], json!({"title": "x", "score": 7}));
    }
}

#[test]
fn an_invalid_output_is_retried_once_then_escalates_with_the_validation_error() {
    for kind in ["anthropic", "openai"] {
        let t = T::new();
        t.write("schema.json", SCHEMA);
        let s = server(kind, json!({"title": "x", "score": 11}));
        let out = run(&t, kind, &s.url, &[], false);
        assert_eq!(out.status.code(), Some(3), "{kind}: {}", stderr(&out));
        // frame; the first step's plan (a read, which backs the ticks); the fused reflection
        // with the plan that finishes, and its one corrective retry; that plan asked alone, and
        // its one corrective retry; nothing more.
        assert_eq!(s.count(), 6, "{kind}");
        let result = t.json("ws/result.json");
        assert_eq!(result["stop"], "escalated");
        let reason = result["reason"].as_str().unwrap();
        assert!(reason.contains("no valid plan answer after a correction"), "{reason}");
        assert!(reason.contains("output.score") && reason.contains("11"), "{reason}");
        assert!(result.get("output").is_none());
        // The refused plan's entry (the last) says it took two calls.
        let trace = t.read("ws/trace.jsonl");
        let plan = trace.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).rfind(|e| e["event"] == "plan");
        assert_eq!(plan.as_ref().map(|e| e["attempt"].clone()), Some(json!(2)), "{trace}");
    }
}

#[test]
fn schemas_strict_mode_cannot_take_and_broken_ones_are_refused_before_anything_is_written() {
    let t = T::new();
    let s = server("openai", json!({}));
    t.write("schema.json", r#"{"type": "object", "properties": {"tags": {"type": "object"}}}"#);
    let out = run(&t, "openai", &s.url, &[], true);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("--output-schema schema.json: the provider's strict schema mode cannot take this output schema: `/properties/tags` is an object without `properties`"),
        "{err}"
    );
    assert!(err.contains("llm.strict: false"), "{err}");
    assert!(!t.exists("ws"));
    assert_eq!(s.count(), 0);
    // Without strict mode the same schema is taken (not run here); a broken one never is.
    t.write("schema.json", r#"{"type": "objekt"}"#);
    let out = run(&t, "anthropic", &s.url, &[], false);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is not a valid JSON Schema"), "{}", stderr(&out));
    t.write("schema.json", "[1]");
    let out = run(&t, "anthropic", &s.url, &[], false);
    assert!(stderr(&out).contains("must be a JSON Schema object"), "{}", stderr(&out));
    // In config, inline: a follow-up command keeps the schema the run started with.
    t.write("ws2/agentloop.yaml", &format!("output_schema: {SCHEMA}\n"));
    let s = server("anthropic", json!({"title": "y", "score": 1}));
    let out = t
        .cmd()
        .args(["-w", "ws2", "--provider", "anthropic", "--base-url", &s.url, "run", "--goal", "rate y"])
        .env("ANTHROPIC_API_KEY", "k")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.json("ws2/result.json")["output"], json!({"title": "y", "score": 1}));
}

#[test]
fn done_without_the_output_is_refused_and_a_later_layer_replaces_the_schema_whole() {
    let t = T::new();
    // The user's config gives a schema with `extra` required; the workspace's replaces it whole
    // (a merge key by key would keep `extra` and no output here could be valid).
    t.write(
        "xdg/agentloop/config.yaml",
        "output_schema: {type: object, properties: {extra: {type: string}}, required: [extra]}\n",
    );
    t.write(
        "ws/agentloop.yaml",
        "llm: {provider: scripted, script: script.yaml}\noutput_schema: {type: object, properties: {n: {type: integer}}, required: [n]}\n",
    );
    t.write(
        "ws/script.yaml",
        r#"frame:
  - answer: {goal: count, definition_of_done: [counted, noted, said], can_proceed: true}
plan:
  - answer: {next_action: {tool: file_write, args: {path: artifacts/n.md, content: "3"}}, rationale: note it}
  - answer: {next_action: {tool: finish, args: {summary: three, output: {n: 3}}}, rationale: said}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: all there}
  - answer: {satisfied: [{item: 1, steps: [2]}, {item: 2, steps: [2]}, {item: 3, steps: [2]}], decision: done, reason: finished}
"#,
    );
    let out = t.cmd().args(["-w", "ws", "run", "--goal", "count"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), r#"{"n":3}"#);
    let refused = t.trace().into_iter().find(|e| e["phase"] == "reflect").unwrap();
    assert_eq!(refused["decision"], "continue");
    assert!(
        refused["reason"].as_str().unwrap().contains("no final output yet: call `finish` with `output`"),
        "{refused}"
    );
    assert_eq!(t.json("ws/result.json")["output"], json!({"n": 3}));
}

#[test]
fn a_configured_schema_that_cannot_be_used_refuses_a_follow_up_before_anything_moves() {
    let t = T::new();
    t.write("ws/script.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\n");
    t.write("ws/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\n");
    let out = t.cmd().args(["-w", "ws", "run", "--goal", "g", "--max-steps", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    t.write("ws/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\noutput_schema: missing.json\n");
    let out = t.cmd().args(["-w", "ws", "run", "--goal", "again"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("missing.json"), "{}", stderr(&out));
    // The ended run is still the workspace's own: nothing was archived.
    assert!(!t.exists("ws/runs"));
    assert_eq!(t.json("ws/state.json")["goal"], "g");
}

#[test]
fn a_hand_edited_finish_whose_output_does_not_match_is_a_failed_step() {
    let t = T::new();
    t.write(
        "ws/agentloop.yaml",
        "llm: {provider: scripted, script: script.yaml}\noutput_schema: {type: object, properties: {n: {type: integer}}, required: [n]}\n",
    );
    t.write(
        "ws/script.yaml",
        "frame:\n  - answer: {goal: count, definition_of_done: [counted, noted, said], can_proceed: true}\nplan:\n  - answer: {next_action: {tool: finish, args: {summary: three, output: {n: 3}}}, rationale: said}\n",
    );
    let out = t.cmd().args(["init", "ws", "--goal", "count"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.json("ws/state.json")["output_schema"]["required"], json!(["n"]));
    for phase in ["frame", "plan"] {
        let out = t.cmd().args(["-w", "ws", phase]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{phase}: {}", stderr(&out));
    }
    let plan = t.read("ws/plan.md");
    assert!(plan.contains(r#""output": {"#) || plan.contains(r#""output":{"#), "{plan}");
    t.write("ws/plan.md", &plan.replace("\"n\": 3", "\"n\": \"three\"").replace("\"n\":3", "\"n\":\"three\""));
    // A tool error: exit 6, the step recorded for Reflect.
    let out = t.cmd().args(["-w", "ws", "act"]).output().unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let act = t.trace().into_iter().find(|e| e["phase"] == "act").unwrap();
    assert_eq!(act["result_status"], "error", "{act}");
    assert!(act["error"].as_str().unwrap().contains("the output does not match the output schema"), "{act}");
    assert_eq!(act["data"]["edited_by_hand"], true);
    assert!(t.json("ws/state.json").get("output").is_none());
}

/// Under an output schema stdout holds JSON or nothing, whatever the outcome: an escalated run
/// (`-q` too) prints its reason on stderr only; `--json` prints the completion event; running
/// the ended run again prints the output of a done one, and the account on stderr.
#[test]
fn under_an_output_schema_stdout_holds_json_or_nothing_whatever_the_outcome() {
    let t = T::new();
    t.write("schema.json", SCHEMA);
    let s = server("openai", json!({"title": "x", "score": 11}));
    for extra in [&[][..], &["-q"]] {
        let out = run(&t, "openai", &s.url, extra, false);
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        assert_eq!(stdout(&out), "", "{extra:?}: stdout holds no prose");
        assert!(
            stderr(&out).contains("escalated: the model gave no valid plan answer after a correction"),
            "{}",
            stderr(&out)
        );
    }
    let out = run(&t, "openai", &s.url, &["--json", "-q"], false);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["payload"]["status"], "escalated", "{v}");
    // The ended run asked again (no goal) under the configured schema: its account goes to
    // stderr.
    t.write("ws/agentloop.yaml", "output_schema: ../schema.json\n");
    let out = t
        .cmd()
        .args(["-w", "ws", "--provider", "openai", "--base-url", &s.url, "run"])
        .env("OPENAI_API_KEY", "k")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert!(stderr(&out).contains("ended escalated"), "{}", stderr(&out));
    // A done run asked again prints its output, in the shape, and nothing else.
    let t = T::new();
    t.write("schema.json", SCHEMA);
    let s = server("openai", json!({"title": "x", "score": 3}));
    let out = run(&t, "openai", &s.url, &[], false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    t.write("ws/agentloop.yaml", "output_schema: ../schema.json\n");
    let out = t
        .cmd()
        .args(["-w", "ws", "--provider", "openai", "--base-url", &s.url, "run"])
        .env("OPENAI_API_KEY", "k")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(serde_json::from_str::<Value>(stdout(&out).trim()).unwrap(), json!({"title": "x", "score": 3}));
}

/// An output schema of megabytes (a huge `enum`) would go with every plan call and be compiled
/// at each check: over 64 KiB it is refused before anything is written, from the flag, the
/// configuration or a request alike.
#[test]
fn an_output_schema_over_64_kib_is_refused_before_the_run_starts() {
    let t = T::new();
    let names: Vec<String> = (0..20_000).map(|i| format!("name-{i:06}")).collect();
    let big = json!({"type": "object", "properties": {"n": {"type": "string", "enum": names}}, "required": ["n"]});
    t.write("big.json", &big.to_string());
    t.write("ws/script.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\n");
    t.write("ws/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\n");
    let flag = t.path("big.json").display().to_string();
    let out = t.cmd().args(["-w", "ws", "run", "--goal", "g", "--output-schema", &flag]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("at most 64 KiB is taken"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--output-schema"), "{}", stderr(&out));
    assert!(!t.exists("ws/state.json"), "nothing was written");
    // The same schema named by the configuration.
    t.write("ws/big.json", &big.to_string());
    t.write("ws/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\noutput_schema: big.json\n");
    let out = t.cmd().args(["-w", "ws", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("big.json") && stderr(&out).contains("64 KiB"), "{}", stderr(&out));
    assert!(!t.exists("ws/state.json"), "nothing was written");
    // Event mode's start payload: refused, no run folder made.
    t.write("root/script.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\n");
    t.write("root/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\n");
    let req = json!({"type": "agentic.start", "payload": {"goal": "g", "output_schema": big}});
    let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["status"], "error", "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("64 KiB"), "{answer}");
    assert!(!t.exists("root/runs") || std::fs::read_dir(t.path("root/runs")).unwrap().next().is_none());
}
