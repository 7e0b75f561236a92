//! The structured model call every thinking phase makes: a forced answer tool whose schema is
//! generated from the answer's type ([`crate::contract`]), near misses mended, one corrective retry with the error shown to the model, and the accounting (usage,
//! cost, prompt size) that lands in the trace.

use super::{budget_exceeded, finish, Env, PhaseEnd};

/// The phase name the fused Reflect + Plan call is made under ([`agentloop_model::model::FUSED_PHASE`]);
/// its answer is capped as Plan's is.
pub use agentloop_model::model::FUSED_PHASE;
use agentloop_model::model::{self, Message, Part, Request, Response, ToolChoice, ToolDef};
use agentloop_types::budget::Budget;
use agentloop_types::error::{Error, Kind, Result};
use agentloop_types::trace::{Entry, Event, Phase, Usage};
use agentloop_workspace::workspace::{Commit, State, StopKind};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The answer of a structured phase call, with its accounting.
pub struct Answer<T> {
    pub value: T,
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
    Provider(Box<Error>, Usage, u64),
    /// The model did not give a valid answer even after one correction (the problem, the usage
    /// and cost of both calls, and how long they took in milliseconds).
    Invalid(String, Usage, Option<f64>, u64),
    /// A token or cost budget ran out before the call.
    Budget(Budget, String),
    Other(Error),
}

/// Calls the model with a forced answer tool, sent among all of the run's answer tools after the
/// same system message and task as every other call ([`super::Env::answer_tools`]), so a
/// server's prompt cache serves that prefix; one corrective retry when the answer is missing
/// or does not validate against the schema sent (after near misses are mended: `prepare`, then
/// [`crate::contract::mend`]), shown to the model as the error it made.
pub fn ask<T: DeserializeOwned>(
    env: &mut Env,
    state: &State,
    phase: &str,
    catalog: &str,
    prompt: String,
    tool: ToolDef,
    prepare: &dyn Fn(&mut Value),
) -> std::result::Result<Answer<T>, AskError> {
    ask_checked(env, state, phase, catalog, prompt, tool, prepare, &|_| Ok(()))
}

