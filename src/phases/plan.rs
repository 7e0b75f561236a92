//! Plan: choose exactly one Next Action — one call of one allowed tool with arguments that
//! validate against its schema, or `finish` — and write plan.md (outline, the binding Next
//! Action block, expected outcome, risk, rationale). An unknown or disallowed tool or invalid
//! arguments get one corrective retry with the error shown to the model, then escalation.

use super::{account, ask, budget_exceeded, fail_phase, finish, Env, Outcome};
use crate::error::Result;
use crate::markdown::{Item, NextAction};
use crate::model::ToolDef;
use crate::tools::{Registry, SideEffect};
use crate::trace::{Entry, Phase};
use crate::workspace::{Commit, Next, Pending, State, StopKind};
use serde_json::{json, Value};

pub fn answer_tool() -> ToolDef {
    ToolDef {
        name: "plan_answer".into(),
        description: "Record the plan and the one next action.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "outline": {"type": "array", "items": {"type": "string"}, "maxItems": 12, "description": "Short step outline (advisory)"},
                "next_action": {
                    "type": "object",
                    "properties": {
                        "tool": {"type": "string", "minLength": 1, "description": "Tool name from the catalog, or finish"},
                        "args": {"description": "Arguments object matching the tool's parameters"}
                    },
                    "required": []
                },
                "expected_outcome": {"type": "string", "description": "What success looks like for this step"},
                "risk": {"type": "string", "description": "Side effects, irreversibility"},
                "rationale": {"type": "string", "description": "Why this is the best next action"}
            },
            "required": ["next_action"]
        }),
    }
}

/// The action in an answer, with string-encoded arguments (small models do that) decoded.
///
/// Small models vary the shape; accepted: `tool` or `name` for the tool, `args`, `arguments` or
/// `parameters` for the arguments (an object or a JSON string), or the arguments laid out next
/// to `tool` with no wrapper.
pub fn action_of(a: &Value) -> NextAction {
    let na = &a["next_action"];
    let tool = na.get("tool").or_else(|| na.get("name")).and_then(Value::as_str).unwrap_or("").trim();
    let wrapped = na.get("args").or_else(|| na.get("arguments")).or_else(|| na.get("parameters"));
    let args = match wrapped {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        Some(Value::Null) => json!({}),
        Some(v) => v.clone(),
        None => {
            let mut rest = na.as_object().cloned().unwrap_or_default();
            rest.remove("tool");
            rest.remove("name");
            Value::Object(rest)
        }
    };
    NextAction { tool: Registry::canonical(tool).to_string(), args }
}

fn default_risk(s: SideEffect) -> &'static str {
    match s {
        SideEffect::Read => "Read-only; no side effects.",
        SideEffect::Write => "Writes files inside the allowed folders; overwrites are not undoable.",
        SideEffect::Network => "Network request to an outside service; it sees the request.",
        SideEffect::Exec => "Runs a program; its effects depend on the program.",
        SideEffect::None => "None; ends the run.",
        SideEffect::External => "Runs in another system; effects unknown here.",
    }
}

