//! Reflect: compare the latest result with the Definition of Done and decide `continue`,
//! `done`, `reframe` or `escalate` (an enum in the answer's schema). `done` counts only when every item is ticked; otherwise it
//! becomes `continue` naming the open items (at most `max_done_refusals` times, then escalation).

use super::{account, ask, fail_phase, finish, frustration, Env, PhaseEnd};
use crate::contract::{self, ReflectAnswer};
use agentloop_types::error::Result;
use agentloop_types::tool_spec::ToolResult;
use agentloop_types::trace::{Entry, Event, Phase};
use agentloop_workspace::workspace::{Commit, Next, State, StopKind};
use serde_json::json;

fn describe_result(state: &State, shown: Option<String>) -> String {
    let Some(r) = &state.last_result else {
        return "(no action has run yet)".into();
    };
    let output = shown.unwrap_or_else(|| r.output.clone());
    let mut s = format!("step {}: status {}", state.step, r.status);
    if let Some(e) = &r.error {
        s.push_str(&format!("\nerror: {e}{}", if r.retryable { " (retryable)" } else { "" }));
    }
    if !r.artifacts.is_empty() {
        s.push_str(&format!("\nartifacts: {}", r.artifacts.join(", ")));
    }
    if !output.is_empty() {
        s.push_str("\noutput:\n");
        s.push_str(&output);
    }
    s
}

/// Compaction: past `memory.compact_facts` facts, the oldest half becomes one
/// "Summary of earlier facts" (a model call, or mechanically) and the full list is appended to
/// artifacts/facts-archive.md, whose new text is returned for the phase's commit. Nothing is
/// dropped from the record; a failed model call falls back to the mechanical summary.
///
/// There is one summary at most: an earlier one among the old facts (this run's, or one
/// carried from an earlier run) is folded into the new one — its count, its sources and its
/// text — never summarised as a fact. The summary names each source by its run; mechanical text
/// is cut at whole words.
fn compact(
    env: &mut Env,
    state: &mut State,
    mem: &mut agentloop_workspace::markdown::Memory,
) -> Result<(Option<String>, Option<Entry>)> {
    use agentloop_workspace::facts::{clip_words, is_summary, Summary};
    let max = env.cfg.memory.compact_facts;
    if max == 0 || mem.facts.len() <= max {
        return Ok((None, None));
    }
    let mut entry = None;
    let n = mem.facts.len() - max / 2;
    let mut taken: Vec<String> = mem.facts.drain(..n).collect();
    // A person's answer stays a fact of its own, ahead of the newer ones: never summarised away.
    let answers: Vec<String> = taken.extract_if(.., |f| agentloop_workspace::facts::is_answer(f)).collect();
    mem.facts.splice(0..0, answers);
    // A summary left among the newer facts joins the new one too.
    taken.extend(mem.facts.extract_if(.., |f| is_summary(f)));
    let (earlier, old): (Vec<String>, Vec<String>) = taken.into_iter().partition(|f| is_summary(f));
    let mut summary = Summary::default();
    let mut earlier_text = Vec::new();
    for s in earlier.iter().map(|f| Summary::parse(f, &state.run_id)) {
        summary.count += s.count;
        summary.sources.extend(s.sources);
        earlier_text.push(s.body);
    }
    summary.count += old.len();
    for f in &old {
        summary.sources.extend(agentloop_workspace::facts::sources_of(f, &state.run_id));
    }
    let mechanical = || {
        let mut parts: Vec<String> = earlier_text.iter().map(|t| clip_words(t, 300)).collect();
        parts.extend(old.iter().map(|f| clip_words(&agentloop_workspace::facts::split(f).0, 60)));
        clip_words(&parts.join("; "), 600)
    };
    summary.body = if env.cfg.memory.compact_with == agentloop_config::config::CompactWith::Model {
        let earlier_part = if earlier_text.is_empty() {
            String::new()
        } else {
            format!("Fold in the earlier summary (one paragraph, not nested):\n{}\n\n", earlier_text.join("\n"))
        };
        let prompt = format!(
            "Summarise these {} earlier facts of the run into one paragraph. Keep every fact that still matters and its step or artifact reference.\n\n{earlier_part}{}",
            old.len(),
            old.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n")
        );
        match ask::<contract::CompactAnswer>(env, state, "compact", "", prompt, contract::compact_tool(), &|_| {}) {
            Ok(a) => {
                let mut e = Entry::new(&state.run_id, state.step, Phase::Reflect, Event::Compact);
                account(env, state, &mut e, &a);
                entry = Some(e);
                // A summary the model began with the header would nest one in the other.
                let text = a.value.summary.trim();
                let text = if is_summary(text) { Summary::parse(text, &state.run_id).body } else { text.to_string() };
                text.split_whitespace().collect::<Vec<_>>().join(" ")
            }
            Err(_) => mechanical(),
        }
    } else {
        mechanical()
    };
    mem.facts.insert(0, summary.render());
    let path = env.ws.artifacts().join("facts-archive.md");
    let mut text = agentloop_io::fs::read_optional(&path)?
        .unwrap_or_else(|| "# Facts archive\n\nFacts compacted out of memory.md, oldest first.\n".into());
    text.push_str(&format!("\n## Compacted at step {} of run {}\n\n", state.step, state.run_id));
    for f in &old {
        text.push_str(&format!("- {f}\n"));
    }
    Ok((Some(text), entry))
}

