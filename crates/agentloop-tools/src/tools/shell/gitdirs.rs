//! Git repositories below the folders a shell program may write, at every depth.
//!
//! git runs what a repository's own files name (`core.fsmonitor`, hooks, filters): a program
//! that could write `sub/.git/config` would choose what the user's next `git status` in `sub`
//! runs on the host. So every git folder the program could reach for writing is found before
//! the call — each `.git` (folder or file), the folder a `.git` file or link leads to (a
//! submodule's `gitdir:`), and any folder git itself would take for a repository (`HEAD`,
//! `objects/`, `refs/`: a bare one) — and made read-only inside the sandbox. After the call,
//! whichever of them the program created is removed, sandbox or not.
//!
//! The walk never follows a link, never enters a repository it found (its insides are covered
//! by the one mount), and stops at [`MAX_ENTRIES`]: past that the call is refused rather than
//! run with a part of the tree unjudged.

use camino::{Utf8Path, Utf8PathBuf};
use std::collections::BTreeSet;

/// Entries one scan may look at (the workspace and the write folders together).
pub const MAX_ENTRIES: usize = 200_000;

/// Whether a path names a `.git` at any depth (a component of it, however it is spelled: `.git`,
/// `./sub/.git/config`, `--output=sub/.git/hooks/x`); `.gitignore` and `x.git` are other names.
pub fn names_git(arg: &str) -> bool {
    let value = arg.split_once('=').map_or(arg, |(_, v)| v);
    [arg, value].iter().any(|a| a.split('/').any(|c| c.eq_ignore_ascii_case(".git")))
}

/// The repositories found: what must be read-only, and what existed (to tell created ones).
#[derive(Default)]
pub struct Found {
    /// Real paths to bind read-only: `.git` entries and the folders their links or `gitdir:`
    /// lines lead to, and bare repositories, when they lie in a write folder.
    pub protect: BTreeSet<Utf8PathBuf>,
    /// Every repository entry seen (by the path it was found at), to tell new ones after.
    pub seen: BTreeSet<Utf8PathBuf>,
    /// What each entry seen is (its device and inode), to tell one a program moved (`mv proj
    /// proj2`: the user's repository at a new path) from one it made.
    pub ids: std::collections::BTreeMap<(u64, u64), Utf8PathBuf>,
}

impl Found {
    fn see(&mut self, path: &Utf8Path) {
        if let Some(id) = identity(path) {
            self.ids.insert(id, path.to_path_buf());
        }
        self.seen.insert(path.to_path_buf());
    }

    /// Whether `path` (not seen before) is an entry seen before at another path that no longer
    /// holds it: moved there whole by the program, not made (a hard link leaves the first path
    /// holding it, and is no move).
    fn moved_here(&self, path: &Utf8Path) -> bool {
        let Some(id) = identity(path) else { return false };
        self.ids.get(&id).is_some_and(|was| was != path && identity(was) != Some(id))
    }
}

/// A file's device and inode, not following a link.
fn identity(path: &Utf8Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Scans `roots` (real paths of the folders the program may write). Err when the trees are too
/// big to judge.
pub fn scan(roots: &[Utf8PathBuf]) -> Result<Found, String> {
    let mut found = Found::default();
    let mut budget = MAX_ENTRIES;
    for root in roots {
        walk(root, roots, &mut found, &mut budget)?;
    }
    Ok(found)
}

fn walk(dir: &Utf8Path, roots: &[Utf8PathBuf], found: &mut Found, budget: &mut usize) -> Result<(), String> {
    if is_bare(dir) {
        found.see(dir);
        found.protect.insert(dir.to_path_buf());
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries.flatten() {
        if *budget == 0 {
            return Err(format!(
                "the folders the program may write hold more than {MAX_ENTRIES} entries, too many to find every git repository in them"
            ));
        }
        *budget -= 1;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let path = dir.join(&name);
        let Ok(kind) = entry.file_type() else { continue };
        if name.eq_ignore_ascii_case(".git") {
            found.see(&path);
            if !kind.is_symlink() {
                found.protect.insert(path.clone());
            }
            // Where a link or a `gitdir:` file leads, when the program could write there.
            if let Some(target) = git_target(&path, kind.is_file()) {
                if roots.iter().any(|r| target.starts_with(r)) {
                    found.protect.insert(target);
                }
            }
            continue;
        }
        if kind.is_dir() {
            walk(&path, roots, found, budget)?;
        }
    }
    Ok(())
}

/// The real folder a `.git` link or `.git` file (`gitdir: PATH`) leads to.
fn git_target(path: &Utf8Path, is_file: bool) -> Option<Utf8PathBuf> {
    let target = if is_file {
        // A `gitdir:` line is short; a huge or endless file is read no further than git would.
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(std::fs::File::open(path).ok()?, 4096), &mut text)
            .ok()?;
        let line = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim().to_string();
        path.parent()?.join(line)
    } else {
        path.to_path_buf()
    };
    target.canonicalize_utf8().ok().filter(|t| t.is_dir())
}

/// Whether git would take `dir` for a repository itself (a bare one): it holds `HEAD`,
/// `objects/` and `refs/`, as git's own discovery asks.
fn is_bare(dir: &Utf8Path) -> bool {
    let is = |n: &str, dir_wanted: bool| {
        std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| if dir_wanted { m.is_dir() } else { m.is_file() })
    };
    is("HEAD", false) && is("objects", true) && is("refs", true)
}

