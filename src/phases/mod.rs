//! The phases of the loop and what they share: the phase environment, the structured model
//! call with one corrective retry, budget checks and the finish step.
//!
//! Every phase reads the workspace, decides, and applies all its effects through one
//! [`Commit`], the last thing it does; so a phase killed part-way has no effect and is simply
//! run again, and a committed phase is never applied twice.

pub mod act;
pub mod frame;
pub mod init;
pub mod plan;
pub mod reflect;
pub mod run;

use crate::config::Config;
use crate::error::{Error, Kind, Result};
use crate::markdown::{self, Memory, Plan};
use crate::model::{self, Message, Model, Part, Request, Response, ToolChoice, ToolDef};
use crate::output::Printer;
use crate::prompt::Templates;
use crate::settings::Ctx;
use crate::skills::SkillSet;
use crate::tools::Registry;
use crate::trace::{Entry, Phase, Usage};
use crate::workspace::{Commit, Next, State, Status, StopKind, Workspace};
use serde_json::{json, Value};

pub fn templates(ctx: &Ctx) -> Result<Templates> {
    let dir = match &ctx.config().templates_dir {
        Some(d) => crate::workspace::resolve_in(&ctx.ws.root, d),
        None => ctx.ws.root.join("templates"),
    };
    Templates::load(Some(&dir))
}

/// Writes skills.md into the workspace when it is missing.
pub fn ensure_skills_md(ctx: &Ctx) -> Result<()> {
    let path = ctx.ws.skills();
    if path.exists() {
        return Ok(());
    }
    let registry = Registry::new(ctx.config());
    let skills = SkillSet::load(ctx.config(), &ctx.ws.root);
    let text = crate::catalog::markdown(&registry.allowed(ctx.config()), &skills);
    crate::fs::write_atomic(&path, text.as_bytes())
}

/// What a phase needs: the workspace, config, templates, tools, skills and (lazily) a model.
pub struct Env<'a> {
    pub ws: &'a Workspace,
    pub cfg: &'a Config,
    pub tpl: Templates,
    pub registry: Registry,
    pub skills: SkillSet,
    pub printer: Printer,
    /// Stream committed trace entries as JSONL on stdout (`run --events`).
    pub events: bool,
    /// Keep the trace lines this environment commits in `committed` (single-phase commands).
    pub keep_committed: bool,
    pub committed: std::cell::RefCell<Vec<String>>,
    /// End of the run's wall-clock budget (set by `run`), passed to every model call.
    pub deadline: Option<std::time::Instant>,
    model: Option<Box<dyn Model>>,
}

/// How a phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The run goes on; state.next says where.
    Next,
    /// The run is over.
    Stopped(StopKind),
    /// Act ran and the tool reported an error (the run goes on to Reflect).
    ToolFailed,
}

impl<'a> Env<'a> {
    pub fn new(ctx: &'a Ctx) -> Result<Self> {
        Ok(Env {
            ws: &ctx.ws,
            cfg: ctx.config(),
            tpl: templates(ctx)?,
            registry: Registry::new(ctx.config()),
            skills: SkillSet::load(ctx.config(), &ctx.ws.root),
            printer: ctx.printer,
            events: false,
            keep_committed: false,
            committed: Default::default(),
            deadline: None,
            model: None,
        })
    }

    /// For event mode, where the workspace and config are built per run.
    pub fn with(ws: &'a Workspace, cfg: &'a Config, printer: Printer) -> Result<Self> {
        let tpl_dir = match &cfg.templates_dir {
            Some(d) => crate::workspace::resolve_in(&ws.root, d),
            None => ws.root.join("templates"),
        };
        Ok(Env {
            ws,
            cfg,
            tpl: Templates::load(Some(&tpl_dir))?,
            registry: Registry::new(cfg),
            skills: SkillSet::load(cfg, &ws.root),
            printer,
            events: false,
            keep_committed: false,
            committed: Default::default(),
            deadline: None,
            model: None,
        })
    }

    fn model(&mut self, state: &State) -> Result<&mut Box<dyn Model>> {
        if self.model.is_none() {
            let mut m = model::from_config(self.cfg, &self.ws.root)?;
            m.seek(&state.model_cursor);
            self.model = Some(m);
        }
        Ok(self.model.as_mut().expect("model set"))
    }

    pub fn read_memory(&self) -> Result<(String, Memory)> {
        let path = self.ws.memory();
        let text = crate::fs::read_optional(&path)?.unwrap_or_default();
        let mem = if text.trim().is_empty() { Memory::default() } else { markdown::parse_memory(&text, &path)? };
        Ok((text, mem))
    }

