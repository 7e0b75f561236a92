//! What `agentloop enqueue` does (built with the `queue` feature).

use super::EnqueueArgs;
use crate::worker::request::{BadRequest, RunRequest};
use crate::worker::streams::{self, Link, Names};
use agentloop_engine::settings::Global;
use agentloop_io::output::Printer;
use agentloop_types::budget::Budgets;
use agentloop_types::error::ResultExt;
use agentloop_types::error::{Error, Result};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

pub fn run(g: &Global, a: EnqueueArgs) -> Result<u8> {
    let printer = Printer::new(g.quiet, g.verbose, g.json, g.color);
    let req = request(g, &a)?;
    // The agent's profile lives under the workers' root (`ROOT/agents/NAME.yaml`), not here:
    // the request carries only its name, and the worker that takes it loads and checks it.
    let local = Global { agent: None, ..g.clone() };
    let q = agentloop_config::config::resolve(&agentloop_engine::settings::layers(&local, &local.workspace, None)?)?
        .config
        .queue;
    let url = crate::commands::worker::redis_url(a.redis.clone(), &q)?;
    let names = Names::new(a.streams.as_deref().unwrap_or(&q.streams))?;
    let mut link = Link::open(&url, "--redis", printer, Some(Duration::from_secs(10)))?;
    let text = agentloop_types::json::to_string(&req);
    if let Some(why) = crate::worker::request::oversized(&text) {
        return Err(Error::usage(format!("{why}: no worker would take it"))
            .with_hint("shorten --goal, --context or --context-file"));
    }
    let message_id = link.call("add the request", |c| streams::enqueue(c, &names, &text))?;
    let run_id = req.run_id(&message_id);
    // What was queued: a new run, or an answer or a continue of one.
    let what = match req.go_on() {
        Some(go) => format!("{} of run {run_id}", go.verb()),
        None => format!("run {run_id}"),
    };
    let Some(secs) = g.wait else {
        print_queued(printer, &req, &names, &run_id, &message_id, &what);
        return Ok(agentloop_types::error::code::OK);
    };
    printer.info(&format!("queued {what} (message {message_id}); waiting for its outcome"));
    let outcome = wait_for_outcome(&mut link, &names, &req, &message_id, &run_id, &what, secs)?;
    print_outcome(printer, &run_id, &outcome)
}

/// The run request the flags describe, checked: a refusal names the flag.
fn request(g: &Global, a: &EnqueueArgs) -> Result<RunRequest> {
    let context = match (&a.context, &a.context_file) {
        (Some(t), _) => Value::String(t.clone()),
        (None, Some(f)) => Value::String(agentloop_io::fs::read_arg(f)?),
        (None, None) => Value::Null,
    };
    let run = go_on_run(a)?;
    if let (Some(run), Some(agent)) = (&run, &g.agent) {
        return Err(Error::usage(format!("--agent {agent}: run {run} goes on as the agent it ran as"))
            .with_hint("leave out --agent"));
    }
    let answer = match &a.answer {
        Some(t) => Some(crate::commands::run::read_answer(t)?),
        None => None,
    };
    let req = RunRequest {
        goal: a.goal.clone().unwrap_or_default(),
        context,
        agent: g.agent.clone(),
        budgets: budgets(g)?,
        slot: a.slot.clone(),
        series: a.series.clone(),
        output_schema: None,
        key: a.key.clone(),
        force: a.force,
        continue_: run.is_some() && answer.is_none(),
        run,
        answer,
    };
    // The request's fields are this command's flags: the refusal names the flag.
    req.check().map_err(|e| {
        Error::usage(match e {
            BadRequest::EmptyGoal => "--goal is empty".to_string(),
            BadRequest::Name(n @ ("key" | "slot" | "series")) => format!("--{n} must be 1-200 printable characters"),
            BadRequest::RunId => format!(
                "--run `{}` is not a run id: 1 to {} ASCII letters, digits, `-` or `_`",
                req.run.as_deref().unwrap_or_default(),
                agentloop_types::run_id::RunId::MAX_LEN
            ),
            BadRequest::Answer => format!("--answer must be 1-{} characters", crate::worker::request::MAX_ANSWER_CHARS),
            e => e.to_string(),
        })
    })?;
    Ok(req)
}

