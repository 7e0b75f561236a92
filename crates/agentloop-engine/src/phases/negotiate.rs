//! Negotiation: before a run's first model call, estimate what it will cost from the
//! prompts it will send — the system prompt, the catalog, the answer schemas (rendered exactly)
//! and the phase prompts (the Frame prompt exactly, Plan and Reflect with a typical working
//! memory) — and refuse a run whose smallest possible course (Frame, one Plan, one Reflect)
//! cannot fit `max_tokens` or `max_cost_usd`, or that conflicts with the agent's values (see
//! [`super::values`]). `run --dry-run` prints the estimate and the first
//! prompts and calls no model.

use super::Env;
use crate::contract;
use agentloop_model::model::pricing;
use agentloop_types::trace::Usage;
use agentloop_workspace::workspace::Limits;
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

/// The first prompts of a run exactly as they will be sent: (system for Frame, Frame prompt,
/// catalog) — context.md as the run will write it (with the facts it carries), the skills whose
/// triggers match and the long-term memory recalled, as Frame builds them.
pub fn first_prompts(
    env: &Env,
    goal: &str,
    background: &str,
    carried: &[String],
    slot: Option<&str>,
    limits: &Limits,
) -> agentloop_types::error::Result<(String, String, String)> {
    // Lean prompts show the catalog in a line (`catalog::lean`).
    let catalog = match env.lean() {
        true => env.lean_catalog(),
        false => env.compact_catalog(),
    };
    let frame_tool = contract::frame_tool();
    let shared = super::shared_prefix(env.cfg);
    let system =
        if shared { env.system_prompt("", "", &catalog)? } else { env.system_prompt("frame", &frame_tool.name, "")? };
    let carried = agentloop_workspace::facts::merged(carried.iter().cloned());
    let context = env.tpl.render(
        "context.md.j2",
        json!({"goal": goal.trim(), "background": super::init::format_background(background), "carried": carried,
            "date": super::init::run_date(), "slot": slot}),
    )?;
    let state = agentloop_workspace::workspace::State::new(String::new(), goal.trim().to_string(), limits.clone());
    let (prompt, _) =
        super::frame::prompt_with(env, &state, &agentloop_workspace::markdown::Memory::default(), &context)?;
    if shared {
        // As sent: the task part every call shares, then the frame's own.
        let task =
            env.tpl.render("prompt-task.j2", json!({"context": super::frame::bounded(context.trim(), 20_000)}))?;
        return Ok((system, format!("{task}{}", super::ask::turn("frame", &prompt, &frame_tool.name)), catalog));
    }
    Ok((system, prompt, catalog))
}

