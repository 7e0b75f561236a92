//! The `tools` section: which tools run, where the file tools may read and write, HTTP, the
//! shell and its sandbox, external tools.

use super::*;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

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
/// policy, checked by the engine's `tool_settings` when the configuration resolves.
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
    /// The per-user HTTP cache of `web_fetch` and `http_call` GETs: `on` (the default: what
    /// Cache-Control, Expires, ETag and Last-Modified allow), `off`, or a duration — a floor:
    /// a response that sends no Cache-Control or Expires is fresh that long.
    pub cache: HttpCache,
}

/// `tools.http.cache`: off, or on with a floor TTL (zero: the headers alone decide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpCache {
    Off,
    On { floor: Duration },
}

impl HttpCache {
    /// The floor TTL, or None when the cache is off.
    pub fn floor(&self) -> Option<Duration> {
        match self {
            HttpCache::Off => None,
            HttpCache::On { floor } => Some(*floor),
        }
    }
}

impl Default for HttpCache {
    fn default() -> Self {
        HttpCache::On { floor: Duration::ZERO }
    }
}

impl Serialize for HttpCache {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            HttpCache::Off => s.serialize_str("off"),
            HttpCache::On { floor } if floor.is_zero() => s.serialize_str("on"),
            HttpCache::On { floor } => s.serialize_str(&humantime::format_duration(*floor).to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for HttpCache {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            B(bool),
            N(u64),
            S(String),
        }
        let bad = |what: &str| {
            serde::de::Error::custom(format!(
                "{what} is not a cache setting; use off, on, or a floor such as 10m (a duration)"
            ))
        };
        match Raw::deserialize(d)? {
            Raw::B(false) => Ok(HttpCache::Off),
            Raw::B(true) => Ok(HttpCache::default()),
            Raw::N(n) => Ok(HttpCache::On { floor: Duration::from_secs(n) }),
            Raw::S(s) => match s.trim() {
                "off" => Ok(HttpCache::Off),
                "on" => Ok(HttpCache::default()),
                t => agentloop_types::clock::parse_duration(t)
                    .map(|floor| HttpCache::On { floor })
                    .map_err(|_| bad(&format!("`{t}`"))),
            },
        }
    }
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
            cache: HttpCache::default(),
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
    /// Programs of `allow` that may run although they can run code the workspace holds
    /// (compilers, linkers, preprocessors, interpreters, build tools, test runners, loaders of
    /// plugins or providers): each is refused whole unless named here (`argv[0]`, matched
    /// exactly). Only with the OS sandbox: without it nothing allows them.
    pub code_runners: Vec<String>,
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
            code_runners: vec![],
            env: vec!["PATH".into(), "HOME".into(), "LANG".into(), "LC_ALL".into(), "TZ".into(), "TERM".into()],
            timeout: Dur::secs(30),
            max_output: 64 * 1024,
            sandbox: ShellSandbox::Bwrap,
            network: false,
        }
    }
}