/// Without --wait: what was queued, on which stream (with --json, as one object).
fn print_queued(printer: Printer, req: &RunRequest, names: &Names, run_id: &str, message_id: &str, what: &str) {
    if printer.json {
        let mut v = json!({"run_id": run_id, "message_id": message_id, "stream": names.requests});
        if let Some(go) = req.go_on() {
            v["request"] = json!(go.verb());
            v["key"] = json!(req.idempotency_key(message_id));
        }
        printer.outln(&v.to_string());
    } else {
        printer.outln(&format!("queued {what} (message {message_id} on {})", names.requests));
    }
}

/// With --wait SECS: the outcome of the request once a worker writes it; a failure when it is
/// dead-lettered or SECS pass first.
fn wait_for_outcome(
    link: &mut Link,
    names: &Names,
    req: &RunRequest,
    message_id: &str,
    run_id: &str,
    what: &str,
    secs: u64,
) -> Result<String> {
    let outcome_id = req.outcome_id(message_id);
    let deadline = Instant::now() + Duration::from_secs(secs);
    // Dead letters are written after the request: read from its time on, each once.
    let mut dead_from = format!("{}-0", message_id.split('-').next().unwrap_or("0"));
    loop {
        if let Some(o) = link.call("read the outcome", |c| streams::outcome(c, names, &outcome_id))? {
            return Ok(o);
        }
        let dead =
            link.call("read the dead letters", |c| streams::dead_reason(c, names, message_id, &mut dead_from))?;
        if let Some(reason) = dead {
            return Err(Error::failure(format!("the {what} was dead-lettered: {reason}"))
                .with_hint(format!("`agentloop status --redis` lists the dead letters of {}", names.dead)));
        }
        if Instant::now() >= deadline {
            let again = match req.go_on() {
                Some(_) => format!("--key {}", req.idempotency_key(message_id)),
                None => format!("--key {run_id}"),
            };
            return Err(Error::failure(format!("no outcome for the {what} within {secs}s")).with_hint(format!(
                "it stays queued; `agentloop --wait enqueue ... {again}` or the results stream {} has it later",
                names.results
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The outcome a worker wrote, printed; its stop kind's exit code is the command's.
fn print_outcome(printer: Printer, run_id: &str, outcome: &str) -> Result<u8> {
    let v: Value = serde_json::from_str(outcome).context(format!("the outcome of run {run_id} is not JSON"))?;
    let p = &v["payload"];
    if printer.json {
        printer.outln(&v.to_string());
    } else {
        printer.outln(&format!(
            "run {run_id} {} ({}): {}",
            p["status"].as_str().unwrap_or("?"),
            p["stop"].as_str().unwrap_or("?"),
            p["outcome"].as_str().or(p["reason"].as_str()).unwrap_or("")
        ));
    }
    let stop =
        p["stop"].as_str().and_then(|s| agentloop_workspace::workspace::StopKind::parse(s, p["reason"].as_str()));
    Ok(stop.map(|s| s.exit_code()).unwrap_or(agentloop_types::error::code::FAILURE))
}

/// The run --answer or --continue goes on with: --continue ID or --run ID (the same when both).
fn go_on_run(a: &EnqueueArgs) -> Result<Option<String>> {
    match (&a.continue_, &a.run) {
        (Some(Some(c)), Some(r)) if c != r => {
            Err(Error::usage(format!("--continue {c} and --run {r} name two runs")).with_hint("name the run once"))
        }
        (Some(Some(c)), _) => Ok(Some(c.clone())),
        (Some(None), None) => {
            Err(Error::usage("--continue needs the run to go on with").with_hint("--continue ID (or --run ID)"))
        }
        (_, Some(r)) if a.continue_.is_none() && a.answer.is_none() => {
            Err(Error::usage(format!("--run {r} needs --answer TEXT or --continue")))
        }
        (_, r) => Ok(r.clone()),
    }
}

/// The budgets given as global flags, as a request's budgets.
fn budgets(g: &Global) -> Result<Budgets> {
    let timeout = match &g.timeout {
        None => None,
        Some(t) => Some(serde_json::from_value(json!(t)).map_err(|e| {
            Error::usage(format!("--timeout `{t}`")).with_hint("write it as 90s, 5m or 1h").with_source(e)
        })?),
    };
    Ok(Budgets {
        max_steps: g.max_steps,
        max_reframes: g.max_reframes,
        timeout,
        max_tokens: g.max_tokens,
        max_cost_usd: g.max_cost,
    })
}
