//! file_read, file_write and list_dir, confined by the sandbox (see `sandbox.rs` for the rules:
//! capability-based opens, roots matched by identity, no writes through links or to the paper
//! trail, workspace-relative names in every message).
//!
//! file_read pages by lines: `offset` and `limit` pick a window, the output never passes
//! `tools.output_cap`, and a partial read ends with the exact call that reads on, so a file of
//! any length (up to `tools.max_file_bytes`) can be read without spilling a copy.

use super::paging::{self, window};
use super::sandbox::{self, Access, Sandbox};
use super::tool::{Call, Tool, Whole};
use super::{SideEffect, ToolEnv, ToolResult};
use agentloop_config::config::Config;
use agentloop_types::error::Error;
use camino::Utf8Path;
use cap_std::fs::OpenOptions;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::io::Write;

/// file_read: reads a text file by lines.
pub struct FileRead;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileReadArgs {
    /// Relative to the workspace
    #[schemars(length(min = 1))]
    path: String,
    /// First line (1 = the first)
    #[schemars(range(min = 1), extend("default" = 1))]
    offset: Option<Whole>,
    /// Most lines
    #[schemars(range(min = 1))]
    limit: Option<Whole>,
    /// utf-16: byte order from its BOM, else little-endian
    #[schemars(extend("default" = "utf-8"))]
    encoding: Option<Encoding>,
}

/// file_read's and file_write's `encoding`. Variants carry no doc comments (the schema stays an enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum Encoding {
    #[serde(rename = "utf-8", alias = "utf8", alias = "UTF-8")]
    Utf8,
    #[serde(rename = "latin-1", alias = "latin1", alias = "iso-8859-1", alias = "ISO-8859-1")]
    Latin1,
    #[serde(rename = "utf-16", alias = "utf16", alias = "UTF-16")]
    Utf16,
    #[serde(rename = "utf-16le", alias = "UTF-16LE")]
    Utf16Le,
    #[serde(rename = "utf-16be", alias = "UTF-16BE")]
    Utf16Be,
}

impl Encoding {
    fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Latin1 => "latin-1",
            Encoding::Utf16 => "utf-16",
            Encoding::Utf16Le => "utf-16le",
            Encoding::Utf16Be => "utf-16be",
        }
    }
}

/// The file's bytes as text in `enc`; a byte order mark is read, never shown. The error says
/// what is wrong and which encoding might fit.
pub fn decode(buf: Vec<u8>, enc: Encoding, shown: &str) -> Result<String, Error> {
    let utf16 = |bytes: &[u8], big: bool| -> Result<String, Error> {
        if !bytes.len().is_multiple_of(2) {
            return Err(Error::tool(format!("{shown} is not UTF-16 text: it has an odd number of bytes")));
        }
        let units = bytes.chunks_exact(2).map(|c| {
            if big {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from_le_bytes([c[0], c[1]])
            }
        });
        char::decode_utf16(units).collect::<Result<String, _>>().map_err(|e| {
            Error::tool(format!("{shown} is not UTF-16{} text (an unpaired surrogate)", if big { "BE" } else { "LE" }))
                .with_told_source(e)
        })
    };
    match enc {
        Encoding::Utf8 => {
            let body = buf.strip_prefix(b"\xEF\xBB\xBF".as_slice()).map(<[u8]>::to_vec).unwrap_or(buf);
            String::from_utf8(body).map_err(|e| {
                Error::tool(format!("{shown} is not UTF-8 text; if it is text in another encoding, read it with \"encoding\": \"latin-1\" or \"utf-16\""))
                    .with_told_source(e)
            })
        }
        Encoding::Latin1 => Ok(buf.iter().map(|&b| char::from(b)).collect()),
        Encoding::Utf16 => match buf.as_slice() {
            [0xFE, 0xFF, rest @ ..] => utf16(rest, true),
            [0xFF, 0xFE, rest @ ..] => utf16(rest, false),
            rest => utf16(rest, false),
        },
        Encoding::Utf16Le => utf16(buf.strip_prefix([0xFF, 0xFE].as_slice()).unwrap_or(buf.as_slice()), false),
        Encoding::Utf16Be => utf16(buf.strip_prefix([0xFE, 0xFF].as_slice()).unwrap_or(buf.as_slice()), true),
    }
}

impl Tool for FileRead {
    const NAME: &'static str = "file_read";
    const SIDE_EFFECT: SideEffect = SideEffect::Read;
    type Args = FileReadArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "Read a text file inside the workspace (or another allowed folder), by lines (UTF-8 unless `encoding` says otherwise). A partial read ends with a note giving its line range, the total line count and the exact call that reads on.".into()
    }
    fn run(call: &Call, args: FileReadArgs) -> ToolResult {
        file_read(call.env, &args)
    }
}

