//! `agentloop trace show|stats`: read trace.jsonl as a timeline or as sums.

use super::trace_read::{self, scan_par, Line, Probe};
use agentloop_engine::settings::Ctx;
use agentloop_io::output::{Out, Printer};
use agentloop_types::error::{Error, Result};
use agentloop_types::trace::{self, Entry, Event, Phase};
use clap::builder::TypedValueParser;
use clap::{Args, Subcommand};
use memchr::memmem;
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
    ///
    /// Sums the workspace's trace.jsonl; --all-runs adds every archived run under runs/<id>/.
    #[command(verbatim_doc_comment)]
    Stats(StatsArgs),
}

/// `--phase NAME`: the phases' own names, listed in `--help` and completions.
fn phase_parser() -> impl clap::builder::TypedValueParser<Value = Phase> {
    clap::builder::PossibleValuesParser::new(Phase::ALL.map(Phase::as_str)).try_map(|s| s.parse::<Phase>())
}

#[derive(Debug, Args, Clone, Default)]
pub struct FilterArgs {
    /// Only this phase.
    #[arg(long, value_parser = phase_parser())]
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
pub struct StatsArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Also sum the archived runs under runs/<id>/ (the runs `agentloop runs` lists).
    #[arg(long)]
    pub all_runs: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Keep printing new entries as they are appended, until the run finishes.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Show every run: the archived ones under runs/<id>/ (oldest first), then every run the
    /// workspace's trace holds (default: its latest run, unless --run picks one).
    #[arg(long)]
    pub all_runs: bool,
    /// Full timestamps and a tokens column; no line or note shortened.
    #[arg(long)]
    pub wide: bool,
}

struct Filter {
    args: FilterArgs,
    since: Option<SystemTime>,
    run: Option<String>,
    /// The latest run, shown when no run was asked for: like `run`, but no part of the byte
    /// prefilter, so a plain `trace show` still parses (and warns about) every line.
    latest: Option<String>,
}

impl Filter {
    fn new(args: FilterArgs, last_run: impl FnOnce() -> Option<String>) -> Result<Self> {
        let since = match &args.since {
            None => None,
            Some(s) => Some(match agentloop_types::clock::parse_rfc3339(s) {
                Some(t) => t,
                None => {
                    let d = agentloop_types::clock::parse_duration(s).map_err(|e| {
                        Error::usage(format!("--since: {e}"))
                            .with_hint("give an RFC 3339 time or a duration such as 10m")
                            .with_source(e)
                    })?;
                    agentloop_types::clock::now().checked_sub(d).unwrap_or(SystemTime::UNIX_EPOCH)
                }
            }),
        };
        let run = match args.run.as_deref() {
            Some("last") => last_run(),
            other => other.map(String::from),
        };
        Ok(Filter { args, since, run, latest: None })
    }

    fn keep(&self, e: &Entry) -> bool {
        self.keeps(e.phase, e.step, e.tool.as_deref(), e.is_error(), &e.run_id, &e.ts)
    }

    /// [`Filter::keep`] on a line read only as far as the filter looks.
    fn keep_probe(&self, e: &Probe) -> bool {
        self.keeps(e.phase, e.step, e.tool.as_deref(), e.is_error(), &e.run_id, &e.ts)
    }

    fn keeps(&self, phase: Option<Phase>, step: u32, tool: Option<&str>, error: bool, run_id: &str, ts: &str) -> bool {
        let a = &self.args;
        a.phase.is_none_or(|p| phase == Some(p))
            && a.step.is_none_or(|s| step == s)
            && a.tool.as_deref().is_none_or(|t| tool == Some(t))
            && (!a.errors || error)
            && self.run.as_deref().is_none_or(|r| run_id == r)
            && self.latest.as_deref().is_none_or(|r| run_id == r)
            && self.since.is_none_or(|s| agentloop_types::clock::parse_rfc3339(ts).is_some_and(|t| t >= s))
    }

    /// The byte test run on a line before it is parsed; None when nothing filters on a value
    /// it can look for.
    fn prefilter(&self) -> Option<Prefilter> {
        let a = &self.args;
        let quoted = |s: &str| agentloop_types::json::to_string(s);
        let mut needles: Vec<String> = Vec::new();
        needles.extend(a.phase.map(|p| quoted(p.as_str())));
        needles.extend(a.tool.as_deref().map(quoted));
        needles.extend(self.run.as_deref().map(quoted));
        // `error` is both the key of an error and the result status of one.
        needles.extend(a.errors.then(|| quoted("error")));
        if needles.is_empty() && a.step.is_none() {
            return None;
        }
        Some(Prefilter {
            needles: needles.iter().map(|n| memmem::Finder::new(n.as_bytes()).into_owned()).collect(),
            step: a.step.map(|s| s.to_string()),
        })
    }
}

