//! `agentloop worker`: runs goals from a Redis stream, several workers (on one machine or many)
//! sharing one root folder of runs.
//!
//! Invariants:
//! - Redis carries only requests and outcomes; each run's state is its folder
//!   `<root>/runs/<id>/`, created and driven with the library code `serve` uses
//!   ([`agentloop_engine::lifecycle::go_on`], the root's configuration narrowed by the request's budgets).
//! - A message's run id is derived from its idempotency key ([`request`]): a delivery of a
//!   finished run publishes nothing new, one of an unfinished run resumes it from its journal.
//!   The run's lock (a `flock` on its folder) makes sure one worker drives it at a time.
//! - A message is acknowledged only after its run's outcome is durable (the run's lock released,
//!   its journal checkpointed) and published; publishing and acknowledging are one Redis script
//!   ([`streams::publish`]).
//! - While a run goes on, a heartbeat thread re-claims the worker's messages every third of
//!   `--claim-idle`; any worker takes over a message idle for longer (a worker killed, or cut
//!   off), and a message delivered more than `--max-deliveries` times, or one no worker could
//!   ever run (a bad request, budgets wider than the root allows), goes to the dead-letter
//!   stream with the reason.
//! - A request with `run` goes on with a run already under the root, whichever door started it
//!   ([`go_on`]): an answer or a continue, applied once however often it is delivered.
//! - SIGTERM (or SIGINT, SIGHUP) drains the worker: it takes no new message, each run it drives
//!   finishes the phase under way, commits it and stops there, and its message is handed back
//!   (pending, its idle time set past `--claim-idle` and its delivery not counted), so another
//!   worker takes it over at once and goes on from that commit. Then the worker exits 0. A
//!   second signal ends it at once, as `run` ends: every committed phase is kept and the message
//!   is taken over after `--claim-idle`.

mod go_on;
pub mod request;
pub mod series;
pub mod streams;
pub mod view;

use agentloop_engine::lifecycle::Request;
use agentloop_engine::phases::Env;
use agentloop_engine::settings::Global;
use agentloop_io::output::Printer;
use agentloop_types::error::ResultExt;
use agentloop_types::error::{Error, Kind, Result};
use agentloop_workspace::workspace::{State, Workspace};
use camino::Utf8PathBuf;
use request::{RunRequest, Triage};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use streams::{Delivery, Link, Names};

/// What `worker` was asked to do.
pub struct Options {
    pub root: Utf8PathBuf,
    pub redis: String,
    pub stream: String,
    pub concurrency: usize,
    pub claim_idle: Duration,
    pub max_deliveries: u64,
    pub consumer: Option<String>,
    /// The agent's own mode switches after a run stops, as every door hands them to the engine.
    pub modes: &'static dyn agentloop_engine::lifecycle::Modes,
}

/// What the worker's threads share.
struct Worker {
    root: Utf8PathBuf,
    runs_dir: String,
    global: Global,
    names: Names,
    redis: String,
    consumer: String,
    claim_idle: Duration,
    max_deliveries: u64,
    printer: Printer,
    /// Messages this process is working on (the heartbeat keeps them claimed).
    held: Mutex<BTreeSet<String>>,
    modes: &'static dyn agentloop_engine::lifecycle::Modes,
}

/// What a message asked for, kept beside the runs (outside every run's folder, so no tool of a
/// run can change it) and used whenever the run is driven again: the one record every door keeps.
pub use agentloop_engine::runs_root::{Door, RunRecord};

impl Worker {
    fn log(&self, msg: &str) {
        self.printer.info(&format!("{} {msg}", agentloop_types::clock::now_rfc3339()));
    }

    fn link(&self) -> Result<Link> {
        Link::open(&self.redis, "--redis", self.printer, None)
    }

    fn hold(&self, id: &str, on: bool) {
        let mut g = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if on {
            g.insert(id.to_string());
        } else {
            g.remove(id);
        }
    }
}

