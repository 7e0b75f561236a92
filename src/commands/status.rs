//! `agentloop status`: where the run stands and what budget is left.

use agentloop_engine::settings::Ctx;
use agentloop_types::error::Result;
use clap::Args;
use serde_json::json;

/// Show the run id, status, step, budgets used and left, and the pending action.
///
/// For an ended run: the open question and how to go on (answer, --continue, a follow-up).
/// The limits shown are the ones in force now (flags, environment, config) with where each
/// came from; the next `run` or phase command applies them.
///
/// Examples:
///   agentloop -w ws status --json | jq .run_id
///   agentloop -w ws status --run last      # an archived run (runs/<id>/)
///   agentloop status --redis redis://127.0.0.1:6379   # the queue of `agentloop worker`
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct StatusArgs {
    /// Show this run of the history instead of the current one (an id, a unique prefix, or `last`).
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Show the queue of `agentloop worker` on this Redis instead: runs queued, claimed (by
    /// which worker, idle how long, delivered how often) and dead-lettered (with the reason).
    #[arg(long, value_name = "URL", conflicts_with = "run")]
    pub redis: Option<String>,
    /// Prefix of the stream names (with --redis).
    #[arg(long, value_name = "NAME", default_value = "agentloop", requires = "redis")]
    pub streams: String,
}

/// `status --redis`: the queue of `agentloop worker`.
#[cfg(feature = "queue")]
fn queue(ctx: &Ctx, url: &str, streams: &str) -> Result<u8> {
    let v = crate::worker::view::queue(url, streams, ctx.printer)?;
    if ctx.printer.json {
        ctx.printer.json_value(&v);
    } else {
        crate::worker::view::print(&ctx.printer, &v);
    }
    Ok(0)
}

#[cfg(not(feature = "queue"))]
fn queue(_: &Ctx, _: &str, _: &str) -> Result<u8> {
    Err(agentloop_types::error::Error::not_built("queue", "`status --redis`", false))
}

pub fn run(ctx: Ctx, args: StatusArgs) -> Result<u8> {
    if let Some(url) = &args.redis {
        return queue(&ctx, url, &args.streams);
    }
    ctx.ws.require_dir()?;
    let ws = match &args.run {
        Some(id) => agentloop_workspace::history::find(&ctx.ws, &ctx.config().handle.runs_dir, id)?,
        None => ctx.ws.clone(),
    };
    let mut s = ws.load_state()?;
    // A run that says running with nothing running it was interrupted: said so, with the way on.
    if agentloop_workspace::history::stopped_unseen(&ws, &s) {
        s.interrupted = true;
    }
    // The limits in force are the ones given now; a run that goes on gets them.
    let recorded = s.limits.clone();
    if !s.status.is_terminal() && args.run.is_none() {
        s.limits = s.limits.in_force(ctx.config(), &ctx.resolved.sources);
    }
    let v = view(&ws, &s, &recorded, ctx.config(), &ctx.resolved.sources);
    if ctx.printer.json {
        ctx.printer.json_value(&v);
        return Ok(0);
    }
    print_where_it_stands(&ctx, &s, &v);
    print_spending(&ctx, &s, &v);
    print_rest_and_modes(&ctx, &v);
    let line = agentloop_io::output::one_line;
    match &s.pending {
        Some(a) => {
            ctx.printer.outln(&format!("pending     step {} {} {}", a.step, line(&a.tool), line(&a.args.to_string())))
        }
        None => ctx.printer.outln("pending     (none)"),
    }
    Ok(0)
}

/// The run, its goal and session, how it stands (status, the open question, the ways on, the
/// next phase), its steps and reframes, and the agent's frustration once it says something.
fn print_where_it_stands(ctx: &Ctx, s: &agentloop_workspace::workspace::State, v: &serde_json::Value) {
    let answer_cmd = v["answer_with"].as_str().map(String::from);
    let l = &s.limits;
    let p = &ctx.printer;
    // The run's words come from state.json, which whoever wrote the workspace controls: one line
    // each, so a value cannot forge the lines after it (the printer shows any control).
    let line = agentloop_io::output::one_line;
    p.outln(&format!("run         {}", line(&s.run_id)));
    p.outln(&format!("goal        {}", line(&s.goal)));
    if let Some(name) = &s.session {
        p.outln(&format!("session     {}", line(name)));
    }
    p.outln(&format!(
        "status      {}{}",
        if s.interrupted && !s.status.is_terminal() { "interrupted" } else { s.status.as_str() },
        s.reason.as_ref().map(|r| format!(" ({})", line(r))).unwrap_or_default()
    ));
    if let Some(q) = &s.open_question {
        p.outln(&format!("question    {}", line(q)));
        p.outln(&format!("answer      {}", answer_cmd.clone().unwrap_or_default()));
    }
    if s.status.is_terminal() || s.interrupted {
        p.outln(&format!("ways on     {}", agentloop_engine::lifecycle::ways_on(&ctx.ws, s)));
    }
    p.outln(&format!("next        {}", s.next.as_str()));
    p.outln(&format!("steps       {} of {}", s.step, l.max_steps));
    p.outln(&format!("reframes    {} of {}", s.reframes, l.max_reframes));
    // The agent's inner state is shown once it says something (a calm agent's is in --json).
    if s.frustration > 0 || s.frustration_reframed {
        p.outln(&format!(
            "frustration {} of {}{}",
            s.frustration,
            ctx.config().frustration.threshold,
            if s.frustration_reframed { " (forced reframe used)" } else { "" }
        ));
    }
}

/// Tokens, model, cost and time, each of its limit, and where the limits given came from.
fn print_spending(ctx: &Ctx, s: &agentloop_workspace::workspace::State, v: &serde_json::Value) {
    let sources = v["limit_sources"].as_object().cloned().unwrap_or_default();
    let l = &s.limits;
    let p = &ctx.printer;
    let max = |m: Option<String>| m.unwrap_or_else(|| "unlimited".into());
    let line = agentloop_io::output::one_line;
    p.outln(&format!("tokens      {} of {}", s.usage.total(), max(l.max_tokens.map(|m| m.to_string()))));
    if let Some(m) = &s.model {
        let note = if s.scripted() { " (answers replayed from a script, offline)" } else { "" };
        p.outln(&format!("model       {}{note}", line(m)));
    }
    let spent = if s.scripted() {
        "none (a scripted run spends nothing)".to_string()
    } else {
        // One display for an unknown price everywhere; here with what makes it known.
        match s.cost() {
            Some(c) => agentloop_engine::report::html::usd(c),
            None => format!(
                "{} (no price for {}: add one under `prices:`)",
                agentloop_engine::report::html::UNKNOWN_COST,
                line(s.model.as_deref().unwrap_or("the model"))
            ),
        }
    };
    p.outln(&format!("cost        {spent} of {}", max(l.max_cost_usd.map(|m| format!("${m:.2}")))));
    p.outln(&format!("time        {}s of {}s", s.elapsed_ms / 1000, l.timeout_secs));
    let from: Vec<String> = sources
        .iter()
        .filter(|(_, v)| v.as_str() != Some("recorded by the run"))
        .map(|(k, v)| format!("{k} from {}", v.as_str().unwrap_or("")))
        .collect();
    if !from.is_empty() {
        p.outln(&format!("limits      {}", from.join("; ")));
    }
}

/// The rest window and fatigue, the agent's stress, and the modes once there is something to say.
fn print_rest_and_modes(ctx: &Ctx, v: &serde_json::Value) {
    let p = &ctx.printer;
    let line = agentloop_io::output::one_line;
    if let Some(w) = agentloop_workspace::rest_window::current(ctx.config()) {
        match (&w.resting, &w.until) {
            (Some(why), Some(until)) => {
                p.outln(&format!("rest        resting ({}); may run again at {}", line(why), line(until)))
            }
            _ => p.outln(&format!(
                "rest        {} tokens, {}, {} runs in the last {}s",
                w.tokens,
                agentloop_engine::report::html::usd(w.cost_usd),
                w.runs,
                w.window_secs
            )),
        }
        p.outln(&format!("fatigue     {}% (refused above rest.max_fatigue {}%)", w.fatigue, w.max_fatigue));
    }
    let stress = agentloop_workspace::rest_window::stress(ctx.config(), &ctx.ws.root);
    if stress.level > 0.0 || stress.escalations > 0 || stress.resting.is_some() {
        p.outln(&stress_line(&stress));
    }
    let m = &v["modes"];
    let last = match (m["last_rest"]["at"].as_str(), m["last_rest"]["by"].as_str()) {
        (Some(at), Some("agent")) => format!("; last rest {at}, by the agent itself"),
        (Some(at), _) => format!("; last rest {at}, by `agentloop rest`"),
        _ => String::new(),
    };
    // The modes line once there is something to say: a rest taken, or the automatic modes off.
    if !last.is_empty() || m["auto"] != true {
        let how =
            if m["auto"] == true { "auto (rests when tired, dreams when idle)" } else { "manual (modes.auto: false)" };
        p.outln(&format!("modes       {how}{last}"));
    }
}

/// The agent's stress, one line: its level of the threshold, and whether it rests.
pub fn stress_line(s: &agentloop_workspace::rest_window::Stress) -> String {
    let resting = match (&s.resting, &s.until) {
        (Some(_), Some(u)) => format!("; resting until {u} or `agentloop rest`"),
        (Some(_), None) => "; resting until `agentloop rest`".into(),
        _ => String::new(),
    };
    format!("stress      {} of {} ({} escalations by frustration){resting}", s.level, s.threshold, s.escalations)
}

/// The status of a run as JSON (what `status --json` prints). `s.limits` are the limits in
/// force; `recorded` the ones the run recorded; `sources` where each configured value came from.
pub fn view(
    ws: &agentloop_workspace::workspace::Workspace,
    s: &agentloop_workspace::workspace::State,
    recorded: &agentloop_workspace::workspace::Limits,
    cfg: &agentloop_config::config::Config,
    sources: &agentloop_config::config::Sources,
) -> serde_json::Value {
    let sources = limit_sources(sources);
    let answer_cmd = s.open_question.as_ref().map(|_| format!("agentloop -w {} answer \"...\"", ws.root));
    use agentloop_engine::schema::Frustration;
    let v = agentloop_engine::schema::StatusView {
        run_id: s.run_id.clone(),
        agent: s.agent.clone(),
        goal: s.goal.clone(),
        status: s.status,
        stop: s.stop,
        next: s.next,
        step: s.step,
        reframes: s.reframes,
        model: s.model.clone(),
        reason: s.reason.clone(),
        outcome: s.outcome.clone(),
        open_question: s.open_question.clone(),
        answer_with: answer_cmd,
        ways_on: if s.status.is_terminal() || s.interrupted {
            Some(agentloop_engine::lifecycle::ways_on(ws, s))
        } else {
            None
        },
        interrupted: s.interrupted,
        rest: json!(agentloop_workspace::rest_window::current(cfg)),
        stress: json!(agentloop_workspace::rest_window::stress(cfg, &ws.root)),
        modes: agentloop_workspace::rest_window::modes(cfg),
        session: s.session.clone(),
        frustration: Frustration {
            score: s.frustration,
            threshold: cfg.frustration.threshold,
            reframed: s.frustration_reframed,
        },
        workspace: ws.root.to_string(),
        limits_recorded: recorded.clone(),
        limit_sources: sources,
        pending: s.pending.clone(),
        budgets: budgets(s),
        usage: s.usage,
        started_at: s.started_at.clone(),
        updated_at: s.updated_at.clone(),
        finished_at: s.finished_at.clone(),
    };
    agentloop_types::json::to_value(v)
}

/// Where each budget's limit came from: the flag, environment or config that gave it, else the
/// run's own record.
fn limit_sources(sources: &agentloop_config::config::Sources) -> serde_json::Map<String, serde_json::Value> {
    agentloop_types::budget::Budget::ALL
        .iter()
        .map(|b| {
            (
                b.key().to_string(),
                json!(sources
                    .get(b.key())
                    .filter(|v| v.is_given())
                    .map(ToString::to_string)
                    .unwrap_or_else(|| "recorded by the run".into())),
            )
        })
        .collect()
}

/// Each budget of a run: used, its limit in force, and what is left.
fn budgets(s: &agentloop_workspace::workspace::State) -> agentloop_engine::schema::Budgets {
    use agentloop_engine::schema::{Budgets, Used};
    let l = &s.limits;
    let left = |max: Option<f64>, used: f64| max.map(|m| (m - used).max(0.0));
    Budgets {
        steps: Used { used: s.step, max: l.max_steps, left: l.max_steps.saturating_sub(s.step) },
        reframes: Used { used: s.reframes, max: l.max_reframes, left: l.max_reframes.saturating_sub(s.reframes) },
        tokens: Used {
            used: s.usage.total(),
            max: l.max_tokens,
            left: l.max_tokens.map(|m| m.saturating_sub(s.usage.total())),
        },
        cost_usd: agentloop_engine::schema::CostUsed {
            used: s.cost(),
            max: l.max_cost_usd,
            left: left(l.max_cost_usd, s.cost_usd),
            incomplete: s.cost_incomplete,
            scripted: s.scripted(),
        },
        time_secs: Used {
            used: s.elapsed_ms / 1000,
            max: l.timeout_secs,
            left: l.timeout_secs.saturating_sub(s.elapsed_ms / 1000),
        },
    }
}
