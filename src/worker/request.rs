//! What travels on the streams, as types: a run request (the `request` field of a message on
//! the requests stream), the run id it maps to, what a worker does with a delivery, and the
//! outcome it publishes. Everything here is pure, so the rules are unit-tested without Redis.
//!
//! A request either starts a run (`goal`) or goes on with a run already under the root (`run`
//! with `answer` or `continue`): [`RunRequest::go_on`] tells them apart.
//!
//! Invariants: every field of a request is honoured or refused naming it, never ignored; the
//! run id is a function of the request and its message id alone, so every delivery of one
//! message (and every message with the same idempotency key) maps to the same run folder; a
//! go-on's outcome has a key of its own ([`RunRequest::outcome_id`]), so each answer or
//! continue is published once beside the run's first outcome.

use agentloop_types::budget::Budgets;
use agentloop_workspace::workspace::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request to run a goal, or to go on with a run, as `agentloop enqueue` (or `serve --redis`)
/// writes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// The goal of a new run (none for a go-on).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub goal: String,
    /// Background for context.md: a string as is, anything else as JSON.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub context: Value,
    /// An agent profile under `<root>/agents/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Limits that may only narrow the root's.
    #[serde(default, skip_serializing_if = "is_default")]
    pub budgets: Budgets,
    /// A slot such as a date: the same goal and agent enqueued twice for one slot runs once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// The series the run belongs to (default, for a slot's run: its agent and goal): a run of
    /// a series carries facts, answers and `state/` from the series' last ended run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<String>,
    /// Not supported yet; refused naming it (see [`RunRequest::check`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The idempotency key the run id is derived from (default: the slot, else the message id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Start even when the estimate says the run cannot fit its budget.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// The run under the root to go on with (with `answer` or `continue`), by its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The answer to `run`'s open question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Go on with `run`, stopped on a budget, a provider failure or a rest, or interrupted.
    #[serde(default, rename = "continue", skip_serializing_if = "std::ops::Not::not")]
    pub continue_: bool,
}

/// Longest answer taken, in characters: it becomes a fact of the run's memory.md, shown in
/// every later prompt.
pub const MAX_ANSWER_CHARS: usize = 10_000;

/// What a go-on request asks of its run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GoOn<'a> {
    /// Answer the run's open question, then go on.
    Answer { run: &'a str, text: &'a str },
    /// Go on with the run (the budgets given raise its limits).
    Continue { run: &'a str },
}

impl<'a> GoOn<'a> {
    pub fn run(self) -> &'a str {
        match self {
            GoOn::Answer { run, .. } | GoOn::Continue { run } => run,
        }
    }

    /// The engine's request.
    pub fn request(self) -> agentloop_engine::lifecycle::Request {
        match self {
            GoOn::Answer { text, .. } => agentloop_engine::lifecycle::Request::Answer(text.to_string()),
            GoOn::Continue { .. } => agentloop_engine::lifecycle::Request::Continue { archived: None },
        }
    }

    /// "answer" or "continue", for messages.
    pub fn verb(self) -> &'static str {
        match self {
            GoOn::Answer { .. } => "answer",
            GoOn::Continue { .. } => "continue",
        }
    }
}

