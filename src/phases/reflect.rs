//! Reflect: compare the latest result with the Definition of Done and decide `continue`,
//! `done`, `reframe` or `escalate` (an enum in the answer's schema). `done` counts only when every item is ticked; otherwise it
//! becomes `continue` naming the open items (at most `max_done_refusals` times, then escalation).

use super::{account, ask, fail_phase, finish, frustration, Env, Outcome};
use crate::contract::{self, ReflectAnswer};
use crate::error::Result;
use crate::trace::{Entry, Phase};
use crate::workspace::{Commit, Next, State, StopKind};
use serde_json::json;

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

/// Compaction (seed 002 §4.4): past `memory.compact_facts` facts, the oldest half becomes one
/// "Summary of earlier facts" (a model call, or mechanically) and the full list is appended to
/// artifacts/facts-archive.md, whose new text is returned for the phase's commit. Nothing is
/// dropped from the record; a failed model call falls back to the mechanical summary.
fn compact(
    env: &mut Env,
    state: &mut State,
    mem: &mut crate::markdown::Memory,
) -> Result<(Option<String>, Option<Entry>)> {
    let max = env.cfg.memory.compact_facts;
    if max == 0 || mem.facts.len() <= max {
        return Ok((None, None));
    }
    let mut entry = None;
    let n = mem.facts.len() - max / 2;
    let old: Vec<String> = mem.facts.drain(..n).collect();
    let refs: Vec<String> = old
        .iter()
        .flat_map(|f| f.split(['(', ')', ',']).map(str::trim))
        .filter(|p| p.starts_with("step ") || p.starts_with("artifacts/") || p.starts_with("from run "))
        .map(String::from)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mechanical = || {
        let gist: Vec<String> = old.iter().map(|f| f.chars().take(60).collect::<String>()).collect();
        let mut s = gist.join("; ");
        if s.chars().count() > 600 {
            s = s.chars().take(600).collect::<String>() + "…";
        }
        s
    };
    let summary = if env.cfg.memory.compact_with == "model" {
        let prompt = format!(
            "Summarise these {} earlier facts of the run into one paragraph. Keep every fact that still matters and its step or artifact reference.\n\n{}",
            old.len(),
            old.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n")
        );
        match ask::<contract::CompactAnswer>(env, state, "compact", "", prompt, contract::compact_tool(), &|_| {}) {
            Ok(a) => {
                let mut e = Entry::new(&state.run_id, state.step, Phase::Reflect, "compact");
                account(env, state, &mut e, &a);
                entry = Some(e);
                a.value.summary.trim().to_string()
            }
            Err(_) => mechanical(),
        }
    } else {
        mechanical()
    };
    mem.facts.insert(
        0,
        format!(
            "Summary of earlier facts ({} facts; {}; all in artifacts/facts-archive.md): {summary}",
            old.len(),
            if refs.is_empty() { "no references".to_string() } else { refs.join(", ") }
        ),
    );
    let path = env.ws.artifacts().join("facts-archive.md");
    let mut text = crate::fs::read_optional(&path)?
        .unwrap_or_else(|| "# Facts archive\n\nFacts compacted out of memory.md, oldest first.\n".into());
    text.push_str(&format!("\n## Compacted at step {}\n\n", state.step));
    for f in &old {
        text.push_str(&format!("- {f}\n"));
    }
    Ok((Some(text), entry))
}

