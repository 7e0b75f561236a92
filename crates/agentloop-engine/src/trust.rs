//! Trust: which configuration may widen what agentloop does, and the one "may only narrow"
//! policy for everything else.
//!
//! Three parties besides the user feed agentloop: the model (held by the tool sandbox), a
//! request (`handle`, `serve`) and a workspace from elsewhere. The user's own config file, flags
//! and environment are trusted. A workspace's `agentloop.yaml` and `agents/*.yaml` are trusted
//! only when the user trusted that folder (`agentloop trust DIR`, kept in
//! `$XDG_CONFIG_HOME/agentloop/trusted.json`), when `AGENTLOOP_TRUST_ALL=1`, or when the user's
//! own config says `trust_all: true`. Until then they are held to what a request may do:
//! [`narrows`] is the only place that decides, for both. A key that would widen is taken out of
//! the layer before anything resolves it (so no code path can act on it) and reported as a
//! [`Refusal`]; commands that act refuse to start, read-only ones warn and go on without it.

use agentloop_config::config::{Config, Dur, Layer, Resolved, Source};
use agentloop_types::budget::{Budget, Budgets};
use agentloop_types::error::{Error, Result};
use agentloop_types::error::{Kind, ResultExt};
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::Party;

/// A key an untrusted layer set and may not: where, which, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub file: String,
    pub key: String,
    pub why: String,
}

use crate::policy::{narrows, numeric_cap, ONLY_TRUSTED};
use crate::tool_settings::Widens;

/// The variable that trusts every workspace (CI, containers that only hold the user's own).
pub const TRUST_ALL_ENV: &str = "AGENTLOOP_TRUST_ALL";

fn env_trusts_all() -> bool {
    std::env::var(TRUST_ALL_ENV).is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"))
}

/// The folders the user trusts, as kept in `trusted.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Store {
    #[serde(default)]
    pub folders: Vec<Trusted>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trusted {
    pub path: Utf8PathBuf,
    pub since: String,
    /// Which folder was trusted: its device and inode then. A folder deleted and made again at
    /// the same path (a repository cloned anew) is another folder, and is not trusted. Entries
    /// written before this was kept have none and are matched by path alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<FolderId>,
}

/// A folder's identity on this machine: its device and inode, and its birth time where the
/// filesystem keeps one (an inode number freed by a deleted folder may be given to the next).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FolderId {
    pub dev: u64,
    pub ino: u64,
    /// Nanoseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub born: Option<u128>,
}

impl FolderId {
    /// The identity of the folder at `dir` now; None when it cannot be read.
    pub fn of(dir: &Utf8Path) -> Option<FolderId> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(dir).ok()?;
        let born = m.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos());
        Some(FolderId { dev: m.dev(), ino: m.ino(), born })
    }
}

impl Trusted {
    /// Whether this entry trusts the folder at `dir` (already canonical): the same path and,
    /// when the entry knows it, the same folder.
    pub fn covers(&self, dir: &Utf8Path) -> bool {
        self.path == dir && self.id.is_none_or(|id| FolderId::of(dir) == Some(id))
    }
}

impl Store {
    pub fn path() -> Option<Utf8PathBuf> {
        Some(agentloop_config::config::user_config_dir()?.join("trusted.json"))
    }

    /// The store; a missing file is an empty one, a broken one an error naming it.
    pub fn load() -> Result<Store> {
        let Some(path) = Self::path() else { return Ok(Store::default()) };
        match agentloop_io::fs::read_optional(&path)? {
            None => Ok(Store::default()),
            Some(text) => serde_json::from_str(&text).map_err(|e| {
                Error::config(format!("{path} is not a valid list of trusted folders"))
                    .with_hint("fix it, or remove it and trust your folders again with `agentloop trust DIR`")
                    .with_source(e)
            }),
        }
    }

    pub fn save(&self) -> Result<Utf8PathBuf> {
        let path = Self::path().ok_or_else(|| {
            Error::config("no user config folder: neither XDG_CONFIG_HOME nor HOME is set")
                .with_hint("set HOME (or XDG_CONFIG_HOME) so agentloop can record trusted folders")
        })?;
        if let Some(dir) = path.parent() {
            agentloop_io::fs::create_dir_all(dir)?;
        }
        let text = agentloop_types::json::to_string_pretty(self) + "\n";
        agentloop_io::fs::write_atomic(&path, text.as_bytes())?;
        Ok(path)
    }

