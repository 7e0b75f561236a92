//! The trust policy as one table: for every key of the configuration, what a party the user
//! has not trusted (a request, a workspace from elsewhere; see [`crate::trust`]) may do with it.
//!
//! Each rule reads the value as the configuration's own type (a number, a switch, a list of
//! names, a duration, an enum) and compares it with the trusted configuration's typed field: a
//! limit only lower, a switch only off, a list only within the trusted one or keeping each of
//! its denials, a duration only shorter, a choice only among those that narrow. A key no rule
//! lets a party set is refused, and every key of [`Config`] is in the table (a test holds a new
//! key to being given its rule). Repeating the trusted value exactly widens nothing and is
//! accepted for the keys whose meaning does not depend on where they are written
//! ([`crate::narrow_value::repeats`]).

use crate::narrow_value;
use crate::tool_settings::{self, Widens};
use agentloop_config::config::{Config, Dur};
use camino::Utf8Path;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

/// Who set a key that must only narrow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Party {
    /// A `handle` request's `config` (or a `serve` request).
    Request,
    /// A workspace's own config or agent profile, not trusted by the user.
    Workspace,
}

/// The question one rule answers: may `party` set `key` (under `root`) over `base`?
pub struct Judge<'a> {
    pub key: &'a str,
    pub base: &'a Config,
    pub root: &'a Utf8Path,
    pub party: Party,
    /// How the trusted side is named in a reason: `the trusted` or `the root's`.
    pub whose: &'static str,
}

type Verdict = std::result::Result<(), Widens>;

