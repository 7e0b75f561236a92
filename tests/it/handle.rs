//! Event mode (`agentloop handle`): seed RFC-103's must-pass cases and more, table-driven.

use crate::common::*;
use serde_json::{json, Value};

pub(crate) const SCRIPT: &str = r#"frame:
  - answer: {goal: critique a page, definition_of_done: [page fetched, critique written, two paragraphs], can_proceed: true}
  - answer: {goal: critique a page, definition_of_done: [page fetched, critique written, two paragraphs], can_proceed: true}
  - answer: {goal: critique a page, definition_of_done: [page fetched, critique written, two paragraphs], can_proceed: true}
plan:
  - answer: {next_action: {tool: jina-reader, args: {url: "http://example.com", run_id: EVIL, step: 99, tool: evil}}, expected_outcome: page, rationale: fetch}
  - answer: {next_action: {tool: file_write, args: {path: artifacts/critique.md, content: "p1\n\np2"}}, expected_outcome: written, rationale: write}
  - answer: {next_action: {tool: jina-reader, args: {url: "http://example.com/2"}}, expected_outcome: page, rationale: again}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}], decision: continue, reason: fetched}
  - answer: {satisfied: [{item: 2, steps: [2]}, {item: 3, steps: [2]}], decision: done, reason: all met, outcome: critique in artifacts/critique.md, artifacts: [artifacts/critique.md]}
"#;

pub(crate) const CONFIG: &str = "llm: {provider: scripted, script: script.yaml}\ntools:\n  external:\n    jina-reader:\n      description: Fetch a page as markdown.\n      parameters: {type: object, properties: {url: {type: string}}, required: [url]}\n";

pub(crate) struct H {
    pub(crate) t: T,
}

