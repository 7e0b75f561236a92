//! The file sandbox shared by file_read, file_write, list_dir and grep: which folders a tool may
//! touch, how a requested path maps into one of them, and how files are opened there without
//! escaping, blocking or writing through a link.
//!
//! Invariants:
//! - The allowed roots are resolved once per call, before any requested path is looked at: each
//!   is opened as a `cap_std::fs::Dir` and known by its identity (device, inode). A requested
//!   path is matched to a root by comparing identities, never path strings, so a symlinked
//!   `artifacts/` cannot smuggle an absolute path in. A root that lies inside the workspace but
//!   is reached through a symlink is dropped (a link would open a folder outside).
//! - Every open happens inside a root's capability (openat, component by component), so `..`,
//!   symlinks pointing out and look-alike prefixes (`work` vs `work_evil`) cannot escape.
//! - Files are opened with O_NONBLOCK and their type is checked on the opened handle: a FIFO or
//!   device swapped in between a check and the open is refused, never waited on.
//! - Writes never follow a symlink (folders are entered one at a time and checked against the
//!   handle opened), never touch a file with more than one hard link, and never touch the
//!   run's paper trail or agentloop's own files (see `refuse_write`).
//! - What a tool reports names workspace-relative paths only: a root outside the workspace is
//!   shown as the relative path from the workspace (e.g. `../data`), never the machine path.

use super::ToolEnv;
pub use agentloop_io::capfs::{
    absolute, check_target, identity, io_error, io_failure, normalize, open_append, open_regular, read_capped,
    relative, too_large,
};
use agentloop_types::error::Error;
use camino::{Utf8Path, Utf8PathBuf};
use cap_std::ambient_authority;
use cap_std::fs::Dir;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// The workspace alone (where `finish` artifacts must lie).
    Workspace,
}

impl Access {
    fn verb(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Workspace => "name",
        }
    }
}

/// Files at the workspace's top level that agentloop writes: the paper trail (transcript.md and
/// trace.jsonl are the audit record of what the model did, so the model must not rewrite them)
/// and the report derived from it. No tool writes them; agentloop's dot files (`.agentloop*`)
/// are refused by name at any depth.
pub const PAPER_TRAIL: &[&str] = &[
    "context.md",
    "memory.md",
    "plan.md",
    "decisions.md",
    "transcript.md",
    "skills.md",
    "trace.jsonl",
    "state.json",
    "result.json",
    "report.html",
];
pub const CONFIG_FILES: &[&str] = &["agentloop.yaml", "agentloop.yml", "agentloop.json"];
/// Folders at the workspace's top level that only the user (or `agentloop skills learn|fetch`)
/// writes: agent profiles, prompt templates and skills, each of which steers later runs.
pub const CONFIG_DIRS: &[&str] = &["agents", "templates", "skills"];

/// Whether the entry `name` of a folder is agentloop's own rather than the user's: a dot file at
/// any depth, and at the workspace's top (`top`) its paper trail and configuration.
pub fn agentloops_own(name: &str, top: bool) -> bool {
    name.starts_with('.') || (top && [PAPER_TRAIL, CONFIG_FILES, CONFIG_DIRS].iter().any(|l| l.contains(&name)))
}

/// One allowed folder, opened.
pub struct Root {
    /// How messages name it: relative to the workspace ("" is the workspace itself).
    pub label: Utf8PathBuf,
    /// Its real location, used only to walk it (every open still goes through `dir`).
    pub real: Utf8PathBuf,
    pub dir: Dir,
    id: (u64, u64),
    pub is_workspace: bool,
}

impl Root {
    /// The workspace-relative name of `rel` inside this root.
    pub fn show(&self, rel: &Utf8Path) -> String {
        let p = self.label.join(rel);
        if p.as_str().is_empty() {
            ".".into()
        } else {
            p.into_string()
        }
    }
}

/// A requested path, matched to the root holding it.
pub struct Target<'a> {
    pub root: &'a Root,
    /// The path inside the root ("" is the root itself); never holds `..`.
    pub rel: Utf8PathBuf,
}

impl Target<'_> {
    pub fn shown(&self) -> String {
        self.root.show(&self.rel)
    }
    /// The path for cap-std calls (`.` for the root itself).
    pub fn rel_str(&self) -> &str {
        if self.rel.as_str().is_empty() {
            "."
        } else {
            self.rel.as_str()
        }
    }
}

pub struct Sandbox {
    pub roots: Vec<Root>,
    access: Access,
    ws_abs: Utf8PathBuf,
    runs_dir: String,
    /// The workspace's identity, whichever roots are open.
    ws_id: Option<(u64, u64)>,
    /// Configured folders that were left out, with why (named in denials).
    dropped: Vec<String>,
    /// agentloop's own stores of tokens, never reached whatever the roots hold.
    pub stores: crate::held_secrets::Stores,
}

