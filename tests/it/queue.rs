//! `agentloop worker` and `enqueue` against a real `redis-server` on a free 127.0.0.1 port
//! (skipped, saying so, where redis-server is not installed): several workers share a root,
//! one is killed with `kill -9` mid-run, a message is delivered twice, a poison message goes to
//! the dead-letter stream, and Redis restarts mid-run. Nothing is timed: every wait polls with
//! a generous deadline.

mod answer;
mod drain;
mod eval;
mod series;

use crate::common::*;
use redis::Commands;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(180);

/// A `redis-server` of the test's own, with its data in a temp folder (kept across restarts).
pub struct Redis {
    child: Option<Child>,
    pub port: u16,
    dir: std::path::PathBuf,
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Redis {
    /// None (and a note on stderr) when redis-server is not installed.
    pub fn start(dir: &std::path::Path) -> Option<Redis> {
        if Command::new("redis-server").arg("--version").output().is_err() {
            crate::common::missing("redis-server is not installed (apt-get install redis-server)");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        std::fs::create_dir_all(dir).unwrap();
        let mut r = Redis { child: None, port, dir: dir.to_path_buf() };
        r.launch();
        Some(r)
    }

    fn launch(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string(), "--save", ""])
            .args(["--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let start = Instant::now();
        while self.con_once().is_err() {
            assert!(start.elapsed() < DEADLINE, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops Redis (as a crash would) and starts it again on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        std::thread::sleep(Duration::from_millis(500));
        self.launch();
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn con_once(&self) -> redis::RedisResult<redis::Connection> {
        let mut c = redis::Client::open(self.url())?.get_connection()?;
        redis::cmd("PING").query::<String>(&mut c)?;
        Ok(c)
    }

    pub fn con(&self) -> redis::Connection {
        self.con_once().expect("connect to redis")
    }

    /// The entries of a stream: (id, fields).
    pub fn entries(&self, key: &str) -> Vec<(String, BTreeMap<String, String>)> {
        let r: redis::streams::StreamRangeReply = self.con().xrange_all(key).unwrap();
        r.ids
            .into_iter()
            .map(|m| {
                let f = m.map.keys().map(|k| (k.clone(), m.get::<String>(k).unwrap_or_default())).collect();
                (m.id, f)
            })
            .collect()
    }

    /// Messages read and not acknowledged.
    pub fn pending(&self) -> usize {
        let v: redis::Value =
            redis::cmd("XPENDING").arg("agentloop:runs").arg("agentloop:workers").query(&mut self.con()).unwrap();
        match v {
            redis::Value::Array(a) => redis::from_redis_value::<usize>(a[0].clone()).unwrap_or(0),
            _ => 0,
        }
    }
}

/// A worker process (killed when dropped), its stderr in a file.
pub struct Worker {
    pub child: Child,
    pub log: std::path::PathBuf,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

pub fn worker(t: &T, redis: &Redis, name: &str, args: &[&str]) -> Worker {
    worker_with(t, redis, name, args, &[])
}

/// [`worker`] with more environment variables (`AGENTLOOP_CRASH_AT`).
pub fn worker_with(t: &T, redis: &Redis, name: &str, args: &[&str], env: &[(&str, &str)]) -> Worker {
    let log = t.path(&format!("{name}.err"));
    let child = Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .env_clear()
        .envs(env.iter().copied())
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("AGENTLOOP_NOW", NOW)
        .current_dir(t.root())
        .args(["--script", "script.yaml", "worker", "--redis", &redis.url(), "--root", "root", "--consumer", name])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start worker");
    Worker { child, log }
}

fn wait_until(what: &str, logs: &dyn Fn() -> String, ok: &mut dyn FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < DEADLINE, "{what} did not happen:\n{}", logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server that answers after `ms` milliseconds, or holds while `hold` is set.
fn slow_server(ms: u64, hold: Arc<AtomicBool>) -> Server {
    Server::start_with(move |_, _| {
        std::thread::sleep(Duration::from_millis(ms));
        let start = Instant::now();
        while hold.load(Ordering::SeqCst) && start.elapsed() < DEADLINE {
            std::thread::sleep(Duration::from_millis(20));
        }
        Reply::text(200, "text/plain", "the slow answer")
    })
}

fn setup(t: &T, server: &Server) {
    t.write("script.yaml", &slow_script(&server.url));
    t.write("root/agentloop.yaml", "max_steps: 8\ntools: {http: {allow_private: true}}\n");
}

fn enqueue(t: &T, redis: &Redis, args: &[&str]) -> Value {
    let out = t.cmd().args(["--json", "enqueue", "--redis", &redis.url()]).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// Each run's trace: every phase entry once per step, one start and one finish.
fn assert_no_phase_twice(t: &T, run_id: &str) {
    let text = t.read(&format!("root/runs/{run_id}/trace.jsonl"));
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        let key = (
            e["step"].as_u64().unwrap(),
            e["phase"].as_str().unwrap().to_string(),
            e["event"].as_str().unwrap().to_string(),
        );
        if key.2 == "run.continued" {
            continue;
        }
        assert!(seen.insert(key.clone()), "run {run_id}: {key:?} applied twice:\n{text}");
    }
    assert!(seen.iter().any(|k| k.2 == "run.finished"), "run {run_id} did not finish:\n{text}");
}

#[test]
fn three_workers_run_thirty_goals_once_each_though_one_is_killed() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    let server = slow_server(150, Arc::new(AtomicBool::new(false)));
    setup(&t, &server);
    let mut ids = BTreeSet::new();
    // Delivered twice on purpose: two messages with one idempotency key are one run.
    let first = enqueue(&t, &redis, &["--goal", "twice", "--key", "dup-1"]);
    let second = enqueue(&t, &redis, &["--goal", "twice", "--key", "dup-1"]);
    assert_eq!(first["run_id"], "dup-1");
    assert_eq!(second["run_id"], "dup-1");
    assert_ne!(first["message_id"], second["message_id"]);
    ids.insert("dup-1".to_string());
    for i in 1..30 {
        let v = enqueue(&t, &redis, &["--goal", &format!("goal {i}")]);
        ids.insert(v["run_id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 30);
    let flags = ["--claim-idle", "2s", "--max-deliveries", "5"];
    let mut doomed = Some(worker(&t, &redis, "w1", &flags));
    let w2 = worker(&t, &redis, "w2", &flags);
    let w3 = worker(&t, &redis, "w3", &flags);
    let logs = || {
        let w1 = doomed.as_ref().map(|w| w.log()).unwrap_or_default();
        format!("w1:\n{w1}\nw2:\n{}\nw3:\n{}", w2.log(), w3.log())
    };
    // w1 is killed in the middle of a run it started.
    wait_until("w1 starting a run", &logs, &mut || doomed.as_ref().unwrap().log().contains("started for message"));
    let w1_log = {
        let mut w = doomed.take().unwrap();
        rustix::process::kill_process(rustix::process::Pid::from_child(&w.child), rustix::process::Signal::KILL)
            .unwrap();
        let _ = w.child.wait();
        w.log()
    };
    let results = || redis.entries("agentloop:results");
    let logs = || format!("w1:\n{w1_log}\nw2:\n{}\nw3:\n{}", w2.log(), w3.log());
    wait_until("30 outcomes", &logs, &mut || results().len() >= 30 && redis.pending() == 0);
    std::thread::sleep(Duration::from_millis(500));
    let results = results();
    let published: Vec<String> = results.iter().map(|(_, f)| f["run_id"].clone()).collect();
    let unique: BTreeSet<String> = published.iter().cloned().collect();
    assert_eq!(published.len(), 30, "exactly one outcome per run id: {published:?}");
    assert_eq!(unique, ids);
    for (_, f) in &results {
        let o: Value = serde_json::from_str(&f["outcome"]).unwrap();
        assert_eq!(o["type"], "agent.completed", "{o}");
        assert_eq!(o["payload"]["run_id"].as_str(), Some(f["run_id"].as_str()));
        assert_eq!(o["payload"]["stop"], "done");
        assert_eq!(o["payload"]["outcome"], "fetched the slow answer");
        assert!(o["payload"]["key"].is_string(), "{o}");
        // The published outcome is the declared one: completion-event.json, `key` included.
        crate::schemas::check("completion-event.json", &o);
    }
    for id in &ids {
        assert_no_phase_twice(&t, id);
    }
    // The killed worker's run was taken over by another worker, and resumed.
    let all = logs();
    assert!(all.contains("goes on for message"), "{all}");
    assert!(all.contains("outcome was published before"), "{all}");
    assert!(redis.entries("agentloop:dead").is_empty(), "{all}");
    // `enqueue --wait` on a finished key answers with the outcome published earlier.
    let out = t
        .cmd()
        .args(["--json", "--wait=60", "enqueue", "--redis", &redis.url(), "--goal", "twice", "--key", "dup-1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((v["type"].as_str(), v["payload"]["run_id"].as_str()), (Some("agent.completed"), Some("dup-1")));
}

#[test]
fn poison_messages_and_wider_budgets_go_to_the_dead_letter_stream() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    let server = slow_server(0, Arc::new(AtomicBool::new(false)));
    setup(&t, &server);
    let _: String = redis.con().xadd("agentloop:runs", "*", &[("request", "{not json")]).unwrap();
    let _: String =
        redis.con().xadd("agentloop:runs", "*", &[("request", r#"{"goal": "g", "colour": "red"}"#)]).unwrap();
    let _: String = redis
        .con()
        .xadd("agentloop:runs", "*", &[("request", r##"{"goal": "g", "output_schema": {"$ref": "#/nowhere"}}"##)])
        .unwrap();
    let wide = enqueue(&t, &redis, &["--goal", "too long", "--max-steps", "50"]);
    let ok = enqueue(&t, &redis, &["--goal", "fine", "--max-steps", "3", "--slot", "2026-01-01"]);
    let w = worker(&t, &redis, "w1", &[]);
    let logs = || w.log();
    wait_until("four dead letters and one outcome", &logs, &mut || {
        redis.entries("agentloop:dead").len() >= 4 && !redis.entries("agentloop:results").is_empty()
    });
    let dead = redis.entries("agentloop:dead");
    let reasons: Vec<&str> = dead.iter().map(|(_, f)| f["reason"].as_str()).collect();
    assert!(reasons[0].starts_with("invalid request: `request` field"), "{reasons:?}");
    assert!(reasons[1].contains("colour"), "{reasons:?}");
    assert!(reasons[2].contains("output_schema"), "{reasons:?}");
    assert!(
        reasons[3].contains("budgets.max_steps") && reasons[3].contains(wide["run_id"].as_str().unwrap()),
        "{reasons:?}"
    );
    assert_eq!(dead[3].1["message_id"], wide["message_id"].as_str().unwrap());
    let results = redis.entries("agentloop:results");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1["run_id"], ok["run_id"].as_str().unwrap());
    assert_eq!(redis.pending(), 0);
    // The run records the slot it was queued for, as `run --slot` does.
    let id = ok["run_id"].as_str().unwrap();
    assert_eq!(t.json(&format!("root/runs/{id}/state.json"))["slot"], "2026-01-01");
    // `runs` under the root lists the run; `status --redis` shows the queue.
    let out = t.cmd().args(["status", "--redis", &redis.url()]).output().unwrap();
    let shown = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(shown.contains("dead-lettered 4"), "{shown}");
    assert!(shown.contains("budgets.max_steps"), "{shown}");
    let out = t.cmd().args(["-w", "root", "--json", "runs", "--redis", &redis.url()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["queue"]["dead"].as_array().unwrap().len(), 4, "{v}");
    assert_eq!(v["queue"]["dead"][3]["goal"], Value::Null, "{v}");
}

/// A message larger than a request may be (the cap `serve` puts on a body) is dead-lettered with
/// the reason before it is parsed, whatever field makes it large; no dead-lettered message leaves
/// a run folder (or its lock file) under the root.
#[test]
fn an_oversized_request_is_dead_lettered_and_no_dead_letter_leaves_a_run_folder() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    let server = slow_server(0, Arc::new(AtomicBool::new(false)));
    setup(&t, &server);
    let goal = serde_json::json!({"goal": "g".repeat(2 << 20)}).to_string();
    let words: Vec<String> = (0..300_000).map(|i| format!("w{i}")).collect();
    let schema = serde_json::json!({"goal": "g", "output_schema": {"type": "object",
        "properties": {"w": {"enum": words}}}})
    .to_string();
    for text in [&goal, &schema] {
        let _: String = redis.con().xadd("agentloop:runs", "*", &[("request", text.as_str())]).unwrap();
    }
    let wide = enqueue(&t, &redis, &["--goal", "too long", "--max-steps", "50"]);
    let w = worker(&t, &redis, "w1", &[]);
    let logs = || w.log();
    wait_until("three dead letters", &logs, &mut || redis.entries("agentloop:dead").len() >= 3);
    let dead = redis.entries("agentloop:dead");
    for (i, len) in [(0, goal.len()), (1, schema.len())] {
        let reason = &dead[i].1["reason"];
        assert_eq!(reason, &format!("the request is {len} bytes, over the limit of 1048576 bytes"), "{dead:?}");
        // The dead letter does not copy it: the requests stream keeps it under its id.
        assert_eq!(dead[i].1["request"], "");
    }
    assert!(dead[2].1["reason"].contains("budgets.max_steps"), "{:?}", dead[2].1);
    assert_eq!(redis.pending(), 0);
    let id = wide["run_id"].as_str().unwrap();
    assert!(!t.exists(&format!("root/runs/{id}")), "a refused run left its folder");
    let left: Vec<_> = std::fs::read_dir(t.path("root/runs"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    // `enqueue` refuses such a request before it reaches the stream.
    t.write("big.txt", &"g".repeat(2 << 20));
    let out = t
        .cmd()
        .args(["enqueue", "--redis", &redis.url(), "--goal", "g", "--context-file", "big.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("over the limit of 1048576 bytes"), "{}", stderr(&out));
    assert_eq!(redis.entries("agentloop:runs").len(), 3);
}

#[test]
fn a_redis_restart_mid_run_loses_nothing() {
    let t = T::new();
    let Some(mut redis) = Redis::start(&t.path("redis")) else { return };
    let hold = Arc::new(AtomicBool::new(true));
    let server = slow_server(0, hold.clone());
    setup(&t, &server);
    let v = enqueue(&t, &redis, &["--goal", "survive a restart"]);
    let run_id = v["run_id"].as_str().unwrap().to_string();
    let w = worker(&t, &redis, "w1", &["--claim-idle", "3s"]);
    let logs = || w.log();
    wait_until("the run waiting on the slow server", &logs, &mut || server.count() >= 1);
    redis.restart();
    // The worker notices while the run waits (its heartbeat fails), then Redis is back.
    std::thread::sleep(Duration::from_secs(2));
    hold.store(false, Ordering::SeqCst);
    wait_until("the outcome", &logs, &mut || redis.entries("agentloop:results").len() == 1 && redis.pending() == 0);
    let results = redis.entries("agentloop:results");
    assert_eq!(results[0].1["run_id"], run_id);
    assert_no_phase_twice(&t, &run_id);
    let log = w.log();
    assert!(log.contains("is unreachable") && log.contains("is back"), "{log}");
}

/// The Kubernetes manifests parse, and say what docs/QUEUE.md says they do.
#[test]
fn the_kubernetes_manifests_hold_workers_a_daily_job_and_redis() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes");
    let mut docs: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for f in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        for d in serde_yaml_ng::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(d).unwrap();
            assert!(v["apiVersion"].is_string() && v["metadata"]["name"].is_string(), "{v}");
            docs.entry(v["kind"].as_str().unwrap().to_string()).or_default().push(v);
        }
    }
    let one = |k: &str| docs.get(k).and_then(|d| d.first()).unwrap_or_else(|| panic!("no {k}")).clone();
    let redis_service = one("Service")["metadata"]["name"].as_str().unwrap().to_string();
    let url = format!("redis://{redis_service}:6379/0");
    let worker = one("Deployment");
    let pod = &worker["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(args[..3], ["worker", "--root", "/runs"]);
    let env =
        |c: &Value, k: &str| c["env"].as_array().unwrap().iter().find(|e| e["name"] == k).map(|e| e["value"].clone());
    assert_eq!(env(c, "AGENTLOOP_REDIS"), Some(Value::String(url.clone())));
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/runs");
    let claim = pod["volumes"][0]["persistentVolumeClaim"]["claimName"].as_str().unwrap();
    let pvc = one("PersistentVolumeClaim");
    assert_eq!(pvc["metadata"]["name"], claim);
    assert_eq!(pvc["spec"]["accessModes"][0], "ReadWriteMany");
    let cron = one("CronJob");
    let job = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    let script = job["args"][0].as_str().unwrap();
    assert!(script.contains("agentloop enqueue --goal") && script.contains("--slot \"$(date +%F)\""), "{script}");
    assert_eq!(env(job, "AGENTLOOP_REDIS"), Some(Value::String(url)));
    let redis = one("StatefulSet");
    let rargs = redis["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(rargs.contains("appendonly"), "{rargs}");
}

/// `serve --redis` queues POST /runs for the workers, which run it under the same root.
#[test]
fn serve_with_redis_fronts_the_workers() {
    use std::io::BufRead;
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    let server = slow_server(0, Arc::new(AtomicBool::new(false)));
    setup(&t, &server);
    let token = "test-token-0123456789abcdef";
    let mut serve = Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("AGENTLOOP_TOKEN", token)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("AGENTLOOP_NOW", NOW)
        .current_dir(t.root())
        .args([
            "--script",
            "script.yaml",
            "serve",
            "--root",
            "root",
            "--listen",
            "127.0.0.1:0",
            "--redis",
            &redis.url(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(t.path("serve.err")).unwrap())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(serve.stdout.take().unwrap()).lines();
    let url = lines.next().unwrap().unwrap().strip_prefix("listening on ").unwrap().to_string();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let post = |body: &str| {
        let mut r = agent
            .post(&format!("{url}/runs"))
            .header("Authorization", &format!("Bearer {token}"))
            .header("Content-Type", "application/json")
            .send(body)
            .unwrap();
        (r.status().as_u16(), serde_json::from_str::<Value>(&r.body_mut().read_to_string().unwrap()).unwrap())
    };
    // Budgets wider than the root's are refused at once, as for a local run.
    let (status, v) = post(r#"{"goal": "too long", "budgets": {"max_steps": 50}}"#);
    assert_eq!(status, 400, "{v}");
    let (status, v) = post(r#"{"goal": "from the API", "budgets": {"max_steps": 4}}"#);
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["status"], "queued");
    let run_id = v["run_id"].as_str().unwrap().to_string();
    assert_eq!(v["queue"]["message_id"].as_str(), Some(run_id.as_str()));
    // Nothing runs until a worker takes it.
    assert_eq!(redis.entries("agentloop:runs").len(), 1);
    let w = worker(&t, &redis, "w1", &[]);
    let logs = || format!("{}\nserve:\n{}", w.log(), std::fs::read_to_string(t.path("serve.err")).unwrap_or_default());
    wait_until("the outcome", &logs, &mut || redis.entries("agentloop:results").len() == 1);
    assert_eq!(redis.entries("agentloop:results")[0].1["run_id"], run_id);
    let mut r =
        agent.get(&format!("{url}/runs/{run_id}")).header("Authorization", &format!("Bearer {token}")).call().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(v["limits_recorded"]["max_steps"], 4, "{v}");
    let _ = serve.kill();
    let _ = serve.wait();
}

/// SIGTERM drains a worker: the phase under way (an action waiting on a slow server) finishes
/// and is committed, the worker takes nothing new, hands its message back and exits 0; another
/// worker takes the message over at once (well before its --claim-idle) and goes on from that
/// commit, with no phase applied twice.
#[test]
fn a_terminated_worker_finishes_its_phase_and_hands_the_message_on() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    let hold = Arc::new(AtomicBool::new(true));
    let server = slow_server(0, hold.clone());
    setup(&t, &server);
    let v = enqueue(&t, &redis, &["--goal", "outlive a worker", "--key", "term-1"]);
    assert_eq!(v["run_id"], "term-1");
    enqueue(&t, &redis, &["--goal", "wait for the next worker", "--key", "term-2"]);
    let mut first = worker(&t, &redis, "w1", &["--claim-idle", "2s"]);
    let logs = || first.log();
    wait_until("the run waiting on the slow server", &logs, &mut || server.count() >= 1);
    let pid = rustix::process::Pid::from_child(&first.child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let logs = || first.log();
    wait_until("the drain to be announced", &logs, &mut || first.log().contains("finishing the phase under way"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(first.child.try_wait().unwrap().is_none(), "the worker ended before its phase did:\n{}", first.log());
    hold.store(false, Ordering::SeqCst);
    let status = first.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", first.log());
    let log = first.log();
    assert!(log.contains("run term-1 stopped at a commit point"), "{log}");
    assert!(log.contains("handed back for another worker") && log.contains("drained"), "{log}");
    assert!(!log.contains("term-2"), "a draining worker took a new message:\n{log}");
    let trace = t.read("root/runs/term-1/trace.jsonl");
    assert!(trace.lines().any(|l| l.contains("\"phase\":\"act\"")), "the action was not committed:\n{trace}");
    assert_eq!(redis.pending(), 1);
    assert!(redis.entries("agentloop:results").is_empty());
    // Handed back: idle as if for a day (any worker's next XAUTOCLAIM takes it), the drained
    // delivery not counted.
    let p: redis::streams::StreamPendingCountReply = redis::cmd("XPENDING")
        .arg("agentloop:runs")
        .arg("agentloop:workers")
        .arg("-")
        .arg("+")
        .arg(10)
        .query(&mut redis.con())
        .unwrap();
    assert_eq!(p.ids.len(), 1);
    assert!(p.ids[0].last_delivered_ms >= 3_600_000, "idle {} ms", p.ids[0].last_delivered_ms);
    assert_eq!(p.ids[0].times_delivered, 0);
    // Its --claim-idle is longer than the test may take: only a handed-back message is taken.
    let second = worker(&t, &redis, "w2", &["--claim-idle", "600s"]);
    let logs = || second.log();
    wait_until("both outcomes", &logs, &mut || redis.entries("agentloop:results").len() == 2 && redis.pending() == 0);
    assert!(second.log().contains("run term-1 goes on for message"), "{}", second.log());
    assert_no_phase_twice(&t, "term-1");
}

/// A second signal stops a draining worker at once, as `run` is stopped: every committed phase
/// is kept, the message stays pending and is taken over after --claim-idle.
#[test]
fn a_second_signal_stops_a_worker_at_once() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    let hold = Arc::new(AtomicBool::new(true));
    let server = slow_server(0, hold.clone());
    setup(&t, &server);
    enqueue(&t, &redis, &["--goal", "outlive a worker", "--key", "term-3"]);
    let mut first = worker(&t, &redis, "w1", &["--claim-idle", "2s"]);
    let logs = || first.log();
    wait_until("the run waiting on the slow server", &logs, &mut || server.count() >= 1);
    let pid = rustix::process::Pid::from_child(&first.child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    wait_until("the drain to be announced", &logs, &mut || first.log().contains("finishing the phase under way"));
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = first.child.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status).or(status.code().map(|c| c - 128)), Some(15));
    assert!(first.log().contains("interrupted: every committed phase is kept"), "{}", first.log());
    assert_eq!(redis.pending(), 1);
    hold.store(false, Ordering::SeqCst);
    let second = worker(&t, &redis, "w2", &["--claim-idle", "2s"]);
    let logs = || second.log();
    wait_until("the outcome", &logs, &mut || redis.entries("agentloop:results").len() == 1 && redis.pending() == 0);
    assert!(second.log().contains("run term-3 goes on for message"), "{}", second.log());
    assert_no_phase_twice(&t, "term-3");
}

/// `enqueue` refuses a request no worker could take before it reaches any Redis, naming the
/// flag: the request's fields are its flags.
#[test]
fn enqueue_names_the_flag_a_worker_would_refuse() {
    let t = T::new();
    for (args, want) in [
        (&["--goal", " "][..], "--goal is empty"),
        (&["--goal", "g", "--key", " "][..], "--key must be 1-200 printable characters"),
        (&["--goal", "g", "--slot", "\u{7}"][..], "--slot must be 1-200 printable characters"),
        (&["--goal", "g", "--series", " "][..], "--series must be 1-200 printable characters"),
        (&["--answer", " ", "--run", "r1"][..], "the answer is empty"),
        (&["--answer", "yes", "--run", "../r1"][..], "--run `../r1` is not a run id"),
        (&["--run", "r1"][..], "--run r1 needs --answer TEXT or --continue"),
        (&["--continue"][..], "--continue needs the run to go on with"),
        (&["--continue", "r1", "--run", "r2"][..], "--continue r1 and --run r2 name two runs"),
        (&["--continue", "r1", "--goal", "g"][..], "cannot be used with"),
        (&["--answer", "yes", "--run", "r1", "--slot", "s"][..], "cannot be used with"),
        (&["--answer", "yes"][..], "--run <ID>"),
        (&["--agent", "a", "--continue", "r1"][..], "--agent a: run r1 goes on as the agent it ran as"),
    ] {
        let out = t.cmd().args(["enqueue", "--redis", "redis://127.0.0.1:1/0"]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
}

/// `queue.redis` and `queue.streams` in the configuration stand in for the flags; with no Redis
/// named anywhere the command says where to name one.
#[test]
fn the_queue_keys_of_the_configuration_name_the_redis() {
    let t = T::new();
    let out = t.cmd().args(["enqueue", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("no Redis to queue runs on") && err.contains("`queue.redis`"), "{err}");
    let out = t.cmd().args(["worker", "--root", "root"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    t.write("root/agentloop.yaml", "queue: {claim_idel: 5s}\n");
    let out = t.cmd().args(["worker", "--root", "root", "--redis", "redis://127.0.0.1:1/0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("claim_idel"), "{}", stderr(&out));
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    t.write("root/agentloop.yaml", &format!("queue: {{redis: \"{}\", streams: nightly}}\n", redis.url()));
    let out = t.cmd().args(["-w", "root", "--json", "enqueue", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(redis.entries("nightly:runs").len(), 1);
}

/// An error that may pass (here: the agent is resting) leaves the message pending; it is taken
/// over after --claim-idle, and past --max-deliveries it goes to the dead-letter stream with
/// the last error.
#[test]
fn a_message_failing_past_max_deliveries_is_dead_lettered_with_its_last_error() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    let server = slow_server(0, Arc::new(AtomicBool::new(false)));
    setup(&t, &server);
    t.write("root/agentloop.yaml", "max_steps: 8\nrest: {max_runs: 0}\ntools: {http: {allow_private: true}}\n");
    let v = enqueue(&t, &redis, &["--goal", "never now"]);
    let w = worker(&t, &redis, "w1", &["--claim-idle", "1s", "--max-deliveries", "2"]);
    let logs = || w.log();
    wait_until("a dead letter", &logs, &mut || !redis.entries("agentloop:dead").is_empty());
    let dead = redis.entries("agentloop:dead");
    assert_eq!(dead[0].1["message_id"], v["message_id"].as_str().unwrap());
    assert_eq!(dead[0].1["deliveries"], "3");
    let reason = &dead[0].1["reason"];
    assert!(reason.starts_with("delivered 3 times, over --max-deliveries 2; last error: "), "{reason}");
    assert!(reason.to_lowercase().contains("rest"), "{reason}");
    assert!(w.log().contains("stays pending (delivery 1 of at most 2)"), "{}", w.log());
    assert_eq!(redis.pending(), 0);
    assert!(redis.entries("agentloop:results").is_empty());
}

/// The README's queue lines as written: `AGENTLOOP_REDIS` exported (read as `--redis` by
/// `worker` and `enqueue`, and by no other command as a configuration key), the worker started
/// from another folder with `--root`, `enqueue --agent digest` run from a folder without the
/// profile (it lives at ROOT/agents/digest.yaml), and `status --redis "$AGENTLOOP_REDIS"`.
#[test]
fn the_readme_queue_lines_run_as_written_from_any_folder() {
    let t = T::new();
    // Every command, with the variable set: no error, no warning about it.
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    for args in [&["status"][..], &["config", "show"], &["runs"]] {
        let out = t.al(args).env("AGENTLOOP_REDIS", "redis://127.0.0.1:1/0").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("AGENTLOOP_REDIS"), "{args:?}: {}", stderr(&out));
    }
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    let url = redis.url();
    let server = slow_server(0, Arc::new(AtomicBool::new(false)));
    t.write("script.yaml", &slow_script(&server.url));
    t.write("srv/agent-runs/agentloop.yaml", "tools: {http: {allow_private: true}}\n");
    t.write("srv/agent-runs/agents/digest.yaml", "max_steps: 7\n");
    std::fs::create_dir_all(t.path("elsewhere")).unwrap();
    let root = t.path("srv/agent-runs");
    let log = t.path("worker.err");
    let child = Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("AGENTLOOP_NOW", NOW)
        .env("AGENTLOOP_REDIS", &url)
        .current_dir(t.path("elsewhere"))
        .arg("--script")
        .arg(t.path("script.yaml"))
        .args(["worker", "--root"])
        .arg(&root)
        .args(["--concurrency", "4"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start worker");
    // Stopped when dropped, whatever happens.
    let _worker = Worker { child, log: log.clone() };
    let run = |args: &[&str]| {
        t.cmd().env("AGENTLOOP_REDIS", &url).current_dir(t.path("elsewhere")).args(args).output().unwrap()
    };
    let out = run(&[
        "--json",
        "--wait=120",
        "enqueue",
        "--goal",
        "Daily digest",
        "--agent",
        "digest",
        "--slot",
        "2026-01-01",
    ]);
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(out.status.code(), Some(0), "{}\nworker:\n{}", stderr(&out), logs());
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["type"], "agent.completed", "{v}");
    let run_id = v["payload"]["run_id"].as_str().unwrap();
    // The run ran as the root's profile.
    let state: Value = serde_json::from_str(&t.read(&format!("srv/agent-runs/runs/{run_id}/state.json"))).unwrap();
    assert_eq!(state["status"], "done", "{state}");
    let record: Value =
        serde_json::from_str(&t.read(&format!("srv/agent-runs/.agentloop-runs/{run_id}.json"))).unwrap();
    assert_eq!(record["agent"], "digest", "{record}");
    let out = run(&["status", "--redis", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A profile the root lacks is dead-lettered by the worker, not refused where enqueue runs.
    let out = run(&["--json", "enqueue", "--goal", "Other", "--agent", "nobody"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    wait_until("the dead letter", &logs, &mut || !redis.entries("agentloop:dead").is_empty());
    let dead = redis.entries("agentloop:dead");
    assert!(dead[0].1["reason"].contains("nobody"), "{dead:?}");
}
