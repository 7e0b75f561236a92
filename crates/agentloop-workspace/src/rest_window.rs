//! Rest: rolling usage windows across invocations. Each `run` invocation appends
//! what it used (tokens, cost, whether it started a run) to a ledger in the user state folder
//! (`$XDG_STATE_HOME/agentloop/usage.jsonl`, one line per invocation, written with one append so
//! concurrent processes never interleave). Before a run calls a model, the usage of the agent
//! profile within `rest.window` is summed; over `rest.max_tokens`, `rest.max_cost_usd` or
//! `rest.max_runs`, the agent rests: no model call, exit 10, and the time it may run again.
//!
//! The same ledger keeps the agent's wellbeing, as lines of their own `kind`: fatigue is the
//! share of the fullest window limit used (a new run is refused above `rest.max_fatigue`);
//! `stress` lines are runs escalated by frustration the forced reframe did not resolve, and
//! stress (their sum, falling by `stress.decay_per_hour`) at `stress.threshold` puts the agent
//! to rest. Stress is kept per workspace for the unnamed agent `default` (a flaky model in one
//! folder rests no other), and across workspaces for a named profile (`--agent NAME`), whose
//! identity the person chose to share; a `rest` line (`agentloop rest`) forgives `rest.relief` percent of the usage and
//! stress before it; `dream` lines are what `dream --explore` spent of its curiosity budget.

use agentloop_config::config::Config;
use agentloop_types::error::{Error, Kind, Result};
use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Line {
    pub ts: String,
    pub agent: String,
    pub run_id: String,
    pub tokens: u64,
    pub cost_usd: f64,
    /// This invocation started a new run.
    #[serde(default)]
    pub new_run: bool,
    /// What the line records: absent for a run's usage; `rest`, `stress` or `dream`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A `stress` line: how much stress rose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<f64>,
    /// A `rest` line: the light tasks it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<String>,
    /// A `stress` line: the workspace the run was in ([`stress_scope`]'s folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

impl Line {
    fn new(cfg: &Config, run_id: &str, kind: Option<&str>) -> Line {
        Line {
            ts: agentloop_types::clock::now_rfc3339(),
            agent: agent_of(cfg),
            run_id: run_id.into(),
            tokens: 0,
            cost_usd: 0.0,
            new_run: false,
            kind: kind.map(String::from),
            amount: None,
            tasks: vec![],
            workspace: None,
        }
    }
    fn is(&self, kind: &str) -> bool {
        self.kind.as_deref() == Some(kind)
    }
}

/// Usage inside the window, and when the window frees up.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    pub agent: String,
    pub window_secs: u64,
    pub tokens: u64,
    pub cost_usd: f64,
    pub runs: u64,
    /// The window's limits (`rest.max_tokens`, `rest.max_cost_usd`, `rest.max_runs`).
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_runs: Option<u64>,
    /// Percent (0-100) of the fullest limit used: the agent's fatigue.
    pub fatigue: f64,
    /// Fatigue above which a new run is refused (`rest.max_fatigue`).
    pub max_fatigue: f64,
    /// The last rest, if one is inside the window (usage before it counts `rest.relief` less).
    pub rested_at: Option<String>,
    /// Set when a limit is reached: why, and the time the agent may run again.
    pub resting: Option<String>,
    pub until: Option<String>,
}

/// The agent's stress now: what unresolved frustration left behind, less decay and rests.
#[derive(Debug, Clone, Serialize)]
pub struct Stress {
    pub agent: String,
    /// The workspace whose runs the stress is of (the agent `default`); absent for a named
    /// profile, whose stress is of all its runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    pub level: f64,
    pub threshold: f64,
    /// Runs escalated by frustration that raised it, ever.
    pub escalations: u64,
    /// Set at the threshold: why the agent rests, and when stress will be below it again.
    pub resting: Option<String>,
    pub until: Option<String>,
}

pub fn ledger() -> Option<Utf8PathBuf> {
    Some(agentloop_config::config::xdg_dir("XDG_STATE_HOME", ".local/state")?.join("agentloop/usage.jsonl"))
}

pub fn agent_of(cfg: &Config) -> String {
    cfg.agent.clone().unwrap_or_else(|| "default".into())
}

fn enabled(cfg: &Config) -> bool {
    let r = &cfg.rest;
    r.max_tokens.is_some() || r.max_cost_usd.is_some() || r.max_runs.is_some()
}

