//! A queued answer or continue (`enqueue --answer TEXT --run ID`, `enqueue --continue ID`): the
//! worker goes on with a run already under the root — one a worker, `serve` or `handle` started,
//! or one the CLI made in `ROOT/runs/<id>/` — as `agentloop answer` and `run --continue` do in
//! its folder: [`agentloop_engine::lifecycle::reopen_keyed`] under the run's lock, then
//! [`agentloop_engine::lifecycle::go_on`] as for a new run.
//!
//! Invariants:
//! - The request's idempotency key is recorded in the `run.answered` / `run.continued` entry of
//!   the commit that reopens the run; a delivery whose key the run's trace already names
//!   ([`agentloop_engine::lifecycle::reopened_by`]) never applies it again: it goes on with the run, or
//!   reports how it ended.
//! - A run another process holds is not waited for: the error may pass, so the message stays
//!   pending and is tried again after `--claim-idle` (dead-lettered past `--max-deliveries`).
//!   What the run does not allow — no such run, no question to answer, a done run, a continue
//!   that would stop again at once — is refused before anything is written, and dead-lettered.
//! - Budgets given raise the run's limits, each held to the root's as a new run's are; a
//!   worker's own run keeps them in its record, so any later drive of it uses them too.

use super::request::{GoOn, RunRequest};
use super::{load_record, write_record, Worker};
use agentloop_config::config::Resolved;
use agentloop_engine::lifecycle::Request;
use agentloop_io::output::Printer;
use agentloop_types::budget::Budgets;
use agentloop_types::error::{Error, Kind, Result};
use agentloop_workspace::workspace::{Limits, Next, Session, State, Status, Workspace};
use std::time::Duration;

/// Goes on with the run `g` names for message `message_id`; returns its state once it stopped.
pub(super) fn drive(w: &Worker, req: &RunRequest, g: GoOn<'_>, message_id: &str) -> Result<State> {
    let run_id = g.run();
    let key = req.idempotency_key(message_id);
    let quiet = Printer { quiet: true, ..Default::default() };
    let ws = agentloop_engine::runs_root::enter(&w.root, &w.runs_dir, run_id, false)?;
    if !ws.has_run() {
        return Err(Error::usage(format!("no run {run_id} under {}: its folder holds no run", w.root)));
    }
    let session = lock_run(&ws, run_id, g)?;
    let mut state = ws.load_state()?;
    let applied = agentloop_engine::lifecycle::reopened_by(&ws, &key)?;
    if applied && state.status.is_terminal() && !state.interrupted {
        return Ok(state);
    }
    // A worker's run is driven with its recorded agent and budgets, another door's with the
    // agent and limits it ran with; the budgets given now replace those they name, each held
    // to the root's limit as a new run's are.
    let mut rec = load_record(w, run_id)?;
    let given = req.budgets != Budgets::default();
    let (agent, base) = match &rec {
        Some(r) => (r.agent.clone(), r.budgets.clone()),
        None => (state.agent.clone(), recorded(&state.limits)),
    };
    if given && !applied {
        agentloop_engine::runs_root::config(&w.global, &w.root, agent.as_deref(), &req.budgets, true)?;
    }
    let budgets = base.replaced_by(&req.budgets);
    let resolved = agentloop_engine::runs_root::config(&w.global, &w.root, agent.as_deref(), &budgets, false)?;
    let mut env = agentloop_engine::lifecycle::admit(&ws, &resolved.config, quiet, None)?;
    env.hold(&session);
    if applied {
        w.log(&format!("run {run_id} goes on for message {message_id} (its {} was applied before)", g.verb()));
        if state.interrupted {
            state = agentloop_engine::lifecycle::reopen_for(&env, state, &Request::Continue { archived: None })?;
        }
    } else {
        if let GoOn::Continue { .. } = g {
            prepare_continue(&ws, &mut state, &resolved, run_id)?;
        }
        state = agentloop_engine::lifecycle::reopen_keyed(&env, state, &g.request(), Some(&key))?;
        let what = match g {
            GoOn::Answer { .. } => "answered",
            GoOn::Continue { .. } => "continued",
        };
        w.log(&format!("run {run_id} {what} for message {message_id}; it goes on from step {}", state.step));
    }
    // Kept for any later drive of the run (its start's message delivered again): written once
    // the request applied, and again by a delivery that finds it applied.
    if let (true, Some(r)) = (given, rec.as_mut()) {
        if r.budgets != budgets {
            r.budgets = budgets.clone();
            write_record(w, r)?;
        }
    }
    let _running = agentloop_tools::interrupt::run_in(&ws.root);
    agentloop_engine::lifecycle::go_on(&mut env, &mut state, &resolved.sources, false, true, w.modes)?;
    drop(env);
    // Releasing the lock checkpoints the journal: the outcome is durable before it is published.
    drop(session);
    Ok(state)
}

/// Locks run `run_id` for the drive, without waiting long: a run another process holds is
/// tried again later.
fn lock_run(ws: &Workspace, run_id: &str, g: GoOn<'_>) -> Result<Session> {
    ws.lock(Some(Duration::from_secs(1))).map_err(|e| match e.kind {
        Kind::LockBusy => Error::new(
            Kind::LockBusy,
            format!("run {run_id} is being driven elsewhere ({}); the {} is tried again later", e.detail(), g.verb()),
        )
        .with_source(e),
        _ => e,
    })
}

/// Readies a continue of run `run_id`: refuses one that waits for event mode's router or would
/// stop again at once over a limit, and marks a run that was cut off as interrupted.
fn prepare_continue(ws: &Workspace, state: &mut State, resolved: &Resolved, run_id: &str) -> Result<()> {
    // Event mode's run waiting for the result of a tool its router runs is not cut off.
    let waiting = state.pending.as_ref().filter(|p| p.handed_off && state.next == Next::Act);
    if let (Status::Running, Some(p)) = (state.status, waiting) {
        return Err(Error::usage(format!(
            "run {run_id} waits for the result of tool `{}` (step {}), which event mode's router runs; it goes on when that result comes",
            p.tool, p.step
        )));
    }
    // A run that says running while nobody holds its lock was cut off: it is continued
    // as an interrupted one (the trace records the continue, and with it this key).
    if !state.status.is_terminal() {
        state.interrupted = true;
    }
    let now = state.limits.in_force(&resolved.config, &resolved.sources);
    if let Some((b, e)) = agentloop_engine::lifecycle::still_over(ws, state, &now) {
        // Said in the message: a dead letter keeps only that.
        return Err(Error::usage(format!(
            "{}; raise it up to the root's limit: `agentloop {} N enqueue --continue {run_id}`",
            e,
            b.flag()
        )));
    }
    Ok(())
}

/// The limits a run recorded, as a request's budgets: a run another door started goes on with
/// them (narrowed to the root's), unless a request raises one.
fn recorded(l: &Limits) -> Budgets {
    Budgets {
        max_steps: Some(l.max_steps),
        max_reframes: Some(l.max_reframes),
        timeout: Some(agentloop_config::config::Dur(Duration::from_secs(l.timeout_secs))),
        max_tokens: l.max_tokens,
        max_cost_usd: l.max_cost_usd,
    }
}
