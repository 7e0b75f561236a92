//! The price table: USD per million input / output / cache-write / cache-read tokens.
//!
//! Shipped entries cover current Anthropic and OpenAI models; `prices:` in config adds or
//! overrides entries. A model id matches an entry exactly or by the longest entry that is a
//! prefix of it (so dated ids such as `claude-sonnet-4-5-20250929` match `claude-sonnet-4-5`).
//! Unknown models get no price: their calls record tokens with `cost_usd: null`. Neither does the
//! scripted model: a replay spends nothing, so its calls have no cost whatever `prices:` says.
//! A model served on the user's own machine — Ollama, or an OpenAI-compatible server on a
//! loopback address — costs nothing unless `prices:` names it: [`cost_in`] counts it at $0, so
//! a `max_cost_usd` cap holds with it as a user expects.

use agentloop_config::config::{Config, Price, Provider};
use agentloop_types::trace::Usage;
use std::collections::BTreeMap;

const TABLE: &[(&str, f64, f64, f64, f64)] = &[
    ("claude-opus-4-5", 5.0, 25.0, 6.25, 0.50),
    ("claude-opus-4-1", 15.0, 75.0, 18.75, 1.50),
    ("claude-opus-4", 15.0, 75.0, 18.75, 1.50),
    ("claude-sonnet-4-5", 3.0, 15.0, 3.75, 0.30),
    ("claude-sonnet-4", 3.0, 15.0, 3.75, 0.30),
    ("claude-3-7-sonnet", 3.0, 15.0, 3.75, 0.30),
    ("claude-haiku-4-5", 1.0, 5.0, 1.25, 0.10),
    ("claude-3-5-haiku", 0.80, 4.0, 1.0, 0.08),
    ("gpt-5-nano", 0.05, 0.40, 0.0, 0.005),
    ("gpt-5-mini", 0.25, 2.0, 0.0, 0.025),
    ("gpt-5", 1.25, 10.0, 0.0, 0.125),
    ("gpt-4.1-nano", 0.10, 0.40, 0.0, 0.025),
    ("gpt-4.1-mini", 0.40, 1.60, 0.0, 0.10),
    ("gpt-4.1", 2.0, 8.0, 0.0, 0.50),
    ("gpt-4o-mini", 0.15, 0.60, 0.0, 0.075),
    ("gpt-4o", 2.50, 10.0, 0.0, 1.25),
    ("o4-mini", 1.10, 4.40, 0.0, 0.275),
    ("o3", 2.0, 8.0, 0.0, 0.50),
];

pub fn builtin() -> BTreeMap<String, Price> {
    TABLE
        .iter()
        .map(|(m, i, o, w, r)| (m.to_string(), Price { input: *i, output: *o, cache_write: *w, cache_read: *r }))
        .collect()
}

/// The price of a model: config entries first, then the shipped table.
pub fn price_for<'a>(
    model: &str,
    extra: &'a BTreeMap<String, Price>,
    table: &'a BTreeMap<String, Price>,
) -> Option<&'a Price> {
    for t in [extra, table] {
        if let Some(p) = t.get(model) {
            return Some(p);
        }
        let best = t.iter().filter(|(k, _)| model.starts_with(k.as_str())).max_by_key(|(k, _)| k.len());
        if let Some((_, p)) = best {
            return Some(p);
        }
    }
    None
}

/// Cost in USD of one call, or None when the model has no price.
pub fn cost(model: &str, usage: &Usage, extra: &BTreeMap<String, Price>) -> Option<f64> {
    if agentloop_types::trace::is_scripted(model) {
        return None;
    }
    let table = builtin();
    let p = price_for(model, extra, &table)?;
    let c = (usage.input_tokens as f64 * p.input
        + usage.output_tokens as f64 * p.output
        + usage.cache_write_tokens as f64 * p.cache_write
        + usage.cache_read_tokens as f64 * p.cache_read)
        / 1_000_000.0;
    Some((c * 1e8).round() / 1e8)
}

