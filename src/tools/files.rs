//! file_read, file_write and list_dir, confined to allowed folders.
//!
//! Confinement is capability-based, not string-based: each allowed folder is opened once as a
//! `cap_std::fs::Dir` and every access resolves the remaining path inside it component by
//! component (openat with no-follow checks), so `..`, absolute paths, symlinks pointing out
//! (including one swapped in between a check and the use) and look-alike prefixes such as
//! `work` vs `work_evil` cannot reach outside. The only string step picks which allowed folder a
//! path belongs to, comparing whole path components.

use super::{ToolEnv, ToolResult};
use camino::{Utf8Component, Utf8Path, Utf8PathBuf};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use serde_json::{json, Value};
use std::io::{Read, Write};

#[derive(Clone, Copy, PartialEq)]
enum Access {
    Read,
    Write,
}

/// Allowed roots for an access: reads see the workspace, skill folders and `tools.read_paths`;
/// writes see artifacts/ and `tools.write_paths`.
fn roots(env: &ToolEnv, access: Access) -> Vec<Utf8PathBuf> {
    let abs = |p: &Utf8Path| crate::workspace::resolve_in(env.root, p);
    let mut out = Vec::new();
    match access {
        Access::Read => {
            out.push(env.root.to_path_buf());
            out.extend(env.config.tools.read_paths.iter().map(|p| abs(p)));
            out.extend(env.config.tools.write_paths.iter().map(|p| abs(p)));
            out.extend(env.skills.dirs());
        }
        Access::Write => {
            out.push(env.root.join("artifacts"));
            out.extend(env.config.tools.write_paths.iter().map(|p| abs(p)));
        }
    }
    out.into_iter().filter_map(|p| p.canonicalize_utf8().ok()).collect()
}

/// Resolves `.` and `..` lexically (only to pick the allowed folder; the open itself is
/// confined by the capability, so a symlink cannot turn this into an escape).
fn normalize(p: &Utf8Path) -> Utf8PathBuf {
    let mut out = Utf8PathBuf::new();
    for c in p.components() {
        match c {
            Utf8Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            Utf8Component::CurDir => {}
            other => out.push(other.as_str()),
        }
    }
    out
}

/// Finds the allowed root containing `requested` and opens it; returns the root dir and the
/// path relative to it. Relative paths are taken from the workspace.
fn locate(env: &ToolEnv, requested: &str, access: Access) -> Result<(Dir, Utf8PathBuf, Utf8PathBuf), String> {
    if requested.contains('\0') {
        return Err("the path contains a NUL byte".into());
    }
    let ws = env.root.canonicalize_utf8().map_err(|e| format!("cannot resolve the workspace: {e}"))?;
    let req = Utf8Path::new(requested);
    let full = normalize(&if req.is_absolute() { req.to_path_buf() } else { ws.join(req) });
    let roots = roots(env, access);
    // Longest matching root first, so artifacts/ wins over the workspace.
    let mut best: Option<(&Utf8PathBuf, Utf8PathBuf)> = None;
    for root in &roots {
        if let Ok(rel) = full.strip_prefix(root) {
            if best.as_ref().is_none_or(|(b, _)| root.as_str().len() > b.as_str().len()) {
                best = Some((root, rel.to_path_buf()));
            }
        }
    }
    let verb = if access == Access::Read { "read" } else { "write" };
    let Some((root, rel)) = best else {
        return Err(format!(
            "access denied: {requested} is outside the folders this tool may {verb} ({})",
            roots.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ")
        ));
    };
    if rel.components().any(|c| matches!(c, Utf8Component::ParentDir)) {
        return Err(format!("access denied: {requested} climbs out with `..`"));
    }
    let dir = Dir::open_ambient_dir(root, ambient_authority()).map_err(|e| format!("cannot open {root}: {e}"))?;
    Ok((dir, root.clone(), rel))
}

fn deny(requested: &str, e: std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("{requested}: no such file or folder"),
        std::io::ErrorKind::PermissionDenied => format!("access denied: {requested}: {e}"),
        _ => format!("access denied or failed: {requested}: {e}"),
    }
}

pub fn file_read(env: &ToolEnv, args: &Value) -> ToolResult {
    let path = args["path"].as_str().unwrap_or_default();
    let (dir, root, rel) = match locate(env, path, Access::Read) {
        Ok(x) => x,
        Err(e) => return ToolResult::err(e, false),
    };
    let rel_s = if rel.as_str().is_empty() { "." } else { rel.as_str() };
    // Only regular files: a FIFO or a device would block or never end.
    match dir.metadata(rel_s) {
        Ok(m) if m.is_dir() => return ToolResult::err(format!("{path} is a folder; use list_dir"), false),
        Ok(m) if !m.is_file() => return ToolResult::err(format!("{path} is not a regular file"), false),
        Ok(_) => {}
        Err(e) => return ToolResult::err(deny(path, e), false),
    }
    let file = match dir.open(rel_s) {
        Ok(f) => f,
        Err(e) => return ToolResult::err(deny(path, e), false),
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return ToolResult::err(deny(path, e), false),
    };
    if meta.is_dir() {
        return ToolResult::err(format!("{path} is a folder; use list_dir"), false);
    }
    let cap = env.config.tools.max_file_bytes;
    let mut buf = Vec::new();
    if let Err(e) = file.take(cap + 1).read_to_end(&mut buf) {
        return ToolResult::err(deny(path, e), true);
    }
    if buf.len() as u64 > cap {
        return ToolResult::err(format!("{path} is larger than tools.max_file_bytes ({cap} bytes)"), false);
    }
    let text = match String::from_utf8(buf) {
        Ok(t) => t,
        Err(_) => return ToolResult::err(format!("{path} is not UTF-8 text"), false),
    };
    let size = text.len();
    let text = match args.get("max_length").and_then(Value::as_u64) {
        Some(n) => text.chars().take(n as usize).collect(),
        None => text,
    };
    ToolResult::ok(text, json!({"path": root.join(&rel), "size_bytes": size}))
}

