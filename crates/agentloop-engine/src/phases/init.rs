//! Creating a run: context.md, memory.md, plan.md, decisions.md, state.json, and the
//! `run.started` trace entry that carries `schema_version`.

use agentloop_config::config::Config;
use agentloop_types::error::{Error, Result};
use agentloop_types::trace::{self, Entry, Event, Phase};
use agentloop_workspace::markdown::{self, Memory, Plan};
use agentloop_workspace::prompt::Templates;
use agentloop_workspace::workspace::{Commit, Limits, Session, State};
use serde_json::json;

/// Turns background text into markdown for context.md: a JSON object or array becomes a fenced
/// block; anything else is kept as written (prose such as `Audience: managers` is not YAML).
pub fn format_background(text: &str) -> String {
    let t = text.trim();
    if t.is_empty() || t.starts_with("```") {
        return t.to_string();
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(t) {
        if v.is_object() || v.is_array() {
            return format!("```json\n{}\n```", serde_json::to_string_pretty(&v).unwrap_or_else(|_| t.into()));
        }
    }
    t.to_string()
}

/// Reads `--context FILE|-`: a `.yaml`/`.yml` file that holds a mapping or list becomes a fenced
/// YAML block; JSON becomes a fenced JSON block; any other text is kept as written.
pub fn read_context(arg: &str) -> Result<String> {
    let text = agentloop_io::fs::read_arg(arg)?;
    let yaml = arg.ends_with(".yaml") || arg.ends_with(".yml");
    if yaml {
        if let Ok(serde_json::Value::Object(_) | serde_json::Value::Array(_)) = serde_yaml_ng::from_str(&text) {
            return Ok(format!("```yaml\n{}\n```", text.trim()));
        }
    }
    Ok(format_background(&text))
}

/// A request's `context` (a `serve` or queue request, an event's payload) as background text: a
/// string as is, anything else as JSON.
pub fn context_text(v: Option<&serde_json::Value>) -> String {
    match v {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => serde_json::to_string_pretty(v).unwrap_or_default(),
    }
}

/// `--goal TEXT`, or `--goal -` to read it from stdin.
pub fn read_goal(arg: &str, context: Option<&str>) -> Result<String> {
    if arg != "-" {
        return Ok(arg.to_string());
    }
    if context == Some("-") {
        return Err(Error::usage("--goal - and --context - cannot both read stdin")
            .with_hint("give the context as a file, or the goal as text"));
    }
    Ok(agentloop_io::fs::read_arg("-")?.trim().to_string())
}

/// Creates a new run in the session's workspace. With `force`, a run already there is
/// archived to `runs/<run_id>/` first (as interrupted when it was still running); nothing is
/// overwritten.
pub fn init_run(
    session: &Session,
    cfg: &Config,
    tpl: &Templates,
    goal: &str,
    background: &str,
    force: bool,
    run_id: Option<String>,
) -> Result<State> {
    let goal = nonempty(goal)?;
    // Declined before the old run is moved aside.
    super::values::accept(&cfg.values, goal, background)?;
    let ws = session.workspace();
    if ws.has_run() {
        let old = ws.load_state();
        let what = match &old {
            Ok(s) => format!("run {} ({}, step {})", s.run_id, s.status.as_str(), s.step),
            Err(_) => "a run".to_string(),
        };
        if !force {
            return Err(Error::usage(format!("workspace {} already holds {what}", ws.root))
                .with_hint(format!("use another folder, go on with it with {}, or pass --force to start a new run (the old one moves to runs/<run_id>/)", ws.cli("run"))));
        }
        let mut old = old?;
        if !old.status.is_terminal() {
            old.interrupted = true;
            session.save_state(&old)?;
        }
        agentloop_workspace::history::archive(session, &cfg.handle.runs_dir, &old)?;
    }
    create(session, cfg, tpl, New { goal, background, carried: &[], run_id, slot: None, named: None, judged: None })
}

/// Creates a new run whose memory.md and context.md start with facts carried from earlier
/// runs (each naming the run it came from). The root must hold no run.
pub fn init_run_carrying(
    session: &Session,
    cfg: &Config,
    tpl: &Templates,
    goal: &str,
    background: &str,
    carried: &[String],
    tags: Tags,
) -> Result<State> {
    let Tags { slot, session: named, judged } = tags;
    create(session, cfg, tpl, New { goal: nonempty(goal)?, background, carried, run_id: None, slot, named, judged })
}

/// What a new run is for, beside its goal: a scheduler's slot (`run --slot`), the named
/// session it is a turn of (`run --session`), and the model's verdict on it against the agent's
/// values when admission asked (`Env::values_judged`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Tags<'a> {
    pub slot: Option<&'a str>,
    pub session: Option<&'a str>,
    pub judged: Option<&'a super::values::Verdict>,
}

/// Creates a new run with a given id and tags in an empty run folder (`serve`'s `runs/<id>/`):
/// nothing is carried.
pub fn init_tagged(
    session: &Session,
    cfg: &Config,
    tpl: &Templates,
    goal: &str,
    background: &str,
    run_id: String,
    tags: Tags,
) -> Result<State> {
    let Tags { slot, session: named, judged } = tags;
    create(
        session,
        cfg,
        tpl,
        New { goal: nonempty(goal)?, background, carried: &[], run_id: Some(run_id), slot, named, judged },
    )
}