/// Which lines can hold an entry the filter keeps, decided on the line's bytes without parsing
/// it: a kept entry's phase, tool, run id and `error` are JSON strings in its line, and a string
/// written without `\u` or `\/` escapes has one spelling, the one serde_json writes (a needle).
/// So a line that lacks a needle and has neither escape cannot be kept and is passed over; a
/// line that has one of those escapes is always parsed. The test only ever lets through more
/// than [`Filter::keep`]; every line it lets through is parsed and judged by `keep` as before.
struct Prefilter {
    /// Each a quoted JSON string every kept line holds.
    needles: Vec<memmem::Finder<'static>>,
    /// `--step N` as its decimal digits, the one way a JSON number reads as that u32.
    step: Option<String>,
}

impl Prefilter {
    fn may_keep(&self, line: &str) -> bool {
        let b = line.as_bytes();
        let found = self.needles.iter().all(|n| n.find(b).is_some())
            && self.step.as_deref().is_none_or(|s| has_step(b, s.as_bytes()));
        // Escapes are rare: one scan for a backslash before looking for either.
        found
            || (memchr::memchr(b'\\', b).is_some()
                && (memmem::find(b, b"\\u").is_some() || memmem::find(b, b"\\/").is_some()))
    }
}

/// Whether some `"step"` in the line is a key whose value starts with exactly these digits:
/// whitespace is allowed around the colon, as JSON allows it. (A `"step"` elsewhere, in a note or
/// in args, only lets the line through to the parse.)
fn has_step(b: &[u8], digits: &[u8]) -> bool {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    memmem::find_iter(b, b"\"step\"").any(|at| {
        let mut rest = &b[at + 6..];
        while rest.first().is_some_and(ws) {
            rest = &rest[1..];
        }
        let Some(rest) = rest.strip_prefix(b":") else { return false };
        let start = rest.iter().position(|c| !ws(c)).unwrap_or(rest.len());
        let number = &rest[start..];
        let len = number.iter().position(|c| !c.is_ascii_digit()).unwrap_or(number.len());
        &number[..len] == digits
    })
}

pub fn run(ctx: Ctx, mut cmd: TraceCommand) -> Result<u8> {
    let ws = workspace_of_run(&ctx, &mut cmd)?;
    let path = ws.trace();
    let all_runs = match &cmd {
        TraceCommand::Show(a) => a.all_runs,
        TraceCommand::Stats(a) => a.all_runs,
    };
    let files = trace_files(&ctx, all_runs, &path)?;
    match cmd {
        TraceCommand::Show(args) => show(&ctx, args, &files, &path)?,
        TraceCommand::Stats(args) => stats(&ctx, args, &files, &path)?,
    }
    Ok(0)
}

/// `--run ID|last` reads that run's own trace, wherever the history keeps it (an id, a unique
/// prefix, or the newest run), and the filter then names the run by its full id; an id found in
/// no folder filters the workspace's trace, which older workspaces shared between runs.
fn workspace_of_run(ctx: &Ctx, cmd: &mut TraceCommand) -> Result<agentloop_workspace::workspace::Workspace> {
    let run_arg = match cmd {
        TraceCommand::Show(a) => &mut a.filter.run,
        TraceCommand::Stats(a) => &mut a.filter.run,
    };
    Ok(match run_arg.as_deref() {
        Some(id) => match agentloop_workspace::history::find(&ctx.ws, &ctx.config().handle.runs_dir, id) {
            Ok(w) => {
                *run_arg = Some(w.load_state()?.run_id);
                w
            }
            Err(_) => ctx.ws.clone(),
        },
        None => ctx.ws.clone(),
    })
}

/// The trace files read: with --all-runs every archived run's own trace (oldest first), then
/// the workspace's `path`; a missing trace is an error only when there is no other.
fn trace_files(ctx: &Ctx, all_runs: bool, path: &camino::Utf8Path) -> Result<Vec<camino::Utf8PathBuf>> {
    let mut files = Vec::new();
    if all_runs {
        let mut archived: Vec<_> =
            agentloop_workspace::history::list(&ctx.ws, &ctx.config().handle.runs_dir, &|m| ctx.printer.warn(m))
                .into_iter()
                .filter(|r| !r.current)
                .collect();
        archived.sort_by(|a, b| (&a.state.started_at, &a.state.run_id).cmp(&(&b.state.started_at, &b.state.run_id)));
        for p in archived.iter().map(|r| r.ws.trace()).filter(|p| p.exists()) {
            // A linked trace.jsonl would show a file from outside the workspace.
            if agentloop_io::fs::leads_outside(&ctx.ws.root, &p) {
                ctx.printer.warn(&format!("{p} is a link out of the workspace; skipped"));
            } else {
                files.push(p);
            }
        }
    }
    if path.exists() {
        files.push(path.to_path_buf());
    } else if files.is_empty() {
        return Err(
            Error::usage(format!("{path} does not exist")).with_hint("run `agentloop init` first, or pass -w DIR")
        );
    }
    Ok(files)
}