/// Creates the missing write folders (`tools.write_paths`, and so an agent's default
/// `sandbox/<agent>/`) that lie inside the workspace, through the workspace's capability, so a
/// symlinked parent cannot create a folder outside. Outside the workspace only an agent's
/// default folder under a root is made (event mode and `serve` take relative paths from the
/// root); other configured folders must exist. A failure leaves a folder missing, and a write
/// there is refused with the usual message naming the allowed folders.
fn make_write_roots(env: &ToolEnv, ws_abs: &Utf8Path, ws_real: &Utf8Path) {
    let agent_dir = env.config.agent.as_deref().map(agentloop_config::config::agent_sandbox_dir);
    let Ok(ws) = Dir::open_ambient_dir(ws_real, ambient_authority()) else { return };
    for p in &env.config.tools.write_paths {
        let abs = normalize(&ws_abs.join(p));
        match abs.strip_prefix(ws_abs) {
            Ok(inner) if !inner.as_str().is_empty() => {
                let _ = ws.create_dir_all(inner);
            }
            Ok(_) => {}
            Err(_) if agent_dir.as_ref().is_some_and(|d| abs.ends_with(d)) => {
                let _ = agentloop_io::fs::create_dir_all(&abs);
            }
            Err(_) => {}
        }
    }
}

impl Sandbox {
    /// Opens the roots for one access: reads see the workspace, `tools.read_paths`,
    /// `tools.write_paths` and the on-disk skill folders; writes see the workspace, or exactly
    /// `tools.write_paths` when that is set.
    pub fn open(env: &ToolEnv, access: Access) -> Result<Sandbox, Error> {
        let ws_abs = absolute(env.root);
        let ws_real = ws_abs
            .canonicalize_utf8()
            .map_err(|e| Error::tool(format!("cannot open the workspace: {e}")).with_source(e))?;
        let cfg = &env.config.tools;
        let mut wanted: Vec<(Utf8PathBuf, &str)> = Vec::new();
        let configured = |p: &Utf8Path| normalize(&ws_abs.join(p));
        match access {
            Access::Read => {
                wanted.push((ws_abs.clone(), ""));
                wanted.extend(cfg.read_paths.iter().map(|p| (configured(p), "tools.read_paths")));
                wanted.extend(cfg.write_paths.iter().map(|p| (configured(p), "tools.write_paths")));
                wanted.extend(env.skills.dirs().iter().map(|p| (configured(p), "a skill folder")));
            }
            Access::Workspace => wanted.push((ws_abs.clone(), "")),
            Access::Write if cfg.write_paths.is_empty() => wanted.push((ws_abs.clone(), "")),
            Access::Write => wanted.extend(cfg.write_paths.iter().map(|p| (configured(p), "tools.write_paths"))),
        }
        if access == Access::Write {
            make_write_roots(env, &ws_abs, &ws_real);
        }
        let mut sb = Sandbox {
            roots: Vec::new(),
            access,
            ws_abs: ws_abs.clone(),
            runs_dir: env.config.handle.runs_dir.clone(),
            ws_id: std::fs::metadata(&ws_real)
                .ok()
                .map(|m| (std::os::unix::fs::MetadataExt::dev(&m), std::os::unix::fs::MetadataExt::ino(&m))),
            dropped: Vec::new(),
            stores: crate::held_secrets::Stores::load(),
        };
        for (abs, source) in wanted {
            let label = relative(&ws_abs, &abs);
            let Ok(real) = abs.canonicalize_utf8() else {
                continue; // not there (yet): nothing to read or write in it
            };
            // Inside the workspace, a root must be the folder its name says, not a link out.
            if let Ok(inner) = abs.strip_prefix(&ws_abs) {
                if real != ws_real.join(inner) {
                    sb.dropped.push(format!("{label} ({source}) is a symbolic link and is not used"));
                    continue;
                }
            }
            sb.add_root(label, real, &ws_real);
        }
        Ok(sb)
    }

    /// Adds the folder `real` (shown as `label`) as a root, once: a folder that cannot be opened
    /// is left out, as is one already a root (by identity, so two names of one folder are one).
    fn add_root(&mut self, label: Utf8PathBuf, real: Utf8PathBuf, ws_real: &Utf8Path) {
        let Ok(dir) = Dir::open_ambient_dir(&real, ambient_authority()) else { return };
        let Ok(meta) = dir.dir_metadata() else { return };
        let id = identity(&meta);
        if self.roots.iter().any(|r| r.id == id) {
            return;
        }
        let is_workspace = real == ws_real;
        self.roots.push(Root { label, real, dir, id, is_workspace });
    }

