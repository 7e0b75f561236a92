//! agentloop-base: the bottom layer — errors and their exit codes, the clock, files written
//! atomically and never through a link, the trace's types, redaction, crash points, facts, the
//! move journal and the seed agent format. It knows nothing of configuration, models or tools
//! (docs/ARCHITECTURE.md).
#![allow(rustdoc::private_intra_doc_links)]

/// What a template render may hold is counted (`alloc.rs`); every other thread is unlimited.
/// Declared here, at the bottom, so every binary that links agentloop — the CLI and each
/// crate's tests — counts the same way.
#[global_allocator]
static ALLOCATOR: alloc::Budgeted = alloc::Budgeted;

pub mod alloc;
pub mod archive;
pub mod capfs;
pub mod clock;
pub mod crash;
pub mod error;
pub mod facts;
pub mod fs;
pub mod json;
pub mod redact;
pub mod run_id;
pub mod seed_agent;
pub mod trace;