fn read_lines() -> Vec<Line> {
    let Some(path) = ledger() else { return vec![] };
    let text = match agentloop_io::fs::read_optional(&path) {
        Ok(t) => t.unwrap_or_default(),
        // Unreadable is not "no usage": say so, then go on as the run would without the file.
        Err(e) => {
            agentloop_io::output::warning(&format!("rest: {}; usage windows start empty", e.detail()));
            String::new()
        }
    };
    // A torn or foreign line is skipped: the ledger only ever narrows what a run may do.
    let mut lines: Vec<Line> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    // A cost that is not one (negative, or absurdly large) counts as $0, or as the largest cost
    // a line may record: the line's tokens and run still count, and no sum prints as `$-inf`.
    let mut fixed = 0;
    for l in &mut lines {
        if agentloop_types::budget::bad_cost(l.cost_usd).is_some() {
            let max = agentloop_types::budget::MAX_RECORDED_COST_USD;
            l.cost_usd = if l.cost_usd > max { max } else { 0.0 };
            fixed += 1;
        }
    }
    // Said once per process: a command reads the ledger more than once.
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if fixed > 0 && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        let max = agentloop_types::budget::MAX_RECORDED_COST_USD;
        agentloop_io::output::warning(&format!(
            "rest: {path}: {fixed} line(s) give a cost_usd below 0 or over {max}; read as $0 (or {max})"
        ));
    }
    lines
}

/// When the agent last rested (its newest `rest` line), if ever.
fn last_rest(agent: &str, lines: &[Line], now: SystemTime) -> Option<SystemTime> {
    lines
        .iter()
        .filter(|l| l.agent == agent && l.is("rest"))
        .filter_map(|l| agentloop_types::clock::parse_rfc3339(&l.ts))
        .filter(|t| *t <= now)
        .max()
}

/// The agent's usage within the window (a pure function of the ledger lines and the time).
pub fn window_of(cfg: &Config, lines: &[Line], now: SystemTime) -> Window {
    let agent = agent_of(cfg);
    let span = cfg.rest.window.0;
    let start = now.checked_sub(span).unwrap_or(SystemTime::UNIX_EPOCH);
    let inside: Vec<(SystemTime, &Line)> = lines
        .iter()
        .filter(|l| l.agent == agent && l.kind.is_none())
        .filter_map(|l| agentloop_types::clock::parse_rfc3339(&l.ts).map(|t| (t, l)))
        .filter(|(t, _)| *t > start)
        .collect();
    // What came before the last rest counts `rest.relief` percent less.
    let rested = last_rest(&agent, lines, now).filter(|t| *t > start);
    let keep = 1.0 - cfg.rest.relief / 100.0;
    let weight = |t: &SystemTime| if rested.is_some_and(|r| *t <= r) { keep } else { 1.0 };
    let tokens = inside.iter().map(|(t, l)| l.tokens as f64 * weight(t)).sum::<f64>().round() as u64;
    let cost: f64 = inside.iter().map(|(t, l)| l.cost_usd * weight(t)).sum();
    let runs_f: f64 = inside.iter().filter(|(_, l)| l.new_run).map(|(t, _)| weight(t)).sum();
    let runs = runs_f.round() as u64;
    let r = &cfg.rest;
    let share = |used: f64, max: Option<f64>| max.map(|m| if m <= 0.0 { 100.0 } else { used / m * 100.0 });
    let fatigue = [
        share(tokens as f64, r.max_tokens.map(|m| m as f64)),
        share(cost, r.max_cost_usd),
        share(runs_f, r.max_runs.map(|m| m as f64)),
    ]
    .into_iter()
    .flatten()
    .fold(0.0f64, f64::max)
    .min(100.0);
    let reason = if r.max_tokens.is_some_and(|m| tokens >= m) {
        Some(format!("{tokens} tokens used in the last {} (rest.max_tokens {})", fmt(span), r.max_tokens.unwrap_or(0)))
    } else if r.max_cost_usd.is_some_and(|m| cost >= m) {
        Some(format!(
            "${cost:.4} spent in the last {} (rest.max_cost_usd {})",
            fmt(span),
            r.max_cost_usd.unwrap_or(0.0)
        ))
    } else if r.max_runs.is_some_and(|m| runs_f >= m as f64) {
        Some(format!("{runs} runs started in the last {} (rest.max_runs {})", fmt(span), r.max_runs.unwrap_or(0)))
    } else {
        None
    };
    // Resting ends when the oldest entry inside the window leaves it (a safe, simple bound).
    let until = reason
        .as_ref()
        .and_then(|_| inside.iter().map(|(t, _)| *t).min())
        .map(|t| agentloop_types::clock::rfc3339(t + span));
    Window {
        agent,
        window_secs: span.as_secs(),
        tokens,
        cost_usd: (cost * 1e6).round() / 1e6,
        runs,
        max_tokens: r.max_tokens,
        max_cost_usd: r.max_cost_usd,
        max_runs: r.max_runs,
        fatigue: (fatigue * 10.0).round() / 10.0,
        max_fatigue: r.max_fatigue,
        rested_at: rested.map(agentloop_types::clock::rfc3339),
        resting: reason,
        until,
    }
}