    /// The roots for one tool: [`Sandbox::open`], narrowed to the tool's own
    /// `tools.<tool>.allowed_paths` when it has them. Each of those becomes a root of its own
    /// (so a link inside one cannot reach a sibling folder) and is used only when its real
    /// location lies inside a root the tool had anyway; one that is not is named in denials.
    pub fn open_for(env: &ToolEnv, access: Access, tool: &str) -> Result<Sandbox, Error> {
        let mut sb = Sandbox::open(env, access)?;
        let Some(paths) = env.config.tools.allowed_paths_of(tool) else { return Ok(sb) };
        let key = format!("tools.{tool}.allowed_paths");
        let wider = std::mem::take(&mut sb.roots);
        let ws_real = sb
            .ws_abs
            .canonicalize_utf8()
            .map_err(|e| Error::tool(format!("cannot open the workspace: {e}")).with_source(e))?;
        let ws_dir = Dir::open_ambient_dir(&ws_real, ambient_authority()).ok();
        for p in paths {
            let abs = normalize(&sb.ws_abs.join(p));
            let label = relative(&sb.ws_abs, &abs);
            // A tool's own folder inside the workspace is made when missing, as the framework
            // seed's tools make theirs: named but absent, it would leave the tool no folder at
            // all. Made through the workspace's handle, so never through a link out of it.
            if let (Ok(inner), Some(ws)) = (abs.strip_prefix(&sb.ws_abs), &ws_dir) {
                if !inner.as_str().is_empty() && !ws.exists(inner) {
                    let _ = ws.create_dir_all(inner);
                }
            }
            let Ok(real) = abs.canonicalize_utf8() else {
                sb.dropped.push(format!("{label} ({key}) does not exist"));
                continue;
            };
            let inside_own = abs.strip_prefix(&sb.ws_abs).map(|inner| real == ws_real.join(inner));
            if inside_own == Ok(false) {
                sb.dropped.push(format!("{label} ({key}) is a symbolic link and is not used"));
                continue;
            }
            if !wider.iter().any(|r| real.starts_with(&r.real)) {
                sb.dropped.push(format!("{label} ({key}) is outside the folders this tool may {}", access.verb()));
                continue;
            }
            sb.add_root(label, real, &ws_real);
        }
        Ok(sb)
    }

    /// The roots as messages name them.
    pub fn describe(&self) -> String {
        let mut names: Vec<String> = self
            .roots
            .iter()
            .map(|r| if r.is_workspace { "the workspace".to_string() } else { r.label.to_string() })
            .collect();
        if names.is_empty() {
            names.push("none".into());
        }
        let mut s = names.join(", ");
        if !self.dropped.is_empty() {
            s.push_str(&format!("; {}", self.dropped.join("; ")));
        }
        s
    }

