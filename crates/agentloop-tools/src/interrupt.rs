//! Ctrl-C, SIGTERM and SIGHUP: one watcher for the whole process.
//!
//! Workspace state never depends on how the process ends (every phase commit is atomic and the
//! journal replays), so an interrupted command may stop at any instant. What the watcher adds:
//! - the process groups agentloop started (MCP servers, the shell tool's program) are
//!   terminated first, so nothing is left running;
//! - each `run` in progress is marked interrupted in its state.json and says on stderr what was
//!   kept and the command that resumes it;
//! - then the signal takes its default effect, so agentloop dies of it as a shell expects
//!   (`$?` is 130 after Ctrl-C, 143 after SIGTERM, 129 after SIGHUP).
//!
//! The watcher is installed lazily: by the first process group registered, or by a run.
//!
//! A process that asks for it ([`drain_on_signal`], `agentloop worker`) is stopped differently:
//! the first signal only sets [`draining`]; each run finishes the phase under way, commits it and
//! stops there (see the engine's `phases::run::drive`), and the process ends by itself. A second
//! signal stops it at once, as above.

use camino::{Utf8Path, Utf8PathBuf};
use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// Process groups agentloop started and has not ended (MCP servers, the shell tool's program).
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Records a live process group (its leader's pid) and makes sure the signal watcher runs.
pub fn register(pgid: u32) {
    watch();
    if let Ok(pgid) = i32::try_from(pgid) {
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).insert(pgid);
    }
}

pub fn unregister(pgid: u32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).remove(&pgid);
    }
}

/// How many groups are live (for tests and `-v` output).
pub fn live() -> usize {
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// Whether any process of the group is still there (zombies included).
pub fn group_exists(pgid: u32) -> bool {
    let Ok(p) = i32::try_from(pgid) else { return false };
    p > 1 && Pid::from_raw(p).is_some_and(|pid| test_kill_process_group(pid).is_ok())
}

/// SIGTERM to the group, up to `grace` for it to go, then SIGKILL. Safe on a group that is
/// already gone.
pub fn kill_group(pgid: u32, grace: Duration) {
    let Ok(p) = i32::try_from(pgid) else { return };
    let Some(pid) = Pid::from_raw(p).filter(|_| p > 1) else { return };
    if kill_process_group(pid, Signal::TERM).is_err() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(20));
        if test_kill_process_group(pid).is_err() {
            return;
        }
    }
    let _ = kill_process_group(pid, Signal::KILL);
}

/// Terminates every live group (the signal watcher, before the process ends).
pub fn kill_all() {
    let groups: Vec<i32> = LIVE.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect();
    for g in groups {
        kill_group(g as u32, Duration::from_millis(500));
    }
}

static WATCHER: Once = Once::new();
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The process drains on the first signal instead of ending ([`drain_on_signal`]).
static DRAIN: AtomicBool = AtomicBool::new(false);
/// A first signal arrived in a draining process: runs stop at their next commit point.
static DRAINING: AtomicBool = AtomicBool::new(false);
/// The runs in progress (an id, the run's workspace), for the message on interrupt. Each run
/// adds itself and is removed when its [`Running`] guard drops, so runs of one process (`serve`'s
/// workers) never stand in for each other; only the list is process-wide, as the signal is.
static RUNS: Mutex<Vec<(u64, Utf8PathBuf, Option<Utf8PathBuf>)>> = Mutex::new(Vec::new());
/// What the process was doing, said first on interrupt (e.g. `serve`'s address).
static DOING: Mutex<Option<String>> = Mutex::new(None);
static NEXT_RUN: AtomicU64 = AtomicU64::new(0);

/// A run in progress, known to the watcher until dropped.
#[derive(Debug)]
pub struct Running {
    id: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNS.lock().unwrap_or_else(|e| e.into_inner()).retain(|(id, _, _)| *id != self.id);
    }
}

