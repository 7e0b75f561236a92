//! The built-in tools as one table. Each tool is a type implementing [`Tool`] (in
//! [`super::tool`]): its name, its side effect, its description, its arguments as a struct
//! (serde + schemars) and its handler. [`BUILTINS`] lists them once; the registry's specs (what
//! the Plan prompt, `skills gen`, `tools list` and the answer schema show) and Act's dispatch
//! both come from it, so adding a tool is one entry the compiler checks, not a schema, a spec and
//! a `match` arm kept in step. This file only registers: the tools' files import what a tool is
//! from `tool.rs`, never from here.
//!
//! The registry validates a call's arguments against the schema sent (see
//! [`super::tool::args_schema`]) before the handler deserializes them into the struct; the
//! struct accepts everything the schema allows (a whole number written `3.0` included), so an
//! argument the model was told is valid is never refused.

use super::tool::{Call, Tool};
use super::{files, grep, memory, net, shell, ToolResult, ToolSpec};
use agentloop_config::config::Config;
use camino::Utf8Path;
use serde::Deserialize;
use serde_json::Value;

/// One row of the table: a tool type's parts as plain functions.
pub struct Builtin {
    pub name: &'static str,
    pub enabled: fn(&Config) -> bool,
    pub spec: fn(&Config, &Utf8Path) -> ToolSpec,
    /// Deserializes the arguments into the tool's args struct and runs its handler.
    pub run: fn(&Call, &Value) -> ToolResult,
    /// Whether arguments deserialize into the args struct, without running anything (the
    /// promise that a schema-valid argument is taken is tested with it).
    pub fits: fn(&Value) -> Result<(), serde_json::Error>,
}

const fn entry<T: Tool>() -> Builtin {
    Builtin { name: T::NAME, enabled: T::enabled, spec: spec_of::<T>, run: run_of::<T>, fits: fits::<T> }
}

/// Every built-in tool, in the order they are listed to the model.
pub const BUILTINS: &[Builtin] = &[
    entry::<files::FileRead>(),
    entry::<files::FileWrite>(),
    entry::<files::ListDir>(),
    entry::<grep::Grep>(),
    entry::<net::HttpCall>(),
    entry::<net::WebFetch>(),
    entry::<super::SkillRead>(),
    entry::<super::Finish>(),
    entry::<shell::Shell>(),
    entry::<memory::MemorySave>(),
    entry::<memory::MemorySearch>(),
    entry::<memory::MemoryRead>(),
];

/// The specs of the built-ins this config enables.
pub fn specs(cfg: &Config, root: &Utf8Path) -> Vec<ToolSpec> {
    BUILTINS.iter().filter(|b| (b.enabled)(cfg)).map(|b| (b.spec)(cfg, root)).collect()
}

/// The enabled built-in of that name.
pub fn find(cfg: &Config, name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name && (b.enabled)(cfg))
}

fn spec_of<T: Tool>(cfg: &Config, root: &Utf8Path) -> ToolSpec {
    ToolSpec {
        name: T::NAME.into(),
        description: T::description(cfg, root),
        parameters: T::schema(cfg),
        side_effect: T::SIDE_EFFECT,
        timeout: T::timeout(cfg),
        output_cap: cfg.tools.output_cap,
    }
}

fn run_of<T: Tool>(call: &Call, args: &Value) -> ToolResult {
    // The registry validated the arguments against the schema sent, which the struct accepts
    // in full; a failure here is a bug, reported as such and naming the field serde names.
    match T::Args::deserialize(args) {
        Ok(a) => T::run(call, a),
        Err(e) => {
            ToolResult::err(format!("invalid arguments: the arguments do not fit tool `{}`: {e}", T::NAME), false)
        }
    }
}

fn fits<T: Tool>(args: &Value) -> Result<(), serde_json::Error> {
    T::Args::deserialize(args).map(drop)
}

#[cfg(test)]
mod tests {
    use super::super::tool::{args_schema, Whole};
    use super::super::{Registry, ToolEnv};
    use super::*;
    use schemars::JsonSchema;

    fn cfg() -> Config {
        let mut c = Config::default();
        c.tools.shell.enabled = true;
        c.tools.memory.enabled = true;
        c
    }