/// The run `--run last` names: the run of the trace's last entry. Streamed: memory stays flat
/// however long the trace is (`--run last` reads it twice).
fn last_run_of(path: &camino::Utf8Path) -> Option<String> {
    edge_runs(path).map(|(_, last)| last).or_else(|| latest_run(path).map(|l| l.id))
}

/// A corrupt line is passed over with a warning naming the file and the line.
fn warn_corrupt(printer: &Printer, file: &camino::Utf8Path, b: &trace::BadLine) {
    printer.warn(&format!("{file}:{}: skipped a corrupt line ({})", b.line, b.message))
}

/// `trace show`: the entries the filter keeps, from every file in order, as a timeline (or the
/// stored lines under --json); with --follow, then what is appended until the run finishes.
fn show(ctx: &Ctx, args: ShowArgs, files: &[camino::Utf8PathBuf], path: &camino::Utf8Path) -> Result<()> {
    let latest = latest_unless_asked(&args, path);
    if let Some(l) = latest.as_ref().filter(|l| l.earlier_runs > 0) {
        ctx.printer.info(&format!(
            "showing the latest run, {}; {} earlier run(s) in this trace: --all-runs shows them",
            l.id, l.earlier_runs
        ));
    }
    let whole_errors = args.filter.errors;
    let mut filter = Filter::new(args.filter, || last_run_of(path))?;
    filter.latest = latest.map(|l| l.id);
    // --follow must see the trace's last entry (has the run finished?), so it parses
    // every line; a plain read parses only the lines that can be shown.
    let prefilter = filter.prefilter().filter(|_| !args.follow);
    let mut view = View::new(&ctx.printer, args.wide, whole_errors);
    if !ctx.printer.json && !ctx.printer.quiet {
        // Followed, the header stands above the entries still to come.
        if args.follow {
            view.header();
        } else {
            view.header_due = true;
        }
    }
    let work = |l: &Line, text: &mut String| judge_line(l, text, prefilter.as_ref(), &filter, &ctx.printer);
    let mut ended = false;
    let (mut offset, mut lines) = (0, 0);
    for file in files {
        (offset, lines) = scan_par(file, work, |_, got, text| match got {
            Ok(Got::Read { finished, shown }) => {
                ended = finished;
                match shown {
                    Some(Shown::Line) => view.rendered(text),
                    Some(Shown::Entry(e)) => view.entry(&e),
                    None => {}
                }
            }
            Ok(Got::Bad(b)) | Err(b) => warn_corrupt(&ctx.printer, file, &b),
        })?;
    }
    if args.follow && !ended && files.last().map(|f| f.as_path()) == Some(path) {
        // What is appended from now on is shown whatever its run: a new run's entries too.
        filter.latest = None;
        follow(&mut view, path, &filter, offset, lines)?;
    } else if view.shown == 0 {
        ctx.printer.info(if whole_errors { "no errors" } else { "no entries match" });
    }
    Ok(())
}

/// Without --run or --all-runs, the latest run: the run of the trace's last entry. Its id is
/// read off the end of the file; only a trace whose first entry is of another run is read
/// through first, to count the runs before it.
fn latest_unless_asked(args: &ShowArgs, path: &camino::Utf8Path) -> Option<Latest> {
    match (&args.filter.run, args.all_runs) {
        (None, false) => match edge_runs(path) {
            Some((first, last)) if first == last => Some(Latest { id: last, earlier_runs: 0 }),
            _ => latest_run(path),
        },
        _ => None,
    }
}

/// One line judged on the scan's threads: passed over on its bytes, read as far as the filter
/// looks, and (under --json) rendered as it is stored; the entries then come back in file
/// order. --follow reads every line (has the run finished?).
fn judge_line(
    l: &Line,
    text: &mut String,
    prefilter: Option<&Prefilter>,
    filter: &Filter,
    printer: &Printer,
) -> Option<Got> {
    if prefilter.is_some_and(|p| !p.may_keep(l.text)) {
        return None;
    }
    let bad = |message| Some(Got::Bad(trace::BadLine { line: l.number, message }));
    if printer.json {
        return match Probe::read(l.text) {
            Ok(p) => Some(Got::Read {
                finished: p.event == Event::RunFinished,
                shown: filter.keep_probe(&p).then(|| {
                    // Rendered as `outln` renders it: the newline needs no rendering.
                    printer.render_into(l.text, text);
                    text.push('\n');
                    Shown::Line
                }),
            }),
            Err(message) => bad(message),
        };
    }
    match trace::checked(l.text) {
        Ok(e) => Some(Got::Read { finished: finished(&e), shown: filter.keep(&e).then(|| Shown::Entry(Box::new(e))) }),
        Err(why) => bad(why.to_string()),
    }
}