impl H {
    pub(crate) fn new() -> Self {
        let t = T::new();
        t.write("root/script.yaml", SCRIPT);
        t.write("root/agentloop.yaml", CONFIG);
        H { t }
    }
    pub(crate) fn send(&self, req: &str) -> Value {
        let out = self.t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        assert_eq!(text.lines().count(), 1, "exactly one JSON line: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        check_protocol(&v);
        v
    }
    pub(crate) fn start(&self) -> (String, Value) {
        let v = self.send(&json!({"protocol": 2, "job_id": "j1", "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "fetch http://example.com and critique it"}, "dedupe_key": "agentic:start:req-1", "timestamp": "0001-01-01T00:00:00Z"}, "unknown_field": true}).to_string());
        (v["state_updates"]["last_run_id"].as_str().unwrap().to_string(), v)
    }
    pub(crate) fn result(&self, run: &str, step: u64, tool: &str, status: &str) -> Value {
        self.send(&json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.tool_result", "payload": {"run_id": run, "step": step, "tool": tool, "status": status, "result": {"excerpt": "page text"}, "error": if status == "ok" { Value::Null } else { json!("fetch failed") }}}}).to_string())
    }
}

pub(crate) fn check_protocol(v: &Value) {
    // Every response of this suite holds to the published schemas.
    crate::schemas::check("handle-response.json", v);
    for e in
        v["events"].as_array().into_iter().flatten().filter(|e| e["type"].as_str().unwrap_or("").starts_with("agent."))
    {
        crate::schemas::check("completion-event.json", e);
    }
    assert!(v["status"] == "ok" || v["status"] == "error", "{v}");
    assert!(!v["result"].as_str().unwrap().is_empty(), "{v}");
    if v["status"] == "error" {
        assert!(v["error"].is_string());
    }
    assert!(v["events"].is_array() && v["logs"].is_array());
    // Only the keys of runs the turn changed, one per run, and the last run's summary; none at
    // all when no run changed.
    if let Some(su) = v.get("state_updates") {
        for (k, val) in su.as_object().unwrap() {
            let summary = ["last_run_id", "last_run", "last_goal", "total_steps"].contains(&k.as_str());
            assert!(summary || k.starts_with("run:") || (k == "runs" && val.is_null()), "{k} in {su}");
        }
    }
    for e in v["events"].as_array().unwrap() {
        assert!(e["type"].is_string() && e["payload"].is_object() && e["dedupe_key"].is_string(), "{e}");
    }
}

pub(crate) fn types(v: &Value) -> Vec<String> {
    v["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap().to_string()).collect()
}

#[test]
pub(crate) fn start_creates_a_run_and_the_first_request_with_protected_keys() {
    let h = H::new();
    let (run, v) = h.start();
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"]);
    let e = &v["events"][0];
    assert_eq!(e["dedupe_key"], format!("agentic:run:{run}:step:1:request"));
    assert_eq!(e["payload"]["run_id"], run.as_str());
    assert_eq!(e["payload"]["step"], 1);
    assert_eq!(e["payload"]["tool"], "jina-reader");
    assert_eq!(e["payload"]["tool_command"], "handle");
    assert_eq!(e["payload"]["url"], "http://example.com");
    let r = &v["state_updates"][&format!("run:{run}")];
    assert_eq!(
        (r["pending_step"].as_u64(), r["pending_tool"].as_str(), r["status"].as_str()),
        (Some(1), Some("jina-reader"), Some("running"))
    );
    // Seed 000's state keys beside the run's own key.
    let su = &v["state_updates"];
    assert_eq!(su["last_run_id"], run.as_str());
    // The time of the last run's latest turn (the test clock's), ISO 8601 in UTC.
    let at = su["last_run"].as_str().unwrap();
    assert!(at.starts_with(NOW.trim_end_matches('Z')) && at.ends_with('Z'), "{at}");
    assert_eq!(su["last_run"], r["updated_at"]);
    assert_eq!(su["last_goal"], r["goal"]);
    assert_eq!(su["total_steps"], 1);
    // Persisted before the event is emitted.
    let state = h.t.json(&format!("root/runs/{run}/state.json"));
    assert_eq!(state["pending"]["step"], 1);
    assert_eq!(state["pending"]["tool"], "jina-reader");
    assert!(h.t.exists(&format!("root/runs/{run}/memory.md")));
}

#[test]
pub(crate) fn matching_result_advances_to_completion_exactly_once() {
    let h = H::new();
    let (run, _) = h.start();
    let v = h.result(&run, 1, "jina-reader", "ok");
    assert_eq!(types(&v), ["agent.completed"], "{v}");
    assert_eq!(v["events"][0]["payload"]["artifacts"], json!(["artifacts/critique.md"]));
    assert_eq!(v["events"][0]["payload"]["steps_taken"], 2);
    // Duplicate delivery: nothing changes, no second completion.
    let before = h.t.read(&format!("root/runs/{run}/trace.jsonl"));
    let v2 = h.result(&run, 1, "jina-reader", "ok");
    assert!(types(&v2).is_empty());
    assert_eq!(h.t.read(&format!("root/runs/{run}/trace.jsonl")), before);
    assert_eq!(v2["state_updates"][&format!("run:{run}")]["status"], "done");
}

#[test]
pub(crate) fn duplicate_start_and_stale_results_are_ignored() {
    let h = H::new();
    let (run, first) = h.start();
    // The router's retry of the same job gets the same answer again (its answer may have been
    // lost); the same start in another job is a duplicate, ignored.
    let (run2, v) = h.start();
    assert_eq!((run.as_str(), &v), (run2.as_str(), &first));
    let v = h.send(&json!({"protocol": 2, "job_id": "j2", "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "fetch http://example.com and critique it"}, "dedupe_key": "agentic:start:req-1"}}).to_string());
    assert_eq!(v["state_updates"]["last_run_id"], run.as_str());
    assert!(types(&v).is_empty());
    assert_eq!(std::fs::read_dir(h.t.path("root/runs")).unwrap().count(), 1);
    let v = h.result(&run, 0, "jina-reader", "ok");
    assert!(types(&v).is_empty());
    assert!(v["result"].as_str().unwrap().contains("stale"));
    let v = h.result("01UNKNOWNRUN00000000000000", 1, "jina-reader", "ok");
    assert!(types(&v).is_empty());
    assert_eq!(v["logs"][0]["level"], "warn");
}

#[test]
pub(crate) fn wrong_tool_or_future_step_escalates() {
    for (step, tool, why) in [(1, "fabric", "tool `fabric`"), (5, "jina-reader", "step 5")] {
        let h = H::new();
        let (run, _) = h.start();
        let v = h.result(&run, step, tool, "ok");
        assert_eq!(types(&v), ["agent.escalated"], "{v}");
        assert!(v["events"][0]["payload"]["reason"].as_str().unwrap().contains(why));
        let again = h.result(&run, 1, "jina-reader", "ok");
        assert!(types(&again).is_empty(), "terminal run ignores later results");
    }
}

#[test]
pub(crate) fn tool_errors_retry_then_escalate() {
    let h = H::new();
    let (run, _) = h.start();
    let v = h.result(&run, 1, "jina-reader", "error");
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"]);
    assert_eq!(v["events"][0]["payload"]["attempt"], 1);
    assert_eq!(v["events"][0]["dedupe_key"], format!("agentic:run:{run}:step:1:request:attempt:1"));
    let v = h.result(&run, 1, "jina-reader", "error");
    assert_eq!(v["state_updates"][&format!("run:{run}")]["attempts"], 2);
    let v = h.result(&run, 1, "jina-reader", "error");
    assert_eq!(types(&v), ["agent.escalated"]);
    assert!(v["events"][0]["payload"]["reason"].as_str().unwrap().contains("retries are spent"));
}

#[test]
pub(crate) fn max_steps_escalates_deterministically() {
    let h = H::new();
    h.t.write("root/agentloop.yaml", &format!("{CONFIG}max_steps: 1\n"));
    h.t.write(
        "root/script.yaml",
        &SCRIPT.replace("decision: continue, reason: fetched", "decision: continue, reason: more"),
    );
    let (run, _) = h.start();
    let v = h.result(&run, 1, "jina-reader", "ok");
    assert_eq!(types(&v), ["agent.escalated"], "{v}");
    assert!(v["events"][0]["payload"]["reason"].as_str().unwrap().contains("max_steps"));
}

#[test]
pub(crate) fn garbage_and_odd_requests_get_valid_responses() {
    let h = H::new();
    for req in [
        "",
        "garbage",
        "[]",
        "null",
        "{}",
        "{\"event\": 5}",
        "{\"type\": \"agentic.start\", \"payload\": {}}",
        "{\"type\": \"agentic.tool_result\", \"payload\": {\"run_id\": \"../../etc\"}}",
        "{\"command\": \"dance\"}",
        "{\"type\": \"something.else\", \"payload\": {}}",
    ] {
        let v = h.send(req);
        assert!(!v["result"].as_str().unwrap().is_empty(), "{req}");
    }
    let v = h.send("{\"protocol\": 2, \"command\": \"health\"}");
    assert_eq!(v["status"], "ok");
    assert!(!h.t.exists("root/runs"), "health and garbage have no side effects");
}

#[test]
pub(crate) fn a_request_field_of_the_wrong_type_is_refused_naming_it() {
    let h = H::new();
    let request_schema = jsonschema::validator_for(&crate::schemas::schema("handle-request.json")).unwrap();
    for (req, path) in [
        (
            json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": ["a", "list"]}}}),
            "event.payload.goal",
        ),
        (json!({"type": "agentic.tool_result", "payload": {"run_id": 7, "step": 1}}), "payload.run_id"),
        (json!({"protocol": 2, "command": 5}), "command"),
        (json!({"protocol": 2, "command": "handle", "state": {"runs": []}}), "state.runs"),
        (
            json!({"protocol": 2, "command": "handle", "state": {"run:r1": {"status": "running", "step": "two"}}}),
            "state.run:r1.step",
        ),
        (
            json!({"protocol": 2, "command": "handle", "event": {"type": "x", "payload": {}}, "context": {"run_id": "r", "step": [1]}}),
            "context.step",
        ),
    ] {
        let v = h.send(&req.to_string());
        assert_eq!(v["status"], "error", "{req}: {v}");
        assert!(v["error"].as_str().unwrap().contains(&format!("the request's `{path}` is not valid")), "{req}: {v}");
        assert_eq!(v["retry"], false, "the same request fails the same way: {v}");
        assert!(!request_schema.is_valid(&req), "the published schema refuses it too: {req}");
    }
    assert!(!h.t.exists("root/runs"), "a refused request starts nothing");
    // A request as Ductile writes it, keys agentloop does not read included, is one the schema takes.
    let ductile = json!({"protocol": 2, "job_id": "j1", "command": "handle", "config": null, "state": {"run:r1": {"status": "running"}, "runs": null, "last_run_id": "r1", "last_goal": "g"},
        "event": {"type": "agentic.start", "payload": {"goal": "g", "ductile_route_depth": 1}, "dedupe_key": "k", "source": "api", "timestamp": "2026-01-01T00:00:00Z", "event_id": "e1"},
        "context": {"ductile": {"route_depth": 1}}, "deadline_at": "0001-01-01T00:00:00Z", "unknown_field": true});
    crate::schemas::check("handle-request.json", &ductile);
}

#[test]
pub(crate) fn bare_events_and_context_correlation() {
    let h = H::new();
    let v = h.send(&json!({"type": "api.trigger", "payload": {"goal": "fetch and critique"}}).to_string());
    let run = v["state_updates"]["last_run_id"].as_str().unwrap().to_string();
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"]);
    // The tool's own event type, with correlation in the request context.
    let v = h.send(&json!({"protocol": 2, "command": "handle", "event": {"type": "content_ready", "payload": {"markdown": "# page"}}, "context": {"run_id": run, "step": 1, "tool": "jina-reader"}}).to_string());
    assert_eq!(types(&v), ["agent.completed"], "{v}");
}

#[test]
pub(crate) fn a_resume_as_ductile_delivers_it_gives_the_model_the_plugins_content_only() {
    let h = H::new();
    let (run, v) = h.start();
    // `result` is in every request, null unless the arguments give one: Ductile copies the
    // turn's summary only into an event without it.
    assert_eq!(v["events"][0]["payload"].get("result"), Some(&Value::Null), "{v}");
    // The second step of a tool pipeline as Ductile sends it: the pipeline's baggage in `context`,
    // and context plus Ductile's control keys merged into the tool event's payload.
    let ctx = json!({"ductile": {"pipeline_instance_id": "p-1", "route_depth": 2}, "ductile_pipeline": "agentloop-tool-jina-reader",
        "ductile_pipeline_instance_id": "p-1", "ductile_plugin": "agentloop", "ductile_route_depth": 2, "ductile_step_id": "resume",
        "run_id": run, "step": 1, "tool": "jina-reader"});
    let mut payload = ctx.clone();
    for (k, v) in [
        ("content", json!("The page, line one.\nLine two of the page.")),
        ("url", json!("http://example.com")),
        ("status_code", json!(200)),
        ("result", json!("fetched http://example.com (40 chars)")),
        ("ductile_upstream_plugin", json!("fetch")),
        ("ductile_upstream_pipeline", json!("agentloop-tool-jina-reader")),
        ("ductile_upstream_step_id", json!("fetch")),
    ] {
        payload[k] = v;
    }
    let v = h.send(&json!({"protocol": 2, "job_id": "j2", "command": "handle", "event": {"type": "fetch.completed", "payload": payload}, "context": ctx}).to_string());
    assert_eq!(types(&v), ["agent.completed"], "{v}");
    let trace = h.t.read(&format!("root/runs/{run}/trace.jsonl"));
    let act = trace.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).find(|e| e["event"] == "act").unwrap();
    let seen = act.to_string();
    let summary = act["result_summary"].as_str().unwrap();
    assert!(summary.contains("content: The page, line one. Line two of the page."), "the page, not JSON: {act:#}");
    assert!(summary.contains("status_code: 200"), "{act:#}");
    for key in ["ductile", "pipeline_instance_id", "route_depth", "agentloop-tool-jina-reader"] {
        assert!(!seen.contains(key), "`{key}` is Ductile's, not the plugin's: {act:#}");
    }
}

#[test]
pub(crate) fn config_errors_exit_78_with_a_response() {
    let h = H::new();
    h.t.write("root/agentloop.yaml", "bogus: 1\n");
    let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin("{\"command\": \"health\"}").output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "error");
    assert_eq!(v["retry"], false);
    assert!(v["error"].as_str().unwrap().contains("bogus"));
    // A configuration error found during a turn (not while merging) is 78 too.
    h.t.write("root/agentloop.yaml", "handle: {runs_dir: ../elsewhere}\n");
    let start = json!({"command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "g"}}});
    let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin(start.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", String::from_utf8_lossy(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["error"].as_str().unwrap().contains("handle.runs_dir"), "{v}");
    let h = H::new();
    let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin(json!({"command": "handle", "config": {"max_stepz": 3}, "event": {"type": "agentic.start", "payload": {"goal": "g"}}}).to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    for bad in [
        json!({"llm": {"api_key_cmd": ["sh", "-c", "touch pwned"]}}),
        json!({"tools": {"shell": {"enabled": true, "allow": ["sh"]}}}),
        json!({"tools": {"http": {"allow_private": true}}}),
        json!({"tools": {"read_paths": ["/"]}}),
        // Exfiltration and widening: the request may only narrow.
        json!({"llm": {"base_url": "http://attacker.example/v1"}}),
        json!({"llm": {"api_key_env": "HOME"}}),
        json!({"agent": "admin"}),
        json!({"llm_model": "the-most-expensive-model"}),
        // A gateway the root did not name: its token would go there.
        json!({"api_url": "http://x"}),
        json!({"tools": {"local": ["file_read", "http_call"]}}),
        json!({"tools": {"http": {"user_agent": "x"}}}),
        json!({"max_steps": 1000}),
        json!({"allowed_tools": ["shell"]}),
    ] {
        let h = H::new();
        let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin(json!({"command": "handle", "config": bad, "event": {"type": "agentic.start", "payload": {"goal": "g"}}}).to_string()).output().unwrap();
        assert_eq!(out.status.code(), Some(78), "{bad}");
        assert!(stdout(&out).contains("may not set"), "{}", stdout(&out));
        assert!(!h.t.exists("root/runs") && !h.t.exists("pwned"));
    }
    let ok = H::new();
    let v = ok.send(&json!({"command": "handle", "config": {"max_steps": 3, "allowed_plugins": ["jina-reader", "file_write"], "schedule": null, "system_prompt": "be brief", "tools": {"http": {"allow_hosts": ["example.com"]}}, "max_cost_usd": 0.5}, "event": {"type": "agentic.start", "payload": {"goal": "g"}}}).to_string());
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"]);
    // An empty object sets nothing, so it narrows nothing and is accepted — for every command.
    for config in [json!({}), json!({"tools": {}}), json!({"llm": {}, "tools": {"http": {}}})] {
        let h = H::new();
        let v = h.send(&json!({"command": "health", "config": config}).to_string());
        assert_eq!(v["status"], "ok", "{config}: {v}");
        let v = h.send(&json!({"command": "handle", "config": config, "event": {"type": "agentic.start", "payload": {"goal": "g"}}}).to_string());
        assert_eq!(types(&v), ["agentic.tool_request.jina-reader"], "{config}: {v}");
    }
}

/// Many runs, with duplicated, reordered, stale and garbage deliveries: every run ends with
/// exactly one completion or escalation and nothing advances twice.
#[test]
pub(crate) fn a_noisy_router_never_double_advances() {
    let h = H::new();
    let mut completions: std::collections::BTreeMap<String, usize> = Default::default();
    let mut runs = vec![];
    for i in 0..4 {
        let v = h.send(&json!({"type": "agentic.start", "payload": {"goal": format!("goal {i}")}, "dedupe_key": format!("start-{i}")}).to_string());
        runs.push(v["state_updates"]["last_run_id"].as_str().unwrap().to_string());
    }
    for round in 0..3 {
        for (i, run) in runs.iter().enumerate() {
            let deliveries = [(1, "jina-reader", "ok"), (0, "jina-reader", "ok"), (1, "jina-reader", "ok")];
            for (step, tool, status) in deliveries.iter().skip((i + round) % 2) {
                let v = h.result(run, *step, tool, status);
                for e in v["events"].as_array().unwrap() {
                    if e["type"] == "agent.completed" || e["type"] == "agent.escalated" {
                        *completions.entry(run.clone()).or_default() += 1;
                    }
                }
            }
            h.send("{garbage");
        }
    }
    for run in &runs {
        assert_eq!(completions.get(run), Some(&1), "run {run}");
        let trace = h.t.read(&format!("root/runs/{run}/trace.jsonl"));
        assert_eq!(trace.matches("\"event\":\"run.finished\"").count(), 1);
        assert_eq!(trace.matches("\"event\":\"act\"").count(), 2, "each step acted once");
    }
}

#[test]
pub(crate) fn ductile_manifest_and_example_config_are_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ductile");
    let m: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(dir.join("manifest.yaml")).unwrap()).unwrap();
    assert_eq!(
        (m["manifest_spec"].as_str(), m["manifest_version"].as_u64(), m["protocol"].as_u64()),
        (Some("ductile.plugin"), Some(1), Some(2))
    );
    let commands: Vec<&str> = m["commands"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(commands.contains(&"handle") && commands.contains(&"health"));
    assert!(dir.join(m["entrypoint"].as_str().unwrap()).exists());
    let t = T::new();
    t.write("root/agentloop.yaml", &std::fs::read_to_string(dir.join("agentloop.yaml")).unwrap());
    let out = t
        .cmd()
        .args(["-w", "root", "handle"])
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .write_stdin("{\"protocol\": 2, \"command\": \"health\"}")
        .output()
        .unwrap();
    // Healthy: the root is there and writable, and the shipped provider has its key.
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let p: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(dir.join("pipelines.yaml")).unwrap()).unwrap();
    assert!(p["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["steps"].as_array().unwrap().last().unwrap()["uses"] == "agentloop"));
}

/// A turn killed part-way is finished by the next delivery, with nothing applied twice.
#[test]
pub(crate) fn a_turn_killed_part_way_is_finished_by_the_redelivery() {
    let h = H::new();
    h.t.write(
        "root/script.yaml",
        &SCRIPT.replace(
            "  - answer: {next_action: {tool: jina-reader, args: {url: \"http://example.com\", run_id: EVIL, step: 99, tool: evil}}, expected_outcome: page, rationale: fetch}\n",
            "  - answer: {next_action: {tool: file_write, args: {path: artifacts/notes.md, content: start}}, expected_outcome: notes, rationale: notes first}\n",
        )
        .replace("reflect:\n", "reflect:\n  - answer: {decision: continue, reason: notes written}\n"),
    );
    let start = json!({"type": "agentic.start", "payload": {"goal": "g"}, "dedupe_key": "start-crash"}).to_string();
    let out =
        h.t.cmd()
            .args(["-w", "root", "handle"])
            .env("AGENTLOOP_CRASH_AT", "phase:act:after-tool")
            .write_stdin(start.clone())
            .output()
            .unwrap();
    assert!(!out.status.success() && out.stdout.is_empty(), "the first delivery was killed");
    let v = h.send(&start);
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"], "{v}");
    let run = v["state_updates"]["last_run_id"].as_str().unwrap().to_string();
    let trace = h.t.read(&format!("root/runs/{run}/trace.jsonl"));
    assert_eq!(trace.matches("\"step\":1,\"phase\":\"act\"").count(), 1, "the killed step's act is recorded once");
    assert_eq!(trace.matches("\"event\":\"act\"").count(), 2, "steps 1 and 2 ran locally, step 3 is requested");
    assert_eq!(trace.matches("\"event\":\"frame\"").count(), 1);
}

#[test]
pub(crate) fn runs_lists_the_runs_under_a_root() {
    let h = H::new();
    let (run, _) = h.start();
    let out = h.t.cmd().args(["-w", "root", "runs", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["run_id"], run.as_str());
    assert_eq!(rows[0]["status"], "running");
    let text = h.t.cmd().args(["-w", "root", "runs"]).output().unwrap();
    assert!(stdout(&text).contains(&run) && stdout(&text).contains("running"));
}

#[test]
pub(crate) fn a_run_whose_workspace_is_lost_still_ends_once() {
    let h = H::new();
    let (run, v) = h.start();
    let state = v["state_updates"].clone();
    std::fs::remove_dir_all(h.t.path(&format!("root/runs/{run}"))).unwrap();
    let req = |state: &Value| {
        json!({"protocol": 2, "command": "handle", "state": state, "event": {"type": "agentic.tool_result", "payload": {"run_id": run, "step": 1, "tool": "jina-reader", "status": "ok", "result": "x"}}}).to_string()
    };
    let v = h.send(&req(&state));
    assert_eq!(types(&v), ["agent.escalated"], "{v}");
    assert_eq!(v["state_updates"][&format!("run:{run}")]["status"], "escalated");
    // With the router's updated state, a redelivery is ignored: one escalation in all.
    let v2 = h.send(&req(&v["state_updates"]));
    assert!(types(&v2).is_empty(), "{v2}");
    // A state key that holds no run id (a path, a control character) names no run: the result
    // is ignored, and no event repeats it.
    for bad in ["../../etc", "run\u{1b}[2Jx"] {
        let state = json!({format!("run:{bad}"): {"status": "running", "goal": "g", "step": 1}});
        let req = json!({"protocol": 2, "command": "handle", "state": state, "event": {"type": "agentic.tool_result", "payload": {"run_id": bad, "step": 1, "tool": "jina-reader", "status": "ok", "result": "x"}}});
        let v = h.send(&req.to_string());
        assert!(types(&v).is_empty(), "{bad:?}: {v}");
        assert!(v["result"].as_str().unwrap().contains("not a run id"), "{v}");
        assert!(!v.to_string().contains('\u{1b}'), "{v}");
    }
}

#[test]
pub(crate) fn hostile_sizes_are_refused_cheaply() {
    let h = H::new();
    let big = format!(
        "{{\"command\": \"handle\", \"event\": {{\"type\": \"agentic.start\", \"payload\": {{\"goal\": \"{}\"}}}}}}",
        "x".repeat(9 * 1024 * 1024)
    );
    let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin(big).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "error");
    assert!(v["error"].as_str().unwrap().contains("larger than 8388608 bytes"), "{v}");
    // Deep nesting in a config file or a skill's frontmatter is refused, not parsed.
    h.t.write("root/agentloop.yaml", &format!("max_steps: {}\n", "[".repeat(100_000)));
    let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin("{\"command\": \"health\"}").output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(stdout(&out).contains("nests more than 64 levels"), "{}", stdout(&out));
}

#[test]
pub(crate) fn the_roots_identity_file_reaches_every_prompt_in_event_mode() {
    let h = H::new();
    h.t.write("root/agentloop.yaml", &format!("{CONFIG}system_prompt_file: identity.md\n"));
    h.t.write("root/identity.md", "You are Ada, the archive's careful reader.\n");
    let (run, _) = h.start();
    let transcript = h.t.read(&format!("root/runs/{run}/transcript.md"));
    assert!(transcript.contains("You are Ada, the archive's careful reader."), "{transcript}");
    // A missing identity file is a configuration error a router must not retry.
    std::fs::remove_file(h.t.path("root/identity.md")).unwrap();
    let out = h.t.cmd().args(["-w", "root", "handle"]).write_stdin(r#"{"command": "health"}"#).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
    assert!(stdout(&out).contains("system_prompt_file"), "{}", stdout(&out));
}

#[test]
pub(crate) fn a_start_payload_output_schema_shapes_the_completion_event() {
    let t = T::new();
    t.write(
        "root/script.yaml",
        "frame:\n  - answer: {goal: rate, definition_of_done: [rated, titled, scored], can_proceed: true}\nplan:\n  - answer: {next_action: {tool: list_dir, args: {}}, rationale: look}\n  - answer: {next_action: {tool: finish, args: {summary: rated, output: {title: t, score: 3}}}, rationale: known}\nreflect:\n  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: continue, reason: looked}\n  - answer: {decision: done, reason: ok}\n",
    );
    t.write("root/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\n");
    let schema = json!({"type": "object", "properties": {"title": {"type": "string"}, "score": {"type": "integer"}}, "required": ["title", "score"]});
    let req = json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "rate it", "output_schema": schema}}});
    let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    check_protocol(&v);
    let done = v["events"].as_array().unwrap().iter().find(|e| e["type"] == "agent.completed").unwrap().clone();
    assert_eq!(done["payload"]["output"], json!({"title": "t", "score": 3}), "{v}");
    let req = json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "rate it", "output_schema": "x.json"}}});
    let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["status"], "error");
    assert!(v["error"].as_str().unwrap().contains("`output_schema` must be a JSON Schema object"), "{v}");
}

/// Event mode refuses a start the way `run` does, before anything is written: a run whose
/// smallest course cannot fit its budget leaves no run folder behind.
#[test]
pub(crate) fn a_start_that_cannot_fit_its_budget_is_refused_and_leaves_nothing() {
    let h = H::new();
    let v = h.send(
        &json!({"command": "handle", "config": {"max_tokens": 300}, "event": {"type": "agentic.start", "payload": {"goal": "g"}}})
            .to_string(),
    );
    let text = v.to_string();
    assert!(text.contains("run refused before it started") && text.contains("max_tokens is 300"), "{text}");
    let runs = h.t.path("root/runs");
    let left = std::fs::read_dir(&runs).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "no run folder is left in {}", runs.display());
}

/// `handle` with the clock at `now` (the fixed test clock moved on).
pub(crate) fn send_at(h: &H, now: &str, req: &Value) -> Value {
    let out =
        h.t.cmd()
            .args(["-w", "root", "handle"])
            .env("AGENTLOOP_NOW", now)
            .write_stdin(req.to_string())
            .output()
            .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_protocol(&v);
    v
}

/// A tool job that ends in error makes the router route nothing, so no result ever comes: the
/// scheduled `poll` treats a step pending past its tool's timeout plus `handle.pending_grace` as
/// a failed tool call, retries it, then escalates, and changes nothing else.
#[test]
pub(crate) fn poll_treats_a_step_pending_too_long_as_a_failed_tool_call_so_every_run_ends() {
    let h = H::new();
    h.t.write("root/agentloop.yaml", &format!("{CONFIG}handle: {{pending_grace: 1m}}\n"));
    let (run, _) = h.start();
    let key = format!("run:{run}");
    let poll = json!({"protocol": 2, "job_id": "p", "command": "poll", "state": {}});
    // Health and a poll with nothing overdue (30s tool timeout + 1m grace) leave state alone.
    for (cmd, at) in [("health", NOW), ("poll", NOW), ("poll", "2026-01-01T00:01:29Z")] {
        let v = send_at(&h, at, &json!({"protocol": 2, "command": cmd, "state": {}}));
        assert!(v.get("state_updates").is_none() && types(&v).is_empty(), "{cmd} at {at}: {v}");
    }
    let v = send_at(&h, "2026-01-01T00:02:00Z", &poll);
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"], "{v}");
    assert_eq!(v["events"][0]["payload"]["attempt"], 1);
    assert!(v["logs"][0]["message"].as_str().unwrap().contains("no result for step 1"), "{v}");
    let su = v["state_updates"].as_object().unwrap();
    assert_eq!(su[&key]["attempts"], 1);
    assert_eq!(su.keys().filter(|k| k.starts_with("run:")).count(), 1, "only the swept run's key: {v}");
    // The retry's own clock starts when it was requested.
    let v = send_at(&h, "2026-01-01T00:03:00Z", &poll);
    assert!(types(&v).is_empty() && v.get("state_updates").is_none(), "{v}");
    let v = send_at(&h, "2026-01-01T00:04:00Z", &poll);
    assert_eq!(v["events"][0]["payload"]["attempt"], 2, "{v}");
    let v = send_at(&h, "2026-01-01T00:06:00Z", &poll);
    assert_eq!(types(&v), ["agent.escalated"], "{v}");
    assert!(v["events"][0]["payload"]["reason"].as_str().unwrap().contains("retries are spent"), "{v}");
    assert_eq!(v["state_updates"][&key]["status"], "escalated");
    let v = send_at(&h, "2026-01-02T00:00:00Z", &poll);
    assert!(types(&v).is_empty() && v.get("state_updates").is_none(), "an ended run is never swept again: {v}");
    let trace = h.t.read(&format!("root/runs/{run}/trace.jsonl"));
    assert_eq!(trace.matches("\"event\":\"act.retry\"").count(), 2);
}

/// Ductile retries a job under the same `job_id` (a handle timeout kills the turn part-way), and
/// an API-started job has no event_id or dedupe_key: the job id alone keeps it one run. The
/// event's `event_id` and `dedupe_key` each dedupe on their own.
#[test]
pub(crate) fn a_start_is_one_run_across_its_jobs_retries_and_either_event_key() {
    for crash in ["write:state.json", "commit:journaled", "phase:act:after-tool"] {
        let h = H::new();
        h.t.write(
            "root/script.yaml",
            &SCRIPT
                .replace(
                    "tool: jina-reader, args: {url: \"http://example.com\", run_id: EVIL, step: 99, tool: evil}",
                    "tool: file_write, args: {path: notes.md, content: n}",
                )
                .replace("reflect:\n", "reflect:\n  - answer: {decision: continue, reason: notes written}\n"),
        );
        let api = json!({"protocol": 2, "job_id": "job-7", "command": "handle", "event": {"type": "api.trigger", "payload": {"goal": "g"}}});
        let out =
            h.t.cmd()
                .args(["-w", "root", "handle"])
                .env("AGENTLOOP_CRASH_AT", crash)
                .write_stdin(api.to_string())
                .output()
                .unwrap();
        assert!(!out.status.success() && out.stdout.is_empty(), "{crash}: the first attempt was killed");
        let v = h.send(&api.to_string());
        assert_eq!(std::fs::read_dir(h.t.path("root/runs")).unwrap().count(), 1, "{crash}: one run: {v}");
        assert_eq!(types(&v), ["agentic.tool_request.jina-reader"], "{crash}: the retry finished the turn: {v}");
        // Delivered once more (its answer lost on the way): the same answer, nothing run again.
        let again = h.send(&api.to_string());
        assert_eq!(again, v, "{crash}");
        assert_eq!(std::fs::read_dir(h.t.path("root/runs")).unwrap().count(), 1);
    }
    let h = H::new();
    let start = |job: &str, ev: Value| {
        let mut e = json!({"type": "agentic.start", "payload": {"goal": "g"}});
        e.as_object_mut().unwrap().extend(ev.as_object().unwrap().clone());
        h.send(&json!({"protocol": 2, "job_id": job, "command": "handle", "event": e}).to_string())
    };
    let first = start("j1", json!({"event_id": "ev-1", "dedupe_key": "dk-1"}));
    let run = first["state_updates"]["last_run_id"].clone();
    for (job, ev) in [
        ("j2", json!({"event_id": "ev-1", "dedupe_key": "dk-2"})),
        ("j3", json!({"event_id": "ev-2", "dedupe_key": "dk-1"})),
        ("j4", json!({"event_id": "ev-2"})),
        ("j5", json!({"dedupe_key": "dk-2"})),
    ] {
        let v = start(job, ev.clone());
        assert!(types(&v).is_empty(), "{ev}: {v}");
        assert_eq!(v["state_updates"]["last_run_id"], run, "{ev}");
    }
    assert_eq!(std::fs::read_dir(h.t.path("root/runs")).unwrap().count(), 1);
    let v = start("j6", json!({"event_id": "ev-3"}));
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"], "a new start is a new run");
    assert_eq!(std::fs::read_dir(h.t.path("root/runs")).unwrap().count(), 2);
}

/// Ductile shallow-merges each job's `state_updates` into the plugin's state (a later top-level
/// key wins). Four turns at once on one root, each from a stale snapshot, leave every run right.
#[test]
pub(crate) fn four_concurrent_turns_merge_into_state_that_keeps_every_run() {
    let h = H::new();
    let merge = |state: &mut serde_json::Map<String, Value>, v: &Value| {
        if let Some(su) = v.get("state_updates").and_then(Value::as_object) {
            for (k, val) in su {
                state.insert(k.clone(), val.clone());
            }
        }
    };
    let at_once = |reqs: Vec<Value>| -> Vec<Value> {
        let threads: Vec<_> = reqs
            .into_iter()
            .map(|r| {
                let mut c = h.t.cmd();
                c.args(["-w", "root", "handle"]).write_stdin(r.to_string());
                std::thread::spawn(move || c.output().unwrap())
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                let out = t.join().unwrap();
                assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                check_protocol(&v);
                v
            })
            .collect()
    };
    let mut state = serde_json::Map::new();
    let starts = (0..4).map(|i| json!({"protocol": 2, "job_id": format!("s{i}"), "command": "handle", "state": {}, "event": {"type": "agentic.start", "payload": {"goal": format!("goal {i}")}}})).collect();
    let started = at_once(starts);
    let runs: Vec<String> =
        started.iter().map(|v| v["state_updates"]["last_run_id"].as_str().unwrap().to_string()).collect();
    for v in &started {
        merge(&mut state, v);
    }
    let snapshot = Value::Object(state.clone());
    // Every result turn reads the same snapshot (all four running), as parallel jobs do.
    let results = runs.iter().map(|r| json!({"protocol": 2, "command": "handle", "state": snapshot, "event": {"type": "agentic.tool_result", "payload": {"run_id": r, "step": 1, "tool": "jina-reader", "status": "ok", "result": "page"}}})).collect();
    let finished = at_once(results);
    // Merged in the order least kind to a full snapshot: the turn that finished first, last.
    for v in finished.iter().rev() {
        assert_eq!(types(v), ["agent.completed"], "{v}");
        merge(&mut state, v);
    }
    for r in &runs {
        assert_eq!(state[&format!("run:{r}")]["status"], "done", "{r}: {state:?}");
        let on_disk = h.t.json(&format!("root/runs/{r}/state.json"));
        assert_eq!(on_disk["status"], "done");
    }
    assert_eq!(state.keys().filter(|k| k.starts_with("run:")).count(), 4);
}

/// A model outage inside a turn (after agentloop's own retries) answers a retryable error, so
/// the router retries the job and its circuit breaker can count it; the run stays where the turn
/// stopped and the retried job's event picks it up there.
#[test]
pub(crate) fn a_provider_outage_is_a_retryable_error_and_the_retry_resumes_the_run() {
    let h = H::new();
    let down = format!("llm: {{provider: openai, base_url: 'http://127.0.0.1:9/v1', model: m, api_key_cmd: [echo, sk-test], attempts: 1}}\n{}", CONFIG.trim_start_matches("llm: {provider: scripted, script: script.yaml}\n"));
    let api = json!({"protocol": 2, "job_id": "job-1", "command": "handle", "event": {"type": "api.trigger", "payload": {"goal": "g"}}}).to_string();
    h.t.write("root/agentloop.yaml", &down);
    let v = h.send(&api);
    assert_eq!((v["status"].as_str(), v["retry"].as_bool()), (Some("error"), Some(true)), "{v}");
    assert!(types(&v).is_empty(), "no agent.escalated: {v}");
    assert!(v["error"].as_str().unwrap().contains("provider failure in frame"), "{v}");
    let run_dir = std::fs::read_dir(h.t.path("root/runs")).unwrap().next().unwrap().unwrap().path();
    let state: Value = serde_json::from_str(&std::fs::read_to_string(run_dir.join("state.json")).unwrap()).unwrap();
    assert_eq!(state["status"], "running", "{state}");
    // The provider is back: Ductile's retry of the same job continues the run.
    h.t.write("root/agentloop.yaml", CONFIG);
    let v = h.send(&api);
    assert_eq!(types(&v), ["agentic.tool_request.jina-reader"], "{v}");
    let run = v["state_updates"]["last_run_id"].as_str().unwrap().to_string();
    // An outage in the turn a tool result starts: the same result, redelivered, finishes it.
    h.t.write("root/agentloop.yaml", &down);
    let result = json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.tool_result", "payload": {"run_id": run, "step": 1, "tool": "jina-reader", "status": "ok", "result": "page"}}}).to_string();
    let v = h.send(&result);
    assert_eq!((v["status"].as_str(), v["retry"].as_bool()), (Some("error"), Some(true)), "{v}");
    assert!(types(&v).is_empty(), "{v}");
    h.t.write("root/agentloop.yaml", CONFIG);
    let v = h.send(&result);
    assert_eq!(types(&v), ["agent.completed"], "{v}");
    assert_eq!(std::fs::read_dir(h.t.path("root/runs")).unwrap().count(), 1);
    // A provider that never comes back: after three retryable turns the run ends as `run` ends it.
    h.t.write("root/agentloop.yaml", &down);
    let api = json!({"protocol": 2, "job_id": "job-2", "command": "handle", "event": {"type": "api.trigger", "payload": {"goal": "g"}}}).to_string();
    for _ in 0..3 {
        let v = h.send(&api);
        assert_eq!((v["retry"].as_bool(), types(&v).len()), (Some(true), 0), "{v}");
    }
    let v = h.send(&api);
    assert_eq!((v["status"].as_str(), types(&v)), (Some("ok"), vec!["agent.escalated".to_string()]), "{v}");
    assert!(v["events"][0]["payload"]["reason"].as_str().unwrap().contains("provider failure"), "{v}");
}
