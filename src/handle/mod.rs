//! Event mode: one turn per invocation, speaking Ductile plugin protocol v2.
//!
//! Input is one request on stdin (a protocol v2 request or a bare event), read once into the
//! types of [`agentloop_engine::schema::handle`] (a field of the wrong type is refused naming its path, an
//! event's payload read by its type); output is exactly one
//! JSON response on stdout: `status` ok|error, `result` (a non-empty summary), `error`, `retry`,
//! `events`, `state_updates` (one `run:<run_id>` key per run the turn changed, and the last run's
//! summary keys; none when no run changed) and `logs`. `poll` sweeps runs whose requested tool
//! is overdue (see `sweep`). Diagnostics
//! go to stderr. The exit code is 0 whenever a response was written, 78 for configuration
//! errors that must never be retried.
//!
//! Turn rules (validated in the seed's order for results): unknown run → ignore + warn;
//! terminal run → ignore; step lower than pending → stale or duplicate, ignore; step higher →
//! escalate; tool mismatch → escalate; status error → re-issue the same step (attempt + 1) or
//! escalate when `handle.tool_retries` is spent; ok → reflect, plan, and run local tools until
//! an external tool is pending (emit `agentic.tool_request.<tool>`) or the run ends (emit
//! exactly one `agent.completed` / `agent.escalated`). `pending_step`/`pending_tool` are
//! committed to state.json before a request is emitted. Redelivering an event changes nothing.

pub mod command;
mod jobs;

use agentloop_config::config::Config;
use agentloop_engine::phases::run::{Door, Driven};
use agentloop_engine::phases::{self, act, Env, PhaseEnd};
use agentloop_engine::schema::handle::{
    payload, Command, EventKind, HandleRequest, RequestError, RequestEvent, StartPayload, ToolResultPayload,
};
use agentloop_engine::schema::{HandleStatus, LogLevel};
use agentloop_engine::settings::Global;
use agentloop_io::output::Printer;
use agentloop_types::error::ResultExt;
use agentloop_types::error::{code, Error, Kind, Result};
use agentloop_types::tool_spec::{ToolResult, ToolStatus};
use agentloop_workspace::markdown::NextAction;
use agentloop_workspace::workspace::{Commit, Next, Session, State, Status, StopKind, Workspace};
use camino::{Utf8Path, Utf8PathBuf};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

mod progress;
mod protocol;
mod start_config;
use protocol::{decode_result, fail, request_event, request_layer, snapshot, widening_key, Decoded, Response};
use start_config::start_config;

/// Largest request `handle` reads (documented in docs/TOOLS.md, Security model).
pub const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// Entry point: always writes one response; returns the exit code.
pub fn main(g: &Global) -> Result<u8> {
    let printer = Printer { quiet: true, ..Printer::new(true, g.verbose, false, g.color) };
    let mut input = String::new();
    let mut resp = Response { status: HandleStatus::Ok, ..Default::default() };
    // A request is read up to MAX_REQUEST_BYTES: a larger one is refused without being held
    // in memory whole.
    let read = std::io::Read::read_to_string(
        &mut std::io::Read::take(std::io::stdin(), MAX_REQUEST_BYTES as u64 + 1),
        &mut input,
    );
    let exit = match read {
        Err(e) => {
            fail(&mut resp, format!("cannot read the request from stdin: {e}"), false);
            0
        }
        Ok(n) if n > MAX_REQUEST_BYTES => {
            fail(
                &mut resp,
                format!("the request is larger than {MAX_REQUEST_BYTES} bytes; agentloop refuses it"),
                false,
            );
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            0
        }
        // A bug must still leave the router one valid response.
        Ok(_) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| turn(g, &input, &mut resp))) {
            Ok(code) => code,
            Err(_) => {
                resp = Response { status: HandleStatus::Ok, ..Default::default() };
                fail(&mut resp, "internal error while handling the event (see stderr)".into(), true);
                0
            }
        },
    };
    let answer = resp.to_json();
    // Kept before it is written: a router that loses this answer gets it again on its retry.
    if let Some((root, job)) = &resp.job {
        if let Err(e) = jobs::keep(root, job, &answer) {
            agentloop_io::output::stderr_line(&format!(
                "agentloop handle: warn: the answer of job {job} was not kept: {e}"
            ));
        }
    }
    printer.outln(&answer.to_string());
    Ok(exit)
}

/// A request (or payload) that cannot be read, as a turn's error: never retried, since the
/// same request fails the same way.
fn unreadable(e: RequestError) -> Error {
    Error::usage(e.to_string()).with_source(e)
}

/// How a turn's error is answered: a configuration error is never retried (78); a failure
/// after the model client's own retries — a provider outage, a busy lock — is the router's to
/// retry (its backoff and circuit breaker), and the run stays where the turn stopped.
fn answer_error(e: Error, resp: &mut Response) -> u8 {
    resp.causes = e.causes();
    resp.hints = e.hints.clone();
    if e.kind == Kind::Config {
        return fail_config(resp, e);
    }
    let retry = matches!(e.kind, Kind::Failure | Kind::LockBusy | Kind::Provider);
    fail(resp, e.detail(), retry);
    0
}

