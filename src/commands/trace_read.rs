//! The fast read of trace.jsonl behind `trace show` and `trace stats`: the file is read in blocks,
//! each block's lines are judged on as many threads as the machine has cores (the results are
//! handed back in file order), and a line is parsed only as far as the filter needs.
//!
//! [`Probe`] reads a line the way [`Entry`] does (the same fields, of the same types, required
//! and optional alike, so it accepts and refuses exactly the lines an `Entry` does) but keeps
//! only the filter's fields and borrows their text from the line: nothing is copied or allocated
//! for the long fields (a result summary, a reason, args), which are checked and passed over.

use agentloop_types::error::Result;
use agentloop_types::tool_spec::ToolStatus;
use agentloop_types::trace::lines::{self, MAX_LINE};
use agentloop_types::trace::{BadLine, Entry, Event, Phase, ResultStatus, Usage};
use serde::de::{Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::io::Read;

/// Bytes read per block: large enough that each thread's share is worth a thread, small enough
/// that memory stays flat however long the trace is.
const BLOCK: usize = 8 * 1024 * 1024;

/// One non-empty line as the scan hands it to the work: its text (trimmed, invalid UTF-8
/// replaced, as [`agentloop_types::trace::scan`] reads it) and where it is.
pub struct Line<'a> {
    pub text: &'a str,
    /// 1-based line number in the file (empty lines count).
    pub number: usize,
}

/// Reads the file at `path` and calls `work` on every non-empty line (on several threads at once
/// when the machine has cores to spare), then `each` with each of the results in file order, the
/// 1-based position of its line among the file's non-empty lines, and the text `work` wrote for
/// that line into the buffer it was handed (a rendered line, say: one buffer per thread, kept
/// from block to block, so a kept line costs no allocation of its own). A line too long to hold
/// ([`MAX_LINE`]) is never given to `work`: `each` gets it as a bad line, with no text. Returns
/// the bytes read and the number of non-empty lines. A missing file is no lines, as in
/// [`agentloop_types::trace::scan`].
pub fn scan_par<T: Send>(
    path: &camino::Utf8Path,
    work: impl Fn(&Line, &mut String) -> Option<T> + Sync,
    mut each: impl FnMut(usize, std::result::Result<T, BadLine>, &str),
) -> Result<(u64, usize)> {
    let mut texts: Vec<String> = (0..threads()).map(|_| String::new()).collect();
    let mut nth_before = 0;
    let bytes = scan_blocks(
        path,
        &mut texts,
        |text, b, first| run_part(b, first, text, &work),
        |got| match got {
            Scanned::Part(part, text) => {
                for (nth, r, from, to) in part.results {
                    each(nth_before + nth, Ok(r), text.get(from..to).unwrap_or_default());
                }
                nth_before += part.non_empty;
            }
            Scanned::TooLong(bad) => {
                nth_before += 1;
                each(nth_before, Err(bad), "");
            }
        },
    )?;
    Ok((bytes, nth_before))
}

/// The threads a read runs on: the machine's cores, up to 8.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8)
}

/// What [`scan_blocks`] hands on, in file order.
pub enum Scanned<'s, R, S> {
    /// What `work` gave for one part of a block, with the scratch it was given.
    Part(R, &'s S),
    /// A line over [`MAX_LINE`], passed over without being held.
    TooLong(BadLine),
}

/// The read under [`scan_par`], by blocks of whole lines: each block is split into as many parts
/// as there are `scratch` values, `work` judges each part on a thread of its own (given the
/// part's scratch, its bytes and the 1-based number of its first line), and `each` is given
/// every part's result, with its scratch, in file order, and in its place among them each line
/// too long to hold. Returns the bytes read; a missing file is none.
///
/// The next block is read on a thread of its own while the parts of this one are judged, so the
/// copy out of the page cache overlaps the work. A line longer than a block is read onto in one
/// buffer up to [`MAX_LINE`], then passed over to its newline: the buffers hold at most a line's
/// cap and a block in one and two blocks in the other, however the file is shaped.
pub fn scan_blocks<S: Send, R: Send>(
    path: &camino::Utf8Path,
    scratch: &mut [S],
    work: impl Fn(&mut S, &[u8], usize) -> R + Sync,
    mut each: impl FnMut(Scanned<'_, R, S>),
) -> Result<u64> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(agentloop_types::error::Error::io("read", path, e)),
    };
    let read_err = |e| agentloop_types::error::Error::io("read", path, e);
    let (mut buf, mut spare) = (Vec::with_capacity(BLOCK + 64 * 1024), Vec::with_capacity(BLOCK + 64 * 1024));
    let mut eof = read_block(&mut file, &mut buf).map_err(read_err)?;
    // Lines before the whole lines of `buf`.
    let mut lines_before = 0usize;
    let mut bytes = 0u64;
    // The bytes so far of a line over the cap, passed over block by block.
    let mut long: Option<u64> = None;
    loop {
        let start = match head(&buf, eof, long.take().unwrap_or(0)) {
            Head::Fits => 0,
            Head::Ends { bytes, next } => {
                lines_before += 1;
                each(Scanned::TooLong(BadLine { line: lines_before, message: lines::too_long(bytes) }));
                next
            }
            Head::Goes(bytes) => {
                long = Some(bytes);
                buf.len()
            }
        };
        let body = &buf[start..];
        // The whole lines in the buffer; the rest is carried to the next block.
        let end = if eof { body.len() } else { memchr::memrchr(b'\n', body).map_or(0, |i| i + 1) };
        if end == 0 && !eof {
            // No whole line to judge: the next block is read onto this one, so a long line is
            // held once rather than copied into the other buffer too.
            buf.drain(..start);
            bytes += start as u64;
            eof = read_block(&mut file, &mut buf).map_err(read_err)?;
            continue;
        }
        spare.clear();
        spare.extend_from_slice(&body[end..]);
        let parts = split(&body[..end], scratch.len().max(1));
        let (firsts, after) = first_lines(&parts, lines_before);
        let (results, next) = std::thread::scope(|s| {
            let reader = (!eof).then(|| s.spawn(|| read_block(&mut file, &mut spare)));
            let results = judge(s, &parts, &firsts, scratch, &work);
            // A panicking read can only be a bug; it ends the read as the end of the file would.
            (results, reader.map(|h| h.join().unwrap_or(Ok(true))))
        });
        for (r, sc) in results.into_iter().zip(scratch.iter()) {
            each(Scanned::Part(r, sc));
        }
        lines_before = after;
        bytes += (start + end) as u64;
        match next {
            None => break,
            Some(n) => eof = n.map_err(read_err)?,
        }
        std::mem::swap(&mut buf, &mut spare);
    }
    Ok(bytes)
}

