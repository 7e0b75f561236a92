//! The command-line definition (clap derive) and the one `match` that dispatches it: the top of
//! the library. The global flags ([`Global`]) become a configuration layer in
//! [`agentloop_engine::settings`]; each subcommand's args struct lives beside its implementation in
//! `commands/` (and `handle/command.rs`, `serve/command.rs`, `cli/completions.rs`).

pub mod completions;
pub mod global;

use crate::commands;
use agentloop_engine::settings::{Ctx, Global};
use agentloop_types::error::Result;
use agentloop_types::trace::Phase;
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
/// 9 refused: cannot fit its budget, 10 resting, 11 slot already ran, 12 `runs diff` found
/// changes or `eval` a regression, 78 configuration error in `handle`,
/// 130 interrupted (Ctrl-C; `run` resumes).
#[derive(Debug, Parser)]
#[command(name = "agentloop", version, propagate_version = true, max_term_width = 100, verbatim_doc_comment)]
pub struct Cli {
    #[command(flatten)]
    pub global: global::GlobalArgs,
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
    Eval(commands::eval::EvalArgs),
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
    /// Generate the catalog (skills.md); list, show, check, fetch and learn skills.
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
/// subcommand (clap copies them down), but only `agentloop --help` lists them: in each subcommand
/// the copies are hidden, and one line points at the list. That is done only for the subcommand a
/// command line names (clap's `defer`, which runs after clap copied the options down), when it is
/// parsed or its help is shown, not for all sixty at every start. Completions and the man page use
/// [`Cli::command`], where nothing is hidden.
pub fn command() -> clap::Command {
    Cli::command().long_version(long_version()).mut_subcommands(|sc| sc.defer(hide_globals))
}

/// What `--version` or `-V`, given alone, prints, without building the CLI: a script that asks
/// for the version pays only for the process.
pub fn version_alone(args: &[std::ffi::OsString]) -> Option<String> {
    match args {
        [_, flag] if flag == "--version" => Some(format!("agentloop {}\n", long_version())),
        [_, flag] if flag == "-V" => Some(format!("agentloop {}\n", env!("CARGO_PKG_VERSION"))),
        _ => None,
    }
}

/// What `--version` says: the version, then the optional parts (cargo features) built in and
/// left out, so a packaged binary says what it can do. `-V` says the version alone.
fn long_version() -> &'static str {
    let names = |on: bool| -> Vec<&str> { crate::FEATURES.iter().filter(|f| f.1 == on).map(|f| f.0).collect() };
    let (built, left) = (names(true), names(false));
    let mut text = format!(
        "{}\nfeatures: {}",
        env!("CARGO_PKG_VERSION"),
        if built.is_empty() { "none".to_string() } else { built.join(", ") }
    );
    if !left.is_empty() {
        text.push_str(&format!(" (left out: {})", left.join(", ")));
    }
    // Once per process, for clap's `&'static str`.
    Box::leak(text.into_boxed_str())
}

/// Only `agentloop` itself declares global options, so every global option a subcommand has is
/// a copy clap made.
fn hide_globals(sc: clap::Command) -> clap::Command {
    sc.mut_args(|a| if a.is_global_set() { a.hide(true) } else { a })
        .after_help(GLOBALS_POINTER)
        .mut_subcommands(|sub| sub.defer(hide_globals))
}

