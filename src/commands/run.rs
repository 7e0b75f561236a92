//! `agentloop run` (and `agentloop answer`): start, resume, follow up, answer or continue a run,
//! then frame → (plan → act → reflect)* → finish.
//!
//! What a `run` does is decided by one pure function, [`decide`], from the run in the
//! workspace (if any) and the flags; every flag is either honoured or refused with an error.

use crate::error::{code, Error, Result};
use crate::phases::{self, Env};
use crate::settings::Ctx;
use crate::trace::{Entry, Phase};
use crate::workspace::{Commit, Next, Session, State, Status, StopKind, Workspace};
use clap::Args;
use serde_json::json;

/// Run the loop until the run is done or escalated.
///
/// What happens depends on the run in the workspace:
///   no run              --goal starts one (the folder is created)
///   a run in progress   resumes it where it stopped (after a kill, no phase is skipped or
///                       applied twice); --new --goal archives it as interrupted and starts anew
///   a run that ended    --goal starts a follow-up: the old run moves to runs/<id>/ and its
///                       learned facts and outcome are carried into the new one (with the run id
///                       they came from); --new --goal starts afresh, carrying nothing;
///                       --continue goes on after a budget or provider stop, with the budgets
///                       given now; --answer TEXT answers an escalation's open question and goes
///                       on; with none of these it says what happened and how to go on (exit 0)
///
/// Budgets (--max-steps, --max-tokens, --max-cost, --timeout, config) are the ones given now,
/// counted from what the run already used; a change is recorded in the trace.
/// Prints the outcome on stdout (with --json, the agent.completed / agent.escalated event).
///
/// Exit codes: 0 done (or nothing to do), 2 usage, 3 escalated, 4 budget or limit exhausted,
/// 5 provider failure.
///
/// Examples:
///   agentloop -w ws run --goal "Critique https://example.com in two paragraphs"
///   agentloop -w ws run                              # resume, or say how to go on
///   agentloop -w ws run --goal "Today's digest"      # a follow-up of yesterday's run
///   agentloop -w ws run --continue --max-steps 40    # after `max_steps reached`
///   agentloop -w ws run --answer "Use the 2024 figures"
///   agentloop -w ws run --events | jq -c .           # live trace entries as JSONL
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct RunArgs {
    /// The goal of a new run (a follow-up when the workspace holds an ended run); - reads stdin.
    #[arg(long, short = 'g')]
    pub goal: Option<String>,
    /// Background for context.md: a YAML, JSON or markdown file, or - for stdin.
    #[arg(long, value_name = "FILE|-")]
    pub context: Option<String>,
    /// Start a new run that carries nothing from earlier ones (needs --goal); a run in
    /// progress is archived as interrupted.
    #[arg(long, requires = "goal", conflicts_with_all = ["continue_", "answer"])]
    pub new: bool,
    /// Go on with a run that stopped for a budget or a provider failure (or was interrupted).
    #[arg(long = "continue", conflicts_with_all = ["goal", "answer"])]
    pub continue_: bool,
    /// With --continue: the archived run to go on with (an id, a unique prefix, or `last`).
    #[arg(long, value_name = "ID", requires = "continue_")]
    pub run: Option<String>,
    /// Answer the open question of an escalated run (TEXT, or - for stdin) and go on.
    #[arg(long, value_name = "TEXT|-", conflicts_with = "goal")]
    pub answer: Option<String>,
    /// Stream trace entries as JSONL on stdout while the run goes.
    #[arg(long)]
    pub events: bool,
    /// Print the estimate of the run's tokens and cost and its first prompts; call no model,
    /// write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Start even when the estimate says the run cannot fit max_tokens / max_cost_usd.
    #[arg(long)]
    pub force: bool,
}

/// What a `run` invocation does.
#[derive(Debug, PartialEq)]
pub enum Plan {
    /// Start a run; `archive` moves the root's run away first; `carry` brings its facts along.
    Start { archive: bool, interrupted: bool, carry: bool },
    /// Go on with the root's run as it is.
    Resume,
    /// Restore an archived run to the root (archiving the root's first), then continue it.
    Restore { id: String },
    /// Reopen the root's stopped run and go on.
    Continue,
    /// Record the answer to the open question and go on.
    Answer(String),
    /// Say what happened and how to go on; nothing is run.
    Report,
}