/// Why a request is refused: what the dead-letter reason and `enqueue`'s error say.
#[derive(Debug)]
pub enum BadRequest {
    /// Not the JSON of a request: serde's error at its field path.
    Json(serde_path_to_error::Error<serde_json::Error>),
    EmptyGoal,
    SchemaNotObject,
    /// `key`, `slot`, `series` or `agent` is blank, too long or holds a control character.
    Name(&'static str),
    /// `run` is not a run id.
    RunId,
    /// `answer` or `continue` without `run`, or `run` with neither (or both).
    GoOnHow(&'static str),
    /// A start's field in a go-on request.
    NotWithRun(&'static str),
    /// `answer` is blank or longer than [`MAX_ANSWER_CHARS`].
    Answer,
}

impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadRequest::Json(e) => write!(f, "`request` field: {} (at {})", e.inner(), e.path()),
            BadRequest::EmptyGoal => f.write_str("`goal` is empty"),
            BadRequest::SchemaNotObject => f.write_str("`output_schema` must be a JSON Schema object"),
            BadRequest::Name(name) => write!(f, "`{name}` must be 1-200 printable characters"),
            BadRequest::RunId => write!(
                f,
                "`run` must be a run id: 1 to {} ASCII letters, digits, `-` or `_`",
                agentloop_types::run_id::RunId::MAX_LEN
            ),
            BadRequest::GoOnHow(why) => f.write_str(why),
            BadRequest::NotWithRun(name) => {
                write!(f, "`{name}` is for a new run; a request with `run` goes on with that run as it is")
            }
            BadRequest::Answer => write!(f, "`answer` must be 1-{MAX_ANSWER_CHARS} characters, not only spaces"),
        }
    }
}

impl std::error::Error for BadRequest {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BadRequest::Json(e) => Some(e.inner()),
            _ => None,
        }
    }
}

fn is_default(b: &Budgets) -> bool {
    *b == Budgets::default()
}

impl RunRequest {
    /// Reads the `request` field of a message; the error names what is wrong.
    pub fn parse(text: &str) -> Result<RunRequest, BadRequest> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let r: RunRequest = serde_path_to_error::deserialize(de).map_err(BadRequest::Json)?;
        r.check()?;
        Ok(r)
    }

    /// Refuses what no worker can honour, naming the field.
    pub fn check(&self) -> Result<(), BadRequest> {
        self.check_go_on()?;
        if self.run.is_none() && self.goal.trim().is_empty() {
            return Err(BadRequest::EmptyGoal);
        }
        if self.output_schema.as_ref().is_some_and(|s| !s.is_object()) {
            return Err(BadRequest::SchemaNotObject);
        }
        for (name, v) in [("key", &self.key), ("slot", &self.slot), ("series", &self.series), ("agent", &self.agent)] {
            if let Some(v) = v {
                if v.trim().is_empty() || v.len() > 200 || v.chars().any(char::is_control) {
                    return Err(BadRequest::Name(name));
                }
            }
        }
        Ok(())
    }

    /// A go-on's fields: `run` a run id with exactly one of `answer` and `continue`, and none
    /// of a new run's fields.
    fn check_go_on(&self) -> Result<(), BadRequest> {
        let Some(run) = &self.run else {
            return match (&self.answer, self.continue_) {
                (Some(_), _) => Err(BadRequest::GoOnHow("`answer` needs `run`: the run whose question it answers")),
                (None, true) => Err(BadRequest::GoOnHow("`continue` needs `run`: the run to go on with")),
                (None, false) => Ok(()),
            };
        };
        if !agentloop_types::run_id::RunId::is_valid(run) {
            return Err(BadRequest::RunId);
        }
        match (&self.answer, self.continue_) {
            (Some(_), true) => return Err(BadRequest::GoOnHow("`answer` and `continue` exclude each other")),
            (None, false) => return Err(BadRequest::GoOnHow("`run` needs `answer` or `continue`")),
            (Some(a), false) if a.trim().is_empty() || a.chars().count() > MAX_ANSWER_CHARS => {
                return Err(BadRequest::Answer)
            }
            _ => {}
        }
        let starts = [
            ("goal", !self.goal.is_empty()),
            ("context", !self.context.is_null()),
            ("agent", self.agent.is_some()),
            ("slot", self.slot.is_some()),
            ("series", self.series.is_some()),
            ("output_schema", self.output_schema.is_some()),
            ("force", self.force),
        ];
        match starts.into_iter().find(|(_, given)| *given) {
            Some((name, _)) => Err(BadRequest::NotWithRun(name)),
            None => Ok(()),
        }
    }

    /// What a go-on request asks (None: it starts a run). Meaningful once [`RunRequest::check`]
    /// passed.
    pub fn go_on(&self) -> Option<GoOn<'_>> {
        let run = self.run.as_deref()?;
        Some(match &self.answer {
            Some(text) => GoOn::Answer { run, text: text.trim() },
            None => GoOn::Continue { run },
        })
    }

    /// context.md's background text.
    pub fn background(&self) -> String {
        agentloop_engine::phases::init::context_text(Some(&self.context))
    }

    /// The idempotency key: `key`, else the slot with the agent and goal, else the message id.
    /// A go-on's is `key`, else its message id.
    pub fn idempotency_key(&self, message_id: &str) -> String {
        match (&self.key, &self.slot) {
            (Some(k), _) => k.clone(),
            (None, Some(slot)) => format!("slot-{slot}-{:016x}", self.job_hash()),
            (None, None) => message_id.to_string(),
        }
    }

    /// The hash of the agent and goal that names a slot's run (`slot-<slot>-<hash>`) and, by
    /// default, its series (`job-<hash>`).
    fn job_hash(&self) -> u64 {
        let what = format!("{}\n{}", self.agent.as_deref().unwrap_or(""), self.goal.trim());
        agentloop_types::run_id::fnv1a(what.as_bytes())
    }

    /// The series the run belongs to: `series` as given, else for a slot's run `job-<hash>` of
    /// its agent and goal (the hash its run id ends with), else none — a run of its own.
    pub fn series_name(&self) -> Option<String> {
        match (&self.series, &self.slot) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(_)) => Some(format!("job-{:016x}", self.job_hash())),
            (None, None) => None,
        }
    }

    /// The run's id: a go-on's `run`; else the key itself when it can name a folder, else its
    /// readable part and a hash.
    pub fn run_id(&self, message_id: &str) -> String {
        match &self.run {
            Some(run) => run.clone(),
            None => run_id_for(&self.idempotency_key(message_id)),
        }
    }

    /// What names the outcome this request publishes (`P:outcome:<it>`): a start's run id (a run
    /// publishes its first outcome once); a go-on's run id and its idempotency key's id
    /// (`<run id>:<key id>`), so each answer or continue publishes the outcome it led to once.
    pub fn outcome_id(&self, message_id: &str) -> String {
        let run_id = self.run_id(message_id);
        match self.run {
            Some(_) => format!("{run_id}:{}", run_id_for(&self.idempotency_key(message_id))),
            None => run_id,
        }
    }
}