fn turn(g: &Global, input: &str, resp: &mut Response) -> u8 {
    // Read once, into the protocol's types; a field of the wrong type is answered naming it.
    let mut req = match HandleRequest::parse(input) {
        Ok(r) => r,
        Err(e) => {
            fail(resp, e.to_string(), false);
            return 0;
        }
    };
    let (event, at) = req.take_event();
    let command = req.command.clone().unwrap_or(Command::Handle);
    // What the router's state knows of the runs (a lost run's escalation and the bounded
    // state read it); only the runs this turn changes are written back.
    if let Some(state) = &req.state {
        if let Err(e) = resp.read_state(state) {
            fail(resp, e.to_string(), false);
            return 0;
        }
    }
    // Absolute, so paths in the root config resolve the same from every run's workspace; the
    // folder itself is created only when a run starts (health and garbage change nothing).
    let root = std::path::absolute(&g.workspace)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .unwrap_or_else(|| g.workspace.clone());
    let (cfg, sources) = match turn_config(g, &req, &root) {
        Ok(r) => (r.config, r.sources),
        Err(e) => return fail_config(resp, e),
    };
    match command {
        Command::Health => return answer_health(&cfg, &root, resp),
        Command::Poll => {
            let swept = sweep(&cfg, &root, resp);
            resp.keep_finished(cfg.handle.keep_finished);
            return swept.map_or_else(|e| answer_error(e, resp), |()| 0);
        }
        // A job delivered again whose first answer was kept: that answer, events and all.
        Command::Handle if req.job_id.as_deref().is_some_and(|j| !j.is_empty()) && replayed(&root, &req, resp) => {
            return 0
        }
        Command::Handle => match progress::Progress::new(&cfg.handle) {
            Ok(p) => resp.progress = p,
            Err(e) => return fail_config(resp, e),
        },
        Command::Other(other) => {
            fail(resp, format!("unknown command `{other}`; expected {}", Command::listed()), false);
            return 0;
        }
    }
    if let Some(dl) = req.deadline_at.as_deref().and_then(agentloop_types::clock::parse_rfc3339) {
        if dl < agentloop_types::clock::now() && !agentloop_types::clock::is_fixed() {
            fail(resp, "the job's deadline_at has already passed".into(), true);
            return 0;
        }
    }
    if let Some(job) = req.job_id.clone().filter(|j| !j.is_empty()) {
        resp.job = Some((root.clone(), job));
    }
    let result = on_event(&cfg, &sources, &root, &req, &event, at, resp);
    if let Some(p) = resp.progress.take() {
        p.finish();
    }
    resp.keep_finished(cfg.handle.keep_finished);
    result.map_or_else(|e| answer_error(e, resp), |()| 0)
}

/// Whether the request's job was answered before (its answer kept, [`jobs`]): then `resp` is
/// that answer again.
fn replayed(root: &Utf8Path, req: &HandleRequest, resp: &mut Response) -> bool {
    let Some(job) = req.job_id.as_deref() else { return false };
    let Some(answer) = jobs::kept(root, job) else { return false };
    agentloop_io::output::stderr_line(&format!(
        "agentloop handle: info: job {job} was answered before (its answer was lost on the way?); the same answer again"
    ));
    resp.replay = Some(answer);
    true
}

/// `health`: the root exists and is a folder this process can write, and the provider can be
/// reached with what the configuration gives (its key among them); the answer names the runs
/// folder on success.
fn answer_health(cfg: &Config, root: &Utf8Path, resp: &mut Response) -> u8 {
    let health = || -> Result<Utf8PathBuf> {
        if !root.is_dir() {
            return Err(Error::config(format!("the root {root} does not exist or is not a folder"))
                .with_hint("create it, or point the plugin's -w (workspace_dir) at an existing folder"));
        }
        let probe = root.join(format!(".agentloop-health-{}", std::process::id()));
        agentloop_io::fs::write_atomic(&probe, b"ok\n").map_err(|e| {
            Error::config(format!("the root {root} is not writable"))
                .with_hint("give the plugin's user write access to it")
                .with_source(e)
        })?;
        let _ = std::fs::remove_file(&probe);
        agentloop_model::model::from_config(cfg, root).map_err(|e| {
            let hint = e.hint().unwrap_or("set the provider's key in the plugin's environment").to_string();
            Error::config("the provider cannot be used").with_hint(hint).with_source(e)
        })?;
        Ok(root.join(&cfg.handle.runs_dir))
    };
    match health() {
        Ok(runs) => {
            resp.result = format!("agentloop {} healthy; runs under {runs}", env!("CARGO_PKG_VERSION"));
            0
        }
        Err(e) => {
            let msg = config_error(e, resp);
            fail(resp, format!("unhealthy: {msg}"), false);
            code::HANDLE_CONFIG
        }
    }
}

/// A configuration error answered: never retried, with its fix (a router shows only this
/// text), exit 78.
fn fail_config(resp: &mut Response, e: Error) -> u8 {
    let msg = config_error(e, resp);
    fail(resp, msg, false);
    code::HANDLE_CONFIG
}

/// A configuration error as the response says it: the message, and the fix when there is one
/// (a router shows only this text); its causes and hints go on `resp` as data too.
fn config_error(e: Error, resp: &mut Response) -> String {
    resp.causes = e.causes();
    resp.hints = e.hints.clone();
    match e.hint() {
        Some(h) => format!("configuration error: {}; {h}", e.detail()),
        None => format!("configuration error: {}", e.detail()),
    }
}