    pub fn read_plan(&self) -> Result<(String, Plan)> {
        let path = self.ws.plan();
        let text = crate::fs::read_optional(&path)?.unwrap_or_default();
        let plan = markdown::parse_plan(&text, &path)?;
        Ok((text, plan))
    }

    /// memory.md as a file: every learned fact; the last 10 decisions (decisions.md has all).
    pub fn render_memory(&self, m: &Memory) -> Result<String> {
        let mut view = m.clone();
        keep_last(&mut view.log, 10);
        self.tpl.render("memory.md.j2", &view)
    }

    /// memory.md as a prompt sees it: bounded (the newest facts and decisions), so input tokens
    /// per step stay flat as a run grows.
    pub fn memory_prompt(&self, m: &Memory) -> Result<String> {
        let mut view = m.clone();
        keep_last(&mut view.log, 3);
        let dropped = view.facts.len().saturating_sub(8);
        keep_last(&mut view.facts, 8);
        if dropped > 0 {
            view.facts.insert(0, format!("({dropped} earlier facts are in memory.md; file_read it if needed)"));
        }
        Ok(self.tpl.render("memory.md.j2", &view)?.trim().to_string())
    }

    /// plan.md as a file: the last 10 completed steps (trace.jsonl has all).
    pub fn render_plan(&self, p: &Plan) -> Result<String> {
        let mut view = p.clone();
        keep_last(&mut view.completed, 10);
        self.tpl.render("plan.md.j2", markdown::plan_view(&view))
    }

    /// plan.md as a prompt sees it: the last 3 completed steps.
    pub fn plan_prompt(&self, p: &Plan) -> Result<String> {
        let mut view = p.clone();
        keep_last(&mut view.completed, 3);
        Ok(self.tpl.render("plan.md.j2", markdown::plan_view(&view))?.trim().to_string())
    }

    /// decisions.md with one more entry appended.
    pub fn decisions_with(&self, step: u32, phase: &str, title: &str, body: &str) -> Result<String> {
        let mut text = crate::fs::read_optional(&self.ws.decisions())?.unwrap_or_default();
        if text.is_empty() {
            text = self.tpl.render("decisions.md.j2", json!({}))?;
        }
        let entry = self.tpl.render(
            "decision.md.j2",
            json!({"step": step, "phase": phase, "ts": crate::clock::now_rfc3339(), "title": title, "body": body}),
        )?;
        text.push_str(&entry);
        Ok(text)
    }

    /// The system prompt: the phase's role, the profile's instructions and, for Plan, the
    /// catalog. It is the stable prefix that Anthropic prompt caching reuses across calls.
    pub fn system_prompt(&self, phase: &str, answer_tool: &str, catalog: &str) -> Result<String> {
        self.tpl.render(
            "prompt-system.j2",
            json!({"phase": phase, "answer_tool": answer_tool, "system_prompt": self.cfg.system_prompt, "catalog": catalog}),
        )
    }

    /// Applies a commit and reports its trace entries (events stream, progress lines).
    pub fn commit(&self, commit: &Commit) -> Result<()> {
        self.ws.commit(commit)?;
        if self.keep_committed {
            self.committed.borrow_mut().extend(commit.trace.iter().cloned());
        }
        for line in &commit.trace {
            if self.events {
                self.printer.outln(line);
            }
            if let Ok(e) = serde_json::from_str::<Entry>(line) {
                self.printer.progress(&progress_line(&e));
            }
        }
        Ok(())
    }
}

fn keep_last(v: &mut Vec<String>, n: usize) {
    if v.len() > n {
        v.drain(..v.len() - n);
    }
}

fn progress_line(e: &Entry) -> String {
    let mut s = format!("[step {}] {:<7} {}", e.step, e.phase.map(|p| p.as_str()).unwrap_or("-"), e.event);
    if let Some(t) = &e.tool {
        s.push_str(&format!(" {t}"));
    }
    if let Some(st) = e.result_status.as_ref().or(e.decision.as_ref()) {
        s.push_str(&format!(" → {st}"));
    }
    if let Some(d) = e.duration_ms {
        s.push_str(&format!(" ({:.1}s", d as f64 / 1000.0));
        if let Some(u) = e.usage {
            s.push_str(&format!(", {} tok", u.total()));
        }
        s.push(')');
    }
    if let Some(r) = e.error.as_ref().or(e.reason.as_ref()) {
        let r: String = r.chars().take(100).collect();
        s.push_str(&format!(": {r}"));
    }
    s
}

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

