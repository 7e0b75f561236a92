//! Long-term memory across runs: the store the memory tools, the loop and
//! `agentloop memory` share, and its BM25 ranking.
//!
//! Layout (the seed's): `topics.json`; one `index_<topic>.json` per topic whose entries carry the
//! summary, keywords, a content excerpt (so search reads the indexes only), provenance (run id,
//! step, artifact) and an optional expiry; `<topic>/<content_id>.json` with the full sections.
//! Topic and content ids are plain names (`[a-z0-9_-]{1,64}`), so a path never leaves the store;
//! every write is atomic, and the read-modify-write of an index holds an exclusive lock on
//! `.store.lock`, so runs finishing at once (several `serve` workers, overlapping cron jobs) do
//! not lose each other's entries. Entries the loop writes have ids derived from the run and
//! step, so writing one again (a phase replayed after a crash) replaces it instead of adding a
//! copy.

use agentloop_config::config::Config;
use agentloop_io::fs;
use agentloop_types::error::{Error, Result};
use agentloop_types::error::{Kind, ResultExt};
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Where a memory came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
    /// What the memory answers: the open question or interest `dream --explore` explored
    /// (a memory id, or `dream.interests`), and the question itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
}

impl Provenance {
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(r) = &self.run_id {
            parts.push(format!("run {r}"));
        }
        if let Some(s) = self.step {
            parts.push(format!("step {s}"));
        }
        if let Some(a) = &self.artifact {
            parts.push(a.clone());
        }
        if let Some(q) = &self.question {
            parts.push(format!("exploring \"{q}\""));
        }
        parts.join(", ")
    }
}

/// One memory: an index entry of the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// `topic/content_id`
    pub id: String,
    pub topic: String,
    pub summary: String,
    #[serde(default)]
    pub keywords: Vec<String>,
    /// The content (or its first 2,000 characters; the content file has all of it).
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub provenance: Provenance,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// A new memory to write.
#[derive(Debug, Clone, Default)]
pub struct New {
    pub topic: String,
    /// None: the next free `content_NNN`.
    pub content_id: Option<String>,
    pub title: String,
    pub content: String,
    pub keywords: Vec<String>,
    pub provenance: Provenance,
    pub ttl: Option<std::time::Duration>,
}

/// A workspace's own store (`memory.scope: workspace`), below the names the file tools never
/// touch.
pub const WORKSPACE_DIR: &str = ".agentloop/memory";

pub struct Store {
    pub dir: Utf8PathBuf,
    /// The workspace a store inside it lives in: it is never written or read through a link
    /// (a linked `.agentloop` would hand it another project's memories).
    inside: Option<Utf8PathBuf>,
}

/// `[a-z0-9_-]{1,64}`: ids that can never name a path outside the store.
pub fn plain(id: &str, what: &str) -> Result<()> {
    if id.is_empty()
        || id.len() > 64
        || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        return Err(Error::usage(format!("{what} `{id}` must be 1-64 characters of a-z, 0-9, _ and -")));
    }
    Ok(())
}

/// The most of one store file read (an index holds up to 2,000 characters per entry).
const MAX_STORE_FILE: u64 = 256 << 20;

fn parse(path: &Utf8Path, text: Option<String>, default: Value) -> Result<Value> {
    match text {
        Some(t) => serde_json::from_str(&t).map_err(|e| {
            Error::data(format!("{path} is not valid JSON"))
                .with_hint("fix or remove the file; the rest of the store is unaffected")
                .with_source(e)
        }),
        None => Ok(default),
    }
}

fn save(path: &Utf8Path, v: &Value) -> Result<()> {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p)?;
    }
    fs::write_atomic(path, (agentloop_types::json::to_string_pretty(v) + "\n").as_bytes())
}

/// Words that say nothing about a memory (and would make every query touch every entry).
const STOP: &[&str] = &[
    "the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "had", "her", "was", "one", "our", "out",
    "has", "have", "his", "how", "its", "may", "new", "now", "old", "see", "two", "way", "who", "did", "get", "let",
    "she", "too", "use", "this", "that", "with", "from", "they", "them", "then", "than", "what", "when", "where",
    "which", "will", "would", "there", "their", "into", "been", "were", "also", "each", "only", "some", "such",
    "about", "after", "before", "these", "those", "should", "could",
];

/// Words worth indexing: lower-case, alphanumeric, longer than 2 characters, not a stop word.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 2)
        .map(|w| w.to_lowercase())
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect()
}

