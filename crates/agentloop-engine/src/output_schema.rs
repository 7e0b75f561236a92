//! The user's output schema (`run --output-schema FILE`, `output_schema` in config, a `serve`
//! request or `handle`'s start payload): read and checked when a run starts — a JSON Schema
//! object that compiles, without `$ref`, and one the provider's strict mode can take when that
//! mode will be used — and the final output held to it. The run keeps the schema in state.json;
//! `contract::plan_tool` puts it into `finish`'s parameters, Act checks what `finish` gave.

use agentloop_types::error::{Error, Result};
use serde_json::Value;

/// The run's output schema from `output_schema` (an object, or a JSON file relative to `root`),
/// checked: a JSON Schema object that compiles, and — when `strict` says the provider's strict
/// mode will be used — one strict mode can take. The error names the key or file and the fix.
pub fn resolve(cfg: &agentloop_config::config::Config, root: &camino::Utf8Path, strict: bool) -> Result<Option<Value>> {
    let (schema, from) = match &cfg.output_schema {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(path)) => {
            let p = root.join(path);
            let hint = "name a JSON file relative to the workspace, or give the schema itself as an object";
            // A relative path is a workspace file, read as the workspace's own files are: never
            // through a link that leads outside it (what it holds is sent to the model).
            let read = if camino::Utf8Path::new(path).is_relative() {
                agentloop_io::fs::read_inside(root, &p)
            } else {
                agentloop_io::fs::read_to_string(&p).map(Some)
            };
            let text = read
                .map_err(|e| {
                    Error { message: format!("output_schema: {}", e.message), hints: Vec::new(), ..e }.with_hint(hint)
                })?
                .ok_or_else(|| Error::usage(format!("output_schema: {p} does not exist")).with_hint(hint))?;
            let v: Value = serde_json::from_str(&text).map_err(|e| {
                Error::usage(format!("output_schema: {p} is not JSON"))
                    .with_hint("the file must hold one JSON Schema object")
                    .with_source(e)
            })?;
            (v, p.to_string())
        }
        Some(v) => (v.clone(), "output_schema".to_string()),
    };
    check_schema(&schema, &from, strict)?;
    Ok(Some(schema))
}

/// The largest output schema taken, as JSON: it goes into the finish tool's parameters, so into
/// every plan call, state.json and each compiled validator; a schema of megabytes (a huge `enum`)
/// would cost its size in tokens each step and hundreds of megabytes to compile.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// A user's output schema must be an object schema that compiles; under strict mode, one that
/// strict mode can take (else the run is refused before it starts, with the reason).
pub fn check_schema(schema: &Value, from: &str, strict: bool) -> Result<()> {
    if !schema.is_object() {
        return Err(Error::usage(format!("{from}: the output schema must be a JSON Schema object"))
            .with_hint("e.g. {\"type\": \"object\", \"properties\": {\"title\": {\"type\": \"string\"}}, \"required\": [\"title\"]}"));
    }
    let text = schema.to_string();
    if text.len() > MAX_SCHEMA_BYTES {
        return Err(Error::usage(format!(
            "{from}: the output schema is {} KiB; at most {} KiB is taken, as it is sent with every plan call",
            text.len() / 1024,
            MAX_SCHEMA_BYTES / 1024
        ))
        .with_hint("shorten it: a long `enum` is better checked by a `pattern`, or after the run"));
    }
    if text.contains("\"$ref\"") {
        return Err(Error::usage(format!("{from}: the output schema uses `$ref`; it is sent inside the finish tool's parameters, where references do not resolve"))
            .with_hint("inline the definitions it refers to"));
    }
    if let Err(e) = jsonschema::validator_for(schema) {
        return Err(Error::usage(format!("{from}: the output schema is not a valid JSON Schema: {e}")));
    }
    if strict {
        if let Some(why) = crate::contract::strict_refusal(schema) {
            return Err(Error::usage(format!(
                "{from}: the provider's strict schema mode cannot take this output schema: {why}"
            ))
            .with_hint("close every object (`additionalProperties: false`, with `properties`) and use only the keywords strict mode takes, or set llm.strict: false"));
        }
    }
    Ok(())
}

/// Whether `output` matches the run's output schema; the error lists what does not.
pub fn check_output(schema: &Value, output: Option<&Value>) -> std::result::Result<(), OutputError> {
    let Some(output) = output else { return Err(OutputError::Missing) };
    let v = agentloop_tools::tools::validator(schema).map_err(OutputError::Schema)?;
    agentloop_tools::tools::validate_with(&v, output).map_err(OutputError::Mismatch)
}

/// Why a `finish` output is refused, as the step's error says.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputError {
    /// `finish` gave no `output`.
    Missing,
    /// The output schema itself does not compile.
    Schema(agentloop_tools::tools::SchemaError),
    /// The output breaks the schema.
    Mismatch(agentloop_tools::tools::SchemaError),
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutputError::Missing => {
                f.write_str("`finish` needs `output`, the final output as an object matching the output schema")
            }
            OutputError::Schema(e) => write!(f, "{e}"),
            OutputError::Mismatch(e) => {
                write!(f, "the output does not match the output schema: {}", e.describe("output"))
            }
        }
    }
}

impl std::error::Error for OutputError {}
