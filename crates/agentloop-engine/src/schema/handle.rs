//! `handle`'s request as types: what a router (Ductile protocol v2) writes on stdin, read once
//! and then used field by field, and published as docs/schema/handle-request.json.
//!
//! No type here refuses an unknown field: Ductile adds keys of its own (an event's `source`,
//! `timestamp`; its `ductile_*` control keys in payloads and contexts) and a plugin must keep
//! accepting them. A field agentloop reads and finds of the wrong type is refused, naming its
//! path (`event.payload.goal`), so a router sees what to fix instead of a run that ignores it.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// One request on `handle`'s stdin: a Ductile protocol v2 request, or a bare event (its `type`
/// and `payload` at the top level).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(transform = payload_by_type)]
pub struct HandleRequest {
    /// The protocol version (2)
    pub protocol: Option<u64>,
    /// The router's job; a retry of the job keeps it, so it is one of a start's keys
    pub job_id: Option<String>,
    /// handle (the default), health or poll
    #[schemars(with = "Option<String>")]
    pub command: Option<Command>,
    /// The plugin's configuration as the router holds it: agentloop's keys (or the plugin
    /// config's names for them), narrowing the root's configuration
    pub config: Option<Map<String, Value>>,
    /// The plugin's state as the router holds it: what earlier turns wrote in `state_updates`
    pub state: Option<RouterState>,
    /// The event to handle (protocol requests)
    pub event: Option<RequestEvent>,
    /// The request's context: a pipeline's baggage (`run_id`, `step` and `tool` correlate a
    /// tool's own event with the step that asked for it) and Ductile's control keys
    pub context: Option<RequestContext>,
    /// When the router gives up on the job: an RFC 3339 time
    pub deadline_at: Option<String>,
    /// A bare event's type
    #[serde(rename = "type")]
    #[schemars(with = "Option<String>")]
    pub kind: Option<EventKind>,
    /// A bare event's payload
    #[schemars(with = "Option<EventPayload>")]
    pub payload: Option<Value>,
    /// A bare event's dedupe key
    pub dedupe_key: Option<String>,
    /// A bare event's id
    pub event_id: Option<String>,
}

/// An event as a router delivers it.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(transform = payload_by_type)]
pub struct RequestEvent {
    /// agentic.start or api.trigger (start a run), agentic.tool_result (resume one), or a tool's
    /// own event type (resumed through the request's `context`)
    #[serde(rename = "type")]
    #[schemars(with = "Option<String>")]
    pub kind: Option<EventKind>,
    /// Read by the event's type: [`StartPayload`], [`ToolResultPayload`], or a tool's own content
    #[schemars(with = "Option<EventPayload>")]
    pub payload: Option<Value>,
    pub dedupe_key: Option<String>,
    pub event_id: Option<String>,
}

agentloop_types::words! {
    /// What a request asks `handle` to do (`command`); another word is answered as unknown.
    pub enum Command {
        /// Handle the request's event (the default).
        Handle => "handle",
        /// Say whether the root's configuration works; no run is touched.
        Health => "health",
        /// Sweep the runs under the root (waits past their grace).
        Poll => "poll",
    }
}

agentloop_types::words! {
    /// An event's `type`: the ones that start or resume a run; any other is a tool's own event
    /// (resumed through the request's `context`) or is ignored.
    pub enum EventKind {
        /// Start a run.
        Start => "agentic.start",
        /// Start a run, as an API call asks.
        Trigger => "api.trigger",
        /// Resume a run with its pending tool's result.
        ToolResult => "agentic.tool_result",
    }
}

impl EventKind {
    /// Whether the event starts a run ([`StartPayload`]).
    pub fn starts(&self) -> bool {
        matches!(self, EventKind::Start | EventKind::Trigger)
    }
}

/// The shapes an event's payload takes, for the published schema.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum EventPayload {
    Start(StartPayload),
    ToolResult(ToolResultPayload),
    Content(Map<String, Value>),
}