/// [`ask`], with a check of the decoded answer for what a schema cannot say: a problem it
/// finds is refused back to the model like a schema error (the one corrective retry).
#[allow(clippy::too_many_arguments)]
pub fn ask_checked<T: DeserializeOwned>(
    env: &mut Env,
    state: &State,
    phase: &str,
    catalog: &str,
    prompt: String,
    tool: ToolDef,
    prepare: &dyn Fn(&mut Value),
    check: &dyn Fn(&T) -> std::result::Result<(), Refused>,
) -> std::result::Result<Answer<T>, AskError> {
    // Budgets are checked before every model call, not only between steps.
    if let Some((budget, reason)) = budget_exceeded(state) {
        return Err(AskError::Budget(budget, reason));
    }
    // The model first: whether the run is fused (a model decides under `auto`) shapes the tools.
    env.model(state).map_err(AskError::Other)?;
    let mut req = request(env, state, phase, catalog, prompt, &tool).map_err(AskError::Other)?;
    let prompt_bytes = req.prompt_bytes();
    let watch = agentloop_types::clock::Stopwatch::start();
    let mut usage = Usage::default();
    let mut cost: Option<f64> = Some(0.0);
    let mut model_id;
    let cfg = env.cfg;
    for attempt in 1..=2u32 {
        // Pieces carry the step of the entry that will commit the answer (Plan starts the next).
        let step = if phase == "plan" { state.step + 1 } else { state.step };
        let printer = env.printer;
        let mut live = super::live::Live::new(env.printer, env.events, &state.run_id, step, phase, attempt);
        let m = env.model(state).map_err(AskError::Other)?;
        let m_tool_messages = m.tool_messages();
        let model_name = m.model().to_string();
        // Said when the call starts: a slow model is visibly working, not hung.
        let again = if attempt > 1 { ", correcting its answer" } else { "" };
        let kb = prompt_bytes.div_ceil(1024);
        printer.progress(&format!("[step {step}] {phase:<7} asking {model_name} ({kb} KB prompt{again})…"));
        let sent = m.complete(&req, &mut |d| live.delta(d));
        live.end();
        record_timeouts(env, state, step, phase, attempt, &model_name).map_err(AskError::Other)?;
        let resp: Response = match sent {
            Ok(r) => r,
            Err(e) if e.kind == Kind::Provider => return Err(AskError::Provider(Box::new(e), usage, watch.ms())),
            Err(e) if e.kind == Kind::Budget => return Err(AskError::Budget(Budget::Timeout, e.detail())),
            Err(e) => return Err(AskError::Other(e)),
        };
        model_id = if resp.model.is_empty() { model_name.clone() } else { resp.model.clone() };
        env.note(crate::transcript::model_call(step, phase, attempt, &model_id, &req, &resp));
        usage.add(&resp.usage);
        cost = match (cost, model::pricing::cost_in(cfg, &model_id, &resp.usage)) {
            (Some(a), Some(b)) => Some(((a + b) * 1e8).round() / 1e8),
            _ => None,
        };
        let call = resp.tool_calls.iter().find(|c| c.name == tool.name).or(resp.tool_calls.first()).cloned();
        let decoded = decode::<T>(&tool, call.as_ref(), prepare).and_then(|v| check(&v).map(|()| v));
        let problem = match decoded.map_err(|p| cut_off(p.to_string(), &resp.stop_reason, req.max_tokens)) {
            Ok(value) => {
                let duration_ms = watch.ms();
                return Ok(Answer {
                    value,
                    usage,
                    cost,
                    model: model_id,
                    prompt_bytes,
                    duration_ms,
                    attempts: attempt,
                });
            }
            Err(problem) => problem,
        };
        if attempt == 2 {
            return Err(AskError::Invalid(problem, usage, cost, watch.ms()));
        }
        env.printer.debug(&format!("{phase}: corrective retry: {problem}"));
        correct(&mut req, call, &resp.text, &problem, &tool.name, m_tool_messages);
    }
    unreachable!("the loop returns on the second attempt")
}

/// The request of a phase's call: with prefix sharing, all of the run's answer tools, the one
/// system message and the task, then the phase's prompt and which tool to call; without it,
/// the phase's own tool and system message.
fn request(env: &Env, state: &State, phase: &str, catalog: &str, prompt: String, tool: &ToolDef) -> Result<Request> {
    let tools = env.answer_tools(tool, state)?;
    let (system, messages) = if super::shared_prefix(env.cfg) {
        // The same tools, system message and task for every call; what changes comes last.
        let task = env.task_prompt()?;
        let catalog = env.prompt_catalog(state, &task)?;
        let system = env.system_prompt("", "", &catalog)?;
        let parts = vec![Part::Text(task), Part::Text(turn(phase, &prompt, &tool.name))];
        (system, vec![Message { role: model::Role::User, parts }])
    } else {
        // The phase that shows a catalog (Plan) shows it in the prompt's form, as shared calls do.
        let catalog = if catalog.is_empty() { String::new() } else { env.prompt_catalog(state, "")? };
        (env.system_prompt(phase, &tool.name, &catalog)?, vec![Message::user(prompt)])
    };
    Ok(Request {
        phase: phase.to_string(),
        system,
        messages,
        tools,
        tool_choice: ToolChoice::Tool(tool.name.clone()),
        max_tokens: answer_cap(phase, env.cfg.llm.max_tokens),
        // Lean prompts are for a small model, which follows the path its prompt makes likeliest
        // only when it samples greedily: 0 unless a temperature is set.
        temperature: env.cfg.llm.temperature.or(env.lean().then_some(0.0)),
        deadline: env.deadline,
    })
}

/// An answer cut off by its token cap is said to be so, with the cap: the model can answer
/// briefer, which "not valid JSON" alone would not tell it.
fn cut_off(problem: String, stop_reason: &str, cap: u32) -> String {
    match stop_reason {
        "length" | "max_tokens" => {
            format!(
                "your answer was cut off at this phase's limit of {cap} tokens ({problem}); answer again, more briefly"
            )
        }
        _ => problem,
    }
}