/// The workspaces of the runs in progress, oldest first.
#[cfg(test)]
fn runs_in_progress() -> Vec<Utf8PathBuf> {
    RUNS.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(_, ws, _)| ws.clone()).collect()
}

/// The runs in progress with their serve records (None for a command's own run).
fn runs_with_records() -> Vec<(Utf8PathBuf, Option<Utf8PathBuf>)> {
    RUNS.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(_, ws, r)| (ws.clone(), r.clone())).collect()
}

/// Says `what` first when a signal stops the process (and makes sure the watcher runs).
pub fn doing(what: &str) {
    *DOING.lock().unwrap_or_else(|e| e.into_inner()) = Some(what.to_string());
    watch();
}

/// Makes sure the watcher runs.
pub fn watch() {
    WATCHER.call_once(install);
}

/// Whether a signal arrived (the process is about to end).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// From now on the first SIGTERM, SIGINT or SIGHUP drains the process instead of ending it:
/// [`draining`] turns true, runs stop at their next commit point, and the process (which watches
/// [`draining`]) ends by itself. A second signal ends it at once.
pub fn drain_on_signal() {
    DRAIN.store(true, Ordering::SeqCst);
    watch();
}

/// Whether a draining process got its first signal: no new work, and each run stops at its next
/// commit point.
pub fn draining() -> bool {
    DRAINING.load(Ordering::SeqCst)
}

/// A run is going on in `ws` while the returned guard lives: on interrupt, say what was kept
/// and how to resume.
#[must_use = "the run is known to the watcher only while the guard lives"]
pub fn run_in(ws: &Utf8Path) -> Running {
    let id = NEXT_RUN.fetch_add(1, Ordering::Relaxed);
    RUNS.lock().unwrap_or_else(|e| e.into_inner()).push((id, ws.to_owned(), None));
    watch();
    Running { id }
}

/// A run `serve` drives in `ws`, with its record at `record`: on interrupt it is marked
/// interrupted (state.json's `interrupted`, and `interrupted_by` in the record, so the next
/// start goes on with it) and named on stderr.
#[must_use = "the run is known to the watcher only while the guard lives"]
pub fn served_run_in(ws: &Utf8Path, record: &Utf8Path) -> Running {
    let id = NEXT_RUN.fetch_add(1, Ordering::Relaxed);
    RUNS.lock().unwrap_or_else(|e| e.into_inner()).push((id, ws.to_owned(), Some(record.to_owned())));
    watch();
    Running { id }
}

/// Marks a served run interrupted by `signal`: its record first (what the next start reads),
/// then state.json (what lists show), each replaced atomically. A run no longer going is left
/// as it is. Returns the message for stderr.
pub fn mark_served(ws: &Utf8Path, record: &Utf8Path, signal: &str) -> String {
    use serde_json::Value;
    let read = |p: &Utf8Path| {
        agentloop_io::fs::read_optional(p).ok().flatten().and_then(|t| serde_json::from_str::<Value>(&t).ok())
    };
    let id = ws.file_name().unwrap_or(ws.as_str()).to_string();
    let workspace = agentloop_workspace::workspace::Workspace::new(ws.to_owned());
    let Ok(state) = workspace.load_state() else {
        return format!("interrupted: run {id} (its state could not be read)");
    };
    if state.status != agentloop_workspace::workspace::Status::Running {
        return format!("interrupted: run {id} had just stopped; nothing to mark");
    }
    let step = state.step;
    let mut marked = true;
    // The record is serve's own file (its fields are serve's); only its one key is set here.
    if let Some(mut rec) = read(record) {
        rec["interrupted_by"] = Value::from(signal);
        let text = agentloop_types::json::to_string_pretty(&rec) + "\n";
        marked &= agentloop_io::fs::write_atomic(record, text.as_bytes()).is_ok();
    }
    marked &= workspace.mark_interrupted(state).is_ok();
    if marked {
        format!(
            "interrupted: run {id} at step {step} is marked interrupted; every committed phase is kept and the next \
             `agentloop serve` on this root goes on with it"
        )
    } else {
        format!("interrupted: run {id} at step {step}; it could not be marked, and the next `agentloop serve` goes on with it")
    }
}

