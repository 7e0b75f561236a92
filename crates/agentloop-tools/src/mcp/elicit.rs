//! How agentloop answers a server that asks it to fill in a form (MCP elicitation) while a
//! tool runs. Nobody waits at a terminal for a tool call, so the answer is decided at once:
//! a form whose every required field has a default is accepted with the defaults (what the
//! schema's author chose for a caller who says nothing: SEP-1034), anything else is declined.
//! A server that asks for a URL to be opened is declined too (agentloop announces only the
//! form mode). Every answer is recorded, so the tool result and the trace say what was asked
//! and what was answered.
//!
//! Invariants: the handler never blocks and never fails a request; what it records is the
//! server's message (capped) and exactly what was sent back.

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    ErrorData, FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::ClientHandler;
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};

/// The longest server message kept in a record: a server's words, not its payload.
const MAX_MESSAGE: usize = 500;

/// The client side of one connection: what it announces and how it answers elicitations.
#[derive(Clone)]
pub struct Handler {
    /// Every elicitation answered since the last [`Handler::take`].
    log: Arc<Mutex<Vec<Value>>>,
}

impl Handler {
    pub fn new() -> Self {
        Handler { log: Arc::new(Mutex::new(vec![])) }
    }

    /// The elicitations answered since the last call (during the call just made).
    pub fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Default for Handler {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // Form elicitation only: a URL would need a person to open it.
        let mut caps = ClientCapabilities::default();
        caps.elicitation = Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        ClientConfig::new(caps, Implementation::new("agentloop", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let (result, record) = answer(&request);
        self.log.lock().unwrap_or_else(|e| e.into_inner()).push(record);
        Ok(result)
    }
}

/// The answer to one elicitation request, and its record.
pub fn answer(request: &ElicitRequestParams) -> (ElicitResult, Value) {
    match request {
        ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
            let schema = serde_json::to_value(requested_schema).unwrap_or(Value::Null);
            let mut record = json!({"mode": "form", "message": cap(message)});
            match defaults(&schema) {
                Ok(content) => {
                    record["action"] = json!("accept");
                    record["content"] = Value::Object(content.clone());
                    (ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content)), record)
                }
                Err(why) => {
                    record["action"] = json!("decline");
                    record["reason"] = json!(why.to_string());
                    (ElicitResult::new(ElicitationAction::Decline), record)
                }
            }
        }
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            let record = json!({
                "mode": "url",
                "message": cap(message),
                "url": cap(url),
                "action": "decline",
                "reason": "agentloop opens no link for a server: nobody is there to follow it",
            });
            (ElicitResult::new(ElicitationAction::Decline), record)
        }
        _ => (
            ElicitResult::new(ElicitationAction::Decline),
            json!({"mode": "unknown", "action": "decline", "reason": "a kind of elicitation agentloop does not know"}),
        ),
    }
}

/// The form filled with its defaults: every field that has one. Refused (why) when a required
/// field has none, or no field has any: accepting then would be agentloop making up an answer.
pub fn defaults(schema: &Value) -> Result<Map<String, Value>, Declined> {
    let props = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(missing) = required.iter().find(|r| props.get(**r).and_then(|p| p.get("default")).is_none()) {
        return Err(Declined::NoDefault(missing.to_string()));
    }
    let content: Map<String, Value> =
        props.iter().filter_map(|(k, p)| p.get("default").map(|d| (k.clone(), d.clone()))).collect();
    if content.is_empty() {
        return Err(Declined::NoDefaults);
    }
    Ok(content)
}

/// Why a form was declined: agentloop fills in only what the form itself says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Declined {
    /// This required field has no default.
    NoDefault(String),
    NoDefaults,
}

impl std::fmt::Display for Declined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Declined::NoDefault(field) => {
                write!(f, "the required field `{field}` has no default, and nobody is there to fill it in")
            }
            Declined::NoDefaults => f.write_str("no field has a default, and nobody is there to fill the form in"),
        }
    }
}

impl std::error::Error for Declined {}

fn cap(s: &str) -> String {
    if s.chars().count() <= MAX_MESSAGE {
        return s.to_string();
    }
    let mut t: String = s.chars().take(MAX_MESSAGE).collect();
    t.push('…');
    t
}

/// One line per elicitation for the tool's output, so the model reading the result knows the
/// server asked and what agentloop answered on its behalf.
pub fn note(records: &[Value]) -> String {
    records
        .iter()
        .map(|r| {
            let msg = r["message"].as_str().unwrap_or("");
            match r["action"].as_str() {
                Some("accept") => format!(
                    "[the server asked for input (elicitation: \"{msg}\"); agentloop accepted the form's defaults: {}]",
                    r["content"]
                ),
                _ => format!(
                    "[the server asked for input (elicitation: \"{msg}\"); agentloop declined: {}]",
                    r["reason"].as_str().unwrap_or("")
                ),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_the_form_only_when_every_required_field_has_one() {
        let s = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "note": {"type": "string"}}, "required": ["name"]});
        assert_eq!(Value::Object(defaults(&s).unwrap()), json!({"name": "John Doe", "age": 30}));
        let s = json!({"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]});
        assert_eq!(defaults(&s).unwrap_err(), Declined::NoDefault("note".into()));
        let s = json!({"type": "object", "properties": {"note": {"type": "string"}}});
        assert_eq!(defaults(&s).unwrap_err(), Declined::NoDefaults);
    }
}
