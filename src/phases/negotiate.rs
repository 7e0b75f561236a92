//! Negotiation: before a run's first model call, estimate what it will cost from the
//! prompts it will send — the system prompt, the catalog, the answer schemas (rendered exactly)
//! and the phase prompts (the Frame prompt exactly, Plan and Reflect with a typical working
//! memory) — and refuse a run whose smallest possible course (Frame, one Plan, one Reflect)
//! cannot fit `max_tokens` or `max_cost_usd`. `run --dry-run` prints the estimate and the first
//! prompts and calls no model.

use super::Env;
use crate::contract;
use crate::model::pricing;
use crate::trace::Usage;
use crate::workspace::Limits;
use serde::Serialize;
use serde_json::json;

/// Tokens are estimated as bytes / 4 (English text and JSON run at 3.5-4.5 bytes a token).
const BYTES_PER_TOKEN: u64 = 4;
/// Output tokens assumed per answer (frame, plan, reflect).
const OUTPUT: [u64; 3] = [300, 250, 200];
/// Working memory and plan a mid-run prompt carries beyond the fixed parts, in bytes.
const RUNNING_STATE: u64 = 3000;

#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub model: String,
    pub frame_tokens: u64,
    pub step_tokens: u64,
    /// Frame, one Plan, one Reflect.
    pub min_tokens: u64,
    /// Frame and every step of `max_steps`.
    pub max_tokens: u64,
    pub min_cost_usd: Option<f64>,
    pub max_cost_usd: Option<f64>,
    pub max_steps: u32,
}

fn tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(BYTES_PER_TOKEN)
}

/// The first prompts of a run as they will be sent: (system for Frame, Frame prompt, catalog).
pub fn first_prompts(
    env: &Env,
    goal: &str,
    context: &str,
    limits: &Limits,
) -> crate::error::Result<(String, String, String)> {
    let catalog = env.catalog();
    let frame_tool = contract::frame_tool();
    let system = env.system_prompt("frame", &frame_tool.name, "")?;
    let tool_names: Vec<String> = env.registry.allowed(env.cfg).iter().map(|t| t.name.clone()).collect();
    let prompt = env.tpl.render(
        "prompt-frame.j2",
        json!({
            "context": format!("# Context\n\n## Goal\n{goal}\n\n## Background\n{context}"),
            "memory": "", "limits": limits, "tool_names": tool_names, "suggested_skills": Vec::<String>::new(),
            "reframe_reason": null, "reframes": 0, "recall": "",
        }),
    )?;
    Ok((system, prompt, catalog))
}

pub fn estimate(env: &Env, model: &str, goal: &str, context: &str, limits: &Limits) -> crate::error::Result<Estimate> {
    let (system, frame_prompt, catalog) = first_prompts(env, goal, context, limits)?;
    let frame_tool = contract::frame_tool();
    let plan_tool = contract::plan_tool(&env.registry.allowed(env.cfg), None);
    let reflect_tool = contract::reflect_tool(5);
    let frame_in = tokens(system.len() + frame_prompt.len() + frame_tool.parameters.to_string().len());
    let plan_system = env.system_prompt("plan", &plan_tool.name, &catalog)?;
    let plan_in = tokens(plan_system.len() + plan_tool.parameters.to_string().len() + RUNNING_STATE as usize);
    let reflect_system = env.system_prompt("reflect", &reflect_tool.name, "")?;
    let reflect_in =
        tokens(reflect_system.len() + reflect_tool.parameters.to_string().len() + RUNNING_STATE as usize + 2000);
    let frame_tokens = frame_in + OUTPUT[0];
    let step_tokens = plan_in + OUTPUT[1] + reflect_in + OUTPUT[2];
    let usage = |steps: u64| Usage {
        input_tokens: frame_in + steps * (plan_in + reflect_in),
        output_tokens: OUTPUT[0] + steps * (OUTPUT[1] + OUTPUT[2]),
        cache_write_tokens: 0,
        cache_read_tokens: 0,
    };
    let steps = limits.max_steps.max(1) as u64;
    Ok(Estimate {
        model: model.to_string(),
        frame_tokens,
        step_tokens,
        min_tokens: frame_tokens + step_tokens,
        max_tokens: frame_tokens + steps * step_tokens,
        min_cost_usd: pricing::cost(model, &usage(1), &env.cfg.prices),
        max_cost_usd: pricing::cost(model, &usage(steps), &env.cfg.prices),
        max_steps: limits.max_steps,
    })
}

/// Why the smallest course of the run cannot fit its budget, if it cannot (a pure decision).
pub fn refusal(e: &Estimate, limits: &Limits) -> Option<String> {
    if let Some(max) = limits.max_tokens {
        if e.min_tokens > max {
            return Some(format!(
                "the smallest run (Frame, one Plan, one Reflect) needs about {} tokens; max_tokens is {max}",
                e.min_tokens
            ));
        }
    }
    if let (Some(max), Some(c)) = (limits.max_cost_usd, e.min_cost_usd) {
        if c > max {
            return Some(format!(
                "the smallest run (Frame, one Plan, one Reflect) costs about ${c:.4} with {}; max_cost_usd is ${max:.4}",
                e.model
            ));
        }
    }
    None
}