/// `trace stats`: the entries the filter keeps, from every file, summed per phase and tool.
fn stats(ctx: &Ctx, args: StatsArgs, files: &[camino::Utf8PathBuf], path: &camino::Utf8Path) -> Result<()> {
    let filter = Filter::new(args.filter, || last_run_of(path))?;
    let prefilter = filter.prefilter();
    let mut stats = Stats::default();
    for file in files {
        let work = |l: &Line, _: &mut String| {
            if prefilter.as_ref().is_some_and(|p| !p.may_keep(l.text)) {
                return None;
            }
            match Probe::read(l.text) {
                Ok(p) => filter.keep_probe(&p).then(|| Ok(p.to_entry())),
                Err(message) => Some(Err(trace::BadLine { line: l.number, message })),
            }
        };
        scan_par(file, work, |_, r, _| match r {
            Ok(Ok(e)) => stats.add(&e),
            Ok(Err(b)) | Err(b) => warn_corrupt(&ctx.printer, file, &b),
        })?;
    }
    stats.print(&ctx.printer);
    Ok(())
}

/// What the scan gives `trace show` for one line.
enum Got {
    Bad(trace::BadLine),
    Read {
        /// The entry is the run's last (`--follow` stops).
        finished: bool,
        /// What is shown of it, when the filter keeps it.
        shown: Option<Shown>,
    },
}

enum Shown {
    /// Under --json: the line as it is stored, rendered for stdout (the text the scan hands on).
    Line,
    Entry(Box<Entry>),
}

fn finished(e: &Entry) -> bool {
    e.event == Event::RunFinished
}

/// The newest run in a trace (the run of its last entry) and how many other runs it holds.
struct Latest {
    id: String,
    earlier_runs: usize,
}

/// Reads the whole trace for its runs (on the scan's threads, each line's run read off the start
/// of its bytes where that is sure, a line that changes the run parsed): the last entry's, and
/// how many others there are. Corrupt lines name no run.
fn latest_run(path: &camino::Utf8Path) -> Option<Latest> {
    let mut last: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    let key = memmem::Finder::new(b"\"run_id\"");
    let mut scratch: Vec<()> = vec![(); trace_read::threads()];
    let _ = trace_read::scan_blocks(
        path,
        &mut scratch,
        |_, b, _| runs_in(b, &key),
        |got| {
            // A line too long to hold names no run.
            let trace_read::Scanned::Part(part, _) = got else { return };
            for run_id in part.starts {
                if last.as_ref() != Some(&run_id) {
                    seen.insert(run_id.clone());
                    last = Some(run_id);
                }
            }
        },
    );
    last.map(|id| Latest { earlier_runs: seen.len() - 1, id })
}

/// The run of the trace's first entry and of its last (the first line from each end that names
/// one), read from a window at each end of the file, up to 8 MiB; None when no line in them
/// names a run (the whole trace is then read by [`latest_run`]).
fn edge_runs(path: &camino::Utf8Path) -> Option<(String, String)> {
    use std::io::{Read, Seek, SeekFrom};
    let key = memmem::Finder::new(b"\"run_id\"");
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut window = 64 * 1024u64;
    loop {
        let whole = window >= len;
        let mut head = Vec::new();
        f.seek(SeekFrom::Start(0)).ok()?;
        (&mut f).take(window).read_to_end(&mut head).ok()?;
        let mut tail = Vec::new();
        f.seek(SeekFrom::Start(len.saturating_sub(window))).ok()?;
        f.read_to_end(&mut tail).ok()?;
        // Only whole lines: the head's last line and the tail's first may be cut by the window.
        let head = if whole { &head[..] } else { &head[..memchr::memrchr(b'\n', &head).unwrap_or(0)] };
        let tail = if whole { &tail[..] } else { memchr::memchr(b'\n', &tail).map_or(&tail[..0], |i| &tail[i + 1..]) };
        let first = head.split(|c| *c == b'\n').find_map(|l| run_of_line(l, &key));
        let last = tail.rsplit(|c| *c == b'\n').find_map(|l| run_of_line(l, &key));
        if let (Some(first), Some(last)) = (first, last) {
            return Some((first, last));
        }
        if whole || window >= 8 * 1024 * 1024 {
            return None;
        }
        window *= 8;
    }
}

