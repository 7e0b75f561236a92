//! agentloop-core: the engine — trust and the resolved settings, the answer contracts, the phases
//! and the run lifecycle, reports and the published schemas. Above agentloop-tools, below the
//! binary (CLI, serve, handle, worker), which it never reaches into (docs/ARCHITECTURE.md).
//! The layers below are re-exported whole, so `agentloop_core::workspace` or `crate::config`
//! read the same from here and from the binary.
#![allow(rustdoc::private_intra_doc_links)]

pub use agentloop_base::{
    alloc, archive, capfs, clock, crash, error, facts, fs, json, redact, run_id, seed_agent, trace,
};
pub use agentloop_config::{config, mask, tool_messages};
pub use agentloop_model::{budget, log, model, otel, outcome, output, tool_spec};
pub use agentloop_store::{
    evidence, history, longterm, markdown, md_text, prompt, rest_window, runs_diff, transcript, workspace,
};
pub use agentloop_tools::{catalog, ductile, held_secrets, interrupt, mcp, skills, tool_env, tools};

pub mod contract;
pub mod lifecycle;
pub mod narrow_value;
pub mod output_schema;
pub mod phases;
pub mod report;
pub mod runs_root;
pub mod schema;
pub mod settings;
pub mod tool_settings;
pub mod trust;

/// The optional parts (cargo features) this build of the engine has, by name.
pub const FEATURES: &[(&str, bool)] = &[("mcp", cfg!(feature = "mcp")), ("otel", cfg!(feature = "otel"))];
