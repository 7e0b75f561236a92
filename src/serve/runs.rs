//! The runs `serve` executes: each is a workspace `<root>/runs/<id>/` (the layout of event mode
//! and `runs`), created and driven with the same library code as `agentloop run`.
//!
//! A run's configuration is the root's, as for `agentloop -w ROOT run` (user config, the root's
//! agentloop.yaml, an agent profile from `<root>/agents/`, `AGENTLOOP_*`, the server's flags),
//! with relative paths taken from the root and `<root>/skills` among the skill folders. A request
//! adds two things only: the agent profile to use, and budgets that may narrow the limits, never
//! widen them. They are kept in `<root>/.agentloop-serve/<id>.json` (outside every run's folder,
//! so no tool of a run can change them) and applied again whenever the run is driven, so a
//! restarted server drives the run with the same limits. Only runs with such a record are driven;
//! other runs (event mode's under `runs/`, and the root's own current run that `agentloop -w
//! ROOT run` made) are listed and served, never touched.

use super::http::{ApiError, ApiResult};
use super::queue::Ticket;
use super::Shared;
use crate::config::Resolved;
use crate::error::{Error, Result};
use crate::lifecycle::Request;
use crate::output::Printer;
use crate::phases::{self, Env};
use crate::run_id::RunId;
use crate::workspace::{State, StopKind, Workspace};
use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How long a worker waits for a run's lock held by someone else, unless --wait says.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

pub use crate::budget::Budgets;

/// What a client asked for, kept for the life of the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub run_id: String,
    pub agent: Option<String>,
    pub budgets: Budgets,
    pub submitted_at: String,
    /// The signal that stopped the server while it drove the run (SIGINT, SIGTERM): the run is
    /// marked interrupted, and the next start goes on with it unless --no-resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<String>,
}

/// A request to start a run (POST /runs), already validated.
pub struct NewRun {
    pub goal: String,
    pub context: String,
    pub agent: Option<String>,
    pub budgets: Budgets,
    pub force: bool,
    /// The JSON Schema the run's final output must match.
    pub output_schema: Option<Value>,
}

fn records_dir(shared: &Shared) -> Utf8PathBuf {
    shared.root.join(".agentloop-serve")
}

fn record_path(shared: &Shared, id: &str) -> Utf8PathBuf {
    records_dir(shared).join(format!("{id}.json"))
}

pub fn load_record(shared: &Shared, id: &str) -> Result<Option<Record>> {
    let path = record_path(shared, id);
    match crate::fs::read_optional(&path)? {
        None => Ok(None),
        Some(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|e| Error::data(format!("cannot read {path}: {e}")).with_hint("restore or remove the file")),
    }
}

/// Whether `id` can name a run folder ([`RunId`]'s rule: nothing that could climb out).
pub fn valid_id(id: &str) -> bool {
    RunId::is_valid(id)
}

pub fn run_ws(shared: &Shared, id: &str) -> Workspace {
    Workspace::new(shared.root.join(&shared.runs_dir).join(id))
}

/// A run's workspace after entering `runs/` and `runs/<id>/` one `O_NOFOLLOW` open at a time
/// (made when `create`): a linked runs folder or run folder is refused, never written through.
fn entered(shared: &Shared, id: &str, create: bool) -> Result<Workspace> {
    crate::runs_root::enter(&shared.root, &shared.runs_dir, id, create)
}

/// Whether `id` is the root's own run (one `agentloop -w ROOT run` made), which the server
/// lists and serves as `agentloop -w ROOT runs` lists it, and never drives: it has no record.
pub fn is_current(shared: &Shared, id: &str) -> bool {
    let root = Workspace::new(shared.root.clone());
    valid_id(id) && root.has_run() && root.load_state().is_ok_and(|s| s.run_id == id)
}

/// The workspace of an existing run — one under `runs/`, or the root's own — or 404; a run
/// folder that is a symbolic link (its files live elsewhere, wherever the link points) is not
/// served: 403.
pub fn existing(shared: &Shared, id: &str) -> ApiResult<Workspace> {
    let ws = run_ws(shared, id);
    if valid_id(id) && !ws.has_run() && !is_link(&ws.root) && is_current(shared, id) {
        return Ok(Workspace::new(shared.root.clone()));
    }
    if !valid_id(id) || !ws.has_run() {
        return Err(ApiError::new(404, format!("no run `{id}` under {}", shared.root)).hint("GET /runs lists them"));
    }
    if is_link(&ws.root) {
        return Err(ApiError::new(403, format!("run `{id}` is not served: its folder is a symbolic link"))
            .hint(format!("move the run's folder itself into {}/{}/", shared.root, shared.runs_dir)));
    }
    Ok(ws)
}