/// One line's run, as [`runs_in`] reads it: None for a blank line, a line that is no entry, or
/// an empty run id.
fn run_of_line(raw: &[u8], key: &memmem::Finder) -> Option<String> {
    runs_in(raw, key).starts.pop()
}

/// The runs of a part of a trace, as [`latest_run`] reads them: each id where the run changes
/// (lines that name no run, or an empty one, are passed over).
struct RunsIn {
    starts: Vec<String>,
}

/// Reads the run of each line of `b` off the start of its bytes where that is sure
/// ([`run_id_of`]) and the run stays the one before: such a line changes nothing, whether it is
/// an entry or corrupt. A line that may change the run is made text and parsed, as
/// [`trace_read::scan_par`] would, and names a run only if it is an entry: a corrupt line that
/// names another run never decides which run is the latest. Nothing is allocated but where the
/// run changes.
fn runs_in(b: &[u8], key: &memmem::Finder) -> RunsIn {
    let mut out = RunsIn { starts: Vec::new() };
    let mut current: Option<Vec<u8>> = None;
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', b).chain((b.last() != Some(&b'\n')).then_some(b.len()));
    for end in ends {
        let raw = &b[start..end];
        start = end + 1;
        let line = raw.trim_ascii();
        // A line that opens and closes an object is not empty however it is trimmed; any other
        // is judged as the scan judges it (lossy text, Unicode blanks trimmed).
        let sure = line.first() == Some(&b'{') && line.last() == Some(&b'}');
        let fast = sure.then(|| run_id_of(line, key)).flatten();
        if fast.is_some() && fast == current.as_deref() {
            continue;
        }
        let text = String::from_utf8_lossy(raw);
        if text.trim().is_empty() {
            continue;
        }
        let Ok(p) = Probe::read(text.trim()) else { continue };
        let id = p.run_id.as_bytes();
        if !id.is_empty() && current.as_deref() != Some(id) {
            current = Some(id.to_vec());
            out.starts.push(p.run_id.to_string());
        }
    }
    out
}

/// A line's run id, read off its bytes where that gives what parsing would: the line is one
/// object (`{`…`}`, checked by the caller), the bytes before its first `"run_id"` (short in
/// every line agentloop writes: the time stamp) open no other object, array or string and spell
/// no escape, and the value is a string of UTF-8 without escapes. Since a quote inside a JSON
/// string is always escaped, that is the line's own key, and a second one further on would make
/// the line corrupt. None when unsure: the line is then parsed. A line it reads is trusted only
/// to repeat the run before it ([`runs_in`] parses a line that would change the run, so a
/// corrupt one never does). Only the start of the line is read.
fn run_id_of<'a>(b: &'a [u8], key: &memmem::Finder) -> Option<&'a [u8]> {
    let at = key.find(b).filter(|&at| memchr::memchr(b'\\', &b[..at]).is_none() && top_level(&b[..at]))?;
    let value = b[at + 8..].trim_ascii_start().strip_prefix(b":")?.trim_ascii_start().strip_prefix(b"\"")?;
    let end = memchr::memchr2(b'"', b'\\', value).filter(|&e| value[e] == b'"')?;
    std::str::from_utf8(&value[..end]).ok().map(str::as_bytes)
}

/// Whether what follows `prefix` (which opens with the line's `{`) stands in that first object,
/// outside any string, nested object or array.
fn top_level(prefix: &[u8]) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0i32, false, false);
    for &c in prefix {
        match (in_string, c) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') => in_string = false,
            (true, _) => {}
            (false, b'"') => in_string = true,
            (false, b'{' | b'[') => depth += 1,
            (false, b'}' | b']') => depth -= 1,
            (false, _) => {}
        }
    }
    depth == 1 && !in_string
}

fn follow(view: &mut View, path: &camino::Utf8Path, filter: &Filter, mut offset: u64, line_no: usize) -> Result<()> {
    // Lines are cut as they come; one too long to hold is passed over unread, as the first read
    // passed it.
    let mut lines = trace::lines::Splitter::default();
    let mut block = vec![0; 256 * 1024];
    loop {
        // What was read so far is shown before waiting for more; a write that fails here is
        // how a reader that went away is noticed.
        view.out.flush();
        // The reader went away (`| head`): nothing more would be shown.
        if agentloop_io::output::stdout_gone() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
        // Only the bytes appended since the last look are read, a block at a time.
        let Ok(mut f) = std::fs::File::open(path) else { continue };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < offset {
            offset = 0;
        }
        if f.seek(SeekFrom::Start(offset)).is_err() {
            continue;
        }
        while let Ok(n @ 1..) = f.read(&mut block) {
            offset += n as u64;
            let mut ended = false;
            lines.feed(&block[..n], &mut |n, piece| {
                ended = ended || follow_line(view, path, filter, line_no + n, piece);
            });
            if ended {
                return Ok(());
            }
        }
    }
}

