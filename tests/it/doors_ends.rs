//! How runs end and are found again, whichever door drove them: event mode keeps every check
//! of the one loop (the rest window's ledger among them), a start that cannot begin leaves no
//! run, a job whose answer was lost is answered again, a run stopped without being able to say
//! so shows `interrupted` with the way on, and negotiation weighs what the rest window has left.

use crate::common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const QUICK: &str = r#"frame:
  - answer: {goal: g, definition_of_done: [listed, read, said], can_proceed: true}
    usage: {input_tokens: 4000, output_tokens: 0}
plan:
  - answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}
    usage: {input_tokens: 1000, output_tokens: 0}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: fine}
    usage: {input_tokens: 1000, output_tokens: 0}
"#;

fn handle(t: &T, root: &str, req: &Value) -> (Option<i32>, Value) {
    let out = t.cmd().args(["-w", root, "handle"]).write_stdin(req.to_string()).output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)));
    crate::handle::check_protocol(&v);
    (out.status.code(), v)
}

fn start(goal: &str, job: &str) -> Value {
    json!({"protocol": 2, "job_id": job, "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": goal}}})
}

#[test]
fn a_start_whose_provider_has_no_key_leaves_no_run_and_health_says_why() {
    let t = T::new();
    t.write("root/agentloop.yaml", "llm: {provider: openai, model: gpt-4o-mini}\n");
    let (code, v) = handle(&t, "root", &start("summarise the notes", "job-1"));
    assert_eq!(v["status"], "error", "{v}");
    assert_eq!((code, v["retry"].as_bool()), (Some(0), Some(false)), "never retried: {v}");
    assert!(v["error"].as_str().unwrap().contains("needs an API key"), "{v}");
    assert!(v.get("state_updates").is_none_or(Value::is_null), "no run: {v}");
    let runs = std::fs::read_dir(t.path("root/runs")).map(|rd| rd.count()).unwrap_or(0);
    assert_eq!(runs, 0, "no run folder was left");
    // Health checks what a start needs: the key, and the root.
    let (code, v) = handle(&t, "root", &json!({"protocol": 2, "command": "health"}));
    assert_eq!((code, v["status"].as_str()), (Some(78), Some("error")), "{v}");
    let error = v["error"].as_str().unwrap();
    assert!(error.contains("unhealthy") && error.contains("needs an API key"), "{v}");
    let (code, v) = handle(&t, "nowhere", &json!({"protocol": 2, "command": "health"}));
    assert_eq!((code, v["status"].as_str()), (Some(78), Some("error")), "{v}");
    assert!(v["error"].as_str().unwrap().contains("does not exist"), "{v}");
    assert!(!t.exists("nowhere"), "health creates nothing");
    // With the key, healthy.
    let out = t
        .cmd()
        .args(["-w", "root", "handle"])
        .env("OPENAI_API_KEY", "sk-test")
        .write_stdin(json!({"protocol": 2, "command": "health"}).to_string())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((out.status.code(), v["status"].as_str()), (Some(0), Some("ok")), "{v}");
}

