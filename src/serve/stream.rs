//! GET /runs/{id}/trace?follow=1: the trace as server-sent events while the run goes.
//!
//! Each trace line is one event (`id:` its line number, `data:` the entry's JSON line), so a
//! client that reconnects with `Last-Event-ID` gets only what it missed. When the run has
//! stopped and every line is sent, an `end` event closes the stream; a comment line every 15 s
//! keeps proxies from closing a quiet stream and finds clients that went away. Each event is
//! one HTTP chunk, flushed at once: tiny_http's own responses go through buffers that are only
//! flushed when full or at the end, which would hold events back.

use super::runs;
use super::Shared;
use agentloop_io::fs::sys;
use agentloop_types::trace::lines::{Piece, Splitter};
use agentloop_workspace::workspace::Workspace;
use std::io::{Read, Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

/// Most streams open at once; more are refused with 503.
pub const MAX_STREAMS: usize = 64;

const POLL: Duration = Duration::from_millis(200);
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Streams the trace of `ws` from the line after `after` until the run stops.
pub fn follow(shared: &Shared, ws: Workspace, req: tiny_http::Request, after: usize) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nX-Accel-Buffering: no\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut raw = req.into_writer();
    if raw.write_all(head.as_bytes()).and_then(|_| raw.flush()).is_err() {
        return;
    }
    let mut out = Chunked(raw);
    let result = pump(shared, &ws, &mut out, after).and_then(|_| out.end());
    if let Err(e) = result {
        shared.debug(&format!("trace stream of {} ended: {e}", ws.root));
    }
}

/// Opens the trace for reading, never through a symbolic link (a run could have made its trace
/// one; the run's folder itself was checked when the stream began) and only a regular file.
fn open_trace(path: &camino::Utf8Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(sys::O_NOFOLLOW | sys::O_NONBLOCK).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::from_raw_os_error(sys::ENXIO));
    }
    Ok(f)
}

/// Chunked transfer encoding, one flushed chunk per event.
struct Chunked<W: Write>(W);

impl<W: Write> Chunked<W> {
    fn send(&mut self, data: &str) -> std::io::Result<()> {
        write!(self.0, "{:x}\r\n{data}\r\n", data.len())?;
        self.0.flush()
    }
    /// The last chunk: the response is complete.
    fn end(&mut self) -> std::io::Result<()> {
        self.0.write_all(b"0\r\n\r\n")?;
        self.0.flush()
    }
}

fn pump<W: Write>(shared: &Shared, ws: &Workspace, out: &mut Chunked<W>, after: usize) -> std::io::Result<()> {
    let path = ws.trace();
    let mut offset = 0u64;
    // Lines are cut as they come; one too long to hold is passed over unread, as every reader of
    // the trace passes it (agentloop_types::trace::lines).
    let mut lines = Splitter::default();
    let mut block = vec![0; 256 * 1024];
    let mut last_write = Instant::now();
    loop {
        let mut got = false;
        if let Ok(mut f) = open_trace(&path) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if len > offset {
                f.seek(SeekFrom::Start(offset))?;
                // What was appended, a block at a time: never more than a block and a line held.
                let mut appended = f.take(len - offset);
                while let Some(n) = read_some(&mut appended, &mut block)? {
                    offset += n as u64;
                    got = true;
                    let mut sent = Ok(());
                    lines.feed(&block[..n], &mut |line_no, piece| {
                        if sent.is_ok() {
                            sent = send_line(out, line_no, piece, after, &mut last_write);
                        }
                    });
                    sent?;
                }
            }
        }
        if !got {
            // Every line is out: the stream ends once the run has stopped (state.json is
            // written after the trace lines of a commit, so nothing of the run is missed).
            let stopped = ws.load_state().map(|s| s.status.is_terminal() || s.interrupted).unwrap_or(true);
            if stopped && lines.is_empty() && shared.queue.place(run_id(ws)).is_none() {
                out.send(&format!("event: end\ndata: {{\"lines\": {}}}\n\n", lines.lines()))?;
                return Ok(());
            }
            if last_write.elapsed() >= KEEPALIVE {
                out.send(": keepalive\n\n")?;
                last_write = Instant::now();
            }
            std::thread::sleep(POLL);
        }
    }
}

/// The next bytes of `r` into `block`: how many, or None at its end.
fn read_some(r: &mut impl Read, block: &mut [u8]) -> std::io::Result<Option<usize>> {
    loop {
        match r.read(block) {
            Ok(0) => return Ok(None),
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Sends a line past `after` as one event when it is one JSON object: a torn, corrupt or
/// over-long line is skipped.
fn send_line<W: Write>(
    out: &mut Chunked<W>,
    line_no: usize,
    piece: Piece<'_>,
    after: usize,
    last_write: &mut Instant,
) -> std::io::Result<()> {
    let Piece::Line(raw) = piece else { return Ok(()) };
    let text = String::from_utf8_lossy(raw);
    let text = text.trim();
    if line_no <= after || text.is_empty() {
        return Ok(());
    }
    if serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.is_object()) {
        out.send(&format!("id: {line_no}\ndata: {text}\n\n"))?;
        *last_write = Instant::now();
    }
    Ok(())
}

fn run_id(ws: &Workspace) -> &str {
    ws.root.file_name().filter(|id| runs::valid_id(id)).unwrap_or("")
}