/// The text as bytes in `enc`, for file_write. `bom` starts UTF-16 (the one without a stated
/// byte order) with its byte order mark, so file_read's `utf-16` reads it back whatever the
/// reader's default. The error names the first character the encoding cannot hold.
pub fn encode(text: &str, enc: Encoding, bom: bool) -> Result<Vec<u8>, Error> {
    let units = |big: bool| -> Vec<u8> {
        text.encode_utf16().flat_map(|u| if big { u.to_be_bytes() } else { u.to_le_bytes() }).collect()
    };
    Ok(match enc {
        Encoding::Utf8 => text.as_bytes().to_vec(),
        Encoding::Latin1 => {
            if let Some((at, c)) = text.chars().enumerate().find(|(_, c)| u32::from(*c) > 0xFF) {
                return Err(Error::tool(format!(
                    "argument `content`: latin-1 cannot hold {c:?} (U+{:04X}, character {}); write it with \"encoding\": \"utf-8\" or \"utf-16\"",
                    u32::from(c),
                    at + 1
                )));
            }
            text.chars().map(|c| u32::from(c) as u8).collect()
        }
        Encoding::Utf16 if bom => [0xFF, 0xFE].into_iter().chain(units(false)).collect(),
        Encoding::Utf16 | Encoding::Utf16Le => units(false),
        Encoding::Utf16Be => units(true),
    })
}

/// file_write: writes or appends to a text file.
pub struct FileWrite;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileWriteArgs {
    // No example name here: a small model copies one as the path of every file it reads.
    /// Relative to the workspace
    #[schemars(length(min = 1))]
    path: String,
    /// Text to write
    content: String,
    // Replace the file or add to its end (the enum says it: no description).
    #[schemars(extend("default" = "overwrite"))]
    mode: Option<WriteMode>,
    /// utf-16: little-endian with a byte order mark
    #[schemars(extend("default" = "utf-8"))]
    encoding: Option<Encoding>,
}

// Variants carry no doc comments: those would make the schema a oneOf instead of an enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    Overwrite,
    Append,
}

impl Tool for FileWrite {
    const NAME: &'static str = "file_write";
    const SIDE_EFFECT: SideEffect = SideEffect::Write;
    type Args = FileWriteArgs;
    fn description(cfg: &Config, root: &Utf8Path) -> String {
        write_description(cfg, root)
    }
    fn run(call: &Call, args: FileWriteArgs) -> ToolResult {
        file_write(call.env, &args)
    }
}

/// list_dir: lists a folder.
pub struct ListDir;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirArgs {
    /// Relative to the workspace
    #[schemars(extend("default" = "."))]
    path: Option<String>,
}

impl Tool for ListDir {
    const NAME: &'static str = "list_dir";
    const SIDE_EFFECT: SideEffect = SideEffect::Read;
    type Args = ListDirArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "List the entries of a folder inside the workspace (or another allowed folder).".into()
    }
    fn run(call: &Call, args: ListDirArgs) -> ToolResult {
        list_dir(call.env, args.path.as_deref().unwrap_or("."))
    }
}

/// file_write's description names where it may write, so the model is told before it tries.
fn write_description(cfg: &Config, root: &Utf8Path) -> String {
    let own = "agentloop's own files (context.md, memory.md, plan.md, decisions.md, skills.md, trace.jsonl, state.json, result.json, its config)";
    let paths = cfg.tools.allowed_paths_of("file_write").unwrap_or(&cfg.tools.write_paths);
    if paths.is_empty() {
        return format!("Write a text file anywhere in the workspace except {own}; creates parent folders.");
    }
    let ws = sandbox::absolute(root);
    let dirs: Vec<String> = paths
        .iter()
        .map(|p| sandbox::relative(&ws, &sandbox::normalize(&ws.join(p))))
        .map(|p| format!("{}/", p.as_str().trim_end_matches('/')))
        .collect();
    format!(
        "Write a text file inside {} only (a path relative to the workspace that starts with one of them), never {own}; creates parent folders.",
        dirs.join(", ")
    )
}

fn file_read(env: &ToolEnv, args: &FileReadArgs) -> ToolResult {
    let path = args.path.as_str();
    let offset = args.offset.map_or(1, Whole::get).max(1) as usize;
    let limit = args.limit.map(|n| n.get().max(1) as usize);
    let sb = match Sandbox::open_for(env, Access::Read, "file_read") {
        Ok(s) => s,
        Err(e) => return ToolResult::err(e.to_string(), false),
    };
    let t = match sb.locate(path) {
        Ok(t) => t,
        Err(e) => return ToolResult::err(e.to_string(), false),
    };
    let shown = t.shown();
    let buf = match sandbox::read_capped(&t.root.dir, t.rel_str(), &shown, env.config.tools.max_file_bytes) {
        Ok(b) => b,
        Err(e) => return ToolResult::err(e.to_string(), false),
    };
    let size = buf.len();
    let enc = args.encoding.unwrap_or(Encoding::Utf8);
    let text = match decode(buf, enc, &shown) {
        Ok(t) => t,
        Err(e) => return ToolResult::err(e.to_string(), false),
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
    let mut meta = json!({
        "path": shown, "size_bytes": size, "total_lines": page.total,
        "first_line": page.first, "last_line": page.last, "next_offset": page.next(),
    });
    if enc != Encoding::Utf8 {
        meta["encoding"] = json!(enc.name());
    }
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
            let mut call = paging::next_call(&shown, next, lines);
            if enc != Encoding::Utf8 {
                // The call that reads on reads the same way.
                call.truncate(call.len() - 1);
                call.push_str(&format!(", \"encoding\": \"{}\"}}", enc.name()));
            }
            note.push_str(&format!("; read on with {call}]"));
        }
        None if page.cut.is_some() => note.push(']'),
        None => note.push_str("; end of file]"),
    }
    out.push_str(&note);
    ToolResult::ok(out, meta)
}

