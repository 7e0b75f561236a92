//! The Ductile protocol v2 envelope: the response object, the request's `config` layer, the
//! tool-request event, a tool's result as a router sends it, and `state_updates`.
//!
//! Ductile merges `state_updates` into the plugin's state shallowly (a later job's top-level
//! key replaces an earlier one's), and with `parallelism` above 1 several turns run at once on
//! snapshots of the same state. So each run is a top-level key of its own, `run:<run_id>`, and a
//! turn writes only the keys of the runs it changed: two turns on different runs never touch
//! the same key. An older state's `runs` map is still read, and moved into per-run keys by the
//! next turn that writes.

use agentloop_config::config::{Config, Layer, Source};
use agentloop_engine::schema::handle::{Command, RequestError, RouterState, RunSnapshot, ToolResultPayload};
use agentloop_engine::schema::{HandleStatus, LogLevel};
use agentloop_types::tool_spec::ToolStatus;
use agentloop_workspace::workspace::{Next, State, Status};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

const RESERVED: &[&str] = &["run_id", "step", "tool", "tool_command", "requested_at", "attempt"];

#[derive(Default)]
pub(super) struct Response {
    pub(super) status: HandleStatus,
    pub(super) result: String,
    pub(super) error: Option<String>,
    /// The error's causes and hints, as data (`error` says them on one line).
    pub(super) causes: Vec<String>,
    pub(super) hints: Vec<String>,
    pub(super) retry: Option<bool>,
    pub(super) events: Vec<Value>,
    /// Every run the router's state knows, by id: its `run:<id>` keys over an older `runs` map,
    /// then the snapshots this turn took.
    pub(super) runs: BTreeMap<String, RunSnapshot>,
    /// The runs this turn changed: their keys are the ones written.
    pub(super) changed: BTreeSet<String>,
    /// Finished runs past `handle.keep_finished`: written as null.
    pub(super) dropped: BTreeSet<String>,
    /// The request state's older `runs` map, moved into per-run keys when this turn writes.
    pub(super) legacy: Option<BTreeMap<String, RunSnapshot>>,
    pub(super) last_run_id: Option<String>,
    pub(super) logs: Vec<Value>,
    /// Where each phase is posted as it ends (`handle.progress_url`), when configured.
    pub(super) progress: Option<super::progress::Progress>,
    /// The answer a redelivered job gets: its first delivery's, as kept ([`super::jobs`]).
    pub(super) replay: Option<Value>,
    /// The root and the router's job this turn answers (a `handle` turn with a `job_id`): its
    /// final answer is kept for a redelivery.
    pub(super) job: Option<(camino::Utf8PathBuf, String)>,
}

impl Response {
    pub(super) fn log(&mut self, level: LogLevel, msg: impl Into<String>) {
        let (level, msg) = (level.as_str(), msg.into());
        agentloop_io::output::stderr_line(&format!("agentloop handle: {level}: {msg}"));
        self.logs.push(json!({"level": level, "message": msg}));
    }
    /// The runs the request's `state` knows: `run:<id>` keys, over an older `runs` map.
    pub(super) fn read_state(&mut self, state: &RouterState) -> Result<(), RequestError> {
        if let Some(legacy) = &state.runs {
            self.runs = legacy.clone();
            self.legacy = Some(legacy.clone());
        }
        self.runs.extend(state.run_keys()?);
        self.last_run_id = state.last_run_id.clone();
        Ok(())
    }

    /// Records a run's new snapshot: its key is written.
    pub(super) fn set_run(&mut self, run_id: &str, snapshot: RunSnapshot) {
        self.runs.insert(run_id.to_string(), snapshot);
        self.changed.insert(run_id.to_string());
        self.last_run_id = Some(run_id.to_string());
    }

    /// Bounded router state: every run not yet ended, and the `keep` finished runs updated last;
    /// the others are dropped (written as null) by a turn that writes anyway.
    pub(super) fn keep_finished(&mut self, keep: usize) {
        if self.changed.is_empty() {
            return;
        }
        let mut finished: Vec<(String, String)> = self
            .runs
            .iter()
            .filter(|(_, r)| r.run_status().is_some_and(Status::is_terminal))
            .map(|(id, r)| (r.updated_at.clone().unwrap_or_default(), id.clone()))
            .collect();
        if finished.len() <= keep {
            return;
        }
        // Newest first; the current run is never dropped from its own answer.
        finished.sort_by(|a, b| b.cmp(a));
        for (_, id) in finished.into_iter().skip(keep) {
            if !self.changed.contains(&id) {
                self.runs.remove(&id);
                self.dropped.insert(id);
            }
        }
    }

