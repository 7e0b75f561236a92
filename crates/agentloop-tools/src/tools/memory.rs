//! Long-term memory across runs: memory_save, memory_search, memory_read.
//!
//! Off by default (`tools.memory.enabled`); the loop recalls and remembers on its own
//! (`memory.enabled`). The store, its layout and its BM25 ranking are [`agentloop_workspace::longterm`].

use super::tool::{Call, Tool, Whole};
use super::{SideEffect, ToolEnv, ToolResult};
use agentloop_config::config::Config;
use agentloop_types::error::{Error, Result};
use agentloop_workspace::longterm::{plain, New, Store};
use camino::Utf8Path;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

fn store(env: &ToolEnv) -> Result<Store> {
    Store::open(env.config, env.root).ok_or_else(|| Error::tool("no memory folder: set memory.dir"))
}

fn enabled(cfg: &Config) -> bool {
    cfg.tools.memory.enabled
}

/// memory_save: saves a note under a topic.
pub struct MemorySave;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySaveArgs {
    /// Topic id, e.g. projects
    #[schemars(pattern(r"^[a-z0-9_-]{1,64}$"))]
    topic: String,
    /// Title of the note
    title: String,
    /// The note
    content: String,
    /// Section id (default main); saving a section again replaces it
    #[schemars(pattern(r"^[a-z0-9_-]{1,64}$"))]
    // Offered by the schema and accepted; the store keeps one note per id and has no sections.
    #[allow(dead_code)]
    section: Option<String>,
    /// Update this note instead of creating one
    #[schemars(pattern(r"^[a-z0-9_-]{1,64}$"))]
    content_id: Option<String>,
    // No description: the name says it.
    keywords: Option<Vec<String>>,
}

impl Tool for MemorySave {
    const NAME: &'static str = "memory_save";
    const SIDE_EFFECT: SideEffect = SideEffect::Write;
    type Args = MemorySaveArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "Save a note to long-term memory (kept across runs), under a topic.".into()
    }
    fn enabled(cfg: &Config) -> bool {
        enabled(cfg)
    }
    fn run(call: &Call, args: MemorySaveArgs) -> ToolResult {
        save_tool(call.env, args)
    }
}

fn save_tool(env: &ToolEnv, args: MemorySaveArgs) -> ToolResult {
    let run = || -> Result<ToolResult> {
        let store = store(env)?;
        let n = New {
            topic: args.topic,
            content_id: args.content_id,
            title: args.title,
            content: args.content,
            keywords: args.keywords.unwrap_or_default(),
            provenance: Default::default(),
            ttl: None,
        };
        let id = store.add(&n)?;
        Ok(ToolResult::ok(format!("saved {id}"), json!({"id": id})))
    };
    run().unwrap_or_else(|e| ToolResult::err(e.detail(), false))
}

/// memory_search: finds notes by keywords.
pub struct MemorySearch;

// The fields have no descriptions: their names say what they are.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearchArgs {
    #[schemars(length(min = 1))]
    query: String,
    topic: Option<String>,
    #[schemars(range(min = 1, max = 50))]
    limit: Option<Whole>,
}

impl Tool for MemorySearch {
    const NAME: &'static str = "memory_search";
    const SIDE_EFFECT: SideEffect = SideEffect::Read;
    type Args = MemorySearchArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "Search long-term memory by keywords; returns matching notes (topic, content_id, summary).".into()
    }
    fn enabled(cfg: &Config) -> bool {
        enabled(cfg)
    }
    fn run(call: &Call, args: MemorySearchArgs) -> ToolResult {
        search_tool(call.env, &args)
    }
}

fn search_tool(env: &ToolEnv, args: &MemorySearchArgs) -> ToolResult {
    let run = || -> Result<ToolResult> {
        let store = store(env)?;
        let query = args.query.as_str();
        let limit = usize::try_from(args.limit.map_or(5, Whole::get)).unwrap_or(usize::MAX);
        let only = args.topic.as_deref();
        let mut entries = store.entries()?;
        entries.retain(|e| only.is_none_or(|t| e.topic == t));
        let index = agentloop_workspace::longterm::Index::build(entries);
        let found: Vec<Value> = index
            .search(query, limit)
            .into_iter()
            .map(|(e, score)| json!({"id": e.id, "summary": e.summary, "provenance": e.provenance, "score": (score * 100.0).round() / 100.0}))
            .collect();
        let text = if found.is_empty() {
            "no matching memories".to_string()
        } else {
            serde_json::to_string_pretty(&found).unwrap_or_default()
        };
        Ok(ToolResult::ok(text, json!({"matches": found.len()})))
    };
    run().unwrap_or_else(|e| ToolResult::err(e.detail(), false))
}

/// memory_read: one note in full.
pub struct MemoryRead;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryReadArgs {
    topic: String,
    content_id: String,
    /// One section only: a stored section's id (e.g. main) or a `## heading` in the note's text (case does not matter)
    section: Option<String>,
}