pub fn run(env: &mut Env, state: &mut State) -> Result<PhaseEnd> {
    let (_, mem) = env.read_memory()?;
    let (_, plan) = env.read_plan()?;
    let answer = match ask_model(env, state, &mem, &plan)? {
        Ok(a) => a,
        Err(e) => return fail_phase(env, state, Phase::Reflect, e),
    };
    take(env, state, mem, plan, &answer, false)
}

/// Applies a reflection to memory.md, plan.md, decisions.md, the trace and the state, in one
/// commit; `fused` marks an answer that came with the next step's plan (`llm.fuse_phases`).
pub fn take(
    env: &mut Env,
    state: &mut State,
    mut mem: agentloop_workspace::markdown::Memory,
    mut plan: agentloop_workspace::markdown::Plan,
    answer: &ask::Answer<ReflectAnswer>,
    fused: bool,
) -> Result<PhaseEnd> {
    let a = answer.value.clone();
    let step = state.step;
    let record = agentloop_workspace::evidence::Footprint::read(&env.ws.trace(), &state.run_id)?;
    let root = env.ws.root.clone();
    let (ticked, refused) =
        take_answer(&mut mem, &a, step, &record, &|p: &str| agentloop_workspace::evidence::file_check(&root, p));
    state.refused_ticks = refused.iter().map(|r| r.line()).collect();
    remember(env, state, &a);
    let (archive, compact_entry) = compact(env, state, &mut mem)?;
    // `finish` (alias submit_response) ends the loop: after it, `continue` means `done`, which
    // still counts only when every Definition-of-Done item is ticked.
    let finished = state.last_result.as_ref().is_some_and(|r| r.is_ok() && r.metadata["finish"] == true)
        || held_finish(state, &mem);
    let mut d = decide(env.cfg, state, &mut mem, &a, finished);
    // A lean run's step line shows what its prompts show of the output.
    record_step(&mut plan, state, &a, env.lean_output(state));
    mem.log.push(format!("step {step} reflect: {} — {}", d.decision, d.reason.chars().take(160).collect::<String>()));
    let mut e = Entry::new(&state.run_id, step, Phase::Reflect, Event::Reflect);
    account(env, state, &mut e, answer);
    e.decision = Some(d.decision.clone());
    e.reason = Some(d.reason.clone());
    // What this step ticked, for reports: the items' text, and the count after it.
    let done = mem.dod.iter().filter(|i| i.done).count();
    let mut data = json!({"ticked": ticked, "dod": {"done": done, "total": mem.dod.len()}});
    if fused {
        data["fused"] = json!(true);
    }
    e.data = Some(data);
    let mut body = format!(
        "Decision: {}\n\nWhy: {}\n\nDefinition of Done: {done} of {} done.\n",
        d.decision,
        d.reason,
        mem.dod.len()
    );
    if !refused.is_empty() {
        body.push_str("\nTicks refused (the items stay open):\n");
        for r in &refused {
            body.push_str(&format!("- {}\n", r.line()));
        }
    }
    apply(state, &mut mem, &mut d);
    // A run that ends done has carried out its outline: plan.md says so (its `Finish` ticked),
    // so the file and every view of it agree.
    if d.stop.is_none() && d.decision == "done" {
        plan.outline.iter_mut().for_each(|i| i.done = true);
    }
    let mut commit = Commit::default();
    commit.file("memory.md", env.render_memory(&mem)?);
    commit.file("plan.md", env.render_plan(&plan)?);
    if let Some(text) = archive {
        commit.file("artifacts/facts-archive.md", text);
    }
    if let Some(c) = &compact_entry {
        commit.entry(c);
    }
    commit.append("decisions.md", env.decisions_with(step, "reflect", &format!("Decided: {}", d.decision), &body)?);
    commit.entry(&e);
    for r in &refused {
        commit.entry(&refusal_entry(state, r));
    }
    for f in &d.entries {
        commit.entry(f);
    }
    let outcome = conclude(env, state, &mut commit, d, &a, finished)?;
    env.commit(&commit)?;
    Ok(outcome)
}

