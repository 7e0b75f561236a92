//! `agentloop frame|plan|act|reflect`: run one phase of the loop on the workspace.

use agentloop_engine::phases::{self, Env, PhaseEnd};
use agentloop_engine::settings::Ctx;
use agentloop_types::error::{code, Error, Result};
use agentloop_types::trace::{Event, Phase};
use agentloop_workspace::workspace::Next;
use clap::Args;

/// Options of the single-phase commands (frame, plan, act, reflect).
#[derive(Debug, Args)]
pub struct PhaseArgs {
    /// Run the phase even if state.json expects another one next.
    #[arg(long)]
    pub force: bool,
}

fn next_of(p: Phase) -> Next {
    match p {
        Phase::Frame => Next::Frame,
        Phase::Plan => Next::Plan,
        Phase::Act => Next::Act,
        Phase::Reflect => Next::Reflect,
        Phase::Run => Next::None,
    }
}

pub fn run(ctx: Ctx, phase: Phase, args: PhaseArgs) -> Result<u8> {
    ctx.ws.require_dir()?;
    let session = ctx.ws.lock(ctx.lock_wait())?;
    let mut state = ctx.ws.load_state()?;
    if state.status.is_terminal() {
        return Err(Error::usage(format!(
            "run {} already ended {}: {}",
            state.run_id,
            state.status.as_str(),
            state.reason.clone().unwrap_or_default()
        ))
        .with_hint(agentloop_engine::lifecycle::ways_on(&ctx.ws, &state)));
    }
    let want = next_of(phase);
    if state.next != want {
        if !args.force {
            let next = serde_json::to_value(state.next).unwrap_or_default();
            return Err(Error::usage(format!(
                "the run expects `{}` next, not `{}`",
                next.as_str().unwrap_or("?"),
                phase.as_str()
            ))
            .with_hint(format!("run {}, or pass --force", ctx.ws.cli(next.as_str().unwrap_or("status")))));
        }
        if phase == Phase::Act && state.pending.is_none() {
            return Err(Error::usage("there is no planned action to run")
                .with_hint(format!("run {} first", ctx.ws.cli("plan --force"))));
        }
        state.next = want;
    }
    let mut env = Env::new(&ctx)?;
    env.hold(&session);
    phases::refresh_limits(&env, &mut state, &ctx.resolved.sources)?;
    // The phase's own entries are the ones it commits; report exactly those.
    env.keep_committed = true;
    // One phase by hand is a process on the run too: its spans join the run's trace.
    let span = agentloop_model::model::traced::run_span(
        env.cfg,
        &state.run_id,
        state.agent.as_deref(),
        &mut state.trace_parent,
    );
    let outcome = phases::run::step(&mut env, &mut state);
    let left = if state.status.is_terminal() { state.ended_as().as_str() } else { "running" };
    span.ended(outcome.as_ref().map(|_| left));
    drop(span);
    let outcome = outcome?;
    let committed = env.committed.take();
    for e in committed.iter().filter_map(|l| serde_json::from_str::<agentloop_types::trace::Entry>(l).ok()) {
        if ctx.printer.json {
            ctx.printer.outln(&e.to_line());
        } else {
            let what = e.error.clone().or(e.result_summary.clone()).or(e.reason.clone()).unwrap_or_else(|| {
                // A frame says nothing of its own: where what it framed went.
                match e.event {
                    Event::Frame | Event::Reframe => "the goal and its Definition of Done are in memory.md".into(),
                    _ => String::new(),
                }
            });
            let head =
                [e.event.to_string(), e.tool.clone().unwrap_or_default(), e.verdict().unwrap_or_default().to_string()]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
            let what = if what.is_empty() { what } else { format!(": {what}") };
            ctx.printer.outln(&format!("step {} {head}{what}", e.step));
        }
    }
    Ok(match outcome {
        PhaseEnd::Next => code::OK,
        PhaseEnd::ToolFailed => code::TOOL,
        PhaseEnd::Stopped(kind) => kind.exit_code(),
    })
}
