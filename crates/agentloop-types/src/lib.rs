//! agentloop-types: the words every layer speaks — errors and their exit codes, the clock, run
//! ids, the trace's entries, the five budgets, how a run stops (its outcome), and the tool specs
//! and results a model is shown and given. Plain data and its rules: no file is written here, no
//! configuration read, no model called (docs/ARCHITECTURE.md).
#![allow(rustdoc::private_intra_doc_links)]

pub mod budget;
pub mod clock;
pub mod error;
pub mod json;
pub mod outcome;
pub mod run_id;
pub mod text;
pub mod tool_spec;
pub mod trace;
pub mod words;
