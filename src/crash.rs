//! Deterministic crash points for the crash-safety tests.
//!
//! When `AGENTLOOP_CRASH_AT` names a point (for example `write:plan.md` or `phase:act:after-tool`),
//! the process aborts there, as if killed. Tests use it to prove that a run killed at any point
//! resumes with no phase skipped and none applied twice. Unset, it costs one env lookup.

pub fn point(name: &str) {
    if let Ok(want) = std::env::var("AGENTLOOP_CRASH_AT") {
        if want == name {
            crate::output::stderr_line(&format!("agentloop: crash point {name} reached (AGENTLOOP_CRASH_AT)"));
            std::process::abort();
        }
    }
}
