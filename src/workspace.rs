//! The workspace folder: its files, the lock, state.json and the commit journal.
//!
//! Invariants:
//! - Every file is replaced atomically ([`crate::fs::write_atomic`]); trace.jsonl is append-only.
//! - One process at a time mutates a workspace: [`Workspace::lock`] takes an exclusive OS lock
//!   on `.agentloop.lock` (released by the OS if the holder dies) and records the holder's pid.
//! - A phase applies its effects through one [`Commit`]: the commit is first written whole to
//!   `.agentloop.journal.json`, then applied file by file, then removed. A process killed at any
//!   instant leaves either no journal (nothing or everything applied) or a journal that the next
//!   locker replays; replay is idempotent, so no phase is applied twice or half.

use crate::config::Config;
use crate::error::{Error, Kind, Result};
use crate::fs;
use crate::trace::{self, Usage};
use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

pub const STATE_SCHEMA_VERSION: u32 = 1;
const LOCK_FILE: &str = ".agentloop.lock";
const JOURNAL_FILE: &str = ".agentloop.journal.json";

#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: Utf8PathBuf,
}

/// Where a run is: the next phase to execute, or finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Next {
    Frame,
    Plan,
    Act,
    Reflect,
    Finish,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Done,
    Escalated,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Done => "done",
            Status::Escalated => "escalated",
        }
    }
    pub fn is_terminal(self) -> bool {
        self != Status::Running
    }
}

/// Why a run stopped, which fixes the exit code of `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopKind {
    Done,
    Escalated,
    Budget,
    Provider,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Limits {
    pub max_steps: u32,
    pub max_reframes: u32,
    pub timeout_secs: u64,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

impl Limits {
    /// The limits in force for a run that recorded `self`: each limit given now (a config file,
    /// the environment or a flag — any source but the built-in default) replaces the recorded
    /// one; the others stay as the run recorded them (e.g. `init --max-steps 7`).
    pub fn in_force(&self, c: &Config, sources: &std::collections::BTreeMap<String, String>) -> Self {
        let given = |k: &str| sources.get(k).is_some_and(|s| s != "default");
        let now = Limits::from_config(c);
        Limits {
            max_steps: if given("max_steps") { now.max_steps } else { self.max_steps },
            max_reframes: if given("max_reframes") { now.max_reframes } else { self.max_reframes },
            timeout_secs: if given("timeout") { now.timeout_secs } else { self.timeout_secs },
            max_tokens: if given("max_tokens") { now.max_tokens } else { self.max_tokens },
            max_cost_usd: if given("max_cost_usd") { now.max_cost_usd } else { self.max_cost_usd },
        }
    }

    pub fn from_config(c: &Config) -> Self {
        Limits {
            max_steps: c.max_steps,
            max_reframes: c.max_reframes,
            timeout_secs: c.timeout.0.as_secs(),
            max_tokens: c.max_tokens,
            max_cost_usd: c.max_cost_usd,
        }
    }
}

/// The action chosen by Plan and not yet reflected on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Pending {
    pub step: u32,
    pub tool: String,
    pub args: serde_json::Value,
    #[serde(default)]
    pub attempt: u32,
    pub requested_at: String,
}