/// Parses the command line with [`command`].
pub fn parse(args: Vec<std::ffi::OsString>) -> std::result::Result<Cli, clap::Error> {
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

pub fn dispatch(cli: Cli) -> Result<u8> {
    let g = cli.global.settings();
    match entry(cli.command) {
        Entry::Root(run) => run(&g),
        Entry::Plain(run) => run(&agentloop_io::output::Printer::new(g.quiet, g.verbose, g.json, g.color)),
        Entry::Workspace { access, needs_dir, run } => {
            // A stray AGENTLOOP_* variable does not stop a command that only reads.
            let g = Global { read_only: access == Access::Reads, ..g };
            let ctx = agentloop_engine::settings::build(&g)?;
            // A mistyped -w: the command refuses a folder that does not exist and creates nothing.
            if needs_dir {
                ctx.ws.require_dir()?;
            }
            // A workspace that is not trusted had its widening keys taken out: commands that only
            // read go on without them (saying so), commands that act refuse, naming each key.
            if !ctx.refused.is_empty() {
                match access {
                    Access::Reads => ctx.warn_refused(),
                    Access::Acts => ctx.require_trusted()?,
                    Access::Trust => {}
                }
            }
            run(ctx)
        }
    }
}

/// How a subcommand meets configuration and its workspace.
enum Entry {
    /// Resolves configuration itself, per request or job under its root folder.
    Root(RootHandler),
    /// Generated from the CLI definition alone: works whatever the configuration holds.
    Plain(PlainHandler),
    /// Works on one workspace's resolved settings.
    Workspace { access: Access, needs_dir: bool, run: Handler },
}

/// What runs a subcommand, given what it needs.
type Handler = Box<dyn FnOnce(Ctx) -> Result<u8>>;
type RootHandler = Box<dyn FnOnce(&Global) -> Result<u8>>;
type PlainHandler = Box<dyn FnOnce(&agentloop_io::output::Printer) -> Result<u8>>;

/// What a workspace command does with an untrusted workspace's refused keys.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Only reads: goes on without them, saying so.
    Reads,
    /// Acts (runs a phase, calls a tool, changes files): refuses, naming each key.
    Acts,
    /// Is about trust itself.
    Trust,
}

/// Refuses a folder that does not exist: the commands that work on a run (only `init` and
/// `run --goal` create a workspace; config, skills, models and agents work anywhere).
const DIR: bool = true;
const ANY: bool = false;

fn ws(access: Access, needs_dir: bool, run: impl FnOnce(Ctx) -> Result<u8> + 'static) -> Entry {
    Entry::Workspace { access, needs_dir, run: Box::new(run) }
}

