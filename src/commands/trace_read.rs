//! The fast read of trace.jsonl behind `trace show` and `trace stats`: the file is read in blocks,
//! each block's lines are judged on as many threads as the machine has cores (the results are
//! handed back in file order), and a line is parsed only as far as the filter needs.
//!
//! [`Probe`] reads a line the way [`Entry`] does (the same fields, of the same types, required
//! and optional alike, so it accepts and refuses exactly the lines an `Entry` does) but keeps
//! only the filter's fields and borrows their text from the line: nothing is copied or allocated
//! for the long fields (a result summary, a reason, args), which are checked and passed over.

use crate::error::Result;
use crate::trace::{Entry, Phase, Usage};
use serde::de::{Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::io::Read;

/// Bytes read per block: large enough that each thread's share is worth a thread, small enough
/// that memory stays flat however long the trace is.
const BLOCK: usize = 8 * 1024 * 1024;

/// One non-empty line as the scan hands it to the work: its text (trimmed, invalid UTF-8
/// replaced, as [`crate::trace::scan`] reads it) and where it is.
pub struct Line<'a> {
    pub text: &'a str,
    /// 1-based line number in the file (empty lines count).
    pub number: usize,
}

/// Reads the file at `path` and calls `work` on every non-empty line (on several threads at once
/// when the machine has cores to spare), then `each` with each of the results in file order and
/// the 1-based position of its line among the file's non-empty lines. Returns the bytes read and
/// the number of non-empty lines. A missing file is no lines, as in [`crate::trace::scan`].
pub fn scan_par<T: Send>(
    path: &camino::Utf8Path,
    work: impl Fn(&Line) -> Option<T> + Sync,
    mut each: impl FnMut(usize, T),
) -> Result<(u64, usize)> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(crate::error::Error::io("read", path, e)),
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let mut buf: Vec<u8> = Vec::with_capacity(BLOCK + 64 * 1024);
    // Lines (all, and non-empty) before the start of `buf`.
    let (mut lines_before, mut nth_before) = (0usize, 0usize);
    let mut eof = false;
    let mut bytes = 0u64;
    while !eof {
        // A block more after what is carried over (a line longer than a block grows it); short
        // only at the end of the file.
        let n = (&mut file)
            .take(BLOCK as u64)
            .read_to_end(&mut buf)
            .map_err(|e| crate::error::Error::io("read", path, e))?;
        eof = n < BLOCK;
        // The whole lines in the buffer; the rest is carried to the next block.
        let end = if eof { buf.len() } else { memchr::memrchr(b'\n', &buf).map_or(0, |i| i + 1) };
        if end == 0 && !eof {
            continue;
        }
        let parts = split(&buf[..end], threads);
        let (firsts, after) = first_lines(&parts, lines_before);
        let results: Vec<Part<T>> = if parts.len() == 1 {
            vec![run_part(parts[0], firsts[0], &work)]
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = parts[1..]
                    .iter()
                    .zip(&firsts[1..])
                    .map(|(p, f)| {
                        let work = &work;
                        s.spawn(move || run_part(p, *f, work))
                    })
                    .collect();
                let mut out = vec![run_part(parts[0], firsts[0], &work)];
                for h in handles {
                    // A panicking part can only be a bug; its lines are lost, not the command.
                    out.push(h.join().unwrap_or_else(|_| Part { results: Vec::new(), non_empty: 0 }));
                }
                out
            })
        };
        for part in results {
            for (nth, r) in part.results {
                each(nth_before + nth, r);
            }
            nth_before += part.non_empty;
        }
        lines_before = after;
        bytes += end as u64;
        buf.drain(..end);
    }
    Ok((bytes, nth_before))
}

/// What one part of a block gave: each result with its line's position among the part's
/// non-empty lines, and how many non-empty lines the part had.
struct Part<T> {
    results: Vec<(usize, T)>,
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
    if parts.is_empty() {
        parts.push(b);
    }
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

fn run_part<T>(b: &[u8], first: usize, work: &(impl Fn(&Line) -> Option<T> + Sync)) -> Part<T> {
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
        if let Some(r) = work(&Line { text, number: first + i }) {
            results.push((non_empty, r));
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
    #[serde(borrow)]
    pub event: Text<'a>,
    #[serde(default)]
    schema_version: Option<u32>,
    #[serde(default, borrow)]
    pub tool: Option<Text<'a>>,
    #[serde(default)]
    args: Option<IgnoredAny>,
    #[serde(default, borrow)]
    pub result_status: Option<Text<'a>>,
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
    /// The line as a probe, or why it is no entry (the message [`crate::trace::scan`] gives,
    /// a cost that is none included).
    pub fn read(line: &'a str) -> std::result::Result<Probe<'a>, String> {
        let p: Probe = serde_json::from_str(line).map_err(|e| e.to_string())?;
        match p.cost_usd.and_then(crate::trace::bad_cost) {
            Some(why) => Err(why),
            None => Ok(p),
        }
    }

    pub fn is_error(&self) -> bool {
        self.error.is_some() || self.result_status.as_deref() == Some("error")
    }

    /// The fields `trace stats` sums, as an [`Entry`].
    pub fn to_entry(&self) -> Entry {
        Entry {
            run_id: self.run_id.to_string(),
            step: self.step,
            phase: self.phase,
            event: self.event.to_string(),
            tool: self.tool.as_deref().map(String::from),
            result_status: self.result_status.as_deref().map(String::from),
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
