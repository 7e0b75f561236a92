//! Ductile plugins as tools: each allowed `plugin.command` of a Ductile gateway
//! becomes the registry tool `<plugin>__<command>`, run as a job through the gateway's API.
//!
//! - **Discovery**: `GET /plugins` lists the plugins; `GET /plugin/{name}` (bearer token) gives
//!   each one's commands with their input schemas. The catalog is cached per `api_url` for
//!   `ductile.cache_ttl`, so Plan does not ask the API every step; the cache is also keyed on
//!   what chose the plugins listed (`ductile.plugins`, `self_name`, `max_depth`), so changing
//!   one of those lists again at once. The same catalog comes from
//!   plugin `manifest.yaml` files (`manifest_spec: ductile.plugin`) under `ductile.manifests`
//!   or `skills gen --ductile-manifests DIR`, without a running gateway.
//! - **Act**: `POST /plugin/{plugin}/{command}` with `{"payload": args}` answers 202 with a job
//!   id, which is written to the workspace (`.agentloop.ductile-job.json`) before any wait; then
//!   `GET /job/{id}` is polled until `succeeded`, `failed`, `timed_out` or `dead`. A process
//!   killed while waiting polls the same job when the step runs again: the plugin is never
//!   triggered twice for one step.
//! - **Recursion guard**: agentloop's own plugin
//!   (`ductile.self_name`) is no tool unless `ductile.max_depth` allows it; a call through the
//!   API carries `agentloop_depth` in its payload, and `handle` refuses a start deeper than
//!   `max_depth`.

pub mod manifest;

use crate::tool_env::ToolEnv;
use agentloop_config::config::{Config, DuctileConfig};
use agentloop_types::error::{Error, Result};
use agentloop_types::tool_spec::{SideEffect, ToolResult, ToolSpec};
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Tool names are `<plugin>__<command>`.
pub const SEP: &str = "__";
/// The payload key that carries how deep agentloop has called itself.
pub const DEPTH_KEY: &str = "agentloop_depth";
/// Where a step's job id is kept while it runs (inside the workspace).
const JOB_FILE: &str = ".agentloop.ductile-job.json";
/// Commands that are Ductile's own, never an agent's tool: `poll` is its scheduler's tick (what
/// a `schedules:` entry runs unless it names another command; Ductile's own `file_handler` answers
/// it with a no-op), `health` and `init` the operator's checks. A manifest marks no command as
/// one (its `type` is only read or write), so Ductile's reserved names decide.
pub const NOT_TOOLS: &[&str] = &["poll", "health", "init"];

/// One plugin and its commands, as the API or a manifest describes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plugin {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub commands: Vec<Command>,
    /// The plugin's configuration keys, as its manifest declares them (the catalog shows them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_keys: Vec<ConfigKey>,
}

/// One configuration key a plugin declares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigKey {
    pub name: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// An example call a manifest declares: what goes in and what comes out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command {
    pub name: String,
    /// `read` or `write` (the scope a token needs: plugin:ro or plugin:rw).
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the payload.
    pub input_schema: Value,
    /// Example input/output, when the manifest declares them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Example>,
}

/// The plugins' tools for one command, and how to call them.
pub struct Hub {
    plugins: Vec<Plugin>,
    specs: Vec<ToolSpec>,
    cfg: DuctileConfig,
    pub warnings: Vec<String>,
}

impl Hub {
    /// No plugins: Ductile is not configured.
    pub fn empty() -> Self {
        Hub { plugins: vec![], specs: vec![], cfg: DuctileConfig::default(), warnings: vec![] }
    }

