//! The loop: frame → (plan → act → reflect)* → finish, composed from the same phase functions
//! the single-phase commands call. It resumes from state.json: `next` names the phase to run,
//! and each phase commits atomically, so after a kill no phase is skipped or applied twice.

use super::{finish, Env, Outcome};
use crate::error::Result;
use crate::workspace::{Commit, Next, State, StopKind};
use std::time::{Duration, Instant};

/// Runs one phase named by `state.next`.
pub fn step(env: &mut Env, state: &mut State) -> Result<Outcome> {
    match state.next {
        Next::Frame => super::frame::run(env, state),
        Next::Plan => super::plan::run(env, state),
        Next::Act => super::act::run(env, state),
        Next::Reflect if env.fuses(state) => super::fused::run(env, state),
        Next::Reflect => super::reflect::run(env, state),
        Next::Finish | Next::None => Ok(Outcome::Stopped(state.stop.unwrap_or(StopKind::Escalated))),
    }
}

/// Drives the run until it stops or the wall-clock timeout passes.
/// The error a run stopped by a draining process ends with ([`crate::interrupt::draining`]):
/// its last phase is committed, and it goes on from there when driven again.
pub fn drained(state: &State) -> crate::error::Error {
    crate::error::Error::failure(format!(
        "run {} stopped at a commit point (step {}, next {}): the process is draining",
        state.run_id,
        state.step,
        format!("{:?}", state.next).to_lowercase()
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
    crate::rest_window::filled_while_running(env.cfg, used, cost)
}

pub fn drive(env: &mut Env, state: &mut State, timeout: Duration) -> Result<StopKind> {
    let start = Instant::now();
    env.fuse = true;
    env.deadline = Some(start + timeout);
    env.clock = Some((start, state.elapsed_ms));
    loop {
        if state.status.is_terminal() {
            return Ok(state.stop.unwrap_or(StopKind::Escalated));
        }
        if crate::interrupt::draining() {
            return Err(drained(state));
        }
        env.tick(state);
        if let Some(reason) = window_filled(env, state) {
            let mut commit = Commit::default();
            finish(env, state, &mut commit, StopKind::Resting, &reason, None)?;
            env.commit(&commit)?;
            return Ok(StopKind::Resting);
        }
        if start.elapsed() >= timeout {
            let mut commit = Commit::default();
            let reason = format!("timeout: the run used its wall-clock limit of {}s", timeout.as_secs());
            let stop = StopKind::Budget(crate::budget::Budget::Timeout);
            finish(env, state, &mut commit, stop, &reason, None)?;
            env.commit(&commit)?;
            return Ok(stop);
        }
        if let Outcome::Stopped(kind) = step(env, state)? {
            return Ok(kind);
        }
    }
}
