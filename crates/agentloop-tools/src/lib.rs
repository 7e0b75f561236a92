//! agentloop-tools: what Act can call — the built-in tools and their sandbox, MCP servers and
//! Ductile plugins as tools, skills and the catalog the model is shown, and the registry of child
//! processes (the shell tool's, MCP servers') that a signal stops (`interrupt`). Above
//! agentloop-workspace and agentloop-model, below the engine: no phase, prompt or lifecycle here (docs/ARCHITECTURE.md).
#![allow(rustdoc::private_intra_doc_links)]

pub mod catalog;
pub mod ductile;
pub mod held_secrets;
pub mod interrupt;
#[cfg(feature = "mcp")]
pub mod mcp;
/// Without the `mcp` feature: no MCP client; a configured server is refused (config::merge).
#[cfg(not(feature = "mcp"))]
#[path = "mcp/off.rs"]
pub mod mcp;
pub mod skills;
pub mod tool_env;
pub mod tools;
