//! A suite file read strictly: every key is known or refused naming it and the file, every
//! value checked before any trial runs (paths inside the workspace, stop kinds, patterns,
//! schemas, configuration keys).

use super::checks_de::{Check, Checks, Matcher};
use agentloop_config::config::{Layer, Source};
use agentloop_types::error::{Error, Result};
use agentloop_types::outcome::StopKind;
use camino::{Utf8Component, Utf8Path, Utf8PathBuf};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// What a case runs with; a suite's `defaults:` (or its top level) give it to every case.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub config: Option<Value>,
    pub agent: Option<String>,
    pub context: Option<String>,
    pub max_steps: Option<u32>,
    pub max_tokens: Option<u64>,
    #[serde(alias = "max_cost")]
    pub max_cost_usd: Option<f64>,
    pub timeout: Option<Seconds>,
    pub script: Option<Value>,
    /// The four budgets as one map (`budgets: {max_steps: 5}`); a budget of its own wins.
    pub budgets: Option<Budgets>,
}

/// `budgets:`: the run's limits in one map.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    pub max_steps: Option<u32>,
    pub max_tokens: Option<u64>,
    #[serde(alias = "max_cost")]
    pub max_cost_usd: Option<f64>,
    pub timeout: Option<Seconds>,
}

impl Settings {
    /// `self` over `under`: what is set here wins; configurations merge key by key.
    fn over(self, under: &Settings) -> Settings {
        let (me, under) = (self.flat(), under.clone().flat());
        let config = match (me.config, &under.config) {
            (Some(Value::Object(mine)), Some(Value::Object(theirs))) => {
                let mut merged = Value::Object(theirs.clone());
                merge(&mut merged, &Value::Object(mine));
                Some(merged)
            }
            (mine, theirs) => mine.or_else(|| theirs.clone()),
        };
        Settings {
            config,
            agent: me.agent.or(under.agent),
            context: me.context.or(under.context),
            max_steps: me.max_steps.or(under.max_steps),
            max_tokens: me.max_tokens.or(under.max_tokens),
            max_cost_usd: me.max_cost_usd.or(under.max_cost_usd),
            timeout: me.timeout.or(under.timeout),
            script: me.script.or(under.script),
            budgets: None,
        }
    }

    /// The `budgets:` map's values where no budget of its own is set.
    fn flat(mut self) -> Settings {
        if let Some(b) = self.budgets.take() {
            self.max_steps = self.max_steps.or(b.max_steps);
            self.max_tokens = self.max_tokens.or(b.max_tokens);
            self.max_cost_usd = self.max_cost_usd.or(b.max_cost_usd);
            self.timeout = self.timeout.or(b.timeout);
        }
        self
    }
}

fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                let slot = a.entry(k.clone()).or_insert(Value::Null);
                if slot.is_object() && v.is_object() {
                    merge(slot, v);
                } else {
                    *slot = v.clone();
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: Option<String>,
    #[allow(dead_code)]
    description: Option<String>,
    pass_rate: Option<f64>,
    trials: Option<u32>,
    models: Option<Models>,
    #[serde(default)]
    defaults: Settings,
    config: Option<Value>,
    agent: Option<String>,
    context: Option<String>,
    max_steps: Option<u32>,
    max_tokens: Option<u64>,
    #[serde(alias = "max_cost")]
    max_cost_usd: Option<f64>,
    timeout: Option<Seconds>,
    script: Option<Value>,
    budgets: Option<Budgets>,
    cases: Vec<CaseFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    name: String,
    #[allow(dead_code)]
    description: Option<String>,
    goal: String,
    #[serde(default)]
    files: Seeds,
    pass_rate: Option<f64>,
    trials: Option<u32>,
    #[serde(default)]
    checks: Checks,
    config: Option<Value>,
    agent: Option<String>,
    context: Option<String>,
    max_steps: Option<u32>,
    max_tokens: Option<u64>,
    #[serde(alias = "max_cost")]
    max_cost_usd: Option<f64>,
    timeout: Option<Seconds>,
    script: Option<Value>,
    budgets: Option<Budgets>,
    /// The case's goal run once per slot, in order, in the same workspace (a scheduled job's
    /// mornings): each a `run --slot` that carries what the one before left.
    #[serde(default)]
    slots: Vec<SlotFile>,
}

/// One slot of a case: its name (`run --slot`), the files written before its run (over those
/// already there), and the scripted model's answers for its run.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SlotFile {
    slot: String,
    #[serde(default)]
    files: Seeds,
    script: Option<Value>,
}