fn keywords_of(text: &str) -> Vec<String> {
    let mut w: Vec<String> = words(text).into_iter().filter(|w| w.chars().count() > 3).collect();
    w.sort();
    w.dedup();
    w.truncate(12);
    w
}

#[derive(Default)]
struct Words;

impl bm25::Tokenizer for Words {
    fn tokenize(&self, text: &str) -> Vec<String> {
        words(text).into_iter().map(|w| stem(&w)).collect()
    }
}

/// A word's plain English stem, so a search for "deploy keys" finds "Deploys" and "key": the
/// plural and verb endings are cut (`-ies` to `-y`, `-s`, `-ing`, `-ed`), nothing else. The index
/// and every query are cut alike.
pub fn stem(w: &str) -> String {
    let n = w.chars().count();
    let mut s = w.to_string();
    if n > 4 && s.ends_with("ies") {
        s.truncate(s.len() - 3);
        s.push('y');
    } else if n > 4 && s.ends_with("sses") {
        s.truncate(s.len() - 2);
    } else if n > 3 && s.ends_with('s') && !s.ends_with("ss") && !s.ends_with("us") && !s.ends_with("is") {
        s.truncate(s.len() - 1);
    }
    let n = s.chars().count();
    if n > 5 && s.ends_with("ing") {
        s.truncate(s.len() - 3);
    } else if n > 4 && s.ends_with("ed") && !s.ends_with("eed") {
        s.truncate(s.len() - 2);
    }
    s
}

/// The last index [`Store::cached_index`] built, and what it was built from.
struct CachedIndex {
    dir: Utf8PathBuf,
    files: Vec<(Utf8PathBuf, Option<FileId>)>,
    expires: Option<std::time::SystemTime>,
    index: std::sync::Arc<Index>,
}

static INDEX_CACHE: std::sync::Mutex<Option<CachedIndex>> = std::sync::Mutex::new(None);

/// (inode, size, modified, changed) of a file, None when it is missing.
type FileId = (u64, u64, i64, i64, i64, i64);

fn file_id(path: &Utf8Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()))
}

/// Forgets the kept index (this process changed the store).
fn drop_cached_index() {
    *INDEX_CACHE.lock().unwrap_or_else(|p| p.into_inner()) = None;
}

/// A BM25 index over entries (summary, keywords and content), built once and searched many times.
pub struct Index {
    engine: bm25::SearchEngine<usize, u32, Words>,
    pub entries: Vec<Memory>,
}

impl Index {
    pub fn build(entries: Vec<Memory>) -> Self {
        let docs: Vec<bm25::Document<usize>> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| bm25::Document::new(i, format!("{} {} {}", e.summary, e.keywords.join(" "), e.content)))
            .collect();
        let engine = bm25::SearchEngineBuilder::<usize, u32, Words>::with_tokenizer_and_documents(Words, docs).build();
        Index { engine, entries }
    }

    /// The best `k` entries for a query, with their scores.
    pub fn search(&self, query: &str, k: usize) -> Vec<(&Memory, f32)> {
        self.engine
            .search(query, k)
            .into_iter()
            .filter_map(|r| Some((self.entries.get(r.document.id)?, r.score)))
            .collect()
    }
}

impl Store {
    /// The store for this config: `memory.dir`, else `tools.memory.dir`, else the one
    /// `memory.scope` picks: the workspace's own (`.agentloop/memory/`, the default) or the user
    /// data folder's, shared by every workspace.
    pub fn open(cfg: &Config, root: &Utf8Path) -> Option<Store> {
        let (dir, inside) = match cfg.memory.dir.as_ref().or(cfg.tools.memory.dir.as_ref()) {
            // A folder in the workspace is the workspace's, whoever named it.
            Some(d) => match agentloop_io::fs::in_workspace(root, d) {
                Some(rel) => (root.join(rel), Some(root.to_path_buf())),
                None => (agentloop_io::fs::resolve_in(root, d), None),
            },
            None => match cfg.memory.scope {
                agentloop_config::config::MemoryScope::Workspace => {
                    (root.join(WORKSPACE_DIR), Some(root.to_path_buf()))
                }
                agentloop_config::config::MemoryScope::User => {
                    (agentloop_config::config::xdg_dir("XDG_DATA_HOME", ".local/share")?.join("agentloop/memory"), None)
                }
            },
        };
        Some(Store { dir, inside })
    }

