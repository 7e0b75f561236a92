//! The answer schemas of lean prompts (`prompts: lean`), for a small model on a local server:
//! only the fields a run needs, and the rules a grammar can hold the model to written into the
//! schema rather than checked after. Each is a narrowing of the full schema in
//! [`crate::contract`], so the answer parses as the same type.

use crate::contract::{answer_tool, plan_tool};
use agentloop_model::model::ToolDef;
use agentloop_types::tool_spec::ToolSpec;
use serde_json::{json, Value};

/// Plan's lean answer: `next_action` alone (no outline, expected outcome, risk or rationale,
/// which a small model fills with noise that later prompts carry), and no descriptions inside
/// the tools' arguments (a small model copies them into paths and file contents).
pub fn plan(tools: &[&ToolSpec], output: Option<&Value>) -> ToolDef {
    let full = plan_tool(tools, output);
    let mut next = full.parameters["properties"]["next_action"].clone();
    strip_descriptions(&mut next);
    let schema = json!({
        "type": "object",
        "properties": {"next_action": next},
        "required": ["next_action"],
        "additionalProperties": false,
    });
    answer_tool("plan_answer", "Record the one next action.", schema)
}

/// Every `description` inside a schema, removed.
fn strip_descriptions(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("description").is_some_and(Value::is_string) {
                o.remove("description");
            }
            o.values_mut().for_each(strip_descriptions);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

/// Reflect's lean answer, a union of two shapes. `done` must tick every item still `open`, each
/// citing steps among `steps` (this run's steps whose actions succeeded): the rule that `done`
/// needs every item ticked with evidence is in the schema, so a grammar keeps a model to it.
/// The other shape decides `continue`, `reframe` or `escalate`, with any ticks it can back.
/// With no step to cite, there is nothing to tick, and `done` only when nothing is open.
pub fn reflect(open: &[u32], steps: &[u32]) -> ToolDef {
    let tick = json!({
        "type": "object",
        "properties": {
            "item": {"type": "integer", "enum": open},
            "steps": {"type": "array", "items": {"type": "integer", "enum": steps}, "minItems": 1},
        },
        "required": ["item", "steps"],
        "additionalProperties": false,
    });
    let can_tick = !open.is_empty() && !steps.is_empty();
    let mut done = json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["done"]},
            "outcome": {"type": "string", "maxLength": 1000},
        },
        "required": ["decision"],
        "additionalProperties": false,
    });
    let mut other = json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["continue", "reframe", "escalate"]},
            "reason": {"type": "string", "maxLength": 500},
        },
        "required": ["decision"],
        "additionalProperties": false,
    });
    let mut variants = Vec::new();
    if can_tick {
        let all = json!({"type": "array", "items": tick, "minItems": open.len(), "maxItems": open.len()});
        done = with_first(done, "satisfied", all);
        done["required"] = json!(["satisfied", "decision"]);
        other = with_first(other, "satisfied", json!({"type": "array", "items": tick, "maxItems": open.len()}));
    }
    if can_tick || open.is_empty() {
        variants.push(done);
    }
    variants.push(other);
    let schema = if variants.len() == 1 { variants.remove(0) } else { json!({"anyOf": variants}) };
    answer_tool("reflect_answer", "Record the items met and the decision.", schema)
}

/// A lean answer's ticks as the full mending lays them out ([`crate::contract::mend_satisfied`]),
/// less the empty `artifacts` list the lean tick does not have (it cites steps).
pub fn drop_empty_artifacts(v: &mut Value) {
    for t in v.get_mut("satisfied").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(o) = t.as_object_mut() {
            if o.get("artifacts").and_then(Value::as_array).is_some_and(Vec::is_empty) {
                o.remove("artifacts");
            }
        }
    }
}

/// `schema` with the property `name` first (a grammar writes properties in order: the ticks
/// before the decision they lead to).
fn with_first(mut schema: Value, name: &str, prop: Value) -> Value {
    let mut props = serde_json::Map::new();
    props.insert(name.to_string(), prop);
    if let Some(Value::Object(rest)) = schema.get_mut("properties").map(Value::take) {
        props.extend(rest);
    }
    schema["properties"] = Value::Object(props);
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(tool: &ToolDef, v: Value) -> bool {
        jsonschema::is_valid(&tool.parameters, &v)
    }

    /// `done` needs every open item ticked with a step that succeeded; the other decisions need
    /// no tick; an item or step that is not among those given is outside the schema.
    #[test]
    fn done_must_tick_every_open_item_with_a_step_that_succeeded() {
        let t = reflect(&[1, 2], &[1, 3]);
        assert!(valid(&t, json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [3]}], "decision": "done"})));
        assert!(!valid(&t, json!({"satisfied": [], "decision": "done"})));
        assert!(!valid(&t, json!({"decision": "done"})));
        assert!(!valid(&t, json!({"satisfied": [{"item": 1, "steps": [2]}, {"item": 2, "steps": [3]}], "decision": "done"})));
        assert!(!valid(&t, json!({"satisfied": [{"item": 5, "steps": [1]}, {"item": 2, "steps": [3]}], "decision": "done"})));
        assert!(valid(&t, json!({"decision": "continue"})));
        assert!(valid(&t, json!({"satisfied": [{"item": 2, "steps": [1]}], "decision": "continue"})));
        // Nothing to cite: no ticks, and no `done` while items are open.
        let t = reflect(&[1], &[]);
        assert!(!valid(&t, json!({"decision": "done"})));
        assert!(valid(&t, json!({"decision": "escalate", "reason": "stuck"})));
        // Nothing open: `done` with no ticks.
        assert!(valid(&reflect(&[], &[1]), json!({"decision": "done", "outcome": "ok"})));
    }
}
