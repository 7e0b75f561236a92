//! `make bench`: loop overhead per step with a zero-latency (scripted) model, and prompt size
//! at step 1 vs step 30 of a long run.
//!
//! The loop runs twice: with the scripted model (no I/O: the loop's own cost) and with the
//! OpenAI-compatible client against a local HTTP fake (what a real provider adds on our side:
//! request bodies, the connection, parsing). Targets: at most 2 ms of agentloop's own time per
//! full plan → act → reflect step in both (wall time minus the time model calls spent on the
//! wire, from a request handed to the connection until its reply was read), plan-prompt
//! input flat within 20% between step 1 and step 30, trace.jsonl read at over 100k entries/s,
//! memory search under 50 ms, `agentloop --version` in at most 3 ms. Also prints the size of
//! the release binary the bench was built with (no target: a figure to watch). Prints a report and exits non-zero when a target is
//! missed; `cargo bench --bench loop -- http` runs one part (scripted, http, tokens, trace,
//! trace-show, memory, size). `tokens` counts the prompt tokens a 31-step run with 2 KB of tool
//! output per step sends, per phase, and what a prefix cache would not cover, for a provider that
//! caches the prefix and one that does not, in the default configuration (Reflect and the next
//! Plan fused into one call, `llm.fuse_phases`) and, for the cached provider, with
//! `llm.fuse_phases: false`; beside llm's and smolagents' figures for that run.
//! `trace-show` times the binary's `trace show --json --phase act --all-runs` over a
//! 500,000-line trace beside `grep -c` on the same file (target: at most 3× grep).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used
)]

use agentloop_engine::phases::{self, Env};
use agentloop_engine::settings::Global;
use agentloop_types::tool_spec::ToolStatus;
use agentloop_types::trace::Event;
use camino::Utf8PathBuf;
use std::fmt::Write as _;
use std::time::Instant;

const STEPS: usize = 30;

fn script() -> String {
    let mut s = String::from("frame:\n  - answer: {goal: read many files, definition_of_done: [read all notes, summarise them, write the summary], can_proceed: true}\nplan:\n");
    for i in 0..STEPS {
        let _ = writeln!(
            s,
            "  - answer: {{outline: [read note {i}, read the rest, write summary], next_action: {{tool: file_read, args: {{path: notes/n{i}.txt}}}}, expected_outcome: note {i} text, rationale: next note in order}}"
        );
    }
    s.push_str("reflect:\n");
    for i in 0..STEPS {
        if i + 1 == STEPS {
            s.push_str(
                "  - answer: {satisfied: [{item: 1, steps: [30]}, {item: 2, steps: [30]}, {item: 3, steps: [30]}], decision: done, reason: all read, outcome: read every note}\n",
            );
        } else {
            let _ = writeln!(s, "  - answer: {{facts: [\"note {i} says hello {i} (step {})\"], decision: continue, reason: more notes to read}}", i + 1);
        }
    }
    s
}

/// Which model drives a bench run.
#[derive(Clone, Copy)]
enum Driver {
    /// The scripted provider: no I/O, the loop's own cost only.
    Scripted,
    /// The OpenAI-compatible client against the fake server at this address.
    Http(std::net::SocketAddr),
}

/// A finished bench run: wall time, the time the fake server spent answering, the plan
/// prompts' sizes by step.
struct Measured {
    wall_ms: f64,
    /// Time the client spent on the wire: request handed over → reply read.
    wire_ms: f64,
    server_ms: f64,
    plan_prompts: Vec<(u32, u64)>,
}

/// The run's shape: how many steps, and how many bytes each note the run reads holds (what
/// the tool returns at every step).
#[derive(Clone, Copy)]
struct Shape {
    steps: usize,
    note_bytes: usize,
    /// `llm.fuse_phases` (runs against the HTTP fake); None leaves the key out, so the run is
    /// what the default configuration does (`auto`: fused for this provider).
    fuse: Option<bool>,
}

/// The loop-overhead runs: 30 steps of 180-byte notes, a plan and a reflect call per step.
const OVERHEAD: Shape = Shape { steps: STEPS, note_bytes: 180, fuse: Some(false) };

