//! The `mcp:` configuration: servers in the common `mcpServers` shape, resolved into
//! [`Server`]s ready to start.
//!
//! A server is `{command, args, env, cwd}` (stdio) or `{url, headers}` (streamable HTTP), plus
//! agentloop's own keys (`enabled`, `timeout`, `startup_timeout`, `allowed_tools`,
//! `denied_tools`). `mcp.config_file` names a file in the `mcpServers` JSON shape used across the
//! ecosystem, read as is; `mcp.servers` entries of the same name are merged over it key by key,
//! so `mcp.servers.fetch.enabled: false` turns one of the file's servers off.
//!
//! Invariants: `${VAR}` (and `$VAR`, `${VAR:-default}`, `$$` for a dollar) is expanded only when a
//! server is resolved, and only in command, args, env values, cwd, url and header values; what
//! is shown to people and written to logs or the trace is the text as configured, never the
//! expanded values, so secrets passed through the environment stay out of them. Env and header
//! values never appear anywhere but in the child's environment or the HTTP request.

use agentloop_types::error::{Error, Result};
use agentloop_types::error::{Kind, ResultExt};
use camino::{Utf8Path, Utf8PathBuf};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

pub use agentloop_config::config::{McpConfig, ServerConfig, ServerType};

pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How agentloop reaches a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Stdio { command: String, args: Vec<String>, env: Vec<(String, String)>, cwd: Utf8PathBuf },
    Http { url: String, headers: Vec<(String, String)> },
}

/// A server ready to start: names checked, variables expanded, timeouts filled in.
#[derive(Debug, Clone)]
pub struct Server {
    pub name: String,
    /// The name as it appears in tool names and file names (`[A-Za-z0-9_-]`).
    pub slug: String,
    pub enabled: bool,
    /// None for a disabled server (its variables are not expanded).
    pub transport: Option<Transport>,
    /// What people see: the command and args (or url) as configured, before expansion.
    pub display: String,
    /// Names of the extra environment variables (never their values).
    pub env_names: Vec<String>,
    /// Names of the extra HTTP headers (never their values).
    pub header_names: Vec<String>,
    pub timeout: Duration,
    pub startup_timeout: Duration,
    pub allowed_tools: Option<Vec<String>>,
    pub denied_tools: Vec<String>,
    /// Values that must not be recorded: what `${VAR}` put into env, headers, url or args,
    /// and every header value (6 characters or more; shorter ones would redact noise).
    pub secrets: Vec<String>,
    /// OAuth client settings (HTTP servers only), variables expanded.
    pub oauth: Option<OAuth>,
    /// Whether a person at this command may be asked to sign in when the server asks (a
    /// command's `--login`, `mcp login`); never in a run, where only a machine grant signs in.
    pub sign_in: bool,
}

impl Server {
    /// `s` with every secret value replaced by `[redacted]`: applied to every message, result
    /// and warning about this server before it can reach a person, a log or the trace.
    pub fn redact(&self, s: &str) -> String {
        let mut out = s.to_string();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "[redacted]");
            }
        }
        out
    }

    /// Whether the server's tool `name` is offered (allowed_tools, then denied_tools).
    pub fn offers(&self, name: &str) -> bool {
        self.allowed_tools.as_ref().is_none_or(|a| a.iter().any(|p| glob(p, name)))
            && !self.denied_tools.iter().any(|p| glob(p, name))
    }

    /// The cache key: what decides the tool list (transport, command, args, cwd, env and header
    /// names, url). Changing any of them lists the tools again.
    pub fn cache_key(&self) -> String {
        let t = match &self.transport {
            Some(Transport::Stdio { command, args, cwd, .. }) => {
                serde_json::json!({"stdio": {"command": command, "args": args, "cwd": cwd, "env": self.env_names}})
            }
            Some(Transport::Http { url, .. }) => {
                serde_json::json!({"http": {"url": url, "headers": self.header_names}})
            }
            None => Value::Null,
        };
        format!("{:016x}", fnv1a(t.to_string().as_bytes()))
    }

    pub fn is_http(&self) -> bool {
        matches!(self.transport, Some(Transport::Http { .. }))
    }
}

/// FNV-1a, 64 bits: a stable key for cache file names (not a security hash); the one the
/// worker's keys use too.
pub use agentloop_types::run_id::fnv1a;

