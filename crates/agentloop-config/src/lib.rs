//! agentloop-config: the typed configuration — every key, its default, where each value came from
//! (provenance), the layers (defaults < user file < workspace file < `--config` < agent profile <
//! `AGENTLOOP_*` < flags), merging, validation with "did you mean", and `${VAR}` expansion.
//! Above agentloop-types and agentloop-io, below the engine: it reads files and the environment it is handed, and
//! knows nothing of models, tools or workspaces (docs/ARCHITECTURE.md).

pub mod config;
pub mod mask;
pub mod seed_agent;
pub mod tool_messages;