/// The token run: 31 steps reading 2 KB each, the shape llm and smolagents were measured with.
/// Its headline is the default configuration's.
const TOKENS: Shape = Shape { steps: 31, note_bytes: 2048, fuse: None };

/// The anchors' figures for the same 31-step, 2 KB-per-step run against the same fake server,
/// as measured side by side when this part was written (llm 0.36, smolagents): total prompt
/// tokens, first request's tokens.
const LLM_TOTAL: u64 = 270_723;
const LLM_FIRST: u64 = 78;
const SMOLAGENTS_TOTAL: u64 = 320_666;
const SMOLAGENTS_FIRST: u64 = 1_057;

/// Tokens of a piece of a request, estimated as its compact JSON's bytes / 4 (rounded up): a
/// fixed estimator, so figures compare across changes (BPE tokenizers give about 3.5–4.5 bytes
/// a token on English and JSON).
fn tokens(v: &serde_json::Value) -> u64 {
    (v.to_string().len() as u64).div_ceil(4)
}

/// A request as a provider's prefix cache sees it: the tool definitions, then each message
/// (the system message first), each a unit with its tokens.
fn units(body: &serde_json::Value) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    if let Some(t) = body.get("tools") {
        out.push((t.to_string(), tokens(t)));
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        out.push((m.to_string(), tokens(m)));
    }
    out
}

/// Prompt tokens of one run's requests, per phase and in all, and what a prefix cache would not
/// cover under two models: `uncovered`, the longest prefix of whole units (tools, then each
/// message) shared with any earlier request of the run is served from the cache (a llama.cpp
/// slot, OpenAI's automatic caching); `anthropic`, a prefix is read from the cache only up to a
/// breakpoint agentloop marks (end of the tools, end of the system message) that an earlier
/// request marked over the same bytes, and only when it holds at least 1,024 tokens (the
/// smallest prefix Anthropic caches).
#[derive(Default)]
struct TokenCount {
    first: u64,
    total: u64,
    uncovered: u64,
    anthropic: u64,
    /// phase → (calls, prompt tokens, uncovered tokens)
    phases: std::collections::BTreeMap<String, (u64, u64, u64)>,
}

fn count_tokens(bodies: &[serde_json::Value]) -> TokenCount {
    let mut c = TokenCount::default();
    let all: Vec<Vec<(String, u64)>> = bodies.iter().map(units).collect();
    let mut cached: std::collections::HashSet<Vec<&str>> = std::collections::HashSet::new();
    for (k, u) in all.iter().enumerate() {
        let total: u64 = u.iter().map(|x| x.1).sum();
        let shared = all[..k]
            .iter()
            .map(|e| e.iter().zip(u).take_while(|(a, b)| a.0 == b.0).map(|(_, b)| b.1).sum::<u64>())
            .max()
            .unwrap_or(0);
        // Anthropic: breakpoints after the tools and after the system message (units 0 and 1).
        let mut read = 0;
        for end in [1usize, 2].into_iter().filter(|e| *e <= u.len()) {
            let key: Vec<&str> = u[..end].iter().map(|x| x.0.as_str()).collect();
            let size: u64 = u[..end].iter().map(|x| x.1).sum();
            if size >= 1024 && cached.contains(&key) {
                read = size;
            }
            cached.insert(key);
        }
        if k == 0 {
            c.first = total;
        }
        c.total += total;
        c.uncovered += total - shared;
        c.anthropic += total - read;
        let phase = bodies[k].pointer("/tool_choice/function/name").and_then(|n| n.as_str()).unwrap_or("?");
        let e = c.phases.entry(phase.trim_end_matches("_answer").to_string()).or_default();
        e.0 += 1;
        e.1 += total;
        e.2 += total - shared;
    }
    c
}

/// The 31-step run against the HTTP fake, its requests counted.
fn token_run(shape: Shape) -> TokenCount {
    let fake = Fake::start(shape.steps);
    let dir = tempfile::tempdir().unwrap();
    run_once(dir.path(), Driver::Http(fake.addr), Some(&fake), shape);
    let bodies = fake.bodies.lock().unwrap().clone();
    // BENCH_BODIES=FILE keeps the first token run's request bodies (JSON Lines: the default
    // configuration, prefix-cached) to read what a prompt is made of.
    if let Some(path) = std::env::var_os("BENCH_BODIES").filter(|p| !std::path::Path::new(p).exists()) {
        let lines: Vec<String> = bodies.iter().map(|b| b.to_string()).collect();
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }
    count_tokens(&bodies)
}

