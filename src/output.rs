//! The one printer: stdout carries data only, stderr carries messages for people.
//!
//! A closed stdout (`agentloop trace show | head -1`) ends the process quietly with exit 0.
//! Colour follows `--color`, `NO_COLOR` and whether the stream is a terminal; progress lines are
//! printed only when stderr is a terminal and `-q` was not given.
// The printer: the one module that writes to stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by a verbose printer, for the few notes written far from one (the model clients).
static VERBOSE: AtomicBool = AtomicBool::new(false);
/// Set by a printer that shows progress (stderr is a terminal, no `-q`).
static PROGRESS: AtomicBool = AtomicBool::new(false);

/// A progress note from code that holds no [`Printer`] (a provider's retry wait): on stderr when
/// progress lines are shown or with `-v`, and in the diagnostics log.
pub fn progress_note(s: &str) {
    let s = &crate::redact::redact(s);
    crate::log::info(s);
    if PROGRESS.load(Ordering::Relaxed) || VERBOSE.load(Ordering::Relaxed) {
        eprintln!("{s}");
    }
}

/// A `debug:` line on stderr when `-v` was given, and in the diagnostics log; for code that
/// holds no [`Printer`] (the model clients).
pub fn debug_note(s: &str) {
    let s = &crate::redact::redact(s);
    crate::log::debug(s);
    if VERBOSE.load(Ordering::Relaxed) {
        eprintln!("debug: {s}");
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Printer {
    pub quiet: bool,
    pub verbose: bool,
    pub json: bool,
    pub color: bool,
    pub progress: bool,
}

impl Printer {
    pub fn new(quiet: bool, verbose: bool, json: bool, color: ColorChoice) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => !no_color && std::io::stdout().is_terminal(),
        };
        let progress = !quiet && std::io::stderr().is_terminal();
        if verbose {
            VERBOSE.store(true, Ordering::Relaxed);
        }
        if progress {
            PROGRESS.store(true, Ordering::Relaxed);
        }
        Printer { quiet, verbose, json, color, progress }
    }

    /// Writes data to stdout; exits quietly when the reader has gone away.
    pub fn out(&self, s: &str) {
        let s = &crate::redact::redact(s);
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            eprintln!("error: cannot write to stdout: {e}");
            std::process::exit(1);
        }
    }

    /// Writes one line to stdout and says whether it could: for streams whose reader going away
    /// must stop the work (`run --events`) instead of ending the process with 0.
    pub fn try_outln(&self, s: &str) -> std::io::Result<()> {
        let mut line = crate::redact::redact(s);
        line.push('\n');
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes()).and_then(|_| out.flush())
    }

    pub fn outln(&self, s: &str) {
        let mut line = String::with_capacity(s.len() + 1);
        line.push_str(s);
        line.push('\n');
        self.out(&line);
    }

    /// Prints a value as pretty JSON on stdout.
    pub fn json_value(&self, v: &serde_json::Value) {
        self.outln(&serde_json::to_string_pretty(v).unwrap_or_default());
    }

    /// A message for people on stderr, unless `-q`.
    pub fn info(&self, s: &str) {
        let s = &crate::redact::redact(s);
        crate::log::info(s);
        if !self.quiet {
            eprintln!("{s}");
        }
    }

    pub fn warn(&self, s: &str) {
        let s = &crate::redact::redact(s);
        crate::log::warn(s);
        eprintln!("warning: {s}");
    }

    pub fn debug(&self, s: &str) {
        crate::log::debug(s);
        if self.verbose {
            eprintln!("debug: {s}");
        }
    }

    /// A progress line (stderr, terminals only).
    pub fn progress(&self, s: &str) {
        crate::log::debug(s);
        if self.progress {
            eprintln!("{s}");
        }
    }

    /// Part of a progress line (stderr, terminals only): live model output as it arrives.
    pub fn progress_piece(&self, s: &str) {
        if self.progress {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(crate::redact::redact(s).as_bytes()).and_then(|_| err.flush());
        }
    }

    pub fn paint(&self, s: &str, ansi: &str) -> String {
        if self.color {
            format!("\x1b[{ansi}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
}

/// A warning where no printer is at hand (loading the tool registry): stderr and the log.
pub fn warning(s: &str) {
    let s = &crate::redact::redact(s);
    crate::log::warn(s);
    eprintln!("warning: {s}");
}

/// A command's final error: `error:` and, when there is one, `hint:` on stderr.
pub fn error(e: &crate::error::Error) {
    eprintln!("error: {}", e.message);
    if let Some(h) = &e.hint {
        eprintln!("hint: {h}");
    }
}

/// A diagnostic line on stderr as it is (event mode's log, crash points).
pub fn stderr_line(s: &str) {
    eprintln!("{s}");
}

/// The width of the terminal stdout is, or None when stdout is not a terminal. `COLUMNS`
/// overrides what the terminal says.
pub fn terminal_width() -> Option<usize> {
    let out = std::io::stdout();
    if !out.is_terminal() {
        return None;
    }
    if let Some(n) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|n| *n > 0) {
        return Some(n);
    }
    rustix::termios::tcgetwinsize(&out).ok().map(|w| w.ws_col as usize).filter(|n| *n > 0)
}

/// The workspace the command was given (`-w`), for the commands hints suggest.
static HINT_WS: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Sets the workspace that suggested commands name (`.` names none).
pub fn set_hint_workspace(ws: &str) {
    let ws = (!ws.is_empty() && ws != ".").then(|| ws.to_string());
    *HINT_WS.lock().unwrap_or_else(|e| e.into_inner()) = ws;
}

/// A command to suggest in a hint, with `-w DIR` when the command was given one, in backticks:
/// `cli("plan")` → "`agentloop -w ws plan`".
pub fn cli(rest: &str) -> String {
    match HINT_WS.lock().unwrap_or_else(|e| e.into_inner()).as_deref() {
        Some(ws) if ws.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') => {
            format!("`agentloop -w '{}' {rest}`", ws.replace('\'', "'\\''"))
        }
        Some(ws) => format!("`agentloop -w {ws} {rest}`"),
        None => format!("`agentloop {rest}`"),
    }
}
