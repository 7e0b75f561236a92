//! `agentloop models test`: tiny requests to check keys, endpoint and tool calling, and for
//! OpenAI-compatible servers a table of the request forms the server accepts.

use crate::error::Result;
use crate::model::{self, Message, Request, ToolChoice};
use crate::settings::Ctx;
use clap::Subcommand;
use serde_json::json;

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Send a tiny request; print the model, latency, usage and whether tool calling works.
    ///
    /// For OpenAI-compatible servers the request goes once in every form a forced answer
    /// can take (tool_named, tool_required, tool_auto, json_schema, json_object,
    /// json_prompt) and a table shows what the server did with each; the first form that
    /// answered is the one runs use, and it is cached for this base URL and model.
    ///
    /// Uses --provider/--model/--base-url and the config like every phase does.
    /// Exit codes: 0 ok, 5 the provider failed or took no form, 2 nothing configured.
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
    let probes = match m.probe(&req) {
        Some(p) => Some(p?),
        None => None,
    };
    let r = match &probes {
        None => m.complete(&req, &mut |_| {})?,
        Some(ps) => {
            let chosen = ps.iter().find(|p| p.answered).or_else(|| ps.iter().find(|p| p.response.is_some()));
            match chosen.and_then(|p| p.response.clone()) {
                Some(r) => r,
                None => {
                    print_forms(&ctx, ps);
                    return Err(crate::error::Error::provider(format!(
                        "provider {}: the server took none of the request forms (see the table)",
                        m.provider()
                    ))
                    .with_hint("check the base URL and the model id; `-v` shows every exchange"));
                }
            }
        }
    };
    let call = r.tool_calls.iter().find(|c| c.name == "report_color");
    let tools_ok = call.is_some_and(|c| c.invalid_arguments.is_none() && c.arguments.get("color").is_some());
    let cost = model::pricing::cost(&r.model, &r.usage, &cfg.prices);
    let mut v = json!({
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
    if let Some(ps) = &probes {
        v["wire_form"] = json!(ps.iter().find(|p| p.answered).map(|p| p.form.as_str()));
        v["wire_forms"] = forms_json(ps);
    }
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
        match &probes {
            None => p.outln(&format!(
                "tool calling  {}",
                if tools_ok {
                    "works"
                } else {
                    "did not work (the JSON-in-text fallback will be used: llm.structured)"
                }
            )),
            Some(ps) => {
                let chosen = ps.iter().find(|p| p.answered).map(|p| p.form);
                p.outln(&format!(
                    "tool calling  {}",
                    match chosen {
                        Some(f) if f.uses_tools() && tools_ok => format!("works ({})", f.as_str()),
                        Some(f) if tools_ok => format!("works through JSON in text ({})", f.as_str()),
                        Some(f) => format!("answers, with arguments that need correcting ({})", f.as_str()),
                        None => "no form gave the answer; runs will rely on corrective retries".into(),
                    }
                ));
                print_forms(&ctx, ps);
            }
        }
    }
    Ok(0)
}

/// The table of request forms: what the server did with each; the one runs use is marked.
fn print_forms(ctx: &Ctx, probes: &[model::Probe]) {
    let p = &ctx.printer;
    if p.json {
        p.json_value(&json!({"wire_forms": forms_json(probes)}));
        return;
    }
    let chosen = probes.iter().find(|x| x.answered).map(|x| x.form);
    p.outln("");
    p.outln(&format!("{:<14} {:<47} {:<5} {}", "form", "request", "HTTP", "result"));
    for x in probes {
        p.outln(&format!(
            "{:<14} {:<47} {:<5} {}{}",
            x.form.as_str(),
            x.form.describe(),
            x.status.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            x.detail,
            if Some(x.form) == chosen { "  <- used" } else { "" }
        ));
    }
}

fn forms_json(probes: &[model::Probe]) -> serde_json::Value {
    probes
        .iter()
        .map(|x| json!({"form": x.form.as_str(), "status": x.status, "answered": x.answered, "detail": x.detail}))
        .collect()
}
