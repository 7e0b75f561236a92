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
    /// With --json: {"config": {...}, "sources": {"key": "source"}}.
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
            if ctx.printer.json {
                ctx.printer.json_value(&serde_json::json!({"config": r.value, "sources": r.sources}));
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
        }
    }
    Ok(0)
}