    /// Matches a requested path (relative to the workspace, or absolute) to its root. The
    /// deepest folder on the path that *is* a root (same device and inode) wins.
    pub fn locate(&self, requested: &str) -> Result<Target<'_>, Error> {
        if requested.contains('\0') {
            return Err(Error::tool("the path contains a NUL byte"));
        }
        let req = Utf8Path::new(requested);
        let full = normalize(&if req.is_absolute() { req.to_path_buf() } else { self.ws_abs.join(req) });
        for ancestor in full.ancestors() {
            // stat, not open: a FIFO on the way cannot block.
            let Ok(m) = std::fs::metadata(ancestor) else { continue };
            if !m.is_dir() {
                continue;
            }
            let id = (std::os::unix::fs::MetadataExt::dev(&m), std::os::unix::fs::MetadataExt::ino(&m));
            if let Some(root) = self.roots.iter().find(|r| r.id == id) {
                let rel = full.strip_prefix(ancestor).map(Utf8Path::to_path_buf).unwrap_or_default();
                // Judged where it leads (a link, a hard link), not by how it is spelled.
                if self.stores.holds(&root.real.join(&rel)) {
                    return Err(Error::tool(format!(
                        "access denied: `{requested}` is agentloop's own store of tokens (serve's token, MCP sign-ins), which no tool may read"
                    )));
                }
                return Ok(Target { root, rel });
            }
        }
        let what = if req.is_absolute() { "that absolute path".to_string() } else { format!("`{requested}`") };
        Err(Error::tool(format!(
            "access denied: {what} is outside the folders this tool may {} ({}); give a path relative to the workspace",
            self.access.verb(),
            self.describe()
        )))
    }

    /// Why a write to `t` is refused by its name alone: agentloop's own files and `.git`, at
    /// any depth. The workspace's top level is checked while the folders are entered
    /// ([`Sandbox::enter_parent`]), by identity, whichever root the path came through.
    pub fn refuse_name(&self, t: &Target) -> Option<String> {
        let shown = t.shown();
        if t.rel.components().any(|c| c.as_str().starts_with(".agentloop")) {
            return Some(format!("access denied: `{shown}`: files named .agentloop* belong to agentloop"));
        }
        if t.rel.components().any(|c| c.as_str() == ".git") {
            return Some(format!(
                "access denied: `{shown}` is inside .git, the repository's internals (a hook there would run code)"
            ));
        }
        None
    }

    /// Why an entry named `name` directly in the workspace may not be written, if it may not.
    fn refuse_top_level(&self, name: &str, is_file: bool) -> Option<String> {
        if is_file && PAPER_TRAIL.contains(&name) {
            return Some(format!(
                "access denied: `{name}` is part of the run's paper trail, which only agentloop writes; write to another file, e.g. artifacts/{name}"
            ));
        }
        if is_file && CONFIG_FILES.contains(&name) {
            return Some(format!(
                "access denied: `{name}` is the workspace's agentloop configuration, which a tool may not change"
            ));
        }
        if CONFIG_DIRS.contains(&name) {
            return Some(format!(
                "access denied: `{name}/` holds agentloop's agent profiles, prompt templates or skills, which a tool may not change"
            ));
        }
        if !self.runs_dir.is_empty() && name == self.runs_dir {
            return Some(format!(
                "access denied: `{name}/` holds event-mode runs (handle.runs_dir), which only agentloop writes"
            ));
        }
        None
    }

    /// Enters the folders of `t` one at a time without following a symlink: each is looked up
    /// with lstat, opened, and the opened handle must be that same folder. Missing folders are
    /// created. Whenever the folder entered is the workspace (by identity), the next name is
    /// checked against the paper trail and agentloop's folders. Returns the file's parent
    /// folder and the file's name.
    pub fn enter_parent(&self, t: &Target) -> Result<(Dir, String), Error> {
        let shown = t.shown();
        if let Some(why) = self.refuse_name(t) {
            return Err(Error::tool(why));
        }
        let name =
            t.rel.file_name().ok_or_else(|| Error::tool(format!("`{shown}` names a folder, not a file")))?.to_string();
        let mut dir = t.root.dir.try_clone().map_err(|e| io_failure(&shown, e))?;
        let mut walked = Utf8PathBuf::new();
        let at_workspace = |d: &Dir| d.dir_metadata().is_ok_and(|m| Some(identity(&m)) == self.ws_id);
        for comp in t.rel.parent().map(|p| p.components().collect::<Vec<_>>()).unwrap_or_default() {
            let comp = comp.as_str();
            if at_workspace(&dir) {
                if let Some(why) = self.refuse_top_level(comp, false) {
                    return Err(Error::tool(why));
                }
            }
            walked.push(comp);
            let here = t.root.show(&walked);
            let before = match dir.symlink_metadata(comp) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    match dir.create_dir(comp) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(io_failure(&here, e)),
                    }
                    dir.symlink_metadata(comp).map_err(|e| io_failure(&here, e))?
                }
                Err(e) => return Err(io_failure(&here, e)),
            };
            if before.is_symlink() {
                return Err(Error::tool(format!(
                    "access denied: `{here}` is a symbolic link; file_write does not write through links"
                )));
            }
            if !before.is_dir() {
                return Err(Error::tool(format!("`{here}` is a file, not a folder")));
            }
            let next = dir.open_dir(comp).map_err(|e| io_failure(&here, e))?;
            let after = next.dir_metadata().map_err(|e| io_failure(&here, e))?;
            if identity(&after) != identity(&before) {
                return Err(Error::tool(format!("access denied: `{here}` changed while it was opened; try again")));
            }
            dir = next;
        }
        if at_workspace(&dir) {
            if let Some(why) = self.refuse_top_level(&name, true) {
                return Err(Error::tool(why));
            }
        }
        Ok((dir, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_between_folders() {
        let rel = |a: &str, b: &str| relative(Utf8Path::new(a), Utf8Path::new(b)).into_string();
        assert_eq!(rel("/a/ws", "/a/ws"), "");
        assert_eq!(rel("/a/ws", "/a/ws/artifacts"), "artifacts");
        assert_eq!(rel("/a/ws", "/a/data"), "../data");
        assert_eq!(rel("/a/ws", "/a/ws_evil"), "../ws_evil");
        assert_eq!(rel("/a/b/ws", "/srv"), "../../../srv");
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Utf8Path::new("/a/ws/../x/./y")), "/a/x/y");
        assert_eq!(normalize(Utf8Path::new("/../../etc")), "/etc");
    }
}