    /// `state_updates`: the changed runs' keys and the summary of the last one; None when no
    /// run changed, so `health` and an idle `poll` leave the router's state alone.
    fn state_updates(&self) -> Option<agentloop_engine::schema::StateUpdates> {
        if self.changed.is_empty() && self.dropped.is_empty() {
            return None;
        }
        let mut keys = Map::new();
        if let Some(legacy) = &self.legacy {
            for (id, v) in legacy {
                keys.insert(format!("run:{id}"), agentloop_types::json::to_value(self.runs.get(id).unwrap_or(v)));
            }
            keys.insert("runs".into(), Value::Null);
        }
        for id in &self.changed {
            keys.insert(format!("run:{id}"), self.runs.get(id).map_or(Value::Null, agentloop_types::json::to_value));
        }
        for id in &self.dropped {
            keys.insert(format!("run:{id}"), Value::Null);
        }
        // The summary keys of the last run this turn changed: the last writer's are the newest.
        let last_id = self.last_run_id.clone().filter(|id| self.changed.contains(id));
        let last = last_id.as_ref().and_then(|id| self.runs.get(id));
        Some(agentloop_engine::schema::StateUpdates {
            runs: keys,
            last_run_id: last_id.clone(),
            last_run: last.and_then(|r| r.updated_at.clone()),
            last_goal: last.and_then(|r| r.goal.clone()).map_or(Value::Null, Value::from),
            total_steps: last.and_then(|r| r.step).map_or(Value::Null, Value::from),
        })
    }

    pub(super) fn to_json(&self) -> Value {
        if let Some(v) = &self.replay {
            return v.clone();
        }
        let r = agentloop_engine::schema::HandleResponse {
            status: self.status,
            result: if self.result.trim().is_empty() { "no action taken".to_string() } else { self.result.clone() },
            error: self.error.clone(),
            causes: self.causes.clone(),
            hints: self.hints.clone(),
            retry: self.retry,
            events: self.events.clone(),
            state_updates: self.state_updates(),
            logs: self.logs.clone(),
        };
        agentloop_types::json::to_value(r)
    }
}

/// A request's `config` as a layer: the keys only a router reads (`workspace_dir`, `timeouts`,
/// `schedule`) dropped, the seed's plugin config names taken as agentloop's keys
/// ([`agentloop_config::config::seed_names`]). Setting a name and its key differently is refused.
pub(super) fn request_layer(cfg: &Map<String, Value>) -> agentloop_types::error::Result<Layer> {
    let mut out = Map::new();
    for (k, v) in cfg {
        if !matches!(k.as_str(), "workspace_dir" | "timeouts" | "schedule") {
            out.insert(k.clone(), v.clone());
        }
    }
    agentloop_config::config::seed_names(&Layer { source: Source::Request, value: Value::Object(out) })
}

/// A request's `config` may only narrow what the root's configuration allows (see
/// [`agentloop_engine::trust`], the one policy for requests and workspaces from elsewhere). Returns the first
/// key that breaks the rule and why (a budget: above which limit, and where the root's
/// configuration set it).
pub(super) fn widening_key(
    layer: &Layer,
    base: &agentloop_config::config::Resolved,
    root: &camino::Utf8Path,
) -> Option<(String, String)> {
    let (key, why) =
        agentloop_engine::trust::widening(&layer.value, &base.config, root, agentloop_engine::policy::Party::Request)
            .into_iter()
            .next()?;
    let why = match (agentloop_types::budget::Budget::from_key(&key), layer.value.get(&key)) {
        (Some(b), Some(v)) => {
            let from = agentloop_engine::trust::limit_source(&key, base.sources.get(&key));
            agentloop_engine::trust::narrows_limit(b, v, &base.config, root, &from).err().map_or(why, |w| w.0)
        }
        _ => why,
    };
    Some((key, why))
}

pub(super) fn fail(resp: &mut Response, msg: String, retry: bool) {
    resp.status = HandleStatus::Error;
    resp.result = format!("error: {msg}");
    resp.error = Some(msg);
    resp.retry = Some(retry);
}

/// A tool result as sent: the error it reports (none when it says ok); its output and raw `result`.
pub(super) struct Decoded {
    pub(super) error: Option<String>,
    pub(super) output: String,
    pub(super) value: Value,
}