/// What an untrusted party may do with one key.
pub enum Rule {
    /// A limit: a number at most the trusted one (None inside: no limit set, any narrows it).
    AtMost(fn(&Config) -> Option<f64>),
    /// A switch that may only be turned off (on only as a repeat of the trusted `true`).
    OffOnly,
    /// A duration at most the trusted one.
    Shorter(fn(&Config) -> Duration),
    /// A list of names, each one the trusted list has.
    Within(fn(&Config) -> &[String]),
    /// A list that keeps every entry of the trusted one (a denial, a trigger), adding more.
    Keeps(fn(&Config) -> &[String], &'static str),
    /// A value that widens nothing whoever sets it: text for the goal, the sampling temperature.
    Inert,
    /// A rule of its own, for a value compared in its own way (an endpoint, a path, a choice).
    Own(fn(&Value, &Judge) -> Verdict),
    /// The user's own configuration only; `Some` gives the reason, None the general one.
    Trusted(Option<&'static str>),
}

/// Why `otel.*` keys are the user's own to set (the endpoint, headers, capturing content).
pub const OTEL_ONLY_TRUSTED: &str = "only your own config or environment may set it: spans could carry prompts, answers and tokens to a host you did not name";

/// The general reason a workspace key is refused (one shared sentence, said once).
pub const ONLY_TRUSTED: &str = "only trusted configuration may set it: it could run a program, send a credential, read or write outside the workspace, or widen the sandbox";

/// Every key of the configuration and its rule. A `*` stands for one part of a key (a tool's
/// name); a key ending in `.*` covers every key under it.
pub const POLICY: &[(&str, Rule)] = &[
    // Limits of a run: only lower.
    ("max_steps", Rule::AtMost(|c| Some(c.max_steps as f64))),
    ("max_reframes", Rule::AtMost(|c| Some(c.max_reframes as f64))),
    ("max_consecutive_failures", Rule::AtMost(|c| Some(c.max_consecutive_failures as f64))),
    ("max_repeats", Rule::AtMost(|c| Some(c.max_repeats as f64))),
    ("max_done_refusals", Rule::AtMost(|c| Some(c.max_done_refusals as f64))),
    ("max_tokens", Rule::AtMost(|c| c.max_tokens.map(|n| n as f64))),
    ("max_cost_usd", Rule::AtMost(|c| c.max_cost_usd)),
    ("timeout", Rule::Shorter(|c| c.timeout.0)),
    ("escalation_triggers", Rule::Keeps(|c| &c.escalation_triggers, "trigger")),
    ("allowed_tools", Rule::Own(allowed_tools)),
    ("output_schema", Rule::Own(output_schema)),
    ("system_prompt", Rule::Inert),
    ("description", Rule::Inert),
    ("system_prompt_file", Rule::Own(|v, j| workspace_only(j, || inside(v, j.root)))),
    ("templates_dir", Rule::Own(|v, j| workspace_only(j, || inside(v, j.root)))),
    ("agent", Rule::Trusted(None)),
    // The model: the trusted provider and model, or one they list.
    ("llm.provider", Rule::Own(provider)),
    ("llm.model", Rule::Own(model)),
    ("llm.allowed_providers", Rule::Trusted(None)),
    ("llm.allowed_models", Rule::Trusted(None)),
    ("llm.base_url", Rule::Trusted(None)),
    ("llm.api_key_env", Rule::Trusted(None)),
    ("llm.api_key_cmd", Rule::Trusted(None)),
    ("llm.max_tokens", Rule::AtMost(|c| Some(c.llm.max_tokens as f64))),
    ("llm.temperature", Rule::Own(|v, _| number_or_null(v))),
    ("llm.connect_timeout", Rule::Trusted(None)),
    ("llm.read_timeout", Rule::Trusted(None)),
    ("llm.attempts", Rule::Trusted(None)),
    ("llm.backoff_ms", Rule::Trusted(None)),
    ("llm.max_backoff", Rule::Trusted(None)),
    ("llm.max_response_bytes", Rule::Trusted(None)),
    ("llm.structured", Rule::Trusted(None)),
    ("llm.strict", Rule::Trusted(None)),
    ("llm.script", Rule::Trusted(None)),
    ("llm.record", Rule::Trusted(None)),
    ("llm.cache", Rule::Trusted(None)),
    ("llm.context_window", Rule::Trusted(None)),
    ("llm.fuse_phases", Rule::Trusted(None)),
    ("llm.tool_schemas", Rule::Trusted(None)),
    ("llm.stream", Rule::Own(own_setting)),
    ("llm.tool_messages", Rule::Trusted(None)),
    ("prices.*", Rule::Trusted(None)),
    // The tools: fewer, smaller, nearer.
    ("tools.read_paths", Rule::Trusted(None)),
    ("tools.write_paths", Rule::Own(write_paths)),
    ("tools.output_cap", Rule::AtMost(|c| Some(c.tools.output_cap as f64))),
    ("tools.max_file_bytes", Rule::AtMost(|c| Some(c.tools.max_file_bytes as f64))),
    ("tools.timeout", Rule::Shorter(|c| c.tools.timeout.0)),
    ("tools.http.allow_hosts", Rule::Own(allow_hosts)),
    ("tools.http.deny_hosts", Rule::Keeps(|c| &c.tools.http.deny_hosts, "denial of")),
    ("tools.http.schemes", Rule::Within(|c| &c.tools.http.schemes)),
    ("tools.http.ports", Rule::Own(|v, j| ports(v, &j.base.tools.http.ports, j.whose))),
    ("tools.http.allow_private", Rule::OffOnly),
    ("tools.http.max_bytes", Rule::AtMost(|c| Some(c.tools.http.max_bytes as f64))),
    ("tools.http.max_redirects", Rule::AtMost(|c| Some(c.tools.http.max_redirects as f64))),
    ("tools.http.user_agent", Rule::Trusted(None)),
    ("tools.http.cache", Rule::Own(|v, j| narrow_value::http_cache(v, j.base, j.whose).map_err(Widens))),
    ("tools.shell.enabled", Rule::OffOnly),
    ("tools.shell.allow", Rule::Within(|c| &c.tools.shell.allow)),
    ("tools.shell.patterns", Rule::Trusted(None)),
    ("tools.shell.code_runners", Rule::Within(|c| &c.tools.shell.code_runners)),
    ("tools.shell.env", Rule::Trusted(None)),
    ("tools.shell.timeout", Rule::Trusted(None)),
    ("tools.shell.max_output", Rule::Trusted(None)),
    ("tools.shell.sandbox", Rule::Own(bwrap_only)),
    ("tools.shell.network", Rule::OffOnly),
    ("tools.memory.enabled", Rule::OffOnly),
    ("tools.memory.dir", Rule::Own(memory_dir)),
    ("tools.external.*", Rule::Trusted(None)),
    ("tools.local", Rule::Within(|c| &c.tools.local)),
    ("tools.disabled", Rule::Own(per_tool)),
    ("tools.*.enabled", Rule::Own(per_tool)),
    ("tools.*.allowed_paths", Rule::Own(per_tool)),
    ("tools.*.timeout_seconds", Rule::Own(per_tool)),
    ("tools.*.max_length", Rule::Own(per_tool)),
    // Any other setting of a tool's own.
    ("tools.*.*", Rule::Trusted(None)),
    // Skills and memory: fewer, and kept in the workspace.
    ("skills.dirs", Rule::Trusted(None)),
    ("skills.no_builtin", Rule::Trusted(None)),
    ("skills.max_entries", Rule::Trusted(None)),
    ("skills.only", Rule::Own(skills_only)),
    ("skills.disabled", Rule::Own(per_tool)),
    ("memory.enabled", Rule::OffOnly),
    ("memory.scope", Rule::Own(|v, j| narrow_value::memory_scope(v, j.base).map_err(Widens))),
    ("memory.dir", Rule::Own(memory_dir)),
    ("memory.top_k", Rule::AtMost(|c| Some(c.memory.top_k as f64))),
    ("memory.max_chars", Rule::Trusted(None)),
    ("memory.auto_index", Rule::OffOnly),
    ("memory.ttl", Rule::Trusted(None)),
    ("memory.compact_facts", Rule::Trusted(None)),
    ("memory.compact_with", Rule::Trusted(None)),
    // The agent's well-being: rest sooner, values only added.
    ("frustration.threshold", Rule::Trusted(None)),
    ("frustration.reframe", Rule::Trusted(None)),
    ("rest.window", Rule::Trusted(None)),
    ("rest.max_tokens", Rule::AtMost(|c| c.rest.max_tokens.map(|n| n as f64))),
    ("rest.max_cost_usd", Rule::AtMost(|c| c.rest.max_cost_usd)),
    ("rest.max_runs", Rule::AtMost(|c| c.rest.max_runs.map(|n| n as f64))),
    ("rest.max_fatigue", Rule::AtMost(|c| Some(c.rest.max_fatigue))),
    ("rest.relief", Rule::Trusted(None)),
    ("rest.tasks", Rule::Trusted(None)),
    ("stress.per_escalation", Rule::Trusted(None)),
    ("stress.threshold", Rule::Trusted(None)),
    ("stress.decay_per_hour", Rule::Trusted(None)),
    ("values", Rule::Own(|v, j| keeps_values(v, &j.base.values, j.whose))),
    ("prompts", Rule::Inert),
    ("frame", Rule::Own(|v, j| narrow_value::frame(v, j.base).map_err(Widens))),
    ("values_check", Rule::Own(|v, j| narrow_value::values_check(v, j.base).map_err(Widens))),
    ("dream.interests", Rule::Trusted(None)),
    ("dream.max_questions", Rule::AtMost(|c| Some(c.dream.max_questions as f64))),
    ("dream.curiosity.window", Rule::Trusted(None)),
    // No curiosity budget means no exploring at all: nothing above 0 narrows it.
    ("dream.curiosity.max_tokens", Rule::AtMost(|c| Some(c.dream.curiosity.max_tokens.map_or(0.0, |n| n as f64)))),
    ("dream.curiosity.max_cost_usd", Rule::AtMost(|c| Some(c.dream.curiosity.max_cost_usd.unwrap_or(0.0)))),
    ("modes.auto", Rule::OffOnly),
    // A workspace's own log.
    ("logging.level", Rule::Own(own_setting)),
    ("logging.file", Rule::Own(log_file)),
    ("logging.format", Rule::Own(own_setting)),
    ("logging.max_bytes", Rule::Own(own_setting)),
    ("logging.keep", Rule::Own(own_setting)),
    // The doors: the user's own, but for a step's shorter wait.
    ("handle.tool_retries", Rule::Trusted(None)),
    ("handle.runs_dir", Rule::Trusted(None)),
    ("handle.keep_finished", Rule::Trusted(None)),
    ("handle.progress_url", Rule::Trusted(None)),
    ("handle.progress_token", Rule::Trusted(None)),
    ("handle.progress_timeout", Rule::Trusted(None)),
    // How long a step may stay pending before `poll` fails it: shorter only ends a run sooner.
    ("handle.pending_grace", Rule::Shorter(|c| c.handle.pending_grace.0)),
    ("handle.trust_request_config", Rule::Trusted(None)),
    ("queue.*", Rule::Trusted(None)),
    ("serve.*", Rule::Trusted(None)),
    ("mcp.*", Rule::Trusted(None)),
    // The gateway and its token only as the trusted configuration names them.
    ("ductile.api_url", Rule::Own(|v, j| same(v, j.base.ductile.api_url.as_deref(), "ductile.api_url", j.whose))),
    ("ductile.api_token", Rule::Own(ductile_token)),
    (
        "ductile.api_token_env",
        Rule::Own(|v, j| same(v, j.base.ductile.api_token_env.as_deref(), "ductile.api_token_env", j.whose)),
    ),
    ("ductile.*", Rule::Trusted(None)),
    // Spans go where the user said and carry what the user allowed.
    (
        "otel.capture_content",
        Rule::Own(|v, _| match v == &Value::Bool(false) {
            true => Ok(()),
            false => Err(OTEL_ONLY_TRUSTED.into()),
        }),
    ),
    ("otel.*", Rule::Trusted(Some(OTEL_ONLY_TRUSTED))),
    ("trust_all", Rule::Trusted(None)),
    // Notes on keys of another format that do nothing: inert text.
    ("not_used.*", Rule::Own(|v, _| v.as_str().map(|_| ()).ok_or_else(|| "must be text".into()))),
    // The seed format's name for the shell's sandbox.
    ("sandbox", Rule::Own(bwrap_only)),
];

/// Whether `pattern` (a key of [`POLICY`]) covers `key`.
fn covers(pattern: &str, key: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix(".*") {
        if !prefix.contains('*') {
            return key.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('.') && rest.len() > 1);
        }
    }
    let (p, k): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), key.split('.').collect());
    p.len() == k.len() && p.iter().zip(&k).all(|(p, k)| *p == "*" || p == k)
}