    #[test]
    fn every_builtin_is_one_row_with_a_generated_schema_and_a_handler() {
        let cfg = cfg();
        let root = Utf8Path::new(".");
        let reg = Registry::new(&cfg, root).unwrap();
        let mut names: Vec<&str> = BUILTINS.iter().map(|b| b.name).collect();
        let listed: Vec<&str> = reg.all().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(listed, names, "the registry lists the table, in its order");
        for b in BUILTINS {
            let spec = (b.spec)(&cfg, root);
            assert_eq!(spec.name, b.name);
            let p = &spec.parameters;
            assert_eq!(p["type"], "object", "{}", b.name);
            assert_eq!(p["additionalProperties"], false, "{}: closed like its struct", b.name);
            assert!(p["required"].is_array(), "{}", b.name);
            assert!(p.get("$schema").is_none() && p.get("title").is_none(), "{}", b.name);
            // The handler is reached through the table: an argument the struct refuses comes
            // back as an error from this row, not a panic or another tool's answer.
            let tools = crate::skills::SkillSet::default();
            let env = ToolEnv { root, config: &cfg, skills: &tools, artifact_stem: "t".into() };
            let r = (b.run)(&Call { env: &env, registry: &reg, spec: &spec }, &serde_json::json!({"zz": 1}));
            assert!(!r.is_ok(), "{}", b.name);
            assert!(r.error.unwrap_or_default().contains(&format!("tool `{}`", b.name)));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), BUILTINS.len(), "a name appears once");
    }

    /// A value for every property the schema describes, at its limits, whole numbers written
    /// as floats: what the model may send.
    fn sample(schema: &Value) -> Value {
        if let Some(e) = schema["enum"].as_array() {
            return e.last().cloned().unwrap_or(Value::Null);
        }
        match schema["type"].as_str() {
            Some("string") => serde_json::json!("a"),
            Some("boolean") => serde_json::json!(true),
            Some("integer") => {
                let n = schema["maximum"].as_u64().or(schema["minimum"].as_u64()).unwrap_or(7);
                serde_json::json!(n as f64)
            }
            Some("array") => serde_json::json!([sample(&schema["items"])]),
            Some("object") => match schema["properties"].as_object() {
                Some(props) => Value::Object(props.iter().map(|(k, s)| (k.clone(), sample(s))).collect()),
                None => serde_json::json!({"x-key": sample(&schema["additionalProperties"])}),
            },
            other => panic!("no sample for {other:?}"),
        }
    }

    #[test]
    fn an_argument_valid_against_the_schema_sent_is_taken() {
        let cfg = cfg();
        for b in BUILTINS {
            let schema = (b.spec)(&cfg, Utf8Path::new(".")).parameters;
            let full = sample(&schema);
            crate::tools::validate(&schema, &full).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            (b.fits)(&full).unwrap_or_else(|e| panic!("{}: {full} is valid but refused: {e}", b.name));
            // The required fields alone.
            let required: Vec<&str> = schema["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            let least: serde_json::Map<String, Value> = full
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| required.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let least = Value::Object(least);
            crate::tools::validate(&schema, &least).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            (b.fits)(&least).unwrap_or_else(|e| panic!("{}: {least} is valid but refused: {e}", b.name));
        }
    }

    #[test]
    fn off_by_default_tools_stay_out() {
        let cfg = Config::default();
        let names: Vec<String> = specs(&cfg, Utf8Path::new(".")).into_iter().map(|s| s.name).collect();
        assert!(!names.iter().any(|n| n == "shell" || n.starts_with("memory_")), "{names:?}");
        assert!(find(&cfg, "shell").is_none() && find(&cfg, "file_read").is_some());
    }

    #[test]
    fn a_whole_number_is_read_as_the_schema_allows() {
        let w = |v: Value| Whole::deserialize(&v).map(Whole::get);
        assert_eq!(w(serde_json::json!(3)).unwrap(), 3);
        assert_eq!(w(serde_json::json!(3.0)).unwrap(), 3);
        assert_eq!(w(serde_json::json!(1e30)).unwrap(), u64::MAX);
        assert_eq!(w(serde_json::json!(-2)).unwrap(), 0);
        assert!(w(serde_json::json!(2.5)).is_err());
        assert!(w(serde_json::json!("3")).is_err());
    }

    #[test]
    fn an_optional_field_is_sent_as_its_type_and_keys_keep_their_order() {
        #[derive(Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct A {
            /// Said last
            #[schemars(range(min = 1), extend("default" = 2))]
            n: Option<Whole>,
        }
        let s = args_schema::<A>();
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"type":"object","properties":{"n":{"type":"integer","minimum":1,"default":2,"description":"Said last"}},"required":[],"additionalProperties":false}"#
        );
    }
}
