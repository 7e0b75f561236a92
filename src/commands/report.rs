//! `agentloop report`: a run's paper trail as one self-contained HTML page, and with `--all`
//! an index page of every run under a root.

use agentloop_engine::report::{self, Links, Row, Run};
use agentloop_engine::settings::Ctx;
use agentloop_types::error::{Error, Result};
use agentloop_workspace::history;
use camino::{Utf8Path, Utf8PathBuf};
use clap::Args;
use serde_json::json;

/// Write a run's report: one HTML page to open in a browser, with no network and no script.
///
/// The page shows the goal, status and reason, steps, tokens, cost, wall time and model; a
/// timeline of the phases (one bar per phase entry); tokens and cost per step; one card per step
/// (Plan's next action and why, the tool's result with links to its artifacts, Reflect's
/// decision and the Definition-of-Done items it ticked); and memory.md and plan.md as they are.
/// A run with an earlier run of its series (the same job run again) gets a "Since last run"
/// card: what `runs diff` shows.
/// Text from the run is escaped: a goal or a tool result cannot add markup or script.
///
/// Writes report.html in the run's folder (it moves with the run to runs/<id>/) unless -o says
/// otherwise, and prints the path written. -w may name a workspace or a runs/<id> folder.
/// --all writes the report of every run under the workspace (the current one and runs/<id>/,
/// where `serve` and event mode keep theirs) and an index page linking to them
/// (<workspace>/index.html, or -o FILE), and prints the index's path.
///
/// Exit codes: 0 written, 1 cannot write, 2 no such run or bad flags.
///
/// Examples:
///   agentloop -w ws report                         # ws/report.html
///   agentloop -w ws report --run last -o last.html
///   agentloop -w ws report -o - > /tmp/run.html
///   agentloop -w root report --all                 # root/index.html and each run's report.html
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ReportArgs {
    /// Report this run of the history instead of the current one (an id, a unique prefix, or `last`).
    #[arg(long, value_name = "ID", conflicts_with = "all")]
    pub run: Option<String>,
    /// Write the page (with --all, the index) to FILE; - writes it to stdout.
    #[arg(short, long, value_name = "FILE|-")]
    pub output: Option<Utf8PathBuf>,
    /// Report every run under the workspace and write an index page of them.
    #[arg(long)]
    pub all: bool,
}

pub fn run(ctx: Ctx, args: ReportArgs) -> Result<u8> {
    ctx.ws.require_dir()?;
    let runs_dir = ctx.config().handle.runs_dir.clone();
    if args.all {
        return all(&ctx, &runs_dir, args.output);
    }
    let ws = match &args.run {
        Some(id) => history::find(&ctx.ws, &runs_dir, id)?,
        None if !ctx.ws.has_run() => {
            return Err(Error::usage(format!("{} holds no current run", ctx.ws.root))
                .with_hint("`agentloop report --all` reports every run under it; `--run ID` (or `last`) picks one"))
        }
        None => ctx.ws.clone(),
    };
    let mut run = Run::load(&ws)?;
    run.since = since(&ctx.ws, &runs_dir, &ws, &|m| ctx.printer.warn(m));
    let out = args.output.unwrap_or_else(|| ws.root.join("report.html"));
    let links = Links { files: link_prefix(&out, &ws.root)?, index: None, refresh: None, now: None, actions: None };
    write(&ctx.ws.root, &out, &report::render(&run, &links))?;
    let p = &ctx.printer;
    if p.json {
        p.json_value(&json!({"run_id": run.state.run_id, "report": out}));
    } else if out != "-" {
        p.outln(out.as_str());
        p.info(&format!("wrote the report of run {} to {out}; open it in a browser", run.state.run_id));
    }
    Ok(0)
}

/// Writes the current run's report to report.html in the workspace `ws` and returns its path.
pub fn write_current(ws: &agentloop_workspace::workspace::Workspace) -> Result<Utf8PathBuf> {
    let run = Run::load(ws)?;
    let out = ws.root.join("report.html");
    let links = Links { files: link_prefix(&out, &ws.root)?, index: None, refresh: None, now: None, actions: None };
    write(&ws.root, &out, &report::render(&run, &links))?;
    Ok(out)
}

/// What changed since the previous run of `run`'s series in the workspace `root` (None when it
/// is the first, or when `run` is no run of that history).
fn since(
    root: &agentloop_workspace::workspace::Workspace,
    runs_dir: &str,
    run: &agentloop_workspace::workspace::Workspace,
    warn: &dyn Fn(&str),
) -> Option<agentloop_workspace::runs_diff::RunsDiff> {
    let runs = history::list(root, runs_dir, &|_| {});
    let this = runs.iter().find(|r| r.ws.root == run.root)?;
    previous_diff(&runs, this, warn)
}

