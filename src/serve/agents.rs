//! The agents of a served root: GET /agents (the profiles in `<root>/agents/`), an agent's
//! status (its runs by status, the one going on, its usage window) and its named sessions.
//! Everything here is read from the runs' files; nothing is changed.

use super::http::{ApiError, ApiResult, Reply};
use super::runs::{self, Budgets};
use super::Shared;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// GET /agents
pub(super) fn list(shared: &Shared) -> ApiResult {
    Ok(Reply::json(200, &json!({"agents": crate::commands::agents::profiles(&shared.root)?})))
}

/// GET /agents/{name}/status: an agent's profile, its runs on this server by status, the one
/// going on and the last one, and its rolling usage window (whether it is resting).
pub(super) fn status(shared: &Shared, name: &str) -> ApiResult {
    let profiles = crate::commands::agents::profiles(&shared.root)?;
    let profile = profiles.iter().find(|p| p["name"].as_str() == Some(name)).cloned();
    let root = agentloop_workspace::workspace::Workspace::new(shared.root.clone());
    let mut mine: Vec<agentloop_workspace::history::Run> =
        agentloop_workspace::history::list(&root, &shared.runs_dir, &|m| shared.printer.warn(m))
            .into_iter()
            .filter(|r| !runs::is_link(&r.ws.root) && r.state.agent.as_deref() == Some(name))
            .collect();
    if profile.is_none() && mine.is_empty() {
        return Err(ApiError::new(404, format!("no agent `{name}`: no profile, and no run of it"))
            .hint("GET /agents lists the profiles"));
    }
    mine.sort_by(|a, b| (&a.state.started_at, &a.state.run_id).cmp(&(&b.state.started_at, &b.state.run_id)));
    let mut by_status = BTreeMap::new();
    for r in &mine {
        *by_status.entry(agentloop_workspace::history::shown_status(r).to_string()).or_insert(0u64) += 1;
    }
    let running: Vec<&str> = mine
        .iter()
        .filter(|r| agentloop_workspace::history::shown_status(r) == "running")
        .map(|r| r.state.run_id.as_str())
        .collect();
    let last = mine.last().map(|r| {
        let mut v = crate::commands::runs::row(r);
        v["links"] = runs::links(&r.state.run_id);
        v
    });
    // The window is the agent's own (a profile may set `rest:`); without a profile, the root's.
    let rest = match &profile {
        Some(_) => agentloop_workspace::rest_window::current(
            &runs::config(shared, Some(name), &Budgets::default(), false)?.config,
        ),
        None => None,
    };
    Ok(Reply::json(
        200,
        &json!({
            "agent": name,
            "profile": profile,
            "runs": {"total": mine.len(), "by_status": by_status},
            "running": running,
            "last_run": last,
            "rest": rest,
            "links": {"runs": format!("/runs?agent={}", agentloop_engine::report::html::encode_segment(name))},
        }),
    ))
}

/// The agent name that stands for runs of no agent profile in GET /agents/{name}/sessions.
const NO_AGENT: &str = "default";

/// GET /agents/{name}/sessions: the named sessions with a run of this agent, newest first, each
/// with the agent's runs in it, its last run (the newest started) and that run's status, and
/// when any of them last changed. `default` stands for the runs of no agent profile (and of a
/// profile named `default`, if there is one). A session's conversation is every run of that name
/// in the root, whatever its agent; this counts the agent's own.
pub(super) fn sessions(shared: &Shared, name: &str) -> ApiResult {
    let profiles = crate::commands::agents::profiles(&shared.root)?;
    let profile = profiles.iter().any(|p| p["name"].as_str() == Some(name));
    let root = agentloop_workspace::workspace::Workspace::new(shared.root.clone());
    let all = agentloop_workspace::history::list(&root, &shared.runs_dir, &|m| shared.printer.warn(m));
    let mine: Vec<&agentloop_workspace::history::Run> = all
        .iter()
        .filter(|r| !runs::is_link(&r.ws.root))
        .filter(|r| r.state.agent.as_deref() == Some(name) || (name == NO_AGENT && r.state.agent.is_none()))
        .collect();
    if !profile && mine.is_empty() && name != NO_AGENT {
        return Err(ApiError::new(404, format!("no agent `{name}`: no profile, and no run of it"))
            .hint(format!("GET /agents lists the profiles; `{NO_AGENT}` names the runs of no profile")));
    }
    let mut by_name: BTreeMap<&str, Vec<&agentloop_workspace::history::Run>> = BTreeMap::new();
    for r in &mine {
        if let Some(s) = r.state.session.as_deref() {
            by_name.entry(s).or_default().push(r);
        }
    }
    let mut sessions: Vec<(String, Value)> = by_name
        .into_iter()
        .filter_map(|(session, turns)| {
            let last = turns
                .iter()
                .max_by(|a, b| (&a.state.started_at, &a.state.run_id).cmp(&(&b.state.started_at, &b.state.run_id)))?;
            let updated = turns.iter().map(|r| r.state.updated_at.as_str()).max().unwrap_or_default().to_string();
            let id = &last.state.run_id;
            let v = json!({
                "name": session,
                "runs": turns.len(),
                "last_run_id": id,
                "last_updated": updated,
                "last_status": agentloop_workspace::history::shown_status(last),
                "links": {
                    "runs": format!("/runs?session={}", agentloop_engine::report::html::encode_segment(session)),
                    "last_run": format!("/runs/{}", agentloop_engine::report::html::encode_segment(id)),
                },
            });
            Some((updated, v))
        })
        .collect();
    // Newest first; among equal times, the one whose last run is newer (ids sort by time).
    sessions.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1["last_run_id"].as_str().cmp(&a.1["last_run_id"].as_str())));
    let sessions: Vec<Value> = sessions.into_iter().map(|(_, v)| v).collect();
    Ok(Reply::json(200, &json!({"agent": name, "sessions": sessions})))
}
