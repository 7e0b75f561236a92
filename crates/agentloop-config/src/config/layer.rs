//! A configuration layer and where it came from ([`Source`]), and the check that names the file
//! and the key of a wrong value.

use super::*;
use agentloop_types::error::{Cause, Error, KeyProblem, Result};
use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

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

pub(super) fn check<T: for<'de> Deserialize<'de>>(v: &Value, source: &Source) -> Result<()> {
    let de = v.clone();
    serde_path_to_error::deserialize::<_, T>(de).map(|_| ()).map_err(|e| {
        let path = e.path().to_string();
        let inner = echo_masked(v, &path, &e.into_inner().to_string());
        let key = if path == "." { String::new() } else { format!(" at key `{path}`") };
        // serde reports an unknown field only in its message: this is the one place it is read.
        let unknown = inner.starts_with("unknown field `");
        let near = near_miss(&inner).map(|k| match path.rsplit_once('.') {
            Some((parent, _)) => format!("{parent}.{k}"),
            None => k,
        });
        let cause = Cause::ConfigKey(Box::new(KeyProblem { key: path.clone(), unknown, near: near.clone() }));
        if *source == Source::CommandLine {
            return Error::config(format!("invalid value on the command line for `{path}`: {inner}"))
                .with_hint("fix the flag's value; `agentloop help` lists the flags")
                .with_cause(cause);
        }
        let hint = match (source, near) {
            (Source::EnvironmentVariable(var), Some(k)) => {
                format!("did you mean {}? Otherwise unset {var} (commands that only read skip it)", env_name(&k))
            }
            (Source::EnvironmentVariable(var), None) => {
                format!("unset {var} or fix its value (an AGENTLOOP_* variable sets a configuration key; commands that only read skip a bad one)")
            }
            (_, Some(k)) => format!("did you mean `{k}`? Fix or remove that key (the keys valid there are listed above)"),
            (_, None) if unknown => {
                "remove that key or rename it to one listed above".to_string()
            }
            (_, None) => "fix that key's value; once the file is valid `agentloop config show` prints every key with its value".to_string(),
        };
        Error::config(format!("invalid configuration in {source}{key}: {inner}")).with_hint(hint).with_cause(cause)
    })
}

/// serde's message about the value at `path` of `v`, its echo of a string (`invalid type:
/// string "..."`) replaced by what `config show` would show there ([`crate::mask::shown`]): an
/// `api_key_cmd` of the wrong type is not printed at all, nor a secret.
pub(super) fn echo_masked(v: &Value, path: &str, message: &str) -> String {
    let at = path.split('.').try_fold(v, |v, part| match v {
        Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => v.get(part),
    });
    let Some(Value::String(s)) = at else { return message.to_string() };
    let echoed = format!("{s:?}");
    // A key that runs a program to print a secret (`llm.api_key_cmd`) given one string: it may
    // well be the secret itself (`echo sk-...`), so nothing of it is echoed.
    if path.ends_with("_cmd") {
        return message.replace(&echoed, &format!("{:?}", crate::mask::MASK));
    }
    match crate::mask::shown(path, at.unwrap_or(&Value::Null)) {
        Value::String(m) if m == *s => message.to_string(),
        Value::String(m) => message.replace(&echoed, &format!("{m:?}")),
        _ => message.replace(&echoed, &format!("{:?}", crate::mask::MASK)),
    }
}

/// The valid key nearest an unknown one, from serde's "unknown field `x`, expected one of `a`,
/// `b`" (a near miss: about a third of its letters differ, at most).
fn near_miss(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (bad, expected) = rest.split_once('`')?;
    let candidates = expected.split('`').skip(1).step_by(2);
    let (best, d) = candidates.map(|c| (c, strsim::levenshtein(bad, c))).min_by_key(|(_, d)| *d)?;
    (d > 0 && d <= bad.chars().count().div_ceil(3)).then(|| best.to_string())
}

/// The variable that sets a dotted key: `llm.model` → `AGENTLOOP_LLM__MODEL`.
pub fn env_name(key: &str) -> String {
    format!("AGENTLOOP_{}", key.replace('.', "__").to_uppercase())
}
