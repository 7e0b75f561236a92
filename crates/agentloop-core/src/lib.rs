//! agentloop-core: the engine — configuration and trust, model clients, tools (built-in, MCP,
//! Ductile), skills, the workspace with its commit journal, the phases and the run lifecycle,
//! reports. Above agentloop-base, below the binary (CLI, serve, handle, worker), which it never
//! reaches into (docs/ARCHITECTURE.md).
#![allow(rustdoc::private_intra_doc_links)]

// The base layer's modules, re-exported so `crate::error`, `crate::fs`, ... read the same here.
pub use agentloop_base::{
    alloc, archive, capfs, clock, crash, error, facts, fs, json, redact, run_id, seed_agent, trace,
};
// The configuration layer, re-exported so `crate::config` reads the same here and above.
pub use agentloop_config::{config, tool_messages};
// The model layer, re-exported likewise.
pub use agentloop_model::{budget, log, model, otel, outcome, output, tool_spec};

pub mod catalog;
pub mod contract;
pub mod ductile;
pub mod evidence;
pub mod history;
pub mod interrupt;
pub mod lifecycle;
pub mod longterm;
pub mod markdown;
#[cfg(feature = "mcp")]
pub mod mcp;
/// Without the `mcp` feature: no MCP client; a configured server is refused (config::merge).
#[cfg(not(feature = "mcp"))]
#[path = "mcp/off.rs"]
pub mod mcp;
pub mod output_schema;
pub mod phases;
pub mod prompt;
pub mod report;
pub mod rest_window;
pub mod runs_diff;
pub mod runs_root;
pub mod schema;
pub mod settings;
pub mod skills;
pub mod tool_env;
pub mod tool_settings;
pub mod tools;
pub mod transcript;
pub mod trust;
pub mod workspace;

/// The optional parts (cargo features) this build of the engine has, by name.
pub const FEATURES: &[(&str, bool)] = &[("mcp", cfg!(feature = "mcp")), ("otel", cfg!(feature = "otel"))];