/// The turn's configuration: the root's, narrowed by the request's own `config` (which may
/// not widen it), or with `handle.trust_request_config` in the root's own configuration, the
/// request's `config` over it as written; with where each key came from. An error is a
/// configuration error, a router's exit 78.
fn turn_config(g: &Global, req: &HandleRequest, root: &Utf8PathBuf) -> Result<agentloop_config::config::Resolved> {
    let request_cfg = req.config.as_ref().map(request_layer).transpose()?;
    if let Some(layer) = &request_cfg {
        // The request may only narrow what the root's own configuration allows, unless that
        // configuration says the requests' `config` is the operator's own.
        let base = agentloop_engine::settings::resolve_under(g, root, None)?;
        // `base` has no request in it: only the root's own files, environment and flags (a
        // root from elsewhere cannot set this key, see `trust`) can say so.
        if base.config.handle.trust_request_config {
            return agentloop_engine::settings::resolve_under(g, root, request_cfg);
        }
        if let Some((key, why)) = widening_key(layer, &base, root) {
            let refused = Error::config(format!("the request's config may not set `{key}`: {why}"));
            return Err(refused.with_hint(match agentloop_types::budget::Budget::from_key(&key) {
                Some(b) => format!(
                    "a request may only narrow a limit: give `config.{key}` at most {}, or raise it in the root's agentloop.yaml",
                    base.config.limit(b)
                ),
                None => "set it in the root's agentloop.yaml".into(),
            }));
        }
    }
    agentloop_engine::settings::resolve_under(g, root, request_cfg)
}

/// What the event asks for: start a run, resume one with a tool's result, or nothing. `at` is
/// where the event's fields are in the request (`event.`, or nothing for a bare event).
fn on_event(
    cfg: &Config,
    sources: &agentloop_config::config::Sources,
    root: &Utf8PathBuf,
    req: &HandleRequest,
    event: &RequestEvent,
    at: &str,
    resp: &mut Response,
) -> Result<()> {
    let ty = event.kind.clone().unwrap_or_else(|| EventKind::named(""));
    let at = format!("{at}payload");
    match ty {
        EventKind::Start | EventKind::Trigger => {
            let p: StartPayload = payload(event.payload.as_ref(), &at).map_err(unreadable)?;
            start(cfg, sources, root, &start_keys(req, event), &p, resp)
        }
        EventKind::ToolResult => resume(cfg, root, &payload(event.payload.as_ref(), &at).map_err(unreadable)?, resp),
        EventKind::Other(t) if t.is_empty() => Err(Error::usage("the event has no `type`")),
        EventKind::Other(ty) => match req.context.as_ref().filter(|c| c.run_id.is_some()) {
            // A tool's own event resuming the run (`fetch.completed`, `ductile.step.succeeded`):
            // correlation comes from the request context, where the pipeline's `baggage` put the
            // request's run_id, step and tool. Ductile merges that context and its own control
            // keys into the payload; the model sees only the plugin's content.
            Some(ctx) => {
                let raw = event.payload.clone().unwrap_or(Value::Null);
                let content = agentloop_tools::ductile::plugin_content(&raw, Some(&ctx.to_value()));
                // The plugin's own `status` when it gives one as text (ok when it gives none),
                // and its `error`; any other `status` (an HTTP code) leaves the default to `error`.
                let status = match content.get("status") {
                    None => Some(ToolStatus::Ok.to_string()),
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(_) => None,
                };
                let synthesized = ToolResultPayload {
                    run_id: ctx.run_id.clone(),
                    step: ctx.step.clone(),
                    tool: ctx.tool.clone(),
                    status,
                    error: content.get("error").filter(|e| !e.is_null()).cloned(),
                    result: Some(content),
                };
                resp.log(LogLevel::Info, format!("resuming from `{ty}` with correlation from the request context"));
                resume(cfg, root, &synthesized, resp)
            }
            None => {
                resp.log(
                    LogLevel::Warn,
                    format!("ignored event `{ty}`: not {}, and no run in the context", EventKind::listed()),
                );
                resp.result = format!("ignored event `{ty}`");
                Ok(())
            }
        },
    }
}

/// Phases of a turn print nothing: stdout belongs to the protocol response.
fn quiet() -> Printer {
    Printer { quiet: true, ..Default::default() }
}

/// A phase environment for one turn, committing through the run's lock `session`.
fn turn_env<'a>(session: &'a Session, cfg: &'a Config) -> Result<Env<'a>> {
    Ok(held(Env::with(session.workspace(), cfg, quiet())?, session))
}

/// `env` committing through `session`. An outage is the router's to retry, a bounded number of
/// times: a provider that keeps failing (a revoked key, a model that is gone) then ends the run
/// as `run` would, so the run still ends once the router has given up retrying.
fn held<'a>(mut env: Env<'a>, session: &'a Session) -> Env<'a> {
    env.hold(session);
    env.provider_failure_resumable = outages(session.workspace()) < OUTAGE_TURNS;
    env
}

/// Turns in a row a run's model calls may fail in before the next failure ends the run.
const OUTAGE_TURNS: u32 = 3;
/// The run's count of turns in a row that ended in a provider failure.
const OUTAGES: &str = ".agentloop-handle-outages";

