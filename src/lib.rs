//! agentloop: goal-directed LLM work as a Frame → Plan → Act → Reflect loop whose whole state
//! lives in a workspace folder of plain files.
//!
//! The binary is a thin shell around [`main`]; everything else is here so tests can call it.

pub mod archive;
pub mod capfs;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod config;
pub mod contract;
pub mod crash;
pub mod ductile;
pub mod error;
pub mod fs;
pub mod handle;
pub mod history;
pub mod interrupt;
pub mod log;
pub mod longterm;
pub mod markdown;
pub mod mcp;
pub mod model;
pub mod outcome;
pub mod output;
pub mod phases;
pub mod prompt;
pub mod redact;
pub mod report;
pub mod rest;
pub mod serve;
pub mod settings;
pub mod skills;
pub mod tool;
pub mod tools;
pub mod trace;
pub mod transcript;
pub mod trust;
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
