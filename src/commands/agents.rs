//! `agentloop agents list`: the named agent profiles (`agents/NAME.yaml`).

use crate::config;
use crate::error::Result;
use crate::settings::Ctx;
use clap::Subcommand;
use serde_json::json;

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// List agent profiles in <workspace>/agents and $XDG_CONFIG_HOME/agentloop/agents.
    ///
    /// A profile is a config file (system_prompt, llm, allowed_tools, skills, limits, description)
    /// applied with --agent NAME, above the config files and below environment and flags.
    List,
}

pub fn run(ctx: Ctx, cmd: AgentsCommand) -> Result<u8> {
    let AgentsCommand::List = cmd;
    let rows = profiles(&ctx.ws.root)?;
    if ctx.printer.json {
        ctx.printer.json_value(&json!(rows));
    } else {
        for r in &rows {
            let note = r["error"]
                .as_str()
                .map(|e| format!("INVALID: {e}"))
                .unwrap_or_else(|| r["description"].as_str().unwrap_or("").to_string());
            ctx.printer.outln(&format!(
                "{:<20} {:<40} {}",
                r["name"].as_str().unwrap_or(""),
                r["path"].as_str().unwrap_or(""),
                note
            ));
        }
    }
    Ok(0)
}

/// The agent profiles in `<root>/agents` and the user's `agents/` folder (the first of a name
/// wins), each with its description, or the error that makes it unusable.
pub fn profiles(root: &camino::Utf8Path) -> Result<Vec<serde_json::Value>> {
    let mut dirs = vec![root.join("agents")];
    dirs.extend(config::user_config_dir().map(|d| d.join("agents")));
    let mut rows = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for d in dirs {
        let Ok(rd) = d.read_dir_utf8() else { continue };
        let mut files: Vec<_> = rd.flatten().map(|e| e.path().to_path_buf()).collect();
        files.sort();
        for p in files {
            let (Some(stem), Some(ext)) = (p.file_stem(), p.extension()) else {
                continue;
            };
            if !["yaml", "yml", "json"].contains(&ext) || !seen.insert(stem.to_string()) {
                continue;
            }
            let layer = config::load_file(&p)?;
            let (description, problem) = match layer.as_ref().map(|l| (l, l.validate())) {
                Some((l, Ok(()))) => {
                    (l.value.get("description").and_then(|v| v.as_str()).unwrap_or("").to_string(), None)
                }
                Some((_, Err(e))) => (String::new(), Some(e.message)),
                None => (String::new(), None),
            };
            rows.push(json!({"name": stem, "path": p, "description": description, "error": problem}));
        }
    }
    Ok(rows)
}
