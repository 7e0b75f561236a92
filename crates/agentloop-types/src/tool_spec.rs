//! What a tool is and what it returns: the spec every part of agentloop describes tools with
//! (the registry, MCP servers, Ductile plugins, the catalog, the answer schema) and the uniform
//! result of a call, and how a type's JSON Schema is generated for them. A leaf below the
//! registry and the answer contract, so tool sources do not depend on either.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// A tool's one name: `submit_response` is an alias of `finish`.
pub fn canonical(name: &str) -> &str {
    if name == "submit_response" {
        "finish"
    } else {
        name
    }
}

/// Whether `name` (or its alias) is the tool that ends the run.
pub fn is_finish(name: &str) -> bool {
    canonical(name) == "finish"
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SideEffect {
    /// Reads local files only.
    Read,
    /// Writes local files.
    Write,
    /// Talks to the network.
    Network,
    /// Runs a program.
    Exec,
    /// Ends the run; no effect outside agentloop.
    None,
    /// Run by another system (event mode); effects unknown.
    External,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub side_effect: SideEffect,
    #[serde(serialize_with = "ser_secs")]
    pub timeout: Duration,
    pub output_cap: usize,
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

/// Whether a tool call worked (`ok`) or failed (`error`, with the reason in `error`); written
/// as that word in state.json, the trace's `result_status` and the prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    Ok,
    Error,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
        }
    }

    /// The status another system reported for a tool it ran: `ok`, or a word routers and
    /// plugins say it with (`success`, `succeeded`, `completed`, `done`), any case, blanks
    /// aside; any other word is a failure.
    pub fn reported(word: &str) -> ToolStatus {
        let word = word.trim().to_lowercase();
        if matches!(word.as_str(), "ok" | "success" | "succeeded" | "completed" | "done") {
            ToolStatus::Ok
        } else {
            ToolStatus::Error
        }
    }
}

impl std::fmt::Display for ToolStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The uniform result of every tool call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ToolResult {
    pub status: ToolStatus,
    pub output: String,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub retryable: bool,
    #[serde(default)]
    pub metadata: Value,
    #[serde(default)]
    pub artifacts: Vec<String>,
}

impl ToolResult {
    pub fn ok(output: impl Into<String>, metadata: Value) -> Self {
        ToolResult {
            status: ToolStatus::Ok,
            output: output.into(),
            error: None,
            retryable: false,
            metadata,
            artifacts: vec![],
        }
    }
    pub fn err(error: impl Into<String>, retryable: bool) -> Self {
        ToolResult {
            status: ToolStatus::Error,
            output: String::new(),
            error: Some(error.into()),
            retryable,
            metadata: Value::Null,
            artifacts: vec![],
        }
    }
    pub fn is_ok(&self) -> bool {
        self.status == ToolStatus::Ok
    }
    /// One line for the trace and for people.
    pub fn summary(&self) -> String {
        let base = match &self.error {
            Some(e) => e.clone(),
            None => self.output.clone(),
        };
        let line: String = base.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut s: String = line.chars().take(200).collect();
        if line.chars().count() > 200 {
            s.push('…');
        }
        s
    }
}

/// A type's JSON Schema as agentloop sends schemas: inlined, without `$schema`, titles, formats
/// that only describe Rust integer widths, empty defaults, or the type's own description (the tool's description
/// says what it is). The answer schemas (`contract`) and the built-in tools' parameters
/// (`tools::builtin`) both start from it.
pub fn schema_for<T: schemars::JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut v = settings.into_generator().into_root_schema_for::<T>().to_value();
    tidy(&mut v);
    // The tool's own description says what the answer is.
    v.as_object_mut().map(|o| o.remove("description"));
    v
}

