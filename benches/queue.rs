//! `make bench`: runs per minute of `agentloop worker` with 1, 2, 4 and 8 worker processes
//! sharing a root, against a local OpenAI-compatible fake that answers every call after 200 ms
//! and a real `redis-server` on a free loopback port (skipped, saying so, without one).
//!
//! Turns wait on the model, not on the CPU, so throughput should grow with the workers even on
//! a 2-core machine: the target is at least 0.85 × N times the one-worker rate for every N.
//! Each round enqueues `RUNS_PER_WORKER × N` runs once its workers are listening and measures
//! until the last outcome is published. Prints a table and exits non-zero when a target is
//! missed.
//!
//! Lanes: `QUEUE_LANES=1,8,16,32,64` measures those numbers of runs at once instead, each round
//! with as many workers as `QUEUE_CONCURRENCY` lanes each take (default 8: 32 lanes are 4
//! workers × `--concurrency 8`), the curve docs/QUEUE.md records; the 0.85 × N target holds up
//! to 32 lanes. Each row also says where the rest went: the steady rate of linear (between a
//! tenth and nine tenths of the outcomes, without the start and the tail of the round), how busy
//! the machine's cores were, and the CPU time per run of the workers, redis-server and the fake
//! model.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used
)]

use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LATENCY: Duration = Duration::from_millis(200);
const RUNS_PER_WORKER: usize = 10;
const WORKERS: [usize; 4] = [1, 2, 4, 8];

struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The fake model: every request answered after [`LATENCY`], each on its own thread.
fn fake_model() -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let addr = server.server_addr().to_ip().unwrap();
    std::thread::spawn(move || {
        for mut req in server.incoming_requests() {
            std::thread::spawn(move || {
                let mut body = String::new();
                let _ = std::io::Read::read_to_string(req.as_reader(), &mut body);
                let body: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                let tool =
                    body.pointer("/tool_choice/function/name").and_then(|n| n.as_str()).unwrap_or("").to_string();
                let args = match tool.as_str() {
                    "frame_answer" => json!({"goal": "g", "definition_of_done": ["answered"], "can_proceed": true}),
                    "plan_answer" => {
                        json!({"next_action": {"tool": "finish", "args": {"summary": "answered"}}, "rationale": "nothing to do"})
                    }
                    _ => {
                        json!({"satisfied": [{"item": 1, "steps": [1]}], "decision": "done", "reason": "ok", "outcome": "answered"})
                    }
                };
                std::thread::sleep(LATENCY);
                let reply = json!({
                    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "fake",
                    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
                });
                let header = tiny_http::Header::from_bytes("content-type", "application/json").unwrap();
                let _ = req.respond(tiny_http::Response::from_string(reply.to_string()).with_header(header));
            });
        }
    });
    format!("http://{addr}/v1")
}

/// CPU time (clock ticks, user + system) a process has used, from `/proc/PID/stat`; 0 where that
/// cannot be read.
fn cpu_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is the first, utime the 12th.
    let rest: Vec<&str> = stat.rsplit_once(") ").map(|(_, r)| r.split(' ').collect()).unwrap_or_default();
    let field = |i: usize| rest.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
}

/// The machine's busy and total clock ticks over all cores, from `/proc/stat`.
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> =
        stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    let total: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// Where a round's time and CPU went: its steady rate, the machine's busy share of all its cores,
/// and the CPU time per run of the workers, redis-server and the fake model (this process), in
/// milliseconds.
struct Usage {
    /// Runs per minute between a tenth and nine tenths of the outcomes.
    steady: f64,
    busy: f64,
    worker_ms: f64,
    redis_ms: f64,
    model_ms: f64,
}

/// CPU ticks so far of the workers, redis-server and this process, and the machine's.
fn sample(workers: &[Child], redis_pid: &str) -> [u64; 5] {
    let w: u64 = workers.iter().map(|c| cpu_ticks(&c.id().to_string())).sum();
    let (busy, total) = machine_ticks();
    [w, cpu_ticks(redis_pid), cpu_ticks("self"), busy, total]
}

