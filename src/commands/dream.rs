//! `agentloop dream`: consolidate finished runs into long-term memory.

use agentloop_engine::contract::{self, DreamAnswer};
use agentloop_engine::settings::Ctx;
use agentloop_types::error::{code, Error, Result};
use agentloop_workspace::history;
use agentloop_workspace::longterm::{loop_id, New, Provenance, Store};
use clap::Args;
use serde_json::json;
use std::collections::BTreeSet;

/// Consolidate the workspace's finished runs into long-term memory topics.
///
/// Each run that ended (done or escalated) and was not consolidated before contributes its
/// learned facts (topic `facts`, deduplicated across runs, each with the runs it came from), its
/// outcome (`outcomes`) and, when it escalated, its failure (`failures`). With a model, one call
/// per batch of up to 5 runs also merges related facts into topic notes (`insights`) and notes
/// contradictions (`contradictions`). Idempotent: a run is consolidated once (the store's
/// dreamed.json lists them). Meant for a nightly cron line. With --explore, the agent's open
/// questions and interests are then explored on its curiosity budget (`dream.curiosity`).
///
/// Exit codes: 0 ok (also when there was nothing to do), 2 usage, 5 provider failure.
///
/// Examples:
///   agentloop -w ~/digest dream --no-model
///   0 3 * * * agentloop -w ~/digest dream --since 1d -q
///   agentloop -w ~/digest dream --explore --json | jq .exploration
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct DreamArgs {
    /// Only runs that ended within DUR (e.g. 1d, 12h).
    #[arg(long, value_name = "DUR")]
    pub since: Option<String>,
    /// The mechanical part only: no model call.
    #[arg(long)]
    pub no_model: bool,
    /// Then explore the agent's open questions (an escalated run's open question, memories in
    /// topic `questions`) and interests (`dream.interests`) with the model, one call each, up
    /// to `dream.max_questions`, on the curiosity budget (`dream.curiosity`: max_tokens and/or
    /// max_cost_usd per window; none set or spent: no model call). Findings become memories in
    /// topic `explorations`, with the dream's id and the question as provenance.
    #[arg(long, conflicts_with = "no_model")]
    pub explore: bool,
}

/// Dreams: consolidates the runs not consolidated before (and explores, with `explore`) and
/// says what it did (`runs`, `entries_written`, `model`, `exploration`). `agentloop dream` and a
/// `run` with nothing to do (`modes.auto`) both dream this way.
pub fn dream_now(ctx: &Ctx, args: &DreamArgs) -> Result<serde_json::Value> {
    let cfg = ctx.config();
    let store =
        Store::open(cfg, &ctx.ws.root).ok_or_else(|| Error::usage("no memory folder").with_hint("set memory.dir"))?;
    let since = match &args.since {
        Some(d) => Some(
            agentloop_types::clock::parse_duration(d)
                .map_err(|e| Error::usage(format!("--since: {e}")).with_source(e))?,
        ),
        None => None,
    };
    let ledger = store.dir.join("dreamed.json");
    let mut dreamed: BTreeSet<String> = agentloop_io::fs::read_optional(&ledger)?
        .and_then(|t| serde_json::from_str::<Vec<String>>(&t).ok())
        .unwrap_or_default()
        .into_iter()
        .collect();
    let runs = runs_to_dream(ctx, since, &dreamed);
    let mut known = known_facts(&store)?;
    let mut written = 0usize;
    let mut model = if args.no_model { None } else { Some(()) };
    for batch in runs.chunks(5) {
        let mut batch_text = String::new();
        for r in batch {
            written += dream_run(&store, r, &mut known, &mut batch_text)?;
        }
        if model.is_some() {
            match consolidate(ctx, &store, batch, &batch_text) {
                Ok(n) => written += n,
                Err(e) if e.kind == agentloop_types::error::Kind::Provider => return Err(e),
                Err(e) => {
                    ctx.printer.warn(&format!("dream: the model step was skipped: {}", e.detail()));
                    model = None;
                }
            }
        }
        // Each batch is recorded as it completes: a dream cut short never repeats a run.
        for r in batch {
            dreamed.insert(r.state.run_id.clone());
        }
        agentloop_io::fs::create_dir_all(&store.dir)?;
        agentloop_io::fs::write_atomic(&ledger, agentloop_types::json::to_string_pretty(&dreamed).as_bytes())?;
    }
    let explored = if args.explore { Some(super::explore::explore(ctx, &store)?) } else { None };
    Ok(
        json!({"runs": runs.iter().map(|r| &r.state.run_id).collect::<Vec<_>>(), "entries_written": written, "model": model.is_some(), "exploration": explored}),
    )
}

