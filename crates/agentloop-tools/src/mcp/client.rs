//! One connection to one MCP server through the official Rust SDK (rmcp): start (a child
//! process over stdio, or streamable HTTP), `initialize`, `tools/list`, `tools/call`, stop.
//!
//! Invariants: the protocol version is what the server answers to our `initialize` (we ask for
//! the newest version that has one and accept any the SDK knows); a stdio server's stderr goes
//! to `artifacts/mcp-<server>.log`, never to the terminal; its environment is
//! [`super::config::INHERITED_ENV`] plus its own `env`; it leads its own process
//! group, registered in [`super::proc`] from spawn to stop, and [`Session::close`] leaves no
//! process of that group behind. Every function here runs inside the caller's tokio runtime.

use super::config::{Server, Transport, INHERITED_ENV};
use super::elicit::Handler;
use super::error::McpError;
use agentloop_types::error::ResultExt;
use camino::{Utf8Path, Utf8PathBuf};
use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{ClientInitializeError, RoleClient, RunningService, ServiceError};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::io::Write as _;
use std::time::Duration;

/// A connected, initialized server.
pub struct Session {
    service: RunningService<RoleClient, Handler>,
    /// How elicitations are answered, and the record of those answered.
    handler: Handler,
    /// The process group of a stdio server (its leader's pid).
    pub pgid: Option<u32>,
    pub protocol_version: String,
    pub server_info: Value,
}

/// Why a call did not produce a result.
#[derive(Debug)]
pub enum CallError {
    /// A JSON-RPC error answer: the server's code and message.
    Rpc { code: i32, message: String },
    /// The connection is gone (the server exited or closed it).
    Closed(String),
    /// The server asks for (more) authorization: its `WWW-Authenticate` challenge.
    Auth(String),
    /// Anything else the SDK reports.
    Other(String),
}

/// Where a stdio server's stderr goes. A run keeps it with its paper trail, in the workspace's
/// `artifacts/`, and so does a command on a workspace; a command typed in a folder that is no
/// workspace (`mcp check` in your home folder) keeps it in the user's state folder, so no
/// `artifacts/` appears wherever it was typed.
#[derive(Debug, Clone)]
pub enum Logs {
    /// `artifacts/mcp-<server>.log` of the workspace at this root.
    Workspace(Utf8PathBuf),
    /// `$XDG_STATE_HOME/agentloop/mcp-logs/<server>.log` (else `~/.local/state/...`).
    User,
}

impl Logs {
    /// The workspace's `artifacts/` when `root` is a workspace — it holds a run, its own
    /// configuration or an `artifacts/` folder — else the user's state folder.
    pub fn for_command(root: &Utf8Path) -> Logs {
        let workspace =
            ["state.json", "agentloop.yaml"].iter().any(|f| root.join(f).is_file()) || root.join("artifacts").is_dir();
        if workspace {
            Logs::Workspace(root.to_path_buf())
        } else {
            Logs::User
        }
    }

    /// The log of `server` as people are told of it: workspace-relative, or the full path.
    pub fn shown(&self, server: &Server) -> String {
        self.shown_for(&server.slug)
    }

    /// Where the logs are, as people are told of it.
    pub fn shown_folder(&self) -> String {
        self.shown_for("<server>")
    }

    fn shown_for(&self, slug: &str) -> String {
        match self {
            Logs::Workspace(_) => format!("artifacts/mcp-{slug}.log"),
            Logs::User => user_dir().unwrap_or_else(|| "mcp-logs".into()).join(format!("{slug}.log")).to_string(),
        }
    }

    /// Opens the log of `server` to append to, creating its folder. Never through a link: a
    /// workspace's `artifacts/` is entered as every workspace write enters it.
    fn open(&self, server: &Server) -> agentloop_types::error::Result<std::fs::File> {
        match self {
            Logs::Workspace(root) => agentloop_io::fs::Folder::create(root, Utf8Path::new("artifacts"))?
                .open_append(&format!("mcp-{}.log", server.slug)),
            Logs::User => {
                let dir = user_dir().ok_or_else(|| {
                    agentloop_types::error::Error::usage("no state folder for MCP logs (set XDG_STATE_HOME or HOME)")
                })?;
                crate::held_secrets::private_dir(&dir)?;
                agentloop_io::fs::Folder::create(&dir, Utf8Path::new(""))?.open_append(&format!("{}.log", server.slug))
            }
        }
    }
}

/// The user's folder of MCP logs (`$XDG_STATE_HOME/agentloop/mcp-logs`); None without a home.
fn user_dir() -> Option<Utf8PathBuf> {
    Some(crate::held_secrets::state_dir()?.join("mcp-logs"))
}

/// What the client announces (see [`Handler`]): one handler per connection, so the record of
/// elicitations belongs to that connection's calls.
fn client_info() -> Handler {
    Handler::new()
}