/// The "Since last run" comparison of `this` with the previous run of its series; a run whose
/// files cannot be compared gets no card and a warning.
fn previous_diff(
    runs: &[history::Run],
    this: &history::Run,
    warn: &dyn Fn(&str),
) -> Option<agentloop_workspace::runs_diff::RunsDiff> {
    let then = agentloop_workspace::runs_diff::previous(runs, this)?;
    match agentloop_workspace::runs_diff::diff(then, this) {
        Ok(d) => Some(d),
        Err(e) => {
            warn(&format!("no \"Since last run\" card for run {}: {}", this.state.run_id, e.detail()));
            None
        }
    }
}

/// Every run's report, then the index linking to them.
fn all(ctx: &Ctx, runs_dir: &str, output: Option<Utf8PathBuf>) -> Result<u8> {
    let index = output.unwrap_or_else(|| ctx.ws.root.join("index.html"));
    let runs = history::list(&ctx.ws, runs_dir, &|m| ctx.printer.warn(m));
    // Links are made as if the index were written in the root when it goes to stdout.
    let at = if index == "-" { ctx.ws.root.join("index.html") } else { index.clone() };
    let index_name = report::html::encode_segment(at.file_name().unwrap_or("index.html"));
    let mut rows = Vec::new();
    let mut written = Vec::new();
    for r in &runs {
        let mut run = match Run::load(&r.ws) {
            Ok(run) => run,
            Err(e) => {
                ctx.printer.warn(&format!("skipped {}: {}", r.ws.root, e.detail()));
                continue;
            }
        };
        run.since = previous_diff(&runs, r, &|m| ctx.printer.warn(m));
        let page = r.ws.root.join("report.html");
        let links = Links {
            files: String::new(),
            index: Some(format!("{}{index_name}", link_prefix(&page, dir_of(&at))?)),
            refresh: None,
            now: None,
            actions: None,
        };
        write(&ctx.ws.root, &page, &report::render(&run, &links))?;
        rows.push(row(r, &format!("{}report.html", link_prefix(&at, &r.ws.root)?)));
        written.push(json!({"run_id": run.state.run_id, "report": page}));
    }
    let title = std::path::absolute(&ctx.ws.root)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| ctx.ws.root.to_string());
    write(&ctx.ws.root, &index, &report::render_index(&title, &rows, None))?;
    let p = &ctx.printer;
    if p.json {
        p.json_value(&json!({"index": index, "reports": written}));
    } else if index != "-" {
        p.outln(index.as_str());
        p.info(&format!("wrote {} run report(s) and the index {index}", written.len()));
    }
    Ok(0)
}

/// The index row of a run of the history.
pub fn row(r: &history::Run, href: &str) -> Row {
    let s = &r.state;
    Row {
        run_id: s.run_id.clone(),
        status: history::shown_status(r).to_string(),
        stop: s.stop,
        asks: s.open_question.is_some(),
        goal: s.goal.clone(),
        reason: s.reason.clone(),
        steps: s.completed_steps.len(),
        tokens: s.usage.total(),
        cost_usd: s.cost(),
        scripted: s.scripted(),
        started_at: s.started_at.clone(),
        href: href.to_string(),
        note: None,
        outcome: s.outcome.clone(),
        agent: s.agent.clone(),
        slot: s.slot.clone(),
    }
}

fn dir_of(p: &Utf8Path) -> &Utf8Path {
    p.parent().filter(|d| !d.as_str().is_empty()).unwrap_or(Utf8Path::new("."))
}

/// The link prefix from the page `out` (stdout: as if written in `target`) to folder `target`.
fn link_prefix(out: &Utf8Path, target: &Utf8Path) -> Result<String> {
    if out == "-" {
        return Ok(String::new());
    }
    let canon = |p: &Utf8Path| {
        p.canonicalize_utf8()
            .map_err(|e| Error::io("find", p, e).with_hint("the folder of -o FILE must exist; create it first"))
    };
    let from = canon(dir_of(out))?;
    let to = canon(target)?;
    // No relative way there (another drive): an absolute file link.
    Ok(report::relative_link(&from, &to)
        .unwrap_or_else(|| format!("file:///{}/", report::html::encode_path(to.as_str().trim_start_matches('/')))))
}

/// Writes a page to `out` (`-`: stdout). Inside the workspace `root` the folders are entered
/// without following links (a symlinked `runs/<id>/` is refused, exit 8); a page that is a link
/// is replaced, never written through.
fn write(root: &Utf8Path, out: &Utf8Path, page: &str) -> Result<()> {
    if out == "-" {
        use std::io::Write;
        // The page quotes the workspace, which may hold terminal escapes; stdout may be one.
        let page = agentloop_io::output::printable(page);
        let mut o = std::io::stdout().lock();
        return match o.write_all(page.as_bytes()).and_then(|_| o.flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::io("write", "stdout", e)),
            _ => Ok(()),
        };
    }
    match out.strip_prefix(root) {
        Ok(rel)
            if rel.components().all(|c| matches!(c, camino::Utf8Component::Normal(_))) && rel.file_name().is_some() =>
        {
            agentloop_io::fs::write_in(root, rel, page.as_bytes())
        }
        _ => agentloop_io::fs::write_atomic(out, page.as_bytes()),
    }
}