/// The one table of subcommands: what each needs and what runs it. There is no catch-all arm,
/// so a new subcommand does not compile until it says whether it only reads.
fn entry(command: Command) -> Entry {
    use commands::{memory::MemoryCommand as M, skills::SkillsCommand as S, tools::ToolsCommand as T};
    use Access::{Acts, Reads, Trust};
    match command {
        Command::Init(a) => ws(Acts, ANY, |c| commands::init::run(c, a)),
        Command::Trust(a) => ws(Trust, ANY, |c| commands::trust::run(c, a)),
        Command::Run(a) => ws(if a.dry_run { Reads } else { Acts }, ANY, |c| commands::run::run(c, a)),
        Command::Answer(a) => ws(Acts, DIR, |c| commands::answer::run(c, a)),
        Command::Frame(a) => ws(Acts, DIR, |c| commands::phase::run(c, Phase::Frame, a)),
        Command::Plan(a) => ws(Acts, DIR, |c| commands::phase::run(c, Phase::Plan, a)),
        Command::Act(a) => ws(Acts, DIR, |c| commands::phase::run(c, Phase::Act, a)),
        Command::Reflect(a) => ws(Acts, DIR, |c| commands::phase::run(c, Phase::Reflect, a)),
        Command::Status(a) => ws(Reads, DIR, |c| commands::status::run(c, a)),
        Command::Runs(a) => ws(Reads, DIR, |c| commands::runs::run(c, a)),
        Command::Report(a) => ws(Reads, DIR, |c| commands::report::run(c, a)),
        Command::Trace(a) => ws(Reads, DIR, |c| commands::trace::run(c, a)),
        Command::Config(a) => ws(Reads, ANY, |c| commands::config::run(c, a)),
        Command::Tools(a) => {
            ws(if matches!(a, T::List { .. }) { Reads } else { Acts }, DIR, |c| commands::tools::run(c, a))
        }
        Command::Mcp(a) => ws(Acts, ANY, |c| commands::mcp::run(c, a)),
        Command::Skills(a) => {
            let reads = matches!(a, S::Gen { .. } | S::List | S::Show { .. } | S::Check { .. });
            ws(if reads { Reads } else { Acts }, ANY, |c| commands::skills::run(c, a))
        }
        Command::Models(a) => ws(Acts, ANY, |c| commands::models::run(c, a)),
        Command::Agents(a) => ws(Reads, ANY, |c| commands::agents::run(c, a)),
        Command::Memory(a) => {
            let reads = matches!(a, M::List(_) | M::Search(_) | M::Show { .. });
            ws(if reads { Reads } else { Acts }, ANY, |c| commands::memory::run(c, a))
        }
        Command::Dream(a) => ws(Acts, DIR, |c| commands::dream::run(c, a)),
        Command::Rest(a) => ws(Acts, DIR, |c| commands::rest::run(c, a)),
        Command::Demo(a) => ws(Acts, ANY, |c| commands::demo::run(c, a)),
        // Event mode, the HTTP API and the queue resolve configuration per request under their root.
        Command::Handle(a) => Entry::Root(Box::new(|g| crate::handle::command::run(g, a))),
        Command::Serve(a) => Entry::Root(Box::new(|g| crate::serve::command::run(g, a))),
        Command::Worker(a) => Entry::Root(Box::new(|g| commands::worker::run(g, a))),
        Command::Enqueue(a) => Entry::Root(Box::new(|g| commands::enqueue::run(g, a))),
        // Each trial is a run of its own, in a workspace of its own under the output folder.
        Command::Eval(a) => Entry::Root(Box::new(|g| commands::eval::run(g, a))),
        Command::Completions(a) => Entry::Plain(Box::new(|p| completions::completions(p, a))),
        Command::Man(a) => Entry::Plain(Box::new(|p| completions::man(p, a))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subcommand (or flag) whose part this build left out is refused at once as a usage error
    /// naming the feature and how to get it; `--version` says which parts are built in.
    #[test]
    fn a_part_left_out_of_the_build_is_refused_naming_its_feature() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_str().unwrap();
        let r = "redis://127.0.0.1:1";
        let cases: [(&str, bool, Vec<&str>); 6] = [
            ("queue", cfg!(feature = "queue"), vec!["worker", "--redis", r, "--root", ws]),
            ("queue", cfg!(feature = "queue"), vec!["enqueue", "--goal", "g", "--redis", r]),
            ("queue", cfg!(feature = "queue"), vec!["-w", ws, "status", "--redis", r]),
            ("serve", cfg!(feature = "serve"), vec!["serve", "--root", ws, "--listen", "127.0.0.1:0"]),
            ("queue", cfg!(feature = "queue") || !cfg!(feature = "serve"), vec!["serve", "--root", ws, "--redis", r]),
            ("mcp", cfg!(feature = "mcp"), vec!["-w", ws, "mcp", "list"]),
        ];
        for (feature, built, args) in cases {
            if built {
                continue;
            }
            let matches = command().try_get_matches_from(std::iter::once("agentloop").chain(args.iter().copied()));
            let cli = Cli::from_arg_matches(&matches.unwrap()).unwrap();
            let e = dispatch(cli).err().unwrap_or_else(|| panic!("{args:?} ran"));
            assert_eq!(e.exit_code(), agentloop_types::error::code::USAGE, "{args:?}: {}", e.message);
            assert!(e.message.contains(&format!("the `{feature}` feature")), "{args:?}: {}", e.message);
            assert!(e.hint().is_some_and(|h| h.contains(&format!("--features {feature}"))), "{args:?}");
        }
        let v = long_version();
        assert!(v.starts_with(env!("CARGO_PKG_VERSION")) && v.contains("\nfeatures: "), "{v}");
        for (name, on) in crate::FEATURES {
            assert_eq!(v.split(" (left out").next().unwrap_or_default().contains(name), *on, "{name}: {v}");
        }
    }
}
