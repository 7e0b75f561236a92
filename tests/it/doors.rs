//! Every door is the same engine: the same scenarios through `run` (the CLI), `serve` (HTTP),
//! the worker (a real redis-server) and `handle` (event mode, one turn per job), compared by what
//! each wrote — the run's stop in result.json, and for a refused start, the refusal and that no
//! run was left behind. The real Ductile drives `handle` in tests/it/ductile_real.rs; here
//! `handle` is given its requests directly, as Ductile gives them, so every door runs the same
//! script in a folder of its own.
//!
//! What a door cannot do is named where it stands: `handle` has no way to answer a question (the
//! protocol has no answer event), so escalate → answer is the CLI's, the panel's and the API's,
//! and the queue's (`enqueue --answer`, tests/it/queue/answer.rs).

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
    /// The run's trace entries (none without a run).
    trace: Vec<Value>,
}

/// The entries of the trace of the run folder `dir`.
fn trace_in(t: &T, dir: &str) -> Vec<Value> {
    let trace = std::fs::read_to_string(t.path(&format!("{dir}/trace.jsonl"))).unwrap_or_default();
    trace.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect()
}

impl Ended {
    fn stop(&self) -> Option<&str> {
        self.result.as_ref().and_then(|r| r["stop"].as_str())
    }

