//! Layered configuration: built-in defaults < user config < workspace config < agent profile <
//! request config (event mode) < `AGENTLOOP_*` environment < command-line flags.
//!
//! Every layer is a JSON value tree. Each layer is validated on its own against [`Config`] (unknown
//! keys and wrong types are errors that name the file and the key), then the trees are merged
//! (later wins, objects merge key by key) and the result is deserialized into the effective
//! [`Config`]. The source of every leaf is remembered for `agentloop config show`.

use crate::error::{Error, Result};
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// A duration written as seconds (`90`) or a human string (`"90s"`, `"10m"`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dur(pub std::time::Duration);

impl Dur {
    pub const fn secs(n: u64) -> Self {
        Dur(std::time::Duration::from_secs(n))
    }
}

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(self.0).to_string())
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            F(f64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Dur::secs(n)),
            // `try_`: a number too large for a duration is refused, never a panic.
            Raw::F(f) => std::time::Duration::try_from_secs_f64(f)
                .map(Dur)
                .map_err(|_| serde::de::Error::custom(format!("{f} is not a duration (seconds, at least 0)"))),
            Raw::S(s) => crate::clock::parse_duration(&s).map(Dur).map_err(serde::de::Error::custom),
        }
    }
}

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
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            B(bool),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::B(true) => Ok(Strict::On),
            Raw::B(false) => Ok(Strict::Off),
            Raw::S(s) => match s.trim().to_lowercase().as_str() {
                "auto" => Ok(Strict::Auto),
                "true" => Ok(Strict::On),
                "false" => Ok(Strict::Off),
                other => Err(serde::de::Error::custom(format!("`{other}` is not one of auto, true, false"))),
            },
        }
    }
}

/// `llm.provider`: which model API answers. `auto` picks one from the environment
/// (`crate::model::provider_and_why` says which and why).
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

/// `logging.level`: the least severe line the log keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
}

impl LogLevel {
    /// The name written in each log line.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
        }
    }
}

/// `logging.format`: one line of text, or one JSON object, per entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Most plan→act→reflect steps before the run escalates.
    pub max_steps: u32,
    /// Most reframes before the run escalates.
    pub max_reframes: u32,
    /// Wall-clock limit for one `run` invocation.
    pub timeout: Dur,
    /// Token budget (input + output, all phases) for the whole run; null = unlimited.
    pub max_tokens: Option<u64>,
    /// Cost budget in USD for the whole run; null = unlimited.
    pub max_cost_usd: Option<f64>,
    /// Consecutive tool failures before the run escalates.
    pub max_consecutive_failures: u32,
    /// The same action with the same result this many times in a row escalates.
    pub max_repeats: u32,
    /// Premature `done` decisions turned into `continue` before the run escalates.
    pub max_done_refusals: u32,
    /// Phrases that, in Reflect's reason, mean a human is needed: the run escalates.
    pub escalation_triggers: Vec<String>,
    /// Tools Act may run; null = every enabled tool.
    pub allowed_tools: Option<Vec<String>>,
    /// The JSON Schema the run's final output must match (`run --output-schema FILE`): a schema
    /// object, or the path of a JSON file holding one (relative to the workspace). null = the
    /// final outcome is free text.
    pub output_schema: Option<serde_json::Value>,
    /// Extra instructions added to every phase prompt (agent profiles set this).
    pub system_prompt: Option<String>,
    /// A file whose text is the agent's identity: it comes before
    /// `system_prompt` in every phase's system prompt. Relative to the workspace.
    pub system_prompt_file: Option<Utf8PathBuf>,
    /// A note for people about this config or agent profile (shown by `agentloop agents list`).
    pub description: Option<String>,
    /// Name of an agent profile in `agents/NAME.yaml` to apply.
    pub agent: Option<String>,
    /// Folder of template overrides (default `<workspace>/templates`).
    pub templates_dir: Option<Utf8PathBuf>,
    pub llm: LlmConfig,
    /// Extra or overriding prices, USD per million tokens, keyed by model id.
    pub prices: BTreeMap<String, Price>,
    pub tools: ToolsConfig,
    pub skills: SkillsConfig,
    /// Long-term memory in the loop (recall in Frame and Plan, `remember` from Reflect,
    /// outcomes indexed when a run ends).
    pub memory: MemoryConfig,
    /// When the loop is stuck: a forced reframe once, then escalation.
    pub frustration: FrustrationConfig,
    /// Rolling usage limits across invocations, per agent profile; fatigue; `agentloop rest`.
    pub rest: RestConfig,
    /// Stress: what frustration the forced reframe did not resolve leaves behind, across runs.
    pub stress: StressConfig,
    /// The agent's values: a task whose goal or context names one of a value's `refuse_if`
    /// phrases is declined before it starts (negotiation).
    pub values: Vec<AgentValue>,
    /// `dream --explore`: open questions and interests explored on a curiosity budget.
    pub dream: DreamConfig,
    /// The diagnostics log file.
    pub logging: LoggingConfig,
    pub handle: HandleConfig,
    /// `agentloop worker` and `enqueue` on Redis Streams (flags override each key).
    pub queue: QueueConfig,
    /// MCP servers whose tools join the registry (see the mcp module).
    pub mcp: McpConfig,
    /// Ductile plugins whose commands join the registry (see the ductile module).
    pub ductile: DuctileConfig,
    /// OpenTelemetry traces (docs/OBSERVABILITY.md); off unless an endpoint is set here or in
    /// the standard `OTEL_EXPORTER_OTLP_*` variables.
    pub otel: OtelConfig,
    /// Trust every workspace's own configuration (CI, a machine holding only your own
    /// workspaces). Honoured only from your own config; see `agentloop trust`.
    pub trust_all: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_steps: 20,
            max_reframes: 2,
            timeout: Dur::secs(1800),
            max_tokens: None,
            max_cost_usd: None,
            max_consecutive_failures: 3,
            max_repeats: 3,
            max_done_refusals: 2,
            output_schema: None,
            escalation_triggers: ["need human input", "escalate to human", "ask the user"].map(String::from).to_vec(),
            allowed_tools: None,
            system_prompt: None,
            system_prompt_file: None,
            description: None,
            agent: None,
            templates_dir: None,
            llm: LlmConfig::default(),
            prices: BTreeMap::new(),
            tools: ToolsConfig::default(),
            skills: SkillsConfig::default(),
            memory: MemoryConfig::default(),
            frustration: FrustrationConfig::default(),
            rest: RestConfig::default(),
            stress: StressConfig::default(),
            values: Vec::new(),
            dream: DreamConfig::default(),
            logging: LoggingConfig::default(),
            handle: HandleConfig::default(),
            queue: QueueConfig::default(),
            mcp: McpConfig::default(),
            ductile: DuctileConfig::default(),
            otel: OtelConfig::default(),
            trust_all: false,
        }
    }
}

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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// Extra folders file_read, list_dir and grep may read (the workspace is always readable).
    pub read_paths: Vec<Utf8PathBuf>,
    /// When set, the only folders file_write may write; empty means the whole workspace (never
    /// the paper trail or agentloop's own files, whatever the folder).
    pub write_paths: Vec<Utf8PathBuf>,
    /// Characters of tool output kept inline; more goes to artifacts/.
    pub output_cap: usize,
    /// Largest file file_read, grep and skill_read will read, in bytes.
    pub max_file_bytes: u64,
    /// Default per-tool timeout.
    pub timeout: Dur,
    pub http: HttpToolConfig,
    pub shell: ShellConfig,
    pub memory: MemoryToolConfig,
    /// Tools run by another system (event mode emits a request for them), with their schemas.
    pub external: BTreeMap<String, ExternalTool>,
    /// Event mode: tools run in-process by `handle` (the rest are emitted as requests).
    pub local: Vec<String>,
    /// Tools never offered or run, by name (a deny list, applied with `allowed_tools`).
    pub disabled: Vec<String>,
    /// Per-tool settings, each only narrowing the global policy (`src/tool_settings.rs`).
    pub file_read: FileToolSettings,
    pub file_write: FileToolSettings,
    pub list_dir: FileToolSettings,
    pub grep: FileToolSettings,
    pub http_call: ToolSettings,
    pub web_fetch: FetchToolSettings,
    pub skill_read: ToolSettings,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            read_paths: vec![],
            write_paths: vec![],
            output_cap: 8000,
            max_file_bytes: 4 * 1024 * 1024,
            timeout: Dur::secs(30),
            http: HttpToolConfig::default(),
            shell: ShellConfig::default(),
            memory: MemoryToolConfig::default(),
            external: BTreeMap::new(),
            local: ["file_read", "file_write", "list_dir", "grep", "skill_read", "finish"].map(String::from).to_vec(),
            disabled: vec![],
            file_read: FileToolSettings::default(),
            file_write: FileToolSettings::default(),
            list_dir: FileToolSettings::default(),
            grep: FileToolSettings::default(),
            http_call: ToolSettings::default(),
            web_fetch: FetchToolSettings::default(),
            skill_read: ToolSettings::default(),
        }
    }
}

