//! The `llm` section: provider, model, endpoint, limits and prices.

use super::*;
use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// anthropic | openai | ollama | scripted | auto
    pub provider: Provider,
    pub model: Option<String>,
    /// Other providers a `handle` request or an untrusted workspace may choose (`llm_provider`).
    pub allowed_providers: Vec<Provider>,
    /// Other models a `handle` request or an untrusted workspace may choose (`llm_model`).
    pub allowed_models: Vec<String>,
    pub base_url: Option<String>,
    /// Name of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// A command (argv, no shell) whose stdout is the API key.
    pub api_key_cmd: Option<Vec<String>>,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub connect_timeout: Dur,
    pub read_timeout: Dur,
    /// Total attempts per model call, including the first.
    pub attempts: u32,
    /// First backoff delay in milliseconds (doubles each retry, with jitter).
    pub backoff_ms: u64,
    pub max_backoff: Dur,
    /// Largest response body accepted, in bytes.
    pub max_response_bytes: u64,
    /// How structured answers are requested: tools | json | auto (tools, falling back to JSON in text).
    pub structured: Structured,
    /// Strict schema mode for the answer schemas: auto | true | false (see [`Strict`]).
    pub strict: Strict,
    /// Script file for the scripted provider.
    pub script: Option<Utf8PathBuf>,
    /// Write every response received to this JSONL file (replayable by the scripted provider).
    pub record: Option<Utf8PathBuf>,
    /// Use Anthropic prompt caching on the stable prefix.
    pub cache: bool,
    /// The model's context window in tokens, when it is small: the tool and skill catalog in
    /// the prompt is shortened (descriptions cut, then skills by name) so the prompt fits.
    pub context_window: Option<u32>,
    /// A run (`run`, `serve`, the worker, event mode) asks Reflect's question and the next Plan's
    /// in one call after each action (one answer tool holding both answers); the `plan` and
    /// `reflect` commands stay separate. auto | true | false (see [`FusePhases`]).
    pub fuse_phases: FusePhases,
    /// Where each tool's parameters are given to the model: auto | answer | catalog (see
    /// [`ToolSchemas`]).
    pub tool_schemas: ToolSchemas,
    /// Ask for the answer as an event stream and show its pieces live (`--events`
    /// `model.delta` entries, the progress line); the answer recorded is the same.
    pub stream: bool,
    /// How a corrective turn is sent: auto | tool | user (see `tool_messages`).
    pub tool_messages: crate::tool_messages::ToolMessages,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            provider: Provider::Auto,
            model: None,
            allowed_providers: vec![],
            allowed_models: vec![],
            base_url: None,
            api_key_env: None,
            api_key_cmd: None,
            max_tokens: 4096,
            temperature: None,
            connect_timeout: Dur::secs(10),
            read_timeout: Dur::secs(300),
            attempts: 4,
            backoff_ms: 500,
            max_backoff: Dur::secs(30),
            max_response_bytes: 16 * 1024 * 1024,
            structured: Structured::Auto,
            strict: Strict::Auto,
            script: None,
            record: None,
            cache: true,
            context_window: None,
            fuse_phases: FusePhases::Auto,
            tool_schemas: ToolSchemas::Auto,
            stream: false,
            tool_messages: Default::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_write: f64,
    pub cache_read: f64,
}