/// Decides what `run` does; a pure function of the root's run and the flags.
pub fn decide(
    ws: &Workspace,
    existing: Option<&State>,
    a: &RunArgs,
    answer: Option<String>,
) -> std::result::Result<Plan, Error> {
    if let Some(id) = &a.run {
        return Ok(Plan::Restore { id: id.clone() });
    }
    let Some(s) = existing else {
        if a.continue_ || answer.is_some() {
            return Err(Error::usage("the workspace holds no run to continue or answer")
                .with_hint("start one with --goal \"...\""));
        }
        return match &a.goal {
            Some(_) => Ok(Plan::Start { archive: false, interrupted: false, carry: !a.new }),
            None => Err(Error::usage("the workspace holds no run").with_hint("pass --goal \"...\" to start one")),
        };
    };
    let ended = s.status.is_terminal() || s.interrupted;
    if !ended {
        return match (&a.goal, answer, a.continue_) {
            (Some(_), _, _) if a.new => Ok(Plan::Start { archive: true, interrupted: true, carry: false }),
            (Some(g), _, _) if g.trim() != s.goal.trim() => Err(Error::usage(format!(
                "run {} is still in progress (goal: {}); --goal names another",
                s.run_id, s.goal
            ))
            .with_hint(format!(
                "{} resumes it; {} archives it as interrupted and starts the new one",
                ws.cli("run"),
                ws.cli("run --new --goal \"...\"")
            ))),
            (_, Some(_), _) => Err(Error::usage(format!("run {} is in progress and has no open question", s.run_id))
                .with_hint(format!("{} resumes it", ws.cli("run")))),
            _ => Ok(Plan::Resume),
        };
    }
    if a.goal.is_some() {
        return Ok(Plan::Start { archive: true, interrupted: false, carry: !a.new });
    }
    if let Some(text) = answer {
        return match s.stop {
            Some(StopKind::Escalated) => Ok(Plan::Answer(text)),
            _ => Err(Error::usage(format!("run {} ended {} and has no question to answer", s.run_id, stop_word(s)))
                .with_hint(ways_on(ws, s))),
        };
    }
    if a.continue_ {
        return match s.stop {
            Some(StopKind::Budget | StopKind::Provider) => Ok(Plan::Continue),
            _ if s.interrupted => Ok(Plan::Continue),
            Some(StopKind::Escalated) => Err(Error::usage(format!(
                "run {} escalated with a question; --continue is for budget and provider stops",
                s.run_id
            ))
            .with_hint(format!("answer it: {}", ws.cli("answer \"...\"")))),
            _ => Err(Error::usage(format!("run {} is done", s.run_id))
                .with_hint("start a follow-up with --goal \"...\" (or a fresh run with --new --goal)")),
        };
    }
    Ok(Plan::Report)
}

fn stop_word(s: &State) -> &'static str {
    match s.stop {
        Some(StopKind::Done) => "done",
        Some(StopKind::Budget) => "on a budget",
        Some(StopKind::Provider) => "on a provider failure",
        Some(StopKind::Escalated) => "escalated",
        None => "interrupted",
    }
}

/// The ways on from an ended run, for people.
pub fn ways_on(ws: &Workspace, s: &State) -> String {
    let mut ways = Vec::new();
    match s.stop {
        Some(StopKind::Budget | StopKind::Provider) => {
            ways.push(format!("{} goes on with the budgets given now (e.g. --max-steps 40)", ws.cli("run --continue")))
        }
        Some(StopKind::Escalated) => {
            ways.push(format!("{} answers its question and goes on", ws.cli("answer \"...\"")))
        }
        _ if s.interrupted => ways.push(format!("{} goes on", ws.cli("run --continue"))),
        _ => {}
    }
    ways.push(format!("{} starts a follow-up that carries its facts", ws.cli("run --goal \"...\"")));
    ways.push(format!("{} starts afresh", ws.cli("run --new --goal \"...\"")));
    ways.join("; ")
}

