//! agentloop: goal-directed LLM work as a Frame → Plan → Act → Reflect loop whose whole state
//! lives in a workspace folder of plain files.
//!
//! The binary is a thin shell around [`main`]. The library's public surface is what the tests
//! and benches reach into; every other module is `pub(crate)`. The API docs (`make doc`) cover
//! private items too, since they are written for people changing agentloop.
#![allow(rustdoc::private_intra_doc_links)]

/// What a template render may hold is counted (`alloc.rs`); every other thread is unlimited.
#[global_allocator]
static ALLOCATOR: alloc::Budgeted = alloc::Budgeted;

pub(crate) mod alloc;
pub(crate) mod archive;
pub(crate) mod budget;
pub(crate) mod capfs;
pub(crate) mod catalog;
pub(crate) mod cli;
pub(crate) mod clock;
pub(crate) mod commands;
pub mod config;
pub mod contract;
pub(crate) mod crash;
pub(crate) mod ductile;
pub mod error;
pub mod evidence;
pub(crate) mod facts;
pub(crate) mod fs;
pub(crate) mod handle;
pub mod history;
pub(crate) mod interrupt;
pub(crate) mod lifecycle;
pub(crate) mod log;
pub mod longterm;
pub(crate) mod markdown;
pub mod mcp;
pub mod model;
pub(crate) mod otel;
pub(crate) mod outcome;
pub(crate) mod output;
pub mod output_schema;
pub mod phases;
pub(crate) mod prompt;
pub(crate) mod redact;
pub(crate) mod report;
pub(crate) mod rest_window;
pub(crate) mod runs_root;
pub mod schema;
pub mod seed_agent;
pub(crate) mod serve;
pub mod settings;
pub(crate) mod skills;
pub mod tool_settings;
pub(crate) mod tool_spec;
pub mod tools;
pub mod trace;
pub(crate) mod transcript;
pub(crate) mod trust;
pub(crate) mod worker;
pub mod workspace;

/// Parses the command line, runs the command and returns the exit code.
pub fn main() -> u8 {
    let cli = match cli::parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { error::code::USAGE } else { error::code::OK };
            let _ = e.print();
            return code;
        }
    };
    let result = match std::panic::catch_unwind(|| cli::dispatch(cli)) {
        Ok(r) => r,
        // The panic message is already on stderr; the workspace is safe (commits are atomic).
        Err(_) => {
            otel::finish();
            return error::code::FAILURE;
        }
    };
    // Spans leave as the command ends, within a bounded time, whatever the outcome.
    otel::finish();
    match result {
        // Output lost to a failing stdout (not a closed pipe) is not success.
        Ok(error::code::OK) if output::stdout_failed() => error::code::FAILURE,
        Ok(code) => code,
        Err(e) => {
            output::error(&e);
            e.exit_code()
        }
    }
}
