//! Long-term memory across runs (seed 002 §7): memory_save, memory_search, memory_read.
//!
//! Off by default (`tools.memory.enabled`); the loop recalls and remembers on its own
//! (`memory.enabled`). The store, its layout and its BM25 ranking are [`crate::longterm`].

use super::{ToolEnv, ToolResult};
use crate::longterm::{plain, New, Store};
use serde_json::{json, Value};

fn store(env: &ToolEnv) -> Result<Store, String> {
    Store::open(env.config, env.root).ok_or_else(|| "no memory folder: set memory.dir".to_string())
}

pub fn save_tool(env: &ToolEnv, args: &Value) -> ToolResult {
    let run = || -> Result<ToolResult, String> {
        let store = store(env)?;
        let topic = args["topic"].as_str().unwrap_or("").to_string();
        let content_id = args.get("content_id").and_then(Value::as_str).map(String::from);
        let keywords = args
            .get("keywords")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|k| k.as_str().map(String::from)).collect())
            .unwrap_or_default();
        let n = New {
            topic,
            content_id,
            title: args["title"].as_str().unwrap_or("").to_string(),
            content: args["content"].as_str().unwrap_or("").to_string(),
            keywords,
            provenance: Default::default(),
            ttl: None,
        };
        let id = store.add(&n).map_err(|e| e.message)?;
        Ok(ToolResult::ok(format!("saved {id}"), json!({"id": id})))
    };
    run().unwrap_or_else(|e| ToolResult::err(e, false))
}

pub fn search_tool(env: &ToolEnv, args: &Value) -> ToolResult {
    let run = || -> Result<ToolResult, String> {
        let store = store(env)?;
        let query = args["query"].as_str().unwrap_or("");
        let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(5) as usize;
        let only = args.get("topic").and_then(Value::as_str);
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

pub fn read_tool(env: &ToolEnv, args: &Value) -> ToolResult {
    let run = || -> Result<ToolResult, String> {
        let store = store(env)?;
        let topic = args["topic"].as_str().unwrap_or("");
        let id = args["content_id"].as_str().unwrap_or("");
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
