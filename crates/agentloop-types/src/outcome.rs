//! How a run ends: one [`StopKind`] per way, and the one map from it to what each caller shows —
//! the exit code of `run`/`answer`/`act`/`reflect`, the `stop` value of result.json and
//! state.json, and the completion event (`agent.completed` or
//! `agent.escalated`) that `run --json`, `handle` and `serve`'s trace readers see.
//!
//! Invariant: every caller goes through these methods; no other code matches a stop to a code
//! or an event, so a new way to end is one variant the compiler makes every caller handle.
//! A closed stdout never enters here: writing stops (see `agentloop_io::output`) and the outcome
//! still decides the exit code.

use crate::budget::Budget;
use crate::error::code;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;

/// Why a run stopped. Serialized as result.json's and state.json's `stop`: `done`, `escalated`,
/// `provider`, `resting`, or the key of the limit that ran out (`max_steps`, `max_reframes`,
/// `timeout`, `max_tokens`, `max_cost_usd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopKind {
    /// The run reached its definition of done.
    Done,
    /// The run needs a person: the model asked, could not proceed, or repeated itself.
    Escalated,
    /// A budget or limit ran out: which one.
    Budget(Budget),
    /// The model provider failed after all retries.
    Provider,
    /// The agent's rolling usage window (`rest:`) filled while the run went on: it stopped at a
    /// commit point and goes on (`run --continue`) once the agent has rested.
    Resting,
}

impl StopKind {
    /// Every way a run ends.
    pub const ALL: [StopKind; 9] = [
        StopKind::Done,
        StopKind::Escalated,
        StopKind::Budget(Budget::MaxSteps),
        StopKind::Budget(Budget::MaxReframes),
        StopKind::Budget(Budget::Timeout),
        StopKind::Budget(Budget::MaxTokens),
        StopKind::Budget(Budget::MaxCostUsd),
        StopKind::Provider,
        StopKind::Resting,
    ];

    /// The process exit code of a command that drove the run to this end (the table in docs/COMMANDS.md).
    pub fn exit_code(self) -> u8 {
        match self {
            StopKind::Done => code::OK,
            StopKind::Escalated => code::ESCALATED,
            StopKind::Budget(_) => code::BUDGET,
            StopKind::Provider => code::PROVIDER,
            StopKind::Resting => code::RESTING,
        }
    }

    /// result.json's `stop` value (the same as its serialized form).
    pub fn as_str(self) -> &'static str {
        match self {
            StopKind::Done => "done",
            StopKind::Escalated => "escalated",
            StopKind::Budget(b) => b.key(),
            StopKind::Provider => "provider",
            StopKind::Resting => "resting",
        }
    }

    /// The stop a `stop` value names. `budget`, what state.json said before the limit was
    /// recorded, is read with the limit `reason` names (max_steps when it names none).
    pub fn parse(s: &str, reason: Option<&str>) -> Option<StopKind> {
        match s {
            "budget" => Some(StopKind::Budget(reason.and_then(Budget::from_reason).unwrap_or(Budget::MaxSteps))),
            _ => StopKind::ALL.into_iter().find(|k| k.as_str() == s),
        }
    }

    /// Whether the run reached its definition of done (status `done`); every other way leaves
    /// it `escalated`: it needs someone.
    pub fn is_done(self) -> bool {
        self == StopKind::Done
    }

    /// Whether `run --continue` may go on from it (a limit, the provider or a rest; not a
    /// question).
    pub fn can_continue(self) -> bool {
        matches!(self, StopKind::Budget(_) | StopKind::Provider | StopKind::Resting)
    }

    /// The completion event's `type`.
    pub fn event(self) -> Completion {
        match self {
            StopKind::Done => Completion::Completed,
            StopKind::Escalated | StopKind::Budget(_) | StopKind::Provider | StopKind::Resting => Completion::Escalated,
        }
    }
}

/// The two completion events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "EventType")]
pub enum Completion {
    #[serde(rename = "agent.completed")]
    Completed,
    #[serde(rename = "agent.escalated")]
    Escalated,
}

impl Completion {
    /// The event's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Completion::Completed => "agent.completed",
            Completion::Escalated => "agent.escalated",
        }
    }
    /// How the run ended, in the event's dedupe key (`agentic:run:<id>:completed`).
    pub fn ending(self) -> &'static str {
        match self {
            Completion::Completed => "completed",
            Completion::Escalated => "escalated",
        }
    }
}

impl Serialize for StopKind {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        StopKind::parse(&s, None).ok_or_else(|| {
            let valid: Vec<&str> = StopKind::ALL.iter().map(|k| k.as_str()).collect();
            serde::de::Error::custom(format!("unknown stop `{s}`, expected one of {}", valid.join(", ")))
        })
    }
}

/// In the published schemas (docs/schema/): one string of the closed set above.
impl JsonSchema for StopKind {
    fn schema_name() -> Cow<'static, str> {
        "StopKind".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let all: Vec<&str> = StopKind::ALL.iter().map(|s| s.as_str()).collect();
        json_schema!({
            "description": "Why the run stopped (docs/COMMANDS.md, the outcome table)",
            "type": "string",
            "enum": all,
        })
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
            assert_eq!(serde_json::from_value::<StopKind>(serde_json::json!(s.as_str())).unwrap(), s);
            assert_eq!(s.event() == Completion::Completed, s == StopKind::Done, "{s:?}");
            assert_eq!(serde_json::to_value(s.event()).unwrap(), s.event().as_str());
            assert!(s.event().as_str().ends_with(&format!(".{}", s.event().ending())));
        }
        let old = |reason| StopKind::parse("budget", Some(reason));
        assert_eq!(old("cost budget exhausted: $0.51 of $0.50 spent"), Some(StopKind::Budget(Budget::MaxCostUsd)));
        assert_eq!(old("timeout: the run used its wall-clock limit of 60s"), Some(StopKind::Budget(Budget::Timeout)));
        assert!(serde_json::from_value::<StopKind>(serde_json::json!("nope")).is_err());
    }
}
