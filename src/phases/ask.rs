//! The structured model call every thinking phase makes: a forced answer tool, near misses
//! mended, one corrective retry with the error shown to the model, and the accounting (usage,
//! cost, prompt size) that lands in the trace.

use super::{budget_exceeded, finish, Env, Outcome};
use crate::error::{Error, Kind, Result};
use crate::model::{self, Message, Part, Request, Response, ToolChoice, ToolDef};
use crate::trace::{Entry, Phase, Usage};
use crate::workspace::{Commit, State, StopKind};
use serde_json::Value;

/// The answer of a structured phase call, with its accounting.
pub struct Answer {
    pub args: Value,
    pub usage: Usage,
    pub cost: Option<f64>,
    pub model: String,
    pub prompt_bytes: u64,
    pub duration_ms: u64,
    pub attempts: u32,
}

/// A structured call failed for a reason the run must stop on.
pub enum AskError {
    /// The provider failed (after retries): the run ends with exit code 5.
    Provider(Error, Usage),
    /// The model did not give a valid answer even after one correction.
    Invalid(String, Usage, Option<f64>),
    /// A token or cost budget ran out before the call.
    Budget(String),
    Other(Error),
}

/// Calls the model with a forced answer tool; one corrective retry when the answer is missing
/// or fails `check` (schema and phase rules), shown to the model as the error it made.
pub fn ask(
    env: &mut Env,
    state: &State,
    phase: &str,
    catalog: &str,
    prompt: String,
    tool: ToolDef,
    check: &dyn Fn(&Value) -> std::result::Result<(), String>,
) -> std::result::Result<Answer, AskError> {
    // Budgets are checked before every model call, not only between steps.
    if let Some(reason) = budget_exceeded(state) {
        return Err(AskError::Budget(reason));
    }
    let system = env.system_prompt(phase, &tool.name, catalog).map_err(AskError::Other)?;
    let mut req = Request {
        phase: phase.to_string(),
        system,
        messages: vec![Message::user(prompt)],
        tools: vec![tool.clone()],
        tool_choice: ToolChoice::Tool(tool.name.clone()),
        max_tokens: env.cfg.llm.max_tokens,
        temperature: env.cfg.llm.temperature,
        deadline: env.deadline,
    };
    let prompt_bytes = req.prompt_bytes();
    let watch = crate::clock::Stopwatch::start();
    let mut usage = Usage::default();
    let mut cost: Option<f64> = Some(0.0);
    let mut model_id;
    let prices = env.cfg.prices.clone();
    for attempt in 1..=2u32 {
        let m = env.model(state).map_err(AskError::Other)?;
        let resp: Response = match m.complete(&req) {
            Ok(r) => r,
            Err(e) if e.kind == Kind::Provider => return Err(AskError::Provider(e, usage)),
            Err(e) if e.kind == Kind::Budget => return Err(AskError::Budget(e.message)),
            Err(e) => return Err(AskError::Other(e)),
        };
        model_id = if resp.model.is_empty() { m.model().to_string() } else { resp.model.clone() };
        usage.add(&resp.usage);
        cost = match (cost, model::pricing::cost(&model_id, &resp.usage, &prices)) {
            (Some(a), Some(b)) => Some(((a + b) * 1e8).round() / 1e8),
            _ => None,
        };
        let call = resp.tool_calls.iter().find(|c| c.name == tool.name).or(resp.tool_calls.first()).cloned();
        let problem = match &call {
            None => format!(
                "you answered without calling the `{}` tool; call it with arguments matching its schema",
                tool.name
            ),
            Some(c) if c.name != tool.name => format!("you called `{}`; call the `{}` tool instead", c.name, tool.name),
            Some(c) if c.invalid_arguments.is_some() => {
                format!(
                    "the arguments were not a JSON object: {}",
                    c.invalid_arguments.as_deref().unwrap_or("").chars().take(200).collect::<String>()
                )
            }
            Some(c) => {
                let mut args = c.arguments.clone();
                coerce(&tool.parameters, &mut args);
                match crate::tools::validate(&tool.parameters, &args).and_then(|_| check(&args)) {
                    Ok(()) => {
                        return Ok(Answer {
                            args,
                            usage,
                            cost,
                            model: model_id,
                            prompt_bytes,
                            duration_ms: watch.ms(),
                            attempts: attempt,
                        })
                    }
                    Err(e) => e,
                }
            }
        };
        if attempt == 2 {
            return Err(AskError::Invalid(problem, usage, cost));
        }
        env.printer.debug(&format!("{phase}: corrective retry: {problem}"));
        match call {
            Some(c) => {
                let id = c.id.clone();
                req.messages.push(Message { role: model::Role::Assistant, parts: vec![Part::ToolCall(c)] });
                req.messages.push(Message {
                    role: model::Role::User,
                    parts: vec![Part::ToolResult {
                        id,
                        content: format!("error: {problem}. Call `{}` again with a corrected answer.", tool.name),
                        is_error: true,
                    }],
                });
            }
            None => {
                let text = if resp.text.is_empty() { "(no answer)".to_string() } else { resp.text.clone() };
                req.messages.push(Message { role: model::Role::Assistant, parts: vec![Part::Text(text)] });
                req.messages.push(Message::user(format!("error: {problem}.")));
            }
        }
    }
    unreachable!("the loop returns on the second attempt")
}