/// Shows one line `--follow` read, or warns of one that is no entry; true when it ends the run.
fn follow_line(
    view: &mut View,
    path: &camino::Utf8Path,
    filter: &Filter,
    line_no: usize,
    piece: trace::lines::Piece<'_>,
) -> bool {
    let printer = view.printer;
    let warn = |why: &str| printer.warn(&format!("{path}:{line_no}: skipped a corrupt line ({why})"));
    let raw = match piece {
        trace::lines::Piece::Line(raw) => raw,
        trace::lines::Piece::TooLong(bytes) => {
            warn(&trace::lines::too_long(bytes));
            return false;
        }
    };
    let line = String::from_utf8_lossy(raw);
    let line = line.trim();
    if line.is_empty() {
        return false;
    }
    match trace::checked(line) {
        Ok(e) => {
            if filter.keep(&e) && view.printer.json {
                let rendered = view.printer.render(&format!("{line}\n"));
                view.rendered(&rendered);
            } else if filter.keep(&e) {
                view.entry(&e);
            }
            finished(&e)
        }
        Err(err) => {
            warn(&err.to_string());
            false
        }
    }
}

/// The timeline printer: one line per entry, a rule where a new run begins. The columns fit an
/// 80-column terminal (time of day, step, event, tool, status, duration, cost), the note last;
/// lines are cut to the terminal's width (notes to 80 characters when not on a terminal) unless
/// `--wide` (full timestamps, a tokens column, nothing cut). Under `--errors` a note is never cut:
/// on a terminal it wraps onto indented lines.
struct View<'a> {
    printer: &'a Printer,
    /// Stdout, locked once and buffered for the whole listing.
    out: Out<'a>,
    width: Option<usize>,
    wide: bool,
    /// Notes are shown whole (`--errors`: the fix is usually at the end of the error).
    whole: bool,
    run: Option<String>,
    /// The column header, printed before the first entry: a listing with no entry prints
    /// nothing on stdout (stderr says so), as other empty listings do.
    header_due: bool,
    /// Entries shown so far.
    shown: usize,
}

/// Where a wrapped note continues.
const INDENT: &str = "    ";

impl<'a> View<'a> {
    fn new(printer: &'a Printer, wide: bool, whole: bool) -> Self {
        let width = if wide { None } else { agentloop_io::output::terminal_width() };
        View { printer, out: printer.buffered(), width, wide, whole, run: None, header_due: false, shown: 0 }
    }

    fn header(&mut self) {
        let h = if self.wide {
            columns_wide("time", "step", "event", "tool", "status", "took", "tokens", "cost")
        } else {
            columns("time", "step", "event", "tool", "status", "took", "cost")
        };
        let h = self.fit(format!("{h}  note"));
        self.out.outln_painted(&[(&h, "1")]);
    }

    fn fit(&self, line: String) -> String {
        match self.width {
            Some(w) if line.chars().count() > w => line.chars().take(w.saturating_sub(1)).chain(['…']).collect(),
            _ => line,
        }
    }

    /// Under --json: an entry's line as the trace stores it (a writer's own spacing, key order
    /// and fields kept), already rendered for stdout by [`Printer::render`].
    fn rendered(&mut self, line: &str) {
        self.shown += 1;
        self.out.write_rendered(line);
    }

