//! agentloop-store: a workspace's files and what they mean — the folder and its commit journal,
//! state.json, memory.md and plan.md as types (markdown), the evidence a tick cites, transcripts,
//! the run history and its diffs, long-term memory, the rest window, and the templates that
//! render the files and prompts. Above agentloop-model, below the tools: nothing here calls a
//! model or runs a tool (docs/ARCHITECTURE.md).

pub mod evidence;
pub mod history;
pub mod longterm;
pub mod markdown;
pub mod md_text;
pub mod prompt;
pub mod rest_window;
pub mod runs_diff;
pub mod transcript;
pub mod workspace;