/// Joins the consumer group and works until the process is stopped.
pub fn main(g: &Global, o: Options) -> Result<u8> {
    if o.concurrency == 0 {
        return Err(Error::usage("--concurrency must be at least 1"));
    }
    if o.max_deliveries == 0 {
        return Err(Error::usage("--max-deliveries must be at least 1"));
    }
    if o.claim_idle < Duration::from_secs(1) {
        return Err(Error::usage("--claim-idle must be at least 1s"));
    }
    let printer = Printer::new(g.quiet, g.verbose, g.json, g.color);
    let agentloop_engine::runs_root::Root { root, global, runs_dir, .. } =
        agentloop_engine::runs_root::prepare(g, &o.root)?;
    let names = Names::new(&o.stream)?;
    let consumer = o.consumer.clone().unwrap_or_else(default_consumer);
    let w = Arc::new(Worker {
        root,
        runs_dir,
        global,
        names,
        redis: o.redis.clone(),
        consumer,
        claim_idle: o.claim_idle,
        max_deliveries: o.max_deliveries,
        printer,
        held: Mutex::new(BTreeSet::new()),
        modes: o.modes,
    });
    let mut link = w.link()?;
    link.call("create the consumer group", |c| streams::ensure_group(c, &w.names))?;
    agentloop_tools::interrupt::drain_on_signal();
    w.log(&format!(
        "worker {} on {} (group {}) with {} run(s) at once; runs under {}/{}",
        w.consumer,
        streams::shown_url(&w.redis),
        w.names.group,
        o.concurrency,
        w.root,
        w.runs_dir
    ));
    let beat = w.clone();
    std::thread::Builder::new()
        .name("heartbeat".into())
        .spawn(move || heartbeat(&beat))
        .context("cannot start a thread")?;
    let mut threads = Vec::new();
    for i in 0..o.concurrency {
        let w = w.clone();
        let t = std::thread::Builder::new()
            .name(format!("worker-{i}"))
            .spawn(move || work(&w))
            .context("cannot start a thread")?;
        threads.push(t);
    }
    for t in threads {
        let _ = t.join();
    }
    if agentloop_tools::interrupt::draining() {
        w.log(&format!(
            "worker {} drained: it took no new message and every run it drove stopped at a commit point",
            w.consumer
        ));
        return Ok(agentloop_types::error::code::OK);
    }
    Err(Error::failure("the worker stopped"))
}

/// A consumer name unique to this process: the host's name and the pid.
fn default_consumer() -> String {
    let host = agentloop_io::fs::read_optional(camino::Utf8Path::new("/proc/sys/kernel/hostname"))
        .ok()
        .flatten()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    format!("{host}-{}", std::process::id())
}

/// Re-claims the messages being worked on, well inside the idle limit.
fn heartbeat(w: &Worker) {
    let Ok(mut link) = w.link() else { return };
    loop {
        std::thread::sleep(w.claim_idle / 3);
        let ids: Vec<String> = w.held.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
        if let Err(e) = link.call("keep its claims fresh", |c| streams::refresh(c, &w.names, &w.consumer, &ids)) {
            w.printer.warn(&e.detail());
        }
    }
}

