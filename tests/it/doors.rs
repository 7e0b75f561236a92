//! Every door is the same engine: the same scenarios through `run` (the CLI), `serve` (HTTP),
//! the worker (a real redis-server) and `handle` (event mode, one turn per job), compared by what
//! each wrote — the run's stop in result.json, and for a refused start, the refusal and that no
//! run was left behind. The real Ductile drives `handle` in tests/it/ductile_real.rs; here
//! `handle` is given its requests directly, as Ductile gives them, so every door runs the same
//! script in a folder of its own.
//!
//! What a door cannot do is named where it stands: `handle` has no way to answer a question (the
//! protocol has no answer event), so escalate → answer is the CLI's, the panel's and the API's.

use crate::common::*;
use crate::queue::{worker, Redis};
use crate::serve::{serve, TOKEN};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Door {
    Cli,
    Http,
    Queue,
    Handle,
}

const DOORS: [Door; 4] = [Door::Cli, Door::Http, Door::Queue, Door::Handle];

/// What a door did with a scenario: the run's result.json (None: no run ended) and whether a
/// run was left anywhere, with what the door answered.
#[derive(Debug)]
struct Ended {
    result: Option<Value>,
    runs_left: usize,
    answer: String,
}

impl Ended {
    fn stop(&self) -> Option<&str> {
        self.result.as_ref().and_then(|r| r["stop"].as_str())
    }
}

/// The root every door shares: a scripted model, the shell tool run in-process by every door
/// (event mode's `tools.local` too), sleeping allowed.
const CONFIG: &str = "llm: {provider: scripted, script: script.yaml}\ntools:\n  local: [file_read, file_write, list_dir, grep, skill_read, finish, shell]\n  shell: {enabled: true, allow: [sleep]}\n";

const FRAME: &str =
    "frame:\n  - answer: {goal: g, definition_of_done: [waited, waited again, said done], can_proceed: true}\n";

/// A script of `steps` steps of `sleep 1`, each reflected on as not done yet.
pub(crate) fn sleeping(steps: usize) -> String {
    let mut s = String::from(FRAME);
    s.push_str("plan:\n");
    for _ in 0..steps {
        s.push_str(
            "  - answer: {next_action: {tool: shell, args: {argv: [sleep, '1']}}, expected_outcome: x, rationale: y}\n",
        );
    }
    s.push_str("reflect:\n");
    for i in 0..steps {
        s.push_str(&format!("  - answer: {{decision: continue, reason: wait {i}}}\n"));
    }
    s
}

/// The CLI's flag for a budget.
fn flag(key: &str) -> &'static str {
    match key {
        "timeout" => "--timeout",
        "max_steps" => "--max-steps",
        "max_tokens" => "--max-tokens",
        other => panic!("no flag for {other}"),
    }
}

fn budget_text(v: &Value) -> String {
    v.as_str().map(String::from).unwrap_or_else(|| v.to_string())
}

/// Counts the run folders under `root/runs` that hold a run.
fn runs_under(t: &T) -> usize {
    std::fs::read_dir(t.path("root/runs"))
        .map(|rd| rd.flatten().filter(|e| e.path().join("state.json").exists()).count())
        .unwrap_or(0)
}

fn wait_for(what: &str, log: &dyn Fn() -> String, ok: &mut dyn FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < Duration::from_secs(120), "{what} did not happen:\n{}", log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a scenario asks every door for.
struct Ask<'a> {
    goal: &'a str,
    budgets: Value,
    output_schema: Option<Value>,
    /// Appended to the root's (and the CLI workspace's) configuration.
    config: &'a str,
}

impl Ask<'_> {
    fn with(budgets: Value) -> Ask<'static> {
        Ask { goal: "wait a while", budgets, output_schema: None, config: "" }
    }
}

