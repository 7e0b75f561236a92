//! The words of a trace entry as types: what happened (`event`) and how a tool call went
//! (`result_status`). Each is written as the same word it always was; a word this version does
//! not know (a trace written by a later version or by hand) is read and written back as it was.

use crate::tool_spec::ToolStatus;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

crate::words! {
    /// What a trace entry records, written as its name (`run.finished`); a name this version
    /// does not write is [`Event::Other`].
    pub enum Event {
        /// The first entry of a run; it carries `schema_version` and the limits.
        RunStarted => "run.started",
        Frame => "frame",
        Reframe => "reframe",
        Plan => "plan",
        Act => "act",
        /// A tool's failure event mode retries.
        ActRetry => "act.retry",
        Reflect => "reflect",
        /// Memory compaction, part of Reflect.
        Compact => "compact",
        ModelTimeout => "model.timeout",
        /// Streamed text of a model's answer (only on `--events`).
        ModelDelta => "model.delta",
        TickRefused => "tick.refused",
        RunFinished => "run.finished",
        RunAnswered => "run.answered",
        RunContinued => "run.continued",
        LimitsChanged => "limits.changed",
        Frustration => "frustration",
        FrustrationReframe => "frustration.reframe",
        AgentRested => "agent.rested",
        AgentDreamed => "agent.dreamed",
    }
}

impl Event {
    /// The name as a JSON string (`"run.finished"`), for telling a line's event by its text
    /// before it is parsed.
    pub fn quoted(&self) -> String {
        crate::json::to_string(&self.as_str())
    }

    /// Whether the entry (re)opens a finished run for another turn (`run.answered`, `run.continued`).
    pub fn reopens(&self) -> bool {
        matches!(self, Event::RunAnswered | Event::RunContinued)
    }

    /// The name as said beside the entry's phase: `run.` is implied by the phase `run`
    /// (`finished`); any other name is said whole.
    pub fn beside(&self, phase: Option<super::Phase>) -> &str {
        match phase {
            Some(super::Phase::Run) => self.as_str().strip_prefix("run.").unwrap_or(self.as_str()),
            _ => self.as_str(),
        }
    }

    /// Whether the entry is the run's own bookkeeping at its start or end.
    pub fn is_run_bound(&self) -> bool {
        matches!(self, Event::RunStarted | Event::RunFinished)
    }
}

/// A phase's own event (`plan` in Plan) has the phase's name.
impl From<super::Phase> for Event {
    fn from(p: super::Phase) -> Event {
        Event::named(p.as_str())
    }
}

impl Default for Event {
    /// No name (an entry built field by field).
    fn default() -> Event {
        Event::Other(String::new())
    }
}

impl PartialEq<super::Phase> for Event {
    fn eq(&self, p: &super::Phase) -> bool {
        self.as_str() == p.as_str()
    }
}

/// A trace's `result_status`: the [`ToolStatus`] agentloop writes, or another word kept as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultStatus {
    Tool(ToolStatus),
    Other(String),
}

impl ResultStatus {
    pub fn as_str(&self) -> &str {
        match self {
            ResultStatus::Tool(s) => s.as_str(),
            ResultStatus::Other(word) => word,
        }
    }

    /// The tool's status, when the word is one.
    pub fn tool(&self) -> Option<ToolStatus> {
        match self {
            ResultStatus::Tool(s) => Some(*s),
            ResultStatus::Other(_) => None,
        }
    }

    fn named(word: &str) -> ResultStatus {
        [ToolStatus::Ok, ToolStatus::Error]
            .into_iter()
            .find(|s| s.as_str() == word)
            .map_or_else(|| ResultStatus::Other(word.to_string()), ResultStatus::Tool)
    }
}

impl From<ToolStatus> for ResultStatus {
    fn from(s: ToolStatus) -> ResultStatus {
        ResultStatus::Tool(s)
    }
}

impl std::fmt::Display for ResultStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ResultStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ResultStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ResultStatus, D::Error> {
        crate::words::read(d, ResultStatus::named)
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn every_known_event_round_trips_by_its_name() {
        for e in Event::KNOWN {
            let text = serde_json::to_string(e).unwrap();
            assert_eq!(text, format!("\"{}\"", e.as_str()));
            let back: Event = serde_json::from_str(&text).unwrap();
            assert!(!matches!(back, Event::Other(_)), "{text} is read as the known event");
            assert_eq!(&back, e);
        }
        assert_eq!(serde_json::to_string(&Event::RunFinished).unwrap(), r#""run.finished""#);
        assert_eq!(Event::from(super::super::Phase::Plan), Event::Plan);
        assert_eq!(Event::RunFinished.beside(Some(super::super::Phase::Run)), "finished");
        assert_eq!(Event::RunFinished.beside(None), "run.finished");
        assert_eq!(Event::Frustration.beside(Some(super::super::Phase::Run)), "frustration");
    }

    #[test]
    fn an_unknown_event_is_kept_as_read() {
        let e: Event = serde_json::from_str(r#""later.thing""#).unwrap();
        assert_eq!(e, Event::Other("later.thing".into()));
        assert_eq!(serde_json::to_string(&e).unwrap(), r#""later.thing""#);
        // Escaped text is decoded, then named.
        let e: Event = serde_json::from_str(r#""run\u002efinished""#).unwrap();
        assert!(matches!(e, Event::RunFinished), "{e:?}");
        assert!(serde_json::from_str::<Event>("5").is_err());
    }

    #[test]
    fn result_statuses_round_trip_and_keep_other_words() {
        for (word, status) in [("ok", Some(ToolStatus::Ok)), ("error", Some(ToolStatus::Error)), ("skipped", None)] {
            let r: ResultStatus = serde_json::from_str(&format!("\"{word}\"")).unwrap();
            assert_eq!(r.tool(), status);
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{word}\""));
        }
        assert_eq!(ResultStatus::from(ToolStatus::Error).as_str(), "error");
    }
}
