//! Plugin descriptions: Ductile's `GET /plugin/{name}` answer and plugin `manifest.yaml` files
//! (`manifest_spec: ductile.plugin`), read into the same [`Plugin`] so both give one catalog.

use super::{Command, ConfigKey, Example, Plugin};
use agentloop_types::error::{Error, Result};
use agentloop_types::error::{Kind, ResultExt};
use camino::Utf8Path;
use serde_json::{json, Map, Value};

/// A plugin from an API answer or a parsed manifest; `source` names it in errors.
pub fn plugin_from(v: &Value, source: &str) -> Result<Plugin> {
    let bad = |what: String| Error::config(format!("{source}: {what}"));
    let name = v.get("name").and_then(Value::as_str).unwrap_or("").trim().to_string();
    // `__` separates plugin and command in tool names, so a plugin name may not hold it.
    if name.is_empty()
        || name.contains("__")
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(bad(format!(
            "`name` must be a plugin name of letters, digits, _ and - without `__` (got `{name}`)"
        )));
    }
    let description = v.get("description").and_then(Value::as_str).unwrap_or("").trim().to_string();
    let mut commands = Vec::new();
    // A list of {name, type, description, input_schema}, or a map name -> {type, ...}.
    let listed: Vec<(String, &Value)> = match v.get("commands") {
        Some(Value::Array(a)) => {
            a.iter().map(|c| (c.get("name").and_then(Value::as_str).unwrap_or("").to_string(), c)).collect()
        }
        Some(Value::Object(m)) => m.iter().map(|(k, c)| (k.clone(), c)).collect(),
        _ => return Err(bad(format!("plugin `{name}` has no `commands` list"))),
    };
    for (cname, c) in listed {
        if cname.is_empty() || !cname.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(bad(format!(
                "plugin `{name}`: a command name must be letters, digits, _ and - (got `{cname}`)"
            )));
        }
        commands.push(Command {
            kind: c.get("type").and_then(Value::as_str).unwrap_or("write").to_string(),
            description: c.get("description").and_then(Value::as_str).unwrap_or("").trim().to_string(),
            input_schema: schema_of(c.get("input_schema")),
            examples: examples_of(c),
            name: cname,
        });
    }
    // Plugin-level examples name their command (`command: say`).
    if let Some(Value::Array(list)) = v.get("examples") {
        for e in list {
            let Some(c) = e.get("command").and_then(Value::as_str) else { continue };
            if let Some(cmd) = commands.iter_mut().find(|x| x.name == c) {
                cmd.examples.extend(example(e));
            }
        }
    }
    Ok(Plugin { name, description, commands, config_keys: config_keys_of(v.get("config_keys")) })
}

/// A command's `example: {input, output}` or `examples: [...]`.
fn examples_of(c: &Value) -> Vec<Example> {
    let mut out: Vec<Example> = c.get("example").and_then(example).into_iter().collect();
    if let Some(Value::Array(list)) = c.get("examples") {
        out.extend(list.iter().filter_map(example));
    }
    out
}

fn example(v: &Value) -> Option<Example> {
    let e = Example {
        description: v.get("description").and_then(Value::as_str).unwrap_or("").trim().to_string(),
        input: v.get("input").cloned(),
        output: v.get("output").cloned(),
    };
    (e.input.is_some() || e.output.is_some()).then_some(e)
}

/// `config_keys` in the forms manifests write it: `{required: [...], optional: [...]}`, a list,
/// or a map of name to description; each key a name or `{name, description}`.
fn config_keys_of(v: Option<&Value>) -> Vec<ConfigKey> {
    let key = |k: &Value, required: bool| -> Option<ConfigKey> {
        match k {
            Value::String(n) => Some(ConfigKey { name: n.clone(), required, description: String::new() }),
            Value::Object(m) => Some(ConfigKey {
                name: m.get("name")?.as_str()?.to_string(),
                required: m.get("required").and_then(Value::as_bool).unwrap_or(required),
                description: m.get("description").and_then(Value::as_str).unwrap_or("").trim().to_string(),
            }),
            _ => None,
        }
    };
    let list = |v: Option<&Value>, required: bool| -> Vec<ConfigKey> {
        v.and_then(Value::as_array).into_iter().flatten().filter_map(|k| key(k, required)).collect()
    };
    match v {
        Some(Value::Array(_)) => list(v, false),
        Some(Value::Object(m)) if m.contains_key("required") || m.contains_key("optional") => {
            let mut out = list(m.get("required"), true);
            out.extend(list(m.get("optional"), false));
            out
        }
        Some(Value::Object(m)) => m
            .iter()
            .map(|(name, d)| ConfigKey {
                name: name.clone(),
                required: d.get("required").and_then(Value::as_bool).unwrap_or(false),
                description: d
                    .as_str()
                    .or_else(|| d.get("description").and_then(Value::as_str))
                    .unwrap_or("")
                    .trim()
                    .to_string(),
            })
            .collect(),
        _ => vec![],
    }
}