/// [`agentloop_config::config::OAuthConfig`] with its variables expanded.
#[derive(Debug, Clone, Default)]
pub struct OAuth {
    pub grant: agentloop_config::config::Grant,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
    pub client_metadata_url: Option<String>,
    /// The client's key (`oauth.private_key_file` or `private_key`): it authenticates with a
    /// signed JWT instead of `client_secret`.
    pub private_key: Option<super::jwt::Key>,
    /// `grant: identity_assertion`'s identity provider.
    pub identity_provider: Option<IdentityProvider>,
}

impl OAuth {
    /// Whether tokens come from a grant no person takes part in, so a new one may be obtained
    /// anywhere (a worker, cron), with no browser.
    pub fn is_machine(&self) -> bool {
        matches!(
            self.grant,
            agentloop_config::config::Grant::ClientCredentials | agentloop_config::config::Grant::IdentityAssertion
        )
    }
}

/// [`agentloop_config::config::IdentityProviderConfig`] with its variables expanded and its ID token read.
#[derive(Clone, Default)]
pub struct IdentityProvider {
    pub issuer: String,
    pub token_endpoint: Option<String>,
    pub client_id: String,
    pub client_secret: Option<String>,
    pub id_token: String,
}

impl std::fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IdentityProvider({}, client {})", self.issuer, self.client_id)
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// The servers of a config: the file's, then `mcp.servers` merged over them, resolved.
pub fn resolve(cfg: &agentloop_config::config::Config, root: &Utf8Path) -> Result<Vec<Server>> {
    resolve_with(&cfg.mcp, cfg.tools.timeout.0, root, &|k| std::env::var(k).ok())
}