fn outages(ws: &Workspace) -> u32 {
    agentloop_io::fs::read_optional(&ws.root.join(OUTAGES))
        .ok()
        .flatten()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

/// Counts a phase that ended in a resumable provider failure; a phase that ran clears the count.
fn outage_counted<T>(env: &Env, r: Result<T>) -> Result<T> {
    let path = env.ws.root.join(OUTAGES);
    match &r {
        Err(e) if e.kind == Kind::Provider && env.provider_failure_resumable => {
            agentloop_io::fs::write_atomic(&path, (outages(env.ws) + 1).to_string().as_bytes())?;
        }
        Ok(_) if path.exists() => std::fs::remove_file(&path).context(format!("cannot remove {path}"))?,
        _ => {}
    }
    r
}

fn run_ws(cfg: &Config, root: &Utf8PathBuf, run_id: &str) -> Result<Workspace> {
    agentloop_types::run_id::RunId::parse(run_id)?;
    let runs = Utf8PathBuf::from(&cfg.handle.runs_dir);
    if runs.is_absolute() || runs.components().any(|c| !matches!(c, camino::Utf8Component::Normal(_))) {
        return Err(Error::config(format!(
            "invalid configuration at key `handle.runs_dir`: `{runs}` must be a plain folder name under the root"
        )));
    }
    // Never through a link: a symlinked runs folder or run folder is refused (exit 8).
    agentloop_io::fs::Folder::open(root, &runs.join(run_id), false)?;
    Ok(Workspace::new(root.join(runs).join(run_id)))
}

/// The keys that make two deliveries one start, each on its own: the event's `event_id` and
/// `dedupe_key`, and the router's `job_id` (the same across its retries of one job, and the only
/// key an API-triggered start has).
fn start_keys(req: &HandleRequest, event: &RequestEvent) -> Vec<String> {
    // The event's keys as the index has always held them; the job's under a prefix of its own.
    let mut keys: Vec<String> =
        [&event.dedupe_key, &event.event_id].into_iter().flatten().filter(|v| !v.is_empty()).cloned().collect();
    if let Some(job) = req.job_id.as_deref().filter(|v| !v.is_empty()) {
        keys.push(format!("job:{job}"));
    }
    keys
}

/// A start's goal (never empty) and its depth, refused past `ductile.max_depth`: the recursion
/// guard, since a start that agentloop itself requested carries its depth.
fn goal_and_depth<'a>(cfg: &Config, payload: &'a StartPayload) -> Result<(&'a str, u32)> {
    let goal = payload.goal.as_deref().map(str::trim).unwrap_or("");
    if goal.is_empty() {
        return Err(Error::usage("the start event's payload has no `goal`"));
    }
    let depth = payload.agentloop_depth.unwrap_or(0);
    if depth > cfg.ductile.max_depth {
        return Err(Error::usage(format!(
            "recursion guard: this start comes from agentloop itself at depth {depth} ({}), and ductile.max_depth is {}",
            agentloop_tools::ductile::DEPTH_KEY,
            cfg.ductile.max_depth
        )));
    }
    Ok((goal, depth))
}

fn start(
    cfg: &Config,
    sources: &agentloop_config::config::Sources,
    root: &Utf8PathBuf,
    keys: &[String],
    payload: &StartPayload,
    resp: &mut Response,
) -> Result<()> {
    let (goal, depth) = goal_and_depth(cfg, payload)?;
    let (own, budgets) = start_config(cfg, sources, root, payload)?;
    let cfg = own.as_ref().unwrap_or(cfg);
    let background = phases::init::context_text(payload.context.as_ref());
    let admission = agentloop_engine::lifecycle::Start {
        goal: goal.to_string(),
        background: phases::init::format_background(&background),
        carry: false,
        force: false,
        slot: None,
        follow_up: false,
        session: None,
    };
    agentloop_io::fs::create_dir_all(root)?;
    let root_ws = Workspace::new(root.clone());
    let _root_lock = root_ws.lock(Some(std::time::Duration::from_secs(30)))?;
    let mut index = agentloop_engine::runs_root::load_keys(root)?;
    // Redelivery of the same start (any one of its keys) must not create a second run.
    let known = keys.iter().find_map(|k| index.get(k).and_then(Value::as_str).map(|id| (k.clone(), id.to_string())));
    let run_id = match known {
        Some((k, run_id)) if run_ws(cfg, root, &run_id)?.has_run() => {
            name_run(&mut index, root, keys, &run_id)?;
            drop(_root_lock);
            return duplicate_start(cfg, root, &k, &run_id, resp);
        }
        Some((k, run_id)) => restart_unwritten(cfg, root, &k, run_id, resp)?,
        None => new_run_id(cfg, root)?,
    };
    let ws = run_ws(cfg, root, &run_id)?;
    // The one admission every door makes, before anything is written: the provider and its
    // key, the agent's rest, and whether the run can fit its budget (negotiation). A start
    // refused here leaves nothing: no run, no keys.
    let env = agentloop_engine::lifecycle::admit(&ws, cfg, quiet(), Some(&admission))
        .map_err(|e| start_config::refusal_named(e, sources, &budgets))?;
    name_run(&mut index, root, keys, &run_id)?;
    // The run's record, as every door keeps one: another door that goes on with the run
    // (`serve`, `agentloop answer`) holds it to the budgets this start asked for.
    let mut record = agentloop_engine::runs_root::RunRecord::new(
        &run_id,
        agentloop_engine::runs_root::Door::Handle,
        cfg.agent.clone(),
        budgets,
    );
    record.key = keys.first().cloned();
    agentloop_engine::runs_root::save_record(root, &record)?;
    let session = ws.lock(Some(std::time::Duration::from_secs(30)))?;
    agentloop_tools::catalog::copy_seeded(&Workspace::new(root.clone()), &ws)?;
    let mut env = held(env, &session);
    let tags = phases::init::Tags { judged: env.values_judged.as_ref(), ..Default::default() };
    let background = phases::init::format_background(&background);
    let mut state = phases::init::init_tagged(&session, cfg, &env.tpl, goal, &background, run_id.clone(), tags)?;
    state.depth = depth;
    drop(_root_lock);
    env.ensure_skills_md()?;
    resp.log(LogLevel::Info, format!("started run {run_id}"));
    advance(&mut env, &mut state, resp, Turn { started: true, traced: true })
}

