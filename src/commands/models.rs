//! `agentloop models test`: tiny requests to check keys, endpoint and tool calling, and for
//! OpenAI-compatible servers a table of the request forms the server accepts and the probes of
//! what breaks loops there (a tool result or the system message dropped by the chat template).

mod probes;

use agentloop_engine::settings::Ctx;
use agentloop_model::model::{self, Message, Request, ToolChoice};
use agentloop_types::error::Result;
use clap::Subcommand;
use serde_json::json;

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Send a tiny request; print the model, latency, usage and whether tool calling works.
    ///
    /// For OpenAI-compatible servers the request goes once in every form a forced answer
    /// can take (tool_named, tool_required, tool_auto, json_schema, json_object,
    /// json_prompt) and a table shows what the server did with each; the first form that
    /// answered is the one runs use, and it is cached for this base URL and model. Then
    /// two probes in that form: does a tool result reach the model, does the system
    /// message survive. "works" means the answer carried the value asked for and both
    /// probes passed; otherwise each failure is named with its fix.
    ///
    /// Uses --provider/--model/--base-url and the config like every phase does.
    /// Exit codes: 0 the server answered (whether it works is in the output), 5 the
    /// provider failed or took no form, 2 nothing configured.
    ///
    /// Example: agentloop models test --provider ollama --model qwen2.5:0.5b
    #[command(verbatim_doc_comment)]
    Test,
}

pub fn run(ctx: Ctx, cmd: ModelsCommand) -> Result<u8> {
    let ModelsCommand::Test = cmd;
    let cfg = ctx.config();
    let mut m = model::from_config(cfg, &ctx.ws.root)?;
    let req = test_request();
    let probes = match m.probe(&req) {
        Some(p) => Some(p?),
        None => None,
    };
    let r = match &probes {
        None => m.complete(&req, &mut |_| {})?,
        Some(ps) => answer_of_forms(&ctx, m.provider(), ps)?,
    };
    let call = r.tool_calls.iter().find(|c| c.name == "report_color");
    let value = probes::value(&r);
    let tools_ok = value.passed;
    // The carrier probes only where a chat template can drop messages: OpenAI-compatible
    // servers, and only once a form gave the answer.
    let mut checks = vec![value];
    let answered_form = probes.as_ref().and_then(|ps| ps.iter().find(|p| p.answered).map(|p| p.form));
    if answered_form.is_some() {
        checks.extend(probes::carriers(m.as_mut(), probes::prompt_tokens(&r)));
    }
    let works = checks.iter().all(|c| c.passed);
    let cost = model::pricing::cost_in(cfg, &r.model, &r.usage);
    let mut v = json!({
        "provider": m.provider(),
        "model": if r.model.is_empty() { m.model().to_string() } else { r.model.clone() },
        "latency_ms": r.latency_ms,
        "usage": r.usage,
        "cost_usd": cost,
        "request_id": r.request_id,
        "tool_calling": tools_ok,
        "works": works,
        "probes": checks.iter().map(probes::Check::to_json).collect::<Vec<_>>(),
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
        let tool_calling = tool_calling_line(probes.is_some(), works, call.is_some(), answered_form, &checks);
        print_test(&ctx, &v, &r, cost, &tool_calling, &checks, probes.as_deref());
    }
    Ok(0)
}

/// The tiny request every check sends: a forced call of `report_color` with the value "blue".
fn test_request() -> Request {
    let tool = agentloop_engine::contract::answer_tool(
        "report_color",
        "Report a colour.",
        json!({"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}),
    );
    Request {
        phase: "test".into(),
        system: "You are a connectivity check. Call the tool exactly as asked.".into(),
        messages: vec![Message::user("Call report_color with color set to \"blue\".")],
        tools: vec![tool],
        tool_choice: ToolChoice::Tool("report_color".into()),
        max_tokens: probes::PROBE_CAP,
        temperature: Some(0.0),
        deadline: None,
    }
}

/// The answer of the first form that gave it, else of the first that got any; when none got
/// one, the table of forms is shown and the provider failed.
fn answer_of_forms(ctx: &Ctx, provider: &str, ps: &[model::Probe]) -> Result<model::Response> {
    let chosen = ps.iter().find(|p| p.answered).or_else(|| ps.iter().find(|p| p.response.is_some()));
    match chosen.and_then(|p| p.response.clone()) {
        Some(r) => Ok(r),
        None => {
            print_forms(ctx, ps);
            Err(agentloop_types::error::Error::provider(format!(
                "provider {provider}: the server took none of the request forms (see the table)"
            ))
            .with_hint("check the base URL and the model id; `-v` shows every exchange"))
        }
    }
}

/// Whether tool calling works, in words: with no forms probed, by the call that came back; with
/// forms, by the form that answered and the probes that failed.
fn tool_calling_line(
    probed: bool,
    works: bool,
    called: bool,
    answered_form: Option<model::wire::Form>,
    checks: &[probes::Check],
) -> String {
    if !probed {
        return if works {
            "works"
        } else if called {
            "answers, but not with the value asked for (see below)"
        } else {
            "did not work (the JSON-in-text fallback will be used: llm.structured)"
        }
        .to_string();
    }
    match answered_form {
        Some(f) if f.uses_tools() && works => format!("works ({})", f.as_str()),
        Some(f) if works => format!("works through JSON in text ({})", f.as_str()),
        Some(f) => {
            let failed: Vec<&str> = checks.iter().filter(|c| !c.passed).map(|c| c.name).collect();
            format!("answers ({}), but does not work: {} failed (below)", f.as_str(), failed.join(", "))
        }
        None => "no form gave the answer; runs will rely on corrective retries".into(),
    }
}

/// `models test` for people: provider, model, latency, usage, cost, whether tool calling works,
/// each check when any failed (or there were several), and the table of forms when probed.
fn print_test(
    ctx: &Ctx,
    v: &serde_json::Value,
    r: &model::Response,
    cost: Option<f64>,
    tool_calling: &str,
    checks: &[probes::Check],
    probes: Option<&[model::Probe]>,
) {
    let p = &ctx.printer;
    let works = v["works"] == true;
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
    p.outln(&format!("tool calling  {tool_calling}"));
    if !(works && checks.len() == 1) {
        p.outln("");
        for c in checks {
            p.outln(&format!("{:<12} {}  {}", c.name, if c.passed { "ok  " } else { "FAIL" }, c.detail));
            if let Some(fix) = &c.fix {
                p.outln(&format!("{:<12}       fix: {fix}", ""));
            }
        }
    }
    if let Some(ps) = probes {
        print_forms(ctx, ps);
    }
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
