//! One module per subcommand; this file is the one `match`.

pub mod agents;
pub mod answer;
pub mod completions;
pub mod config;
pub mod demo;
pub mod dream;
pub mod handle;
pub mod init;
pub mod mcp;
pub mod memory;
pub mod models;
pub mod phase;
pub mod report;
pub mod run;
pub mod runs;
pub mod serve;
pub mod skills;
pub mod status;
pub mod tools;
pub mod trace;

use crate::cli::{Cli, Command};
use crate::error::Result;
use crate::trace::Phase;

pub fn dispatch(cli: Cli) -> Result<u8> {
    let g = &cli.global;
    match cli.command {
        // Event mode and the HTTP API resolve configuration per request under their root.
        Command::Handle(args) => handle::run(g, args),
        Command::Serve(args) => serve::run(g, args),
        // Generated from the CLI definition alone: they work whatever the configuration holds.
        Command::Completions(args) => completions::completions(&printer(g), args),
        Command::Man(args) => completions::man(&printer(g), args),
        command => with_settings(g, crate::settings::build(g)?, command),
    }
}

fn printer(g: &crate::cli::Global) -> crate::output::Printer {
    crate::output::Printer::new(g.quiet, g.verbose, g.json, g.color)
}

fn with_settings(g: &crate::cli::Global, ctx: crate::settings::Ctx, command: Command) -> Result<u8> {
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
    ) {
        ctx.ws.require_dir()?;
    }
    match command {
        Command::Init(a) => init::run(ctx, a),
        Command::Run(a) => run::run(ctx, a),
        Command::Answer(a) => answer::run(ctx, a),
        Command::Frame(a) => phase::run(ctx, Phase::Frame, a),
        Command::Plan(a) => phase::run(ctx, Phase::Plan, a),
        Command::Act(a) => phase::run(ctx, Phase::Act, a),
        Command::Reflect(a) => phase::run(ctx, Phase::Reflect, a),
        Command::Status(a) => status::run(ctx, a),
        Command::Runs(a) => runs::run(ctx, a),
        Command::Report(a) => report::run(ctx, a),
        Command::Trace(c) => trace::run(ctx, c),
        Command::Config(c) => config::run(ctx, c),
        Command::Tools(c) => tools::run(ctx, c),
        Command::Mcp(c) => mcp::run(ctx, c),
        Command::Skills(c) => skills::run(ctx, c),
        Command::Models(c) => models::run(ctx, c),
        Command::Agents(c) => agents::run(ctx, c),
        Command::Memory(c) => memory::run(ctx, c),
        Command::Dream(a) => dream::run(ctx, a),
        Command::Demo(a) => demo::run(ctx, a),
        Command::Handle(a) => handle::run(g, a),
        Command::Serve(a) => serve::run(g, a),
        Command::Completions(a) => completions::completions(&ctx.printer, a),
        Command::Man(a) => completions::man(&ctx.printer, a),
    }
}
