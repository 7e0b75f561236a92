//! The agent switches modes itself (`modes.auto`): after a run that leaves it tired or
//! stressed it rests — whichever door drove the run (`run`, `serve`, the worker, `handle`: each
//! passes [`AUTO`] to the engine's `lifecycle::go_on`/`drive_on`; the worker is handed it by
//! its command, `commands::worker`) — and a `run` with nothing to do dreams. Each switch is a trace entry of
//! the workspace's run (`agent.rested`, `agent.dreamed`) and a line on stderr; the rest is a
//! `rest` line of the usage ledger like `agentloop rest`'s, which `status` shows.
//!
//! Bounds: an automatic rest happens at most once per `rest.window` (a rest forgives part of
//! the window's usage; resting whenever the window fills would undo the limit), and an idle
//! dream calls a model only on the curiosity budget (`dream.curiosity`; none set: no call).

use super::dream::{dream_now, DreamArgs};
use super::rest::rest_now;
use agentloop_engine::phases::Env;
use agentloop_engine::settings::Ctx;
use agentloop_types::error::Result;
use agentloop_types::trace::{Entry, Event, Phase};
use agentloop_workspace::workspace::{Commit, State, StopKind};
use serde_json::{json, Value};

/// Why the agent should rest after `state`'s run, if it should.
fn tired(ctx: &Ctx, state: &State) -> Option<String> {
    let cfg = ctx.config();
    if state.stop == Some(StopKind::Resting) {
        return Some("its rolling usage window filled during the run".into());
    }
    if let Some(w) = agentloop_workspace::rest_window::current(cfg) {
        if w.resting.is_some() || w.fatigue > w.max_fatigue {
            return Some(format!("fatigue {}% is above rest.max_fatigue {}%", w.fatigue, w.max_fatigue));
        }
    }
    let s = agentloop_workspace::rest_window::stress(cfg, &ctx.ws.root);
    s.resting.is_some().then(|| format!("stress {} reached stress.threshold {}", s.level, s.threshold))
}

/// The agent's own mode switches, as every door hands them to the engine.
pub struct Auto;

/// What every door passes to the engine.
pub const AUTO: &Auto = &Auto;

impl agentloop_engine::lifecycle::Modes for Auto {
    fn after_stop(&self, env: &Env, state: &State) {
        let ctx = Ctx::for_run(env.ws.clone(), env.cfg.clone(), env.printer);
        rest_when_tired(&ctx, state, &|c| env.commit(c));
    }
}

/// After a run: rests the agent when the run left it tired or stressed (see the module docs);
/// the trace entry goes through `commit` (the run's lock is held by whoever drove it).
fn rest_when_tired(ctx: &Ctx, state: &State, commit: &dyn Fn(&Commit) -> Result<()>) {
    let cfg = ctx.config();
    if !cfg.modes.auto {
        return;
    }
    let Some(why) = tired(ctx, state) else { return };
    if let Some(at) = agentloop_workspace::rest_window::rested_within(cfg) {
        ctx.printer.info(&format!(
            "the agent is tired ({why}) but rested at {at}, within rest.window: it does not rest itself again; `agentloop rest` rests it"
        ));
        return;
    }
    let id = format!("{}{}", agentloop_workspace::rest_window::AUTO_REST, state.run_id);
    match rest_now(ctx, &id) {
        Ok(r) => {
            let data = json!({"why": why, "tasks": r.tasks, "before": r.before, "after": r.after, "auto": true});
            trace(ctx, state, Event::AgentRested, &why, data, commit);
            let pct = |v: &Value| v.as_f64().map(|f| format!("{f}%")).unwrap_or_else(|| "n/a".into());
            ctx.printer.info(&format!(
                "the agent rested itself ({why}): fatigue {} -> {}, stress {} -> {} (modes.auto: false turns this off)",
                pct(&r.before["fatigue"]),
                pct(&r.after["fatigue"]),
                r.before["stress"],
                r.after["stress"]
            ));
        }
        Err(e) => ctx.printer.warn(&format!("the agent could not rest itself: {}", e.detail())),
    }
}

/// A `run` with nothing to do: the agent dreams (consolidation with no model call, then
/// exploration on the curiosity budget). Nothing to consolidate or explore: no trace entry.
pub fn dream_when_idle(ctx: &Ctx, state: &State) {
    let cfg = ctx.config();
    if !cfg.modes.auto || !cfg.memory.enabled || agentloop_workspace::longterm::Store::open(cfg, &ctx.ws.root).is_none()
    {
        return;
    }
    let args = DreamArgs { since: None, no_model: true, explore: true };
    // `explore` conflicts with `no_model` on the command line; here the consolidation calls
    // no model and the exploration calls one only on its own budget.
    match dream_now(ctx, &args) {
        Ok(v) => {
            let runs = v["runs"].as_array().map_or(0, Vec::len);
            let explored = v["exploration"]["explored"].as_array().map_or(0, Vec::len);
            if runs == 0 && explored == 0 {
                return;
            }
            let why = "a run with nothing to do: the agent was idle".to_string();
            let locked = |c: &Commit| ctx.ws.lock(ctx.lock_wait()).and_then(|session| session.commit(c));
            trace(ctx, state, Event::AgentDreamed, &why, json!({"why": why, "dream": v, "auto": true}), &locked);
            ctx.printer.info(&format!(
                "the agent dreamed while idle: {runs} run(s) consolidated, {explored} question(s) explored (modes.auto: false turns this off)"
            ));
        }
        Err(e) => ctx.printer.warn(&format!("the agent could not dream: {}", e.detail())),
    }
}

/// Appends a mode switch to the run's trace, committed like a phase (through `commit`, under
/// the workspace lock).
fn trace(ctx: &Ctx, state: &State, event: Event, why: &str, data: Value, commit: &dyn Fn(&Commit) -> Result<()>) {
    let mut e = Entry::new(&state.run_id, state.step, Phase::Run, event);
    e.reason = Some(why.to_string());
    e.data = Some(data);
    let mut c = Commit::default();
    c.entry(&e);
    let done = commit(&c);
    if let Err(why) = done {
        ctx.printer.warn(&format!("trace: {} not recorded: {}", e.event, why.detail()));
    }
}
