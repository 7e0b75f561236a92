//! Server processes never outlive agentloop.
//!
//! Every stdio server starts as the leader of its own process group (so a terminal's Ctrl-C
//! does not reach it half-way through a reply, and everything it spawns — `npx` → `node`,
//! `uvx` → `python` — can be signalled at once). The groups alive are kept in one list:
//! - a normal stop closes the server's stdin, waits, then signals the group (TERM, then KILL);
//! - on SIGINT, SIGTERM or SIGHUP to agentloop, the process's watcher ([`crate::interrupt`],
//!   installed when the first group starts) terminates every live group, then lets the signal
//!   take its default effect, so agentloop still dies of it (exit 130 for Ctrl-C);
//! - SIGKILL to agentloop cannot be caught: the servers' stdin then closes, and a server that
//!   follows the MCP stdio rule (exit when stdin closes) exits; one that ignores it is left
//!   running. `PR_SET_PDEATHSIG` would need `unsafe` between fork and exec, which this crate
//!   forbids.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Records a live process group (its leader's pid) and makes sure the signal watcher runs.
pub fn register(pgid: u32) {
    crate::interrupt::watch();
    if let Ok(pgid) = i32::try_from(pgid) {
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).insert(pgid);
    }
}

pub fn unregister(pgid: u32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).remove(&pgid);
    }
}

/// How many server groups are live (for tests and `-v` output).
pub fn live() -> usize {
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// Whether any process of the group is still there (zombies included).
pub fn group_exists(pgid: u32) -> bool {
    let Ok(p) = i32::try_from(pgid) else { return false };
    p > 1 && killpg(Pid::from_raw(p), None).is_ok()
}

/// SIGTERM to the group, up to `grace` for it to go, then SIGKILL. Safe on a group that is
/// already gone.
pub fn kill_group(pgid: u32, grace: Duration) {
    let Ok(p) = i32::try_from(pgid) else { return };
    if p <= 1 {
        return;
    }
    let pid = Pid::from_raw(p);
    if killpg(pid, Signal::SIGTERM).is_err() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(20));
        if killpg(pid, None).is_err() {
            return;
        }
    }
    let _ = killpg(pid, Signal::SIGKILL);
}

/// After a signal, the servers die first and the command's own thread must not carry on as if
/// a server had crashed (and exit with a tool error): it waits for the watcher to end the process.
pub fn park_if_interrupted() {
    crate::interrupt::park_if_interrupted();
}

/// Terminates every live group (the signal watcher, before the process ends).
pub fn kill_all() {
    let groups: Vec<i32> = LIVE.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect();
    for g in groups {
        kill_group(g as u32, Duration::from_millis(500));
    }
}
