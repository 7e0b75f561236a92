//! The one printer: stdout carries data only, stderr carries messages for people.
//!
//! A closed stdout (`agentloop trace show | head -1`) is not an error and does not end the
//! process: writing stops quietly (every later write is a no-op) and the command finishes as it
//! would have — locks released, the journal checkpointed — and returns its own exit code (an
//! escalated `run` still exits 3; a listing cut short exits 0). Only `run --events`, whose
//! stream is its work, stops at a commit point (exit 1). Any other write error (a full disk) is
//! said once on stderr and turns an exit 0 into 1 ([`stdout_failed`]).
//! Colour follows `--color`, `NO_COLOR` and whether the stream is a terminal; progress lines are
//! printed only when stderr is a terminal and `-q` was not given.
//!
//! Text printed for people may come from a workspace someone else wrote, a model or a server
//! (goals, reasons, tool output, error text), so nothing here reaches a terminal as a control
//! sequence: human output goes through [`printable`] (C0 controls as Unicode control pictures,
//! `ESC` as `␛`; C1 controls and bidi overrides as `<U+009B>`), and JSON output through
//! [`json_safe`] (the same characters as `\u` escapes, which decode to the same text). The only
//! escape sequences written are the printer's own colours ([`Printer::outln_painted`]).
// The printer: the one module that writes to stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;

use crate::streams::STREAMS;

/// Whether stdout has gone away (its reader closed it, or a write failed): loops that only
/// print (`trace show --follow`) stop.
pub fn stdout_gone() -> bool {
    STREAMS.stdout_gone.load(Ordering::Relaxed)
}

/// Whether a write to stdout failed for a reason other than a closed pipe: a command that
/// would exit 0 exits 1 (its output is incomplete); any other code is kept.
pub fn stdout_failed() -> bool {
    STREAMS.stdout_failed.load(Ordering::Relaxed)
}

/// A progress note from code that holds no [`Printer`] (a provider's retry wait): on stderr when
/// progress lines are shown or with `-v`, and in the diagnostics log.
pub fn progress_note(s: &str) {
    let s = &for_people(s);
    crate::log::info(s);
    if STREAMS.progress.load(Ordering::Relaxed) || STREAMS.verbose.load(Ordering::Relaxed) {
        err_line(s);
    }
}

/// A `debug:` line on stderr when `-v` was given, and in the diagnostics log; for code that
/// holds no [`Printer`] (the model clients).
pub fn debug_note(s: &str) {
    let s = &for_people(s);
    crate::log::debug(s);
    if STREAMS.verbose.load(Ordering::Relaxed) {
        err_line(&format!("debug: {s}"));
    }
}

