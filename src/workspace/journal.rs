//! The commit journal: a phase's effects (files, trace lines, state.json) written whole to
//! `.agentloop.journal.json` and fsynced, then applied file by file, then marked applied; a
//! pending journal left by a killed process is replayed (idempotently) by the next locker.
//!
//! The file is one record, written in place from its first byte (see [`crate::fs::write_journal`]):
//! a header line `AGJ1 <mark> <length> <fnv64>` and the commit as JSON. The mark is `P` while
//! the record is pending and becomes `-` once applied (one byte overwritten, not fsynced: a mark
//! lost in a power cut only means an idempotent replay). A record whose length or checksum
//! does not match was torn while written, so its phase never began; it is set aside, as is a
//! file in no known format. A journal holding bare JSON (written by earlier versions) replays too.

use super::{State, Workspace, JOURNAL_FILE};
use crate::error::Result;
use crate::fs;
use crate::trace;
use serde::{Deserialize, Serialize};

/// Effects of one phase, applied all-or-nothing through the journal.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Commit {
    /// (file name relative to the workspace, new contents)
    pub files: Vec<(String, String)>,
    pub trace: Vec<String>,
    /// (file name, text appended to it): files that only grow (decisions.md, transcript.md),
    /// so a phase journals and writes its own part, not the whole file.
    #[serde(default)]
    pub appends: Vec<(String, String)>,
    pub state: Option<State>,
}

impl Commit {
    pub fn file(&mut self, name: &str, contents: String) -> &mut Self {
        self.files.push((name.to_string(), contents));
        self
    }
    pub fn append(&mut self, name: &str, text: String) -> &mut Self {
        self.appends.push((name.to_string(), text));
        self
    }
    pub fn entry(&mut self, e: &trace::Entry) -> &mut Self {
        self.trace.push(e.to_line());
        self
    }
}

/// The header's fixed width: `AGJ1 P 0000000123 0123456789abcdef\n`.
const HEADER_LEN: usize = 35;
/// Where the mark byte sits in the header.
const MARK_AT: u64 = 5;

/// FNV-1a, 64 bits: enough to tell a torn record from a whole one (not an adversary's).
fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x100000001b3))
}

/// A pending record: the header, then the commit's JSON.
fn frame(payload: &str) -> Vec<u8> {
    let mut out = format!("AGJ1 P {:010} {:016x}\n", payload.len(), fnv64(payload.as_bytes())).into_bytes();
    debug_assert_eq!(out.len(), HEADER_LEN);
    out.extend_from_slice(payload.as_bytes());
    out
}

/// What a journal file holds.
#[derive(Debug, PartialEq)]
enum Record<'a> {
    /// Nothing to do: empty, or the record was applied.
    Done,
    /// A whole record not yet applied (or bare JSON from an earlier version).
    Pending(&'a str),
    /// Torn while written, or not a journal at all: set aside, nothing applied.
    Unreadable,
}

fn unframe(bytes: &[u8]) -> Record<'_> {
    if bytes.is_empty() {
        return Record::Done;
    }
    if bytes[0] == b'{' {
        return std::str::from_utf8(bytes).map_or(Record::Unreadable, Record::Pending);
    }
    let Some(header) = bytes.get(..HEADER_LEN).and_then(|h| std::str::from_utf8(h).ok()) else {
        return Record::Unreadable;
    };
    let parts: Vec<&str> = header.trim_end_matches('\n').split(' ').collect();
    let (len, sum) = match parts.as_slice() {
        ["AGJ1", "-", _, _] => return Record::Done,
        ["AGJ1", "P", len, sum] if header.ends_with('\n') => match (len.parse::<usize>(), u64::from_str_radix(sum, 16))
        {
            (Ok(l), Ok(s)) => (l, s),
            _ => return Record::Unreadable,
        },
        _ => return Record::Unreadable,
    };
    let Some(payload) = bytes.get(HEADER_LEN..HEADER_LEN + len) else {
        return Record::Unreadable;
    };
    match std::str::from_utf8(payload) {
        Ok(p) if fnv64(payload) == sum => Record::Pending(p),
        _ => Record::Unreadable,
    }
}

impl Workspace {
    /// Applies a phase's effects all-or-nothing (see the module docs).
    pub fn commit(&self, commit: &Commit) -> Result<()> {
        let journal = self.path(JOURNAL_FILE);
        // No secret reaches the workspace, whatever carried it here.
        let mut commit = commit.clone();
        for (_, text) in commit.files.iter_mut().chain(commit.appends.iter_mut()) {
            *text = crate::redact::redact(text);
        }
        for line in commit.trace.iter_mut() {
            *line = crate::redact::redact(line);
        }
        let commit = &commit;
        let text = serde_json::to_string(commit).expect("commit serializes");
        // One fsync per phase: the journal, written in place (see fs::write_journal).
        fs::write_journal(&journal, &frame(&text))?;
        crate::crash::point("commit:journaled");
        self.apply(commit, false)?;
        fs::write_at(&journal, MARK_AT, b"-")
    }

