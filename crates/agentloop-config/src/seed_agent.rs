//! The framework seed's agent file (an `agents/NAME.json` with `agent_id`, `llm`, `limits`,
//! `tools`, `skills`, `memory`, `sandbox`) read as an agent profile: each of its fields becomes
//! the configuration key that does the same, and the result is an ordinary profile layer, held
//! to the same validation and trust rules as any other.
//!
//! A field agentloop cannot honour is refused naming it, never dropped: `skills.auto_load:
//! false` (skills are always offered, read when one applies) and `memory.session_persistence:
//! false` (every run is kept as its own folder). Keys of agentloop's own configuration may sit
//! beside the seed's and pass through unchanged.

use agentloop_types::error::{Error, Result};
use camino::Utf8Path;
use serde_json::{json, Map, Value};

/// Whether a profile's value is in the seed's form (it names its `agent_id`).
pub fn is_seed_form(v: &Value) -> bool {
    v.get("agent_id").is_some()
}

/// The seed's agent file as configuration keys. `path` names the file in errors; its stem is
/// the profile's name, which `agent_id` must equal.
pub fn translate(v: Value, path: &Utf8Path) -> Result<Value> {
    let Value::Object(mut m) = v else { return Ok(v) };
    let bad = |key: &str, why: String| {
        Error::config(format!("invalid agent profile {path} at key `{key}`: {why}")).with_hint(
            "fix that field, or write the profile with agentloop's own keys (`agentloop agents show NAME` prints them)",
        )
    };
    let mut out = Map::new();
    let id = m.remove("agent_id").unwrap_or_default();
    let stem = path.file_stem().unwrap_or_default();
    if id.as_str() != Some(stem) {
        return Err(bad(
            "agent_id",
            format!("{id} is not the file's name `{stem}` (a profile is chosen by its file name)"),
        ));
    }
    let text = match (take_str(&mut m, "name", &bad)?, take_str(&mut m, "description", &bad)?) {
        (Some(n), Some(d)) => Some(format!("{n}: {d}")),
        (n, d) => n.or(d),
    };
    if let Some(t) = text {
        out.insert("description".into(), json!(t));
    }
    if let Some(llm) = m.remove("llm") {
        out.insert("llm".into(), object(llm, "llm", &bad)?.into());
    }
    if let Some(limits) = m.remove("limits") {
        limits_part(object(limits, "limits", &bad)?, &mut out, &bad)?;
    }
    if let Some(tools) = m.remove("tools") {
        let mut t = object(tools, "tools", &bad)?;
        if let Some(on) = t.remove("enabled").filter(narrows_something) {
            out.insert("allowed_tools".into(), on);
        }
        out.insert("tools".into(), t.into());
    }
    if let Some(skills) = m.remove("skills") {
        out.insert("skills".into(), skills_part(object(skills, "skills", &bad)?, &bad)?.into());
    }
    if let Some(memory) = m.remove("memory") {
        out.insert("memory".into(), memory_part(object(memory, "memory", &bad)?, &bad)?.into());
    }
    if let Some(sandbox) = m.remove("sandbox") {
        let mut s = object(sandbox, "sandbox", &bad)?;
        if let Some(paths) = s.remove("root_paths") {
            let t = out.entry("tools").or_insert_with(|| json!({}));
            if t.get("write_paths").is_some() {
                return Err(bad("sandbox.root_paths", "is set twice: with tools.write_paths too".into()));
            }
            t["write_paths"] = paths;
        }
        if let Some(k) = s.keys().next() {
            return Err(bad(&format!("sandbox.{k}"), "is not a field of the seed's sandbox (root_paths)".into()));
        }
    }
    // The rest are agentloop's own keys, validated as any profile's.
    for (k, v) in m {
        if out.contains_key(&k) {
            return Err(bad(&k, "is set twice: once by a seed field and once directly".into()));
        }
        out.insert(k, v);
    }
    Ok(Value::Object(out))
}

type Bad<'a> = &'a dyn Fn(&str, String) -> Error;

/// An `enabled` list narrows only when it names something (the seed's loader reads an empty
/// one as "not narrowed").
fn narrows_something(v: &Value) -> bool {
    v.as_array().is_none_or(|a| !a.is_empty())
}

