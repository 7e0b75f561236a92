//! What changed between two runs of a job (`runs diff`, and the report's "Since last run" card):
//! the outcome then and now, the learned facts added and dropped, the files under `artifacts/`
//! added, removed and changed (with a unified text diff for text), steps, tokens and cost, and a
//! one-line verdict.
//!
//! A job that comes back (the morning digest, `run --goal G --slot DATE` every day) is a
//! *series*: the runs of one agent profile with one goal. The run a run is compared with by
//! default is the newest earlier run of its series, or — when the goal changed (a follow-up) —
//! the newest earlier run of the same agent.
//!
//! Invariants: nothing here writes; folders are read without following links (a symlinked
//! `artifacts/` or file inside it is left out, as `runs` leaves a symlinked run folder out).
//! Only what a run learned or made counts as a change: facts, files and how the run ended.
//! Steps, tokens and cost are shown, never counted (they differ from one run to the next).

use crate::history::Run;
use crate::workspace::Workspace;
use agentloop_types::error::{Error, Result};
use agentloop_types::outcome::StopKind;
use camino::Utf8Path;
use schemars::JsonSchema;
use serde::Serialize;

/// Files larger than this are compared by their size only.
const MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Files larger than this are compared, never diffed as text.
const DIFF_BYTES: u64 = 512 * 1024;
/// Lines of one file's unified diff kept (the rest is counted in `diff_lines_left_out`).
const DIFF_LINES: usize = 200;
/// Files under one run's `artifacts/` looked at, at most.
const MAX_FILES: usize = 2000;

/// One side of the comparison: a run as it ended (or stands).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Side {
    pub run_id: String,
    pub agent: Option<String>,
    /// The scheduler's slot (`run --slot KEY`)
    pub slot: Option<String>,
    pub goal: String,
    /// done, escalated, running, interrupted, ...
    pub status: String,
    /// How it stopped, once it has
    pub stop: Option<StopKind>,
    /// The final outcome text
    pub outcome: Option<String>,
    pub steps: usize,
    pub tokens: u64,
    /// USD; null when a price was unknown or the answers were scripted
    pub cost_usd: Option<f64>,
    pub started_at: String,
}

/// Learned facts (memory.md), compared by their text: the sources a fact lists (`(step 2, from
/// run …)`) do not make it new.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct FactsDiff {
    /// Facts the later run holds that the earlier one did not
    pub added: Vec<String>,
    /// Facts the earlier run held that the later one does not
    pub dropped: Vec<String>,
}

/// A file under `artifacts/` whose bytes differ.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ChangedFile {
    /// The path in the later run (relative to the run's folder)
    pub path: String,
    /// The path in the earlier run when it differs: a dated file (`digest-2026-01-02.md`) is
    /// paired with the earlier run's file of the same name but for its digits
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_then: Option<String>,
    pub bytes_then: u64,
    pub bytes_now: u64,
    /// A unified diff of the text (null for binary or large files)
    pub diff: Option<String>,
    /// Lines of the diff left out (it keeps the first 200)
    pub diff_lines_left_out: usize,
}

/// Files under `artifacts/`.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct ArtifactsDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<ChangedFile>,
    /// Files the same in both runs
    pub unchanged: usize,
}

/// `runs diff --json`: what changed from one run (`then`) to another (`now`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunsDiff {
    pub then: Side,
    pub now: Side,
    /// Whether the runs ended differently (status or stop); the outcome text is shown, not counted
    pub outcome_changed: bool,
    pub facts: FactsDiff,
    pub artifacts: ArtifactsDiff,
    /// Changes counted: 1 for a different ending, plus each fact added or dropped and each file
    /// added, removed or changed (what `--exit-code` and `--threshold` compare)
    pub changes: usize,
    /// One line for people
    pub verdict: String,
}

/// The newest run of `runs` started before `of` in its series (same agent and goal), else the
/// newest earlier run of the same agent.
pub fn previous<'a>(runs: &'a [Run], of: &Run) -> Option<&'a Run> {
    let key = |r: &Run| (r.state.started_at.clone(), r.state.run_id.clone());
    let earlier: Vec<&Run> = runs.iter().filter(|r| key(r) < key(of) && r.state.agent == of.state.agent).collect();
    let newest = |v: Vec<&'a Run>| v.into_iter().max_by_key(|r| key(r));
    let same_goal: Vec<&Run> = earlier.iter().copied().filter(|r| r.state.goal == of.state.goal).collect();
    if same_goal.is_empty() {
        newest(earlier)
    } else {
        newest(same_goal)
    }
}