    /// The configured sources (the API, from its cache when fresh; manifest files), filtered
    /// by `ductile.plugins` and the recursion guard. A gateway that cannot be reached is a
    /// warning (its tools are left out), not an error.
    /// The plugins of `cfg`. With `reach` false (read-only commands) no program runs and nothing
    /// is written: a gateway whose token comes from `api_token_cmd` is read from the discovery
    /// cache only, and a discovery is not cached.
    pub fn load(cfg: &Config, root: &Utf8Path, reach: bool) -> Result<Self> {
        let cache = reach;
        let reach = reach || cfg.ductile.api_token_cmd.is_none();
        let d = &cfg.ductile;
        let mut hub = Hub { cfg: d.clone(), ..Hub::empty() };
        let mut plugins = Vec::new();
        if let Some(dir) = &d.manifests {
            plugins.extend(manifest::load_dir(&agentloop_io::fs::resolve_in(root, dir))?);
        }
        if let Some(url) = d.api_url.as_ref().filter(|_| !reach) {
            match cache_read(d, url.trim_end_matches('/'), std::time::Duration::MAX) {
                Some(found) => plugins.extend(found),
                None => hub.warnings.push(format!(
                    "Ductile at {url}: its plugins are not cached and this command does not run api_token_cmd; a run lists them and caches the list"
                )),
            }
        }
        if let Some(url) = d.api_url.as_ref().filter(|_| reach) {
            match discover(d, url, cache) {
                Ok(found) => plugins.extend(found),
                Err(e) => hub.warnings.push(format!("Ductile at {url}: {}; its plugins are left out", e.detail())),
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        plugins.retain(|p| seen.insert(p.name.clone()));
        plugins.retain(|p| d.plugins.allows(&p.name) && (p.name != d.self_name || d.max_depth > 0));
        hub.specs = specs(&plugins, cfg);
        hub.plugins = plugins;
        Ok(hub)
    }

    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    pub fn plugins(&self) -> &[Plugin] {
        &self.plugins
    }

    pub fn handles(&self, tool: &str) -> bool {
        self.specs.iter().any(|s| s.name == tool)
    }

    /// Runs one plugin command as a job and waits for its result.
    pub fn call(&self, env: &ToolEnv, tool: &str, args: &Value) -> ToolResult {
        let Some((plugin, command)) = tool.split_once(SEP) else {
            return ToolResult::err(format!("`{tool}` is not a Ductile tool"), false);
        };
        let Some(url) = &self.cfg.api_url else {
            return ToolResult::err(
                format!("`{tool}` comes from a plugin manifest, but no Ductile gateway is configured to run it; set ductile.api_url"),
                false,
            );
        };
        // Read commands need plugin:ro, the rest plugin:rw (named when the gateway refuses).
        let kind = self
            .plugins
            .iter()
            .find(|p| p.name == plugin)
            .and_then(|p| p.commands.iter().find(|c| c.name == command))
            .map(|c| c.kind.as_str())
            .unwrap_or("write");
        match run_job(&self.cfg, url, env, (plugin, command, kind), args) {
            Ok(r) => r,
            Err(e) => *e,
        }
    }
}

/// The registry tools of these plugins.
pub fn specs(plugins: &[Plugin], cfg: &Config) -> Vec<ToolSpec> {
    let mut out = Vec::new();
    for p in plugins {
        for c in p.commands.iter().filter(|c| !NOT_TOOLS.contains(&c.name.as_str())) {
            let what = if c.description.trim().is_empty() {
                format!("{}: {}", p.name, c.name)
            } else {
                c.description.trim().to_string()
            };
            out.push(ToolSpec {
                name: format!("{}{SEP}{}", p.name, c.name),
                description: format!("{what} (Ductile plugin {}, runs as a job)", p.name),
                parameters: c.input_schema.clone(),
                side_effect: SideEffect::Network,
                timeout: cfg.ductile.timeout.0,
                output_cap: cfg.tools.output_cap,
            });
        }
    }
    out
}

/// The bearer token: `api_token_cmd`, else `api_token_env`, else `api_token`; registered for
/// redaction.
fn token(d: &DuctileConfig) -> Result<Option<String>> {
    let token = if let Some(cmd) = &d.api_token_cmd {
        agentloop_model::model::secret_from_command(cmd, "ductile.api_token_cmd")?
    } else if let Some(var) = &d.api_token_env {
        Some(std::env::var(var).map_err(|e| {
            Error::config(format!("ductile.api_token_env: the environment variable {var} is not set"))
                .with_told_source(e)
        })?)
    } else {
        d.api_token.clone()
    };
    let token = token.filter(|t| !t.trim().is_empty());
    if let Some(t) = &token {
        agentloop_io::redact::register(t);
    }
    Ok(token)
}

/// An HTTP client for Ductile and the progress webhook: one timeout for the whole call, and a
/// reply of any status returned (not turned into an error).
pub fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder().timeout_global(Some(timeout)).http_status_as_error(false).build().into()
}

const MAX_BODY: u64 = 16 * 1024 * 1024;

/// One API request: the status and the JSON body (or the text, when not JSON).
fn request(d: &DuctileConfig, method: &str, url: &str, body: Option<&Value>) -> Result<(u16, Value)> {
    let agent = agent(Duration::from_secs(30));
    let auth = token(d)?.map(|t| format!("Bearer {t}"));
    let resp = match (method, body) {
        ("POST", Some(b)) => {
            let mut r = agent.post(url).header("content-type", "application/json");
            if let Some(a) = &auth {
                r = r.header("authorization", a.as_str());
            }
            r.send(b.to_string().as_bytes())
        }
        _ => {
            let mut r = agent.get(url);
            if let Some(a) = &auth {
                r = r.header("authorization", a.as_str());
            }
            r.call()
        }
    };
    let mut resp = resp.map_err(|e| Error::tool(format!("cannot reach {url}: {e}")).with_source(e))?;
    let status = resp.status().as_u16();
    let text = resp
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(|e| Error::tool(format!("{method} {url}: cannot read the answer: {e}")).with_source(e))?;
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok((status, value))
}

/// The error text of an API answer (`{"error": "..."}`, `{"error": {"message"}}`, `{"message"}`).
fn api_error(v: &Value) -> String {
    let e = v.get("error").unwrap_or(v);
    e.get("message")
        .and_then(Value::as_str)
        .or_else(|| e.as_str())
        .or_else(|| v.get("message").and_then(Value::as_str))
        .map(String::from)
        .unwrap_or_else(|| v.to_string().chars().take(200).collect())
}

/// What an HTTP status from the gateway means for a plugin call, and whether to try again.
fn status_error(plugin: &str, command: &str, kind: &str, status: u16, body: &Value) -> (String, bool) {
    let scope = if kind == "read" { "plugin:ro" } else { "plugin:rw" };
    let msg = api_error(body);
    let what = match status {
        401 => format!(
            "the gateway refused the token (401): set ductile.api_token, api_token_env or api_token_cmd ({msg})"
        ),
        403 => format!("the token lacks the scope to run `{plugin}` `{command}` (403): it needs {scope} ({msg})"),
        404 => format!("plugin `{plugin}` has no command `{command}` at the gateway (404): {msg}"),
        409 => format!("the gateway refused `{plugin}` `{command}` as a conflict (409): {msg}"),
        413 => format!("the payload for `{plugin}` `{command}` is too large for the gateway (413): {msg}"),
        503 => format!("the gateway is unavailable (503): {msg}"),
        s => format!("`{plugin}` `{command}`: HTTP {s}: {msg}"),
    };
    (what, matches!(status, 409 | 429 | 502 | 503 | 504))
}

/// The catalog of a gateway, from the cache when it is fresh.
fn discover(d: &DuctileConfig, url: &str, cache: bool) -> Result<Vec<Plugin>> {
    let base = url.trim_end_matches('/');
    if let Some(p) = cache_read(d, base, d.cache_ttl.0) {
        return Ok(p);
    }
    let (status, list) = request(d, "GET", &format!("{base}/plugins"), None)?;
    if status != 200 {
        return Err(Error::tool(format!("GET {base}/plugins: HTTP {status}: {}", api_error(&list))));
    }
    let names: Vec<String> = list
        .get("plugins")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::tool(format!("GET {base}/plugins: the answer has no `plugins` list")))?
        .iter()
        .filter_map(|p| p.get("name").and_then(Value::as_str).map(String::from))
        .collect();
    let mut plugins = Vec::new();
    for name in names.iter().filter(|n| d.plugins.allows(n) && (**n != d.self_name || d.max_depth > 0)) {
        let (status, v) = request(d, "GET", &format!("{base}/plugin/{}", segment("plugin name", name)?), None)?;
        if status != 200 {
            let (why, _) = status_error(name, "(details)", "read", status, &v);
            return Err(Error::tool(format!("GET {base}/plugin/{name}: {why}")));
        }
        plugins.push(manifest::plugin_from(&v, &format!("GET {base}/plugin/{name}"))?);
    }
    if cache {
        cache_write(d, base, &plugins);
    }
    Ok(plugins)
}

