//! A root folder of runs, as `serve` and `worker` share it: each run a workspace
//! `<root>/<runs_dir>/<id>/`, configured by the root's configuration and the process's own flags,
//! narrowed by what a request asks (an agent profile, budgets that may only narrow).

use crate::settings::Global;
use agentloop_config::config::{Config, Layer, Resolved, Source};
use agentloop_types::budget::Budgets;
use agentloop_types::error::{Error, Result};
use agentloop_workspace::workspace::Workspace;
use camino::{Utf8Path, Utf8PathBuf};
use serde_json::json;

/// Largest run request taken, in bytes: a `serve` request's body, a message a `worker` reads
/// from its stream. Everything a request carries (goal, context, output schema) is written
/// into the run's files and held in memory several times over, so this bounds both.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// A root made ready: created, made absolute, its configuration valid.
pub struct Root {
    pub root: Utf8PathBuf,
    /// The process's own flags with `-w` set to the root: the top layers of every run's config.
    pub global: Global,
    /// Folder under the root holding the runs (`handle.runs_dir`, a plain name).
    pub runs_dir: String,
    /// The root's `serve:` section (the names `serve` answers to).
    pub serve: agentloop_config::config::ServeConfig,
}

/// Creates `root` when missing and checks its configuration before anything runs.
pub fn prepare(g: &Global, root: &Utf8Path) -> Result<Root> {
    agentloop_io::fs::create_dir_all(root)?;
    let root = root.canonicalize_utf8().map_err(|e| Error::io("find", root, e))?;
    let mut global = g.clone();
    global.workspace = root.clone();
    let base: Config = agentloop_config::config::resolve(&crate::settings::layers(&global, &root, None)?)?.config;
    let runs_dir = base.handle.runs_dir.clone();
    let plain = Utf8PathBuf::from(&runs_dir);
    if plain.components().count() != 1 || !matches!(plain.components().next(), Some(camino::Utf8Component::Normal(_))) {
        return Err(Error::config(format!(
            "invalid configuration at key `handle.runs_dir`: `{runs_dir}` must be a plain folder name under the root"
        )));
    }
    Ok(Root { root, global, runs_dir, serve: base.serve })
}

/// The configuration of a run under `root`: the root's (with `global`, the process's own flags,
/// as the top layers), with the agent given and budgets narrowed. With `strict`, a budget wider
/// than the root allows is an error naming it; otherwise (a run driven again after the root's
/// config changed) the narrower of the two applies.
pub fn config(global: &Global, root: &Utf8Path, agent: Option<&str>, b: &Budgets, strict: bool) -> Result<Resolved> {
    if let (Some(a), Some(fixed)) = (agent, global.agent.as_deref()) {
        if a != fixed {
            return Err(Error::usage(format!("`agent`: every run here runs as agent `{fixed}` (--agent)")));
        }
    }
    let layer = agent.map(|a| Layer { source: Source::ApiRequest, value: json!({"agent": a}) });
    let mut r = crate::settings::resolve_under(global, root, layer)?;
    let shared_skills = root.join("skills");
    if !r.config.skills.dirs.contains(&shared_skills) {
        r.config.skills.dirs.insert(0, shared_skills);
    }
    crate::trust::narrow_budgets(&mut r, b, root, strict)?;
    Ok(r)
}

/// A new run's configuration under `root` ([`config`], strict: a budget wider than the root
/// allows is refused naming it), with the request's output schema, checked as `run
/// --output-schema` checks its file (strict mode's limits among it).
pub fn new_run_config(
    global: &Global,
    root: &Utf8Path,
    agent: Option<&str>,
    b: &Budgets,
    output_schema: Option<&serde_json::Value>,
) -> Result<Resolved> {
    let mut resolved = config(global, root, agent, b, true)?;
    if let Some(schema) = output_schema {
        let strict = agentloop_model::model::strict_schemas(&resolved.config);
        crate::output_schema::check_schema(schema, "`output_schema`", strict)?;
        resolved.config.output_schema = Some(schema.clone());
    }
    Ok(resolved)
}

/// The workspace `<root>/<runs_dir>/<id>/` after entering `runs/` and `runs/<id>/` one
/// `O_NOFOLLOW` open at a time (made when `create`): a linked runs folder or run folder is
/// refused, never written through.
pub fn enter(root: &Utf8Path, runs_dir: &str, id: &str, create: bool) -> Result<Workspace> {
    let rel = Utf8Path::new(runs_dir).join(id);
    agentloop_io::fs::Folder::open(root, &rel, create)?
        .ok_or_else(|| Error::usage(format!("no run `{id}` under {root}")))?;
    Ok(Workspace::new(root.join(runs_dir).join(id)))
}

/// The folder of run records under a root: one record a run, whichever door started it
/// (`serve`, the worker, event mode), kept outside every run's folder so no tool of a run can
/// change it, and read whenever a door drives the run again.
pub const RECORDS: &str = ".agentloop-runs";