fn file_write(env: &ToolEnv, args: &FileWriteArgs) -> ToolResult {
    let (path, content) = (args.path.as_str(), args.content.as_str());
    let append = args.mode == Some(WriteMode::Append);
    let enc = args.encoding.unwrap_or(Encoding::Utf8);
    // Checked before anything is opened, so text the encoding cannot hold changes no file.
    if let Err(e) = encode(content, enc, false) {
        return ToolResult::err(e.to_string(), false);
    }
    match write(env, path, content, enc, append) {
        Ok((shown, size)) => {
            let in_enc = if enc == Encoding::Utf8 { String::new() } else { format!(" in {}", enc.name()) };
            let mut r = ToolResult::ok(
                format!(
                    "wrote {} characters to {shown}{in_enc}{}",
                    content.chars().count(),
                    if append { " (appended)" } else { "" }
                ),
                json!({"path": shown, "size_bytes": size, "mode": if append { "append" } else { "overwrite" }, "encoding": enc.name()}),
            );
            r.artifacts.push(shown);
            r
        }
        Err(e) => ToolResult::err(e.to_string(), false),
    }
}

/// Writes inside the sandbox; returns the workspace-relative name written and the bytes
/// written.
fn write(env: &ToolEnv, path: &str, content: &str, enc: Encoding, append: bool) -> Result<(String, usize), Error> {
    let sb = Sandbox::open_for(env, Access::Write, "file_write")?;
    let t = sb.locate(path)?;
    let shown = t.shown();
    if t.rel.as_str().is_empty() {
        return Err(Error::tool(format!("`{path}` names a folder, not a file")));
    }
    let (parent, name) = sb.enter_parent(&t)?;
    sandbox::check_target(&parent, &name, &shown, append)?;
    if append {
        let mut f = sandbox::open_append(&parent, &name, &shown)?;
        // A byte order mark only opens a file: appended text continues the one there.
        let empty = f.metadata().map(|m| m.len() == 0).unwrap_or(false);
        let bytes = encode(content, enc, empty)?;
        f.write_all(&bytes).and_then(|_| f.sync_data()).map_err(|e| sandbox::io_failure(&shown, e))?;
        return Ok((shown, bytes.len()));
    }
    // Blanking a file that holds something is refused: a small model copying an example with
    // an empty `content` must not destroy an input (the goal's notes.txt) without a word.
    if content.trim().is_empty() {
        if let Ok(m) = parent.symlink_metadata(&name) {
            if m.is_file() && m.len() > 0 {
                return Err(Error::tool(format!(
                    "refused: {shown} holds {} bytes and this write would leave it empty; give `content` the text to write",
                    m.len()
                )));
            }
        }
    }
    let bytes = encode(content, enc, true)?;
    // Atomic: a new temp file beside the target (O_EXCL, so never a planted link), then a
    // rename, which replaces a symlink itself rather than writing through it.
    let tmp = format!(".{name}.{}.tmp", std::process::id());
    let _ = parent.remove_file(&tmp);
    parent
        .open_with(&tmp, OpenOptions::new().write(true).create_new(true))
        .and_then(|mut f| {
            f.write_all(&bytes)?;
            f.sync_all()
        })
        .and_then(|_| parent.rename(&tmp, &parent, &name))
        .inspect_err(|_| {
            let _ = parent.remove_file(&tmp);
        })
        .map_err(|e| sandbox::io_failure(&shown, e))?;
    Ok((shown, bytes.len()))
}

/// Whether a `list_dir` result lists the workspace itself (its `path` is `.`).
pub fn lists_workspace(r: &ToolResult) -> bool {
    matches!(r.metadata.get("path").and_then(|p| p.as_str()), Some("." | "" | "./"))
}

/// The lines of a `list_dir` result (`name` or `name<TAB>size`) that are the user's entries:
/// none of agentloop's own ([`sandbox::agentloops_own`]).
pub fn user_entries(r: &ToolResult) -> Vec<&str> {
    let top = lists_workspace(r);
    r.output.lines().filter(|l| !sandbox::agentloops_own(entry_name(l).trim_end_matches('/'), top)).collect()
}

/// The name of a `list_dir` line: what comes before its size (a folder's ends with `/`).
pub fn entry_name(line: &str) -> &str {
    line.split('\t').next().unwrap_or_default()
}

fn list_dir(env: &ToolEnv, path: &str) -> ToolResult {
    let sb = match Sandbox::open_for(env, Access::Read, "list_dir") {
        Ok(s) => s,
        Err(e) => return ToolResult::err(e.to_string(), false),
    };
    let t = match sb.locate(path) {
        Ok(t) => t,
        Err(e) => return ToolResult::err(e.to_string(), false),
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