/// A run id for an idempotency key ([`agentloop_types::run_id::RunId::for_key`]).
pub fn run_id_for(key: &str) -> String {
    agentloop_types::run_id::RunId::for_key(key).into_string()
}

/// What a worker does with a delivered message.
#[derive(Debug, PartialEq)]
pub enum Triage {
    /// Run (or resume, or report) the run `run_id`.
    Run { request: Box<RunRequest>, run_id: String },
    /// Move it to the dead-letter stream with this reason.
    Dead(String),
}

/// Decides what to do with message `id` (its `request` field, delivered `deliveries` times;
/// `last_error`: why the previous delivery failed, if one did).
pub fn triage(
    id: &str,
    request: Option<&str>,
    deliveries: u64,
    max_deliveries: u64,
    last_error: Option<&str>,
) -> Triage {
    if deliveries > max_deliveries {
        let why = last_error.map(|e| format!("; last error: {e}")).unwrap_or_default();
        return Triage::Dead(format!("delivered {deliveries} times, over --max-deliveries {max_deliveries}{why}"));
    }
    let Some(text) = request else {
        return Triage::Dead("the message has no `request` field".into());
    };
    // Refused before it is parsed: what a request holds is copied into the run's files and
    // held in memory several times over.
    if let Some(why) = oversized(text) {
        return Triage::Dead(why);
    }
    match RunRequest::parse(text) {
        Ok(r) => {
            let run_id = r.run_id(id);
            Triage::Run { request: Box::new(r), run_id }
        }
        Err(e) => Triage::Dead(format!("invalid request: {e}")),
    }
}