/// In the published schema, the payload's shape by the event's type, as [`payload`] reads it
/// (a tool's own event carries any content).
fn payload_by_type(schema: &mut schemars::Schema) {
    let shape = |types: &[EventKind], def: &str| {
        let types: Vec<&str> = types.iter().map(EventKind::as_str).collect();
        json!({
            "if": {"properties": {"type": {"enum": types}}, "required": ["type"]},
            "then": {"properties": {"payload": {"anyOf": [{"$ref": format!("#/$defs/{def}")}, {"type": "null"}]}}}
        })
    };
    schema.insert(
        "allOf".into(),
        json!([
            shape(&[EventKind::Start, EventKind::Trigger], "StartPayload"),
            shape(&[EventKind::ToolResult], "ToolResultPayload")
        ]),
    );
}

/// The payload of `agentic.start` and `api.trigger`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct StartPayload {
    /// What the run is to achieve
    pub goal: Option<String>,
    /// Background for context.md (text, or any JSON, written out pretty); its budget keys
    /// (max_steps or max_loops, max_reframes, timeout, max_tokens, max_cost_usd) narrow the run's
    pub context: Option<Value>,
    /// A JSON Schema object the run's outcome must satisfy
    pub output_schema: Option<Value>,
    /// How deep in agentloop's own requests this start is (the recursion guard); the name is
    /// [`agentloop_tools::ductile::DEPTH_KEY`]
    pub agentloop_depth: Option<u32>,
}

/// The payload of `agentic.tool_result`: the result of the step a run waits for.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ToolResultPayload {
    pub run_id: Option<String>,
    /// The step the result is for
    pub step: Option<StepRef>,
    /// The tool that ran (an alias of the pending tool's name is accepted)
    pub tool: Option<String>,
    /// ok (or success, succeeded, completed, done); anything else is a failure. Default: error
    /// when `error` is set, else ok
    pub status: Option<String>,
    /// What went wrong: text, or any JSON
    pub error: Option<Value>,
    /// The tool's output: text, or any JSON (an object's `artifact_path` names a file it wrote)
    pub result: Option<Value>,
}

/// A step number as routers send it: a number, or the number as text.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum StepRef {
    Number(u64),
    Text(String),
}

/// Read by hand rather than as an untagged enum, whose error names neither form.
impl<'de> Deserialize<'de> for StepRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = StepRef;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a step number (a whole number from 1, or that number as text)")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<StepRef, E> {
                Ok(StepRef::Number(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<StepRef, E> {
                u64::try_from(n)
                    .map(StepRef::Number)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(n), &self))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<StepRef, E> {
                Ok(StepRef::Text(s.to_string()))
            }
        }
        d.deserialize_any(Visit)
    }
}

impl StepRef {
    /// The step, when it is one.
    pub fn number(&self) -> Option<u32> {
        match self {
            StepRef::Number(n) => u32::try_from(*n).ok(),
            StepRef::Text(s) => s.trim().parse().ok(),
        }
    }
    /// As it was sent.
    pub fn to_value(&self) -> Value {
        match self {
            StepRef::Number(n) => Value::from(*n),
            StepRef::Text(s) => Value::from(s.as_str()),
        }
    }
}

/// A request's `context`: the correlation a pipeline's baggage carries, and everything else.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct RequestContext {
    pub run_id: Option<String>,
    pub step: Option<StepRef>,
    pub tool: Option<String>,
    /// Other baggage and Ductile's control keys
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl RequestContext {
    /// The context as it was sent, for telling a plugin's content from the keys Ductile merged
    /// into its payload ([`agentloop_tools::ductile::plugin_content`]).
    pub fn to_value(&self) -> Value {
        let mut m = self.rest.clone();
        if let Some(id) = &self.run_id {
            m.insert("run_id".into(), Value::from(id.as_str()));
        }
        if let Some(step) = &self.step {
            m.insert("step".into(), step.to_value());
        }
        if let Some(tool) = &self.tool {
            m.insert("tool".into(), Value::from(tool.as_str()));
        }
        Value::Object(m)
    }
}

