//! The commit journal: a phase's effects (files, appended text, trace lines, state.json)
//! written whole to `.agentloop.journal.json` and made durable with one `fdatasync`, then
//! applied, then marked applied. Taking the workspace lock replays what a killed process left.
//!
//! The journal holds the records of one *cycle*: every commit since the last checkpoint, one
//! after another, each a header line `AGJ2 <mark> <cycle> <boot id> <length> <crc32>` and the
//! commit as JSON. Records are written in place into blocks the file already has (it grows in
//! zeroed chunks), which costs no metadata change. The mark is `P` while a record is pending
//! and becomes `-` once it is applied (one byte, not fsynced).
//!
//! Why records accumulate: applying a commit replaces files without fsyncing them (an fsync
//! per file cost more than the rest of a step), so until a checkpoint the journal is what makes
//! them durable. A checkpoint — when the lock is released, and when the journal passes
//! [`CHECKPOINT_BYTES`] — fsyncs every file the cycle touched and their folders, then empties
//! the journal by zeroing its first header.
//!
//! Replay, when the lock is taken: a record still marked `P` (its process was killed while
//! applying it) is applied again; if the machine has restarted since the records were written
//! (the boot id differs: a power cut may have lost unsynced file data), every record of the
//! cycle is applied again, in order. Replay is idempotent: whole files are rewritten with the
//! same contents, and appended text carries the size its file had before, so text already there
//! is not added twice and a torn tail is cut off. A record whose length or checksum does not
//! match was torn while written, so its phase never began: it ends the cycle. A journal in no
//! known format is set aside (`.agentloop.journal.corrupt`); bare JSON (written by earlier
//! versions) is replayed once.

use super::{Session, State, Workspace, JOURNAL_FILE, SPARE_DIR};
use agentloop_io::fs;
use agentloop_types::error::Result;
use agentloop_types::trace;
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
    /// The size of each appended file (and trace.jsonl) before this commit, filled in when it
    /// is journaled: replay appends at that point, so it never adds text twice.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sizes: std::collections::BTreeMap<String, u64>,
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

/// The header's fixed width: `AGJ2 P <cycle:16> <boot:36> <length:10> <crc32:8>\n`.
const HEADER_LEN: usize = 81;
/// Where the mark byte sits in a header.
const MARK_AT: u64 = 5;
/// A checkpoint is taken before a record would start past this offset.
pub const CHECKPOINT_BYTES: u64 = 1 << 20;
/// The journal grows by at least this many zeroed bytes at a time.
const GROW_BYTES: usize = 64 << 10;
/// Bytes one file of a run's paper trail (memory.md, decisions.md, transcript.md, trace.jsonl,
/// ...) may hold (64 MiB): far more than a run writes, and what one template render may write.
pub const MAX_PAPER_FILE: u64 = 64 << 20;

// No line agentloop writes to trace.jsonl may be one its readers pass over as too long to hold.
const _: () = assert!(MAX_PAPER_FILE <= agentloop_types::trace::lines::MAX_LINE as u64);

/// CRC-32 of a record's payload: tells a torn record from a whole one (not an adversary's).
fn checksum(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// This boot of the machine (Linux's boot id), 36 characters; zeros where there is none, and
/// then a restart cannot be told, so only pending records are replayed.
fn boot_id() -> &'static str {
    static BOOT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| {
        let id = agentloop_io::fs::read_optional(camino::Utf8Path::new("/proc/sys/kernel/random/boot_id"))
            .ok()
            .flatten()
            .map(|t| t.trim().to_string())
            .filter(|t| t.len() == 36 && t.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
            .unwrap_or_default();
        if id.is_empty() {
            "0".repeat(36)
        } else {
            id
        }
    })
}

/// A pending record of cycle `cycle`: the header, then the commit's JSON.
fn frame(cycle: u64, payload: &str) -> Vec<u8> {
    frame_on(cycle, boot_id(), payload)
}

fn frame_on(cycle: u64, boot: &str, payload: &str) -> Vec<u8> {
    let mut out =
        format!("AGJ2 P {cycle:016x} {boot} {:010} {:08x}\n", payload.len(), checksum(payload.as_bytes())).into_bytes();
    debug_assert_eq!(out.len(), HEADER_LEN);
    out.extend_from_slice(payload.as_bytes());
    out
}

/// One whole record read back.
#[derive(Debug, PartialEq)]
struct Record<'a> {
    pending: bool,
    cycle: u64,
    boot: &'a str,
    payload: &'a str,
    /// Where the next record would start.
    end: usize,
}

