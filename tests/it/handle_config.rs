//! Event mode's request `config` block: seed 000's plugin config as written, what a request may
//! and may not widen, budgets and progress from the request, and what the root's own config
//! keeps for itself.

use crate::common::*;
use crate::handle::*;
use serde_json::{json, Value};

/// Seed 000's plugin configuration, as the seed writes it (Plugin Configuration).
const SEED_000_PLUGIN: &str = r#"plugins:
  agentic-loop:
    schedule: null                    # typically trigger-only, not scheduled
    timeout: 10m                      # generous timeout for multi-step work
    config:
      api_url: "http://localhost:${PORT}"
      api_token: "${DUCTILE_AGENT_TOKEN}"
      max_steps: 20                   # hard budget — Reflect enforces
      max_reframes: 2                 # prevent infinite reframing
      llm_provider: "anthropic"       # or ollama, openai, etc.
      llm_model: "claude-sonnet-4-5-20250929"
      allowed_plugins:                # skill whitelist (optional)
        - jina-reader
        - fabric
        - file_handler
        - youtube_transcript
"#;

const DUCTILE_TOKEN: &str = "dtok-seed-000-SECRET";

/// The seed's `config:` block: as Ductile sends it in a request (its `${...}` expanded), and
/// as it reads in a file (the block's own lines, unexpanded).
fn seed_000_config(port: u16) -> (Value, String) {
    let expanded =
        SEED_000_PLUGIN.replace("${PORT}", &port.to_string()).replace("${DUCTILE_AGENT_TOKEN}", DUCTILE_TOKEN);
    let v: Value = serde_yaml_ng::from_str(&expanded).unwrap();
    let block = SEED_000_PLUGIN.split_once("    config:\n").unwrap().1;
    let file: String = block.lines().map(|l| format!("{}\n", l.strip_prefix("      ").unwrap())).collect();
    (v["plugins"]["agentic-loop"]["config"].clone(), file)
}

