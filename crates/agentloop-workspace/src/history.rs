//! Run history: each run keeps its own paper trail. The workspace root always holds the current
//! run; when a new run starts, the previous run's files move to `runs/<run_id>/` (the layout of
//! event mode's runs), and `run --continue --run ID` moves an archived run back.
//!
//! Invariants:
//! - Nothing is overwritten: a move never replaces an existing file, and a run is archived under
//!   its own id.
//! - A symlinked `runs/` or run folder is never followed: archiving through one is refused
//!   (exit 8), and listing skips it with a warning.
//! - A move is journaled (`.agentloop.archive.json`): the journal is written durably first, then
//!   each file is renamed (one atomic rename each), then the journal is removed. A process killed
//!   at any instant leaves a journal the next locker finishes; a rename already
//!   done is skipped, so no run is lost or duplicated (the mechanics: [`crate::archive`]).

use crate::workspace::{Session, State, Status, Workspace};
use agentloop_types::error::{Error, Result};
use camino::{Utf8Path, Utf8PathBuf};

use crate::archive::Move;
pub use crate::archive::RUN_FILES;

/// Where archived runs live: `<workspace>/<runs_dir>/`.
pub fn runs_dir(ws: &Workspace, runs_dir: &str) -> Utf8PathBuf {
    ws.root.join(runs_dir)
}

/// Moves the root's run to `<runs_dir>/<run_id>/`, under the lock's session.
pub fn archive(session: &Session, runs: &str, state: &State) -> Result<Utf8PathBuf> {
    let ws = session.workspace();
    let to = format!("{runs}/{}", state.run_id);
    // Entered without following links: a symlinked runs/ is refused here (exit 8).
    let there = agentloop_io::fs::Folder::open(&ws.root, Utf8Path::new(&to), false)?;
    if there.is_some_and(|f| f.has("state.json")) {
        return Err(Error::data(format!("{}/{to} already holds a run with the same id", ws.root))
            .with_hint("move that folder aside; a run is never archived over another"));
    }
    // The files move as they are on disk: make what the commits wrote durable first.
    session.checkpoint()?;
    crate::archive::apply(&ws.root, Move { from: String::new(), to: to.clone() })?;
    Ok(ws.root.join(to))
}

/// Moves an archived run back to the root (the root must hold no run), under the lock's session.
pub fn restore(session: &Session, runs: &str, run_id: &str) -> Result<()> {
    let ws = session.workspace();
    if ws.has_run() {
        return Err(Error::usage(format!("{} already holds a run", ws.root)));
    }
    session.checkpoint()?;
    crate::archive::apply(&ws.root, Move { from: format!("{runs}/{run_id}"), to: String::new() })
}

/// One run of the history: its folder and state.
pub struct Run {
    pub ws: Workspace,
    pub state: State,
    /// The root's own (current) run.
    pub current: bool,
}

/// Every run: the root's first, then the archived ones oldest first (run ids sort by time).
/// A folder whose state.json cannot be read is reported through `warn` and skipped.
pub fn list(ws: &Workspace, runs: &str, warn: &dyn Fn(&str)) -> Vec<Run> {
    let mut out = Vec::new();
    if ws.has_run() {
        match ws.load_state() {
            Ok(state) => out.push(Run { ws: ws.clone(), state, current: true }),
            Err(e) => warn(&e.detail()),
        }
    }
    // Links are not followed: a symlinked runs/ or run folder would show (and let `report`,
    // `runs prune` and `serve` act on) files outside the workspace. Each is reported, skipped.
    let dir = runs_dir(ws, runs);
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_symlink()) {
        warn(&format!("{dir}/ is a symbolic link; its runs are not listed (agentloop never follows links there)"));
        return out;
    }
    let mut found: Vec<Workspace> = Vec::new();
    for e in dir.read_dir_utf8().into_iter().flatten().flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => found.push(Workspace::new(e.path())),
            Ok(t) if t.is_symlink() => {
                warn(&format!("{} is a symbolic link; skipped (agentloop never follows links there)", e.path()))
            }
            _ => {}
        }
    }
    found.sort_by(|a, b| a.root.cmp(&b.root));
    for w in found.into_iter().filter(Workspace::has_run) {
        match w.load_state() {
            Ok(state) => out.push(Run { ws: w, state, current: false }),
            Err(e) => warn(&e.to_string()),
        }
    }
    out
}