pub fn file_write(env: &ToolEnv, args: &Value) -> ToolResult {
    let path = args["path"].as_str().unwrap_or_default();
    let content = args["content"].as_str().unwrap_or_default();
    let append = args.get("mode").and_then(Value::as_str) == Some("append");
    let (dir, root, rel) = match locate(env, path, Access::Write) {
        Ok(x) => x,
        Err(e) => return ToolResult::err(e, false),
    };
    if rel.as_str().is_empty() || rel.file_name().is_none() {
        return ToolResult::err(format!("{path} names a folder, not a file"), false);
    }
    if let Some(parent) = rel.parent().filter(|p| !p.as_str().is_empty()) {
        if let Err(e) = dir.create_dir_all(parent) {
            return ToolResult::err(deny(path, e), false);
        }
    }
    if let Ok(m) = dir.symlink_metadata(rel.as_str()) {
        if !m.is_file() && !m.is_symlink() {
            return ToolResult::err(format!("{path} exists and is not a regular file"), false);
        }
    }
    if append {
        if let Ok(m) = dir.metadata(rel.as_str()) {
            if !m.is_file() {
                return ToolResult::err(format!("{path} is not a regular file"), false);
            }
        }
    }
    let result = if append {
        dir.open_with(rel.as_str(), OpenOptions::new().append(true).create(true)).and_then(|mut f| {
            f.write_all(content.as_bytes())?;
            f.sync_data()
        })
    } else {
        // Atomic inside the capability: temp file beside the target, then rename.
        let name = rel.file_name().unwrap_or("file");
        let tmp = rel.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        dir.open_with(tmp.as_str(), OpenOptions::new().write(true).create(true).truncate(true))
            .and_then(|mut f| {
                f.write_all(content.as_bytes())?;
                f.sync_all()
            })
            .and_then(|_| dir.rename(tmp.as_str(), &dir, rel.as_str()))
            .inspect_err(|_| {
                let _ = dir.remove_file(tmp.as_str());
            })
    };
    if let Err(e) = result {
        return ToolResult::err(deny(path, e), false);
    }
    let ws = env.root.canonicalize_utf8().unwrap_or_else(|_| env.root.to_path_buf());
    let full = root.join(&rel);
    let shown = full.strip_prefix(&ws).map(|p| p.to_string()).unwrap_or_else(|_| full.to_string());
    let mut r = ToolResult::ok(
        format!("wrote {} characters to {shown}{}", content.chars().count(), if append { " (appended)" } else { "" }),
        json!({"path": shown, "size_bytes": content.len(), "mode": if append { "append" } else { "overwrite" }}),
    );
    r.artifacts.push(shown);
    r
}

pub fn list_dir(env: &ToolEnv, args: &Value) -> ToolResult {
    let path = args.get("path").and_then(Value::as_str).unwrap_or(".");
    let (dir, _, rel) = match locate(env, path, Access::Read) {
        Ok(x) => x,
        Err(e) => return ToolResult::err(e, false),
    };
    let sub = if rel.as_str().is_empty() {
        match dir.try_clone() {
            Ok(d) => d,
            Err(e) => return ToolResult::err(deny(path, e), false),
        }
    } else {
        match dir.open_dir(rel.as_str()) {
            Ok(d) => d,
            Err(e) => return ToolResult::err(deny(path, e), false),
        }
    };
    let entries = match sub.entries() {
        Ok(e) => e,
        Err(e) => return ToolResult::err(deny(path, e), false),
    };
    let mut names = Vec::new();
    for entry in entries.flatten().take(env.config.skills.max_entries) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".agentloop") {
            continue;
        }
        let kind = match entry.file_type() {
            Ok(t) if t.is_dir() => "/",
            Ok(t) if t.is_symlink() => "@",
            _ => "",
        };
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        names.push((format!("{name}{kind}"), size));
    }
    names.sort();
    let text = names
        .iter()
        .map(|(n, s)| if n.ends_with('/') { n.clone() } else { format!("{n}\t{s}") })
        .collect::<Vec<_>>()
        .join("\n");
    ToolResult::ok(text, json!({"entries": names.len()}))
}
