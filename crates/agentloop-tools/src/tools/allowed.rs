//! `allowed_tools` (a Ductile plugin block calls it `allowed_plugins`): which tools each entry
//! names. An entry is a tool's own name (`web_fetch`, an external tool such as `jina-reader`, a
//! gateway tool `fetch__handle`); a name no tool has allows each `<name>__<command>` tool, so a
//! Ductile plugin's name allows all of its commands (and an MCP server's name, by its registry
//! prefix, all of its tools). An entry that names no tool allows none and is said once, as a
//! warning, so a typo or a plugin that is not listed does not quietly leave a run without tools.

use super::Registry;
use crate::ductile::{NOT_TOOLS, SEP};
use agentloop_config::config::Config;
use agentloop_types::tool_spec::{canonical, is_finish, ToolSpec};

impl Registry {
    /// The registered tools the `allowed_tools` entry `entry` names: the tool of that name (or
    /// its alias); for a name no tool has, every `<entry>__<command>` tool.
    pub fn named_by(&self, entry: &str) -> Vec<&ToolSpec> {
        let entry = canonical(entry.trim());
        if let Some(t) = self.specs.iter().find(|s| s.name == entry) {
            return vec![t];
        }
        if entry.is_empty() || entry.contains(SEP) {
            return vec![];
        }
        let prefix = format!("{entry}{SEP}");
        self.specs.iter().filter(|s| s.name.starts_with(&prefix)).collect()
    }

    /// Whether `entry` allows the tool `name` (a name given exactly allows it even when no tool
    /// has it yet, as before plugin names were read).
    fn entry_allows(&self, entry: &str, name: &str) -> bool {
        canonical(entry.trim()) == name || self.named_by(entry).iter().any(|t| t.name == name)
    }

    /// Whether Act may run `name` under `cfg`: `finish` always; else every tool without an
    /// `allowed_tools` list, or one an entry names; never a disabled one.
    pub fn is_allowed(&self, cfg: &Config, name: &str) -> bool {
        let name = canonical(name);
        is_finish(name)
            || (cfg.allowed_tools.as_ref().is_none_or(|list| list.iter().any(|e| self.entry_allows(e, name)))
                && !cfg.tools.is_disabled(name))
    }

    /// The first `allowed_tools` entry that names `name` (None without a list, or when none does).
    pub fn allowed_by<'c>(&self, cfg: &'c Config, name: &str) -> Option<&'c str> {
        let name = canonical(name);
        cfg.allowed_tools.as_ref()?.iter().find(|e| self.entry_allows(e, name)).map(String::as_str)
    }

    /// Each `allowed_tools` entry with the tools it names (None without a list).
    pub fn allowed_by_entry(&self, cfg: &Config) -> Option<Vec<(String, Vec<String>)>> {
        let list = cfg.allowed_tools.as_ref()?;
        Some(list.iter().map(|e| (e.clone(), self.named_by(e).iter().map(|t| t.name.clone()).collect())).collect())
    }

    /// One line saying what each `allowed_tools` entry allows, e.g. ``allowed_tools: `fetch` →
    /// fetch__handle; `web_fecth` → no tool`` (None without a list).
    pub fn allowed_summary(&self, cfg: &Config) -> Option<String> {
        let parts: Vec<String> = self
            .allowed_by_entry(cfg)?
            .into_iter()
            .map(|(e, tools)| {
                let to = if tools.is_empty() { "no tool".to_string() } else { tools.join(", ") };
                format!("`{e}` → {to}")
            })
            .collect();
        Some(format!(
            "allowed_tools: {}",
            if parts.is_empty() { "empty: no tool but finish".into() } else { parts.join("; ") }
        ))
    }

    /// A warning for each `allowed_tools` entry that names no tool (each said once per process).
    pub(super) fn warn_unmatched(&self, cfg: &Config) {
        let Some(list) = &cfg.allowed_tools else { return };
        let unlisted = !self.ductile.warnings.is_empty() || !self.mcp.warnings.is_empty();
        let no_gateway = cfg.ductile.api_url.is_none() && cfg.ductile.manifests.is_none();
        for e in list.iter().filter(|e| self.named_by(e).is_empty()) {
            let mut s = unmatched(e, unlisted);
            if no_gateway && !e.contains(SEP) {
                s.push_str(" (no Ductile gateway is configured to list plugins from: ductile.api_url)");
            }
            warn_once(&s);
        }
    }
}

/// What to say of an `allowed_tools` entry that names no tool.
fn unmatched(entry: &str, unlisted: bool) -> String {
    let mut s = format!(
        "allowed_tools (allowed_plugins): `{entry}` names no tool, so it allows none; name a tool as `agentloop tools list --all` lists it, a Ductile plugin (all its commands) or one `<plugin>__<command>`"
    );
    if entry.split_once(SEP).is_some_and(|(_, c)| NOT_TOOLS.contains(&c)) {
        s.push_str(" (Ductile's poll, health and init are never tools)");
    }
    if unlisted {
        s.push_str(" (some MCP or Ductile tools could not be listed: see the warning above)");
    }
    s
}

/// A warning on stderr, unless this process said it already (the registry is built more than
/// once in some commands).
fn warn_once(s: &str) {
    static SAID: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let first = SAID.lock().unwrap_or_else(|p| p.into_inner()).insert(s.to_string());
    if first {
        agentloop_io::output::warning(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_names_the_entry_and_what_to_write() {
        let s = unmatched("file_handler__poll", true);
        assert!(s.contains("`file_handler__poll` names no tool"), "{s}");
        assert!(s.contains("never tools") && s.contains("could not be listed"), "{s}");
        assert!(!unmatched("web_fecth", false).contains("never tools"));
    }
}
