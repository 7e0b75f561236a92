//! The runs `serve` executes: each is a workspace `<root>/runs/<id>/` (the layout of event mode
//! and `runs`), created and driven with the same library code as `agentloop run`.
//!
//! A run's configuration is the root's, as for `agentloop -w ROOT run` (user config, the root's
//! agentloop.yaml, an agent profile from `<root>/agents/`, `AGENTLOOP_*`, the server's flags),
//! with relative paths taken from the root and `<root>/skills` among the skill folders. A request
//! adds two things only: the agent profile to use, and budgets that may narrow the limits, never
//! widen them. They are kept in `<root>/.agentloop-serve/<id>.json` (outside every run's folder,
//! so no tool of a run can change them) and applied again whenever the run is driven, so a
//! restarted server drives the run with the same limits.
//!
//! Any run the server lists can be answered and continued, whichever door started it: one under
//! `runs/` that event mode, a queue worker or `agentloop -w ROOT/runs/ID` made, and the root's own
//! run that `agentloop -w ROOT run` (a cron job) made. Such a run gets its record when it is first
//! answered or continued, derived from its state: its agent, and no budgets but those the request
//! gives. The run's workspace lock decides who may advance it: a run another process holds (a
//! command going on in its folder) is a 409 that says so, never waited for by a request. The
//! root's own run is advanced under the root's lock, which the server holds for its life (so no
//! other process can advance it while the server is up).
//!
//! Invariant: a run is driven or reopened only with its workspace's lock held ([`Held`]).

use super::http::{ApiError, ApiResult};
use super::queue::Ticket;
use super::Shared;
use agentloop_config::config::Resolved;
use agentloop_engine::lifecycle::Request;
use agentloop_engine::phases::{self, Env};
use agentloop_io::output::Printer;
use agentloop_types::error::{Error, Kind, Result};
use agentloop_types::run_id::RunId;
use agentloop_workspace::workspace::{Session, State, StopKind, Workspace};
use camino::Utf8PathBuf;
use serde_json::{json, Value};

/// How long a worker waits for a run's lock held by someone else, unless --wait says.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

pub use agentloop_types::budget::Budgets;

/// What a request asked for a run, kept for its life: the one record every door keeps.
pub use agentloop_engine::runs_root::{Door, RunRecord};

/// A request to start a run (POST /runs), already validated.
pub struct NewRun {
    pub goal: String,
    pub context: String,
    pub agent: Option<String>,
    pub budgets: Budgets,
    pub force: bool,
    /// The JSON Schema the run's final output must match.
    pub output_schema: Option<Value>,
    /// The named session the run is the next turn of (a valid session name).
    pub session: Option<String>,
}

/// Marks a served run interrupted by `signal` (the signal watcher calls it): its record first
/// (what the next start reads), then state.json (what lists show), each replaced atomically. A
/// run no longer going is left as it is. Returns the message for stderr.
fn mark_served(ws: &camino::Utf8Path, record: &camino::Utf8Path, signal: &str) -> String {
    let read = |p: &camino::Utf8Path| {
        agentloop_io::fs::read_optional(p).ok().flatten().and_then(|t| serde_json::from_str::<Value>(&t).ok())
    };
    let id = ws.file_name().unwrap_or(ws.as_str()).to_string();
    let workspace = Workspace::new(ws.to_owned());
    let Ok(state) = workspace.load_state() else {
        return format!("interrupted: run {id} (its state could not be read)");
    };
    if state.status != agentloop_workspace::workspace::Status::Running {
        return format!("interrupted: run {id} had just stopped; nothing to mark");
    }
    let step = state.step;
    let mut marked = true;
    // The record is serve's own file; only its one key is set here.
    if let Some(mut rec) = read(record) {
        rec["interrupted_by"] = Value::from(signal);
        let text = agentloop_types::json::to_string_pretty(&rec) + "\n";
        marked &= agentloop_io::fs::write_atomic(record, text.as_bytes()).is_ok();
    }
    marked &= workspace.mark_interrupted(state).is_ok();
    if marked {
        format!(
            "interrupted: run {id} at step {step} is marked interrupted; every committed phase is kept and the next \
             `agentloop serve` on this root goes on with it"
        )
    } else {
        format!("interrupted: run {id} at step {step}; it could not be marked, and the next `agentloop serve` goes on with it")
    }
}

fn record_path(shared: &Shared, id: &str) -> Utf8PathBuf {
    agentloop_engine::runs_root::record_path(&shared.root, id)
}

