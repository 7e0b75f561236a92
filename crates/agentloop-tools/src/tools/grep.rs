//! grep: search the files under a readable folder by regular expression and answer
//! `path:line:text`, the way `rg -n` does.
//!
//! Walking uses `walkdir` (never following symlinks, sorted by name so answers are stable),
//! names are filtered with `globset`, lines are matched with `regex` (Rust syntax). Confinement
//! is the sandbox's: the folder searched is located like any file_read path, the walk must stay
//! inside that root's real location, and every file is opened through the root's capability
//! with O_NONBLOCK and a type check on the handle, so a symlink or FIFO swapped in mid-walk is
//! skipped, never followed or waited on.
//!
//! Skipped: `.git`, anything named `.agentloop*`, symlinks, special files, binary files (a NUL
//! byte), files over `tools.max_file_bytes`, and the paper trail at the workspace's top level
//! (memory.md, trace.jsonl, ... quote earlier results; naming one as `path` searches it). The
//! walk stops at `tools.timeout`.

use super::sandbox::{self, Access, Sandbox};
use super::tool::{Call, Tool, Whole};
use super::{SideEffect, ToolEnv, ToolResult};
use agentloop_config::config::Config;
use agentloop_types::error::Error;
use camino::{Utf8Path, Utf8PathBuf};
use regex::Regex;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::time::Instant;

pub const DEFAULT_MATCHES: u64 = 50;
pub const MAX_MATCHES: u64 = 500;
pub const MAX_CONTEXT: u64 = 10;
/// Characters of a line shown; a longer match line is shown around its first match.
const LINE_CHARS: usize = 300;

struct Search {
    re: Regex,
    context: usize,
    max: usize,
    matches: usize,
    files_with_matches: usize,
    searched: usize,
    too_large: usize,
    more: bool,
    out: Vec<String>,
}

/// grep: searches files by regular expression.
pub struct Grep;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Rust regex, matched per line
    #[schemars(length(min = 1))]
    pattern: String,
    /// File or folder, relative to the workspace
    #[schemars(length(min = 1), extend("default" = "."))]
    path: Option<String>,
    /// Only files matching it: *.log, or src/**/*.rs below path
    #[schemars(length(min = 1))]
    glob: Option<String>,
    /// Lines around each match
    #[schemars(range(min = 0, max = MAX_CONTEXT), extend("default" = 0))]
    context: Option<Whole>,
    // Stop after this many matching lines (the name says it: no description).
    #[schemars(range(min = 1, max = MAX_MATCHES), extend("default" = DEFAULT_MATCHES))]
    max_matches: Option<Whole>,
    // Ignore case (the name says it: no description).
    #[schemars(extend("default" = false))]
    case_insensitive: Option<bool>,
}

impl Tool for Grep {
    const NAME: &'static str = "grep";
    const SIDE_EFFECT: SideEffect = SideEffect::Read;
    type Args = GrepArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "Search files under a folder by regular expression; answers path:line:text for each matching line (path-line-text for context lines).".into()
    }
    fn run(call: &Call, args: GrepArgs) -> ToolResult {
        run(call.env, &args).unwrap_or_else(|e| ToolResult::err(e.to_string(), false))
    }
}