/// Starts the server and runs `initialize`. The caller bounds this with the startup timeout;
/// when it gives up, dropping the future kills what was started (see `Spawned`).
pub async fn connect(server: &Server, logs: &Logs) -> Result<Session, McpError> {
    match server.transport.as_ref() {
        None => Err(McpError::connect(format!("MCP server {} is disabled", server.name))),
        Some(Transport::Stdio { command, args, env, cwd }) => {
            connect_stdio(server, logs, command, args, env, cwd).await
        }
        Some(Transport::Http { url, headers }) => connect_http(server, url, headers).await,
    }
}

/// Kills the group if the startup future is dropped before it hands the session over.
struct Spawned(Option<u32>);

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            super::proc::kill_group(pgid, Duration::from_millis(200));
            super::proc::unregister(pgid);
        }
    }
}

async fn connect_stdio(
    server: &Server,
    logs: &Logs,
    command: &str,
    args: &[String],
    env: &[(String, String)],
    cwd: &Utf8PathBuf,
) -> Result<Session, McpError> {
    let log_rel = logs.shown(server);
    let log = open_log(logs, server)
        .map_err(|e| McpError::connect(format!("MCP server {}: cannot open its log: {}", server.name, e.detail())))?;
    if !cwd.is_dir() {
        return Err(McpError::connect(format!("MCP server {}: its cwd {cwd} is not a folder", server.name)));
    }
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).current_dir(cwd).env_clear();
    for k in INHERITED_ENV {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut wrap = CommandWrap::from(cmd);
    wrap.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let (child, _) = TokioChildProcess::builder(wrap).stderr(log).spawn().map_err(|e| {
        McpError::connect_from(format!("MCP server {} could not start `{}`: {e}", server.name, server.display), e)
    })?;
    let pgid = child.id();
    let mut guard = Spawned(pgid);
    if let Some(p) = pgid {
        super::proc::register(p);
    }
    let handler = client_info();
    let service = handler.clone().serve(child).await.map_err(|e| init_error(server, e, Some(&log_rel)))?;
    guard.0 = None;
    Ok(session(service, handler, pgid))
}

async fn connect_http(server: &Server, url: &str, headers: &[(String, String)]) -> Result<Session, McpError> {
    // A server that asks for authorization is signed in to (where a person asked for that) and
    // connected again, at most MAX_SIGN_INS times.
    let mut sign_ins = 0;
    loop {
        match connect_http_once(server, url, headers).await {
            Err(Failure::Challenge(ch)) if super::auth::may_sign_in(server) && sign_ins < super::auth::MAX_SIGN_INS => {
                sign_ins += 1;
                super::auth::sign_in(server, url, Some(&ch)).await?;
            }
            Err(Failure::Challenge(ch)) => {
                return Err(McpError::NeedsSignIn { message: super::auth::still_refused(server, &ch, sign_ins) })
            }
            Err(Failure::Other(e)) => return Err(e),
            Ok(s) => return Ok(s),
        }
    }
}

/// Why connecting failed: the server's authorization challenge, or anything else.
enum Failure {
    Challenge(String),
    Other(McpError),
}

async fn connect_http_once(server: &Server, url: &str, headers: &[(String, String)]) -> Result<Session, Failure> {
    use reqwest::header::{HeaderName, HeaderValue};
    // rustls needs one process-wide crypto provider; ring is the one already in the tree.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("agentloop/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            Failure::Other(McpError::connect_from(
                format!("MCP server {}: cannot build the HTTP client: {e}", server.name),
                e,
            ))
        })?;
    let mut config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url);
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            Failure::Other(McpError::connect(format!(
                "MCP server {}: `{k}` is not a valid HTTP header name",
                server.name
            )))
        })?;
        let value = HeaderValue::from_str(v).map_err(|_| {
            Failure::Other(McpError::connect(format!(
                "MCP server {}: the value of header `{k}` is not a valid HTTP header value",
                server.name
            )))
        })?;
        config.custom_headers.insert(name, value);
    }
    // The token kept for this exact URL (if any) goes with every request to it, refreshed
    // when it expires; without one, requests go out plain and a 401 says what to do.
    let manager = super::auth::manager(server, url).await.map_err(Failure::Other)?;
    let transport =
        StreamableHttpClientTransport::with_client(rmcp::transport::AuthClient::new(client, manager), config);
    let handler = client_info();
    match handler.clone().serve(transport).await {
        Ok(service) => Ok(session(service, handler, None)),
        Err(ClientInitializeError::TransportError { error, .. }) if challenge_of(&*error.error).is_some() => {
            Err(Failure::Challenge(challenge_of(&*error.error).unwrap_or_default()))
        }
        Err(e) => Err(Failure::Other(init_error(server, e, None))),
    }
}

/// The `WWW-Authenticate` challenge of a 401 or 403 answer somewhere in an error's chain.
fn challenge_of(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            if let Some(c) = h.auth_challenge() {
                return Some(c.to_string());
            }
        }
        cur = err.source();
    }
    None
}