/// An input schema as a JSON Schema object: a schema as given, the manifest shorthand
/// `{field: type}` as an object of those properties, none as any object.
pub fn schema_of(v: Option<&Value>) -> Value {
    let Some(Value::Object(m)) = v else {
        return json!({"type": "object"});
    };
    let is_schema =
        ["type", "properties", "$schema", "anyOf", "oneOf", "allOf", "$ref"].iter().any(|k| m.contains_key(*k));
    if is_schema {
        let mut s = m.clone();
        s.entry("type").or_insert_with(|| json!("object"));
        return Value::Object(s);
    }
    let props: Map<String, Value> = m
        .iter()
        .map(|(k, t)| match t {
            Value::String(t) => (k.clone(), json!({"type": t})),
            other => (k.clone(), other.clone()),
        })
        .collect();
    json!({"type": "object", "properties": props})
}

/// Every `<dir>/<plugin>/manifest.yaml` (and `<dir>/manifest.yaml`), sorted by plugin name.
pub fn load_dir(dir: &Utf8Path) -> Result<Vec<Plugin>> {
    let entries =
        dir.read_dir_utf8().context_as(Kind::Config, format!("ductile manifests: cannot read the folder {dir}"))?;
    let mut files: Vec<camino::Utf8PathBuf> =
        entries.filter_map(|e| e.ok()).map(|e| e.path().join("manifest.yaml")).filter(|p| p.is_file()).collect();
    if dir.join("manifest.yaml").is_file() {
        files.push(dir.join("manifest.yaml"));
    }
    let mut plugins = Vec::new();
    for f in files {
        plugins.push(load_file(&f)?);
    }
    plugins.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(plugins)
}

/// One manifest file; it must say `manifest_spec: ductile.plugin`.
pub fn load_file(path: &Utf8Path) -> Result<Plugin> {
    let text = agentloop_io::fs::read_to_string(path)?;
    let v: Value =
        agentloop_config::config::parse_yaml(&text).context_as(Kind::Config, format!("invalid YAML in {path}"))?;
    match v.get("manifest_spec").and_then(Value::as_str) {
        Some("ductile.plugin") => {}
        other => {
            return Err(Error::config(format!(
                "{path}: `manifest_spec` is {}, not ductile.plugin",
                other.map(|s| format!("`{s}`")).unwrap_or_else(|| "missing".into())
            )))
        }
    }
    plugin_from(&v, path.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_and_map_manifests_and_the_api_answer_give_one_plugin() {
        let api = json!({"name": "echo", "description": "Echo", "protocol": 2, "commands": [
            {"name": "poll", "type": "write", "description": "Emit", "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}}},
            {"name": "health", "type": "read"}]});
        let yaml_list: Value = serde_yaml_ng::from_str("manifest_spec: ductile.plugin\nname: echo\ndescription: Echo\ncommands:\n  - name: poll\n    type: write\n    description: Emit\n    input_schema: {message: string}\n  - name: health\n    type: read\n").unwrap();
        let yaml_map: Value = serde_yaml_ng::from_str("manifest_spec: ductile.plugin\nname: echo\ndescription: Echo\ncommands:\n  poll: {type: write, description: Emit, input_schema: {message: string}}\n  health: {type: read}\n").unwrap();
        let a = plugin_from(&api, "api").unwrap();
        assert_eq!(plugin_from(&yaml_list, "list").unwrap(), a);
        assert_eq!(plugin_from(&yaml_map, "map").unwrap(), a);
        assert!(plugin_from(&json!({"name": "bad name", "commands": []}), "x").is_err());
        assert!(plugin_from(&json!({"name": "a__b", "commands": []}), "x").is_err());
        assert!(plugin_from(&json!({"name": "p"}), "x").unwrap_err().message.contains("no `commands`"));
    }
}