/// Whether the configured provider runs on the user's own machine: Ollama (wherever
/// `OLLAMA_HOST` points, it is a server one runs oneself), or an OpenAI-compatible `base_url`
/// whose host is `localhost` or a loopback address (llama.cpp, vLLM, LM Studio).
pub fn is_local(cfg: &Config) -> bool {
    match super::resolve_provider(cfg) {
        Ok(Provider::Ollama) => true,
        Ok(Provider::Openai) => cfg.llm.base_url.as_deref().is_some_and(super::http::loopback),
        _ => false,
    }
}

/// Cost in USD of one call under a configuration: the model's price (`prices:` first, then the
/// shipped table); a model with no price served on the user's own machine ([`is_local`]) costs
/// $0; otherwise None. The scripted model is never priced.
pub fn cost_in(cfg: &Config, model: &str, usage: &Usage) -> Option<f64> {
    if agentloop_types::trace::is_scripted(model) {
        return None;
    }
    cost(model, usage, &cfg.prices).or_else(|| is_local(cfg).then_some(0.0))
}

/// The known model a name is most likely a mistyping of: a hosted provider's model agentloop has
/// no price for whose letters are one or two edits from a known model's, with the same digits
/// (so a new version, `claude-opus-4-6`, is never taken for a typo of `claude-opus-4-5`).
/// A date suffix (`-20250929`) or `-latest` is ignored.
pub fn likely_typo(model: &str, extra: &BTreeMap<String, Price>) -> Option<String> {
    let table = builtin();
    // The user's own prices name it (or its prefix): known.
    if price_for(model, extra, &BTreeMap::new()).is_some() {
        return None;
    }
    let base = model.strip_suffix("-latest").unwrap_or(model);
    let base = match base.rsplit_once('-') {
        Some((head, date)) if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => base,
    };
    if table.contains_key(base) {
        return None;
    }
    let split = |s: &str| -> (String, String) {
        (s.chars().filter(|c| !c.is_ascii_digit()).collect(), s.chars().filter(char::is_ascii_digit).collect())
    };
    let (letters, digits) = split(base);
    table
        .keys()
        .chain(extra.keys())
        .filter_map(|k| {
            let (kl, kd) = split(k);
            let d = strsim::levenshtein(&letters, &kl);
            (kd == digits && (1..=2).contains(&d)).then(|| (d, k.clone()))
        })
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dated_ids_match_by_prefix_and_unknown_is_none() {
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            cache_write_tokens: 0,
            cache_read_tokens: 1_000_000,
        };
        assert_eq!(cost("claude-sonnet-4-5-20250929", &u, &BTreeMap::new()), Some(18.3));
        assert_eq!(cost("gpt-4o-mini-2024-07-18", &u, &BTreeMap::new()), Some(0.825));
        assert_eq!(cost("qwen2.5:0.5b", &u, &BTreeMap::new()), None);
        let mut extra = BTreeMap::new();
        extra.insert("qwen2.5".to_string(), Price::default());
        assert_eq!(cost("qwen2.5:0.5b", &u, &extra), Some(0.0));
        extra.insert("scripted".to_string(), Price::default());
        assert_eq!(cost("scripted", &u, &extra), None, "a replay is never priced");
    }
}
#[cfg(test)]
mod typo_tests {
    use super::*;

    #[test]
    fn a_mistyped_name_is_told_from_a_new_one() {
        let none = BTreeMap::new();
        assert_eq!(likely_typo("claude-sonet-4-5", &none).as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(likely_typo("claude-sonet-4-5-20250929", &none).as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(likely_typo("gpt-4o-mni", &none).as_deref(), Some("gpt-4o-mini"));
        for fine in
            ["claude-sonnet-4-5-20250929", "claude-opus-4-6", "gpt-4.2", "my-local-model", "gpt-5", "gpt-4o-2024-08-06"]
        {
            assert_eq!(likely_typo(fine, &none), None, "{fine}");
        }
    }
}
