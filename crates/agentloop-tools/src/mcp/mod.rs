//! MCP servers as registry tools.
//!
//! Each tool of each enabled server becomes a registry tool `<server>__<tool>` (made safe for
//! every provider, see [`schema`]) with the server's input schema, so it is in `tools list`,
//! `skills gen`, the Plan catalog and the Plan answer's tool union like any built-in.
//!
//! Invariants:
//! - Building the tool list never starts a server whose tools are cached ([`cache`]); a server
//!   is started to list its tools only on a cache miss or when asked (`mcp list --refresh`,
//!   `mcp check`), and stopped again at once.
//! - A call starts only the server it needs, keeps it for further calls of the same command,
//!   and every server is stopped when the [`Hub`] is dropped (at the end of the command); no
//!   server process outlives agentloop (see [`proc`]).
//! - Nothing here panics or returns a Rust error for a server's misbehaviour: a server that
//!   fails to start or list is a warning (its tools are left out), a tool with a schema that
//!   cannot be sent is a warning (that tool is left out), and every call outcome is a
//!   [`ToolResult`]. Only configuration mistakes are errors.
//! - All async work runs on one current-thread tokio runtime owned by the hub, created on first
//!   use; commands that configure no servers never create it.

pub mod auth;
pub mod cache;
pub mod client;
pub mod config;
pub mod content;
pub mod elicit;
pub mod error;
mod grants;
pub mod jwt;
pub mod proc;
pub mod schema;
pub mod tokens;

pub use config::McpConfig;
pub use error::McpError;

use crate::tool_env::ToolEnv;
use agentloop_types::error::{Error, Result};
use agentloop_types::tool_spec::{ToolResult, ToolSpec};
use camino::{Utf8Path, Utf8PathBuf};
use client::{CallError, Session};
use config::Server;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Where tool lists come from when the hub is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The cache; a server is started only on a miss.
    CacheFirst,
    /// Start every enabled server and list again (and refresh the cache).
    Servers,
    /// The cache only: a server whose list is not cached is left out, never started.
    CacheOnly,
}

/// How a server's tool list was obtained.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Disabled,
    Cached,
    /// Started and listed now.
    Listed,
    Failed(String),
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Disabled => "disabled",
            Status::Cached => "cached",
            Status::Listed => "listed",
            Status::Failed(_) => "failed",
        }
    }
}

/// One server, its listing and what became of each of its tools.
#[derive(Debug, Clone)]
pub struct ServerState {
    pub server: Server,
    pub status: Status,
    pub listing: Option<cache::Listing>,
    /// Offered tools: (registry name, the server's tool name).
    pub tools: Vec<(String, String)>,
    /// Tools left out because their schema cannot be sent: (tool, why).
    pub dropped: Vec<(String, String)>,
    /// Tools left out by the server's allowed_tools/denied_tools.
    pub filtered: Vec<String>,
}

