//! Rest: rolling usage windows across invocations. Each `run` invocation appends
//! what it used (tokens, cost, whether it started a run) to a ledger in the user state folder
//! (`$XDG_STATE_HOME/agentloop/usage.jsonl`, one line per invocation, written with one append so
//! concurrent processes never interleave). Before a run calls a model, the usage of the agent
//! profile within `rest.window` is summed; over `rest.max_tokens`, `rest.max_cost_usd` or
//! `rest.max_runs`, the agent rests: no model call, exit 10, and the time it may run again.

use crate::config::Config;
use crate::error::{Error, Kind, Result};
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
}

/// Usage inside the window, and when the window frees up.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    pub agent: String,
    pub window_secs: u64,
    pub tokens: u64,
    pub cost_usd: f64,
    pub runs: u64,
    /// Set when a limit is reached: why, and the time the agent may run again.
    pub resting: Option<String>,
    pub until: Option<String>,
}

pub fn ledger() -> Option<Utf8PathBuf> {
    Some(crate::config::xdg_dir("XDG_STATE_HOME", ".local/state")?.join("agentloop/usage.jsonl"))
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
    let text = match crate::fs::read_optional(&path) {
        Ok(t) => t.unwrap_or_default(),
        // Unreadable is not "no usage": say so, then go on as the run would without the file.
        Err(e) => {
            crate::output::warning(&format!("rest: {}; usage windows start empty", e.message));
            String::new()
        }
    };
    // A torn or foreign line is skipped: the ledger only ever narrows what a run may do.
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The agent's usage within the window (a pure function of the ledger lines and the time).
pub fn window_of(cfg: &Config, lines: &[Line], now: SystemTime) -> Window {
    let agent = agent_of(cfg);
    let span = cfg.rest.window.0;
    let start = now.checked_sub(span).unwrap_or(SystemTime::UNIX_EPOCH);
    let inside: Vec<(SystemTime, &Line)> = lines
        .iter()
        .filter(|l| l.agent == agent)
        .filter_map(|l| crate::clock::parse_rfc3339(&l.ts).map(|t| (t, l)))
        .filter(|(t, _)| *t > start)
        .collect();
    let tokens: u64 = inside.iter().map(|(_, l)| l.tokens).sum();
    let cost: f64 = inside.iter().map(|(_, l)| l.cost_usd).sum();
    let runs = inside.iter().filter(|(_, l)| l.new_run).count() as u64;
    let r = &cfg.rest;
    let reason = if r.max_tokens.is_some_and(|m| tokens >= m) {
        Some(format!("{tokens} tokens used in the last {} (rest.max_tokens {})", fmt(span), r.max_tokens.unwrap_or(0)))
    } else if r.max_cost_usd.is_some_and(|m| cost >= m) {
        Some(format!(
            "${cost:.4} spent in the last {} (rest.max_cost_usd {})",
            fmt(span),
            r.max_cost_usd.unwrap_or(0.0)
        ))
    } else if r.max_runs.is_some_and(|m| runs >= m) {
        Some(format!("{runs} runs started in the last {} (rest.max_runs {})", fmt(span), r.max_runs.unwrap_or(0)))
    } else {
        None
    };
    // Resting ends when the oldest entry inside the window leaves it (a safe, simple bound).
    let until =
        reason.as_ref().and_then(|_| inside.iter().map(|(t, _)| *t).min()).map(|t| crate::clock::rfc3339(t + span));
    Window {
        agent,
        window_secs: span.as_secs(),
        tokens,
        cost_usd: (cost * 1e6).round() / 1e6,
        runs,
        resting: reason,
        until,
    }
}

fn fmt(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// The agent's window now; None when `rest` sets no limit.
pub fn current(cfg: &Config) -> Option<Window> {
    enabled(cfg).then(|| window_of(cfg, &read_lines(), crate::clock::now()))
}

/// Refuses to start model work while the agent rests (exit 10).
pub fn check(cfg: &Config) -> Result<()> {
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
) -> std::result::Result<(), String> {
    if tokens == 0 && !new_run {
        return Ok(());
    }
    let Some(path) = ledger() else { return Ok(()) };
    if let Some(dir) = path.parent() {
        crate::fs::create_dir_all(dir).map_err(|e| e.message)?;
    }
    let line = Line {
        ts: crate::clock::now_rfc3339(),
        agent: agent_of(cfg),
        run_id: run_id.into(),
        tokens,
        cost_usd,
        new_run,
    };
    crate::fs::append_line(&path, &serde_json::to_string(&line).expect("line serializes")).map_err(|e| e.message)
}
