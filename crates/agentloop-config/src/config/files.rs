//! Reading configuration files: YAML with a size and depth bound and no repeated key, and where
//! the user's and the workspace's files are found.

use super::*;
use agentloop_types::error::{Error, Result};
use agentloop_types::error::{Kind, ResultExt};
use camino::{Utf8Path, Utf8PathBuf};
use serde_json::{Map, Value};

/// Parses a YAML or JSON config file into a layer (JSON is YAML, but `.json` files get JSON errors).
/// Most bytes of a YAML document agentloop parses (config files, frontmatter, scripts).
pub const MAX_YAML_BYTES: usize = 4 * 1024 * 1024;
/// Deepest nesting of a YAML document: flow collections (`[`, `{`) or indentation columns.
pub const MAX_YAML_DEPTH: usize = 64;

/// Parses YAML after a linear pre-check of its size and nesting, so a hostile document (deep
/// nesting, huge size) is refused in time proportional to its length instead of exhausting
/// the parser. The error says which limit was passed.
pub fn parse_yaml<T: serde::de::DeserializeOwned>(text: &str) -> std::result::Result<T, YamlError> {
    if text.len() > MAX_YAML_BYTES {
        return Err(YamlError::TooLarge);
    }
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote = None::<char>;
    for line in text.lines() {
        let indent = line.len() - line.trim_start_matches([' ', '-']).len();
        if quote.is_none() && indent / 2 > MAX_YAML_DEPTH * 2 {
            return Err(YamlError::TooIndented);
        }
        let mut comment = false;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '#') => comment = true,
                _ if comment => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '[' | '{') => {
                    depth += 1;
                    max = max.max(depth);
                }
                (None, ']' | '}') => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        // Quotes rarely span lines in these documents; an apostrophe in plain text must not
        // hide the rest of the file from the count.
        quote = None;
    }
    if max > MAX_YAML_DEPTH {
        return Err(YamlError::TooDeep);
    }
    // Maps built into a JSON value keep the last of two equal keys; a second `tools:` block
    // would silently drop the first, so a repeated key is refused with its line first.
    let repeated = std::cell::RefCell::new(None);
    let check = NoDuplicateKeys(&repeated);
    if let Err(err) = serde::de::DeserializeSeed::deserialize(check, serde_yaml_ng::Deserializer::from_str(text)) {
        // The check knows the key but not where the second one stands: find its line, which
        // replaces the parser's own position (where it had got to).
        let found = repeated.into_inner().and_then(|key: String| Some((duplicate_key_line(text, &key)?, key)));
        return Err(match found {
            Some((line, key)) => YamlError::DuplicateKey { line, message: twice(&key), source: err },
            None => YamlError::Parse(err),
        });
    }
    serde_yaml_ng::from_str(text).map_err(YamlError::Parse)
}

/// Why [`parse_yaml`] refused a document: a limit passed, or what the parser found.
#[derive(Debug)]
pub enum YamlError {
    /// Larger than [`MAX_YAML_BYTES`].
    TooLarge,
    /// Indented deeper than [`MAX_YAML_DEPTH`] allows.
    TooIndented,
    /// Flow collections nested deeper than [`MAX_YAML_DEPTH`].
    TooDeep,
    /// A key given twice in one mapping, found on `line` (from 1).
    DuplicateKey {
        line: usize,
        message: String,
        source: serde_yaml_ng::Error,
    },
    Parse(serde_yaml_ng::Error),
}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            YamlError::TooLarge => write!(f, "the document is larger than {MAX_YAML_BYTES} bytes"),
            YamlError::TooIndented => {
                write!(f, "the document is indented more than {} columns deep", MAX_YAML_DEPTH * 4)
            }
            YamlError::TooDeep => write!(f, "the document nests more than {MAX_YAML_DEPTH} levels deep"),
            YamlError::DuplicateKey { line, message, .. } => write!(f, "line {line}: {message}"),
            YamlError::Parse(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for YamlError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            YamlError::DuplicateKey { source: e, .. } | YamlError::Parse(e) => Some(e),
            _ => None,
        }
    }
}

/// The line (from 1) where block mapping key `key` is given a second time in one mapping.
/// Block scalars (`|`, `>`) are skipped, so text that looks like keys is not taken for them.
pub(super) fn duplicate_key_line(text: &str, key: &str) -> Option<usize> {
    // The block mappings open at each indentation, with the keys each has seen.
    let mut open: Vec<(usize, std::collections::HashSet<String>)> = Vec::new();
    let mut scalar_under: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let mut indent = line.len() - trimmed.len();
        if let Some(i) = scalar_under {
            if trimmed.is_empty() || indent > i {
                continue;
            }
            scalar_under = None;
        }
        if trimmed == "---" {
            open.clear();
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut rest = trimmed;
        let mut item = false;
        while let Some(r) = rest.strip_prefix("- ") {
            indent += 2 + (r.len() - r.trim_start().len());
            rest = r.trim_start();
            item = true;
        }
        // A sequence item starts a new mapping at its own indentation.
        while open.last().is_some_and(|(i, _)| *i > indent || (item && *i == indent)) {
            open.pop();
        }
        let Some((k, value)) = block_key(rest) else { continue };
        if value.starts_with(['|', '>']) {
            scalar_under = Some(indent);
        }
        match open.last_mut() {
            Some((i, keys)) if *i == indent => {
                if !keys.insert(k.clone()) && k == key {
                    return Some(n + 1);
                }
            }
            _ => open.push((indent, std::collections::HashSet::from([k]))),
        }
    }
    None
}

