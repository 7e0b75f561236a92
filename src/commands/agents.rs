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
    /// Print a profile's effective configuration: every key with its value and where it came
    /// from (the profile, a config file, the environment, a flag or the default).
    ///
    /// A profile may set any config key: system_prompt / system_prompt_file (its identity),
    /// llm, allowed_tools and tools, skills.only, memory, rest, budgets.
    ///
    /// Example: agentloop agents show researcher --json | jq '.sources'
    #[command(verbatim_doc_comment)]
    Show {
        /// The profile name (agents/NAME.yaml).
        name: String,
    },
}

pub fn run(ctx: Ctx, cmd: AgentsCommand) -> Result<u8> {
    if let AgentsCommand::Show { name } = &cmd {
        return show(&ctx, name);
    }
    let rows = profiles(&ctx.ws.root)?;
    if ctx.printer.json {
        ctx.printer.json_value(&json!(rows));
    } else {
        if rows.is_empty() {
            ctx.printer
                .info("no agent profiles (agents/NAME.yaml in the workspace or $XDG_CONFIG_HOME/agentloop/agents)");
        }
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

fn show(ctx: &Ctx, name: &str) -> Result<u8> {
    let c = ctx.rebuild(|g| g.agent = Some(name.to_string()))?;
    let r = &c.resolved;
    let from_profile: Vec<(&String, &String)> =
        r.sources.iter().filter(|(_, s)| s.ends_with("(agent profile)")).collect();
    if ctx.printer.json {
        ctx.printer.json_value(&json!({
            "name": name,
            "config": r.value,
            "sources": r.sources,
            "set_by_profile": from_profile.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            "system_prompt": c.config().system_prompt,
        }));
        return Ok(0);
    }
    ctx.printer.outln(&format!("agent {name}"));
    for (k, src) in &r.sources {
        if src == "default" {
            continue;
        }
        let v = k.split('.').try_fold(&r.value, |v, part| v.get(part));
        ctx.printer.outln(&format!("  {k} = {}  # {src}", v.map(|v| v.to_string()).unwrap_or_default()));
    }
    if let Some(p) = &c.config().system_prompt {
        ctx.printer.outln("identity:");
        for line in p.lines() {
            ctx.printer.outln(&format!("  | {line}"));
        }
    }
    Ok(0)
}
