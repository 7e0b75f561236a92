//! The diagnostics log: `logging: {level, file, format, max_bytes, keep}`.
//! When `logging.file` is set, diagnostics — warnings, notes, retries and waits, the config
//! sources, negotiation decisions — are appended to it as text or JSON lines, at or above
//! `level`; the file rotates by size (`file.1` … `file.<keep>`). Every configured secret (API
//! keys from the environment, tokens) is redacted before a line is written. stderr is unchanged.
//! The log is never written through a symbolic link (the file, or a folder inside the workspace
//! on the way to it): logging is turned off with a warning instead.

use crate::config::{LogFormat, LoggingConfig};
use camino::Utf8PathBuf;
use std::sync::Mutex;

pub use crate::config::LogLevel as Level;

struct Logger {
    file: Utf8PathBuf,
    level: Level,
    json: bool,
    max_bytes: u64,
    keep: u32,
    secrets: Vec<String>,
}

static LOGGER: Mutex<Option<Logger>> = Mutex::new(None);

/// Values that must never reach a log: the environment's keys and tokens.
fn secrets() -> Vec<String> {
    std::env::vars()
        .filter(|(k, _)| {
            let k = k.to_uppercase();
            k.ends_with("_API_KEY") || k.ends_with("_TOKEN") || k.ends_with("_SECRET") || k.ends_with("_PASSWORD")
        })
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| v.len() >= 4)
        .collect()
}

/// Starts logging for this process (a no-op without `logging.file`). An error says why the log
/// cannot be written (a symlink on the way); logging stays off, and the caller warns.
pub fn init(cfg: &LoggingConfig, root: &camino::Utf8Path) -> crate::error::Result<()> {
    let Some(file) = &cfg.file else { return Ok(()) };
    let file = crate::fs::resolve_in(root, file);
    log_folder(root, &file)?;
    let logger = Logger {
        file,
        level: cfg.level,
        json: cfg.format == LogFormat::Json,
        max_bytes: cfg.max_bytes.max(1024),
        keep: cfg.keep.max(1),
        secrets: secrets(),
    };
    if let Ok(mut g) = LOGGER.lock() {
        *g = Some(logger);
    }
    Ok(())
}

/// Makes the log's folder. Inside the workspace it is entered without following links (a
/// workspace from elsewhere must not point the log at a file outside it), and a log file that is
/// a symbolic link is refused; appends never follow one either (`fs::append_line`).
fn log_folder(root: &camino::Utf8Path, file: &camino::Utf8Path) -> crate::error::Result<()> {
    let dir = file.parent().unwrap_or(camino::Utf8Path::new(""));
    match dir.strip_prefix(root) {
        Ok(rel) => {
            crate::fs::Folder::open(root, rel, true)?;
        }
        Err(_) => crate::fs::create_dir_all(dir)?,
    }
    if std::fs::symlink_metadata(file).is_ok_and(|m| m.is_symlink()) {
        return Err(crate::fs::linked_file(file));
    }
    Ok(())
}

fn rotate(l: &Logger) {
    for i in (1..l.keep).rev() {
        let _ = std::fs::rename(format!("{}.{i}", l.file), format!("{}.{}", l.file, i + 1));
    }
    let _ = std::fs::rename(&l.file, format!("{}.1", l.file));
}

/// Writes one diagnostic line (if logging is on and the level is high enough).
pub fn log(level: Level, msg: &str) {
    let Ok(guard) = LOGGER.lock() else { return };
    let Some(l) = guard.as_ref() else { return };
    if level < l.level {
        return;
    }
    // Every secret in every form `redact` knows (encoded, dumped, registered at run time), then
    // the short values only this log looks for.
    let mut msg = crate::redact::redact(msg);
    for s in &l.secrets {
        msg = msg.replace(s.as_str(), "[REDACTED]");
    }
    let ts = crate::clock::now_rfc3339();
    let line = if l.json {
        serde_json::json!({"ts": ts, "level": level.as_str(), "pid": std::process::id(), "msg": msg}).to_string()
    } else {
        format!("{ts} {:<5} [{}] {}", level.as_str(), std::process::id(), msg.replace('\n', " | "))
    };
    let size = std::fs::metadata(&l.file).map(|m| m.len()).unwrap_or(0);
    if size > 0 && size + line.len() as u64 + 1 > l.max_bytes {
        rotate(l);
    }
    let _ = crate::fs::append_line(&l.file, &line);
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
