//! Long-term memory across runs (seed 002 §7): memory_save, memory_search, memory_read.
//!
//! Off by default (`tools.memory.enabled`). The store is a folder (`tools.memory.dir`, default
//! `$XDG_DATA_HOME/agentloop/memory`) in the seed's layout: `topics.json`, one
//! `index_<topic>.json` per topic, and `<topic>/content_<n>.json` files with sections. Topic
//! and content ids are plain names, so a path never leaves the store; every write is atomic.

use super::{ToolEnv, ToolResult};
use crate::fs;
use camino::Utf8PathBuf;
use serde_json::{json, Value};

pub fn store_dir(env: &ToolEnv) -> Option<Utf8PathBuf> {
    if let Some(d) = &env.config.tools.memory.dir {
        return Some(crate::workspace::resolve_in(env.root, d));
    }
    let base = crate::config::xdg_dir("XDG_DATA_HOME", ".local/share")?;
    Some(base.join("agentloop/memory"))
}

fn plain(id: &str, what: &str) -> Result<(), String> {
    if id.is_empty()
        || id.len() > 64
        || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        return Err(format!("{what} `{id}` must be 1-64 characters of a-z, 0-9, _ and -"));
    }
    Ok(())
}

fn load(path: &camino::Utf8Path, default: Value) -> Result<Value, String> {
    match fs::read_optional(path) {
        Ok(Some(t)) => serde_json::from_str(&t).map_err(|e| format!("{path} is not valid JSON: {e}")),
        Ok(None) => Ok(default),
        Err(e) => Err(e.message),
    }
}

fn save(path: &camino::Utf8Path, v: &Value) -> Result<(), String> {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p).map_err(|e| e.message)?;
    }
    fs::write_atomic(path, (serde_json::to_string_pretty(v).expect("json") + "\n").as_bytes()).map_err(|e| e.message)
}

fn keywords(text: &str) -> Vec<String> {
    let mut words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 3)
        .map(|w| w.to_lowercase())
        .collect();
    words.sort();
    words.dedup();
    words.truncate(12);
    words
}

pub fn save_tool(env: &ToolEnv, args: &Value) -> ToolResult {
    match save_inner(env, args) {
        Ok(r) => r,
        Err(e) => ToolResult::err(e, false),
    }
}

fn save_inner(env: &ToolEnv, args: &Value) -> Result<ToolResult, String> {
    let dir = store_dir(env).ok_or("no memory folder: set tools.memory.dir")?;
    let topic = args["topic"].as_str().unwrap_or("");
    plain(topic, "topic")?;
    let title = args["title"].as_str().unwrap_or("").trim();
    let content = args["content"].as_str().unwrap_or("");
    let section = args.get("section").and_then(Value::as_str).unwrap_or("main");
    plain(section, "section")?;
    let now = crate::clock::now_rfc3339();
    let mut topics = load(&dir.join("topics.json"), json!({"version": "1.0.0", "topics": []}))?;
    let index_path = dir.join(format!("index_{topic}.json"));
    let mut index = load(&index_path, json!({"topic_id": topic, "version": "1.0.0", "entries": []}))?;
    let entries = index["entries"].as_array().cloned().unwrap_or_default();
    let content_id = match args.get("content_id").and_then(Value::as_str) {
        Some(id) => {
            plain(id, "content_id")?;
            id.to_string()
        }
        None => format!(
            "content_{:03}",
            entries.iter().filter_map(|e| e["content_file"].as_str()).collect::<std::collections::BTreeSet<_>>().len()
                + 1
        ),
    };
    let content_path = dir.join(topic).join(format!("{content_id}.json"));
    let mut doc = load(
        &content_path,
        json!({"content_id": content_id, "topic_id": topic, "title": title, "created_at": now, "metadata": {}, "sections": []}),
    )?;
    doc["updated_at"] = json!(now);
    if !title.is_empty() {
        doc["title"] = json!(title);
    }
    if let Some(tags) = args.get("keywords") {
        doc["metadata"]["tags"] = tags.clone();
    }
    let sections = doc["sections"].as_array_mut().ok_or("content file has no sections list")?;
    sections.retain(|s| s["section_id"] != section);
    sections.push(json!({"section_id": section, "title": section, "content": content, "updated_at": now}));
    save(&content_path, &doc)?;
    let mut kw: Vec<String> = args
        .get("keywords")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|k| k.as_str().map(str::to_lowercase)).collect())
        .unwrap_or_default();
    kw.extend(keywords(&format!("{title} {content}")));
    kw.dedup();
    let file = format!("{content_id}.json");
    let mut entries: Vec<Value> =
        entries.into_iter().filter(|e| !(e["content_file"] == file.as_str() && e["section_id"] == section)).collect();
    entries.push(json!({
        "index_id": format!("idx_{content_id}_{section}"),
        "content_file": file,
        "section_id": section,
        "summary": format!("{title} - {}", content.chars().take(120).collect::<String>()),
        "keywords": kw,
        "created_at": now,
    }));
    index["entries"] = json!(entries);
    index["last_updated"] = json!(now);
    save(&index_path, &index)?;
    let list = topics["topics"].as_array_mut().ok_or("topics.json has no topics list")?;
    list.retain(|t| t["id"] != topic);
    list.push(json!({"id": topic, "name": topic, "description": "", "index_file": format!("index_{topic}.json"), "content_dir": format!("{topic}/"), "entry_count": entries.len()}));
    topics["last_updated"] = json!(now);
    save(&dir.join("topics.json"), &topics)?;
    Ok(ToolResult::ok(
        format!("saved {topic}/{content_id} section {section}"),
        json!({"topic": topic, "content_id": content_id, "section": section}),
    ))
}