/// Per-tool settings (the framework seed's `tools.<tool>:` form); each only narrows the global
/// policy, checked by `crate::tool_settings` when the configuration resolves.
///
/// `tools.file_read`, `tools.file_write`, `tools.list_dir`, `tools.grep`.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FileToolSettings {
    /// `false` takes the tool away (as `tools.disabled` does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The only folders this tool may use; each must lie inside the ones it may use anyway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_paths: Option<Vec<Utf8PathBuf>>,
    /// At most `tools.timeout`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// `tools.web_fetch`.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FetchToolSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Most characters of a page kept: the default and the cap of the call's `max_length`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
}

/// `tools.http_call`, `tools.skill_read`.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ToolSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// The tools with a `tools.<name>:` section of their own here.
pub const PER_TOOL: &[&str] = &["file_read", "file_write", "list_dir", "grep", "http_call", "web_fetch", "skill_read"];

impl ToolsConfig {
    pub fn enabled_of(&self, name: &str) -> Option<bool> {
        match name {
            "file_read" => self.file_read.enabled,
            "file_write" => self.file_write.enabled,
            "list_dir" => self.list_dir.enabled,
            "grep" => self.grep.enabled,
            "http_call" => self.http_call.enabled,
            "web_fetch" => self.web_fetch.enabled,
            "skill_read" => self.skill_read.enabled,
            _ => None,
        }
    }

    pub fn timeout_seconds_of(&self, name: &str) -> Option<u64> {
        match name {
            "file_read" => self.file_read.timeout_seconds,
            "file_write" => self.file_write.timeout_seconds,
            "list_dir" => self.list_dir.timeout_seconds,
            "grep" => self.grep.timeout_seconds,
            "http_call" => self.http_call.timeout_seconds,
            "web_fetch" => self.web_fetch.timeout_seconds,
            "skill_read" => self.skill_read.timeout_seconds,
            _ => None,
        }
    }

    /// Whether a tool is taken away: named in `tools.disabled`, or `tools.<name>.enabled: false`.
    pub fn is_disabled(&self, name: &str) -> bool {
        self.disabled.iter().any(|d| d == name) || self.enabled_of(name) == Some(false)
    }

    /// The tool's timeout: `tools.timeout`, or its own `timeout_seconds` (never more).
    pub fn timeout_of(&self, name: &str) -> Duration {
        let own = self.timeout_seconds_of(name).map(Duration::from_secs);
        own.map_or(self.timeout.0, |d| d.min(self.timeout.0))
    }

    /// A file tool's own folders, when it has them.
    pub fn allowed_paths_of(&self, name: &str) -> Option<&[Utf8PathBuf]> {
        match name {
            "file_read" => self.file_read.allowed_paths.as_deref(),
            "file_write" => self.file_write.allowed_paths.as_deref(),
            "list_dir" => self.list_dir.allowed_paths.as_deref(),
            "grep" => self.grep.allowed_paths.as_deref(),
            _ => None,
        }
    }

    /// The per-tool folder lists, relative ones taken from `root`.
    pub fn absolutize_tool_paths(&mut self, root: &Utf8Path) {
        for s in [&mut self.file_read, &mut self.file_write, &mut self.list_dir, &mut self.grep] {
            for p in s.allowed_paths.iter_mut().flatten() {
                if p.is_relative() {
                    *p = root.join(&*p);
                }
            }
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ExternalTool {
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub parameters: Option<Value>,
    /// Ductile command to run (`tool_command` in the request), default `handle`.
    pub command: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpToolConfig {
    /// Hosts allowed (exact or `*.suffix`); empty = any host not denied.
    pub allow_hosts: Vec<String>,
    pub deny_hosts: Vec<String>,
    pub schemes: Vec<String>,
    /// Ports allowed; empty = any.
    pub ports: Vec<u16>,
    /// Allow loopback, link-local and private addresses (off by default).
    pub allow_private: bool,
    pub max_bytes: u64,
    pub max_redirects: u32,
    pub user_agent: String,
}

impl Default for HttpToolConfig {
    fn default() -> Self {
        HttpToolConfig {
            allow_hosts: vec![],
            deny_hosts: vec![],
            schemes: vec!["http".into(), "https".into()],
            ports: vec![],
            allow_private: false,
            max_bytes: 5 * 1024 * 1024,
            max_redirects: 5,
            user_agent: concat!("agentloop/", env!("CARGO_PKG_VERSION")).into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShellConfig {
    pub enabled: bool,
    /// Programs the shell tool may run (`argv[0]`, matched exactly).
    pub allow: Vec<String>,
    /// Exact argv patterns that may run even when they could run other programs (`env`, `find
    /// -exec`, interpreters): words separated by spaces, `*` one argument, a final `**` the rest.
    pub patterns: Vec<String>,
    /// Environment variables passed to the program (everything else is cleared).
    pub env: Vec<String>,
    pub timeout: Dur,
    pub max_output: usize,
    /// The OS sandbox the program runs in: `bwrap` (bubblewrap; the shell refuses to run
    /// without it) or `none` (only the argv checks). A top-level `sandbox:` is the same key.
    pub sandbox: ShellSandbox,
    /// Whether the program may use the network (inside the sandbox it has none by default).
    pub network: bool,
}

/// `tools.shell.sandbox`: how the shell tool's program is confined by the OS.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ShellSandbox {
    /// bubblewrap: fresh PID namespace and /proc, no network, read-only filesystem except the
    /// write folders, no new privileges.
    #[default]
    Bwrap,
    /// No OS sandbox: only the allowlist, the argv checks and the cleared environment.
    None,
}

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig {
            enabled: false,
            allow: vec![],
            patterns: vec![],
            env: vec!["PATH".into(), "HOME".into(), "LANG".into(), "LC_ALL".into(), "TZ".into(), "TERM".into()],
            timeout: Dur::secs(30),
            max_output: 64 * 1024,
            sandbox: ShellSandbox::Bwrap,
            network: false,
        }
    }
}

/// Long-term memory across runs (memory_save / memory_search / memory_read).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryToolConfig {
    pub enabled: bool,
    /// Store folder (default: memory.dir, else the one `memory.scope` picks).
    pub dir: Option<Utf8PathBuf>,
}

/// `logging:` — diagnostics to a file (none by default); stderr is unchanged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LoggingConfig {
    /// debug | info | warn
    pub level: LogLevel,
    /// Log file (relative to the workspace); null: no log.
    pub file: Option<Utf8PathBuf>,
    /// text | json
    pub format: LogFormat,
    /// Rotate when the file would pass this size.
    pub max_bytes: u64,
    /// Rotated files kept (file.1 … file.N).
    pub keep: u32,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            level: LogLevel::Info,
            file: None,
            format: LogFormat::Text,
            max_bytes: 10 * 1024 * 1024,
            keep: 3,
        }
    }
}

