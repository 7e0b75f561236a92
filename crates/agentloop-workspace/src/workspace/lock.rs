//! The workspace lock: one process at a time mutates a workspace (an exclusive OS lock on
//! `.agentloop.lock`, released by the OS if the holder dies; the holder's pid is recorded).
//! Taking it replays what a killed process left: a phase's journal, an archive move, temp files,
//! and hands out the [`Session`]: the one value that may change the workspace's run.

use super::journal::Cycle;
use super::{State, Workspace, LOCK_FILE};
use agentloop_io::fs;
use agentloop_types::error::{Error, Kind, Result};
use std::time::{Duration, Instant};

/// The workspace lock, held: what may only happen under the lock (a commit, a checkpoint,
/// writing state.json, moving a run) is a method of this guard, so holding the lock is
/// checked by the compiler. It owns the journal's open cycle (the journal file, the cycle id,
/// what the cycle wrote); nothing of it is kept anywhere else in the process, so two
/// workspaces locked in one process (`serve`'s workers) commit independently. Dropping it
/// checkpoints (the files the commits wrote are fsynced, the journal emptied) and releases
/// the lock.
#[derive(Debug)]
pub struct Session {
    _file: std::fs::File,
    pub(super) ws: Workspace,
    /// One commit at a time: a phase environment shares the session by reference.
    pub(super) cycle: std::cell::RefCell<Cycle>,
}

impl Session {
    /// The workspace this session holds.
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }

    /// Writes state.json as it is, outside the journal (marking a run interrupted before it
    /// is archived): the file is replaced atomically.
    pub fn save_state(&self, state: &State) -> Result<()> {
        fs::write_atomic(&self.ws.state_path(), Workspace::state_text(state).as_bytes())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(e) = self.ws.release(self.cycle.get_mut()) {
            agentloop_io::output::debug_note(&format!("journal checkpoint: {}", e.detail()));
        }
        self.ws.spares.forget();
    }
}

impl Workspace {
    /// Takes the exclusive workspace lock and hands out its session. `wait`: None fails at
    /// once, Some(d) waits up to d.
    pub fn lock(&self, wait: Option<Duration>) -> Result<Session> {
        fs::create_dir_all(&self.root)?;
        let path = self.path(LOCK_FILE);
        // Never through a symlink: the holder's pid is written into the file.
        let file = std::os::unix::fs::OpenOptionsExt::custom_flags(
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false),
            fs::sys::O_NOFOLLOW,
        )
        .open(&path)
        .map_err(|e| fs::not_a_symlink("open lock file", &path, e))?;
        let deadline = wait.map(|d| Instant::now() + d);
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => {
                    if let Some(dl) = deadline {
                        if Instant::now() < dl {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                    }
                    let holder = agentloop_io::fs::read_optional(&path).ok().flatten().unwrap_or_default();
                    let holder = holder.trim();
                    let who = if holder.is_empty() {
                        "another agentloop process".to_string()
                    } else {
                        format!("agentloop process {holder}")
                    };
                    return Err(Error::new(Kind::LockBusy, format!("workspace {} is locked by {who}", self.root))
                        .with_hint("wait for it to finish, or pass --wait[=SECS] to wait for the lock"));
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
            }
        }
        use std::io::{Seek, Write};
        let mut f = &file;
        let _ = f.set_len(0);
        let _ = f.seek(std::io::SeekFrom::Start(0));
        let _ = write!(f, "{}", std::process::id());
        let _ = f.sync_data();
        self.remove_stale_temps();
        let cycle = self.recover()?;
        crate::archive::recover(&self.root)?;
        Ok(Session { _file: file, ws: self.clone(), cycle: std::cell::RefCell::new(cycle) })
    }

    /// Whether no process holds the workspace lock right now (a run that says `running` with
    /// its lock free was stopped without being able to say so: a kill, a lost machine). Asked
    /// without taking the lock: a shared lock tried and let go at once, which a holder's
    /// exclusive lock refuses. A workspace with no lock file was never locked: free.
    pub fn lock_free(&self) -> bool {
        let path = self.path(LOCK_FILE);
        let file = std::os::unix::fs::OpenOptionsExt::custom_flags(
            std::fs::OpenOptions::new().read(true),
            fs::sys::O_NOFOLLOW,
        )
        .open(&path);
        match file {
            Ok(f) => !matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)),
            Err(_) => true,
        }
    }

    /// Removes temp files left by a process killed between write and rename (we hold the lock,
    /// so no live writer owns them).
    fn remove_stale_temps(&self) {
        let Ok(rd) = self.root.read_dir_utf8() else {
            return;
        };
        for e in rd.flatten() {
            let n = e.file_name();
            if n.starts_with('.') && n.ends_with(".tmp") && n != ".agentloop.journal.json" {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}
