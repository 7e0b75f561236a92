//! Deny lists and per-tool settings held to the global policy: `tools.disabled`,
//! `skills.disabled`, and `tools.<tool>:` with `enabled`, `timeout_seconds`, `allowed_paths`
//! (the file tools) and `max_length` (web_fetch). Their types and the accessors the tools use
//! are in `config` (`FileToolSettings`, `ToolsConfig::timeout_of`, ...); this module checks them.
//!
//! Invariant: each of these only narrows the global policy. A per-tool value wider than the
//! global one (a timeout above `tools.timeout`, a folder outside the ones the tool may use) is
//! refused when the configuration resolves, naming the key — never clamped, so what a file says
//! is what runs. `enabled: true` turns nothing on (shell and memory have their own switches).
//! Untrusted configuration is held to the same rule by [`narrows`] (called from
//! [`crate::policy`]), which also keeps its paths inside the workspace.

use agentloop_config::config::{Config, PER_TOOL};
use agentloop_types::error::{Error, Result};
use camino::{Utf8Path, Utf8PathBuf};
use serde_json::Value;

/// The file tools that read (their `allowed_paths` lie inside what reads may see).
const READERS: &[&str] = &["file_read", "list_dir", "grep"];

fn normalize(root: &Utf8Path, p: &Utf8Path) -> Utf8PathBuf {
    agentloop_io::capfs::normalize(&agentloop_io::capfs::absolute(&root.join(p)))
}

/// Checks the resolved configuration: every per-tool value within the global policy. `root`
/// is the workspace (relative folders are taken from it).
pub fn check(cfg: &Config, root: &Utf8Path) -> Result<()> {
    let t = &cfg.tools;
    let refuse = |key: String, why: String| {
        Error::config(format!(
            "invalid configuration at key `{key}`: {why}; a per-tool setting may only narrow the global policy"
        ))
        .with_hint(format!("narrow `{key}` or remove it (`agentloop config show` prints where each key was set)"))
    };
    if t.disabled.iter().any(|d| d == "finish") {
        return Err(refuse("tools.disabled".into(), "`finish` cannot be disabled: it is how a run ends".into()));
    }
    for name in PER_TOOL {
        if let Some(s) = t.timeout_seconds_of(name) {
            let cap = t.timeout.0.as_secs();
            if s == 0 || s > cap {
                return Err(refuse(
                    format!("tools.{name}.timeout_seconds"),
                    format!("{s} is not between 1 and tools.timeout ({cap}s)"),
                ));
            }
        }
    }
    if t.web_fetch.max_length == Some(0) {
        return Err(refuse("tools.web_fetch.max_length".into(), "0 keeps nothing of a page".into()));
    }
    let ws = agentloop_io::capfs::absolute(root);
    let ws = agentloop_io::capfs::normalize(&ws);
    let read_set: Vec<Utf8PathBuf> = std::iter::once(ws.clone())
        .chain(t.read_paths.iter().chain(&t.write_paths).map(|p| normalize(root, p)))
        .collect();
    let write_set: Vec<Utf8PathBuf> = if t.write_paths.is_empty() {
        vec![ws.clone()]
    } else {
        t.write_paths.iter().map(|p| normalize(root, p)).collect()
    };
    for name in ["file_read", "file_write", "list_dir", "grep"] {
        let Some(paths) = t.allowed_paths_of(name) else { continue };
        let key = format!("tools.{name}.allowed_paths");
        let (set, what) = if READERS.contains(&name) {
            (&read_set, "the workspace, tools.read_paths and tools.write_paths")
        } else {
            (&write_set, "tools.write_paths (or the workspace when that is empty)")
        };
        for p in paths {
            let abs = normalize(root, p);
            if !set.iter().any(|s| abs.starts_with(s)) {
                return Err(refuse(key, format!("`{p}` is outside {what}")));
            }
            if name == "file_write" {
                if let Some(why) = own_folder(&ws, &abs, cfg) {
                    return Err(refuse(key, format!("`{p}` {why}")));
                }
            }
        }
    }
    Ok(())
}

