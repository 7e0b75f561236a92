//! The queue door goes on with any run under the root, as `agentloop answer` and `run --continue`
//! do: `enqueue --answer TEXT --run ID` and `enqueue --continue ID`, through the binary with a
//! real `redis-server` and worker processes. A queued run that escalates is answered and ends
//! done; one stopped by its step limit is continued with a raised limit (held to the root's);
//! a run the CLI made under the root's `runs/` is answered through the queue, and continued with
//! the limits it ran with unless a continue raises one; an answer applies
//! once though its message is delivered again after the worker died mid-commit; a request that
//! cannot apply is dead-lettered naming why, and one for a run another process holds waits.

use super::{worker, worker_with, Redis, Worker, DEADLINE};
use crate::common::*;
use crate::serve::{ASKS, TWO_STEPS};
use serde_json::Value;
use std::time::{Duration, Instant};

/// `agentloop [GLOBAL...] enqueue ARGS` against `redis`: (exit code, stdout as JSON).
fn enqueue(t: &T, redis: &Redis, global: &[&str], args: &[&str], w: &Worker) -> (Option<i32>, Value) {
    let out =
        t.cmd().arg("--json").args(global).args(["enqueue", "--redis", &redis.url()]).args(args).output().unwrap();
    let v = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|_| panic!("{args:?}: {}\nworker:\n{}", stderr(&out), w.log()));
    (out.status.code(), v)
}

fn until(what: &str, w: &Worker, ok: &mut dyn FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < DEADLINE, "{what} did not happen:\n{}", w.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The reasons of the dead letters so far.
fn dead(redis: &Redis) -> Vec<String> {
    redis.entries("agentloop:dead").into_iter().map(|(_, f)| f["reason"].clone()).collect()
}

/// The trace entries of run `id` with event `event`.
fn entries(t: &T, id: &str, event: &str) -> Vec<Value> {
    t.read(&format!("root/runs/{id}/trace.jsonl"))
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == event)
        .collect()
}

fn setup(t: &T, script: &str) {
    t.write("script.yaml", script);
    t.write("root/agentloop.yaml", "max_steps: 6\n");
}

#[test]
fn a_queued_run_that_escalates_is_answered_through_the_queue_and_ends_done() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    setup(&t, ASKS);
    let w = worker(&t, &redis, "w1", &["--claim-idle", "2s"]);
    let (code, v) = enqueue(&t, &redis, &["--wait=120"], &["--goal", "Report the figures", "--key", "figs"], &w);
    assert_eq!((code, v["type"].as_str()), (Some(3), Some("agent.escalated")), "{v}");
    assert_eq!(v["payload"]["open_question"], "Which year's figures?", "{v}");
    // The answer, waited for: its own outcome, with the run's id and the answer's key.
    let (code, v) =
        enqueue(&t, &redis, &["--wait=120"], &["--answer", "Use the 2024 figures", "--run", "figs", "--key", "a1"], &w);
    assert_eq!((code, v["type"].as_str()), (Some(0), Some("agent.completed")), "{v}\n{}", w.log());
    assert_eq!(v["payload"]["run_id"], "figs");
    assert_eq!(v["payload"]["outcome"], "used the 2024 figures");
    assert_eq!(v["payload"]["key"], "a1");
    crate::schemas::check("completion-event.json", &v);
    let answered = entries(&t, "figs", "run.answered");
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0]["data"]["answer"], "Use the 2024 figures");
    assert_eq!(answered[0]["data"]["key"], "a1", "the key that makes it apply once");
    assert!(t.read("root/runs/figs/memory.md").contains("Use the 2024 figures"));
    let results = redis.entries("agentloop:results");
    let kinds: Vec<(&str, &str)> = results.iter().map(|(_, f)| (f["run_id"].as_str(), f["type"].as_str())).collect();
    assert_eq!(kinds, [("figs", "agent.escalated"), ("figs", "agent.completed")]);
    assert!(w.log().contains("run figs answered for message"), "{}", w.log());
    // The same answer again (its key) publishes nothing new and applies nothing.
    let (code, v) =
        enqueue(&t, &redis, &["--wait=120"], &["--answer", "Use the 2024 figures", "--run", "figs", "--key", "a1"], &w);
    assert_eq!((code, v["payload"]["status"].as_str()), (Some(0), Some("done")), "{v}");
    assert_eq!(entries(&t, "figs", "run.answered").len(), 1);
    assert_eq!(redis.entries("agentloop:results").len(), 2);
    // Requests that cannot apply are dead-lettered, naming why: a done run has no question,
    // nothing to continue, and a run that is not there is not there.
    for args in [&["--answer", "another", "--run", "figs"][..], &["--continue", "figs"], &["--continue", "nope"]] {
        let (code, _) = enqueue(&t, &redis, &[], args, &w);
        assert_eq!(code, Some(0), "{args:?}");
    }
    // Waited for, a request that cannot apply says why at once.
    let out = t
        .cmd()
        .args(["--wait=120", "enqueue", "--redis", &redis.url(), "--answer", "a third", "--run", "figs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the answer of run figs was dead-lettered: run figs ended done and has no question"),
        "{}",
        stderr(&out)
    );
    until("four dead letters", &w, &mut || dead(&redis).len() >= 4);
    let reasons = dead(&redis);
    assert_eq!(reasons[0], "run figs ended done and has no question to answer", "{reasons:?}");
    assert!(reasons[1].starts_with("run figs is done"), "{reasons:?}");
    assert!(reasons[2].contains("no run `nope` under"), "{reasons:?}");
    assert_eq!(entries(&t, "figs", "run.answered").len(), 1, "nothing was applied");
    assert_eq!(redis.pending(), 0);
    // `status --redis` names what a dead-lettered go-on asked for.
    let out = t.cmd().args(["status", "--redis", &redis.url()]).output().unwrap();
    assert!(stdout(&out).contains("answer of run figs — run figs ended done"), "{}", stdout(&out));
}

