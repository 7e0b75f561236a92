//! `agentloop run` (and `agentloop answer`): start, resume, follow up, answer or continue a run,
//! then frame → (plan → act → reflect)* → finish.
//!
//! The flags become a [`Request`] that the run lifecycle (`agentloop_engine::lifecycle`) carries out;
//! every flag is either honoured or refused with an error.

use agentloop_engine::lifecycle::{ways_on, Request, RequestEnd, Runner, Start};
use agentloop_engine::phases::{self, Env};
use agentloop_engine::settings::Ctx;
use agentloop_types::error::{code, Error, Kind, Result};
use agentloop_workspace::workspace::{State, Status};
use clap::Args;
use serde_json::json;

use super::modes;

/// Run the loop until the run is done or escalated.
///
/// What happens depends on the run in the workspace:
///   no run              --goal starts one (the folder is created)
///   a run in progress   resumes it where it stopped; --new --goal archives it and starts anew
///   a run that ended    --goal starts a follow-up (the old run moves to runs/<id>/, its facts
///                       and outcome carried; its own goal again exits 11 unless --follow-up);
///                       --new --goal carries nothing; --continue goes on after a budget or
///                       provider stop; --answer TEXT answers its question; else: how to go on
///
/// The budgets given now (flags, config) apply, counted from what the run used; a change is traced.
/// Prints a done run's outcome on stdout (--json: the completion event), other ends why on stderr.
///
/// Exit codes: 0 done (or nothing to do), 2 usage, 3 escalated, 4 budget or limit exhausted,
/// 5 provider failure, 10 resting (--continue after a rest), 11 nothing run (slot or goal ran).
///
/// Examples:
///   agentloop -w ws run --goal "Critique https://example.com in two paragraphs"
///   agentloop -w ws run                              # resume, or say how to go on
///   agentloop -w ws run --goal "Today's digest" --slot "$(date +%F)"  # once a day
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
    /// Start afresh, carrying nothing (needs --goal); a run in progress is archived.
    #[arg(long, requires = "goal", conflicts_with_all = ["continue_", "answer"])]
    pub new: bool,
    /// Start a follow-up even when --goal repeats the ended run's goal (else: exit 11).
    #[arg(long, requires = "goal", conflicts_with_all = ["new", "continue_", "answer"])]
    pub follow_up: bool,
    /// The next turn of session NAME: --goal is the message, its earlier turns the context.
    #[arg(long, value_name = "NAME", requires = "goal", conflicts_with_all = ["new", "follow_up", "continue_", "answer", "slot"])]
    pub session: Option<String>,
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
    /// Print the estimated tokens, cost and first prompts; call no model, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Start even if the estimate says the run cannot fit its budget; run a taken --slot again.
    #[arg(long)]
    pub force: bool,
    /// The scheduler's slot (`$(date +%F)`): a KEY whose run ended runs nothing (11; --force).
    #[arg(long, value_name = "KEY", requires = "goal")]
    pub slot: Option<String>,
    /// The final output must match the JSON Schema in FILE; result.json and stdout hold it.
    #[arg(long, value_name = "FILE", requires = "goal")]
    pub output_schema: Option<camino::Utf8PathBuf>,
    /// Also write what stdout shows to FILE, atomically, once the run ended done; any other end
    /// (or a taken --slot) leaves FILE as it was, which a shell redirect would not.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dry_run", "events"])]
    pub output: Option<camino::Utf8PathBuf>,
}

/// Whether `name` is a session's name: letters, digits, `.`, `_` and `-`, at most 64 (the rule
/// of `run --session`, `runs --session` and `serve`'s `session`).
pub fn is_session_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A session's name as given to `--session`: letters, digits, `.`, `_` and `-`, at most 64.
pub fn session_name(name: &str) -> Result<String> {
    if is_session_name(name) {
        Ok(name.to_string())
    } else {
        Err(Error::usage(format!("--session: `{name}` is not a session name"))
            .with_hint("use letters, digits, `.`, `_` and `-` (at most 64), e.g. --session support-42"))
    }
}