/// Finds a run by id (a unique prefix is enough) or `last` (the most recently started run).
pub fn find(ws: &Workspace, runs: &str, id: &str) -> Result<Workspace> {
    let all = list(ws, runs, &|_| {});
    if all.is_empty() {
        return Err(Error::usage(format!("{} holds no runs", ws.root)));
    }
    if id == "last" {
        let newest = all
            .iter()
            .max_by(|a, b| a.state.started_at.cmp(&b.state.started_at).then(a.state.run_id.cmp(&b.state.run_id)));
        if let Some(newest) = newest {
            return Ok(newest.ws.clone());
        }
    }
    let hits: Vec<&Run> = all.iter().filter(|r| r.state.run_id.starts_with(id)).collect();
    match hits.as_slice() {
        [one] => Ok(one.ws.clone()),
        [] => Err(Error::usage(format!("no run `{id}` in {}", ws.root))
            .with_hint(format!("list them with {}", ws.cli("runs")))),
        _ => Err(Error::usage(format!("`{id}` matches {} runs; give more of the id", hits.len()))),
    }
}

/// How a run is shown in lists: `interrupted` for one that says running with nothing running
/// it ([`stopped_unseen`]), else its status.
pub fn shown_status(r: &Run) -> &'static str {
    if stopped_unseen(&r.ws, &r.state) {
        "interrupted"
    } else {
        r.state.status.as_str()
    }
}

/// Whether a run that says `running` is not going on: it was marked interrupted (a signal, a
/// newer run archived it), or no process holds its workspace's lock while it is between
/// phases (killed with no chance to say so). A run whose next step waits for a tool another
/// process runs (event mode's pending request) is waiting, not interrupted.
pub fn stopped_unseen(ws: &Workspace, s: &State) -> bool {
    if s.status != Status::Running {
        return false;
    }
    let waiting = s.next == crate::workspace::Next::Act && s.pending.as_ref().is_some_and(|p| p.handed_off);
    s.interrupted || (!waiting && ws.lock_free())
}

/// Removes archived runs that are not running, under the lock's session; returns what went.
pub fn prune(
    session: &Session,
    runs: &str,
    keep: Option<usize>,
    older_than: Option<std::time::Duration>,
    dry_run: bool,
) -> Result<Vec<State>> {
    let ws = session.workspace();
    let archived: Vec<Run> = list(ws, runs, &|_| {}).into_iter().filter(|r| !r.current).collect();
    // Newest first, so `keep` keeps the newest.
    let mut candidates: Vec<&Run> =
        archived.iter().filter(|r| r.state.status != Status::Running || r.state.interrupted).collect();
    candidates.sort_by(|a, b| b.state.run_id.cmp(&a.state.run_id));
    let now = agentloop_types::clock::now();
    let mut gone = Vec::new();
    for (i, r) in candidates.iter().enumerate() {
        let by_count = keep.is_some_and(|k| i >= k);
        let by_age = older_than.is_some_and(|d| {
            let when = r.state.finished_at.as_deref().unwrap_or(&r.state.updated_at);
            agentloop_types::clock::parse_rfc3339(when).is_some_and(|t| now.duration_since(t).unwrap_or_default() > d)
        });
        if by_count || by_age {
            if !dry_run {
                remove_run_dir(&r.ws.root)?;
            }
            gone.push(r.state.clone());
        }
    }
    Ok(gone)
}

fn remove_run_dir(dir: &Utf8Path) -> Result<()> {
    // state.json first: a half-removed folder is no longer listed as a run.
    let state = dir.join("state.json");
    std::fs::remove_file(&state).map_err(|e| Error::io("remove", &state, e))?;
    std::fs::remove_dir_all(dir).map_err(|e| Error::io("remove", dir, e))
}