/// Renders the reflect prompt and asks for the answer.
fn ask_model(
    env: &mut Env,
    state: &State,
    mem: &agentloop_workspace::markdown::Memory,
    plan: &agentloop_workspace::markdown::Plan,
) -> Result<std::result::Result<ask::Answer<ReflectAnswer>, ask::AskError>> {
    let prompt = prompt(env, state, mem, plan)?;
    let items: Vec<String> = mem.dod.iter().map(|i| i.text.clone()).collect();
    if env.lean() {
        // The items still open and the steps that can back a tick, as the schema's choices.
        // An item that names a file still to be written is not met yet: not tickable.
        let unwritten = env.lean_pending(state);
        let open: Vec<u32> = (1..)
            .zip(&mem.dod)
            .filter(|(_, i)| !i.done && !unwritten.iter().any(|f| i.text.contains(f.as_str())))
            .map(|(n, _)| n)
            .collect();
        let record = agentloop_workspace::evidence::Footprint::read(&env.ws.trace(), &state.run_id)?;
        let steps: Vec<u32> = record.steps.iter().filter(|(_, ok)| **ok).map(|(s, _)| *s).collect();
        // No `done` before the files the goal names are written, nor, with an output schema,
        // before `finish` gave the output (`done` would be refused).
        let pending = !unwritten.is_empty() || (state.output_schema.is_some() && state.output.is_none());
        let tool = crate::lean::reflect(&open, &steps, pending);
        return Ok(ask::<ReflectAnswer>(env, state, "reflect", "", prompt, tool, &|v| {
            contract::mend_satisfied(v, &items)
        }));
    }
    let tool = contract::reflect_tool(items.len());
    Ok(ask::<ReflectAnswer>(env, state, "reflect", "", prompt, tool, &|v| contract::mend_satisfied(v, &items)))
}

/// The reflect prompt: the step's result against the Definition of Done, memory.md and plan.md.
pub fn prompt(
    env: &Env,
    state: &State,
    mem: &agentloop_workspace::markdown::Memory,
    plan: &agentloop_workspace::markdown::Plan,
) -> Result<String> {
    let memory_text = env.memory_prompt(mem)?;
    let plan_text = env.plan_prompt(plan)?;
    // Items are numbered as in memory.md; the answer names them by number.
    let open: Vec<String> =
        mem.dod.iter().enumerate().filter(|(_, i)| !i.done).map(|(n, i)| format!("{}. {}", n + 1, i.text)).collect();
    let mut vars = json!({
        "step": state.step,
        "memory": memory_text,
        "plan": plan_text,
        // A lean prompt shows what it shows of the output ([`Env::lean_output`]).
        "result": describe_result(state, env.lean_output(state)),
        "open_items": open,
        "refused": state.refused_ticks,
        "lean": false,
    });
    if env.lean() {
        agentloop_types::json::merge(&mut vars, env.lean_view(mem, plan, state));
    }
    env.tpl.render("prompt-reflect.j2", vars)
}