pub fn run(ctx: Ctx, mut args: RunArgs) -> Result<u8> {
    if let Some(g) = &args.goal {
        args.goal = Some(phases::init::read_goal(g, args.context.as_deref())?);
    }
    let answer = match &args.answer {
        Some(a) => Some(read_answer(a)?),
        None => None,
    };
    if args.dry_run {
        return dry_run(&ctx, &args);
    }
    // Nothing is created for a mistyped -w unless a run is being started.
    if args.goal.is_none() {
        ctx.ws.require_dir()?;
    }
    // Everything that can refuse the run is checked before any file is written: the flags
    // against the run there, the provider and key, and, for a new run, whether it can fit its
    // budget (negotiation). An existing folder is locked first (the lock finishes a commit or a
    // move a killed process left); a new one only once the checks pass (the lock creates it).
    let early = if ctx.ws.root.is_dir() { Some(ctx.ws.lock(ctx.lock_wait())?) } else { None };
    // Declared before the environment, which commits through it.
    let session: Session;
    let peek = if ctx.ws.has_run() { Some(ctx.ws.load_state()?) } else { None };
    let first = decide(&ctx.ws, peek.as_ref(), &args, answer.clone())?;
    if first == Plan::Report {
        return report_ended(&ctx, peek.as_ref().expect("report needs a run"));
    }
    let model = crate::model::from_config(ctx.config(), &ctx.ws.root)?;
    crate::rest::check(ctx.config())?;
    let mut env = Env::new(&ctx)?;
    env.events = args.events;
    let background = match &args.context {
        Some(c) => crate::phases::init::read_context(c)?,
        None => String::new(),
    };
    if matches!(first, Plan::Start { .. }) && !args.force {
        check_fits(&env, model.model(), args.goal.as_deref().unwrap_or(""), &background)?;
    }
    session = match early {
        Some(l) => l,
        None => {
            let lock = ctx.ws.lock(ctx.lock_wait())?;
            // The folder is this command's own making: its config is the user's to write.
            crate::trust::record_created(&ctx.ws.root, &ctx.printer);
            lock
        }
    };
    env.hold(&session);
    // Decided again under the lock: another process may have moved on since the peek.
    let existing = if ctx.ws.has_run() { Some(ctx.ws.load_state()?) } else { None };
    let plan = decide(&ctx.ws, existing.as_ref(), &args, answer)?;
    if plan == Plan::Report {
        return report_ended(&ctx, existing.as_ref().expect("report needs a run"));
    }
    let runs = ctx.config().handle.runs_dir.clone();
    let started = matches!(plan, Plan::Start { .. });
    let mut state = match plan {
        Plan::Start { archive, interrupted, carry } => {
            let mut carried = Vec::new();
            if carry && !archive {
                // The root is empty (a pruned or recovered history): the follow-up carries the
                // newest archived run that ended.
                let last = crate::history::list(&ctx.ws, &runs, &|_| {})
                    .into_iter()
                    .filter(|r| !r.current && r.state.status.is_terminal())
                    .max_by(|a, b| {
                        a.state.started_at.cmp(&b.state.started_at).then(a.state.run_id.cmp(&b.state.run_id))
                    });
                if let Some(r) = last {
                    carried = carried_facts(&r.ws, &r.state)?;
                }
            }
            if let (true, Some(old)) = (archive, existing.as_ref()) {
                if carry {
                    carried = carried_facts(&ctx.ws, old)?;
                }
                if interrupted {
                    let mut s = old.clone();
                    s.interrupted = true;
                    session.save_state(&s)?;
                }
                let to = crate::history::archive(&session, &runs, old)?;
                ctx.printer.info(&format!("run {} moved to {}", old.run_id, rel(&ctx, &to)));
            }
            let goal = args.goal.as_deref().unwrap_or("");
            phases::init::init_run_carrying(&session, ctx.config(), &env.tpl, goal, &background, &carried)?
        }
        Plan::Resume => existing.expect("resume needs a run"),
        Plan::Restore { id } => {
            let found = crate::history::find(&ctx.ws, &runs, &id)?;
            if found.root != ctx.ws.root {
                let s = found.load_state()?;
                if let Some(cur) = &existing {
                    if !cur.status.is_terminal() && !cur.interrupted {
                        return Err(Error::usage(format!("run {} is in progress here", cur.run_id))
                            .with_hint("finish it first, or archive it with `run --new --goal ...`"));
                    }
                    crate::history::archive(&session, &runs, cur)?;
                }
                crate::history::restore(&session, &runs, &s.run_id)?;
            }
            let s = ctx.ws.load_state()?;
            reopen(&env, s, "run.continued", None)?
        }
        Plan::Continue => reopen(&env, existing.expect("continue needs a run"), "run.continued", None)?,
        Plan::Answer(text) => reopen(&env, existing.expect("answer needs a run"), "run.answered", Some(text))?,
        Plan::Report => unreachable!("handled above"),
    };
    // Known to the signal watcher until the command ends (its report included).
    let _running = (!state.status.is_terminal()).then(|| {
        ctx.printer.progress(&format!("run {} in {}", state.run_id, ctx.ws.root));
        crate::interrupt::run_in(&ctx.ws.root)
    });
    let stop = go_on(&mut env, &mut state, &ctx.resolved.sources, started)?;
    // A closed stdout stops the report, never the command: the lock is released (the journal
    // checkpointed) when this returns, and the outcome decides the code.
    report(&ctx, &state, args.events);
    Ok(stop.exit_code())
}

