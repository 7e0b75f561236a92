//! `agentloop demo`: the bundled example, run from the installed binary (its files are embedded).

use agentloop_engine::lifecycle::{Request, Start};
use agentloop_engine::settings::Ctx;
use agentloop_types::error::{Error, Result};
use camino::Utf8PathBuf;
use clap::Args;

const FILES: &[(&str, &str)] = &[
    ("article.md", include_str!("../../examples/critique/article.md")),
    ("context.md", include_str!("../../examples/critique/context.md")),
    ("script.yaml", include_str!("../../examples/critique/script.yaml")),
    ("agentloop.yaml", include_str!("../../examples/critique/agentloop.yaml")),
];

/// Run the bundled example offline: the scripted model drives real tools over a bundled article.
///
/// Writes the example to DIR/examples/critique/, runs the whole loop in DIR/demo-ws (the paper
/// trail: context.md, memory.md, plan.md, decisions.md, transcript.md, trace.jsonl, result.json,
/// artifacts/critique.md) and writes the run's HTML report to DIR/demo-ws/report.html. No
/// network, no API key: the answers are replayed, so the model is recorded as `scripted` and the
/// run has no cost. An earlier demo in DIR is archived under DIR/demo-ws/runs/ (a follow-up).
/// Nothing is written outside DIR: the demo's long-term memory is demo-ws/.agentloop/memory/
/// whatever memory.scope or memory.dir say, and its runs are not counted in the rest ledger.
/// Your config's MCP servers and Ductile plugins are not started for the demo.
///
/// Example: agentloop demo /tmp/al-demo && agentloop -w /tmp/al-demo/demo-ws trace show
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct DemoArgs {
    /// Folder for the example and its workspace.
    #[arg(default_value = "agentloop-demo")]
    pub dir: Utf8PathBuf,
}

pub fn run(ctx: Ctx, args: DemoArgs) -> Result<u8> {
    let ex = args.dir.join("examples/critique");
    agentloop_io::fs::create_dir_all(&ex)?;
    for (name, text) in FILES {
        agentloop_io::fs::write_atomic(&ex.join(name), text.as_bytes())?;
    }
    let abs = std::env::current_dir()
        .ok()
        .and_then(|d| Utf8PathBuf::from_path_buf(d).ok())
        .map(|d| d.join(&args.dir))
        .ok_or_else(|| Error::failure("cannot resolve the current folder"))?;
    let ws = agentloop_workspace::workspace::Workspace::new(abs.join("demo-ws"));
    let mut demo_ctx = ctx.rebuild(|g| {
        g.workspace = abs.join("demo-ws");
        g.script = Some(abs.join("examples/critique/script.yaml"));
        g.config = Some(abs.join("examples/critique/agentloop.yaml"));
        g.provider = Some("scripted".into());
    })?;
    // The demo writes nothing outside DIR: its memories stay in demo-ws/.agentloop/memory/
    // whatever the user's config shares, and its scripted usage is no agent's.
    let memory = &mut demo_ctx.resolved.config.memory;
    memory.scope = agentloop_config::config::MemoryScope::Workspace;
    memory.dir = None;
    demo_ctx.resolved.config.tools.memory.dir = None;
    // The demo is the bundled example alone: the MCP servers and Ductile plugins your config
    // names are not started for it (nor warned of when they fail).
    demo_ctx.resolved.config.mcp = Default::default();
    demo_ctx.resolved.config.ductile = Default::default();
    let start = Start {
        goal: "Write a two-paragraph critique of the bundled article".into(),
        background: agentloop_engine::phases::init::read_context(ex.join("context.md").as_str())?,
        carry: true,
        force: false,
        slot: None,
        // A replay calls no paid model: the demo run again in the same folder replays anew.
        follow_up: true,
        session: None,
    };
    // A replay is no agent's usage: it counts toward no rest window.
    let code = crate::commands::run::execute_counting(&demo_ctx, &Request::Start(start), false, false)?;
    let dir = &args.dir;
    // A run that stopped early still has a paper trail worth a page.
    let report = if ws.has_run() { Some(crate::commands::report::write_current(&ws)?) } else { None };
    ctx.printer.info(&format!(
        "the critique: {dir}/demo-ws/artifacts/critique.md; the timeline: agentloop -w {dir}/demo-ws trace show"
    ));
    if report.is_some() {
        ctx.printer.info(&format!("the report: {dir}/demo-ws/report.html (open it in a browser)"));
    }
    Ok(code)
}