/// Ticks the items the answer names whose evidence checks out against the run's record
/// ([`agentloop_workspace::evidence::check`]), writing the evidence under each, and records its facts (cited
/// by step); returns the text of the items this step ticked and the ticks refused (their items
/// stay open).
fn take_answer(
    mem: &mut agentloop_workspace::markdown::Memory,
    a: &ReflectAnswer,
    step: u32,
    record: &agentloop_workspace::evidence::Footprint,
    file: &dyn Fn(&str) -> agentloop_workspace::evidence::FileCheck,
) -> (Vec<String>, Vec<agentloop_workspace::evidence::Refusal>) {
    let mut ticked = Vec::new();
    let mut refused = Vec::new();
    for t in &a.satisfied {
        let Some(item) = (t.item as usize).checked_sub(1).and_then(|i| mem.dod.get_mut(i)) else { continue };
        if item.done {
            continue;
        }
        let cited = agentloop_workspace::evidence::Evidence { steps: t.steps.clone(), artifacts: t.artifacts.clone() };
        match agentloop_workspace::evidence::check(&cited, record, file) {
            Ok(evidence) => {
                ticked.push(item.text.clone());
                item.done = true;
                item.evidence = evidence;
            }
            Err(reasons) => refused.push(agentloop_workspace::evidence::Refusal {
                item: t.item,
                text: item.text.clone(),
                cited,
                reasons,
            }),
        }
    }
    for f in a.facts.iter().map(|f| f.trim()).filter(|f| !f.is_empty()) {
        let cited = f.contains("step") || f.contains("artifacts/");
        // Learned again: the line it already has gains this step as a source.
        agentloop_workspace::facts::add(
            &mut mem.facts,
            if cited { f.to_string() } else { format!("{f} (step {step})") },
        );
    }
    (ticked, refused)
}

/// The trace entry of a refused tick: the item, what it cited and why each citation failed.
fn refusal_entry(state: &State, r: &agentloop_workspace::evidence::Refusal) -> Entry {
    let mut e = Entry::new(&state.run_id, state.step, Phase::Reflect, Event::TickRefused);
    e.reason = Some(r.reasons.join("; "));
    e.data = Some(json!({"item": r.item, "text": r.text, "cited": r.cited, "reasons": r.reasons}));
    e
}

/// Lessons for later runs go to long-term memory with where they came from; an id derived from
/// the run and step makes a replayed phase replace, not repeat, them.
fn remember(env: &Env, state: &State, a: &ReflectAnswer) {
    let step = state.step;
    let artifact = state.last_result.as_ref().and_then(|r| r.artifacts.first().cloned());
    for (i, text) in a.remember.iter().map(|t| t.trim()).filter(|t| !t.is_empty()).enumerate() {
        let n = agentloop_workspace::longterm::New {
            topic: "learned".into(),
            content_id: Some(agentloop_workspace::longterm::loop_id(&state.run_id, step, &format!("r{i}"))),
            content: text.to_string(),
            provenance: agentloop_workspace::longterm::Provenance {
                run_id: Some(state.run_id.clone()),
                step: Some(step),
                artifact: artifact.clone(),
                ..Default::default()
            },
            ..Default::default()
        };
        if let Err(e) = agentloop_workspace::longterm::write_from_loop(env.cfg, &env.ws.root, n) {
            env.printer.warn(&format!("long-term memory: {e}"));
        }
    }
}

/// What Reflect decided once the program's rules are applied to the model's answer.
struct Judgement {
    decision: String,
    reason: String,
    stop: Option<(StopKind, String)>,
    /// Frustration entries for the trace.
    entries: Vec<Entry>,
}

