//! Merging layers into the effective [`Config`]: later wins key by key, every leaf's source
//! remembered, seed aliases and `${VAR}` references resolved, values checked.

use super::*;
use agentloop_types::error::{Error, Result};
use camino::Utf8PathBuf;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub fn set_path(root: &mut Value, path: &[String], value: Value) {
    let mut cur = root;
    for (i, key) in path.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(obj) = cur else { return };
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
        let value = std::env::var(name).map_err(|e| {
            Error::config(format!("invalid configuration in {source}: `api_url` names ${{{name}}}, which is not set"))
                .with_hint(format!("set {name} in the environment, or write the address itself"))
                .with_told_source(e)
        })?;
        out.push_str(&value);
        rest = tail;
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

pub fn resolve(layers: &[Layer]) -> Result<Resolved> {
    let mut value = agentloop_types::json::to_value(Config::default());
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
        let inner = super::layer::echo_masked(&value, &path, &e.into_inner().to_string());
        Error::config(format!("invalid configuration at key `{path}`: {inner}"))
    })?;
    validate_values(&config)?;
    serve_hosts(&config, &sources)?;
    features_built(&config, &sources)?;
    Ok(Resolved { config, value, sources })
}

/// The folder inside the workspace where an agent's file tools write by default.
pub fn agent_sandbox_dir(agent: &str) -> Utf8PathBuf {
    Utf8PathBuf::from("sandbox").join(agent)
}

/// The run's own output folders, which an agent's sandbox takes in beside `sandbox/<agent>/`:
/// always the run's workspace's (a run under a root writes them in `runs/<id>/`), never a
/// folder of the root.
pub const RUN_OWN_FOLDERS: [&str; 2] = ["artifacts", "state"];

/// The per-agent sandbox: with an agent chosen (`agent`, `--agent`) and no layer setting
/// `tools.write_paths`, file tools write only in `sandbox/<agent>/` inside the workspace, and in
/// the run's own outputs: `artifacts/` (what it makes) and `state/` (a job's state, carried to
/// its next run), where the bundled skills write.
fn agent_sandbox(value: &mut Value, sources: &mut Sources) {
    let Some(agent) = value.get("agent").and_then(Value::as_str).filter(|a| !a.is_empty()) else { return };
    if sources.get("tools.write_paths").is_some_and(Source::is_given) {
        return;
    }
    let dir = agent_sandbox_dir(agent);
    value["tools"]["write_paths"] = json!([dir, RUN_OWN_FOLDERS[0], RUN_OWN_FOLDERS[1]]);
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

/// A key that configures a part this build left out (its cargo feature off) is refused, naming
/// the key, where it was set and the feature, rather than ignored.
fn features_built(c: &Config, sources: &Sources) -> Result<()> {
    let named = |key: &str| {
        let given =
            sources.iter().find(|(k, s)| (k.as_str() == key || k.starts_with(&format!("{key}."))) && s.is_given());
        given.map_or_else(|| format!("`{key}`"), |(k, s)| format!("`{k}` (in {s})"))
    };
    if !cfg!(feature = "mcp") && (!c.mcp.servers.is_empty() || c.mcp.config_file.is_some()) {
        let key = if c.mcp.servers.is_empty() { "mcp.config_file" } else { "mcp.servers" };
        return Err(Error::not_built("mcp", &format!("{}, an MCP server,", named(key)), true));
    }
    if !cfg!(feature = "otel") && c.otel.endpoint.as_deref().is_some_and(|e| !e.trim().is_empty()) {
        return Err(Error::not_built("otel", &format!("{}, OpenTelemetry traces,", named("otel.endpoint")), true));
    }
    Ok(())
}

/// Every entry of `serve.allowed_hosts` is a host `serve` can compare a request's `Host` with.
fn serve_hosts(c: &Config, sources: &Sources) -> Result<()> {
    let Some(bad) = c.serve.allowed_hosts.iter().find(|h| HostPort::parse(h, true).is_none()) else { return Ok(()) };
    let from =
        sources.get("serve.allowed_hosts").filter(|s| s.is_given()).map(|s| format!(" in {s}")).unwrap_or_default();
    Err(Error::config(format!(
        "invalid configuration{from} at key `serve.allowed_hosts`: `{bad}` is not a host name, `name:port`, `*.suffix` or `[IPv6]`"
    ))
    .with_hint("list names as a browser's address gives them, e.g. [agents.example.com, \"agents.example.com:8700\", \"*.internal.example\"]"))
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
