//! `agentloop init`: create a workspace for a new run.

use agentloop_engine::settings::Ctx;
use agentloop_types::error::Result;
use camino::Utf8PathBuf;
use clap::Args;

/// Create a workspace for a new run.
///
/// Writes context.md (the goal and background), memory.md, plan.md and decisions.md with their
/// headings, state.json (a new ULID run id, status, step 0, the effective limits) and a
/// `run.started` entry in trace.jsonl. Refuses to replace an existing run unless --force.
///
/// Example: agentloop init ws --goal "Critique https://example.com in two paragraphs"
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct InitArgs {
    /// Workspace folder to create (default: -w/--workspace, else the current folder).
    pub dir: Option<Utf8PathBuf>,
    /// What the run should achieve; - reads it from stdin.
    #[arg(long, short = 'g')]
    pub goal: String,
    /// Background for context.md: a YAML, JSON or markdown file, or - for stdin.
    #[arg(long, value_name = "FILE|-")]
    pub context: Option<String>,
    /// Start a new run even if the workspace holds one (trace.jsonl and artifacts/ are kept).
    #[arg(long)]
    pub force: bool,
}

pub fn run(mut ctx: Ctx, args: InitArgs) -> Result<u8> {
    if let Some(dir) = args.dir {
        ctx = ctx.rebuild(|g| g.workspace = dir)?;
        ctx.require_trusted()?;
    }
    let goal = agentloop_engine::phases::init::read_goal(&args.goal, args.context.as_deref())?;
    let background = match &args.context {
        Some(c) => agentloop_engine::phases::init::read_context(c)?,
        None => String::new(),
    };
    let was_new = agentloop_engine::trust::is_new_folder(&ctx.ws.root);
    let session = ctx.ws.lock(ctx.lock_wait())?;
    // A folder of this command's own making (missing or empty): its config is the user's.
    agentloop_engine::trust::record_created(&ctx.ws.root, was_new, &ctx.printer);
    let env = agentloop_engine::phases::Env::new(&ctx)?;
    let state = agentloop_engine::phases::init::init_run(
        &session,
        ctx.config(),
        &env.tpl,
        &goal,
        &background,
        args.force,
        None,
    )?;
    env.ensure_skills_md()?;
    if ctx.printer.json {
        ctx.printer
            .json_value(&serde_json::json!({"run_id": state.run_id, "workspace": ctx.ws.root, "status": "running"}));
    } else {
        ctx.printer.outln(&state.run_id);
        ctx.printer.info(&format!(
            "initialised {} (run {}); next: agentloop -w {} run",
            ctx.ws.root, state.run_id, ctx.ws.root
        ));
    }
    Ok(0)
}