fn session(service: RunningService<RoleClient, Handler>, handler: Handler, pgid: Option<u32>) -> Session {
    let (protocol_version, server_info) = match service.peer_info() {
        Some(info) => (
            info.protocol_version.to_string(),
            info.server_info.as_ref().map(|i| json!({"name": i.name, "version": i.version})).unwrap_or(Value::Null),
        ),
        None => (String::new(), Value::Null),
    };
    Session { service, handler, pgid, protocol_version, server_info }
}

/// The SDK's refusal to initialize, in words naming the server; the SDK's error kept.
fn init_error(server: &Server, e: ClientInitializeError, log: Option<&str>) -> McpError {
    let what = match &e {
        ClientInitializeError::ConnectionClosed(_) => "exited before answering initialize".to_string(),
        ClientInitializeError::TransportError { error, context } => {
            format!("could not be reached ({context}): {}", causes(&*error.error))
        }
        ClientInitializeError::JsonRpcError(d) => {
            format!("refused initialize: {} (JSON-RPC error {})", d.message, d.code.0)
        }
        other => format!("failed to initialize: {other}"),
    };
    let message = match log {
        Some(l) => format!("MCP server {} ({}) {what}; its log: {l}", server.name, server.display),
        None => format!("MCP server {} ({}) {what}", server.name, server.display),
    };
    McpError::connect_from(message, e)
}

/// What went wrong under the SDK's wrappers: the innermost error of the chain, and for an HTTP
/// client error the innermost cause of that ("... : Connection refused (os error 111)").
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    if let Some(StreamableHttpError::<reqwest::Error>::Client(r)) = last.downcast_ref() {
        let mut inner: &(dyn std::error::Error + 'static) = r;
        while let Some(next) = inner.source() {
            inner = next;
        }
        return format!("{r}: {inner}");
    }
    last.to_string()
}

fn open_log(logs: &Logs, server: &Server) -> agentloop_types::error::Result<std::fs::File> {
    let mut f = logs.open(server)?;
    // The command as configured: expanded values (which may hold secrets) stay out of logs.
    writeln!(
        f,
        "---- {} agentloop starts MCP server {}: {}",
        agentloop_types::clock::now_rfc3339(),
        server.name,
        server.display
    )
    .context("cannot write the log")?;
    Ok(f)
}

impl Session {
    /// Every tool, following pagination, as the JSON the server sent.
    pub async fn list_tools(&self) -> Result<Vec<Value>, CallError> {
        let tools = self.service.list_all_tools().await.map_err(call_error)?;
        Ok(tools.iter().map(|t| serde_json::to_value(t).unwrap_or(Value::Null)).collect())
    }

    /// One `tools/call`; the result as the JSON the server sent. Dropping the future cancels
    /// the request (the SDK sends `notifications/cancelled`), nothing else.
    ///
    /// The SDK bounds what it reads: one message (a stdio line, an HTTP body, an SSE event) of
    /// at most 16 MiB; a longer one is dropped unread, so the call then ends by its timeout.
    /// What is kept of a result is capped again in [`super::content`].
    pub async fn call(&self, tool: &str, args: &Value) -> Result<Value, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Value::Object(m) = args {
            params = params.with_arguments(m.clone());
        }
        let r = self.service.call_tool(params).await.map_err(call_error)?;
        Ok(serde_json::to_value(&r).unwrap_or(Value::Null))
    }

    /// The elicitations the server sent since the last time this was asked, with the answers.
    pub fn take_elicitations(&self) -> Vec<Value> {
        self.handler.take()
    }

    pub fn is_closed(&self) -> bool {
        self.service.is_closed()
    }

    /// Stops the server: close its stdin (the MCP stdio way), wait, then TERM and KILL; then
    /// the same to anything left in its process group.
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(8), self.service.close()).await;
        if let Some(p) = self.pgid.take() {
            super::proc::kill_group(p, Duration::from_millis(500));
            super::proc::unregister(p);
        }
    }
}

impl Drop for Session {
    /// A session dropped without [`Session::close`] (a startup timeout dropped its future):
    /// its process group goes at once.
    fn drop(&mut self) {
        if let Some(p) = self.pgid.take() {
            super::proc::kill_group(p, Duration::from_millis(200));
            super::proc::unregister(p);
        }
    }
}

fn call_error(e: ServiceError) -> CallError {
    // The SDK's send error does not chain its transport's error: look inside it.
    let challenge = match &e {
        ServiceError::TransportSend(d) => challenge_of(&*d.error),
        other => challenge_of(other),
    };
    if let Some(ch) = challenge {
        return CallError::Auth(ch);
    }
    match e {
        ServiceError::McpError(d) => CallError::Rpc { code: d.code.0, message: d.message.to_string() },
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => CallError::Closed(e.to_string()),
        ServiceError::Cancelled { .. } => CallError::Closed(e.to_string()),
        other => CallError::Other(other.to_string()),
    }
}