/// `--color WHEN`: auto (a terminal without NO_COLOR), always or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
            STREAMS.verbose.store(true, Ordering::Relaxed);
        }
        if progress {
            STREAMS.progress.store(true, Ordering::Relaxed);
        }
        Printer { quiet, verbose, json, color, progress }
    }

    /// Writes data to stdout; nothing once the reader has gone away. Human output is made
    /// [`printable`]; with `--json`, [`json_safe`].
    pub fn out(&self, s: &str) {
        write_stdout(&self.render(s));
    }

    /// What [`Printer::out`] writes for `s`: redacted, then [`json_safe`] or [`printable`].
    /// Public so that several threads can render lines at once (`trace show --json`).
    pub fn render(&self, s: &str) -> String {
        let mut out = String::new();
        self.render_into(s, &mut out);
        out
    }

    /// [`Printer::render`], appended to `out`: redacted, then made safe for stdout, copied once.
    pub fn render_into(&self, s: &str, out: &mut String) {
        let s = crate::redact::redact_cow(s);
        out.push_str(&if self.json { json_safe(&s) } else { printable(&s) });
    }

    /// Stdout locked once and buffered, for a command that prints many lines (`trace show`): the
    /// same rules as [`Printer::outln`] and [`Printer::outln_painted`], one write per buffer
    /// instead of one per line. See [`Out`].
    pub fn buffered(&self) -> Out<'_> {
        Out { printer: self, w: Some(std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock())) }
    }

    /// Writes one line to stdout and says whether it could: for streams whose reader going away
    /// must stop the work (`run --events`) instead of ending the process with 0. The line is
    /// JSON (an event), so it is made [`json_safe`].
    pub fn try_outln(&self, s: &str) -> std::io::Result<()> {
        if stdout_gone() {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        let mut line = json_safe(&crate::redact::redact(s)).into_owned();
        line.push('\n');
        let mut out = std::io::stdout().lock();
        let wrote = out.write_all(line.as_bytes()).and_then(|_| out.flush());
        if wrote.is_err() {
            STREAMS.stdout_gone.store(true, Ordering::Relaxed);
        }
        wrote
    }

    pub fn outln(&self, s: &str) {
        let mut line = String::with_capacity(s.len() + 1);
        line.push_str(s);
        line.push('\n');
        self.out(&line);
    }

    /// One line of stdout made of pieces, each painted with its SGR code (`"31"`: red; `""`:
    /// plain) when colour is on. Each piece is made [`printable`] before it is painted, so these
    /// colours are the only escape sequences the printer writes.
    pub fn outln_painted(&self, pieces: &[(&str, &str)]) {
        write_stdout(&self.render_painted(pieces));
    }

    /// The line [`Printer::outln_painted`] writes, newline included.
    fn render_painted(&self, pieces: &[(&str, &str)]) -> String {
        let mut line = String::new();
        for (text, ansi) in pieces {
            let text = crate::redact::redact(text);
            let text = printable(&text);
            if self.color && !ansi.is_empty() && !self.json {
                let _ = write!(line, "\x1b[{ansi}m{text}\x1b[0m");
            } else {
                line.push_str(&text);
            }
        }
        line.push('\n');
        line
    }

    /// Prints a value as pretty JSON on stdout.
    pub fn json_value(&self, v: &serde_json::Value) {
        let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
        s.push('\n');
        write_stdout(&json_safe(&crate::redact::redact(&s)));
    }

    /// A message for people on stderr, unless `-q`.
    pub fn info(&self, s: &str) {
        let s = &for_people(s);
        crate::log::info(s);
        if !self.quiet {
            err_line(s);
        }
    }

    pub fn warn(&self, s: &str) {
        let s = &for_people(s);
        crate::log::warn(s);
        err_line(&format!("warning: {s}"));
    }

    pub fn debug(&self, s: &str) {
        let s = &printable(s);
        crate::log::debug(s);
        if self.verbose {
            err_line(&format!("debug: {s}"));
        }
    }

    /// A progress line (stderr, terminals only).
    pub fn progress(&self, s: &str) {
        let s = &printable(s);
        crate::log::debug(s);
        if self.progress {
            err_line(s);
        }
    }

    /// Part of a progress line (stderr, terminals only): live model output as it arrives.
    pub fn progress_piece(&self, s: &str) {
        if self.progress {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(for_people(s).as_bytes()).and_then(|_| err.flush());
        }
    }
}

/// A warning where no printer is at hand (loading the tool registry): stderr and the log.
pub fn warning(s: &str) {
    let s = &for_people(s);
    crate::log::warn(s);
    err_line(&format!("warning: {s}"));
}

/// A command's final error on stderr: `error: MESSAGE`, one `  Caused by: ...` line per error
/// behind it ([`Error::causes`]: outermost first, none that repeats what is already said), then
/// one `hint: ...` line per hint.
///
/// [`Error::causes`]: agentloop_types::error::Error::causes
pub fn error(e: &agentloop_types::error::Error) {
    for line in error_lines(e) {
        err_line(&line);
    }
}

/// The lines [`error`] writes, each [`printable`].
pub fn error_lines(e: &agentloop_types::error::Error) -> Vec<String> {
    let mut lines = vec![format!("error: {}", printable(&e.message))];
    lines.extend(e.causes().iter().map(|c| format!("  Caused by: {}", printable(c))));
    lines.extend(e.hints.iter().map(|h| format!("hint: {}", printable(h))));
    lines
}

/// A diagnostic line on stderr as it is, but [`printable`] (event mode's log, crash points).
pub fn stderr_line(s: &str) {
    err_line(&printable(s));
}

/// One line on stderr. A stderr that is closed or full (`2>&- `, a reader that went away) loses
/// the line, never the command: `eprintln!` would panic there and end it with 101.
fn err_line(s: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(s.as_bytes()).and_then(|_| err.write_all(b"\n"));
}

