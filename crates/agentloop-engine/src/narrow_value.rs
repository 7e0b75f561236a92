//! Narrowing rules for one value that need only the trusted configuration: a repeat of your own
//! value, the choices of which only some narrow, the HTTP cache's floor. The table that applies
//! them is [`crate::policy`]; an error here is the reason the value widens, which it wraps.

use agentloop_config::config::Config;
use serde_json::Value;

/// Whether `v` is exactly what the trusted configuration already has at `key`: repeating your
/// own value widens nothing (a profile copied from your config, `tools.http.allow_private: true`
/// where yours says so). Only values whose meaning does not depend on where they are written
/// count: booleans, numbers, and names — never a path (`./mem` in a workspace is another folder
/// than in your config), a map, or the text of a key that names a program, its arguments,
/// environment or folder.
pub fn repeats(key: &str, v: &Value, base: &Config) -> bool {
    // What names a program, its arguments, its environment or a place is read where it is
    // written (a command's `cwd: tools`, `args: [server.py]` in a workspace are that workspace's
    // own), so only the plain values of other keys repeat yours.
    let last = key.rsplit('.').next().unwrap_or(key);
    let placed = key.starts_with("mcp.")
        || key.contains(".env.")
        || ["cwd", "dir", "dirs", "file", "command", "args", "cmd", "env", "script", "output_schema"].contains(&last)
        || last.ends_with("_cmd")
        || last.ends_with("_dir")
        || last.ends_with("_file")
        || last.ends_with("_paths")
        || last.ends_with("manifests");
    if placed && !matches!(v, Value::Bool(_) | Value::Number(_)) {
        return false;
    }
    let name = |s: &str| !s.is_empty() && !s.contains('/') && !s.starts_with('.') && !s.starts_with('~');
    let plain = match v {
        Value::Bool(_) | Value::Number(_) => true,
        Value::String(s) => name(s),
        Value::Array(items) => items.iter().all(|i| match i {
            Value::String(s) => name(s),
            Value::Number(_) | Value::Bool(_) => true,
            _ => false,
        }),
        _ => false,
    };
    plain && agentloop_types::json::to_value(base).pointer(&format!("/{}", key.replace('.', "/"))) == Some(v)
}

/// `tools.http.cache`: `off`, or a floor no longer than the trusted one, only makes answers
/// fresher (the floor applies when an answer is read).
pub fn http_cache(v: &Value, base: &Config, whose: &str) -> std::result::Result<(), String> {
    match serde_json::from_value::<agentloop_config::config::HttpCache>(v.clone()) {
        Ok(agentloop_config::config::HttpCache::Off) => Ok(()),
        Ok(agentloop_config::config::HttpCache::On { floor })
            if base.tools.http.cache.floor().is_some_and(|b| floor <= b) =>
        {
            Ok(())
        }
        Ok(_) => Err(format!("a floor above {whose} tools.http.cache; only `off` or a shorter floor")),
        Err(e) => Err(e.to_string()),
    }
}

/// `values_check`: a judge as well as the phrases only declines more tasks, so only `model`
/// narrows a trusted `model`.
pub fn values_check(v: &Value, base: &Config) -> std::result::Result<(), String> {
    match serde_json::from_value::<agentloop_config::config::ValuesCheck>(v.clone()) {
        Ok(agentloop_config::config::ValuesCheck::Model) => Ok(()),
        Ok(_) if base.values_check == agentloop_config::config::ValuesCheck::Words => Ok(()),
        Ok(_) => Err("the trusted `model` judge may not be turned off (only `model` narrows)".into()),
        Err(_) => Err("must be `words` or `model`".into()),
    }
}

/// `frame`: a Definition of Done of the model's own items holds a run to more than the goal
/// alone, so only `model` narrows a trusted `goal`.
pub fn frame(v: &Value, base: &Config) -> std::result::Result<(), String> {
    match serde_json::from_value::<agentloop_config::config::FrameFrom>(v.clone()) {
        Ok(agentloop_config::config::FrameFrom::Model) => Ok(()),
        Ok(_) if base.frame == agentloop_config::config::FrameFrom::Goal => Ok(()),
        Ok(_) => Err(
            "a Definition of Done of the goal alone holds a run to less than the model's items (only `model` narrows)"
                .into(),
        ),
        Err(_) => Err("must be `model` or `goal`".into()),
    }
}

/// `memory.scope`: `workspace`, or `user` when the trusted scope already is.
pub fn memory_scope(v: &Value, base: &Config) -> std::result::Result<(), String> {
    match serde_json::from_value::<agentloop_config::config::MemoryScope>(v.clone()) {
        Ok(agentloop_config::config::MemoryScope::Workspace) => Ok(()),
        Ok(_) if base.memory.scope == agentloop_config::config::MemoryScope::User => Ok(()),
        Ok(_) => Err("the user's shared store is outside the workspace (only `workspace` narrows)".into()),
        Err(_) => Err("must be `workspace` or `user`".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::repeats;
    use serde_json::json;

    #[test]
    fn only_plain_values_of_keys_that_name_no_program_or_place_repeat_yours() {
        let mut base = agentloop_config::config::Config::default();
        base.tools.http.allow_private = true;
        base.tools.shell.allow = vec!["git".into()];
        base.llm.api_key_cmd = Some(vec!["pass".into(), "show".into(), "openai".into()]);
        assert!(repeats("tools.http.allow_private", &json!(true), &base));
        assert!(repeats("tools.shell.allow", &json!(["git"]), &base));
        assert!(!repeats("tools.shell.allow", &json!(["git", "sh"]), &base));
        assert!(!repeats("llm.api_key_cmd", &json!(["pass", "show", "openai"]), &base), "a command is never a repeat");
        assert!(!repeats("tools.http.allow_private", &json!(false), &base), "not the same value");
    }
}
