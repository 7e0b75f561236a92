//! `dream --explore`: the agent's open questions (an escalated run's open question, a memory in
//! topic `questions`) and its interests (`dream.interests`), explored with the model on the
//! curiosity budget (`dream.curiosity`, its own rolling window in the usage ledger). Each finding
//! becomes a memory entry (topic `explorations`) with its provenance: the dream's id and the
//! question it answers. No model call once the budget is spent, or when none is set.

use agentloop_config::config::Config;
use agentloop_engine::contract::{self, ExploreAnswer};
use agentloop_engine::settings::Ctx;
use agentloop_types::error::Result;
use agentloop_workspace::longterm::{New, Provenance, Store};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// One thing to explore: its text, where it came from, and the key that marks it explored.
struct Question {
    key: String,
    text: String,
    source: String,
}

fn question(text: &str, source: &str) -> Option<Question> {
    let text = text.trim();
    let norm = agentloop_workspace::facts::norm(text);
    (!norm.is_empty()).then(|| Question {
        key: format!("q-{:016x}", agentloop_types::run_id::fnv1a(norm.as_bytes())),
        text: agentloop_io::output::one_line(text).chars().take(500).collect(),
        source: source.to_string(),
    })
}

/// The open questions in memory and the configured interests, each once, not yet explored.
fn questions(cfg: &Config, store: &Store, explored: &BTreeSet<String>) -> Result<Vec<Question>> {
    let mut out = Vec::new();
    for e in store.entries()? {
        match e.topic.as_str() {
            "failures" => out.extend(
                e.content.lines().filter_map(|l| l.strip_prefix("Open question: ")).filter_map(|q| question(q, &e.id)),
            ),
            "questions" => out.extend(question(&e.content, &e.id)),
            _ => {}
        }
    }
    out.extend(cfg.dream.interests.iter().filter_map(|i| question(i, "dream.interests")));
    let mut seen = BTreeSet::new();
    out.retain(|q| !explored.contains(&q.key) && seen.insert(q.key.clone()));
    Ok(out)
}

/// Why no (further) model call may be made on the curiosity budget, if none may; else the
/// tokens one call may still use (None: no token cap).
fn budget_left(cfg: &Config, model: &str) -> std::result::Result<Option<u64>, String> {
    let c = &cfg.dream.curiosity;
    if c.max_tokens.is_none() && c.max_cost_usd.is_none() {
        return Err("dream.curiosity sets no budget (max_tokens or max_cost_usd)".into());
    }
    let (tokens, cost) = agentloop_workspace::rest_window::curiosity(cfg);
    let span = humantime::format_duration(c.window.0);
    if let Some(m) = c.max_tokens.filter(|m| tokens >= *m) {
        return Err(format!(
            "curiosity budget spent: {tokens} tokens in the last {span} (dream.curiosity.max_tokens {m})"
        ));
    }
    if let Some(m) = c.max_cost_usd {
        let priced = agentloop_types::trace::is_scripted(model)
            || agentloop_model::model::pricing::cost_in(cfg, model, &Default::default()).is_some();
        if !priced && c.max_tokens.is_none() {
            return Err(format!("dream.curiosity.max_cost_usd cannot hold: model `{model}` has no price (add it under `prices:`, or set dream.curiosity.max_tokens)"));
        }
        if cost >= m {
            return Err(format!(
                "curiosity budget spent: ${cost:.4} in the last {span} (dream.curiosity.max_cost_usd {m})"
            ));
        }
    }
    Ok(c.max_tokens.map(|m| m - tokens))
}

/// What memory holds about a question, as the prompt shows it.
fn recalled(cfg: &Config, store: &Store, q: &str) -> Result<String> {
    let index = agentloop_workspace::longterm::Index::build(store.entries()?);
    let lines: Vec<String> = index
        .search(q, cfg.memory.top_k.max(1))
        .into_iter()
        .map(|(e, _)| {
            format!("- [{}] {}", e.id, agentloop_io::output::one_line(&e.content).chars().take(600).collect::<String>())
        })
        .collect();
    Ok(if lines.is_empty() { "(nothing yet)".into() } else { lines.join("\n") })
}

