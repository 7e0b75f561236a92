//! What a start asks for its own run: an output schema, and budgets in its `context` that may
//! only narrow the root's.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::schema::handle::StartPayload;
use camino::Utf8PathBuf;
use serde_json::{Map, Value};

/// The run's configuration when the start asks for its own: the payload's output schema (an
/// object; a file path is the root config's to give) and the budgets of its context.
pub(super) fn start_config(
    cfg: &Config,
    root: &Utf8PathBuf,
    payload: &StartPayload,
) -> Result<(Option<Config>, crate::budget::Budgets)> {
    let with_schema = match &payload.output_schema {
        None => None,
        Some(s) if s.is_object() => {
            // Checked here, before the run's folder or keys exist: a refused start leaves nothing.
            let strict = crate::model::strict_schemas(cfg);
            crate::output_schema::check_schema(s, "the start event's `output_schema`", strict)?;
            Some(Config { output_schema: Some(s.clone()), ..cfg.clone() })
        }
        Some(_) => {
            return Err(Error::usage("the start event's `output_schema` must be a JSON Schema object")
                .with_hint("give the schema itself, e.g. {\"type\": \"object\", \"properties\": {...}}"))
        }
    };
    let base = with_schema.as_ref().unwrap_or(cfg);
    Ok(match context_budgets(base, root, payload.context.as_ref())? {
        Some((c, b)) => (Some(c), b),
        None => (with_schema, Default::default()),
    })
}

/// The configuration with the budgets a start's `context` names (`max_steps`, or `max_loops`,
/// `max_reframes`, `timeout`, `max_tokens`, `max_cost_usd`) applied; each may only narrow, as
/// the request's `config` may (a wider one is a configuration error naming it). None when the
/// context names none.
fn context_budgets(
    cfg: &Config,
    root: &Utf8PathBuf,
    context: Option<&Value>,
) -> Result<Option<(Config, crate::budget::Budgets)>> {
    let Some(ctx) = context.and_then(Value::as_object) else { return Ok(None) };
    let mut asked = Map::new();
    for (k, v) in ctx {
        let key = if k == "max_loops" { "max_steps" } else { k.as_str() };
        let budget = crate::budget::Budget::from_key(key).is_some() && !v.is_null();
        if budget && asked.insert(key.to_string(), v.clone()).is_some_and(|old| &old != v) {
            return Err(Error::config(
                "the start's context sets both `max_loops` and `max_steps`, to different values",
            )
            .with_hint("keep one: max_loops is another name for max_steps"));
        }
    }
    if asked.is_empty() {
        return Ok(None);
    }
    let budgets: crate::budget::Budgets = serde_json::from_value(Value::Object(asked)).map_err(|e| {
        Error::config(format!("the start's context has a budget that is not one: {e}"))
            .with_hint("give max_steps, max_reframes and max_tokens as whole numbers, timeout as e.g. 10m, max_cost_usd in dollars")
    })?;
    if budgets.max_cost_usd.is_some_and(|c| !c.is_finite() || c < 0.0) {
        return Err(
            Error::config("`payload.context.max_cost_usd` is not an amount").with_hint("give dollars, e.g. 0.5")
        );
    }
    let mut out = cfg.clone();
    for b in crate::budget::Budget::ALL {
        let Some(v) = budgets.get(b) else { continue };
        crate::trust::narrows(b.key(), &v, cfg, root, crate::trust::Party::Request).map_err(|why| {
            Error::config(format!("the start event may not set `payload.context.{}`: {why}", b.key()))
                .with_hint("a start may only narrow a budget; raise it in the root's agentloop.yaml")
        })?;
        budgets.apply(b, &mut out);
    }
    Ok(Some((out, budgets)))
}
