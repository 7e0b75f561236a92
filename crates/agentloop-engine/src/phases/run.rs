//! The loop: frame → (plan → act → reflect)* → finish, composed from the same phase functions
//! the single-phase commands call. It resumes from state.json: `next` names the phase to run,
//! and each phase commits atomically, so after a kill no phase is skipped or applied twice.
//!
//! It is the one loop of every door (`run`, `serve`, the worker, `handle`): each check —
//! the wall-clock timeout, the agent's rest window, a draining process, the budgets and
//! frustration the phases check — is made here or in the phases, whoever drives. A door only
//! says what is its own through a [`Door`]: event mode's "this step's tool runs elsewhere: end
//! the turn" is a hand-off ([`Driven::Waiting`]), not a second loop.

use super::{finish, Env, PhaseEnd};
use agentloop_types::error::Result;
use agentloop_workspace::markdown::NextAction;
use agentloop_workspace::workspace::{Commit, Next, Pending, State, StopKind};
use std::time::{Duration, Instant};

/// Runs one phase named by `state.next`.
pub fn step(env: &mut Env, state: &mut State) -> Result<PhaseEnd> {
    match state.next {
        Next::Frame => super::frame::run(env, state),
        Next::Plan => super::plan::run(env, state),
        Next::Act => super::act::run(env, state),
        Next::Reflect if env.fuses(state) => super::fused::run(env, state),
        Next::Reflect => super::reflect::run(env, state),
        Next::Finish | Next::None => Ok(PhaseEnd::Stopped(state.stop.unwrap_or(StopKind::Escalated))),
    }
}

/// How a drive ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Driven {
    /// The run stopped (done, escalated, a budget, resting, the provider).
    Stopped(StopKind),
    /// The run waits for the result of the pending step's tool, which another process runs
    /// ([`Door::hands_off`]); the pending step is committed in state.json.
    Waiting(Pending),
}

impl Driven {
    /// How the run stopped; None while it waits for a tool.
    pub fn stopped(&self) -> Option<StopKind> {
        match self {
            Driven::Stopped(k) => Some(*k),
            Driven::Waiting(_) => None,
        }
    }

    /// What a run span and a log line say of it: the stop's name, or `waiting`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Driven::Stopped(k) => k.as_str(),
            Driven::Waiting(_) => "waiting",
        }
    }
}

/// What a door adds to the one loop. The defaults are `run`'s: every tool runs here, and a
/// phase's result is the loop's.
pub trait Door {
    /// Whether the tool of the pending step runs outside this process (event mode: a tool the
    /// router runs), so the loop ends the turn with [`Driven::Waiting`] instead of acting.
    fn hands_off(&self, _env: &Env, _pending: &Pending) -> bool {
        false
    }

    /// Sees each phase's result (`phase` is the phase that ran) before the loop does, and may
    /// record it (a progress post, an outage count).
    fn phase_ran(&mut self, _env: &Env, _phase: Next, _state: &State, r: Result<PhaseEnd>) -> Result<PhaseEnd> {
        r
    }
}

/// The door of a process that runs every tool itself (`run`, `serve`, the worker).
pub struct Here;

impl Door for Here {}

/// The error a run stopped by a draining process ends with ([`agentloop_tools::interrupt::draining`]):
/// its last phase is committed, and it goes on from there when driven again.
pub fn drained(state: &State) -> agentloop_types::error::Error {
    agentloop_types::error::Error::failure(format!(
        "run {} stopped at a commit point (step {}, next {}): the process is draining",
        state.run_id,
        state.step,
        state.next.as_str()
    ))
}

/// Why the run stops here to rest, if the agent's rolling usage window (`rest.max_tokens`,
/// `rest.max_cost_usd`) is full with what this invocation used so far — checked at each commit
/// point, so a run that fills the window ends between phases, never inside one. The runs
/// limit is not asked: it is about starting runs, and this one has started.
fn window_filled(env: &Env, state: &State) -> Option<String> {
    let (tokens0, cost0) = env.ledger_base?;
    let used = state.usage.total().saturating_sub(tokens0);
    let cost = (state.cost_usd - cost0).max(0.0);
    agentloop_workspace::rest_window::filled_while_running(env.cfg, used, cost)
}

/// Drives the run until it stops, its next tool is handed off (`door`), or this invocation's
/// wall-clock limit `timeout` passes.
pub fn drive(env: &mut Env, state: &mut State, timeout: Duration, door: &mut dyn Door) -> Result<Driven> {
    let start = Instant::now();
    env.fuse = true;
    env.deadline = Some(start + timeout);
    env.clock = Some((start, state.elapsed_ms));
    loop {
        if state.status.is_terminal() {
            return Ok(Driven::Stopped(state.stop.unwrap_or(StopKind::Escalated)));
        }
        if agentloop_tools::interrupt::draining() {
            return Err(drained(state));
        }
        env.tick(state);
        if let Some(reason) = window_filled(env, state) {
            return stop_here(env, state, StopKind::Resting, &reason);
        }
        if start.elapsed() >= timeout {
            let reason = format!("timeout: the run used its wall-clock limit of {}s", timeout.as_secs());
            return stop_here(env, state, StopKind::Budget(agentloop_types::budget::Budget::Timeout), &reason);
        }
        if let Some(mut p) = handed_off(env, state, door)? {
            // Recorded before the door emits the request: the run is waiting, not stalled.
            if !p.handed_off {
                p.handed_off = true;
                state.pending = Some(p.clone());
                env.commit(&Commit { state: Some(state.clone()), ..Default::default() })?;
            }
            return Ok(Driven::Waiting(p));
        }
        let phase = state.next;
        let ran = step(env, state);
        if let PhaseEnd::Stopped(kind) = door.phase_ran(env, phase, state, ran)? {
            return Ok(Driven::Stopped(kind));
        }
    }
}

/// Ends the run at this commit point.
fn stop_here(env: &Env, state: &mut State, stop: StopKind, reason: &str) -> Result<Driven> {
    let mut commit = Commit::default();
    finish(env, state, &mut commit, stop, reason, None)?;
    env.commit(&commit)?;
    Ok(Driven::Stopped(stop))
}

/// The pending step, when its tool is the door's to run elsewhere. Nothing leaves that Act would
/// refuse: arguments the tool's schema does not take (with `llm.tool_schemas: catalog` the plan
/// answer's schema does not hold them) and a request for agentloop itself past
/// `ductile.max_depth` are not handed off; the step records the refusal, as Act would, and the
/// loop goes on (Reflect sees it).
fn handed_off(env: &Env, state: &mut State, door: &dyn Door) -> Result<Option<Pending>> {
    let Some(p) = state.pending.clone().filter(|_| state.next == Next::Act) else { return Ok(None) };
    if !door.hands_off(env, &p) {
        return Ok(None);
    }
    let refused = env.registry.check(env.cfg, &p.tool, &p.args).err().map(|e| e.to_string());
    let deep = p.tool == env.cfg.ductile.self_name && state.depth + 1 > env.cfg.ductile.max_depth;
    if let Some(why) = refused.or_else(|| {
        deep.then(|| {
            format!(
                "recursion guard: `{}` is agentloop itself and this run is at depth {}; ductile.max_depth is {}",
                p.tool, state.depth, env.cfg.ductile.max_depth
            )
        })
    }) {
        let action = NextAction { tool: p.tool.clone(), args: p.args.clone() };
        super::act::record(
            env,
            state,
            p.step,
            &action,
            agentloop_types::tool_spec::ToolResult::err(why, false),
            0,
            false,
        )?;
        return Ok(None);
    }
    Ok(Some(p))
}
