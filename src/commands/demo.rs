//! `agentloop demo`: the bundled example, run from the installed binary (its files are embedded).

use crate::error::{Error, Result};
use crate::settings::Ctx;
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
/// Writes the example to DIR/examples/critique/ and runs the whole loop in DIR/demo-ws (the paper
/// trail: context.md, memory.md, plan.md, decisions.md, transcript.md, trace.jsonl, result.json,
/// artifacts/critique.md). No network, no API key. An earlier demo in DIR is archived under
/// DIR/demo-ws/runs/ (a follow-up). Nothing is written outside DIR: the demo's long-term memory
/// is demo-ws/.agentloop/memory/ whatever memory.scope or memory.dir say, and its runs are not
/// counted in the rest ledger.
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
    crate::fs::create_dir_all(&ex)?;
    for (name, text) in FILES {
        crate::fs::write_atomic(&ex.join(name), text.as_bytes())?;
    }
    let abs = std::env::current_dir()
        .ok()
        .and_then(|d| Utf8PathBuf::from_path_buf(d).ok())
        .map(|d| d.join(&args.dir))
        .ok_or_else(|| Error::failure("cannot resolve the current folder"))?;
    let mut demo_ctx = ctx.rebuild(|g| {
        g.workspace = abs.join("demo-ws");
        g.script = Some(abs.join("examples/critique/script.yaml"));
        g.config = Some(abs.join("examples/critique/agentloop.yaml"));
        g.provider = Some("scripted".into());
    })?;
    // The demo writes nothing outside DIR: its memories stay in demo-ws/.agentloop/memory/
    // whatever the user's config shares, and its scripted usage is no agent's.
    let memory = &mut demo_ctx.resolved.config.memory;
    memory.scope = crate::config::MemoryScope::Workspace;
    memory.dir = None;
    demo_ctx.resolved.config.tools.memory.dir = None;
    crate::rest::keep_no_ledger();
    let code = crate::commands::run::run(
        demo_ctx,
        crate::commands::run::RunArgs {
            goal: Some("Write a two-paragraph critique of the bundled article".into()),
            context: Some(ex.join("context.md").to_string()),
            new: false,
            continue_: false,
            run: None,
            answer: None,
            events: false,
            dry_run: false,
            force: false,
        },
    )?;
    ctx.printer.info(&format!(
        "the critique: {}/demo-ws/artifacts/critique.md; the timeline: agentloop -w {}/demo-ws trace show",
        args.dir, args.dir
    ));
    Ok(code)
}
