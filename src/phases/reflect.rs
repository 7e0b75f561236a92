//! Reflect: compare the latest result with the Definition of Done and decide `continue`,
//! `done`, `reframe` or `escalate`. `done` counts only when every item is ticked; otherwise it
//! becomes `continue` naming the open items (at most `max_done_refusals` times, then escalation).

use super::{account, ask, fail_phase, finish, Env, Outcome};
use crate::error::Result;
use crate::model::ToolDef;
use crate::trace::{Entry, Phase};
use crate::workspace::{Commit, Next, State, StopKind};
use serde_json::{json, Value};

pub fn answer_tool() -> ToolDef {
    ToolDef {
        name: "reflect_answer".into(),
        description: "Record progress against the Definition of Done and the decision.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "satisfied": {"type": "array", "items": {"type": ["integer", "string"]}, "description": "Definition-of-Done items now satisfied: their numbers (1-based) or exact text"},
                "facts": {"type": "array", "items": {"type": "string"}, "description": "New facts, each citing its step or artifact"},
                "decision": {"type": "string", "description": "One of: continue, done, reframe, escalate"},
                "reason": {"type": "string", "minLength": 1, "description": "Why this decision"},
                "outcome": {"type": "string", "description": "On done: the final outcome for the person who asked"},
                "artifacts": {"type": "array", "items": {"type": "string"}, "description": "On done: the files produced"},
                "outline": {"type": "array", "items": {"type": "string"}, "description": "Optional: the adjusted outline of remaining steps"}
            },
            "required": ["decision"]
        }),
    }
}

const DECISIONS: [&str; 4] = ["continue", "done", "reframe", "escalate"];

/// The decision, lower-cased (small models capitalise it).
fn decision_of(a: &Value) -> String {
    a["decision"].as_str().unwrap_or("").trim().to_lowercase()
}

fn check(a: &Value) -> std::result::Result<(), String> {
    let d = decision_of(a);
    if !DECISIONS.contains(&d.as_str()) {
        return Err(format!("decision `{d}` is not one of continue, done, reframe, escalate"));
    }
    if d == "done" && a.get("outcome").and_then(Value::as_str).is_none_or(|o| o.trim().is_empty()) {
        return Err("decision `done` needs an `outcome`: the final result for the person who asked".into());
    }
    Ok(())
}

fn describe_result(state: &State) -> String {
    let Some(r) = &state.last_result else {
        return "(no action has run yet)".into();
    };
    let mut s = format!("step {}: status {}", state.step, r.status);
    if let Some(e) = &r.error {
        s.push_str(&format!("\nerror: {e}{}", if r.retryable { " (retryable)" } else { "" }));
    }
    if !r.artifacts.is_empty() {
        s.push_str(&format!("\nartifacts: {}", r.artifacts.join(", ")));
    }
    if !r.output.is_empty() {
        s.push_str("\noutput:\n");
        s.push_str(&r.output);
    }
    s
}