/// The record at `at`, if a whole one is there (None: end of the cycle, zeros, or torn).
fn record_at(bytes: &[u8], at: usize) -> Option<Record<'_>> {
    let header = std::str::from_utf8(bytes.get(at..at + HEADER_LEN)?).ok()?;
    let parts: Vec<&str> = header.strip_suffix('\n')?.split(' ').collect();
    let ["AGJ2", mark, cycle, boot, len, sum] = parts.as_slice() else { return None };
    let pending = match *mark {
        "P" => true,
        "-" => false,
        _ => return None,
    };
    let (cycle, len, sum) =
        (u64::from_str_radix(cycle, 16).ok()?, len.parse::<usize>().ok()?, u32::from_str_radix(sum, 16).ok()?);
    let payload = bytes.get(at + HEADER_LEN..at + HEADER_LEN + len)?;
    if checksum(payload) != sum {
        return None;
    }
    Some(Record { pending, cycle, boot, payload: std::str::from_utf8(payload).ok()?, end: at + HEADER_LEN + len })
}

/// What a journal file holds.
#[derive(Debug, PartialEq)]
enum Journal<'a> {
    /// Nothing: empty, or emptied by a checkpoint.
    Empty,
    /// Bare JSON from an earlier version: one pending commit.
    Legacy(&'a str),
    /// The current cycle's whole records, in order.
    Records(Vec<Record<'a>>),
    /// Not a journal, or its first record torn: set aside, nothing applied.
    Unreadable,
}

fn read_journal(bytes: &[u8]) -> Journal<'_> {
    if bytes.is_empty() || bytes.iter().take(HEADER_LEN).all(|b| *b == 0) {
        return Journal::Empty;
    }
    if bytes[0] == b'{' {
        return std::str::from_utf8(bytes).map_or(Journal::Unreadable, Journal::Legacy);
    }
    let Some(first) = record_at(bytes, 0) else { return Journal::Unreadable };
    let cycle = first.cycle;
    let mut at = first.end;
    let mut records = vec![first];
    while let Some(r) = record_at(bytes, at).filter(|r| r.cycle == cycle) {
        at = r.end;
        records.push(r);
    }
    Journal::Records(records)
}

/// Where the lock's holder writes the next record of a journal, and what the cycle has
/// touched: owned by the [`Session`] the lock handed out.
#[derive(Debug)]
pub(super) struct Cycle {
    id: u64,
    /// Offset of the next record.
    end: u64,
    /// The file's size (bytes past `end` are zeros or stale records of older cycles).
    size: u64,
    /// Workspace-relative names the cycle's records wrote, fsynced at the checkpoint.
    touched: std::collections::BTreeSet<String>,
    /// The journal, kept open while the lock is held.
    file: Option<std::sync::Arc<std::fs::File>>,
    /// trace.jsonl's size after this process's last commit: a file still that size ends with
    /// the newline the commit wrote, so it need not be read to check.
    trace_end: Option<u64>,
    /// A record is written but not yet (wholly) applied: a checkpoint must not empty the
    /// journal then, so the next lock replays it.
    pending: bool,
}

impl Cycle {
    fn new(size: u64) -> Cycle {
        Cycle {
            id: fastrand::u64(1..),
            end: 0,
            size,
            touched: Default::default(),
            file: None,
            trace_end: None,
            pending: false,
        }
    }
}

/// Whether a commit may write `name`: one of a run's own files at the top of the workspace
/// ([`crate::archive::RUN_FILES`], the paper trail), or a plain path below `artifacts/` none of
/// whose parts starts with a dot. A journal is data a workspace carries
/// (a cloned repository may ship one), so replay must not write anything else — not outside the
/// workspace, and not `.git/config`, `agentloop.yaml`, `agents/` or a hidden file inside it.
pub fn may_commit(name: &str) -> bool {
    let mut parts = camino::Utf8Path::new(name).components();
    let plain = camino::Utf8Path::new(name).components().all(|c| match c {
        camino::Utf8Component::Normal(p) => !p.starts_with('.'),
        _ => false,
    });
    match (parts.next(), parts.next()) {
        (Some(top), None) => top.as_str() != "artifacts" && crate::archive::RUN_FILES.contains(&top.as_str()),
        (Some(top), Some(_)) => plain && top.as_str() == "artifacts",
        _ => false,
    }
}

impl Commit {
    /// Whether every name is one a commit may write ([`may_commit`]), checked before anything
    /// is journaled or replayed.
    fn names_may_be_committed(&self) -> bool {
        self.names().all(may_commit)
    }

    /// Every workspace-relative name this commit writes.
    fn names(&self) -> impl Iterator<Item = &str> {
        let state = self.state.as_ref().map(|_| "state.json");
        let trace = (!self.trace.is_empty()).then_some("trace.jsonl");
        self.files.iter().chain(&self.appends).map(|(n, _)| n.as_str()).chain(state).chain(trace)
    }
}

/// A name below the top of the workspace as (its folder, its file name); None at the top.
fn nested(name: &str) -> Option<(&camino::Utf8Path, &str)> {
    let p = camino::Utf8Path::new(name);
    let folder = p.parent().filter(|f| !f.as_str().is_empty())?;
    Some((folder, p.file_name()?))
}