/// Buffered stdout from [`Printer::buffered`]. Lines are rendered exactly as the printer
/// renders them; the buffer is written when full, on [`Out::flush`] and when dropped. A failed
/// write follows [`write_stdout`]'s rules: nothing more is written (the buffer's rest is
/// dropped), a closed pipe quietly, any other error said once and remembered for the exit code.
pub struct Out<'a> {
    printer: &'a Printer,
    /// None once a write failed.
    w: Option<std::io::BufWriter<std::io::StdoutLock<'static>>>,
}

impl Out<'_> {
    /// [`Printer::outln`] into the buffer.
    pub fn outln(&mut self, s: &str) {
        let mut line = String::with_capacity(s.len() + 1);
        line.push_str(s);
        line.push('\n');
        let line = self.printer.render(&line);
        self.write(&line);
    }

    /// [`Printer::outln_painted`] into the buffer.
    pub fn outln_painted(&mut self, pieces: &[(&str, &str)]) {
        let line = self.printer.render_painted(pieces);
        self.write(&line);
    }

    /// Text already rendered by [`Printer::render`], written as it is.
    pub fn write_rendered(&mut self, s: &str) {
        self.write(s);
    }

    /// Writes what is buffered (a follower shows each new entry as it comes).
    pub fn flush(&mut self) {
        if let Some(w) = self.w.as_mut().filter(|_| !stdout_gone()) {
            let flushed = w.flush();
            self.failed(flushed);
        }
    }

    fn write(&mut self, s: &str) {
        if let Some(w) = self.w.as_mut().filter(|_| !stdout_gone()) {
            let wrote = w.write_all(s.as_bytes());
            self.failed(wrote);
        }
    }

    fn failed(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            stdout_write_failed(&e);
            self.discard();
        }
    }

    /// Drops what is buffered without writing it: it would only fail again.
    fn discard(&mut self) {
        if let Some(w) = self.w.take() {
            let _ = w.into_parts();
        }
    }
}

impl Drop for Out<'_> {
    fn drop(&mut self) {
        self.flush();
        // Stdout went away elsewhere: the buffer's own drop must not write to it again.
        self.discard();
    }
}

/// Notes that a write to stdout failed: nothing more is written there, and unless the reader
/// simply closed the pipe the error is said once and the exit code remembers it.
fn stdout_write_failed(e: &std::io::Error) {
    STREAMS.stdout_gone.store(true, Ordering::Relaxed);
    if e.kind() != std::io::ErrorKind::BrokenPipe {
        STREAMS.stdout_failed.store(true, Ordering::Relaxed);
        err_line(&format!("error: cannot write to stdout: {e}"));
    }
}

/// Writes to stdout as it is. Once a write has failed nothing more is written: a closed pipe
/// silently, any other error said once on stderr. The process goes on either way, so a command
/// cut short by its reader still releases its lock and returns its own exit code.
fn write_stdout(s: &str) {
    if stdout_gone() {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        stdout_write_failed(&e);
    }
}

/// A message for people: redacted, then [`printable`].
fn for_people(s: &str) -> String {
    printable(&crate::redact::redact(s)).into_owned()
}

