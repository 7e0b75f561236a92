//! `agentloop rest`: the agent's rest mode — light tasks, no model call.

use agentloop_config::config::RestTask;
use agentloop_engine::settings::Ctx;
use agentloop_types::error::{code, Error, Result};
use clap::Args;
use serde_json::{json, Value};

/// Rest the agent: run its light tasks (no model call) and lower its fatigue and stress.
///
/// The tasks are `rest.tasks` in the user's config, from a fixed set: `memory_prune` (expired
/// long-term memory entries are deleted) and `report` (the workspace's report.html is written
/// again). What the rest did goes into the usage ledger
/// ($XDG_STATE_HOME/agentloop/usage.jsonl); from then on the usage in the rolling window
/// before it (fatigue) and the agent's stress count `rest.relief` percent (50) less. Stress
/// at `stress.threshold` puts an agent to rest on its own: new runs are refused (exit 10) until
/// stress is below it again, by time (`stress.decay_per_hour`) or by this command.
///
/// Exit codes: 0 rested (a task that could not run is reported and skipped), 2 usage.
///
/// Examples:
///   agentloop -w ~/digest rest
///   agentloop --agent researcher rest --json | jq .after
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RestArgs {}

/// One light task's row: whether it ran, and what it did or why it could not.
struct Done {
    ok: bool,
    detail: String,
}

/// Runs one light task. A task that cannot run is a row of the report, not an error: the rest
/// goes on with the next task.
fn task(ctx: &Ctx, t: RestTask) -> Done {
    let skipped = |why: &str| Done { ok: false, detail: why.to_string() };
    let did = |r: Result<String>| match r {
        Ok(detail) => Done { ok: true, detail },
        Err(e) => Done { ok: false, detail: e.detail() },
    };
    match t {
        RestTask::MemoryPrune => match agentloop_workspace::longterm::Store::open(ctx.config(), &ctx.ws.root) {
            None => skipped("no memory folder"),
            Some(store) => did(store.prune().map(|gone| format!("{} expired memory entries deleted", gone.len()))),
        },
        RestTask::Report if !ctx.ws.has_run() => skipped("the workspace holds no run"),
        RestTask::Report => did(crate::commands::report::write_current(&ctx.ws).map(|out| format!("wrote {out}"))),
    }
}

/// Fatigue and stress now.
fn wellbeing(ctx: &Ctx) -> Value {
    let cfg = ctx.config();
    json!({"fatigue": agentloop_workspace::rest_window::current(cfg).map(|w| w.fatigue), "stress": agentloop_workspace::rest_window::stress(cfg, &ctx.ws.root).level})
}

/// What one rest did: its tasks (task, ok, detail) and fatigue and stress before and after.
pub struct Rested {
    pub tasks: Vec<Value>,
    pub before: Value,
    pub after: Value,
}

/// Rests the agent: runs `rest.tasks` and records the rest (as `id`) in the usage ledger,
/// which lowers fatigue and stress by `rest.relief`. `agentloop rest` and a `run` whose agent
/// rests itself (`modes.auto`) both rest this way.
pub fn rest_now(ctx: &Ctx, id: &str) -> Result<Rested> {
    let cfg = ctx.config();
    let before = wellbeing(ctx);
    let mut rows = Vec::new();
    for t in &cfg.rest.tasks {
        let Done { ok, detail } = task(ctx, *t);
        rows.push(json!({"task": t.name(), "ok": ok, "detail": detail}));
    }
    let done: Vec<String> =
        rows.iter().filter(|r| r["ok"] == true).filter_map(|r| r["task"].as_str().map(String::from)).collect();
    agentloop_workspace::rest_window::record_rest(cfg, id, done).map_err(|e| {
        Error::failure("usage ledger").with_source(e).with_hint("check that $XDG_STATE_HOME/agentloop is writable")
    })?;
    Ok(Rested { tasks: rows, before, after: wellbeing(ctx) })
}

pub fn run(ctx: Ctx, _args: RestArgs) -> Result<u8> {
    let cfg = ctx.config();
    let id = format!("rest-{}", agentloop_types::clock::now_rfc3339());
    let Rested { tasks: rows, before, after } = rest_now(&ctx, &id)?;
    let agent = agentloop_workspace::rest_window::agent_of(cfg);
    let p = &ctx.printer;
    if p.json {
        p.json_value(&json!({"agent": agent, "tasks": rows, "before": before, "after": after, "model_calls": 0}));
        return Ok(code::OK);
    }
    for r in &rows {
        let mark = if r["ok"] == true { "done" } else { "skipped" };
        p.outln(&format!("{:<13} {mark}: {}", r["task"].as_str().unwrap_or(""), r["detail"].as_str().unwrap_or("")));
    }
    let pct = |v: &Value| v.as_f64().map(|f| format!("{f}%")).unwrap_or_else(|| "n/a (no rest: limit)".into());
    p.outln(&format!(
        "agent `{agent}` rested: fatigue {} -> {}, stress {} -> {}",
        pct(&before["fatigue"]),
        pct(&after["fatigue"]),
        before["stress"],
        after["stress"]
    ));
    Ok(code::OK)
}