#[test]
fn a_queued_run_stopped_by_its_step_limit_is_continued_with_a_raised_limit() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    setup(&t, TWO_STEPS);
    let w = worker(&t, &redis, "w1", &["--claim-idle", "2s"]);
    let (code, v) = enqueue(&t, &redis, &["--wait=120", "--max-steps", "1"], &["--goal", "g", "--key", "steps"], &w);
    assert_eq!((code, v["payload"]["stop"].as_str()), (Some(4), Some("max_steps")), "{v}");
    // Not raised: it would stop again at once; raised past the root's 6: refused. Neither
    // changes the run.
    let trace = t.read("root/runs/steps/trace.jsonl");
    enqueue(&t, &redis, &[], &["--continue", "steps"], &w);
    enqueue(&t, &redis, &["--max-steps", "9"], &["--continue", "steps"], &w);
    until("two dead letters", &w, &mut || dead(&redis).len() >= 2);
    let reasons = dead(&redis);
    assert!(reasons[0].contains("would stop again at once: max_steps is still over"), "{reasons:?}");
    assert!(reasons[1].contains("budgets.max_steps: 9 is above the root's 6"), "{reasons:?}");
    assert_eq!(t.read("root/runs/steps/trace.jsonl"), trace, "nothing written");
    // --run names it as well as --continue's value.
    let (code, v) = enqueue(&t, &redis, &["--wait=120", "--max-steps", "4"], &["--continue", "--run", "steps"], &w);
    assert_eq!((code, v["payload"]["status"].as_str()), (Some(0), Some("done")), "{v}\n{}", w.log());
    assert_eq!(v["payload"]["steps_taken"], 2, "{v}");
    let continued = entries(&t, "steps", "run.continued");
    assert_eq!(continued.len(), 1);
    assert_eq!(continued[0]["data"]["after"], "max_steps");
    assert!(continued[0]["data"]["key"].is_string(), "{}", continued[0]);
    assert_eq!(t.json("root/runs/steps/state.json")["limits"]["max_steps"], 4);
    // The worker's record keeps the raised budget: any later drive of the run uses it.
    assert_eq!(t.json("root/.agentloop-runs/steps.json")["budgets"]["max_steps"], 4);
}

/// A run the CLI made in the root's `runs/` (as cron would, or `serve` would start one) is
/// answered through the queue, the answer read from stdin; the worker drives it with the root's
/// configuration.
#[test]
fn a_run_the_cli_made_under_the_root_is_answered_through_the_queue() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    setup(&t, ASKS);
    let out =
        t.cmd().args(["--script", "script.yaml", "-w", "root/runs/cli-1", "run", "--goal", "Report"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let own_id = t.json("root/runs/cli-1/state.json")["run_id"].as_str().unwrap().to_string();
    let w = worker(&t, &redis, "w1", &[]);
    let out = t
        .cmd()
        .args(["--json", "--wait=120", "enqueue", "--redis", &redis.url(), "--answer", "-", "--run", "cli-1"])
        .write_stdin("Use the 2024 figures\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}\nworker:\n{}", stderr(&out), w.log());
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((v["type"].as_str(), v["payload"]["status"].as_str()), (Some("agent.completed"), Some("done")), "{v}");
    // The payload is the run's own (its id is the one the CLI gave it); the stream names the
    // folder the request named.
    assert_eq!(v["payload"]["run_id"], own_id.as_str());
    assert_eq!(redis.entries("agentloop:results")[0].1["run_id"], "cli-1");
    let answered = entries(&t, "cli-1", "run.answered");
    assert_eq!(answered[0]["data"]["answer"], "Use the 2024 figures", "trimmed, as `answer -` trims");
    assert!(!t.exists("root/.agentloop-runs/cli-1.json"), "no record is made for another door's run");
    // The CLI sees the run as it ended.
    let out = t.cmd().args(["-w", "root/runs/cli-1", "--json", "status"]).output().unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["status"], "done");
}

