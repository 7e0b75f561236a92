//! What the `mcp` subcommands do (built with the `mcp` feature).

use super::McpCommand;
use agentloop_engine::settings::Ctx;
use agentloop_tools::mcp::client::Logs;
use agentloop_tools::mcp::{self, Hub, ServerState, Source, Status};
use agentloop_tools::tools::{Registry, ToolResult};
use agentloop_types::error::{code, Error, Result};
use serde_json::{json, Value};

pub fn run(ctx: Ctx, cmd: McpCommand) -> Result<u8> {
    let cfg = ctx.config();
    let login = matches!(
        cmd,
        McpCommand::List { login: true, .. } | McpCommand::Call { login: true, .. } | McpCommand::Check { login: true }
    );
    match cmd {
        McpCommand::Login { server } => login_cmd(&ctx, &server),
        McpCommand::Logout { server } => {
            let (s, url) = http_server(&ctx, &server)?;
            if mcp::auth::forget(&url)? {
                ctx.printer.info(&format!("signed out of MCP server {}", s.name));
            } else {
                ctx.printer.info(&format!("no token was kept for MCP server {}", s.name));
            }
            Ok(0)
        }
        McpCommand::List { refresh, .. } => {
            let source = if refresh { Source::Servers } else { Source::CacheFirst };
            let hub = Hub::load_with(cfg, &ctx.ws.root, source, Logs::for_command(&ctx.ws.root), login)?;
            warn_all(&ctx, &hub);
            report(&ctx, &hub, false);
            Ok(0)
        }
        McpCommand::Check { .. } => {
            let logs = Logs::for_command(&ctx.ws.root);
            let hub = Hub::load_with(cfg, &ctx.ws.root, Source::Servers, logs.clone(), login)?;
            warn_all(&ctx, &hub);
            report(&ctx, &hub, true);
            let enabled = hub.states.iter().filter(|s| s.server.enabled).count();
            let failed = hub.states.iter().filter(|s| matches!(s.status, Status::Failed(_))).count();
            if hub.states.is_empty() {
                ctx.printer.info("no MCP servers are configured (mcp.servers or mcp.config_file)");
            }
            if failed > 0 {
                return Err(Error::failure(format!("{failed} of {enabled} enabled MCP servers failed the check"))
                    .with_hint(format!("each server's stderr is in its log ({})", logs.shown_folder())));
            }
            Ok(0)
        }
        McpCommand::Call { server, tool, args, .. } => {
            let logs = Logs::for_command(&ctx.ws.root);
            let reach =
                if login { agentloop_tools::tools::Reach::SignIn } else { agentloop_tools::tools::Reach::Start };
            let registry = Registry::load_logging(cfg, &ctx.ws.root, reach, logs)?;
            let hub = &registry.mcp;
            let Some(st) = hub.states.iter().find(|s| s.server.name == server) else {
                return Err(mcp::unknown_server(hub, &server));
            };
            let name = match hub.registry_name(&server, &tool) {
                Some(n) => n.to_string(),
                None => return not_offered(&ctx, st, &tool),
            };
            crate::commands::tools::call(&ctx, &registry, &name, &args)
        }
    }
}

/// A configured, enabled HTTP server and its URL.
fn http_server(ctx: &Ctx, name: &str) -> Result<(mcp::config::Server, String)> {
    let servers = mcp::config::resolve(ctx.config(), &ctx.ws.root)?;
    let Some(s) = servers.into_iter().find(|s| s.name == name) else {
        return Err(mcp::unknown_server(&Hub::load(ctx.config(), &ctx.ws.root, Source::CacheOnly)?, name));
    };
    match &s.transport {
        Some(mcp::config::Transport::Http { url, .. }) => {
            let url = url.clone();
            Ok((s, url))
        }
        Some(_) => Err(Error::usage(format!("MCP server {name} runs as a program (stdio); only HTTP servers sign in"))
            .with_hint("a stdio server takes its credentials from its env")),
        None => Err(Error::usage(format!("MCP server {name} is disabled"))
            .with_hint(format!("set mcp.servers.{name}.enabled: true"))),
    }
}

/// `mcp login`: sign in, then connect with the new token and list the tools (refreshing the
/// cache), so a sign-in that does not work says so at once.
fn login_cmd(ctx: &Ctx, name: &str) -> Result<u8> {
    let (mut server, url) = http_server(ctx, name)?;
    server.sign_in = true;
    mcp::auth::sign_in_now(&server, &url).map_err(|e| {
        Error::failure(e.to_string())
            .with_hint("check the server's url; `agentloop mcp logout NAME` forgets a token that went bad")
            .with_source(e)
    })?;
    let hub = Hub::load_with(ctx.config(), &ctx.ws.root, Source::Servers, Logs::for_command(&ctx.ws.root), true)?;
    warn_all(ctx, &hub);
    if let Some(st) = hub.states.iter().find(|s| s.server.name == name) {
        if let Status::Failed(e) = &st.status {
            return Err(Error::failure(format!("signed in, but MCP server {name} still failed: {e}")));
        }
        ctx.printer.info(&format!("MCP server {name}: {} tools", st.tools.len()));
    }
    Ok(0)
}

fn warn_all(ctx: &Ctx, hub: &Hub) {
    // Registry::new prints the same warnings for the other commands.
    for w in &hub.warnings {
        ctx.printer.warn(w);
    }
}

