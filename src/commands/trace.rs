//! `agentloop trace show|stats`: read trace.jsonl as a timeline or as sums.

use crate::error::{Error, Result};
use crate::output::Printer;
use crate::settings::Ctx;
use crate::trace::{self, Entry, Phase};
use clap::{Args, Subcommand};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::time::{Duration, SystemTime};

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Print the trace as a readable timeline (or JSONL with --json).
    ///
    /// Examples:
    ///   agentloop -w ws trace show --errors
    ///   agentloop -w ws trace show --json --phase act | jq -r .tool
    ///   agentloop -w ws trace show --follow
    #[command(verbatim_doc_comment)]
    Show(ShowArgs),
    /// Sum steps, tokens, cost and time per phase and per tool.
    Stats(FilterArgs),
}

#[derive(Debug, Args, Clone, Default)]
pub struct FilterArgs {
    /// Only this phase.
    #[arg(long, value_enum)]
    pub phase: Option<Phase>,
    /// Only this step.
    #[arg(long)]
    pub step: Option<u32>,
    /// Only entries for this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only entries that record an error.
    #[arg(long)]
    pub errors: bool,
    /// Only entries at or after this time: RFC 3339, or a duration ago such as 10m or 2h.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only this run id (`last` = the newest run in the file).
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Keep printing new entries as they are appended, until the run finishes.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Show every run the trace holds (default: the latest run, unless --run picks one).
    #[arg(long)]
    pub all_runs: bool,
    /// Do not shorten lines to the terminal's width or notes to 80 characters.
    #[arg(long)]
    pub wide: bool,
}

struct Filter {
    args: FilterArgs,
    since: Option<SystemTime>,
    run: Option<String>,
}

impl Filter {
    fn new(args: FilterArgs, last_run: impl FnOnce() -> Option<String>) -> Result<Self> {
        let since = match &args.since {
            None => None,
            Some(s) => Some(match crate::clock::parse_rfc3339(s) {
                Some(t) => t,
                None => {
                    let d = crate::clock::parse_duration(s).map_err(|e| {
                        Error::usage(format!("--since: {e}"))
                            .with_hint("give an RFC 3339 time or a duration such as 10m")
                    })?;
                    crate::clock::now().checked_sub(d).unwrap_or(SystemTime::UNIX_EPOCH)
                }
            }),
        };
        let run = match args.run.as_deref() {
            Some("last") => last_run(),
            other => other.map(String::from),
        };
        Ok(Filter { args, since, run })
    }

    fn keep(&self, e: &Entry) -> bool {
        let a = &self.args;
        a.phase.is_none_or(|p| e.phase == Some(p))
            && a.step.is_none_or(|s| e.step == s)
            && a.tool.as_ref().is_none_or(|t| e.tool.as_ref() == Some(t))
            && (!a.errors || e.is_error())
            && self.run.as_ref().is_none_or(|r| &e.run_id == r)
            && self.since.is_none_or(|s| crate::clock::parse_rfc3339(&e.ts).is_some_and(|t| t >= s))
    }
}

pub fn run(ctx: Ctx, mut cmd: TraceCommand) -> Result<u8> {
    // `--run ID|last` reads that run's own trace, wherever the history keeps it (an id, a unique
    // prefix, or the newest run); an id found in no folder filters the workspace's trace, which
    // older workspaces shared between runs.
    let run_arg = match &mut cmd {
        TraceCommand::Show(a) => &mut a.filter.run,
        TraceCommand::Stats(a) => &mut a.run,
    };
    let ws = match run_arg.as_deref() {
        Some(id) => match crate::history::find(&ctx.ws, &ctx.config().handle.runs_dir, id) {
            Ok(w) => {
                *run_arg = Some(w.load_state()?.run_id);
                w
            }
            Err(_) => ctx.ws.clone(),
        },
        None => ctx.ws.clone(),
    };
    let path = ws.trace();
    if !path.exists() {
        return Err(
            Error::usage(format!("{path} does not exist")).with_hint("run `agentloop init` first, or pass -w DIR")
        );
    }
    // Streamed: memory stays flat however long the trace is (`--run last` reads it twice).
    let last_run = || latest_run(&path).map(|l| l.id);
    let warn =
        |b: &trace::BadLine| ctx.printer.warn(&format!("{path}:{}: skipped a corrupt line ({})", b.line, b.message));
    match cmd {
        TraceCommand::Show(args) => {
            // Without --run or --all-runs, the latest run and anything after it.
            let from_line = match (&args.filter.run, args.all_runs) {
                (None, false) => latest_run(&path).filter(|l| l.earlier_runs > 0),
                _ => None,
            };
            if let Some(l) = &from_line {
                ctx.printer.info(&format!(
                    "showing the latest run, {}; {} earlier run(s) in this trace: --all-runs shows them",
                    l.id, l.earlier_runs
                ));
            }
            let skip = from_line.map_or(0, |l| l.first_line);
            let filter = Filter::new(args.filter, last_run)?;
            let mut view = View::new(&ctx.printer, args.wide);
            if !ctx.printer.json && !ctx.printer.quiet {
                view.header();
            }
            let mut ended = false;
            let mut lines = 0;
            let offset = trace::scan(&path, |r| {
                lines += 1;
                match r {
                    Ok(e) => {
                        ended = finished(&e);
                        if lines >= skip && filter.keep(&e) {
                            view.entry(&e);
                        }
                    }
                    Err(b) => warn(&b),
                }
            })?;
            if args.follow && !ended {
                follow(&mut view, &path, &filter, offset, lines)?;
            }
        }
        TraceCommand::Stats(args) => {
            let filter = Filter::new(args, last_run)?;
            let mut stats = Stats::default();
            trace::scan(&path, |r| match r {
                Ok(e) if filter.keep(&e) => stats.add(&e),
                Ok(_) => {}
                Err(b) => warn(&b),
            })?;
            stats.print(&ctx.printer);
        }
    }
    Ok(0)
}

