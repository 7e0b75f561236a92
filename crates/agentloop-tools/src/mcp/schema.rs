//! From an MCP server's tool to a registry tool: the name providers accept and an input schema
//! that can sit inside the Plan answer's tool union.
//!
//! Invariants: a registry name matches `^[a-zA-Z0-9_-]{1,64}$` (the strictest provider rule,
//! OpenAI's) and is `<server>__<tool>` whenever that fits; a normalised schema is a
//! self-contained object schema (no `$ref` to `$defs` that would dangle once embedded in another
//! schema, no `$schema`/`$id`) that the `jsonschema` crate compiles. A tool whose schema cannot
//! be made so is dropped with a warning, never sent.

use agentloop_types::tool_spec::SideEffect;
use serde_json::{json, Map, Value};

pub const MAX_NAME: usize = 64;
/// Longest description kept in the catalog; servers sometimes ship pages of prose.
pub const MAX_DESCRIPTION: usize = 1024;

/// `<server>__<tool>` with every character outside `[A-Za-z0-9_-]` replaced by `_`, cut to 64
/// characters with a short hash of the original when longer.
pub fn registry_name(slug: &str, tool: &str) -> String {
    let clean: String =
        tool.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    let full = format!("{slug}__{clean}");
    if full.len() <= MAX_NAME && clean == tool && !clean.is_empty() {
        return full;
    }
    // Changed or too long: a hash of the original keeps distinct tools distinct.
    let hash = format!("{:08x}", super::config::fnv1a(tool.as_bytes()) as u32);
    let base: String = full.chars().take(MAX_NAME - hash.len() - 1).collect();
    format!("{base}_{hash}")
}

/// The side-effect class from the tool's annotations (hints, used for the default risk note).
pub fn side_effect(annotations: Option<&Value>, http: bool) -> SideEffect {
    let hint = |k: &str| annotations.and_then(|a| a.get(k)).and_then(Value::as_bool);
    match (hint("readOnlyHint"), hint("openWorldHint")) {
        (_, Some(true)) => SideEffect::Network,
        (Some(true), _) if !http => SideEffect::Read,
        _ if http => SideEffect::Network,
        _ => SideEffect::Exec,
    }
}

/// The description shown in the catalog: the server's, cut to [`MAX_DESCRIPTION`] characters.
pub fn description(server: &str, tool: &Value) -> String {
    let d = tool
        .get("description")
        .and_then(Value::as_str)
        .or_else(|| tool.get("title").and_then(Value::as_str))
        .unwrap_or("")
        .trim();
    let mut d: String = if d.is_empty() {
        format!("Tool `{}` of MCP server {server}.", tool.get("name").and_then(Value::as_str).unwrap_or(""))
    } else {
        d.to_string()
    };
    if d.chars().count() > MAX_DESCRIPTION {
        d = d.chars().take(MAX_DESCRIPTION - 1).collect::<String>() + "…";
    }
    format!("{d} (MCP server {server})")
}

/// Normalises a server's input schema into an object schema providers accept; the error says
/// why the tool cannot be offered.
pub fn normalise(schema: &Value) -> Result<Value, Unusable> {
    let Some(root) = schema.as_object() else {
        return Err(Unusable::NotAnObject);
    };
    let defs = collect_defs(root);
    let mut v = Value::Object(root.clone());
    inline_refs(&mut v, &defs, 0)?;
    strip(&mut v);
    let Some(o) = v.as_object_mut() else {
        return Err(Unusable::NotAnObject);
    };
    o.remove("$defs");
    o.remove("definitions");
    match o.get("type") {
        None => {
            o.insert("type".into(), json!("object"));
        }
        Some(Value::String(t)) if t == "object" => {}
        Some(Value::Array(ts)) if ts.contains(&json!("object")) => {
            o.insert("type".into(), json!("object"));
        }
        Some(other) => return Err(Unusable::NotObjectType(other.clone())),
    }
    if !o.contains_key("properties") {
        o.insert("properties".into(), json!({}));
    }
    if let Err(e) = jsonschema::validator_for(&v) {
        return Err(Unusable::Invalid(e.to_string()));
    }
    Ok(v)
}

/// Why a server's input schema cannot be offered to a model; the text finishes "tool X is left
/// out: ...".
#[derive(Debug, Clone, PartialEq)]
pub enum Unusable {
    NotAnObject,
    /// Its `type` (shown) is not object.
    NotObjectType(Value),
    /// A `$ref` (shown) that points nowhere inside it.
    Unresolved(String),
    /// What the JSON Schema validator said of it.
    Invalid(String),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::NotAnObject => f.write_str("its inputSchema is not a JSON object"),
            Unusable::NotObjectType(t) => write!(f, "its inputSchema has type {t}, not object"),
            Unusable::Unresolved(r) => write!(f, "its inputSchema has a $ref `{r}` that does not resolve inside it"),
            Unusable::Invalid(e) => write!(f, "its inputSchema is not a valid JSON Schema: {e}"),
        }
    }
}

impl std::error::Error for Unusable {}