impl Tool for MemoryRead {
    const NAME: &'static str = "memory_read";
    const SIDE_EFFECT: SideEffect = SideEffect::Read;
    type Args = MemoryReadArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "Read one long-term memory note in full, or one section of it.".into()
    }
    fn enabled(cfg: &Config) -> bool {
        enabled(cfg)
    }
    fn run(call: &Call, args: MemoryReadArgs) -> ToolResult {
        read_tool(call.env, &args)
    }
}

fn read_tool(env: &ToolEnv, args: &MemoryReadArgs) -> ToolResult {
    let run = || -> Result<ToolResult> {
        let store = store(env)?;
        let (topic, id) = (args.topic.as_str(), args.content_id.as_str());
        plain(topic, "topic").and_then(|_| plain(id, "content_id"))?;
        match store.show(&format!("{topic}/{id}"))? {
            None => Err(Error::tool(format!("no memory {topic}/{id}"))),
            Some(v) => match args.section.as_deref() {
                None => Ok(ToolResult::ok(
                    serde_json::to_string_pretty(&v).unwrap_or_default(),
                    json!({"id": format!("{topic}/{id}")}),
                )),
                Some(want) => {
                    let (name, text) = section_of(&v, want).ok_or_else(|| {
                        let have = sections(&v);
                        let have = if have.is_empty() { "none".into() } else { have.join(", ") };
                        Error::tool(format!("memory {topic}/{id} has no section `{want}`; its sections: {have}"))
                    })?;
                    Ok(ToolResult::ok(text, json!({"id": format!("{topic}/{id}"), "section": name})))
                }
            },
        }
    };
    run().unwrap_or_else(|e| ToolResult::err(e.detail(), false))
}

/// One section of a stored note: a section the store keeps (by id or title), else a `## heading`
/// in a stored section's text, up to the next heading of the same or a higher level. None when
/// there is no such section ([`sections`] lists those there are, so the model can pick one).
pub fn section_of(doc: &Value, want: &str) -> Option<(String, String)> {
    let want_l = want.trim().trim_start_matches('#').trim().to_lowercase();
    let sections = doc["sections"].as_array().cloned().unwrap_or_default();
    for s in &sections {
        let id = s["section_id"].as_str().unwrap_or("");
        let title = s["title"].as_str().unwrap_or("");
        if id.to_lowercase() == want_l || title.to_lowercase() == want_l {
            return Some((id.to_string(), s["content"].as_str().unwrap_or("").to_string()));
        }
    }
    for s in &sections {
        let text = s["content"].as_str().unwrap_or("");
        let mut found: Option<(usize, String, Vec<&str>)> = None;
        for (level, line, heading) in headed(text) {
            match (&mut found, heading) {
                (Some((l, _, _)), Some(_)) if level <= *l => break,
                (Some((_, _, body)), _) => body.push(line),
                (None, Some(h)) if h.to_lowercase() == want_l => found = Some((level, h.to_string(), vec![line])),
                (None, _) => {}
            }
        }
        if let Some((_, h, body)) = found {
            return Some((h, body.join("\n").trim_end().to_string()));
        }
    }
    None
}

/// The sections a note has, for the model to pick from: each stored section's id, then the
/// `## headings` in the sections' text.
pub fn sections(doc: &Value) -> Vec<String> {
    let sections = doc["sections"].as_array().cloned().unwrap_or_default();
    let mut names: Vec<String> = sections.iter().map(|s| s["section_id"].as_str().unwrap_or("").to_string()).collect();
    for s in &sections {
        for (level, _, heading) in headed(s["content"].as_str().unwrap_or("")) {
            if let Some(h) = heading {
                names.push(format!("{} {h}", "#".repeat(level)));
            }
        }
    }
    names
}

/// Each line of a text with its `#` count and, for a `## heading` or deeper, the heading.
fn headed(text: &str) -> impl Iterator<Item = (usize, &str, Option<&str>)> {
    text.lines().map(|line| {
        let level = line.chars().take_while(|c| *c == '#').count();
        (level, line, (level >= 2 && line[level..].starts_with(' ')).then(|| line[level..].trim()))
    })
}

#[cfg(test)]
mod tests {
    use super::{section_of, sections};
    use serde_json::json;

    #[test]
    fn a_section_is_a_stored_one_or_a_heading_up_to_the_next_of_its_level() {
        let doc = json!({"sections": [{"section_id": "main", "title": "main",
            "content": "intro\n## Setup\nstep one\n### detail\nmore\n## Usage\nrun it\n"}]});
        assert_eq!(section_of(&doc, "main").unwrap().0, "main");
        let (name, text) = section_of(&doc, "setup").unwrap();
        assert_eq!((name.as_str(), text.as_str()), ("Setup", "## Setup\nstep one\n### detail\nmore"));
        assert_eq!(section_of(&doc, "## Usage").unwrap().1, "## Usage\nrun it");
        assert_eq!(section_of(&doc, "nope"), None);
        assert_eq!(sections(&doc), ["main", "## Setup", "### detail", "## Usage"]);
    }
}