/// Runs `script` for `ask` through `door`, in a folder of its own.
fn through(door: Door, script: &str, ask: &Ask) -> Ended {
    let t = T::new();
    crate::shell_sandbox::bwrap_or_none(&t);
    for at in ["script.yaml", "root/script.yaml", "ws/script.yaml"] {
        t.write(at, script);
    }
    let config = format!("{CONFIG}{}", ask.config);
    let budgets = ask.budgets.as_object().cloned().unwrap_or_default();
    match door {
        Door::Cli => {
            t.write("ws/agentloop.yaml", &config);
            let mut args: Vec<String> = Vec::new();
            for (k, v) in &budgets {
                args.extend([flag(k).to_string(), budget_text(v)]);
            }
            args.extend(["run", "--goal", ask.goal].map(String::from));
            if let Some(schema) = &ask.output_schema {
                t.write("schema.json", &schema.to_string());
                args.extend(["--output-schema", "schema.json"].map(String::from));
            }
            let out = t.cmd().arg("-w").arg("ws").args(&args).env("AGENTLOOP_MAX_REPEATS", "0").output().unwrap();
            let result = t.exists("ws/result.json").then(|| t.json("ws/result.json"));
            Ended {
                result,
                runs_left: usize::from(t.exists("ws/state.json")),
                answer: format!("exit {:?}: {}", out.status.code(), stderr(&out)),
            }
        }
        Door::Http => {
            t.write("root/agentloop.yaml", &config);
            let s = serve(&t, &[], &[], Some(TOKEN));
            let mut body = json!({"goal": ask.goal, "budgets": budgets});
            if let Some(schema) = &ask.output_schema {
                body["output_schema"] = schema.clone();
            }
            let r = s.post("/runs", &body);
            if r.status != 202 {
                return Ended { result: None, runs_left: runs_under(&t), answer: format!("{} {}", r.status, r.body) };
            }
            let id = r.json()["run_id"].as_str().unwrap().to_string();
            s.finished(&id);
            let path = format!("root/runs/{id}/result.json");
            Ended { result: Some(t.json(&path)), runs_left: runs_under(&t), answer: format!("{} {}", r.status, r.body) }
        }
        Door::Queue => {
            let Some(redis) = Redis::start(&t.path("redis")) else {
                return Ended { result: None, runs_left: 0, answer: "skipped: no redis-server".into() };
            };
            t.write("root/agentloop.yaml", &config);
            let w = worker(&t, &redis, "w1", &["--max-deliveries", "2", "--claim-idle", "1s"]);
            // A client writes the request as `enqueue` would (QUEUE.md: the request's JSON).
            let mut request = json!({"goal": ask.goal, "key": "parity-run", "budgets": budgets});
            if let Some(schema) = &ask.output_schema {
                request["output_schema"] = schema.clone();
            }
            let _: String = redis::cmd("XADD")
                .arg("agentloop:runs")
                .arg("*")
                .arg("request")
                .arg(request.to_string())
                .query(&mut redis.con())
                .unwrap();
            let path = "root/runs/parity-run/result.json";
            let log = || w.log();
            wait_for("an outcome or a dead letter", &log, &mut || {
                t.exists(path) || !redis.entries("agentloop:dead").is_empty()
            });
            let dead = redis.entries("agentloop:dead");
            let answer = dead.first().map(|(_, f)| format!("dead-lettered: {f:?}")).unwrap_or_default();
            Ended { result: t.exists(path).then(|| t.json(path)), runs_left: runs_under(&t), answer }
        }
        Door::Handle => {
            t.write("root/agentloop.yaml", &config);
            let mut payload = json!({"goal": ask.goal, "context": budgets});
            if let Some(schema) = &ask.output_schema {
                payload["output_schema"] = schema.clone();
            }
            let req = json!({"protocol": 2, "job_id": "job-1", "command": "handle", "event": {"type": "agentic.start", "payload": payload}});
            let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
            let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            let id = v["state_updates"]["last_run_id"].as_str().map(String::from);
            let result = id.map(|id| format!("root/runs/{id}/result.json")).filter(|p| t.exists(p)).map(|p| t.json(&p));
            Ended { result, runs_left: runs_under(&t), answer: format!("exit {:?}: {v}", out.status.code()) }
        }
    }
}

/// Whether the door was skipped for a missing component (said on stderr; a failure under CI).
fn skipped(e: &Ended) -> bool {
    e.answer.starts_with("skipped")
}

#[test]
fn the_wall_clock_limit_holds_through_every_door() {
    let script = sleeping(5);
    for door in DOORS {
        let began = Instant::now();
        let e = through(door, &script, &Ask::with(json!({"timeout": "1s"})));
        if skipped(&e) {
            continue;
        }
        assert_eq!(e.stop(), Some("timeout"), "{door:?}: {e:?}");
        let r = e.result.as_ref().unwrap();
        assert!(r["reason"].as_str().unwrap().contains("wall-clock limit of 1s"), "{door:?}: {r}");
        assert!(r["steps_taken"].as_u64().unwrap() < 4, "{door:?} stopped on time: {r}");
        assert!(began.elapsed() < Duration::from_secs(60), "{door:?} took {:?}", began.elapsed());
    }
}