/// The most tokens one phase's answer may take: `llm.max_tokens` bounds the largest answer,
/// plan's (an action's arguments may carry a file's content), at half of it; frame, reflect and
/// compact answers are a few fields and get a quarter; a fused answer (reflect and plan) gets
/// plan's. A rambling small model on a local server is stopped by the server at this size, long
/// before a read timeout. Never below 256.
pub fn answer_cap(phase: &str, max_tokens: u32) -> u32 {
    // A fused answer holds a plan.
    let share = if phase == "plan" || phase == FUSED_PHASE { max_tokens / 2 } else { max_tokens / 4 };
    share.max(256).min(max_tokens.max(1))
}

/// Records the read timeouts of the call just made (see [`model::http::take_timeouts`]): a
/// `model.timeout` trace entry each and a transcript note, committed at once so a run that then
/// stops or hangs still shows them.
fn record_timeouts(env: &Env, state: &State, step: u32, phase: &str, attempt: u32, model: &str) -> Result<()> {
    let timeouts = model::http::take_timeouts();
    if timeouts.is_empty() {
        return Ok(());
    }
    let mut commit = Commit::default();
    for t in timeouts {
        // Compaction and the fused call are Reflect's.
        let p = match phase.parse::<Phase>() {
            Ok(p @ (Phase::Frame | Phase::Plan)) => p,
            _ => Phase::Reflect,
        };
        let mut e = Entry::new(&state.run_id, step, p, Event::ModelTimeout);
        e.error = Some(t.message.clone());
        e.retryable = Some(t.sent_again);
        e.model = Some(model.to_string());
        e.duration_ms = Some(t.waited_ms);
        e.attempt = Some(attempt);
        e.data = Some(serde_json::json!({
            "phase": phase, "url": t.url, "max_tokens": t.max_tokens, "sent_again": t.sent_again,
            // A server reports usage only with a whole answer: what the abandoned one cost is unknown.
            "output_tokens": null,
        }));
        commit.entry(&e);
        env.note(crate::transcript::timeout(step, phase, attempt, model, &t));
    }
    env.commit(&commit)
}

/// The part of a shared-prefix request that follows the task: the phase's prompt, then which
/// phase this is and the tool to call (last, nearest the answer).
pub fn turn(phase: &str, prompt: &str, tool: &str) -> String {
    format!(
        "\n{}\n\nThis is the {phase} phase. Answer only by calling the `{tool}` tool once with arguments that match its schema.\n",
        prompt.trim_end()
    )
}

/// The decode step: the answer in the forced call, mended and checked against the schema sent,
/// or the problem to show the model.
fn decode<T: DeserializeOwned>(
    tool: &ToolDef,
    call: Option<&model::ToolCall>,
    prepare: &dyn Fn(&mut Value),
) -> std::result::Result<T, Refused> {
    match call {
        None => Err(Refused::NoCall(tool.name.clone())),
        Some(c) if c.name != tool.name => Err(Refused::OtherTool { called: c.name.clone(), tool: tool.name.clone() }),
        Some(c) if c.invalid_arguments.is_some() => {
            let raw = c.invalid_arguments.as_deref().unwrap_or("");
            let start = raw.chars().take(200).collect();
            // JSON that stops before it closes (read as a grammar writes it) was cut off where
            // the server stopped the answer, by a stop sequence or a cap of its own: the model
            // is told so, not that it wrote something other than JSON.
            let mended = model::json_text::mend(raw);
            match serde_json::from_str::<Value>(&mended) {
                Err(e) if e.is_eof() => Err(Refused::EndedEarly(start)),
                _ => Err(Refused::NotAnObject(start)),
            }
        }
        Some(c) => {
            let mut args = c.arguments.clone();
            prepare(&mut args);
            crate::contract::parse::<T>(tool, &mut args).map_err(Refused::Unfit)
        }
    }
}