/// The plugin's state as the router keeps it: one `run:<run_id>` key per run (a snapshot
/// object; null once dropped), the last run's summary keys, and an older `runs` map.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(transform = run_keys_schema)]
pub struct RouterState {
    /// The runs by id, as states written before each run had a key of its own hold them
    pub runs: Option<BTreeMap<String, RunSnapshot>>,
    pub last_run_id: Option<String>,
    /// `run:<run_id>` snapshots ([`RunSnapshot`]) and the other summary keys
    #[serde(flatten)]
    pub keys: Map<String, Value>,
}

/// In the published schema, each `run:<run_id>` key is a [`RunSnapshot`] or null, as
/// [`RouterState::run_keys`] reads it.
fn run_keys_schema(schema: &mut schemars::Schema) {
    schema.insert(
        "patternProperties".into(),
        json!({"^run:": {"anyOf": [{"$ref": "#/$defs/RunSnapshot"}, {"type": "null"}]}}),
    );
}

impl RouterState {
    /// The run snapshots under `run:<id>` keys, by id (a dropped run's null is not one); a
    /// snapshot that is not one is refused naming its key.
    pub fn run_keys(&self) -> Result<Vec<(String, RunSnapshot)>, RequestError> {
        let mut out = Vec::new();
        for (k, v) in &self.keys {
            let Some(id) = k.strip_prefix("run:").filter(|_| v.is_object()) else { continue };
            out.push((id.to_string(), payload(Some(v), &format!("state.{k}"))?));
        }
        Ok(out)
    }
}

/// One run as the router's state keeps it (`run:<run_id>`), written by the turn that last
/// changed it. Every field may be missing from a state an older version wrote.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunSnapshot {
    /// running, done or escalated
    pub status: Option<String>,
    pub goal: Option<String>,
    pub created_at: Option<String>,
    /// When the run last changed: an RFC 3339 UTC time
    pub updated_at: Option<String>,
    pub step: Option<u32>,
    pub max_steps: Option<u32>,
    pub reframes: Option<u32>,
    pub max_reframes: Option<u32>,
    pub pending_step: Option<u32>,
    pub pending_tool: Option<String>,
    pub pending_since: Option<String>,
    pub attempts: Option<u32>,
    pub completed_steps: Option<Vec<u32>>,
    pub workspace_ref: Option<String>,
    /// Keys this version does not write, kept as they were
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl RunSnapshot {
    /// The run's status, when the snapshot holds one this version writes.
    pub fn run_status(&self) -> Option<agentloop_workspace::workspace::Status> {
        self.status.as_deref().and_then(agentloop_workspace::workspace::Status::named)
    }
}

/// Why a request (or an event's payload) cannot be read; the text is what the response says.
#[derive(Debug)]
pub enum RequestError {
    /// Not JSON at all.
    Syntax(serde_json::Error),
    /// JSON, but not an object.
    NotObject,
    /// A field agentloop reads holds something it cannot use.
    Field { path: String, source: serde_json::Error },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Syntax(e) => write!(f, "the request is not valid JSON: {e}"),
            RequestError::NotObject => f.write_str("the request must be a JSON object"),
            RequestError::Field { path, source } => write!(f, "the request's `{path}` is not valid: {source}"),
        }
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RequestError::Syntax(e) | RequestError::Field { source: e, .. } => Some(e),
            RequestError::NotObject => None,
        }
    }
}

impl HandleRequest {
    /// Reads a request from its text, in one pass.
    pub fn parse(text: &str) -> Result<HandleRequest, RequestError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let req = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                RequestError::Syntax(inner)
            } else if path == "." {
                RequestError::NotObject
            } else {
                RequestError::Field { path, source: inner }
            }
        })?;
        de.end().map_err(RequestError::Syntax)?;
        Ok(req)
    }

    /// Whether this is a protocol request rather than a bare event.
    pub fn is_protocol(&self) -> bool {
        self.event.is_some() || self.protocol.is_some() || self.command.is_some()
    }

    /// The event to handle, and where its fields are in the request (`event`, or the top level
    /// for a bare event), for naming them in an error.
    pub fn take_event(&mut self) -> (RequestEvent, &'static str) {
        if self.is_protocol() {
            return (self.event.take().unwrap_or_default(), "event.");
        }
        let bare = RequestEvent {
            kind: self.kind.take(),
            payload: self.payload.take(),
            dedupe_key: self.dedupe_key.take(),
            event_id: self.event_id.take(),
        };
        (bare, "")
    }
}