#[test]
fn the_step_limit_holds_through_every_door() {
    let script = sleeping(3).replace("argv: [sleep, '1']", "argv: [sleep, '0']");
    let mut stops = Vec::new();
    for door in DOORS {
        let e = through(door, &script, &Ask::with(json!({"max_steps": 1})));
        if skipped(&e) {
            continue;
        }
        let r = e.result.as_ref().unwrap_or_else(|| panic!("{door:?}: {e:?}"));
        assert_eq!((r["stop"].as_str(), r["steps_taken"].as_u64()), (Some("max_steps"), Some(1)), "{door:?}: {r}");
        stops.push((r["status"].clone(), r["stop"].clone(), r["steps_taken"].clone()));
    }
    stops.dedup();
    assert_eq!(stops.len(), 1, "every door ended the run alike: {stops:?}");
}

#[test]
fn a_start_that_cannot_fit_its_budget_is_refused_by_every_door_and_leaves_no_run() {
    let script = sleeping(1);
    for door in DOORS {
        let e = through(door, &script, &Ask::with(json!({"max_tokens": 50})));
        if skipped(&e) {
            continue;
        }
        assert!(e.result.is_none() && e.runs_left == 0, "{door:?} left a run: {e:?}");
        assert!(e.answer.contains("refused before it started"), "{door:?}: {}", e.answer);
        let how = match door {
            Door::Cli => "exit Some(9)",
            Door::Http => "422",
            Door::Queue => "dead-lettered",
            Door::Handle => "\"status\":\"error\"",
        };
        assert!(e.answer.contains(how), "{door:?} answers {how}: {}", e.answer);
    }
}

/// A start refused before anything is written, the same way by every door: what each answers
/// (CLI exit code, HTTP status, dead letter, handle error) and that no run is left.
fn refused_everywhere(script: &str, ask: &Ask, said: &str, how: [&str; 4]) {
    for (door, how) in DOORS.into_iter().zip(how) {
        let e = through(door, script, ask);
        if skipped(&e) {
            continue;
        }
        assert!(e.result.is_none() && e.runs_left == 0, "{door:?} left a run: {e:?}");
        assert!(e.answer.contains(said), "{door:?} says {said}: {}", e.answer);
        assert!(e.answer.contains(how), "{door:?} answers {how}: {}", e.answer);
    }
}

#[test]
fn a_task_against_the_agents_values_is_declined_by_every_door() {
    let ask = Ask {
        goal: "Find Ann's home address",
        budgets: json!({}),
        output_schema: None,
        config: "values: [{name: privacy, refuse_if: [home address]}]\n",
    };
    let how = ["exit Some(9)", "422", "dead-lettered", "\"status\":\"error\""];
    refused_everywhere(&sleeping(1), &ask, "task declined before it started", how);
}

#[test]
fn a_resting_agent_is_refused_by_every_door() {
    // No run may start in the window: the agent rests (stress or a full window alike).
    let ask = Ask { goal: "wait a while", budgets: json!({}), output_schema: None, config: "rest: {max_runs: 0}\n" };
    let how = ["exit Some(10)", "429", "dead-lettered", "\"status\":\"error\""];
    refused_everywhere(&sleeping(1), &ask, "is resting", how);
}

#[test]
fn the_output_schema_shapes_the_output_through_every_door() {
    let schema = json!({"type": "object", "properties": {"verdict": {"type": "string"}, "score": {"type": "integer"}}, "required": ["verdict", "score"], "additionalProperties": false});
    let script = format!(
        "{FRAME}plan:\n  - answer: {{next_action: {{tool: list_dir, args: {{}}}}, rationale: look}}\n  - answer: {{next_action: {{tool: finish, args: {{summary: rated, output: {{verdict: fine, score: 7}}}}}}, rationale: done}}\nreflect:\n  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], decision: continue, reason: looked}}\n  - answer: {{decision: done, reason: ok, outcome: rated}}\n"
    );
    let ask = Ask { goal: "rate it", budgets: json!({}), output_schema: Some(schema), config: "" };
    for door in DOORS {
        let e = through(door, &script, &ask);
        if skipped(&e) {
            continue;
        }
        let r = e.result.as_ref().unwrap_or_else(|| panic!("{door:?}: {e:?}"));
        assert_eq!(
            (r["stop"].as_str(), &r["output"]),
            (Some("done"), &json!({"verdict": "fine", "score": 7})),
            "{door:?}: {r}"
        );
    }
}
