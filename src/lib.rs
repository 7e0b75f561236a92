//! agentloop: goal-directed LLM work as a Frame → Plan → Act → Reflect loop whose whole state
//! lives in a workspace folder of plain files.
//!
//! The binary is a thin shell around [`main`]. This crate is the top layer: the CLI, its
//! commands, `serve`, `handle` and `worker`. The engine's crates are used by their own names
//! (`agentloop_config::config`, `agentloop_types::error`, ...): nothing is re-exported. The API
//! docs (`make doc`) cover private items too, since they are written for people changing agentloop.
#![allow(rustdoc::private_intra_doc_links)]

use agentloop_io::output;
use agentloop_types::error;

pub(crate) mod cli;
pub(crate) mod commands;
pub(crate) mod handle;
pub(crate) mod openapi;
#[cfg(feature = "serve")]
pub(crate) mod serve;
/// Without the `serve` feature: only `serve`'s flags, and its refusal.
#[cfg(not(feature = "serve"))]
pub(crate) mod serve {
    pub mod command;
}
#[cfg(feature = "queue")]
pub(crate) mod worker;

/// The optional parts (cargo features) this build has, by name: the engine's and this package's.
pub const FEATURES: &[(&str, bool)] = &[
    ("mcp", cfg!(feature = "mcp")),
    ("queue", cfg!(feature = "queue")),
    ("otel", cfg!(feature = "otel")),
    ("serve", cfg!(feature = "serve")),
];

/// Every published schema, as written to docs/schema/ (file name, document): the engine's, and
/// the OpenAPI document of `serve`.
pub fn published_schemas() -> Vec<(String, serde_json::Value)> {
    let mut docs = agentloop_engine::schema::documents();
    docs.push(("openapi.json".to_string(), openapi::openapi()));
    docs
}

/// Parses the command line, runs the command and returns the exit code.
pub fn main() -> u8 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(text) = cli::version_alone(&args) {
        return match std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes()) {
            Ok(()) => error::code::OK,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => error::code::OK,
            Err(e) => {
                output::error(&error::Error::failure(format!("could not write the version to stdout: {e}")));
                error::code::FAILURE
            }
        };
    }
    let cli = match cli::parse(args) {
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
        Err(_) => return error::code::FAILURE,
    };
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