/// Why a folder inside the workspace may not be a write folder: agentloop's own.
fn own_folder(ws: &Utf8Path, abs: &Utf8Path, cfg: &Config) -> Option<String> {
    let rel = abs.strip_prefix(ws).ok()?;
    let first = rel.components().next()?.as_str().to_string();
    use agentloop_tools::tools::sandbox::{CONFIG_DIRS, CONFIG_FILES, PAPER_TRAIL};
    let own = PAPER_TRAIL.iter().chain(CONFIG_FILES).chain(CONFIG_DIRS).any(|n| *n == first);
    if own || first == cfg.handle.runs_dir || first.starts_with(".agentloop") {
        return Some(format!("is agentloop's own (`{first}`), which no tool may write"));
    }
    // A repository's `.git` at any depth (its hooks run programs), as the write sandbox says.
    rel.components()
        .any(|c| c.as_str() == ".git")
        .then(|| format!("is inside a `.git` folder (`{rel}`), which no tool may write"))
}

/// Why a value does not only narrow the trusted one it would override, phrased to follow "may
/// not set `key`: ".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widens(pub String);

impl From<&str> for Widens {
    fn from(why: &str) -> Self {
        Widens(why.to_string())
    }
}

impl std::fmt::Display for Widens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Widens {}

/// [`crate::policy::narrows`] for the keys of this module: None for any other key. `base` is
/// the trusted configuration; `inside` checks a path stays in the workspace.
pub fn narrows(
    key: &str,
    v: &Value,
    base: &Config,
    inside: &dyn Fn(&Value) -> std::result::Result<(), Widens>,
) -> Option<std::result::Result<(), Widens>> {
    if key == "tools.disabled" || key == "skills.disabled" {
        // A list replaces the one below it, so it must keep every trusted denial.
        let have = if key == "tools.disabled" { &base.tools.disabled } else { &base.skills.disabled };
        let Some(want) = v.as_array().filter(|a| a.iter().all(Value::is_string)) else {
            return Some(Err(Widens("must be a list of names".into())));
        };
        return Some(match have.iter().find(|d| !want.iter().any(|w| w == d.as_str())) {
            Some(d) => Err(Widens(format!("it drops the trusted denial of `{d}`"))),
            None => Ok(()),
        });
    }
    let (tool, field) = key.strip_prefix("tools.")?.split_once('.')?;
    if !PER_TOOL.contains(&tool) {
        return None;
    }
    Some(match field {
        // `false` takes a tool away; `true` turns nothing on, but may not undo a trusted `false`.
        "enabled" if v == &Value::Bool(true) && base.tools.enabled_of(tool) == Some(false) => {
            Err(Widens(format!("the trusted configuration disables {tool}")))
        }
        "enabled" if v.is_boolean() => Ok(()),
        "allowed_paths" => match v.as_array() {
            Some(a) => a.iter().try_for_each(|p| {
                inside(p)?;
                let Some(have) = base.tools.allowed_paths_of(tool) else { return Ok(()) };
                let want = Utf8Path::new(p.as_str().unwrap_or_default());
                let fits = have.iter().any(|h| {
                    agentloop_io::capfs::normalize(&Utf8Path::new("/ws").join(want))
                        .starts_with(agentloop_io::capfs::normalize(&Utf8Path::new("/ws").join(h)))
                });
                if fits {
                    Ok(())
                } else {
                    Err(Widens(format!("`{want}` is not inside the trusted tools.{tool}.allowed_paths")))
                }
            }),
            None => Err(Widens("must be a list of folders".into())),
        },
        "timeout_seconds" => {
            let cap = base.tools.timeout_of(tool).as_secs();
            match v.as_u64() {
                Some(n) if n <= cap => Ok(()),
                Some(n) => Err(Widens(format!("{n} is above the trusted {cap}"))),
                None => Err(Widens("must be a whole number of seconds".into())),
            }
        }
        "max_length" => match (v.as_u64(), base.tools.web_fetch.max_length) {
            (Some(n), Some(cap)) if n > cap as u64 => Err(Widens(format!("{n} is above the trusted {cap}"))),
            (Some(_), _) => Ok(()),
            (None, _) => Err(Widens("must be a whole number of characters".into())),
        },
        _ => return None,
    })
}