pub struct Hub {
    /// Where stdio servers' stderr goes.
    logs: client::Logs,
    pub states: Vec<ServerState>,
    /// Registry name → (index into `states`, the server's tool name).
    names: BTreeMap<String, (usize, String)>,
    specs: Vec<ToolSpec>,
    /// Problems that left tools out, for people (stderr).
    pub warnings: Vec<String>,
    rt: OnceLock<std::result::Result<tokio::runtime::Runtime, Arc<std::io::Error>>>,
    live: Mutex<BTreeMap<usize, Session>>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            logs: client::Logs::Workspace(Utf8PathBuf::from(".")),
            states: vec![],
            names: BTreeMap::new(),
            specs: vec![],
            warnings: vec![],
            rt: OnceLock::new(),
            live: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Hub {
    /// The servers of `cfg` and their tools. Fails only on configuration mistakes.
    /// A run's: stdio servers log into the workspace's `artifacts/`.
    pub fn load(cfg: &agentloop_config::config::Config, root: &Utf8Path, source: Source) -> Result<Hub> {
        Self::load_logging(cfg, root, source, client::Logs::Workspace(root.to_path_buf()))
    }

    /// [`Hub::load`] with the servers' logs kept where `logs` says.
    pub fn load_logging(
        cfg: &agentloop_config::config::Config,
        root: &Utf8Path,
        source: Source,
        logs: client::Logs,
    ) -> Result<Hub> {
        Self::load_with(cfg, root, source, logs, false)
    }

    /// [`Hub::load_logging`], where `sign_in` says whether a person at this command may be
    /// asked to sign in to a server that asks for authorization (`--login`).
    pub fn load_with(
        cfg: &agentloop_config::config::Config,
        root: &Utf8Path,
        source: Source,
        logs: client::Logs,
        sign_in: bool,
    ) -> Result<Hub> {
        let mut servers = config::resolve(cfg, root)?;
        for s in &mut servers {
            s.sign_in = sign_in;
        }
        let mut hub = Hub::default();
        hub.logs = logs;
        if servers.is_empty() {
            return Ok(hub);
        }
        // A token kept for a server this configuration names is a secret of the run from the
        // start, whether or not the server is called (reading it registers it).
        for s in servers.iter().filter(|s| s.enabled) {
            if let Some(config::Transport::Http { url, .. }) = &s.transport {
                let _ = tokens::FileStore::new(url).read();
            }
        }
        hub.states = servers
            .into_iter()
            .map(|server| ServerState {
                status: if server.enabled { Status::Failed("not listed".into()) } else { Status::Disabled },
                server,
                listing: None,
                tools: vec![],
                dropped: vec![],
                filtered: vec![],
            })
            .collect();
        if source != Source::Servers {
            for st in hub.states.iter_mut().filter(|s| s.server.enabled) {
                if let Some(l) = cache::read(&st.server) {
                    st.listing = Some(l);
                    st.status = Status::Cached;
                }
            }
        }
        let todo: Vec<usize> = (0..hub.states.len())
            .filter(|&i| hub.states[i].server.enabled && hub.states[i].listing.is_none())
            .collect();
        if !todo.is_empty() && source == Source::CacheOnly {
            for &i in &todo {
                let name = hub.states[i].server.name.clone();
                hub.states[i].status = Status::Failed("not started: its tool list is not cached".into());
                hub.warnings.push(format!(
                    "MCP server {name}: its tools are not cached and this command starts no program; `agentloop mcp list` starts it and caches them"
                ));
            }
        } else if !todo.is_empty() {
            hub.list_servers(&todo);
        }
        hub.build_specs(cfg);
        Ok(hub)
    }

    /// Starts the given servers at once, lists their tools, stops them, caches the lists.
    fn list_servers(&mut self, todo: &[usize]) {
        let results: Vec<std::result::Result<cache::Listing, McpError>> = match self.runtime() {
            Err(e) => todo.iter().map(|_| Err(McpError::Runtime(e.clone()))).collect(),
            Ok(rt) => {
                let logs = &self.logs;
                let states = &self.states;
                let r = rt.block_on(futures::future::join_all(todo.iter().map(|&i| list_one(&states[i].server, logs))));
                proc::park_if_interrupted();
                r
            }
        };
        for (&i, r) in todo.iter().zip(results) {
            let st = &mut self.states[i];
            match r.map_err(|e| st.server.redact(&e.to_string())) {
                Ok(l) => {
                    if let Err(e) = cache::write(&st.server, &l) {
                        self.warnings.push(format!(
                            "cannot cache the tools of MCP server {}: {}",
                            st.server.name,
                            e.detail()
                        ));
                    }
                    st.listing = Some(l);
                    st.status = Status::Listed;
                }
                Err(e) => {
                    self.warnings.push(format!(
                        "{e}; its tools are left out (`agentloop mcp check` shows more; `mcp.servers.{}.enabled: false` turns it off)",
                        st.server.name
                    ));
                    st.status = Status::Failed(e);
                }
            }
        }
    }

    fn build_specs(&mut self, cfg: &agentloop_config::config::Config) {
        for (i, st) in self.states.iter_mut().enumerate() {
            let Some(listing) = &st.listing else { continue };
            for t in &listing.tools {
                let Some(tool) = t.get("name").and_then(Value::as_str) else {
                    self.warnings.push(format!("MCP server {} listed a tool without a name; left out", st.server.name));
                    continue;
                };
                if !st.server.offers(tool) {
                    st.filtered.push(tool.to_string());
                    continue;
                }
                let parameters = match schema::normalise(t.get("inputSchema").unwrap_or(&Value::Null)) {
                    Ok(p) => p,
                    Err(why) => {
                        self.warnings.push(format!("MCP server {}: tool {tool} is left out: {why}", st.server.name));
                        st.dropped.push((tool.to_string(), why.to_string()));
                        continue;
                    }
                };
                let mut name = schema::registry_name(&st.server.slug, tool);
                if self.names.contains_key(&name) {
                    // Two names that sanitise alike: the later one gets a hash of its own.
                    name = schema::registry_name(&st.server.slug, &format!("{tool}\u{0}"));
                }
                self.names.insert(name.clone(), (i, tool.to_string()));
                st.tools.push((name.clone(), tool.to_string()));
                self.specs.push(ToolSpec {
                    name,
                    description: schema::description(&st.server.name, t),
                    parameters,
                    side_effect: schema::side_effect(t.get("annotations"), st.server.is_http()),
                    timeout: st.server.timeout,
                    output_cap: cfg.tools.output_cap,
                });
            }
        }
    }

    /// The registry tools of every listed server.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// Whether `name` is one of this hub's tools.
    pub fn handles(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    /// The registry name of a server's tool, if it is offered.
    pub fn registry_name(&self, server: &str, tool: &str) -> Option<&str> {
        let st = self.states.iter().find(|s| s.server.name == server)?;
        st.tools.iter().find(|(_, t)| t == tool).map(|(n, _)| n.as_str())
    }

    /// The hub's runtime, created on first use. A failure to create it is kept (and shared by
    /// every server's listing), so it is tried once.
    fn runtime(&self) -> std::result::Result<&tokio::runtime::Runtime, Arc<std::io::Error>> {
        self.rt
            .get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(Arc::new))
            .as_ref()
            .map_err(Arc::clone)
    }

    /// Runs one call of a hub tool. Starts its server when it is not running (or died); a
    /// timeout cancels only the call; a dead server is reported by name with its log.
    pub fn call(&self, env: &ToolEnv, name: &str, args: &Value) -> ToolResult {
        let Some((idx, tool)) = self.names.get(name) else {
            return ToolResult::err(format!("`{name}` is not a tool of any MCP server"), false);
        };
        let server = &self.states[*idx].server;
        let rt = match self.runtime() {
            Ok(rt) => rt,
            Err(e) => return ToolResult::err(McpError::Runtime(e).to_string(), true),
        };
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let result = rt.block_on(self.call_live(env, *idx, tool, args, &mut live));
        proc::park_if_interrupted();
        redacted(server, result)
    }

    /// Calls `tool` of server `idx` in its running session, started first when there is none.
    /// A 401/403 mid-session signs in again where a person asked for that, and calls once more.
    async fn call_live(
        &self,
        env: &ToolEnv<'_>,
        idx: usize,
        tool: &str,
        args: &Value,
        live: &mut BTreeMap<usize, Session>,
    ) -> ToolResult {
        let server = &self.states[idx].server;
        let where_ = log_note(server, &self.logs);
        let mut sign_ins = 0;
        loop {
            if let Err(failed) = self.start(idx, live, &where_).await {
                return failed;
            }
            let Some(session) = live.get(&idx) else {
                return ToolResult::err(format!("MCP server {} did not start{where_}", server.name), true);
            };
            let Ok(outcome) = tokio::time::timeout(server.timeout, session.call(tool, args)).await else {
                return timed_out(server, tool).await;
            };
            return match outcome {
                Ok(v) => answer(env, server, tool, session, &v),
                Err(CallError::Auth(ch)) => {
                    if let Err(refused) = sign_in_again(server, &ch, &mut sign_ins, live, idx).await {
                        return refused;
                    }
                    continue;
                }
                Err(CallError::Rpc { code, message }) => ToolResult::err(
                    format!("MCP server {}: tool {tool} failed: {message} (JSON-RPC error {code})", server.name),
                    false,
                ),
                Err(CallError::Closed(_)) => {
                    if let Some(s) = live.remove(&idx) {
                        s.close().await;
                    }
                    ToolResult::err(
                        format!(
                            "MCP server {} exited (or closed the connection) during the call to {tool}{where_}",
                            server.name
                        ),
                        true,
                    )
                }
                Err(CallError::Other(e)) => {
                    ToolResult::err(format!("MCP server {}: tool {tool} failed: {e}", server.name), true)
                }
            };
        }
    }

    /// Makes sure server `idx` is running: a session that closed is dropped, and a server with
    /// none is started within its startup_timeout.
    async fn start(
        &self,
        idx: usize,
        live: &mut BTreeMap<usize, Session>,
        where_: &str,
    ) -> std::result::Result<(), ToolResult> {
        let server = &self.states[idx].server;
        if live.get(&idx).is_some_and(Session::is_closed) {
            if let Some(s) = live.remove(&idx) {
                s.close().await;
            }
        }
        if live.contains_key(&idx) {
            return Ok(());
        }
        let watch = agentloop_types::clock::Stopwatch::start();
        let s = match auth::bounded(server.startup_timeout, client::connect(server, &self.logs)).await.ok_or(()) {
            Err(()) => {
                return Err(ToolResult::err(
                    format!(
                        "MCP server {} did not start within {} (startup_timeout){where_}",
                        server.name,
                        secs(server.startup_timeout)
                    ),
                    true,
                ))
            }
            Ok(Err(e)) => return Err(ToolResult::err(e.to_string(), true)),
            Ok(Ok(s)) => s,
        };
        // A started server refreshes its cached list, so a stale cache heals at the next start
        // (one tools/list; never fatal).
        if let Ok(tools) = s.list_tools().await {
            if self.states[idx].listing.as_ref().is_none_or(|l| l.tools != tools) {
                let l =
                    cache::Listing::new(server, s.protocol_version.clone(), s.server_info.clone(), watch.ms(), tools);
                let _ = cache::write(server, &l);
            }
        }
        live.insert(idx, s);
        Ok(())
    }

    /// Stops every running server (also done on drop).
    pub fn shutdown(&self) {
        let sessions: Vec<Session> =
            std::mem::take(&mut *self.live.lock().unwrap_or_else(|e| e.into_inner())).into_values().collect();
        if sessions.is_empty() {
            return;
        }
        if let Ok(rt) = self.runtime() {
            rt.block_on(futures::future::join_all(sessions.into_iter().map(Session::close)));
            proc::park_if_interrupted();
        }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// After a 401/403 mid-session (challenge `ch`): signs in again (step-up) where a person asked
/// for that and fewer than [`auth::MAX_SIGN_INS`] sign-ins were tried, closing server `idx`'s
/// session so the next call reconnects; else the result saying how to sign in.
async fn sign_in_again(
    server: &Server,
    ch: &str,
    sign_ins: &mut u32,
    live: &mut BTreeMap<usize, Session>,
    idx: usize,
) -> std::result::Result<(), ToolResult> {
    let url = match &server.transport {
        Some(config::Transport::Http { url, .. }) => url.clone(),
        _ => String::new(),
    };
    if !auth::may_sign_in(server) || *sign_ins >= auth::MAX_SIGN_INS {
        return Err(ToolResult::err(auth::still_refused(server, ch, *sign_ins), true));
    }
    *sign_ins += 1;
    if let Some(s) = live.remove(&idx) {
        s.close().await;
    }
    auth::sign_in(server, &url, Some(ch)).await.map_err(|e| ToolResult::err(e.to_string(), true))
}

/// A call that ran out of the server's timeout. Dropping the call queued
/// `notifications/cancelled`: it is let go out before the result is returned.
async fn timed_out(server: &Server, tool: &str) -> ToolResult {
    tokio::time::sleep(Duration::from_millis(20)).await;
    ToolResult::err(
        format!(
            "MCP server {}: tool {tool} timed out after {} (the call was cancelled; the server keeps running)",
            server.name,
            secs(server.timeout)
        ),
        true,
    )
}

/// The tool's answer `v` as a result, with the session's protocol version and the
/// elicitations the call made.
fn answer(env: &ToolEnv, server: &Server, tool: &str, session: &Session, v: &Value) -> ToolResult {
    let mut r = content::to_result(env, &server.name, tool, v);
    r.metadata["mcp"]["protocol_version"] = json!(session.protocol_version);
    with_elicitations(&mut r, session.take_elicitations());
    r
}

/// `result` with the server's secrets redacted from its output, error and metadata.
fn redacted(server: &Server, mut result: ToolResult) -> ToolResult {
    result.output = server.redact(&result.output);
    result.error = result.error.map(|e| server.redact(&e));
    if !server.secrets.is_empty() {
        if let Ok(m) = serde_json::from_str(&server.redact(&result.metadata.to_string())) {
            result.metadata = m;
        }
    }
    result
}

/// What the server asked during the call (elicitations) and what agentloop answered: in the
/// metadata (so the trace keeps it) and as a note after the output (so the model reads it).
fn with_elicitations(r: &mut ToolResult, records: Vec<Value>) {
    if records.is_empty() {
        return;
    }
    let note = elicit::note(&records);
    match &mut r.error {
        Some(e) => *e = format!("{e}\n{note}"),
        None if r.output.is_empty() => r.output = note,
        None => r.output = format!("{}\n{note}", r.output),
    }
    r.metadata["mcp"]["elicitations"] = Value::Array(records);
}

/// "; its log: artifacts/mcp-x.log" for stdio servers, the URL for HTTP ones.
fn log_note(server: &Server, logs: &client::Logs) -> String {
    if server.is_http() {
        format!(" ({})", server.display)
    } else {
        format!("; its log: {}", logs.shown(server))
    }
}

fn secs(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
}

/// Starts one server, lists its tools within its startup timeout, stops it.
async fn list_one(server: &Server, logs: &client::Logs) -> std::result::Result<cache::Listing, McpError> {
    let watch = agentloop_types::clock::Stopwatch::start();
    let work = async {
        let mut sign_ins = 0;
        loop {
            let s = client::connect(server, logs).await?;
            match s.list_tools().await {
                Ok(tools) => return Ok((s, tools)),
                Err(CallError::Auth(ch)) => {
                    s.close().await;
                    if !auth::may_sign_in(server) || sign_ins >= auth::MAX_SIGN_INS {
                        return Err(McpError::NeedsSignIn { message: auth::still_refused(server, &ch, sign_ins) });
                    }
                    sign_ins += 1;
                    let url = match &server.transport {
                        Some(config::Transport::Http { url, .. }) => url.clone(),
                        _ => String::new(),
                    };
                    auth::sign_in(server, &url, Some(&ch)).await?;
                }
                Err(e) => {
                    s.close().await;
                    return Err(McpError::Protocol {
                        message: format!("MCP server {} could not list its tools: {e:?}", server.name),
                    });
                }
            }
        }
    };
    match auth::bounded(server.startup_timeout, work).await.ok_or(()) {
        Err(()) => Err(McpError::Timeout {
            message: format!(
                "MCP server {} did not start and list its tools within {} (startup_timeout){}",
                server.name,
                secs(server.startup_timeout),
                log_note(server, logs)
            ),
        }),
        Ok(Err(e)) => Err(e),
        Ok(Ok((s, tools))) => {
            let l = cache::Listing::new(server, s.protocol_version.clone(), s.server_info.clone(), watch.ms(), tools);
            s.close().await;
            Ok(l)
        }
    }
}

/// The error for a server name that is not configured.
pub fn unknown_server(hub: &Hub, name: &str) -> Error {
    let names: Vec<&str> = hub.states.iter().map(|s| s.server.name.as_str()).collect();
    Error::usage(format!(
        "no MCP server named `{name}`; configured: {}",
        if names.is_empty() { "(none)".to_string() } else { names.join(", ") }
    ))
    .with_hint("servers are configured under mcp.servers (or in the file mcp.config_file names)")
}