/// A run the CLI made under the root and stopped by its step limit goes on with the limits it
/// ran with unless the continue raises one (the root's own limit is no raise).
#[test]
fn a_run_the_cli_made_goes_on_with_its_own_limits_unless_a_continue_raises_one() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    setup(&t, TWO_STEPS);
    let args = ["--script", "script.yaml", "-w", "root/runs/cli-2", "--max-steps", "1", "run", "--goal", "g"];
    let out = t.cmd().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let w = worker(&t, &redis, "w1", &[]);
    let out = t.cmd().args(["--wait=120", "enqueue", "--redis", &redis.url(), "--continue", "cli-2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("max_steps is still over (1 of 1 steps used)"), "{}", stderr(&out));
    let (code, v) = enqueue(&t, &redis, &["--wait=120", "--max-steps", "3"], &["--continue", "cli-2"], &w);
    assert_eq!((code, v["payload"]["status"].as_str()), (Some(0), Some("done")), "{v}\n{}", w.log());
    assert_eq!(t.json("root/runs/cli-2/state.json")["limits"]["max_steps"], 3);
}

/// A worker killed right after the answer's commit was journaled: the message is delivered
/// again, the next worker finds the commit (its lock finishes it) and the answer's key in the
/// trace, and goes on without answering again. A run another process holds is not waited for:
/// the answer stays pending and applies once the lock is free.
#[test]
fn a_redelivered_answer_applies_once_and_one_for_a_held_run_waits() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    setup(&t, ASKS);
    let w1 = worker(&t, &redis, "w1", &[]);
    let (code, _) = enqueue(&t, &redis, &["--wait=120"], &["--goal", "Report", "--key", "twice"], &w1);
    assert_eq!(code, Some(3));
    drop(w1);
    let mut w2 = worker_with(&t, &redis, "w2", &["--claim-idle", "1s"], &[("AGENTLOOP_CRASH_AT", "commit:journaled")]);
    let (code, v) = enqueue(&t, &redis, &[], &["--answer", "Use the 2024 figures", "--run", "twice"], &w2);
    assert_eq!(code, Some(0));
    assert_eq!(v["request"], "answer");
    let key = v["key"].as_str().unwrap().to_string();
    assert_eq!(key, v["message_id"].as_str().unwrap(), "the default key is the message id");
    until("the crash", &w2, &mut || w2.log().contains("crash point commit:journaled reached"));
    let _ = w2.child.wait();
    let w3 = worker(&t, &redis, "w3", &["--claim-idle", "1s"]);
    until("the outcome", &w3, &mut || redis.entries("agentloop:results").len() == 2 && redis.pending() == 0);
    assert_eq!(t.json("root/runs/twice/state.json")["status"], "done", "{}", w3.log());
    let answered = entries(&t, "twice", "run.answered");
    assert_eq!(answered.len(), 1, "applied once");
    assert_eq!(answered[0]["data"]["key"], key.as_str());
    assert_eq!(t.read("root/runs/twice/memory.md").matches("A person answered").count(), 1);
    assert!(
        w3.log().contains("run twice goes on for message") && w3.log().contains("was applied before"),
        "{}",
        w3.log()
    );
    // Another process holds the run: the continue stays pending, then applies.
    let (code, _) = enqueue(&t, &redis, &["--wait=120"], &["--goal", "Report again", "--key", "held"], &w3);
    assert_eq!(code, Some(3));
    let lock = std::fs::File::options().read(true).write(true).open(t.path("root/runs/held/.agentloop.lock")).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    enqueue(&t, &redis, &[], &["--answer", "Use the 2024 figures", "--run", "held"], &w3);
    until("the answer to wait", &w3, &mut || w3.log().contains("run held is being driven elsewhere"));
    assert!(w3.log().contains("stays pending (delivery 1 of at most"), "{}", w3.log());
    assert!(entries(&t, "held", "run.answered").is_empty());
    drop(lock);
    until("the answer to apply", &w3, &mut || redis.entries("agentloop:results").len() == 4);
    assert_eq!(t.json("root/runs/held/state.json")["status"], "done", "{}", w3.log());
    assert!(dead(&redis).is_empty(), "{:?}", dead(&redis));
}
