//! Frame: turn the task in context.md into a bounded objective in memory.md — a one-sentence
//! goal, a Definition of Done of 3–7 checkable items, constraints, assumptions and unknowns,
//! whether it can proceed, and an optional hypothesis. Re-entered on reframe.

use super::{account, ask_checked, fail_phase, finish, Env, Outcome};
use crate::contract::{self, FrameAnswer};
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

/// The headings of context.md, as text (`# Context` → `context`): an item that only repeats one
/// names a part of the task, not a result to check.
fn context_headings(env: &Env) -> Vec<String> {
    let text = agentloop_io::fs::read_inside(&env.ws.root, &env.ws.context()).ok().flatten().unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix('#'))
        .map(|h| norm(h.trim_start_matches('#')))
        .filter(|h| !h.is_empty())
        .collect()
}

/// Lower case, words only: `Definition_of_Done` and `definition of done` read alike.
fn norm(s: &str) -> String {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ").to_lowercase()
}

/// The Definition-of-Done items no later check can meet, as the problem to show the model:
/// an item without a letter (`0`, `1.`, `-`), a markdown heading (`# Context`), the field's own
/// name, or only one of context.md's headings (`Benchmark`). None when every item can be met.
pub fn uncheckable(items: &[String], headings: &[String]) -> std::result::Result<(), Uncheckable> {
    let bad: Vec<String> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let t = item.trim();
            let n = norm(t);
            // A blank item is kept and said to be blank (see `dod_items`).
            let why = if t.is_empty() {
                return None;
            } else if !t.chars().any(char::is_alphabetic) {
                "has no words"
            } else if t.starts_with('#') {
                "is a heading"
            } else if n == "definition of done" || n == "definition_of_done" {
                "is the field's own name"
            } else if headings.contains(&n) {
                "only repeats a heading of the task"
            } else {
                return None;
            };
            Some(format!("item {} ({t:?}) {why}", i + 1))
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(Uncheckable(bad))
}

/// The Definition-of-Done items no check can meet, each `item N ("text") why`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uncheckable(pub Vec<String>);

impl std::fmt::Display for Uncheckable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`definition_of_done` must list results a later step can check (e.g. \"summary.txt holds three bullet points\"), but {}",
            self.0.join("; ")
        )
    }
}

impl std::error::Error for Uncheckable {}

pub fn run(env: &mut Env, state: &mut State) -> Result<Outcome> {
    let reframing = state.reframe_reason.is_some();
    let (_, old) = env.read_memory()?;
    let (prompt, shown) = prompt(env, state, &old)?;
    let headings = context_headings(env);
    let check = |a: &FrameAnswer| {
        uncheckable(&a.definition_of_done, &headings).map_err(|e| super::ask::Refused::Check(Box::new(e)))
    };
    let answer =
        match ask_checked::<FrameAnswer>(env, state, "frame", "", prompt, contract::frame_tool(), &|_| {}, &check) {
            Ok(a) => a,
            Err(e) => return fail_phase(env, state, Phase::Frame, e),
        };
    let a = &answer.value;
    // Unsaid means yes: a model that framed the work but forgot the flag can go on.
    let can_proceed = a.can_proceed;
    let mut mem = new_memory(a, state, &old);
    let event = if reframing { Event::Reframe } else { Event::Frame };
    let mut e = Entry::new(&state.run_id, state.step, Phase::Frame, event.clone());
    account(env, state, &mut e, &answer);
    e.decision = Some(if can_proceed { "proceed".into() } else { "cannot_proceed".into() });
    e.reason = state.reframe_reason.clone();
    if !shown.is_empty() {
        e.data = Some(json!({"memory_shown": shown}));
    }
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
        return Ok(Outcome::Next);
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
    Ok(Outcome::Stopped(StopKind::Escalated))
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

#[cfg(test)]
mod tests {
    #[test]
    fn uncheckable_items_are_named_and_real_ones_pass() {
        let items = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let headings = vec!["context".to_string(), "benchmark".to_string()];
        assert!(super::uncheckable(&items(&["x written", "answer.txt holds 391", "done"]), &headings).is_ok());
        let e = super::uncheckable(
            &items(&["Definition of Done", "3.", "## Goal", "Benchmark", "bench marked"]),
            &headings,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("item 1 (\"Definition of Done\") is the field's own name"), "{e}");
        assert!(e.contains("item 2 (\"3.\") has no words"), "{e}");
        assert!(e.contains("item 3 (\"## Goal\") is a heading"), "{e}");
        assert!(e.contains("item 4 (\"Benchmark\") only repeats a heading of the task"), "{e}");
        assert!(!e.contains("item 5"), "{e}");
    }
}
