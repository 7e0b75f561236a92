//! The checks `models test` makes of what breaks loops on a local server: does the answer carry
//! the value asked for, does a tool's result reach the model, does the system message survive.
//! A chat template that drops `role: tool` or `system` messages still answers every request
//! form, so the form table alone cannot tell; these two-part probes can.
//!
//! Each probe hides an unusual word where only one kind of message carries it and asks for it
//! back; the word cannot be guessed, so an answer that carries it proves the message arrived.
//! An answer without it is explained by the prompt's size: when the server's prompt-token count
//! grew far less than the padded message's size, the template dropped that message.

use agentloop_model::model::{self, Message, Part, Request, Role, ToolCall, ToolChoice};
use serde_json::{json, Value};

/// The value the first request asks for.
pub const ASKED_COLOR: &str = "blue";
/// The word a tool result carries, and the one the system message carries.
pub const TOOL_WORD: &str = "periwinkle";
pub const SYSTEM_WORD: &str = "vermilion";

/// The padding that gives a probed message a size its absence shows in the prompt-token count
/// (about 2,000 bytes, some 450 tokens of English).
fn padding() -> String {
    (1..=36).map(|i| format!("Note {i}: this line gives the message its size and asks for nothing.\n")).collect()
}

/// What one probe found.
pub struct Check {
    pub name: &'static str,
    /// What the probe asks the answer to carry.
    pub asked: String,
    /// The `color` the answer carried (None: no call came back, or the request failed).
    pub answered: Option<String>,
    pub passed: bool,
    /// Prompt tokens the server counted for this probe (0 when it reported none).
    pub prompt_tokens: u64,
    pub detail: String,
    /// How to make it pass (None when it passed).
    pub fix: Option<String>,
    /// Whether the probed message reached the model (None: the probe could not tell).
    pub reached: Option<bool>,
}

impl Check {
    pub fn to_json(&self) -> Value {
        json!({"name": self.name, "passed": self.passed, "asked": self.asked, "answered": self.answered,
            "prompt_tokens": self.prompt_tokens, "detail": self.detail, "fix": self.fix})
    }
}

/// Prompt tokens of an answer, wherever the server counted them (cache reads included).
pub fn prompt_tokens(r: &model::Response) -> u64 {
    r.usage.input_tokens + r.usage.cache_read_tokens + r.usage.cache_write_tokens
}

/// The `color` argument of the answer's report_color call.
fn color(r: &model::Response) -> Option<String> {
    let c = r.tool_calls.iter().find(|c| c.name == "report_color" && c.invalid_arguments.is_none())?;
    c.arguments.get("color").map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
}

fn carries(answer: &Option<String>, word: &str) -> bool {
    answer.as_deref().is_some_and(|a| a.to_lowercase().contains(word))
}

const VALUE_FIX: &str = "the model answers in the requested shape but not with what the request says: small base models often cannot follow it; use an instruction-tuned model, and a chat format made for it (llama-server: --jinja uses the model's own template; llama-cpp-python uses the GGUF's own template when --chat_format is not given)";
const TOOL_DROPPED_FIX: &str = "the server's chat template drops `role: tool` messages, so the model never sees what a tool returned: start llama-server with --jinja; on llama-cpp-python the chatml-function-calling, llama-2 (the fallback for a GGUF without a template) and gemma formats drop them, so leave --chat_format unset for a GGUF that carries its own template or pick a format that renders tool messages (docs/MODELS.md)";
const SYSTEM_DROPPED_FIX: &str = "the server's chat template drops the system message, where every phase's instructions go: start llama-server with --jinja; on llama-cpp-python the gemma format drops it, so use chatml or the GGUF's own template (leave --chat_format unset) (docs/MODELS.md)";
const UNUSED_FIX: &str = "the message reached the model but it did not use it: a larger or instruction-tuned model may";

/// The token cap of each probe's answer: room for a small model's whole call, so an answer is
/// judged on what it says, not cut off before it closes.
pub const PROBE_CAP: u32 = 256;

/// Whether the server stopped the answer at the probe's token cap.
fn cut_at_cap(r: &model::Response) -> bool {
    matches!(r.stop_reason.as_str(), "length" | "max_tokens")
}

/// The first request's verdict: did the call carry `color` = blue?
pub fn value(r: &model::Response) -> Check {
    let answered = color(r);
    let passed = answered.as_deref().is_some_and(|c| c.trim().eq_ignore_ascii_case(ASKED_COLOR));
    let detail = match &answered {
        _ if passed => format!("the call carried color={ASKED_COLOR}, as asked"),
        Some(c) => format!("the call carried color={c:?}, not the {ASKED_COLOR:?} asked for"),
        None if cut_at_cap(r) => format!(
            "the answer was cut off at the probe's cap of {PROBE_CAP} tokens before its report_color call closed"
        ),
        None => "no report_color call with a color came back".into(),
    };
    Check {
        name: "value",
        asked: ASKED_COLOR.into(),
        answered,
        passed,
        prompt_tokens: prompt_tokens(r),
        detail,
        fix: (!passed).then(|| VALUE_FIX.into()),
        reached: None,
    }
}