/// A queued run of a series: its id, its slot, and the facts carried from the series' last
/// ended run.
#[derive(Debug, Clone, Copy)]
pub struct Queued<'a> {
    pub run_id: &'a str,
    pub slot: Option<&'a str>,
    pub carried: &'a [String],
    /// The model's verdict on the task against the agent's values, when admission asked.
    pub judged: Option<&'a super::values::Verdict>,
}

/// Creates a queued run of a series in its empty run folder (a worker's `runs/<id>/`): its
/// memory.md and context.md start with the facts carried from the series' last ended run, as
/// a follow-up's do ([`init_run_carrying`]).
pub fn init_queued(
    session: &Session,
    cfg: &Config,
    tpl: &Templates,
    goal: &str,
    background: &str,
    q: Queued,
) -> Result<State> {
    let Queued { run_id, slot, carried, judged } = q;
    let new =
        New { goal: nonempty(goal)?, background, carried, run_id: Some(run_id.into()), slot, named: None, judged };
    create(session, cfg, tpl, new)
}

fn nonempty(goal: &str) -> Result<&str> {
    let goal = goal.trim();
    if goal.is_empty() {
        return Err(Error::usage("the goal is empty").with_hint("pass --goal \"what you want done\""));
    }
    Ok(goal)
}

/// The run's date as context.md gives it (UTC, `YYYY-MM-DD`): a scheduled job names its files
/// and sections by it, and the model has no clock of its own.
pub fn run_date() -> String {
    agentloop_types::clock::now_rfc3339().chars().take(10).collect()
}

/// What a new run starts from.
struct New<'a> {
    goal: &'a str,
    background: &'a str,
    carried: &'a [String],
    run_id: Option<String>,
    slot: Option<&'a str>,
    /// The named session the run is a turn of (`run --session`).
    named: Option<&'a str>,
    judged: Option<&'a super::values::Verdict>,
}

fn create(session: &Session, cfg: &Config, tpl: &Templates, new: New) -> Result<State> {
    let New { goal, background, carried, run_id, slot, named, judged } = new;
    // A task in conflict with the agent's values is declined before anything is written.
    let values = super::values::accept(&cfg.values, goal, background)?;
    let ws = session.workspace();
    // A fact carried from several runs is one line naming each of them.
    let carried = &agentloop_workspace::facts::merged(carried.iter().cloned());
    // Never through a link: a symlinked artifacts/ is refused (exit 8) before the run starts.
    agentloop_io::fs::Folder::open(&ws.root, camino::Utf8Path::new("artifacts"), true)?;
    // A run id is never reused within a workspace's history (a fixed test clock repeats ids
    // across processes, so an archived one is skipped).
    let archive = agentloop_workspace::history::runs_dir(ws, &cfg.handle.runs_dir);
    let mut id = run_id.unwrap_or_else(|| agentloop_types::run_id::RunId::generate().into_string());
    while archive.join(&id).exists() {
        id = agentloop_types::run_id::RunId::generate().into_string();
    }
    let output_schema = crate::output_schema::resolve(cfg, &ws.root, agentloop_model::model::strict_schemas(cfg))?;
    let mut state = State::new(id, goal.to_string(), Limits::from_config(cfg));
    state.agent = cfg.agent.clone();
    state.slot = slot.map(String::from);
    state.session = named.map(String::from);
    state.output_schema = output_schema;
    let memory = Memory {
        goal: goal.to_string(),
        status: "initialised; not framed yet".into(),
        facts: carried.to_vec(),
        ..Default::default()
    };
    let mut commit = Commit::default();
    commit
        .file(
            "context.md",
            tpl.render(
                "context.md.j2",
                json!({"goal": goal, "background": format_background(background), "carried": carried,
                    "date": run_date(), "slot": slot}),
            )?,
        )
        .file("memory.md", tpl.render("memory.md.j2", &memory)?)
        .file("plan.md", tpl.render("plan.md.j2", markdown::plan_view(&Plan::default()))?)
        .file("decisions.md", tpl.render("decisions.md.j2", json!({}))?);
    let mut e = Entry::new(&state.run_id, 0, Phase::Run, Event::RunStarted);
    e.schema_version = Some(trace::SCHEMA_VERSION);
    let mut data = json!({"goal": goal, "limits": state.limits});
    if !values.checked.is_empty() {
        // The values the task was checked against when it was accepted (the report shows them).
        data["values"] = json!(values.checked);
    }
    if let Some(v) = judged {
        // The model's verdict that let the task through (`values_check: model`), and why.
        data["values_judged"] = json!({"conflict": v.conflict, "value": v.value, "reason": v.reason});
    }
    if let Some(a) = &state.agent {
        data["agent"] = json!(a);
    }
    if let Some(s) = &state.slot {
        data["slot"] = json!(s);
    }
    if let Some(s) = &state.session {
        data["session"] = json!(s);
    }
    if !carried.is_empty() {
        data["carried_facts"] = json!(carried.len());
    }
    if agentloop_tools::catalog::mark_seeded(ws)? {
        data["skills_md"] = json!("seeded");
    }
    e.data = Some(data);
    commit.entry(&e);
    commit.state = Some(state.clone());
    session.commit(&commit)?;
    Ok(state)
}