    /// Whether the folder at `dir` (already canonical) is trusted.
    pub fn contains(&self, dir: &Utf8Path) -> bool {
        self.folders.iter().any(|t| t.covers(dir))
    }

    /// Records the folder at `dir` (already canonical) with its identity; false when it was
    /// there. An entry for the same path that names another folder (or none) is renewed.
    pub fn add(&mut self, dir: &Utf8Path) -> bool {
        let id = FolderId::of(dir);
        if self.folders.iter().any(|t| t.path == dir && t.id.is_some() && t.id == id) {
            return false;
        }
        self.folders.retain(|t| t.path != dir);
        self.folders.push(Trusted { path: dir.to_path_buf(), since: agentloop_types::clock::now_rfc3339(), id });
        true
    }

    pub fn remove(&mut self, dir: &Utf8Path) -> bool {
        let before = self.folders.len();
        self.folders.retain(|t| t.path != dir);
        before != self.folders.len()
    }
}

/// A folder's identity for trust: its real path (links resolved), so a trusted folder reached
/// through another name is the same folder and a link cannot borrow another folder's trust.
pub fn canonical(dir: &Utf8Path) -> Result<Utf8PathBuf> {
    let real = std::fs::canonicalize(dir).context_as(Kind::Usage, format!("cannot open folder {dir}"))?;
    Utf8PathBuf::from_path_buf(real).map_err(|p| Error::usage(format!("{} is not a UTF-8 path", p.display())))
}

/// Whether the workspace at `root` is trusted: `AGENTLOOP_TRUST_ALL=1`, `trust_all: true` in
/// trusted configuration (`base`), or the folder recorded by `agentloop trust`.
pub fn is_trusted(root: &Utf8Path, base: &Config) -> Result<bool> {
    if env_trusts_all() || base.trust_all {
        return Ok(true);
    }
    let Ok(dir) = canonical(root) else { return Ok(false) };
    Ok(Store::load()?.contains(&dir))
}

/// Folders that say a tree is kept in version control: whoever can push to it (a `git pull`
/// away) can add files anywhere below, an `agentloop.yaml` in a folder agentloop made included.
const VCS_MARKERS: &[&str] = &[".git", ".hg", ".svn", ".bzr", ".jj", "_darcs", ".pijul", ".fslckout", "_FOSSIL_"];

/// Whether agentloop would be the maker of the folder at `dir`, and so of whatever config it
/// will hold: it does not exist yet, or is an empty folder, and no folder above it (links
/// resolved) holds a repository (`.git`, a file or a folder, or another version control's
/// marker). A folder made inside a clone is filled by the clone's next pull, not by the user.
/// Asked before a command creates anything there, for [`record_created`].
pub fn is_new_folder(dir: &Utf8Path) -> bool {
    let fresh = match std::fs::symlink_metadata(dir) {
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        Ok(m) if m.is_dir() => std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none()),
        Ok(_) => false,
    };
    fresh && repository_above(dir).is_none()
}

/// The nearest folder at or above `dir` (its existing part, links resolved) that holds a
/// repository; the filesystem root's too. An ancestor that cannot be read counts as one:
/// nothing is recorded on a guess.
pub fn repository_above(dir: &Utf8Path) -> Option<Utf8PathBuf> {
    let abs = match std::env::current_dir() {
        Ok(cwd) if dir.is_relative() => Utf8PathBuf::from_path_buf(cwd).ok()?.join(dir),
        _ => dir.to_path_buf(),
    };
    // The part that exists, resolved: `..` and links lead where they lead.
    let mut existing = abs.as_path();
    let real = loop {
        match canonical(existing) {
            Ok(real) => break real,
            Err(_) => existing = existing.parent()?,
        }
    };
    real.ancestors()
        .find(|a| {
            VCS_MARKERS.iter().any(|m| match std::fs::symlink_metadata(a.join(m)) {
                Ok(_) => true,
                Err(e) => e.kind() != std::io::ErrorKind::NotFound,
            })
        })
        .map(Utf8Path::to_path_buf)
}