/// After the call: removes the repositories the program created (in `roots`), and says which
/// (relative to `ws` where they lie in it). One the program moved (the same folder or file at a
/// new path, gone from the old one) is the user's repository and is kept.
pub fn sweep_new(before: &Found, roots: &[Utf8PathBuf], ws: &Utf8Path) -> Vec<String> {
    let Ok(after) = scan(roots) else { return vec![] };
    let mut removed = Vec::new();
    for p in after.seen.difference(&before.seen).filter(|p| !before.moved_here(p)) {
        let Ok(m) = std::fs::symlink_metadata(p) else { continue };
        // A `.git` goes whole; a folder made to look like a bare repository may hold the
        // user's files, so only its `HEAD` goes (git then no longer takes it for one).
        let gone = if p.file_name().is_some_and(|n| n.eq_ignore_ascii_case(".git")) {
            if m.is_dir() {
                std::fs::remove_dir_all(p)
            } else {
                std::fs::remove_file(p)
            }
        } else {
            std::fs::remove_file(p.join("HEAD"))
        };
        if gone.is_ok() {
            removed.push(p.strip_prefix(ws).map_or_else(|_| p.to_string(), |r| r.to_string()));
        }
    }
    removed
}

/// The configuration files of the repositories git may enter besides the one it finds: each
/// submodule's (`modules/**/config` in the common git folder, and a checkout's own `.git`
/// folder or the folder its `gitdir:` names), each worktree's (`config.worktree`), and any
/// other repository at any depth of the work tree (`git status` recurses into submodules, and
/// runs their filters with their configuration). `top` is the work tree (or None for a bare
/// repository), `common` the common git folder, as git names them.
pub fn nested_configs(top: Option<&Utf8Path>, common: &Utf8Path) -> Result<Vec<Utf8PathBuf>, String> {
    let mut dirs: BTreeSet<Utf8PathBuf> = BTreeSet::new();
    let mut budget = MAX_ENTRIES;
    modules(common, &mut dirs, &mut budget);
    if let Some(top) = top {
        let found = scan(&[top.to_path_buf()])?;
        for p in &found.seen {
            let dir = match std::fs::symlink_metadata(p) {
                Ok(m) if m.is_file() => git_target(p, true),
                Ok(_) if p.file_name().is_some_and(|n| n.eq_ignore_ascii_case(".git")) => p.canonicalize_utf8().ok(),
                Ok(_) => Some(p.clone()),
                Err(_) => None,
            };
            if let Some(d) = dir.filter(|d| d.is_dir()) {
                modules(&d, &mut dirs, &mut budget);
                dirs.insert(d);
            }
        }
    }
    let top_git = common.canonicalize_utf8().unwrap_or_else(|_| common.to_path_buf());
    let mut files = Vec::new();
    for d in dirs {
        // The top repository's own `config` is listed by git itself, with its scope.
        if d != top_git {
            files.push(d.join("config"));
        }
        files.push(d.join("config.worktree"));
        if let Ok(rd) = std::fs::read_dir(d.join("worktrees")) {
            files.extend(
                rd.flatten()
                    .filter_map(|e| Utf8PathBuf::from_path_buf(e.path()).ok())
                    .map(|w| w.join("config.worktree")),
            );
        }
    }
    files.retain(|f| f.is_file());
    Ok(files)
}

/// Every submodule's git folder under `git_dir/modules`, at any depth (a submodule's own
/// submodules live in its `modules/`).
fn modules(git_dir: &Utf8Path, out: &mut BTreeSet<Utf8PathBuf>, budget: &mut usize) {
    modules_below(&git_dir.join("modules"), out, budget);
}

/// A module named `a/b` is kept as `modules/a/b`: a folder holding `HEAD` is a submodule, one
/// without it a level of a name.
fn modules_below(dir: &Utf8Path, out: &mut BTreeSet<Utf8PathBuf>, budget: &mut usize) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let Ok(path) = Utf8PathBuf::from_path_buf(e.path()) else { continue };
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if path.join("HEAD").is_file() {
            out.insert(path.canonicalize_utf8().unwrap_or(path.clone()));
            modules(&path, out, budget);
        } else {
            modules_below(&path, out, budget);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_component_is_named_however_spelled() {
        for a in ["sub/.git/config", ".git", "./a/.GIT/hooks/x", "--output=sub/.git/config", "a/.git/"] {
            assert!(names_git(a), "{a}");
        }
        for a in [".gitignore", "x.git", "sub/.github/x", "--git-dir", "notes.txt"] {
            assert!(!names_git(a), "{a}");
        }
    }
}