fn run_once(dir: &std::path::Path, driver: Driver, fake: Option<&Fake>, shape: Shape) -> Measured {
    let root = Utf8PathBuf::from_path_buf(dir.to_path_buf()).unwrap();
    std::fs::create_dir_all(dir.join("ws/notes")).unwrap();
    for i in 0..shape.steps {
        let line = format!("hello {i}\n");
        let text: String = line.repeat(shape.note_bytes / line.len() + 1).chars().take(shape.note_bytes).collect();
        std::fs::write(dir.join(format!("ws/notes/n{i}.txt")), text).unwrap();
    }
    let mut g = Global {
        workspace: root.join("ws"),
        quiet: true,
        max_steps: Some(shape.steps as u32 + 5),
        ..Default::default()
    };
    match driver {
        Driver::Scripted => {
            std::fs::write(dir.join("script.yaml"), script()).unwrap();
            g.script = Some(root.join("script.yaml"));
        }
        Driver::Http(addr) => {
            let mut cfg =
                format!("llm:\n  provider: openai\n  base_url: http://{addr}/v1\n  model: fake\n  attempts: 1\n");
            if let Some(fuse) = shape.fuse {
                let _ = writeln!(cfg, "  fuse_phases: {fuse}");
            }
            std::fs::write(dir.join("agentloop.yaml"), cfg).unwrap();
            g.config = Some(root.join("agentloop.yaml"));
        }
    }
    let ctx = agentloop_engine::settings::build(&g).unwrap();
    let session = ctx.ws.lock(None).unwrap();
    let mut env = Env::new(&ctx).unwrap();
    env.hold(&session);
    let mut state =
        phases::init::init_run(&session, ctx.config(), &env.tpl, "read many files", "", false, None).unwrap();
    if let Some(f) = fake {
        f.reset();
    }
    let wire = agentloop_model::model::http::time_on_the_wire();
    let start = Instant::now();
    let stop = phases::run::drive(&mut env, &mut state, std::time::Duration::from_secs(600), &mut phases::run::Here)
        .unwrap()
        .stopped();
    // The checkpoint that releasing the lock takes (files fsynced) belongs to the run's cost.
    session.checkpoint().unwrap();
    let wall_ms = start.elapsed().as_secs_f64() * 1000.0;
    let wire_ms = (agentloop_model::model::http::time_on_the_wire() - wire).as_secs_f64() * 1000.0;
    assert_eq!(stop, Some(agentloop_workspace::workspace::StopKind::Done), "the bench run must finish done");
    let server_ms = fake.map_or(0.0, Fake::busy_ms);
    let (entries, _) = agentloop_types::trace::read(&ctx.ws.trace()).unwrap();
    if let Driver::Http(_) = driver {
        // A fused plan's entry names the model but has no usage: its call is the reflection's.
        // (run.finished carries the run's totals.)
        let calls =
            entries.iter().filter(|e| e.usage.is_some() && e.phase != Some(agentloop_types::trace::Phase::Run)).count();
        if shape.fuse != Some(false) {
            assert_eq!(calls, shape.steps + 2, "frame, the first plan, then one call per step");
        } else {
            assert_eq!(calls, 2 * shape.steps + 1, "one model call per frame, plan and reflect");
        }
    }
    let plan_prompts =
        entries.iter().filter(|e| e.event == Event::Plan).map(|e| (e.step, e.prompt_bytes.unwrap_or(0))).collect();
    Measured { wall_ms, wire_ms, server_ms, plan_prompts }
}

