//! Creating a run: context.md, memory.md, plan.md, decisions.md, state.json, and the
//! `run.started` trace entry that carries `schema_version`.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::markdown::{self, Memory, Plan};
use crate::prompt::Templates;
use crate::trace::{self, Entry, Phase};
use crate::workspace::{Commit, Limits, State, Workspace};
use serde_json::json;

/// Turns a `--context` document into markdown: JSON and YAML mappings become fenced blocks,
/// anything else is kept as markdown.
pub fn format_background(text: &str) -> String {
    let t = text.trim();
    if t.is_empty() {
        return String::new();
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(t) {
        if v.is_object() || v.is_array() {
            return format!("```json\n{}\n```", serde_json::to_string_pretty(&v).unwrap_or_else(|_| t.into()));
        }
    }
    if let Ok(serde_json::Value::Object(_)) = serde_yaml_ng::from_str::<serde_json::Value>(t) {
        if !t.starts_with('#') {
            return format!("```yaml\n{t}\n```");
        }
    }
    t.to_string()
}

/// Creates a new run in `ws`. The caller holds the lock.
pub fn init_run(
    ws: &Workspace,
    cfg: &Config,
    tpl: &Templates,
    goal: &str,
    background: &str,
    force: bool,
    run_id: Option<String>,
) -> Result<State> {
    let goal = goal.trim();
    if goal.is_empty() {
        return Err(Error::usage("the goal is empty").with_hint("pass --goal \"what you want done\""));
    }
    if ws.has_run() && !force {
        let what = match ws.load_state() {
            Ok(s) => format!("run {} ({}, step {})", s.run_id, s.status.as_str(), s.step),
            Err(_) => "a run".to_string(),
        };
        return Err(Error::usage(format!("workspace {} already holds {what}", ws.root))
            .with_hint("use another folder, resume it with `agentloop run`, or pass --force to start over (trace.jsonl and artifacts/ are kept)"));
    }
    crate::fs::create_dir_all(&ws.artifacts())?;
    let _ = std::fs::remove_file(ws.result());
    let state = State::new(run_id.unwrap_or_else(crate::clock::new_run_id), goal.to_string(), Limits::from_config(cfg));
    let memory = Memory { goal: goal.to_string(), status: "initialised; not framed yet".into(), ..Default::default() };
    let mut commit = Commit::default();
    commit
        .file(
            "context.md",
            tpl.render("context.md.j2", json!({"goal": goal, "background": format_background(background)}))?,
        )
        .file("memory.md", tpl.render("memory.md.j2", &memory)?)
        .file("plan.md", tpl.render("plan.md.j2", markdown::plan_view(&Plan::default()))?)
        .file("decisions.md", tpl.render("decisions.md.j2", json!({}))?);
    let mut e = Entry::new(&state.run_id, 0, Phase::Run, "run.started");
    e.schema_version = Some(trace::SCHEMA_VERSION);
    e.data = Some(json!({"goal": goal, "limits": state.limits}));
    commit.entry(&e);
    commit.state = Some(state.clone());
    ws.commit(&commit)?;
    Ok(state)
}