/// The domain request the flags ask for (clap keeps --goal, --continue and --answer apart).
fn request(args: &RunArgs, answer: Option<String>) -> Result<Request> {
    if args.context.is_some() && args.goal.is_none() {
        return Err(Error::usage("--context is a new run's background and needs --goal")
            .with_hint("a run in the workspace keeps the background it started with (context.md)"));
    }
    Ok(match (&args.goal, answer) {
        _ if args.continue_ => Request::Continue { archived: args.run.clone() },
        (_, Some(text)) => Request::Answer(text),
        (Some(goal), None) => Request::Start(Start {
            goal: goal.clone(),
            background: match &args.context {
                Some(c) => phases::init::read_context(c)?,
                None => String::new(),
            },
            // A session's context is its own conversation: nothing else is carried, and the
            // same message again is a new turn, not a repeat.
            carry: !args.new && args.session.is_none(),
            force: args.force,
            slot: args.slot.clone(),
            follow_up: args.follow_up || args.session.is_some(),
            session: match &args.session {
                Some(name) => Some(session_name(name)?),
                None => None,
            },
        }),
        (None, None) => Request::Go,
    })
}

/// `agentloop run`: the flags as a request, carried out by the lifecycle, its outcome printed.
pub fn run(mut ctx: Ctx, mut args: RunArgs) -> Result<u8> {
    if let Some(file) = &args.output_schema {
        ctx.resolved.config.output_schema = Some(read_output_schema(file, ctx.config())?);
    } else if args.goal.is_some() && !args.dry_run {
        // A configured schema that cannot be used refuses the run before anything is moved.
        let strict = agentloop_model::model::strict_schemas(ctx.config());
        agentloop_engine::output_schema::resolve(ctx.config(), &ctx.ws.root, strict)?;
    }
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
    let req = request(&args, answer)?;
    match &args.output {
        Some(file) => execute_into(&ctx, &req, file),
        None => execute(&ctx, &req, args.events),
    }
}

/// `--output FILE` of `run` and `answer`: [`execute`], and what stdout shows of a run that ended
/// done also written to FILE, atomically, once it ended; any other end (or a taken slot) leaves
/// FILE as it was. FILE's folder is checked before anything is spent: a run whose result could
/// not be written is wasted.
pub fn execute_into(ctx: &Ctx, req: &Request, file: &camino::Utf8Path) -> Result<u8> {
    let dir = match file.parent() {
        Some(d) if !d.as_str().is_empty() => d,
        _ => camino::Utf8Path::new("."),
    };
    // The workspace itself may not exist yet: a new run creates it.
    let in_workspace = dir.as_str().trim_end_matches('/') == ctx.ws.root.as_str().trim_end_matches('/');
    if !(dir.is_dir() || in_workspace) || file.is_dir() {
        return Err(Error::usage(format!("--output {file}: {dir} is not an existing folder, or {file} is a folder"))
            .with_hint("name a file in a folder that exists (or in the workspace), e.g. --output ~/digest/today.txt"));
    }
    let (exit, ran) = carry_out(ctx, req, false, true)?;
    if let Some(text) = ran.as_ref().filter(|s| s.status == Status::Done).and_then(final_text) {
        agentloop_io::fs::write_atomic(file, format!("{}\n", text.trim_end()).as_bytes())?;
    }
    Ok(exit)
}

/// What stdout shows of a run that ended done: its output in the user's shape, or its outcome.
fn final_text(state: &State) -> Option<String> {
    match (&state.output, &state.outcome) {
        (Some(out), _) => Some(out.to_string()),
        (None, Some(o)) => Some(o.clone()),
        (None, None) => None,
    }
}

/// Carries out `req` in the context's workspace and prints the outcome; the exit code is the
/// outcome's (a closed stdout stops the printing, never changes the code).
pub fn execute(ctx: &Ctx, req: &Request, events: bool) -> Result<u8> {
    execute_counting(ctx, req, events, true)
}

/// [`execute`], with `ledger` saying whether the run's usage counts toward the agent's rest
/// window.
pub fn execute_counting(ctx: &Ctx, req: &Request, events: bool, ledger: bool) -> Result<u8> {
    carry_out(ctx, req, events, ledger).map(|(exit, _)| exit)
}