/// `rest:` — rolling usage limits across invocations for the agent profile:
/// within `window`, at most `max_tokens`, `max_cost_usd` and `max_runs` (none set: no limit).
/// Fatigue is the share of the fullest of these used; a new run is refused above `max_fatigue`
/// percent (negotiation). `agentloop rest` runs `tasks` (no model call) and forgives `relief`
/// percent of the usage and stress before it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RestConfig {
    pub window: Dur,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_runs: Option<u64>,
    /// Fatigue (percent of the window used) above which a new run is refused.
    pub max_fatigue: f64,
    /// Percent of the window's usage and of stress that a rest forgives.
    pub relief: f64,
    /// The light tasks `agentloop rest` runs, from a fixed set (see [`RestTask`]).
    pub tasks: Vec<RestTask>,
}

impl Default for RestConfig {
    fn default() -> Self {
        RestConfig {
            window: Dur::secs(24 * 3600),
            max_tokens: None,
            max_cost_usd: None,
            max_runs: None,
            max_fatigue: 90.0,
            relief: 50.0,
            tasks: vec![RestTask::MemoryPrune, RestTask::Report],
        }
    }
}

/// A light task of `agentloop rest`: built in, no model call, no program of anyone's choosing.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RestTask {
    /// `memory prune`: expired long-term memory entries are deleted.
    MemoryPrune,
    /// `report`: the workspace's report.html is written again from its files.
    Report,
}

impl RestTask {
    pub fn name(self) -> &'static str {
        match self {
            RestTask::MemoryPrune => "memory_prune",
            RestTask::Report => "report",
        }
    }
}

/// `stress:` — a run escalated by frustration (the forced reframe did not resolve it) raises
/// the agent's stress by `per_escalation`; stress falls by `decay_per_hour` and with a rest; at
/// `threshold` or above the agent rests (new work refused, exit 10) until it is below again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StressConfig {
    pub per_escalation: f64,
    /// 0 turns the automatic rest off (stress is still kept and shown).
    pub threshold: f64,
    pub decay_per_hour: f64,
}

impl Default for StressConfig {
    fn default() -> Self {
        StressConfig { per_escalation: 25.0, threshold: 75.0, decay_per_hour: 5.0 }
    }
}

/// One of `values:` — a value of the agent and the phrases that mark a task in conflict with
/// it. The match is the user's own and deterministic (no model is asked): a phrase conflicts
/// when the goal or the context holds it as whole words, case and punctuation aside (a word
/// ending in `*` matches any word it begins).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawAgentValue")]
pub struct AgentValue {
    pub name: String,
    /// Why the value matters, said with a declined task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub refuse_if: Vec<String>,
}

/// [`AgentValue`] as written, checked before it is taken (a value that could never match, or
/// one without a name, is an error naming its key rather than a check that silently passes).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgentValue {
    name: String,
    #[serde(default)]
    description: Option<String>,
    refuse_if: Vec<String>,
}

impl TryFrom<RawAgentValue> for AgentValue {
    type Error = String;
    fn try_from(r: RawAgentValue) -> std::result::Result<Self, String> {
        let name = r.name.trim().to_string();
        if name.is_empty() {
            return Err("a value needs a `name`".into());
        }
        if r.refuse_if.is_empty() {
            return Err(format!(
                "value `{name}` has an empty `refuse_if`: list the words or phrases a task in conflict with it names"
            ));
        }
        if let Some(p) = r.refuse_if.iter().find(|p| !p.chars().any(char::is_alphanumeric)) {
            return Err(format!(
                "value `{name}`: refuse_if phrase {p:?} has no letters or digits, so it could never match"
            ));
        }
        Ok(AgentValue { name, description: r.description, refuse_if: r.refuse_if })
    }
}

/// `dream:` — what `dream --explore` explores and what it may spend.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DreamConfig {
    /// Topics the agent is curious about, explored beside its open questions.
    pub interests: Vec<String>,
    /// Questions explored in one dream, at most.
    pub max_questions: usize,
    /// The curiosity budget: its own rolling window, apart from `rest:`.
    pub curiosity: CuriosityConfig,
}

impl Default for DreamConfig {
    fn default() -> Self {
        DreamConfig { interests: vec![], max_questions: 3, curiosity: CuriosityConfig::default() }
    }
}

/// `dream.curiosity:` — tokens and USD `dream --explore` may spend within `window`; with
/// neither set, exploring makes no model call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CuriosityConfig {
    pub window: Dur,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

impl Default for CuriosityConfig {
    fn default() -> Self {
        CuriosityConfig { window: Dur::secs(24 * 3600), max_tokens: None, max_cost_usd: None }
    }
}

/// `frustration:` — tool errors (+1), repeated actions (+1) and refused `done`s (+2) raise a
/// score, clean steps lower it (-1); at `threshold`, or when a failure limit is hit, the loop
/// reframes once (`reframe: true`) before it escalates.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FrustrationConfig {
    /// Score that counts as stuck (0: only the failure limits count).
    pub threshold: u32,
    /// Force one reframe before escalating.
    pub reframe: bool,
}

impl Default for FrustrationConfig {
    fn default() -> Self {
        FrustrationConfig { threshold: 6, reframe: true }
    }
}