/// Refuses a new run whose smallest course cannot fit `max_tokens` / `max_cost_usd`
/// (negotiation), before anything is written.
pub fn check_fits(env: &Env, model: &str, goal: &str, background: &str) -> Result<()> {
    let limits = crate::workspace::Limits::from_config(env.cfg);
    let est = phases::negotiate::estimate(env, model, goal, background, &limits)?;
    crate::log::info(&format!(
        "negotiation: smallest run ~{} tokens ({:?} USD), {} steps ~{} tokens ({:?} USD); limits {:?} tokens, {:?} USD",
        est.min_tokens,
        est.min_cost_usd,
        est.max_steps,
        est.max_tokens,
        est.max_cost_usd,
        limits.max_tokens,
        limits.max_cost_usd
    ));
    match phases::negotiate::refusal(&est, &limits) {
        None => Ok(()),
        Some(why) => Err(Error::new(crate::error::Kind::Negotiation, format!("run refused before it started: {why}"))
            .with_hint("raise --max-tokens / --max-cost, narrow allowed_tools, or pass --force; `run --dry-run` shows the estimate")),
    }
}

/// Goes on with a run (`env` holds its lock's session) until it stops: the limits given now apply
/// (`sources` says which were given), the loop runs, and what this invocation used counts
/// toward the agent's rest window, even when it failed. `started`: the run is new.
pub fn go_on(env: &mut Env, state: &mut State, sources: &crate::config::Sources, started: bool) -> Result<StopKind> {
    phases::refresh_limits(env, state, sources)?;
    let (tokens0, cost0) = (state.usage.total(), state.cost_usd);
    let stop = phases::run::drive(env, state, env.cfg.timeout.0);
    let used = state.usage.total().saturating_sub(tokens0);
    let cost = (state.cost_usd - cost0).max(0.0);
    if let Err(e) = crate::rest::record(env.cfg, &state.run_id, used, cost, started) {
        env.printer.warn(&format!("usage ledger: {e}"));
    }
    stop
}

/// Records a person's answer to an escalated run's open question and reopens the run (`env`
/// holds its lock's session; [`go_on`] then drives it). Refuses a run with no question to answer.
pub fn answer_run(env: &Env, state: State, text: &str) -> Result<State> {
    let args = RunArgs {
        goal: None,
        context: None,
        new: false,
        continue_: false,
        run: None,
        answer: Some(text.to_string()),
        events: false,
        dry_run: false,
        force: false,
    };
    match decide(env.ws, Some(&state), &args, Some(text.trim().to_string()))? {
        Plan::Answer(text) => reopen(env, state, "run.answered", Some(text)),
        other => Err(Error::failure(format!("internal error: an answer was decided as {other:?}"))),
    }
}

/// Reopens a run that stopped on a budget or a provider failure, or was interrupted (`env`
/// holds its lock's session; [`go_on`] then drives it). Refuses a run that is done, escalated with a
/// question, or still going.
pub fn continue_run(env: &Env, state: State) -> Result<State> {
    if !state.status.is_terminal() && !state.interrupted {
        return Err(Error::usage(format!("run {} is still in progress", state.run_id)));
    }
    let args = RunArgs {
        goal: None,
        context: None,
        new: false,
        continue_: true,
        run: None,
        answer: None,
        events: false,
        dry_run: false,
        force: false,
    };
    match decide(env.ws, Some(&state), &args, None)? {
        Plan::Continue => reopen(env, state, "run.continued", None),
        other => Err(Error::failure(format!("internal error: a continue was decided as {other:?}"))),
    }
}

fn read_answer(a: &str) -> Result<String> {
    let text = if a == "-" { crate::fs::read_arg(a)? } else { a.to_string() };
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(
            Error::usage("the answer is empty").with_hint("give the answer as TEXT, or - to read it from stdin")
        );
    }
    Ok(text)
}