/// `limits`: `max_turns` is `max_steps`, `timeout_seconds` is `timeout`.
fn limits_part(limits: Map<String, Value>, out: &mut Map<String, Value>, bad: Bad) -> Result<()> {
    for (k, v) in limits {
        match k.as_str() {
            "max_turns" => out.insert("max_steps".into(), v),
            "timeout_seconds" => match v.as_u64() {
                Some(s) => out.insert("timeout".into(), json!(format!("{s}s"))),
                None => return Err(bad("limits.timeout_seconds", "must be a whole number of seconds".into())),
            },
            _ => out.insert(k, v),
        };
    }
    Ok(())
}

/// `skills`: `enabled` is `only`; `auto_load: false` cannot be honoured.
fn skills_part(mut s: Map<String, Value>, bad: Bad) -> Result<Map<String, Value>> {
    match s.remove("auto_load") {
        None | Some(Value::Bool(true)) => {}
        Some(v) => {
            return Err(bad(
                "skills.auto_load",
                format!("{v} cannot be honoured: the skills are always listed for the model, which reads one when it applies (narrow them with skills.enabled)"),
            ))
        }
    }
    if let Some(on) = s.remove("enabled").filter(narrows_something) {
        s.insert("only".into(), on);
    }
    Ok(s)
}

/// `memory`: `long_term_enabled` is `enabled`; `session_persistence: false` cannot be honoured.
fn memory_part(mut m: Map<String, Value>, bad: Bad) -> Result<Map<String, Value>> {
    match m.remove("session_persistence") {
        None | Some(Value::Bool(true)) => {}
        Some(v) => {
            return Err(bad(
                "memory.session_persistence",
                format!("{v} cannot be honoured: every run is kept as its own folder (runs/<run_id>/)"),
            ))
        }
    }
    if let Some(on) = m.remove("long_term_enabled") {
        m.insert("enabled".into(), on);
    }
    Ok(m)
}

fn take_str(m: &mut Map<String, Value>, key: &str, bad: Bad) -> Result<Option<String>> {
    match m.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(bad(key, format!("{v} is not text"))),
    }
}

fn object(v: Value, key: &str, bad: Bad) -> Result<Map<String, Value>> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(bad(key, format!("{other} is not an object"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_seed_field_becomes_its_key_and_what_cannot_be_honoured_is_named() {
        let seed = json!({"agent_id": "main_agent", "name": "Main", "description": "General",
            "llm": {"provider": "anthropic", "model": "m", "temperature": 0.0, "max_tokens": 4096},
            "system_prompt": "Hi", "limits": {"max_turns": 25, "timeout_seconds": 900},
            "tools": {"enabled": ["file_read"], "disabled": []},
            "skills": {"auto_load": true, "enabled": ["github"], "disabled": []},
            "memory": {"session_persistence": true, "long_term_enabled": true, "auto_index": true},
            "sandbox": {"root_paths": ["./SANDBOX/main_agent"]}});
        let v = translate(seed.clone(), Utf8Path::new("agents/main_agent.json")).unwrap();
        assert_eq!(v["description"], "Main: General");
        assert_eq!((v["max_steps"].clone(), v["timeout"].clone()), (json!(25), json!("900s")));
        assert_eq!(v["allowed_tools"], json!(["file_read"]));
        assert_eq!(v["tools"], json!({"disabled": [], "write_paths": ["./SANDBOX/main_agent"]}));
        assert_eq!(v["skills"], json!({"only": ["github"], "disabled": []}));
        assert_eq!(v["memory"], json!({"enabled": true, "auto_index": true}));
        let e = translate(seed.clone(), Utf8Path::new("agents/other.json")).unwrap_err();
        assert!(e.message.contains("`agent_id`"), "{}", e.message);
        let mut off = seed;
        off["skills"]["auto_load"] = json!(false);
        let e = translate(off, Utf8Path::new("agents/main_agent.json")).unwrap_err();
        assert!(e.message.contains("`skills.auto_load`"), "{}", e.message);
    }
}