/// One model call for one question; the memory entries written.
fn explore_one(
    ctx: &Ctx,
    store: &Store,
    m: &mut dyn agentloop_model::model::Model,
    q: &Question,
    id: &str,
    cap: Option<u64>,
) -> Result<Vec<String>> {
    let cfg = ctx.config();
    let tool = contract::explore_tool();
    let prompt = format!(
        "Explore this open question or interest of yours, using what your long-term memory holds. Record what you find: connections, likely answers, what would settle it. Say what each finding rests on.\n\nQuestion: {}\n\nWhat memory holds:\n{}",
        q.text,
        recalled(cfg, store, &q.text)?
    );
    let system = "You are an agent dreaming: exploring your own open questions and interests from memory. Answer only by calling the tool.";
    let max_tokens = cap.map_or(cfg.llm.max_tokens, |c| cfg.llm.max_tokens.min(c.max(1) as u32));
    let req = agentloop_model::model::Request::forced("explore", system, prompt, &tool, max_tokens, cfg);
    let r = m.complete(&req, &mut |_| {})?;
    // A scripted model, like an unpriced one, has no price.
    let cost = agentloop_model::model::pricing::cost_in(cfg, m.model(), &r.usage).unwrap_or(0.0);
    if let Err(e) = agentloop_workspace::rest_window::record_dream(cfg, id, r.usage.total(), cost) {
        ctx.printer.warn(&format!("usage ledger: {e}"));
    }
    let a: ExploreAnswer = contract::forced_answer(r, &tool)?;
    let mut ids = Vec::new();
    for (i, f) in a.findings.iter().enumerate() {
        ids.push(store.add(&New {
            topic: "explorations".into(),
            content_id: Some(format!("{}-{i}", q.key)),
            title: f.title.clone(),
            content: format!("{}\n\nQuestion: {}", f.content, q.text),
            keywords: vec![q.key.clone(), q.source.clone()],
            provenance: Provenance {
                run_id: Some(id.to_string()),
                source: Some(q.source.clone()),
                question: Some(q.text.clone()),
                ..Default::default()
            },
            ttl: None,
        })?);
    }
    Ok(ids)
}

/// Explores what is open, one model call a question, while the curiosity budget lasts.
pub fn explore(ctx: &Ctx, store: &Store) -> Result<Value> {
    let cfg = ctx.config();
    let ledger = store.dir.join("explored.json");
    let mut explored: BTreeSet<String> = agentloop_io::fs::read_optional(&ledger)?
        .and_then(|t| serde_json::from_str::<Vec<String>>(&t).ok())
        .unwrap_or_default()
        .into_iter()
        .collect();
    let open = questions(cfg, store, &explored)?;
    let id = format!("dream-{}", agentloop_types::clock::new_run_id());
    // The model is named only when it could be called (no budget: no provider is needed).
    let c = &cfg.dream.curiosity;
    let callable = !open.is_empty() && (c.max_tokens.is_some() || c.max_cost_usd.is_some());
    let name = if callable { agentloop_model::model::name_for_estimate(cfg)? } else { String::new() };
    let (mut model, mut rows, mut stopped) = (None, Vec::new(), None);
    for q in open.iter().take(cfg.dream.max_questions) {
        let cap = match budget_left(cfg, &name) {
            Ok(c) => c,
            Err(why) => {
                stopped = Some(why);
                break;
            }
        };
        let m = match model.take() {
            Some(m) => model.insert(m),
            None => model.insert(agentloop_model::model::from_config(cfg, &ctx.ws.root)?),
        };
        let m = m.as_mut();
        let ids = explore_one(ctx, store, m, q, &id, cap)?;
        explored.insert(q.key.clone());
        store.refuse_linked()?;
        agentloop_io::fs::write_atomic(&ledger, agentloop_types::json::to_string_pretty(&explored).as_bytes())?;
        rows.push(json!({"question": q.text, "source": q.source, "entries": ids}));
    }
    let (tokens, cost) = agentloop_workspace::rest_window::curiosity(cfg);
    Ok(json!({
        "dream_id": id,
        "explored": rows,
        "open": open.len(),
        "stopped": stopped,
        "curiosity": {"tokens": tokens, "cost_usd": cost, "max_tokens": cfg.dream.curiosity.max_tokens,
            "max_cost_usd": cfg.dream.curiosity.max_cost_usd, "window_secs": cfg.dream.curiosity.window.0.as_secs()},
    }))
}