/// Records every key of a start as naming `run_id`, before the run's folder exists (and a
/// repeat's new keys name it too), so a delivery stopped at any point is finished by the next,
/// never started twice.
fn name_run(index: &mut Map<String, Value>, root: &Utf8Path, keys: &[String], run_id: &str) -> Result<()> {
    let mut added = false;
    for k in keys {
        if index.get(k).and_then(Value::as_str) != Some(run_id) {
            index.insert(k.clone(), json!(run_id));
            added = true;
        }
    }
    if added {
        agentloop_engine::runs_root::save_keys(root, index)?;
    }
    Ok(())
}

/// The first delivery of a start was stopped before its run was written: the run starts now,
/// under the id its keys already name, in a cleared folder.
fn restart_unwritten(
    cfg: &Config,
    root: &Utf8PathBuf,
    key: &str,
    run_id: String,
    resp: &mut Response,
) -> Result<String> {
    resp.log(LogLevel::Warn, format!("start `{key}`: run {run_id} was never written; starting it"));
    let partial = run_ws(cfg, root, &run_id)?;
    if partial.root.exists() {
        std::fs::remove_dir_all(&partial.root)
            .context(format!("cannot clear the unfinished run folder {}", partial.root))?;
    }
    Ok(run_id)
}

/// A run id no folder under the root has: unique by construction, and under a fixed test clock
/// made unique here.
fn new_run_id(cfg: &Config, root: &Utf8PathBuf) -> Result<String> {
    let mut run_id = agentloop_types::run_id::RunId::generate().into_string();
    while run_ws(cfg, root, &run_id)?.root.exists() {
        run_id = agentloop_types::run_id::RunId::generate().into_string();
    }
    Ok(run_id)
}

/// A redelivered start: ignored, unless the first delivery's turn was cut short, which is
/// then finished (its events carry the same dedupe keys, so a router drops any repeat).
fn duplicate_start(cfg: &Config, root: &Utf8PathBuf, key: &str, run_id: &str, resp: &mut Response) -> Result<()> {
    let ws = run_ws(cfg, root, run_id)?;
    if !ws.has_run() {
        resp.log(LogLevel::Warn, format!("duplicate start `{key}`: run {run_id} has no workspace; ignored"));
        resp.result = format!("duplicate start ignored (run {run_id})");
        return Ok(());
    }
    let session = ws.lock(Some(std::time::Duration::from_secs(30)))?;
    let mut state = ws.load_state()?;
    let waiting = state.next == Next::Act && state.pending.as_ref().is_some_and(|p| !cfg.tools.local.contains(&p.tool));
    if state.status.is_terminal() || waiting {
        resp.log(LogLevel::Info, format!("duplicate start `{key}` ignored (run {run_id})"));
        resp.result = format!("duplicate start ignored; run {run_id} already exists");
        snapshot(&state, resp);
        return Ok(());
    }
    resp.log(LogLevel::Warn, format!("duplicate start `{key}`: run {run_id} was interrupted part-way; continuing it"));
    let mut env = turn_env(&session, cfg)?;
    advance(&mut env, &mut state, resp, Turn { started: false, traced: true })
}

fn resume(cfg: &Config, root: &Utf8PathBuf, p: &ToolResultPayload, resp: &mut Response) -> Result<()> {
    let run_id = p.run_id.clone().unwrap_or_default();
    let ws = match run_ws(cfg, root, &run_id) {
        Ok(ws) if ws.has_run() => ws,
        _ => return lost_run(&run_id, resp),
    };
    let session = ws.lock(Some(std::time::Duration::from_secs(30)))?;
    let mut state = ws.load_state()?;
    resp.last_run_id = Some(state.run_id.clone());
    // The turn joins the run's trace (the start turn's span, kept in state.json) and its span
    // says how the turn left the run, as the start turn's does.
    let span = agentloop_model::model::traced::run_span(cfg, &run_id, state.agent.as_deref(), &mut state.trace_parent);
    let r = resume_locked(cfg, p, &ws, &session, &mut state, resp);
    let left = if state.status.is_terminal() { state.ended_as().as_str() } else { "waiting" };
    span.ended(r.as_ref().map(|_| left));
    r
}