fn rel(ctx: &Ctx, p: &camino::Utf8Path) -> String {
    p.strip_prefix(&ctx.ws.root).map(|r| r.to_string()).unwrap_or_else(|_| p.to_string())
}

/// The previous run's learned facts and outcome, each with the run it came from (bounded: the
/// newest 20).
fn carried_facts(ws: &crate::workspace::Workspace, old: &State) -> Result<Vec<String>> {
    let path = ws.memory();
    let text = crate::fs::read_optional(&path)?.unwrap_or_default();
    let mem = if text.trim().is_empty() {
        crate::markdown::Memory::default()
    } else {
        crate::markdown::parse_memory(&text, &path)?
    };
    let tag = format!("(from run {})", old.run_id);
    let mut facts: Vec<String> = mem
        .facts
        .iter()
        .filter(|f| !f.starts_with('(') || !f.contains("earlier facts"))
        .map(|f| if f.contains("(from run ") { f.clone() } else { format!("{f} {tag}") })
        .collect();
    let outcome = match (&old.outcome, old.status) {
        (Some(o), Status::Done) => format!("Run {} ({}) ended done: {}", old.run_id, old.goal, o.trim()),
        _ => format!(
            "Run {} ({}) ended {}: {}",
            old.run_id,
            old.goal,
            old.status.as_str(),
            old.reason.clone().unwrap_or_default()
        ),
    };
    facts.push(outcome.chars().take(600).collect());
    let keep = facts.len().saturating_sub(20);
    Ok(facts.split_off(keep))
}

/// Reopens an ended (or interrupted) run: the trace records why (`run.continued` with the
/// limits in force, or `run.answered` with the question and answer) and the run goes on where
/// it stopped — from Frame when it could not proceed at framing, else from Plan.
fn reopen(env: &Env, mut s: State, event: &str, answer: Option<String>) -> Result<State> {
    let question = s.open_question.clone();
    let mut commit = Commit::default();
    let mut e = Entry::new(&s.run_id, s.step, Phase::Run, event);
    let resume = match s.resume_at {
        // An interrupted run never stopped: it goes on where it was.
        _ if !s.status.is_terminal() => s.next,
        Some(Next::Frame) => Next::Frame,
        Some(n) if answer.is_none() && n != Next::Finish && n != Next::None => n,
        _ => Next::Plan,
    };
    if let Some(text) = &answer {
        let (_, mut mem) = env.read_memory()?;
        let q = question.clone().unwrap_or_else(|| s.reason.clone().unwrap_or_default());
        mem.facts.push(format!("A person answered \"{}\": {text} (step {})", q.trim(), s.step));
        mem.open_question = None;
        mem.log.push(format!("step {} answered: {}", s.step, text.chars().take(160).collect::<String>()));
        mem.status = format!("answered; going on from {}", if resume == Next::Frame { "frame" } else { "plan" });
        commit.file("memory.md", env.render_memory(&mem)?);
        commit.file(
            "decisions.md",
            env.decisions_with(s.step, "answer", "A person answered", &format!("Question: {q}\n\nAnswer: {text}\n"))?,
        );
        e.data = Some(json!({"question": q, "answer": text}));
        s.done_refusals = 0;
        s.consecutive_failures = 0;
        s.repeats = 0;
        s.last_action = None;
        // A reframe is the way to act on an answer given at framing.
        if resume == Next::Frame {
            s.reframe_reason = Some(format!("a person answered the open question: {text}"));
        }
    } else {
        e.data = Some(json!({"after": s.stop, "reason": s.reason, "limits": s.limits}));
    }
    e.reason = s.reason.clone();
    s.status = Status::Running;
    s.next = resume;
    s.stop = None;
    s.reason = None;
    s.finished_at = None;
    s.open_question = None;
    s.interrupted = false;
    s.resume_at = None;
    commit.entry(&e);
    commit.state = Some(s.clone());
    env.commit(&commit)?;
    // result.json describes an ended run; the reopened run writes it again when it ends.
    let _ = std::fs::remove_file(env.ws.result());
    Ok(s)
}

