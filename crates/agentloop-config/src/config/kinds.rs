//! The value kinds configuration keys take: durations, strictness, the provider, log levels and
//! formats, memory scopes.

use serde::{Deserialize, Serialize};

pub use agentloop_io::log::{LogFormat, LogLevel, LoggingConfig};
pub use agentloop_types::clock::Dur;

/// `llm.strict`: whether a provider's strict schema mode is used for the answer schemas.
/// `auto` (the default) uses it where it is known to hold every rule (OpenAI's own API);
/// `true` asks for it from any OpenAI-compatible server; `false` never.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strict {
    #[default]
    Auto,
    On,
    Off,
}

impl Serialize for Strict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Strict::Auto => s.serialize_str("auto"),
            Strict::On => s.serialize_bool(true),
            Strict::Off => s.serialize_bool(false),
        }
    }
}

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(match auto_or_bool(d)? {
            None => Strict::Auto,
            Some(true) => Strict::On,
            Some(false) => Strict::Off,
        })
    }
}

/// A key that takes `auto`, `true` or `false` (a boolean, or the word as a string, as an
/// environment variable gives it): `None` for `auto`.
fn auto_or_bool<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<bool>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        B(bool),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::B(b) => Ok(Some(b)),
        Raw::S(s) => match s.trim().to_lowercase().as_str() {
            "auto" => Ok(None),
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            other => Err(serde::de::Error::custom(format!("`{other}` is not one of auto, true, false"))),
        },
    }
}

/// `llm.fuse_phases`: whether a run asks Reflect's question and the next Plan's in one call.
/// `auto` (the default) fuses for every provider but a scripted model whose script is written
/// per phase: its answers are queued by phase, so a script fuses only when it holds fused
/// answers (a `reflect+plan` queue, or a recording of a fused run). `true` fuses for every
/// provider (a scripted model then answers from its `reflect+plan` queue); `false` never.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FusePhases {
    #[default]
    Auto,
    On,
    Off,
}

impl Serialize for FusePhases {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            FusePhases::Auto => s.serialize_str("auto"),
            FusePhases::On => s.serialize_bool(true),
            FusePhases::Off => s.serialize_bool(false),
        }
    }
}

impl<'de> Deserialize<'de> for FusePhases {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(match auto_or_bool(d)? {
            None => FusePhases::Auto,
            Some(true) => FusePhases::On,
            Some(false) => FusePhases::Off,
        })
    }
}

/// `llm.provider`: which model API answers. `auto` picks one from the environment
/// (the model layer's `provider_and_why` says which and why).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Anthropic,
    /// OpenAI's API or any server that speaks it (`--base-url`).
    Openai,
    /// An Ollama server (OpenAI's API at `$OLLAMA_HOST/v1`, no key needed).
    Ollama,
    /// Answers from a script file (`llm.script`), offline.
    Scripted,
    Auto,
}

impl Provider {
    /// The name users write, and the one messages and the trace use.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::Openai => "openai",
            Provider::Ollama => "ollama",
            Provider::Scripted => "scripted",
            Provider::Auto => "auto",
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `llm.structured`: which forms a forced answer may take (see `model::wire`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Structured {
    /// Native tool calls only (named, required, auto); no JSON read out of text.
    Tools,
    /// JSON in the message text only (json_schema, json_object, prompt).
    Json,
    /// All six forms, negotiated (the default).
    Auto,
}

/// `frame`: where the Definition of Done comes from — the model's Frame answer (3 to 7 items), or
/// the goal itself as its one item, with no model call (for a small model that cannot break a
/// goal down: it is held to the goal as written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FrameFrom {
    /// Frame asks the model for the objective and its Definition of Done.
    #[default]
    Model,
    /// The goal, as given, is the objective and the one item of the Definition of Done.
    Goal,
}

/// `prompts`: the prompts and answer schemas each phase sends — in full, or lean for a small
/// model on a local server (docs/MODELS.md, Small local models).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Prompts {
    /// The files quoted whole, the catalog, every answer field; one shared prefix where the
    /// provider caches one.
    #[default]
    Full,
    /// A few lines a phase: the goal, the Definition of Done, the steps so far and the latest
    /// result; each phase's own answer tool alone, with only the fields a run needs and the
    /// rules a grammar can hold a small model to (a tick's item and step from those that exist).
    Lean,
}

/// `llm.tool_schemas`: where each tool's parameters are given to the model — in the Plan answer's
/// schema (a union with one variant a tool, so a grammar holds the model to each tool's
/// arguments) or in the catalog (one line a tool, its parameters in brackets; the answer's
/// schema names the tool and takes its arguments as an object, which Act checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ToolSchemas {
    /// `answer` where the provider's strict schema mode is on (`llm.strict`), else `catalog`.
    #[default]
    Auto,
    /// Each tool's parameters in the answer's schema: refused before Act when they do not fit.
    Answer,
    /// Each tool's parameters in the catalog: about a third fewer tokens a call; arguments that
    /// do not fit are a failed step, its error naming them.
    Catalog,
}

/// `values_check`: how a new task is checked against the agent's `values` — by their
/// `refuse_if` phrases alone, or also by one small model call that judges the task against each
/// value's name and description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ValuesCheck {
    /// The phrases only: deterministic, free, the same answer every time.
    #[default]
    Words,
    /// The phrases, then (when none matched) one model call judges the task.
    Model,
}

/// `memory.scope`: whose long-term memory a workspace reads and writes when `memory.dir` is not
/// set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryScope {
    /// The workspace's own store, `.agentloop/memory/` inside it.
    Workspace,
    /// One store for every workspace of the user, `$XDG_DATA_HOME/agentloop/memory`.
    User,
}

/// `memory.compact_with`: how the oldest learned facts are summarised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactWith {
    /// One model call writes the summary (a mechanical one if the call fails).
    Model,
    /// The facts' first words, joined; no call.
    Mechanical,
}
