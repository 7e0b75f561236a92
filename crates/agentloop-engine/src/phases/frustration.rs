//! Frustration: consecutive tool errors, repeated actions and refused `done`s raise a
//! score kept in state.json (shown by `status`); a clean step lowers it. When a failure limit is
//! hit (`max_consecutive_failures`, `max_repeats`, `max_done_refusals`) or the score reaches
//! `frustration.threshold`, the loop forces one reframe, with the reason, before it escalates.
//! Every change of the score is a `frustration` trace entry.

use agentloop_config::config::Config;
use agentloop_types::trace::{Entry, Event, Phase};
use agentloop_workspace::workspace::{Next, State};
use serde_json::json;

/// What a hit limit means for the run.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Frame again (once per run) with this reason.
    Reframe(String),
    /// Stop: a human must look.
    Escalate(String),
    /// Stop: a reframe was due, but no step is left to use after it (`max_steps`): framing
    /// again would only spend a call. The reason names the budget and why the loop was stuck.
    OutOfSteps(String),
}

/// Adds `delta` to the score (never below 0); the trace entry when it changed.
pub fn update(state: &mut State, delta: i32, why: &str) -> Option<Entry> {
    let from = state.frustration;
    state.frustration = (from as i64 + delta as i64).max(0) as u32;
    if state.frustration == from {
        return None;
    }
    // Bookkeeping of the loop, not an action: phase `run`, so `select(.phase=="act")` still
    // lists exactly the actions.
    let mut e = Entry::new(&state.run_id, state.step, Phase::Run, Event::Frustration);
    e.reason = Some(why.to_string());
    e.data = Some(json!({"from": from, "score": state.frustration}));
    Some(e)
}

/// The limit hit at this point, if any: a failure limit's reason, or the score's.
pub fn over(cfg: &Config, state: &State, limit: Option<String>) -> Option<String> {
    limit.or_else(|| {
        let t = cfg.frustration.threshold;
        (t > 0 && state.frustration >= t)
            .then(|| format!("frustration score {} reached frustration.threshold {t}", state.frustration))
    })
}

/// Reframe once (when enabled and reframes are left), else escalate; an escalation marks the
/// state so the run's end raises the agent's stress (frustration the reframe did not resolve).
pub fn verdict(cfg: &Config, state: &mut State, reason: String) -> Verdict {
    let reframe = cfg.frustration.reframe && !state.frustration_reframed && state.reframes < state.limits.max_reframes;
    if reframe && state.step >= state.limits.max_steps {
        Verdict::OutOfSteps(format!(
            "max_steps reached: {} of {} steps used (the loop was stuck: {reason})",
            state.step, state.limits.max_steps
        ))
    } else if reframe {
        Verdict::Reframe(reason)
    } else {
        state.frustration_escalated = true;
        Verdict::Escalate(reason)
    }
}

/// At a run's end: an escalation by frustration raises the agent's stress (ledger failures are
/// reported, not fatal).
pub fn on_end(cfg: &Config, root: &camino::Utf8Path, state: &mut State, escalated: bool, warn: &dyn Fn(&str)) {
    if std::mem::take(&mut state.frustration_escalated) && escalated {
        if let Err(e) = agentloop_workspace::rest_window::record_stress(cfg, root, &state.run_id) {
            warn(&format!("stress ledger: {e}"));
        }
    }
}

/// Applies a forced reframe to the state; returns its trace entry.
pub fn reframe(state: &mut State, reason: &str) -> Entry {
    state.frustration_reframed = true;
    state.reframes += 1;
    state.frustration = 0;
    state.consecutive_failures = 0;
    state.repeats = 0;
    state.done_refusals = 0;
    state.last_action = None;
    state.pending = None;
    state.reframe_reason = Some(format!("the loop was stuck ({reason}); frame the task anew"));
    state.next = Next::Frame;
    let mut e = Entry::new(&state.run_id, state.step, Phase::Run, Event::FrustrationReframe);
    e.decision = Some("reframe".into());
    e.reason = Some(reason.to_string());
    e
}
