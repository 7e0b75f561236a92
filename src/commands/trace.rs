//! `agentloop trace show|stats`: read trace.jsonl as a timeline or as sums.

use crate::error::{Error, Result};
use crate::output::Printer;
use crate::settings::Ctx;
use crate::trace::{self, Entry, Phase};
use clap::{Args, Subcommand};
use serde_json::json;
use std::collections::BTreeMap;
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
    fn new(args: FilterArgs, entries: &[Entry]) -> Result<Self> {
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
            Some("last") => entries.iter().rev().find(|e| !e.run_id.is_empty()).map(|e| e.run_id.clone()),
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

pub fn run(ctx: Ctx, cmd: TraceCommand) -> Result<u8> {
    let path = ctx.ws.trace();
    if !path.exists() {
        return Err(
            Error::usage(format!("{path} does not exist")).with_hint("run `agentloop init` first, or pass -w DIR")
        );
    }
    let (entries, bad) = trace::read(&path)?;
    for b in &bad {
        ctx.printer.warn(&format!("{path}:{}: skipped a corrupt line ({})", b.line, b.message));
    }
    match cmd {
        TraceCommand::Show(args) => {
            let filter = Filter::new(args.filter, &entries)?;
            if !ctx.printer.json && !ctx.printer.quiet {
                ctx.printer.outln(&ctx.printer.paint(HEADER, "1"));
            }
            for e in entries.iter().filter(|e| filter.keep(e)) {
                print_entry(&ctx.printer, e);
            }
            if args.follow {
                follow(&ctx, &filter, entries.last())?;
            }
        }
        TraceCommand::Stats(args) => {
            let filter = Filter::new(args, &entries)?;
            let kept: Vec<&Entry> = entries.iter().filter(|e| filter.keep(e)).collect();
            stats(&ctx.printer, &kept);
        }
    }
    Ok(0)
}

fn finished(e: &Entry) -> bool {
    e.event == "run.finished"
}

fn follow(ctx: &Ctx, filter: &Filter, last: Option<&Entry>) -> Result<()> {
    if last.is_some_and(finished) {
        return Ok(());
    }
    let path = ctx.ws.trace();
    let mut offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let mut partial = String::new();
    let mut line_no = crate::fs::read_optional(&path)?.unwrap_or_default().lines().count();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(_) => continue,
        };
        if (bytes.len() as u64) < offset {
            offset = 0;
        }
        partial.push_str(&String::from_utf8_lossy(&bytes[offset as usize..]));
        offset = bytes.len() as u64;
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

fn stats(p: &Printer, entries: &[&Entry]) {
    let mut total = Sum::default();
    let mut phases: BTreeMap<&str, Sum> = BTreeMap::new();
    let mut tools: BTreeMap<&str, Sum> = BTreeMap::new();
    let mut runs = std::collections::BTreeSet::new();
    let mut steps = 0;
    for e in entries {
        total.add(e);
        runs.insert(e.run_id.as_str());
        steps = steps.max(e.step);
        phases.entry(e.phase.map(|p| p.as_str()).unwrap_or("-")).or_default().add(e);
        if let Some(t) = &e.tool {
            if e.phase == Some(Phase::Act) {
                tools.entry(t).or_default().add(e);
            }
        }
    }
    if p.json {
        p.json_value(&json!({"runs": runs.len(), "steps": steps, "total": total, "phases": phases, "tools": tools}));
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
    for (k, s) in &phases {
        p.outln(&row(k, s));
    }
    if !tools.is_empty() {
        p.outln(&header.replacen("              ", "tool          ", 1));
        for (k, s) in &tools {
            p.outln(&row(k, s));
        }
    }
    p.outln(&row("total", &total));
}