fn collect_defs(root: &Map<String, Value>) -> Map<String, Value> {
    let mut defs = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = root.get(key) {
            for (k, v) in d {
                defs.insert(format!("#/{key}/{k}"), v.clone());
            }
        }
    }
    defs
}

/// Deep enough for real schemas; a recursive type stops here as a free-form value.
const MAX_REF_DEPTH: usize = 6;

fn inline_refs(v: &mut Value, defs: &Map<String, Value>, depth: usize) -> Result<(), Unusable> {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref").cloned().as_ref() {
                let Some(target) = defs.get(r.as_str()) else {
                    return Err(Unusable::Unresolved(r.clone()));
                };
                o.remove("$ref");
                let mut t = if depth >= MAX_REF_DEPTH {
                    json!({"description": "(nested too deeply to describe)"})
                } else {
                    let mut t = target.clone();
                    inline_refs(&mut t, defs, depth + 1)?;
                    t
                };
                // Keywords beside the $ref (a description, a default) win over the target's.
                if let Value::Object(tm) = &mut t {
                    for (k, val) in std::mem::take(o) {
                        tm.insert(k, val);
                    }
                }
                *v = t;
                return Ok(());
            }
            for (k, child) in o.iter_mut() {
                if k == "$defs" || k == "definitions" {
                    continue;
                }
                if k == "properties" {
                    if let Value::Object(props) = child {
                        for p in props.values_mut() {
                            inline_refs(p, defs, depth)?;
                        }
                    }
                    continue;
                }
                inline_refs(child, defs, depth)?;
            }
            Ok(())
        }
        Value::Array(a) => a.iter_mut().try_for_each(|x| inline_refs(x, defs, depth)),
        _ => Ok(()),
    }
}

/// Drops keywords that only describe the document (`$schema`, `$id`, `$comment`, `title`), so
/// the schema embeds cleanly and strict modes can take it.
fn strip(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for k in ["$schema", "$id", "$comment", "title"] {
                o.remove(k);
            }
            for (k, child) in o.iter_mut() {
                if k == "properties" {
                    if let Value::Object(props) = child {
                        props.values_mut().for_each(strip);
                    }
                } else {
                    strip(child);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_name(n: &str) -> bool {
        !n.is_empty() && n.len() <= 64 && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_are_provider_safe_and_distinct() {
        assert_eq!(registry_name("time", "get_current_time"), "time__get_current_time");
        let a = registry_name("fs", "read.file");
        let b = registry_name("fs", "read:file");
        assert!(ok_name(&a) && ok_name(&b) && a != b, "{a} {b}");
        assert!(a.starts_with("fs__read_file_"), "{a}");
        let long = "x".repeat(100);
        let l1 = registry_name("srv", &long);
        let l2 = registry_name("srv", &format!("{long}y"));
        assert!(ok_name(&l1) && ok_name(&l2) && l1 != l2, "{l1} {l2}");
        assert!(ok_name(&registry_name("srv", "")));
        assert!(ok_name(&registry_name("srv", "日本語")));
    }

    #[test]
    fn schemas_are_normalised() {
        // No type, $schema and a title: becomes a plain object schema.
        let n = normalise(&json!({"$schema": "http://json-schema.org/draft-07/schema#", "title": "T", "properties": {"title": {"type": "string", "title": "Title"}}})).unwrap();
        assert_eq!(n, json!({"properties": {"title": {"type": "string"}}, "type": "object"}));
        // Empty: an object with no properties.
        assert_eq!(normalise(&json!({})).unwrap(), json!({"type": "object", "properties": {}}));
        // $defs are inlined.
        let n = normalise(&json!({
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/P", "description": "the point"}},
            "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}
        }))
        .unwrap();
        assert_eq!(n["properties"]["p"]["properties"]["x"]["type"], "number");
        assert_eq!(n["properties"]["p"]["description"], "the point");
        assert!(n.get("$defs").is_none() && !n.to_string().contains("$ref"));
        // Recursive definitions stop.
        let n = normalise(&json!({"properties": {"t": {"$ref": "#/definitions/T"}}, "definitions": {"T": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/definitions/T"}}}}}})).unwrap();
        assert!(!n.to_string().contains("$ref"));
        // Refused: not an object, a non-object type, a dangling ref, an invalid schema.
        assert!(normalise(&json!("x")).is_err());
        assert!(normalise(&json!({"type": "string"})).unwrap_err().to_string().contains("not object"));
        assert_eq!(
            normalise(&json!({"properties": {"a": {"$ref": "#/$defs/Nope"}}})).unwrap_err(),
            Unusable::Unresolved("#/$defs/Nope".into())
        );
        assert!(normalise(&json!({"type": "object", "properties": {"a": {"type": "strang"}}})).is_err());
    }

    #[test]
    fn side_effects_follow_hints() {
        assert_eq!(side_effect(Some(&json!({"readOnlyHint": true})), false), SideEffect::Read);
        assert_eq!(
            side_effect(Some(&json!({"readOnlyHint": true, "openWorldHint": true})), false),
            SideEffect::Network
        );
        assert_eq!(side_effect(None, false), SideEffect::Exec);
        assert_eq!(side_effect(None, true), SideEffect::Network);
    }
}
