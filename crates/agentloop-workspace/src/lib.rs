//! agentloop-workspace: a workspace's files and what they mean — the folder and its commit journal,
//! state.json, memory.md and plan.md as types (markdown), facts, the evidence a tick cites, the
//! run history and its diffs, run moves (archive), long-term memory, the rest window, and the
//! templates that render the files and prompts. Above agentloop-config, beside agentloop-model
//! (which it does not know), below the tools: nothing here calls a model or runs a tool
//! (docs/ARCHITECTURE.md).

pub mod archive;
pub mod evidence;
pub mod facts;
pub mod history;
pub mod longterm;
pub mod markdown;
pub mod md_text;
pub mod prompt;
pub mod rest_window;
pub mod runs_diff;
pub mod workspace;
