//! `agentloop models test`: one tiny request to check keys, endpoint and tool calling.

use crate::error::Result;
use crate::model::{self, Message, Request, ToolChoice};
use crate::settings::Ctx;
use clap::Subcommand;
use serde_json::json;

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Send one tiny request; print the model, latency, usage and whether tool calling works.
    ///
    /// Uses --provider/--model/--base-url and the config like every phase does.
    /// Exit codes: 0 ok, 5 the provider failed, 2 nothing configured.
    ///
    /// Example: agentloop models test --provider ollama --model qwen2.5:0.5b
    #[command(verbatim_doc_comment)]
    Test,
}

pub fn run(ctx: Ctx, cmd: ModelsCommand) -> Result<u8> {
    let ModelsCommand::Test = cmd;
    let cfg = ctx.config();
    let mut m = model::from_config(cfg, &ctx.ws.root)?;
    let tool = crate::contract::answer_tool(
        "report_color",
        "Report a colour.",
        json!({"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}),
    );
    let req = Request {
        phase: "test".into(),
        system: "You are a connectivity check. Call the tool exactly as asked.".into(),
        messages: vec![Message::user("Call report_color with color set to \"blue\".")],
        tools: vec![tool],
        tool_choice: ToolChoice::Tool("report_color".into()),
        max_tokens: 64,
        temperature: Some(0.0),
        deadline: None,
    };
    let r = m.complete(&req)?;
    let call = r.tool_calls.iter().find(|c| c.name == "report_color");
    let tools_ok = call.is_some_and(|c| c.invalid_arguments.is_none() && c.arguments.get("color").is_some());
    let cost = model::pricing::cost(&r.model, &r.usage, &cfg.prices);
    let v = json!({
        "provider": m.provider(),
        "model": if r.model.is_empty() { m.model().to_string() } else { r.model.clone() },
        "latency_ms": r.latency_ms,
        "usage": r.usage,
        "cost_usd": cost,
        "request_id": r.request_id,
        "tool_calling": tools_ok,
        "tool_call": call.map(|c| json!({"name": c.name, "arguments": c.arguments, "invalid_arguments": c.invalid_arguments})),
        "text": r.text,
    });
    if ctx.printer.json {
        ctx.printer.json_value(&v);
    } else {
        let p = &ctx.printer;
        p.outln(&format!("provider      {}", v["provider"].as_str().unwrap_or("")));
        p.outln(&format!("model         {}", v["model"].as_str().unwrap_or("")));
        p.outln(&format!("latency       {} ms", r.latency_ms));
        p.outln(&format!(
            "usage         {} in, {} out, {} cache write, {} cache read",
            r.usage.input_tokens, r.usage.output_tokens, r.usage.cache_write_tokens, r.usage.cache_read_tokens
        ));
        p.outln(&format!(
            "cost          {}",
            cost.map(|c| format!("${c:.6}")).unwrap_or_else(|| "unknown (no price for this model)".into())
        ));
        p.outln(&format!(
            "tool calling  {}",
            if tools_ok { "works" } else { "did not work (the JSON-in-text fallback will be used: llm.structured)" }
        ));
    }
    Ok(0)
}
