//! agentloop-io: where agentloop's bytes go, safely — files written atomically and never through
//! a link, reads capped and held inside their folder, crash points, the memory cap of a template
//! render, redaction of secrets, and the printer (stdout data, stderr notes) with the diagnostics
//! log. It knows nothing of configuration files, models or tools (docs/ARCHITECTURE.md).
#![allow(rustdoc::private_intra_doc_links)]

/// What a template render may hold is counted (`alloc.rs`); every other thread is unlimited.
/// Declared here, at the bottom of everything that writes, so every binary that links agentloop
/// — the CLI and each crate's tests — counts the same way.
#[global_allocator]
static ALLOCATOR: alloc::Budgeted = alloc::Budgeted;

pub mod alloc;
pub mod capfs;
pub mod crash;
pub mod fs;
pub mod log;
pub mod output;
pub mod redact;
mod streams;