/// Where earlier versions kept records, by door (`serve`'s, the worker's): still read.
const LEGACY_RECORDS: [&str; 2] = [".agentloop-serve", ".agentloop-queue"];

/// The door that started a run, or that took it on last (`serve` adopts a run it answers or
/// continues, and drives it from then on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Door {
    Serve,
    Queue,
    Handle,
}

/// What a door was asked for a run, kept for the run's life: the agent and the budgets that
/// narrow its root's limits (applied again whenever it is driven), and what only some doors
/// know — the queue's idempotency key, message and series, and the signal that stopped a server
/// driving it. A record from before the `door` field names no door.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub door: Option<Door>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub budgets: Budgets,
    pub submitted_at: String,
    /// The queue request's idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The queue message that started the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The series a queued run belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<String>,
    /// The signal that stopped the server while it drove the run (SIGINT, SIGTERM): the run is
    /// marked interrupted, and the next start goes on with it unless --no-resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<String>,
}

impl RunRecord {
    /// Whether `serve` drives the run: it started it or took it on (a record from before the
    /// `door` field is the server's unless a queue message started the run).
    pub fn served(&self) -> bool {
        self.door == Some(Door::Serve) || (self.door.is_none() && self.message_id.is_none())
    }

    /// A new run's record, for `door`.
    pub fn new(run_id: &str, door: Door, agent: Option<String>, budgets: Budgets) -> RunRecord {
        RunRecord {
            run_id: run_id.to_string(),
            door: Some(door),
            agent,
            budgets,
            submitted_at: agentloop_types::clock::now_rfc3339(),
            key: None,
            message_id: None,
            series: None,
            interrupted_by: None,
        }
    }
}

/// Where the record of run `id` is kept under `root`.
pub fn record_path(root: &Utf8Path, id: &str) -> Utf8PathBuf {
    root.join(RECORDS).join(format!("{id}.json"))
}

/// The record of run `id` under `root`, if one is kept (an earlier version's too).
pub fn load_record(root: &Utf8Path, id: &str) -> Result<Option<RunRecord>> {
    let here = record_path(root, id);
    let legacy = LEGACY_RECORDS.iter().map(|d| root.join(d).join(format!("{id}.json")));
    for path in std::iter::once(here).chain(legacy) {
        if let Some(t) = agentloop_io::fs::read_optional(&path)? {
            return serde_json::from_str(&t).map(Some).map_err(|e| {
                Error::data(format!("cannot read {path}")).with_hint("restore or remove the file").with_source(e)
            });
        }
    }
    Ok(None)
}

/// Writes a run's record, durably (a door drives a run again by it).
pub fn save_record(root: &Utf8Path, record: &RunRecord) -> Result<()> {
    agentloop_io::fs::create_dir_all(&root.join(RECORDS))?;
    let text = agentloop_types::json::to_string_pretty(record) + "\n";
    agentloop_io::fs::write_durable(&record_path(root, &record.run_id), text.as_bytes())
}

/// Removes the record of run `id` (and an earlier version's).
pub fn remove_record(root: &Utf8Path, id: &str) {
    let _ = std::fs::remove_file(record_path(root, id));
    for d in LEGACY_RECORDS {
        let _ = std::fs::remove_file(root.join(d).join(format!("{id}.json")));
    }
}

/// The ids of every run with a record under `root`, sorted, each once.
pub fn record_ids(root: &Utf8Path) -> Vec<String> {
    let mut ids: Vec<String> = std::iter::once(RECORDS)
        .chain(LEGACY_RECORDS)
        .filter_map(|d| root.join(d).read_dir_utf8().ok())
        .flat_map(|rd| rd.flatten().filter_map(|e| e.file_name().strip_suffix(".json").map(String::from)))
        .filter(|id| id != "keys" && agentloop_types::run_id::RunId::is_valid(id))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The keys that name runs under `root` (event mode's start keys: an event's `event_id` and
/// `dedupe_key`, the router's `job:<id>`), in one index beside the records.
pub fn keys_path(root: &Utf8Path) -> Utf8PathBuf {
    root.join(RECORDS).join("keys.json")
}

/// The key index under `root` (an earlier version's `.agentloop-handle.json` when there is no
/// other yet); empty when there is none, or it cannot be read as one.
pub fn load_keys(root: &Utf8Path) -> Result<serde_json::Map<String, serde_json::Value>> {
    let text = match agentloop_io::fs::read_optional(&keys_path(root))? {
        Some(t) => Some(t),
        None => agentloop_io::fs::read_optional(&root.join(".agentloop-handle.json"))?,
    };
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default())
}

/// Writes the key index under `root`.
pub fn save_keys(root: &Utf8Path, keys: &serde_json::Map<String, serde_json::Value>) -> Result<()> {
    agentloop_io::fs::create_dir_all(&root.join(RECORDS))?;
    agentloop_io::fs::write_atomic(&keys_path(root), agentloop_types::json::to_string_pretty(keys).as_bytes())
}