/// Marks a command's own run interrupted in state.json, so `status` and `runs` say so (and the
/// way on) instead of `running`; a run no longer going is left as it is.
fn mark_run(ws: &Utf8Path) {
    let workspace = agentloop_workspace::workspace::Workspace::new(ws.to_owned());
    if let Ok(state) = workspace.load_state() {
        if state.status == agentloop_workspace::workspace::Status::Running {
            let _ = workspace.mark_interrupted(state);
        }
    }
}

/// After a signal, a command's own thread must not carry on as if a tool or server had failed:
/// it waits here for the watcher to end the process.
pub fn park_if_interrupted() {
    while interrupted() {
        std::thread::park_timeout(Duration::from_secs(1));
    }
}

/// The message for an interrupted run: where it stands and the command that goes on.
pub fn resume_message(ws: &Utf8Path) -> String {
    let state = agentloop_io::fs::read_optional(&ws.join("state.json")).ok().flatten();
    let field = |k: &str| {
        state
            .as_deref()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            .and_then(|v| v.get(k).cloned())
            .map(|v| v.as_str().map(String::from).unwrap_or_else(|| v.to_string()))
            .unwrap_or_else(|| "?".into())
    };
    let shown = if ws.as_str().is_empty() { "." } else { ws.as_str() };
    format!(
        "interrupted: every committed phase is kept in {shown} (step {}, next {}); a phase that was under way \
         is redone. Resume with: agentloop -w {shown} run",
        field("step"),
        field("next")
    )
}

fn signal_name(sig: i32) -> &'static str {
    use signal_hook::consts::{SIGINT, SIGTERM};
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "SIGHUP",
    }
}

fn install() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new().name("signals".into()).spawn(move || {
        for sig in signals.forever() {
            if DRAIN.load(Ordering::SeqCst) && !DRAINING.swap(true, Ordering::SeqCst) {
                let n = runs_with_records().len();
                agentloop_io::output::stderr_line(&format!(
                    "{}: finishing the phase under way in {n} run(s), then stopping at that commit point; \
                     a second signal stops at once (every committed phase is kept either way)",
                    signal_name(sig)
                ));
                continue;
            }
            INTERRUPTED.store(true, Ordering::SeqCst);
            kill_all();
            let name = signal_name(sig);
            let doing = DOING.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let runs = runs_with_records();
            if let Some(what) = doing {
                let n = runs.len();
                agentloop_io::output::stderr_line(&format!(
                    "{what} stopped by {name}; {}",
                    match n {
                        0 => "no run was in progress".to_string(),
                        1 => "1 run was in progress".to_string(),
                        n => format!("{n} runs were in progress"),
                    }
                ));
            }
            for (ws, record) in runs {
                let msg = match record {
                    Some(r) => mark_served(&ws, &r, name),
                    None => {
                        mark_run(&ws);
                        resume_message(&ws)
                    }
                };
                agentloop_io::output::stderr_line(&msg);
            }
            // The default action ends the process as the signal would have.
            let _ = signal_hook::low_level::emulate_default_handler(sig);
            std::process::exit(128 + sig);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two runs in one process (`serve`'s workers) are each known to the watcher while they
    /// go on, and only then: one ending leaves the other's message in place.
    #[test]
    fn each_run_in_progress_is_known_until_it_ends() {
        let (a, b) = (Utf8Path::new("/tmp/agentloop-ws-a"), Utf8Path::new("/tmp/agentloop-ws-b"));
        let ours = || runs_in_progress().into_iter().filter(|w| w == a || w == b).collect::<Vec<_>>();
        let first = run_in(a);
        let second = run_in(b);
        assert_eq!(ours(), vec![a.to_owned(), b.to_owned()]);
        drop(first);
        assert_eq!(ours(), vec![b.to_owned()]);
        drop(second);
        assert!(ours().is_empty());
    }
}
