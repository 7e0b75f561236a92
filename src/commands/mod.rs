//! One module per subcommand; this file is the one `match`.

pub mod agents;
pub mod answer;
pub mod config;
pub mod demo;
pub mod dream;
pub mod enqueue;
pub mod eval;
pub mod explore;
pub mod init;
pub mod learn;
pub mod mcp;
pub mod memory;
pub mod models;
pub mod modes;
pub mod phase;
pub mod report;
pub mod rest;
pub mod run;
pub mod runs;
pub mod skills;
pub mod status;
pub mod tools;
pub mod trace;
mod trace_read;
pub mod trust;
pub mod worker;