pub fn run(env: &mut Env, state: &mut State) -> Result<Outcome> {
    let (_, mut mem) = env.read_memory()?;
    let (_, mut plan) = env.read_plan()?;
    let memory_text = env.memory_prompt(&mem)?;
    let plan_text = env.plan_prompt(&plan)?;
    let prompt = env.tpl.render(
        "prompt-reflect.j2",
        json!({
            "step": state.step,
            "memory": memory_text,
            "plan": plan_text,
            "result": describe_result(state),
            "open_items": mem.open_items(),
        }),
    )?;
    let answer = match ask(env, state, "reflect", "", prompt, answer_tool(), &check) {
        Ok(a) => a,
        Err(e) => return fail_phase(env, state, Phase::Reflect, e),
    };
    let a = answer.args.clone();
    // Tick the items the model says are satisfied (by number or by text).
    // Items may come as numbers, as text, or as one string of numbers ("1, 3").
    let satisfied: Vec<Value> = a
        .get("satisfied")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .flat_map(|v| match v.as_str() {
            Some(t) if t.split(',').all(|p| p.trim().parse::<usize>().is_ok()) => {
                t.split(',').map(|p| Value::String(p.trim().to_string())).collect()
            }
            _ => vec![v],
        })
        .collect();
    for s in satisfied {
        let idx = match &s {
            Value::Number(n) => n.as_u64().and_then(|n| (n as usize).checked_sub(1)),
            Value::String(t) => {
                let t = t.trim().to_lowercase();
                t.parse::<usize>().ok().and_then(|n| n.checked_sub(1)).or_else(|| {
                    mem.dod
                        .iter()
                        .position(|i| i.text.to_lowercase() == t)
                        .or_else(|| mem.dod.iter().position(|i| !t.is_empty() && i.text.to_lowercase().contains(&t)))
                })
            }
            _ => None,
        };
        if let Some(item) = idx.and_then(|i| mem.dod.get_mut(i)) {
            item.done = true;
        }
    }
    let step = state.step;
    for f in a.get("facts").and_then(Value::as_array).cloned().unwrap_or_default() {
        if let Some(f) = f.as_str().map(str::trim).filter(|f| !f.is_empty()) {
            let cited = f.contains("step") || f.contains("artifacts/");
            mem.facts.push(if cited { f.to_string() } else { format!("{f} (step {step})") });
        }
    }
    let mut decision = decision_of(&a);
    let mut reason = a["reason"].as_str().unwrap_or("").trim().to_string();
    let mut stop: Option<(StopKind, String)> = None;
    let lower = reason.to_lowercase();
    if let Some(t) = env.cfg.escalation_triggers.iter().find(|t| !t.is_empty() && lower.contains(&t.to_lowercase())) {
        mem.open_question = Some(reason.clone());
        stop = Some((StopKind::Escalated, format!("escalation trigger `{t}` in reflect: {reason}")));
    }
    if decision == "done" && !mem.all_done() {
        state.done_refusals += 1;
        let open = mem.open_items();
        let open_desc = if mem.dod.is_empty() {
            "the Definition of Done is empty".to_string()
        } else {
            format!("open items: {}", open.join("; "))
        };
        if state.done_refusals > env.cfg.max_done_refusals {
            stop = Some((
                StopKind::Escalated,
                format!(
                    "the model declared done {} times with the Definition of Done incomplete ({open_desc})",
                    state.done_refusals
                ),
            ));
        } else {
            reason = format!("`done` refused: {open_desc}. (model said: {reason})");
            decision = "continue".into();
        }
    }
    if let Some(r) = &state.last_result {
        let tool = plan.next_action.as_ref().map(|a| a.tool.as_str()).unwrap_or("action");
        plan.completed.push(format!(
            "step {step}: {tool} {} — {}",
            r.status,
            r.summary().chars().take(120).collect::<String>()
        ));
    }
    if let Some(o) = a.get("outline").and_then(Value::as_array) {
        let items: Vec<crate::markdown::Item> = o
            .iter()
            .filter_map(|x| x.as_str())
            .map(|t| crate::markdown::Item { done: false, text: t.to_string() })
            .collect();
        if !items.is_empty() {
            plan.outline = items;
        }
    } else if let Some(first_open) = plan.outline.iter_mut().find(|i| !i.done) {
        first_open.done = true;
    }
    plan.next_action = None;
    plan.next_step = None;
    mem.log.push(format!("step {step} reflect: {decision} — {}", reason.chars().take(160).collect::<String>()));
    let mut e = Entry::new(&state.run_id, step, Phase::Reflect, "reflect");
    account(env, state, &mut e, &answer);
    e.decision = Some(decision.clone());
    e.reason = Some(reason.clone());
    let mut commit = Commit::default();
    let body = format!(
        "Decision: {decision}\n\nWhy: {reason}\n\nDefinition of Done: {} of {} done.\n",
        mem.dod.iter().filter(|i| i.done).count(),
        mem.dod.len()
    );
    let mut outcome = Outcome::Next;
    if stop.is_none() {
        match decision.as_str() {
            "done" => mem.status = "done".into(),
            "reframe" => {
                state.reframes += 1;
                if state.reframes > state.limits.max_reframes {
                    stop = Some((
                        StopKind::Budget,
                        format!(
                            "max_reframes reached: reframe {} of at most {} ({reason})",
                            state.reframes, state.limits.max_reframes
                        ),
                    ));
                } else {
                    state.reframe_reason = Some(reason.clone());
                    state.next = Next::Frame;
                    mem.status = format!("reframing ({} of {})", state.reframes, state.limits.max_reframes);
                }
            }
            "escalate" => {
                stop = Some((StopKind::Escalated, format!("escalated by reflect: {reason}")));
                mem.open_question = Some(reason.clone());
            }
            _ => {
                state.next = Next::Plan;
                mem.status = format!(
                    "step {step} done; {} of {} Definition-of-Done items checked",
                    mem.dod.iter().filter(|i| i.done).count(),
                    mem.dod.len()
                );
            }
        }
    }
    if let Some((_, why)) = &stop {
        mem.status = format!("escalated: {why}");
    }
    commit.file("memory.md", env.render_memory(&mem)?);
    commit.file("plan.md", env.render_plan(&plan)?);
    commit.file("decisions.md", env.decisions_with(step, "reflect", &format!("Decided: {decision}"), &body)?);
    commit.entry(&e);
    if let Some((kind, why)) = stop {
        finish(env, state, &mut commit, kind, &why, None)?;
        outcome = Outcome::Stopped(kind);
    } else if decision == "done" {
        let text = a.get("outcome").and_then(Value::as_str).unwrap_or("").trim().to_string();
        let mut arts: Vec<String> = a
            .get("artifacts")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(|x| x.as_str().map(String::from)).collect())
            .unwrap_or_default();
        // Only files inside the workspace that exist are reported as artifacts.
        arts.retain(|p| {
            let rel = camino::Utf8Path::new(p);
            rel.is_relative()
                && !rel.components().any(|c| matches!(c, camino::Utf8Component::ParentDir))
                && env.ws.root.join(rel).exists()
        });
        finish(env, state, &mut commit, StopKind::Done, &reason, Some((text, arts)))?;
        outcome = Outcome::Stopped(StopKind::Done);
    } else {
        commit.state = Some(state.clone());
    }
    env.commit(&commit)?;
    Ok(outcome)
}