fn run(env: &ToolEnv, args: &GrepArgs) -> Result<ToolResult, Error> {
    let pattern = args.pattern.as_str();
    let path = args.path.as_deref().unwrap_or(".");
    let context = args.context.map_or(0, Whole::get).min(MAX_CONTEXT) as usize;
    let max = args.max_matches.map_or(DEFAULT_MATCHES, Whole::get).clamp(1, MAX_MATCHES) as usize;
    let re = line_regex(pattern, args.case_insensitive.unwrap_or(false))?;
    let glob = args.glob.as_deref().filter(|g| !g.is_empty()).map(NameFilter::new).transpose()?;
    let sb = Sandbox::open_for(env, Access::Read, "grep")?;
    let t = sb.locate(path)?;
    let shown = t.shown();
    if let Some(why) = hidden(&t.rel) {
        return Err(Error::tool(format!("`{shown}` is not searched: {why}")));
    }
    let mut s = Search::new(re, context, max);
    let cap = env.config.tools.max_file_bytes;
    let meta = t.root.dir.metadata(t.rel_str()).map_err(|e| sandbox::io_failure(&shown, e))?;
    let mut timed_out = false;
    if meta.is_file() {
        match sandbox::read_capped(&t.root.dir, t.rel_str(), &shown, cap) {
            Ok(buf) => s.file(&shown, &buf),
            Err(e) => return Err(e.into()),
        }
    } else if meta.is_dir() {
        timed_out = s.folder(&sb, &t, glob.as_ref(), cap, env.config.tools.timeout.0)?;
    } else {
        return Err(Error::tool(format!("{shown} is not a regular file or folder")));
    }
    let mut notes = s.summary(pattern, &shown);
    if timed_out {
        notes.push(format!(
            "the search stopped at tools.timeout ({}s) with the files searched so far; narrow `path` or `glob`",
            env.config.tools.timeout.0.as_secs()
        ));
    }
    let mut text = s.out.join("\n");
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&format!("[{}]", notes.join("; ")));
    Ok(ToolResult::ok(
        text,
        json!({
            "path": shown, "matches": s.matches, "files_with_matches": s.files_with_matches,
            "files_searched": s.searched, "truncated": s.more || timed_out,
        }),
    ))
}

/// The `pattern` argument compiled, with a size limit so no pattern costs unbounded memory.
fn line_regex(pattern: &str, case_insensitive: bool) -> Result<Regex, Error> {
    regex::RegexBuilder::new(pattern).case_insensitive(case_insensitive).size_limit(1 << 22).build().map_err(|e| {
        Error::tool(format!("argument `pattern`: not a valid regular expression (Rust syntax): {e}")).with_source(e)
    })
}

/// The `glob` argument: a name pattern (`*.log`), or with a `/` a pattern for the path below
/// the folder searched (`src/**/*.rs`).
struct NameFilter {
    matcher: globset::GlobMatcher,
    by_path: bool,
}

impl NameFilter {
    fn new(glob: &str) -> Result<NameFilter, Error> {
        let matcher = globset::GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| Error::tool(format!("argument `glob`: not a valid glob: {e}")).with_source(e))?
            .compile_matcher();
        Ok(NameFilter { matcher, by_path: glob.contains('/') })
    }

    /// Whether the file at `inner` (below the folder searched) is searched.
    fn admits(&self, inner: &Utf8Path) -> bool {
        let subject = if self.by_path { inner.as_str() } else { inner.file_name().unwrap_or("") };
        self.matcher.is_match(subject)
    }
}

fn files(n: usize) -> String {
    format!("{n} {}", if n == 1 { "file" } else { "files" })
}

/// Names grep never enters or reads.
fn hidden(rel: &Utf8Path) -> Option<&'static str> {
    for c in rel.components() {
        if c.as_str() == ".git" {
            return Some("it is inside .git");
        }
        if c.as_str().starts_with(".agentloop") {
            return Some("files named .agentloop* belong to agentloop");
        }
    }
    None
}

impl Search {
    fn new(re: Regex, context: usize, max: usize) -> Search {
        Search {
            re,
            context,
            max,
            matches: 0,
            files_with_matches: 0,
            searched: 0,
            too_large: 0,
            more: false,
            out: Vec::new(),
        }
    }

