//! The built-in tools as one table. Each tool is a type implementing [`Tool`]: its name, its
//! side effect, its description, its arguments as a struct (serde + schemars) and its handler.
//! [`BUILTINS`] lists them once; the registry's specs (what the Plan prompt, `skills gen`,
//! `tools list` and the answer schema show) and Act's dispatch both come from it, so adding a
//! tool is one entry the compiler checks, not a schema, a spec and a `match` arm kept in step.
//!
//! The schema sent for a tool is generated from its args struct and brought into the form the
//! tools have always been described in (see [`args_schema`]): the same keys in the same order,
//! so prompts, goldens and cached answers see the same bytes. The registry validates a call's
//! arguments against that schema before the handler deserializes them into the struct; the
//! struct accepts everything the schema allows (a whole number written `3.0` included), so an
//! argument the model was told is valid is never refused.

use super::{files, grep, memory, net, shell, Registry, SideEffect, ToolEnv, ToolResult, ToolSpec};
use crate::config::Config;
use camino::Utf8Path;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::borrow::Cow;
use std::time::Duration;

/// What a handler gets besides its arguments.
pub struct Call<'a> {
    pub env: &'a ToolEnv<'a>,
    /// The registry the call came through (skill_read checks a skill's required tools in it).
    pub registry: &'a Registry,
    /// The spec called, with its configured timeout and output cap.
    pub spec: &'a ToolSpec,
}

/// A built-in tool.
pub trait Tool {
    const NAME: &'static str;
    const SIDE_EFFECT: SideEffect;
    /// The arguments; its JSON Schema is what the model is shown.
    type Args: DeserializeOwned + JsonSchema;
    /// The description the model is shown (some name configured values).
    fn description(cfg: &Config, root: &Utf8Path) -> String;
    /// Whether the tool exists under this config (shell and memory are off by default).
    fn enabled(_cfg: &Config) -> bool {
        true
    }
    fn timeout(cfg: &Config) -> Duration {
        cfg.tools.timeout_of(Self::NAME)
    }
    /// The parameters' schema; a tool whose field descriptions name configured values adjusts it.
    fn schema(_cfg: &Config) -> Value {
        args_schema::<Self::Args>()
    }
    fn run(call: &Call, args: Self::Args) -> ToolResult;
}

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

/// An args struct's schema in the form sent: generated (`crate::tool_spec::schema_for`), with an
/// optional field described by its own type (a call leaves it out; null is not offered), an
/// empty `required` kept, and each schema's keys in one fixed order.
pub fn args_schema<T: JsonSchema>() -> Value {
    let mut v = crate::tool_spec::schema_for::<T>();
    if let Some(o) = v.as_object_mut() {
        o.entry("required").or_insert_with(|| Value::Array(vec![]));
        if let Some(Value::Object(props)) = o.get_mut("properties") {
            props.values_mut().for_each(drop_null);
        }
    }
    order_keys(&mut v);
    v
}

/// `type: ["string", "null"]` becomes `type: "string"`; a null in `enum` goes too.
fn drop_null(v: &mut Value) {
    let Some(o) = v.as_object_mut() else { return };
    if let Some(Value::Array(types)) = o.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let t = types.remove(0);
            o.insert("type".into(), t);
        }
    }
    if let Some(Value::Array(values)) = o.get_mut("enum") {
        values.retain(|x| !x.is_null());
    }
}

/// The order keys are written in: what a value is first, its limits next, its description last.
const KEY_ORDER: &[&str] = &[
    "type",
    "properties",
    "required",
    "enum",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "pattern",
    "additionalProperties",
    "default",
    "description",
];

fn order_keys(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let mut pairs: Vec<(String, Value)> = std::mem::take(o).into_iter().collect();
            // Stable: keys outside the list keep their generated order, after the known ones.
            pairs.sort_by_key(|(k, _)| KEY_ORDER.iter().position(|x| x == k).unwrap_or(KEY_ORDER.len()));
            for (k, mut child) in pairs {
                // Property names are data, not keywords: only their schemas are ordered.
                if k == "properties" {
                    if let Value::Object(props) = &mut child {
                        props.values_mut().for_each(order_keys);
                    }
                } else {
                    order_keys(&mut child);
                }
                o.insert(k, child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(order_keys),
        _ => {}
    }
}

/// A count as JSON Schema's `integer` allows it: `3` and `3.0` alike. A number past u64
/// saturates and a negative one is 0; the schemas' limits keep both from being sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Whole(pub u64);

impl Whole {
    pub fn get(self) -> u64 {
        self.0
    }
}

impl JsonSchema for Whole {
    fn schema_name() -> Cow<'static, str> {
        "Whole".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "integer"})
    }
}

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = serde_json::Number::deserialize(d)?;
        if let Some(u) = n.as_u64() {
            return Ok(Whole(u));
        }
        if n.as_i64().is_some() {
            return Ok(Whole(0));
        }
        match n.as_f64() {
            // `as` saturates: 1e30 is u64::MAX, -3.0 is 0.
            Some(f) if f.fract() == 0.0 => Ok(Whole(f as u64)),
            _ => Err(serde::de::Error::custom(format!("expected a whole number, got {n}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