#[derive(Serialize, Deserialize)]
struct Cached {
    api_url: String,
    /// What chose the plugins listed ([`selection`]); a list made under other settings is stale.
    #[serde(default)]
    selection: Value,
    fetched_at: String,
    plugins: Vec<Plugin>,
}

/// The settings discovery filters the gateway's plugins by: only the allowed ones are asked
/// for their details, and agentloop's own plugin only when `max_depth` lets a run call it. A
/// cached list holds what these chose, so it serves only the same choice.
fn selection(d: &DuctileConfig) -> Value {
    json!({"plugins": d.plugins, "self_name": d.self_name, "self_callable": d.max_depth > 0})
}

fn cache_path(base: &str) -> Option<Utf8PathBuf> {
    let dir = agentloop_config::config::xdg_dir("XDG_CACHE_HOME", ".cache")?.join("agentloop").join("ductile");
    let key: String = base.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    Some(dir.join(format!("{key}.json")))
}

fn cache_read(d: &DuctileConfig, base: &str, ttl: Duration) -> Option<Vec<Plugin>> {
    let text = agentloop_io::fs::read_optional(&cache_path(base)?).ok().flatten()?;
    let c: Cached = serde_json::from_str(&text).ok()?;
    let age =
        agentloop_types::clock::now().duration_since(agentloop_types::clock::parse_rfc3339(&c.fetched_at)?).ok()?;
    (c.api_url == base && c.selection == selection(d) && age <= ttl).then_some(c.plugins)
}