/// Records a workspace folder that agentloop itself just created (`init`, `run --goal` on a
/// folder that did not exist or was empty, as [`is_new_folder`] said before anything was made)
/// as trusted: whatever config it later holds was written by the user. A folder that held
/// anything — a cloned repository, an unpacked archive — is never recorded. A store that cannot
/// be written only costs the convenience, so it is a warning.
pub fn record_created(dir: &Utf8Path, was_new: bool, printer: &agentloop_io::output::Printer) {
    if env_trusts_all() || !was_new {
        return;
    }
    let recorded = canonical(dir).and_then(|real| {
        let mut store = Store::load()?;
        if store.add(&real) {
            store.save()?;
        }
        Ok(())
    });
    if let Err(e) = recorded {
        printer.warn(&format!("could not record {dir} as trusted: {}", e.detail()));
    }
}

/// Takes every key of `layer` that would widen `base` out of it and returns them: after this the
/// layer only narrows. An MCP server is refused (and taken out) whole, so no half of one is left.
pub fn sanitize(layer: &mut Layer, base: &Config, root: &Utf8Path) -> Vec<Refusal> {
    let mut leaves = Vec::new();
    leaves_of(&layer.value, &mut Vec::new(), &mut leaves);
    let mut out: Vec<Refusal> = Vec::new();
    let mut cut: Vec<Vec<String>> = Vec::new();
    for (path, v) in leaves {
        let key = path.join(".");
        let Err(why) = narrows(&key, v, base, root, Party::Workspace) else { continue };
        let whole = match path.as_slice() {
            [m, s, name, ..] if m == "mcp" && s == "servers" => vec![m.clone(), s.clone(), name.clone()],
            _ => path,
        };
        if !cut.contains(&whole) {
            out.push(Refusal { file: layer.source.to_string(), key: whole.join("."), why: why.0 });
            cut.push(whole);
        }
    }
    for path in &cut {
        remove_path(&mut layer.value, path);
    }
    out
}

fn remove_path(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = v;
    for p in parents {
        match cur.get_mut(p) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Value::Object(m) = cur {
        m.remove(last);
    }
}

fn describe(refused: &[Refusal]) -> String {
    let mut parts = Vec::new();
    let mut files: Vec<&str> = refused.iter().map(|r| r.file.as_str()).collect();
    files.dedup();
    for file in files {
        let keys: Vec<String> = refused
            .iter()
            .filter(|r| r.file == file)
            // A key holds the workspace's own names (`mcp.servers.<name>`): shown on one line.
            .map(|r| (agentloop_io::output::one_line(&r.key), &r.why))
            .map(|(key, why)| if *why == ONLY_TRUSTED { format!("`{key}`") } else { format!("`{key}` ({why})") })
            .collect();
        parts.push(format!("{file} sets {}", keys.join(", ")));
    }
    parts.join("; ")
}

/// The error for refused keys: each named with its file, and the ways on.
pub fn refusal_error(refused: &[Refusal], root: &Utf8Path) -> Error {
    Error::config(format!(
        "{root} is not a trusted folder, so its configuration may only narrow what yours allows; {}: only trusted configuration may set these (they could run a program, send a credential, read or write outside the workspace, or widen the sandbox)",
        describe(refused)
    ))
    .with_hint(format!(
        "if you trust this folder, run `agentloop trust {root}`; otherwise remove those keys, or set them in your own config ({}), the environment or flags",
        own_config()
    ))
}

/// A warning for read-only commands, which go on without the refused keys.
pub fn refusal_warning(refused: &[Refusal], root: &Utf8Path) -> String {
    format!(
        "{root} is not a trusted folder: going on without what only trusted configuration may set ({}); `agentloop trust {root}` trusts it",
        describe(refused)
    )
}

/// The keys of `v` (a layer's value) that would widen `base`, with why.
pub fn widening(v: &Value, base: &Config, root: &Utf8Path, party: Party) -> Vec<(String, String)> {
    let mut leaves = Vec::new();
    leaves_of(v, &mut Vec::new(), &mut leaves);
    leaves
        .into_iter()
        .filter_map(|(path, v)| {
            let key = path.join(".");
            narrows(&key, v, base, root, party).err().map(|why| (key, why.0))
        })
        .collect()
}

/// The set keys of a layer. An empty object sets nothing (layers merge deeply), so it yields no
/// leaf: `"config": {}` or `{"tools": {}}` narrows nothing and widens nothing.
fn leaves_of<'a>(v: &'a Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, &'a Value)>) {
    match v {
        // The output schema is one value (a JSON Schema), not keys of the configuration.
        Value::Object(_) if path.len() == 1 && path[0] == "output_schema" => out.push((path.clone(), v)),
        Value::Object(m) => {
            for (k, v) in m {
                path.push(k.clone());
                leaves_of(v, path, out);
                path.pop();
            }
        }
        _ => out.push((path.clone(), v)),
    }
}