/// [`resume`] once the run is locked and loaded: the result matched to the pending step, then
/// the run driven on.
fn resume_locked(
    cfg: &Config,
    p: &ToolResultPayload,
    ws: &Workspace,
    session: &Session,
    state: &mut State,
    resp: &mut Response,
) -> Result<()> {
    let run_id = state.run_id.clone();
    let mut env = turn_env(session, cfg)?;
    if state.status.is_terminal() {
        let ended = state.status.as_str();
        resp.log(LogLevel::Info, format!("ignored tool result for run {run_id}: the run already ended {ended}"));
        resp.result = format!("ignored: run {run_id} already ended {ended}");
        snapshot(state, resp);
        return Ok(());
    }
    // Only a pending external tool waits for a result; a pending local one means the turn that
    // planned it was cut short before running it.
    let waiting = state.next == Next::Act && state.pending.as_ref().is_some_and(|p| !cfg.tools.local.contains(&p.tool));
    let Some(pending) = state.pending.clone().filter(|_| waiting) else {
        // An earlier turn was interrupted part-way: finish it instead of ignoring the run.
        resp.log(
            LogLevel::Warn,
            format!("run {run_id} was not waiting for a result (an earlier turn was interrupted); continuing it"),
        );
        return advance(&mut env, state, resp, IN_SPAN);
    };
    let step = match correlate(p, &pending, state) {
        Correlation::Step(step) => step,
        Correlation::Ignore(why) => {
            resp.log(LogLevel::Info, format!("ignored {why} for run {run_id}"));
            resp.result = format!("ignored: {why}; run {run_id} waits for step {}", pending.step);
            snapshot(state, resp);
            return Ok(());
        }
        Correlation::Violation(why) => return escalate(&env, state, resp, format!("protocol violation: {why}")),
    };
    let result = decode_result(p);
    let action = NextAction { tool: pending.tool.clone(), args: pending.args.clone() };
    if let Some(error) = &result.error {
        return tool_failed(&env, state, &pending, error, result.output, resp);
    }
    let r = ok_result(ws, cfg, step, &pending.tool, result)?;
    if let PhaseEnd::Stopped(_) = act::record(&env, state, step, &action, r, 0, false)? {
        return done(state, resp);
    }
    advance(&mut env, state, resp, IN_SPAN)
}

/// The pending step's tool failed: request it again (attempt + 1) while `handle.tool_retries`
/// allow, then record the error and escalate the run. A request whose arguments the tool's
/// schema no longer takes (its configuration changed since the first request) is not sent
/// again: the run escalates, saying why.
fn tool_failed(
    env: &Env,
    state: &mut State,
    pending: &agentloop_workspace::workspace::Pending,
    error: &str,
    output: String,
    resp: &mut Response,
) -> Result<()> {
    let step = pending.step;
    let refused = env.registry.check(env.cfg, &pending.tool, &pending.args).err();
    if pending.attempt < env.cfg.handle.tool_retries && refused.is_none() {
        return retry(env, state, pending, step, error, resp);
    }
    let action = NextAction { tool: pending.tool.clone(), args: pending.args.clone() };
    let mut r = ToolResult::err(error.to_string(), false);
    r.output = output;
    act::record(env, state, step, &action, r, 0, false)?;
    if state.status.is_terminal() {
        return done(state, resp);
    }
    let why = match refused {
        Some(e) => format!("tool `{}` failed at step {step} and is not requested again: {e}", pending.tool),
        None => format!(
            "tool `{}` failed at step {step} and its {} retries are spent: {error}",
            pending.tool, env.cfg.handle.tool_retries
        ),
    };
    escalate(env, state, resp, why)
}

/// `poll`: every run under the root whose requested tool has been pending longer than the
/// tool's timeout plus `handle.pending_grace` is treated as if the tool had failed (the router
/// routes nothing for a tool job that ends in error, so no result would ever come). This is the
/// only change `poll` makes; a run a turn is working on right now (its lock held) is left for
/// the next poll.
fn sweep(cfg: &Config, root: &Utf8PathBuf, resp: &mut Response) -> Result<()> {
    let runs_dir = root.join(&cfg.handle.runs_dir);
    let mut ids: Vec<String> = match std::fs::read_dir(&runs_dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect(),
        Err(_) => Vec::new(),
    };
    ids.sort();
    let now = agentloop_types::clock::now();
    let mut swept = Vec::new();
    for id in ids {
        let Ok(ws) = run_ws(cfg, root, &id) else { continue };
        if !ws.has_run() {
            continue;
        }
        // A cheap look first; the decision is taken again under the run's lock.
        let Some(limit) = ws.load_state().ok().and_then(|s| overdue(cfg, &s, now)) else { continue };
        let session = match ws.lock(Some(std::time::Duration::from_millis(200))) {
            Ok(s) => s,
            Err(e) if e.kind == Kind::LockBusy => continue,
            Err(e) => return Err(e),
        };
        let mut state = ws.load_state()?;
        let Some(pending) = state.pending.clone().filter(|_| overdue(cfg, &state, now).is_some()) else {
            continue;
        };
        let env = turn_env(&session, cfg)?;
        let error = format!(
            "no result for step {} from tool `{}` within {}s (the tool's timeout plus handle.pending_grace)",
            pending.step,
            pending.tool,
            limit.as_secs()
        );
        resp.log(LogLevel::Warn, format!("run {id}: {error}"));
        tool_failed(&env, &mut state, &pending, &error, String::new(), resp)?;
        swept.push(format!("{id} step {}", pending.step));
    }
    resp.result = if swept.is_empty() {
        "poll: no run has a step pending past its tool's timeout".into()
    } else {
        format!("poll: treated as failed tool calls: {}", swept.join(", "))
    };
    Ok(())
}

/// When the run waits on an external tool for longer than the tool's timeout plus
/// `handle.pending_grace`: that limit.
fn overdue(cfg: &Config, state: &State, now: std::time::SystemTime) -> Option<std::time::Duration> {
    if state.status.is_terminal() || state.next != Next::Act {
        return None;
    }
    let p = state.pending.as_ref().filter(|p| !cfg.tools.local.contains(&p.tool))?;
    let since = agentloop_types::clock::parse_rfc3339(&p.requested_at)?;
    let limit = cfg.tools.timeout_of(&p.tool) + cfg.handle.pending_grace.0;
    (now.duration_since(since).ok()? > limit).then_some(limit)
}