fn report_color() -> model::ToolDef {
    agentloop_engine::contract::answer_tool(
        "report_color",
        "Report a colour.",
        json!({"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}),
    )
}

/// A tool call, then a tool result holding [`TOOL_WORD`], then the ask to report it.
pub fn tool_result_request() -> Request {
    let look_up = agentloop_engine::contract::answer_tool(
        "look_up_color",
        "Look up the colour on file.",
        json!({"type": "object", "properties": {}}),
    );
    let call = ToolCall {
        id: "call_probe_1".into(),
        name: "look_up_color".into(),
        arguments: json!({}),
        invalid_arguments: None,
    };
    Request {
        phase: "test".into(),
        system: "You are a connectivity check. Call the tool exactly as asked.".into(),
        messages: vec![
            Message::user("Call look_up_color to find the colour on file, then report it with report_color."),
            Message { role: Role::Assistant, parts: vec![Part::ToolCall(call)] },
            Message {
                role: Role::User,
                parts: vec![
                    Part::ToolResult {
                        id: "call_probe_1".into(),
                        content: format!("The colour on file is {TOOL_WORD}.\n{}", padding()),
                        is_error: false,
                    },
                    Part::Text("Call report_color with the colour on file that look_up_color returned.".into()),
                ],
            },
        ],
        tools: vec![look_up, report_color()],
        tool_choice: ToolChoice::Tool("report_color".into()),
        max_tokens: PROBE_CAP,
        temperature: Some(0.0),
        deadline: None,
    }
}

/// A system message holding [`SYSTEM_WORD`], and the ask to report it.
pub fn system_request() -> Request {
    Request {
        phase: "test".into(),
        system: format!(
            "You are a connectivity check. The house colour is {SYSTEM_WORD}: when asked for the house colour, report {SYSTEM_WORD}.\n{}",
            padding()
        ),
        messages: vec![Message::user("Call report_color with color set to the house colour.")],
        tools: vec![report_color()],
        tool_choice: ToolChoice::Tool("report_color".into()),
        max_tokens: PROBE_CAP,
        temperature: Some(0.0),
        deadline: None,
    }
}

/// Judges a carrier probe (`tool_result` or `system`): its answer (or the request's failure),
/// against `baseline`, the prompt tokens of the first request, which lacks the padded message.
pub fn carrier(
    name: &'static str,
    word: &str,
    what: &str,
    dropped_fix: &str,
    outcome: agentloop_types::error::Result<model::Response>,
    baseline: u64,
) -> Check {
    let r = match outcome {
        Ok(r) => r,
        Err(e) => {
            return Check {
                name,
                asked: word.into(),
                answered: None,
                passed: false,
                prompt_tokens: 0,
                detail: format!("the probe's request failed: {}", e.detail()),
                fix: Some("run `models test` again once the server answers; `-v` shows the exchange".into()),
                reached: None,
            }
        }
    };
    let answered = color(&r);
    let tokens = prompt_tokens(&r);
    let passed = carries(&answered, word);
    // The padded message is some 450 tokens; a prompt that grew by less than half of that did
    // not hold it.
    let grew = tokens.saturating_sub(baseline);
    let pad_tokens = (padding().len() / 4) as u64;
    let shown = match answered.as_deref() {
        Some(c) => format!("color={c:?}"),
        None if cut_at_cap(&r) => format!("cut off at the probe's cap of {PROBE_CAP} tokens"),
        None => "no report_color call".into(),
    };
    let (detail, fix, reached) = if passed {
        (format!("the answer carried {word:?}: the {what} reached the model"), None, Some(true))
    } else if tokens == 0 || baseline == 0 {
        (
            format!("the answer ({shown}) did not carry {word:?}, and the server counts no prompt tokens, so whether the {what} was dropped is unknown"),
            Some(format!("{dropped_fix}; or {UNUSED_FIX}")),
            None,
        )
    } else if grew < pad_tokens / 2 {
        (
            format!("the {what} was dropped: the prompt counted {tokens} tokens, {grew} more than a request without it, though it holds about {pad_tokens}; the answer ({shown}) did not carry {word:?}"),
            Some(dropped_fix.to_string()),
            Some(false),
        )
    } else {
        (
            format!(
                "the {what} arrived (the prompt grew by {grew} tokens) but the answer ({shown}) did not carry {word:?}"
            ),
            Some(UNUSED_FIX.into()),
            Some(true),
        )
    };
    Check { name, asked: word.into(), answered, passed, prompt_tokens: tokens, detail, fix, reached }
}

/// Sends the two carrier probes through `m`, in the form it negotiated.
pub fn carriers(m: &mut dyn model::Model, baseline: u64) -> Vec<Check> {
    let tool = m.complete(&tool_result_request(), &mut |_| {});
    let tool = carrier("tool_result", TOOL_WORD, "tool result", TOOL_DROPPED_FIX, tool, baseline);
    // Kept for later runs: with `llm.tool_messages: auto`, corrections go as tool results only
    // where they were seen to arrive.
    if let Some(reach) = tool.reached {
        m.learned_tool_results(reach);
    }
    let system = m.complete(&system_request(), &mut |_| {});
    let system = carrier("system", SYSTEM_WORD, "system message", SYSTEM_DROPPED_FIX, system, baseline);
    vec![tool, system]
}
