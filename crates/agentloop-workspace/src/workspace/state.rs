//! state.json: the machine state of one run, and the limits, statuses and pending action it holds.

use agentloop_config::config::Config;
use agentloop_types::budget::Budget;
use agentloop_types::trace::Usage;
use serde::{Deserialize, Serialize};

pub const STATE_SCHEMA_VERSION: u32 = 1;

/// Where a run is: the next phase to execute, or finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Next {
    Frame,
    Plan,
    Act,
    Reflect,
    Finish,
    None,
}

impl Next {
    /// The name state.json gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Next::Frame => "frame",
            Next::Plan => "plan",
            Next::Act => "act",
            Next::Reflect => "reflect",
            Next::Finish => "finish",
            Next::None => "none",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Done,
    Escalated,
}

impl Status {
    /// The status of a run that stopped this way: `done`, or `escalated` (it needs someone).
    pub fn ended(stop: StopKind) -> Status {
        if stop.is_done() {
            Status::Done
        } else {
            Status::Escalated
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Done => "done",
            Status::Escalated => "escalated",
        }
    }
    pub fn is_terminal(self) -> bool {
        self != Status::Running
    }
    /// The status of that name (as [`Status::as_str`] writes it), if it is one.
    pub fn named(word: &str) -> Option<Status> {
        [Status::Running, Status::Done, Status::Escalated].into_iter().find(|s| s.as_str() == word)
    }
}

/// Why a run stopped; its exit code, result.json value and event are in [`agentloop_types::outcome`].
pub use agentloop_types::outcome::StopKind;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Limits {
    pub max_steps: u32,
    pub max_reframes: u32,
    pub timeout_secs: u64,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

impl Limits {
    /// The limits in force for a run that recorded `self`: each limit given now (a config file,
    /// the environment or a flag — any source but the built-in default) replaces the recorded
    /// one; the others stay as the run recorded them (e.g. `init --max-steps 7`).
    pub fn in_force(&self, c: &Config, sources: &agentloop_config::config::Sources) -> Self {
        let now = Limits::from_config(c);
        let mut l = self.clone();
        for b in Budget::ALL {
            if sources.get(b.key()).is_some_and(agentloop_config::config::Source::is_given) {
                l.take(b, &now);
            }
        }
        l
    }

    /// Sets the limit `b` to `from`'s.
    fn take(&mut self, b: Budget, from: &Limits) {
        match b {
            Budget::MaxSteps => self.max_steps = from.max_steps,
            Budget::MaxReframes => self.max_reframes = from.max_reframes,
            Budget::Timeout => self.timeout_secs = from.timeout_secs,
            Budget::MaxTokens => self.max_tokens = from.max_tokens,
            Budget::MaxCostUsd => self.max_cost_usd = from.max_cost_usd,
        }
    }

    pub fn from_config(c: &Config) -> Self {
        Limits {
            max_steps: c.max_steps,
            max_reframes: c.max_reframes,
            timeout_secs: c.timeout.0.as_secs(),
            max_tokens: c.max_tokens,
            max_cost_usd: c.max_cost_usd,
        }
    }
}

/// The action chosen by Plan and not yet reflected on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Pending {
    pub step: u32,
    pub tool: String,
    pub args: serde_json::Value,
    #[serde(default)]
    pub attempt: u32,
    pub requested_at: String,
    /// The step's tool is run by another process (event mode's router): the request went out
    /// and the run waits for its result, so a run whose lock is free is waiting, not interrupted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handed_off: bool,
}