/// state.json: the machine state of one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct State {
    pub schema_version: u32,
    pub run_id: String,
    pub goal: String,
    pub status: Status,
    pub next: Next,
    pub step: u32,
    pub reframes: u32,
    pub started_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub finished_at: Option<String>,
    pub limits: Limits,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub cost_usd: f64,
    /// True once any call had an unknown price (cost_usd then undercounts).
    #[serde(default)]
    pub cost_incomplete: bool,
    /// Wall time spent in `run`, summed across invocations.
    #[serde(default)]
    pub elapsed_ms: u64,
    #[serde(default)]
    pub pending: Option<Pending>,
    #[serde(default)]
    pub consecutive_failures: u32,
    /// Fingerprint of the last action + result, and how many times in a row it was seen.
    #[serde(default)]
    pub last_action: Option<String>,
    #[serde(default)]
    pub repeats: u32,
    #[serde(default)]
    pub done_refusals: u32,
    #[serde(default)]
    pub completed_steps: Vec<u32>,
    #[serde(default)]
    pub stop: Option<StopKind>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub outcome: Option<String>,
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// Skills activated by skill_read, carried in later phase prompts.
    #[serde(default)]
    pub active_skills: Vec<String>,
    /// The result of the last action, for Reflect (bounded by the output cap).
    #[serde(default)]
    pub last_result: Option<crate::tool::ToolResult>,
    /// Why Reflect asked for a reframe (read by the next Frame).
    #[serde(default)]
    pub reframe_reason: Option<String>,
    /// Replay position of the scripted model, committed with each phase.
    #[serde(default)]
    pub model_cursor: serde_json::Value,
    /// The phase that was next when the run stopped (where `--continue` and `answer` go on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<Next>,
    /// The question a person must answer, when the run escalated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_question: Option<String>,
    /// Set on a running run that `run --new` archived: it can go on with `run --continue --run ID`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// How deep agentloop has called itself through Ductile to start this run (0: not at all).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u32,
    /// Frustration score: tool errors, repeats and refused `done`s raise it, clean steps lower it.
    #[serde(default)]
    pub frustration: u32,
    /// The tools Act ran, in order (result.json's `tools_called`).
    #[serde(default)]
    pub tools_called: Vec<String>,
    /// The one forced reframe frustration allows has happened.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub frustration_reframed: bool,
}

impl State {
    pub fn new(run_id: String, goal: String, limits: Limits) -> Self {
        let now = crate::clock::now_rfc3339();
        State {
            schema_version: STATE_SCHEMA_VERSION,
            run_id,
            goal,
            status: Status::Running,
            next: Next::Frame,
            step: 0,
            reframes: 0,
            started_at: now.clone(),
            updated_at: now,
            finished_at: None,
            limits,
            usage: Usage::default(),
            cost_usd: 0.0,
            cost_incomplete: false,
            elapsed_ms: 0,
            pending: None,
            consecutive_failures: 0,
            last_action: None,
            repeats: 0,
            done_refusals: 0,
            completed_steps: vec![],
            stop: None,
            reason: None,
            outcome: None,
            artifacts: vec![],
            active_skills: vec![],
            last_result: None,
            reframe_reason: None,
            model_cursor: serde_json::Value::Null,
            resume_at: None,
            open_question: None,
            interrupted: false,
            depth: 0,
            frustration: 0,
            frustration_reframed: false,
            tools_called: vec![],
        }
    }

    pub fn add_usage(&mut self, usage: &Usage, cost: Option<f64>) {
        self.usage.add(usage);
        match cost {
            Some(c) => self.cost_usd = ((self.cost_usd + c) * 1e8).round() / 1e8,
            None if usage.total() > 0 => self.cost_incomplete = true,
            None => {}
        }
    }
}

/// Effects of one phase, applied all-or-nothing through the journal.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Commit {
    /// (file name relative to the workspace, new contents)
    pub files: Vec<(String, String)>,
    pub trace: Vec<String>,
    pub state: Option<State>,
}

impl Commit {
    pub fn file(&mut self, name: &str, contents: String) -> &mut Self {
        self.files.push((name.to_string(), contents));
        self
    }
    pub fn entry(&mut self, e: &trace::Entry) -> &mut Self {
        self.trace.push(e.to_line());
        self
    }
}

/// Held while a process mutates the workspace; dropping it releases the lock.
#[derive(Debug)]
pub struct Lock {
    _file: std::fs::File,
}

