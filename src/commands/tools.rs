//! `agentloop tools list|call`: the tool registry from the shell, with no model involved.

use agentloop_engine::settings::Ctx;
use agentloop_tools::skills::SkillSet;
use agentloop_tools::tools::{Registry, ToolEnv};
use agentloop_types::error::{code, Error, Result};
use clap::Subcommand;
use serde_json::{json, Value};

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List the tools Act may run (exactly what the Plan prompt offers).
    ///
    /// Example: agentloop tools list --json | jq -r '.[].name'
    #[command(verbatim_doc_comment)]
    List {
        /// Include tools that allowed_tools excludes.
        #[arg(long)]
        all: bool,
    },
    /// Call one tool with JSON arguments and print its result as JSON.
    ///
    /// Same sandbox and config as Act; the workspace (-w) is the root for relative paths.
    /// Exit codes: 0 ok, 6 the tool reported an error, 2 unknown tool or invalid arguments.
    ///
    /// Examples:
    ///   agentloop tools call file_read --args '{"path": "context.md"}' | jq -r .output
    ///   echo '{"url": "https://example.com"}' | agentloop tools call web_fetch --args -
    #[command(verbatim_doc_comment)]
    Call {
        /// Tool name.
        name: String,
        /// Arguments as a JSON object, or - to read them from stdin.
        #[arg(long, value_name = "JSON|-", default_value = "{}")]
        args: String,
    },
}

pub fn run(ctx: Ctx, cmd: ToolsCommand) -> Result<u8> {
    let cfg = ctx.config();
    // Listing starts no program and calls nothing out: MCP and Ductile tools come from caches.
    let reach = match cmd {
        ToolsCommand::List { .. } => agentloop_tools::tools::Reach::CachesOnly,
        ToolsCommand::Call { .. } => agentloop_tools::tools::Reach::Start,
    };
    let logs = agentloop_tools::mcp::client::Logs::for_command(&ctx.ws.root);
    let registry = Registry::load_logging(cfg, &ctx.ws.root, reach, logs)?;
    match cmd {
        ToolsCommand::List { all } => {
            let tools: Vec<_> = if all { registry.all().iter().collect() } else { registry.allowed(cfg) };
            if ctx.printer.json {
                let v: Vec<Value> = tools
                    .iter()
                    .map(|t| agentloop_engine::schema::ToolInfo {
                        name: t.name.clone(),
                        description: t.description.clone(),
                        parameters: t.parameters.clone(),
                        side_effect: serde_json::to_value(t.side_effect).unwrap_or_default(),
                        allowed: registry.is_allowed(cfg, &t.name),
                        allowed_by: registry.allowed_by(cfg, &t.name).map(str::to_string),
                        timeout_secs: t.timeout.as_secs(),
                        output_cap: t.output_cap,
                    })
                    .map(agentloop_types::json::to_value)
                    .collect();
                ctx.printer.json_value(&Value::Array(v));
            } else {
                for t in tools {
                    let se = serde_json::to_value(t.side_effect).unwrap_or_default();
                    ctx.printer.outln(&format!("{:<12} {:<8} {}", t.name, se.as_str().unwrap_or(""), t.description));
                }
                // What each allowed_tools entry named (a tool, a plugin's commands, or none).
                if let Some(line) = registry.allowed_summary(cfg) {
                    ctx.printer.outln(&format!("# {line}"));
                }
            }
            Ok(0)
        }
        ToolsCommand::Call { name, args } => call(&ctx, &registry, &name, &args),
    }
}

/// `tools call` and `mcp call`: parse the arguments, check, run, print the result as JSON.
/// Exit codes: 0 ok, 6 the tool reported an error, 2 unknown tool or invalid arguments.
pub fn call(ctx: &Ctx, registry: &Registry, name: &str, args: &str) -> Result<u8> {
    let cfg = ctx.config();
    let text = if args == "-" { agentloop_io::fs::read_arg("-")? } else { args.to_string() };
    let args: Value = serde_json::from_str(&text).map_err(|e| {
        Error::usage("--args is not valid JSON")
            .with_hint("pass a JSON object, e.g. --args '{\"path\": \"context.md\"}'")
            .with_source(e)
    })?;
    if let Err(e) = registry.check(cfg, name, &args) {
        ctx.printer.json_value(&json!({"status": "error", "output": "", "error": e.to_string(), "retryable": false, "metadata": null, "artifacts": []}));
        return Err(Error::usage(format!("tools call {name}: {e}"))
            .with_hint("`agentloop tools list --json` shows each tool's parameters"));
    }
    agentloop_io::fs::create_dir_all(&ctx.ws.root)?;
    let skills = SkillSet::load(cfg, &ctx.ws.root);
    let stem = format!("tool-{name}-{}", agentloop_types::clock::now_rfc3339().replace([':', '.'], "-"));
    let env = ToolEnv { root: &ctx.ws.root, config: cfg, skills: &skills, artifact_stem: stem };
    let result = registry.call(&env, name, &args);
    ctx.printer.json_value(&agentloop_types::json::to_value(&result));
    Ok(if result.is_ok() { 0 } else { code::TOOL })
}