/// The rule for `key`: the first entry of [`POLICY`] that covers it (an exact key before the
/// pattern that would cover it too, as the table lists them).
pub fn rule_for(key: &str) -> Option<&'static Rule> {
    POLICY.iter().find(|(k, _)| *k == key).or_else(|| POLICY.iter().find(|(k, _)| covers(k, key))).map(|(_, r)| r)
}

/// The trusted limit at `key` an untrusted party may only lower (None inside: no limit set);
/// None for a key that is no such limit.
pub fn numeric_cap(key: &str, base: &Config) -> Option<Option<f64>> {
    match rule_for(key) {
        Some(Rule::AtMost(cap)) => Some(cap(base)),
        _ => None,
    }
}

/// Whether setting `key` to `v` only narrows `base` (a pure check but for `allowed_tools`, which
/// lists the trusted registry from caches only, and the path keys, which look at the folder).
pub fn narrows(key: &str, v: &Value, base: &Config, root: &Utf8Path, party: Party) -> Verdict {
    let whose = if party == Party::Request { "the root's" } else { "the trusted" };
    let j = Judge { key, base, root, party, whose };
    let rule = rule_for(key);
    if let Some(Rule::AtMost(cap)) = rule {
        return at_most(v, cap(base), whose);
    }
    if narrow_value::repeats(key, v, base) {
        return Ok(());
    }
    match rule {
        Some(Rule::AtMost(_)) | None | Some(Rule::Trusted(None)) => Err(refused(party)),
        Some(Rule::Trusted(Some(why))) => Err(Widens((*why).into())),
        // `true` only as a repeat of the trusted `true` (above).
        Some(Rule::OffOnly) => match typed::<bool>(v, "must be true or false") {
            Ok(false) => Ok(()),
            _ => Err(refused(party)),
        },
        Some(Rule::Shorter(limit)) => {
            let d = typed::<Dur>(v, "must be a duration such as 30s or 5m")?;
            let limit = limit(base);
            match d.0 > limit {
                true => Err(Widens(format!("{}s is above {whose} {}s", d.0.as_secs(), limit.as_secs()))),
                false => Ok(()),
            }
        }
        Some(Rule::Within(have)) => within(&typed::<Vec<String>>(v, "must be a list of names")?, have(base), &j),
        Some(Rule::Keeps(have, drops)) => {
            let want = typed::<Vec<String>>(v, "must be a list of names")?;
            match have(base).iter().find(|d| !want.contains(d)) {
                Some(d) => Err(Widens(format!("it drops {whose} {drops} `{d}`"))),
                None => Ok(()),
            }
        }
        Some(Rule::Inert) => {
            v.as_str().map(|_| ()).or_else(|| v.is_null().then_some(())).ok_or_else(|| "must be text".into())
        }
        Some(Rule::Own(rule)) => rule(v, &j),
    }
}