/// `memory:` — long-term memory across runs, used by the loop itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Recall in Frame and Plan, `remember` in Reflect, outcomes indexed at the end.
    pub enabled: bool,
    /// Whose store, when no folder is named: `workspace` (`.agentloop/memory/` inside it) or
    /// `user` (`$XDG_DATA_HOME/agentloop/memory`, shared by every workspace).
    pub scope: MemoryScope,
    /// Store folder, shared by every workspace that names it (default: tools.memory.dir, else
    /// the one `scope` picks).
    pub dir: Option<Utf8PathBuf>,
    /// Entries shown in a "Relevant memory" block.
    pub top_k: usize,
    /// Most characters of that block.
    pub max_chars: usize,
    /// Index each run's outcome when it ends.
    pub auto_index: bool,
    /// Lifetime of entries the loop writes (none: kept until forgotten or pruned).
    pub ttl: Option<Dur>,
    /// When memory.md holds more learned facts than this, the oldest half is compacted into a
    /// "Summary of earlier facts" (0: never); the full list goes to artifacts/facts-archive.md.
    pub compact_facts: usize,
    /// How compaction summarises: `model` (one call) or `mechanical` (no call).
    pub compact_with: CompactWith,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            enabled: true,
            scope: MemoryScope::Workspace,
            dir: None,
            top_k: 5,
            max_chars: 2000,
            auto_index: true,
            ttl: None,
            compact_facts: 40,
            compact_with: CompactWith::Model,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsConfig {
    /// Extra skill folders, highest precedence last.
    pub dirs: Vec<Utf8PathBuf>,
    /// Skip the skills bundled in the binary.
    pub no_builtin: bool,
    /// Most directory entries one scan looks at.
    pub max_entries: usize,
    /// Only these skills (by name) are offered and readable; null = every skill found.
    pub only: Option<Vec<String>>,
    /// Skills never offered or readable, by name (a deny list, applied after `only`).
    pub disabled: Vec<String>,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        SkillsConfig { dirs: vec![], no_builtin: false, max_entries: 10_000, only: None, disabled: vec![] }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HandleConfig {
    /// Retries of a step whose external tool reported an error.
    pub tool_retries: u32,
    /// Folder under the root holding one workspace per run.
    pub runs_dir: String,
    /// Finished runs kept in `state_updates.runs` (the newest); running ones are always kept.
    pub keep_finished: usize,
    /// A webhook each phase of a turn is posted to as it ends (off when unset).
    pub progress_url: Option<String>,
    /// Bearer token sent to the progress webhook.
    pub progress_token: Option<String>,
    /// Longest a progress post may take; the turn waits at most this for the last ones.
    pub progress_timeout: Dur,
    /// How long past its tool's timeout a requested step may stay pending before `poll` treats
    /// it as a failed tool call: room for the router's queueing and its own retries of the tool.
    pub pending_grace: Dur,
}

impl Default for HandleConfig {
    fn default() -> Self {
        HandleConfig {
            tool_retries: 2,
            runs_dir: "runs".into(),
            keep_finished: 20,
            progress_url: None,
            progress_token: None,
            progress_timeout: Dur::secs(2),
            pending_grace: Dur::secs(600),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// Redis URL (`--redis`, `AGENTLOOP_REDIS`).
    pub redis: Option<String>,
    /// Prefix of the stream names (`--streams`).
    pub streams: String,
    /// Runs one worker drives at once (`--concurrency`).
    pub concurrency: usize,
    /// How long a message may go unclaimed before another worker takes it over.
    pub claim_idle: Dur,
    /// Deliveries after which a message goes to the dead-letter stream.
    pub max_deliveries: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            redis: None,
            streams: "agentloop".into(),
            concurrency: 1,
            claim_idle: Dur::secs(60),
            max_deliveries: 5,
        }
    }
}

/// Which Ductile plugins become tools: `all`, or a list of names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PluginChoice {
    All(AllWord),
    Only(Vec<String>),
}

/// The word `all`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AllWord {
    All,
}

impl PluginChoice {
    pub fn allows(&self, name: &str) -> bool {
        match self {
            PluginChoice::All(_) => true,
            PluginChoice::Only(list) => list.iter().any(|n| n == name),
        }
    }
}

/// Ductile's API as a source of tools: each allowed `plugin.command` becomes the
/// registry tool `<plugin>__<command>`, run as a job through the API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DuctileConfig {
    /// The gateway, e.g. http://localhost:8080.
    pub api_url: Option<String>,
    /// Bearer token; better `api_token_env` or `api_token_cmd`.
    pub api_token: Option<String>,
    /// Environment variable holding the token.
    pub api_token_env: Option<String>,
    /// A command printing the token, e.g. [pass, show, ductile].
    pub api_token_cmd: Option<Vec<String>>,
    /// Plugin `manifest.yaml` files under this folder are a source too (no running Ductile).
    pub manifests: Option<Utf8PathBuf>,
    /// `all`, or the plugin names that may become tools.
    pub plugins: PluginChoice,
    /// How often a job is polled.
    pub poll_interval: Dur,
    /// Longest wait for one job.
    pub timeout: Dur,
    /// How long a discovered catalog is reused before the API is asked again.
    pub cache_ttl: Dur,
    /// agentloop's own plugin name in Ductile (the recursion guard refuses calling it).
    pub self_name: String,
    /// How deep agentloop may call itself through Ductile (0: never).
    pub max_depth: u32,
}

impl Default for DuctileConfig {
    fn default() -> Self {
        DuctileConfig {
            api_url: None,
            api_token: None,
            api_token_env: None,
            api_token_cmd: None,
            manifests: None,
            plugins: PluginChoice::All(AllWord::All),
            poll_interval: Dur::secs(2),
            timeout: Dur::secs(600),
            cache_ttl: Dur::secs(300),
            self_name: "agentloop".into(),
            max_depth: 0,
        }
    }
}

/// `otel:` in agentloop.yaml: where spans go (OTLP/HTTP, protobuf) and whether they carry
/// message content. Only trusted configuration may set these (`src/trust.rs`): an endpoint or a
/// header could send prompts, answers and credentials to a host the user did not name.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OtelConfig {
    /// The collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` gives it (e.g.
    /// http://localhost:4318; `/v1/traces` is added). The variables win over this key.
    pub endpoint: Option<String>,
    /// Headers sent with every export (e.g. an API key); `OTEL_EXPORTER_OTLP_HEADERS` adds to
    /// and overrides them. `config show` hides their values.
    pub headers: BTreeMap<String, String>,
    /// Put prompts, answers and tool arguments/results on the spans (off: only names, ids,
    /// models, token counts and outcomes).
    pub capture_content: bool,
}

/// `mcp:` in agentloop.yaml.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// A file in the `mcpServers` JSON shape (`{"mcpServers": {NAME: {...}}}`), read as is;
    /// relative to the workspace.
    pub config_file: Option<Utf8PathBuf>,
    /// Servers by name; merged over the file's servers of the same name.
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One server as configured. Every key is optional here because an entry in `mcp.servers` may
/// only adjust a server defined in `config_file`; `mcp::config::resolve` checks the merged result.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// `stdio`, `http` or `streamable-http` (the spellings other clients write); guessed from
    /// `command`/`url` when absent.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<ServerType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Extra environment for the server (values may name other variables: `${TOKEN}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Working folder of the server (default: the workspace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Default true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The `disabled: true` other clients write; `enabled` wins when both are given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Per-call timeout (default `tools.timeout`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Start + initialize + list tools must finish within this (default 30s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_timeout: Option<Dur>,
    /// The server's tools to offer (exact names, `*` matches any run of characters); null = all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// The server's tools never to offer (same patterns); applied after `allowed_tools`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denied_tools: Option<Vec<String>>,
}