/// A character that must not reach a terminal as it is: C0 controls other than newline and
/// tab, DEL, C1 controls (U+0080–U+009F, which some terminals act on as 8-bit escapes: U+009B
/// is CSI), and the bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069),
/// which reorder what is shown so text reads other than it is.
fn is_unsafe(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Text from a workspace, a model or a server made safe to print on a terminal, every character
/// kept visible: C0 controls become their Unicode control pictures (`ESC` → `␛`, `BEL` → `␇`,
/// a carriage return not before a newline → `␍`), DEL → `␡`, C1 controls and bidi controls →
/// `<U+009B>`. Newlines, tabs and `\r\n` are kept. Text with none of these is borrowed as is.
pub fn printable(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// [`printable`] for a field shown on one line (a goal in `status`, a note in `trace show`):
/// a newline (or `\r\n`) is also shown, as `␤`, so a value cannot forge the lines after it;
/// a tab is a space.
pub fn one_line(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

fn escape(s: &str, one_line: bool) -> Cow<'_, str> {
    let plain = |(i, c): (usize, char)| match c {
        '\r' => !one_line && s[i + 1..].starts_with('\n'),
        '\n' | '\t' => !one_line,
        c => !is_unsafe(c),
    };
    if s.char_indices().all(plain) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {
                if !one_line {
                    out.push('\r');
                }
            }
            '\n' if one_line => out.push('\u{2424}'),
            '\t' if one_line => out.push(' '),
            '\n' | '\t' => out.push(c),
            '\0'..='\x1f' => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}')),
            '\x7f' => out.push('\u{2421}'),
            c if is_unsafe(c) => {
                let _ = write!(out, "<U+{:04X}>", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON text made safe to print on a terminal without changing what it says: the characters
/// [`printable`] escapes become `\uXXXX` escapes, which decode to the same string. serde_json
/// already escapes C0 controls inside strings; DEL, C1 and bidi controls it writes as they are.
pub fn json_safe(s: &str) -> Cow<'_, str> {
    // Printable ASCII, tabs and newlines (nearly every line `trace show --json` prints): one
    // pass over the bytes, without decoding characters.
    // Folded without stopping early, 64 bytes at a time, so the check runs on vector registers.
    let plain = |c: &[u8]| c.iter().fold(true, |ok, b| ok & matches!(b, b'\t' | b'\n' | b' '..=b'~'));
    if s.as_bytes().chunks(64).all(plain) || !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_unsafe(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
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

/// A command to suggest in a hint about workspace `ws`, with `-w DIR` unless `ws` is the
/// current folder, in backticks: `cli("ws", "plan")` → "`agentloop -w ws plan`". The
/// workspace is passed by whoever makes the hint (no process-wide slot: `serve`'s workers each
/// hint at their own run).
pub fn cli(ws: &camino::Utf8Path, rest: &str) -> String {
    let ws = Some(ws.as_str()).filter(|ws| !ws.is_empty() && *ws != ".");
    match ws {
        Some(ws) if ws.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') => {
            format!("`agentloop -w '{}' {rest}`", ws.replace('\'', "'\\''"))
        }
        Some(ws) => format!("`agentloop -w {ws} {rest}`"),
        None => format!("`agentloop {rest}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_shows_every_control_and_keeps_plain_text_borrowed() {
        assert!(matches!(printable("plain text\n\ttabbed, ünïcode ✓\r\n"), Cow::Borrowed(_)));
        assert_eq!(printable("\x1b]52;c;ZXZpbA==\x07"), "␛]52;c;ZXZpbA==␇");
        assert_eq!(printable("a\x1b[2Jb\rc\0\x7f"), "a␛[2Jb␍c␀␡");
        assert_eq!(printable("x\u{9b}31m y\u{202e}txt.exe\u{2066}"), "x<U+009B>31m y<U+202E>txt.exe<U+2066>");
        assert_eq!(printable("line one\r\nline two\n"), "line one\r\nline two\n");
    }

    /// A hint names the workspace it is about, as given; the current folder is not named.
    #[test]
    fn cli_names_the_workspace_it_is_given() {
        use camino::Utf8Path;
        assert_eq!(cli(Utf8Path::new("ws"), "plan"), "`agentloop -w ws plan`");
        assert_eq!(cli(Utf8Path::new("runs/01K"), "run"), "`agentloop -w runs/01K run`");
        assert_eq!(cli(Utf8Path::new("."), "run"), "`agentloop run`");
        assert_eq!(cli(Utf8Path::new(""), "run"), "`agentloop run`");
        assert_eq!(cli(Utf8Path::new("my ws"), "run"), "`agentloop -w 'my ws' run`");
    }

    #[test]
    fn one_line_also_shows_newlines() {
        assert_eq!(one_line("goal\nstatus      done\r\nx\ty"), "goal␤status      done␤x y");
        assert!(matches!(one_line("a goal"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_safe_escapes_what_serde_leaves_and_decodes_to_the_same_text() {
        let v = serde_json::json!({"goal": "a\x1b]52;c;x\x07 \u{9b}2J \u{202e}z\x7f"});
        let text = serde_json::to_string(&v).unwrap();
        let safe = json_safe(&text);
        assert!(!safe.chars().any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)), "{safe}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
    }
}