pub fn load_record(shared: &Shared, id: &str) -> Result<Option<RunRecord>> {
    agentloop_engine::runs_root::load_record(&shared.root, id)
}

/// The record of a run another door started (the CLI, a queue worker, event mode): its agent,
/// and no budgets of a request's (the limits it recorded stay in force).
fn derived(state: &State) -> RunRecord {
    RunRecord::new(&state.run_id, Door::Serve, state.agent.clone(), Budgets::default())
}

/// A run's workspace lock, held: its own (`runs/<id>/`), or the root's, which the server holds
/// for its life and lends to whoever advances the root's own run.
pub enum Held<'a> {
    Own(Session),
    Root(std::sync::MutexGuard<'a, Session>),
}

impl std::ops::Deref for Held<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        match self {
            Held::Own(s) => s,
            Held::Root(g) => g,
        }
    }
}

impl Held<'_> {
    /// What the commits wrote made durable: the root's session is never dropped while the
    /// server runs, so its checkpoint is taken here; a run's own is taken when it is dropped.
    fn checkpoint(&self) -> Result<()> {
        match self {
            Held::Own(_) => Ok(()),
            Held::Root(g) => g.checkpoint(),
        }
    }
}

/// Takes the lock of run `id`'s workspace `ws`. The root's own run: the server's root lock,
/// waited for only with `wait` (a worker), else refused when a worker holds it. A run's own
/// folder: its lock, waited for up to `wait`; held by another process, the refusal
/// ([`Kind::LockBusy`]) says the run is being advanced elsewhere.
fn hold<'a>(shared: &'a Shared, ws: &Workspace, id: &str, wait: Option<std::time::Duration>) -> Result<Held<'a>> {
    if ws.root == shared.root {
        use std::sync::TryLockError;
        let guard = match shared.root_lock.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) if wait.is_some() => {
                shared.root_lock.lock().unwrap_or_else(|p| p.into_inner())
            }
            Err(TryLockError::WouldBlock) => {
                return Err(Error::new(
                    Kind::LockBusy,
                    format!("run {id} is being advanced by a worker of this server"),
                )
                .with_hint(format!("GET /runs/{id} shows where it is")))
            }
        };
        return Ok(Held::Root(guard));
    }
    ws.lock(wait).map(Held::Own).map_err(|e| match e.kind {
        Kind::LockBusy => {
            Error { message: format!("run {id} is being advanced elsewhere: {}", e.message), hints: Vec::new(), ..e }
                .with_hint(format!(
                    "wait for that command to finish (GET /runs/{id} shows the run as it goes), then try again"
                ))
        }
        _ => e,
    })
}

/// The folder of run `id` as a worker enters it: `runs/<id>/` (one `O_NOFOLLOW` open at a
/// time), or the root for the root's own run.
fn folder(shared: &Shared, id: &str) -> Result<Workspace> {
    let ws = run_ws(shared, id);
    if !is_link(&ws.root) && !ws.has_run() && is_current(shared, id) {
        return Ok(Workspace::new(shared.root.clone()));
    }
    entered(shared, id, false)
}

/// The addresses of a run's status, trace, events, report, answer and continue.
pub fn links(id: &str) -> Value {
    json!({
        "self": format!("/runs/{id}"), "trace": format!("/runs/{id}/trace"),
        "events": format!("/runs/{id}/trace?follow=1"), "report": format!("/runs/{id}/report"),
        "answer": format!("/runs/{id}/answer"), "continue": format!("/runs/{id}/continue"),
    })
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
    agentloop_engine::runs_root::enter(&shared.root, &shared.runs_dir, id, create)
}

