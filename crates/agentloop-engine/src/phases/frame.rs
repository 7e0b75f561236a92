//! Frame: turn the task in context.md into a bounded objective in memory.md — a one-sentence
//! goal, a Definition of Done of 3–7 checkable items, constraints, assumptions and unknowns,
//! whether it can proceed, and an optional hypothesis. Re-entered on reframe.

use super::{account, ask, fail_phase, finish, Env, PhaseEnd};
use crate::contract::{self, FrameAnswer};
use agentloop_config::config::FrameFrom;
use agentloop_types::error::Result;
use agentloop_types::trace::{Entry, Event, Phase};
use agentloop_workspace::markdown::{Item, Memory};
use agentloop_workspace::workspace::{Commit, Next, State, StopKind};
use serde_json::json;

/// At most `max` characters of a document for a prompt, with a note saying where the rest is.
pub fn bounded(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}\n\n[context.md continues: {n} characters in all; file_read it for the rest]")
}

/// Non-empty texts, trimmed.
fn texts(list: &[String]) -> Vec<String> {
    list.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

/// The Definition of Done as unchecked items. Every item the schema admits is kept, so the
/// count the model was held to (3 to 7) is the count recorded; one left blank says so.
fn dod_items(list: &[String]) -> Vec<Item> {
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let text = t.split_whitespace().collect::<Vec<_>>().join(" ");
            Item::open(if text.is_empty() { format!("(item {} was left blank)", i + 1) } else { text })
        })
        .collect()
}

pub fn run(env: &mut Env, state: &mut State) -> Result<PhaseEnd> {
    let reframing = state.reframe_reason.is_some();
    let (_, old) = env.read_memory()?;
    let event = if reframing { Event::Reframe } else { Event::Frame };
    let mut e = Entry::new(&state.run_id, state.step, Phase::Frame, event.clone());
    let a = if env.cfg.frame == FrameFrom::Goal {
        // `frame: goal`: the goal as given is the objective and its one item; no model call.
        e.data = Some(json!({"from": "goal"}));
        from_goal(state)
    } else {
        let (prompt, shown) = prompt(env, state, &old)?;
        // What a Definition of Done item must be (words, not a heading) is in the schema itself
        // (`tool_spec::CHECKABLE_ITEM`), so a grammar keeps a model to it and no answer the
        // schema admits is refused.
        let answer = match ask::<FrameAnswer>(env, state, "frame", "", prompt, contract::frame_tool(), &|_| {}) {
            Ok(a) => a,
            Err(e) => return fail_phase(env, state, Phase::Frame, e),
        };
        account(env, state, &mut e, &answer);
        if !shown.is_empty() {
            e.data = Some(json!({"memory_shown": shown}));
        }
        answer.value
    };
    let a = &a;
    // Unsaid means yes: a model that framed the work but forgot the flag can go on.
    let can_proceed = a.can_proceed;
    let mut mem = new_memory(a, state, &old);
    e.decision = Some(if can_proceed { "proceed".into() } else { "cannot_proceed".into() });
    e.reason = state.reframe_reason.clone();
    let mut body = format!("Goal: {}\n\nDefinition of Done:\n", mem.goal);
    for i in &mem.dod {
        body.push_str(&format!("- {}\n", i.text));
    }
    if !mem.hypothesis.is_empty() {
        body.push_str(&format!("\nHypothesis: {}\n", mem.hypothesis));
    }
    if let Some(r) = &state.reframe_reason {
        body.push_str(&format!("\nReframed because: {r}\n"));
    }
    let mut commit = Commit::default();
    mem.log.push(format!("step {} {event}: {}", state.step, if can_proceed { "proceed" } else { "cannot proceed" }));
    if can_proceed {
        mem.status = format!("framed; planning step {}", state.step + 1);
        state.next = Next::Plan;
        state.reframe_reason = None;
        // Refusals named the items of the Definition of Done just replaced.
        state.refused_ticks.clear();
        commit.file("memory.md", env.render_memory(&mem)?);
        commit.append("decisions.md", env.decisions_with(state.step, event.as_str(), "Framed the task", &body)?);
        commit.entry(&e);
        commit.state = Some(state.clone());
        env.commit(&commit)?;
        return Ok(PhaseEnd::Next);
    }
    let question = Some(a.open_question.trim())
        .filter(|q| !q.is_empty())
        .unwrap_or("The task cannot proceed with the tools and information available.")
        .to_string();
    mem.open_question = Some(question.clone());
    mem.status = "escalated: cannot proceed".into();
    body.push_str(&format!("\nCannot proceed. Open question: {question}\n"));
    commit.file("memory.md", env.render_memory(&mem)?);
    commit.append("decisions.md", env.decisions_with(state.step, event.as_str(), "Cannot proceed", &body)?);
    commit.entry(&e);
    finish(env, state, &mut commit, StopKind::Escalated, &format!("cannot proceed: {question}"), None)?;
    env.commit(&commit)?;
    Ok(PhaseEnd::Stopped(StopKind::Escalated))
}

