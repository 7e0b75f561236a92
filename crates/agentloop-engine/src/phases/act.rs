//! Act: pure execution, no model call. Parses the Next Action from plan.md (a human edit made
//! after `plan` is honoured), refuses tools outside `allowed_tools` (recording why), runs the
//! tool, keeps large output in artifacts/, and records the result for Reflect.

use super::{finish, frustration, Env, PhaseEnd};
use agentloop_tools::tool_env::ToolEnv;
use agentloop_types::budget::Budget;
use agentloop_types::error::{Error, Result};
use agentloop_types::tool_spec::ToolResult;
use agentloop_types::trace::{Entry, Event, Phase};
use agentloop_workspace::markdown::NextAction;
use agentloop_workspace::workspace::{Commit, Next, State, StopKind};
use serde_json::json;

fn fingerprint(a: &NextAction, r: &ToolResult) -> String {
    // A listing of the workspace without agentloop's own entries, whose sizes change at every
    // step: the same listing again is the same result.
    let output = match a.tool.as_str() {
        "list_dir" => agentloop_tools::tools::files::user_entries(r).join("\n"),
        _ => r.output.clone(),
    };
    // FNV-1a over the action and its result: equal prints mean the same action, same result.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in a
        .tool
        .bytes()
        .chain(a.args.to_string().bytes())
        .chain(r.status.as_str().bytes())
        .chain(output.bytes())
        .chain(r.error.clone().unwrap_or_default().bytes())
    {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// Runs one action and returns its result (the registry never panics or errors).
pub fn execute(env: &Env, step: u32, action: &NextAction) -> ToolResult {
    if !env.registry.is_allowed(env.cfg, &action.tool) {
        return ToolResult::err(
            format!("tool `{}` is not in allowed_tools; Act refused to run it", action.tool),
            false,
        );
    }
    let tenv = ToolEnv {
        root: &env.ws.root,
        config: env.cfg,
        skills: &env.skills,
        artifact_stem: format!("step-{step}-{}", action.tool),
    };
    env.printer.progress(&format!("[step {step}] act     running {}…", action.tool));
    env.registry.call(&tenv, &action.tool, &action.args)
}

pub fn run(env: &mut Env, state: &mut State) -> Result<PhaseEnd> {
    let (_, plan) = env.read_plan()?;
    let Some(action) = plan.next_action.clone() else {
        return Err(Error::data(format!("{} has no Next Action block", env.ws.plan())).with_hint(format!(
            "restore the ```json next-action block, or choose again with {}",
            env.ws.cli("plan --force")
        )));
    };
    let step = state.pending.as_ref().map(|p| p.step).or(plan.next_step).unwrap_or(state.step.max(1));
    let (run_action, output) = split_output(state, &action);
    let edited = state.pending.as_ref().is_some_and(|p| p.tool != action.tool || p.args != action.args);
    // A hand edit that names an unknown tool or arguments its schema refuses is a broken file
    // (exit 8), found before the step is used; a disallowed tool is still a recorded refusal.
    let refusal_recorded = env.registry.get(&action.tool).is_some() && !env.registry.is_allowed(env.cfg, &action.tool);
    if edited && !refusal_recorded {
        if let Err(e) = env.registry.check(env.cfg, &run_action.tool, &run_action.args) {
            return Err(Error::data(format!("{}: the edited Next Action cannot run: {e}", env.ws.plan())).with_hint(
                "fix the tool name or its arguments in the `json next-action` block (`agentloop tools list` shows each tool's parameters), then run `agentloop act`",
            ));
        }
    }
    let watch = agentloop_types::clock::Stopwatch::start();
    let result = hold_finish(env, &action, take_output(state, execute(env, step, &run_action), output))?;
    agentloop_io::crash::point("phase:act:after-tool");
    let outcome = record(env, state, step, &action, result, watch.ms(), edited)?;
    Ok(outcome)
}

/// `finish` is held, not run, while the Definition of Done has open items: the run ends done
/// only once Reflect has ticked each of them with its evidence. The result is a refusal that
/// names the open items, so the model's next plan sees what is left (a model that insists meets
/// the failure and repeat limits). What `finish` said is kept with it: Reflect may tick an item
/// this step showed (the answer itself, say) and, when that closes the last one, the run ends
/// done with this finish's summary, output and files (see reflect's `held_finish`).
fn hold_finish(env: &Env, action: &NextAction, result: ToolResult) -> Result<ToolResult> {
    if !agentloop_types::tool_spec::is_finish(&action.tool) || !result.is_ok() {
        return Ok(result);
    }
    let (_, mem) = env.read_memory()?;
    let open = mem.open_items();
    if open.is_empty() {
        return Ok(result);
    }
    let mut held = ToolResult::err(
        format!(
            "`finish` refused: {} of the Definition of Done {} still open ({}). The run ends done only \
             when Reflect has ticked every item, each citing the step or file that shows it",
            open.len(),
            if open.len() == 1 { "item is" } else { "items are" },
            mem.open_items_quoted()
        ),
        false,
    );
    held.metadata = json!({"finish_held": true, "open": open, "summary": result.output, "artifacts": result.artifacts});
    if let Some(out) = result.metadata.get("output") {
        held.metadata["output"] = out.clone();
    }
    Ok(held)
}

/// With an output schema, `finish`'s `output` is the run's final output: it is taken out of the
/// arguments the tool itself checks, and held to the output schema by [`take_output`].
fn split_output(state: &State, action: &NextAction) -> (NextAction, Option<Option<serde_json::Value>>) {
    if !agentloop_types::tool_spec::is_finish(&action.tool) || state.output_schema.is_none() {
        return (action.clone(), None);
    }
    let mut a = action.clone();
    let out = a.args.as_object_mut().and_then(|m| m.remove("output"));
    (a, Some(out))
}

/// A `finish` whose output does not match the output schema is a failed step (the error says
/// what does not match); one that does carries the output in its metadata.
fn take_output(state: &State, result: ToolResult, output: Option<Option<serde_json::Value>>) -> ToolResult {
    let (Some(out), Some(schema)) = (output, &state.output_schema) else {
        return result;
    };
    if !result.is_ok() {
        return result;
    }
    match (crate::output_schema::check_output(schema, out.as_ref()), out) {
        (Ok(()), Some(out)) => {
            let mut r = result;
            r.metadata["output"] = out;
            r
        }
        (Err(e), _) => ToolResult::err(e.to_string(), false),
        (Ok(()), None) => ToolResult::err("`finish` needs `output`", false),
    }
}

/// Records an action's result (also used by event mode for external tool results).
pub fn record(
    env: &Env,
    state: &mut State,
    step: u32,
    action: &NextAction,
    result: ToolResult,
    duration_ms: u64,
    edited: bool,
) -> Result<PhaseEnd> {
    let ok = result.is_ok();
    let failed = (!ok).then_some("tool_error");
    let call_id = format!("{}:step:{step}", state.run_id);
    agentloop_model::otel::tool(
        agentloop_model::otel::capture(env.cfg),
        &call_id,
        &action.tool,
        &action.args,
        (&result.output, failed),
        duration_ms,
    );
    env.note(crate::transcript::tool_call(step, &action.tool, &action.args, &result));
    let e = entry(state, step, action, &result, duration_ms, edited);
    take_result(state, step, action, &result);
    let mut commit = Commit::default();
    commit.entry(&e);
    // memory.md changes only for a spilled output (its path, so later phases can read it back)
    // or a forced reframe (its status).
    let spill = result.artifacts.iter().find(|a| a.contains(&format!("step-{step}-")));
    let mut mem = match spill {
        Some(spill) => env.read_memory().ok().map(|(_, mut m)| {
            m.facts.push(format!("step {step} ({}): full output saved to {spill}", action.tool));
            m
        }),
        None => None,
    };
    let (delta, why) = match (ok, state.repeats >= 2) {
        (false, _) => (1, format!("tool error: {}", result.summary())),
        (true, true) => (1, format!("the same action ({}) again with the same result", action.tool)),
        (true, false) => (-1, "a clean step".to_string()),
    };
    if let Some(f) = frustration::update(state, delta, &why) {
        commit.entry(&f);
    }
    let next = if ok { PhaseEnd::Next } else { PhaseEnd::ToolFailed };
    let limit = limit_reached(env.cfg, state, ok, action, &result);
    let stop = |v: &frustration::Verdict| match v {
        frustration::Verdict::Escalate(r) => Some((StopKind::Escalated, r.clone())),
        frustration::Verdict::OutOfSteps(r) => Some((StopKind::Budget(Budget::MaxSteps), r.clone())),
        frustration::Verdict::Reframe(_) => None,
    };
    let verdict = frustration::over(env.cfg, state, limit).map(|r| frustration::verdict(env.cfg, state, r));
    if let Some((kind, reason)) = verdict.as_ref().and_then(stop) {
        if let Some(m) = &mem {
            commit.file("memory.md", env.render_memory(m)?);
        }
        finish(env, state, &mut commit, kind, &reason, None)?;
        env.commit(&commit)?;
        return Ok(PhaseEnd::Stopped(kind));
    }
    let outcome = match verdict {
        Some(frustration::Verdict::Reframe(reason)) => {
            commit.entry(&frustration::reframe(state, &reason));
            if mem.is_none() {
                mem = env.read_memory().ok().map(|(_, m)| m);
            }
            if let Some(m) = mem.as_mut() {
                m.status = format!("reframing: {reason}");
            }
            next
        }
        _ => next,
    };
    if let Some(m) = &mem {
        commit.file("memory.md", env.render_memory(m)?);
    }
    commit.state = Some(state.clone());
    env.commit(&commit)?;
    Ok(outcome)
}

/// The act trace entry: the action, its result, and what else the trace should lead to.
fn entry(state: &State, step: u32, action: &NextAction, result: &ToolResult, duration_ms: u64, edited: bool) -> Entry {
    let mut e = Entry::new(&state.run_id, step, Phase::Act, Event::Act);
    e.tool = Some(action.tool.clone());
    e.args = Some(action.args.clone());
    e.result_status = Some(result.status.into());
    e.result_summary = Some(result.summary());
    e.error = result.error.clone();
    e.retryable = Some(result.retryable);
    e.duration_ms = Some(duration_ms);
    e.artifacts = result.artifacts.clone();
    let mut data = serde_json::Map::new();
    if edited {
        data.insert("edited_by_hand".into(), json!(true));
    }
    // A Ductile job's id, so the trace leads to the gateway's own record of it.
    if let Some(job) = result.metadata.get("ductile_job").filter(|j| j.is_string()) {
        data.insert("ductile_job".into(), job.clone());
    }
    // An answer from the HTTP cache (a fresh hit, or a 304 revalidation), so the trace shows
    // what the network was spared.
    if let Some(c) = result.metadata.get("http_cache").filter(|c| c.is_object()) {
        data.insert("http_cache".into(), c.clone());
    }
    // A `finish` held while items were open: Record lets Reflect cite this step for what it said.
    if result.metadata.get("finish_held") == Some(&json!(true)) {
        data.insert("finish_held".into(), json!(true));
    }
    // What an MCP server asked during the call (elicitation) and what agentloop answered.
    if let Some(el) = result.metadata.get("mcp").and_then(|m| m.get("elicitations")).filter(|l| l.is_array()) {
        data.insert("mcp_elicitations".into(), el.clone());
    }
    if !data.is_empty() {
        e.data = Some(serde_json::Value::Object(data));
    }
    e
}

/// The state after a result: repeats and failures counted, artifacts and skills taken in, the
/// step completed, Reflect next.
fn take_result(state: &mut State, step: u32, action: &NextAction, result: &ToolResult) {
    state.tools_called.push(action.tool.clone());
    let fp = fingerprint(action, result);
    state.repeats = if state.last_action.as_deref() == Some(fp.as_str()) { state.repeats + 1 } else { 1 };
    state.last_action = Some(fp);
    state.consecutive_failures = if result.is_ok() { 0 } else { state.consecutive_failures + 1 };
    take_artifacts(state, &result.artifacts);
    if result.is_ok() && action.tool == "skill_read" {
        if let Some(name) = action.args.get("name").and_then(|v| v.as_str()) {
            if action.args.get("file").is_none() && !state.active_skills.iter().any(|s| s == name) {
                state.active_skills.push(name.to_string());
                if state.active_skills.len() > 3 {
                    state.active_skills.remove(0);
                }
            }
        }
    }
    if result.is_ok() && action.tool == "finish" {
        if let Some(out) = result.metadata.get("output") {
            state.output = Some(out.clone());
        }
    }
    if !state.completed_steps.contains(&step) {
        state.completed_steps.push(step);
    }
    state.pending = None;
    state.last_result = Some(result.clone());
    state.next = Next::Reflect;
}

/// The files a result reports, as the run's products. Tools report workspace-relative paths
/// inside the workspace (answer.txt as much as artifacts/x.md); anything else is not the run's
/// product.
pub(super) fn take_artifacts(state: &mut State, artifacts: &[String]) {
    for a in artifacts {
        let inside = !a.starts_with('/') && !camino::Utf8Path::new(a).components().any(|c| c.as_str() == "..");
        if inside && !state.artifacts.contains(a) {
            state.artifacts.push(a.clone());
        }
    }
}

/// The failure and repeat limits, when this result reaches one.
fn limit_reached(
    cfg: &agentloop_config::config::Config,
    state: &State,
    ok: bool,
    action: &NextAction,
    result: &ToolResult,
) -> Option<String> {
    let (max_fail, max_rep) = (cfg.max_consecutive_failures, cfg.max_repeats);
    if !ok && max_fail > 0 && state.consecutive_failures >= max_fail {
        Some(format!(
            "{} consecutive tool failures (max_consecutive_failures); last: {}",
            state.consecutive_failures,
            result.summary()
        ))
    } else if max_rep > 0 && state.repeats >= max_rep {
        Some(format!(
            "the same action ({}) was repeated {} times with the same result (max_repeats)",
            action.tool, state.repeats
        ))
    } else {
        None
    }
}