fn redis(dir: &std::path::Path) -> Option<(Killed, String)> {
    if Command::new("redis-server").arg("--version").output().is_err() {
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("redis://127.0.0.1:{port}/0");
    let start = Instant::now();
    while redis::Client::open(url.as_str()).unwrap().get_connection().is_err() {
        assert!(start.elapsed() < Duration::from_secs(30), "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some((Killed(vec![child]), url))
}

/// One round (named `tag`): `lanes` runs at once, by workers of `per` lanes each (the last
/// takes the rest), `RUNS_PER_WORKER × lanes` runs; returns runs per minute and where the CPU went.
fn round(
    dir: &std::path::Path,
    url: &str,
    model: &str,
    redis_pid: &str,
    tag: usize,
    lanes: usize,
    per: usize,
) -> (f64, Usage) {
    let lanes = lanes.max(1);
    let per = per.clamp(1, lanes);
    let n = lanes.div_ceil(per);
    let root = dir.join(format!("root-{tag}"));
    std::fs::create_dir_all(&root).unwrap();
    let cfg = format!("llm:\n  provider: openai\n  base_url: {model}\n  model: fake\n  attempts: 1\n");
    std::fs::write(root.join("agentloop.yaml"), cfg).unwrap();
    let prefix = format!("bench{tag}");
    let mut workers = Killed(Vec::new());
    let mut logs = Vec::new();
    for i in 0..n {
        let log = dir.join(format!("worker-{tag}-{i}.err"));
        let child = Command::new(env!("CARGO_BIN_EXE_agentloop"))
            .env("AGENTLOOP_TRUST_ALL", "1")
            .env("OPENAI_API_KEY", "bench")
            .env("HOME", dir)
            .env("XDG_CONFIG_HOME", dir.join("xdg"))
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .args(["worker", "--redis", url, "--streams", &prefix, "--consumer", &format!("w{i}")])
            .args(["--concurrency", &per.min(lanes - i * per).to_string()])
            .arg("--root")
            .arg(&root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        workers.0.push(child);
        logs.push(log);
    }
    let start = Instant::now();
    while !logs.iter().all(|l| std::fs::read_to_string(l).unwrap_or_default().contains(" on redis://")) {
        assert!(start.elapsed() < Duration::from_secs(60), "the workers did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    let runs = RUNS_PER_WORKER * lanes;
    let before = sample(&workers.0, redis_pid);
    let start = Instant::now();
    for i in 0..runs {
        let req = json!({"goal": format!("answer {i}")}).to_string();
        let _: String =
            redis::cmd("XADD").arg(format!("{prefix}:runs")).arg("*").arg("request").arg(req).query(&mut con).unwrap();
    }
    // When a tenth and nine tenths of the outcomes were in: the rate between them is the steady
    // one, without the start (runs handed out) and the tail (lanes that drew one run more).
    let (mut tenth, mut nine_tenths) = (None, None);
    loop {
        let done: usize = redis::cmd("XLEN").arg(format!("{prefix}:results")).query(&mut con).unwrap();
        if done * 10 >= runs {
            tenth.get_or_insert_with(Instant::now);
        }
        if done * 10 >= runs * 9 {
            nine_tenths.get_or_insert_with(Instant::now);
        }
        if done >= runs {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(600), "only {done} of {runs} runs finished");
        std::thread::sleep(Duration::from_millis(10));
    }
    let rate = runs as f64 / start.elapsed().as_secs_f64() * 60.0;
    let steady = match (tenth, nine_tenths) {
        (Some(a), Some(b)) if b > a => (runs * 8) as f64 / 10.0 / (b - a).as_secs_f64() * 60.0,
        _ => rate,
    };
    let after = sample(&workers.0, redis_pid);
    let d: Vec<u64> = after.iter().zip(before).map(|(a, b)| a.saturating_sub(b)).collect();
    // Clock ticks are 10 ms on Linux (USER_HZ 100).
    let per_run = |ticks: u64| ticks as f64 * 10.0 / runs as f64;
    let busy = d[3] as f64 / d[4].max(1) as f64;
    (rate, Usage { steady, busy, worker_ms: per_run(d[0]), redis_ms: per_run(d[1]), model_ms: per_run(d[2]) })
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let Some((redis_server, url)) = redis(dir.path()) else {
        println!("queue bench skipped: redis-server is not installed (apt-get install redis-server)");
        return;
    };
    let model = fake_model();
    // `QUEUE_LANES`: runs at once, `QUEUE_CONCURRENCY` of them to a worker; else 1, 2, 4, 8
    // workers of one lane each.
    let lanes: Option<Vec<usize>> =
        std::env::var("QUEUE_LANES").ok().map(|l| l.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    let per: usize = std::env::var("QUEUE_CONCURRENCY").ok().and_then(|c| c.parse().ok()).unwrap_or(8);
    let (counts, per, what) = match lanes {
        Some(l) if !l.is_empty() => (l, per, "lanes"),
        _ => (WORKERS.to_vec(), 1, "workers"),
    };
    println!("agentloop worker: runs per minute, model answering after {} ms", LATENCY.as_millis());
    println!(
        "{what:>8} {:>6} {:>12} {:>9} {:>8}     {:>7} {:>8} {:>10} {:>9} {:>9}",
        "runs", "runs/min", "speedup", "target", "steady", "cpu busy", "worker/run", "redis/run", "model/run"
    );
    let redis_pid = redis_server.0[0].id().to_string();
    // A round nobody counts first: the binary and the filesystem warm up.
    round(dir.path(), &url, &model, &redis_pid, 0, 2, 1);
    let (mut base, mut steady_base) = (0.0, 0.0);
    let mut missed = Vec::new();
    for n in counts {
        let (rate, used) = round(dir.path(), &url, &model, &redis_pid, n, n, per);
        if n == 1 {
            (base, steady_base) = (rate, used.steady);
        }
        let speedup = rate / base;
        let target = 0.85 * n as f64;
        // Lanes past 32 are the curve's tail: printed, held to no target.
        let ok = speedup >= target || (what == "lanes" && n > 32);
        println!(
            "{n:>8} {:>6} {rate:>12.1} {speedup:>8.2}x {:>7.2}x {:<6} {:>6.2}x {:>7.0}% {:>8.1}ms {:>7.1}ms {:>7.1}ms",
            RUNS_PER_WORKER * n,
            target,
            if ok { "ok" } else { "MISSED" },
            used.steady / steady_base / n as f64,
            used.busy * 100.0,
            used.worker_ms,
            used.redis_ms,
            used.model_ms
        );
        if !ok {
            missed.push(n);
        }
    }
    if !missed.is_empty() {
        eprintln!("queue bench: below 0.85 × N with {missed:?} {what}");
        std::process::exit(1);
    }
}