/// Mends the near misses small models make before an answer is validated: a list written as
/// one string (one item per line, bullets stripped), a boolean or number written as a string,
/// an object written as a JSON string. Guided by the answer's schema, one level deep.
pub fn coerce(schema: &Value, v: &mut Value) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let Some(obj) = v.as_object_mut() else { return };
    for (key, prop) in props {
        let Some(val) = obj.get_mut(key) else {
            continue;
        };
        let Value::String(text) = val else {
            if prop.get("type").and_then(Value::as_str) == Some("object") {
                coerce(prop, val);
            }
            continue;
        };
        let text = text.trim().to_string();
        match prop.get("type").and_then(Value::as_str) {
            Some("array") => {
                let items: Vec<Value> = match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Array(a)) => a,
                    _ => text
                        .lines()
                        .map(|l| l.trim().trim_start_matches(['-', '*', '•']).trim())
                        .map(|l| {
                            l.split_once(". ")
                                .filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit()))
                                .map(|(_, r)| r)
                                .unwrap_or(l)
                        })
                        .filter(|l| !l.is_empty())
                        .map(|l| Value::String(l.to_string()))
                        .collect(),
                };
                *val = Value::Array(items);
            }
            Some("boolean") => match text.to_lowercase().as_str() {
                "true" | "yes" => *val = Value::Bool(true),
                "false" | "no" => *val = Value::Bool(false),
                _ => {}
            },
            Some("integer") | Some("number") => {
                if let Ok(n) = serde_json::from_str::<serde_json::Number>(&text) {
                    *val = Value::Number(n);
                }
            }
            Some("object") => {
                if let Ok(mut o @ Value::Object(_)) = serde_json::from_str::<Value>(&text) {
                    coerce(prop, &mut o);
                    *val = o;
                }
            }
            _ => {}
        }
    }
}

/// Records a failed structured call (provider failure or invalid answer) and ends the run.
pub fn fail_phase(env: &Env, state: &mut State, phase: Phase, err: AskError) -> Result<Outcome> {
    let (stop, reason, usage, cost) = match err {
        AskError::Other(e) => return Err(e),
        AskError::Provider(e, u) => {
            (StopKind::Provider, format!("provider failure in {}: {}", phase.as_str(), e.message), u, Some(0.0))
        }
        AskError::Budget(reason) => (StopKind::Budget, reason, Usage::default(), Some(0.0)),
        AskError::Invalid(p, u, c) => (
            StopKind::Escalated,
            format!("the model gave no valid {} answer after a correction: {p}", phase.as_str()),
            u,
            c,
        ),
    };
    state.add_usage(&usage, cost);
    if let Some(m) = &env.model {
        state.model_cursor = m.cursor();
    }
    let mut e = Entry::new(&state.run_id, state.step, phase, phase.as_str());
    e.error = Some(reason.clone());
    e.usage = Some(usage);
    e.cost_usd = cost;
    let mut commit = Commit::default();
    commit.entry(&e);
    finish(env, state, &mut commit, stop, &reason, None)?;
    env.commit(&commit)?;
    Ok(Outcome::Stopped(stop))
}

/// Records the model accounting of one answer in the state and a trace entry.
pub fn account(env: &Env, state: &mut State, e: &mut Entry, a: &Answer) {
    state.add_usage(&a.usage, a.cost);
    if let Some(m) = &env.model {
        state.model_cursor = m.cursor();
    }
    e.model = Some(a.model.clone());
    e.usage = Some(a.usage);
    e.cost_usd = a.cost;
    e.duration_ms = Some(a.duration_ms);
    e.prompt_bytes = Some(a.prompt_bytes);
    e.attempt = Some(a.attempts);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn coerce_mends_near_misses() {
        let schema = super::super::frame::answer_tool().parameters;
        let mut v = json!({"goal": "g", "definition_of_done": "- one\n- two\n3. three", "can_proceed": "true"});
        super::coerce(&schema, &mut v);
        assert_eq!(v["definition_of_done"], json!(["one", "two", "three"]));
        assert_eq!(v["can_proceed"], true);
        let schema = super::super::plan::answer_tool().parameters;
        let mut v = json!({"next_action": "{\"tool\": \"finish\", \"args\": {\"summary\": \"s\"}}", "outline": "[\"a\", \"b\"]"});
        super::coerce(&schema, &mut v);
        assert_eq!(v["next_action"]["tool"], "finish");
        assert_eq!(v["outline"], json!(["a", "b"]));
    }
}