    fn entry(&mut self, e: &Entry) {
        self.shown += 1;
        if std::mem::take(&mut self.header_due) {
            self.header();
        }
        // Every field comes from the trace file, which whoever wrote the workspace controls: each
        // is shown on one line with its controls visible (before fitting, so widths are true).
        let field = |s: &str| agentloop_io::output::one_line(s).into_owned();
        if self.run.as_ref().is_some_and(|r| *r != e.run_id) {
            let rule = self.fit(format!("── run {} ──", field(&e.run_id)));
            self.out.outln(&rule);
        }
        self.run = Some(e.run_id.clone());
        let status = field(e.verdict().unwrap_or_default());
        let took = e.duration_ms.map(short_duration).unwrap_or_default();
        // A model call without a price shows as unknown, not as no cost.
        let cost = match e.cost_usd {
            Some(c) => agentloop_engine::report::html::usd(c),
            None if agentloop_engine::schema::unpriced(e) => agentloop_engine::report::html::UNKNOWN_COST.into(),
            None => String::new(),
        };
        let mut what =
            e.error.clone().or_else(|| e.result_summary.clone()).or_else(|| e.reason.clone()).unwrap_or_default();
        if e.data.as_ref().and_then(|d| d.get("edited_by_hand")).and_then(serde_json::Value::as_bool) == Some(true) {
            what = format!("[edited by hand] {what}");
        }
        let mut what = field(&what.replace('\n', " "));
        if !self.wide && !self.whole && self.width.is_none() {
            what = what.chars().take(80).collect();
        }
        let step = e.step.to_string();
        let prefix = if self.wide {
            let tok = e
                .usage
                .map(|u| format!("{}→{}", u.input_tokens + u.cache_read_tokens + u.cache_write_tokens, u.output_tokens))
                .unwrap_or_default();
            let tool = field(e.tool.as_deref().unwrap_or(""));
            columns_wide(&field(&e.ts), &step, &field(&event(e)), &tool, &status, &took, &tok, &cost)
        } else {
            let tool = cut(field(e.tool.as_deref().unwrap_or("")), 10);
            let status = cut(status.clone(), 9);
            // An event this version writes is never cut (a long one widens its row).
            let ev = cut(field(&event(e)), event_width());
            columns(&time_of_day(&field(&e.ts)), &step, &ev, &tool, &status, &took, &cost)
        };
        let mut rest = Vec::new();
        let line = match self.width {
            // A whole note that does not fit goes on indented lines below.
            Some(w) if self.whole && prefix.chars().count() + 2 + what.chars().count() > w => {
                rest = wrap(&what, w.saturating_sub(INDENT.len()).max(20));
                self.fit(prefix.trim_end().to_string())
            }
            _ => self.fit(format!("{prefix}  {what}").trim_end().to_string()),
        };
        // Colour after fitting, so escape codes never count as width.
        let painted = format!(" {status:<9}");
        match line.find(&painted).filter(|_| e.is_error() && !status.is_empty()) {
            Some(at) => {
                let (before, after) = line.split_at(at + 1);
                let (status, after) = after.split_at(status.len());
                self.out.outln_painted(&[(before, ""), (status, "31"), (after, "")]);
            }
            None => self.out.outln(&line),
        }
        for l in rest {
            self.out.outln(&format!("{INDENT}{l}"));
        }
    }
}

/// `s` cut to `w` characters, its last one `…` when cut.
fn cut(s: String, w: usize) -> String {
    if s.chars().count() > w {
        s.chars().take(w - 1).chain(['…']).collect()
    } else {
        s
    }
}

/// The event, said once: a phase's own event is its name; `run.` is implied by the phase `run`.
fn event(e: &Entry) -> String {
    match e.event.beside(e.phase) {
        "" if e.phase.is_none() => "-".into(),
        said => said.to_string(),
    }
}

/// The most an event is shown with: the longest event this version writes
/// (`frustration.reframe`). The column itself is 14 wide, as most events are.
fn event_width() -> usize {
    agentloop_types::trace::Event::KNOWN.iter().map(|e| e.as_str().chars().count()).max().unwrap_or(14)
}

fn columns(time: &str, step: &str, event: &str, tool: &str, status: &str, took: &str, cost: &str) -> String {
    format!("{time:<8} {step:>4} {event:<14} {tool:<10} {status:<9} {took:>5} {cost:>7}")
}

#[allow(clippy::too_many_arguments)]
fn columns_wide(
    time: &str,
    step: &str,
    event: &str,
    tool: &str,
    status: &str,
    took: &str,
    tok: &str,
    cost: &str,
) -> String {
    format!("{time:<24} {step:>4} {event:<14} {tool:<14} {status:<9} {took:>6} {tok:>11} {cost:>8}")
}

/// `2026-01-01T09:30:05.123Z` → `09:30:05`; anything else as it is, cut to 8.
fn time_of_day(ts: &str) -> String {
    match ts.split_once('T') {
        Some((_, t)) if t.len() >= 8 => t[..8].to_string(),
        _ => ts.chars().take(8).collect(),
    }
}

/// At most five characters: 850ms, 12.3s, 3m05s, 2h10m.
fn short_duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// Word-wraps text to lines of at most `w` characters (a longer word is split).
fn wrap(text: &str, w: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|s| !s.is_empty()) {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let used = line.chars().count();
            let gap = usize::from(used > 0);
            if used + gap + word.len() <= w {
                if gap == 1 {
                    line.push(' ');
                }
                line.extend(word.iter());
                break;
            }
            if used > 0 {
                out.push(std::mem::take(&mut line));
                continue;
            }
            let tail = word.split_off(w);
            out.push(word.iter().collect());
            word = tail;
        }
    }
    if !line.is_empty() {
        out.push(line);
    }
    out
}