/// Where the first line of a buffer stands against [`MAX_LINE`]: it may have begun in an earlier
/// block, carried at the head of the buffer or, once over the cap, passed over (`before` bytes).
enum Head {
    /// Within the cap: judged with the rest, or carried on.
    Fits,
    /// Over the cap and ended here: its length, and where the next line starts.
    Ends { bytes: u64, next: usize },
    /// Over the cap and going on past the buffer: its length so far.
    Goes(u64),
}

fn head(buf: &[u8], eof: bool, before: u64) -> Head {
    let over = |len: usize| before + len as u64 > MAX_LINE as u64;
    match memchr::memchr(b'\n', buf) {
        Some(i) if over(i) => Head::Ends { bytes: before + i as u64, next: i + 1 },
        // A file's last line ends with the file.
        None if over(buf.len()) && eof => Head::Ends { bytes: before + buf.len() as u64, next: buf.len() },
        None if over(buf.len()) => Head::Goes(before + buf.len() as u64),
        _ => Head::Fits,
    }
}

/// Appends up to a block of the file to `buf`; true at the end of the file. Room for exactly a
/// block is made first: a buffer left to double as it fills could reach twice what it holds.
fn read_block(file: &mut std::fs::File, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    buf.reserve_exact(BLOCK);
    let n = file.take(BLOCK as u64).read_to_end(buf)?;
    Ok(n < BLOCK)
}

/// Runs the parts of a block on as many threads (the first on this one), each with its own
/// scratch, and returns their results in order. A part whose thread panicked (a bug) is left
/// out, and so are the parts after it, so the results stay in order with their scratch.
fn judge<'scope, 'env: 'scope, S: Send, R: Send + 'scope>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    parts: &[&'env [u8]],
    firsts: &[usize],
    scratch: &'env mut [S],
    work: &'env (impl Fn(&mut S, &[u8], usize) -> R + Sync),
) -> Vec<R> {
    let mut scratch = scratch.iter_mut();
    let (Some(sc0), Some((part0, first0))) = (scratch.next(), parts.first().zip(firsts.first())) else {
        return Vec::new();
    };
    let handles: Vec<_> = parts[1..]
        .iter()
        .zip(&firsts[1..])
        .zip(scratch)
        .map(|((p, f), sc)| {
            let (p, f) = (*p, *f);
            s.spawn(move || work(sc, p, f))
        })
        .collect();
    let mut out = vec![work(sc0, part0, *first0)];
    for h in handles {
        match h.join() {
            Ok(r) => out.push(r),
            Err(_) => break,
        }
    }
    out
}

/// What one part of a block gave: each result with its line's position among the part's
/// non-empty lines and the range of the part's text its line wrote, and how many non-empty
/// lines the part had.
struct Part<T> {
    results: Vec<(usize, T, usize, usize)>,
    non_empty: usize,
}

/// Splits the bytes into at most `n` runs of whole lines of about equal size.
fn split(b: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity(n);
    let mut rest = b;
    for i in (1..n).rev() {
        let at = rest.len() / (i + 1);
        let Some(nl) = memchr::memchr(b'\n', &rest[at..]) else { break };
        let (p, r) = rest.split_at(at + nl + 1);
        parts.push(p);
        rest = r;
    }
    parts.push(rest);
    parts.retain(|p| !p.is_empty());
    parts
}