/// Where a configuration value came from. Code that asks whether a value was given matches on
/// it; its text (`Display`, and the JSON string it serializes to) is what `config show`,
/// `agents show` and `status` print beside a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The built-in default.
    Default,
    /// The user's own config file (`$XDG_CONFIG_HOME/agentloop/config.yaml`).
    UserConfig(Utf8PathBuf),
    /// The workspace's agentloop.yaml.
    Workspace(Utf8PathBuf),
    /// The file given with `--config`.
    ConfigFlag(Utf8PathBuf),
    /// An agent profile (`agents/NAME.yaml` in the workspace or the user's config folder).
    AgentProfile(Utf8PathBuf),
    /// Event mode's request `config` object (`handle`).
    Request,
    /// A request to the HTTP API (`serve`): its agent and budgets.
    ApiRequest,
    /// The `AGENTLOOP_*` variables.
    Environment,
    /// One of those variables (what an error about it names).
    EnvironmentVariable(String),
    /// The command-line flags.
    CommandLine,
    /// The per-agent write folder: an agent is chosen and no layer sets
    /// `tools.write_paths`.
    AgentSandbox,
}

impl Source {
    /// Whether the value was given somewhere (not the built-in default).
    pub fn is_given(&self) -> bool {
        *self != Source::Default
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::UserConfig(p) | Source::Workspace(p) | Source::ConfigFlag(p) => write!(f, "{p}"),
            Source::AgentProfile(p) => write!(f, "{p} (agent profile)"),
            Source::Request => f.write_str("the request's config"),
            Source::ApiRequest => f.write_str("the request"),
            Source::Environment => f.write_str("environment"),
            Source::EnvironmentVariable(k) => write!(f, "environment variable {k}"),
            Source::CommandLine => f.write_str("command line"),
            Source::AgentSandbox => f.write_str("agent sandbox default"),
        }
    }
}

impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Where each effective key came from (dotted key → source).
pub type Sources = BTreeMap<String, Source>;

/// An MCP server's `type`: how agentloop talks to it. Read case-insensitively, with the
/// spellings other clients write (`streamable-http`, `streamableHttp`, `streamable_http`);
/// the legacy `sse` is refused with what to use instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerType {
    /// A child process speaking JSON-RPC on stdin/stdout (`command`, `args`).
    Stdio,
    /// Streamable HTTP (`url`, `headers`).
    Http,
}

impl Serialize for ServerType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            ServerType::Stdio => "stdio",
            ServerType::Http => "http",
        })
    }
}

impl<'de> Deserialize<'de> for ServerType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.to_ascii_lowercase().as_str() {
            "stdio" => Ok(ServerType::Stdio),
            "http" | "streamable-http" | "streamablehttp" | "streamable_http" => Ok(ServerType::Http),
            "sse" => Err(serde::de::Error::custom(
                "the legacy SSE transport is not supported; use the server's streamable HTTP endpoint (`type: http`, usually ending in /mcp)",
            )),
            _ => Err(serde::de::Error::unknown_variant(&s, &["stdio", "http"])),
        }
    }
}

/// One configuration layer and where it came from.
#[derive(Debug, Clone)]
pub struct Layer {
    pub source: Source,
    pub value: Value,
}

impl Layer {
    /// Validates the layer on its own so errors name its source.
    pub fn validate(&self) -> Result<()> {
        check::<Config>(&self.value, &self.source)
    }
}

fn check<T: for<'de> Deserialize<'de>>(v: &Value, source: &Source) -> Result<()> {
    let de = v.clone();
    serde_path_to_error::deserialize::<_, T>(de).map(|_| ()).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let key = if path == "." { String::new() } else { format!(" at key `{path}`") };
        if *source == Source::CommandLine {
            return Error::config(format!("invalid value on the command line for `{path}`: {inner}"))
                .with_hint("fix the flag's value; `agentloop help` lists the flags");
        }
        let near = near_miss(&inner).map(|k| match path.rsplit_once('.') {
            Some((parent, _)) => format!("{parent}.{k}"),
            None => k,
        });
        let hint = match (source, near) {
            (Source::EnvironmentVariable(var), Some(k)) => {
                format!("did you mean {}? Otherwise unset {var} (commands that only read skip it)", env_name(&k))
            }
            (Source::EnvironmentVariable(var), None) => {
                format!("unset {var} or fix its value (an AGENTLOOP_* variable sets a configuration key; commands that only read skip a bad one)")
            }
            (_, Some(k)) => format!("did you mean `{k}`? Fix or remove that key (the keys valid there are listed above)"),
            (_, None) if inner.starts_with("unknown field") => {
                "remove that key or rename it to one listed above".to_string()
            }
            (_, None) => "fix that key's value; once the file is valid `agentloop config show` prints every key with its value".to_string(),
        };
        Error::config(format!("invalid configuration in {source}{key}: {inner}")).with_hint(hint)
    })
}

/// The valid key nearest an unknown one, from serde's "unknown field `x`, expected one of `a`,
/// `b`" (a near miss: about a third of its letters differ, at most).
fn near_miss(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (bad, expected) = rest.split_once('`')?;
    let candidates = expected.split('`').skip(1).step_by(2);
    let (best, d) = candidates.map(|c| (c, edit_distance(bad, c))).min_by_key(|(_, d)| *d)?;
    (d > 0 && d <= bad.chars().count().div_ceil(3)).then(|| best.to_string())
}

/// Levenshtein distance between two names (characters).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The variable that sets a dotted key: `llm.model` → `AGENTLOOP_LLM__MODEL`.
fn env_name(key: &str) -> String {
    format!("AGENTLOOP_{}", key.replace('.', "__").to_uppercase())
}

/// Parses a YAML or JSON config file into a layer (JSON is YAML, but `.json` files get JSON errors).
/// Most bytes of a YAML document agentloop parses (config files, frontmatter, scripts).
pub const MAX_YAML_BYTES: usize = 4 * 1024 * 1024;
/// Deepest nesting of a YAML document: flow collections (`[`, `{`) or indentation columns.
pub const MAX_YAML_DEPTH: usize = 64;

/// Parses YAML after a linear pre-check of its size and nesting, so a hostile document (deep
/// nesting, huge size) is refused in time proportional to its length instead of exhausting
/// the parser. The error says which limit was passed.
pub fn parse_yaml<T: serde::de::DeserializeOwned>(text: &str) -> std::result::Result<T, String> {
    if text.len() > MAX_YAML_BYTES {
        return Err(format!("the document is larger than {MAX_YAML_BYTES} bytes"));
    }
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote = None::<char>;
    for line in text.lines() {
        let indent = line.len() - line.trim_start_matches([' ', '-']).len();
        if quote.is_none() && indent / 2 > MAX_YAML_DEPTH * 2 {
            return Err(format!("the document is indented more than {} columns deep", MAX_YAML_DEPTH * 4));
        }
        let mut comment = false;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '#') => comment = true,
                _ if comment => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '[' | '{') => {
                    depth += 1;
                    max = max.max(depth);
                }
                (None, ']' | '}') => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        // Quotes rarely span lines in these documents; an apostrophe in plain text must not
        // hide the rest of the file from the count.
        quote = None;
    }
    if max > MAX_YAML_DEPTH {
        return Err(format!("the document nests more than {MAX_YAML_DEPTH} levels deep"));
    }
    // Maps built into a JSON value keep the last of two equal keys; a second `tools:` block
    // would silently drop the first, so a repeated key is refused with its line first.
    if let Err(e) = serde_yaml_ng::from_str::<NoDuplicateKeys>(text) {
        let e = e.to_string();
        // The parser knows the key but not where the second one stands: find its line.
        let key = e.split('`').nth(1).unwrap_or_default();
        return Err(match duplicate_key_line(text, key) {
            // The parser's own position (where it had got to) gives way to the key's line.
            Some(n) if e.contains("appears twice") => {
                format!("line {n}: {}", e.split(" at line ").next().unwrap_or_default())
            }
            _ => e,
        });
    }
    serde_yaml_ng::from_str(text).map_err(|e| e.to_string())
}

