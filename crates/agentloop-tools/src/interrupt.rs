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
//!
//! All of it is one value, [`WATCH`]: the one static here, because a signal is delivered to the
//! process, not to a caller, so what it must act on (the groups, the runs) is the process's.
//! A door with its own way of marking a run (serve's record) hands it in ([`run_marked_by`]);
//! this module knows no door's files.

use camino::{Utf8Path, Utf8PathBuf};
use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// How a door marks its run interrupted: given the signal's name, it marks the run and returns
/// the line for stderr.
pub type Mark = Box<dyn Fn(&str) -> String + Send + Sync>;

/// A run going on: its number, its workspace and how its door marks it (None: as a command's own).
type RunEntry = (u64, Utf8PathBuf, Option<std::sync::Arc<Mark>>);

/// What the signal watcher acts on, for the whole process.
struct Watch {
    /// The watcher thread is started once.
    installed: Once,
    /// Process groups agentloop started and has not ended (MCP servers, the shell tool's program).
    live: Mutex<BTreeSet<i32>>,
    /// A signal arrived (the process is about to end).
    interrupted: AtomicBool,
    /// The process drains on the first signal instead of ending ([`drain_on_signal`]).
    drain: AtomicBool,
    /// A first signal arrived in a draining process: runs stop at their next commit point.
    draining: AtomicBool,
    /// The runs in progress (an id, the run's workspace, how its door marks it), for the message
    /// on interrupt. Each run adds itself and is removed when its [`Running`] guard drops, so runs
    /// of one process (`serve`'s workers) never stand in for each other.
    runs: Mutex<Vec<RunEntry>>,
    /// What the process was doing, said first on interrupt (e.g. `serve`'s address).
    doing: Mutex<Option<String>>,
    next_run: AtomicU64,
}

/// The process's one signal watch.
static WATCH: Watch = Watch {
    installed: Once::new(),
    live: Mutex::new(BTreeSet::new()),
    interrupted: AtomicBool::new(false),
    drain: AtomicBool::new(false),
    draining: AtomicBool::new(false),
    runs: Mutex::new(Vec::new()),
    doing: Mutex::new(None),
    next_run: AtomicU64::new(0),
};

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records a live process group (its leader's pid) and makes sure the signal watcher runs.
pub fn register(pgid: u32) {
    watch();
    if let Ok(pgid) = i32::try_from(pgid) {
        locked(&WATCH.live).insert(pgid);
    }
}

pub fn unregister(pgid: u32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        locked(&WATCH.live).remove(&pgid);
    }
}

/// How many groups are live (for tests and `-v` output).
pub fn live() -> usize {
    locked(&WATCH.live).len()
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
    let groups: Vec<i32> = locked(&WATCH.live).iter().copied().collect();
    for g in groups {
        kill_group(g as u32, Duration::from_millis(500));
    }
}

/// A run in progress, known to the watcher until dropped.
#[derive(Debug)]
pub struct Running {
    id: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        locked(&WATCH.runs).retain(|(id, _, _)| *id != self.id);
    }
}

/// The workspaces of the runs in progress, oldest first.
#[cfg(test)]
fn runs_in_progress() -> Vec<Utf8PathBuf> {
    locked(&WATCH.runs).iter().map(|(_, ws, _)| ws.clone()).collect()
}

/// The runs in progress with how their door marks them (None for a command's own run).
fn runs_with_marks() -> Vec<(Utf8PathBuf, Option<std::sync::Arc<Mark>>)> {
    locked(&WATCH.runs).iter().map(|(_, ws, r)| (ws.clone(), r.clone())).collect()
}

/// Says `what` first when a signal stops the process (and makes sure the watcher runs).
pub fn doing(what: &str) {
    *locked(&WATCH.doing) = Some(what.to_string());
    watch();
}

/// Makes sure the watcher runs.
pub fn watch() {
    WATCH.installed.call_once(install);
}

/// Whether a signal arrived (the process is about to end).
pub fn interrupted() -> bool {
    WATCH.interrupted.load(Ordering::SeqCst)
}

/// From now on the first SIGTERM, SIGINT or SIGHUP drains the process instead of ending it:
/// [`draining`] turns true, runs stop at their next commit point, and the process (which watches
/// [`draining`]) ends by itself. A second signal ends it at once.
pub fn drain_on_signal() {
    WATCH.drain.store(true, Ordering::SeqCst);
    watch();
}

/// Whether a draining process got its first signal: no new work, and each run stops at its next
/// commit point.
pub fn draining() -> bool {
    WATCH.draining.load(Ordering::SeqCst)
}

/// A run is going on in `ws` while the returned guard lives: on interrupt, say what was kept
/// and how to resume.
#[must_use = "the run is known to the watcher only while the guard lives"]
pub fn run_in(ws: &Utf8Path) -> Running {
    let id = WATCH.next_run.fetch_add(1, Ordering::Relaxed);
    locked(&WATCH.runs).push((id, ws.to_owned(), None));
    watch();
    Running { id }
}

/// A run a door drives in `ws` that it marks itself on interrupt (`serve` sets its record's
/// `interrupted_by` first): `mark` is called with the signal's name and returns the line for
/// stderr.
#[must_use = "the run is known to the watcher only while the guard lives"]
pub fn run_marked_by(ws: &Utf8Path, mark: Mark) -> Running {
    let id = WATCH.next_run.fetch_add(1, Ordering::Relaxed);
    locked(&WATCH.runs).push((id, ws.to_owned(), Some(std::sync::Arc::new(mark))));
    watch();
    Running { id }
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
            if WATCH.drain.load(Ordering::SeqCst) && !WATCH.draining.swap(true, Ordering::SeqCst) {
                let n = runs_with_marks().len();
                agentloop_io::output::stderr_line(&format!(
                    "{}: finishing the phase under way in {n} run(s), then stopping at that commit point; \
                     a second signal stops at once (every committed phase is kept either way)",
                    signal_name(sig)
                ));
                continue;
            }
            WATCH.interrupted.store(true, Ordering::SeqCst);
            kill_all();
            let name = signal_name(sig);
            let doing = locked(&WATCH.doing).clone();
            let runs = runs_with_marks();
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
            for (ws, mark) in runs {
                let msg = match mark {
                    Some(mark) => mark(name),
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
