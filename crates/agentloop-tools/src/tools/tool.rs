//! What a built-in tool is: the [`Tool`] trait each tool type implements, the [`Call`] its
//! handler gets, the [`Whole`] number its counts are read as, and [`args_schema`], the form an
//! args struct's schema is sent in: the same keys in the same order the tools have always been
//! described in, so prompts, goldens and cached answers see the same bytes. The tools' files
//! import this one; [`super::builtin`] lists them.

use super::{Registry, SideEffect, ToolEnv, ToolResult, ToolSpec};
use agentloop_config::config::Config;
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

/// An args struct's schema in the form sent: generated (`agentloop_types::tool_spec::schema_for`), with an
/// optional field described by its own type (a call leaves it out; null is not offered), an
/// empty `required` kept, and each schema's keys in one fixed order.
pub fn args_schema<T: JsonSchema>() -> Value {
    let mut v = agentloop_types::tool_spec::schema_for::<T>();
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
