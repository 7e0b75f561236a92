//! What a start asks for its own run: an output schema, and budgets in its `context` that may
//! only narrow the root's.

use agentloop_config::config::{Config, Source, Sources};
use agentloop_engine::schema::handle::StartPayload;
use agentloop_types::budget::Budget;
use agentloop_types::error::{Error, Result};
use camino::Utf8PathBuf;
use serde_json::{Map, Value};

/// The run's configuration when the start asks for its own: the payload's output schema (an
/// object; a file path is the root config's to give) and the budgets of its context.
pub(super) fn start_config(
    cfg: &Config,
    sources: &Sources,
    root: &Utf8PathBuf,
    payload: &StartPayload,
) -> Result<(Option<Config>, agentloop_types::budget::Budgets)> {
    let with_schema = match &payload.output_schema {
        None => None,
        Some(s) if s.is_object() => {
            // Checked here, before the run's folder or keys exist: a refused start leaves nothing.
            let strict = agentloop_model::model::strict_schemas(cfg);
            agentloop_engine::output_schema::check_schema(s, "the start event's `output_schema`", strict)?;
            Some(Config { output_schema: Some(s.clone()), ..cfg.clone() })
        }
        Some(_) => {
            return Err(Error::usage("the start event's `output_schema` must be a JSON Schema object")
                .with_hint("give the schema itself, e.g. {\"type\": \"object\", \"properties\": {...}}"))
        }
    };
    let base = with_schema.as_ref().unwrap_or(cfg);
    Ok(match context_budgets(base, sources, root, payload.context.as_ref())? {
        Some((c, b)) => (Some(c), b),
        None => (with_schema, Default::default()),
    })
}

/// The configuration with the budgets a start's `context` names (`max_steps`, or `max_loops`,
/// `max_reframes`, `timeout`, `max_tokens`, `max_cost_usd`) applied; each may only narrow, as
/// the request's `config` may (a wider one is a configuration error naming it and where the
/// limit it is above came from: the request's `config`, or the root's). None when the context
/// names none.
fn context_budgets(
    cfg: &Config,
    sources: &Sources,
    root: &Utf8PathBuf,
    context: Option<&Value>,
) -> Result<Option<(Config, agentloop_types::budget::Budgets)>> {
    let Some(ctx) = context.and_then(Value::as_object) else { return Ok(None) };
    let mut asked = Map::new();
    for (k, v) in ctx {
        let key = if k == "max_loops" { "max_steps" } else { k.as_str() };
        let budget = agentloop_types::budget::Budget::from_key(key).is_some() && !v.is_null();
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
    let budgets: agentloop_types::budget::Budgets = serde_json::from_value(Value::Object(asked)).map_err(|e| {
        Error::config("the start's context has a budget that is not one")
            .with_hint("give max_steps, max_reframes and max_tokens as whole numbers, timeout as e.g. 10m, max_cost_usd in dollars")
            .with_source(e)
    })?;
    if budgets.max_cost_usd.is_some_and(|c| !c.is_finite() || c < 0.0) {
        return Err(
            Error::config("`payload.context.max_cost_usd` is not an amount").with_hint("give dollars, e.g. 0.5")
        );
    }
    let mut out = cfg.clone();
    for b in agentloop_types::budget::Budget::ALL {
        let Some(v) = budgets.get(b) else { continue };
        let (key, source) = (b.key(), sources.get(b.key()));
        let from = agentloop_engine::trust::limit_source(key, source);
        agentloop_engine::trust::narrows_limit(b, &v, cfg, root, &from).map_err(|why| {
            let raise = match source {
                None | Some(Source::Default) => format!("set `{key}` in the root's agentloop.yaml"),
                Some(_) => format!("raise it in {from}"),
            };
            Error::config(format!("the start event may not set `payload.context.{key}`: {why}")).with_hint(format!(
                "a start's context may only narrow a limit: give `payload.context.{key}` at most {}, or {raise}",
                cfg.limit(b)
            ))
        })?;
        out.set_budget(b, &budgets);
    }
    Ok(Some((out, budgets)))
}

/// A start refused before it began (negotiation: it cannot fit a limit), its message naming
/// where each limit it names came from: the start's `context`, the request's `config`, or the
/// root's agentloop.yaml (event mode answers with the message alone).
pub(super) fn refusal_named(mut e: Error, sources: &Sources, asked: &agentloop_types::budget::Budgets) -> Error {
    if e.kind != agentloop_types::error::Kind::Negotiation {
        return e;
    }
    let from: Vec<(Budget, String)> = [Budget::MaxTokens, Budget::MaxCostUsd, Budget::MaxSteps]
        .into_iter()
        .filter(|b| e.message.contains(&format!("{} is", b.key())))
        .map(|b| match asked.get(b) {
            Some(_) => (b, format!("the start's `context.{}`", b.key())),
            None => (b, agentloop_engine::trust::limit_source(b.key(), sources.get(b.key()))),
        })
        .collect();
    let named = match from.as_slice() {
        [] => return e,
        [(_, one)] => format!("set by {one}"),
        many => many.iter().map(|(b, f)| format!("{} set by {f}", b.key())).collect::<Vec<_>>().join("; "),
    };
    e.message = format!("{} ({named})", e.message);
    e
}