/// A slot of a case, ready to run.
#[derive(Debug, Clone)]
pub struct Slot {
    pub name: String,
    pub files: Vec<(String, String)>,
    pub script: Option<Script>,
}

/// A duration as `--timeout` takes it (`90s`, `10m`), or a number of seconds.
#[derive(Debug, Clone)]
pub struct Seconds(pub String);

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Seconds(s)),
            Value::Number(n) if n.is_u64() => Ok(Seconds(format!("{n}s"))),
            _ => Err(serde::de::Error::custom("expected a duration such as 90s or 10m, or whole seconds")),
        }
    }
}

/// A model a suite names: a `--model` value, or a map of the provider flags.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Its column in the table and its folder (default: the model's id).
    pub name: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
}

impl Model {
    pub fn named(id: &str) -> Model {
        Model { name: None, provider: None, model: Some(id.to_string()), base_url: None }
    }
    /// What the table and the folders call it.
    pub fn label(&self) -> String {
        let raw = self.name.clone().or_else(|| self.model.clone()).or_else(|| self.provider.clone());
        raw.as_deref().and_then(slug).unwrap_or_else(|| "default".into())
    }
}

/// A `models:` entry: `gpt-4o-mini`, or `{name, provider, model, base_url}`.
#[derive(Debug, Clone)]
struct ModelEntry(Model);

impl<'de> Deserialize<'de> for ModelEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ModelEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a model's id, or a map of name, provider, model and base_url")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> std::result::Result<ModelEntry, E> {
                Ok(ModelEntry(Model::named(s)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> std::result::Result<ModelEntry, A::Error> {
                Model::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(ModelEntry)
            }
        }
        d.deserialize_any(V)
    }
}

/// `models:`: a list of entries, or one line of ids (`a, b`).
#[derive(Debug, Clone)]
struct Models(Vec<Model>);

impl<'de> Deserialize<'de> for Models {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Models;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of models, or their ids separated by commas")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> std::result::Result<Models, E> {
                Ok(Models(s.split(',').map(str::trim).filter(|m| !m.is_empty()).map(Model::named).collect()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> std::result::Result<Models, A::Error> {
                let entries = Vec::<ModelEntry>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Models(entries.into_iter().map(|m| m.0).collect()))
            }
        }
        d.deserialize_any(V)
    }
}

