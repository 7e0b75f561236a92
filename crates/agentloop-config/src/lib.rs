//! agentloop-config: the typed configuration — every key, its default, where each value came from
//! (provenance), the layers (defaults < user file < workspace file < `--config` < agent profile <
//! `AGENTLOOP_*` < flags), merging, validation with "did you mean", and `${VAR}` expansion.
//! Above agentloop-base, below the engine: it reads files and the environment it is handed, and
//! knows nothing of models, tools or workspaces (docs/ARCHITECTURE.md).

// The base layer's modules, re-exported so `crate::error`, `crate::fs`, ... read the same here.
pub use agentloop_base::{clock, error, fs, json, seed_agent};

pub mod config;
pub mod mask;
pub mod tool_messages;