/// The refusal of a key only the user's own configuration may set, in the party's words.
fn refused(party: Party) -> Widens {
    match party {
        Party::Request => "only the root's agentloop.yaml may set it (a request may only narrow budgets, tools and hosts, or set system_prompt)".into(),
        Party::Workspace => ONLY_TRUSTED.into(),
    }
}

/// `v` read as the configuration reads the key: its own type, or `what` it must be.
fn typed<T: DeserializeOwned>(v: &Value, what: &str) -> std::result::Result<T, Widens> {
    serde_json::from_value(v.clone()).map_err(|_| Widens(what.to_string()))
}

fn at_most(v: &Value, limit: Option<f64>, whose: &str) -> Verdict {
    let n = v.as_f64().ok_or_else(|| Widens("must be a number".into()))?;
    match limit {
        Some(l) if n > l => Err(Widens(format!("{n} is above {whose} {l}"))),
        _ => Ok(()),
    }
}

fn within(want: &[String], have: &[String], j: &Judge) -> Verdict {
    match want.iter().find(|w| !have.contains(w)) {
        Some(w) => Err(Widens(format!("`{w}` is not in {} {}", j.whose, j.key))),
        None => Ok(()),
    }
}

fn number_or_null(v: &Value) -> Verdict {
    (v.is_number() || v.is_null()).then_some(()).ok_or_else(|| "must be a number".into())
}

