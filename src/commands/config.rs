//! `agentloop config show`: the effective configuration and where each value came from.

use agentloop_config::config::Source;
use agentloop_engine::settings::Ctx;
use agentloop_types::error::Result;
use clap::Subcommand;
use serde_json::Value;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective configuration, one `key = value  # source` line per setting.
    ///
    /// Layers, later wins: defaults < $XDG_CONFIG_HOME/agentloop/config.yaml <
    /// <workspace>/agentloop.yaml < --config FILE < agents/NAME.yaml < AGENTLOOP_* < flags.
    /// Then the provider and model that `auto` resolves to, and why.
    /// With --json: {"config": {...}, "sources": {"key": "source"}, "resolved": {"provider",
    /// "provider_why", "model", "model_why"}} ("resolved" holds "error" when no provider is found).
    #[command(verbatim_doc_comment)]
    Show,
}

fn flatten(v: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(v, &key, out);
            }
        }
        _ => out.push((prefix.to_string(), v.to_string())),
    }
}

pub fn run(ctx: Ctx, cmd: ConfigCommand) -> Result<u8> {
    match cmd {
        ConfigCommand::Show => {
            // The one masking of every command that shows configuration (`agents show` too).
            let mut masked = ctx.resolved.clone();
            agentloop_config::mask::config(&mut masked.value);
            let r = &masked;
            let resolved = resolved_model(ctx.config());
            let named = allowed_tools_named(&ctx);
            if ctx.printer.json {
                // The published shape (docs/schema/config-show.json).
                let show = agentloop_engine::schema::ConfigShow {
                    config: r.value.as_object().cloned().unwrap_or_default(),
                    sources: r.sources.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
                    resolved,
                    refused: ctx
                        .refused
                        .iter()
                        .map(|x| agentloop_engine::schema::ConfigRefusal {
                            file: x.file.clone(),
                            key: x.key.clone(),
                            why: x.why.clone(),
                        })
                        .collect(),
                    allowed_tools_named: named.as_ref().and_then(|n| n.as_ref().ok()).map(|n| n.0.clone()),
                };
                ctx.printer.json_value(&agentloop_types::json::to_value(&show));
                return Ok(0);
            }
            let mut rows = Vec::new();
            flatten(&r.value, "", &mut rows);
            for (k, v) in rows {
                let src = r
                    .sources
                    .iter()
                    .filter(|(sk, _)| k == **sk || k.starts_with(&format!("{sk}.")))
                    .map(|(_, s)| s.to_string())
                    .next_back()
                    .unwrap_or_else(|| Source::Default.to_string());
                ctx.printer.outln(&format!("{k} = {v}  # {src}"));
            }
            for refusal in &ctx.refused {
                ctx.printer.outln(&format!(
                    "# refused: {} in {} (this folder is not trusted: {})",
                    refusal.key, refusal.file, refusal.why
                ));
            }
            match (&resolved.provider, &resolved.model) {
                (Some(p), Some(m)) => {
                    ctx.printer.outln(&format!("# provider: {p} ({})", resolved.provider_why.as_deref().unwrap_or("")));
                    ctx.printer.outln(&format!("# model: {m} ({})", resolved.model_why.as_deref().unwrap_or("")));
                }
                _ => ctx.printer.outln(&format!("# provider: none ({})", resolved.error.as_deref().unwrap_or(""))),
            }
            match named {
                Some(Ok((_, line))) => ctx.printer.outln(&format!("# {line}")),
                Some(Err(e)) => ctx.printer.outln(&format!("# allowed_tools: the tools cannot be listed: {e}")),
                None => {}
            }
        }
    }
    Ok(0)
}

/// What each `allowed_tools` entry allows (by entry, and as one line), from the tool registry as
/// `tools list` builds it (caches only: nothing starts, nothing is sent); None without a list.
type Named = (std::collections::BTreeMap<String, Vec<String>>, String);
fn allowed_tools_named(ctx: &Ctx) -> Option<std::result::Result<Named, String>> {
    let cfg = ctx.config();
    cfg.allowed_tools.as_ref()?;
    let logs = agentloop_tools::mcp::client::Logs::for_command(&ctx.ws.root);
    let registry = match agentloop_tools::tools::Registry::load_logging(
        cfg,
        &ctx.ws.root,
        agentloop_tools::tools::Reach::CachesOnly,
        logs,
    ) {
        Ok(r) => r,
        Err(e) => return Some(Err(e.detail())),
    };
    let by_entry = registry.allowed_by_entry(cfg)?.into_iter().collect();
    Some(Ok((by_entry, registry.allowed_summary(cfg)?)))
}

/// What a run with this configuration would call, without calling it.
fn resolved_model(cfg: &agentloop_config::config::Config) -> agentloop_engine::schema::ResolvedModel {
    match agentloop_model::model::provider_and_why(cfg) {
        Ok((provider, provider_why)) => {
            let (model, model_why) = agentloop_model::model::model_and_why(cfg, &provider);
            agentloop_engine::schema::ResolvedModel {
                provider: Some(provider.to_string()),
                provider_why: Some(provider_why),
                model: Some(model),
                model_why: Some(model_why),
                error: None,
            }
        }
        Err(e) => agentloop_engine::schema::ResolvedModel { error: Some(e.detail()), ..Default::default() },
    }
}