/// The size of a file a commit appends to (0 when missing); a symbolic link is refused.
fn size_of(path: &camino::Utf8Path) -> Result<u64> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_symlink() => Err(fs::linked_file(path)),
        Ok(m) => Ok(m.len()),
        Err(_) => Ok(0),
    }
}

/// How many of `lines` (a commit of an earlier version, whose trace lines carry no offset) the
/// trace at `path` ends with already: the longest prefix of them that is the file's last lines.
/// Only the file's end is read, as many bytes as the lines take and one more, cut to whole
/// lines: a handed workspace's trace may be far longer, or one line with no end.
fn written_already(path: &camino::Utf8Path, lines: &[String]) -> Result<usize> {
    let want = lines.iter().map(|l| l.len() as u64 + 1).sum::<u64>() + 1;
    let tail = fs::read_tail(path, want)?.unwrap_or_default();
    // A tail shorter than asked for is the whole file; a full one starts mid-line.
    let whole = if tail.len() as u64 == want {
        tail.iter().position(|b| *b == b'\n').map_or(&tail[..0], |i| &tail[i + 1..])
    } else {
        &tail[..]
    };
    let text = String::from_utf8_lossy(whole);
    let present: Vec<&str> = text.lines().collect();
    let ends_with = |k: usize| present[present.len() - k..].iter().zip(&lines[..k]).all(|(a, b)| *a == b);
    Ok((1..=lines.len().min(present.len())).rev().find(|&k| ends_with(k)).unwrap_or(0))
}

impl Session {
    /// Applies a phase's effects all-or-nothing (see the module docs).
    pub fn commit(&self, commit: &Commit) -> Result<()> {
        self.ws.commit(&mut self.cycle.borrow_mut(), commit)
    }

    /// Makes what the cycle's commits wrote durable and empties the journal (see the module
    /// docs): before the files are moved as they are on disk (archiving a run).
    pub fn checkpoint(&self) -> Result<()> {
        self.ws.checkpoint(&mut self.cycle.borrow_mut())
    }
}

impl Workspace {
    fn commit(&self, c: &mut Cycle, commit: &Commit) -> Result<()> {
        let journal = self.path(JOURNAL_FILE);
        if !commit.names_may_be_committed() {
            return Err(agentloop_types::error::Error::data(format!(
                "a commit names a file agentloop does not write: {}",
                commit.names().filter(|n| !may_commit(n)).collect::<Vec<_>>().join(", ")
            )));
        }
        // No secret reaches the workspace, whatever carried it here.
        let mut commit = commit.clone();
        for (_, text) in commit.files.iter_mut().chain(commit.appends.iter_mut()) {
            *text = agentloop_io::redact::redact(text);
        }
        for line in commit.trace.iter_mut() {
            *line = agentloop_io::redact::redact(line);
        }
        // Refused before anything is journaled: a name that is a symbolic link (or lies in a
        // symlinked folder) would make the commit write outside the workspace.
        self.refuse_links(&commit)?;
        self.refuse_oversize(&commit)?;
        if !commit.trace.is_empty() {
            let trace = self.trace();
            let mut size = size_of(&trace)?;
            // A line torn outside any commit (a person's edit, an older version) is ended
            // first, so it does not swallow this commit's first entry.
            let ours = c.trace_end == Some(size);
            if !ours && !fs::ends_with_newline(&trace)? {
                fs::append_raw(&trace, "\n")?;
                size += 1;
            }
            commit.sizes.entry("trace.jsonl".into()).or_insert(size);
        }
        for (name, _) in &commit.appends {
            if !commit.sizes.contains_key(name) {
                let size = size_of(&self.path(name))?;
                commit.sizes.insert(name.clone(), size);
            }
        }
        // The record stays on disk until a checkpoint: the state in it is redacted too.
        let text = agentloop_io::redact::redact(&agentloop_types::json::to_string(&commit));
        let full = c.end > 0 && c.end + (HEADER_LEN + text.len()) as u64 > CHECKPOINT_BYTES;
        if full {
            self.checkpoint(c)?;
        }
        let (id, end, size) = (c.id, c.end, c.size);
        let mut bytes = frame(id, &text);
        let len = bytes.len() as u64;
        if end + len + HEADER_LEN as u64 > size {
            // Grow in zeroed chunks, so later records overwrite blocks the file already has.
            bytes.resize(bytes.len() + GROW_BYTES.max(bytes.len()), 0);
        }
        let file = Self::journal_file(&journal, c)?;
        // One fsync per phase: the record (see fs::write_journal).
        fs::write_journal(&file, &journal, end, &bytes)?;
        c.size = c.size.max(end + bytes.len() as u64);
        c.end = end + len;
        c.touched.extend(commit.names().map(String::from));
        c.trace_end = None;
        c.pending = true;
        agentloop_io::crash::point("commit:journaled");
        self.apply(&commit, false)?;
        fs::write_at(&file, &journal, end + MARK_AT, b"-")?;
        c.pending = false;
        c.trace_end =
            commit.sizes.get("trace.jsonl").map(|at| at + commit.trace.iter().map(|l| l.len() as u64 + 1).sum::<u64>());
        Ok(())
    }