/// `key: value` (or `key:`) at the start of `s`: the key (unquoted) and the value's text.
fn block_key(s: &str) -> Option<(String, &str)> {
    let (key, after) = match s.chars().next()? {
        q @ ('"' | '\'') => {
            let end = s[1..].find(q)? + 1;
            (s[1..end].to_string(), &s[end + 1..])
        }
        '{' | '[' | '#' | '|' | '>' | '&' | '*' | '!' => return None,
        _ => {
            let at = s.find(": ").or_else(|| s.strip_suffix(':').map(str::len))?;
            (s[..at].trim_end().to_string(), &s[at..])
        }
    };
    let value = after.strip_prefix(':')?;
    (value.is_empty() || value.starts_with(' ')).then(|| (key, value.trim()))
}

/// What a repeated key is told as.
fn twice(name: &str) -> String {
    format!("the key `{name}` appears twice in one mapping (the second would replace the first); merge the two")
}

/// A YAML document read only to find a mapping that repeats a key (at any depth); the first
/// repeated key is kept in the cell, so the caller never reads it back out of the error's text.
#[derive(Clone, Copy)]
struct NoDuplicateKeys<'a>(&'a std::cell::RefCell<Option<String>>);

impl<'de> serde::de::DeserializeSeed<'de> for NoDuplicateKeys<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for NoDuplicateKeys<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_i128<E>(self, _: i128) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_u128<E>(self, _: u128) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_bytes<E>(self, _: &[u8]) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        serde::de::DeserializeSeed::deserialize(self, d)
    }
    fn visit_newtype_struct<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        serde::de::DeserializeSeed::deserialize(self, d)
    }
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, a: A) -> std::result::Result<(), A::Error> {
        // A tagged value (`!tag x`): its content is checked like any other.
        use serde::de::VariantAccess;
        let (_, v) = a.variant::<serde::de::IgnoredAny>()?;
        v.newtype_variant_seed(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        while a.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = a.next_key::<serde_yaml_ng::Value>()? {
            let name = match &key {
                serde_yaml_ng::Value::String(s) => s.clone(),
                other => serde_yaml_ng::to_string(other).unwrap_or_default().trim().to_string(),
            };
            if !seen.insert(name.clone()) {
                let message = twice(&name);
                *self.0.borrow_mut() = Some(name);
                return Err(serde::de::Error::custom(message));
            }
            a.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// `source` says which kind of file it is (`Source::Workspace`, ...): the layer's source is
/// `source(path)`.
pub fn load_file(path: &Utf8Path, source: fn(Utf8PathBuf) -> Source) -> Result<Option<Layer>> {
    let Some(text) = agentloop_io::fs::read_optional(path)? else {
        return Ok(None);
    };
    let value: Value = if path.extension() == Some("json") {
        serde_json::from_str(&text).context_as(Kind::Config, format!("invalid JSON in {path}"))?
    } else if text.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        parse_yaml(&text).context_as(Kind::Config, format!("invalid YAML in {path}"))?
    };
    let value = match value {
        Value::Null => Value::Object(Map::new()),
        v @ Value::Object(_) => v,
        _ => {
            return Err(Error::config(format!(
                "invalid configuration in {path}: the top level must be a mapping of keys"
            )))
        }
    };
    let source = source(path.to_path_buf());
    // The framework seed's agent file is a profile too, read field by field.
    let value = if matches!(source, Source::AgentProfile(_)) && crate::seed_agent::is_seed_form(&value) {
        crate::seed_agent::translate(value, path)?
    } else if !matches!(source, Source::AgentProfile(_)) && is_seed_global(&value) {
        // And its global config file is a config file, read section by section.
        translate_seed_global(value, path.as_str())?
    } else {
        value
    };
    // Other names are taken as their keys from the start, so every check sees the real keys.
    seed_names(&Layer { source, value }).map(Some)
}

/// Finds `<dir>/<stem>.yaml`, `.yml` or `.json`.
pub fn find_in(dir: &Utf8Path, stem: &str) -> Option<Utf8PathBuf> {
    ["yaml", "yml", "json"].iter().map(|ext| dir.join(format!("{stem}.{ext}"))).find(|p| p.is_file())
}

/// An XDG base folder: `$VAR` when set, else `$HOME/<fallback>`.
pub fn xdg_dir(var: &str, fallback: &str) -> Option<Utf8PathBuf> {
    std::env::var(var)
        .ok()
        .filter(|s| !s.is_empty())
        .map(Utf8PathBuf::from)
        .or_else(|| std::env::var("HOME").ok().map(|h| Utf8PathBuf::from(h).join(fallback)))
}

pub fn user_config_dir() -> Option<Utf8PathBuf> {
    Some(xdg_dir("XDG_CONFIG_HOME", ".config")?.join("agentloop"))
}