/// A local OpenAI-compatible fake: a minimal HTTP/1.1 server on 127.0.0.1 (keep-alive,
/// `Content-Length` bodies) speaking the Chat Completions wire format. It answers the forced
/// answer tool named in `tool_choice` at once, in the order the scripted bench uses, and adds up
/// the time it spends per request — from the request's first bytes to the reply written — so
/// the bench can tell the client's own cost from the server's. One thread per connection reads
/// and answers directly (no hand-off between threads that would be counted as the client's).
struct Fake {
    addr: std::net::SocketAddr,
    busy_ns: std::sync::Arc<std::sync::atomic::AtomicU64>,
    counts: std::sync::Arc<std::sync::Mutex<(usize, usize)>>,
    /// Connections accepted: the client keeps one alive, so this stays at one per run.
    connections: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Every request body received since the last reset, in order (the token count reads them).
    bodies: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

impl Fake {
    /// A fake for runs of `steps` steps (the reflection of the last says done).
    fn start(steps: usize) -> Fake {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let busy_ns = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counts = std::sync::Arc::new(std::sync::Mutex::new((0usize, 0usize)));
        let (busy, seen) = (busy_ns.clone(), counts.clone());
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let accepted = connections.clone();
        let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = bodies.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (busy, seen, kept) = (busy.clone(), seen.clone(), kept.clone());
                std::thread::spawn(move || serve_connection(conn, steps, &busy, &seen, &kept));
            }
        });
        Fake { addr, busy_ns, counts, connections, bodies }
    }

    fn reset(&self) {
        self.busy_ns.store(0, std::sync::atomic::Ordering::Relaxed);
        *self.counts.lock().unwrap() = (0, 0);
        self.bodies.lock().unwrap().clear();
    }

    fn busy_ms(&self) -> f64 {
        self.busy_ns.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e6
    }
}

/// Answers requests on one connection until the client closes it.
fn serve_connection(
    mut conn: std::net::TcpStream,
    steps: usize,
    busy: &std::sync::atomic::AtomicU64,
    seen: &std::sync::Mutex<(usize, usize)>,
    bodies: &std::sync::Mutex<Vec<serde_json::Value>>,
) {
    use std::io::{Read, Write};
    let _ = conn.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        // The head, then the body its Content-Length names.
        let mut started = None;
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    started.get_or_insert_with(Instant::now);
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
        };
        let started = started.unwrap_or_else(Instant::now);
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: serde_json::Value = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or_default();
        buf.drain(..head_end + len);
        let tool = body.pointer("/tool_choice/function/name").and_then(|n| n.as_str()).unwrap_or("").to_string();
        let args = answer(&tool, steps, &mut seen.lock().unwrap());
        let reply = serde_json::json!({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}
        })
        .to_string();
        let out = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
            reply.len()
        );
        if conn.write_all(out.as_bytes()).is_err() {
            return;
        }
        busy.fetch_add(started.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        // Kept after the reply is timed: what the token count needs is not the server's cost.
        bodies.lock().unwrap().push(body);
    }
}

/// The fake's answer for a forced tool; `seen` counts (plans, reflections) answered so far.
fn answer(tool: &str, steps: usize, seen: &mut (usize, usize)) -> serde_json::Value {
    use serde_json::json;
    match tool {
        "frame_answer" => {
            json!({"goal": "read many files", "definition_of_done": ["read all notes", "summarise them", "write the summary"], "can_proceed": true})
        }
        "plan_answer" => {
            let i = seen.0;
            seen.0 += 1;
            json!({"outline": [format!("read note {i}"), "read the rest", "write summary"],
                "next_action": {"tool": "file_read", "args": {"path": format!("notes/n{i}.txt")}},
                "expected_outcome": format!("note {i} text"), "rationale": "next note in order"})
        }
        "reflect_answer" => {
            let i = seen.1;
            seen.1 += 1;
            if i + 1 == steps {
                json!({"satisfied": [{"item": 1, "steps": [steps]}, {"item": 2, "steps": [steps]}, {"item": 3, "steps": [steps]}], "decision": "done", "reason": "all read", "outcome": "read every note"})
            } else {
                json!({"facts": [format!("note {i} says hello {i} (step {})", i + 1)], "decision": "continue", "reason": "more notes to read"})
            }
        }
        "reflect_plan_answer" => {
            let reflect = answer("reflect_answer", steps, seen);
            if reflect["decision"] == "done" {
                json!({"reflect": reflect})
            } else {
                json!({"reflect": reflect, "plan": answer("plan_answer", steps, seen)})
            }
        }
        other => json!({"error": format!("no answer for {other}")}),
    }
}