pub fn search_tool(env: &ToolEnv, args: &Value) -> ToolResult {
    let Some(dir) = store_dir(env) else {
        return ToolResult::err("no memory folder: set tools.memory.dir", false);
    };
    let query: Vec<String> = args["query"].as_str().unwrap_or("").split_whitespace().map(str::to_lowercase).collect();
    let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(5) as usize;
    let only = args.get("topic").and_then(Value::as_str);
    let topics = match load(&dir.join("topics.json"), json!({"topics": []})) {
        Ok(t) => t,
        Err(e) => return ToolResult::err(e, false),
    };
    let mut hits: Vec<(usize, Value)> = Vec::new();
    for t in topics["topics"].as_array().cloned().unwrap_or_default() {
        let id = t["id"].as_str().unwrap_or("");
        if plain(id, "topic").is_err() || only.is_some_and(|o| o != id) {
            continue;
        }
        let Ok(index) = load(&dir.join(format!("index_{id}.json")), json!({"entries": []})) else {
            continue;
        };
        for e in index["entries"].as_array().cloned().unwrap_or_default() {
            let hay = format!("{} {}", e["summary"].as_str().unwrap_or(""), e["keywords"]).to_lowercase();
            let score = query.iter().filter(|q| hay.contains(q.as_str())).count();
            if score > 0 {
                hits.push((score, json!({"topic": id, "content_id": e["content_file"].as_str().unwrap_or("").trim_end_matches(".json"), "section": e["section_id"], "summary": e["summary"], "score": score})));
            }
        }
    }
    hits.sort_by_key(|h| std::cmp::Reverse(h.0));
    let found: Vec<Value> = hits.into_iter().take(limit).map(|(_, v)| v).collect();
    let text = if found.is_empty() {
        "no matching memories".to_string()
    } else {
        serde_json::to_string_pretty(&found).unwrap_or_default()
    };
    ToolResult::ok(text, json!({"matches": found.len()}))
}

pub fn read_tool(env: &ToolEnv, args: &Value) -> ToolResult {
    let Some(dir) = store_dir(env) else {
        return ToolResult::err("no memory folder: set tools.memory.dir", false);
    };
    let topic = args["topic"].as_str().unwrap_or("");
    let id = args["content_id"].as_str().unwrap_or("");
    if let Err(e) = plain(topic, "topic").and_then(|_| plain(id, "content_id")) {
        return ToolResult::err(e, false);
    }
    match load(&dir.join(topic).join(format!("{id}.json")), Value::Null) {
        Ok(Value::Null) => ToolResult::err(format!("no memory {topic}/{id}"), false),
        Ok(v) => ToolResult::ok(
            serde_json::to_string_pretty(&v).unwrap_or_default(),
            json!({"topic": topic, "content_id": id}),
        ),
        Err(e) => ToolResult::err(e, false),
    }
}