/// Whether `id` is the root's own run (one `agentloop -w ROOT run` made), which the server
/// lists and serves as `agentloop -w ROOT runs` lists it, and drives once it is answered or
/// continued here.
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
    agentloop_engine::runs_root::config(&shared.global, &shared.root, agent, b, strict)
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
    let resolved = agentloop_engine::runs_root::new_run_config(
        &shared.global,
        &shared.root,
        new.agent.as_deref(),
        &new.budgets,
        new.output_schema.as_ref(),
    )?;
    let cfg = &resolved.config;
    let mut id = RunId::generate().into_string();
    while run_ws(shared, &id).root.exists() || record_path(shared, &id).exists() || is_current(shared, &id) {
        id = RunId::generate().into_string();
    }
    // A session's next turn has its earlier turns as context, as `run --session` gives them:
    // every run of the root's history (the root's own and those under runs/) of that session.
    let background = match &new.session {
        Some(name) => {
            let root = Workspace::new(shared.root.clone());
            agentloop_engine::lifecycle::with_conversation(&root, &shared.runs_dir, name, &new.context)
        }
        None => new.context.clone(),
    };
    let start = agentloop_engine::lifecycle::Start {
        goal: new.goal.clone(),
        background,
        carry: false,
        force: new.force,
        slot: None,
        follow_up: new.session.is_some(),
        session: new.session.clone(),
    };
    // The one admission every door makes (key, rest, negotiation), before anything is made.
    let unmade = run_ws(shared, &id);
    let env = agentloop_engine::lifecycle::admit(&unmade, cfg, quiet(), Some(&start))?;
    // runs/ and runs/<id>/ are entered (and made) without following a link.
    let ws = entered(shared, &id, true)?;
    // The record first: a run without one would never be driven; a record without a run (a
    // crash in between) is ignored and removed at the next start.
    let record = RunRecord::new(&id, Door::Serve, new.agent, new.budgets);
    save_record(shared, &record)?;
    let session = ws.lock(None)?;
    let tags = phases::init::Tags { slot: None, session: start.session.as_deref(), judged: env.values_judged.as_ref() };
    phases::init::init_tagged(&session, cfg, &env.tpl, &new.goal, &start.background, id.clone(), tags)?;
    drop(session);
    ticket.push(&id);
    Ok(id)
}

/// Writes a run's record (durably: a run is driven only with one).
fn save_record(shared: &Shared, record: &RunRecord) -> Result<()> {
    agentloop_engine::runs_root::save_record(&shared.root, record)
}

/// A worker drives a run until it stops (done, escalated, a budget) or fails: one under `runs/`,
/// or the root's own, with its record (or, for a run another door started, one derived from its
/// state).
pub fn drive(shared: &Shared, id: &str) -> Result<Option<StopKind>> {
    let ws = folder(shared, id)?;
    // Someone may be working on the run with a command that locks; the worker waits a while
    // (--wait SECS, else 30 s), then gives up on it (POST continue queues it again).
    let wait = shared.global.wait.map(std::time::Duration::from_secs).unwrap_or(LOCK_WAIT);
    let session = hold(shared, &ws, id, Some(wait))?;
    let mut state = ws.load_state()?;
    if state.run_id != id {
        return Err(Error::usage(format!("run {id} is no longer in {}", ws.root)));
    }
    if state.status.is_terminal() || state.interrupted {
        return Ok(None);
    }
    let record = load_record(shared, id)?.unwrap_or_else(|| derived(&state));
    let resolved = config(shared, record.agent.as_deref(), &record.budgets, false)?;
    let mut env = Env::with(&ws, &resolved.config, quiet())?;
    env.hold(&session);
    // Known to the signal watcher while it goes on: a stopped server marks it interrupted.
    let (at, record) = (ws.root.clone(), record_path(shared, id));
    let _running =
        agentloop_tools::interrupt::run_marked_by(&ws.root, Box::new(move |signal| mark_served(&at, &record, signal)));
    let started = state.step == 0 && state.reframes == 0 && state.usage.total() == 0;
    shared.log(&format!("run {id} {}", if started { "started" } else { "goes on" }));
    let stop = agentloop_engine::lifecycle::go_on(
        &mut env,
        &mut state,
        &resolved.sources,
        started,
        true,
        crate::commands::modes::AUTO,
    );
    drop(env);
    session.checkpoint()?;
    let stop = stop?;
    shared.log(&format!("run {id} {}: {}", state.status.as_str(), state.reason.clone().unwrap_or_default()));
    Ok(Some(stop))
}

