//! `agentloop runs`: the runs event mode keeps under a root folder (seed 002's session list).

use crate::error::Result;
use crate::settings::Ctx;
use crate::workspace::Workspace;
use clap::Args;
use serde_json::json;

/// List the runs under the root folder (-w): `<root>/runs/<run_id>/`, plus the root's own run.
///
/// One line per run: id, status, step, last update, goal; --json prints an array of objects.
///
/// Example:
///   agentloop -w ~/ductile-runs runs --json | jq -r '.[] | select(.status=="running") | .run_id'
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RunsArgs {}

pub fn run(ctx: Ctx, _args: RunsArgs) -> Result<u8> {
    let mut workspaces = vec![ctx.ws.clone()];
    let dir = ctx.ws.root.join(&ctx.config().handle.runs_dir);
    if let Ok(rd) = dir.read_dir_utf8() {
        let mut found: Vec<_> = rd.flatten().filter(|e| e.path().is_dir()).map(|e| Workspace::new(e.path())).collect();
        found.sort_by(|a, b| a.root.cmp(&b.root));
        workspaces.extend(found);
    }
    let mut rows = Vec::new();
    for ws in workspaces.iter().filter(|w| w.has_run()) {
        match ws.load_state() {
            Ok(s) => rows.push(json!({
                "run_id": s.run_id, "status": s.status, "step": s.step, "goal": s.goal,
                "updated_at": s.updated_at, "reason": s.reason, "workspace": ws.root,
            })),
            Err(e) => ctx.printer.warn(&e.message),
        }
    }
    if ctx.printer.json {
        ctx.printer.json_value(&json!(rows));
        return Ok(0);
    }
    for r in &rows {
        let goal: String = r["goal"].as_str().unwrap_or("").chars().take(60).collect();
        ctx.printer.outln(&format!(
            "{}  {:<9} step {:>3}  {}  {}",
            r["run_id"].as_str().unwrap_or(""),
            r["status"].as_str().unwrap_or(""),
            r["step"],
            r["updated_at"].as_str().unwrap_or(""),
            goal
        ));
    }
    Ok(0)
}
