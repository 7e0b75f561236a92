//! The one integration-test binary: every test runs the real CLI in a temporary folder with a
//! cleared environment and a fixed clock, and talks only to servers on 127.0.0.1.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod bounds;
mod browser;
mod chat;
mod common;
mod conformance;
mod contracts;
mod digest;
mod docs;
mod docs_run;
mod doors;
mod doors_ends;
mod ductile;
mod ductile_real;
mod ductile_walk;
mod errors;
mod eval;
mod files;
mod foundation;
mod fused;
mod handed;
mod handle;
mod handle_config;
mod http_cache;
mod learn;
mod links;
mod long_lines;
mod loop_;
mod loop_limits;
mod mcp;
mod mcp_auth;
mod mcp_conformance;
mod mcp_logs;
mod mcp_real;
mod models;
mod modes;
mod netsec;
mod otel;
mod output_schema;
mod panel;
mod paper_text;
mod per_tool;
mod prefix;
mod probe5_secrets;
mod queue;
mod reading;
mod real;
mod report;
mod runs;
mod runs_diff;
mod sandbox;
mod schemas;
mod self_modes;
mod serve;
mod serve_doors;
mod serve_host;
mod serve_panel;
mod sessions;
mod shell_sandbox;
mod skills;
mod small_models;
mod snapshots;
mod stream;
mod structure;
mod tool_schemas;
mod tools;
mod trust;
mod wellbeing;
mod wire;
