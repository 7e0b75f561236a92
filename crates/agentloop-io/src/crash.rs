//! Deterministic crash points for the crash-safety tests.
//!
//! When `AGENTLOOP_CRASH_AT` names a point (for example `write:plan.md` or `phase:act:after-tool`),
//! the process aborts there, as if killed. Tests use it to prove that a run killed at any point
//! resumes with no phase skipped and none applied twice. Unset, it costs one env lookup.

use std::io::Write;

pub fn point(name: &str) {
    if let Ok(want) = std::env::var("AGENTLOOP_CRASH_AT") {
        if want == name {
            // Straight to stderr: this module sits below the printer (fs calls it).
            let _ = writeln!(std::io::stderr(), "agentloop: crash point {name} reached (AGENTLOOP_CRASH_AT)");
            std::process::abort();
        }
    }
}