/// The run `runs diff` compares by default: the root's own, else the newest.
pub fn latest(runs: &[Run]) -> Option<&Run> {
    runs.iter().find(|r| r.current).or_else(|| {
        runs.iter().max_by(|a, b| (&a.state.started_at, &a.state.run_id).cmp(&(&b.state.started_at, &b.state.run_id)))
    })
}

/// Compares run `then` with run `now`.
pub fn diff(then: &Run, now: &Run) -> Result<RunsDiff> {
    let (a, b) = (side(then), side(now));
    let outcome_changed = a.status != b.status || a.stop != b.stop;
    let facts = facts_diff(&facts_of(&then.ws)?, &facts_of(&now.ws)?);
    let artifacts = artifacts_diff(&then.ws, &now.ws)?;
    let changes = usize::from(outcome_changed)
        + facts.added.len()
        + facts.dropped.len()
        + artifacts.added.len()
        + artifacts.removed.len()
        + artifacts.changed.len();
    let mut d = RunsDiff { then: a, now: b, outcome_changed, facts, artifacts, changes, verdict: String::new() };
    d.verdict = verdict(&d);
    Ok(d)
}

fn side(r: &Run) -> Side {
    let s = &r.state;
    Side {
        run_id: s.run_id.clone(),
        agent: s.agent.clone(),
        slot: s.slot.clone(),
        goal: s.goal.clone(),
        status: crate::history::shown_status(r).to_string(),
        stop: s.stop,
        outcome: s.outcome.clone(),
        steps: s.completed_steps.len(),
        tokens: s.usage.total(),
        cost_usd: s.cost(),
        started_at: s.started_at.clone(),
    }
}

/// The facts a run learned or carried, without compaction summaries and the outcome lines a
/// follow-up carries (`Run ID (goal) ended done: …`: the ending is compared on its own).
fn facts_of(ws: &Workspace) -> Result<Vec<String>> {
    let path = ws.memory();
    let text = agentloop_io::fs::read_inside(&ws.root, &path)?.unwrap_or_default();
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mem = crate::markdown::parse_memory(&text, &path)?;
    Ok(mem
        .facts
        .into_iter()
        .filter(|f| !(crate::facts::is_summary(f) || f.starts_with("Run ") && f.contains(") ended ")))
        .collect())
}

fn facts_diff(then: &[String], now: &[String]) -> FactsDiff {
    let text = |f: &String| crate::facts::split(f).0;
    let keys = |v: &[String]| v.iter().map(|f| crate::facts::key(&text(f))).collect::<std::collections::HashSet<_>>();
    let (kt, kn) = (keys(then), keys(now));
    let mut d = FactsDiff::default();
    for f in now {
        let t = text(f);
        if !kt.contains(&crate::facts::key(&t)) && !d.added.contains(&t) {
            d.added.push(t);
        }
    }
    for f in then {
        let t = text(f);
        if !kn.contains(&crate::facts::key(&t)) && !d.dropped.contains(&t) {
            d.dropped.push(t);
        }
    }
    d
}

/// The files under a run's `artifacts/` (paths relative to the run's folder, sorted), links
/// left out.
fn files_of(ws: &Workspace) -> Vec<String> {
    let dir = ws.artifacts();
    if std::fs::symlink_metadata(&dir).map(|m| !m.is_dir()).unwrap_or(true) {
        return Vec::new();
    }
    let mut out: Vec<String> = walkdir::WalkDir::new(&dir)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.path().strip_prefix(&ws.root).ok().and_then(|p| p.to_str()).map(String::from))
        .take(MAX_FILES)
        .collect();
    out.sort();
    out
}

/// A file's name with its digits taken out: how a dated file is paired with yesterday's.
fn undated(path: &str) -> String {
    path.chars().filter(|c| !c.is_ascii_digit()).collect()
}

fn artifacts_diff(then: &Workspace, now: &Workspace) -> Result<ArtifactsDiff> {
    let (ft, fnow) = (files_of(then), files_of(now));
    let mut d = ArtifactsDiff::default();
    let mut removed: Vec<String> = ft.iter().filter(|p| !fnow.contains(p)).cloned().collect();
    for p in &fnow {
        if ft.contains(p) {
            match compare(then, p, now, p)? {
                Some(c) => d.changed.push(c),
                None => d.unchanged += 1,
            }
            continue;
        }
        // A file only the later run has: paired with the one earlier file of the same undated name.
        let pair: Vec<usize> =
            removed.iter().enumerate().filter(|(_, r)| undated(r) == undated(p) && *r != p).map(|(i, _)| i).collect();
        match pair.as_slice() {
            [i] if fnow.iter().filter(|q| undated(q) == undated(p)).count() == 1 => {
                let old = removed.remove(*i);
                match compare(then, &old, now, p)? {
                    Some(mut c) => {
                        c.path_then = Some(old);
                        d.changed.push(c);
                    }
                    None => d.unchanged += 1,
                }
            }
            _ => d.added.push(p.clone()),
        }
    }
    removed.sort();
    d.removed = removed;
    Ok(d)
}

