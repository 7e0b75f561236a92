//! `agentloop run`: init if needed, then frame → (plan → act → reflect)* → finish.

use crate::error::{code, Error, Result};
use crate::phases::{self, Env};
use crate::settings::Ctx;
use crate::workspace::StopKind;
use clap::Args;

/// Run the loop until the run is done or escalated.
///
/// Creates the workspace when it holds no run (--goal is then required), resumes a run that
/// stopped part-way (after a kill, no phase is skipped or applied twice), and prints the
/// outcome on stdout (with --json, the agent.completed / agent.escalated event object).
///
/// Exit codes: 0 done, 3 escalated, 4 budget or limit exhausted, 5 provider failure.
///
/// Examples:
///   agentloop -w ws run --goal "Critique https://example.com in two paragraphs"
///   agentloop -w ws run                     # resume
///   agentloop -w ws run --events | jq -c .  # live trace entries as JSONL
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RunArgs {
    /// The goal (needed when the workspace holds no run yet).
    #[arg(long, short = 'g')]
    pub goal: Option<String>,
    /// Background for context.md: a YAML, JSON or markdown file, or - for stdin.
    #[arg(long, value_name = "FILE|-")]
    pub context: Option<String>,
    /// Start a new run even if the workspace holds a finished one.
    #[arg(long)]
    pub new: bool,
    /// Stream trace entries as JSONL on stdout while the run goes.
    #[arg(long)]
    pub events: bool,
}

pub fn exit_code(stop: StopKind) -> u8 {
    match stop {
        StopKind::Done => code::OK,
        StopKind::Escalated => code::ESCALATED,
        StopKind::Budget => code::BUDGET,
        StopKind::Provider => code::PROVIDER,
    }
}

pub fn run(ctx: Ctx, args: RunArgs) -> Result<u8> {
    let _lock = ctx.ws.lock(ctx.lock_wait())?;
    let mut env = Env::new(&ctx)?;
    env.events = args.events;
    let existing = if ctx.ws.has_run() { Some(ctx.ws.load_state()?) } else { None };
    let fresh = match (&existing, &args.goal) {
        (None, None) => {
            return Err(
                Error::usage(format!("{} holds no run", ctx.ws.root)).with_hint("pass --goal \"...\" to start one")
            );
        }
        (None, Some(_)) => true,
        (Some(s), Some(_)) if s.status.is_terminal() => {
            if !args.new {
                return Err(Error::usage(format!(
                    "{} holds run {} which already ended {}",
                    ctx.ws.root,
                    s.run_id,
                    s.status.as_str()
                ))
                .with_hint("pass --new to start a new run in this workspace (trace.jsonl and artifacts/ are kept)"));
            }
            true
        }
        (Some(s), Some(g)) => {
            if g.trim() != s.goal.trim() {
                ctx.printer.warn(&format!("resuming run {} (goal: {}); --goal is ignored", s.run_id, s.goal));
            }
            false
        }
        (Some(_), None) => false,
    };
    let mut state = if fresh {
        let background = match &args.context {
            Some(c) => crate::fs::read_arg(c)?,
            None => String::new(),
        };
        let s = phases::init::init_run(
            &ctx.ws,
            ctx.config(),
            &env.tpl,
            args.goal.as_deref().unwrap_or(""),
            &background,
            true,
            None,
        )?;
        s
    } else {
        existing.expect("existing run")
    };
    if !state.status.is_terminal() {
        ctx.printer.progress(&format!("run {} in {}", state.run_id, ctx.ws.root));
    }
    let stop = phases::run::drive(&mut env, &mut state, ctx.config().timeout.0)?;
    report(&ctx, &state, args.events);
    Ok(exit_code(stop))
}

/// Prints the end of a run: the outcome on stdout (or the event object), the reason on stderr.
pub fn report(ctx: &Ctx, state: &crate::workspace::State, events: bool) {
    let p = &ctx.printer;
    if p.json {
        p.outln(&phases::completion_event(state).to_string());
    } else if !events {
        match &state.outcome {
            Some(o) => p.outln(o),
            None => p.outln(&format!("{}: {}", state.status.as_str(), state.reason.clone().unwrap_or_default())),
        }
    }
    p.info(&format!(
        "run {} {} after {} step{}: {}\npaper trail: {}/ (memory.md, plan.md, decisions.md, trace.jsonl, result.json, artifacts/)",
        state.run_id,
        state.status.as_str(),
        state.completed_steps.len(),
        if state.completed_steps.len() == 1 { "" } else { "s" },
        state.reason.clone().unwrap_or_default(),
        ctx.ws.root
    ));
}