/// Sums by phase and tool; the shape of `trace stats --json` (docs/schema/trace-stats.json).
#[derive(Default)]
struct Stats(agentloop_engine::schema::TraceStats);

impl Stats {
    fn add(&mut self, e: &Entry) {
        self.0.add(e);
    }

    fn print(&self, p: &Printer) {
        let agentloop_engine::schema::TraceStats { total, phases, tools, runs, steps, .. } = &self.0;
        if p.json {
            p.json_value(&agentloop_types::json::to_value(&self.0));
            return;
        }
        let mut p = p.buffered();
        p.outln(&format!("runs {runs}  steps {steps}  entries {}  errors {}", total.entries, total.errors));
        let row = |name: &str, s: &agentloop_engine::schema::TraceSum| {
            format!(
                "{:<14} {:>7} {:>6} {:>9} {:>9} {:>9} {:>10} {:>9}",
                agentloop_io::output::one_line(name),
                s.entries,
                s.errors,
                s.duration_ms,
                s.input_tokens + s.cache_read_tokens + s.cache_write_tokens,
                // Of those, the ones a provider's prompt cache served.
                s.cache_read_tokens,
                s.output_tokens,
                // Only scripted calls: no spend to show, and none implied.
                match s.cost_usd {
                    _ if s.scripted_calls > 0 && s.priced_calls == 0 => "scripted".into(),
                    Some(c) => format!("{:.4}", c + 0.0),
                    None => agentloop_engine::report::html::UNKNOWN_COST.into(),
                }
            )
        };
        let header = format!(
            "{:<14} {:>7} {:>6} {:>9} {:>9} {:>9} {:>10} {:>9}",
            "", "entries", "errors", "time_ms", "tokens_in", "cached_in", "tokens_out", "cost_usd"
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

#[cfg(test)]
mod tests {
    use super::runs_in;
    use memchr::memmem;

    /// The run id read off the bytes is the one parsing gives, and a line it cannot be sure
    /// of is parsed: a nested `run_id` before the line's own, the key spelled with an escape,
    /// a value with one, `run_id` as a value, a line that is no entry, and blank lines.
    #[test]
    fn a_run_id_read_off_the_bytes_is_the_one_parsing_gives() {
        let entry = |head: &str| format!(r#"{{{head}"ts":"t","step":1,"event":"act"}}"#);
        let cases = [
            (entry(r#""run_id":"A","#), Some("A")),
            (entry(r#""run_id" : "A","#), Some("A")),
            (entry(r#""args":{"run_id":"B"},"run_id":"A","#), Some("A")),
            (entry(r#""run\u005fid":"A","args":{"run_id":"B"},"#), Some("A")),
            (entry(r#""run_id":"A\u0042","#), Some("AB")),
            (entry(r#""tool":"run_id","run_id":"A","#), Some("A")),
            (entry(r#""ts0":"x\"run_id\"","run_id":"A","#), Some("A")),
            (entry(r#""args":{"run_id":"B"},"#), None),
            (r#"{"run_id":"A","ts":"#.to_string(), None),
        ];
        let key = memmem::Finder::new(b"\"run_id\"");
        for (line, want) in cases {
            let runs = runs_in(format!("\n \u{3000}\n{line}\n").as_bytes(), &key);
            assert_eq!(runs.starts, want.map(String::from).into_iter().collect::<Vec<_>>(), "{line}");
        }
    }

    /// A line that names another run but is no entry (a field of the wrong type, cut short, an
    /// unknown phase) never changes the run: the parser would skip it.
    #[test]
    fn a_corrupt_line_naming_another_run_names_none() {
        let key = memmem::Finder::new(b"\"run_id\"");
        let a = r#"{"ts":"t","run_id":"A","step":1,"event":"act"}"#;
        for bad in [
            r#"{"ts":"t","run_id":"OTHER","step":"one","event":"act"}"#,
            r#"{"ts":"t","run_id":"OTHER","step":1,"event":"act","#,
            r#"{"ts":"t","run_id":"OTHER","step":1,"event":"act","phase":"nap"}"#,
            r#"{"ts":"t","run_id":"OTHER","step":1}"#,
        ] {
            assert!(runs_in(bad.as_bytes(), &key).starts.is_empty(), "{bad}");
            let runs = runs_in(format!("{a}\n{bad}\n{a}\n{bad}\n").as_bytes(), &key);
            assert_eq!(runs.starts, ["A"], "{bad}");
        }
    }
}
