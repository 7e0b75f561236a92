//! The command-line definition (clap derive) and the one `match` that dispatches it: the top of
//! the library. The global flags ([`Global`]) become a configuration layer in
//! [`crate::settings`]; each subcommand's args struct lives beside its implementation in
//! `commands/` (and `handle/command.rs`, `serve/command.rs`, `cli/completions.rs`).

pub mod completions;

use crate::commands;
use crate::error::Result;
use crate::settings::Global;
use crate::trace::Phase;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Goal-directed LLM work as a Frame → Plan → Act → Reflect loop over a workspace of plain files.
///
/// Every phase is its own subcommand and all state lives in the workspace folder (context.md,
/// memory.md, skills.md, plan.md, decisions.md, trace.jsonl, state.json, artifacts/), so a run can
/// be stepped by hand, edited between phases, scripted, scheduled, or driven one turn at a time.
///
/// Quick start, offline:  agentloop demo
/// With a real model:     ANTHROPIC_API_KEY=... agentloop -w ws run --goal "..."
/// Step by hand:          agentloop -w ws init --goal "..."; then frame, plan, act, reflect
///
/// Exit codes: 0 ok/done, 1 failure, 2 usage or config error, 3 escalated, 4 budget exhausted,
/// 5 provider failure, 6 tool failure, 7 workspace locked, 8 broken workspace file,
/// 9 refused: cannot fit its budget, 10 resting, 11 slot already ran, 78 configuration error
/// in `handle`,
/// 130 interrupted (Ctrl-C; `run` resumes).
#[derive(Debug, Parser)]
#[command(name = "agentloop", version, propagate_version = true, max_term_width = 100, verbatim_doc_comment)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Init(commands::init::InitArgs),
    Trust(commands::trust::TrustArgs),
    Run(commands::run::RunArgs),
    Answer(commands::answer::AnswerArgs),
    /// Frame: turn context.md into a goal and a 3-7 item Definition of Done in memory.md.
    ///
    /// One model call. Reads context.md (and memory.md when reframing); writes memory.md,
    /// decisions.md and a trace entry. Exit codes: 0 ok, 3 escalated (cannot proceed), 4 budget,
    /// 5 provider failure. Refuses to run out of turn unless --force.
    Frame(commands::phase::PhaseArgs),
    /// Plan: choose the one Next Action (a tool call) and write plan.md.
    ///
    /// One model call. The Next Action is the `json next-action` block in plan.md, which you may
    /// edit before `act`. Exit codes: 0 ok, 3 escalated, 4 budget (max_steps, tokens, cost),
    /// 5 provider failure. Refuses to run out of turn unless --force.
    Plan(commands::phase::PhaseArgs),
    /// Act: run the Next Action in plan.md; no model call.
    ///
    /// Large output goes to artifacts/. Exit codes: 0 ok, 6 the tool reported an error (recorded
    /// for reflect), 3 escalated (repeated failures or actions), 8 broken Next Action block.
    Act(commands::phase::PhaseArgs),
    /// Reflect: check the result against the Definition of Done; continue, done, reframe or escalate.
    ///
    /// One model call. `done` counts only when every item is ticked. Exit codes: 0 ok (done or
    /// continuing), 3 escalated, 4 budget (max_reframes), 5 provider failure.
    Reflect(commands::phase::PhaseArgs),
    Status(commands::status::StatusArgs),
    Runs(commands::runs::RunsArgs),
    Report(commands::report::ReportArgs),
    Serve(crate::serve::command::ServeArgs),
    Worker(commands::worker::WorkerArgs),
    Enqueue(commands::enqueue::EnqueueArgs),
    /// Read trace.jsonl: a timeline (show) or sums (stats).
    #[command(subcommand)]
    Trace(commands::trace::TraceCommand),
    /// Show the effective configuration and where each value came from.
    #[command(subcommand)]
    Config(commands::config::ConfigCommand),
    /// List the tools, or call one from the shell with no model.
    #[command(subcommand)]
    Tools(commands::tools::ToolsCommand),
    /// MCP servers: list them and their tools, call one tool, check that each starts.
    #[command(subcommand)]
    Mcp(commands::mcp::McpCommand),
    /// Generate the catalog (skills.md); list, show, check and fetch skills.
    #[command(subcommand)]
    Skills(commands::skills::SkillsCommand),
    /// Check a provider with one tiny request.
    #[command(subcommand)]
    Models(commands::models::ModelsCommand),
    /// List agent profiles (agents/NAME.yaml).
    #[command(subcommand)]
    Agents(commands::agents::AgentsCommand),
    /// Long-term memory across runs: list, search, show, add, forget, prune.
    #[command(subcommand)]
    Memory(commands::memory::MemoryCommand),
    Dream(commands::dream::DreamArgs),
    Rest(commands::rest::RestArgs),
    Demo(commands::demo::DemoArgs),
    Handle(crate::handle::command::HandleArgs),
    Completions(completions::CompletionsArgs),
    Man(completions::ManArgs),
}

/// What a subcommand's help says instead of repeating the global options.
const GLOBALS_POINTER: &str =
    "Global options (-w DIR, -q, -v, --json, --color, --wait, --config FILE, --provider, --model, \
--max-steps, --max-cost, ...) work before or after the subcommand; `agentloop --help` lists them all.";

/// The CLI as it is parsed and as `--help` shows it. The global options are accepted after every
/// subcommand (clap copies them down), but only `agentloop --help` lists them: each subcommand
/// gets its own hidden copies (clap then copies nothing over them) and one line pointing at the
/// list. Completions and the man page use [`Cli::command`], where nothing is hidden.
pub fn command() -> clap::Command {
    let top = Cli::command();
    let globals: Vec<clap::Arg> = top.get_arguments().filter(|a| a.is_global_set()).cloned().collect();
    top.mut_subcommands(|sc| hide_globals(sc, &globals))
}