pub fn run(env: &mut Env, state: &mut State) -> Result<Outcome> {
    let mut commit = Commit::default();
    if state.step >= state.limits.max_steps {
        let reason = format!("max_steps reached: {} of {} steps used", state.step, state.limits.max_steps);
        finish(env, state, &mut commit, StopKind::Budget, &reason, None)?;
        env.commit(&commit)?;
        return Ok(Outcome::Stopped(StopKind::Budget));
    }
    if let Some(reason) = budget_exceeded(state) {
        finish(env, state, &mut commit, StopKind::Budget, &reason, None)?;
        env.commit(&commit)?;
        return Ok(Outcome::Stopped(StopKind::Budget));
    }
    let (_, mem) = env.read_memory()?;
    let memory = env.memory_prompt(&mem)?;
    let (_, mut plan) = env.read_plan()?;
    let plan_text = env.plan_prompt(&plan)?;
    let catalog = env.catalog();
    // skills.md is written when missing; the prompt always gets the catalog from the registry,
    // and a file that has drifted from it is reported, never rewritten.
    match crate::fs::read_optional(&env.ws.skills())? {
        None => env.ensure_skills_md()?,
        Some(file) if file != catalog => env.printer.warn(&format!(
            "{} differs from the tool and skill catalog; Plan uses the catalog (refresh the file with `agentloop skills gen > {}`)",
            env.ws.skills(),
            env.ws.skills()
        )),
        Some(_) => {}
    }
    let active: Vec<String> = state
        .active_skills
        .iter()
        .filter_map(|n| env.skills.get(n))
        .map(|s| format!("## {}\n{}", s.name, s.body.chars().take(8000).collect::<String>()))
        .collect();
    let step = state.step + 1;
    let text = env.tpl.render(
        "prompt-plan.j2",
        json!({
            "step": step,
            "limits": state.limits,
            "active_skills": active.join("\n\n"),
            "memory": memory,
            "plan": plan_text,
        }),
    )?;
    // `ask` borrows the environment mutably, so the check owns its own registry.
    let checker = Registry::new(env.cfg);
    let cfg = env.cfg;
    let check = move |a: &Value| -> std::result::Result<(), String> {
        let action = action_of(a);
        if action.tool.is_empty() {
            return Err("next_action needs a `tool`: a name from the catalog, or finish".into());
        }
        checker.check(cfg, &action.tool, &action.args).map(|_| ())
    };
    let answer = match ask(env, state, "plan", &catalog, text, answer_tool(), &check) {
        Ok(a) => a,
        Err(e) => return fail_phase(env, state, Phase::Plan, e),
    };
    let a = &answer.args;
    let action = action_of(a);
    let spec = env.registry.get(&action.tool).cloned();
    let outline: Vec<String> = a
        .get("outline")
        .and_then(Value::as_array)
        .map(|o| o.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        .unwrap_or_default();
    if !outline.is_empty() {
        plan.outline = outline.into_iter().map(|text| Item { done: false, text }).collect();
    }
    plan.next_step = Some(step);
    plan.next_action = Some(action.clone());
    plan.expected = a["expected_outcome"].as_str().unwrap_or("").trim().to_string();
    plan.risk = a
        .get("risk")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(String::from)
        .unwrap_or_else(|| {
            default_risk(spec.as_ref().map(|s| s.side_effect).unwrap_or(SideEffect::External)).to_string()
        });
    plan.rationale = a["rationale"].as_str().unwrap_or("").trim().to_string();
    state.step = step;
    state.pending = Some(Pending {
        step,
        tool: action.tool.clone(),
        args: action.args.clone(),
        attempt: 0,
        requested_at: crate::clock::now_rfc3339(),
    });
    state.next = Next::Act;
    let mut e = Entry::new(&state.run_id, step, Phase::Plan, "plan");
    account(env, state, &mut e, &answer);
    e.tool = Some(action.tool.clone());
    e.args = Some(action.args.clone());
    e.reason = Some(plan.rationale.clone());
    let body = format!(
        "Next action: `{}` {}\n\nExpected outcome: {}\n\nRisk: {}\n\nWhy: {}\n",
        action.tool,
        serde_json::to_string(&action.args).unwrap_or_default(),
        plan.expected,
        plan.risk,
        plan.rationale
    );
    commit.file("plan.md", env.render_plan(&plan)?);
    commit.file("decisions.md", env.decisions_with(step, "plan", &format!("Chose {}", action.tool), &body)?);
    commit.entry(&e);
    commit.state = Some(state.clone());
    env.commit(&commit)?;
    Ok(Outcome::Next)
}

#[cfg(test)]
mod tests {
    use super::action_of;
    use serde_json::json;

    #[test]
    fn action_shapes_small_models_use() {
        for a in [
            json!({"next_action": {"tool": "web_fetch", "args": {"url": "u"}}}),
            json!({"next_action": {"name": "web_fetch", "arguments": "{\"url\": \"u\"}"}}),
            json!({"next_action": {"tool": "web_fetch", "url": "u"}}),
            json!({"next_action": {"tool": "web_fetch", "parameters": {"url": "u"}}}),
        ] {
            let n = action_of(&a);
            assert_eq!((n.tool.as_str(), &n.args), ("web_fetch", &json!({"url": "u"})), "{a}");
        }
        assert_eq!(action_of(&json!({"next_action": {"tool": "submit_response"}})).tool, "finish");
    }
}