fn finished(e: &Entry) -> bool {
    e.event == "run.finished"
}

/// The newest run in a trace: its id, the line (1-based) where its entries begin, and how many
/// other runs come before it.
struct Latest {
    id: String,
    first_line: usize,
    earlier_runs: usize,
}

fn latest_run(path: &camino::Utf8Path) -> Option<Latest> {
    let mut latest: Option<Latest> = None;
    let mut seen = std::collections::HashSet::new();
    let mut line = 0;
    let _ = trace::scan(path, |r| {
        line += 1;
        let Ok(e) = r else { return };
        if e.run_id.is_empty() || latest.as_ref().is_some_and(|l| l.id == e.run_id) {
            return;
        }
        seen.insert(e.run_id.clone());
        latest = Some(Latest { id: e.run_id, first_line: line, earlier_runs: seen.len() - 1 });
    });
    latest
}

fn follow(
    view: &mut View,
    path: &camino::Utf8Path,
    filter: &Filter,
    mut offset: u64,
    mut line_no: usize,
) -> Result<()> {
    let mut partial = String::new();
    loop {
        // The reader went away (`| head`): nothing more would be shown.
        if crate::output::stdout_gone() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
        // Only the bytes appended since the last look are read.
        let Ok(mut f) = std::fs::File::open(path) else { continue };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < offset {
            offset = 0;
        }
        let mut bytes = Vec::new();
        if f.seek(SeekFrom::Start(offset)).and_then(|_| f.read_to_end(&mut bytes)).is_err() {
            continue;
        }
        partial.push_str(&String::from_utf8_lossy(&bytes));
        offset += bytes.len() as u64;
        while let Some(nl) = partial.find('\n') {
            let line: String = partial.drain(..=nl).collect();
            line_no += 1;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Entry>(line.trim_end()) {
                Ok(e) => {
                    if filter.keep(&e) {
                        view.entry(&e);
                    }
                    if finished(&e) {
                        return Ok(());
                    }
                }
                Err(err) => view.printer.warn(&format!("{path}:{line_no}: skipped a corrupt line ({err})")),
            }
        }
    }
}

/// The timeline printer: one line per entry, a rule where a new run begins, lines cut to the
/// terminal's width (notes to 80 characters when not on a terminal) unless `--wide`.
struct View<'a> {
    printer: &'a Printer,
    width: Option<usize>,
    wide: bool,
    run: Option<String>,
}

impl<'a> View<'a> {
    fn new(printer: &'a Printer, wide: bool) -> Self {
        let width = if wide { None } else { crate::output::terminal_width() };
        View { printer, width, wide, run: None }
    }

    fn header(&self) {
        self.printer.outln_painted(&[(&self.fit(HEADER.to_string()), "1")]);
    }

    fn fit(&self, line: String) -> String {
        match self.width {
            Some(w) if line.chars().count() > w => line.chars().take(w.saturating_sub(1)).chain(['…']).collect(),
            _ => line,
        }
    }

