//! How a run ends: one [`StopKind`] per way, and the one map from it to what each caller shows —
//! the exit code of `run`/`answer`/`act`/`reflect`, the `stop` value of result.json and
//! state.json, and the completion event (`agent.completed` or
//! `agent.escalated`) that `run --json`, `handle` and `serve`'s trace readers see.
//!
//! Invariant: every caller goes through these methods; no other code matches a stop to a code
//! or an event, so a new way to end is one variant the compiler makes every caller handle.
//! A closed stdout never enters here: writing stops (see [`crate::output`]) and the outcome
//! still decides the exit code.

use crate::error::code;
use serde::{Deserialize, Serialize};

/// Why a run stopped. Serialized as result.json's and state.json's `stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopKind {
    /// The run reached its definition of done.
    Done,
    /// The run needs a person: the model asked, could not proceed, or repeated itself.
    Escalated,
    /// A budget or limit ran out (steps, reframes, time, tokens, cost).
    Budget,
    /// The model provider failed after all retries.
    Provider,
}

impl StopKind {
    /// Every way a run ends.
    pub const ALL: [StopKind; 4] = [StopKind::Done, StopKind::Escalated, StopKind::Budget, StopKind::Provider];

    /// The process exit code of a command that drove the run to this end (the table in docs/COMMANDS.md).
    pub fn exit_code(self) -> u8 {
        match self {
            StopKind::Done => code::OK,
            StopKind::Escalated => code::ESCALATED,
            StopKind::Budget => code::BUDGET,
            StopKind::Provider => code::PROVIDER,
        }
    }

    /// result.json's `stop` value (the same as its serialized form).
    pub fn as_str(self) -> &'static str {
        match self {
            StopKind::Done => "done",
            StopKind::Escalated => "escalated",
            StopKind::Budget => "budget",
            StopKind::Provider => "provider",
        }
    }

    /// Whether the run reached its definition of done (status `done`); every other way leaves
    /// it `escalated`: it needs someone.
    pub fn is_done(self) -> bool {
        self == StopKind::Done
    }

    /// The completion event's `type`.
    pub fn event(self) -> &'static str {
        match self {
            StopKind::Done => "agent.completed",
            StopKind::Escalated | StopKind::Budget | StopKind::Provider => "agent.escalated",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_way_to_end_has_a_documented_code_its_serialized_name_and_an_event() {
        for s in StopKind::ALL {
            assert!(code::TABLE.iter().any(|(c, _)| *c == s.exit_code()), "{s:?}");
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str(), "{s:?}");
            assert_eq!(s.event() == "agent.completed", s == StopKind::Done, "{s:?}");
        }
    }
}