/// A setting of a workspace's own (its log's level, whether its calls stream): any value, from
/// its own configuration only.
fn own_setting(_: &Value, j: &Judge) -> Verdict {
    workspace_only(j, || Ok(()))
}

/// What only a workspace's own configuration may set (a file in it, its log's level): a request
/// may not.
fn workspace_only(j: &Judge, rule: impl FnOnce() -> Verdict) -> Verdict {
    match j.party {
        Party::Workspace => rule(),
        Party::Request => Err(refused(j.party)),
    }
}

/// The shell's sandbox: only `bwrap`, the one that holds the shell in.
fn bwrap_only(v: &Value, j: &Judge) -> Verdict {
    match typed::<agentloop_config::config::ShellSandbox>(v, "") {
        Ok(agentloop_config::config::ShellSandbox::Bwrap) => Ok(()),
        _ => Err(refused(j.party)),
    }
}

fn strings(v: &Value) -> Option<Vec<String>> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
}

/// `allowed_tools`: each entry (a tool, a Ductile plugin for its commands, one
/// `<plugin>__<command>`) must name a tool, and only tools the trusted configuration allows.
fn allowed_tools(v: &Value, j: &Judge) -> Verdict {
    let (base, whose) = (j.base, j.whose);
    let registry = agentloop_tools::tools::Registry::load(base, j.root, agentloop_tools::tools::Reach::CachesOnly)
        .map_err(|e| Widens(e.detail()))?;
    let want = strings(v).ok_or_else(|| Widens("must be a list of names".into()))?;
    for w in &want {
        let named = registry.named_by(w);
        if named.is_empty() {
            return Err(Widens(format!(
                "`{w}` names none of {whose} allowed tools (a tool, a Ductile plugin or `<plugin>__<command>`)"
            )));
        }
        if let Some(t) = named.iter().find(|t| !registry.is_allowed(base, &t.name)) {
            return Err(Widens(format!("`{w}` allows `{}`, which is not in {whose} allowed tools", t.name)));
        }
    }
    Ok(())
}