    fn entry(&mut self, e: &Entry) {
        let p = self.printer;
        if p.json {
            p.outln(&e.to_line());
            return;
        }
        // Every field comes from the trace file, which whoever wrote the workspace controls: each
        // is shown on one line with its controls visible (before fitting, so widths are true).
        let field = |s: &str| crate::output::one_line(s).into_owned();
        if self.run.as_ref().is_some_and(|r| *r != e.run_id) {
            p.outln(&self.fit(format!("── run {} ──", field(&e.run_id))));
        }
        self.run = Some(e.run_id.clone());
        let phase = e.phase.map(|p| p.as_str()).unwrap_or("-");
        let status = field(e.result_status.as_deref().or(e.decision.as_deref()).unwrap_or_default());
        let dur = e.duration_ms.map(|d| format!("{d}ms")).unwrap_or_default();
        let tok = e
            .usage
            .map(|u| format!("{}→{}", u.input_tokens + u.cache_read_tokens + u.cache_write_tokens, u.output_tokens))
            .unwrap_or_default();
        let cost = e.cost_usd.map(|c| format!("${c:.4}")).unwrap_or_default();
        let mut what =
            e.error.clone().or_else(|| e.result_summary.clone()).or_else(|| e.reason.clone()).unwrap_or_default();
        if e.data.as_ref().and_then(|d| d.get("edited_by_hand")).and_then(serde_json::Value::as_bool) == Some(true) {
            what = format!("[edited by hand] {what}");
        }
        let mut what = field(&what.replace('\n', " "));
        if !self.wide && self.width.is_none() {
            what = what.chars().take(80).collect();
        }
        let line = format!(
            "{:<24} {:>4} {:<7} {:<13} {:<14} {:<9} {:>7} {:>11} {:>8}  {}",
            field(&e.ts),
            e.step,
            phase,
            field(&e.event),
            field(e.tool.as_deref().unwrap_or("")),
            status,
            dur,
            tok,
            cost,
            what
        );
        let line = self.fit(line.trim_end().to_string());
        // Colour after fitting, so escape codes never count as width.
        let painted = format!(" {status:<9}");
        match line.find(&painted).filter(|_| e.is_error() && !status.is_empty()) {
            Some(at) => {
                let (before, rest) = line.split_at(at + 1);
                let (status, after) = rest.split_at(painted.len() - 1);
                p.outln_painted(&[(before, ""), (status, "31"), (after, "")]);
            }
            None => p.outln(&line),
        }
    }
}

const HEADER: &str =
    "time                     step phase   event         tool           status       time      tokens     cost  note";

#[derive(Default, serde::Serialize)]
struct Sum {
    entries: u64,
    errors: u64,
    duration_ms: u64,
    input_tokens: u64,
    output_tokens: u64,
    cache_read_tokens: u64,
    cache_write_tokens: u64,
    cost_usd: f64,
    /// Model calls the scripted model answered: they spend nothing and are never priced.
    scripted_calls: u64,
    /// Model calls with a price (those in cost_usd).
    #[serde(skip)]
    priced_calls: u64,
}

impl Sum {
    fn add(&mut self, e: &Entry) {
        self.entries += 1;
        self.errors += e.is_error() as u64;
        self.duration_ms += e.duration_ms.unwrap_or(0);
        // run.finished carries the run's totals; counting it would count everything twice.
        if e.event == "run.finished" {
            return;
        }
        if let Some(u) = e.usage {
            self.input_tokens += u.input_tokens;
            self.output_tokens += u.output_tokens;
            self.cache_read_tokens += u.cache_read_tokens;
            self.cache_write_tokens += u.cache_write_tokens;
        }
        self.cost_usd += e.cost_usd.unwrap_or(0.0);
        self.priced_calls += e.cost_usd.is_some() as u64;
        self.scripted_calls += e.model.as_deref().is_some_and(crate::model::is_scripted) as u64;
    }
}

#[derive(Default)]
struct Stats {
    total: Sum,
    phases: BTreeMap<String, Sum>,
    tools: BTreeMap<String, Sum>,
    /// The highest step of each run: steps across runs are their sum.
    runs: BTreeMap<String, u32>,
}

impl Stats {
    fn add(&mut self, e: &Entry) {
        self.total.add(e);
        let steps = self.runs.entry(e.run_id.clone()).or_default();
        *steps = (*steps).max(e.step);
        self.phases.entry(e.phase.map(|p| p.as_str()).unwrap_or("-").to_string()).or_default().add(e);
        if let (Some(t), Some(Phase::Act)) = (&e.tool, e.phase) {
            self.tools.entry(t.clone()).or_default().add(e);
        }
    }

    fn print(&self, p: &Printer) {
        let Stats { total, phases, tools, runs } = self;
        let steps: u32 = runs.values().sum();
        if p.json {
            p.json_value(
                &json!({"runs": runs.len(), "steps": steps, "total": total, "phases": phases, "tools": tools}),
            );
            return;
        }
        p.outln(&format!("runs {}  steps {}  entries {}  errors {}", runs.len(), steps, total.entries, total.errors));
        let row = |name: &str, s: &Sum| {
            format!(
                "{:<14} {:>7} {:>6} {:>10} {:>10} {:>10} {:>10}",
                crate::output::one_line(name),
                s.entries,
                s.errors,
                s.duration_ms,
                s.input_tokens + s.cache_read_tokens + s.cache_write_tokens,
                s.output_tokens,
                // Only scripted calls: no spend to show, and none implied.
                if s.scripted_calls > 0 && s.priced_calls == 0 {
                    "scripted".into()
                } else {
                    format!("{:.4}", s.cost_usd)
                }
            )
        };
        let header = format!(
            "{:<14} {:>7} {:>6} {:>10} {:>10} {:>10} {:>10}",
            "", "entries", "errors", "time_ms", "tokens_in", "tokens_out", "cost_usd"
        );
        p.outln(&header.replacen("              ", "phase         ", 1));
        for (k, s) in phases.iter() {
            p.outln(&row(k, s));
        }
        if !tools.is_empty() {
            p.outln(&header.replacen("              ", "tool          ", 1));
            for (k, s) in tools.iter() {
                p.outln(&row(k, s));
            }
        }
        p.outln(&row("total", total));
    }
}
