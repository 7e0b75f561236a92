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

/// Hides secrets wherever they came from (a file, the environment, a flag): values of keys named
/// like a secret (`api_token`, `*_key`, `*token`, `*secret*`, `*password*`; not `*_env`, which
/// name a variable), the progress webhook's address (it is the credential, as chat webhooks are),
/// every MCP header and environment value but those that only reference variables (`${TOKEN}`),
/// the password and query of any address (`https://user:pw@host/?key=...`), and in every command
/// (an argument list, or a command line in one string: `tools.external.*.command`) the value of
/// a secret-named option (`--api-key X`, `--token=X`) or variable (`GH_TOKEN=X fetch`).
fn mask(v: &mut Value, key: &str, parent: &str) {
    match v {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                mask(v, k, key);
            }
        }
        Value::Null => {}
        _ if matches!(parent, "headers" | "env") && !only_references(v) => *v = Value::String(MASK.into()),
        _ if secret_name(key) || key == "progress_url" => *v = Value::String(MASK.into()),
        Value::Array(items) => {
            let mut hide = false;
            for item in items.iter_mut() {
                match item {
                    Value::String(s) => *s = mask_word(s, &mut hide),
                    other => {
                        hide = false;
                        mask(other, key, parent)
                    }
                }
            }
        }
        Value::String(s) => *s = mask_command(s),
        _ => {}
    }
}

/// A command line with each word masked as an argument list's items are ([`mask_word`]); a
/// quoted word (`--token "a b"`) is one word. Text that is not a command goes through unchanged
/// but for the addresses in it.
fn mask_command(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let (mut hide, mut word, mut quote) = (false, String::new(), None);
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c.is_whitespace() => {
                if !word.is_empty() {
                    out.push_str(&mask_word(&std::mem::take(&mut word), &mut hide));
                }
                out.push(c);
                continue;
            }
            _ => {}
        }
        word.push(c);
    }
    if !word.is_empty() {
        out.push_str(&mask_word(&word, &mut hide));
    }
    out
}

/// One word of a command, masked: the value after a secret-named option (`--api-key X`; `hide`
/// set by the word before), the value in `--token=X` and `API_TOKEN=X`, the password and query
/// of an address. Sets `hide` when the word is a secret-named option whose value comes next.
/// One-letter options (`-p`) mean different things to different programs and are left alone.
fn mask_word(word: &str, hide: &mut bool) -> String {
    if std::mem::take(hide) && !word.starts_with('-') {
        return MASK.into();
    }
    let flag = word.strip_prefix('-').map(|f| f.trim_start_matches('-'));
    let body = flag.unwrap_or(word);
    let (name, value) = body.split_once('=').unwrap_or((body, ""));
    let name = name.trim_matches(['"', '\'']);
    let secret = name.len() > 1
        && (secret_name(&name.replace('-', "_")) || matches!(name.to_ascii_lowercase().as_str(), "passwd" | "pass"));
    if !secret {
        return mask_url(word);
    }
    match (flag.is_some(), body.contains('=')) {
        (true, false) => {
            *hide = true;
            word.to_string()
        }
        // `--token=X`, and `NAME=X` where NAME is a variable's name (not a path or address).
        (true, true) => format!("{}{MASK}", &word[..word.len() - value.len()]),
        (false, true) if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
            format!("{}{MASK}", &word[..word.len() - value.len()])
        }
        _ => mask_url(word),
    }
}

/// An address with its password and query hidden (`https://user:[hidden]@host/p?[hidden]`);
/// any other text as it is.
fn mask_url(s: &str) -> String {
    let Some((scheme, rest)) = s.split_once("://") else { return s.to_string() };
    if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) {
        return s.to_string();
    }
    let (authority, tail) = rest.find(['/', '?', '#']).map(|i| rest.split_at(i)).unwrap_or((rest, ""));
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:{MASK}@{host}"),
            None => format!("{MASK}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, _)) => format!("{path}?{MASK}"),
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
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
                // The published shape (docs/schema/config-show.json).
                let show = crate::schema::ConfigShow {
                    config: r.value.as_object().cloned().unwrap_or_default(),
                    sources: r.sources.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
                    resolved,
                    refused: ctx
                        .refused
                        .iter()
                        .map(|x| crate::schema::ConfigRefusal {
                            file: x.file.clone(),
                            key: x.key.clone(),
                            why: x.why.clone(),
                        })
                        .collect(),
                };
                ctx.printer.json_value(&crate::json::to_value(&show));
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
        }
    }
    Ok(0)
}

/// What a run with this configuration would call, without calling it.
fn resolved_model(cfg: &crate::config::Config) -> crate::schema::ResolvedModel {
    match crate::model::provider_and_why(cfg) {
        Ok((provider, provider_why)) => {
            let (model, model_why) = crate::model::model_and_why(cfg, &provider);
            crate::schema::ResolvedModel {
                provider: Some(provider.to_string()),
                provider_why: Some(provider_why),
                model: Some(model),
                model_why: Some(model_why),
                error: None,
            }
        }
        Err(e) => crate::schema::ResolvedModel { error: Some(e.message), ..Default::default() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn addresses_and_arguments_keep_what_is_not_secret() {
        assert_eq!(mask_url("https://u:pw@h.example/v1?key=k#f"), "https://u:[hidden]@h.example/v1?[hidden]");
        assert_eq!(mask_url("https://tok@h.example"), "https://[hidden]@h.example");
        assert_eq!(mask_url("http://localhost:8080/x"), "http://localhost:8080/x");
        assert_eq!(mask_url("not a url"), "not a url");
        let mut v =
            json!({"args": ["--api-key", "k1", "--token=k2", "-v", "file", "--password", "--x"], "command": "srv"});
        mask(&mut v, "", "");
        assert_eq!(v["args"], json!(["--api-key", "[hidden]", "--token=[hidden]", "-v", "file", "--password", "--x"]));
        // One rule for an argument list and a command line.
        assert_eq!(
            mask_command("fetch --token t1  --auth-token=t2 -p 22 --password \"a b\" API_KEY=k3 ./key=v https://u:pw@h/x"),
            "fetch --token [hidden]  --auth-token=[hidden] -p 22 --password [hidden] API_KEY=[hidden] ./key=v https://u:[hidden]@h/x"
        );
        assert_eq!(mask_command("a plain sentence, with words"), "a plain sentence, with words");
    }
}