    /// The journal, opened once per cycle.
    fn journal_file(journal: &camino::Utf8Path, c: &mut Cycle) -> Result<std::sync::Arc<std::fs::File>> {
        let file = match c.file.take() {
            Some(f) => f,
            None => std::sync::Arc::new(fs::open_journal(journal)?),
        };
        Ok(c.file.insert(file).clone())
    }

    /// Refuses a commit that would take a file of the paper trail past [`MAX_PAPER_FILE`]: what
    /// a run writes is bounded in total, not only per render, so a template override that writes
    /// much at every step (`decision.md.j2`) stops the run naming the file, and nothing of the
    /// phase is written.
    fn refuse_oversize(&self, commit: &Commit) -> Result<()> {
        let size = |name: &str| std::fs::symlink_metadata(self.path(name)).map_or(0, |m| m.len());
        let trace: u64 = commit.trace.iter().map(|l| l.len() as u64 + 1).sum();
        let grown = commit
            .files
            .iter()
            .map(|(n, t)| (n.as_str(), t.len() as u64))
            .chain(commit.appends.iter().map(|(n, t)| (n.as_str(), size(n) + t.len() as u64)))
            .chain((trace > 0).then(|| ("trace.jsonl", size("trace.jsonl") + trace)));
        for (name, bytes) in grown {
            if bytes > MAX_PAPER_FILE {
                return Err(agentloop_types::error::Error::config(format!(
                    "{} would grow to {} MiB, past the {} MiB a file of the paper trail may hold; nothing of this phase was written",
                    self.path(name),
                    bytes >> 20,
                    MAX_PAPER_FILE >> 20
                ))
                .with_hint("a template override in the workspace (templates/) may write far more than a run needs; fix or remove it, then go on with `run`"));
            }
        }
        Ok(())
    }