fn tidy(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("title");
            o.remove("$schema");
            // An empty default says only that the field may be left out, which `required`
            // already says: tokens in every call's tools for no information.
            if o.get("default").is_some_and(|d| d == "" || d.as_array().is_some_and(Vec::is_empty)) {
                o.remove("default");
            }
            if o.get("format").and_then(Value::as_str).is_some_and(|f| f.starts_with("uint") || f.starts_with("int")) {
                o.remove("format");
            }
            for (k, child) in o.iter_mut() {
                // Property names are data, not keywords: recurse into their schemas only.
                if k == "properties" {
                    if let Value::Object(props) = child {
                        props.values_mut().for_each(tidy);
                    }
                } else {
                    tidy(child);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// A Definition-of-Done item a later step can check: not a markdown heading, and with a word in
/// it (a letter; any character past Latin-1's symbols counts as one), on one line, with no double
/// quote or backslash. Written so that grammar builders (llama.cpp's) turn it into a grammar that
/// keeps a model inside a JSON string: they apply a pattern to the string's raw text, so a class
/// that admitted `"` would let the model close the string early. Anchored, no `\s`, no lookaround.
/// An item that breaks only the quote, backslash or line rule is mended, not refused
/// (`contract::mend`).
pub const CHECKABLE_ITEM: &str = "^ *([A-Za-z\\u00C0-\\uFFFF]|[^\"\\\\# A-Za-z\\u00C0-\\uFFFF\\x00-\\x1F][^\"\\\\A-Za-z\\u00C0-\\uFFFF\\x00-\\x1F]*[A-Za-z\\u00C0-\\uFFFF])[^\"\\\\\\x00-\\x1F]*$";

/// What [`CHECKABLE_ITEM`] asks, as a model is told when an item breaks it.
pub const CHECKABLE_ITEM_MEANS: &str = "is a heading or has no words (an item is a result a later step can check)";

/// How many of a value's problems [`SchemaError::describe`] names.
pub const SHOWN_PROBLEMS: usize = 8;
/// The most characters of one problem [`SchemaError::describe`] says.
pub const PROBLEM_CHARS: usize = 300;

/// Why a value does not fit a JSON Schema, as the model is told it.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaError {
    /// The schema itself does not compile: the validator's reason.
    Invalid(String),
    /// Where the value breaks the schema (a dotted path, empty at its top) and how.
    Mismatch(Vec<(String, String)>),
}

impl SchemaError {
    /// The problems of the value called `noun` (arguments, output), one line: at most
    /// [`SHOWN_PROBLEMS`] of them, each cut to [`PROBLEM_CHARS`] characters (the validator quotes
    /// the value it refuses, which a model may have made as long as it likes).
    pub fn describe(&self, noun: &str) -> String {
        match self {
            SchemaError::Invalid(e) => format!("the tool's schema is invalid: {e}"),
            SchemaError::Mismatch(found) => {
                let mut each: Vec<String> = found
                    .iter()
                    .take(SHOWN_PROBLEMS)
                    .map(|(at, what)| {
                        let mut what = what.clone();
                        crate::text::cap_chars(&mut what, PROBLEM_CHARS);
                        if at.is_empty() {
                            format!("{noun}: {what}")
                        } else {
                            format!("argument `{at}`: {what}")
                        }
                    })
                    .collect();
                if found.len() > SHOWN_PROBLEMS {
                    each.push(format!("and {} more", found.len() - SHOWN_PROBLEMS));
                }
                format!("invalid {noun}: {}", each.join("; "))
            }
        }
    }

    /// The same problems found in the value at `under` (a field of a larger one).
    pub fn under(self, under: &str) -> SchemaError {
        match self {
            SchemaError::Mismatch(found) => SchemaError::Mismatch(
                found
                    .into_iter()
                    .map(|(at, what)| (if at.is_empty() { under.to_string() } else { format!("{under}.{at}") }, what))
                    .collect(),
            ),
            e => e,
        }
    }
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe("arguments"))
    }
}

impl std::error::Error for SchemaError {}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// However long the value a model sent, the problems it is told are a few, each cut short.
    #[test]
    fn a_description_of_problems_stays_short() {
        let long = format!("[{}] is not of type \"string\"", "\"x\", ".repeat(10_000));
        let found: Vec<(String, String)> = (0..20).map(|i| (format!("k{i}"), long.clone())).collect();
        let text = SchemaError::Mismatch(found).describe("arguments");
        assert!(text.chars().count() < (PROBLEM_CHARS + 40) * SHOWN_PROBLEMS, "{}", text.len());
        assert!(text.starts_with("invalid arguments: argument `k0`: [") && text.ends_with("; and 12 more"), "{text}");
        let one = SchemaError::Mismatch(vec![(String::new(), "short".into())]).describe("arguments");
        assert_eq!(one, "invalid arguments: arguments: short");
    }

    #[test]
    fn a_status_round_trips_as_its_word_and_a_reported_one_is_read() {
        for (s, word) in [(ToolStatus::Ok, "ok"), (ToolStatus::Error, "error")] {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{word}\""));
            assert_eq!(serde_json::from_str::<ToolStatus>(&format!("\"{word}\"")).unwrap(), s);
            assert_eq!(s.to_string(), word);
        }
        assert!(serde_json::from_str::<ToolStatus>("\"skipped\"").is_err(), "a tool's result says ok or error");
        for ok in ["ok", " Success ", "succeeded", "COMPLETED", "done"] {
            assert_eq!(ToolStatus::reported(ok), ToolStatus::Ok, "{ok}");
        }
        for failed in ["error", "failed", "", "200"] {
            assert_eq!(ToolStatus::reported(failed), ToolStatus::Error, "{failed}");
        }
    }
}
