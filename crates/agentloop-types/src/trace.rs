//! trace.jsonl: the append-only audit trail, one typed JSON object per line.
//!
//! Invariants: lines are only ever appended, each with a single write, and never rewritten. The
//! first entry of a run ([`Event::RunStarted`]) carries `schema_version`. Readers skip a corrupt
//! or truncated line, or one too long to hold ([`lines::MAX_LINE`]), and report its number
//! instead of failing. Field names are a public contract
//! (docs/WORKSPACE.md, "Trace schema"): add fields, never rename them.

use crate::error::Result;
use camino::Utf8Path;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod event;
pub mod lines;

pub use event::{Event, ResultStatus};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Frame,
    Plan,
    Act,
    Reflect,
    Run,
}

impl Phase {
    /// Every phase, in loop order (`run` last: it names the whole loop).
    pub const ALL: [Phase; 5] = [Phase::Frame, Phase::Plan, Phase::Act, Phase::Reflect, Phase::Run];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Frame => "frame",
            Phase::Plan => "plan",
            Phase::Act => "act",
            Phase::Reflect => "reflect",
            Phase::Run => "run",
        }
    }
}

impl std::str::FromStr for Phase {
    type Err = UnknownPhase;
    /// A phase by its name, case aside (`--phase Act` is `act`).
    fn from_str(s: &str) -> std::result::Result<Self, UnknownPhase> {
        Phase::ALL.into_iter().find(|p| p.as_str().eq_ignore_ascii_case(s)).ok_or_else(|| UnknownPhase(s.to_string()))
    }
}

/// A name that is no [`Phase`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPhase(pub String);

impl std::fmt::Display for UnknownPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` is no phase (frame, plan, act, reflect or run)", self.0)
    }
}

impl std::error::Error for UnknownPhase {}

/// Token counts of one model call (or a sum of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_write_tokens: u64,
    pub cache_read_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, o: &Usage) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cache_write_tokens += o.cache_write_tokens;
        self.cache_read_tokens += o.cache_read_tokens;
    }
    /// Tokens counted against `max_tokens`: everything sent and received.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_write_tokens + self.cache_read_tokens
    }
}

/// One line of trace.jsonl. Optional fields are omitted when empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entry {
    pub ts: String,
    pub run_id: String,
    pub step: u32,
    pub phase: Option<Phase>,
    /// What happened: run.started, frame, reframe, plan, act, reflect, run.finished, event.ignored, ...
    #[schemars(with = "String")]
    pub event: Event,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub result_status: Option<ResultStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// USD; null when the model's price is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
    /// Size in bytes of the prompt sent (system + messages), to show prompts stay bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// How the answer was requested from an OpenAI-compatible server (`tool_named`,
    /// `tool_required`, `tool_auto`, `json_schema`, `json_object`, `json_prompt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_form: Option<String>,
    /// Free-form extra facts (limits at start, status at finish).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Entry {
    pub fn new(run_id: &str, step: u32, phase: Phase, event: Event) -> Self {
        Entry {
            ts: crate::clock::now_rfc3339(),
            run_id: run_id.to_string(),
            step,
            phase: Some(phase),
            event,
            ..Default::default()
        }
    }
    pub fn is_error(&self) -> bool {
        self.error.is_some() || self.status() == Some(crate::tool_spec::ToolStatus::Error)
    }
    /// The tool call's status, when the entry records one agentloop writes.
    pub fn status(&self) -> Option<crate::tool_spec::ToolStatus> {
        self.result_status.as_ref().and_then(ResultStatus::tool)
    }
    /// How the entry went, in a word: the tool call's status, else the decision.
    pub fn verdict(&self) -> Option<&str> {
        self.result_status.as_ref().map(ResultStatus::as_str).or(self.decision.as_deref())
    }
    pub fn to_line(&self) -> String {
        crate::json::to_string(self)
    }
}

/// The model id (and provider name) of the offline scripted model. Its calls are recorded under
/// this id and never priced: a replay spends nothing.
pub const SCRIPTED: &str = "scripted";

/// Whether a recorded model id is the scripted model's.
pub fn is_scripted(model: &str) -> bool {
    model == SCRIPTED
}

/// A line that could not be read back.
#[derive(Debug, Clone)]
pub struct BadLine {
    pub line: usize,
    pub message: String,
}

/// The most one recorded cost (a trace entry's, a usage ledger line's) may say was spent, in
/// USD: more than any model call or invocation costs, and small enough that no sum of such
/// costs overflows to infinity.
pub const MAX_RECORDED_COST_USD: f64 = 1e9;

/// Why a cost read back from a file cannot be one: negative, not a number, or over
/// [`MAX_RECORDED_COST_USD`]. A file is data (a workspace from elsewhere, a hand-edited ledger):
/// a cost of −1e308 would print as `$-inf` and lower a sum that only ever narrows a run.
pub fn bad_cost(c: f64) -> Option<String> {
    (!(0.0..=MAX_RECORDED_COST_USD).contains(&c))
        .then(|| format!("cost_usd {c:?} is not a cost (it must be from 0 to {MAX_RECORDED_COST_USD})"))
}