    /// Searches the folder `t` file by file, in name order, until max_matches or until `timeout`
    /// has passed; true when the timeout stopped it. The walk follows the folder's real
    /// location, which must lie inside the root's, and skips what grep never reads.
    fn folder(
        &mut self,
        sb: &Sandbox,
        t: &sandbox::Target,
        glob: Option<&NameFilter>,
        cap: u64,
        timeout: std::time::Duration,
    ) -> Result<bool, Error> {
        let shown = t.shown();
        let start = t.root.real.join(&t.rel);
        let start = start.canonicalize_utf8().map_err(|e| sandbox::io_failure(&shown, e))?;
        let Ok(base) = start.strip_prefix(&t.root.real).map(Utf8Path::to_path_buf) else {
            return Err(Error::tool(format!(
                "access denied: `{shown}` leads out of the allowed folders through a symbolic link"
            )));
        };
        let deadline = Instant::now() + timeout;
        let walk = walkdir::WalkDir::new(&start)
            .follow_links(false)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| e.depth() == 0 || hidden(Utf8Path::new(&e.file_name().to_string_lossy())).is_none());
        for entry in walk {
            if self.more {
                break;
            }
            if Instant::now() > deadline {
                return Ok(true);
            }
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_file() {
                continue;
            }
            // agentloop's token stores are never searched (a hard link to one neither).
            if entry.metadata().map_or(true, |m| sb.stores.holds_real(entry.path(), &m)) {
                continue;
            }
            let Some(inner) = entry.path().strip_prefix(&start).ok().and_then(|p| Utf8Path::from_path(p)) else {
                continue;
            };
            if glob.is_some_and(|g| !g.admits(inner)) {
                continue;
            }
            let rel: Utf8PathBuf = base.join(inner);
            // The paper trail quotes earlier results; searching it would find them again.
            if t.root.is_workspace && sandbox::PAPER_TRAIL.contains(&rel.as_str()) {
                continue;
            }
            let name = t.root.show(&rel);
            match sandbox::read_capped(&t.root.dir, rel.as_str(), &name, cap) {
                Ok(buf) => self.file(&name, &buf),
                Err(agentloop_io::capfs::ReadError::TooLarge(_)) => self.too_large += 1,
                Err(_) => {}
            }
        }
        Ok(false)
    }

    /// What the search found, said after the lines: matches (or that there are more), files
    /// searched, files skipped for size.
    fn summary(&self, pattern: &str, shown: &str) -> Vec<String> {
        let mut notes = Vec::new();
        if self.more {
            notes.push(format!(
                "stopped at {} matches (max_matches); there are more: narrow `path`, `glob` or `pattern`, or raise max_matches (up to {MAX_MATCHES})",
                self.matches
            ));
        } else if self.matches == 0 {
            notes.push(format!("no matches for `{pattern}` in {shown} ({} searched)", files(self.searched)));
        } else {
            notes.push(format!(
                "{} {} in {} ({} searched)",
                self.matches,
                if self.matches == 1 { "match" } else { "matches" },
                files(self.files_with_matches),
                files(self.searched)
            ));
        }
        if self.too_large > 0 {
            notes.push(format!("{} over tools.max_file_bytes skipped", files(self.too_large)));
        }
        notes
    }
    fn file(&mut self, name: &str, buf: &[u8]) {
        if buf.contains(&0) {
            return; // binary
        }
        self.searched += 1;
        let text = String::from_utf8_lossy(buf);
        let lines: Vec<&str> = text.lines().collect();
        let mut hits = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if self.re.is_match(line) {
                if self.matches == self.max {
                    self.more = true;
                    break;
                }
                self.matches += 1;
                hits.push(i);
            }
        }
        if hits.is_empty() {
            return;
        }
        self.files_with_matches += 1;
        // Context windows, merged where they touch; `--` between groups, as grep does.
        let mut groups: Vec<(usize, usize)> = Vec::new();
        for &h in &hits {
            let (a, b) = (h.saturating_sub(self.context), (h + self.context).min(lines.len() - 1));
            match groups.last_mut() {
                Some(g) if a <= g.1 + 1 => g.1 = g.1.max(b),
                _ => groups.push((a, b)),
            }
        }
        for (a, b) in groups {
            if self.context > 0 && !self.out.is_empty() {
                self.out.push("--".into());
            }
            for (i, line) in lines.iter().enumerate().take(b + 1).skip(a) {
                let is_hit = hits.binary_search(&i).is_ok();
                let sep = if is_hit { ':' } else { '-' };
                self.out.push(format!("{name}{sep}{}{sep}{}", i + 1, self.clip(line, is_hit)));
            }
        }
    }

    /// A long line shown around its first match (or from its start), marked where it is cut.
    fn clip(&self, line: &str, is_hit: bool) -> String {
        let n = line.chars().count();
        if n <= LINE_CHARS {
            return line.to_string();
        }
        let at = if is_hit { self.re.find(line).map(|m| line[..m.start()].chars().count()).unwrap_or(0) } else { 0 };
        let start = at.saturating_sub(LINE_CHARS / 3).min(n - LINE_CHARS);
        let mut s: String = line.chars().skip(start).take(LINE_CHARS).collect();
        if start > 0 {
            s.insert(0, '…');
        }
        if start + LINE_CHARS < n {
            s.push('…');
        }
        s
    }
}