/// A budget that has run out, if any (tokens, cost).
pub fn budget_exceeded(state: &State) -> Option<String> {
    let l = &state.limits;
    if let Some(max) = l.max_tokens {
        if state.usage.total() >= max {
            return Some(format!("token budget exhausted: {} of {max} tokens used", state.usage.total()));
        }
    }
    if let Some(max) = l.max_cost_usd {
        if state.cost_usd >= max {
            return Some(format!("cost budget exhausted: ${:.4} of ${max:.4} spent", state.cost_usd));
        }
    }
    None
}

/// Ends the run inside `commit`: result.json, the `run.finished` entry, terminal state.
pub fn finish(
    env: &Env,
    state: &mut State,
    commit: &mut Commit,
    stop: StopKind,
    reason: &str,
    outcome: Option<(String, Vec<String>)>,
) -> Result<()> {
    let now = crate::clock::now_rfc3339();
    state.status = if stop == StopKind::Done { Status::Done } else { Status::Escalated };
    state.next = Next::None;
    state.stop = Some(stop);
    state.reason = Some(reason.to_string());
    state.pending = None;
    state.finished_at = Some(now.clone());
    if let Some((text, arts)) = &outcome {
        state.outcome = Some(text.clone());
        for a in arts {
            if !state.artifacts.contains(a) {
                state.artifacts.push(a.clone());
            }
        }
    }
    // memory.md records the final status (and an open question when escalated), on top of
    // whatever this commit already changed in it.
    let pending = commit.files.iter().position(|(n, _)| n == "memory.md");
    let base = match pending {
        Some(pos) => markdown::parse_memory(&commit.files[pos].1, &env.ws.memory()),
        None => env.read_memory().map(|(_, m)| m),
    };
    let mut goal = state.goal.clone();
    if let Ok(mut mem) = base {
        mem.status = format!("{}: {reason}", state.status.as_str());
        if stop != StopKind::Done && mem.open_question.is_none() {
            mem.open_question = Some(format!("The run stopped and needs a human: {reason}"));
        }
        if !mem.goal.is_empty() {
            goal = mem.goal.clone();
        }
        let text = env.render_memory(&mem)?;
        match pending {
            Some(pos) => commit.files[pos].1 = text,
            None => {
                commit.file("memory.md", text);
            }
        }
    }
    let result = json!({
        "run_id": state.run_id,
        "goal": goal,
        "status": state.status,
        "stop": stop,
        "reason": reason,
        "outcome": state.outcome,
        "steps_taken": state.completed_steps.len(),
        "artifacts": state.artifacts,
        "usage": state.usage,
        "cost_usd": if state.cost_incomplete { Value::Null } else { json!(state.cost_usd) },
        "started_at": state.started_at,
        "finished_at": now,
    });
    commit.file("result.json", serde_json::to_string_pretty(&result).expect("result serializes") + "\n");
    let mut e = Entry::new(&state.run_id, state.step, Phase::Run, "run.finished");
    e.decision = Some(state.status.as_str().to_string());
    e.reason = Some(reason.to_string());
    e.usage = Some(state.usage);
    e.cost_usd = if state.cost_incomplete { None } else { Some(state.cost_usd) };
    e.artifacts = state.artifacts.clone();
    commit.entry(&e);
    commit.state = Some(state.clone());
    Ok(())
}

/// The event object of the seeds for a finished run (`agent.completed` / `agent.escalated`).
pub fn completion_event(state: &State) -> Value {
    let ty = if state.status == Status::Done { "agent.completed" } else { "agent.escalated" };
    json!({
        "type": ty,
        "payload": {
            "run_id": state.run_id,
            "goal": state.goal,
            "status": state.status,
            "reason": state.reason,
            "outcome": state.outcome,
            "steps_taken": state.completed_steps.len(),
            "artifacts": state.artifacts,
            "usage": state.usage,
            "cost_usd": if state.cost_incomplete { Value::Null } else { json!(state.cost_usd) },
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn coerce_mends_near_misses() {
        let schema = super::frame::answer_tool().parameters;
        let mut v = json!({"goal": "g", "definition_of_done": "- one\n- two\n3. three", "can_proceed": "true"});
        super::coerce(&schema, &mut v);
        assert_eq!(v["definition_of_done"], json!(["one", "two", "three"]));
        assert_eq!(v["can_proceed"], true);
        let schema = super::plan::answer_tool().parameters;
        let mut v = json!({"next_action": "{\"tool\": \"finish\", \"args\": {\"summary\": \"s\"}}", "outline": "[\"a\", \"b\"]"});
        super::coerce(&schema, &mut v);
        assert_eq!(v["next_action"]["tool"], "finish");
        assert_eq!(v["outline"], json!(["a", "b"]));
    }
}