/// Why a request's text is too large to take (over [`agentloop_engine::runs_root::MAX_REQUEST_BYTES`], as
/// `serve` caps a request body), or None.
pub fn oversized(text: &str) -> Option<String> {
    let max = agentloop_engine::runs_root::MAX_REQUEST_BYTES;
    (text.len() > max).then(|| format!("the request is {} bytes, over the limit of {max} bytes", text.len()))
}

/// The outcome published for a finished run: event mode's `agent.completed` /
/// `agent.escalated` object (completion-event.json), with the idempotency key.
pub fn outcome(state: &State, key: &str) -> Value {
    let mut ev = agentloop_engine::schema::CompletionEvent::of(state);
    ev.payload.key = Some(key.to_string());
    ev.to_value()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain_id(id: &str) -> bool {
        agentloop_types::run_id::RunId::is_valid(id)
    }

    #[test]
    fn every_delivery_of_a_message_maps_to_one_run() {
        let r = RunRequest::parse(r#"{"goal": "digest"}"#).unwrap();
        assert_eq!(r.run_id("1700000000000-0"), "1700000000000-0");
        let keyed = RunRequest { key: Some("ticket 42/a".into()), ..r.clone() };
        assert_eq!(keyed.run_id("1-0"), keyed.run_id("2-0"));
        assert!(plain_id(&keyed.run_id("1-0")), "{}", keyed.run_id("1-0"));
        let daily = RunRequest { slot: Some("2026-01-01".into()), ..r.clone() };
        assert_eq!(daily.run_id("1-0"), daily.run_id("2-0"));
        let other = RunRequest { goal: "another".into(), ..daily.clone() };
        assert_ne!(daily.run_id("1-0"), other.run_id("1-0"));
        let long = "k".repeat(100);
        assert!(plain_id(&run_id_for(&long)));
        assert_ne!(run_id_for("a b"), run_id_for("a_b"));
    }

    #[test]
    fn a_slot_or_a_named_series_makes_a_run_part_of_a_series() {
        let r = RunRequest::parse(r#"{"goal": "digest"}"#).unwrap();
        assert_eq!(r.series_name(), None, "a run of its own");
        let daily = RunRequest { slot: Some("2026-01-01".into()), ..r.clone() };
        let tomorrow = RunRequest { slot: Some("2026-01-02".into()), ..r.clone() };
        let series = daily.series_name().unwrap();
        assert_eq!(tomorrow.series_name().as_ref(), Some(&series), "one job, one series");
        assert!(daily.run_id("1-0").ends_with(series.strip_prefix("job-").unwrap()), "{series}");
        let other = RunRequest { goal: "another".into(), ..daily.clone() };
        assert_ne!(other.series_name(), Some(series.clone()));
        let agent = RunRequest { agent: Some("digest".into()), ..daily.clone() };
        assert_ne!(agent.series_name(), Some(series));
        let named = RunRequest { series: Some("news".into()), ..other.clone() };
        assert_eq!(named.series_name().as_deref(), Some("news"));
        let unslotted = RunRequest { series: Some("news".into()), ..r.clone() };
        assert_eq!(unslotted.series_name().as_deref(), Some("news"));
        assert_eq!(unslotted.run_id("7-0"), "7-0", "the series does not name the run");
        assert!(RunRequest::parse(r#"{"goal": "g", "series": " "}"#).unwrap_err().to_string().contains("`series`"));
    }

    #[test]
    fn fields_are_honoured_or_refused_by_name() {
        assert!(RunRequest::parse(r#"{"goal": "g", "colour": 1}"#).unwrap_err().to_string().contains("colour"));
        assert!(RunRequest::parse(r#"{"goal": "g", "output_schema": "s.json"}"#)
            .unwrap_err()
            .to_string()
            .contains("output_schema"));
        assert!(RunRequest::parse(r#"{"goal": " "}"#).unwrap_err().to_string().contains("goal"));
        assert!(RunRequest::parse(r#"{"goal": "g", "budgets": {"max_stepz": 1}}"#)
            .unwrap_err()
            .to_string()
            .contains("max_stepz"));
        let r = RunRequest::parse(r#"{"goal": "g", "context": {"a": 1}, "budgets": {"max_steps": 2}}"#).unwrap();
        assert_eq!(r.budgets.max_steps, Some(2));
        assert!(r.background().contains("\"a\": 1"));
    }

    #[test]
    fn a_go_on_names_its_run_and_nothing_of_a_new_run() {
        let a = RunRequest::parse(r#"{"run": "R-1", "answer": " Use 2024 "}"#).unwrap();
        assert_eq!(a.go_on(), Some(GoOn::Answer { run: "R-1", text: "Use 2024" }));
        assert_eq!(a.run_id("9-0"), "R-1", "the run it names, not one of its key");
        assert_eq!(a.idempotency_key("9-0"), "9-0");
        assert_eq!(a.outcome_id("9-0"), "R-1:9-0", "an outcome of its own");
        let keyed = RunRequest { key: Some("answer 1".into()), ..a.clone() };
        assert_eq!(keyed.outcome_id("1-0"), keyed.outcome_id("2-0"), "every delivery, one outcome");
        let c = RunRequest::parse(r#"{"run": "R-1", "continue": true, "budgets": {"max_steps": 9}}"#).unwrap();
        assert_eq!(c.go_on(), Some(GoOn::Continue { run: "R-1" }));
        assert_eq!(agentloop_types::json::to_string(&c), r#"{"budgets":{"max_steps":9},"run":"R-1","continue":true}"#);
        let start = RunRequest::parse(r#"{"goal": "g"}"#).unwrap();
        assert_eq!((start.go_on(), start.outcome_id("1-0")), (None, "1-0".to_string()));
        let refused = |text: &str| RunRequest::parse(text).unwrap_err().to_string();
        assert!(refused(r#"{"run": "../etc", "continue": true}"#).contains("`run` must be a run id"));
        assert!(refused(r#"{"run": "R", "answer": "  "}"#).contains("`answer` must be"));
        let long = format!(r#"{{"run": "R", "answer": "{}"}}"#, "a".repeat(MAX_ANSWER_CHARS + 1));
        assert!(refused(&long).contains("`answer` must be"));
        assert!(refused(r#"{"run": "R"}"#).contains("`run` needs `answer` or `continue`"));
        assert!(refused(r#"{"run": "R", "answer": "a", "continue": true}"#).contains("exclude each other"));
        assert!(refused(r#"{"answer": "a"}"#).contains("`answer` needs `run`"));
        assert!(refused(r#"{"goal": "g", "continue": true}"#).contains("`continue` needs `run`"));
        for field in [r#""goal": "g""#, r#""slot": "s""#, r#""agent": "a""#, r#""force": true"#, r#""context": "c""#] {
            let text = format!(r#"{{"run": "R", "continue": true, {field}}}"#);
            let name = field.split('"').nth(1).unwrap();
            assert!(refused(&text).contains(&format!("`{name}` is for a new run")), "{text}");
        }
        assert!(refused(r#"{"key": "k"}"#).contains("`goal` is empty"));
    }

    #[test]
    fn poison_and_redelivered_messages_go_to_dead_letters() {
        assert!(matches!(triage("1-0", Some("{"), 1, 3, None), Triage::Dead(r) if r.starts_with("invalid request")));
        assert!(matches!(triage("1-0", None, 1, 3, None), Triage::Dead(_)));
        let ok = r#"{"goal": "g"}"#;
        assert!(matches!(triage("1-0", Some(ok), 3, 3, None), Triage::Run { run_id, .. } if run_id == "1-0"));
        let big = format!(r#"{{"goal": "{}"}}"#, "g".repeat(agentloop_engine::runs_root::MAX_REQUEST_BYTES));
        assert!(matches!(triage("1-0", Some(&big), 1, 3, None), Triage::Dead(r) if r.contains("over the limit")));
        assert_eq!(
            triage("1-0", Some(ok), 4, 3, Some("disk full")),
            Triage::Dead("delivered 4 times, over --max-deliveries 3; last error: disk full".into())
        );
    }
}
