//! Moving a run's files between the workspace root and `runs/<run_id>/`, journaled: the
//! journal (`.agentloop.archive.json`) is written durably first, then each file is renamed (one
//! atomic rename each, state.json last), then the journal is removed; a process killed at any
//! instant leaves a journal that [`recover`] finishes when the workspace lock is next taken. A
//! leaf below the workspace and the history of runs.
//!
//! Invariant: a move never goes through a link. The folders are entered as [`Folder`]s (no
//! component followed), so a symlinked `runs/` or `runs/<id>/` is refused with exit 8 before
//! the journal is written, and each file is renamed relative to the opened folders.

use agentloop_io::fs::{self, Folder};
use agentloop_types::error::{Error, Result};
use camino::Utf8Path;
use serde::{Deserialize, Serialize};

/// The files of one run, relative to its folder. Everything else in the workspace (skills.md,
/// agentloop.yaml, templates/, agents/, files the person or the agent put there) stays.
/// report.html (`agentloop report`) is derived from the others and moves with them.
pub const RUN_FILES: &[&str] = &[
    "context.md",
    "memory.md",
    "plan.md",
    "decisions.md",
    "transcript.md",
    "trace.jsonl",
    "state.json",
    "result.json",
    "artifacts",
    "report.html",
];

pub const JOURNAL: &str = ".agentloop.archive.json";

#[derive(Debug, Serialize, Deserialize)]
pub struct Move {
    /// Folder the run's files leave, relative to the workspace ("" for the root).
    pub from: String,
    /// Folder they go to.
    pub to: String,
}

pub fn apply(root: &Utf8Path, m: Move) -> Result<()> {
    if !plain(&m.from) || !plain(&m.to) {
        return Err(Error::config(format!(
            "cannot move a run between `{}` and `{}`: runs are kept in a folder inside the workspace",
            m.from, m.to
        ))
        .with_hint("set handle.runs_dir to a plain folder name, such as runs"));
    }
    // Refused before the journal is written, so nothing is left to finish: a symlinked
    // `runs/` or run folder would move a run out of the workspace (or other files into it).
    Folder::open(root, Utf8Path::new(&m.from), false)?;
    Folder::open(root, Utf8Path::new(&m.to), false)?;
    let journal = root.join(JOURNAL);
    let text = agentloop_types::json::to_string(&m);
    fs::write_durable(&journal, text.as_bytes())?;
    agentloop_io::crash::point("archive:journaled");
    finish_move(root, &m)?;
    std::fs::remove_file(&journal).map_err(|e| Error::io("remove", &journal, e))
}

/// A folder a move may name: the root ("") or a plain path below it (no `..`, not absolute,
/// no part starting with a dot: a crafted journal must not move files into `.git/`).
fn plain(folder: &str) -> bool {
    Utf8Path::new(folder).components().all(|c| matches!(c, camino::Utf8Component::Normal(p) if !p.starts_with('.')))
}

fn finish_move(root: &Utf8Path, m: &Move) -> Result<()> {
    // The journal is data a workspace carries: a crafted one must not move files across its edge.
    if !plain(&m.from) || !plain(&m.to) {
        return Err(Error::data(format!(
            "{}: a move between `{}` and `{}` leaves the workspace; nothing was moved",
            root.join(JOURNAL),
            m.from,
            m.to
        ))
        .with_hint("remove the file; agentloop only moves runs within the workspace (runs/<id>/)"));
    }
    // Both folders are entered without following links (see fs::Folder); the moves are
    // relative to the opened folders.
    let to = Folder::create(root, Utf8Path::new(&m.to))?;
    let Some(from) = Folder::open(root, Utf8Path::new(&m.from), false)? else {
        return Ok(()); // moved and removed before a crash
    };
    // state.json last: until it moves, the run is still where it was.
    let mut names: Vec<&str> = RUN_FILES.iter().copied().filter(|n| *n != "state.json").collect();
    names.push("state.json");
    for name in names {
        if !from.has(name) {
            continue; // moved before a crash, or never there
        }
        if to.has(name) {
            return Err(Error::data(format!(
                "cannot move {}: {} already exists",
                from.path().join(name),
                to.path().join(name)
            ))
            .with_hint("move one of them aside by hand; nothing is ever overwritten"));
        }
        from.move_to(name, &to)?;
        agentloop_io::crash::point(&format!("archive:moved:{name}"));
    }
    if !m.from.is_empty() {
        // The emptied archive folder goes; anything else left in it stays (rmdir never
        // follows a link).
        let _ = std::fs::remove_dir(from.path());
    }
    Ok(())
}

/// Finishes a move left by a killed process. Called when the workspace lock is taken.
pub fn recover(root: &Utf8Path) -> Result<()> {
    let journal = root.join(JOURNAL);
    let Some(text) = fs::read_optional(&journal)? else {
        return Ok(());
    };
    let m: Move = serde_json::from_str(&text).map_err(|e| {
        Error::data(format!("cannot read {journal}"))
            .with_hint(
                "a run was being moved when a process died; check runs/ and the workspace by hand, then remove the file",
            )
            .with_source(e)
    })?;
    finish_move(root, &m)?;
    std::fs::remove_file(&journal).map_err(|e| Error::io("remove", &journal, e))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// A crafted move journal that leaves the workspace moves nothing; a move asked for across
    /// the edge is refused before anything is written.
    #[test]
    fn a_move_never_crosses_the_workspace_edge() {
        let dir = tempfile::tempdir().unwrap();
        let base = Utf8Path::from_path(dir.path()).unwrap();
        let (root, elsewhere) = (base.join("ws"), base.join("elsewhere"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("state.json"), "{}").unwrap();
        std::fs::write(root.join("state.json"), "{}").unwrap();
        std::fs::write(root.join(JOURNAL), r#"{"from": "../elsewhere", "to": ""}"#).unwrap();
        assert!(recover(&root).is_err());
        assert!(elsewhere.join("state.json").exists(), "nothing moved in");
        std::fs::write(root.join(JOURNAL), r#"{"from": "", "to": "../elsewhere/x"}"#).unwrap();
        assert!(recover(&root).is_err());
        assert!(root.join("state.json").exists() && !elsewhere.join("x").exists(), "nothing moved out");
        std::fs::remove_file(root.join(JOURNAL)).unwrap();
        let e = apply(&root, Move { from: String::new(), to: "/tmp/runs".into() }).unwrap_err();
        assert!(e.message.contains("inside the workspace"), "{}", e.message);
        assert!(!root.join(JOURNAL).exists(), "refused before the journal is written");
    }
}