/// [`execute_counting`], with the run's state when this invocation ran it (not when it only
/// said how a run ended, or found its slot taken).
fn carry_out(ctx: &Ctx, req: &Request, events: bool, ledger: bool) -> Result<(u8, Option<State>)> {
    // Nothing is created for a mistyped -w unless a run is being started.
    if !matches!(req, Request::Start(_)) {
        ctx.ws.require_dir()?;
    }
    let runner = Runner {
        ws: &ctx.ws,
        resolved: &ctx.resolved,
        printer: ctx.printer,
        wait: ctx.lock_wait(),
        events,
        ledger,
        modes: modes::AUTO,
    };
    match runner.request(req)? {
        RequestEnd::Ended(s) => {
            let rc = report_ended(ctx, &s);
            if ledger {
                modes::dream_when_idle(ctx, &s);
            }
            rc.map(|exit| (exit, None))
        }
        RequestEnd::SlotTaken(s) => {
            let p = &ctx.printer;
            if p.json {
                let mut v = phases::completion_event(&s);
                v["payload"]["skipped"] = json!(true);
                p.outln(&v.to_string());
            }
            p.info(&slot_taken(ctx, &s));
            Ok((code::SLOT_TAKEN, None))
        }
        RequestEnd::Repeated(s) => report_repeat(ctx, &s).map(|exit| (exit, None)),
        RequestEnd::Ran { state, stop } => {
            report(ctx, &state, events);
            Ok((stop.exit_code(), Some(state)))
        }
    }
}

/// Exit 11's account of a taken slot: how its run ended, and the ways on — that run where it
/// stopped when it is the workspace's own, and the slot run again with `--force`.
fn slot_taken(ctx: &Ctx, s: &State) -> String {
    let slot = s.slot.as_deref().unwrap_or_default();
    // The slot as the shell reads it back: quoted unless it is plain.
    let plain = !slot.is_empty() && slot.chars().all(|c| c.is_ascii_alphanumeric() || "._:+-".contains(c));
    let arg = if plain { slot.to_string() } else { format!("'{}'", slot.replace('\'', "'\\''")) };
    let current = ctx.ws.has_run() && ctx.ws.load_state().is_ok_and(|c| c.run_id == s.run_id);
    let mut ways: Vec<String> =
        current.then(|| agentloop_engine::lifecycle::way_back(&ctx.ws, s)).flatten().into_iter().collect();
    ways.push(format!(
        "the same command with --force runs the slot again, a new run that calls the model ({})",
        ctx.ws.cli(&format!("run --goal \"...\" --slot {arg} --force"))
    ));
    format!(
        "slot {slot} already ran: run {} ended {} ({}); nothing was run. Ways on: {}",
        s.run_id,
        s.status.as_str(),
        s.reason.as_deref().unwrap_or_default(),
        ways.join("; ")
    )
}

/// The same `run --goal` again on the run it started: that run's outcome, as when it ended, and
/// what the command would do with `--follow-up` (exit 11, nothing run, no model called).
fn report_repeat(ctx: &Ctx, s: &State) -> Result<u8> {
    let p = &ctx.printer;
    if p.json {
        let mut v = phases::completion_event(s);
        v["payload"]["skipped"] = json!(true);
        v["payload"]["ways_on"] = json!(ways_on(&ctx.ws, s));
        p.outln(&v.to_string());
    } else {
        report(ctx, s, false);
    }
    p.info(&format!(
        "run {} already had this goal and ended {}; nothing was run. {} starts a follow-up with the same goal (a new run that calls the model); {} shows this one",
        s.run_id,
        if s.interrupted { "interrupted" } else { s.status.as_str() },
        ctx.ws.cli("run --goal \"...\" --follow-up"),
        ctx.ws.cli("report"),
    ));
    Ok(code::SLOT_TAKEN)
}

/// `--output-schema FILE`: one JSON Schema object, checked before anything is written.
fn read_output_schema(file: &camino::Utf8Path, cfg: &agentloop_config::config::Config) -> Result<serde_json::Value> {
    let text = agentloop_io::fs::read_to_string(file).map_err(|e| Error {
        kind: Kind::Usage,
        message: format!("--output-schema: {}", e.message),
        hints: Vec::new(),
        ..e
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::usage(format!("--output-schema: {file} is not JSON"))
            .with_hint("the file must hold one JSON Schema object")
            .with_source(e)
    })?;
    agentloop_engine::output_schema::check_schema(
        &v,
        &format!("--output-schema {file}"),
        agentloop_model::model::strict_schemas(cfg),
    )?;
    Ok(v)
}

