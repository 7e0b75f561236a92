//! `agentloop config show`: the effective configuration and where each value came from.

use crate::error::Result;
use crate::settings::Ctx;
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
            let r = &ctx.resolved;
            let resolved = resolved_model(ctx.config());
            if ctx.printer.json {
                ctx.printer
                    .json_value(&serde_json::json!({"config": r.value, "sources": r.sources, "resolved": resolved}));
                return Ok(0);
            }
            let mut rows = Vec::new();
            flatten(&r.value, "", &mut rows);
            for (k, v) in rows {
                let src = r
                    .sources
                    .iter()
                    .filter(|(sk, _)| k == **sk || k.starts_with(&format!("{sk}.")))
                    .map(|(_, s)| s.as_str())
                    .next_back()
                    .unwrap_or("default");
                ctx.printer.outln(&format!("{k} = {v}  # {src}"));
            }
            match (resolved["provider"].as_str(), resolved["model"].as_str()) {
                (Some(p), Some(m)) => {
                    ctx.printer
                        .outln(&format!("# provider: {p} ({})", resolved["provider_why"].as_str().unwrap_or("")));
                    ctx.printer.outln(&format!("# model: {m} ({})", resolved["model_why"].as_str().unwrap_or("")));
                }
                _ => ctx.printer.outln(&format!("# provider: none ({})", resolved["error"].as_str().unwrap_or(""))),
            }
        }
    }
    Ok(0)
}

/// What a run with this configuration would call, without calling it.
fn resolved_model(cfg: &crate::config::Config) -> Value {
    match crate::model::provider_and_why(cfg) {
        Ok((provider, provider_why)) => {
            let (model, model_why) = crate::model::model_and_why(cfg, &provider);
            serde_json::json!({"provider": provider, "provider_why": provider_why, "model": model, "model_why": model_why})
        }
        Err(e) => serde_json::json!({"error": e.message}),
    }
}