/// The runs a dream reads: ended, not dreamed of before, and (with --since) ended within DUR.
fn runs_to_dream(ctx: &Ctx, since: Option<std::time::Duration>, dreamed: &BTreeSet<String>) -> Vec<history::Run> {
    let now = agentloop_types::clock::now();
    history::list(&ctx.ws, &ctx.config().handle.runs_dir, &|m| ctx.printer.warn(m))
        .into_iter()
        .filter(|r| r.state.status.is_terminal() && !dreamed.contains(&r.state.run_id))
        .filter(|r| {
            since.is_none_or(|d| {
                r.state
                    .finished_at
                    .as_deref()
                    .and_then(agentloop_types::clock::parse_rfc3339)
                    .is_some_and(|t| now.duration_since(t).unwrap_or_default() <= d)
            })
        })
        .collect()
}

/// Facts in the store by normal form: (content id, the runs it came from, its text).
type Known = std::collections::BTreeMap<String, (String, Vec<String>, String)>;

/// Facts already in the store, by normal form, so a fact seen again gains a source instead
/// of a copy.
fn known_facts(store: &Store) -> Result<Known> {
    let mut known = Known::default();
    for e in store.entries()?.into_iter().filter(|e| e.topic == "facts") {
        let sources: Vec<String> = e.keywords.iter().filter(|k| k.starts_with("run-")).cloned().collect();
        known.insert(
            agentloop_workspace::facts::norm(&e.content),
            (e.id.split_once('/').map(|x| x.1.to_string()).unwrap_or_default(), sources, e.content),
        );
    }
    Ok(known)
}

/// One run into the store: its facts (each new one, or a known one gaining this run as a
/// source), its outcome, and for an escalated run its failure; the run and its facts go on
/// `batch_text` for the model. Returns the facts written.
fn dream_run(store: &Store, r: &history::Run, known: &mut Known, batch_text: &mut String) -> Result<usize> {
    let s = &r.state;
    let mem_path = r.ws.memory();
    let facts: Vec<String> = agentloop_io::fs::read_optional(&mem_path)?
        .filter(|t| !t.trim().is_empty())
        .and_then(|t| agentloop_workspace::markdown::parse_memory(&t, &mem_path).ok())
        .map(|m| m.facts)
        .unwrap_or_default();
    let mut written = 0usize;
    let tag = format!("run-{}", s.run_id.to_lowercase());
    for f in facts.iter().filter(|f| !f.starts_with("Summary of earlier facts")) {
        let key = agentloop_workspace::facts::norm(f);
        if key.is_empty() {
            continue;
        }
        let (id, mut sources, content) = known.get(&key).cloned().unwrap_or_else(|| {
            (format!("fact-{:016x}", agentloop_types::run_id::fnv1a(key.as_bytes())), vec![], f.clone())
        });
        if sources.contains(&tag) {
            continue;
        }
        sources.push(tag.clone());
        let n = New {
            topic: "facts".into(),
            content_id: Some(id.clone()),
            title: String::new(),
            content: content.clone(),
            keywords: sources.clone(),
            provenance: Provenance { run_id: Some(s.run_id.clone()), step: None, artifact: None, ..Default::default() },
            ttl: None,
        };
        store.add(&n)?;
        known.insert(key, (id, sources, content));
        written += 1;
    }
    let what = match (&s.outcome, s.status) {
        (Some(o), agentloop_workspace::workspace::Status::Done) => format!("Outcome: {o}"),
        _ => format!("Stopped ({}): {}", s.status.as_str(), s.reason.clone().unwrap_or_default()),
    };
    let prov = Provenance {
        run_id: Some(s.run_id.clone()),
        step: Some(s.step),
        artifact: s.artifacts.first().cloned(),
        ..Default::default()
    };
    store.add(&New {
        topic: "outcomes".into(),
        content_id: Some(loop_id(&s.run_id, 0, "outcome")),
        title: s.goal.clone(),
        content: format!("{what}\nArtifacts: {}", s.artifacts.join(", ")),
        provenance: prov.clone(),
        ..Default::default()
    })?;
    if s.status == agentloop_workspace::workspace::Status::Escalated {
        store.add(&New {
            topic: "failures".into(),
            content_id: Some(loop_id(&s.run_id, 0, "failure")),
            title: s.goal.clone(),
            content: format!(
                "{}{}",
                s.reason.clone().unwrap_or_default(),
                s.open_question.as_ref().map(|q| format!("\nOpen question: {q}")).unwrap_or_default()
            ),
            provenance: prov,
            ..Default::default()
        })?;
    }
    batch_text.push_str(&format!("## Run {} ({}): {}\n{what}\n", s.run_id, s.status.as_str(), s.goal));
    for f in &facts {
        batch_text.push_str(&format!("- {f}\n"));
    }
    Ok(written)
}