/// A path an untrusted workspace may name: relative, inside it, with no `..`, and (when it
/// exists) not leading out of it through a link.
fn inside(v: &Value, root: &Utf8Path) -> Verdict {
    let p = v.as_str().ok_or_else(|| Widens("must be a path".into()))?;
    let path = Utf8Path::new(p);
    if path.is_absolute() || path.components().any(|c| matches!(c, camino::Utf8Component::ParentDir)) {
        return Err(Widens(format!("`{p}` is outside the workspace")));
    }
    if agentloop_io::fs::leads_outside(root, &root.join(path)) {
        return Err(Widens(format!("`{p}` leads outside the workspace through a link")));
    }
    Ok(())
}

/// The shape of the final output asks for nothing beyond the run: a schema given inline, or (from
/// the workspace's own config) a JSON file inside the workspace.
fn output_schema(v: &Value, j: &Judge) -> Verdict {
    match v {
        Value::Object(_) | Value::Null => Ok(()),
        Value::String(_) if j.party == Party::Workspace => inside(v, j.root),
        _ => Err(Widens("a request gives the schema itself, as an object".into())),
    }
}

/// `llm.provider`: the trusted one, or one it lists (`llm.allowed_providers`) when no address or
/// key of the trusted provider's would go to it.
fn provider(v: &Value, j: &Judge) -> Verdict {
    let whose = j.whose;
    let Ok(p) = serde_json::from_value::<agentloop_config::config::Provider>(v.clone()) else {
        return Err(Widens("is not a provider agentloop knows".into()));
    };
    let l = &j.base.llm;
    if p == l.provider {
        Ok(())
    } else if l.allowed_providers.contains(&p)
        && (l.base_url.is_some() || l.api_key_env.is_some() || l.api_key_cmd.is_some())
    {
        // The address and key the user set are for their own provider: another one would send
        // its key to that address, or that key to its own.
        Err(Widens(format!(
            "{whose} llm.base_url / api_key_env / api_key_cmd are set for `{}`, so no other provider may be chosen",
            l.provider.as_str()
        )))
    } else if l.allowed_providers.contains(&p) {
        Ok(())
    } else {
        Err(Widens(format!("`{}` is neither {whose} provider nor in {whose} llm.allowed_providers", p.as_str())))
    }
}

/// `llm.model`: the trusted one, or one it lists (`llm.allowed_models`).
fn model(v: &Value, j: &Judge) -> Verdict {
    let whose = j.whose;
    match v.as_str() {
        Some(m) if j.base.llm.model.as_deref() == Some(m) || j.base.llm.allowed_models.iter().any(|a| a == m) => Ok(()),
        Some(m) => Err(Widens(format!("`{m}` is neither {whose} model nor in {whose} llm.allowed_models"))),
        None => Err(Widens("must be a model name".into())),
    }
}

/// The same text as the trusted configuration's (`what`, read as `have`): an address of its own
/// would send a credential to a host the user did not name. The reasons never repeat a token.
fn same(v: &Value, have: Option<&str>, what: &str, whose: &str) -> Verdict {
    match (v.as_str(), have) {
        (Some(w), Some(h)) if w == h => Ok(()),
        (Some(_), Some(_)) => Err(Widens(format!("it differs from {whose} {what}"))),
        (Some(_), None) => Err(Widens(format!("{whose} configuration sets no {what}"))),
        (None, _) => Err(Widens("must be a string".into())),
    }
}

/// `ductile.api_token`: the token the trusted configuration gives, read the way a call reads it
/// (never by running a command to compare), compared in constant time.
fn ductile_token(v: &Value, j: &Judge) -> Verdict {
    let d = &j.base.ductile;
    let have = d.api_token.clone().or_else(|| d.api_token_env.as_ref().and_then(|n| std::env::var(n).ok()));
    match (v.as_str(), have) {
        (Some(w), Some(h)) if constant_time_eq(w.as_bytes(), h.as_bytes()) => Ok(()),
        (Some(_), Some(_)) => Err(Widens(format!("it is not {} Ductile token", j.whose))),
        _ => Err(Widens(format!("{} configuration gives no Ductile token to compare it with", j.whose))),
    }
}