/// A fake Anthropic API that answers whichever phase a request forces: frame, then a plan
/// asking for jina-reader.
fn anthropic_phases() -> Server {
    Server::start_with(|i, req| {
        let body = req.json();
        let tool = body["tool_choice"]["name"].as_str().unwrap_or("").to_string();
        let input = match tool.as_str() {
            "frame_answer" => {
                json!({"goal": "critique", "definition_of_done": ["fetched", "critiqued", "two paragraphs"], "can_proceed": true})
            }
            _ => {
                json!({"next_action": {"tool": "jina-reader", "args": {"url": "http://mattjoyce.ai"}}, "expected_outcome": "page", "rationale": "fetch"})
            }
        };
        Reply::json(
            200,
            json!({"id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "tool_use", "id": format!("tu_{i}"), "name": tool, "input": input}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}),
        )
    })
}

fn seed_root(t: &T, model: &Server, ductile: &Server) -> u16 {
    let port: u16 = ductile.url.rsplit(':').next().unwrap().parse().unwrap();
    let (_, file) = seed_000_config(port);
    let tools: String = ["jina-reader", "fabric", "file_handler", "youtube_transcript"]
        .iter()
        .map(|n| format!("    {n}: {{description: The {n} plugin., parameters: {{type: object, properties: {{url: {{type: string}}}}}}}}\n"))
        .collect();
    t.write(
        "root/agentloop.yaml",
        &format!("{file}llm: {{base_url: '{}', structured: tools}}\ntools:\n  external:\n{tools}", model.url),
    );
    port
}

fn seed_cmd(t: &T, port: u16) -> assert_cmd::Command {
    let mut c = t.cmd();
    c.args(["-w", "root", "handle"])
        .env("PORT", port.to_string())
        .env("DUCTILE_AGENT_TOKEN", DUCTILE_TOKEN)
        .env("ANTHROPIC_API_KEY", "sk-ant-test");
    c
}

#[test]
fn seed_000s_plugin_config_works_as_written_in_a_request_and_in_a_file() {
    let t = T::new();
    let model = anthropic_phases();
    let ductile = Server::start(vec![Reply::json(200, json!({"plugins": []}))]);
    let port = seed_root(&t, &model, &ductile);
    // The file: the block's keys are agentloop's own.
    let out = t.cmd().args(["-w", "root", "config", "show", "--json"]).env("PORT", port.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["config"];
    assert_eq!(
        (c["llm"]["provider"].as_str(), c["llm"]["model"].as_str()),
        (Some("anthropic"), Some("claude-sonnet-4-5-20250929"))
    );
    assert_eq!((c["max_steps"].as_u64(), c["max_reframes"].as_u64()), (Some(20), Some(2)));
    assert_eq!(c["allowed_tools"], json!(["jina-reader", "fabric", "file_handler", "youtube_transcript"]));
    assert_eq!(c["ductile"]["api_url"], format!("http://localhost:{port}"));
    assert_eq!(c["ductile"]["api_token_env"], "DUCTILE_AGENT_TOKEN");
    // The request: the same block, as Ductile sends it, is accepted for every command.
    let (config, _) = seed_000_config(port);
    let out = seed_cmd(&t, port)
        .write_stdin(json!({"protocol": 2, "command": "health", "config": config}).to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let start = json!({"protocol": 2, "command": "handle", "config": config, "event": {"type": "agentic.start", "payload": {"goal": "fetch web http://mattjoyce.ai and produce a 2 para critique"}}});
    let out = seed_cmd(&t, port).write_stdin(start.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_protocol(&v);
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"], "{v}");
    let req = model.request(0);
    assert_eq!(
        (req.json()["model"].as_str(), req.header("x-api-key")),
        (Some("claude-sonnet-4-5-20250929"), Some("sk-ant-test"))
    );
    let run = v["state_updates"]["last_run_id"].as_str().unwrap();
    assert_eq!(v["state_updates"][&format!("run:{run}")]["max_steps"], 20);
    assert!(!stdout(&out).contains(DUCTILE_TOKEN));
}

#[test]
fn a_requests_plugin_config_may_not_widen_the_root() {
    let t = T::new();
    let model = anthropic_phases();
    let ductile = Server::start(vec![Reply::json(200, json!({"plugins": []}))]);
    let port = seed_root(&t, &model, &ductile);
    let (config, _) = seed_000_config(port);
    let with = |k: &str, v: Value| {
        let mut c = config.clone();
        c[k] = v;
        c
    };
    for (bad, key) in [
        (with("api_url", json!("http://attacker.example")), "ductile.api_url"),
        (with("api_token", json!("a-token-of-the-requests-own")), "ductile.api_token"),
        (with("api_token", json!("${HOME}")), "ductile.api_token_env"),
        (with("llm_provider", json!("openai")), "llm.provider"),
        (with("llm_model", json!("claude-opus-4-1")), "llm.model"),
        (with("max_steps", json!(21)), "max_steps"),
        (
            {
                let mut c = with("max_loops", json!(21));
                c.as_object_mut().unwrap().remove("max_steps");
                c
            },
            "max_steps",
        ),
        (with("max_reframes", json!(3)), "max_reframes"),
        (with("allowed_plugins", json!(["jina-reader", "shell"])), "allowed_tools"),
        (with("handle", json!({"pending_grace": "11m"})), "handle.pending_grace"),
    ] {
        let start =
            json!({"command": "handle", "config": bad, "event": {"type": "agentic.start", "payload": {"goal": "g"}}});
        let out = seed_cmd(&t, port).write_stdin(start.to_string()).output().unwrap();
        assert_eq!(out.status.code(), Some(78), "{key}: {}", stdout(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let err = v["error"].as_str().unwrap();
        assert!(err.contains(&format!("may not set `{key}`")), "{key}: {err}");
        assert!(!err.contains("a-token-of-the-requests-own") && !err.contains(DUCTILE_TOKEN), "{err}");
    }
    // An alias and its key, set differently in one request: refused naming both.
    let out = seed_cmd(&t, port)
        .write_stdin(json!({"command": "health", "config": with("max_loops", json!(5))}).to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
    assert!(stdout(&out).contains("both `max_loops` and `max_steps`"), "{}", stdout(&out));
    // A narrower budget and a model the root lists as allowed are accepted.
    let yaml = t
        .read("root/agentloop.yaml")
        .replace("structured: tools", "structured: tools, allowed_models: [claude-haiku-4-5]");
    t.write("root/agentloop.yaml", &yaml);
    let ok = with("llm_model", json!("claude-haiku-4-5"));
    let mut ok = ok;
    ok["max_steps"] = json!(4);
    ok["allowed_plugins"] = json!(["jina-reader"]);
    ok["handle"] = json!({"pending_grace": "1s"});
    let start =
        json!({"command": "handle", "config": ok, "event": {"type": "agentic.start", "payload": {"goal": "g"}}});
    let out = seed_cmd(&t, port).write_stdin(start.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"], "{v}");
    assert_eq!(model.request(model.count() - 1).json()["model"], "claude-haiku-4-5");
}

#[test]
fn a_root_that_trusts_request_config_takes_the_operators_block_as_written() {
    let t = T::new();
    let model = anthropic_phases();
    let ductile = Server::start(vec![Reply::json(200, json!({"plugins": []}))]);
    let port: u16 = ductile.url.rsplit(':').next().unwrap().parse().unwrap();
    let (config, _) = seed_000_config(port);
    // The root repeats none of the block: no provider, model, gateway, token or plugin list.
    let tools: String = ["jina-reader", "fabric", "file_handler", "youtube_transcript", "shell_exec"]
        .iter()
        .map(|n| format!("    {n}: {{description: The {n} plugin., parameters: {{type: object, properties: {{url: {{type: string}}}}}}}}\n"))
        .collect();
    let root = format!("llm: {{base_url: '{}', structured: tools}}\ntools:\n  external:\n{tools}", model.url);
    t.write("root/agentloop.yaml", &root);
    let start = |config: &Value, payload: Value| {
        let req = json!({"protocol": 2, "command": "handle", "config": config, "event": {"type": "agentic.start", "payload": payload}});
        let out = seed_cmd(&t, port).write_stdin(req.to_string()).output().unwrap();
        (out.status.code(), serde_json::from_slice::<Value>(&out.stdout).unwrap())
    };
    // By default the block is held to narrowing the root: refused.
    let (code, v) = start(&config, json!({"goal": "g"}));
    assert_eq!(code, Some(78), "{v}");
    assert!(v["error"].as_str().unwrap().contains("may not set"), "{v}");
    // A request cannot say it is trusted itself.
    let mut own = config.clone();
    own["handle"] = json!({"trust_request_config": true});
    let (code, v) = start(&own, json!({"goal": "g"}));
    assert_eq!(code, Some(78), "{v}");
    // The root saying so takes the block as written.
    t.write("root/agentloop.yaml", &format!("{root}handle: {{trust_request_config: true}}\n"));
    let (code, v) = start(&config, json!({"goal": "fetch web http://mattjoyce.ai and produce a 2 para critique"}));
    assert_eq!(code, Some(0), "{v}");
    check_protocol(&v);
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"], "{v}");
    let req = model.request(model.count() - 1);
    assert_eq!(req.json()["model"], "claude-sonnet-4-5-20250929", "the block's model");
    let run = v["state_updates"]["last_run_id"].as_str().unwrap();
    assert_eq!(v["state_updates"][&format!("run:{run}")]["max_steps"], 20);
    // Its plugin list is the run's: a tool the root has but the block does not list is not one.
    let tools_shown =
        req.json()["tools"].to_string() + &req.json()["system"].to_string() + &req.json()["messages"].to_string();
    assert!(!tools_shown.contains("shell_exec"), "{tools_shown}");
    // The event's payload stays untrusted: a budget in it may only narrow.
    let (code, v) = start(&config, json!({"goal": "g", "context": {"max_steps": 50}}));
    assert_eq!(code, Some(78), "{v}");
    assert!(v["error"].as_str().unwrap().contains("payload.context.max_steps"), "{v}");
}

#[test]
fn a_config_file_with_an_alias_and_its_key_set_differently_names_both() {
    let t = T::new();
    t.write("ws/agentloop.yaml", "llm_model: a\nllm: {model: b}\n");
    let out = t.al(&["config", "show"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("both `llm_model` and `llm.model`"), "{}", stderr(&out));
    // The same value twice is no conflict.
    t.write("ws/agentloop.yaml", "llm_model: a\nllm: {model: a}\nmax_loops: 7\n");
    let out = t.al(&["config", "show", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["config"]["llm"]["model"].as_str(), v["config"]["max_steps"].as_u64()), (Some("a"), Some(7)));
}

#[test]
fn an_untrusted_workspace_is_held_to_the_same_narrowing_for_the_seed_keys() {
    let t = T::new();
    t.write("ws/agentloop.yaml", "llm_provider: openai\napi_url: http://attacker.example\nmax_loops: 5\n");
    let out = t.untrusted().args(["-w", "ws", "config", "show", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut refused: Vec<&str> = v["refused"].as_array().unwrap().iter().map(|r| r["key"].as_str().unwrap()).collect();
    refused.sort();
    assert_eq!(refused, ["ductile.api_url", "llm.provider"], "{v}");
    assert_eq!(v["config"]["max_steps"], 5, "a lower budget narrows");
}

/// RFC-103's start event, as the seed gives it.
const RFC_103_START: &str = r#"{
  "type": "agentic.start",
  "payload": {
    "goal": "fetch web http://mattjoyce.ai and produce a 2 para critique",
    "context": {
      "tone": "constructive",
      "max_steps": 6
    }
  },
  "dedupe_key": "agentic:start:<external-request-id>"
}"#;

#[test]
fn budgets_in_the_start_payload_apply_narrowing_only() {
    let h = H::new();
    let v = h.send(RFC_103_START);
    let run = v["state_updates"]["last_run_id"].as_str().unwrap();
    assert_eq!(v["state_updates"][&format!("run:{run}")]["max_steps"], 6, "{v}");
    assert_eq!(h.t.json(&format!("root/runs/{run}/state.json"))["limits"]["max_steps"], 6);
    // The context's other keys are still the run's background.
    assert!(h.t.read(&format!("root/runs/{run}/context.md")).contains("constructive"));
    // Wider than the root allows: refused naming the key, before anything is written.
    let h = H::new();
    for (ctx, key) in [
        (json!({"max_steps": 21}), "payload.context.max_steps"),
        (json!({"max_loops": 50}), "payload.context.max_steps"),
        (json!({"timeout": "2d"}), "payload.context.timeout"),
    ] {
        let start = json!({"type": "agentic.start", "payload": {"goal": "g", "context": ctx}});
        let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin(start.to_string()).output().unwrap();
        assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
        assert!(stdout(&out).contains(&format!("may not set `{key}`")), "{}", stdout(&out));
        assert!(!h.t.exists("root/runs"));
    }
    let start = json!({"type": "agentic.start", "payload": {"goal": "g", "context": {"max_cost_usd": "lots"}}});
    let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin(start.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
}

/// A refusal names where the limit it holds a value to came from — the request's `config`, the
/// start's `context`, the root's agentloop.yaml or the built-in default — never blaming the
/// root for a limit the request set, and says the fix; nothing is written.
#[test]
fn a_refusal_names_where_the_limit_came_from() {
    let h = H::new();
    let turn = |req: Value| {
        let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)));
        (out.status.code(), v["error"].as_str().unwrap_or_default().to_string())
    };
    let start = |config: Value, context: Value| json!({"command": "handle", "config": config, "event": {"type": "agentic.start", "payload": {"goal": "g", "context": context}}});
    // The request's config narrowed the limit: the context is held to that, and says so.
    let (code, err) = turn(start(json!({"max_steps": 3}), json!({"max_steps": 5})));
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("may not set `payload.context.max_steps`: 5 is above 3, set by the request's `config.max_steps`"),
        "{err}"
    );
    assert!(
        err.contains("give `payload.context.max_steps` at most 3, or raise it in the request's `config.max_steps`"),
        "{err}"
    );
    assert!(!err.contains("root"), "the root set nothing here: {err}");
    let (code, err) = turn(start(json!({"timeout": "5m"}), json!({"timeout": "10m"})));
    assert_eq!(code, Some(78), "{err}");
    assert!(err.contains("600s is above 300s, set by the request's `config.timeout`"), "{err}");
    // The built-in default, then the root's own file.
    let (_, err) = turn(start(Value::Null, json!({"max_loops": 50})));
    assert!(
        err.contains("50 is above 20, set by the built-in default")
            && err.contains("set `max_steps` in the root's agentloop.yaml"),
        "{err}"
    );
    h.t.write("root/agentloop.yaml", &format!("{CONFIG}max_steps: 7\n"));
    let (_, err) = turn(start(Value::Null, json!({"max_steps": 9})));
    assert!(
        err.contains("9 is above 7, set by the root's agentloop.yaml")
            && err.contains("raise it in the root's agentloop.yaml"),
        "{err}"
    );
    let (code, err) = turn(start(json!({"max_steps": 9}), Value::Null));
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("the request's config may not set `max_steps`: 9 is above 7, set by the root's agentloop.yaml"),
        "{err}"
    );
    assert!(err.contains("give `config.max_steps` at most 7"), "{err}");
    assert!(!h.t.exists("root/runs"), "a refused start wrote nothing");
    // A start that cannot fit a limit says whose limit it is.
    let (code, err) = turn(start(json!({"max_tokens": 300}), Value::Null));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("max_tokens is 300 (set by the request's `config.max_tokens`)"), "{err}");
    let (_, err) = turn(start(Value::Null, json!({"max_tokens": 300})));
    assert!(err.contains("max_tokens is 300 (set by the start's `context.max_tokens`)"), "{err}");
    h.t.write("root/agentloop.yaml", &format!("{CONFIG}max_tokens: 300\n"));
    let (_, err) = turn(start(Value::Null, Value::Null));
    assert!(err.contains("max_tokens is 300 (set by the root's agentloop.yaml)"), "{err}");
    // Narrower than the request's config: the run starts with the context's limit.
    h.t.write("root/agentloop.yaml", CONFIG);
    let v = h.send(&start(json!({"max_steps": 3}), json!({"max_steps": 2})).to_string());
    let run = v["state_updates"]["last_run_id"].as_str().unwrap();
    assert_eq!(h.t.json(&format!("root/runs/{run}/state.json"))["limits"]["max_steps"], 2, "{v}");
}

#[test]
fn progress_is_posted_to_the_users_webhook_per_phase() {
    let hook = Server::start(vec![Reply::json(200, json!({}))]);
    let h = H::new();
    h.t.write(
        "root/agentloop.yaml",
        &format!("{CONFIG}handle: {{progress_url: '{}/progress', progress_token: hook-SECRET-1}}\n", hook.url),
    );
    let (run, v) = h.start();
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"]);
    let posts: Vec<Value> = (0..hook.count()).map(|i| hook.request(i).json()).collect();
    let phases: Vec<&str> = posts.iter().map(|p| p["phase"].as_str().unwrap()).collect();
    assert_eq!(phases, ["frame", "plan"], "{posts:?}");
    for p in &posts {
        assert_eq!((p["type"].as_str(), p["run_id"].as_str()), (Some("agent.progress"), Some(run.as_str())));
        assert!(p["step"].is_u64() && p["summary"].is_string(), "{p}");
    }
    assert!(posts[1]["summary"].as_str().unwrap().contains("jina-reader"), "{:?}", posts[1]);
    let r = hook.request(0);
    assert_eq!((r.url.as_str(), r.header("authorization")), ("/progress", Some("Bearer hook-SECRET-1")));
    // The run ends: the last post says so.
    let v = h.result(&run, 1, "jina-reader", "ok");
    assert_eq!(types(&v), ["agent.completed"]);
    let last = hook.request(hook.count() - 1).json();
    assert_eq!((last["phase"].as_str(), last["status"].as_str()), (Some("finish"), Some("done")), "{last}");
    // A webhook that is down costs the run nothing.
    let h = H::new();
    h.t.write("root/agentloop.yaml", &format!("{CONFIG}handle: {{progress_url: 'http://127.0.0.1:9/progress'}}\n"));
    let (_, v) = h.start();
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"]);
}

#[test]
fn only_the_users_configuration_names_the_progress_webhook() {
    let hook = Server::start(vec![Reply::json(200, json!({}))]).expect_calls(0);
    let h = H::new();
    for config in
        [json!({"handle": {"progress_url": format!("{}/x", hook.url)}}), json!({"handle": {"progress_token": "t"}})]
    {
        let start = json!({"command": "handle", "config": config, "event": {"type": "agentic.start", "payload": {"goal": "g"}}});
        let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin(start.to_string()).output().unwrap();
        assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
        assert!(stdout(&out).contains("may not set `handle.progress_"), "{}", stdout(&out));
    }
    // Nor does a workspace the user has not trusted.
    h.t.write("root/agentloop.yaml", &format!("{CONFIG}handle: {{progress_url: '{}/x'}}\n", hook.url));
    let start = json!({"type": "agentic.start", "payload": {"goal": "g"}});
    let out = h.t.untrusted().args(["-w", "root", "handle"]).write_stdin(start.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
    assert!(stdout(&out).contains("handle.progress_url"), "{}", stdout(&out));
    // An address that is not http(s) is a configuration error naming the key.
    h.t.write("root/agentloop.yaml", &format!("{CONFIG}handle: {{progress_url: 'file:///etc/passwd'}}\n"));
    let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin(start.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
    assert!(stdout(&out).contains("handle.progress_url"), "{}", stdout(&out));
}

#[test]
fn a_skills_md_the_core_seeded_into_the_root_is_each_runs_catalog() {
    let h = H::new();
    let seeded = "# Plugins\n\n## jina-reader\nFetch a page as markdown: `jina-reader.handle`.\n";
    h.t.write("root/skills.md", seeded);
    let (run, _) = h.start();
    assert_eq!(h.t.read(&format!("root/runs/{run}/skills.md")), seeded, "the run's catalog is the seeded one");
    let trace: Vec<Value> =
        h.t.read(&format!("root/runs/{run}/trace.jsonl")).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(trace[0]["data"]["skills_md"], "seeded");
    let plan = trace.iter().find(|e| e["phase"] == "plan").unwrap();
    assert_eq!(plan["data"]["skills_md_unknown_tools"], json!(["jina-reader__handle"]));
}

/// A provider the root allows is not one a request may choose while the root's address or key
/// is set for its own provider: that address would get the other provider's key.
#[test]
fn an_allowed_provider_does_not_inherit_the_roots_address() {
    let t = T::new();
    let model = anthropic_phases();
    let ductile = Server::start(vec![Reply::json(200, json!({"plugins": []}))]);
    let port = seed_root(&t, &model, &ductile);
    let file =
        t.read("root/agentloop.yaml").replace("structured: tools}", "structured: tools, allowed_providers: [openai]}");
    t.write("root/agentloop.yaml", &file);
    let (mut config, _) = seed_000_config(port);
    config["llm_provider"] = json!("openai");
    let start =
        json!({"command": "handle", "config": config, "event": {"type": "agentic.start", "payload": {"goal": "g"}}});
    let out = seed_cmd(&t, port).write_stdin(start.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let err = v["error"].as_str().unwrap();
    assert!(err.contains("may not set `llm.provider`") && err.contains("no other provider may be chosen"), "{err}");
    assert_eq!(model.count(), 0);
}

#[test]
fn seed_000s_config_block_agrees_with_the_shipped_root_config() {
    // Health and poll with the seed's block as written (Ductile expands its variables), under
    // the shipped ductile/agentloop.yaml: no exit 78.
    let t = T::new();
    t.write(
        "root/agentloop.yaml",
        &std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ductile/agentloop.yaml"))
            .unwrap(),
    );
    // The seed's block as Ductile hands it over: `${PORT}` and `${DUCTILE_AGENT_TOKEN}` expanded.
    let (block, _) = seed_000_config(8080);
    for command in ["health", "poll"] {
        let out = t
            .cmd()
            .args(["-w", "root", "handle"])
            .env("PORT", "8080")
            .env("DUCTILE_AGENT_TOKEN", DUCTILE_TOKEN)
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .write_stdin(json!({"protocol": 2, "command": command, "config": block}).to_string())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{command}: {}{}", stdout(&out), stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["status"], "ok", "{v}");
    }
}
