//! A queued job is a series, as a cron job is: the runs of one series (`enqueue --series NAME`,
//! or by default the slot runs of one agent and goal) each start from the series' last ended
//! run under the root, as a cron follow-up starts from the run before it — its facts and a
//! person's answers carried into context.md and memory.md (the same facts
//! [`agentloop_engine::lifecycle::carried_for`] gives a follow-up), and a copy of its `state/` folder, the
//! job's own state (the daily-digest skill's `state/daily-digest.json`).
//!
//! Invariants:
//! - Who belongs to a series is read from the runs' records (`ROOT/.agentloop-runs/`,
//!   outside every run's folder, so no run's tool can add a run to a series or take one out);
//!   the last ended run is the newest (by start, then by message id) whose status is done or
//!   escalated.
//! - Nothing is followed through a link: the previous run's folder and its `state/` are entered
//!   with `O_NOFOLLOW`; a symlinked `state/`, or a link inside it, is not carried (and the
//!   worker says so), and nothing is written through one ([`agentloop_io::fs::Folder::copy_into`]).
//! - The copy is made in a folder of its own (`.state.carrying`) and renamed to `state/` once
//!   whole and fsynced, so a worker killed mid-copy leaves no half `state/`: the next delivery
//!   drops the partial copy and copies again; a `state/` already there is that delivery's own
//!   finished copy and is kept.

use agentloop_io::fs::{Copied, Folder};
use agentloop_types::error::Result;
use agentloop_workspace::workspace::{State, Workspace};
use camino::Utf8Path;

/// The folder the copy of `state/` is made in before it is renamed into place.
const CARRYING: &str = ".state.carrying";

/// What a new run of a series starts from.
#[derive(Debug, Default)]
pub struct Carried {
    /// The run it carried from, if the series had one that ended.
    pub from: Option<String>,
    /// Facts and answers for memory.md and context.md, each naming the run it came from.
    pub facts: Vec<String>,
    /// What was copied of the previous run's `state/` (None: it had none, or it was not
    /// carried; see `notes`).
    pub state: Option<Copied>,
    /// What was not carried, and why, for the worker's log.
    pub notes: Vec<String>,
}

/// Carries what the new run `run_id` of `series` (its folder `ws`, locked by the caller, with no
/// run yet) starts from: the facts of the series' last ended run under `root` and a copy of its
/// `state/`.
pub fn carry(root: &Utf8Path, runs_dir: &str, series: &str, run_id: &str, ws: &Workspace) -> Result<Carried> {
    let mut carried = Carried::default();
    let Some((prev, state)) = last_ended(root, runs_dir, series, run_id) else {
        return Ok(carried);
    };
    carried.facts = agentloop_engine::lifecycle::carried_for(&prev, runs_dir, Some(&state))?;
    carried.from = Some(state.run_id.clone());
    carried.state = copy_state(&prev, ws, &mut carried.notes)?;
    Ok(carried)
}

/// The newest run under `root` (other than `except`) whose record names `series` and that
/// ended, with its folder; None when the series has none.
pub fn last_ended(root: &Utf8Path, runs_dir: &str, series: &str, except: &str) -> Option<(Workspace, State)> {
    let mut found: Vec<(Workspace, State, (u64, u64))> = Vec::new();
    // The records are kept beside the runs, outside every run's folder.
    for id in agentloop_engine::runs_root::record_ids(root) {
        let Ok(Some(rec)) = agentloop_engine::runs_root::load_record(root, &id) else { continue };
        if rec.series.as_deref() != Some(series)
            || rec.run_id == except
            || !agentloop_types::run_id::RunId::is_valid(&rec.run_id)
        {
            continue;
        }
        // Entered without following links; a run that never started has no state.json.
        let Ok(ws) = agentloop_engine::runs_root::enter(root, runs_dir, &rec.run_id, false) else { continue };
        let Some(state) = ws.has_run().then(|| ws.load_state().ok()).flatten() else { continue };
        if state.status.is_terminal() {
            found.push((ws, state, message_order(rec.message_id.as_deref().unwrap_or_default())));
        }
    }
    found
        .into_iter()
        .max_by(|a, b| (&a.1.started_at, a.2, &a.1.run_id).cmp(&(&b.1.started_at, b.2, &b.1.run_id)))
        .map(|(ws, state, _)| (ws, state))
}

/// A Redis stream message id (`<ms>-<seq>`) as a number pair, in the order the stream gave them
/// (what tells two runs started in the same second apart); anything else sorts first.
fn message_order(id: &str) -> (u64, u64) {
    let mut parts = id.splitn(2, '-').map(|p| p.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(ms), Some(seq)) => (ms, seq),
        _ => (0, 0),
    }
}

/// Copies `prev`'s `state/` into `ws` (see the module's invariants); None when there was
/// nothing to copy, or it was not carried (why is added to `notes`).
fn copy_state(prev: &Workspace, ws: &Workspace, notes: &mut Vec<String>) -> Result<Option<Copied>> {
    let src = match Folder::open_to_read(&prev.root, Utf8Path::new("state")) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(None),
        Err(e) => {
            notes.push(format!("state/ not carried: {}", e.detail()));
            return Ok(None);
        }
    };
    let Some(dest) = Folder::open(&ws.root, Utf8Path::new(""), false)? else {
        return Ok(None);
    };
    if dest.has("state") {
        // An earlier delivery of this message copied it whole before it was cut off.
        notes.push("state/ was carried by an earlier delivery; kept".into());
        return Ok(None);
    }
    if dest.has(CARRYING) {
        // A copy cut off half way; remove_dir_all removes a link itself, never where it points.
        let partial = ws.root.join(CARRYING);
        std::fs::remove_dir_all(&partial).map_err(|e| agentloop_types::error::Error::io("remove", &partial, e))?;
    }
    let into = Folder::create(&ws.root, Utf8Path::new(CARRYING))?;
    let copied = src.copy_into(&into)?;
    into.sync()?;
    agentloop_io::crash::point("series:copied");
    dest.rename(CARRYING, "state")?;
    dest.sync()?;
    for p in copied.skipped.iter().take(5) {
        notes.push(format!("{p} not carried: only files and folders are copied, never through a link"));
    }
    if copied.skipped.len() > 5 {
        notes.push(format!("{} more entries of state/ not carried", copied.skipped.len() - 5));
    }
    Ok(Some(copied))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_sort_as_the_stream_gave_them() {
        assert!(message_order("1700000000000-0") < message_order("1700000000000-1"));
        assert!(message_order("999-9") < message_order("1000-0"));
        assert_eq!(message_order("not-an-id"), (0, 0));
    }
}