pub fn resolve_with(
    mcp: &McpConfig,
    default_timeout: Duration,
    root: &Utf8Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Server>> {
    let mut merged: BTreeMap<String, (Value, String)> = BTreeMap::new();
    if let Some(file) = &mcp.config_file {
        let path = agentloop_io::fs::resolve_in(root, file);
        for (name, v) in read_config_file(&path)? {
            merged.insert(name, (v, path.to_string()));
        }
    }
    for (name, sc) in &mcp.servers {
        let v = agentloop_types::json::to_value(sc);
        match merged.get_mut(name) {
            Some((base, source)) => {
                if let (Value::Object(b), Value::Object(o)) = (base, v) {
                    b.extend(o);
                }
                *source = format!("{source} and mcp.servers.{name}");
            }
            None => {
                merged.insert(name.clone(), (v, format!("mcp.servers.{name}")));
            }
        }
    }
    let mut out: Vec<Server> = Vec::new();
    for (name, (v, source)) in merged {
        check_name(&name, &source)?;
        let sc: ServerConfig = serde_json::from_value(v).map_err(|e| {
            Error::config(format!("invalid MCP server `{name}` ({source})"))
                .with_hint("a server is {command, args, env, cwd} or {url, headers}")
                .with_source(e)
        })?;
        let server = resolve_one(&name, &sc, &source, default_timeout, root, var)?;
        if let Some(other) = out.iter().find(|s| s.slug == server.slug) {
            return Err(Error::config(format!(
                "MCP servers `{}` and `{name}` both become `{}` in tool names",
                other.name, server.slug
            ))
            .with_hint("rename one of them"));
        }
        out.push(server);
    }
    Ok(out)
}

/// Longest server name taken, in characters.
const MAX_NAME: usize = 128;

/// A server name is printed in messages, lists and errors as it is, so it must be text that
/// shows on one line as written: no control character (a newline would forge the lines after
/// it on a terminal), no bidi control, and at most [`MAX_NAME`] characters. Refused when the
/// configuration is read, naming the key with the name escaped by the one-line printer.
fn check_name(name: &str, source: &str) -> Result<()> {
    let shown = agentloop_io::output::one_line(name);
    let one_line = matches!(shown, std::borrow::Cow::Borrowed(_));
    if one_line && (1..=MAX_NAME).contains(&name.chars().count()) {
        return Ok(());
    }
    let shown: String = shown.chars().take(MAX_NAME).collect();
    let source = agentloop_io::output::one_line(source);
    Err(Error::config(format!(
        "MCP server `{shown}` ({source}): a server name must be 1-{MAX_NAME} characters with no control characters"
    ))
    .with_hint("rename the server to a plain name such as `github` or `web-search`"))
}

/// Reads an `mcpServers` JSON file (Claude Desktop, Cursor, VS Code's `servers`, ...).
fn read_config_file(path: &Utf8Path) -> Result<Vec<(String, Value)>> {
    let text = agentloop_io::fs::read_optional(path)?.ok_or_else(|| {
        Error::config(format!("mcp.config_file {path} does not exist"))
            .with_hint("fix the path (relative paths are taken from the workspace) or remove mcp.config_file")
    })?;
    let v: Value =
        serde_json::from_str(&text).context_as(Kind::Config, format!("mcp.config_file {path} is not valid JSON"))?;
    let servers = v.get("mcpServers").or_else(|| v.get("servers")).and_then(Value::as_object).ok_or_else(|| {
        Error::config(format!("mcp.config_file {path} has no `mcpServers` object"))
            .with_hint("the file looks like {\"mcpServers\": {\"NAME\": {\"command\": \"...\", \"args\": [...]}}}")
    })?;
    Ok(servers.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// One server being resolved: the name and source its errors cite, and the variable lookup,
/// which remembers every value it substitutes into env, headers, url, args and oauth (they
/// become the server's secrets; the command and cwd are looked up unrecorded).
struct Resolving<'a> {
    name: &'a str,
    source: &'a str,
    var: &'a dyn Fn(&str) -> Option<String>,
    used: std::cell::RefCell<Vec<String>>,
}

impl Resolving<'_> {
    /// A configuration error about this server.
    fn bad(&self, msg: String) -> Error {
        Error::config(format!("MCP server `{}` ({}): {msg}", self.name, self.source))
    }

    /// The variable `k`, its value remembered as a secret.
    fn recorded(&self, k: &str) -> Option<String> {
        let v = (self.var)(k);
        if let Some(x) = &v {
            self.used.borrow_mut().push(x.clone());
        }
        v
    }

    /// `value` of config key `key` expanded, what it substitutes remembered as secrets.
    fn expand_secret(&self, key: &str, value: &str) -> Result<String> {
        expand(value, &|k| self.recorded(k)).map_err(|e| self.bad(format!("{key}: {e}")))
    }

    /// `value` of config key `key` expanded, nothing remembered (the command and cwd are shown).
    fn expand_shown(&self, key: &str, value: &str) -> Result<String> {
        expand(value, self.var).map_err(|e| self.bad(format!("{key}: {e}")))
    }
}

/// One server's configuration checked and resolved into a [`Server`]: which transport, what
/// it is shown as, its variables expanded (a disabled server's are not), its secrets gathered.
fn resolve_one(
    name: &str,
    sc: &ServerConfig,
    source: &str,
    default_timeout: Duration,
    root: &Utf8Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Server> {
    let r = Resolving { name, source, var, used: Default::default() };
    if name.is_empty() {
        return Err(r.bad("the server name is empty".into()));
    }
    let slug = slug(name);
    let enabled = sc.enabled.unwrap_or(!sc.disabled.unwrap_or(false));
    let http = is_http(&r, sc, enabled)?;
    let env_names: Vec<String> = sc.env.as_ref().map(|e| e.keys().cloned().collect()).unwrap_or_default();
    let header_names: Vec<String> = sc.headers.as_ref().map(|h| h.keys().cloned().collect()).unwrap_or_default();
    if let Some(k) = env_names.iter().find(|k| k.is_empty() || k.contains(['=', '\0'])) {
        return Err(r.bad(format!("env name `{k}` is not a variable name")));
    }
    let display = display(sc, http);
    let mut secrets: Vec<String> = Vec::new();
    let transport = match (enabled, http) {
        (false, _) => None,
        (true, true) => Some(http_transport(&r, sc, &mut secrets)?),
        (true, false) => Some(stdio_transport(&r, sc, root)?),
    };
    let oauth = match (&sc.oauth, http && enabled) {
        (Some(_), false) if enabled => {
            return Err(r
                .bad("`oauth` applies to HTTP servers (`url`) only".into())
                .with_hint("remove oauth, or give the server's url"))
        }
        (Some(o), true) => Some(resolve_oauth(&r, o, &mut secrets)?),
        _ => None,
    };
    secrets.extend(r.used.into_inner());
    Ok(Server {
        name: name.to_string(),
        slug,
        enabled,
        transport,
        display,
        env_names,
        header_names,
        timeout: sc.timeout.map(|d| d.0).unwrap_or(default_timeout),
        startup_timeout: sc.startup_timeout.map(|d| d.0).unwrap_or(DEFAULT_STARTUP_TIMEOUT),
        allowed_tools: sc.allowed_tools.clone(),
        denied_tools: sc.denied_tools.clone().unwrap_or_default(),
        secrets: redaction_order(secrets),
        oauth,
        sign_in: false,
    })
}

/// Whether the server is reached over HTTP (`url`) rather than stdio (`command`): `type`, when
/// given, must agree with the key present, and a disabled server may have neither.
fn is_http(r: &Resolving, sc: &ServerConfig, enabled: bool) -> Result<bool> {
    Ok(match (sc.kind, sc.command.is_some(), sc.url.is_some()) {
        (_, true, true) => return Err(r.bad("give either `command` (stdio) or `url` (HTTP), not both".into())),
        (Some(ServerType::Http), _, false) => return Err(r.bad("`type: http` needs `url`".into())),
        (Some(ServerType::Stdio), false, _) => return Err(r.bad("`type: stdio` needs `command`".into())),
        (_, false, true) => true,
        (_, true, false) => false,
        (None, false, false) if enabled => {
            return Err(r
                .bad("no `command` and no `url`".into())
                .with_hint("a stdio server needs `command` (and `args`); an HTTP server needs `url`"))
        }
        (None, false, false) => false,
    })
}

/// How lists and messages name the server: masked as `config show` masks it (a password or
/// query in the address, a credential among the arguments), before any variable is expanded.
fn display(sc: &ServerConfig, http: bool) -> String {
    if http {
        return agentloop_config::mask::url(&sc.url.clone().unwrap_or_default());
    }
    let mut d = agentloop_config::mask::command(&sc.command.clone().unwrap_or_default());
    for a in agentloop_config::mask::argv(sc.args.as_deref().unwrap_or_default()) {
        d.push(' ');
        d.push_str(&a);
    }
    d
}

/// The url and headers, expanded; every header value is a secret, and a credential header's
/// value is redacted everywhere.
fn http_transport(r: &Resolving, sc: &ServerConfig, secrets: &mut Vec<String>) -> Result<Transport> {
    let url = r.expand_secret("url", sc.url.as_deref().unwrap_or_default())?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(r.bad(format!("url `{}` is not an http(s) URL", sc.url.as_deref().unwrap_or_default())));
    }
    let mut headers = Vec::new();
    for (k, v) in sc.headers.iter().flatten() {
        let value = r.expand_secret(&format!("headers.{k}"), v)?;
        register_credential(k, &value);
        secrets.push(value.clone());
        headers.push((k.clone(), value));
    }
    Ok(Transport::Http { url, headers })
}

/// The command, args, env and cwd, expanded; a relative cwd is taken from the workspace.
fn stdio_transport(r: &Resolving, sc: &ServerConfig, root: &Utf8Path) -> Result<Transport> {
    let command = r.expand_shown("command", sc.command.as_deref().unwrap_or_default())?;
    if command.trim().is_empty() {
        return Err(r.bad("`command` is empty".into()));
    }
    let mut args = Vec::new();
    for (i, a) in sc.args.iter().flatten().enumerate() {
        args.push(r.expand_secret(&format!("args[{i}]"), a)?);
    }
    let mut env = Vec::new();
    for (k, v) in sc.env.iter().flatten() {
        let value = r.expand_secret(&format!("env.{k}"), v)?;
        register_credential(k, &value);
        env.push((k.clone(), value));
    }
    let cwd = match &sc.cwd {
        Some(c) => agentloop_io::fs::resolve_in(root, Utf8Path::new(&r.expand_shown("cwd", c)?)),
        None => root.to_path_buf(),
    };
    Ok(Transport::Stdio { command, args, env, cwd })
}

/// `oauth` resolved: variables expanded, the client key and the identity provider's ID token
/// read. Checked in the order the keys are listed: client_secret, the key, the identity
/// provider, client_id, client_metadata_url.
fn resolve_oauth(r: &Resolving, o: &agentloop_config::config::OAuthConfig, secrets: &mut Vec<String>) -> Result<OAuth> {
    let ex = |k: &str, v: &Option<String>| v.as_deref().map(|v| r.expand_secret(&format!("oauth.{k}"), v)).transpose();
    let before = secrets.len();
    let client_secret = ex("client_secret", &o.client_secret)?;
    secrets.extend(client_secret.clone());
    let grant = o.grant.unwrap_or_default();
    let private_key = client_key(r, o, secrets)?;
    let identity_provider = oauth_identity_provider(r, o, grant, secrets)?;
    // The client's credentials are redacted everywhere, not only in this server's output:
    // a tool that reads the key file or the environment must not put them in the trace.
    for c in &secrets[before..] {
        agentloop_io::redact::register(c);
    }
    Ok(OAuth {
        grant,
        client_id: ex("client_id", &o.client_id)?,
        client_secret,
        scopes: o.scopes.clone().unwrap_or_default(),
        client_metadata_url: ex("client_metadata_url", &o.client_metadata_url)?,
        private_key,
        identity_provider,
    })
}

/// The client's signing key, from `oauth.private_key` or `oauth.private_key_file` (not both);
/// its text is a secret.
fn client_key(
    r: &Resolving,
    o: &agentloop_config::config::OAuthConfig,
    secrets: &mut Vec<String>,
) -> Result<Option<super::jwt::Key>> {
    let alg = o.signing_alg.unwrap_or_default();
    let (what, text) = match (&o.private_key, &o.private_key_file) {
        (Some(_), Some(_)) => return Err(r.bad("give oauth.private_key or oauth.private_key_file, not both".into())),
        (Some(k), None) => ("oauth.private_key".to_string(), r.expand_secret("oauth.private_key", k)?),
        (None, Some(f)) => {
            let (path, text) =
                secret_file("oauth.private_key_file", f, &|k| r.recorded(k)).map_err(|e| e.into_error(|m| r.bad(m)))?;
            (format!("oauth.private_key_file {path}"), text)
        }
        (None, None) => return Ok(None),
    };
    secrets.push(text.trim().to_string());
    let key = super::jwt::Key::from_pem(&text, alg).map_err(|e| {
        r.bad(format!("{what}: {e}")).with_hint("give an unencrypted PKCS#8 PEM key that oauth.signing_alg can sign with (ES256: P-256, ES384: P-384, RS256: RSA)")
    })?;
    Ok(Some(key))
}

/// `oauth.identity_provider`, which `grant: identity_assertion` needs and no other grant takes.
fn oauth_identity_provider(
    r: &Resolving,
    o: &agentloop_config::config::OAuthConfig,
    grant: agentloop_config::config::Grant,
    secrets: &mut Vec<String>,
) -> Result<Option<IdentityProvider>> {
    match (&o.identity_provider, grant) {
        (Some(idp), agentloop_config::config::Grant::IdentityAssertion) => {
            Ok(Some(identity_provider(idp, &|k| r.recorded(k), secrets).map_err(|e| e.into_error(|m| r.bad(m)))?))
        }
        (Some(_), _) => Err(r
            .bad("oauth.identity_provider applies to `grant: identity_assertion` only".into())
            .with_hint("set oauth.grant: identity_assertion, or remove oauth.identity_provider")),
        (None, agentloop_config::config::Grant::IdentityAssertion) => {
            Err(r.bad("`grant: identity_assertion` needs oauth.identity_provider".into()).with_hint(
                "give oauth.identity_provider: {issuer, client_id, id_token: \"${ID_TOKEN}\"} (or id_token_file)",
            ))
        }
        (None, _) => Ok(None),
    }
}

/// The secrets as redaction applies them: none under 6 characters (they would redact noise),
/// each once, longest first so a secret that contains another is redacted whole.
fn redaction_order(mut secrets: Vec<String>) -> Vec<String> {
    secrets.retain(|s| s.chars().count() >= 6);
    secrets.sort();
    secrets.dedup();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets
}

/// A header or variable whose name says it carries a credential (`Authorization`,
/// `X-Api-Key`, `GH_TOKEN`; [`agentloop_config::mask::secret_name`]) hands its value to the
/// server: the credential (after an auth scheme, `Bearer X`) is registered for redaction in
/// every write, not only in this server's own output.
fn register_credential(name: &str, value: &str) {
    if !agentloop_config::mask::secret_name(name) {
        return;
    }
    let v = value.trim();
    let credential = match v.split_once(' ') {
        Some((scheme, rest)) if scheme.chars().all(|c| c.is_ascii_alphabetic()) => rest.trim(),
        _ => v,
    };
    agentloop_io::redact::register(credential);
}

/// Why a credential key of a server cannot be used: the key and why (said after the server's
/// name), and the file's error when reading it failed.
#[derive(Debug)]
struct CredentialError {
    message: String,
    source: Option<Error>,
}

impl From<String> for CredentialError {
    fn from(message: String) -> Self {
        CredentialError { message, source: None }
    }
}

impl CredentialError {
    /// The configuration error `bad` makes of the text, the file's error kept as its source.
    fn into_error(self, bad: impl Fn(String) -> Error) -> Error {
        match self.source {
            Some(s) => bad(self.message).with_source(s),
            None => bad(self.message),
        }
    }
}

/// Reads a credential from the file a config key names: `~/` and `${VAR}` expanded, an absolute
/// path. The path as read and the text.
fn secret_file(
    key: &str,
    raw: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> std::result::Result<(String, String), CredentialError> {
    let mut path = expand(raw, var).map_err(|e| format!("{key}: {e}"))?;
    if let Some(rest) = path.strip_prefix("~/") {
        let home = std::env::var("HOME").map_err(|_| format!("{key}: `~/` needs HOME"))?;
        path = format!("{}/{rest}", home.trim_end_matches('/'));
    }
    if !path.starts_with('/') {
        return Err(format!("{key} `{raw}` is not an absolute path (start it with `/` or `~/`)").into());
    }
    let text = agentloop_io::fs::read_to_string(Utf8Path::new(&path))
        .map_err(|e| CredentialError { message: format!("{key}: {}", e.detail()), source: Some(e) })?;
    Ok((path, text))
}

/// `oauth.identity_provider` resolved: variables expanded, the ID token read, secrets recorded.
fn identity_provider(
    idp: &agentloop_config::config::IdentityProviderConfig,
    var: &dyn Fn(&str) -> Option<String>,
    secrets: &mut Vec<String>,
) -> std::result::Result<IdentityProvider, CredentialError> {
    let ex = |k: &str, v: &Option<String>| {
        v.as_deref().map(|v| expand(v, var).map_err(|e| format!("oauth.identity_provider.{k}: {e}"))).transpose()
    };
    let need = |k: &str, v: Option<String>| {
        v.filter(|v| !v.trim().is_empty()).ok_or_else(|| format!("oauth.identity_provider.{k} is missing"))
    };
    let id_token = match (&idp.id_token, &idp.id_token_file) {
        (Some(_), Some(_)) => {
            return Err(String::from("give oauth.identity_provider.id_token or id_token_file, not both").into())
        }
        (Some(t), None) => ex("id_token", &Some(t.clone()))?,
        (None, Some(f)) => Some(secret_file("oauth.identity_provider.id_token_file", f, var)?.1.trim().to_string()),
        (None, None) => None,
    };
    let id_token = need("id_token (or id_token_file)", id_token)?;
    let client_secret = ex("client_secret", &idp.client_secret)?;
    secrets.push(id_token.clone());
    secrets.extend(client_secret.clone());
    Ok(IdentityProvider {
        issuer: need("issuer", ex("issuer", &idp.issuer)?)?,
        token_endpoint: ex("token_endpoint", &idp.token_endpoint)?,
        client_id: need("client_id", ex("client_id", &idp.client_id)?)?,
        client_secret,
        id_token,
    })
}

/// A server name as used in tool and file names: `[A-Za-z0-9_-]`, others become `_`, and no
/// `__` (which separates server and tool).
pub fn slug(name: &str) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    while s.contains("__") {
        s = s.replace("__", "_");
    }
    let s = s.trim_matches('_').to_string();
    let s: String = s.chars().take(24).collect();
    if s.is_empty() {
        format!("s{:08x}", fnv1a(name.as_bytes()) as u32)
    } else {
        s
    }
}

/// Expands `${VAR}`, `${VAR:-default}`, `$VAR` and `$$`. An unset variable without a default is
/// an error naming it.
pub fn expand(s: &str, var: &dyn Fn(&str) -> Option<String>) -> std::result::Result<String, ExpandError> {
    let mut out = String::with_capacity(s.len());
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match it.peek().map(|&(_, c)| c) {
            Some('$') => {
                it.next();
                out.push('$');
            }
            Some('{') => {
                let rest = &s[i + 2..];
                let Some(end) = rest.find('}') else {
                    return Err(ExpandError::Unclosed(s.to_string()));
                };
                let inner = &rest[..end];
                let (name, default) = match inner.split_once(":-") {
                    Some((n, d)) => (n, Some(d)),
                    None => (inner, None),
                };
                if !is_var_name(name) {
                    return Err(ExpandError::NotAName(inner.to_string()));
                }
                match (var(name).filter(|v| !v.is_empty() || default.is_none()), default) {
                    (Some(v), _) => out.push_str(&v),
                    (None, Some(d)) => out.push_str(d),
                    (None, None) => return Err(ExpandError::Unset(name.to_string())),
                }
                // Skip past the closing brace.
                let stop = i + 2 + end;
                while it.peek().is_some_and(|&(j, _)| j <= stop) {
                    it.next();
                }
            }
            Some(c) if c == '_' || c.is_ascii_alphabetic() => {
                let start = i + 1;
                let mut end = start;
                while let Some(&(j, c)) = it.peek() {
                    if c == '_' || c.is_ascii_alphanumeric() {
                        end = j + c.len_utf8();
                        it.next();
                    } else {
                        break;
                    }
                }
                let name = &s[start..end];
                match var(name) {
                    Some(v) => out.push_str(&v),
                    None => return Err(ExpandError::Unset(name.to_string())),
                }
            }
            _ => out.push('$'),
        }
    }
    Ok(out)
}