/// How a tool result relates to the step the run waits for.
enum Correlation {
    Step(u32),
    /// Stale or duplicate: ignored.
    Ignore(String),
    /// Cannot be: the run escalates.
    Violation(String),
}

fn correlate(p: &ToolResultPayload, pending: &agentloop_workspace::workspace::Pending, state: &State) -> Correlation {
    let tool = p.tool.as_deref().unwrap_or("");
    let Some(step) = p.step.as_ref().and_then(agentloop_engine::schema::handle::StepRef::number) else {
        return Correlation::Violation("the tool result has no `step`".into());
    };
    if step < pending.step || state.completed_steps.contains(&step) {
        return Correlation::Ignore(format!(
            "stale or duplicate result for step {step} (pending step {})",
            pending.step
        ));
    }
    if step > pending.step {
        return Correlation::Violation(format!("result for step {step} but step {} is pending", pending.step));
    }
    if agentloop_tools::tools::Registry::canonical(tool) != pending.tool {
        return Correlation::Violation(format!(
            "result from tool `{tool}` but `{}` is pending for step {step}",
            pending.tool
        ));
    }
    Correlation::Step(step)
}

/// The tool failed with retries left: request it again (`act.retry` in the trace).
fn retry(
    env: &Env,
    state: &mut State,
    pending: &agentloop_workspace::workspace::Pending,
    step: u32,
    error: &str,
    resp: &mut Response,
) -> Result<()> {
    let mut next = pending.clone();
    next.attempt += 1;
    next.requested_at = agentloop_types::clock::now_rfc3339();
    state.pending = Some(next.clone());
    let mut e = agentloop_types::trace::Entry::new(
        &state.run_id,
        step,
        agentloop_types::trace::Phase::Act,
        agentloop_types::trace::Event::ActRetry,
    );
    e.tool = Some(pending.tool.clone());
    e.result_status = Some(ToolStatus::Error.into());
    e.error = Some(error.to_string());
    e.retryable = Some(true);
    e.attempt = Some(next.attempt);
    let mut c = Commit::default();
    c.entry(&e);
    c.state = Some(state.clone());
    env.commit(&c)?;
    let run_id = &state.run_id;
    let retries = env.cfg.handle.tool_retries;
    resp.log(
        LogLevel::Warn,
        format!("run {run_id} step {step}: tool error ({error}); retry {} of {retries}", next.attempt),
    );
    resp.events.push(request_event(state, &next, env.cfg));
    resp.result = format!(
        "run {run_id}: step {step} failed ({error}); re-requested {} (attempt {})",
        next.tool,
        next.attempt + 1
    );
    snapshot(state, resp);
    Ok(())
}

/// A successful result as the step's tool result; a large one is spilled to artifacts/.
fn ok_result(ws: &Workspace, cfg: &Config, step: u32, tool: &str, d: Decoded) -> Result<ToolResult> {
    let mut r = ToolResult::ok(d.output, d.value.clone());
    if let Some(path) = d.value.get("artifact_path").and_then(Value::as_str) {
        r.artifacts.push(path.to_string());
    }
    if r.output.chars().count() > cfg.tools.output_cap {
        let full = std::mem::take(&mut r.output);
        let rel = format!("artifacts/step-{step}-{tool}.txt");
        agentloop_io::fs::write_in(&ws.root, Utf8Path::new(&rel), full.as_bytes())?;
        r.output = format!(
            "{}\n\n[output truncated; the full result is in {rel}]",
            full.chars().take(2000).collect::<String>()
        );
        r.artifacts.push(rel);
    }
    Ok(r)
}

/// A result for a run with no workspace. Unknown to the router's state too: ignored with a
/// warning (the seed's rule). Known there as still running: its workspace was lost, so the run
/// can never finish; it is escalated once, from the state alone, so it still ends.
fn lost_run(run_id: &str, resp: &mut Response) -> Result<()> {
    // Only a run id can name a run: a state key holding anything else (control characters, a
    // path) is no run of ours, and goes into no event.
    if !agentloop_types::run_id::RunId::is_valid(run_id) {
        let shown = agentloop_io::output::one_line(run_id);
        resp.log(LogLevel::Warn, format!("ignored tool result for `{shown}`: not a run id"));
        resp.result = "ignored: the tool result's run_id is not a run id".into();
        return Ok(());
    }
    let known = resp.runs.get(run_id).cloned();
    let running = known.as_ref().is_some_and(|r| r.run_status() == Some(Status::Running));
    if !running {
        resp.log(LogLevel::Warn, format!("ignored tool result for unknown run `{run_id}`"));
        resp.result = format!("ignored: unknown run `{run_id}`");
        return Ok(());
    }
    let reason = format!("the workspace of run {run_id} is missing; it cannot be resumed");
    let mut snap = known.unwrap_or_default();
    snap.status = Some(Status::Escalated.as_str().into());
    snap.pending_step = None;
    snap.pending_tool = None;
    snap.updated_at = Some(agentloop_types::clock::now_rfc3339());
    let goal = snap.goal.clone().unwrap_or_default();
    let steps = snap.completed_steps.as_ref().map_or(0, Vec::len);
    resp.set_run(run_id, snap);
    // The same event as any escalated run's, from what the router's state knows.
    let ev = agentloop_engine::schema::CompletionEvent {
        kind: agentloop_types::outcome::Completion::Escalated,
        payload: agentloop_engine::schema::CompletionPayload {
            run_id: run_id.to_string(),
            goal,
            status: agentloop_workspace::workspace::Status::Escalated,
            stop: agentloop_types::outcome::StopKind::Escalated,
            open_question: None,
            reason: Some(reason.clone()),
            outcome: None,
            steps_taken: steps,
            artifacts: vec![],
            usage: Default::default(),
            cost_usd: None,
            output: None,
            ways_on: None,
            key: None,
        },
        dedupe_key: Some(format!("agentic:run:{run_id}:escalated")),
    };
    resp.events.push(routable(ev.to_value()));
    resp.log(LogLevel::Warn, reason.clone());
    resp.result = format!("run {run_id} escalated: {reason}");
    Ok(())
}

