//! `agentloop agents list`: the named agent profiles (`agents/NAME.yaml`).

use agentloop_config::config;
use agentloop_engine::settings::Ctx;
use agentloop_types::error::Result;
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
    /// from (the profile, a config file, the environment, a flag or the default), and the
    /// agent's fatigue (percent of its rolling `rest:` window used) and stress.
    ///
    /// A profile may set any config key: system_prompt / system_prompt_file (its identity),
    /// llm, allowed_tools and tools, skills.only, memory, rest, budgets. The sandbox lines show
    /// where its file tools may write and read: without tools.write_paths set anywhere, an
    /// agent writes only in sandbox/NAME/ inside the workspace.
    ///
    /// `default` is the agent a run has without --agent: the configuration without a profile
    /// (unless agents/default.yaml exists). Its stress is this workspace's; a named profile's
    /// is of all its runs.
    ///
    /// Example: agentloop agents show researcher --json | jq '.sources'
    #[command(verbatim_doc_comment)]
    Show {
        /// The profile name (agents/NAME.yaml), or `default`.
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
            let layer = config::load_file(&p, config::Source::AgentProfile)?;
            let (description, problem) = match layer.as_ref().map(|l| (l, l.validate())) {
                Some((l, Ok(()))) => {
                    (l.value.get("description").and_then(|v| v.as_str()).unwrap_or("").to_string(), None)
                }
                Some((_, Err(e))) => (String::new(), Some(e.detail())),
                None => (String::new(), None),
            };
            rows.push(json!({"name": stem, "path": p, "description": description, "error": problem}));
        }
    }
    Ok(rows)
}

/// The folders the file tools may write and read for this configuration, with where that
/// came from (`tools.write_paths`: a profile, a config file, the per-agent default).
fn sandbox(cfg: &config::Config, sources: &config::Sources) -> serde_json::Value {
    let dir = |p: &camino::Utf8PathBuf| format!("{}/", p.as_str().trim_end_matches('/'));
    let source = |k: &str| sources.get(k).cloned().unwrap_or(config::Source::Default).to_string();
    let write: Vec<String> = if cfg.tools.write_paths.is_empty() {
        vec!["the workspace (except agentloop's own files)".into()]
    } else {
        cfg.tools.write_paths.iter().map(dir).collect()
    };
    let mut read = vec!["the workspace".to_string()];
    read.extend(cfg.tools.read_paths.iter().chain(&cfg.tools.write_paths).map(dir));
    read.dedup();
    let read_source = format!(
        "the workspace always; tools.read_paths from {}; tools.write_paths from {}",
        source("tools.read_paths"),
        source("tools.write_paths")
    );
    json!({
        "write": write,
        "write_source": source("tools.write_paths"),
        "read": read,
        "read_source": read_source,
    })
}

fn show(ctx: &Ctx, name: &str) -> Result<u8> {
    // `default` names the agent of a run without --agent (no profile), unless a profile of
    // that name exists.
    let profile = name != "default" || profiles(&ctx.ws.root)?.iter().any(|r| r["name"] == "default");
    let c = ctx.rebuild(|g| g.agent = profile.then(|| name.to_string()))?;
    // Shown as `config show` shows it: one masking for every command that shows configuration.
    let mut r = c.resolved.clone();
    agentloop_config::mask::config(&mut r.value);
    let r = &r;
    let from_profile: Vec<&String> =
        r.sources.iter().filter(|(_, s)| matches!(s, config::Source::AgentProfile(_))).map(|(k, _)| k).collect();
    let sandbox = sandbox(c.config(), &r.sources);
    let window = agentloop_workspace::rest_window::current(c.config());
    let stress = agentloop_workspace::rest_window::stress(c.config(), &ctx.ws.root);
    if ctx.printer.json {
        ctx.printer.json_value(&json!({
            "name": name,
            "profile": profile,
            "config": r.value,
            "sources": r.sources,
            "set_by_profile": from_profile,
            "system_prompt": c.config().system_prompt,
            "sandbox": sandbox,
            "rest": window,
            "fatigue": window.as_ref().map(|w| w.fatigue),
            "stress": stress,
        }));
        return Ok(0);
    }
    ctx.printer.outln(&format!("agent {name}"));
    if !profile {
        ctx.printer.outln("profile (none: the agent of a run without --agent; config files, environment and flags)");
    }
    match &window {
        Some(w) => ctx.printer.outln(&format!(
            "fatigue {}% of its rolling usage window (refused above rest.max_fatigue {}%){}",
            w.fatigue,
            w.max_fatigue,
            w.resting.as_ref().map(|r| format!("; resting: {r}")).unwrap_or_default()
        )),
        None => ctx.printer.outln("fatigue n/a (no rest: limit sets a usage window)"),
    }
    ctx.printer.outln(crate::commands::status::stress_line(&stress).replacen("stress      ", "stress ", 1).as_str());
    ctx.printer.outln("sandbox:");
    for (what, key) in [("write", "write"), ("read", "read")] {
        let dirs: Vec<&str> = sandbox[key].as_array().into_iter().flatten().filter_map(|d| d.as_str()).collect();
        ctx.printer.outln(&format!(
            "  {what:<5} {}  # {}",
            dirs.join(", "),
            sandbox[format!("{key}_source")].as_str().unwrap_or("")
        ));
    }
    for (k, src) in &r.sources {
        if !src.is_given() {
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
