//! The commit journal: a phase's effects (files, trace lines, state.json) written whole to
//! `.agentloop.journal.json` and fsynced, then applied file by file, then removed; a journal
//! left by a killed process is replayed (idempotently) by the next locker.

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
        fs::write_journal(&journal, text.as_bytes())?;
        crate::crash::point("commit:journaled");
        self.apply(commit, false)?;
        fs::clear_journal(&journal)
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
        let Some(text) = fs::read_optional(&journal)?.filter(|t| !t.is_empty()) else {
            return Ok(());
        };
        match serde_json::from_str::<Commit>(&text) {
            Ok(commit) => self.apply(&commit, true)?,
            // Torn by a crash while it was written (so its phase never began) or a foreign
            // file: nothing to apply; it is set aside for a person to look at.
            Err(_) => {
                let aside = self.path(".agentloop.journal.corrupt");
                let _ = std::fs::rename(&journal, &aside);
                return Ok(());
            }
        }
        fs::clear_journal(&journal)
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
}