fn cache_write(d: &DuctileConfig, base: &str, plugins: &[Plugin]) {
    let Some(path) = cache_path(base) else { return };
    let c = Cached {
        api_url: base.into(),
        selection: selection(d),
        fetched_at: agentloop_types::clock::now_rfc3339(),
        plugins: plugins.to_vec(),
    };
    if let Some(dir) = path.parent() {
        let _ = agentloop_io::fs::create_dir_all(dir);
    }
    let _ = agentloop_io::fs::write_atomic(&path, serde_json::to_string_pretty(&c).unwrap_or_default().as_bytes());
}

/// The job a step started, kept until the step has its result.
#[derive(Serialize, Deserialize, PartialEq)]
struct JobRecord {
    /// The step and tool (`step-3-<tool>`), and the arguments: the same call again means the
    /// same job.
    call: String,
    args: Value,
    job_id: String,
}

fn run_job(
    d: &DuctileConfig,
    url: &str,
    env: &ToolEnv,
    (plugin, command, kind): (&str, &str, &str),
    args: &Value,
) -> std::result::Result<ToolResult, Box<ToolResult>> {
    let base = url.trim_end_matches('/');
    let fail = |e: Error| Box::new(ToolResult::err(e.detail(), true));
    let record_path = env.root.join(JOB_FILE);
    let started = agentloop_io::fs::read_optional(&record_path)
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str::<JobRecord>(&t).ok())
        .filter(|r| r.call == env.artifact_stem && &r.args == args);
    let job_id = match started {
        // A step that ran before (the process was killed while waiting): the same job.
        Some(r) => r.job_id,
        None => {
            let mut payload = args.clone();
            if plugin == d.self_name {
                let depth = depth_of(env.root) + 1;
                if depth > d.max_depth {
                    return Err(Box::new(ToolResult::err(
                        format!("recursion guard: `{plugin}` is agentloop itself and this run is at depth {}; ductile.max_depth is {}", depth - 1, d.max_depth),
                        false,
                    )));
                }
                if let Value::Object(m) = &mut payload {
                    m.insert(DEPTH_KEY.into(), json!(depth));
                }
            }
            let path = format!(
                "{base}/plugin/{}/{}",
                segment("plugin", plugin).map_err(fail)?,
                segment("command", command).map_err(fail)?
            );
            let (status, v) = request(d, "POST", &path, Some(&json!({"payload": payload}))).map_err(fail)?;
            if status != 202 && status != 200 {
                let (why, retry) = status_error(plugin, command, kind, status, &v);
                return Err(Box::new(ToolResult::err(why, retry)));
            }
            let id = v.get("job_id").and_then(Value::as_str).ok_or_else(|| {
                Box::new(ToolResult::err(
                    format!("POST {base}/plugin/{plugin}/{command}: the answer has no `job_id`"),
                    true,
                ))
            })?;
            // Checked before it is kept: a step run again would poll the same id.
            segment("job id", id).map_err(|e| Box::new(ToolResult::err(e.detail(), false)))?;
            let rec = JobRecord { call: env.artifact_stem.clone(), args: args.clone(), job_id: id.to_string() };
            agentloop_io::fs::write_atomic(&record_path, serde_json::to_string(&rec).unwrap_or_default().as_bytes())
                .map_err(fail)?;
            id.to_string()
        }
    };
    agentloop_io::crash::point("ductile:polling");
    let job = poll(d, base, &job_id, plugin).map_err(|e| {
        let mut r = ToolResult::err(e.detail(), true);
        r.metadata = json!({"ductile_job": job_id});
        Box::new(r)
    })?;
    Ok(job_result(&job, &job_id, plugin, command))
}