/// Why `mcp call SERVER TOOL` cannot run the tool.
fn not_offered(ctx: &Ctx, st: &ServerState, tool: &str) -> Result<u8> {
    let name = &st.server.name;
    if !st.server.enabled {
        return Err(Error::usage(format!("MCP server {name} is disabled"))
            .with_hint(format!("set mcp.servers.{name}.enabled: true")));
    }
    if let Status::Failed(e) = &st.status {
        let r = ToolResult::err(e.clone(), true);
        ctx.printer.json_value(&agentloop_types::json::to_value(&r));
        return Ok(code::TOOL);
    }
    if st.filtered.iter().any(|t| t == tool) {
        return Err(Error::usage(format!(
            "tool {tool} of MCP server {name} is left out by mcp.servers.{name}.allowed_tools/denied_tools"
        )));
    }
    if let Some((_, why)) = st.dropped.iter().find(|(t, _)| t == tool) {
        return Err(Error::usage(format!("tool {tool} of MCP server {name} is left out: {why}")));
    }
    let tools: Vec<&str> = st.tools.iter().map(|(_, t)| t.as_str()).collect();
    Err(Error::usage(format!(
        "MCP server {name} has no tool `{tool}`; its tools: {}",
        if tools.is_empty() { "(none)".to_string() } else { tools.join(", ") }
    ))
    .with_hint("the list may be stale: `agentloop mcp list --refresh` lists the tools again"))
}

fn state_json(st: &ServerState, hub: &Hub) -> Value {
    let mut m = mcp::config::describe(&st.server);
    m.insert("status".into(), json!(st.status.as_str()));
    if let Status::Failed(e) = &st.status {
        m.insert("error".into(), json!(e));
    }
    if let Some(l) = &st.listing {
        m.insert("protocol_version".into(), json!(l.protocol_version));
        m.insert("server_info".into(), l.server_info.clone());
        m.insert("listed_at".into(), json!(l.listed_at));
        m.insert("startup_ms".into(), json!(l.startup_ms));
    }
    let specs = hub.specs();
    m.insert(
        "tools".into(),
        Value::Array(
            st.tools
                .iter()
                .map(|(n, t)| {
                    let spec = specs.iter().find(|s| &s.name == n);
                    json!({"name": n, "tool": t, "description": spec.map(|s| s.description.as_str()), "parameters": spec.map(|s| &s.parameters)})
                })
                .collect(),
        ),
    );
    if let Some(mcp::config::Transport::Http { url, .. }) = &st.server.transport {
        if let Some(who) = mcp::auth::FileStore::new(url).describe() {
            m.insert("signed_in".into(), who);
        }
    }
    m.insert("filtered".into(), json!(st.filtered));
    m.insert(
        "dropped".into(),
        Value::Array(st.dropped.iter().map(|(t, why)| json!({"tool": t, "reason": why})).collect()),
    );
    Value::Object(m)
}

fn report(ctx: &Ctx, hub: &Hub, check: bool) {
    let p = &ctx.printer;
    if p.json {
        let v: Vec<Value> = hub
            .states
            .iter()
            .map(|st| {
                let mut v = state_json(st, hub);
                if check {
                    v["ok"] = json!(!matches!(st.status, Status::Failed(_)));
                }
                v
            })
            .collect();
        p.json_value(&Value::Array(v));
        return;
    }
    for st in &hub.states {
        let s = &st.server;
        let transport = if s.is_http() { "http" } else { "stdio" };
        // check paints its verdict; the rest of the line is plain.
        let verdict = match st.status {
            _ if !check => None,
            Status::Failed(_) => Some(("FAIL", "31")),
            Status::Disabled => Some(("skip", "")),
            _ => Some(("ok  ", "32")),
        };
        let mut line = match verdict {
            Some(_) => format!(" {} ({transport})", s.name),
            None => format!("{} ({transport}) {}", s.name, st.status.as_str()),
        };
        if let Some(l) = &st.listing {
            let info = match (
                l.server_info.get("name").and_then(Value::as_str),
                l.server_info.get("version").and_then(Value::as_str),
            ) {
                (Some(n), Some(v)) => format!(" {n} {v}"),
                (Some(n), None) => format!(" {n}"),
                _ => String::new(),
            };
            line.push_str(&format!(
                ": {} tools, protocol {}{info}",
                st.tools.len(),
                if l.protocol_version.is_empty() { "?" } else { &l.protocol_version },
            ));
            if check {
                line.push_str(&format!(", started in {} ms", l.startup_ms));
            }
        }
        if let Status::Failed(e) = &st.status {
            line.push_str(&format!(": {e}"));
        }
        match verdict {
            Some(v) => p.outln_painted(&[v, (&line, "")]),
            None => p.outln(&line),
        }
        p.outln(&format!("    {}", s.display));
        // check reports; list shows the tools too.
        for (n, t) in st.tools.iter().filter(|_| !check) {
            let d = hub.specs().iter().find(|x| &x.name == n).map(|x| x.description.as_str()).unwrap_or("");
            let first: String = d.lines().next().unwrap_or("").chars().take(90).collect();
            let alias = if n.ends_with(t.as_str()) && n.len() == s.slug.len() + 2 + t.len() {
                String::new()
            } else {
                format!(" (tool {t})")
            };
            p.outln(&format!("    {n}{alias}  {first}"));
        }
        if !st.filtered.is_empty() {
            p.outln(&format!("    left out by allowed_tools/denied_tools: {}", st.filtered.join(", ")));
        }
        for (t, why) in &st.dropped {
            p.outln(&format!("    left out: {t}: {why}"));
        }
    }
}