    /// Reads one store file (`default` when missing). A store inside the workspace is read
    /// with no link on the way from the workspace, the file included (refused, exit 8), as it
    /// is written.
    fn load(&self, path: &Utf8Path, default: Value) -> Result<Value> {
        let text = match &self.inside {
            Some(root) => {
                let rel = path.strip_prefix(root).map_err(|_| Error::data(format!("{path} is not in {root}")))?;
                fs::read_no_link(root, rel, MAX_STORE_FILE)?
                    .map(|b| String::from_utf8(b).context_as(Kind::Data, format!("{path} is not UTF-8 text")))
                    .transpose()?
            }
            None => fs::read_optional(path)?,
        };
        parse(path, text, default)
    }

    fn topics(&self) -> Result<Vec<String>> {
        let t = self.load(&self.dir.join("topics.json"), json!({"topics": []}))?;
        Ok(t["topics"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x["id"].as_str())
                    .filter(|id| plain(id, "topic").is_ok())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Every entry that has not expired, topic by topic.
    pub fn entries(&self) -> Result<Vec<Memory>> {
        let now = agentloop_types::clock::now();
        let mut out = Vec::new();
        for topic in self.topics()? {
            let index = self.load(&self.dir.join(format!("index_{topic}.json")), json!({"entries": []}))?;
            for e in index["entries"].as_array().cloned().unwrap_or_default() {
                let content_id = e["content_file"].as_str().unwrap_or("").trim_end_matches(".json").to_string();
                let expires_at = e["expires_at"].as_str().map(String::from);
                if expires_at.as_deref().and_then(agentloop_types::clock::parse_rfc3339).is_some_and(|t| t <= now) {
                    continue;
                }
                out.push(Memory {
                    id: format!("{topic}/{content_id}"),
                    topic: topic.clone(),
                    summary: e["summary"].as_str().unwrap_or("").to_string(),
                    keywords: e["keywords"]
                        .as_array()
                        .map(|k| k.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                        .unwrap_or_default(),
                    content: e["content"].as_str().unwrap_or("").to_string(),
                    provenance: serde_json::from_value(e["provenance"].clone()).unwrap_or_default(),
                    created_at: e["created_at"].as_str().unwrap_or("").to_string(),
                    expires_at,
                });
            }
        }
        Ok(out)
    }

    pub fn index(&self) -> Result<Index> {
        Ok(Index::build(self.entries()?))
    }

    /// The index as [`Store::index`] builds it, kept between calls while the store's files are
    /// unchanged (Plan and Frame recall on every step; rebuilding meant reading and indexing
    /// every entry each time). A file counts as changed when its inode, size or times differ;
    /// writes replace files by rename, so each gets a new inode. The kept index is dropped when
    /// one of its entries expires and when this process writes the store.
    pub fn cached_index(&self) -> Result<std::sync::Arc<Index>> {
        let mut cache = INDEX_CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.as_ref() {
            let fresh = c.dir == self.dir
                && c.expires.is_none_or(|t| agentloop_types::clock::now() < t)
                && c.files.iter().all(|(path, id)| file_id(path) == *id);
            if fresh {
                return Ok(c.index.clone());
            }
        }
        let topics_path = self.dir.join("topics.json");
        let mut files = vec![(topics_path.clone(), file_id(&topics_path))];
        for topic in self.topics()? {
            let p = self.dir.join(format!("index_{topic}.json"));
            files.push((p.clone(), file_id(&p)));
        }
        let entries = self.entries()?;
        let expires = entries
            .iter()
            .filter_map(|e| e.expires_at.as_deref().and_then(agentloop_types::clock::parse_rfc3339))
            .min();
        let index = std::sync::Arc::new(Index::build(entries));
        *cache = Some(CachedIndex { dir: self.dir.clone(), files, expires, index: index.clone() });
        Ok(index)
    }

    /// Holds the store's write lock until dropped (the OS frees it if the holder dies).
    /// Refuses a store of a workspace reached through a link (a workspace from elsewhere whose
    /// `.agentloop` is a link must not have anything written wherever it points).
    pub fn refuse_linked(&self) -> Result<()> {
        match &self.inside {
            Some(root) if fs::through_link(root, &self.dir) => Err(fs::linked_folder(&self.dir)),
            _ => Ok(()),
        }
    }

    fn write_lock(&self) -> Result<std::fs::File> {
        self.refuse_linked()?;
        fs::create_dir_all(&self.dir)?;
        let path = self.dir.join(".store.lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        f.lock().map_err(|e| Error::io("lock", &path, e))?;
        Ok(f)
    }

    /// Writes a memory (replacing one with the same id); returns its id.
    pub fn add(&self, n: &New) -> Result<String> {
        plain(&n.topic, "topic")?;
        // No configured secret reaches the store (it may be the workspace's own, or shared).
        let n = &New {
            title: agentloop_io::redact::redact(&n.title),
            content: agentloop_io::redact::redact(&n.content),
            keywords: n.keywords.iter().map(|k| agentloop_io::redact::redact(k)).collect(),
            ..n.clone()
        };
        let _lock = self.write_lock()?;
        drop_cached_index();
        let now = agentloop_types::clock::now_rfc3339();
        let mut topics = self.load(&self.dir.join("topics.json"), json!({"version": "1.0.0", "topics": []}))?;
        let index_path = self.dir.join(format!("index_{}.json", n.topic));
        let mut index = self.load(&index_path, json!({"topic_id": n.topic, "version": "1.0.0", "entries": []}))?;
        let entries = index["entries"].as_array().cloned().unwrap_or_default();
        let content_id = match &n.content_id {
            Some(id) => {
                plain(id, "content_id")?;
                id.clone()
            }
            None => {
                let used: std::collections::BTreeSet<&str> =
                    entries.iter().filter_map(|e| e["content_file"].as_str()).collect();
                // The first number no file takes (there are fewer files than numbers).
                let mut i = used.len();
                for n in 1..=used.len() + 1 {
                    if !used.contains(format!("content_{n:03}.json").as_str()) {
                        i = n;
                        break;
                    }
                }
                format!("content_{i:03}")
            }
        };
        let expires_at = n.ttl.map(|d| agentloop_types::clock::rfc3339(agentloop_types::clock::now() + d));
        let title = n.title.trim();
        let doc = json!({
            "content_id": content_id, "topic_id": n.topic, "title": title, "created_at": now, "updated_at": now,
            "metadata": {"tags": n.keywords, "provenance": n.provenance},
            "sections": [{"section_id": "main", "title": "main", "content": n.content, "updated_at": now}],
        });
        save(&self.dir.join(&n.topic).join(format!("{content_id}.json")), &doc)?;
        let mut kw: Vec<String> = n.keywords.iter().map(|k| k.to_lowercase()).collect();
        kw.extend(keywords_of(&format!("{title} {}", n.content)));
        // Each keyword once, the given ones first.
        let mut seen = std::collections::HashSet::new();
        kw.retain(|k| seen.insert(k.clone()));
        let file = format!("{content_id}.json");
        let mut entries: Vec<Value> = entries.into_iter().filter(|e| e["content_file"] != file.as_str()).collect();
        let summary = if title.is_empty() {
            n.content.chars().take(160).collect::<String>()
        } else {
            format!("{title} - {}", n.content.chars().take(120).collect::<String>())
        };
        let mut entry = json!({
            "index_id": format!("idx_{content_id}_main"), "content_file": file, "section_id": "main",
            "summary": summary, "keywords": kw, "content": n.content.chars().take(2000).collect::<String>(),
            "provenance": n.provenance, "created_at": now,
        });
        if let Some(x) = expires_at {
            entry["expires_at"] = json!(x);
        }
        entries.push(entry);
        let count = entries.len();
        index["entries"] = json!(entries);
        index["last_updated"] = json!(now);
        save(&index_path, &index)?;
        let list = topics["topics"]
            .as_array_mut()
            .ok_or_else(|| Error::data(format!("{}/topics.json has no topics list", self.dir)))?;
        list.retain(|t| t["id"] != n.topic.as_str());
        list.push(json!({"id": n.topic, "name": n.topic, "description": "", "index_file": format!("index_{}.json", n.topic), "content_dir": format!("{}/", n.topic), "entry_count": count}));
        topics["last_updated"] = json!(now);
        save(&self.dir.join("topics.json"), &topics)?;
        Ok(format!("{}/{content_id}", n.topic))
    }

    /// The full content document of `topic/content_id`.
    pub fn show(&self, id: &str) -> Result<Option<Value>> {
        let (topic, content) = split_id(id)?;
        let v = self.load(&self.dir.join(topic).join(format!("{content}.json")), Value::Null)?;
        Ok(Some(v).filter(|v| !v.is_null()))
    }

    /// Removes one memory; false when there was none.
    pub fn forget(&self, id: &str) -> Result<bool> {
        let (topic, content) = split_id(id)?;
        let _lock = self.write_lock()?;
        drop_cached_index();
        let index_path = self.dir.join(format!("index_{topic}.json"));
        let mut index = self.load(&index_path, json!({"entries": []}))?;
        let file = format!("{content}.json");
        let before = index["entries"].as_array().map(Vec::len).unwrap_or(0);
        if let Some(a) = index["entries"].as_array_mut() {
            a.retain(|e| e["content_file"] != file.as_str());
        }
        let after = index["entries"].as_array().map(Vec::len).unwrap_or(0);
        if before == after {
            return Ok(false);
        }
        save(&index_path, &index)?;
        let path = self.dir.join(topic).join(&file);
        if path.exists() {
            std::fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        }
        Ok(true)
    }

    /// Removes expired entries; returns their ids.
    pub fn prune(&self) -> Result<Vec<String>> {
        let now = agentloop_types::clock::now();
        let mut gone = Vec::new();
        for topic in self.topics()? {
            let index = self.load(&self.dir.join(format!("index_{topic}.json")), json!({"entries": []}))?;
            for e in index["entries"].as_array().cloned().unwrap_or_default() {
                let expired =
                    e["expires_at"].as_str().and_then(agentloop_types::clock::parse_rfc3339).is_some_and(|t| t <= now);
                if expired {
                    gone.push(format!(
                        "{topic}/{}",
                        e["content_file"].as_str().unwrap_or("").trim_end_matches(".json")
                    ));
                }
            }
        }
        for id in &gone {
            self.forget(id)?;
        }
        Ok(gone)
    }
}

fn split_id(id: &str) -> Result<(&str, &str)> {
    let (topic, content) = id.split_once('/').ok_or_else(|| {
        Error::usage(format!("memory id `{id}` is not TOPIC/CONTENT_ID"))
            .with_hint("ids are listed by `agentloop memory list`")
    })?;
    plain(topic, "topic").and_then(|_| plain(content, "content_id"))?;
    Ok((topic, content))
}

/// The "Relevant memory" block of a prompt: the best entries for `query`, bounded by `top_k`
/// and `max_chars`, each with its provenance. Returns the text and the ids shown (for the trace).
pub fn recall(cfg: &Config, root: &Utf8Path, query: &str) -> (String, Vec<String>) {
    if !cfg.memory.enabled || cfg.memory.top_k == 0 || query.trim().is_empty() {
        return (String::new(), vec![]);
    }
    let Some(store) = Store::open(cfg, root) else { return (String::new(), vec![]) };
    if !store.dir.join("topics.json").exists() {
        return (String::new(), vec![]);
    }
    let Ok(index) = store.cached_index() else { return (String::new(), vec![]) };
    let mut text = String::new();
    let mut ids = Vec::new();
    for (e, _) in index.search(query, cfg.memory.top_k) {
        let from = e.provenance.describe();
        let line = format!(
            "- [{}] {}{}\n",
            e.id,
            e.summary.split_whitespace().collect::<Vec<_>>().join(" "),
            if from.is_empty() { String::new() } else { format!(" (from {from})") }
        );
        if text.len() + line.len() > cfg.memory.max_chars {
            break;
        }
        text.push_str(&line);
        ids.push(e.id.clone());
    }
    (text.trim_end().to_string(), ids)
}

/// Writes what the loop learned (Reflect's `remember`, a run's outcome), when memory is on.
/// Failures are reported, never fatal: memory is a help, not the run's record.
pub fn write_from_loop(cfg: &Config, root: &Utf8Path, n: New) -> Result<Option<String>> {
    if !cfg.memory.enabled {
        return Ok(None);
    }
    let Some(store) = Store::open(cfg, root) else { return Ok(None) };
    let n = New { ttl: n.ttl.or(cfg.memory.ttl.map(|d| d.0)), ..n };
    store.add(&n).map(Some)
}

/// A content id for what run `run_id` wrote at `step` (item `i`): replaying it replaces it.
pub fn loop_id(run_id: &str, step: u32, what: &str) -> String {
    let id = format!("{}-{step}-{what}", run_id.to_lowercase());
    id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').take(64).collect()
}