/// An event's payload read as `T`; an error names the field as `at` and its path inside.
pub fn payload<T: DeserializeOwned + Default>(payload: Option<&Value>, at: &str) -> Result<T, RequestError> {
    let Some(v) = payload.filter(|v| !v.is_null()) else { return Ok(T::default()) };
    serde_path_to_error::deserialize(v).map_err(|e| {
        let inner = e.path().to_string();
        let path = if inner == "." { at.to_string() } else { format!("{at}.{inner}") };
        RequestError::Field { path, source: e.into_inner() }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_depth_field_is_the_depth_key() {
        let p: StartPayload =
            payload(Some(&serde_json::json!({agentloop_tools::ductile::DEPTH_KEY: 2})), "payload").unwrap();
        assert_eq!(p.agentloop_depth, Some(2));
    }

    #[test]
    fn errors_name_the_field_path() {
        let e = HandleRequest::parse(r#"{"command": "handle", "event": {"type": 5}}"#).unwrap_err();
        assert!(e.to_string().starts_with("the request's `event.type` is not valid: invalid type: integer"), "{e}");
        let e = payload::<StartPayload>(Some(&serde_json::json!({"goal": ["x"]})), "event.payload").unwrap_err();
        assert!(e.to_string().starts_with("the request's `event.payload.goal` is not valid"), "{e}");
        let e = payload::<ToolResultPayload>(Some(&serde_json::json!({"step": -1})), "event.payload").unwrap_err();
        assert!(
            e.to_string().ends_with("expected a step number (a whole number from 1, or that number as text)"),
            "{e}"
        );
        assert!(matches!(HandleRequest::parse("[]"), Err(RequestError::NotObject)));
        assert!(matches!(HandleRequest::parse("{} x"), Err(RequestError::Syntax(_))));
        assert!(matches!(HandleRequest::parse(""), Err(RequestError::Syntax(_))));
    }

    #[test]
    fn unknown_fields_are_accepted_and_context_round_trips() {
        let r = HandleRequest::parse(
            r#"{"protocol": 2, "event": {"type": "x", "source": "s", "timestamp": "t"}, "context": {"run_id": "r", "step": "2", "ductile_step_id": "a"}, "extra": 1}"#,
        )
        .unwrap();
        let ctx = r.context.unwrap();
        assert_eq!(ctx.step.as_ref().and_then(StepRef::number), Some(2));
        assert_eq!(ctx.to_value(), serde_json::json!({"ductile_step_id": "a", "run_id": "r", "step": "2"}));
    }

    #[test]
    fn commands_and_event_types_are_read_by_word_and_others_kept() {
        let r = HandleRequest::parse(r#"{"command": "poll", "event": {"type": "api.trigger"}}"#).unwrap();
        assert_eq!(r.command, Some(Command::Poll));
        assert!(r.event.as_ref().and_then(|e| e.kind.as_ref()).is_some_and(EventKind::starts));
        let r = HandleRequest::parse(r#"{"type": "fetch.completed"}"#).unwrap();
        assert_eq!(r.kind, Some(EventKind::Other("fetch.completed".into())));
        for (word, kind) in [
            ("agentic.start", EventKind::Start),
            ("api.trigger", EventKind::Trigger),
            ("agentic.tool_result", EventKind::ToolResult),
        ] {
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{word}\""));
            assert!(matches!(serde_json::from_str::<EventKind>(&format!("\"{word}\"")), Ok(k) if k == kind));
        }
        for c in Command::KNOWN {
            assert_eq!(&Command::named(c.as_str()), c);
        }
        assert_eq!(serde_json::to_string(&Command::named("restart")).unwrap(), r#""restart""#);
        let e = HandleRequest::parse(r#"{"command": 5}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the request's `command` is not valid: invalid type: integer `5`, expected a string"),
            "{e}"
        );
    }
}