/// Why a line is not an entry: not the JSON of one, or its cost is none ([`bad_cost`]). Public
/// for `trace show`'s parallel reader, which reports the line number beside it.
#[derive(Debug)]
pub enum Unreadable {
    Json(serde_json::Error),
    Cost(String),
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::Json(e) => write!(f, "{e}"),
            Unreadable::Cost(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Unreadable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Unreadable::Json(e) => Some(e),
            Unreadable::Cost(_) => None,
        }
    }
}

/// One line read back as an entry: JSON of an entry whose cost, if any, is one
/// ([`bad_cost`]); otherwise why not.
pub fn checked(line: &str) -> std::result::Result<Entry, Unreadable> {
    let e = serde_json::from_str::<Entry>(line).map_err(Unreadable::Json)?;
    match e.cost_usd.and_then(bad_cost) {
        Some(why) => Err(Unreadable::Cost(why)),
        None => Ok(e),
    }
}

/// Reads every entry, streamed as [`scan`] streams it (only the entries are kept); corrupt
/// lines, and lines too long to hold, are returned separately with their line numbers.
pub fn read(path: &Utf8Path) -> Result<(Vec<Entry>, Vec<BadLine>)> {
    let (mut entries, mut bad) = (Vec::new(), Vec::new());
    scan(path, |r| match r {
        Ok(e) => entries.push(e),
        Err(b) => bad.push(b),
    })?;
    Ok((entries, bad))
}

/// Streams the file line by line (memory stays at a read block and one line however long the
/// trace), calling `f` with each entry or each corrupt line; a line over [`lines::MAX_LINE`] is
/// passed over unread and reported as a corrupt one. Returns the file's length in bytes at the
/// end of the scan.
pub fn scan(path: &Utf8Path, mut f: impl FnMut(std::result::Result<Entry, BadLine>)) -> Result<u64> {
    scan_where(
        path,
        |_| true,
        |r| {
            if let Some(r) = r {
                f(r)
            }
        },
    )
}

/// [`scan`] that reads as entries only the lines `wanted` passes: `wanted` sees each non-empty
/// line's text (trimmed, invalid UTF-8 replaced as [`scan`] replaces it) and `f` gets `None` for
/// a line it passed over, which is neither parsed nor checked. A reader that filters skips lines
/// that cannot match without paying for their parse; `f` still sees every line, so line
/// numbers stay true. A line too long to hold is reported whatever `wanted` would say.
pub fn scan_where(
    path: &Utf8Path,
    mut wanted: impl FnMut(&str) -> bool,
    mut f: impl FnMut(Option<std::result::Result<Entry, BadLine>>),
) -> Result<u64> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(crate::error::Error::io("read", path, e)),
    };
    let each = |line, piece: lines::Piece<'_>| {
        let raw = match piece {
            lines::Piece::Line(raw) => raw,
            lines::Piece::TooLong(bytes) => return f(Some(Err(BadLine { line, message: lines::too_long(bytes) }))),
        };
        // `from_utf8` checks ASCII a word at a time, `from_utf8_lossy` byte by byte.
        let text = match std::str::from_utf8(raw) {
            Ok(t) => std::borrow::Cow::Borrowed(t),
            Err(_) => String::from_utf8_lossy(raw),
        };
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        if !wanted(text) {
            return f(None);
        }
        match checked(text) {
            Ok(e) => f(Some(Ok(e))),
            Err(why) => f(Some(Err(BadLine { line, message: why.to_string() }))),
        }
    };
    lines::each(file, each).map_err(|e| crate::error::Error::io("read", path, e))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A trace of an entry, a line of exactly the cap (the entry padded with blanks), a line one
    /// byte over it (a sparse run of zero bytes, as a tar ships one cheaply), and a last entry
    /// ended by CRLF.
    fn trace_with_a_long_line(dir: &tempfile::TempDir) -> camino::Utf8PathBuf {
        let path = Utf8Path::from_path(dir.path()).unwrap().join("trace.jsonl");
        let e = Entry::new("R", 1, Phase::Act, Event::Act).to_line();
        let at_cap = e.clone() + &" ".repeat(lines::MAX_LINE - e.len());
        std::fs::write(&path, format!("{e}\n{at_cap}\n")).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        let len = f.metadata().unwrap().len();
        f.set_len(len + lines::MAX_LINE as u64 + 1).unwrap();
        f.write_all(format!("\n{e}\r\n").as_bytes()).unwrap();
        path
    }

    #[test]
    fn a_line_over_the_cap_is_reported_by_its_number_and_the_rest_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = trace_with_a_long_line(&dir);
        let (entries, bad) = read(&path).unwrap();
        assert_eq!(entries.len(), 3, "the line at the cap and the one after the long one are read");
        assert!(entries.iter().all(|e| e.run_id == "R" && e.step == 1), "{entries:?}");
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].line, 3);
        assert_eq!(bad[0].message, lines::too_long(lines::MAX_LINE as u64 + 1));
        assert!(bad[0].message.ends_with("bytes, longer than the 64 MiB a line may hold"), "{}", bad[0].message);
        // A filtered scan cannot judge the long line by its text: it is reported all the same.
        let mut seen = Vec::new();
        let len = scan_where(&path, |_| false, |r| seen.push(r.map(|r| r.map(|_| ()).map_err(|b| b.line)))).unwrap();
        assert_eq!(seen, [None, None, Some(Err(3)), None]);
        assert_eq!(len, std::fs::metadata(&path).unwrap().len());
    }
}