/// Equality that takes as long for every pair of the same length (a token is compared).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `tools.http.allow_hosts`: under no trusted list, any non-empty list narrows; under one, a
/// part of it (an empty list would allow any host again).
fn allow_hosts(v: &Value, j: &Judge) -> Verdict {
    let have = &j.base.tools.http.allow_hosts;
    let want = strings(v);
    if have.is_empty() {
        return want.filter(|l| !l.is_empty()).map(|_| ()).ok_or_else(|| "must be a non-empty list of hosts".into());
    }
    match want {
        Some(l) if l.is_empty() => {
            Err(Widens(format!("an empty list allows any host, not only {} [{}]", j.whose, have.join(", "))))
        }
        Some(l) => within(&l, have, j),
        None => Err(Widens("must be a list of names".into())),
    }
}

/// `tools.http.ports`, where an empty list allows any port: under a trusted empty list every
/// list of ports narrows (and `[]` changes nothing); under a trusted list, a narrower one is a
/// non-empty subset of it (`[]` would allow any port).
fn ports(v: &Value, have: &[u16], whose: &str) -> Verdict {
    let want: Vec<u16> = v
        .as_array()
        .and_then(|a| a.iter().map(|p| p.as_u64().and_then(|p| u16::try_from(p).ok())).collect())
        .ok_or_else(|| Widens("must be a list of port numbers".into()))?;
    if have.is_empty() {
        return Ok(());
    }
    if want.is_empty() {
        let list: Vec<String> = have.iter().map(u16::to_string).collect();
        return Err(Widens(format!("an empty list allows any port, not only {whose} [{}]", list.join(", "))));
    }
    match want.iter().find(|p| !have.contains(p)) {
        Some(p) => Err(Widens(format!("port {p} is not in {whose} tools.http.ports"))),
        None => Ok(()),
    }
}

/// Whether the `values` list `v` keeps every one of `have` (by name) with all its phrases: values
/// only decline tasks, so more of them, or more phrases, narrow.
fn keeps_values(v: &Value, have: &[agentloop_config::config::AgentValue], whose: &str) -> Verdict {
    let want: Vec<agentloop_config::config::AgentValue> =
        serde_json::from_value(v.clone()).map_err(|e| Widens(format!("must be a list of values: {e}")))?;
    for h in have {
        let Some(w) = want.iter().find(|w| w.name == h.name) else {
            return Err(Widens(format!("it drops {whose} value `{}`", h.name)));
        };
        if let Some(p) = h.refuse_if.iter().find(|p| !w.refuse_if.contains(p)) {
            return Err(Widens(format!("it drops {whose} value `{}`'s refuse_if phrase \"{p}\"", h.name)));
        }
    }
    Ok(())
}

/// `skills.only`: a part of the trusted list, or any list under none.
fn skills_only(v: &Value, j: &Judge) -> Verdict {
    match &j.base.skills.only {
        Some(only) => within(&typed::<Vec<String>>(v, "must be a list of skill names")?, only, j),
        None => strings(v).map(|_| ()).ok_or_else(|| "must be a list of skill names".into()),
    }
}

/// The per-tool keys and the lists of denials ([`tool_settings::narrows`]); a key naming no
/// tool with settings of its own is refused.
fn per_tool(v: &Value, j: &Judge) -> Verdict {
    let root = j.root;
    tool_settings::narrows(j.key, v, j.base, &|p| inside(p, root)).unwrap_or_else(|| Err(refused(j.party)))
}

/// `memory.dir`, `tools.memory.dir`: a store inside the workspace (its own config only).
fn memory_dir(v: &Value, j: &Judge) -> Verdict {
    workspace_only(j, || {
        inside(v, j.root).map_err(|e| Widens(format!("{e}: a memory store outside it is shared with other projects")))
    })
}

/// `tools.write_paths`: folders inside the workspace, fewer than the whole of it, where the
/// trusted configuration names none (its own config only).
fn write_paths(v: &Value, j: &Judge) -> Verdict {
    if !j.base.tools.write_paths.is_empty() {
        return Err(refused(j.party));
    }
    workspace_only(j, || match v.as_array() {
        Some(list) => list.iter().try_for_each(|p| inside(p, j.root)),
        None => Err(Widens("must be a list of folders".into())),
    })
}