/// `files:`: path → content, or a list of `{path, content}`.
#[derive(Debug, Clone, Default)]
struct Seeds(BTreeMap<String, Value>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Seed {
    path: String,
    #[serde(default)]
    content: Value,
}

impl<'de> Deserialize<'de> for Seeds {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Seeds;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of path to content, or a list of {path, content}")
            }
            fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Seeds, E> {
                Ok(Seeds::default())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> std::result::Result<Seeds, A::Error> {
                BTreeMap::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Seeds)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> std::result::Result<Seeds, A::Error> {
                let list = Vec::<Seed>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                let mut out = BTreeMap::new();
                for s in list {
                    if out.insert(s.path.clone(), s.content).is_some() {
                        return Err(serde::de::Error::custom(format!("`{}` is given twice", s.path)));
                    }
                }
                Ok(Seeds(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// A scripted model's answers for a case: a file, or the answers written in the suite.
#[derive(Debug, Clone)]
pub enum Script {
    File(Utf8PathBuf),
    Inline(Value),
}

/// A case ready to run.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    /// Its folder's name under the output folder.
    pub slug: String,
    pub goal: String,
    pub files: Vec<(String, String)>,
    pub pass_rate: f64,
    pub trials: Option<u32>,
    pub checks: Vec<Check>,
    /// Configuration keys, applied above `--config` and agent profiles.
    pub config: Map<String, Value>,
    pub agent: Option<String>,
    pub context: Option<String>,
    pub max_steps: Option<u32>,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub timeout: Option<String>,
    pub script: Option<Script>,
    /// The slots the goal runs for, in order (none: one run).
    pub slots: Vec<Slot>,
}

impl Case {
    /// Its trial's budgets as global flags, the case's over the user's (a run's command line and
    /// a queued trial's request alike).
    pub fn budget_flags(&self, g: &agentloop_engine::settings::Global) -> [(&'static str, Option<String>); 5] {
        [
            ("--max-steps", self.max_steps.or(g.max_steps).map(|n| n.to_string())),
            ("--max-reframes", g.max_reframes.map(|n| n.to_string())),
            ("--timeout", self.timeout.clone().or_else(|| g.timeout.clone())),
            ("--max-tokens", self.max_tokens.or(g.max_tokens).map(|n| n.to_string())),
            ("--max-cost", self.max_cost_usd.or(g.max_cost).map(|n| n.to_string())),
        ]
    }
}

/// A suite ready to run.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    /// Where it was read from (a file, `-`, `builtin:NAME`).
    pub source: String,
    pub trials: Option<u32>,
    pub models: Vec<Model>,
    pub cases: Vec<Case>,
}

/// Reads suite `text` from `source`; relative paths in it are taken from `dir`.
pub fn parse(text: &str, source: &str, dir: &Utf8Path, default_name: &str) -> Result<Suite> {
    let bad = |m: String| Error::usage(format!("{source}: {m}"));
    let file: SuiteFile =
        agentloop_config::config::parse_yaml(text).map_err(|e| bad(with_line(text, e.to_string())))?;
    let rate = file.pass_rate.unwrap_or(1.0);
    check_rate(rate).map_err(|m| bad(format!("pass_rate: {m}")))?;
    check_trials(file.trials).map_err(|m| bad(format!("trials: {m}")))?;
    let top = Settings {
        config: file.config,
        agent: file.agent,
        context: file.context,
        max_steps: file.max_steps,
        max_tokens: file.max_tokens,
        max_cost_usd: file.max_cost_usd,
        timeout: file.timeout,
        script: file.script,
        budgets: file.budgets,
    }
    .over(&file.defaults);
    if file.cases.is_empty() {
        return Err(bad("`cases` is empty: a suite needs at least one case".into()));
    }
    let mut cases: Vec<Case> = Vec::new();
    for (i, c) in file.cases.into_iter().enumerate() {
        let at = format!("cases[{i}] ({})", c.name);
        let case = case(c, i, &top, rate, source, dir).map_err(|m| bad(format!("{at}: {m}")))?;
        if let Some(other) = cases.iter().find(|o| o.slug == case.slug) {
            return Err(bad(format!("{at}: its name gives the same folder as case `{}`; rename one", other.name)));
        }
        cases.push(case);
    }
    let models: Vec<Model> = file.models.map(|m| m.0).unwrap_or_default();
    for (i, m) in models.iter().enumerate() {
        if m.model.as_deref().is_some_and(|id| id.trim().is_empty()) {
            return Err(bad(format!("models[{i}]: the model's id is empty")));
        }
        if models[..i].iter().any(|o| o.label() == m.label()) {
            return Err(bad(format!("models[{i}]: `{}` is named twice; give one a `name`", m.label())));
        }
    }
    let name = file.name.unwrap_or_else(|| default_name.to_string());
    Ok(Suite {
        name: slug(&name).unwrap_or_else(|| "suite".into()),
        source: source.into(),
        trials: file.trials,
        models,
        cases,
    })
}

/// A parser's message with the line of the key it names as unknown, when it gives none (a key
/// of the document's top level).
fn with_line(text: &str, message: String) -> String {
    if message.contains(" line ") {
        return message;
    }
    let key = message.split("unknown field `").nth(1).and_then(|r| r.split('`').next());
    let line = key.and_then(|k| {
        let at = format!("{k}:");
        text.lines().position(|l| l.trim_start().trim_start_matches("- ").starts_with(&at))
    });
    match line {
        Some(n) => format!("{message} at line {}", n + 1),
        None => message,
    }
}

fn check_rate(rate: f64) -> std::result::Result<(), String> {
    if (0.0..=1.0).contains(&rate) {
        Ok(())
    } else {
        Err(format!("{rate} is not a share between 0 and 1"))
    }
}

fn check_trials(n: Option<u32>) -> std::result::Result<(), String> {
    match n {
        Some(0) => Err("a case runs at least once (1 or more)".into()),
        _ => Ok(()),
    }
}

/// One case, checked, with the suite's settings under its own.
fn case(
    c: CaseFile,
    i: usize,
    top: &Settings,
    suite_rate: f64,
    source: &str,
    dir: &Utf8Path,
) -> std::result::Result<Case, String> {
    if c.goal.trim().is_empty() {
        return Err("`goal` is empty".into());
    }
    let rate = c.pass_rate.unwrap_or(suite_rate);
    check_rate(rate).map_err(|m| format!("pass_rate: {m}"))?;
    check_trials(c.trials).map_err(|m| format!("trials: {m}"))?;
    seeds_inside(&c.files, "files")?;
    let slots = slots_of(c.slots, dir)?;
    let mut checks = c.checks.0;
    if checks.is_empty() {
        checks.push(Check::Stop(super::checks_de::Stops(vec!["done".into()])));
    }
    for c in checks.iter_mut() {
        match c {
            Check::File(f) => f.schema = schema_file(f.schema.take(), dir)?,
            Check::Output(m) => m.schema = schema_file(m.schema.take(), dir)?,
            _ => {}
        }
    }
    checks.iter().try_for_each(valid_check)?;
    let s = Settings {
        config: c.config,
        agent: c.agent,
        context: c.context,
        max_steps: c.max_steps,
        max_tokens: c.max_tokens,
        max_cost_usd: c.max_cost_usd,
        timeout: c.timeout,
        script: c.script,
        budgets: c.budgets,
    }
    .over(top);
    if let Some(Seconds(t)) = &s.timeout {
        agentloop_types::clock::parse_duration(t).map_err(|e| format!("timeout: {e}"))?;
    }
    Ok(Case {
        slug: slug(&c.name).unwrap_or_else(|| format!("case-{}", i + 1)),
        name: c.name,
        goal: c.goal,
        files: c.files.0.into_iter().map(|(k, v)| (k, file_text(v))).collect(),
        pass_rate: rate,
        trials: c.trials,
        checks,
        config: config_of(s.config, source, dir)?,
        agent: s.agent,
        context: s.context,
        max_steps: s.max_steps,
        max_tokens: s.max_tokens,
        max_cost_usd: s.max_cost_usd,
        timeout: s.timeout.map(|Seconds(t)| t),
        script: script_of(s.script, dir)?,
        slots,
    })
}

/// Every seeded path relative and inside the workspace, and no file also a folder.
fn seeds_inside(files: &Seeds, key: &str) -> std::result::Result<(), String> {
    for path in files.0.keys() {
        if !inside(path) {
            return Err(format!(
                "{key}: `{path}` must be a relative path that stays inside the workspace (no `..`, no leading `/`)"
            ));
        }
        if let Some(under) = files.0.keys().find(|o| o.starts_with(&format!("{path}/"))) {
            return Err(format!("{key}: `{path}` is a file and the folder of `{under}`"));
        }
    }
    Ok(())
}

/// A case's slots, each named as `run --slot` takes a name (letters, digits, `.`, `_`, `-`),
/// none twice.
fn slots_of(slots: Vec<SlotFile>, dir: &Utf8Path) -> std::result::Result<Vec<Slot>, String> {
    let mut out: Vec<Slot> = Vec::new();
    for (i, s) in slots.into_iter().enumerate() {
        let key = format!("slots[{i}]");
        let name = s.slot.trim().to_string();
        if name.is_empty() || slug(&name).as_deref() != Some(name.as_str()) {
            return Err(format!("{key}.slot: `{}` is no slot name (letters, digits, `.`, `_`, `-`)", s.slot));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(format!("{key}.slot: `{name}` is named twice"));
        }
        seeds_inside(&s.files, &format!("{key}.files"))?;
        let files = s.files.0.into_iter().map(|(k, v)| (k, file_text(v))).collect();
        out.push(Slot { name, files, script: script_of(s.script, dir).map_err(|m| format!("{key}.{m}"))? });
    }
    Ok(out)
}

/// What a seeded file holds: its text as written; a number or `true` as written; a map or a
/// list as JSON (a `data.json` written as YAML); nothing (`~`) as an empty file.
fn file_text(v: Value) -> String {
    match v {
        Value::String(s) => s,
        Value::Null => String::new(),
        v @ (Value::Number(_) | Value::Bool(_)) => v.to_string(),
        v => agentloop_types::json::to_string_pretty(&v) + "\n",
    }
}

/// A case's configuration: a map, or a file (YAML or JSON) relative to the suite; every key
/// checked as `--config` checks it.
fn config_of(v: Option<Value>, source: &str, dir: &Utf8Path) -> std::result::Result<Map<String, Value>, String> {
    let (value, from) = match v {
        None | Some(Value::Null) => return Ok(Map::new()),
        Some(Value::String(p)) => {
            let path = dir.join(&p);
            let layer = agentloop_config::config::load_file(&path, Source::ConfigFlag)
                .map_err(|e| format!("config: {}", e.message))?
                .ok_or_else(|| format!("config: {path} does not exist"))?;
            (layer.value, path)
        }
        Some(v @ Value::Object(_)) => (v, Utf8PathBuf::from(source)),
        Some(_) => return Err("config: a map of configuration keys, or a file name".into()),
    };
    let layer = Layer { source: Source::ConfigFlag(from), value };
    layer.validate().map_err(|e| format!("config: {}", e.message))?;
    Ok(match layer.value {
        Value::Object(m) => m,
        _ => Map::new(),
    })
}

fn script_of(v: Option<Value>, dir: &Utf8Path) -> std::result::Result<Option<Script>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(p)) => {
            let path = agentloop_io::fs::absolute(&dir.join(&p));
            if !path.is_file() {
                return Err(format!("script: {path} is no file"));
            }
            Ok(Some(Script::File(path)))
        }
        Some(v @ (Value::Object(_) | Value::Array(_))) => Ok(Some(Script::Inline(v))),
        Some(_) => Err("script: a scripted model's file, or its answers (a list, or a map of phase to list)".into()),
    }
}

/// A check's `schema:` given as a file name (JSON or YAML, relative to the suite): its document.
fn schema_file(schema: Option<Value>, dir: &Utf8Path) -> std::result::Result<Option<Value>, String> {
    let Some(Value::String(name)) = schema else { return Ok(schema) };
    let path = dir.join(&name);
    let text = agentloop_io::fs::read_optional(&path)
        .map_err(|e| format!("schema: {}", e.message))?
        .ok_or_else(|| format!("schema: {path} does not exist"))?;
    agentloop_config::config::parse_yaml::<Value>(&text).map(Some).map_err(|e| format!("schema: {path}: {e}"))
}

/// Whether `path` names a place inside the workspace: relative, plain names only.
pub fn inside(path: &str) -> bool {
    let p = Utf8Path::new(path);
    !path.is_empty()
        && !path.contains('\0')
        && !path.contains('\\')
        && p.components().all(|c| matches!(c, Utf8Component::Normal(_)))
}

fn valid_check(c: &Check) -> std::result::Result<(), String> {
    match c {
        Check::Stop(s) => {
            for k in &s.0 {
                if k != "budget" && StopKind::parse(k, None).is_none_or(|p| p.as_str() != k) {
                    let all: Vec<&str> = StopKind::ALL.iter().map(|k| k.as_str()).collect();
                    return Err(format!(
                        "stop: `{k}` is no stop kind; one of {}, or budget (any limit)",
                        all.join(", ")
                    ));
                }
            }
            Ok(())
        }
        Check::File(f) => {
            if !inside(&f.path) {
                return Err(format!("file: `{}` must be a relative path inside the workspace", f.path));
            }
            valid_matcher(&f.matcher()).map_err(|m| format!("file {}: {m}", f.path))
        }
        Check::Output(m) => valid_matcher(m).map_err(|m| format!("output: {m}")),
        Check::CostAtMost(c) if !c.is_finite() || *c < 0.0 => Err(format!("cost_at_most: {c} is no cost")),
        _ => Ok(()),
    }
}

fn valid_matcher(m: &Matcher) -> std::result::Result<(), String> {
    if let Some(r) = &m.regex {
        regex::Regex::new(r).map_err(|e| {
            let why = e.to_string();
            format!(
                "regex: /{r}/ does not compile: {}",
                why.lines().last().unwrap_or_default().trim_start_matches("error: ")
            )
        })?;
    }
    if let Some(s) = &m.schema {
        jsonschema::validator_for(s).map_err(|e| format!("schema: not a usable JSON Schema: {e}"))?;
    }
    Ok(())
}

/// A name as a folder name: letters, digits, `.`, `_`, `-` kept, anything else `-`.
pub fn slug(name: &str) -> Option<String> {
    let s: String = name
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .collect();
    let s = s.trim_matches('-').to_string();
    (!s.is_empty() && s != "." && s != ".." && s.len() <= 100).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside() {
        for ok in ["a.txt", "d/e/f.md", "x y.txt"] {
            assert!(inside(ok), "{ok}");
        }
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "./a", "a\\b"] {
            assert!(!inside(bad), "{bad}");
        }
    }

    #[test]
    fn names_become_folder_names() {
        assert_eq!(slug("summarise notes").as_deref(), Some("summarise-notes"));
        assert_eq!(slug("../x").as_deref(), Some("..-x"));
        assert_eq!(slug(".."), None);
        assert_eq!(slug("qwen2.5:7b").as_deref(), Some("qwen2.5-7b"));
    }
}