impl Workspace {
    pub fn new(root: impl Into<Utf8PathBuf>) -> Self {
        Workspace { root: root.into() }
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

    /// Refuses a workspace folder that does not exist, creating nothing (every command but
    /// `init` and `run --goal`, which create it).
    pub fn require_dir(&self) -> Result<()> {
        if self.root.is_dir() {
            return Ok(());
        }
        Err(Error::usage(format!("workspace {} does not exist", self.root))
            .with_hint(format!("check -w, or create a run there with {}", crate::output::cli("run --goal \"...\""))))
    }

    pub fn has_run(&self) -> bool {
        self.state_path().is_file()
    }

    pub fn load_state(&self) -> Result<State> {
        let path = self.state_path();
        let Some(text) = fs::read_optional(&path)? else {
            return Err(Error::usage(format!("no run in {}: {path} does not exist", self.root))
                .with_hint(format!("start one with {}", crate::output::cli("run --goal \"...\""))));
        };
        let state: State = serde_json::from_str(&text).map_err(|e| {
            Error::data(format!("cannot read {path}: {e}")).with_hint(format!(
                "restore the file from a backup, or start a new run with {}",
                crate::output::cli("init --force --goal \"...\"")
            ))
        })?;
        if state.schema_version > STATE_SCHEMA_VERSION {
            return Err(Error::data(format!(
                "{path} has schema_version {} but this agentloop reads up to {STATE_SCHEMA_VERSION}",
                state.schema_version
            ))
            .with_hint("upgrade agentloop"));
        }
        Ok(state)
    }

    pub fn save_state(&self, state: &State) -> Result<()> {
        let mut s = state.clone();
        s.updated_at = crate::clock::now_rfc3339();
        let text = crate::redact::redact(&(serde_json::to_string_pretty(&s).expect("state serializes") + "\n"));
        fs::write_atomic(&self.state_path(), text.as_bytes())
    }

    /// Takes the exclusive workspace lock. `wait`: None fails at once, Some(d) waits up to d.
    pub fn lock(&self, wait: Option<Duration>) -> Result<Lock> {
        fs::create_dir_all(&self.root)?;
        let path = self.path(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("open lock file", &path, e))?;
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
                    let holder = crate::fs::read_optional(&path).ok().flatten().unwrap_or_default();
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
        self.recover()?;
        crate::archive::recover(&self.root)?;
        Ok(Lock { _file: file })
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

    /// Applies a phase's effects all-or-nothing (see the module docs).
    pub fn commit(&self, commit: &Commit) -> Result<()> {
        let journal = self.path(JOURNAL_FILE);
        // No secret reaches the workspace, whatever carried it here.
        let mut commit = commit.clone();
        for (_, text) in commit.files.iter_mut() {
            *text = crate::redact::redact(text);
        }
        for line in commit.trace.iter_mut() {
            *line = crate::redact::redact(line);
        }
        let commit = &commit;
        let text = serde_json::to_string(commit).expect("commit serializes");
        fs::write_durable(&journal, text.as_bytes())?;
        crate::crash::point("commit:journaled");
        self.apply(commit, false)?;
        std::fs::remove_file(&journal).map_err(|e| Error::io("remove", &journal, e))
    }

    fn apply(&self, commit: &Commit, replay: bool) -> Result<()> {
        for (name, contents) in &commit.files {
            let path = self.path(name);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write_atomic(&path, contents.as_bytes())?;
        }
        if !commit.trace.is_empty() {
            let path = self.trace();
            // On replay the journal's lines may be partly written already (in order); skip the
            // prefix that is there. A fresh commit has written none, so no read is needed.
            let mut skip = 0;
            if replay {
                let existing = fs::read_optional(&path)?.unwrap_or_default();
                let present: Vec<&str> = existing.lines().collect();
                for k in (1..=commit.trace.len().min(present.len())).rev() {
                    if present[present.len() - k..].iter().zip(&commit.trace[..k]).all(|(a, b)| *a == b) {
                        skip = k;
                        break;
                    }
                }
            }
            // A line torn by a crash (no newline) must not swallow the next entry.
            if skip < commit.trace.len() && !fs::ends_with_newline(&path)? {
                fs::append_raw(&path, "\n")?;
            }
            for line in &commit.trace[skip..] {
                fs::append_line(&path, line)?;
                crate::crash::point("commit:trace-line");
            }
        }
        if let Some(state) = &commit.state {
            self.save_state(state)?;
        }
        Ok(())
    }

    /// Replays a journal left by a killed process.
    pub fn recover(&self) -> Result<()> {
        let journal = self.path(JOURNAL_FILE);
        let Some(text) = fs::read_optional(&journal)? else {
            return Ok(());
        };
        match serde_json::from_str::<Commit>(&text) {
            Ok(commit) => self.apply(&commit, true)?,
            // A torn journal cannot exist (it is written atomically); a foreign file is set aside.
            Err(_) => {
                let aside = self.path(".agentloop.journal.corrupt");
                let _ = std::fs::rename(&journal, &aside);
                return Ok(());
            }
        }
        std::fs::remove_file(&journal).map_err(|e| Error::io("remove", &journal, e))
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