/// The line (from 1) where block mapping key `key` is given a second time in one mapping.
/// Block scalars (`|`, `>`) are skipped, so text that looks like keys is not taken for them.
fn duplicate_key_line(text: &str, key: &str) -> Option<usize> {
    // The block mappings open at each indentation, with the keys each has seen.
    let mut open: Vec<(usize, std::collections::HashSet<String>)> = Vec::new();
    let mut scalar_under: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let mut indent = line.len() - trimmed.len();
        if let Some(i) = scalar_under {
            if trimmed.is_empty() || indent > i {
                continue;
            }
            scalar_under = None;
        }
        if trimmed == "---" {
            open.clear();
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut rest = trimmed;
        let mut item = false;
        while let Some(r) = rest.strip_prefix("- ") {
            indent += 2 + (r.len() - r.trim_start().len());
            rest = r.trim_start();
            item = true;
        }
        // A sequence item starts a new mapping at its own indentation.
        while open.last().is_some_and(|(i, _)| *i > indent || (item && *i == indent)) {
            open.pop();
        }
        let Some((k, value)) = block_key(rest) else { continue };
        if value.starts_with(['|', '>']) {
            scalar_under = Some(indent);
        }
        match open.last_mut() {
            Some((i, keys)) if *i == indent => {
                if !keys.insert(k.clone()) && k == key {
                    return Some(n + 1);
                }
            }
            _ => open.push((indent, std::collections::HashSet::from([k]))),
        }
    }
    None
}

/// `key: value` (or `key:`) at the start of `s`: the key (unquoted) and the value's text.
fn block_key(s: &str) -> Option<(String, &str)> {
    let (key, after) = match s.chars().next()? {
        q @ ('"' | '\'') => {
            let end = s[1..].find(q)? + 1;
            (s[1..end].to_string(), &s[end + 1..])
        }
        '{' | '[' | '#' | '|' | '>' | '&' | '*' | '!' => return None,
        _ => {
            let at = s.find(": ").or_else(|| s.strip_suffix(':').map(str::len))?;
            (s[..at].trim_end().to_string(), &s[at..])
        }
    };
    let value = after.strip_prefix(':')?;
    (value.is_empty() || value.starts_with(' ')).then(|| (key, value.trim()))
}

/// A YAML document read only to find a mapping that repeats a key (at any depth).
struct NoDuplicateKeys;

impl<'de> Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(NoDuplicateKeys)
    }
}

impl<'de> serde::de::Visitor<'de> for NoDuplicateKeys {
    type Value = NoDuplicateKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Ok(self)
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Ok(self)
    }
    fn visit_i128<E>(self, _: i128) -> std::result::Result<Self::Value, E> {
        Ok(self)
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Ok(self)
    }
    fn visit_u128<E>(self, _: u128) -> std::result::Result<Self::Value, E> {
        Ok(self)
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Ok(self)
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Ok(self)
    }
    fn visit_bytes<E>(self, _: &[u8]) -> std::result::Result<Self::Value, E> {
        Ok(self)
    }
    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(self)
    }
    fn visit_none<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(self)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        NoDuplicateKeys::deserialize(d)
    }
    fn visit_newtype_struct<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        NoDuplicateKeys::deserialize(d)
    }
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, a: A) -> std::result::Result<Self::Value, A::Error> {
        // A tagged value (`!tag x`): its content is checked like any other.
        use serde::de::VariantAccess;
        let (_, v) = a.variant::<serde::de::IgnoredAny>()?;
        v.newtype_variant::<NoDuplicateKeys>()
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> std::result::Result<Self::Value, A::Error> {
        while a.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(self)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> std::result::Result<Self::Value, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = a.next_key::<serde_yaml_ng::Value>()? {
            let name = match &key {
                serde_yaml_ng::Value::String(s) => s.clone(),
                other => serde_yaml_ng::to_string(other).unwrap_or_default().trim().to_string(),
            };
            if !seen.insert(name.clone()) {
                return Err(serde::de::Error::custom(format_args!(
                    "the key `{name}` appears twice in one mapping (the second would replace the first); merge the two"
                )));
            }
            a.next_value::<NoDuplicateKeys>()?;
        }
        Ok(self)
    }
}

/// `source` says which kind of file it is (`Source::Workspace`, ...): the layer's source is
/// `source(path)`.
pub fn load_file(path: &Utf8Path, source: fn(Utf8PathBuf) -> Source) -> Result<Option<Layer>> {
    let Some(text) = crate::fs::read_optional(path)? else {
        return Ok(None);
    };
    let value: Value = if path.extension() == Some("json") {
        serde_json::from_str(&text).map_err(|e| Error::config(format!("invalid JSON in {path}: {e}")))?
    } else if text.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        parse_yaml(&text).map_err(|e| Error::config(format!("invalid YAML in {path}: {e}")))?
    };
    let value = match value {
        Value::Null => Value::Object(Map::new()),
        v @ Value::Object(_) => v,
        _ => {
            return Err(Error::config(format!(
                "invalid configuration in {path}: the top level must be a mapping of keys"
            )))
        }
    };
    let source = source(path.to_path_buf());
    // The framework seed's agent file is a profile too, read field by field.
    let value = if matches!(source, Source::AgentProfile(_)) && crate::seed_agent::is_seed_form(&value) {
        crate::seed_agent::translate(value, path)?
    } else {
        value
    };
    // Other names are taken as their keys from the start, so every check sees the real keys.
    seed_names(&Layer { source, value }).map(Some)
}

/// Finds `<dir>/<stem>.yaml`, `.yml` or `.json`.
pub fn find_in(dir: &Utf8Path, stem: &str) -> Option<Utf8PathBuf> {
    ["yaml", "yml", "json"].iter().map(|ext| dir.join(format!("{stem}.{ext}"))).find(|p| p.is_file())
}

/// An XDG base folder: `$VAR` when set, else `$HOME/<fallback>`.
pub fn xdg_dir(var: &str, fallback: &str) -> Option<Utf8PathBuf> {
    std::env::var(var)
        .ok()
        .filter(|s| !s.is_empty())
        .map(Utf8PathBuf::from)
        .or_else(|| std::env::var("HOME").ok().map(|h| Utf8PathBuf::from(h).join(fallback)))
}

pub fn user_config_dir() -> Option<Utf8PathBuf> {
    Some(xdg_dir("XDG_CONFIG_HOME", ".config")?.join("agentloop"))
}

/// `AGENTLOOP_*` variables that are not configuration keys: the flags' own variables (clap
/// reads `AGENTLOOP_WORKSPACE` as `-w` and `AGENTLOOP_REDIS` as `--redis`; `serve` reads
/// `AGENTLOOP_TOKEN`), the trust switch and the test hooks. Reading one of them as a key as
/// well would give it two meanings, so the configuration layer leaves them alone.
pub const ENV_NOT_KEYS: &[&str] = &[
    "WORKSPACE",
    "REDIS",
    "TOKEN",
    "TRUST_ALL",
    "NOW",
    "SEED",
    "CRASH_AT",
    "LOG",
    "WAIT",
    "UNSHARED_PREFIX",
    "DUMP_SCHEMAS",
];

