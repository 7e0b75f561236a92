//! The agent's wellbeing sections: rest, stress, values, dream, curiosity and frustration.

use super::*;
use serde::{Deserialize, Serialize};

/// `rest:` — rolling usage limits across invocations for the agent profile:
/// within `window`, at most `max_tokens`, `max_cost_usd` and `max_runs` (none set: no limit).
/// Fatigue is the share of the fullest of these used; a new run is refused above `max_fatigue`
/// percent (negotiation). `agentloop rest` runs `tasks` (no model call) and forgives `relief`
/// percent of the usage and stress before it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RestConfig {
    pub window: Dur,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_runs: Option<u64>,
    /// Fatigue (percent of the window used) above which a new run is refused.
    pub max_fatigue: f64,
    /// Percent of the window's usage and of stress that a rest forgives.
    pub relief: f64,
    /// The light tasks `agentloop rest` runs, from a fixed set (see [`RestTask`]).
    pub tasks: Vec<RestTask>,
}

impl Default for RestConfig {
    fn default() -> Self {
        RestConfig {
            window: Dur::secs(24 * 3600),
            max_tokens: None,
            max_cost_usd: None,
            max_runs: None,
            max_fatigue: 90.0,
            relief: 50.0,
            tasks: vec![RestTask::MemoryPrune, RestTask::Report],
        }
    }
}

/// A light task of `agentloop rest`: built in, no model call, no program of anyone's choosing.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RestTask {
    /// `memory prune`: expired long-term memory entries are deleted.
    MemoryPrune,
    /// `report`: the workspace's report.html is written again from its files.
    Report,
}

impl RestTask {
    pub fn name(self) -> &'static str {
        match self {
            RestTask::MemoryPrune => "memory_prune",
            RestTask::Report => "report",
        }
    }
}

/// `modes:` — the agent switches modes itself. With `auto` (the default), a `run` that ends
/// with the agent tired (its usage window filled, or fatigue above `rest.max_fatigue`) or
/// stressed (at `stress.threshold`) rests on its own, as `agentloop rest` does — at most once per
/// `rest.window`, so resting never undoes the window — and a `run` with nothing to do dreams
/// (`dream`'s consolidation with no model call, then its exploration on the curiosity budget).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ModesConfig {
    pub auto: bool,
}

impl Default for ModesConfig {
    fn default() -> Self {
        ModesConfig { auto: true }
    }
}

/// `stress:` — a run escalated by frustration (the forced reframe did not resolve it) raises
/// the agent's stress by `per_escalation`; stress falls by `decay_per_hour` and with a rest; at
/// `threshold` or above the agent rests (new work refused, exit 10) until it is below again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StressConfig {
    pub per_escalation: f64,
    /// 0 turns the automatic rest off (stress is still kept and shown).
    pub threshold: f64,
    pub decay_per_hour: f64,
}

impl Default for StressConfig {
    fn default() -> Self {
        StressConfig { per_escalation: 25.0, threshold: 75.0, decay_per_hour: 5.0 }
    }
}

/// One of `values:` — a value of the agent and the phrases that mark a task in conflict with
/// it. The match is the user's own and deterministic (no model is asked): a phrase conflicts
/// when the goal or the context holds it as whole words, case and punctuation aside (a word
/// ending in `*` matches any word it begins).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawAgentValue")]
pub struct AgentValue {
    pub name: String,
    /// Why the value matters, said with a declined task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub refuse_if: Vec<String>,
}

/// [`AgentValue`] as written, checked before it is taken (a value that could never match, or
/// one without a name, is an error naming its key rather than a check that silently passes).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgentValue {
    name: String,
    #[serde(default)]
    description: Option<String>,
    refuse_if: Vec<String>,
}

/// Why a value cannot be taken (serde's `try_from` says it with the value's place in the file).
#[derive(Debug)]
pub struct BadValue(String);

impl std::fmt::Display for BadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<RawAgentValue> for AgentValue {
    type Error = BadValue;
    fn try_from(r: RawAgentValue) -> std::result::Result<Self, BadValue> {
        let name = r.name.trim().to_string();
        if name.is_empty() {
            return Err(BadValue("a value needs a `name`".into()));
        }
        if r.refuse_if.is_empty() {
            return Err(BadValue(format!(
                "value `{name}` has an empty `refuse_if`: list the words or phrases a task in conflict with it names"
            )));
        }
        if let Some(p) = r.refuse_if.iter().find(|p| !p.chars().any(char::is_alphanumeric)) {
            return Err(BadValue(format!(
                "value `{name}`: refuse_if phrase {p:?} has no letters or digits, so it could never match"
            )));
        }
        Ok(AgentValue { name, description: r.description, refuse_if: r.refuse_if })
    }
}

/// `dream:` — what `dream --explore` explores and what it may spend.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DreamConfig {
    /// Topics the agent is curious about, explored beside its open questions.
    pub interests: Vec<String>,
    /// Questions explored in one dream, at most.
    pub max_questions: usize,
    /// The curiosity budget: its own rolling window, apart from `rest:`.
    pub curiosity: CuriosityConfig,
}

impl Default for DreamConfig {
    fn default() -> Self {
        DreamConfig { interests: vec![], max_questions: 3, curiosity: CuriosityConfig::default() }
    }
}

/// `dream.curiosity:` — tokens and USD `dream --explore` may spend within `window`; with
/// neither set, exploring makes no model call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CuriosityConfig {
    pub window: Dur,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

impl Default for CuriosityConfig {
    fn default() -> Self {
        CuriosityConfig { window: Dur::secs(24 * 3600), max_tokens: None, max_cost_usd: None }
    }
}

/// `frustration:` — tool errors (+1), repeated actions (+1) and refused `done`s (+2) raise a
/// score, clean steps lower it (-1); at `threshold`, or when a failure limit is hit, the loop
/// reframes once (`reframe: true`) before it escalates.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FrustrationConfig {
    /// Score that counts as stuck (0: only the failure limits count).
    pub threshold: u32,
    /// Force one reframe before escalating.
    pub reframe: bool,
}

impl Default for FrustrationConfig {
    fn default() -> Self {
        FrustrationConfig { threshold: 6, reframe: true }
    }
}