/// The 1-based number of each part's first line, and how many lines end in them all with
/// `before`.
fn first_lines(parts: &[&[u8]], before: usize) -> (Vec<usize>, usize) {
    let mut ended = before;
    let firsts = parts
        .iter()
        .map(|p| {
            let first = ended + 1;
            ended += memchr::memchr_iter(b'\n', p).count();
            first
        })
        .collect();
    (firsts, ended)
}

fn run_part<T>(
    b: &[u8],
    first: usize,
    text_out: &mut String,
    work: &(impl Fn(&Line, &mut String) -> Option<T> + Sync),
) -> Part<T> {
    text_out.clear();
    let mut results = Vec::new();
    let mut non_empty = 0;
    // Line ends found with memchr (a byte-by-byte split costs more than the rest of the read).
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', b).chain((b.last() != Some(&b'\n')).then_some(b.len()));
    for (i, end) in ends.enumerate() {
        let raw = &b[start..end];
        start = end + 1;
        // `from_utf8` checks ASCII a word at a time; `from_utf8_lossy` goes byte by byte, and
        // was most of the time a read took. Only a line that is not UTF-8 pays for it.
        let text = match std::str::from_utf8(raw) {
            Ok(t) => Cow::Borrowed(t),
            Err(_) => String::from_utf8_lossy(raw),
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        non_empty += 1;
        let from = text_out.len();
        match work(&Line { text, number: first + i }, text_out) {
            Some(r) => results.push((non_empty, r, from, text_out.len())),
            None => text_out.truncate(from),
        }
    }
    Part { results, non_empty }
}

/// A trace line read only as far as `trace show` and `trace stats` look into it (see the module
/// note). Each field has its [`Entry`] field's type, so the same lines are refused, with one
/// exception: inside `args` and `data` (any JSON) a number too large for a float is passed over
/// where an `Entry` refuses the line.
#[derive(Deserialize)]
// The fields not read are there to be checked for their type, as an Entry's are.
#[allow(dead_code)]
pub struct Probe<'a> {
    #[serde(borrow)]
    pub ts: Text<'a>,
    #[serde(borrow)]
    pub run_id: Text<'a>,
    pub step: u32,
    pub phase: Option<Phase>,
    pub event: Event,
    #[serde(default)]
    schema_version: Option<u32>,
    #[serde(default, borrow)]
    pub tool: Option<Text<'a>>,
    #[serde(default)]
    args: Option<IgnoredAny>,
    #[serde(default)]
    pub result_status: Option<ResultStatus>,
    #[serde(default)]
    result_summary: Option<AnyText>,
    #[serde(default)]
    error: Option<AnyText>,
    #[serde(default)]
    retryable: Option<bool>,
    #[serde(default)]
    decision: Option<AnyText>,
    #[serde(default)]
    reason: Option<AnyText>,
    #[serde(default)]
    pub duration_ms: Option<u64>,
    #[serde(default, borrow)]
    pub model: Option<Text<'a>>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub cost_usd: Option<f64>,
    #[serde(default)]
    artifacts: Vec<AnyText>,
    #[serde(default)]
    prompt_bytes: Option<u64>,
    #[serde(default)]
    attempt: Option<u32>,
    #[serde(default)]
    wire_form: Option<AnyText>,
    #[serde(default)]
    data: Option<IgnoredAny>,
}

impl<'a> Probe<'a> {
    /// The line as a probe, or why it is no entry (the message [`agentloop_types::trace::scan`] gives,
    /// a cost that is none included).
    pub fn read(line: &'a str) -> std::result::Result<Probe<'a>, String> {
        let p: Probe = serde_json::from_str(line).map_err(|e| e.to_string())?;
        match p.cost_usd.and_then(agentloop_types::trace::bad_cost) {
            Some(why) => Err(why),
            None => Ok(p),
        }
    }

    pub fn is_error(&self) -> bool {
        self.error.is_some() || self.result_status.as_ref().and_then(ResultStatus::tool) == Some(ToolStatus::Error)
    }

    /// The fields `trace stats` sums, as an [`Entry`].
    pub fn to_entry(&self) -> Entry {
        Entry {
            run_id: self.run_id.to_string(),
            step: self.step,
            phase: self.phase,
            event: self.event.clone(),
            tool: self.tool.as_deref().map(String::from),
            result_status: self.result_status.clone(),
            // Only whether there is one is summed.
            error: self.error.as_ref().map(|_| String::new()),
            duration_ms: self.duration_ms,
            model: self.model.as_deref().map(String::from),
            usage: self.usage,
            cost_usd: self.cost_usd,
            ..Default::default()
        }
    }
}

/// A JSON string borrowed from the line when it has no escapes (and decoded when it has).
pub struct Text<'a>(Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> std::result::Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> std::result::Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_string())))
            }
            fn visit_string<E>(self, s: String) -> std::result::Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A JSON string that must be one and is not looked at: checked, never copied.
struct AnyText;

impl<'de> Deserialize<'de> for AnyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = AnyText;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E>(self, _: &str) -> std::result::Result<AnyText, E> {
                Ok(AnyText)
            }
        }
        d.deserialize_str(V)
    }
}