pub fn run(env: &mut Env, state: &mut State) -> Result<Outcome> {
    let (_, mut mem) = env.read_memory()?;
    let (_, mut plan) = env.read_plan()?;
    let memory_text = env.memory_prompt(&mem)?;
    let plan_text = env.plan_prompt(&plan)?;
    // Items are numbered as in memory.md; the answer names them by number.
    let open: Vec<String> =
        mem.dod.iter().enumerate().filter(|(_, i)| !i.done).map(|(n, i)| format!("{}. {}", n + 1, i.text)).collect();
    let prompt = env.tpl.render(
        "prompt-reflect.j2",
        json!({
            "step": state.step,
            "memory": memory_text,
            "plan": plan_text,
            "result": describe_result(state),
            "open_items": open,
        }),
    )?;
    let items: Vec<String> = mem.dod.iter().map(|i| i.text.clone()).collect();
    let tool = contract::reflect_tool(items.len());
    let answer =
        match ask::<ReflectAnswer>(env, state, "reflect", "", prompt, tool, &|v| contract::mend_satisfied(v, &items)) {
            Ok(a) => a,
            Err(e) => return fail_phase(env, state, Phase::Reflect, e),
        };
    let a = answer.value.clone();
    let mut ticked = Vec::new();
    for n in &a.satisfied {
        if let Some(item) = (*n as usize).checked_sub(1).and_then(|i| mem.dod.get_mut(i)) {
            if !item.done {
                ticked.push(item.text.clone());
            }
            item.done = true;
        }
    }
    let step = state.step;
    for f in a.facts.iter().map(|f| f.trim()).filter(|f| !f.is_empty()) {
        let cited = f.contains("step") || f.contains("artifacts/");
        mem.facts.push(if cited { f.to_string() } else { format!("{f} (step {step})") });
    }
    // Lessons for later runs go to long-term memory with where they came from; an id derived
    // from the run and step makes a replayed phase replace, not repeat, them.
    let artifact = state.last_result.as_ref().and_then(|r| r.artifacts.first().cloned());
    for (i, text) in a.remember.iter().map(|t| t.trim()).filter(|t| !t.is_empty()).enumerate() {
        let n = crate::longterm::New {
            topic: "learned".into(),
            content_id: Some(crate::longterm::loop_id(&state.run_id, step, &format!("r{i}"))),
            content: text.to_string(),
            provenance: crate::longterm::Provenance {
                run_id: Some(state.run_id.clone()),
                step: Some(step),
                artifact: artifact.clone(),
            },
            ..Default::default()
        };
        if let Err(e) = crate::longterm::write_from_loop(env.cfg, &env.ws.root, n) {
            env.printer.warn(&format!("long-term memory: {e}"));
        }
    }
    let (archive, compact_entry) = compact(env, state, &mut mem)?;
    let mut decision = a.decision.as_str().to_string();
    let mut reason = a.reason.trim().to_string();
    // `finish` (alias submit_response) ends the loop: after it, `continue` means `done`, which
    // still counts only when every Definition-of-Done item is ticked.
    let finished = state.last_result.as_ref().is_some_and(|r| r.is_ok() && r.metadata["finish"] == true);
    if finished && decision == "continue" {
        decision = "done".into();
        if reason.is_empty() {
            reason = "the run was finished with `finish`".into();
        }
    }
    let mut stop: Option<(StopKind, String)> = None;
    let lower = reason.to_lowercase();
    if let Some(t) = env.cfg.escalation_triggers.iter().find(|t| !t.is_empty() && lower.contains(&t.to_lowercase())) {
        mem.open_question = Some(reason.clone());
        stop = Some((StopKind::Escalated, format!("escalation trigger `{t}` in reflect: {reason}")));
    }
    let mut frustration_entries = Vec::new();
    if decision == "done" && !mem.all_done() {
        state.done_refusals += 1;
        let open = mem.open_items();
        let open_desc = if mem.dod.is_empty() {
            "the Definition of Done is empty".to_string()
        } else {
            format!("open items: {}", open.join("; "))
        };
        frustration_entries.extend(frustration::update(state, 2, &format!("`done` refused ({open_desc})")));
        let limit = (state.done_refusals > env.cfg.max_done_refusals).then(|| {
            format!(
                "the model declared done {} times with the Definition of Done incomplete ({open_desc})",
                state.done_refusals
            )
        });
        match frustration::over(env.cfg, state, limit).map(|r| frustration::verdict(env.cfg, state, r)) {
            Some(frustration::Verdict::Escalate(r)) => stop = Some((StopKind::Escalated, r)),
            Some(frustration::Verdict::Reframe(r)) => {
                frustration_entries.push(frustration::reframe(state, &r));
                reason = format!("forced reframe: {r}");
                decision = "reframe".into();
            }
            None => {
                reason = format!("`done` refused: {open_desc}. (model said: {reason})");
                decision = "continue".into();
            }
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
    let outline: Vec<crate::markdown::Item> = a
        .outline
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .map(|t| crate::markdown::Item { done: false, text: t.to_string() })
        .collect();
    if !outline.is_empty() {
        plan.outline = outline;
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
    // What this step ticked, for reports: the items' text, and the count after it.
    let done = mem.dod.iter().filter(|i| i.done).count();
    e.data = Some(json!({"ticked": ticked, "dod": {"done": done, "total": mem.dod.len()}}));
    let mut commit = Commit::default();
    let body = format!(
        "Decision: {decision}\n\nWhy: {reason}\n\nDefinition of Done: {} of {} done.\n",
        mem.dod.iter().filter(|i| i.done).count(),
        mem.dod.len()
    );
    let mut outcome = Outcome::Next;
    let forced = state.next == Next::Frame && state.reframe_reason.is_some() && decision == "reframe";
    if stop.is_none() {
        match decision.as_str() {
            "done" => mem.status = "done".into(),
            // A forced reframe (frustration) is already applied and counted.
            "reframe" if forced => {
                mem.status = format!("reframing ({} of {})", state.reframes, state.limits.max_reframes)
            }
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
    if let Some(text) = archive {
        commit.file("artifacts/facts-archive.md", text);
    }
    if let Some(c) = &compact_entry {
        commit.entry(c);
    }
    commit.file("decisions.md", env.decisions_with(step, "reflect", &format!("Decided: {decision}"), &body)?);
    commit.entry(&e);
    for f in &frustration_entries {
        commit.entry(f);
    }
    if let Some((kind, why)) = stop {
        finish(env, state, &mut commit, kind, &why, None)?;
        outcome = Outcome::Stopped(kind);
    } else if decision == "done" {
        // Unsaid, the outcome is the reason given for done.
        let summary = if finished { state.last_result.as_ref().map(|r| r.output.trim().to_string()) } else { None };
        let text = [a.outcome.trim(), summary.as_deref().unwrap_or(""), reason.as_str()]
            .into_iter()
            .find(|t| !t.is_empty())
            .unwrap_or("Every Definition-of-Done item is checked.")
            .to_string();
        let mut arts: Vec<String> = a.artifacts.iter().map(|p| p.trim().to_string()).collect();
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
