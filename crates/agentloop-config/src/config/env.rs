//! The `AGENTLOOP_*` environment as a configuration layer.

use super::*;
use agentloop_types::error::{Error, Result};
use serde_json::{Map, Value};

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
            let unknown = matches!(&e.cause, Some(agentloop_types::error::Cause::ConfigKey(k)) if k.unknown);
            if !unknown && !skip_bad {
                return Err(e);
            }
            skipped.push(SkippedVar { var: k, error: e, unknown });
            root = before;
        }
    }
    Ok((Layer { source: Source::Environment, value: root }, skipped))
}