/// The decision step: escalation triggers, `done` only with every item ticked (refusals, then
/// frustration's forced reframe or escalation).
fn decide(
    cfg: &agentloop_config::config::Config,
    state: &mut State,
    mem: &mut agentloop_workspace::markdown::Memory,
    a: &ReflectAnswer,
    finished: bool,
) -> Judgement {
    let mut d = Judgement {
        decision: a.decision.as_str().to_string(),
        reason: a.reason.trim().to_string(),
        stop: None,
        entries: Vec::new(),
    };
    if finished && d.decision == "continue" {
        d.decision = "done".into();
        if d.reason.is_empty() {
            d.reason = "the run was finished with `finish`".into();
        }
    }
    let lower = d.reason.to_lowercase();
    if let Some(t) = cfg.escalation_triggers.iter().find(|t| !t.is_empty() && lower.contains(&t.to_lowercase())) {
        mem.open_question = Some(d.reason.clone());
        d.stop = Some((StopKind::Escalated, format!("escalation trigger `{t}` in reflect: {}", d.reason)));
    }
    // With an output schema, done also needs the final output `finish` gave.
    let no_output = state.output_schema.is_some() && state.output.is_none();
    if d.decision != "done" || (mem.all_done() && !no_output) {
        return d;
    }
    state.done_refusals += 1;
    let open_desc = if mem.all_done() && !mem.dod.is_empty() {
        "no final output yet: call `finish` with `output` matching the output schema".to_string()
    } else if mem.dod.is_empty() {
        "the Definition of Done is empty".to_string()
    } else {
        let mut s = format!("open items: {}", mem.open_items().join("; "));
        if !state.refused_ticks.is_empty() {
            s.push_str(&format!("; ticks refused for want of evidence: {}", state.refused_ticks.join("; ")));
        }
        s
    };
    d.entries.extend(frustration::update(state, 2, &format!("`done` refused ({open_desc})")));
    let limit = (state.done_refusals > cfg.max_done_refusals).then(|| {
        format!(
            "the model declared done {} times with the Definition of Done incomplete ({open_desc})",
            state.done_refusals
        )
    });
    match frustration::over(cfg, state, limit).map(|r| frustration::verdict(cfg, state, r)) {
        Some(frustration::Verdict::Escalate(r)) => d.stop = Some((StopKind::Escalated, r)),
        Some(frustration::Verdict::OutOfSteps(r)) => {
            d.stop = Some((StopKind::Budget(agentloop_types::budget::Budget::MaxSteps), r))
        }
        Some(frustration::Verdict::Reframe(r)) => {
            d.entries.push(frustration::reframe(state, &r));
            d.reason = format!("forced reframe: {r}");
            d.decision = "reframe".into();
        }
        None => {
            d.reason = match d.reason.trim() {
                "" => format!("`done` refused: {open_desc}."),
                said => format!("`done` refused: {open_desc}. (model said: {said})"),
            };
            d.decision = "continue".into();
        }
    }
    d
}

/// plan.md after the step: the completed action, the outline (the model's, or the next item
/// ticked), no Next Action.
fn record_step(
    plan: &mut agentloop_workspace::markdown::Plan,
    state: &State,
    a: &ReflectAnswer,
    shown: Option<String>,
) {
    if let Some(r) = &state.last_result {
        let tool = plan.next_action.as_ref().map(|a| a.tool.as_str()).unwrap_or("action");
        let mut r = r.clone();
        r.output = shown.unwrap_or(r.output);
        plan.completed.push(format!(
            "step {}: {tool} {} — {}",
            state.step,
            r.status,
            r.summary().chars().take(120).collect::<String>()
        ));
    }
    let outline: Vec<agentloop_workspace::markdown::Item> = a
        .outline
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .map(agentloop_workspace::markdown::Item::open)
        .collect();
    if !outline.is_empty() {
        plan.outline = outline;
    } else if let Some(first_open) = plan.outline.iter_mut().find(|i| !i.done) {
        first_open.done = true;
    }
    plan.next_action = None;
    plan.next_step = None;
}