pub fn run(ctx: Ctx, args: DreamArgs) -> Result<u8> {
    let v = dream_now(&ctx, &args)?;
    if ctx.printer.json {
        ctx.printer.json_value(&v);
        return Ok(code::OK);
    }
    let (runs, written) = (v["runs"].as_array().map_or(0, Vec::len), &v["entries_written"]);
    ctx.printer.outln(&format!("consolidated {runs} run(s); {written} memory entries written"));
    if let Some(x) = v["exploration"].as_object() {
        for r in x["explored"].as_array().into_iter().flatten() {
            let n = r["entries"].as_array().map_or(0, Vec::len);
            ctx.printer.outln(&format!(
                "explored \"{}\" ({}): {n} findings",
                r["question"].as_str().unwrap_or(""),
                r["source"].as_str().unwrap_or("")
            ));
        }
        if let Some(why) = x["stopped"].as_str() {
            ctx.printer.outln(&format!("exploring stopped: {why}"));
        }
    }
    Ok(code::OK)
}

/// One model call for a batch: topic notes and contradictions, with the runs they came from.
fn consolidate(ctx: &Ctx, store: &Store, batch: &[history::Run], text: &str) -> Result<usize> {
    let cfg = ctx.config();
    let mut m = agentloop_model::model::from_config(cfg, &ctx.ws.root)?;
    let tool = contract::dream_tool();
    let prompt = format!(
        "Consolidate what these finished runs learned into long-term memory. Merge related facts into short topic notes (each naming the runs it rests on), and list contradictions between runs.\n\n{text}"
    );
    let system = "You consolidate an agent's finished runs into long-term memory. Answer only by calling the tool.";
    let req = agentloop_model::model::Request::forced("dream", system, prompt, &tool, cfg.llm.max_tokens, cfg);
    let r = m.complete(&req, &mut |_| {})?;
    let a: DreamAnswer = contract::forced_answer(r, &tool)?;
    let ids: Vec<String> = batch.iter().map(|r| r.state.run_id.clone()).collect();
    let mut n = 0;
    for (i, note) in a.notes.iter().enumerate() {
        store.add(&New {
            topic: "insights".into(),
            content_id: Some(loop_id(&ids[0], i as u32, "insight")),
            title: note.title.clone(),
            content: note.content.clone(),
            keywords: note.runs.clone(),
            provenance: Provenance {
                run_id: note.runs.first().cloned().or(Some(ids[0].clone())),
                step: None,
                artifact: None,
                ..Default::default()
            },
            ttl: None,
        })?;
        n += 1;
    }
    for (i, c) in a.contradictions.iter().enumerate() {
        store.add(&New {
            topic: "contradictions".into(),
            content_id: Some(loop_id(&ids[0], i as u32, "contradiction")),
            content: c.clone(),
            provenance: Provenance { run_id: Some(ids[0].clone()), step: None, artifact: None, ..Default::default() },
            ..Default::default()
        })?;
        n += 1;
    }
    Ok(n)
}
