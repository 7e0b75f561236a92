//! `agentloop runs`: the history of runs in a workspace (the current run at the root, archived
//! ones under `runs/<run_id>/`, which is also where event mode keeps its runs), and retention.

use agentloop_engine::settings::Ctx;
use agentloop_types::error::{Error, Result};
use agentloop_workspace::history;
use clap::{Args, Subcommand};
use serde_json::json;

/// List the runs of the workspace (-w): the current one and those under runs/<run_id>/.
///
/// A header, then one line per run, newest first: id (`*` marks the current run), status, steps,
/// cost, started, goal. --json prints an array of objects (the current run first, then archived
/// runs oldest first). An empty workspace says so on stderr. A scripted run shows `scripted` for
/// its cost: a replay spends nothing. An archived run that was still going when `run --new`
/// replaced it shows as `interrupted`. With --agent NAME only the runs of that agent profile;
/// with --session NAME only the turns of that named session (`run --session NAME`). A session
/// column shows when any run listed is a session's turn.
///
/// Examples:
///   agentloop -w ws runs
///   agentloop -w ws runs --agent digest
///   agentloop -w ws runs --session support-42
///   agentloop -w ws runs --json | jq -r '.[] | select(.status=="escalated") | .run_id'
///   agentloop -w ws runs prune --keep 30
///   agentloop -w /srv/agent-runs runs --redis redis://127.0.0.1:6379   # and the worker queue
#[derive(Debug, Args)]
#[command(verbatim_doc_comment, args_conflicts_with_subcommands = true)]
pub struct RunsArgs {
    #[command(subcommand)]
    pub command: Option<RunsCommand>,
    /// Only the runs of this named session (letters, digits, `.`, `_` and `-`, at most 64).
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// After the runs, show the queue of `agentloop worker` on this Redis: runs queued, claimed
    /// and dead-lettered (as `status --redis`); with --json, {"runs": [...], "queue": {...}}.
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// Prefix of the stream names (with --redis).
    #[arg(long, value_name = "NAME", default_value = "agentloop", requires = "redis")]
    pub streams: String,
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List the runs (the default).
    List,
    /// Delete archived runs: all but the newest N, or those that ended before DUR ago.
    ///
    /// The current run and runs still going (event mode) are never deleted. Prints what was
    /// deleted (with --dry-run, what would be).
    ///
    /// Example: agentloop -w ws runs prune --older-than 30d
    #[command(verbatim_doc_comment)]
    Prune(PruneArgs),
    /// What changed from one run of a job to another: ending, facts, files, steps, tokens, cost.
    ///
    /// With no ids: the current run (the root's, else the newest) against the previous run of
    /// its series (the newest earlier run of the same agent with the same goal — the same job
    /// run again, say `run --goal G --slot DATE` every morning — else the newest earlier run of
    /// that agent). With one id: that run against the current one. With two: A then, B now.
    /// An id may be a unique prefix or `last`.
    ///
    /// Shows how each ended (status, stop, outcome), the learned facts added and dropped
    /// (compared by text: the sources a fact lists do not make it new), the files under
    /// artifacts/ added, removed and changed (a unified diff for text files; a dated file such
    /// as digest-2026-01-02.md is compared with the earlier run's file of the same name but for
    /// its digits), steps, tokens and cost then and now, and a one-line verdict. --json prints
    /// one object (docs/schema/runs-diff.json).
    ///
    /// Exit codes: 0 compared; 2 no such run, or no earlier run to compare with; with
    /// --exit-code (or --threshold N), 12 when the runs differ by at least N changes (default 1):
    /// a different ending, each fact added or dropped, each file added, removed or changed.
    ///
    /// Examples:
    ///   agentloop -w ws runs diff
    ///   agentloop -w ws runs diff 01KA 01KB --json | jq .verdict
    ///   agentloop -w ws runs diff --exit-code > diff.txt || mail -s "digest changed" me < diff.txt
    #[command(verbatim_doc_comment)]
    Diff(DiffArgs),
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier run (default: the previous run of the later one's series).
    #[arg(value_name = "A")]
    pub then: Option<String>,
    /// The later run (default: the current run).
    #[arg(value_name = "B")]
    pub now: Option<String>,
    /// Exit 12 when the runs differ (at least --threshold changes), 0 when not.
    #[arg(long)]
    pub exit_code: bool,
    /// Changes it takes to exit 12 (implies --exit-code).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threshold: Option<u32>,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Keep the newest N archived runs.
    #[arg(long, value_name = "N")]
    pub keep: Option<usize>,
    /// Delete archived runs that ended more than DUR ago (e.g. 30d, 12h).
    #[arg(long, value_name = "DUR")]
    pub older_than: Option<String>,
    /// Show what would be deleted; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Which runs `runs` lists: those of an agent profile (`--agent`), of a named session
/// (`--session`), or all.
#[derive(Debug, Clone, Copy, Default)]
struct Filter<'a> {
    agent: Option<&'a str>,
    session: Option<&'a str>,
}

/// `runs --redis`: the runs, then the queue of `agentloop worker`.
#[cfg(feature = "queue")]
fn with_queue(ctx: &Ctx, only: Filter, url: &str, streams: &str) -> Result<u8> {
    let queue = crate::worker::view::queue(url, streams, ctx.printer)?;
    if ctx.printer.json {
        let rows: Vec<serde_json::Value> = runs_of(ctx, only).iter().map(row).collect();
        ctx.printer.json_value(&json!({"runs": rows, "queue": queue}));
        return Ok(0);
    }
    list(ctx, only)?;
    ctx.printer.outln("");
    crate::worker::view::print(&ctx.printer, &queue);
    Ok(0)
}

#[cfg(not(feature = "queue"))]
fn with_queue(_: &Ctx, _: Filter, _: &str, _: &str) -> Result<u8> {
    Err(Error::not_built("queue", "`runs --redis`", false))
}

pub fn run(ctx: Ctx, args: RunsArgs) -> Result<u8> {
    ctx.ws.require_dir()?;
    // `runs --agent NAME` (the global flag) lists that agent's runs only.
    let agent = ctx.agent_flag().map(String::from);
    // The name rule of `run --session`: a name that could never be a session's is a mistake.
    let session = args.session.as_deref().map(crate::commands::run::session_name).transpose()?;
    let only = Filter { agent: agent.as_deref(), session: session.as_deref() };
    if let Some(url) = &args.redis {
        return with_queue(&ctx, only, url, &args.streams);
    }
    match args.command.unwrap_or(RunsCommand::List) {
        RunsCommand::List => list(&ctx, only),
        RunsCommand::Prune(_) if agent.is_some() => {
            Err(Error::usage("--agent filters the list; `runs prune` does not take it"))
        }
        RunsCommand::Prune(a) => prune(&ctx, a),
        RunsCommand::Diff(a) => diff(&ctx, agent.as_deref(), a),
    }
}

/// The runs of the workspace (all, or those `only` names).
fn runs_of(ctx: &Ctx, only: Filter) -> Vec<history::Run> {
    let mut runs = history::list(&ctx.ws, &ctx.config().handle.runs_dir, &|m| ctx.printer.warn(m));
    runs.retain(|r| only.agent.is_none() || r.state.agent.as_deref() == only.agent);
    runs.retain(|r| only.session.is_none() || r.state.session.as_deref() == only.session);
    runs
}

fn list(ctx: &Ctx, only: Filter) -> Result<u8> {
    let mut runs = runs_of(ctx, only);
    if ctx.printer.json {
        // The JSON order stays what it always was: the current run, then archived oldest first.
        let rows: Vec<serde_json::Value> = runs.iter().map(row).collect();
        ctx.printer.json_value(&json!(rows));
        return Ok(0);
    }
    if runs.is_empty() {
        say_no_runs(ctx, only);
        return Ok(0);
    }
    // Newest first: by start time, then id (ids sort by time too).
    runs.sort_by(|a, b| (&b.state.started_at, &b.state.run_id).cmp(&(&a.state.started_at, &a.state.run_id)));
    print_table(ctx, &runs);
    Ok(0)
}

/// An empty list says so on stderr, naming the agent or session asked for, and how to start one.
fn say_no_runs(ctx: &Ctx, only: Filter) {
    if let Some(a) = only.agent {
        ctx.printer.info(&format!("no runs of agent `{a}` in {}", ctx.ws.root));
        return;
    }
    if let Some(s) = only.session {
        ctx.printer.info(&format!(
            "no runs of session `{s}` in {}; start one with {}",
            ctx.ws.root,
            ctx.ws.cli(&format!("run --session {s} --goal \"...\""))
        ));
        return;
    }
    ctx.printer.info(&format!("no runs in {} yet; start one with {}", ctx.ws.root, ctx.ws.cli("run --goal \"...\"")));
}

/// The header (unless --quiet) and one line per run, in the order given.
fn print_table(ctx: &Ctx, runs: &[history::Run]) {
    let w = id_width(runs);
    // Ids, statuses, slots and goals come from state.json files: one line each, controls shown.
    let line = |s: &str| agentloop_io::output::one_line(s).into_owned();
    // A slot column when a scheduler gave any run a slot (`run --slot`): which day each was.
    let slot_w = runs.iter().filter_map(|r| r.state.slot.as_deref()).map(|s| line(s).chars().count()).max();
    let slot_col = |s: Option<&str>| match slot_w {
        Some(n) => format!("{:<n$}  ", s.map(line).unwrap_or_else(|| "-".into()), n = n.max(4)),
        None => String::new(),
    };
    // A session column when any run is a session's turn (`run --session`).
    let session_w = runs.iter().filter_map(|r| r.state.session.as_deref()).map(|s| line(s).chars().count()).max();
    let session_col = |s: Option<&str>| match session_w {
        Some(n) => format!("{:<n$}  ", s.map(line).unwrap_or_else(|| "-".into()), n = n.max(7)),
        None => String::new(),
    };
    if !ctx.printer.quiet {
        let header = format!(
            "{:<w$}  {:<11} {:>5} {:>9}  {:<16}  {}{}goal",
            "run",
            "status",
            "steps",
            "cost",
            "started",
            slot_col(Some("slot")),
            session_col(Some("session"))
        );
        ctx.printer.outln_painted(&[(&header, "1")]);
    }
    for r in runs {
        let s = &r.state;
        let goal: String = line(&s.goal).chars().take(60).collect();
        // A scripted run spends nothing: it shows as such, never as a price.
        let cost = match s.cost() {
            _ if s.scripted() => "scripted".to_string(),
            Some(c) => agentloop_engine::report::html::usd(c),
            None => agentloop_engine::report::html::UNKNOWN_COST.into(),
        };
        // Minutes are enough to tell runs apart: 2026-01-01 09:30.
        let started = line(&s.started_at).replacen('T', " ", 1).chars().take(16).collect::<String>();
        ctx.printer.outln(&format!(
            "{:<w$}{} {:<11} {:>5} {:>9}  {:<16}  {}{}{}",
            line(&s.run_id),
            if r.current { "*" } else { " " },
            history::shown_status(r),
            s.completed_steps.len(),
            cost,
            started,
            slot_col(s.slot.as_deref()),
            session_col(s.session.as_deref()),
            goal,
        ));
    }
}

fn id_width(runs: &[history::Run]) -> usize {
    runs.iter().map(|r| r.state.run_id.chars().count()).max().unwrap_or(3).max(3)
}

/// One run as `runs --json` shows it.
pub fn row(r: &history::Run) -> serde_json::Value {
    let s = &r.state;
    let row = agentloop_engine::schema::RunRow {
        run_id: s.run_id.clone(),
        agent: s.agent.clone(),
        slot: s.slot.clone(),
        session: s.session.clone(),
        status: history::shown_status(r).to_string(),
        current: r.current,
        step: s.step,
        steps_taken: s.completed_steps.len(),
        goal: s.goal.clone(),
        model: s.model.clone(),
        cost_usd: s.cost(),
        started_at: s.started_at.clone(),
        updated_at: s.updated_at.clone(),
        finished_at: s.finished_at.clone(),
        reason: s.reason.clone(),
        workspace: r.ws.root.to_string(),
    };
    agentloop_types::json::to_value(row)
}

fn prune(ctx: &Ctx, a: PruneArgs) -> Result<u8> {
    if a.keep.is_none() && a.older_than.is_none() {
        return Err(Error::usage("runs prune needs --keep N or --older-than DUR")
            .with_hint("e.g. agentloop runs prune --keep 30"));
    }
    let older = match &a.older_than {
        Some(d) => Some(
            agentloop_types::clock::parse_duration(d)
                .map_err(|e| Error::usage(format!("--older-than: {e}")).with_source(e))?,
        ),
        None => None,
    };
    let session = ctx.ws.lock(ctx.lock_wait())?;
    let gone = history::prune(&session, &ctx.config().handle.runs_dir, a.keep, older, a.dry_run)?;
    if ctx.printer.json {
        let ids: Vec<&str> = gone.iter().map(|s| s.run_id.as_str()).collect();
        ctx.printer.json_value(&json!({"deleted": if a.dry_run { vec![] } else { ids.clone() }, "would_delete": if a.dry_run { ids } else { vec![] }}));
        return Ok(0);
    }
    for s in &gone {
        let line = agentloop_io::output::one_line;
        ctx.printer.outln(&format!(
            "{}{}  {}",
            if a.dry_run { "would delete " } else { "deleted " },
            line(&s.run_id),
            line(&s.goal)
        ));
    }
    Ok(0)
}

/// `runs diff`: picks the two runs, compares them, prints the diff, and says by the exit code
/// whether they differ when asked to.
fn diff(ctx: &Ctx, agent: Option<&str>, a: DiffArgs) -> Result<u8> {
    let runs = runs_of(ctx, Filter { agent, session: None });
    let runs_dir = &ctx.config().handle.runs_dir;
    let pick = |id: &str| -> Result<&history::Run> {
        let ws = history::find(&ctx.ws, runs_dir, id)?;
        runs.iter().find(|r| r.ws.root == ws.root).ok_or_else(|| {
            Error::usage(format!("run `{id}` is not a run of agent `{}`", agent.unwrap_or("-")))
                .with_hint("leave out --agent, or name a run of that agent")
        })
    };
    let now = match &a.now {
        Some(id) => pick(id)?,
        None => agentloop_workspace::runs_diff::latest(&runs).ok_or_else(|| {
            Error::usage(format!("no runs in {} to compare", ctx.ws.root))
                .with_hint(format!("start one with {}", ctx.ws.cli("run --goal \"...\"")))
        })?,
    };
    let then = match &a.then {
        Some(id) => pick(id)?,
        None => agentloop_workspace::runs_diff::previous(&runs, now).ok_or_else(|| {
            Error::usage(format!("run {} has no earlier run to compare with", now.state.run_id))
                .with_hint(format!("list the runs with {}, or name two: runs diff A B", ctx.ws.cli("runs")))
        })?,
    };
    if then.ws.root == now.ws.root {
        return Err(Error::usage(format!("run {} is compared with itself", now.state.run_id))
            .with_hint("name two different runs: runs diff A B"));
    }
    let d = agentloop_workspace::runs_diff::diff(then, now)?;
    let p = &ctx.printer;
    if p.json {
        p.json_value(&agentloop_types::json::to_value(&d));
    } else {
        print_diff(ctx, &d);
    }
    let threshold = a.threshold.map(|n| n as usize).or(a.exit_code.then_some(1));
    Ok(match threshold {
        Some(n) if d.changes >= n => agentloop_types::error::code::CHANGED,
        _ => 0,
    })
}

fn print_diff(ctx: &Ctx, d: &agentloop_workspace::runs_diff::RunsDiff) {
    let p = &ctx.printer;
    // Everything here comes from workspace files: one line each, controls shown.
    let line = |s: &str| agentloop_io::output::one_line(s).into_owned();
    let cost = |s: &agentloop_workspace::runs_diff::Side| match s.cost_usd {
        _ if s.outcome.is_none() && s.cost_usd.is_none() && s.tokens == 0 => "none".to_string(),
        Some(c) => agentloop_engine::report::html::usd(c),
        None => "unpriced".into(),
    };
    let th = agentloop_engine::report::html::thousands;
    p.outln_painted(&[(&line(&d.verdict), "1")]);
    for (label, s) in [("then", &d.then), ("now ", &d.now)] {
        let slot = s.slot.as_deref().map(|x| format!(" slot {}", line(x))).unwrap_or_default();
        p.outln(&format!(
            "{label}  {}{slot}  {}{}  {} steps, {} tokens, {}",
            line(&s.run_id),
            s.status,
            s.stop.map(|k| format!(" ({})", k.as_str())).unwrap_or_default(),
            s.steps,
            th(s.tokens),
            cost(s)
        ));
    }
    if d.then.outcome != d.now.outcome {
        p.outln("");
        p.outln("outcome");
        for (sign, o) in [("-", &d.then.outcome), ("+", &d.now.outcome)] {
            let text: String = line(o.as_deref().unwrap_or("(none)")).chars().take(300).collect();
            p.outln(&format!("  {sign} {text}"));
        }
    }
    if !d.facts.added.is_empty() || !d.facts.dropped.is_empty() {
        p.outln("");
        p.outln("facts");
        for f in &d.facts.added {
            p.outln_painted(&[(&format!("  + {}", line(f)), "32")]);
        }
        for f in &d.facts.dropped {
            p.outln_painted(&[(&format!("  - {}", line(f)), "31")]);
        }
    }
    let a = &d.artifacts;
    if !a.added.is_empty() || !a.removed.is_empty() || !a.changed.is_empty() {
        p.outln("");
        p.outln("files");
        for f in &a.added {
            p.outln(&format!("  added    {}", line(f)));
        }
        for f in &a.removed {
            p.outln(&format!("  removed  {}", line(f)));
        }
        for c in &a.changed {
            let was = c.path_then.as_deref().map(|t| format!(" (was {})", line(t))).unwrap_or_default();
            p.outln(&format!("  changed  {}{was}  {} → {} bytes", line(&c.path), c.bytes_then, c.bytes_now));
        }
        for c in &a.changed {
            let Some(diff) = &c.diff else { continue };
            p.outln("");
            for l in diff.lines() {
                let color = match l.as_bytes().first() {
                    Some(b'+') if !l.starts_with("+++") => "32",
                    Some(b'-') if !l.starts_with("---") => "31",
                    Some(b'@') => "36",
                    _ => "",
                };
                // outln_painted shows a file's terminal escapes as text, never sends them.
                p.outln_painted(&[(l, color)]);
            }
            if c.diff_lines_left_out > 0 {
                p.outln(&format!("  ... {} more diff lines (--json has the first 200)", c.diff_lines_left_out));
            }
        }
    }
}