/// How deep this run is (0 unless it was started by agentloop through Ductile).
fn depth_of(root: &Utf8Path) -> u32 {
    agentloop_io::fs::read_optional(&root.join("state.json"))
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("depth").and_then(Value::as_u64))
        .unwrap_or(0) as u32
}

/// `s` (a name or job id from an answer or a workspace file) as one path segment of a gateway
/// URL: every byte but letters, digits and `-._~` percent-encoded, so it cannot add segments,
/// a query or a fragment. The empty name, `.` and `..` (segments a server resolves) are
/// refused, and so is anything over 256 bytes.
fn segment(what: &str, s: &str) -> Result<String> {
    if s.is_empty() || s == "." || s == ".." || s.len() > 256 {
        let shown: String = s.chars().take(80).collect();
        return Err(Error::tool(format!(
            "the Ductile {what} `{}` cannot be part of a gateway address (empty, `.`, `..` or over 256 bytes)",
            agentloop_io::output::one_line(&shown)
        )));
    }
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(out)
}

const FINAL: &[&str] = &["succeeded", "failed", "timed_out", "dead", "completed"];

fn poll(d: &DuctileConfig, base: &str, job_id: &str, plugin: &str) -> Result<Value> {
    let start = Instant::now();
    // The id came from the gateway's answer, or from the job file a killed step left in the
    // workspace: either way data, so it is one encoded segment, never more path or a query.
    let url = format!("{base}/job/{}", segment("job id", job_id)?);
    loop {
        let (status, v) = request(d, "GET", &url, None)?;
        match status {
            200 => {
                let s = v.get("status").and_then(Value::as_str).unwrap_or("");
                if FINAL.contains(&s) {
                    return Ok(v);
                }
            }
            // Passing trouble: keep waiting until the timeout.
            429 | 502 | 503 | 504 => {}
            _ => {
                let (why, _) = status_error(plugin, "(job)", "read", status, &v);
                return Err(Error::tool(format!("GET {url}: {why}")));
            }
        }
        if start.elapsed() + d.poll_interval.0 > d.timeout.0 {
            return Err(Error::tool(format!(
                "job {job_id} of `{plugin}` was not finished after {}s (ductile.timeout); it may still run",
                d.timeout.0.as_secs()
            )));
        }
        std::thread::sleep(d.poll_interval.0);
    }
}

/// The prefix of the keys Ductile adds to routed payloads and request contexts
/// (`ductile_pipeline`, `ductile_upstream_plugin`, `ductile_route_depth`, ...), and beside them
/// the `ductile` object (`pipeline_instance_id`, `route_depth`): its control plane, never a
/// plugin's content.
pub const CONTROL_PREFIX: &str = "ductile_";

