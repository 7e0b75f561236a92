//! The diagnostics log: `logging: {level, file, format, max_bytes, keep}`.
//! When `logging.file` is set, diagnostics — warnings, notes, retries and waits, the config
//! sources, negotiation decisions — are appended to it as text or JSON lines, at or above
//! `level`; the file rotates by size (`file.1` … `file.<keep>`). Every configured secret (API
//! keys from the environment, tokens) is redacted before a line is written. stderr is unchanged.
//! The log is never written through a symbolic link (the file, or a folder inside the workspace
//! on the way to it): logging is turned off with a warning instead. A log in the workspace is
//! written relative to its opened folder (`fs::Folder`), so a link put on the way later is not
//! followed either.

use serde::{Deserialize, Serialize};

pub use LogLevel as Level;

/// `logging:` — diagnostics to a file (none by default); stderr is unchanged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LoggingConfig {
    /// debug | info | warn
    pub level: LogLevel,
    /// Log file (relative to the workspace); null: no log.
    pub file: Option<camino::Utf8PathBuf>,
    /// text | json
    pub format: LogFormat,
    /// Rotate when the file would pass this size.
    pub max_bytes: u64,
    /// Rotated files kept (file.1 … file.N).
    pub keep: u32,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            level: LogLevel::Info,
            file: None,
            format: LogFormat::Text,
            max_bytes: 10 * 1024 * 1024,
            keep: 3,
        }
    }
}

/// `logging.level`: the least severe line the log keeps. Read case-insensitively (`INFO` as
/// other loggers write it), and `warning` is `warn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
}

impl<'de> Deserialize<'de> for LogLevel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.to_ascii_lowercase().as_str() {
            "debug" => Ok(LogLevel::Debug),
            "info" => Ok(LogLevel::Info),
            "warn" | "warning" => Ok(LogLevel::Warn),
            _ => Err(serde::de::Error::custom(format!(
                "unknown variant `{s}`, expected one of `debug`, `info`, `warn` (in any case; `warning` is `warn`)"
            ))),
        }
    }
}

impl LogLevel {
    /// The name written in each log line.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
        }
    }
}

/// `logging.format`: one line of text, or one JSON object, per entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// Values that must never reach a log: the environment's keys and tokens, by redaction's one
/// rule for a secret's name, down to 4 characters (redaction itself masks from 8, where a
/// shorter value would mask ordinary words in a run's files).
fn secrets() -> Vec<String> {
    std::env::vars()
        .filter(|(k, _)| crate::redact::is_secret_name(k))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| v.len() >= 4)
        .collect()
}

/// Starts logging for this process (a no-op without `logging.file`). An error says why the log
/// cannot be written (a symlink on the way); logging stays off, and the caller warns.
pub fn init(cfg: &LoggingConfig, root: &camino::Utf8Path) -> agentloop_types::error::Result<()> {
    let Some(file) = &cfg.file else { return Ok(()) };
    let within = log_folder(root, file)?;
    let file = crate::fs::resolve_in(root, file);
    let logger = crate::streams::Logger {
        file,
        within,
        least: cfg.level as u8,
        json: cfg.format == LogFormat::Json,
        max_bytes: cfg.max_bytes.max(1024),
        keep: cfg.keep.max(1),
        secrets: secrets(),
    };
    if let Ok(mut g) = crate::streams::STREAMS.log.lock() {
        *g = Some(logger);
    }
    Ok(())
}

/// Makes the log's folder. Inside the workspace (whoever named the file) it is entered without
/// following links (a workspace from elsewhere must not point the log at a file outside it) and
/// kept open: the log is written relative to it. A log file that is a symbolic link is refused;
/// appends never follow one either (`O_NOFOLLOW`). `named` is the file as configured.
fn log_folder(
    root: &camino::Utf8Path,
    named: &camino::Utf8Path,
) -> agentloop_types::error::Result<Option<(crate::fs::Folder, String)>> {
    let file = &crate::fs::resolve_in(root, named);
    if std::fs::symlink_metadata(file).is_ok_and(|m| m.is_symlink()) {
        return Err(crate::fs::linked_file(file));
    }
    let Some(rel) = crate::fs::in_workspace(root, named) else {
        crate::fs::create_dir_all(file.parent().unwrap_or(camino::Utf8Path::new(".")))?;
        return Ok(None);
    };
    let name = rel.file_name().ok_or_else(|| agentloop_types::error::Error::config(format!("{file} names no file")))?;
    let folder = crate::fs::Folder::open(root, rel.parent().unwrap_or(camino::Utf8Path::new("")), true)?
        .ok_or_else(|| agentloop_types::error::Error::config(format!("cannot make the folder of {file}")))?;
    if folder.is_link(name) {
        return Err(crate::fs::linked_file(&folder.path().join(name)));
    }
    Ok(Some((folder, name.to_string())))
}

/// Writes one diagnostic line (if logging is on and the level is high enough).
pub fn log(level: Level, msg: &str) {
    let Ok(guard) = crate::streams::STREAMS.log.lock() else { return };
    if let Some(l) = guard.as_ref() {
        l.write(level as u8, level.as_str(), msg);
    }
}

pub fn debug(msg: &str) {
    log(Level::Debug, msg)
}
pub fn info(msg: &str) {
    log(Level::Info, msg)
}
pub fn warn(msg: &str) {
    log(Level::Warn, msg)
}
