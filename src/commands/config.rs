//! `agentloop config show`: the effective configuration and where each value came from.

use crate::config::Source;
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

/// What `config show` prints instead of a secret.
const MASK: &str = "[hidden]";

/// Hides secrets wherever they came from: values of keys named like a secret (`api_token`,
/// `*_key`, `*token`, `*secret*`, `*password*`; not `*_env`, which name a variable) and every MCP
/// header and environment value but those that only reference variables (`${TOKEN}`).
fn mask(v: &mut Value, key: &str, parent: &str) {
    match v {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                mask(v, k, key);
            }
        }
        Value::Null => {}
        _ if matches!(parent, "headers" | "env") && !only_references(v) => *v = Value::String(MASK.into()),
        _ if secret_name(key) => *v = Value::String(MASK.into()),
        _ => {}
    }
}

fn secret_name(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    if k.ends_with("_env") || k.ends_with("_cmd") {
        return false;
    }
    k.ends_with("token") || k.ends_with("_key") || k == "key" || k.contains("secret") || k.contains("password")
}

fn only_references(v: &Value) -> bool {
    let Some(s) = v.as_str() else { return false };
    let mut rest = s.trim();
    if rest.is_empty() {
        return true;
    }
    // `${NAME}` pieces separated by nothing but an auth scheme word (`Bearer ${TOKEN}`).
    if let Some((scheme, tail)) = rest.split_once(' ') {
        if scheme.chars().all(|c| c.is_ascii_alphabetic()) {
            rest = tail.trim();
        }
    }
    while let Some(r) = rest.strip_prefix("${") {
        match r.split_once('}') {
            Some((name, tail)) if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                rest = tail
            }
            _ => return false,
        }
    }
    rest.is_empty()
}

pub fn run(ctx: Ctx, cmd: ConfigCommand) -> Result<u8> {
    match cmd {
        ConfigCommand::Show => {
            let mut masked = ctx.resolved.clone();
            mask(&mut masked.value, "", "");
            let r = &masked;
            let resolved = resolved_model(ctx.config());
            if ctx.printer.json {
                ctx.printer
                    .json_value(&serde_json::json!({"config": r.value, "sources": r.sources, "resolved": resolved, "refused": ctx.refused}));
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