/// Reopens a stopped run (answer its question, or continue it) and queues it again. A run
/// still going that no worker holds (a worker gave up on it, e.g. its lock was taken) is
/// queued as it is by a continue. A run without a record (another door started it) gets one
/// here, derived from its state. The run's lock is waited for a moment (a status read checks a
/// lock by holding it that long, [`Workspace::lock_free`]): a run another process is advancing
/// is a 409 saying so.
pub fn reopen(shared: &Shared, id: &str, how: Request, ticket: Ticket, budgets: Option<Budgets>) -> ApiResult<State> {
    let ws = existing(shared, id)?;
    if shared.queue.place(id).is_some() {
        return Err(
            ApiError::new(409, format!("run {id} is queued or running")).hint("GET /runs/{id} shows where it is")
        );
    }
    // The root's own run is refused at once while a worker of this server holds it.
    let moment = (ws.root != shared.root).then(|| std::time::Duration::from_secs(2));
    let session = hold(shared, &ws, id, moment)?;
    let state = ws.load_state()?;
    let kept = load_record(shared, id)?;
    // A run another door started (or whose record predates them) is taken on: the server
    // drives it from now on, with its record's agent and budgets.
    let derived_now = !kept.as_ref().is_some_and(RunRecord::served);
    let mut record = kept.unwrap_or_else(|| derived(&state));
    record.door = Some(Door::Serve);
    // New budgets replace the recorded ones they name, each held to the server's limits.
    if let Some(b) = &budgets {
        record.budgets = record.budgets.replaced_by(b);
    }
    let strict = budgets.is_some();
    let resolved = config(shared, record.agent.as_deref(), &record.budgets, strict)?;
    if let (Request::Continue { .. }, true) = (&how, state.status.is_terminal() || state.interrupted) {
        let now = state.limits.in_force(&resolved.config, &resolved.sources);
        if let Some((b, e)) = agentloop_engine::lifecycle::still_over(&ws, &state, &now) {
            let most = config(shared, record.agent.as_deref(), &Budgets::default(), false)?;
            let offer = super::raise::offer(
                &ws,
                &state,
                now,
                agentloop_workspace::workspace::Limits::from_config(&most.config),
            );
            let (hint, form_hint) = super::raise::fix(b, &state, &offer);
            return Err(ApiError::new(409, e.detail()).hint(hint).form_hint(form_hint));
        }
    }
    let mut env = Env::with(&ws, &resolved.config, quiet())?;
    env.hold(&session);
    let state = match how {
        // Still going but held by no worker: one gave up on it (see worker_error); queue it.
        Request::Continue { .. } if !state.status.is_terminal() && !state.interrupted => Ok(state),
        req => agentloop_engine::lifecycle::reopen_for(&env, state, &req),
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
    session.checkpoint()?;
    // Kept once the run is reopened: a refused request leaves no record behind.
    if strict || derived_now {
        save_record(shared, &record)?;
    }
    drop(session);
    ticket.push(id);
    Ok(state)
}

/// What a continue of run `id` (state `s`, in `ws`) can ask for: the limits it runs under when
/// it raises nothing (its record's budgets over the server's configuration, as [`reopen`]
/// applies them), the most this server allows it, and the values that let it go on. None when
/// the configuration cannot be read (the page then offers the run's own limits).
pub fn offer(shared: &Shared, id: &str, ws: &Workspace, s: &State) -> Option<super::raise::Offer> {
    let record = load_record(shared, id).ok().flatten().unwrap_or_else(|| derived(s));
    let now = config(shared, record.agent.as_deref(), &record.budgets, false).ok()?;
    let most = config(shared, record.agent.as_deref(), &Budgets::default(), false).ok()?;
    let most = agentloop_workspace::workspace::Limits::from_config(&most.config);
    Some(super::raise::offer(ws, s, s.limits.in_force(&now.config, &now.sources), most))
}

/// At start: runs this server started that had not finished are queued again (or, with
/// `--no-resume`, marked interrupted); records of runs that were never created are removed.
pub fn recover(shared: &Shared, resume: bool) -> Result<()> {
    for id in agentloop_engine::runs_root::record_ids(&shared.root) {
        // Only the runs this server drives: the others are their own doors' to go on with.
        if !load_record(shared, &id).ok().flatten().is_some_and(|r| r.served()) {
            continue;
        }
        // The root's own run has a record once it was answered or continued here.
        let ws = match run_ws(shared, &id) {
            ws if ws.has_run() => ws,
            _ if is_current(shared, &id) => Workspace::new(shared.root.clone()),
            _ => {
                agentloop_engine::runs_root::remove_record(&shared.root, &id);
                continue;
            }
        };
        let mut state = match ws.load_state() {
            Ok(s) => s,
            Err(e) => {
                shared.printer.warn(&format!("run {id}: {}", e.detail()));
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
            let session = hold(shared, &ws, &id, None)?;
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
            let session = hold(shared, &ws, &id, None)?;
            state.interrupted = true;
            session.save_state(&state)?;
            shared.log(&format!("run {id} was unfinished; marked interrupted (POST /runs/{id}/continue goes on)"));
        }
    }
    Ok(())
}