/// Why an answer is refused, as the model is told in its corrective turn.
#[derive(Debug)]
pub enum Refused {
    /// It called no tool; the one it must call.
    NoCall(String),
    /// It called `called` instead of `tool`.
    OtherTool {
        called: String,
        tool: String,
    },
    /// Its arguments were not a JSON object (their start, as written).
    NotAnObject(String),
    /// Its arguments stopped before their JSON closed (their start, as written).
    EndedEarly(String),
    Unfit(crate::contract::Unfit),
    /// The phase's own check, for what a schema cannot say, refused it.
    Check(Box<dyn std::error::Error + Send + Sync>),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NoCall(tool) => {
                write!(f, "you answered without calling the `{tool}` tool; call it with arguments matching its schema")
            }
            Refused::OtherTool { called, tool } => write!(f, "you called `{called}`; call the `{tool}` tool instead"),
            // The refused text is quoted (a JSON string: one line, its fences and newlines
            // escaped), so it makes no structure where the reason is written.
            Refused::NotAnObject(start) => write!(f, "the arguments were not a JSON object: {}", quoted(start)),
            Refused::EndedEarly(start) => write!(
                f,
                "the arguments were cut off before their JSON closed: {}; answer again with the whole object, more briefly",
                quoted(start)
            ),
            Refused::Unfit(e) => write!(f, "{e}"),
            Refused::Check(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Refused {}

/// `text` as a JSON string: one line, quotes, newlines and fences escaped.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// At most `max` characters of a refused answer sent back in its correction: the model needs to
/// see what it wrote, not all of it again (a small model copies a long echo into its next answer,
/// and the prompt grows by the whole answer).
fn echo(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}… ({n} characters in all)")
}

/// How much of a refused answer its correction repeats, in characters.
const ECHO_MAX: usize = 600;

/// The corrective turn: the model's answer, then the error it made, as the conversation goes on.
/// With `as_tool` the error is the refused call's tool result; without, the answer goes back as
/// the assistant's text (the arguments as the model wrote them) and the error as a user
/// message, which a chat template that drops `role: tool` messages still shows.
fn correct(req: &mut Request, call: Option<model::ToolCall>, text: &str, problem: &str, tool: &str, as_tool: bool) {
    match call {
        Some(c) if !as_tool => {
            let written = echo(&c.invalid_arguments.clone().unwrap_or_else(|| c.arguments.to_string()), ECHO_MAX);
            let said =
                if text.trim().is_empty() { String::new() } else { format!("{}\n", echo(text.trim_end(), ECHO_MAX)) };
            req.messages.push(Message {
                role: model::Role::Assistant,
                parts: vec![Part::Text(format!("{said}`{}` {written}", c.name))],
            });
            req.messages.push(Message::user(format!(
                "error: that answer was refused: {problem}. Call `{tool}` again with a corrected answer."
            )));
        }
        Some(c) => {
            let id = c.id.clone();
            req.messages.push(Message { role: model::Role::Assistant, parts: vec![Part::ToolCall(c)] });
            req.messages.push(Message {
                role: model::Role::User,
                parts: vec![Part::ToolResult {
                    id,
                    content: format!("error: {problem}. Call `{tool}` again with a corrected answer."),
                    is_error: true,
                }],
            });
        }
        None => {
            let text = if text.is_empty() { "(no answer)".to_string() } else { echo(text, ECHO_MAX) };
            req.messages.push(Message { role: model::Role::Assistant, parts: vec![Part::Text(text)] });
            req.messages.push(Message::user(format!("error: {problem}.")));
        }
    }
}

/// Records a failed structured call (provider failure or invalid answer) and ends the run;
/// with [`Env::provider_failure_resumable`], a provider failure is returned as the error and
/// nothing is committed, so the phase runs again when the run is next driven.
pub fn fail_phase(env: &Env, state: &mut State, phase: Phase, err: AskError) -> Result<PhaseEnd> {
    let (stop, reason, usage, cost, ms) = match err {
        AskError::Other(e) => return Err(e),
        AskError::Provider(e, ..) if env.provider_failure_resumable => {
            let message = format!("provider failure in {}: {}", phase.as_str(), e.message);
            return Err(Error { kind: Kind::Provider, message, hints: Vec::new(), ..*e });
        }
        AskError::Provider(e, u, ms) => {
            state.provider_status = match e.cause {
                Some(agentloop_types::error::Cause::Status(s)) => Some(s),
                _ => None,
            };
            (
                StopKind::Provider,
                format!("provider failure in {}: {}", phase.as_str(), e.detail()),
                u,
                Some(0.0),
                Some(ms),
            )
        }
        AskError::Budget(b, reason) => (StopKind::Budget(b), reason, Usage::default(), Some(0.0), None),
        AskError::Invalid(p, u, c, ms) => (
            StopKind::Escalated,
            format!("the model gave no valid {} answer after a correction: {p}", phase.as_str()),
            u,
            c,
            Some(ms),
        ),
    };
    state.add_usage(&usage, cost);
    if let Some(m) = &env.model {
        state.model_cursor = m.cursor();
    }
    let mut e = Entry::new(&state.run_id, state.step, phase, phase.into());
    e.error = Some(reason.clone());
    // An answer refused after its correction took two calls, and its usage is both of theirs.
    e.attempt = (stop == StopKind::Escalated).then_some(2);
    e.usage = Some(usage);
    e.cost_usd = cost;
    // The time the failed calls took counts toward the run's (`trace stats`).
    e.duration_ms = ms;
    let mut commit = Commit::default();
    commit.entry(&e);
    finish(env, state, &mut commit, stop, &reason, None)?;
    env.commit(&commit)?;
    Ok(PhaseEnd::Stopped(stop))
}

/// Records the model accounting of one answer in the state and a trace entry.
pub fn account<T>(env: &Env, state: &mut State, e: &mut Entry, a: &Answer<T>) {
    // The model first: a scripted answer's missing cost is no unknown price.
    state.model = Some(a.model.clone());
    state.add_usage(&a.usage, a.cost);
    if let Some(m) = &env.model {
        state.model_cursor = m.cursor();
        e.wire_form = m.wire_form().map(String::from);
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
    /// Arguments that stop inside their JSON (a string left open, as a server's stop sequence
    /// leaves it) are said to be cut off; text that is no JSON is said to be none.
    #[test]
    fn arguments_that_stop_before_their_json_closes_are_said_to_be_cut_off() {
        let tool = crate::contract::frame_tool();
        let call = |raw: &str| agentloop_model::model::ToolCall {
            id: "c".into(),
            name: tool.name.clone(),
            arguments: serde_json::Value::Null,
            invalid_arguments: Some(raw.into()),
        };
        let refusal = |raw: &str| {
            super::decode::<serde_json::Value>(&tool, Some(&call(raw)), &|_| {}).err().map(|e| e.to_string())
        };
        let cut = refusal("{ \"definition_of_done\" : [ \"a raw\nnewline, then no end");
        assert!(cut.as_deref().is_some_and(|e| e.contains("cut off before their JSON closed")), "{cut:?}");
        let junk = refusal("I will frame it: goal");
        assert!(junk.as_deref().is_some_and(|e| e.contains("not a JSON object")), "{junk:?}");
    }

    #[test]
    fn each_phase_gets_a_cap_suited_to_its_answer() {
        use super::answer_cap;
        assert_eq!(
            [answer_cap("frame", 4096), answer_cap("plan", 4096), answer_cap("reflect", 4096)],
            [1024, 2048, 1024]
        );
        assert_eq!(answer_cap("compact", 16384), 4096);
        // Never below 256, never above llm.max_tokens itself.
        assert_eq!([answer_cap("frame", 600), answer_cap("plan", 600)], [256, 300]);
        assert_eq!(answer_cap("reflect", 100), 100);
        assert_eq!(answer_cap("plan", 0), 1);
    }
}
