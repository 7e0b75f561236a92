//! Reflect and the next Plan in one model call (`llm.fuse_phases`, used by `run` only): after
//! Act, one answer tool holds Reflect's answer and the next step's plan side by side. The call's
//! prompt is Reflect's with the next step's planning asked after it; its answer is then applied
//! as the two phases apply theirs, in two commits — the reflection (its trace entry carries the
//! call's usage), then, when the run goes on to a plan and the answer holds one, the plan (its
//! entry has none, so usage is counted once). Both entries are marked `data.fused`. A plan half
//! left out, or a run that stops or reframes, falls back to the loop as it is: a plan still due
//! is asked for in a call of its own.

use super::{ask, fail_phase, plan, reflect, Env, PhaseEnd};
use crate::contract::{self, FusedAnswer};
use agentloop_types::error::Result;
use agentloop_types::trace::Phase;
use agentloop_workspace::workspace::{Next, State};

/// The phase name the fused call is made under (transcript, progress, a scripted model's queue).
pub use super::ask::FUSED_PHASE as PHASE;

pub fn run(env: &mut Env, state: &mut State) -> Result<PhaseEnd> {
    let (_, mem) = env.read_memory()?;
    let (_, plan_md) = env.read_plan()?;
    let (text, shown) = prompt(env, state, &mem, &plan_md)?;
    let items: Vec<String> = mem.dod.iter().map(|i| i.text.clone()).collect();
    let tool = env.fused_tool(state, items.len());
    let catalog = env.catalog();
    let mend = |v: &mut serde_json::Value| {
        if let Some(r) = v.get_mut("reflect") {
            contract::mend_satisfied(r, &items);
        }
    };
    let answer = match ask::ask::<FusedAnswer>(env, state, PHASE, &catalog, text, tool, &mend) {
        Ok(a) => a,
        Err(e) => return fail_phase(env, state, Phase::Reflect, e),
    };
    let ask::Answer {
        value: FusedAnswer { reflect: r, plan: next },
        usage,
        cost,
        model,
        prompt_bytes,
        duration_ms,
        attempts,
    } = answer;
    let reflection = ask::Answer { value: r, usage, cost, model: model.clone(), prompt_bytes, duration_ms, attempts };
    let outcome = reflect::take(env, state, mem, plan_md, &reflection, true)?;
    match next {
        Some(p) if outcome == PhaseEnd::Next && state.next == Next::Plan => {
            plan::take_fused(env, state, &p, &model, &shown)
        }
        _ => Ok(outcome),
    }
}

/// Reflect's prompt, then the next step's planning: the active skills and the long-term memory
/// a plan prompt shows (and those entries' ids).
fn prompt(
    env: &Env,
    state: &State,
    mem: &agentloop_workspace::markdown::Memory,
    plan_md: &agentloop_workspace::markdown::Plan,
) -> Result<(String, Vec<String>)> {
    let reflection = reflect::prompt(env, state, mem, plan_md)?;
    let (active, recall, shown) = plan::extras(env, state, mem);
    let mut text = format!(
        "{}\n\nIf you decide continue, plan step {} of at most {} under `plan`: one next action (a tool from skills.md, or `finish` once every item is met), as if this reflection were recorded. Otherwise leave `plan` out.\n",
        reflection.trim_end(),
        state.step + 1,
        state.limits.max_steps
    );
    if !active.is_empty() {
        text.push_str(&format!("\n<active-skills>\n{active}\n</active-skills>\n"));
    }
    if !recall.is_empty() {
        text.push_str(&format!(
            "\n<relevant-memory>\nFrom earlier runs (long-term memory; cite an entry's id if you rely on it):\n{recall}\n</relevant-memory>\n"
        ));
    }
    Ok((text, shown))
}