    /// The data of the run's `run.started` entry (null without a run).
    fn started(&self) -> Value {
        self.trace.iter().find(|e| e["event"] == "run.started").map(|e| e["data"].clone()).unwrap_or(Value::Null)
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

/// A folder of its own for a scenario: `script` where every door looks for it; the
/// configuration every door shares with `ask`'s (an `llm: {...}` line of it joins the scripted
/// provider's mapping); `ask`'s budgets.
fn scene(script: &str, ask: &Ask) -> (T, String, serde_json::Map<String, Value>) {
    let t = T::new();
    crate::shell_sandbox::bwrap_or_none(&t);
    for at in ["script.yaml", "root/script.yaml", "ws/script.yaml"] {
        t.write(at, script);
    }
    let config = match ask.config.split_once("llm: {").and_then(|(a, rest)| Some((a, rest.split_once("}\n")?))) {
        Some((before, (llm, after))) => {
            format!("{}{before}{after}", CONFIG.replacen("script.yaml}", &format!("script.yaml, {llm}}}"), 1))
        }
        None => format!("{CONFIG}{}", ask.config),
    };
    (t, config, ask.budgets.as_object().cloned().unwrap_or_default())
}

/// The CLI's global flags for `budgets`.
fn budget_flags(budgets: &serde_json::Map<String, Value>) -> Vec<String> {
    budgets.iter().flat_map(|(k, v)| [flag(k).to_string(), budget_text(v)]).collect()
}

/// Runs `script` for `ask` through `door`, in a folder of its own.
fn through(door: Door, script: &str, ask: &Ask) -> Ended {
    through_with(door, script, ask, &[])
}

/// [`through`], with `files` (path → text) written in the CLI's workspace and the root alike.
fn through_with(door: Door, script: &str, ask: &Ask, files: &[(&str, &str)]) -> Ended {
    let (t, config, budgets) = scene(script, ask);
    for (path, text) in files {
        t.write(&format!("ws/{path}"), text);
        t.write(&format!("root/{path}"), text);
    }
    match door {
        Door::Cli => {
            t.write("ws/agentloop.yaml", &config);
            let mut args = budget_flags(&budgets);
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
                trace: trace_in(&t, "ws"),
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
                return Ended {
                    result: None,
                    runs_left: runs_under(&t),
                    answer: format!("{} {}", r.status, r.body),
                    trace: Vec::new(),
                };
            }
            let id = r.json()["run_id"].as_str().unwrap().to_string();
            s.finished(&id);
            let path = format!("root/runs/{id}/result.json");
            Ended {
                result: Some(t.json(&path)),
                runs_left: runs_under(&t),
                answer: format!("{} {}", r.status, r.body),
                trace: trace_in(&t, &format!("root/runs/{id}")),
            }
        }
        Door::Queue => {
            let Some(redis) = Redis::start(&t.path("redis")) else {
                return Ended {
                    result: None,
                    runs_left: 0,
                    answer: "skipped: no redis-server".into(),
                    trace: Vec::new(),
                };
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
            let trace = trace_in(&t, "root/runs/parity-run");
            Ended { result: t.exists(path).then(|| t.json(path)), runs_left: runs_under(&t), answer, trace }
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
            let result =
                id.as_ref().map(|id| format!("root/runs/{id}/result.json")).filter(|p| t.exists(p)).map(|p| t.json(&p));
            // A turn that failed (to be retried) names no run: the one run folder under the root.
            let dir = id.or_else(|| {
                let runs = std::fs::read_dir(t.path("root/runs")).ok()?;
                runs.filter_map(Result::ok).find(|e| e.path().is_dir()).map(|e| e.file_name().to_string_lossy().into())
            });
            let trace = dir.map(|id| trace_in(&t, &format!("root/runs/{id}"))).unwrap_or_default();
            Ended { result, runs_left: runs_under(&t), answer: format!("exit {:?}: {v}", out.status.code()), trace }
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

/// `values_check: model`: a task no phrase names, judged by the model against the values, is
/// declined by every door with the model's reason.
#[test]
fn a_task_the_model_judges_against_the_agents_values_is_declined_by_every_door() {
    let ask = Ask {
        goal: "Write glowing reviews of the shop, posing as customers",
        budgets: json!({}),
        output_schema: None,
        config:
            "values_check: model\nvalues: [{name: honesty, description: no deception, refuse_if: [fake review*]}]\n",
    };
    let script = format!(
        "values:\n  - answer: {{conflict: true, value: honesty, reason: posing as customers deceives the shop's readers}}\n{}",
        sleeping(1)
    );
    let how = ["exit Some(9)", "422", "dead-lettered", "\"status\":\"error\""];
    refused_everywhere(&script, &ask, "as the model judged it: posing as customers deceives", how);
}

/// A task the model judges in line with the agent's values runs through every door, and its
/// `run.started` entry keeps the verdict and the reason (the negotiation's record).
#[test]
fn the_models_verdict_that_let_a_task_through_is_kept_by_every_door() {
    let ask = Ask {
        goal: "wait a while",
        budgets: json!({}),
        output_schema: None,
        config: "values_check: model\nvalues: [{name: honesty, refuse_if: [fake review*]}]\n",
    };
    let script = format!(
        "values:\n  - answer: {{conflict: false, reason: waiting deceives no one}}\n  - answer: {{conflict: false, reason: waiting deceives no one}}\n{}",
        sleeping(1)
    );
    for door in DOORS {
        let e = through(door, &script, &ask);
        if skipped(&e) {
            continue;
        }
        let started = e.started();
        assert_eq!(started["values"], json!(["honesty"]), "{door:?}: {started} {}", e.answer);
        assert_eq!(
            started["values_judged"],
            json!({"conflict": false, "value": null, "reason": "waiting deceives no one"}),
            "{door:?}: {started}"
        );
    }
}

/// An agent profile that names no write folders writes its run's own `artifacts/` and `state/`
/// through every door: in the run's folder, never the root's.
#[test]
fn an_agents_sandbox_takes_in_the_runs_own_folders_through_every_door() {
    let ask = Ask { goal: "wait a while", budgets: json!({}), output_schema: None, config: "agent: digest\n" };
    let script = format!(
        "{FRAME}plan:\n  - answer: {{next_action: {{tool: file_write, args: {{path: artifacts/out.md, content: hi}}}}, rationale: write}}\n  - answer: {{next_action: {{tool: file_write, args: {{path: state/job.json, content: '{{}}'}}}}, rationale: keep}}\nreflect:\n  - answer: {{decision: continue, reason: next}}\n  - answer: {{decision: continue, reason: next}}\n"
    );
    for door in DOORS {
        let e = through_with(door, &script, &ask, &[("agents/digest.yaml", "description: the digest\n")]);
        if skipped(&e) {
            continue;
        }
        let writes: Vec<(&str, &str)> = e
            .trace
            .iter()
            .filter(|x| x["event"] == "act")
            .map(|x| (x["args"]["path"].as_str().unwrap_or(""), x["result_status"].as_str().unwrap_or("")))
            .collect();
        assert_eq!(writes, [("artifacts/out.md", "ok"), ("state/job.json", "ok")], "{door:?}: {}", e.answer);
    }
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

/// `frame: goal` and `prompts: lean` hold through every door: no Frame call (the goal is the one
/// item), the lean schemas (a tick citing the step that wrote the file the goal names), done.
#[test]
fn lean_prompts_and_the_goal_as_frame_hold_through_every_door() {
    let script = "plan:\n  - answer: {next_action: {tool: file_write, args: {path: hello.txt, content: hello}}}\n\
                  reflect:\n  - answer: {satisfied: [{item: 1, steps: [1]}], decision: done, outcome: wrote hello.txt}\n";
    let ask = Ask {
        goal: "Write hello.txt holding hello",
        budgets: json!({}),
        output_schema: None,
        config: "frame: goal\nprompts: lean\n",
    };
    for door in DOORS {
        let e = through(door, script, &ask);
        if skipped(&e) {
            continue;
        }
        let r = e.result.as_ref().unwrap_or_else(|| panic!("{door:?}: {e:?}"));
        assert_eq!(r["stop"].as_str(), Some("done"), "{door:?}: {r}");
        let frame = e.trace.iter().find(|x| x["event"] == "frame").unwrap_or_else(|| panic!("{door:?}: {e:?}"));
        assert_eq!((&frame["data"]["from"], frame.get("usage")), (&json!("goal"), None), "{door:?}: {frame}");
    }
}

/// A lean run that lists the workspace again and again is seen repeating itself the same way
/// through every door: a listing is compared without agentloop's own files, whose sizes change
/// at every step, and a reflection that leaves its ticks out is taken as ticking none.
#[test]
fn listing_again_and_again_is_a_repeat_through_every_door() {
    let plan = "  - answer: {next_action: {tool: list_dir, args: {path: .}}}\n";
    let reflect = "  - answer: {decision: continue, reason: look again}\n";
    let script = format!("plan:\n{}reflect:\n{}", plan.repeat(3), reflect.repeat(3));
    let ask = Ask {
        goal: "Write hello.txt holding hello",
        budgets: json!({"max_steps": 3}),
        output_schema: None,
        config: "frame: goal\nprompts: lean\n",
    };
    for door in DOORS {
        let e = through(door, &script, &ask);
        if skipped(&e) {
            continue;
        }
        let repeats = e.trace.iter().filter(|x| x["reason"] == "the same action (list_dir) again with the same result");
        assert_eq!(repeats.count(), 2, "{door:?}: {:?}", e.trace);
        let r = e.result.as_ref().unwrap_or_else(|| panic!("{door:?}: {e:?}"));
        assert_eq!((r["stop"].as_str(), r["steps_taken"].as_u64()), (Some("max_steps"), Some(3)), "{door:?}: {r}");
    }
}

/// Where each tool's parameters are given (`llm.tool_schemas`) holds through every door: by
/// default arguments a tool does not take are a failed step naming them, which the next plan
/// mends; with `answer` the same answer is refused before Act and corrected in one retry.
#[test]
fn arguments_a_tool_does_not_take_are_held_the_same_through_every_door() {
    let script = "plan:\n  - answer: {next_action: {tool: file_write, args: {name: hello.txt, content: hello}}}\n\
                  \x20 - answer: {next_action: {tool: file_write, args: {path: hello.txt, content: hello}}}\n\
                  reflect:\n  - answer: {decision: continue, reason: file_write takes path}\n\
                  \x20 - answer: {satisfied: [{item: 1, steps: [2]}], decision: done, outcome: wrote hello.txt}\n";
    for (config, failed_steps, retried) in
        [("frame: goal\n", 1, false), ("frame: goal\nllm: {tool_schemas: answer}\n", 0, true)]
    {
        let ask = Ask { goal: "Write hello.txt holding hello", budgets: json!({}), output_schema: None, config };
        for door in DOORS {
            let e = through(door, script, &ask);
            if skipped(&e) {
                continue;
            }
            let acts: Vec<&Value> = e.trace.iter().filter(|x| x["phase"] == "act").collect();
            let failed: Vec<&&Value> = acts.iter().filter(|a| a["result_status"] == "error").collect();
            assert_eq!(failed.len(), failed_steps, "{door:?} {config}: {acts:?}");
            if let Some(f) = failed.first() {
                assert!(f["error"].as_str().unwrap().contains("\"path\" is a required property"), "{door:?}: {f}");
            }
            let first_plan = e.trace.iter().find(|x| x["phase"] == "plan").unwrap_or_else(|| panic!("{door:?}: {e:?}"));
            assert_eq!(first_plan["attempt"] == 2, retried, "{door:?} {config}: {first_plan}");
            if !retried {
                let r = e.result.as_ref().unwrap_or_else(|| panic!("{door:?}: {e:?}"));
                assert_eq!(r["stop"].as_str(), Some("done"), "{door:?}: {r}");
            }
        }
    }
}

/// How a stopped run is gone on with.
enum Then<'a> {
    Answer(&'a str),
    /// A continue raising `max_steps` to this.
    Continue(u32),
}

/// Starts `script` for `ask` through `door`, then goes on with the stopped run as `then` says,
/// through the same door: how it first stopped and its result.json at the end.
fn go_on_through(door: Door, script: &str, ask: &Ask, then: Then) -> (String, Value) {
    let (t, config, budgets) = scene(script, ask);
    match door {
        Door::Cli => {
            t.write("ws/agentloop.yaml", &config);
            let mut args = budget_flags(&budgets);
            args.extend(["run", "--goal", ask.goal].map(String::from));
            t.cmd().arg("-w").arg("ws").args(&args).output().unwrap();
            let first = t.json("ws/result.json")["stop"].as_str().unwrap().to_string();
            let out = match then {
                Then::Answer(text) => t.al(&["answer", text]).output().unwrap(),
                Then::Continue(n) => t.al(&["--max-steps", &n.to_string(), "run", "--continue"]).output().unwrap(),
            };
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            (first, t.json("ws/result.json"))
        }
        Door::Http => {
            t.write("root/agentloop.yaml", &config);
            let s = serve(&t, &[], &[], Some(TOKEN));
            let r = s.post("/runs", &json!({"goal": ask.goal, "budgets": budgets}));
            assert_eq!(r.status, 202, "{}", r.body);
            let id = r.json()["run_id"].as_str().unwrap().to_string();
            let first = s.finished(&id)["stop"].as_str().unwrap().to_string();
            let r = match then {
                Then::Answer(text) => s.post(&format!("/runs/{id}/answer"), &json!({"answer": text})),
                Then::Continue(n) => s.post(&format!("/runs/{id}/continue"), &json!({"budgets": {"max_steps": n}})),
            };
            assert_eq!(r.status, 202, "{}", r.body);
            s.wait_for(&id, "ended again", |v| v["status"] != "running" && v["queue"].is_null() && v["stop"] == "done");
            (first, t.json(&format!("root/runs/{id}/result.json")))
        }
        Door::Queue => {
            let Some(redis) = Redis::start(&t.path("redis")) else { return ("skipped".into(), Value::Null) };
            t.write("root/agentloop.yaml", &config);
            let w = worker(&t, &redis, "w1", &[]);
            let mut args: Vec<String> = vec!["--json".into(), "--wait=120".into()];
            args.extend(budget_flags(&budgets));
            args.extend(
                ["enqueue", "--redis", &redis.url(), "--goal", ask.goal, "--key", "parity-run"].map(String::from),
            );
            let out = t.cmd().args(&args).output().unwrap();
            let first: Value =
                serde_json::from_str(&stdout(&out)).unwrap_or_else(|_| panic!("{}\n{}", stderr(&out), w.log()));
            let first = first["payload"]["stop"].as_str().unwrap().to_string();
            let out = match then {
                Then::Answer(text) => t
                    .cmd()
                    .args([
                        "--json",
                        "--wait=120",
                        "enqueue",
                        "--redis",
                        &redis.url(),
                        "--answer",
                        text,
                        "--run",
                        "parity-run",
                    ])
                    .output()
                    .unwrap(),
                Then::Continue(n) => t
                    .cmd()
                    .args(["--json", "--wait=120", "--max-steps", &n.to_string(), "enqueue", "--redis", &redis.url()])
                    .args(["--continue", "parity-run"])
                    .output()
                    .unwrap(),
            };
            assert_eq!(out.status.code(), Some(0), "{}\n{}", stderr(&out), w.log());
            (first, t.json("root/runs/parity-run/result.json"))
        }
        Door::Handle => unreachable!("event mode has no answer or continue event (the module's docs)"),
    }
}

const ASKS: &str = "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: false, open_question: \"Which year's figures?\"}\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\nplan:\n  - answer: {next_action: {tool: list_dir, args: {}}, expected_outcome: x, rationale: y}\nreflect:\n  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: answered, outcome: used the 2024 figures}\n";

#[test]
fn an_escalated_run_is_answered_and_ends_done_through_every_door_that_can_answer() {
    for door in [Door::Cli, Door::Http, Door::Queue] {
        let (first, r) = go_on_through(door, ASKS, &Ask::with(json!({})), Then::Answer("Use 2024"));
        if first == "skipped" {
            continue;
        }
        assert_eq!(first, "escalated", "{door:?}");
        assert_eq!(
            (r["stop"].as_str(), r["outcome"].as_str()),
            (Some("done"), Some("used the 2024 figures")),
            "{door:?}: {r}"
        );
    }
}

#[test]
fn a_run_stopped_by_its_step_limit_goes_on_with_a_raised_one_through_every_door_that_can() {
    let script = format!(
        "{FRAME}plan:\n  - answer: {{next_action: {{tool: list_dir, args: {{}}}}, expected_outcome: x, rationale: y}}\n  - answer: {{next_action: {{tool: list_dir, args: {{}}}}, expected_outcome: x, rationale: again}}\nreflect:\n  - answer: {{satisfied: [{{item: 1, steps: [1]}}], decision: continue, reason: more}}\n  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [2]}}, {{item: 3, steps: [2]}}], decision: done, reason: ok, outcome: listed}}\n"
    );
    for door in [Door::Cli, Door::Http, Door::Queue] {
        let (first, r) = go_on_through(door, &script, &Ask::with(json!({"max_steps": 1})), Then::Continue(3));
        if first == "skipped" {
            continue;
        }
        assert_eq!(first, "max_steps", "{door:?}");
        assert_eq!((r["stop"].as_str(), r["steps_taken"].as_u64()), (Some("done"), Some(2)), "{door:?}: {r}");
    }
}

/// Day 1 of a daily job: it keeps its own state and learns a fact.
const DAY_ONE: &str = "frame:\n  - answer: {goal: g, definition_of_done: [state kept, fact noted, said], can_proceed: true}\nplan:\n  - answer: {next_action: {tool: file_write, args: {path: state/seen.json, content: '[\"alpha\"]'}}, expected_outcome: x, rationale: y}\nreflect:\n  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], facts: [\"the feed of day 1 held alpha\"], decision: done, reason: ok, outcome: one new item}\n";

/// Day 2: it reads the state day 1 kept (a read that fails is no evidence: the run is done only
/// when the state came along).
const DAY_TWO: &str = "frame:\n  - answer: {goal: g, definition_of_done: [state read, nothing new, said], can_proceed: true}\nplan:\n  - answer: {next_action: {tool: file_read, args: {path: state/seen.json}}, expected_outcome: x, rationale: y}\nreflect:\n  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: nothing new}\n";

/// A job run once a slot is a series through every door that runs slots: the next slot's run
/// carries the facts and the job's own `state/` from the last one (the CLI's cron follow-up, the
/// queue's `enqueue --slot`). `serve` and event mode start runs of their own, not slots: a
/// served run carries a session's conversation instead (tests/it/serve_doors.rs).
#[test]
fn a_daily_job_carries_its_facts_and_state_to_the_next_slot_through_every_door_that_runs_slots() {
    let goal = "Today's digest";
    // The CLI, as cron runs it.
    let t = T::new();
    t.write("ws/agentloop.yaml", "");
    let day = |script: &str, slot: &str| {
        t.write("script.yaml", script);
        t.al(&["--script", "script.yaml", "run", "--goal", goal, "--slot", slot]).output().unwrap()
    };
    let out = day(DAY_ONE, "d1");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = day(DAY_TWO, "d2");
    assert_eq!(out.status.code(), Some(0), "cli: {}", stderr(&out));
    assert!(t.read("ws/context.md").contains("the feed of day 1 held alpha"), "cli: {}", t.read("ws/context.md"));
    // The queue, with a real redis-server.
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    t.write("root/agentloop.yaml", "");
    t.write("script.yaml", DAY_ONE);
    let w = worker(&t, &redis, "w1", &[]);
    let slot = |slot: &str| {
        let out = t
            .cmd()
            .args(["--json", "--wait=120", "enqueue", "--redis", &redis.url(), "--goal", goal, "--slot", slot])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}\n{}", stderr(&out), w.log());
        serde_json::from_str::<Value>(&stdout(&out)).unwrap()["payload"]["run_id"].as_str().unwrap().to_string()
    };
    slot("d1");
    t.write("script.yaml", DAY_TWO);
    let second = slot("d2");
    let context = t.read(&format!("root/runs/{second}/context.md"));
    assert!(context.contains("the feed of day 1 held alpha"), "queue: {context}");
    assert_eq!(t.json(&format!("root/runs/{second}/result.json"))["stop"], "done");
}