/// Prefixes of variables that belong to the test suite's own setup, never to a run.
const ENV_NOT_KEY_PREFIXES: &[&str] = &["REAL_", "TEST_"];

/// A variable the environment layer left out, and why.
#[derive(Debug)]
pub struct SkippedVar {
    /// The variable's name.
    pub var: String,
    /// What is wrong with it (names the variable and the key).
    pub error: Error,
    /// It names no configuration key at all (rather than a bad value for one).
    pub unknown: bool,
}

/// Reads `AGENTLOOP_*` variables into a layer. `AGENTLOOP_MAX_STEPS=5` sets `max_steps`;
/// `__` nests (`AGENTLOOP_LLM__MODEL`); `PROVIDER`, `MODEL`, `BASE_URL`, `SCRIPT` are shorthands
/// for the `llm.` keys. Values are parsed as YAML scalars; `ALLOWED_TOOLS` is a comma list.
///
/// A variable that names no key is left out and returned for the caller to warn about: other
/// programs and older versions set `AGENTLOOP_*` names of their own, and one of them must not
/// stop every command. A bad value for a real key is refused (exit 2), unless `skip_bad`
/// (commands that only read): then it is left out and returned too, so it cannot stop a look.
pub fn env_layer(skip_bad: bool) -> Result<(Layer, Vec<SkippedVar>)> {
    let mut skipped = Vec::new();
    let mut root = Value::Object(Map::new());
    let mut vars: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k.starts_with("AGENTLOOP_")).collect();
    vars.sort();
    for (k, v) in vars {
        let name = &k["AGENTLOOP_".len()..];
        if ENV_NOT_KEYS.contains(&name) || ENV_NOT_KEY_PREFIXES.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let path: Vec<String> = match name {
            "PROVIDER" | "MODEL" | "BASE_URL" | "SCRIPT" | "RECORD" => {
                vec!["llm".into(), name.to_lowercase()]
            }
            _ => name.split("__").map(|s| s.to_lowercase()).collect(),
        };
        let value = if path == ["allowed_tools"] {
            Value::Array(
                v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| Value::String(s.into())).collect(),
            )
        } else {
            serde_yaml_ng::from_str::<Value>(&v).unwrap_or(Value::String(v.clone()))
        };
        let before = root.clone();
        set_path(&mut root, &path, value);
        if let Err(e) = check::<Config>(&root, &Source::EnvironmentVariable(k.clone())) {
            let unknown = e.message.contains(": unknown field `");
            if !unknown && !skip_bad {
                return Err(e);
            }
            skipped.push(SkippedVar { var: k, error: e, unknown });
            root = before;
        }
    }
    Ok((Layer { source: Source::Environment, value: root }, skipped))
}

pub fn set_path(root: &mut Value, path: &[String], value: Value) {
    let mut cur = root;
    for (i, key) in path.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let obj = cur.as_object_mut().expect("object");
        if i + 1 == path.len() {
            obj.insert(key.clone(), value);
            return;
        }
        cur = obj.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
    }
}

fn merge(into: &mut Value, from: &Value, source: &Source, prefix: &str, sources: &mut Sources) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                // Maps of named entries (prices, external tools) merge; other objects merge too,
                // except the output schema: one JSON Schema, replaced whole by a later layer.
                let slot = a.entry(k.clone()).or_insert(Value::Null);
                if slot.is_object() && v.is_object() && key != "output_schema" {
                    merge(slot, v, source, &key, sources);
                } else {
                    *slot = v.clone();
                    mark(&key, v, source, sources);
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

fn mark(key: &str, v: &Value, source: &Source, sources: &mut Sources) {
    sources.retain(|k, _| !(k == key || k.starts_with(&format!("{key}."))));
    if let Value::Object(m) = v {
        if !m.is_empty() {
            for (k, v) in m {
                mark(&format!("{key}.{k}"), v, source, sources);
            }
            return;
        }
    }
    sources.insert(key.to_string(), source.clone());
}

/// The effective configuration and where each value came from.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub config: Config,
    pub value: Value,
    pub sources: Sources,
}

/// Other names of keys (docs/SEEDS.md says where each comes from), taken as the keys they mean:
/// a Ductile plugin's `config:` block (`llm_provider`, `llm_model`, `max_loops`,
/// `allowed_plugins`, `api_url`, `api_token`) and a top-level `sandbox` (`tools.shell.sandbox`).
/// A layer that sets an other name and its key to different values is an error naming both.
const SEED_NAMES: &[(&str, &[&str])] = &[
    ("max_loops", &["max_steps"]),
    ("llm_provider", &["llm", "provider"]),
    ("llm_model", &["llm", "model"]),
    ("allowed_plugins", &["allowed_tools"]),
    ("sandbox", &["tools", "shell", "sandbox"]),
    ("api_url", &["ductile", "api_url"]),
    ("api_token", &["ductile", "api_token"]),
];

/// A layer with the other names of [`SEED_NAMES`] replaced by the keys they mean. In a file, a
/// Ductile `api_token: "${NAME}"` reads the token from variable NAME (`ductile.api_token_env`),
/// and `${NAME}` in `api_url` is that variable's value, as Ductile's own config reads them.
pub fn seed_names(layer: &Layer) -> Result<Layer> {
    let mut l = layer.clone();
    for (alias, path) in SEED_NAMES {
        let Some(mut v) = l.value.as_object_mut().and_then(|o| o.remove(*alias)) else { continue };
        let mut path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        if *alias == "api_token" {
            if let Some(name) = v.as_str().and_then(whole_reference) {
                path = vec!["ductile".into(), "api_token_env".into()];
                v = Value::String(name.to_string());
            }
        } else if *alias == "api_url" && layer.source != Source::Request {
            v = expand_vars(&v, &layer.source)?;
        }
        let key = path.join(".");
        let existing = path.iter().try_fold(&l.value, |cur, p| cur.get(p));
        if existing.is_some_and(|e| e != &v) {
            return Err(Error::config(format!(
                "invalid configuration in {}: both `{alias}` and `{key}` are set, to different values",
                layer.source
            ))
            .with_hint(format!("keep one: `{alias}` is another name for `{key}`")));
        }
        set_path(&mut l.value, &path, v);
    }
    Ok(l)
}

/// `NAME` when `s` is exactly `${NAME}`.
fn whole_reference(s: &str) -> Option<&str> {
    let name = s.trim().strip_prefix("${")?.strip_suffix('}')?;
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).then_some(name)
}