/// Whether a path is a symbolic link itself (not followed).
pub fn is_link(path: &camino::Utf8Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// The configuration of a run: the root's, with the agent given and budgets narrowed. With
/// `strict`, a budget wider than the server allows is an error naming it; otherwise (a run
/// driven again after the root's config changed) the narrower of the two applies.
pub fn config(shared: &Shared, agent: Option<&str>, b: &Budgets, strict: bool) -> Result<Resolved> {
    crate::runs_root::config(&shared.global, &shared.root, agent, b, strict)
}

/// Phases of served runs print nothing (stdout belongs to the server); warnings still go to
/// stderr.
fn quiet() -> Printer {
    Printer { quiet: true, ..Default::default() }
}

/// Creates a run for `new` in a reserved place and queues it; returns its id. Everything that
/// can refuse it (agent, budgets, provider and key, rest, negotiation) is checked before a file
/// is written.
pub fn create(shared: &Shared, new: NewRun, ticket: Ticket) -> Result<String> {
    let mut resolved = config(shared, new.agent.as_deref(), &new.budgets, true)?;
    if let Some(schema) = &new.output_schema {
        let strict = crate::model::strict_schemas(&resolved.config);
        crate::output_schema::check_schema(schema, "`output_schema`", strict)?;
        resolved.config.output_schema = Some(schema.clone());
    }
    let cfg = &resolved.config;
    let model = crate::model::from_config(cfg, &shared.root)?;
    crate::rest_window::check(cfg, &shared.root)?;
    let mut id = RunId::generate().into_string();
    while run_ws(shared, &id).root.exists() || record_path(shared, &id).exists() || is_current(shared, &id) {
        id = RunId::generate().into_string();
    }
    // runs/ and runs/<id>/ are entered (and made) without following a link.
    let ws = entered(shared, &id, true)?;
    let env = Env::with(&ws, cfg, quiet())?;
    let start = crate::lifecycle::Start {
        goal: new.goal.clone(),
        background: new.context.clone(),
        carry: false,
        force: new.force,
        slot: None,
        follow_up: false,
        session: None,
    };
    crate::lifecycle::check_fits(&env, model.model(), &start)?;
    // The record first: a run without one would never be driven; a record without a run (a
    // crash in between) is ignored and removed at the next start.
    let record = Record {
        run_id: id.clone(),
        agent: new.agent,
        budgets: new.budgets,
        submitted_at: crate::clock::now_rfc3339(),
        interrupted_by: None,
    };
    save_record(shared, &record)?;
    let session = ws.lock(None)?;
    phases::init::init_run(&session, cfg, &env.tpl, &new.goal, &new.context, false, Some(id.clone()))?;
    drop(session);
    ticket.push(&id);
    Ok(id)
}

/// Writes a run's record (durably: a run is driven only with one).
fn save_record(shared: &Shared, record: &Record) -> Result<()> {
    crate::fs::create_dir_all(&records_dir(shared))?;
    let text = crate::json::to_string_pretty(record) + "\n";
    crate::fs::write_durable(&record_path(shared, &record.run_id), text.as_bytes())
}

/// The configuration a recorded run is driven (or answered, or continued) with.
fn recorded_config(shared: &Shared, id: &str) -> Result<Resolved> {
    let rec = load_record(shared, id)?
        .ok_or_else(|| Error::usage(format!("run {id} was not started by this server; it is only listed")))?;
    config(shared, rec.agent.as_deref(), &rec.budgets, false)
}

/// A worker drives a run until it stops (done, escalated, a budget) or fails.
pub fn drive(shared: &Shared, id: &str) -> Result<Option<StopKind>> {
    let ws = entered(shared, id, false)?;
    let resolved = recorded_config(shared, id)?;
    // Someone may be working on the run with a command that locks; the worker waits a while
    // (--wait SECS, else 30 s), then gives up on it (POST continue queues it again).
    let wait = shared.global.wait.map(std::time::Duration::from_secs).unwrap_or(LOCK_WAIT);
    let session = ws.lock(Some(wait))?;
    let mut state = ws.load_state()?;
    if state.status.is_terminal() || state.interrupted {
        return Ok(None);
    }
    let mut env = Env::with(&ws, &resolved.config, quiet())?;
    env.hold(&session);
    // Known to the signal watcher while it goes on: a stopped server marks it interrupted.
    let _running = crate::interrupt::served_run_in(&ws.root, &record_path(shared, id));
    let started = state.step == 0 && state.reframes == 0 && state.usage.total() == 0;
    shared.log(&format!("run {id} {}", if started { "started" } else { "goes on" }));
    let stop =
        crate::lifecycle::go_on(&mut env, &mut state, &resolved.sources, started, true, crate::commands::modes::AUTO)?;
    shared.log(&format!("run {id} {}: {}", state.status.as_str(), state.reason.clone().unwrap_or_default()));
    Ok(Some(stop))
}

/// Reopens a stopped run (answer its question, or continue it) and queues it again. A run
/// still going that no worker holds (a worker gave up on it, e.g. its lock was taken) is
/// queued as it is by a continue.
pub fn reopen(shared: &Shared, id: &str, how: Request, ticket: Ticket, budgets: Option<Budgets>) -> ApiResult<State> {
    let ws = existing(shared, id)?;
    if shared.queue.place(id).is_some() {
        return Err(
            ApiError::new(409, format!("run {id} is queued or running")).hint("GET /runs/{id} shows where it is")
        );
    }
    let mut record = load_record(shared, id)?
        .ok_or_else(|| ApiError::new(409, format!("run {id} was not started by this server; it is only listed")))?;
    // New budgets replace the recorded ones they name, each held to the server's limits.
    if let Some(b) = &budgets {
        record.budgets = record.budgets.replaced_by(b);
    }
    let strict = budgets.is_some();
    let resolved = config(shared, record.agent.as_deref(), &record.budgets, strict)?;
    let session = ws.lock(None)?;
    let state = ws.load_state()?;
    if let (Request::Continue { .. }, true) = (&how, state.status.is_terminal() || state.interrupted) {
        let now = state.limits.in_force(&resolved.config, &resolved.sources);
        if let Some((b, e)) = crate::lifecycle::still_over(&ws, &state, &now) {
            let hint = format!(
                "raise it in the request: {{\"budgets\": {{\"{}\": ...}}}}, up to this server's limit",
                b.key()
            );
            return Err(ApiError::new(409, e.message).hint(hint));
        }
    }
    if strict {
        save_record(shared, &record)?;
    }
    let mut env = Env::with(&ws, &resolved.config, quiet())?;
    env.hold(&session);
    let state = match how {
        // Still going but held by no worker: one gave up on it (see worker_error); queue it.
        Request::Continue { .. } if !state.status.is_terminal() && !state.interrupted => Ok(state),
        req => crate::lifecycle::reopen_for(&env, state, &req),
    }
    // What the run's state does not allow is a conflict, not a bad request.
    .map_err(|e| {
        let mut e = ApiError::from(e).status_if(400, 409);
        if e.status == 409 {
            e.hint = Some(format!("GET /runs/{id} shows its status and open question; POST /runs starts a new run"));
        }
        e
    })?;
    drop(env);
    drop(session);
    ticket.push(id);
    Ok(state)
}

/// At start: runs this server started that had not finished are queued again (or, with
/// `--no-resume`, marked interrupted); records of runs that were never created are removed.
pub fn recover(shared: &Shared, resume: bool) -> Result<()> {
    let Ok(rd) = records_dir(shared).read_dir_utf8() else { return Ok(()) };
    let mut ids: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().strip_suffix(".json").map(String::from))
        .filter(|id| valid_id(id))
        .collect();
    ids.sort();
    for id in ids {
        let ws = run_ws(shared, &id);
        if !ws.has_run() {
            let _ = std::fs::remove_file(record_path(shared, &id));
            continue;
        }
        let mut state = match ws.load_state() {
            Ok(s) => s,
            Err(e) => {
                shared.printer.warn(&format!("run {id}: {}", e.message));
                continue;
            }
        };
        // A run the server was driving when a signal stopped it goes on as an unfinished one.
        let record = load_record(shared, &id).ok().flatten();
        let by_signal = record.as_ref().and_then(|r| r.interrupted_by.clone());
        if state.status.is_terminal() || (state.interrupted && (by_signal.is_none() || !resume)) {
            continue;
        }
        if let (Some(sig), Some(mut rec)) = (by_signal, record) {
            let session = ws.lock(None)?;
            state.interrupted = false;
            session.save_state(&state)?;
            rec.interrupted_by = None;
            save_record(shared, &rec)?;
            shared.log(&format!("run {id} was interrupted by {sig}; queued to go on"));
            shared.queue.push(&id);
            continue;
        }
        if resume {
            shared.log(&format!("run {id} was unfinished; queued to go on"));
            shared.queue.push(&id);
        } else {
            let session = ws.lock(None)?;
            state.interrupted = true;
            session.save_state(&state)?;
            shared.log(&format!("run {id} was unfinished; marked interrupted (POST /runs/{id}/continue goes on)"));
        }
    }
    Ok(())
}