/// Narrows `r`'s limits to the budgets a request asked for (a `serve` request's `budgets`).
/// With `strict`, a budget wider than `r` allows is an error naming it, held to the same check
/// as every other key a request sets ([`narrows`]); otherwise (a run driven again after the
/// server's limits went down) the narrower of the two applies.
pub fn narrow_budgets(r: &mut Resolved, asked: &Budgets, root: &Utf8Path, strict: bool) -> Result<()> {
    if let Some(c) = asked.max_cost_usd.filter(|c| !c.is_finite() || *c < 0.0) {
        return Err(Error::usage(format!("budgets.max_cost_usd: {c} is not an amount")));
    }
    let mut asked = asked.clone();
    if !strict {
        r.config.clamp_budgets(&mut asked);
    }
    for b in Budget::ALL {
        let Some(v) = asked.get(b) else { continue };
        if strict {
            narrows(b.key(), &v, &r.config, root, Party::Request).map_err(|why| {
                let from = match r.sources.get(b.key()) {
                    None | Some(Source::Default) => "the built-in default".to_string(),
                    Some(s) => s.to_string(),
                };
                Error::usage(format!("budgets.{}: {why} (set by {from}); a request may only narrow a limit", b.key()))
                    .with_hint(format!(
                        "ask for at most {} as {}, or leave it out to keep that limit",
                        r.config.limit(b),
                        b.key()
                    ))
            })?;
        }
        r.config.set_budget(b, &asked);
        r.sources.insert(b.key().to_string(), Source::ApiRequest);
    }
    Ok(())
}

/// Where a limit came from, as a refusal names it: the request's `config.KEY` (event mode),
/// the root's agentloop.yaml, the built-in default, or whichever layer set it.
pub fn limit_source(key: &str, source: Option<&Source>) -> String {
    match source {
        None | Some(Source::Default) => "the built-in default".into(),
        Some(Source::Request) => format!("the request's `config.{key}`"),
        Some(Source::Workspace(p)) => format!("the root's {}", p.file_name().unwrap_or("agentloop.yaml")),
        Some(Source::UserConfig(p)) => format!("the user's config {p}"),
        Some(Source::ConfigFlag(p)) => format!("--config {p}"),
        Some(s) => s.to_string(),
    }
}

/// [`narrows`] for the budget `b` a request asks for, a value above the limit naming where that
/// limit came from (`from`, see [`limit_source`]): `5 is above 3, set by the request's
/// `config.max_steps``.
pub fn narrows_limit(
    b: Budget,
    v: &Value,
    base: &Config,
    root: &Utf8Path,
    from: &str,
) -> std::result::Result<(), Widens> {
    let above = match b {
        Budget::Timeout => serde_json::from_value::<Dur>(v.clone())
            .ok()
            .filter(|d| d.0 > base.timeout.0)
            .map(|d| format!("{}s", d.0.as_secs())),
        _ => v.as_f64().filter(|n| numeric_cap(b.key(), base).flatten().is_some_and(|l| *n > l)).map(|n| n.to_string()),
    };
    match above {
        Some(asked) => Err(Widens(format!("{asked} is above {}, set by {from}", base.limit(b)))),
        None => narrows(b.key(), v, base, root, Party::Request),
    }
}