fn hide_globals(mut sc: clap::Command, globals: &[clap::Arg]) -> clap::Command {
    for a in globals {
        if sc.get_arguments().all(|own| own.get_id() != a.get_id()) {
            sc = sc.arg(a.clone().hide(true));
        }
    }
    sc.after_help(GLOBALS_POINTER).mut_subcommands(|sub| hide_globals(sub, globals))
}

/// Parses the command line with [`command`].
pub fn parse() -> std::result::Result<Cli, clap::Error> {
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(std::env::args_os())?;
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

pub fn dispatch(cli: Cli) -> Result<u8> {
    let g = &cli.global;
    match cli.command {
        // Event mode and the HTTP API resolve configuration per request under their root.
        Command::Handle(args) => crate::handle::command::run(g, args),
        Command::Serve(args) => crate::serve::command::run(g, args),
        Command::Worker(args) => commands::worker::run(g, args),
        Command::Enqueue(args) => commands::enqueue::run(g, args),
        // Generated from the CLI definition alone: they work whatever the configuration holds.
        Command::Completions(args) => completions::completions(&printer(g), args),
        Command::Man(args) => completions::man(&printer(g), args),
        command => {
            // A stray AGENTLOOP_* variable does not stop a command that only reads.
            let g = &Global { read_only: read_only(&command) == Some(true), ..g.clone() };
            with_settings(g, crate::settings::build(g)?, command)
        }
    }
}

/// Whether a command only reads (Some(true): it goes on without an untrusted workspace's
/// refused keys), acts (Some(false): it refuses), or is about trust itself (None).
fn read_only(command: &Command) -> Option<bool> {
    use commands::{memory::MemoryCommand as M, skills::SkillsCommand as S, tools::ToolsCommand as T};
    Some(match command {
        Command::Trust(_) => return None,
        Command::Status(_) | Command::Runs(_) | Command::Report(_) | Command::Trace(_) | Command::Config(_) => true,
        Command::Agents(_) => true,
        Command::Run(a) => a.dry_run,
        Command::Tools(T::List { .. }) => true,
        Command::Skills(S::Gen { .. } | S::List | S::Show { .. } | S::Check { .. }) => true,
        Command::Memory(M::List(_) | M::Search(_) | M::Show { .. }) => true,
        _ => false,
    })
}

fn printer(g: &Global) -> crate::output::Printer {
    crate::output::Printer::new(g.quiet, g.verbose, g.json, g.color)
}

fn with_settings(g: &Global, ctx: crate::settings::Ctx, command: Command) -> Result<u8> {
    // Only `init` and `run --goal` create a workspace; the other commands that work on a run
    // refuse a folder that does not exist (a mistyped -w) and create nothing. (config, skills,
    // models and agents only read configuration and work anywhere.)
    if matches!(
        command,
        Command::Frame(_)
            | Command::Plan(_)
            | Command::Act(_)
            | Command::Reflect(_)
            | Command::Answer(_)
            | Command::Status(_)
            | Command::Runs(_)
            | Command::Report(_)
            | Command::Trace(_)
            | Command::Tools(_)
            | Command::Dream(_)
            | Command::Rest(_)
    ) {
        ctx.ws.require_dir()?;
    }
    // A workspace that is not trusted had its widening keys taken out: commands that only read
    // go on without them (saying so), commands that act refuse, naming each key.
    if !ctx.refused.is_empty() {
        match read_only(&command) {
            Some(true) => ctx.warn_refused(),
            Some(false) => ctx.require_trusted()?,
            None => {}
        }
    }
    match command {
        Command::Init(a) => commands::init::run(ctx, a),
        Command::Trust(a) => commands::trust::run(ctx, a),
        Command::Run(a) => commands::run::run(ctx, a),
        Command::Answer(a) => commands::answer::run(ctx, a),
        Command::Frame(a) => commands::phase::run(ctx, Phase::Frame, a),
        Command::Plan(a) => commands::phase::run(ctx, Phase::Plan, a),
        Command::Act(a) => commands::phase::run(ctx, Phase::Act, a),
        Command::Reflect(a) => commands::phase::run(ctx, Phase::Reflect, a),
        Command::Status(a) => commands::status::run(ctx, a),
        Command::Runs(a) => commands::runs::run(ctx, a),
        Command::Report(a) => commands::report::run(ctx, a),
        Command::Trace(c) => commands::trace::run(ctx, c),
        Command::Config(c) => commands::config::run(ctx, c),
        Command::Tools(c) => commands::tools::run(ctx, c),
        Command::Mcp(c) => commands::mcp::run(ctx, c),
        Command::Skills(c) => commands::skills::run(ctx, c),
        Command::Models(c) => commands::models::run(ctx, c),
        Command::Agents(c) => commands::agents::run(ctx, c),
        Command::Memory(c) => commands::memory::run(ctx, c),
        Command::Dream(a) => commands::dream::run(ctx, a),
        Command::Rest(a) => commands::rest::run(ctx, a),
        Command::Demo(a) => commands::demo::run(ctx, a),
        Command::Handle(a) => crate::handle::command::run(g, a),
        Command::Serve(a) => crate::serve::command::run(g, a),
        Command::Worker(a) => commands::worker::run(g, a),
        Command::Enqueue(a) => commands::enqueue::run(g, a),
        Command::Completions(a) => completions::completions(&ctx.printer, a),
        Command::Man(a) => completions::man(&ctx.printer, a),
    }
}