/// Per step (ms), for the median of three runs by agentloop's own time (wall minus time on the
/// wire): own, wall, on the wire, in the fake server; each run's own time in the order run; the
/// median run's plan prompt sizes.
struct PerStep {
    own: f64,
    wall: f64,
    wire: f64,
    server: f64,
    each: String,
    plan_prompts: Vec<(u32, u64)>,
}

fn loop_per_step(driver: Driver, fake: Option<&Fake>) -> PerStep {
    let mut runs = Vec::new();
    let mut kept = Vec::new();
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        runs.push(run_once(dir.path(), driver, fake, OVERHEAD));
        // Removed at the end, not between runs: a run should not pay for the last one's files.
        kept.push(dir);
    }
    let own = |r: &Measured| (r.wall_ms - r.wire_ms) / STEPS as f64;
    let each: Vec<String> = runs.iter().map(|r| format!("{:.2}", own(r))).collect();
    runs.sort_by(|a, b| own(a).partial_cmp(&own(b)).unwrap());
    let m = runs.swap_remove(1);
    let per = |x: f64| x / STEPS as f64;
    PerStep {
        own: own(&m),
        wall: per(m.wall_ms),
        wire: per(m.wire_ms),
        server: per(m.server_ms),
        each: each.join(", "),
        plan_prompts: m.plan_prompts,
    }
}

/// Streams a 200k-line trace through the same reader `trace show` uses; returns lines per second.
fn trace_throughput() -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let path = Utf8PathBuf::from_path_buf(dir.path().join("trace.jsonl")).unwrap();
    let mut text = String::new();
    for i in 0..200_000u32 {
        let mut e = agentloop_types::trace::Entry::new(
            "01KDVDNA000000000000000000",
            i / 3,
            agentloop_types::trace::Phase::Act,
            Event::Act,
        );
        e.tool = Some("file_read".into());
        e.result_status = Some(ToolStatus::Ok.into());
        e.result_summary = Some(format!("read {i} bytes of notes"));
        e.duration_ms = Some(3);
        text.push_str(&e.to_line());
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    let start = Instant::now();
    let mut n = 0u64;
    agentloop_types::trace::scan(&path, |r| n += r.is_ok() as u64).unwrap();
    n as f64 / start.elapsed().as_secs_f64()
}

