//! Where this process's output goes, as every printer shares it: stdout's fate (it is one file
//! descriptor, whoever writes to it), how chatty notes from code that holds no printer may be
//! (a provider's retry wait), and the diagnostics log beside stderr (`logging.file`, opened by
//! [`crate::log::init`], one per process). [`crate::output`] writes to the streams and
//! [`crate::log`] to the log; both read this state, so it is one static, with that reason.

use camino::Utf8PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

pub(crate) struct Streams {
    /// Set by a verbose printer, for the few notes written far from one (the model clients).
    pub(crate) verbose: AtomicBool,
    /// Set by a printer that shows progress (stderr is a terminal, no `-q`).
    pub(crate) progress: AtomicBool,
    /// Set once a write to stdout failed: nothing more is written there.
    pub(crate) stdout_gone: AtomicBool,
    /// Set when that failure was not a closed pipe (the output was lost, not declined).
    pub(crate) stdout_failed: AtomicBool,
    /// The diagnostics log, once it is open.
    pub(crate) log: Mutex<Option<Logger>>,
}

pub(crate) static STREAMS: Streams = Streams {
    verbose: AtomicBool::new(false),
    progress: AtomicBool::new(false),
    stdout_gone: AtomicBool::new(false),
    stdout_failed: AtomicBool::new(false),
    log: Mutex::new(None),
};

/// The open log: where lines go, and what they may not say.
pub(crate) struct Logger {
    pub(crate) file: Utf8PathBuf,
    /// A log in the workspace: its folder, opened without following a link, and its name.
    pub(crate) within: Option<(crate::fs::Folder, String)>,
    /// The least severe level kept, as its rank (`log::Level as u8`).
    pub(crate) least: u8,
    pub(crate) json: bool,
    pub(crate) max_bytes: u64,
    pub(crate) keep: u32,
    pub(crate) secrets: Vec<String>,
}

impl Logger {
    /// Writes one line at a level of rank `rank` named `level`, if the log keeps that level.
    pub(crate) fn write(&self, rank: u8, level: &str, msg: &str) {
        if rank < self.least {
            return;
        }
        // Every secret in every form `redact` knows (encoded, dumped, registered at run time),
        // then the short values only this log looks for.
        let mut msg = crate::redact::redact(msg);
        for s in &self.secrets {
            msg = msg.replace(s.as_str(), "[REDACTED]");
        }
        let ts = agentloop_types::clock::now_rfc3339();
        let line = if self.json {
            serde_json::json!({"ts": ts, "level": level, "pid": std::process::id(), "msg": msg}).to_string()
        } else {
            format!("{ts} {level:<5} [{}] {}", std::process::id(), msg.replace('\n', " | "))
        };
        let size = match &self.within {
            Some((folder, name)) => folder.size_of(name),
            None => std::fs::metadata(&self.file).map(|m| m.len()).unwrap_or(0),
        };
        if size > 0 && size + line.len() as u64 + 1 > self.max_bytes {
            self.rotate();
        }
        let _ = match &self.within {
            Some((folder, name)) => folder.append_at(name, None, &format!("{line}\n")),
            None => crate::fs::append_line(&self.file, &line),
        };
    }

    fn rotate(&self) {
        if let Some((folder, name)) = &self.within {
            for i in (1..self.keep).rev() {
                let _ = folder.rename(&format!("{name}.{i}"), &format!("{name}.{}", i + 1));
            }
            let _ = folder.rename(name, &format!("{name}.1"));
            return;
        }
        for i in (1..self.keep).rev() {
            let _ = std::fs::rename(format!("{}.{i}", self.file), format!("{}.{}", self.file, i + 1));
        }
        let _ = std::fs::rename(&self.file, format!("{}.1", self.file));
    }
}
