//! The workspace folder: its files, the lock, state.json and the commit journal.
//!
//! Invariants:
//! - Every file is replaced atomically ([`agentloop_io::fs::write_atomic`]); trace.jsonl is append-only.
//! - One process at a time mutates a workspace: [`Workspace::lock`] takes an exclusive OS lock
//!   on `.agentloop.lock` (released by the OS if the holder dies), records the holder's pid and
//!   hands out a [`Session`], the only value through which a run is committed, its state saved
//!   or its files moved.
//! - A phase applies its effects through one [`Commit`]: the commit is first written whole to
//!   `.agentloop.journal.json` (fsynced), then applied file by file, then marked applied. A
//!   process killed at any instant leaves either nothing or everything of a phase applied, or a
//!   pending record that the next locker replays; replay is idempotent, so no phase is applied
//!   twice or half. Dropping the session checkpoints: the files the commits wrote are fsynced and
//!   the journal emptied (see `journal`).

mod journal;
mod lock;
mod state;

pub use journal::Commit;
pub use lock::Session;
pub use state::*;

use agentloop_io::fs;
use agentloop_types::error::{Error, Result};
use camino::Utf8PathBuf;

const LOCK_FILE: &str = ".agentloop.lock";
const JOURNAL_FILE: &str = ".agentloop.journal.json";
/// Earlier versions of the files commits replace, kept to be written into (see `fs::replace`).
const SPARE_DIR: &str = ".agentloop.spare";

#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: Utf8PathBuf,
    /// What this workspace value (and its clones) knows of its files' spare slots.
    spares: std::sync::Arc<agentloop_io::fs::SpareMemory>,
}

impl Workspace {
    pub fn new(root: impl Into<Utf8PathBuf>) -> Self {
        Workspace { root: root.into(), spares: Default::default() }
    }
    pub fn path(&self, name: &str) -> Utf8PathBuf {
        self.root.join(name)
    }
    pub fn context(&self) -> Utf8PathBuf {
        self.path("context.md")
    }
    pub fn memory(&self) -> Utf8PathBuf {
        self.path("memory.md")
    }
    pub fn plan(&self) -> Utf8PathBuf {
        self.path("plan.md")
    }
    pub fn decisions(&self) -> Utf8PathBuf {
        self.path("decisions.md")
    }
    pub fn skills(&self) -> Utf8PathBuf {
        self.path("skills.md")
    }
    pub fn trace(&self) -> Utf8PathBuf {
        self.path("trace.jsonl")
    }
    pub fn state_path(&self) -> Utf8PathBuf {
        self.path("state.json")
    }
    pub fn result(&self) -> Utf8PathBuf {
        self.path("result.json")
    }
    pub fn artifacts(&self) -> Utf8PathBuf {
        self.path("artifacts")
    }

    /// A command to suggest in a hint about this workspace (see [`agentloop_io::output::cli`]).
    pub fn cli(&self, rest: &str) -> String {
        agentloop_io::output::cli(&self.root, rest)
    }

    /// Refuses a workspace folder that does not exist, creating nothing (every command but
    /// `init` and `run --goal`, which create it).
    pub fn require_dir(&self) -> Result<()> {
        if self.root.is_dir() {
            return Ok(());
        }
        Err(Error::usage(format!("workspace {} does not exist", self.root))
            .with_hint(format!("check -w, or create a run there with {}", self.cli("run --goal \"...\""))))
    }

    pub fn has_run(&self) -> bool {
        self.state_path().is_file()
    }

    /// Whether a commit journal with anything in it is here (a command killed part-way left it
    /// for the next lock to replay).
    pub fn has_journal(&self) -> bool {
        [JOURNAL_FILE, crate::archive::JOURNAL]
            .iter()
            .any(|j| std::fs::symlink_metadata(self.path(j)).is_ok_and(|m| m.len() > 0))
    }

    pub fn load_state(&self) -> Result<State> {
        let path = self.state_path();
        let Some(text) = fs::read_inside(&self.root, &path)? else {
            return Err(Error::usage(format!("no run in {}: {path} does not exist", self.root))
                .with_hint(format!("start one with {}", self.cli("run --goal \"...\""))));
        };
        let mut state: State = serde_json::from_str(&text).map_err(|e| {
            Error::data(format!("cannot read {path}"))
                .with_hint(format!(
                    "restore the file from a backup, or start a new run with {}",
                    self.cli("init --force --goal \"...\"")
                ))
                .with_source(e)
        })?;
        if state.schema_version > STATE_SCHEMA_VERSION {
            return Err(Error::data(format!(
                "{path} has schema_version {} but this agentloop reads up to {STATE_SCHEMA_VERSION}",
                state.schema_version
            ))
            .with_hint("upgrade agentloop"));
        }
        // A stop recorded as `budget` (before the limit was recorded) is the limit its reason names.
        if let (Some(agentloop_types::outcome::StopKind::Budget(_)), Some(b)) =
            (state.stop, state.reason.as_deref().and_then(agentloop_types::budget::Budget::from_reason))
        {
            state.stop = Some(agentloop_types::outcome::StopKind::Budget(b));
        }
        Ok(state)
    }

    /// Marks `state` (this workspace's, as loaded) interrupted, from the signal watcher: the
    /// thread that holds the lock is about to be ended by the signal, so state.json is replaced
    /// atomically outside the journal, as [`Session::save_state`] does.
    pub fn mark_interrupted(&self, mut state: State) -> Result<()> {
        state.interrupted = true;
        fs::write_atomic(&self.state_path(), Self::state_text(&state).as_bytes())
    }

    /// state.json's text for a state (stamped with the time it is written, secrets redacted).
    fn state_text(state: &State) -> String {
        let mut s = state.clone();
        s.updated_at = agentloop_types::clock::now_rfc3339();
        agentloop_io::redact::redact(&(agentloop_types::json::to_string_pretty(&s) + "\n"))
    }
}
