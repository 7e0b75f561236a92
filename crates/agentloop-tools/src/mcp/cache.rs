//! The tool-list cache: one JSON file per server under `$XDG_CACHE_HOME/agentloop/mcp/`, named
//! by the server's slug and [`Server::cache_key`], so `plan` builds its catalog without starting
//! any server.
//!
//! Invariants: a file is written atomically (temp + rename), so a reader never sees half of
//! one; a file that is missing, unreadable, of another format version or for another key is a
//! miss (never an error); the key covers transport, command, args, cwd, env and header names
//! and url, so editing any of them lists the tools again. The raw tools (as the server sent
//! them) are stored; names, schemas and `allowed_tools` are applied when loading, so changing
//! those never needs a refresh. Nothing secret is stored: no env or header values.

use super::config::Server;
use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};
use serde_json::Value;

const FORMAT: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Listing {
    pub format: u32,
    pub server: String,
    pub key: String,
    pub listed_at: String,
    /// The protocol version the server answered in `initialize`.
    pub protocol_version: String,
    /// `serverInfo` from `initialize` (name, version).
    pub server_info: Value,
    /// Start, initialize and list, in milliseconds.
    pub startup_ms: u64,
    /// The tools as the server listed them.
    pub tools: Vec<Value>,
}

impl Listing {
    pub fn new(
        server: &Server,
        protocol_version: String,
        server_info: Value,
        startup_ms: u64,
        tools: Vec<Value>,
    ) -> Self {
        Listing {
            format: FORMAT,
            server: server.name.clone(),
            key: server.cache_key(),
            listed_at: agentloop_types::clock::now_rfc3339(),
            protocol_version,
            server_info,
            startup_ms,
            tools,
        }
    }
}

/// `$XDG_CACHE_HOME/agentloop/mcp` (or `~/.cache/agentloop/mcp`).
pub fn dir() -> Option<Utf8PathBuf> {
    Some(agentloop_config::config::xdg_dir("XDG_CACHE_HOME", ".cache")?.join("agentloop").join("mcp"))
}

pub fn path(server: &Server) -> Option<Utf8PathBuf> {
    Some(dir()?.join(format!("{}-{}.json", server.slug, server.cache_key())))
}

/// The cached listing, or None (a miss) for anything but a good file of this key.
pub fn read(server: &Server) -> Option<Listing> {
    let text = agentloop_io::fs::read_optional(&path(server)?).ok().flatten()?;
    let l: Listing = serde_json::from_str(&text).ok()?;
    (l.format == FORMAT && l.key == server.cache_key() && l.server == server.name).then_some(l)
}

pub fn write(server: &Server, listing: &Listing) -> agentloop_types::error::Result<()> {
    let Some(p) = path(server) else {
        return Ok(());
    };
    if let Some(d) = p.parent() {
        agentloop_io::fs::create_dir_all(d)?;
    }
    let text = agentloop_types::json::to_string(listing);
    agentloop_io::fs::write_atomic(&p, text.as_bytes())
}