/// `logging.file`: a file inside the workspace that is none of agentloop's own (its own config
/// only). A log appended to the paper trail or agentloop's own files would corrupt them, and one
/// in .git could change what git runs. Judged by every component of the path (`inside` has
/// refused `..`), so `./state.json`, `notes/.git/config` and `agents/x.yaml` are all refused, as
/// the file tools refuse them at any depth.
fn log_file(v: &Value, j: &Judge) -> Verdict {
    workspace_only(j, || {
        inside(v, j.root)?;
        use agentloop_tools::tools::sandbox::{CONFIG_DIRS, CONFIG_FILES, PAPER_TRAIL};
        let p = Utf8Path::new(v.as_str().unwrap_or_default());
        let own = |c: &str| {
            PAPER_TRAIL.contains(&c)
                || CONFIG_FILES.contains(&c)
                || CONFIG_DIRS.contains(&c)
                || c == "runs"
                || c == j.base.handle.runs_dir
                || c == ".git"
                || c.starts_with(".agentloop")
        };
        match p.components().map(|c| c.as_str()).find(|c| own(c)) {
            Some(f) => Err(Widens(format!(
                "`{p}` names `{f}`, agentloop's own (its paper trail, config, runs/, .git or .agentloop*), not a log"
            ))),
            None if p.file_name().is_none() => Err(Widens(format!("`{p}` names no file"))),
            None => Ok(()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every key of the configuration has its rule: a key added to `Config` fails here until
    /// the table says what an untrusted party may do with it. And every key the table names is
    /// one the configuration reads.
    #[test]
    fn every_key_of_the_configuration_has_a_rule_and_every_rule_a_key() {
        fn leaves(v: &Value, path: &str, out: &mut Vec<String>) {
            match v {
                Value::Object(m) if !m.is_empty() => {
                    for (k, v) in m {
                        leaves(v, &if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, out);
                    }
                }
                // A map of names (tools.external, mcp.servers, a tool's settings): a key under it.
                Value::Object(_) => out.push(format!("{path}.x")),
                _ => out.push(path.to_string()),
            }
        }
        let mut keys = Vec::new();
        leaves(&agentloop_types::json::to_value(Config::default()), "", &mut keys);
        let unruled: Vec<&String> = keys.iter().filter(|k| rule_for(k).is_none()).collect();
        assert!(unruled.is_empty(), "keys of the configuration with no rule in POLICY: {unruled:?}");
        let nested = |key: &str, v: Value| key.rsplit('.').fold(v, |inner, k| json!({ k: inner }));
        for (key, rule) in POLICY {
            if key.contains('*') || *key == "sandbox" {
                continue;
            }
            assert!(keys.contains(&key.to_string()), "{key} is no key of the configuration");
            if let Rule::AtMost(_) = rule {
                serde_json::from_value::<Config>(nested(key, json!(1))).unwrap();
            }
            if let Rule::OffOnly = rule {
                assert!(
                    narrows(key, &json!(false), &Config::default(), Utf8Path::new("/none"), Party::Workspace).is_ok()
                );
            }
        }
    }

    #[test]
    fn a_pattern_covers_one_part_or_everything_under_it() {
        assert!(covers("tools.*.enabled", "tools.grep.enabled"));
        assert!(!covers("tools.*.enabled", "tools.enabled"));
        assert!(covers("otel.*", "otel.headers.api-key"));
        assert!(!covers("otel.*", "otel"));
        assert!(!covers("otel.*", "otelx.y"));
        assert!(matches!(rule_for("otel.capture_content"), Some(Rule::Own(_))));
        assert!(matches!(rule_for("ductile.api_url"), Some(Rule::Own(_))));
        assert!(matches!(rule_for("ductile.plugins"), Some(Rule::Trusted(None))));
        assert_eq!(numeric_cap("tools.timeout", &Config::default()), None);
        assert_eq!(numeric_cap("max_steps", &Config::default()), Some(Some(20.0)));
    }
}