/// Why [`expand`] could not expand a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpandError {
    /// `${` without its `}`, in this value.
    Unclosed(String),
    /// `${...}` holding this, which is no variable name.
    NotAName(String),
    /// This variable is not set and has no default.
    Unset(String),
}

impl std::fmt::Display for ExpandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpandError::Unclosed(s) => write!(f, "`${{` without a closing `}}` in `{s}`"),
            ExpandError::NotAName(inner) => write!(f, "`${{{inner}}}` does not name an environment variable"),
            ExpandError::Unset(name) => write!(f, "environment variable {name} is not set"),
        }
    }
}

impl std::error::Error for ExpandError {}

fn is_var_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !n.chars().next().is_some_and(|c| c.is_ascii_digit())
}

/// The environment a stdio server starts with: these variables from agentloop's own
/// environment (what the reference MCP SDKs pass), then the server's `env`. Nothing else is
/// inherited, so provider API keys never reach a server unless its `env` names them.
pub const INHERITED_ENV: &[&str] =
    &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"];

/// For `mcp list --json` and errors: a server's configuration without any value that could be
/// a secret.
pub fn describe(s: &Server) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("name".into(), Value::String(s.name.clone()));
    m.insert("transport".into(), Value::String(if s.is_http() { "http" } else { "stdio" }.into()));
    m.insert("command".into(), Value::String(s.display.clone()));
    m.insert("env".into(), serde_json::json!(s.env_names));
    if !s.header_names.is_empty() {
        m.insert("headers".into(), serde_json::json!(s.header_names));
    }
    m.insert("enabled".into(), Value::Bool(s.enabled));
    m.insert("timeout_secs".into(), serde_json::json!(s.timeout.as_secs_f64()));
    m.insert("startup_timeout_secs".into(), serde_json::json!(s.startup_timeout.as_secs_f64()));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(k: &str) -> Option<String> {
        match k {
            "HOME" => Some("/home/u".into()),
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_variables() {
        assert_eq!(expand("$HOME/x", &vars).unwrap(), "/home/u/x");
        assert_eq!(expand("${HOME}x", &vars).unwrap(), "/home/ux");
        assert_eq!(expand("Bearer ${TOKEN}", &vars).unwrap(), "Bearer s3cret");
        assert_eq!(expand("${NOPE:-dflt}", &vars).unwrap(), "dflt");
        assert_eq!(expand("${EMPTY:-dflt}", &vars).unwrap(), "dflt");
        assert_eq!(expand("a$$b $ 5$", &vars).unwrap(), "a$b $ 5$");
        assert_eq!(expand("ü${HOME}ü", &vars).unwrap(), "ü/home/uü");
        assert!(expand("${NOPE}", &vars).unwrap_err().to_string().contains("NOPE is not set"));
        assert_eq!(expand("$NOPE", &vars).unwrap_err(), ExpandError::Unset("NOPE".into()));
        assert!(expand("${HOME", &vars).is_err());
        assert!(expand("${1X}", &vars).is_err());
    }

    #[test]
    fn globs() {
        assert!(glob("read_*", "read_file"));
        assert!(glob("*", "x"));
        assert!(glob("a*c*e", "abcde"));
        assert!(!glob("a*c*e", "abde"));
        assert!(!glob("read_*", "write_file"));
        assert!(glob("exact", "exact"));
        assert!(!glob("ab*ba", "aba"));
    }

    #[test]
    fn a_name_must_show_on_one_line() {
        assert!(check_name("brave search", "mcp.servers").is_ok());
        for bad in ["a\nb", "a\u{1b}[2Jb", "a\u{202e}b", "", &"n".repeat(MAX_NAME + 1)] {
            let e = check_name(bad, "x.json").unwrap_err();
            assert!(!e.message.contains('\n') && !e.message.contains('\u{1b}'), "{}", e.message);
            assert!(e.message.contains("(x.json): a server name must be"), "{}", e.message);
        }
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("time"), "time");
        assert_eq!(slug("brave search"), "brave_search");
        assert_eq!(slug("a__b"), "a_b");
        assert_eq!(slug("my.server"), "my_server");
        assert!(slug("✓").starts_with('s'));
    }

    fn one(v: Value) -> Result<Vec<Server>> {
        let mcp: McpConfig = serde_json::from_value(serde_json::json!({"servers": {"s": v}})).unwrap();
        resolve_with(&mcp, Duration::from_secs(30), Utf8Path::new("/ws"), &vars)
    }

    #[test]
    fn resolves_servers() {
        let s = &one(
            serde_json::json!({"command": "$HOME/bin/srv", "args": ["--t", "${TOKEN}"], "env": {"K": "${TOKEN}"}}),
        )
        .unwrap()[0];
        match s.transport.as_ref().unwrap() {
            Transport::Stdio { command, args, env, cwd } => {
                assert_eq!(command, "/home/u/bin/srv");
                assert_eq!(args, &["--t", "s3cret"]);
                assert_eq!(env, &[("K".to_string(), "s3cret".to_string())]);
                assert_eq!(cwd, "/ws");
            }
            other => panic!("{other:?}"),
        }
        // What people see is the configured text, not the secret.
        assert_eq!(s.display, "$HOME/bin/srv --t ${TOKEN}");
        assert!(!format!("{:?}", describe(s)).contains("s3cret"));
        assert_eq!(s.redact("token s3cret here"), "token [redacted] here");
        assert_eq!(s.secrets, ["s3cret"], "HOME went into the command, not a secret");
        let h =
            &one(serde_json::json!({"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}))
                .unwrap()[0];
        assert!(h.is_http());
        let err = one(serde_json::json!({"command": "x", "url": "http://a"})).unwrap_err().message;
        assert!(err.contains("`s`") && err.contains("not both"), "{err}");
        let err = one(serde_json::json!({"args": ["x"]})).unwrap_err().message;
        assert!(err.contains("no `command`"), "{err}");
        let err = one(serde_json::json!({"command": "x", "env": {"K": "${NOPE}"}})).unwrap_err().message;
        assert!(err.contains("env.K") && err.contains("NOPE"), "{err}");
        // A `type` outside the closed set is refused where the config is read.
        let sse = serde_json::json!({"servers": {"s": {"type": "sse", "url": "http://a"}}});
        let err = serde_json::from_value::<McpConfig>(sse).unwrap_err().to_string();
        assert!(err.contains("SSE"), "{err}");
        let h = &one(serde_json::json!({"type": "streamableHttp", "url": "http://a"})).unwrap()[0];
        assert!(h.is_http());
        // A disabled server's variables are not expanded.
        let d = &one(serde_json::json!({"command": "${NOPE}", "disabled": true})).unwrap()[0];
        assert!(!d.enabled && d.transport.is_none());
    }

    #[test]
    fn cache_key_follows_command_args_env_names_and_url() {
        let k = |v: Value| one(v).unwrap()[0].cache_key();
        let base = k(serde_json::json!({"command": "x", "args": ["a"], "env": {"A": "1"}}));
        assert_eq!(base, k(serde_json::json!({"command": "x", "args": ["a"], "env": {"A": "2"}})));
        assert_ne!(base, k(serde_json::json!({"command": "x", "args": ["b"], "env": {"A": "1"}})));
        assert_ne!(base, k(serde_json::json!({"command": "y", "args": ["a"], "env": {"A": "1"}})));
        assert_ne!(base, k(serde_json::json!({"command": "x", "args": ["a"], "env": {"B": "1"}})));
        assert_ne!(k(serde_json::json!({"url": "http://a/mcp"})), k(serde_json::json!({"url": "http://b/mcp"})));
    }
}