/// The frame of `frame: goal`: the goal as given, and the goal again as the one item of the
/// Definition of Done (its whitespace folded to single spaces).
fn from_goal(state: &State) -> FrameAnswer {
    let goal = state.goal.split_whitespace().collect::<Vec<_>>().join(" ");
    FrameAnswer {
        goal: goal.clone(),
        definition_of_done: vec![goal],
        constraints: Vec::new(),
        assumptions: Vec::new(),
        can_proceed: true,
        open_question: String::new(),
        hypothesis: String::new(),
    }
}

/// memory.md as the answer frames it; facts, the log and a person's own sections carry over.
fn new_memory(a: &FrameAnswer, state: &State, old: &Memory) -> Memory {
    let goal = if a.goal.trim().is_empty() { state.goal.trim() } else { a.goal.trim() };
    Memory {
        goal: goal.to_string(),
        dod: dod_items(&a.definition_of_done),
        constraints: texts(&a.constraints),
        assumptions: texts(&a.assumptions),
        hypothesis: a.hypothesis.trim().to_string(),
        facts: old.facts.clone(),
        status: String::new(),
        open_question: None,
        log: old.log.clone(),
        extra: old.extra.clone(),
    }
}

/// The frame prompt (context.md bounded, memory.md when reframing, tools, skills whose triggers
/// match, recalled long-term memory) and the ids of the long-term entries it shows.
fn prompt(env: &Env, state: &State, old: &Memory) -> Result<(String, Vec<String>)> {
    let context = agentloop_io::fs::read_inside(&env.ws.root, &env.ws.context())?.unwrap_or_default();
    prompt_with(env, state, old, &context)
}

/// [`prompt`] over context.md's text as given (`run --dry-run` renders the one a run would write).
pub fn prompt_with(env: &Env, state: &State, old: &Memory, context: &str) -> Result<(String, Vec<String>)> {
    let memory_text = if state.reframe_reason.is_some() { env.memory_prompt(old)? } else { String::new() };
    let tool_names: Vec<String> = env.registry.allowed(env.cfg).iter().map(|t| t.name.clone()).collect();
    let query: String = format!("{} {}", state.goal, context.chars().take(1000).collect::<String>());
    let (recall, shown) = agentloop_workspace::longterm::recall(env.cfg, &env.ws.root, &query);
    let prompt = env.tpl.render(
        "prompt-frame.j2",
        json!({
            // With prefix sharing, context.md comes before this prompt, in the shared task part.
            "context": if super::shared_prefix(env.cfg) { String::new() } else { bounded(context.trim(), 20_000) },
            "memory": memory_text,
            "limits": state.limits,
            "tool_names": tool_names,
            "suggested_skills": env.skills.matching(&format!("{} {}", state.goal, context)),
            "reframe_reason": state.reframe_reason,
            "reframes": state.reframes,
            "recall": recall,
        }),
    )?;
    Ok((prompt, shown))
}
