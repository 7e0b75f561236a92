//! Long-term memory across runs: memory_save, memory_search, memory_read.
//!
//! Off by default (`tools.memory.enabled`); the loop recalls and remembers on its own
//! (`memory.enabled`). The store, its layout and its BM25 ranking are [`crate::longterm`].

use super::builtin::{Call, Tool, Whole};
use super::{SideEffect, ToolEnv, ToolResult};
use crate::config::Config;
use crate::longterm::{plain, New, Store};
use camino::Utf8Path;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

fn store(env: &ToolEnv) -> Result<Store, String> {
    Store::open(env.config, env.root).ok_or_else(|| "no memory folder: set memory.dir".to_string())
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
    let run = || -> Result<ToolResult, String> {
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
        let id = store.add(&n).map_err(|e| e.message)?;
        Ok(ToolResult::ok(format!("saved {id}"), json!({"id": id})))
    };
    run().unwrap_or_else(|e| ToolResult::err(e, false))
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
    let run = || -> Result<ToolResult, String> {
        let store = store(env)?;
        let query = args.query.as_str();
        let limit = usize::try_from(args.limit.map_or(5, Whole::get)).unwrap_or(usize::MAX);
        let only = args.topic.as_deref();
        let mut entries = store.entries().map_err(|e| e.message)?;
        entries.retain(|e| only.is_none_or(|t| e.topic == t));
        let index = crate::longterm::Index::build(entries);
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
    run().unwrap_or_else(|e| ToolResult::err(e, false))
}

/// memory_read: one note in full.
pub struct MemoryRead;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryReadArgs {
    topic: String,
    content_id: String,
}

impl Tool for MemoryRead {
    const NAME: &'static str = "memory_read";
    const SIDE_EFFECT: SideEffect = SideEffect::Read;
    type Args = MemoryReadArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "Read one long-term memory note in full.".into()
    }
    fn enabled(cfg: &Config) -> bool {
        enabled(cfg)
    }
    fn run(call: &Call, args: MemoryReadArgs) -> ToolResult {
        read_tool(call.env, &args)
    }
}

fn read_tool(env: &ToolEnv, args: &MemoryReadArgs) -> ToolResult {
    let run = || -> Result<ToolResult, String> {
        let store = store(env)?;
        let (topic, id) = (args.topic.as_str(), args.content_id.as_str());
        plain(topic, "topic").and_then(|_| plain(id, "content_id"))?;
        match store.show(&format!("{topic}/{id}")).map_err(|e| e.message)? {
            None => Err(format!("no memory {topic}/{id}")),
            Some(v) => Ok(ToolResult::ok(
                serde_json::to_string_pretty(&v).unwrap_or_default(),
                json!({"id": format!("{topic}/{id}")}),
            )),
        }
    };
    run().unwrap_or_else(|e| ToolResult::err(e, false))
}
