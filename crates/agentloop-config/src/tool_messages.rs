//! `llm.tool_messages`: how a refused answer's correction is sent. A leaf module (config and the
//! model clients both read it; it reads neither), so config does not depend on the model.

use serde::{Deserialize, Serialize};

/// `llm.tool_messages`: how the corrective turn after a refused answer reaches the model.
///
/// Some chat templates drop `role: tool` messages (llama-cpp-python's `chatml-function-calling`,
/// its `llama-2` fallback for a GGUF without a template, `gemma`): a correction sent as a tool
/// result is never shown, and the retry is a blind re-roll. A user message survives every
/// template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMessages {
    /// `tool` for Anthropic and api.openai.com, and for a server `models test` found to show
    /// tool results to the model; `user` for any other OpenAI-compatible server.
    #[default]
    Auto,
    /// The refused call, then the error as its tool result.
    Tool,
    /// The refused answer as the assistant's text, then the error as a user message.
    User,
}