/// Whether a payload or context key is Ductile's own.
pub fn is_control_key(k: &str) -> bool {
    k == "ductile" || k.starts_with(CONTROL_PREFIX)
}

/// A plugin's content as a model should see it: an event payload without Ductile's
/// control-plane keys and without the keys Ductile merged in from the request's `context`
/// (the same key with the same value: a pipeline's baggage, such as the run's own `run_id`,
/// `step` and `tool`). Anything but an object is returned as it is.
pub fn plugin_content(payload: &Value, context: Option<&Value>) -> Value {
    let Value::Object(m) = payload else { return payload.clone() };
    let from_context = |k: &str, v: &Value| context.and_then(|c| c.get(k)).is_some_and(|c| c == v);
    Value::Object(
        m.iter()
            .filter(|(k, v)| !is_control_key(k) && !from_context(k, v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// A plugin's content as text: short values as `key: value` lines, then each long or
/// multi-line string (a fetched page, a file) as it is, under its key, so the model reads the
/// page rather than a JSON-escaped copy of it.
pub fn render_content(v: &Value) -> String {
    let Value::Object(m) = v else {
        return match v {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            v => serde_json::to_string_pretty(v).unwrap_or_default(),
        };
    };
    let (mut lines, mut blocks) = (Vec::new(), Vec::new());
    for (k, v) in m {
        match v {
            Value::String(s) if s.contains('\n') || s.chars().count() > 160 => blocks.push(format!("{k}:\n{s}")),
            Value::String(s) => lines.push(format!("{k}: {s}")),
            v => lines.push(format!("{k}: {v}")),
        }
    }
    let head = lines.join("\n");
    std::iter::once(head).chain(blocks).filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n\n")
}

/// A job's answer as the model reads it: the plugin's one-line `result`, then the content of
/// each event it emitted (a fetched page is in `events[].payload`, not in `result`).
fn response_text(response: &Value) -> String {
    // A protocol response without `result` says nothing beside its events; anything else is shown whole.
    let inner = match response.get("result") {
        Some(r) => r.clone(),
        None if response.get("status").is_some() => Value::Null,
        None => response.clone(),
    };
    let mut parts = vec![render_content(&inner)];
    for e in response.get("events").and_then(Value::as_array).into_iter().flatten() {
        let ty = e.get("type").and_then(Value::as_str).unwrap_or("event");
        let mut content = plugin_content(e.get("payload").unwrap_or(&Value::Null), None);
        // Ductile copies the response's `result` into an event without one: said once above.
        if let (Value::Object(m), Some(r)) = (&mut content, inner.as_str()) {
            if m.get("result").and_then(Value::as_str) == Some(r) {
                m.remove("result");
            }
        }
        parts.push(format!("event {ty}:\n{}", render_content(&content)));
    }
    parts.retain(|p| !p.trim().is_empty());
    parts.join("\n\n")
}

/// A finished job as a tool result: the plugin's protocol response (`status`, `result`,
/// `events`, `error`, `logs`) when it gave one.
fn job_result(job: &Value, job_id: &str, plugin: &str, command: &str) -> ToolResult {
    let status = job.get("status").and_then(Value::as_str).unwrap_or("");
    let response = job.get("result").cloned().unwrap_or(Value::Null);
    let output = response_text(&response);
    let meta = json!({"ductile_job": job_id, "plugin": plugin, "command": command, "job_status": status});
    let plugin_error = response.get("status").and_then(Value::as_str) == Some("error");
    if (status == "succeeded" || status == "completed") && !plugin_error {
        return ToolResult::ok(output, meta);
    }
    let why = response
        .get("error")
        .and_then(Value::as_str)
        .or_else(|| job.get("last_error").and_then(Value::as_str))
        .or_else(|| job.get("error").and_then(Value::as_str))
        .unwrap_or("no error message");
    let retryable = matches!(status, "timed_out") || response.get("retry").and_then(Value::as_bool) == Some(true);
    let mut r = ToolResult::err(format!("job {job_id} of `{plugin}` `{command}` ended {status}: {why}"), retryable);
    r.output = output;
    r.metadata = meta;
    r
}