/// Your own config file as this process finds it (`$XDG_CONFIG_HOME/agentloop/config.yaml`).
pub fn own_config() -> String {
    agentloop_config::config::user_config_dir()
        .map(|d| d.join("config.yaml").to_string())
        .unwrap_or_else(|| "~/.config/agentloop/config.yaml".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_limit_a_request_goes_above_is_named_by_where_it_was_set() {
        let base = Config { max_steps: 3, timeout: Dur::secs(300), ..Config::default() };
        let root = Utf8Path::new("/nonexistent-root");
        let from = limit_source("max_steps", Some(&Source::Request));
        assert_eq!(from, "the request's `config.max_steps`");
        let why = narrows_limit(Budget::MaxSteps, &json!(5), &base, root, &from).unwrap_err();
        assert_eq!(why.0, "5 is above 3, set by the request's `config.max_steps`");
        assert!(narrows_limit(Budget::MaxSteps, &json!(2), &base, root, &from).is_ok());
        assert!(narrows_limit(Budget::MaxSteps, &json!("many"), &base, root, &from).is_err());
        let why = narrows_limit(Budget::Timeout, &json!("10m"), &base, root, "X").unwrap_err();
        assert_eq!(why.0, "600s is above 300s, set by X");
        let yaml = Source::Workspace("/r/agentloop.yaml".into());
        assert_eq!(limit_source("max_steps", Some(&yaml)), "the root's agentloop.yaml");
        assert_eq!(limit_source("max_steps", None), "the built-in default");
    }

    #[test]
    fn request_budgets_only_narrow() {
        let base = || agentloop_config::config::resolve(&[]).unwrap();
        let root = Utf8Path::new("/nonexistent-root");
        let b = |v: Value| serde_json::from_value::<Budgets>(v).unwrap();
        let mut r = base();
        let asked = b(json!({"max_steps": 5, "timeout": "10m", "max_tokens": 900, "max_cost_usd": 0.5}));
        narrow_budgets(&mut r, &asked, root, true).unwrap();
        assert_eq!((r.config.max_steps, r.config.timeout.0.as_secs()), (5, 600));
        assert_eq!((r.config.max_tokens, r.config.max_cost_usd), (Some(900), Some(0.5)), "no limit: any narrows it");
        assert_eq!(r.sources["max_steps"], Source::ApiRequest);
        let mut r = base();
        let e = narrow_budgets(&mut r, &b(json!({"max_steps": 50})), root, true).unwrap_err();
        assert!(
            e.message.contains("budgets.max_steps: 50 is above the root's 20 (set by the built-in default)"),
            "{}",
            e.message
        );
        let e = narrow_budgets(&mut r, &b(json!({"timeout": "2h"})), root, true).unwrap_err();
        assert!(e.message.starts_with("budgets.timeout: 7200s is above the root's"), "{}", e.message);
        // Driven again after the server's limit went down: the narrower applies.
        narrow_budgets(&mut r, &b(json!({"max_steps": 50})), root, false).unwrap();
        assert_eq!(r.config.max_steps, 20);
        assert!(narrow_budgets(&mut base(), &b(json!({"max_cost_usd": -1.0})), root, true).is_err());
        assert!(serde_json::from_value::<Budgets>(json!({"llm": {}})).is_err());
    }

    fn refused(v: Value) -> Vec<String> {
        widening(&v, &Config::default(), Utf8Path::new("/nonexistent-ws"), Party::Workspace)
            .into_iter()
            .map(|(k, _)| k)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    #[test]
    fn a_workspace_may_only_narrow() {
        assert!(refused(json!({"max_steps": 5, "timeout": "10s", "tools": {"shell": {"enabled": false}}})).is_empty());
        assert!(
            refused(json!({"system_prompt_file": "identity.md", "logging": {"file": "log/agentloop.log"}})).is_empty()
        );
        assert_eq!(
            refused(json!({
                "max_steps": 500, "llm": {"base_url": "https://evil", "api_key_env": "X", "api_key_cmd": ["sh"]},
                "logging": {"file": "../../.bashrc"}, "system_prompt_file": "/etc/passwd",
                "mcp": {"servers": {"x": {"command": "touch"}}}, "ductile": {"api_url": "http://x"},
                "tools": {"shell": {"enabled": true}, "read_paths": ["/"]}, "trust_all": true
            })),
            [
                "ductile.api_url",
                "llm.api_key_cmd",
                "llm.api_key_env",
                "llm.base_url",
                "logging.file",
                "max_steps",
                "mcp.servers.x.command",
                "system_prompt_file",
                "tools.read_paths",
                "tools.shell.enabled",
                "trust_all"
            ]
        );
    }

    /// An empty trusted `tools.http.ports` allows any port: any list narrows it. A trusted list
    /// is narrowed by a non-empty subset only.
    #[test]
    fn ports_narrow_any_port_or_a_trusted_list() {
        let ws = Utf8Path::new("/nonexistent-ws");
        let why = |trusted: &[u16], v: Value| {
            let mut base = Config::default();
            base.tools.http.ports = trusted.to_vec();
            narrows("tools.http.ports", &v, &base, ws, Party::Workspace).err().map(|w| w.0)
        };
        for ok in [json!([443]), json!([80, 443, 8443]), json!([])] {
            assert_eq!(why(&[], ok.clone()), None, "{ok}");
        }
        assert_eq!(why(&[443, 8443], json!([443])), None);
        assert_eq!(why(&[443, 8443], json!([8443, 443])), None);
        assert_eq!(
            why(&[443, 8443], json!([443, 80])).as_deref(),
            Some("port 80 is not in the trusted tools.http.ports")
        );
        assert_eq!(
            why(&[443, 8443], json!([])).as_deref(),
            Some("an empty list allows any port, not only the trusted [443, 8443]")
        );
        for bad in [json!(["443"]), json!([70000]), json!([-1]), json!(443)] {
            assert_eq!(why(&[], bad.clone()).as_deref(), Some("must be a list of port numbers"), "{bad}");
        }
        assert!(refused(json!({"tools": {"http": {"ports": [443]}}})).is_empty());
        // The same for hosts: an empty list under a trusted one is any host again.
        let mut base = Config::default();
        base.tools.http.allow_hosts = vec!["docs.example".into()];
        let hosts = |v: Value| narrows("tools.http.allow_hosts", &v, &base, ws, Party::Workspace).err().map(|w| w.0);
        assert_eq!(hosts(json!(["docs.example"])), None);
        assert_eq!(
            hosts(json!([])).as_deref(),
            Some("an empty list allows any host, not only the trusted [docs.example]")
        );
        assert_eq!(
            hosts(json!(["other.example"])).as_deref(),
            Some("`other.example` is not in the trusted tools.http.allow_hosts")
        );
    }

    #[test]
    fn memory_may_stay_in_the_workspace_but_not_be_shared() {
        assert!(refused(json!({"memory": {"scope": "workspace", "dir": "notes/memory"}})).is_empty());
        assert_eq!(
            refused(json!({"memory": {"scope": "user", "dir": "../shared"}, "tools": {"memory": {"dir": "/srv/m"}}})),
            ["memory.dir", "memory.scope", "tools.memory.dir"]
        );
        let user = Config {
            memory: agentloop_config::config::MemoryConfig {
                scope: agentloop_config::config::MemoryScope::User,
                ..Default::default()
            },
            ..Default::default()
        };
        let v = json!("user");
        assert!(narrows("memory.scope", &v, &user, Utf8Path::new("/nonexistent-ws"), Party::Workspace).is_ok());
    }

    #[test]
    fn a_log_may_not_be_one_of_agentloops_own_files() {
        assert_eq!(refused(json!({"logging": {"file": "trace.jsonl"}})), ["logging.file"]);
        assert_eq!(refused(json!({"logging": {"file": ".git/config"}})), ["logging.file"]);
        for file in ["./state.json", "./.git/config", "notes/.git/config", "agents/x.log", "runs/x.log", "./."] {
            assert_eq!(refused(json!({"logging": {"file": file}})), ["logging.file"], "{file}");
        }
        assert!(refused(json!({"logging": {"file": "./logs/agent.log"}})).is_empty());
    }

    #[test]
    fn values_may_be_added_but_not_dropped() {
        let user = Config {
            values: vec![agentloop_config::config::AgentValue {
                name: "honesty".into(),
                description: None,
                refuse_if: vec!["fake review".into()],
            }],
            ..Default::default()
        };
        let ws = Utf8Path::new("/nonexistent-ws");
        let check = |v: Value| narrows("values", &v, &user, ws, Party::Workspace);
        let more = json!([{"name": "honesty", "refuse_if": ["fake review", "astroturf"]}, {"name": "privacy", "refuse_if": ["home address"]}]);
        assert!(check(more).is_ok());
        let e = check(json!([{"name": "privacy", "refuse_if": ["home address"]}])).unwrap_err();
        assert_eq!(e.0, "it drops the trusted value `honesty`");
        let e = check(json!([{"name": "honesty", "refuse_if": ["astroturf"]}])).unwrap_err();
        assert!(e.0.contains("\"fake review\""), "{e}");
        assert!(check(json!([])).is_err());
    }

    #[test]
    fn sanitize_takes_the_keys_out() {
        let mut l = Layer {
            source: agentloop_config::config::Source::Workspace("ws/agentloop.yaml".into()),
            value: json!({"llm": {"base_url": "x", "temperature": 0.1}}),
        };
        let r = sanitize(&mut l, &Config::default(), Utf8Path::new("/nonexistent-ws"));
        assert_eq!(r.len(), 1);
        assert_eq!(l.value, json!({"llm": {"temperature": 0.1}}));
    }
}
