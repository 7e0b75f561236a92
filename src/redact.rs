//! Secrets never reach a file agentloop writes. The secrets are the values of environment
//! variables named like keys (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, and the one
//! `llm.api_key_env` names) and keys read by `llm.api_key_cmd`; each is replaced, raw and in its
//! base64 forms (standard, URL-safe, with or without padding), by `[REDACTED]` in tool results
//! (before anything sees them), in every workspace commit (markdown, trace, state, result.json)
//! and in `--record` files.

use base64::Engine;
use std::sync::Mutex;

static EXTRA: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Adds a secret found at run time (a key printed by `llm.api_key_cmd`, a named variable).
pub fn register(secret: &str) {
    let s = secret.trim();
    if s.len() >= 8 {
        if let Ok(mut g) = EXTRA.lock() {
            if !g.iter().any(|x| x == s) {
                g.push(s.to_string());
            }
        }
    }
}

fn forms(secret: &str) -> Vec<String> {
    let b = secret.as_bytes();
    let mut out = vec![secret.to_string()];
    for e in [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        let enc = e.encode(b);
        if !out.contains(&enc) {
            out.push(enc);
        }
    }
    out
}

/// The environment's secrets in every form, read once: the environment of a running process
/// does not change, and scanning it and encoding each secret anew for every string redacted
/// cost more than the rest of a commit.
fn env_forms() -> &'static [String] {
    static FORMS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    FORMS.get_or_init(|| {
        let mut out: Vec<String> = Vec::new();
        for (k, v) in std::env::vars() {
            let k = k.to_uppercase();
            let v = v.trim();
            if v.len() >= 8 && ["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_APIKEY"].iter().any(|s| k.ends_with(s))
            {
                out.extend(forms(v).into_iter().filter(|f| !out.contains(f)).collect::<Vec<_>>());
            }
        }
        out
    })
}

/// The text with every secret (and its base64 forms) replaced.
pub fn redact(text: &str) -> String {
    let mut out = text.to_string();
    for f in env_forms() {
        if out.contains(f.as_str()) {
            out = out.replace(f.as_str(), "[REDACTED]");
        }
    }
    let extra: Vec<String> = EXTRA.lock().map(|g| g.clone()).unwrap_or_default();
    for s in extra {
        for f in forms(&s) {
            if out.contains(&f) {
                out = out.replace(&f, "[REDACTED]");
            }
        }
    }
    out
}

/// Redacts every string inside a JSON value.
pub fn redact_value(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            let r = redact(s);
            if r != *s {
                *s = r;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(redact_value),
        serde_json::Value::Object(o) => o.values_mut().for_each(redact_value),
        _ => {}
    }
}