/// Whose stress a run in `root` adds to and is refused by: its workspace's folder for the agent
/// `default`, None (all of the profile's runs) for a named one. A run that event mode, `serve`
/// or a worker keeps in `ROOT/<handle.runs_dir>/<id>/` is of the workspace ROOT.
pub fn stress_scope(cfg: &Config, root: &camino::Utf8Path) -> Option<String> {
    if cfg.agent.is_some() {
        return None;
    }
    let abs = std::path::absolute(root).ok().and_then(|p| Utf8PathBuf::from_path_buf(p).ok());
    let abs = abs.unwrap_or_else(|| root.to_path_buf());
    let owner = abs.parent().filter(|p| p.file_name() == Some(cfg.handle.runs_dir.as_str())).and_then(|p| p.parent());
    Some(owner.unwrap_or(&abs).to_string())
}

/// The agent's stress at `now` in `scope` ([`stress_scope`]; a pure function of the ledger
/// lines and the time): each `stress` line adds its amount (up to 100), each `rest` line
/// forgives `rest.relief` percent, and between them it falls by `stress.decay_per_hour`.
pub fn stress_of(cfg: &Config, scope: Option<&str>, lines: &[Line], now: SystemTime) -> Stress {
    let agent = agent_of(cfg);
    // A rest is the agent's, wherever it ran; a stress line counts only in its own scope.
    let mine = |l: &Line| l.is("rest") || scope.is_none() || l.workspace.as_deref() == scope;
    let mut events: Vec<(SystemTime, &Line)> = lines
        .iter()
        .filter(|l| l.agent == agent && (l.is("stress") || l.is("rest")) && mine(l))
        .filter_map(|l| agentloop_types::clock::parse_rfc3339(&l.ts).map(|t| (t, l)))
        .filter(|(t, _)| *t <= now)
        .collect();
    events.sort_by_key(|(t, _)| *t);
    let c = &cfg.stress;
    let decay = |level: f64, from: SystemTime, to: SystemTime| {
        let hours = to.duration_since(from).unwrap_or_default().as_secs_f64() / 3600.0;
        (level - c.decay_per_hour * hours).max(0.0)
    };
    let (mut level, mut at, mut escalations) = (0.0f64, SystemTime::UNIX_EPOCH, 0u64);
    for (t, l) in events {
        level = decay(level, at, t);
        at = t;
        if l.is("stress") {
            level = (level + l.amount.unwrap_or(0.0).max(0.0)).min(100.0);
            escalations += 1;
        } else {
            level *= 1.0 - cfg.rest.relief / 100.0;
        }
    }
    // Decided on the level itself, and shown rounded down: the level shown is at the threshold
    // exactly when the agent rests, and `until` is the moment the refusal really ends.
    let exact = decay(level, at, now);
    let level = ((exact * 10.0) + 1e-9).floor() / 10.0;
    let over = c.threshold > 0.0 && exact >= c.threshold;
    let resting = over.then(|| {
        format!(
            "stress {level} reached stress.threshold {} (runs escalated by frustration a reframe did not resolve)",
            c.threshold
        )
    });
    // Stress is below the threshold again once it has fallen past it.
    let until = (over && c.decay_per_hour > 0.0).then(|| {
        // At most a hundred years: a tiny decay still names a time that can be printed.
        const MAX_SECS: f64 = 100.0 * 365.25 * 86400.0;
        let secs = ((exact - c.threshold) / c.decay_per_hour * 3600.0).floor().min(MAX_SECS) as u64 + 1;
        agentloop_types::clock::rfc3339(now + Duration::from_secs(secs))
    });
    Stress { agent, workspace: scope.map(String::from), level, threshold: c.threshold, escalations, resting, until }
}