/// A string with each `${NAME}` replaced by that variable's value; an unset one is an error.
fn expand_vars(v: &Value, source: &Source) -> Result<Value> {
    let Some(s) = v.as_str() else { return Ok(v.clone()) };
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let Some((name, tail)) = rest[i + 2..].split_once('}') else { break };
        let value = std::env::var(name).map_err(|_| {
            Error::config(format!("invalid configuration in {source}: `api_url` names ${{{name}}}, which is not set"))
                .with_hint(format!("set {name} in the environment, or write the address itself"))
        })?;
        out.push_str(&value);
        rest = tail;
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

pub fn resolve(layers: &[Layer]) -> Result<Resolved> {
    let mut value = serde_json::to_value(Config::default()).expect("defaults serialize");
    let mut sources = BTreeMap::new();
    mark_all(&value, "", &mut sources);
    for layer in layers {
        let layer = &seed_names(layer)?;
        layer.validate()?;
        merge(&mut value, &layer.value, &layer.source, "", &mut sources);
    }
    agent_sandbox(&mut value, &mut sources);
    let config: Config = serde_path_to_error::deserialize(value.clone()).map_err(|e| {
        let path = e.path().to_string();
        Error::config(format!("invalid configuration at key `{path}`: {}", e.into_inner()))
    })?;
    validate_values(&config)?;
    Ok(Resolved { config, value, sources })
}

/// The folder inside the workspace where an agent's file tools write by default.
pub fn agent_sandbox_dir(agent: &str) -> Utf8PathBuf {
    Utf8PathBuf::from("sandbox").join(agent)
}

/// The per-agent sandbox: with an agent chosen (`agent`, `--agent`) and no layer setting
/// `tools.write_paths`, file tools write only in `sandbox/<agent>/` inside the workspace.
fn agent_sandbox(value: &mut Value, sources: &mut Sources) {
    let Some(agent) = value.get("agent").and_then(Value::as_str).filter(|a| !a.is_empty()) else { return };
    if sources.get("tools.write_paths").is_some_and(Source::is_given) {
        return;
    }
    let dir = agent_sandbox_dir(agent);
    value["tools"]["write_paths"] = json!([dir]);
    sources.insert("tools.write_paths".into(), Source::AgentSandbox);
}

fn mark_all(v: &Value, prefix: &str, sources: &mut Sources) {
    if let Value::Object(m) = v {
        for (k, v) in m {
            let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            if v.as_object().is_some_and(|o| !o.is_empty()) {
                mark_all(v, &key, sources);
            } else {
                sources.insert(key, Source::Default);
            }
        }
    }
}

fn validate_values(c: &Config) -> Result<()> {
    if c.llm.attempts == 0 {
        return Err(Error::config("invalid configuration at key `llm.attempts`: must be at least 1"));
    }
    let percents = [("rest.max_fatigue", c.rest.max_fatigue), ("rest.relief", c.rest.relief)];
    let non_negative = [
        ("stress.per_escalation", c.stress.per_escalation),
        ("stress.threshold", c.stress.threshold),
        ("stress.decay_per_hour", c.stress.decay_per_hour),
    ];
    for (key, v) in percents {
        if !(0.0..=100.0).contains(&v) {
            return Err(Error::config(format!(
                "invalid configuration at key `{key}`: {v} is not a percent (0 to 100)"
            )));
        }
    }
    for (key, v) in non_negative {
        if !v.is_finite() || v < 0.0 {
            return Err(Error::config(format!("invalid configuration at key `{key}`: {v} must be 0 or more")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_found_on_its_line_but_not_in_block_text_or_other_mappings() {
        let yaml = "a: 1\nb:\n  c: 1\n  d: |\n    c: x\n    c: y\n  c: 2\nlist:\n  - c: 1\n  - c: 2\nb: 3\n";
        assert_eq!(duplicate_key_line(yaml, "c"), Some(7));
        assert_eq!(duplicate_key_line(yaml, "b"), Some(11));
        assert_eq!(duplicate_key_line("x: {c: 1, c: 2}\n", "c"), None);
        let e = parse_yaml::<Value>("tools: {}\nmax_steps: 3\ntools: {}\n").unwrap_err();
        assert!(e.starts_with("line 3: the key `tools` appears twice"), "{e}");
        assert!(parse_yaml::<Value>("- c: 1\n- c: 2\n").is_ok());
    }
    use serde_json::json;

    fn layer(source: Source, v: Value) -> Layer {
        Layer { source, value: v }
    }

    fn file(path: &str) -> Source {
        Source::Workspace(path.into())
    }

    #[test]
    fn later_layers_win_key_by_key_and_keep_their_source() {
        let r = resolve(&[
            layer(
                Source::UserConfig("user".into()),
                json!({"max_steps": 11, "llm": {"model": "a", "temperature": 0.5}}),
            ),
            layer(file("workspace"), json!({"max_steps": 12, "llm": {"model": "b"}})),
            layer(Source::CommandLine, json!({"llm": {"attempts": 2}})),
        ])
        .unwrap();
        assert_eq!(r.config.max_steps, 12);
        assert_eq!(r.config.llm.model.as_deref(), Some("b"));
        // A nested key a later layer does not set stays from the earlier one.
        assert_eq!(r.config.llm.temperature, Some(0.5));
        assert_eq!(r.config.llm.attempts, 2);
        assert_eq!(r.sources["max_steps"], file("workspace"));
        assert_eq!(r.sources["llm.model"], file("workspace"));
        assert_eq!(r.sources["llm.temperature"].to_string(), "user");
        assert_eq!(r.sources["llm.attempts"], Source::CommandLine);
        assert_eq!(r.sources["max_reframes"], Source::Default);
    }

    #[test]
    fn a_source_reads_as_config_show_prints_it() {
        let cases = [
            (Source::Default, "default"),
            (Source::Workspace("ws/agentloop.yaml".into()), "ws/agentloop.yaml"),
            (Source::AgentProfile("ws/agents/a.yaml".into()), "ws/agents/a.yaml (agent profile)"),
            (Source::Request, "the request's config"),
            (Source::ApiRequest, "the request"),
            (Source::Environment, "environment"),
            (Source::CommandLine, "command line"),
            (Source::AgentSandbox, "agent sandbox default"),
        ];
        for (source, text) in cases {
            assert_eq!(source.to_string(), text);
            assert_eq!(json!(source), json!(text));
        }
    }

    #[test]
    fn a_choice_outside_its_set_names_the_layer_and_the_valid_values() {
        let e = resolve(&[layer(file("ws/agentloop.yaml"), json!({"llm": {"structured": "xml"}}))]).err().unwrap();
        assert_eq!(
            e.message,
            "invalid configuration in ws/agentloop.yaml at key `llm.structured`: unknown variant `xml`, expected one of `tools`, `json`, `auto`"
        );
        let d = serde_json::to_value(Config::default()).unwrap();
        assert_eq!(
            (&d["llm"]["provider"], &d["llm"]["structured"], &d["logging"]["level"], &d["logging"]["format"]),
            (&json!("auto"), &json!("auto"), &json!("info"), &json!("text"))
        );
        assert_eq!(d["memory"]["compact_with"], "model");
    }

    #[test]
    fn a_bad_layer_is_named_and_the_seed_alias_maps() {
        let e = resolve(&[layer(file("ws/agentloop.yaml"), json!({"llm": {"modle": "x"}}))]).err().unwrap();
        assert_eq!(e.kind, crate::error::Kind::Config);
        assert!(e.message.contains("ws/agentloop.yaml at key `llm.modle`"), "{}", e.message);
        let r = resolve(&[layer(file("seed"), json!({"max_loops": 9}))]).unwrap();
        assert_eq!(r.config.max_steps, 9);
        let e = resolve(&[layer(file("both"), json!({"max_loops": 9, "max_steps": 3}))]).err().unwrap();
        assert!(e.message.contains("both `max_loops` and `max_steps`"), "{}", e.message);
        let e = resolve(&[layer(file("x"), json!({"llm": {"attempts": 0}}))]).err().unwrap();
        assert!(e.message.contains("llm.attempts"), "{}", e.message);
    }
}