/// state.json: the machine state of one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct State {
    pub schema_version: u32,
    pub run_id: String,
    /// The agent profile the run started as (`agent`, `--agent`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The scheduler's slot the run is for (`run --slot KEY`, e.g. a date), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// The named session the run is a turn of (`run --session NAME`), if any: the session's
    /// earlier turns were its context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The series of queued runs the run belongs to (`enqueue --series NAME`, or by default a
    /// slot's agent and goal), if any: it started from the series' last ended run's facts and
    /// `state/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<String>,
    pub goal: String,
    pub status: Status,
    pub next: Next,
    pub step: u32,
    pub reframes: u32,
    pub started_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub finished_at: Option<String>,
    pub limits: Limits,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub cost_usd: f64,
    /// True once any call had an unknown price (cost_usd then undercounts).
    #[serde(default)]
    pub cost_incomplete: bool,
    /// The model id of the last answer (`scripted` for a replay, which has no cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Wall time spent in `run`, summed across invocations.
    #[serde(default)]
    pub elapsed_ms: u64,
    #[serde(default)]
    pub pending: Option<Pending>,
    #[serde(default)]
    pub consecutive_failures: u32,
    /// Fingerprint of the last action + result, and how many times in a row it was seen.
    #[serde(default)]
    pub last_action: Option<String>,
    #[serde(default)]
    pub repeats: u32,
    #[serde(default)]
    pub done_refusals: u32,
    /// The ticks Reflect's last answer made that were refused, each with why (`item N (text):
    /// ...`): the next Plan and Reflect prompts tell the model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_ticks: Vec<String>,
    #[serde(default)]
    pub completed_steps: Vec<u32>,
    #[serde(default)]
    pub stop: Option<StopKind>,
    #[serde(default)]
    pub reason: Option<String>,
    /// The HTTP status of the provider's last answer, when a provider failure with one ended
    /// the run (404: a model the provider does not have). The way on is chosen by it, never by
    /// the reason's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_status: Option<u16>,
    #[serde(default)]
    pub outcome: Option<String>,
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// Paths claimed as produced that were no file in the workspace when the run ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claimed_missing: Vec<String>,
    /// Skills activated by skill_read, carried in later phase prompts.
    #[serde(default)]
    pub active_skills: Vec<String>,
    /// The result of the last action, for Reflect (bounded by the output cap).
    #[serde(default)]
    pub last_result: Option<agentloop_types::tool_spec::ToolResult>,
    /// Why Reflect asked for a reframe (read by the next Frame).
    #[serde(default)]
    pub reframe_reason: Option<String>,
    /// Replay position of the scripted model, committed with each phase.
    #[serde(default)]
    pub model_cursor: serde_json::Value,
    /// The phase that was next when the run stopped (where `--continue` and `answer` go on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<Next>,
    /// The question a person must answer, when the run escalated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_question: Option<String>,
    /// Set on a running run that `run --new` archived: it can go on with `run --continue --run ID`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// How deep agentloop has called itself through Ductile to start this run (0: not at all).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u32,
    /// Frustration score: tool errors, repeats and refused `done`s raise it, clean steps lower it.
    #[serde(default)]
    pub frustration: u32,
    /// The tools Act ran, in order (result.json's `tools_called`).
    #[serde(default)]
    pub tools_called: Vec<String>,
    /// The one forced reframe frustration allows has happened.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub frustration_reframed: bool,
    /// Frustration escalated the run in this process (it raises the agent's stress when the
    /// run ends); not kept in state.json.
    #[serde(skip)]
    pub frustration_escalated: bool,
    /// The JSON Schema the final output must match (`output_schema`), fixed when the run starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// The final output, valid against `output_schema`, once `finish` gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// The W3C `traceparent` of the run's first `invoke_agent` span (only with OpenTelemetry
    /// traces on): later processes on this run (event mode's turns) join its trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
}

impl State {
    /// How the run ended, for its completion event: the recorded stop, else (a state written
    /// before stops were recorded, or not ended) done if its status is, else escalated.
    pub fn ended_as(&self) -> StopKind {
        match (self.stop, self.status) {
            (Some(stop), _) => stop,
            (None, Status::Done) => StopKind::Done,
            (None, _) => StopKind::Escalated,
        }
    }
    pub fn new(run_id: String, goal: String, limits: Limits) -> Self {
        let now = agentloop_types::clock::now_rfc3339();
        State {
            schema_version: STATE_SCHEMA_VERSION,
            run_id,
            agent: None,
            slot: None,
            session: None,
            series: None,
            goal,
            status: Status::Running,
            next: Next::Frame,
            step: 0,
            reframes: 0,
            started_at: now.clone(),
            updated_at: now,
            finished_at: None,
            limits,
            usage: Usage::default(),
            cost_usd: 0.0,
            cost_incomplete: false,
            model: None,
            elapsed_ms: 0,
            pending: None,
            consecutive_failures: 0,
            last_action: None,
            repeats: 0,
            done_refusals: 0,
            refused_ticks: vec![],
            completed_steps: vec![],
            stop: None,
            reason: None,
            provider_status: None,
            outcome: None,
            artifacts: vec![],
            claimed_missing: vec![],
            active_skills: vec![],
            last_result: None,
            reframe_reason: None,
            model_cursor: serde_json::Value::Null,
            resume_at: None,
            open_question: None,
            interrupted: false,
            depth: 0,
            frustration: 0,
            frustration_reframed: false,
            frustration_escalated: false,
            tools_called: vec![],
            output_schema: None,
            output: None,
            trace_parent: None,
        }
    }

    /// Whether the run's answers were replayed by the scripted model (no cost, no provider).
    pub fn scripted(&self) -> bool {
        self.model.as_deref().is_some_and(agentloop_types::trace::is_scripted)
    }

    /// The cost to show: None when a price was unknown or the answers were scripted (a replay
    /// spends nothing and is never shown as a provider's spend).
    pub fn cost(&self) -> Option<f64> {
        (!self.cost_incomplete && !self.scripted()).then_some(self.cost_usd)
    }

    pub fn add_usage(&mut self, usage: &Usage, cost: Option<f64>) {
        self.usage.add(usage);
        match cost {
            Some(c) => self.cost_usd = ((self.cost_usd + c) * 1e8).round() / 1e8,
            None if usage.total() > 0 && !self.scripted() => self.cost_incomplete = true,
            None => {}
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
