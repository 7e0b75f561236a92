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
    let last_run = || {
        let mut last = None;
        let _ = trace::scan(&path, |r| {
            if let Ok(e) = r {
                if !e.run_id.is_empty() {
                    last = Some(e.run_id);
                }
            }
        });
        last
    };
    let warn =
        |b: &trace::BadLine| ctx.printer.warn(&format!("{path}:{}: skipped a corrupt line ({})", b.line, b.message));
    match cmd {
        TraceCommand::Show(args) => {
            let filter = Filter::new(args.filter, last_run)?;
            if !ctx.printer.json && !ctx.printer.quiet {
                ctx.printer.outln(&ctx.printer.paint(HEADER, "1"));
            }
            let mut ended = false;
            let mut lines = 0;
            let offset = trace::scan(&path, |r| {
                lines += 1;
                match r {
                    Ok(e) => {
                        ended = finished(&e);
                        if filter.keep(&e) {
                            print_entry(&ctx.printer, &e);
                        }
                    }
                    Err(b) => warn(&b),
                }
            })?;
            if args.follow && !ended {
                follow(&ctx, &path, &filter, offset, lines)?;
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

fn follow(ctx: &Ctx, path: &camino::Utf8Path, filter: &Filter, mut offset: u64, mut line_no: usize) -> Result<()> {
    let mut partial = String::new();
    loop {
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
                        print_entry(&ctx.printer, &e);
                    }
                    if finished(&e) {
                        return Ok(());
                    }
                }
                Err(err) => ctx.printer.warn(&format!("{path}:{line_no}: skipped a corrupt line ({err})")),
            }
        }
    }
}

fn print_entry(p: &Printer, e: &Entry) {
    if p.json {
        p.outln(&e.to_line());
        return;
    }
    let phase = e.phase.map(|p| p.as_str()).unwrap_or("-");
    let status = e.result_status.clone().or_else(|| e.decision.clone()).unwrap_or_default();
    let status = if e.is_error() { p.paint(&format!("{status:<9}"), "31") } else { format!("{status:<9}") };
    let dur = e.duration_ms.map(|d| format!("{d}ms")).unwrap_or_default();
    let tok = e
        .usage
        .map(|u| format!("{}→{}", u.input_tokens + u.cache_read_tokens + u.cache_write_tokens, u.output_tokens))
        .unwrap_or_default();
    let cost = e.cost_usd.map(|c| format!("${c:.4}")).unwrap_or_default();
    let what = e.error.clone().or_else(|| e.result_summary.clone()).or_else(|| e.reason.clone()).unwrap_or_default();
    let what: String = what.replace('\n', " ").chars().take(80).collect();
    let line = format!(
        "{:<24} {:>4} {:<7} {:<13} {:<14} {} {:>7} {:>11} {:>8}  {}",
        e.ts,
        e.step,
        phase,
        e.event,
        e.tool.as_deref().unwrap_or(""),
        status,
        dur,
        tok,
        cost,
        what
    );
    p.outln(line.trim_end());
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
    }
}

#[derive(Default)]
struct Stats {
    total: Sum,
    phases: BTreeMap<String, Sum>,
    tools: BTreeMap<String, Sum>,
    runs: std::collections::BTreeSet<String>,
    steps: u32,
}

impl Stats {
    fn add(&mut self, e: &Entry) {
        self.total.add(e);
        if !self.runs.contains(&e.run_id) {
            self.runs.insert(e.run_id.clone());
        }
        self.steps = self.steps.max(e.step);
        self.phases.entry(e.phase.map(|p| p.as_str()).unwrap_or("-").to_string()).or_default().add(e);
        if let (Some(t), Some(Phase::Act)) = (&e.tool, e.phase) {
            self.tools.entry(t.clone()).or_default().add(e);
        }
    }

    fn print(&self, p: &Printer) {
        let Stats { total, phases, tools, runs, steps } = self;
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
                name,
                s.entries,
                s.errors,
                s.duration_ms,
                s.input_tokens + s.cache_read_tokens + s.cache_write_tokens,
                s.output_tokens,
                format!("{:.4}", s.cost_usd)
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