/// `run --dry-run`: the estimate and the first prompts, no model call, nothing written.
fn dry_run(ctx: &Ctx, args: &RunArgs) -> Result<u8> {
    let goal = match (&args.goal, ctx.ws.has_run()) {
        (Some(g), _) => g.clone(),
        (None, true) => ctx.ws.load_state()?.goal,
        (None, false) => return Err(Error::usage("--dry-run needs --goal (the workspace holds no run)")),
    };
    let background = match &args.context {
        Some(c) => crate::phases::init::read_context(c)?,
        None => String::new(),
    };
    // The model's name is all an estimate needs: no key is read, no key command run.
    let (provider, _) = crate::model::provider_and_why(ctx.config())?;
    let (model, _) = crate::model::model_and_why(ctx.config(), &provider);
    let env = Env::read_only(ctx)?;
    let limits = crate::workspace::Limits::from_config(ctx.config());
    let est = phases::negotiate::estimate(&env, &model, &goal, &background, &limits)?;
    let refusal = phases::negotiate::refusal(&est, &limits);
    let (system, frame, catalog) = phases::negotiate::first_prompts(&env, &goal, &background, &limits)?;
    let p = &ctx.printer;
    if p.json {
        p.json_value(&json!({"estimate": est, "limits": limits, "fits": refusal.is_none(), "refusal": refusal,
            "prompts": {"system": system, "frame": frame, "catalog": catalog}}));
        return Ok(code::OK);
    }
    let cost =
        |c: Option<f64>| c.map(|c| format!("${c:.4}")).unwrap_or_else(|| "unknown (no price for this model)".into());
    p.outln(&format!("model        {}", est.model));
    p.outln(&format!("frame        ~{} tokens", est.frame_tokens));
    p.outln(&format!("each step    ~{} tokens (plan + reflect)", est.step_tokens));
    p.outln(&format!("smallest run ~{} tokens, {}", est.min_tokens, cost(est.min_cost_usd)));
    p.outln(&format!(
        "{:<12} ~{} tokens, {}",
        format!("{} steps", est.max_steps),
        est.max_tokens,
        cost(est.max_cost_usd)
    ));
    p.outln(&format!(
        "fits budget  {}",
        refusal.as_deref().map(|r| format!("no: {r}")).unwrap_or_else(|| "yes".into())
    ));
    p.outln("\n== system prompt (frame)");
    p.outln(system.trim_end());
    p.outln("\n== frame prompt");
    p.outln(frame.trim_end());
    p.outln("\n== catalog (plan)");
    p.outln(catalog.trim_end());
    Ok(code::OK)
}

/// A plain `run` on an ended run: what happened, and the ways on (exit 0).
fn report_ended(ctx: &Ctx, s: &State) -> Result<u8> {
    let p = &ctx.printer;
    if p.json {
        let mut v = phases::completion_event(s);
        v["payload"]["open_question"] = json!(s.open_question);
        v["payload"]["ways_on"] = json!(ways_on(&ctx.ws, s));
        p.outln(&v.to_string());
        return Ok(code::OK);
    }
    p.outln(&format!(
        "run {} ended {}: {}",
        s.run_id,
        if s.interrupted { "interrupted" } else { s.status.as_str() },
        s.reason.clone().unwrap_or_default()
    ));
    if let Some(q) = &s.open_question {
        p.outln(&format!("open question: {q}"));
    }
    p.outln(&format!("ways on: {}", ways_on(&ctx.ws, s)));
    Ok(code::OK)
}

/// Prints the end of a run: the outcome on stdout (or the event object), the reason on stderr.
pub fn report(ctx: &Ctx, state: &crate::workspace::State, events: bool) {
    let p = &ctx.printer;
    if p.json {
        p.outln(&phases::completion_event(state).to_string());
    } else if !events {
        match &state.outcome {
            Some(o) if state.status == Status::Done => p.outln(o),
            _ => p.outln(&format!("{}: {}", state.status.as_str(), state.reason.clone().unwrap_or_default())),
        }
    }
    let mut how = String::new();
    if state.status == Status::Escalated {
        how = format!("\nways on: {}", ways_on(&ctx.ws, state));
    }
    p.info(&format!(
        "run {} {} after {} step{}: {}\npaper trail: {}/ (memory.md, plan.md, decisions.md, trace.jsonl, result.json, artifacts/){how}",
        state.run_id,
        state.status.as_str(),
        state.completed_steps.len(),
        if state.completed_steps.len() == 1 { "" } else { "s" },
        state.reason.clone().unwrap_or_default(),
        ctx.ws.root
    ));
}