pub fn estimate(
    env: &Env,
    model: &str,
    goal: &str,
    context: &str,
    limits: &Limits,
) -> agentloop_types::error::Result<Estimate> {
    let (system, frame_prompt, catalog) = first_prompts(env, goal, context, &[], None, limits)?;
    let frame_tool = contract::frame_tool();
    let (plan_tool, reflect_tool) = match env.lean() {
        true => (crate::lean::plan(&env.registry.allowed(env.cfg), None), crate::lean::reflect(&[1], &[1], false)),
        false => {
            let plan = crate::tool_args::plan_tool_as(env.args_in_answer(), &env.registry.allowed(env.cfg), None);
            (plan, contract::reflect_tool(5))
        }
    };
    let schema = |t: &agentloop_model::model::ToolDef| t.parameters.to_string().len();
    let (frame_in, plan_in, reflect_in) = if super::shared_prefix(env.cfg) {
        // Frame sends its own answer tool; Plan and Reflect both of theirs. Every call sends
        // the one system message (with the catalog) and the task: the frame prompt holds the
        // task, the others carry it and their state.
        let fixed = system.len() + schema(&plan_tool) + schema(&reflect_tool);
        let task = frame_prompt.len();
        (
            tokens(system.len() + schema(&frame_tool) + task),
            tokens(fixed + task + RUNNING_STATE as usize),
            tokens(fixed + task + RUNNING_STATE as usize + 2000),
        )
    } else {
        let plan_system = env.system_prompt("plan", &plan_tool.name, &catalog)?;
        let reflect_system = env.system_prompt("reflect", &reflect_tool.name, "")?;
        (
            tokens(system.len() + frame_prompt.len() + schema(&frame_tool)),
            tokens(plan_system.len() + schema(&plan_tool) + RUNNING_STATE as usize),
            tokens(reflect_system.len() + schema(&reflect_tool) + RUNNING_STATE as usize + 2000),
        )
    };
    // `frame: goal` asks no model in Frame.
    let from_goal = env.cfg.frame == agentloop_config::config::FrameFrom::Goal;
    let (frame_in, frame_out) = if from_goal { (0, 0) } else { (frame_in, OUTPUT[0]) };
    let frame_tokens = frame_in + frame_out;
    let step_tokens = plan_in + OUTPUT[1] + reflect_in + OUTPUT[2];
    let usage = |steps: u64| Usage {
        input_tokens: frame_in + steps * (plan_in + reflect_in),
        output_tokens: frame_out + steps * (OUTPUT[1] + OUTPUT[2]),
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
        min_cost_usd: pricing::cost_in(env.cfg, model, &usage(1)),
        max_cost_usd: pricing::cost_in(env.cfg, model, &usage(steps)),
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
    if let (Some(max), None) = (limits.max_cost_usd, e.min_cost_usd) {
        // A cap that cannot be counted would hold nothing (a replay spends nothing: it holds).
        if !agentloop_types::trace::is_scripted(&e.model) {
            return Some(format!(
                "max_cost_usd is ${max:.2} but model `{0}` has no price, so the cap could not hold; add its price per million tokens under `prices:` in agentloop.yaml (e.g. `prices: {{\"{0}\": {{input: 1.0, output: 2.0}}}}`), or pass --force to run with the cap unenforced",
                e.model
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

/// Why the smallest course of the run cannot fit what the agent's rolling usage window
/// (`rest.max_tokens`, `rest.max_cost_usd`) has left, if it cannot: the run would fill the
/// window and stop resting after its first calls, its spending wasted (a pure decision).
pub fn no_room(e: &Estimate, w: &agentloop_workspace::rest_window::Window) -> Option<String> {
    if let Some(max) = w.max_tokens {
        let left = max.saturating_sub(w.tokens);
        if e.min_tokens > left {
            return Some(format!(
                "the smallest run (Frame, one Plan, one Reflect) needs about {} tokens; the agent's rest window (rest.max_tokens {max}) has {left} left",
                e.min_tokens
            ));
        }
    }
    if let (Some(max), Some(c)) = (w.max_cost_usd, e.min_cost_usd) {
        let left = (max - w.cost_usd).max(0.0);
        if c > left {
            return Some(format!(
                "the smallest run (Frame, one Plan, one Reflect) costs about ${c:.4}; the agent's rest window (rest.max_cost_usd ${max:.4}) has ${left:.4} left"
            ));
        }
    }
    None
}

/// The error that refuses a run's start for `why` (the negotiation's reason), in words, with the
/// fix for that reason: a budget the run cannot fit, or an agent too tired to take it on.
/// The negotiation object itself is `run --dry-run --json`'s, not the error's.
pub fn refused(
    e: &Estimate,
    limits: &Limits,
    window: Option<&agentloop_workspace::rest_window::Window>,
    why: &str,
) -> agentloop_types::error::Error {
    // The fix for the reason given: the checks in the order [`negotiate`] makes them.
    let tired = window.and_then(agentloop_workspace::rest_window::too_tired).is_some();
    let hint = if refusal(e, limits).is_some() {
        "raise --max-cost / --max-tokens, give the model a price under `prices:` (0 for a model you run yourself), narrow allowed_tools, or pass --force to start anyway; `run --dry-run` shows the estimate"
    } else if !tired && window.and_then(|w| no_room(e, w)).is_some() {
        "wait until the rest window has room again (`agentloop status` says when), raise rest.max_tokens / rest.max_cost_usd, or pass --force to start anyway"
    } else {
        "let the agent rest (`agentloop rest`), raise rest.max_fatigue, or pass --force to start anyway; `agentloop status` shows its fatigue"
    };
    agentloop_types::error::Error::new(
        agentloop_types::error::Kind::Negotiation,
        format!("run refused before it started: {why}"),
    )
    .with_hint(hint)
}

/// The answer to "can I take this task?" in the seed's words: the smallest run's estimated
/// cost and the budget left, in tokens (every model counts them; USD beside them when priced),
/// the agent's fatigue (percent of its rolling usage window, null with no `rest:` limit) and
/// its values (those checked, and the conflict that declines the task).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Negotiation {
    pub can_proceed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub estimated_cost: u64,
    pub current_budget: Option<u64>,
    pub current_fatigue: Option<f64>,
    pub estimated_cost_usd: Option<f64>,
    pub current_budget_usd: Option<f64>,
    pub values: super::values::Check,
}

/// The negotiation of a new run: a conflict with the agent's values first (whatever the
/// budget, that task is not taken), then the budget refusal, then fatigue above
/// `rest.max_fatigue` (`window` is the agent's rolling usage window, if `rest:` limits it).
pub fn negotiate(
    e: &Estimate,
    limits: &Limits,
    window: Option<&agentloop_workspace::rest_window::Window>,
    values: super::values::Check,
) -> Negotiation {
    let reason = values
        .conflict
        .as_ref()
        .map(super::values::Conflict::reason)
        .or_else(|| refusal(e, limits))
        .or_else(|| window.and_then(agentloop_workspace::rest_window::too_tired))
        .or_else(|| window.and_then(|w| no_room(e, w)));
    let tokens_left =
        |w: &agentloop_workspace::rest_window::Window, cap: Option<u64>| cap.map(|m| m.saturating_sub(w.tokens));
    let usd_left =
        |w: &agentloop_workspace::rest_window::Window, cap: Option<f64>| cap.map(|m| (m - w.cost_usd).max(0.0));
    let (rest_tokens, rest_usd) = match window {
        Some(w) => (tokens_left(w, w.max_tokens), usd_left(w, w.max_cost_usd)),
        None => (None, None),
    };
    let min_of = |a: Option<u64>, b: Option<u64>| a.into_iter().chain(b).min();
    Negotiation {
        can_proceed: reason.is_none(),
        reason,
        estimated_cost: e.min_tokens,
        current_budget: min_of(limits.max_tokens, rest_tokens),
        current_fatigue: window.map(|w| w.fatigue),
        estimated_cost_usd: e.min_cost_usd,
        current_budget_usd: limits.max_cost_usd.into_iter().chain(rest_usd).reduce(f64::min),
        values,
    }
}