/// One timed `trace show`: what it read, its seconds, the entries it printed.
type Timed = (&'static str, f64, usize);

/// `trace show --json --phase act` over a 500,000-line trace of about 300 MB (30% act entries,
/// ~600 bytes a line) as the binary runs it, with `--all-runs` and for the latest run, beside
/// `grep -c` counting the same lines in the same file. Returns each timed `trace show`, grep's
/// time (None when there is no grep) and the lines grep counted.
fn trace_show_vs_grep() -> (Vec<Timed>, Option<f64>, Option<usize>) {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_agentloop");
    let status = std::process::Command::new(bin)
        .args(["init", "ws", "--goal", "read a long trace"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "agentloop init failed");
    let path = dir.path().join("ws/trace.jsonl");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let note = "the page lists the release notes of every version since the first, with dates and authors; ".repeat(4);
    for i in 0..500_000u32 {
        let (phase, event) = match i % 10 {
            0..=2 => (agentloop_types::trace::Phase::Act, Event::Act),
            3..=6 => (agentloop_types::trace::Phase::Plan, Event::Plan),
            _ => (agentloop_types::trace::Phase::Reflect, Event::Reflect),
        };
        let mut e = agentloop_types::trace::Entry::new("01KDVDNA000000000000000000", i / 10, phase, event);
        e.ts = "2026-01-01T00:00:00.000Z".into();
        e.duration_ms = Some(u64::from(i % 997));
        if phase == agentloop_types::trace::Phase::Act {
            e.tool = Some("web_fetch".into());
            e.args = Some(serde_json::json!({"url": format!("https://example.com/notes/{i}")}));
            e.result_status = Some(ToolStatus::Ok.into());
            e.result_summary = Some(note.clone());
        } else {
            e.model = Some("gpt-4o-mini".into());
            e.usage =
                Some(agentloop_types::trace::Usage { input_tokens: 1200, output_tokens: 80, ..Default::default() });
            e.cost_usd = Some(0.0003);
            e.reason = Some(note.clone());
        }
        std::io::Write::write_all(&mut w, e.to_line().as_bytes()).unwrap();
        std::io::Write::write_all(&mut w, b"\n").unwrap();
    }
    std::io::Write::flush(&mut w).unwrap();
    // On disk before any timing, so the kernel's writeback of 300 MB is not timed with a read.
    w.get_ref().sync_all().unwrap();
    drop(w);
    // Each command runs once to warm the page cache and then three times, its output going to a
    // file (as `> out.jsonl` would: a pipe would time the reader too, and GNU grep stops at the
    // first match when its output is /dev/null); the best time counts, for agentloop and grep
    // alike (the others are the machine's noise). Returns the time and the output's lines.
    let out_path = dir.path().join("out.txt");
    let best = |cmd: &mut dyn FnMut() -> std::process::Command| {
        let mut secs = f64::MAX;
        for round in 0..4 {
            let file = std::fs::File::create(&out_path).unwrap();
            let start = Instant::now();
            let status = cmd().stdout(file).status().unwrap();
            if round > 0 {
                secs = secs.min(start.elapsed().as_secs_f64());
            }
            assert!(status.success(), "{:?} failed", cmd());
        }
        (secs, std::fs::read_to_string(&out_path).unwrap())
    };
    // Every run's entries, and (what a plain `trace show` reads) the latest run's, which must
    // first be found: here the whole trace is one run.
    let mut ours = Vec::new();
    for (label, all) in [("--all-runs", true), ("the latest run", false)] {
        let mut args = vec!["-w", "ws", "trace", "show", "--json", "--phase", "act"];
        args.extend(all.then_some("--all-runs"));
        let (secs, out) = best(&mut || {
            let mut c = std::process::Command::new(bin);
            c.args(&args).current_dir(dir.path()).stderr(std::process::Stdio::null());
            c
        });
        ours.push((label, secs, out.lines().count()));
    }
    let grep = std::process::Command::new("grep").arg("--version").output().is_ok().then(|| {
        best(&mut || {
            let mut c = std::process::Command::new("grep");
            c.args(["-c", "\"phase\":\"act\""]).arg(&path);
            c
        })
    });
    let counted = grep.as_ref().and_then(|(_, g)| g.trim().parse().ok());
    (ours, grep.map(|(s, _)| s), counted)
}

/// Memory search over 100,000 entries: the index is built once per process (the load and
/// build are reported separately), a search must stay under 50 ms.
fn memory_search() -> (f64, f64) {
    // Text like notes: stop words (not indexed) and a Zipf-like vocabulary of 20,000 words
    // (a word's rank r is drawn with probability falling as 1/r, as in natural text).
    let tail: Vec<String> = (0..20_000).map(|i| format!("term{i}")).collect();
    let mut rng = 7u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let entries: Vec<agentloop_workspace::longterm::Memory> = (0..100_000)
        .map(|i| {
            let text: Vec<&str> = (0..24)
                .map(|k| {
                    if k % 4 == 0 {
                        return "the";
                    }
                    let u = (next() % 1_000_000) as f64 / 1_000_000.0;
                    let rank = (20_000f64.powf(u) as usize).saturating_sub(1).min(tail.len() - 1);
                    tail[rank].as_str()
                })
                .collect();
            agentloop_workspace::longterm::Memory {
                id: format!("bench/content_{i}"),
                topic: "bench".into(),
                summary: text[..6].join(" "),
                keywords: vec![],
                content: text.join(" "),
                provenance: Default::default(),
                created_at: String::new(),
                expires_at: None,
            }
        })
        .collect();
    let start = Instant::now();
    let index = agentloop_workspace::longterm::Index::build(entries);
    let build_ms = start.elapsed().as_secs_f64() * 1000.0;
    let start = Instant::now();
    let n = 20;
    for i in 0..n {
        // A query mixes a frequent word (rank 10-30), a middling one and a rare one.
        let q = format!("the {} {} {}", tail[10 + i], tail[200 + i * 37], tail[2000 + i * 101]);
        std::hint::black_box(index.search(&q, 5));
    }
    (build_ms, start.elapsed().as_secs_f64() * 1000.0 / n as f64)
}

/// Prints the size of the agentloop binary cargo built beside this bench: the release profile,
/// symbols stripped, so what `cargo install` puts on a user's disk.
fn binary_size() {
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_agentloop"));
    let shown = std::env::current_dir().ok().and_then(|d| path.strip_prefix(d).ok()).unwrap_or(path);
    match std::fs::metadata(path) {
        Ok(m) => println!(
            "binary size:   {:.1} MiB ({} bytes) {}",
            m.len() as f64 / (1024.0 * 1024.0),
            m.len(),
            shown.display()
        ),
        Err(e) => println!("binary size:   unknown ({}: {e})", path.display()),
    }
}

/// The median wall time of `agentloop --version` over 101 runs (after 5 unmeasured ones): the
/// whole process, as a script that calls agentloop pays for it.
fn startup_ms() -> Option<f64> {
    let run = || {
        let t = Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentloop")).arg("--version").output().ok()?;
        out.status.success().then(|| t.elapsed().as_secs_f64() * 1000.0)
    };
    for _ in 0..5 {
        run()?;
    }
    let mut times: Vec<f64> = (0..101).map(|_| run()).collect::<Option<_>>()?;
    times.sort_by(f64::total_cmp);
    Some(times[50])
}

fn main() {
    // `cargo bench --bench loop -- NAME...` runs only the named parts: scripted, http, tokens,
    // trace, trace-show, memory, size.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let wants = |part: &str| only.is_empty() || only.iter().any(|o| o == part);
    // Private cache and data folders (the wire-form cache, long-term memory), so the bench
    // never touches the user's.
    let private = tempfile::tempdir().unwrap();
    std::env::set_var("XDG_CACHE_HOME", private.path().join("cache"));
    std::env::set_var("XDG_DATA_HOME", private.path().join("data"));
    let mut ok = true;
    let mut miss = |what: &str| {
        println!("MISSED: {what}");
        ok = false;
    };
    if wants("scripted") {
        let m = loop_per_step(Driver::Scripted, None);
        println!(
            "loop overhead: {:.2} ms per plan→act→reflect step, scripted model (median of 3 runs of {STEPS} steps: {}; real tools, journaled commits; target ≤ 2 ms)",
            m.own, m.each
        );
        let first = m.plan_prompts.first().map(|p| p.1).unwrap_or(0) as f64;
        let last = m.plan_prompts.last().map(|p| p.1).unwrap_or(0) as f64;
        let growth = if first > 0.0 { last / first } else { 0.0 };
        println!("plan prompt:   {first:.0} bytes at step 1, {last:.0} bytes at step {STEPS} (×{growth:.2}; ≈{:.0} → {:.0} tokens)", first / 4.0, last / 4.0);
        if m.own > 2.0 {
            miss("per-step overhead with the scripted model (≤ 2 ms)");
        }
        if !(0.8..=1.2).contains(&growth) {
            miss("flat prompt target (within 20%)");
        }
    }
    if wants("http") {
        let fake = Fake::start(STEPS);
        let m = loop_per_step(Driver::Http(fake.addr), Some(&fake));
        let conns = fake.connections.load(std::sync::atomic::Ordering::Relaxed);
        println!(
            "loop overhead: {:.2} ms per step against a local HTTP fake (median of 3 runs: {}; {:.2} ms wall, of which {:.2} ms on the wire for two model calls over the OpenAI wire format — {:.2} ms of it in the fake server; {conns} connections in all; target ≤ 2 ms)",
            m.own, m.each, m.wall, m.wire, m.server
        );
        if m.own > 2.0 {
            miss("per-step overhead against the HTTP fake (≤ 2 ms)");
        }
    }
    if wants("tokens") {
        // Twice: as a provider that caches the prompt's prefix is sent (the fake is on
        // 127.0.0.1, a local server's slot: one shared prefix), and as any other is (each phase
        // its smallest prompt; the hidden switch stands in for a remote server).
        let cached = token_run(TOKENS);
        let unfused = token_run(Shape { fuse: Some(false), ..TOKENS });
        std::env::set_var("AGENTLOOP_UNSHARED_PREFIX", "1");
        let uncached = token_run(TOKENS);
        std::env::remove_var("AGENTLOOP_UNSHARED_PREFIX");
        for (how, c) in [
            ("default config, prefix-cached provider, one shared prefix (reflect and plan fused)", &cached),
            ("prefix-cached provider, one shared prefix, reflect and plan apart (llm.fuse_phases: false)", &unfused),
            ("default config, uncached provider, smallest prompts (reflect and plan fused)", &uncached),
        ] {
            let per: Vec<String> =
                c.phases.iter().map(|(p, (n, t, u))| format!("{p} {t} in {n} calls ({u} uncovered)")).collect();
            println!(
                "prompt tokens: {} over the {}-step run, {} KB tool output per step, {how} (bytes/4): {}",
                c.total,
                TOKENS.steps,
                TOKENS.note_bytes / 1024,
                per.join(", ")
            );
            println!(
                "               first request {} tokens; not covered by a prefix cache: {} (whole messages), {} (Anthropic breakpoints, ≥ 1024-token prefixes); ×{:.3} llm's total, uncovered ×{:.3}",
                c.first,
                c.uncovered,
                c.anthropic,
                c.total as f64 / LLM_TOTAL as f64,
                c.uncovered as f64 / LLM_TOTAL as f64
            );
        }
        println!(
            "               the anchors, as measured on the same run shape and fake server: llm 0.36 {LLM_TOTAL} total, first request {LLM_FIRST}; smolagents {SMOLAGENTS_TOTAL} total, first request {SMOLAGENTS_FIRST}. Targets: first ≤ 2000 (all), billed in full ≤ 0.30× llm's total for an uncached provider, total ≤ 0.30× and uncovered ≤ 0.25× for a cached one (the default config)"
        );
        if cached.first.max(uncached.first).max(unfused.first) > 2000 {
            miss("first request ≤ 2000 tokens");
        }
        if cached.total * 10 > LLM_TOTAL * 3 {
            miss("prompt tokens of a cached provider ≤ 0.30× llm's");
        }
        if uncached.total * 10 > LLM_TOTAL * 3 {
            miss("prompt tokens of an uncached provider ≤ 0.30× llm's");
        }
        if cached.uncovered * 4 > LLM_TOTAL {
            miss("uncovered prompt tokens of a cached provider ≤ 0.25× llm's");
        }
    }
    if wants("trace") {
        let lps = trace_throughput();
        println!("trace reading: {lps:.0} entries per second (streamed, constant memory; target > 100000)");
        if lps < 100_000.0 {
            miss("trace reading target (> 100000 entries/s)");
        }
    }
    if wants("trace-show") {
        let (ours, grep, counted) = trace_show_vs_grep();
        for (label, secs, shown) in ours {
            match grep {
                Some(g) => {
                    println!(
                        "trace show:    {secs:.2} s for `trace show --json --phase act` ({label}) over 500000 lines ({shown} entries) vs {g:.2} s for `grep -c` ({} lines): ×{:.1} (target ≤ 3)",
                        counted.map_or("?".into(), |c: usize| c.to_string()),
                        secs / g
                    );
                    if secs > 3.0 * g {
                        miss("trace show within 3× grep -c");
                    }
                }
                None => println!(
                    "trace show:    {secs:.2} s ({label}) over 500000 lines ({shown} entries); no grep to compare with"
                ),
            }
            if shown != 150_000 || counted.is_some_and(|c| c != shown) {
                miss("trace show printed every act entry and nothing else (150000)");
            }
        }
    }
    if wants("memory") {
        let (build_ms, search_ms) = memory_search();
        println!("memory search: {search_ms:.1} ms per query over 100000 entries (BM25; target < 50 ms); index built in {build_ms:.0} ms");
        if search_ms >= 50.0 {
            miss("memory search target (< 50 ms)");
        }
    }
    if wants("size") {
        binary_size();
        match startup_ms() {
            Some(ms) => {
                println!("start-up:      {ms:.1} ms for `agentloop --version` (median of 101; target <= 3 ms)");
                // Only an optimised build is held to it (`cargo bench` builds one).
                if ms > 3.0 && !cfg!(debug_assertions) {
                    miss("start-up target (<= 3 ms)");
                }
            }
            None => miss("`agentloop --version` failed"),
        }
    }
    if ok {
        println!("all targets met");
    }
    std::process::exit(if ok { 0 } else { 1 });
}
