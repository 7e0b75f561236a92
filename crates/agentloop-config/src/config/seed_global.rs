//! The framework seed's global config file (its `config.json`: `version`, `paths`, `defaults`,
//! `tools`, `human_escalation`, `logging`) read as written: each section's keys are taken as
//! the agentloop keys they mean, and the ones with no meaning here are kept in `not_used` with
//! why, so `config show` names them instead of the file being refused or silently cut.
//!
//! The `tools` block needs nothing here (its per-tool keys are agentloop's own), and
//! `logging.level` is read case-insensitively by its kind. A key these sections do not have is
//! an error naming it, as any unknown key is.

use super::*;
use agentloop_types::error::{Error, Result};
use serde_json::{Map, Value};

/// Where a key of the seed's form goes: the agentloop key it means, or why it has none.
enum Meaning {
    Key(&'static [&'static str]),
    NotUsed(&'static str),
}

/// The seed's keys, by section, and what each means here.
const KEYS: &[(&str, &str, Meaning)] = &[
    ("paths", "skills_dir", Meaning::Key(&["skills", "dirs"])),
    ("paths", "memory_dir", Meaning::Key(&["memory", "dir"])),
    (
        "paths",
        "output_dir",
        Meaning::NotUsed(
            "a run's outputs live in its own folder (artifacts/, result.json, transcript.md), archived to runs/<run_id>/",
        ),
    ),
    (
        "paths",
        "config_dir",
        Meaning::NotUsed("agent profiles are read from agents/ in the workspace and in the user's config folder"),
    ),
    ("defaults", "max_turns", Meaning::Key(&["max_steps"])),
    ("defaults", "timeout_seconds", Meaning::Key(&["timeout"])),
    ("defaults", "llm_provider", Meaning::Key(&["llm", "provider"])),
    ("defaults", "llm_model", Meaning::Key(&["llm", "model"])),
    ("human_escalation", "triggers", Meaning::Key(&["escalation_triggers"])),
];

/// The sections only this form has: a file that names one of them is read in this form.
const SECTIONS: &[&str] = &["version", "paths", "defaults", "human_escalation"];

/// Whether a config file is written in the seed's global form.
pub fn is_seed_global(v: &Value) -> bool {
    v.as_object().is_some_and(|o| SECTIONS.iter().any(|s| o.contains_key(*s)))
}

/// The file's tree with the seed's sections taken as agentloop's keys. `file` names it in
/// errors. A section that is not a mapping, or a seed key and its agentloop key set to
/// different values, is an error naming both.
pub fn translate_seed_global(mut v: Value, file: &str) -> Result<Value> {
    let Some(obj) = v.as_object_mut() else { return Ok(v) };
    let mut not_used: Map<String, Value> = Map::new();
    if let Some(version) = obj.remove("version") {
        not_used.insert("version".into(), version_label(&version, file)?);
    }
    for section in ["paths", "defaults", "human_escalation"] {
        let Some(body) = obj.remove(section) else { continue };
        let Value::Object(mut body) = body else {
            return Err(Error::config(format!(
                "invalid configuration in {file} at key `{section}`: must be a mapping of keys"
            ))
            .with_hint(format!("write `{section}:` as a mapping, or remove it")));
        };
        if section == "human_escalation" {
            escalation_enabled(obj, &mut body, file)?;
        }
        translate_section(obj, section, body, file, &mut not_used)?;
    }
    // A Python logging format (`%(asctime)s ...`): agentloop writes its own line shape.
    if let Some(logging) = obj.get_mut("logging").and_then(Value::as_object_mut) {
        if logging.get("format").and_then(Value::as_str).is_some_and(|f| f.contains("%(")) {
            logging.remove("format");
            not_used.insert(
                "logging.format".into(),
                Value::String("a Python logging format; agentloop writes `text` lines (time, level, message) or `json` objects (`logging.format`)".into()),
            );
        }
    }
    if !not_used.is_empty() {
        obj.insert("not_used".into(), Value::Object(not_used));
    }
    Ok(v)
}

/// Why `version` is not used (it labels the format, nothing checks it); an error when it is
/// not a version text.
fn version_label(version: &Value, file: &str) -> Result<Value> {
    if !(version.is_string() || version.is_number()) {
        return Err(Error::config(format!(
            "invalid configuration in {file} at key `version`: must be a version text such as \"1.0.0\""
        ))
        .with_hint("write the format's version as text, or remove the key"));
    }
    Ok(Value::String(format!(
        "{version} is the format's version label; this form is read as written and no version is checked"
    )))
}

/// `human_escalation.enabled`, taken out of the section: `false` means no phrase escalates
/// (its triggers are dropped); `true` is what agentloop does anyway.
fn escalation_enabled(obj: &mut Map<String, Value>, body: &mut Map<String, Value>, file: &str) -> Result<()> {
    match body.remove("enabled") {
        None | Some(Value::Bool(true)) => Ok(()),
        Some(Value::Bool(false)) => {
            body.remove("triggers");
            put(obj, &["escalation_triggers"], Value::Array(vec![]), "human_escalation.enabled", file)
        }
        Some(_) => Err(Error::config(format!(
            "invalid configuration in {file} at key `human_escalation.enabled`: must be true or false"
        ))
        .with_hint("write true or false")),
    }
}

/// One section's keys: each set as the agentloop key it means, or noted in `not_used` with
/// why; a key the section does not have is an error naming the ones it has.
fn translate_section(
    obj: &mut Map<String, Value>,
    section: &str,
    body: Map<String, Value>,
    file: &str,
    not_used: &mut Map<String, Value>,
) -> Result<()> {
    let mut rest = Map::new();
    for (key, value) in body {
        match KEYS.iter().find(|(s, k, _)| *s == section && *k == key) {
            Some((_, _, Meaning::Key(path))) => {
                // `skills_dir` is one folder; `skills.dirs` a list of them.
                let value = match (path, value) {
                    (["skills", "dirs"], v @ Value::String(_)) => Value::Array(vec![v]),
                    (_, v) => v,
                };
                put(obj, path, value, &format!("{section}.{key}"), file)?;
            }
            Some((_, _, Meaning::NotUsed(why))) => {
                not_used.insert(format!("{section}.{key}"), Value::String((*why).to_string()));
            }
            None => {
                rest.insert(key, value);
            }
        }
    }
    let Some(key) = rest.keys().next() else { return Ok(()) };
    let known: Vec<String> = KEYS.iter().filter(|(s, _, _)| *s == section).map(|(_, k, _)| format!("`{k}`")).collect();
    let known = if section == "human_escalation" { "`enabled`, `triggers`".to_string() } else { known.join(", ") };
    Err(Error::config(format!(
        "invalid configuration in {file} at key `{section}.{key}`: unknown key, expected one of {known}"
    ))
    .with_hint("remove that key or rename it to one listed above"))
}

/// Sets `path` to `value`, unless the file sets it itself to something else (an error naming
/// both keys).
fn put(obj: &mut Map<String, Value>, path: &[&str], value: Value, from: &str, file: &str) -> Result<()> {
    let key = path.join(".");
    let mut root = Value::Object(std::mem::take(obj));
    let existing = path.iter().try_fold(&root, |cur, p| cur.get(*p));
    if existing.is_some_and(|e| e != &value) {
        *obj = match root {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        return Err(Error::config(format!(
            "invalid configuration in {file}: both `{from}` and `{key}` are set, to different values"
        ))
        .with_hint(format!("keep one: `{from}` is another name for `{key}`")));
    }
    let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    set_path(&mut root, &path, value);
    *obj = match root {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Ok(())
}