pub fn read_answer(a: &str) -> Result<String> {
    let text = if a == "-" { agentloop_io::fs::read_arg(a)? } else { a.to_string() };
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(
            Error::usage("the answer is empty").with_hint("give the answer as TEXT, or - to read it from stdin")
        );
    }
    Ok(text)
}

/// `run --dry-run`: the estimate and the first prompts, no model call, nothing written.
fn dry_run(ctx: &Ctx, args: &RunArgs) -> Result<u8> {
    let goal = match (&args.goal, ctx.ws.has_run()) {
        (Some(g), _) => g.clone(),
        (None, true) => ctx.ws.load_state()?.goal,
        (None, false) => return Err(Error::usage("--dry-run needs --goal (the workspace holds no run)")),
    };
    let background = match &args.context {
        Some(c) => agentloop_engine::phases::init::read_context(c)?,
        None => String::new(),
    };
    // The model's name is all an estimate needs: no key is read, no key command run.
    let model = agentloop_model::model::name_for_estimate(ctx.config())?;
    let env = Env::read_only(ctx)?;
    let limits = agentloop_workspace::workspace::Limits::from_config(ctx.config());
    let est = phases::negotiate::estimate(&env, &model, &goal, &background, &limits)?;
    let window = agentloop_workspace::rest_window::current(ctx.config());
    let values = phases::values::check_with(ctx.config(), &ctx.ws.root, &goal, &background)?;
    let negotiation = phases::negotiate::negotiate(&est, &limits, window.as_ref(), values);
    let refusal = negotiation.reason.clone();
    // A follow-up's context.md carries the previous run's facts: the prompt shows them.
    let previous = if ctx.ws.has_run() { Some(ctx.ws.load_state()?) } else { None };
    let ended = previous.filter(|s| s.status.is_terminal() || s.interrupted);
    let carried = match (&args.goal, args.new) {
        (Some(_), false) if ended.is_some() || !ctx.ws.has_run() => {
            agentloop_engine::lifecycle::carried_for(&ctx.ws, &ctx.config().handle.runs_dir, ended.as_ref())?
        }
        _ => Vec::new(),
    };
    let (system, frame, catalog) =
        phases::negotiate::first_prompts(&env, &goal, &background, &carried, args.slot.as_deref(), &limits)?;
    // Refused the way `run` would refuse it: resting (exit 10), then negotiation (exit 9; a
    // values conflict first, which --force does not override).
    let resting = agentloop_workspace::rest_window::check(ctx.config(), &ctx.ws.root).err();
    let p = &ctx.printer;
    let verdict = || -> Result<u8> {
        if let Some(e) = resting.clone() {
            return Err(e);
        }
        if let Some(c) = &negotiation.values.conflict {
            return Err(phases::values::declined(c, Some(json!(negotiation))));
        }
        match &refusal {
            Some(why) => Err(phases::negotiate::refused(&est, &limits, window.as_ref(), why)),
            None => Ok(code::OK),
        }
    };
    if p.json {
        p.json_value(&json!({"estimate": est, "limits": limits, "fits": refusal.is_none() && resting.is_none(),
            "negotiation": negotiation,
            "refusal": refusal, "resting": resting.as_ref().map(|e| e.detail()),
            "prompts": {"system": system, "catalog": catalog,
                // `frame: goal` sends no Frame prompt.
                "frame": (ctx.config().frame == agentloop_config::config::FrameFrom::Model).then_some(&frame)}}));
        return verdict();
    }
    print_estimate(p, &est, &negotiation, resting.as_ref().map(|e| e.detail()).as_deref());
    p.outln("\n== system prompt (frame)");
    p.outln(system.trim_end());
    p.outln("\n== frame prompt");
    match ctx.config().frame {
        agentloop_config::config::FrameFrom::Goal => {
            p.outln("(none sent: with `frame: goal` the goal is the Definition of Done's one item)")
        }
        agentloop_config::config::FrameFrom::Model => p.outln(frame.trim_end()),
    }
    p.outln("\n== catalog (plan)");
    p.outln(catalog.trim_end());
    verdict()
}