#[test]
fn a_job_delivered_again_after_its_answer_was_lost_gets_that_answer_again() {
    let h = crate::handle::H::new();
    let req = json!({"protocol": 2, "job_id": "job-7", "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "fetch http://example.com and critique it"}}});
    let (_, first) = handle(&h.t, "root", &req);
    assert_eq!(crate::handle::types(&first), ["agentic.tool_request.jina-reader"], "{first}");
    let run = first["state_updates"]["last_run_id"].as_str().unwrap().to_string();
    // The router never got it (it was stopped mid-turn) and delivers the job again.
    let (_, again) = handle(&h.t, "root", &req);
    assert_eq!(again, first, "the same answer, events and all");
    // The same for a result: its job answered once, then again word for word.
    let result = json!({"protocol": 2, "job_id": "job-8", "command": "handle", "event": {"type": "agentic.tool_result", "payload": {"run_id": run, "step": 1, "tool": "jina-reader", "status": "ok", "result": {"excerpt": "page"}}}});
    let (_, done) = handle(&h.t, "root", &result);
    assert_eq!(crate::handle::types(&done), ["agent.completed"], "{done}");
    let (_, again) = handle(&h.t, "root", &result);
    assert_eq!(again, done);
    // Another job with the same (stale) result is not a redelivery: ignored, as before.
    let mut other = result.clone();
    other["job_id"] = json!("job-9");
    let (_, v) = handle(&h.t, "root", &other);
    assert!(v["events"].as_array().unwrap().is_empty(), "{v}");
    assert!(v["result"].as_str().unwrap().contains("ignored"), "{v}");
    // One completion in the trace: the replay ran nothing.
    let trace = h.t.read(&format!("root/runs/{run}/trace.jsonl"));
    assert_eq!(trace.matches("\"run.finished\"").count(), 1);
}

#[test]
fn event_mode_runs_count_toward_the_rest_window_and_rest_the_agent() {
    let t = T::new();
    t.write("xdg/agentloop/config.yaml", "rest: {window: 24h, max_tokens: 40000}\n");
    t.write("root/script.yaml", QUICK);
    t.write("root/notes.txt", "n\n");
    t.write("root/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\n");
    let (_, v) = handle(&t, "root", &start("list the notes", "job-1"));
    assert_eq!(crate::handle::types(&v), ["agent.completed"], "{v}");
    // The run's 6,000 tokens are in the agent's ledger, as a `run`'s would be.
    t.write("ws/notes.txt", "n\n");
    let out = t.al(&["--script", "root/script.yaml", "run", "--goal", "g", "--dry-run", "--json"]).output().unwrap();
    let n = &serde_json::from_slice::<Value>(&out.stdout).unwrap()["negotiation"];
    assert_eq!(n["currentFatigue"], 15.0, "6000 of 40000 tokens: {n}");
    // A window nearly full: the run that fills it rests the agent itself (modes.auto), in event
    // mode as in `run`, and says so in its trace.
    t.write("xdg/agentloop/config.yaml", "rest: {window: 24h, max_tokens: 40000, max_fatigue: 20}\n");
    let (_, v) = handle(&t, "root", &start("list the notes again", "job-2"));
    let run = v["state_updates"]["last_run_id"].as_str().unwrap().to_string();
    assert_eq!(crate::handle::types(&v), ["agent.completed"], "{v}");
    let trace = t.read(&format!("root/runs/{run}/trace.jsonl"));
    assert!(trace.contains("\"agent.rested\""), "the agent rested itself: {trace}");
}

#[test]
fn negotiation_refuses_a_run_the_rest_window_has_no_room_for() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("script.yaml", QUICK);
    t.write("ws/agentloop.yaml", "rest: {window: 24h, max_tokens: 800}\n");
    let al = |args: &[&str]| {
        let mut a = vec!["--script", "script.yaml"];
        a.extend_from_slice(args);
        t.al(&a).output().unwrap()
    };
    let out = al(&["run", "--goal", "g", "--dry-run", "--json"]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let n = &serde_json::from_slice::<Value>(&out.stdout).unwrap()["negotiation"];
    assert_eq!(n["canProceed"], false, "{n}");
    assert!(n["estimatedCost"].as_u64().unwrap() > 800, "{n}");
    assert_eq!(n["currentBudget"], 800, "{n}");
    assert!(n["reason"].as_str().unwrap().contains("rest window (rest.max_tokens 800) has 800 left"), "{n}");
    let out = al(&["run", "--goal", "g"]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(stderr(&out).contains("hint: wait until the rest window has room again"), "{}", stderr(&out));
    assert!(!t.exists("ws/state.json"), "nothing was started");
    // --force starts it anyway, as for any negotiation refusal.
    let out = al(&["run", "--goal", "g", "--force"]);
    assert_ne!(out.status.code(), Some(9), "{}", stderr(&out));
}

/// A run of five `sleep 1` steps in `ws`, started in the background.
fn sleeper(t: &T) -> std::process::Child {
    crate::shell_sandbox::bwrap_or_none(t);
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [sleep]}\n");
    let s = crate::doors::sleeping(5);
    t.write("script.yaml", &s);
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("AGENTLOOP_MAX_REPEATS", "0")
        .current_dir(t.root())
        .args(["-w", "ws", "--script", "script.yaml", "run", "--goal", "wait"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child = c.spawn().unwrap();
    let start = Instant::now();
    while !std::fs::read_to_string(t.path("ws/trace.jsonl")).unwrap_or_default().contains("\"act\"") {
        assert!(start.elapsed() < Duration::from_secs(60), "the run never acted");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn says_interrupted(t: &T) {
    let st: Value = serde_json::from_slice(&t.al(&["status", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(st["interrupted"], true, "{st}");
    assert!(st["ways_on"].as_str().unwrap().contains("run --continue` goes on"), "{st}");
    let text = stdout(&t.al(&["status"]).output().unwrap());
    assert!(text.contains("status      interrupted"), "{text}");
    let runs = stdout(&t.al(&["runs"]).output().unwrap());
    assert!(runs.contains("interrupted") && !runs.contains("running"), "{runs}");
}

#[test]
fn a_run_stopped_by_a_signal_or_a_kill_says_interrupted_and_goes_on() {
    for signal in ["-INT", "-KILL"] {
        let t = T::new();
        let mut child = sleeper(&t);
        let killed = std::process::Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
        assert!(killed.success());
        child.wait().unwrap();
        says_interrupted(&t);
        // The way on works: the run goes on from its last commit, one step more, and ends.
        let more = (t.json("ws/state.json")["step"].as_u64().unwrap() + 1).to_string();
        let out = t
            .al(&["--script", "script.yaml", "--max-steps", &more, "run", "--continue"])
            .env("AGENTLOOP_MAX_REPEATS", "0")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(4), "{signal:?}: {}", stderr(&out));
        let st = t.json("ws/state.json");
        assert_eq!((st["status"].as_str(), st["interrupted"].as_bool()), (Some("escalated"), None), "{st}");
    }
}

/// Any door goes on with any run on the same configuration: a run event mode started under a
/// root (its model in the root's agentloop.yaml) escalates, and `agentloop -w ROOT/runs/ID
/// answer` takes the root's configuration — no flag repeats it — and the run ends done.
#[test]
fn the_cli_answers_a_run_another_door_started_with_the_roots_configuration() {
    let t = T::new();
    t.write("root/script.yaml", crate::serve::ASKS);
    t.write("root/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\n");
    let (_, v) = handle(&t, "root", &start("use the figures", "job-1"));
    assert_eq!(crate::handle::types(&v), ["agent.escalated"], "{v}");
    let run = v["state_updates"]["last_run_id"].as_str().unwrap().to_string();
    let folder = format!("root/runs/{run}");
    let out = t.cmd().args(["-w", &folder, "answer", "Use 2024"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let st = t.json(&format!("{folder}/state.json"));
    assert_eq!((st["status"].as_str(), st["outcome"].as_str()), (Some("done"), Some("used the 2024 figures")), "{st}");
    // The configuration shown is the root's.
    let out = t.cmd().args(["-w", &folder, "config", "show", "--json"]).output().unwrap();
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["config"]["llm"]["provider"], "scripted", "{c}");
}
