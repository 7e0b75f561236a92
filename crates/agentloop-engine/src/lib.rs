//! agentloop-engine: the loop, one engine every door drives — trust and the resolved settings, the answer contracts, the phases
//! and the run lifecycle, reports and the published schemas. Above agentloop-tools, below the
//! binary (CLI, serve, handle, worker), which it never reaches into (docs/ARCHITECTURE.md).
#![allow(rustdoc::private_intra_doc_links)]

pub mod contract;
pub mod lean;
pub mod lifecycle;
pub mod narrow_value;
pub mod output_schema;
pub mod phases;
pub mod policy;
pub mod report;
pub mod runs_root;
pub mod schema;
pub mod settings;
pub mod tool_args;
pub mod tool_settings;
pub mod transcript;
pub mod trust;

/// The optional parts (cargo features) this build of the engine has, by name.
pub const FEATURES: &[(&str, bool)] = &[("mcp", cfg!(feature = "mcp")), ("otel", cfg!(feature = "otel"))];
