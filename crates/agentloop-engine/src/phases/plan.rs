//! Plan: choose exactly one Next Action — one call of one allowed tool with arguments that
//! validate against its schema, or `finish` — and write plan.md (outline, the binding Next
//! Action block, expected outcome, risk, rationale). The answer's schema is a union over the
//! tools allowed this step, so an unknown or disallowed tool or invalid arguments are schema
//! errors: one corrective retry with the error shown to the model, then escalation.

use super::{account, ask, budget_exceeded, fail_phase, finish, Env, PhaseEnd};
use crate::contract::PlanAnswer;
use agentloop_types::error::Result;
use agentloop_types::tool_spec::SideEffect;
use agentloop_types::trace::{Entry, Event, Phase};
use agentloop_workspace::markdown::{Item, NextAction};
use agentloop_workspace::workspace::{Commit, Next, Pending, State, StopKind};
use serde_json::{json, Value};

fn default_risk(s: SideEffect) -> &'static str {
    match s {
        SideEffect::Read => "Read-only; no side effects.",
        SideEffect::Write => "Writes files inside the allowed folders; overwrites are not undoable.",
        SideEffect::Network => "Network request to an outside service; it sees the request.",
        SideEffect::Exec => "Runs a program; its effects depend on the program.",
        SideEffect::None => "Ends the run: every Definition-of-Done item is ticked.",
        SideEffect::External => "Runs in another system; effects unknown here.",
    }
}

/// What `finish` will do, as things stand: while Definition-of-Done items are open Act holds it
/// (a refusal naming them), and the run ends only if Reflect then ticks each, so they are named.
fn finish_risk(env: &Env) -> String {
    let Ok((_, mem)) = env.read_memory() else {
        return default_risk(SideEffect::None).to_string();
    };
    let open = mem.open_items();
    if open.is_empty() {
        return default_risk(SideEffect::None).to_string();
    }
    format!(
        "Refused while Definition-of-Done items are open ({} {} open: {}); the run ends only if Reflect then ticks each, citing the steps that showed it.",
        open.len(),
        if open.len() == 1 { "is" } else { "are" },
        mem.open_items_quoted()
    )
}

pub fn run(env: &mut Env, state: &mut State) -> Result<PhaseEnd> {
    if let Some(stopped) = stop_first(env, state)? {
        return Ok(stopped);
    }
    let (_, plan) = env.read_plan()?;
    let catalog = env.catalog();
    let unknown = check_skills_md(env, &catalog)?;
    let (text, shown) = prompt(env, state, &plan)?;
    // The answer's schema offers exactly the tools Act may run (each with its own parameters
    // where `llm.tool_schemas` puts them there).
    let tool = if env.lean() { env.lean_plan_tool(state)? } else { env.plan_tool(state) };
    let answer = match ask::<PlanAnswer>(env, state, "plan", &catalog, text, tool, &|_| {}) {
        Ok(a) => a,
        Err(e) => return fail_phase(env, state, Phase::Plan, e),
    };
    let mut e = Entry::new(&state.run_id, state.step + 1, Phase::Plan, Event::Plan);
    account(env, state, &mut e, &answer);
    commit_answer(env, state, plan, &answer.value, e, &shown, &unknown)
}

/// The run stops instead of planning a step it has no budget for: steps or a token, cost or
/// time budget used up. Ends the run in its own commit and says how.
fn stop_first(env: &mut Env, state: &mut State) -> Result<Option<PhaseEnd>> {
    let over = (state.step >= state.limits.max_steps)
        .then(|| {
            let why = format!("max_steps reached: {} of {} steps used", state.step, state.limits.max_steps);
            (agentloop_types::budget::Budget::MaxSteps, why)
        })
        .or_else(|| budget_exceeded(state));
    let Some((budget, reason)) = over else { return Ok(None) };
    let mut commit = Commit::default();
    finish(env, state, &mut commit, StopKind::Budget(budget), &reason, None)?;
    env.commit(&commit)?;
    Ok(Some(PhaseEnd::Stopped(StopKind::Budget(budget))))
}

/// The plan half of a fused answer (`llm.fuse_phases`), committed as a Plan of its own once the
/// reflection is: the same checks, plan.md, decisions.md and trace entry as [`run`] writes, the
/// entry marked `data.fused` and without usage (the call's is on the reflect entry).
pub fn take_fused(
    env: &mut Env,
    state: &mut State,
    answer: &PlanAnswer,
    model: &str,
    shown: &[String],
) -> Result<PhaseEnd> {
    if let Some(stopped) = stop_first(env, state)? {
        return Ok(stopped);
    }
    let (_, plan) = env.read_plan()?;
    let catalog = env.catalog();
    let unknown = check_skills_md(env, &catalog)?;
    let mut e = Entry::new(&state.run_id, state.step + 1, Phase::Plan, Event::Plan);
    e.model = Some(model.to_string());
    e.data = Some(json!({"fused": true}));
    commit_answer(env, state, plan, answer, e, shown, &unknown)
}

