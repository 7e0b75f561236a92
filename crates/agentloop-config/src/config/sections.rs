//! The other sections: memory, logging, skills, event mode (`handle`), the queue, `serve`,
//! Ductile, OpenTelemetry and MCP servers.

use super::*;
use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Long-term memory across runs (memory_save / memory_search / memory_read).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryToolConfig {
    pub enabled: bool,
    /// Store folder (default: memory.dir, else the one `memory.scope` picks).
    pub dir: Option<Utf8PathBuf>,
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
    /// Take a request's `config` as written, as trusted as this file, instead of letting it
    /// only narrow this file. For a router whose `config` is the operator's own (Ductile sends
    /// the plugin's block from plugins.yaml); event payloads stay untrusted. Honoured only from
    /// the root's own configuration, never from a request.
    pub trust_request_config: bool,
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
            trust_request_config: false,
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

/// `serve:` — the HTTP server (`agentloop serve`).
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Names a request's `Host` may give besides the server's own (`127.0.0.1`, `localhost`, `[::1]`
    /// and the address it listens on): `name` (any port), `name:port`, `*.suffix`, `[IPv6]`.
    /// Beyond loopback an empty list takes any `Host`; a set one takes only those and its own.
    pub allowed_hosts: Vec<String>,
}

/// A host as `serve.allowed_hosts` names one or a request's `Host` header gives one: the name
/// in lower case without a final dot (an IPv6 address in brackets, `[::1]`), and the port when
/// one is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub name: String,
    pub port: Option<u16>,
}

impl HostPort {
    /// Reads `name`, `name:port`, `[v6]` or `[v6]:port` (and, with `pattern`, `*.suffix`, with
    /// or without a port); None for anything else (an empty name, a bad port, a character no
    /// host name holds).
    pub fn parse(text: &str, pattern: bool) -> Option<HostPort> {
        let text = text.trim().to_ascii_lowercase();
        let (name, port) = match text.strip_prefix('[') {
            Some(rest) => {
                let (inside, after) = rest.split_once(']')?;
                inside.parse::<std::net::Ipv6Addr>().ok()?;
                (format!("[{inside}]"), after)
            }
            None => match text.find(':') {
                Some(i) => (text[..i].to_string(), &text[i..]),
                None => (text.clone(), ""),
            },
        };
        let port = match port {
            "" => None,
            p => Some(p.strip_prefix(':')?.parse::<u16>().ok().filter(|p| *p != 0)?),
        };
        let name = name.strip_suffix('.').map(String::from).unwrap_or(name);
        let label = |l: &str| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let plain = |n: &str| n.split('.').all(label);
        let ok = name.starts_with('[')
            || plain(&name)
            || (pattern && name.strip_prefix("*.").is_some_and(|rest| !rest.is_empty() && plain(rest)));
        ok.then_some(HostPort { name, port })
    }

    /// Whether `host` (a request's) is one this entry names: the same name, or one under a
    /// `*.suffix`; and the same port when the entry gives one.
    pub fn covers(&self, host: &HostPort) -> bool {
        let name = match self.name.strip_prefix('*') {
            Some(dot_suffix) => host.name.len() > dot_suffix.len() && host.name.ends_with(dot_suffix),
            None => host.name == self.name,
        };
        name && self.port.is_none_or(|p| host.port == Some(p))
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
    /// OAuth client settings of an HTTP server (see `mcp::auth`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthConfig>,
}

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

/// `mcp.servers.NAME.oauth`: how agentloop identifies itself to the server's authorization
/// server. Every key is optional: with none, the client registers itself (dynamic registration)
/// and a person signs in with `agentloop mcp login NAME`.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OAuthConfig {
    /// `authorization_code` (default: a person signs in) or `client_credentials` (a machine
    /// client: workers and cron, needs `client_id` and `client_secret`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
    /// A client registered with the authorization server beforehand (skips registration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Its secret; `${VAR}` takes it from the environment (recommended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// Scopes to ask for (default: what the server's challenge or metadata names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// An https URL of a client metadata document, used as the client id where the
    /// authorization server supports them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// The client's private key (PKCS#8 PEM) in a file: the client authenticates with a signed
    /// JWT (`private_key_jwt`, RFC 7523) instead of a secret. An absolute path (`~/` and
    /// `${VAR}` expand).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_key_file: Option<String>,
    /// The same key as text, normally `${VAR}`; redacted everywhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
    /// How the key signs: `ES256` (default), `ES384` or `RS256`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_alg: Option<SigningAlg>,
    /// `grant: identity_assertion`: the identity provider whose ID token is exchanged for an
    /// identity assertion (ID-JAG) to present to the server's authorization server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_provider: Option<IdentityProviderConfig>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    #[default]
    AuthorizationCode,
    ClientCredentials,
    /// Enterprise-managed authorization: the identity provider's ID token is exchanged
    /// (RFC 8693) for an ID-JAG, which the server's authorization server redeems (RFC 7523).
    IdentityAssertion,
}

/// The algorithm of a `private_key_jwt` client assertion.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub enum SigningAlg {
    #[default]
    ES256,
    ES384,
    RS256,
}

/// `mcp.servers.NAME.oauth.identity_provider`: the enterprise identity provider of
/// `grant: identity_assertion`.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct IdentityProviderConfig {
    /// Its issuer (the ID-JAG it returns must name it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Its token endpoint (default: from the issuer's OpenID or OAuth metadata).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// agentloop's client at the identity provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Its secret, if it is a confidential client (else it is a public one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The person's ID token from the identity provider, normally `${VAR}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_token: Option<String>,
    /// The same in a file (an absolute path; `~/` and `${VAR}` expand).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_token_file: Option<String>,
}
