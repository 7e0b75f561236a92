//! A root folder of runs, as `serve` and `worker` share it: each run a workspace
//! `<root>/<runs_dir>/<id>/`, configured by the root's configuration and the process's own flags,
//! narrowed by what a request asks (an agent profile, budgets that may only narrow).

use crate::budget::Budgets;
use crate::config::{Config, Layer, Resolved, Source};
use crate::error::{Error, Result};
use crate::settings::Global;
use crate::workspace::Workspace;
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
}

/// Creates `root` when missing and checks its configuration before anything runs.
pub fn prepare(g: &Global, root: &Utf8Path) -> Result<Root> {
    crate::fs::create_dir_all(root)?;
    let root = root.canonicalize_utf8().map_err(|e| Error::io("find", root, e))?;
    let mut global = g.clone();
    global.workspace = root.clone();
    let base: Config = crate::config::resolve(&crate::settings::layers(&global, &root, None)?)?.config;
    let runs_dir = base.handle.runs_dir.clone();
    let plain = Utf8PathBuf::from(&runs_dir);
    if plain.components().count() != 1 || !matches!(plain.components().next(), Some(camino::Utf8Component::Normal(_))) {
        return Err(Error::config(format!(
            "invalid configuration at key `handle.runs_dir`: `{runs_dir}` must be a plain folder name under the root"
        )));
    }
    Ok(Root { root, global, runs_dir })
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
        let strict = crate::model::strict_schemas(&resolved.config);
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
    crate::fs::Folder::open(root, &rel, create)?.ok_or_else(|| Error::usage(format!("no run `{id}` under {root}")))?;
    Ok(Workspace::new(root.join(runs_dir).join(id)))
}
