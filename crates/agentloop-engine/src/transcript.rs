//! transcript.md: every model call (the prompt sent and the answer) and every tool call (the
//! arguments and a result excerpt) of a run, in order, for a person to read. Bounded: each body
//! is capped and the full text of a large one is where the run keeps it (the trace, artifacts/).

use agentloop_model::model::{Part, Request, Response, Role};
use agentloop_types::tool_spec::ToolResult;

/// Most characters of one body in the transcript.
const CAP: usize = 6000;

fn capped(text: &str, where_: &str) -> String {
    let n = text.chars().count();
    if n <= CAP {
        return text.to_string();
    }
    let head: String = text.chars().take(CAP).collect();
    format!("{head}\n… [{n} characters in all; {where_}]")
}

fn fence(text: &str) -> String {
    // A fence longer than any backtick run inside, so model text cannot close it.
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let f = "`".repeat(longest.max(2) + 1);
    format!("{f}\n{}\n{f}\n", text.trim_end())
}

pub fn model_call(step: u32, phase: &str, attempt: u32, model: &str, req: &Request, resp: &Response) -> String {
    let model = match &resp.recorded_from {
        Some(from) => format!("{model}, replaying an answer recorded from {from}"),
        None => model.to_string(),
    };
    let mut s = format!("## step {step} · {phase} · model call (attempt {attempt}, {model})\n\n");
    if attempt == 1 {
        s.push_str("### system\n\n");
        s.push_str(&fence(&capped(&req.system, "the system prompt is rebuilt from the templates and the catalog")));
    }
    s.push_str("\n### sent\n\n");
    // The first attempt shows the prompt; a retry shows only what was added (the correction).
    let msgs: Vec<_> =
        if attempt == 1 { req.messages.iter().collect() } else { req.messages.iter().rev().take(2).rev().collect() };
    for m in msgs {
        for p in &m.parts {
            // A tool result is the tool's (the refused call's error), whatever role carries it.
            let who = match (p, m.role == Role::User) {
                (Part::ToolResult { .. }, _) => "tool result",
                (_, true) => "user",
                (_, false) => "assistant",
            };
            let body = match p {
                Part::Text(t) => t.clone(),
                // A refused call is shown as the model wrote it, not as the `{}` it was read as.
                Part::ToolCall(c) => {
                    format!(
                        "call {} {}",
                        c.name,
                        c.invalid_arguments.clone().unwrap_or_else(|| c.arguments.to_string())
                    )
                }
                Part::ToolResult { content, .. } => content.clone(),
            };
            s.push_str(&format!("**{who}**\n\n"));
            s.push_str(&fence(&capped(&body, "see memory.md, plan.md and the trace")));
        }
    }
    s.push_str("\n### answer\n\n");
    if !resp.text.trim().is_empty() {
        s.push_str(&fence(&capped(&resp.text, "the trace records the call")));
    }
    for c in &resp.tool_calls {
        let args = serde_json::to_string_pretty(&c.arguments).unwrap_or_default();
        s.push_str(&format!("call `{}`\n\n", c.name));
        s.push_str(&fence(&capped(c.invalid_arguments.as_deref().unwrap_or(&args), "the trace records the call")));
    }
    s.push_str(&format!(
        "\n_usage: {} in, {} out, {} cache read; {} ms_\n",
        resp.usage.input_tokens, resp.usage.output_tokens, resp.usage.cache_read_tokens, resp.latency_ms
    ));
    s
}

/// A model call that got no whole answer in time: what was waited, and what it may cost.
pub fn timeout(
    step: u32,
    phase: &str,
    attempt: u32,
    model: &str,
    t: &agentloop_model::model::http::TimedOut,
) -> String {
    let mut s = format!(
        "## step {step} · {phase} · model call timed out (attempt {attempt}, {model})

"
    );
    s.push_str(&format!(
        "No whole answer from {} after {} ms.

",
        t.url, t.waited_ms
    ));
    s.push_str(&format!(
        "tokens: unknown (a server reports usage only with a whole answer){}
",
        t.max_tokens.map(|n| format!("; at most {n} generated")).unwrap_or_default()
    ));
    s.push_str(if t.sent_again {
        "
The request was sent again.
"
    } else {
        "
The request was not sent again.
"
    });
    s
}

pub fn tool_call(step: u32, tool: &str, args: &serde_json::Value, r: &ToolResult) -> String {
    let mut s = format!("## step {step} · act · `{tool}` → {}\n\n", r.status);
    s.push_str(&fence(&serde_json::to_string_pretty(args).unwrap_or_default()));
    if let Some(e) = &r.error {
        s.push_str(&format!("\nerror: {e}\n"));
    }
    if !r.output.is_empty() {
        s.push('\n');
        s.push_str(&fence(&capped(&r.output, "the full output is in the artifacts listed")));
    }
    if !r.artifacts.is_empty() {
        s.push_str(&format!("\nartifacts: {}\n", r.artifacts.join(", ")));
    }
    s
}