pub(super) fn decode_result(p: &ToolResultPayload) -> Decoded {
    // `ok` per the seed; plugins also say success/succeeded/completed/done.
    let has_error = p.error.as_ref().is_some_and(|e| !e.is_null() && e != "");
    let default = if has_error { ToolStatus::Error } else { ToolStatus::Ok };
    let status = p.status.as_deref().unwrap_or(default.as_str()).trim().to_lowercase();
    let ok = ToolStatus::reported(&status) == ToolStatus::Ok;
    let value = p.result.clone().unwrap_or(Value::Null);
    // Readable text: a fetched page reaches the model as the page, not as an escaped JSON string.
    let output = agentloop_tools::ductile::render_content(&value);
    let error = (!ok).then(|| {
        p.error
            .as_ref()
            .map(|e| if let Some(s) = e.as_str() { s.to_string() } else { e.to_string() })
            .filter(|e| e != "null")
            .unwrap_or_else(|| format!("tool reported status `{status}`"))
    });
    Decoded { error, output, value }
}

pub(super) fn request_event(state: &State, p: &agentloop_workspace::workspace::Pending, cfg: &Config) -> Value {
    let mut payload = Map::new();
    if let Value::Object(args) = &p.args {
        for (k, v) in args {
            if !RESERVED.contains(&k.as_str()) {
                payload.insert(k.clone(), v.clone());
            }
        }
    }
    let command =
        cfg.tools.external.get(&p.tool).and_then(|t| t.command.clone()).unwrap_or_else(|| Command::Handle.to_string());
    payload.insert("run_id".into(), json!(state.run_id));
    payload.insert("step".into(), json!(p.step));
    payload.insert("tool".into(), json!(p.tool));
    payload.insert("tool_command".into(), json!(command));
    payload.insert("requested_at".into(), json!(p.requested_at));
    payload.insert("attempt".into(), json!(p.attempt));
    // `result` is always present (null unless the tool's arguments give one): Ductile copies the
    // turn's one-line `result` into an emitted event that has none, and a plugin such as
    // file_handler would then write that line instead of the `content` it was given.
    payload.entry("result").or_insert(Value::Null);
    if p.tool == cfg.ductile.self_name {
        payload.insert(agentloop_tools::ductile::DEPTH_KEY.into(), json!(state.depth + 1));
    }
    let mut key = format!("agentic:run:{}:step:{}:request", state.run_id, p.step);
    if p.attempt > 0 {
        key.push_str(&format!(":attempt:{}", p.attempt));
    }
    json!({"type": format!("agentic.tool_request.{}", p.tool), "payload": payload, "dedupe_key": key})
}

pub(super) fn snapshot(state: &State, resp: &mut Response) {
    let pending = state.pending.as_ref().filter(|_| state.next == Next::Act);
    resp.set_run(
        &state.run_id,
        RunSnapshot {
            status: Some(state.status.as_str().to_string()),
            goal: Some(state.goal.clone()),
            created_at: Some(state.started_at.clone()),
            updated_at: Some(agentloop_types::clock::now_rfc3339()),
            step: Some(state.step),
            max_steps: Some(state.limits.max_steps),
            reframes: Some(state.reframes),
            max_reframes: Some(state.limits.max_reframes),
            pending_step: pending.map(|p| p.step),
            pending_tool: pending.map(|p| p.tool.clone()),
            pending_since: pending.map(|p| p.requested_at.clone()),
            attempts: Some(pending.map(|p| p.attempt).unwrap_or(0)),
            completed_steps: Some(state.completed_steps.clone()),
            workspace_ref: Some(format!("runs/{}", state.run_id)),
            rest: Map::new(),
        },
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn seed_aliases_map_to_keys() {
        let l = super::request_layer(
            serde_json::json!({
                "allowed_plugins": ["a"], "llm_model": "m", "api_url": "x", "max_loops": 3, "schedule": null
            })
            .as_object()
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            l.value,
            serde_json::json!({"allowed_tools": ["a"], "llm": {"model": "m"}, "ductile": {"api_url": "x"}, "max_steps": 3})
        );
        let e =
            super::request_layer(serde_json::json!({"max_loops": 3, "max_steps": 4}).as_object().unwrap()).unwrap_err();
        assert!(e.message.contains("both `max_loops` and `max_steps`"), "{e}");
    }
}