/// The change between two files, or None when their bytes are the same.
fn compare(then: &Workspace, a: &str, now: &Workspace, b: &str) -> Result<Option<ChangedFile>> {
    use agentloop_io::fs::Unreadable;
    // Read without following a link; a file over [`MAX_BYTES`] is compared by its size only.
    let read = |ws: &Workspace, rel: &str| -> Result<std::result::Result<Vec<u8>, u64>> {
        match agentloop_io::fs::read_file_no_link(&ws.root, Utf8Path::new(rel), MAX_BYTES) {
            Ok(Some(bytes)) => Ok(Ok(bytes)),
            Ok(None) => Ok(Ok(Vec::new())),
            Err(Unreadable::TooLarge(n)) => Ok(Err(n)),
            Err(Unreadable::Folder(e) | Unreadable::Io(e)) => Err(e),
            Err(Unreadable::Link | Unreadable::NotRegular) => {
                Err(Error::data(format!("{}/{rel} is no regular file; it is not compared", ws.root)))
            }
        }
    };
    let (x, y) = match (read(then, a)?, read(now, b)?) {
        (Ok(x), Ok(y)) => (x, y),
        (x, y) => {
            let size = |r: &std::result::Result<Vec<u8>, u64>| r.as_ref().map_or_else(|n| *n, |v| v.len() as u64);
            let (bytes_then, bytes_now) = (size(&x), size(&y));
            return Ok((bytes_then != bytes_now).then(|| ChangedFile {
                path: b.to_string(),
                path_then: None,
                bytes_then,
                bytes_now,
                diff: None,
                diff_lines_left_out: 0,
            }));
        }
    };
    if x == y {
        return Ok(None);
    }
    fn text(v: &[u8]) -> Option<&str> {
        (v.len() as u64 <= DIFF_BYTES && !v.contains(&0)).then(|| std::str::from_utf8(v).ok()).flatten()
    }
    let (mut diff, mut left_out) = (None, 0);
    if let (Some(tx), Some(ty)) = (text(&x), text(&y)) {
        let unified = similar::TextDiff::from_lines(tx, ty)
            .unified_diff()
            .context_radius(2)
            .header(&format!("then/{a}"), &format!("now/{b}"))
            .to_string();
        let lines: Vec<&str> = unified.lines().collect();
        left_out = lines.len().saturating_sub(DIFF_LINES);
        diff = Some(lines.iter().take(DIFF_LINES).map(|l| format!("{l}\n")).collect::<String>());
    }
    Ok(Some(ChangedFile {
        path: b.to_string(),
        path_then: None,
        bytes_then: x.len() as u64,
        bytes_now: y.len() as u64,
        diff,
        diff_lines_left_out: left_out,
    }))
}

/// 1234567 → "1,234,567" (as the report writes token counts).
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn count(n: usize, one: &str) -> String {
    format!("{n} {one}{}", if n == 1 { "" } else { "s" })
}

/// "changed: done again; 2 facts added, 1 dropped; 1 file changed; steps 5 → 3, tokens 9,100 → 4,020".
fn verdict(d: &RunsDiff) -> String {
    let ending = if d.outcome_changed {
        format!("{} → {}", d.then.status, d.now.status)
    } else {
        format!("{} again", d.now.status)
    };
    let mut parts = vec![ending];
    let f = &d.facts;
    if !f.added.is_empty() || !f.dropped.is_empty() {
        parts.push(format!("{} added, {} dropped", count(f.added.len(), "fact"), f.dropped.len()));
    }
    let a = &d.artifacts;
    let files: Vec<String> = [(a.added.len(), "added"), (a.removed.len(), "removed"), (a.changed.len(), "changed")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect();
    if !files.is_empty() {
        parts.push(format!("files {}", files.join(", ")));
    }
    let th = thousands;
    parts.push(format!(
        "steps {} → {}, tokens {} → {}",
        d.then.steps,
        d.now.steps,
        th(d.then.tokens),
        th(d.now.tokens)
    ));
    let head = if d.changes == 0 { "unchanged" } else { "changed" };
    let tail = if d.changes == 0 { " (same ending, facts and files)" } else { "" };
    format!("{head}{tail}: {}", parts.join("; "))
}