/// The dry run's estimate for people: tokens and dollars, whether it fits, fatigue, resting.
fn print_estimate(
    p: &agentloop_io::output::Printer,
    est: &phases::negotiate::Estimate,
    n: &phases::negotiate::Negotiation,
    resting: Option<&str>,
) {
    let cost = |c: Option<f64>| {
        c.map(agentloop_engine::report::html::usd).unwrap_or_else(|| "unknown (no price for this model)".into())
    };
    p.outln(&format!("model        {}", est.model));
    p.outln(&match est.frame_tokens {
        0 => "frame        no model call (frame: goal)".to_string(),
        n => format!("frame        ~{n} tokens"),
    });
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
        match (&n.values.conflict, n.reason.as_deref()) {
            // Negotiation stops at the first refusal: a declined task is not weighed further.
            (Some(_), _) => "not weighed: the task is declined for a value (below)".into(),
            (None, Some(r)) => format!("no: {r}"),
            (None, None) => "yes".into(),
        }
    ));
    if !n.values.checked.is_empty() {
        let verdict = match &n.values.conflict {
            Some(c) => format!("declined: {}", c.reason()),
            None => "no conflict".into(),
        };
        p.outln(&format!("values       {} — {verdict}", n.values.checked.join(", ")));
    }
    if let Some(f) = n.current_fatigue {
        p.outln(&format!("fatigue      {f}%"));
    }
    if let Some(e) = resting {
        p.outln(&format!("resting      yes: {e}"));
    }
}

/// A plain `run` on an ended run: what happened, and the ways on (exit 0).
fn report_ended(ctx: &Ctx, s: &State) -> Result<u8> {
    let p = &ctx.printer;
    if p.json {
        let mut v = phases::completion_event(s);
        v["payload"]["ways_on"] = json!(ways_on(&ctx.ws, s));
        p.outln(&v.to_string());
        return Ok(code::OK);
    }
    // Under an output schema stdout holds the run's output in that shape or nothing; the
    // account of the run goes to stderr.
    let schema = s.output_schema.is_some() || ctx.config().output_schema.is_some();
    let say = |line: &str| if schema { agentloop_io::output::stderr_line(line) } else { p.outln(line) };
    if let (true, Some(out), Status::Done) = (schema, &s.output, s.status) {
        p.outln(&out.to_string());
    }
    say(&format!(
        "run {} ended {}: {}",
        s.run_id,
        if s.interrupted { "interrupted" } else { s.status.as_str() },
        s.reason.clone().unwrap_or_default()
    ));
    if let Some(q) = &s.open_question {
        say(&format!("open question: {q}"));
    }
    say(&format!("ways on: {}", ways_on(&ctx.ws, s)));
    Ok(code::OK)
}

/// Prints the end of a run: a done run's outcome on stdout (or the event object), how any other
/// end came about on stderr.
pub fn report(ctx: &Ctx, state: &agentloop_workspace::workspace::State, events: bool) {
    let p = &ctx.printer;
    if p.json {
        p.outln(&phases::completion_event(state).to_string());
    } else if !events {
        let why = format!("{}: {}", state.status.as_str(), state.reason.clone().unwrap_or_default());
        let done = state.status == Status::Done;
        match (&state.output, &state.outcome) {
            // The output in the user's shape is the data; the outcome text stays in result.json.
            (Some(out), _) if done => p.outln(&out.to_string()),
            (_, Some(o)) if done => p.outln(o),
            // stdout holds a done run's answer or nothing (`run -q > answer.txt`), and a script
            // reading the output in its shape gets that or nothing: how the run ended goes to
            // stderr (even with -q: it is why the exit code is not 0).
            _ if !done || state.output_schema.is_some() || ctx.config().output_schema.is_some() => {
                agentloop_io::output::stderr_line(&agentloop_io::redact::redact(&why))
            }
            _ => p.outln(&why),
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