/// Applies the decision to the state and memory.md's status: the next phase, a reframe counted
/// against its budget, an escalation's open question.
fn apply(state: &mut State, mem: &mut agentloop_workspace::markdown::Memory, d: &mut Judgement) {
    let forced = state.next == Next::Frame && state.reframe_reason.is_some() && d.decision == "reframe";
    let reframing = |state: &State| format!("reframing ({} of {})", state.reframes, state.limits.max_reframes);
    // A reframe with no step left to use would only spend a framing call: the run stops here.
    if d.stop.is_none() && d.decision == "reframe" && state.step >= state.limits.max_steps {
        let why = format!(
            "max_steps reached: {} of {} steps used (reflect asked to reframe: {})",
            state.step, state.limits.max_steps, d.reason
        );
        d.stop = Some((StopKind::Budget(agentloop_types::budget::Budget::MaxSteps), why));
    }
    if d.stop.is_none() {
        match d.decision.as_str() {
            "done" => mem.status = "done".into(),
            // A forced reframe (frustration) is already applied and counted.
            "reframe" if forced => mem.status = reframing(state),
            "reframe" => {
                state.reframes += 1;
                if state.reframes > state.limits.max_reframes {
                    let why = format!(
                        "max_reframes reached: reframe {} of at most {} ({})",
                        state.reframes, state.limits.max_reframes, d.reason
                    );
                    d.stop = Some((StopKind::Budget(agentloop_types::budget::Budget::MaxReframes), why));
                } else {
                    state.reframe_reason = Some(d.reason.clone());
                    state.next = Next::Frame;
                    mem.status = reframing(state);
                }
            }
            "escalate" => {
                d.stop = Some((StopKind::Escalated, format!("escalated by reflect: {}", d.reason)));
                mem.open_question = Some(d.reason.clone());
            }
            _ => {
                state.next = Next::Plan;
                let done = mem.dod.iter().filter(|i| i.done).count();
                mem.status =
                    format!("step {} done; {done} of {} Definition-of-Done items checked", state.step, mem.dod.len());
            }
        }
    }
    if let Some((_, why)) = &d.stop {
        mem.status = format!("escalated: {why}");
    }
}

/// Ends the run in this commit (a stop, or `done` with its outcome and artifacts), or keeps the
/// state for the next phase.
/// A `finish` Act held while items were open (act's `hold_finish`) ends the run after all when
/// this Reflect's ticks closed the last item: it is taken as it would have run — its summary
/// the outcome, its output and files the run's.
fn held_finish(state: &mut State, mem: &agentloop_workspace::markdown::Memory) -> bool {
    let Some(r) = state.last_result.as_ref().filter(|r| r.metadata["finish_held"] == true) else {
        return false;
    };
    if mem.dod.iter().any(|i| !i.done) {
        return false;
    }
    let summary = r.metadata["summary"].as_str().unwrap_or_default().to_string();
    let output = r.metadata.get("output").cloned();
    let artifacts: Vec<String> =
        r.metadata["artifacts"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(String::from)).collect();
    let mut taken = ToolResult::ok(summary, json!({"finish": true}));
    taken.artifacts = artifacts;
    super::act::take_artifacts(state, &taken.artifacts);
    if let Some(out) = output {
        state.output = Some(out.clone());
        taken.metadata["output"] = out;
    }
    state.last_result = Some(taken);
    true
}

fn conclude(
    env: &mut Env,
    state: &mut State,
    commit: &mut Commit,
    d: Judgement,
    a: &ReflectAnswer,
    finished: bool,
) -> Result<PhaseEnd> {
    if let Some((kind, why)) = d.stop {
        finish(env, state, commit, kind, &why, None)?;
        return Ok(PhaseEnd::Stopped(kind));
    }
    if d.decision != "done" {
        commit.state = Some(state.clone());
        return Ok(PhaseEnd::Next);
    }
    // Unsaid, the outcome is the reason given for done.
    let summary = if finished { state.last_result.as_ref().map(|r| r.output.trim().to_string()) } else { None };
    let text = [a.outcome.trim(), summary.as_deref().unwrap_or(""), d.reason.as_str()]
        .into_iter()
        .find(|t| !t.is_empty())
        .unwrap_or("Every Definition-of-Done item is checked.")
        .to_string();
    // Every claim is passed on, as a workspace-relative path where it lands inside (`./a.md` is
    // `a.md`): `finish` keeps the files that exist and lists the rest apart.
    let arts: Vec<String> = a
        .artifacts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .map(|p| match agentloop_io::fs::in_workspace(&env.ws.root, camino::Utf8Path::new(p)) {
            Some(rel) => rel.to_string(),
            None => p.to_string(),
        })
        .collect();
    finish(env, state, commit, StopKind::Done, &d.reason, Some((text, arts)))?;
    Ok(PhaseEnd::Stopped(StopKind::Done))
}