/// plan.md, decisions.md, the trace entry `e` and the state with the chosen action pending,
/// in one commit.
fn commit_answer(
    env: &mut Env,
    state: &mut State,
    plan: agentloop_workspace::markdown::Plan,
    answer: &PlanAnswer,
    mut e: Entry,
    shown: &[String],
    unknown: &[String],
) -> Result<PhaseEnd> {
    let mut commit = Commit::default();
    let (plan, action) = take_answer(env, state, plan, answer);
    let step = state.step;
    e.tool = Some(action.tool.clone());
    e.args = Some(action.args.clone());
    e.reason = Some(plan.rationale.clone());
    if !shown.is_empty() {
        e.data.get_or_insert_with(|| json!({}))["memory_shown"] = json!(shown);
    }
    if !unknown.is_empty() {
        // The seeded catalog's tools that cannot be called, on record with the plan that saw it.
        e.data.get_or_insert_with(|| json!({}))["skills_md_unknown_tools"] = json!(unknown);
    }
    let body = format!(
        "Next action: `{}` {}\n\nExpected outcome: {}\n\nRisk: {}\n\nWhy: {}\n",
        action.tool,
        serde_json::to_string(&action.args).unwrap_or_default(),
        plan.expected,
        plan.risk,
        plan.rationale
    );
    commit.file("plan.md", env.render_plan(&plan)?);
    commit.append("decisions.md", env.decisions_with(step, "plan", &format!("Chose {}", action.tool), &body)?);
    commit.entry(&e);
    commit.state = Some(state.clone());
    env.commit(&commit)?;
    Ok(PhaseEnd::Next)
}

/// skills.md is written when missing; the prompt gets the catalog from the registry, and a file
/// agentloop wrote that has drifted from it is reported, never rewritten. A skills.md seeded by
/// whatever started the run is the catalog (see [`Env::catalog`]); the tools it names that
/// cannot be called are returned (and warned of) once.
fn check_skills_md(env: &Env, catalog: &str) -> Result<Vec<String>> {
    // Once per run: the catalog does not change while the environment lives.
    if env.skills_checked.replace(true) {
        return Ok(vec![]);
    }
    if let Some(text) = env.seeded_skills_md() {
        let allowed = env.registry.allowed(env.cfg);
        let (_, unknown) = agentloop_tools::catalog::seeded(&text, &allowed);
        if !unknown.is_empty() {
            env.printer.warn(&format!(
                "{} names tools agentloop cannot call here: {}; Plan is shown only the tools it can call, and a call to any other is refused",
                env.ws.skills(),
                unknown.join(", ")
            ));
        }
        return Ok(unknown);
    }
    match agentloop_io::fs::read_inside(&env.ws.root, &env.ws.skills())? {
        None => env.ensure_skills_md()?,
        Some(file) if file != catalog => env.printer.warn(&format!(
            "{} differs from the tool and skill catalog; Plan uses the catalog (refresh the file with `agentloop -w {} skills gen -o {}`)",
            env.ws.skills(),
            env.ws.root,
            env.ws.skills()
        )),
        Some(_) => {}
    }
    Ok(vec![])
}

/// The plan prompt (memory, plan, active skills, recalled long-term memory) and the ids of the
/// long-term entries it shows.
fn prompt(env: &Env, state: &State, plan: &agentloop_workspace::markdown::Plan) -> Result<(String, Vec<String>)> {
    let (_, mem) = env.read_memory()?;
    let memory = env.memory_prompt(&mem)?;
    let plan_text = env.plan_prompt(plan)?;
    let (active, recall, shown) = extras(env, state, &mem);
    let step = state.step + 1;
    let mut vars = json!({
        "step": step,
        "limits": state.limits,
        "active_skills": active,
        "memory": memory,
        "plan": plan_text,
        "recall": recall,
        "refused": state.refused_ticks,
        "lean": false,
    });
    if env.lean() {
        agentloop_types::json::merge(&mut vars, env.lean_view(&mem, plan, state));
    }
    let text = env.tpl.render("prompt-plan.j2", vars)?;
    Ok((text, shown))
}

/// What a plan prompt shows besides memory.md and plan.md: the active skills' text, the
/// long-term memory recalled for the goal, open items and latest result, and those entries' ids.
pub fn extras(env: &Env, state: &State, mem: &agentloop_workspace::markdown::Memory) -> (String, String, Vec<String>) {
    let active: Vec<String> = state
        .active_skills
        .iter()
        .filter_map(|n| env.skills.get(n))
        .map(|s| format!("## {}\n{}", s.name, s.body.chars().take(8000).collect::<String>()))
        .collect();
    let last = state.last_result.as_ref().map(|r| r.summary()).unwrap_or_default();
    let query = format!("{} {} {} {last}", state.goal, mem.goal, mem.open_items().join(" "));
    let (recall, shown) = agentloop_workspace::longterm::recall(env.cfg, &env.ws.root, &query);
    (active.join("\n\n"), recall, shown)
}

/// plan.md and the state with the chosen action pending for Act.
fn take_answer(
    env: &Env,
    state: &mut State,
    mut plan: agentloop_workspace::markdown::Plan,
    a: &PlanAnswer,
) -> (agentloop_workspace::markdown::Plan, NextAction) {
    let step = state.step + 1;
    let action = NextAction { tool: a.next_action.tool.clone(), args: Value::Object(a.next_action.args.clone()) };
    let spec = env.registry.get(&action.tool).cloned();
    let outline: Vec<String> = a.outline.iter().map(|o| o.trim().to_string()).filter(|o| !o.is_empty()).collect();
    if !outline.is_empty() {
        plan.outline = outline.into_iter().map(Item::open).collect();
    }
    plan.next_step = Some(step);
    plan.next_action = Some(action.clone());
    plan.expected = a.expected_outcome.trim().to_string();
    plan.risk = Some(a.risk.trim()).filter(|r| !r.is_empty()).map(String::from).unwrap_or_else(|| {
        if agentloop_types::tool_spec::is_finish(&action.tool) {
            return finish_risk(env);
        }
        default_risk(spec.as_ref().map(|s| s.side_effect).unwrap_or(SideEffect::External)).to_string()
    });
    plan.rationale = a.rationale.trim().to_string();
    state.step = step;
    state.pending = Some(Pending {
        step,
        tool: action.tool.clone(),
        args: action.args.clone(),
        attempt: 0,
        requested_at: agentloop_types::clock::now_rfc3339(),
        handed_off: false,
    });
    state.next = Next::Act;
    (plan, action)
}
