//! Wire-shape negotiation for OpenAI-compatible servers: the forms a forced answer can be
//! requested in, and the per-server cache of the form that worked.
//!
//! Servers disagree on how a forced tool call may be asked for: llama-cpp-python asserts on
//! `tool_choice: "required"` and honours a named function; llama.cpp's llama-server honours
//! `"required"` and silently treats a named function as `"auto"`; some servers have no tools at
//! all but take `response_format`. So a forced answer is requested in the first [`Form`] of
//! [`Form::ALL`] (or the cached one), and a form that is rejected (see `http.rs`) or answered
//! without the forced call is followed at once by the next one — no backoff, no failure counted.
//!
//! The form that worked is kept for the rest of the run and cached in
//! `$XDG_CACHE_HOME/agentloop/wire.json` (else `~/.cache/agentloop/wire.json`), keyed by base
//! URL and model, so the next run starts with it. The cache is a hint: a missing, unreadable or
//! corrupt file is ignored (with a `-v` debug note), never an error, and it is replaced
//! atomically; two processes writing it at once lose one update, never the file.

use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use agentloop_config::config::Structured;

pub use agentloop_config::tool_messages::ToolMessages;

/// How a forced answer is requested, most portable first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    /// `tools` + `tool_choice: {"type": "function", "function": {"name": ...}}` (the OpenAI form).
    Named,
    /// `tools` + `tool_choice: "required"`.
    Required,
    /// `tools` + `tool_choice: "auto"` and an instruction to call the tool.
    AutoInstructed,
    /// No tools: `response_format: {"type": "json_schema", ...}` with the answer's schema.
    JsonSchema,
    /// No tools: `response_format: {"type": "json_object"}`, the schema in the prompt.
    JsonObject,
    /// No tools, no `response_format`: the schema and a JSON-only instruction in the prompt.
    JsonPrompt,
}

impl Form {
    /// The negotiation order. Named comes first: it is the OpenAI form, and both ways it fails
    /// are visible (an error, or a reply without the call), while `"required"` on
    /// llama-cpp-python fails with an empty HTTP 500 that reads like an outage.
    pub const ALL: [Form; 6] =
        [Form::Named, Form::Required, Form::AutoInstructed, Form::JsonSchema, Form::JsonObject, Form::JsonPrompt];

    /// The name used in the trace (`wire_form`), the cache and `models test`.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Named => "tool_named",
            Form::Required => "tool_required",
            Form::AutoInstructed => "tool_auto",
            Form::JsonSchema => "json_schema",
            Form::JsonObject => "json_object",
            Form::JsonPrompt => "json_prompt",
        }
    }

    pub fn parse(s: &str) -> Option<Form> {
        Form::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// Whether the request carries `tools` (else the answer is JSON in the message text).
    pub fn uses_tools(self) -> bool {
        matches!(self, Form::Named | Form::Required | Form::AutoInstructed)
    }

    /// Whether `llm.structured` allows this form: `tools` the three tool forms, `json` the
    /// three JSON forms, `auto` all six.
    pub fn allowed_by(self, structured: Structured) -> bool {
        match structured {
            Structured::Auto => true,
            Structured::Tools => self.uses_tools(),
            Structured::Json => !self.uses_tools(),
        }
    }

    /// What the request looks like, for `models test`.
    pub fn describe(self) -> &'static str {
        match self {
            Form::Named => "tool_choice {type: function, function: {name}}",
            Form::Required => "tool_choice \"required\"",
            Form::AutoInstructed => "tool_choice \"auto\" + instruction",
            Form::JsonSchema => "response_format json_schema",
            Form::JsonObject => "response_format json_object",
            Form::JsonPrompt => "JSON instruction only",
        }
    }
}

/// The order to try forms in: the kept (or cached) form first, then the others in the usual
/// order; only those `structured` allows and `applicable` accepts.
pub fn order(kept: Option<Form>, structured: Structured, applicable: impl Fn(Form) -> bool) -> Vec<Form> {
    let ok = |f: &Form| f.allowed_by(structured) && applicable(*f);
    let mut forms: Vec<Form> = kept.into_iter().filter(ok).collect();
    forms.extend(Form::ALL.into_iter().filter(|f| ok(f) && Some(*f) != kept));
    forms
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    /// base URL → model → entry
    servers: BTreeMap<String, BTreeMap<String, Entry>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    form: String,
    /// When the form last worked (RFC 3339).
    learned: String,
    /// Whether `models test` found that a `role: tool` message reaches the model (None: not
    /// probed, or the probe could not tell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_results: Option<bool>,
}