/// Tokens and USD `dream --explore` spent within `dream.curiosity.window` (a pure function).
pub fn curiosity_of(cfg: &Config, lines: &[Line], now: SystemTime) -> (u64, f64) {
    let agent = agent_of(cfg);
    let start = now.checked_sub(cfg.dream.curiosity.window.0).unwrap_or(SystemTime::UNIX_EPOCH);
    lines
        .iter()
        .filter(|l| l.agent == agent && l.is("dream"))
        .filter(|l| agentloop_types::clock::parse_rfc3339(&l.ts).is_some_and(|t| t > start && t <= now))
        .fold((0u64, 0.0), |(t, c), l| (t.saturating_add(l.tokens), c + l.cost_usd))
}

fn fmt(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// The agent's window now; None when `rest` sets no limit.
pub fn current(cfg: &Config) -> Option<Window> {
    enabled(cfg).then(|| window_of(cfg, &read_lines(), agentloop_types::clock::now()))
}

/// The agent's stress now, for a run in the workspace `root`.
pub fn stress(cfg: &Config, root: &camino::Utf8Path) -> Stress {
    stress_of(cfg, stress_scope(cfg, root).as_deref(), &read_lines(), agentloop_types::clock::now())
}

/// What `dream --explore` spent of its curiosity budget in the window now.
pub fn curiosity(cfg: &Config) -> (u64, f64) {
    curiosity_of(cfg, &read_lines(), agentloop_types::clock::now())
}

/// Why a running run stops to rest, if it does: the agent's window with `tokens` and `cost_usd`
/// more (what the run used since its usage was last recorded) has reached `rest.max_tokens` or
/// `rest.max_cost_usd`. The reason names the limit, the fatigue and when the agent may go on.
pub fn filled_while_running(cfg: &Config, tokens: u64, cost_usd: f64) -> Option<String> {
    let r = &cfg.rest;
    if r.max_tokens.is_none() && r.max_cost_usd.is_none() {
        return None;
    }
    let mut lines = read_lines();
    let mut now_line = Line::new(cfg, "", None);
    (now_line.tokens, now_line.cost_usd) = (tokens, cost_usd);
    lines.push(now_line);
    let w = window_of(cfg, &lines, agentloop_types::clock::now());
    let why = if r.max_tokens.is_some_and(|m| w.tokens >= m) {
        format!(
            "{} tokens used in the last {} (rest.max_tokens {})",
            w.tokens,
            fmt(cfg.rest.window.0),
            r.max_tokens.unwrap_or(0)
        )
    } else if r.max_cost_usd.is_some_and(|m| w.cost_usd >= m) {
        format!(
            "${:.4} spent in the last {} (rest.max_cost_usd {})",
            w.cost_usd,
            fmt(cfg.rest.window.0),
            r.max_cost_usd.unwrap_or(0.0)
        )
    } else {
        return None;
    };
    let until = w.until.map(|u| format!("; it may go on at {u}, or after `agentloop rest`")).unwrap_or_default();
    Some(format!("resting: agent `{}` is tired (fatigue {}%): {why}{until}", w.agent, w.fatigue))
}

/// When the agent last rested, if that is within `rest.window` of now.
pub fn rested_within(cfg: &Config) -> Option<String> {
    let now = agentloop_types::clock::now();
    let start = now.checked_sub(cfg.rest.window.0).unwrap_or(SystemTime::UNIX_EPOCH);
    last_rest(&agent_of(cfg), &read_lines(), now).filter(|t| *t > start).map(agentloop_types::clock::rfc3339)
}

/// Prefix of the id of a rest the agent took itself after a run (`modes.auto`).
pub const AUTO_REST: &str = "rest-auto-";

/// `status`'s `modes`: whether the agent switches modes itself, and its last rest (when, and
/// whether the agent took it itself).
pub fn modes(cfg: &Config) -> serde_json::Value {
    let agent = agent_of(cfg);
    let now = agentloop_types::clock::now();
    let last = read_lines()
        .into_iter()
        .filter(|l| l.agent == agent && l.is("rest"))
        .filter_map(|l| agentloop_types::clock::parse_rfc3339(&l.ts).filter(|t| *t <= now).map(|t| (t, l)))
        .max_by_key(|(t, _)| *t);
    let last_rest = last.map(|(t, l)| {
        let by = if l.run_id.starts_with(AUTO_REST) { "agent" } else { "command" };
        serde_json::json!({"at": agentloop_types::clock::rfc3339(t), "by": by, "tasks": l.tasks})
    });
    serde_json::json!({"auto": cfg.modes.auto, "last_rest": last_rest})
}

/// Why a new run is refused as too tired (fatigue above `rest.max_fatigue`), if it is.
pub fn too_tired(w: &Window) -> Option<String> {
    (w.fatigue > w.max_fatigue).then(|| {
        format!(
            "agent `{}` is too tired: fatigue {}% of its rolling usage window is above rest.max_fatigue {}%",
            w.agent, w.fatigue, w.max_fatigue
        )
    })
}

/// Refuses to start model work in the workspace `root` while the agent rests (exit 10): a full
/// usage window, or stress at its threshold.
pub fn check(cfg: &Config, root: &camino::Utf8Path) -> Result<()> {
    let s = stress(cfg, root);
    if let Some(why) = &s.resting {
        let when = s.until.as_deref().map(|u| format!("it may run again at {u}, or ")).unwrap_or_default();
        let here = s.workspace.as_deref().map(|w| format!(" in {w}")).unwrap_or_default();
        return Err(Error::new(Kind::Resting, format!("agent `{}` is resting{here}: {why}; {when}after `agentloop rest`", s.agent))
            .with_hint("run `agentloop rest` (light tasks, no model call; it lowers stress by rest.relief), or wait; stress.threshold sets where stress puts the agent to rest"));
    }
    let Some(w) = current(cfg) else { return Ok(()) };
    match (&w.resting, &w.until) {
        (Some(why), until) => Err(Error::new(
            Kind::Resting,
            format!("agent `{}` is resting: {why}; it may run again at {}", w.agent, until.clone().unwrap_or_default()),
        )
        .with_hint(
            "wait, or raise the rest limits (rest.max_tokens, rest.max_cost_usd, rest.max_runs) for this agent",
        )),
        _ => Ok(()),
    }
}

/// Appends what one invocation used. Ledger failures are reported, not fatal.
pub fn record(
    cfg: &Config,
    run_id: &str,
    tokens: u64,
    cost_usd: f64,
    new_run: bool,
) -> agentloop_types::error::Result<()> {
    if tokens == 0 && !new_run {
        return Ok(());
    }
    let mut line = Line::new(cfg, run_id, None);
    (line.tokens, line.cost_usd, line.new_run) = (tokens, cost_usd, new_run);
    append(&line)
}

/// Appends one line to the ledger (one append: concurrent processes never interleave).
fn append(line: &Line) -> agentloop_types::error::Result<()> {
    let Some(path) = ledger() else { return Ok(()) };
    if let Some(dir) = path.parent() {
        agentloop_io::fs::create_dir_all(dir)?;
    }
    agentloop_io::fs::append_line(&path, &agentloop_types::json::to_string(line))
}

/// Records that frustration escalated run `run_id` in the workspace `root` after the forced
/// reframe: stress rises by `stress.per_escalation`.
pub fn record_stress(cfg: &Config, root: &camino::Utf8Path, run_id: &str) -> agentloop_types::error::Result<()> {
    let mut line = Line::new(cfg, run_id, Some("stress"));
    line.amount = Some(cfg.stress.per_escalation);
    line.workspace = stress_scope(cfg, root);
    append(&line)
}

/// Records a rest (`agentloop rest`) and the tasks it ran: fatigue and stress fall.
pub fn record_rest(cfg: &Config, id: &str, tasks: Vec<String>) -> agentloop_types::error::Result<()> {
    let mut line = Line::new(cfg, id, Some("rest"));
    line.tasks = tasks;
    append(&line)
}

/// Records what one exploration of `dream --explore` spent of the curiosity budget.
pub fn record_dream(cfg: &Config, id: &str, tokens: u64, cost_usd: f64) -> agentloop_types::error::Result<()> {
    let mut line = Line::new(cfg, id, Some("dream"));
    (line.tokens, line.cost_usd) = (tokens, cost_usd);
    append(&line)
}