/// How a turn drives its run: whether the run began in this turn (its usage starts a run in
/// the rest window's count), and whether the drive opens the run's span (false: the turn holds
/// one already, around the tool result it recorded first).
struct Turn {
    started: bool,
    traced: bool,
}

/// A result turn: the run went on before, and the turn's span is open.
const IN_SPAN: Turn = Turn { started: false, traced: false };

/// Event mode's part of the one loop: a tool the router runs (not in `tools.local`) is handed
/// off, and each phase's result counts toward the run's outages and is posted as progress.
struct Handoff<'r> {
    local: BTreeSet<String>,
    resp: &'r mut Response,
}

impl Door for Handoff<'_> {
    fn hands_off(&self, env: &Env, p: &agentloop_workspace::workspace::Pending) -> bool {
        !self.local.contains(&p.tool) && env.registry.get(&p.tool).is_some()
    }

    fn phase_ran(&mut self, env: &Env, phase: Next, state: &State, r: Result<PhaseEnd>) -> Result<PhaseEnd> {
        let r = outage_counted(env, r)?;
        if let Some(p) = &self.resp.progress {
            let (name, summary) = progress_summary(phase, state);
            p.post(state, name, &summary);
        }
        Ok(r)
    }
}

/// Drives the run with the engine's one loop (every check `run` makes: timeout, budgets, the
/// rest window, fatigue and the ledger) until an external tool is pending (emit its request)
/// or the run ends (emit its completion).
fn advance(env: &mut Env, state: &mut State, resp: &mut Response, turn: Turn) -> Result<()> {
    let local: BTreeSet<String> = env.cfg.tools.local.iter().cloned().collect();
    let mut door = Handoff { local, resp };
    // The limits are the run's own: a turn gives none of its own (no flags), so none changes.
    let how = agentloop_engine::lifecycle::Drive {
        started: turn.started,
        ledger: true,
        modes: crate::commands::modes::AUTO,
        door: &mut door,
        traced: turn.traced,
    };
    let driven = agentloop_engine::lifecycle::drive_on(env, state, &Default::default(), how)?;
    match driven {
        Driven::Stopped(_) => done(state, resp),
        Driven::Waiting(p) => {
            resp.events.push(request_event(state, &p, env.cfg));
            resp.result = format!("run {}: step {} requests tool {}", state.run_id, p.step, p.tool);
            snapshot(state, resp);
            Ok(())
        }
    }
}

/// The phase that just ran (its name in state.json; `finish` once the run ended) and one line on
/// where it left the run (a progress post).
fn progress_summary(phase: Next, state: &State) -> (&'static str, String) {
    let pending = state.pending.as_ref().filter(|_| state.next == Next::Act).map(|p| p.tool.clone());
    let ended = || format!("run {}: {}", state.status.as_str(), state.reason.clone().unwrap_or_default());
    let said = match phase {
        _ if state.status.is_terminal() => return (Next::Finish.as_str(), ended()),
        Next::Frame => format!("framed the goal (reframes: {})", state.reframes),
        Next::Plan => format!("step {} will use {}", state.step, pending.unwrap_or_else(|| "no tool".into())),
        Next::Act => format!("step {} ran its tool", state.step),
        Next::Reflect => format!("reflected on step {}; next: {}", state.step, state.next.as_str()),
        Next::Finish | Next::None => return (Next::Finish.as_str(), ended()),
    };
    (phase.as_str(), said)
}

fn escalate(env: &Env, state: &mut State, resp: &mut Response, reason: String) -> Result<()> {
    let mut c = Commit::default();
    phases::finish(env, state, &mut c, StopKind::Escalated, &reason, None)?;
    env.commit(&c)?;
    resp.log(LogLevel::Warn, format!("run {} escalated: {reason}", state.run_id));
    done(state, resp)
}

/// The turn that ended the run emits its one completion event.
fn done(state: &State, resp: &mut Response) -> Result<()> {
    let mut ev = phases::completion_event(state);
    let kind = state.ended_as().event().ending();
    ev["dedupe_key"] = json!(format!("agentic:run:{}:{kind}", state.run_id));
    resp.events.push(routable(ev));
    resp.result =
        format!("run {} {}: {}", state.run_id, state.status.as_str(), state.reason.clone().unwrap_or_default());
    snapshot(state, resp);
    Ok(())
}

/// A completion event as the router should pass it on: `result` present (null), because Ductile
/// copies the turn's one-line `result` into an emitted event without one, and a downstream plugin
/// that reads `result` before `content` (file_handler) would write that line instead of what its
/// pipeline gave it (`{payload.outcome}`).
fn routable(mut ev: Value) -> Value {
    if let Some(p) = ev.get_mut("payload").and_then(Value::as_object_mut) {
        p.entry("result").or_insert(Value::Null);
    }
    ev
}
