//! file_read, file_write and list_dir, confined by the sandbox (see `sandbox.rs` for the rules:
//! capability-based opens, roots matched by identity, no writes through links or to the paper
//! trail, workspace-relative names in every message).
//!
//! file_read pages by lines: `offset` and `limit` pick a window, the output never passes
//! `tools.output_cap`, and a partial read ends with the exact call that reads on, so a file of
//! any length (up to `tools.max_file_bytes`) can be read without spilling a copy.

use super::paging::{self, window};
use super::sandbox::{self, Access, Sandbox};
use super::{ToolEnv, ToolResult};
use cap_std::fs::OpenOptions;
use serde_json::{json, Value};
use std::io::Write;

pub fn file_read(env: &ToolEnv, args: &Value) -> ToolResult {
    let path = args["path"].as_str().unwrap_or_default();
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(1).max(1) as usize;
    let limit = args.get("limit").and_then(Value::as_u64).map(|n| n.max(1) as usize);
    let sb = match Sandbox::open(env, Access::Read) {
        Ok(s) => s,
        Err(e) => return ToolResult::err(e, false),
    };
    let t = match sb.locate(path) {
        Ok(t) => t,
        Err(e) => return ToolResult::err(e, false),
    };
    let shown = t.shown();
    let buf = match sandbox::read_capped(&t.root.dir, t.rel_str(), &shown, env.config.tools.max_file_bytes) {
        Ok(b) => b,
        Err(e) => return ToolResult::err(e, false),
    };
    let size = buf.len();
    let Ok(text) = String::from_utf8(buf) else {
        return ToolResult::err(format!("{shown} is not UTF-8 text"), false);
    };
    let budget = paging::budget(env.config.tools.output_cap, &shown);
    let page = match window(&text, offset, limit, budget) {
        Ok(p) => p,
        Err(total) => {
            return ToolResult::err(
                format!("argument `offset`: {offset} is past the end of {shown}, which has {total} lines"),
                false,
            )
        }
    };
    let meta = json!({
        "path": shown, "size_bytes": size, "total_lines": page.total,
        "first_line": page.first, "last_line": page.last, "next_offset": page.next(),
    });
    if page.is_whole() {
        return ToolResult::ok(page.text, meta);
    }
    let mut out = page.text.clone();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    let span = if page.first == page.last {
        format!("line {}", page.first)
    } else {
        format!("lines {}-{}", page.first, page.last)
    };
    let mut note = format!("[{span} of {} in {shown}", page.total);
    if let Some(n) = page.cut {
        note.push_str(&format!(
            " is {n} characters long; only its first {budget} are shown (grep shows the text around a match in it)"
        ));
    }
    match page.next() {
        Some(next) => {
            let lines = limit.unwrap_or_else(|| paging::lines_that_fit(&text, next, budget));
            note.push_str(&format!("; read on with {}]", paging::next_call(&shown, next, lines)));
        }
        None if page.cut.is_some() => note.push(']'),
        None => note.push_str("; end of file]"),
    }
    out.push_str(&note);
    ToolResult::ok(out, meta)
}

pub fn file_write(env: &ToolEnv, args: &Value) -> ToolResult {
    let path = args["path"].as_str().unwrap_or_default();
    let content = args["content"].as_str().unwrap_or_default();
    let append = args.get("mode").and_then(Value::as_str) == Some("append");
    match write(env, path, content, append) {
        Ok(shown) => {
            let mut r = ToolResult::ok(
                format!(
                    "wrote {} characters to {shown}{}",
                    content.chars().count(),
                    if append { " (appended)" } else { "" }
                ),
                json!({"path": shown, "size_bytes": content.len(), "mode": if append { "append" } else { "overwrite" }}),
            );
            r.artifacts.push(shown);
            r
        }
        Err(e) => ToolResult::err(e, false),
    }
}

/// Writes inside the sandbox; returns the workspace-relative name written.
fn write(env: &ToolEnv, path: &str, content: &str, append: bool) -> Result<String, String> {
    let sb = Sandbox::open(env, Access::Write)?;
    let t = sb.locate(path)?;
    let shown = t.shown();
    if t.rel.as_str().is_empty() {
        return Err(format!("`{path}` names a folder, not a file"));
    }
    let (parent, name) = sb.enter_parent(&t)?;
    sandbox::check_target(&parent, &name, &shown, append)?;
    if append {
        let mut f = sandbox::open_append(&parent, &name, &shown)?;
        f.write_all(content.as_bytes()).and_then(|_| f.sync_data()).map_err(|e| sandbox::io_error(&shown, &e))?;
        return Ok(shown);
    }
    // Atomic: a new temp file beside the target (O_EXCL, so never a planted link), then a
    // rename, which replaces a symlink itself rather than writing through it.
    let tmp = format!(".{name}.{}.tmp", std::process::id());
    let _ = parent.remove_file(&tmp);
    parent
        .open_with(&tmp, OpenOptions::new().write(true).create_new(true))
        .and_then(|mut f| {
            f.write_all(content.as_bytes())?;
            f.sync_all()
        })
        .and_then(|_| parent.rename(&tmp, &parent, &name))
        .inspect_err(|_| {
            let _ = parent.remove_file(&tmp);
        })
        .map_err(|e| sandbox::io_error(&shown, &e))?;
    Ok(shown)
}

pub fn list_dir(env: &ToolEnv, args: &Value) -> ToolResult {
    let path = args.get("path").and_then(Value::as_str).unwrap_or(".");
    let sb = match Sandbox::open(env, Access::Read) {
        Ok(s) => s,
        Err(e) => return ToolResult::err(e, false),
    };
    let t = match sb.locate(path) {
        Ok(t) => t,
        Err(e) => return ToolResult::err(e, false),
    };
    let shown = t.shown();
    let sub = if t.rel.as_str().is_empty() { t.root.dir.try_clone() } else { t.root.dir.open_dir(t.rel_str()) };
    let entries = match sub.and_then(|d| d.entries()) {
        Ok(e) => e,
        Err(e) => return ToolResult::err(sandbox::io_error(&shown, &e), false),
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
    ToolResult::ok(text, json!({"path": shown, "entries": names.len()}))
}