/// One thread: the next message (an idle one first, then a new one), handled, forever.
fn work(w: &Worker) {
    let mut link = match w.link() {
        Ok(l) => l,
        Err(e) => return w.printer.warn(&e.detail()),
    };
    loop {
        agentloop_tools::interrupt::park_if_interrupted();
        if agentloop_tools::interrupt::draining() {
            return;
        }
        let next = link
            .call("claim idle messages", |c| streams::claim_idle(c, &w.names, &w.consumer, w.claim_idle))
            .and_then(|d| match d {
                Some(d) => Ok(Some(d)),
                None => link
                    .call("read the stream", |c| streams::read_new(c, &w.names, &w.consumer, Duration::from_secs(1))),
            });
        match next {
            Ok(Some(d)) => {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle(w, &mut link, &d)));
                if r.is_err() {
                    w.printer.warn(&format!("message {}: internal error (see above); it stays pending", d.id));
                    w.hold(&d.id, false);
                }
            }
            Ok(None) => {}
            Err(e) => {
                w.printer.warn(&e.to_string());
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

/// Handles one delivery: runs it (or resumes or reports its run), publishes the outcome and
/// acknowledges it; or dead-letters it; or, on an error that may pass, leaves it pending.
fn handle(w: &Worker, link: &mut Link, d: &Delivery) {
    // Too large, as measured in Redis: dead-lettered naming the field, nothing of it read.
    if let Some(why) = &d.oversized {
        return dead(w, link, d, why);
    }
    let last = link.call("read the last error", |c| streams::last_error(c, &w.names, &d.id)).ok().flatten();
    let (req, run_id) =
        match request::triage(&d.id, d.request.as_deref(), d.deliveries, w.max_deliveries, last.as_deref()) {
            Triage::Run { request, run_id } => (request, run_id),
            Triage::Dead(reason) => return dead(w, link, d, &reason),
        };
    w.hold(&d.id, true);
    let result = match req.go_on() {
        Some(g) => go_on::drive(w, &req, g, &d.id),
        None => drive(w, &req, &run_id, &d.id),
    };
    let result = result.and_then(|state| {
        let key = req.idempotency_key(&d.id);
        let outcome = request::outcome(&state, &key).to_string();
        let published = streams::Published { run_id: &run_id, outcome_id: &req.outcome_id(&d.id), outcome: &outcome };
        let fresh = link.call("publish the outcome", |c| streams::publish(c, &w.names, &d.id, &published))?;
        Ok((state, fresh))
    });
    w.hold(&d.id, false);
    match result {
        Ok((state, fresh)) => w.log(&format!(
            "run {run_id} {} ({}); message {} {}",
            state.status.as_str(),
            state.ended_as().as_str(),
            d.id,
            if fresh { "acknowledged, outcome published" } else { "acknowledged (outcome was published before)" }
        )),
        Err(e) if permanent(&e) && e.message.starts_with(&format!("run {run_id} ")) => dead(w, link, d, &e.message),
        Err(e) if permanent(&e) => dead(w, link, d, &format!("run {run_id}: {}", e.detail())),
        Err(_) if agentloop_tools::interrupt::draining() => hand_back(w, link, d, &run_id),
        Err(e) => {
            w.printer.warn(&format!(
                "run {run_id}: {}; message {} stays pending (delivery {} of at most {})",
                e.detail(),
                d.id,
                d.deliveries,
                w.max_deliveries
            ));
            let _ = link.call("record the error", |c| streams::note_error(c, &w.names, &d.id, &e.detail()));
        }
    }
}

/// A draining worker's run stopped at a commit point: its message goes back to the group for
/// another worker to take over at once (this delivery not counted against `--max-deliveries`).
fn hand_back(w: &Worker, link: &mut Link, d: &Delivery, run_id: &str) {
    let state =
        agentloop_engine::runs_root::enter(&w.root, &w.runs_dir, run_id, false).and_then(|ws| ws.load_state()).ok();
    let at = state.map(|s| format!(" at step {}", s.step)).unwrap_or_default();
    let back = d.deliveries.saturating_sub(1);
    match link.call("hand the message back", |c| streams::hand_back(c, &w.names, &w.consumer, &d.id, back)) {
        Ok(()) => w.log(&format!(
            "run {run_id} stopped at a commit point{at}; message {} handed back for another worker",
            d.id
        )),
        Err(e) => w.printer.warn(&format!("{}; message {} is taken over after --claim-idle", e.detail(), d.id)),
    }
}

fn dead(w: &Worker, link: &mut Link, d: &Delivery, reason: &str) {
    match link.call("dead-letter a message", |c| streams::dead_letter(c, &w.names, d, reason)) {
        Ok(()) => w.printer.warn(&format!("message {} moved to {}: {reason}", d.id, w.names.dead)),
        Err(e) => w.printer.warn(&e.to_string()),
    }
}

/// Errors no later delivery can mend: the request or the configuration is wrong.
fn permanent(e: &Error) -> bool {
    matches!(e.kind, Kind::Usage | Kind::Config | Kind::Negotiation | Kind::Data)
}

/// Creates the run (first delivery), resumes it, or finds it ended; returns its ended state.
fn drive(w: &Worker, req: &RunRequest, run_id: &str, message_id: &str) -> Result<State> {
    let quiet = Printer { quiet: true, ..Default::default() };
    // A new run is checked in full before its folder is made, so a request no worker can run
    // (dead-lettered) leaves nothing under the root, not even a lock file.
    let unmade = Workspace::new(w.root.join(&w.runs_dir).join(run_id));
    let checked = if unmade.has_run() { None } else { Some(check_new(w, req, &unmade, quiet)?) };
    let ws = agentloop_engine::runs_root::enter(&w.root, &w.runs_dir, run_id, true)?;
    // Another worker may hold the run (a message delivered twice): wait for it, our claim kept.
    let session = loop {
        match ws.lock(Some(Duration::from_secs(1))) {
            Err(e) if e.kind == Kind::LockBusy && agentloop_tools::interrupt::draining() => {
                return Err(Error::failure(format!("run {run_id} is held by another worker; this one is draining")));
            }
            Err(e) if e.kind == Kind::LockBusy => agentloop_tools::interrupt::park_if_interrupted(),
            other => break other?,
        }
    };
    let (resolved, mut state, started) = if !ws.has_run() {
        let (resolved, judged) = match checked {
            Some(r) => r,
            None => check_new(w, req, &ws, quiet)?,
        };
        let cfg = &resolved.config;
        let tpl = agentloop_engine::phases::templates(&ws, cfg)?;
        let series = req.series_name();
        save_record(w, req, run_id, message_id, series.as_deref())?;
        let carried = match &series {
            Some(name) => series::carry(&w.root, &w.runs_dir, name, run_id, &ws)?,
            None => series::Carried::default(),
        };
        let (slot, judged) = (req.slot.as_deref(), judged.as_ref());
        let queued = agentloop_engine::phases::init::Queued { run_id, slot, carried: &carried.facts, judged };
        let mut state =
            agentloop_engine::phases::init::init_queued(&session, cfg, &tpl, &req.goal, &req.background(), queued)?;
        if series.is_some() {
            state.series = series.clone();
            // Written beside the journal: what the commit wrote is made durable first, so no
            // replay of the journal puts the state without its series back.
            session.checkpoint()?;
            session.save_state(&state)?;
        }
        for note in &carried.notes {
            w.printer.warn(&format!("run {run_id}: {note}"));
        }
        w.log(&format!("run {run_id} started for message {message_id}{}", started_from(series.as_deref(), &carried)));
        (resolved, state, true)
    } else {
        let rec = load_record(w, run_id)?;
        let (agent, budgets) = match &rec {
            Some(r) => (r.agent.as_deref(), &r.budgets),
            None => (req.agent.as_deref(), &req.budgets),
        };
        let resolved = agentloop_engine::runs_root::config(&w.global, &w.root, agent, budgets, false)?;
        let mut state = ws.load_state()?;
        if state.status.is_terminal() && !state.interrupted {
            return Ok(state);
        }
        // A worker cut off between the run's start and its state's series: the next commit
        // writes it.
        if state.series.is_none() {
            state.series = rec.and_then(|r| r.series);
        }
        w.log(&format!("run {run_id} goes on for message {message_id} (step {})", state.step));
        (resolved, state, false)
    };
    let mut env = Env::with(&ws, &resolved.config, quiet)?;
    env.hold(&session);
    if state.interrupted {
        state = agentloop_engine::lifecycle::reopen_for(&env, state, &Request::Continue { archived: None })?;
    }
    let _running = agentloop_tools::interrupt::run_in(&ws.root);
    agentloop_engine::lifecycle::go_on(&mut env, &mut state, &resolved.sources, started, true, w.modes)?;
    drop(env);
    // Releasing the lock checkpoints the journal: the outcome is durable before it is published.
    drop(session);
    Ok(state)
}

/// Everything that can refuse a new run `ws` before anything of it is written: its
/// configuration (the agent, budgets that may only narrow, the output schema), the model, the
/// rest window, and whether the goal fits its budget. Returns the run's configuration.
/// Returns the run's configuration and the model's verdict on it against the agent's values,
/// when admission asked (`values_check: model`).
fn check_new(
    w: &Worker,
    req: &RunRequest,
    ws: &Workspace,
    quiet: Printer,
) -> Result<(agentloop_config::config::Resolved, Option<agentloop_engine::phases::values::Verdict>)> {
    let resolved = agentloop_engine::runs_root::new_run_config(
        &w.global,
        &w.root,
        req.agent.as_deref(),
        &req.budgets,
        req.output_schema.as_ref(),
    )?;
    let start = agentloop_engine::lifecycle::Start {
        goal: req.goal.clone(),
        background: req.background(),
        carry: req.series_name().is_some(),
        force: req.force,
        slot: req.slot.clone(),
        follow_up: false,
        session: None,
    };
    // The one admission every door makes (key, rest, negotiation); of its environment only the
    // values verdict is kept, for the run's record.
    let judged = agentloop_engine::lifecycle::admit(ws, &resolved.config, quiet, Some(&start))?.values_judged;
    Ok((resolved, judged))
}

/// What a new run's log line says it started from: its series and the run it carried from.
fn started_from(series: Option<&str>, c: &series::Carried) -> String {
    let Some(name) = series else { return String::new() };
    let Some(from) = &c.from else { return format!(" (series {name}: no earlier run of it ended; nothing carried)") };
    let state = match &c.state {
        Some(copied) => format!(", state/ ({} file{})", copied.files, if copied.files == 1 { "" } else { "s" }),
        None => String::new(),
    };
    format!(" (series {name}: carried {} facts{state} from run {from})", c.facts.len())
}

fn save_record(w: &Worker, req: &RunRequest, run_id: &str, message_id: &str, series: Option<&str>) -> Result<()> {
    if agentloop_engine::runs_root::load_record(&w.root, run_id)?.is_some() {
        return Ok(());
    }
    let mut rec = RunRecord::new(run_id, Door::Queue, req.agent.clone(), req.budgets.clone());
    rec.key = Some(req.idempotency_key(message_id));
    rec.message_id = Some(message_id.into());
    rec.series = series.map(String::from);
    agentloop_engine::runs_root::save_record(&w.root, &rec)
}

/// Writes a run's record (durably: the run is driven again with what it says).
fn write_record(w: &Worker, rec: &RunRecord) -> Result<()> {
    agentloop_engine::runs_root::save_record(&w.root, rec)
}

fn load_record(w: &Worker, run_id: &str) -> Result<Option<RunRecord>> {
    agentloop_engine::runs_root::load_record(&w.root, run_id)
}