    /// Refuses a commit that would write through a link: a folder on the way to a name below
    /// the top (`artifacts/`) that is one. Names at the top are checked where their sizes are
    /// taken; replacing a file renames over the name, which never writes through a link.
    fn refuse_links(&self, commit: &Commit) -> Result<()> {
        for name in commit.names() {
            let Some((folder, _)) = nested(name) else { continue };
            let mut path = self.root.clone();
            for c in folder.components() {
                path.push(c.as_str());
                if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink()) {
                    return Err(fs::linked_folder(&path));
                }
            }
        }
        Ok(())
    }

    fn apply(&self, commit: &Commit, replay: bool) -> Result<()> {
        for (name, contents) in &commit.files {
            if let Some((folder, file)) = nested(name) {
                // Below the top: entered folder by folder, never through a link (fs::Folder).
                let folder = fs::Folder::create(&self.root, folder)?;
                folder.write_atomic(file, contents.as_bytes())?;
                continue;
            }
            // Files at the top of the workspace keep spare versions (see fs::replace).
            let spares = self.path(SPARE_DIR);
            fs::replace(&self.path(name), contents.as_bytes(), Some((spares.as_path(), &self.spares)))?;
        }
        for (name, text) in &commit.appends {
            let path = self.path(name);
            if let Some((folder, file)) = nested(name) {
                let folder = fs::Folder::create(&self.root, folder)?;
                folder.append_at(file, commit.sizes.get(name).copied(), text)?;
                continue;
            }
            match commit.sizes.get(name) {
                Some(at) => fs::append_at(&path, *at, text)?,
                // A journal of an earlier version: the text may be there already (the process
                // died after appending it).
                // Only the file's end is read: a workspace's file may be far longer than the text.
                None if replay && fs::read_tail(&path, text.len() as u64)?.is_some_and(|t| t == text.as_bytes()) => {}
                None => fs::append_text(&path, text)?,
            }
        }
        if !commit.trace.is_empty() {
            self.append_trace(commit, replay)?;
        }
        if let Some(state) = &commit.state {
            fs::replace(
                &self.state_path(),
                Self::state_text(state).as_bytes(),
                Some((&self.path(SPARE_DIR), &self.spares)),
            )?;
        }
        Ok(())
    }

    fn append_trace(&self, commit: &Commit, replay: bool) -> Result<()> {
        let path = self.trace();
        if let Some(at) = commit.sizes.get("trace.jsonl") {
            // Line by line, so a crash point can fall between two lines of one commit.
            let mut at = *at;
            for line in &commit.trace {
                let text = format!("{line}\n");
                fs::append_at(&path, at, &text)?;
                at += text.len() as u64;
                agentloop_io::crash::point("commit:trace-line");
            }
            return Ok(());
        }
        // A journal of an earlier version: its lines may be partly written already (in order);
        // skip the prefix that is there.
        let skip = if replay { written_already(&path, &commit.trace)? } else { 0 };
        // A line torn by a crash (no newline) must not swallow the next entry.
        if skip < commit.trace.len() && !fs::ends_with_newline(&path)? {
            fs::append_raw(&path, "\n")?;
        }
        for line in &commit.trace[skip..] {
            fs::append_line(&path, line)?;
            agentloop_io::crash::point("commit:trace-line");
        }
        Ok(())
    }

    /// Replays what a killed process left (see the module docs), then checkpoints; the cycle
    /// the lock's session goes on with.
    pub(super) fn recover(&self) -> Result<Cycle> {
        let journal = self.path(JOURNAL_FILE);
        let bytes = fs::read_bytes_optional(&journal)?.unwrap_or_default();
        let mut cycle = Cycle::new(bytes.len() as u64);
        // Each commit with whether to apply it again; None: set the journal aside, apply nothing.
        let commits: Option<Vec<(Commit, bool)>> = match read_journal(&bytes) {
            Journal::Empty => Some(vec![]),
            Journal::Legacy(text) => serde_json::from_str::<Commit>(text).ok().map(|c| vec![(c, true)]),
            Journal::Records(records) => {
                let restarted = records.iter().any(|r| r.boot != boot_id());
                cycle.end = records.last().map_or(0, |r| r.end as u64);
                records
                    .iter()
                    .map(|r| Some((serde_json::from_str::<Commit>(r.payload).ok()?, r.pending || restarted)))
                    .collect()
            }
            Journal::Unreadable => None,
        };
        let commits = commits.filter(|all| all.iter().all(|(c, _)| c.names_may_be_committed()));
        for (commit, again) in commits.iter().flatten() {
            if *again {
                self.apply(commit, true)?;
            }
            cycle.touched.extend(commit.names().map(String::from));
        }
        let set_aside = commits.is_none();
        if set_aside {
            // Torn by a crash while it was written (so its phase never began) or a foreign
            // file: nothing to apply; it is set aside for a person to look at.
            let aside = self.path(".agentloop.journal.corrupt");
            let _ = std::fs::rename(&journal, &aside);
            cycle = Cycle::new(0);
        }
        let legacy = bytes.first() == Some(&b'{') && !set_aside;
        self.checkpoint(&mut cycle)?;
        if legacy {
            fs::clear_journal(&journal)?;
            cycle = Cycle::new(0);
        }
        Ok(cycle)
    }

    /// When the lock is released: a checkpoint, then the journal is truncated to nothing (the
    /// zeroed blocks kept for in-place writes are given back), unless a record is still pending
    /// for the next lock to replay. The truncation need not be durable: a journal whose first
    /// header is zeroed is empty either way.
    pub(super) fn release(&self, c: &mut Cycle) -> Result<()> {
        self.checkpoint(c)?;
        if !c.pending && c.size > 0 {
            c.file = None;
            fs::clear_journal(&self.path(JOURNAL_FILE))?;
            c.size = 0;
        }
        Ok(())
    }

    /// Makes the cycle's files durable and empties the journal (see the module docs). A no-op
    /// when nothing was committed since the last checkpoint.
    pub(super) fn checkpoint(&self, c: &mut Cycle) -> Result<()> {
        let journal = self.path(JOURNAL_FILE);
        if c.end == 0 && c.touched.is_empty() {
            return Ok(());
        }
        let mut dirs = std::collections::BTreeSet::new();
        for name in &c.touched {
            let path = self.path(name);
            fs::sync_path(&path)?;
            if let Some(d) = path.parent() {
                dirs.insert(d.to_path_buf());
            }
        }
        for d in &dirs {
            fs::sync_path(d)?;
        }
        if c.pending {
            // A commit failed part-way: its record stays for the next lock to replay.
            return Ok(());
        }
        if c.size > 4 * CHECKPOINT_BYTES {
            // A huge record grew it: give the space back.
            fs::clear_journal(&journal)?;
            fs::sync_path(&journal)?;
            c.size = 0;
        } else if c.end > 0 {
            let file = Self::journal_file(&journal, c)?;
            fs::write_journal(&file, &journal, 0, &[0u8; HEADER_LEN])?;
        }
        let (size, file) = (c.size, c.file.take());
        *c = Cycle::new(size);
        c.file = file;
        Ok(())
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
        drop(ws.lock(None).unwrap());
        assert_eq!(std::fs::read_to_string(ws.trace()).unwrap(), "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n");
        assert_eq!(std::fs::read_to_string(ws.memory()).unwrap(), "# Memory\n");
        assert_eq!(std::fs::read_to_string(ws.path(JOURNAL_FILE)).unwrap(), "", "the journal is emptied after replay");
        // Nothing to replay the second time.
        drop(ws.lock(None).unwrap());
        assert_eq!(std::fs::read_to_string(ws.trace()).unwrap().lines().count(), 3);
        // A journal that is not a commit is set aside, not applied.
        std::fs::write(ws.path(JOURNAL_FILE), "not json").unwrap();
        drop(ws.lock(None).unwrap());
        assert!(ws.path(".agentloop.journal.corrupt").exists());
    }

    /// An earlier version's journal is checked against the end of the trace alone, cut to whole
    /// lines: a line that only ends like an entry of the commit is not it.
    #[test]
    fn lines_written_already_are_read_off_the_end_of_the_trace() {
        let dir = tempfile::tempdir().unwrap();
        let path = camino::Utf8Path::from_path(dir.path()).unwrap().join("trace.jsonl");
        let lines = [r#"{"n":1}"#.to_string(), r#"{"n":2}"#.to_string()];
        let written = |text: &str| {
            std::fs::write(&path, text).unwrap();
            written_already(&path, &lines).unwrap()
        };
        assert_eq!(written(&format!("{}\n{{\"n\":1}}\n", "x".repeat(100))), 1);
        assert_eq!(written("{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n"), 2);
        assert_eq!(written("{\"n\":1}\n{\"n\":2}"), 2, "the last one torn after its text");
        assert_eq!(written(&format!("{}{{\"n\":1}}\n", "y".repeat(9))), 0, "cut mid-line");
        assert_eq!(written("xx{\"n\":1}\n"), 0);
        assert_eq!(written(""), 0);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(written_already(&path, &lines).unwrap(), 0, "no trace");
    }

    fn record(c: &Commit, cycle: u64, boot: &str, applied: bool) -> Vec<u8> {
        let mut b = frame_on(cycle, boot, &serde_json::to_string(c).unwrap());
        if applied {
            b[MARK_AT as usize] = b'-';
        }
        b
    }

    /// Commits accumulate as records of one cycle, each marked applied; a checkpoint empties
    /// the journal. A new process replays only a record still pending — unless the machine
    /// restarted since (another boot id), when it replays the whole cycle in order, and
    /// appended text is never added twice.
    #[test]
    fn records_of_a_cycle_replay_when_pending_or_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(camino::Utf8Path::from_path(dir.path()).unwrap());
        let journal = ws.path(JOURNAL_FILE);
        let mut one = Commit::default();
        one.file("plan.md", "plan 1\n".into()).append("decisions.md", "d1\n".into());
        one.trace = vec![r#"{"n":1}"#.into()];
        let mut two = Commit::default();
        two.file("memory.md", "memory 2\n".into()).append("decisions.md", "d2\n".into());
        two.trace = vec![r#"{"n":2}"#.into()];
        let session = ws.lock(None).unwrap();
        session.commit(&one).unwrap();
        session.commit(&two).unwrap();
        let bytes = std::fs::read(&journal).unwrap();
        let Journal::Records(rs) = read_journal(&bytes) else { panic!("two records") };
        assert_eq!(rs.len(), 2);
        assert!(rs.iter().all(|r| !r.pending), "both marked applied");
        assert_eq!(std::fs::read_to_string(ws.decisions()).unwrap(), "d1\nd2\n");
        session.checkpoint().unwrap();
        assert_eq!(read_journal(&std::fs::read(&journal).unwrap()), Journal::Empty);
        drop(session);

        // What a killed process leaves: the first record applied, the second pending and half
        // applied (its decision appended with a torn end, no trace line yet).
        let c1 = Commit { sizes: [("decisions.md".into(), 0), ("trace.jsonl".into(), 0)].into(), ..one.clone() };
        let c2 = Commit { sizes: [("decisions.md".into(), 3), ("trace.jsonl".into(), 8)].into(), ..two.clone() };
        let mut bytes = record(&c1, 7, boot_id(), true);
        bytes.extend(record(&c2, 7, boot_id(), false));
        bytes.extend(record(&c1, 6, boot_id(), false)); // a stale record of an older cycle
        std::fs::write(&journal, &bytes).unwrap();
        std::fs::write(ws.plan(), "edited by a person\n").unwrap();
        std::fs::write(ws.decisions(), "d1\nd").unwrap();
        std::fs::write(ws.trace(), "{\"n\":1}\n").unwrap();
        std::fs::remove_file(ws.memory()).unwrap();
        drop(ws.lock(None).unwrap());
        assert_eq!(
            std::fs::read_to_string(ws.plan()).unwrap(),
            "edited by a person\n",
            "an applied record is not replayed"
        );
        assert_eq!(std::fs::read_to_string(ws.memory()).unwrap(), "memory 2\n");
        assert_eq!(
            std::fs::read_to_string(ws.decisions()).unwrap(),
            "d1\nd2\n",
            "the torn end cut, the text added once"
        );
        assert_eq!(std::fs::read_to_string(ws.trace()).unwrap(), "{\"n\":1}\n{\"n\":2}\n");
        assert_eq!(read_journal(&std::fs::read(&journal).unwrap()), Journal::Empty, "checkpointed");

        // After a restart (records of another boot), the whole cycle is applied again.
        let other = "0".repeat(36);
        let mut bytes = record(&c1, 9, &other, true);
        bytes.extend(record(&c2, 9, &other, true));
        std::fs::write(&journal, &bytes).unwrap();
        std::fs::write(ws.plan(), "").unwrap();
        std::fs::write(ws.decisions(), "").unwrap();
        std::fs::write(ws.trace(), "").unwrap();
        drop(ws.lock(None).unwrap());
        assert_eq!(std::fs::read_to_string(ws.plan()).unwrap(), "plan 1\n");
        assert_eq!(std::fs::read_to_string(ws.decisions()).unwrap(), "d1\nd2\n");
        assert_eq!(std::fs::read_to_string(ws.trace()).unwrap(), "{\"n\":1}\n{\"n\":2}\n");

        // A torn record ends the cycle (its phase never began); a torn first record, or a
        // foreign file, is set aside.
        let whole = record(&c2, 11, boot_id(), false);
        let mut bytes = record(&c1, 11, boot_id(), true);
        bytes.extend(&whole[..whole.len() - 3]);
        std::fs::write(&journal, &bytes).unwrap();
        std::fs::remove_file(ws.memory()).unwrap();
        drop(ws.lock(None).unwrap());
        assert!(!ws.memory().exists(), "nothing of a torn record is applied");
        let mut flipped = whole.clone();
        let n = flipped.len();
        flipped[n - 5] ^= 1;
        for torn in [flipped, whole[..20].to_vec(), b"GIF89a and then a picture".to_vec()] {
            let _ = std::fs::remove_file(ws.path(".agentloop.journal.corrupt"));
            std::fs::write(&journal, &torn).unwrap();
            drop(ws.lock(None).unwrap());
            assert!(!ws.memory().exists(), "nothing of a torn record is applied");
            assert!(ws.path(".agentloop.journal.corrupt").exists() && !journal.exists(), "set aside");
        }
    }

    /// A journal is data a workspace carries: a crafted one that names a file outside the
    /// workspace is set aside with nothing applied, and a journal that is a symlink is never
    /// written through.
    #[test]
    fn a_crafted_or_linked_journal_cannot_write_outside_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let root = camino::Utf8Path::from_path(dir.path()).unwrap();
        std::fs::create_dir(root.join("ws")).unwrap();
        let ws = Workspace::new(root.join("ws"));
        let journal = ws.path(JOURNAL_FILE);
        let mut evil = Commit::default();
        evil.file("../outside.txt", "pwned".into()).file("memory.md", "x".into());
        for bytes in [serde_json::to_vec(&evil).unwrap(), record(&evil, 3, boot_id(), false)] {
            let _ = std::fs::remove_file(ws.path(".agentloop.journal.corrupt"));
            std::fs::write(&journal, bytes).unwrap();
            drop(ws.lock(None).unwrap());
            assert!(!root.join("outside.txt").exists(), "nothing written outside");
            assert!(!ws.memory().exists(), "nothing of it applied");
            assert!(ws.path(".agentloop.journal.corrupt").exists(), "set aside");
        }
        assert!(ws.lock(None).unwrap().commit(&evil).is_err(), "a commit naming ../ is refused");
        assert!(!root.join("outside.txt").exists());

        let target = root.join("precious.txt");
        std::fs::write(&target, "keep me").unwrap();
        let _ = std::fs::remove_file(&journal);
        std::os::unix::fs::symlink(&target, &journal).unwrap();
        drop(ws.lock(None).unwrap());
        let mut ok = Commit::default();
        ok.file("memory.md", "fine\n".into());
        ws.lock(None).unwrap().commit(&ok).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me", "the link's target is untouched");
        assert!(!std::fs::symlink_metadata(&journal).unwrap().file_type().is_symlink());
    }

    /// A journal may write only the paper trail and artifacts/: a cloned repository's crafted
    /// journal naming `.git/config` (a hook git would run), the workspace's config or a hidden
    /// file is set aside with nothing applied.
    #[test]
    fn a_journal_writes_only_the_paper_trail_and_artifacts() {
        for name in ["memory.md", "state.json", "trace.jsonl", "artifacts/a.md", "artifacts/sub/b.txt"] {
            assert!(may_commit(name), "{name}");
        }
        for name in [
            ".git/config",
            ".git/hooks/pre-commit",
            "agentloop.yaml",
            "agents/x.yaml",
            "templates/plan.md.j2",
            "notes.txt",
            "artifacts",
            "artifacts/.hidden",
            "artifacts/../x",
            "artifacts/.git/config",
            "./memory.md",
            "",
        ] {
            assert!(!may_commit(name), "{name}");
        }
        let dir = tempfile::tempdir().unwrap();
        let root = camino::Utf8Path::from_path(dir.path()).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        let ws = Workspace::new(root.to_path_buf());
        let mut evil = Commit::default();
        evil.file(".git/config", "[core]\n\tfsmonitor = ./hook.sh\n".into()).file("memory.md", "x".into());
        for bytes in [serde_json::to_vec(&evil).unwrap(), record(&evil, 3, boot_id(), false)] {
            std::fs::write(ws.path(JOURNAL_FILE), bytes).unwrap();
            drop(ws.lock(None).unwrap());
            assert_eq!(std::fs::read_to_string(root.join(".git/config")).unwrap(), "[core]\n");
            assert!(!ws.memory().exists(), "nothing of it applied");
        }
        assert!(ws.lock(None).unwrap().commit(&evil).is_err(), "a commit naming .git is refused");
    }

    /// Two workspaces locked in one process (two threads, as `serve`'s workers) commit
    /// independently: each session's cycle is its own, and releasing one checkpoints only its
    /// own journal.
    #[test]
    fn two_sessions_in_one_process_keep_their_own_cycles() {
        let dir = tempfile::tempdir().unwrap();
        let root = camino::Utf8Path::from_path(dir.path()).unwrap().to_path_buf();
        let both = std::sync::Arc::new(std::sync::Barrier::new(2));
        let worker = |name: &'static str, release_first: bool| {
            let (ws, both) = (Workspace::new(root.join(name)), both.clone());
            std::thread::spawn(move || {
                let session = ws.lock(None).unwrap();
                for n in 0..3 {
                    let mut c = Commit::default();
                    c.file("memory.md", format!("{name} {n}\n")).append("decisions.md", format!("{name} {n}\n"));
                    c.trace = vec![format!(r#"{{"ws":"{name}","n":{n}}}"#)];
                    session.commit(&c).unwrap();
                }
                let records = |ws: &Workspace| match read_journal(&std::fs::read(ws.path(JOURNAL_FILE)).unwrap()) {
                    Journal::Records(r) => r.iter().map(|r| (r.cycle, r.pending)).collect::<Vec<_>>(),
                    _ => vec![],
                };
                let mine = records(&ws);
                assert_eq!(mine.len(), 3, "{name}: its three commits, one cycle");
                assert!(mine.iter().all(|(c, pending)| *c == mine[0].0 && !pending), "{name}: {mine:?}");
                both.wait(); // both sessions hold records now
                if release_first {
                    drop(session);
                    both.wait();
                    assert_eq!(records(&ws), vec![], "{name}: released, checkpointed");
                } else {
                    both.wait(); // the other session is released
                    assert_eq!(records(&ws), mine, "{name}: untouched by the other's release");
                    let mut c = Commit::default();
                    c.file("plan.md", "more\n".into());
                    session.commit(&c).unwrap();
                    let now = records(&ws);
                    assert_eq!(now.len(), 4, "{name}: the same cycle goes on");
                    assert_eq!(now[3].0, mine[0].0);
                    drop(session);
                    assert_eq!(records(&ws), vec![]);
                }
                mine[0].0
            })
        };
        let (a, b) = (worker("a", true), worker("b", false));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        assert_ne!(a, b, "each session opened its own cycle");
        for name in ["a", "b"] {
            let ws = Workspace::new(root.join(name));
            assert_eq!(std::fs::read_to_string(ws.decisions()).unwrap(), format!("{name} 0\n{name} 1\n{name} 2\n"));
            assert_eq!(std::fs::read_to_string(ws.trace()).unwrap().lines().count(), 3);
        }
    }

    /// A commit that fails while applied keeps its record through the lock's release (the
    /// checkpoint does not empty the journal), and the next lock applies it.
    #[test]
    fn a_commit_that_fails_part_way_is_replayed_by_the_next_lock() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(camino::Utf8Path::from_path(dir.path()).unwrap());
        let lock = ws.lock(None).unwrap();
        std::fs::write(ws.path("artifacts"), "a file where a folder should be").unwrap();
        let mut c = Commit::default();
        c.file("memory.md", "m\n".into()).file("artifacts/a.md", "a\n".into());
        assert!(lock.commit(&c).is_err());
        drop(lock);
        let bytes = std::fs::read(ws.path(JOURNAL_FILE)).unwrap();
        assert!(matches!(read_journal(&bytes), Journal::Records(r) if r.len() == 1 && r[0].pending), "kept, pending");
        std::fs::remove_file(ws.path("artifacts")).unwrap();
        let _lock = ws.lock(None).unwrap();
        assert_eq!(std::fs::read_to_string(ws.path("artifacts/a.md")).unwrap(), "a\n");
        assert_eq!(read_journal(&std::fs::read(ws.path(JOURNAL_FILE)).unwrap()), Journal::Empty);
    }
}