const VERSION: u32 = 1;

/// `$XDG_CACHE_HOME/agentloop/wire.json`, else `$HOME/.cache/agentloop/wire.json`.
pub fn cache_path() -> Option<Utf8PathBuf> {
    Some(agentloop_config::config::xdg_dir("XDG_CACHE_HOME", ".cache")?.join("agentloop").join("wire.json"))
}

/// The cache file and what it holds (empty when there is none); why it cannot be used, which
/// callers only note (the cache is an optimisation).
fn read() -> agentloop_types::error::Result<(Utf8PathBuf, File)> {
    use agentloop_types::error::Error;
    let path = cache_path().ok_or_else(|| Error::data("no cache folder (set XDG_CACHE_HOME or HOME)"))?;
    let Some(text) = agentloop_io::fs::read_optional(&path)? else { return Ok((path, File::default())) };
    match serde_json::from_str::<File>(&text) {
        Ok(f) if f.version == VERSION => Ok((path, f)),
        Ok(f) => Err(Error::data(format!("{path}: version {} is not {VERSION}; it will be replaced", f.version))),
        Err(e) => Err(Error::data(format!("{path} is not a wire cache ({e}); it will be replaced")).with_source(e)),
    }
}

/// The cached form for this server and model, if any, and whether tool results were found to
/// reach the model.
pub fn load(base: &str, model: &str) -> (Option<Form>, Option<bool>) {
    match read() {
        Ok((_, f)) => match f.servers.get(base).and_then(|m| m.get(model)) {
            Some(e) => (Form::parse(&e.form), e.tool_results),
            None => (None, None),
        },
        Err(note) => {
            agentloop_io::output::debug_note(&format!("wire cache ignored: {note}"));
            (None, None)
        }
    }
}

/// Records the form that worked for this server and model (best effort; a failure is a note).
pub fn store(base: &str, model: &str, form: Form) {
    update(base, model, |e| {
        if e.form != form.as_str() {
            // Another form is another request shape: what was learned of the old one goes.
            e.tool_results = None;
        }
        e.form = form.as_str().into();
    });
}

/// Records what `models test` found of tool results on this server and model (best effort).
pub fn store_tool_results(base: &str, model: &str, form: Form, reach: bool) {
    update(base, model, |e| {
        e.form = form.as_str().into();
        e.tool_results = Some(reach);
    });
}

fn update(base: &str, model: &str, change: impl FnOnce(&mut Entry)) {
    let (path, mut file) = match read() {
        Ok(x) => x,
        Err(note) => {
            agentloop_io::output::debug_note(&format!("wire cache: {note}"));
            match cache_path() {
                Some(p) => (p, File::default()),
                None => return,
            }
        }
    };
    file.version = VERSION;
    let e = file.servers.entry(base.to_string()).or_default().entry(model.to_string()).or_insert_with(|| Entry {
        form: String::new(),
        learned: String::new(),
        tool_results: None,
    });
    change(e);
    e.learned = agentloop_types::clock::now_rfc3339();
    let text = agentloop_types::json::to_string_pretty(&file) + "\n";
    let written = path
        .parent()
        .map_or(Ok(()), agentloop_io::fs::create_dir_all)
        .and_then(|_| agentloop_io::fs::write_atomic(&path, text.as_bytes()));
    if let Err(e) = written {
        agentloop_io::output::debug_note(&format!("wire cache not written: {}", e.detail()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_puts_the_kept_form_first() {
        for f in Form::ALL {
            assert_eq!(Form::parse(f.as_str()), Some(f));
        }
        assert_eq!(Form::parse("nonsense"), None);
        let all = |_| true;
        assert_eq!(order(None, Structured::Auto, all), Form::ALL.to_vec());
        assert_eq!(order(Some(Form::JsonObject), Structured::Auto, all)[..2], [Form::JsonObject, Form::Named]);
        assert_eq!(order(None, Structured::Tools, all), [Form::Named, Form::Required, Form::AutoInstructed]);
        assert_eq!(
            order(Some(Form::Named), Structured::Json, all),
            [Form::JsonSchema, Form::JsonObject, Form::JsonPrompt]
        );
        let multi = |f| !matches!(f, Form::Named | Form::JsonSchema);
        assert_eq!(order(Some(Form::Named), Structured::Auto, multi)[0], Form::Required);
    }
}