    fn apply(&self, commit: &Commit, replay: bool) -> Result<()> {
        for (name, contents) in &commit.files {
            let path = self.path(name);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write_atomic(&path, contents.as_bytes())?;
        }
        for (name, text) in &commit.appends {
            let path = self.path(name);
            // On replay the text may be there already (the process died after appending it).
            if replay && fs::read_optional(&path)?.is_some_and(|t| t.ends_with(text.as_str())) {
                continue;
            }
            fs::append_text(&path, text)?;
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
        let Some(bytes) = fs::read_bytes_optional(&journal)? else {
            return Ok(());
        };
        let legacy = bytes.first() == Some(&b'{');
        let commit = match unframe(&bytes) {
            Record::Done => return Ok(()),
            Record::Pending(text) => serde_json::from_str::<Commit>(text).ok(),
            Record::Unreadable => None,
        };
        let Some(commit) = commit else {
            // Torn by a crash while it was written (so its phase never began) or a foreign
            // file: nothing to apply; it is set aside for a person to look at.
            let aside = self.path(".agentloop.journal.corrupt");
            let _ = std::fs::rename(&journal, &aside);
            return Ok(());
        };
        self.apply(&commit, true)?;
        if legacy {
            fs::clear_journal(&journal)
        } else {
            fs::write_at(&journal, MARK_AT, b"-")
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// A journal left behind (the process died after writing it, with one trace line already
    /// appended) is replayed once: files written, the missing line added, none repeated.
    #[test]
    fn a_journal_replays_once_and_skips_lines_already_written() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(camino::Utf8Path::from_path(dir.path()).unwrap());
        let mut c = Commit::default();
        c.file("memory.md", "# Memory\n".into());
        c.trace = vec![r#"{"n":1}"#.into(), r#"{"n":2}"#.into()];
        std::fs::write(ws.trace(), "{\"n\":0}\n{\"n\":1}\n").unwrap();
        std::fs::write(ws.path(JOURNAL_FILE), serde_json::to_string(&c).unwrap()).unwrap();
        ws.recover().unwrap();
        assert_eq!(std::fs::read_to_string(ws.trace()).unwrap(), "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n");
        assert_eq!(std::fs::read_to_string(ws.memory()).unwrap(), "# Memory\n");
        assert_eq!(std::fs::read_to_string(ws.path(JOURNAL_FILE)).unwrap(), "", "the journal is emptied after replay");
        // Nothing to replay the second time.
        ws.recover().unwrap();
        assert_eq!(std::fs::read_to_string(ws.trace()).unwrap().lines().count(), 3);
        // A journal that is not a commit is set aside, not applied.
        std::fs::write(ws.path(JOURNAL_FILE), "not json").unwrap();
        ws.recover().unwrap();
        assert!(ws.path(".agentloop.journal.corrupt").exists());
    }

    /// A framed record: pending until applied, then marked; a shorter record written over a
    /// longer one ignores the stale tail; a torn record (cut short, or a byte changed) is set
    /// aside and nothing of it applied.
    #[test]
    fn a_framed_record_replays_once_and_a_torn_one_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(camino::Utf8Path::from_path(dir.path()).unwrap());
        let journal = ws.path(JOURNAL_FILE);
        let mut long = Commit::default();
        long.file("plan.md", "x".repeat(500));
        let mut c = Commit::default();
        c.file("memory.md", "# Memory\n".into());
        c.trace = vec![r#"{"n":1}"#.into()];
        crate::fs::write_journal(&journal, &frame(&serde_json::to_string(&long).unwrap())).unwrap();
        crate::fs::write_journal(&journal, &frame(&serde_json::to_string(&c).unwrap())).unwrap();
        assert!(std::fs::metadata(&journal).unwrap().len() > 500, "written in place, the stale tail stays");
        ws.recover().unwrap();
        assert_eq!(std::fs::read_to_string(ws.memory()).unwrap(), "# Memory\n");
        assert!(!ws.plan().exists(), "the stale tail is not a record");
        assert_eq!(std::fs::read(&journal).unwrap()[MARK_AT as usize], b'-', "marked applied");
        std::fs::write(ws.memory(), "edited by a person\n").unwrap();
        ws.recover().unwrap();
        assert_eq!(
            std::fs::read_to_string(ws.memory()).unwrap(),
            "edited by a person\n",
            "an applied record is not replayed"
        );
        assert_eq!(std::fs::read_to_string(ws.trace()).unwrap(), "{\"n\":1}\n");

        let whole = frame(&serde_json::to_string(&c).unwrap());
        for torn in [
            whole[..whole.len() - 3].to_vec(),
            {
                let mut b = whole.clone();
                let n = b.len();
                b[n - 5] ^= 1;
                b
            },
            whole[..20].to_vec(),
        ] {
            let _ = std::fs::remove_file(ws.path(".agentloop.journal.corrupt"));
            std::fs::write(ws.memory(), "before\n").unwrap();
            std::fs::write(&journal, &torn).unwrap();
            ws.recover().unwrap();
            assert_eq!(
                std::fs::read_to_string(ws.memory()).unwrap(),
                "before\n",
                "nothing of a torn record is applied"
            );
            assert!(ws.path(".agentloop.journal.corrupt").exists() && !journal.exists(), "set aside");
        }
        assert_eq!(unframe(b""), Record::Done);
        assert_eq!(unframe(b"AGJ1 - 0000000002 0000000000000000\n{}"), Record::Done);
        assert_eq!(unframe(b"GIF89a and then some bytes of a picture"), Record::Unreadable);
    }
}
