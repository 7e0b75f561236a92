//! The published contract: JSON Schemas of everything a machine reads from agentloop, generated
//! from the Rust types that write it (`schemars`), and the OpenAPI document of `serve`.
//!
//! Each output is built from its type here (result.json, the completion event, `runs --json`
//! rows, `tools list --json` entries, `handle`'s response), or the type already is the output
//! (state.json's [`State`], trace.jsonl's [`Entry`]), so a schema and what is written cannot
//! disagree; `handle`'s request is read into the types of [`handle`], so its schema and what is
//! read cannot either. Invariant: docs/schema/*.json are exactly [`documents`] (a test regenerates them and
//! fails on any difference); fields may be added, never renamed or removed, without a new
//! [`VERSION`].

use agentloop_types::outcome::StopKind;
use agentloop_types::trace::{Entry, Usage};
use agentloop_workspace::workspace::{Limits, Next, Pending, State, Status};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde_json::{json, Map, Value};

pub mod eval;
pub mod handle;

/// The version of the published schemas (each document's `schema_version`, and its `$id`).
pub const VERSION: u32 = 1;

/// result.json: the final outcome, written when the run ends.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunResult {
    pub run_id: String,
    /// The agent profile the run ran as
    pub agent: Option<String>,
    /// The scheduler's slot the run is for (`run --slot KEY`)
    pub slot: Option<String>,
    /// The goal as memory.md states it
    pub goal: String,
    pub status: Status,
    pub stop: StopKind,
    pub reason: String,
    /// The question a person must answer (when escalated)
    pub open_question: Option<String>,
    /// The final outcome text
    pub outcome: Option<String>,
    pub steps_taken: usize,
    /// The tools Act ran, in order
    pub tools_called: Vec<String>,
    /// Wall time in `run`, every invocation that drove it
    pub duration_ms: u64,
    /// Files produced, relative to the workspace: only files that exist there when the run ends
    pub artifacts: Vec<String>,
    /// Paths claimed as produced (by `finish` or the done decision) that were no file in the
    /// workspace when the run ended: globs such as `*`, folders, files never written
    pub claimed_missing: Vec<String>,
    /// The model id of the last answer
    pub model: Option<String>,
    pub usage: Usage,
    /// USD; null when a price was unknown or the answers were scripted
    pub cost_usd: Option<f64>,
    pub started_at: String,
    pub finished_at: String,
    /// The final output, valid against the run's output schema (only when it has one)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The Definition of Done as memory.md holds it at the end, each item with its evidence
    pub definition_of_done: Vec<DodItem>,
}

/// A Definition-of-Done item in result.json.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DodItem {
    pub text: String,
    /// Whether it is ticked
    pub done: bool,
    /// What showed it is met: steps of the run whose actions succeeded and files the run wrote or
    /// read (both checked when Reflect ticked it; empty for an open item or one ticked by hand)
    pub evidence: agentloop_workspace::evidence::Evidence,
}

impl DodItem {
    pub fn of(i: &agentloop_workspace::markdown::Item) -> Self {
        DodItem { text: i.text.clone(), done: i.done, evidence: i.evidence.clone() }
    }
}

/// The event a finished run emits: `run --json`'s stdout, and `handle`'s last event.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CompletionEvent {
    #[serde(rename = "type")]
    pub kind: agentloop_types::outcome::Completion,
    pub payload: CompletionPayload,
    /// `handle` only: `agentic:run:<run_id>:completed` or `:escalated`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dedupe_key: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CompletionPayload {
    pub run_id: String,
    pub goal: String,
    pub status: Status,
    /// How the run stopped: done, escalated (a question or a person needed), provider, or the
    /// limit that ran out (max_steps, …), as in result.json
    pub stop: StopKind,
    /// The question a person must answer (null when the run asks none): always present
    #[schemars(required, schema_with = "nullable_text")]
    pub open_question: Option<String>,
    pub reason: Option<String>,
    pub outcome: Option<String>,
    pub steps_taken: usize,
    pub artifacts: Vec<String>,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    /// The final output (runs with an output schema)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// `run --json` on a run that had already ended: the ways on
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ways_on: Option<String>,
    /// A queue worker's outcome only: the request's idempotency key (its `key`, or the run id)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A string or null, for a field that is always present.
fn nullable_text(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": ["string", "null"]})
}

impl CompletionEvent {
    pub fn of(state: &State) -> Self {
        CompletionEvent {
            kind: state.ended_as().event(),
            payload: CompletionPayload {
                run_id: state.run_id.clone(),
                goal: state.goal.clone(),
                status: state.status,
                stop: state.ended_as(),
                open_question: state.open_question.clone(),
                reason: state.reason.clone(),
                outcome: state.outcome.clone(),
                steps_taken: state.completed_steps.len(),
                artifacts: state.artifacts.clone(),
                usage: state.usage,
                cost_usd: state.cost(),
                output: state.output.clone(),
                ways_on: None,
                key: None,
            },
            dedupe_key: None,
        }
    }
    pub fn to_value(&self) -> Value {
        agentloop_types::json::to_value(self)
    }
}

/// `status --json` (and GET /runs/{id} of `serve`, which adds `served`, `queue`,
/// `worker_error` and `links`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StatusView {
    pub run_id: String,
    pub agent: Option<String>,
    pub goal: String,
    pub status: Status,
    /// How the run stopped, once it has: done, escalated, provider, or the limit that ran out
    pub stop: Option<StopKind>,
    /// The phase that comes next
    pub next: Next,
    pub step: u32,
    pub reframes: u32,
    pub model: Option<String>,
    pub reason: Option<String>,
    /// What the run answered, once done (result.json's `outcome`)
    pub outcome: Option<String>,
    pub open_question: Option<String>,
    /// The command that answers the open question
    pub answer_with: Option<String>,
    /// How to go on from an ended or interrupted run
    pub ways_on: Option<String>,
    pub interrupted: bool,
    /// The agent's rolling usage window (null when `rest` sets no limit), with its fatigue
    /// (percent of the fullest limit used)
    pub rest: Value,
    /// The agent's stress: level, threshold, escalations that raised it, and whether (and until
    /// when) it rests because of it
    pub stress: Value,
    /// Whether the agent switches modes itself (`modes.auto`) and its last rest: when, and
    /// whether it rested itself (`by: agent`, after a run) or was rested (`by: command`)
    pub modes: Value,
    /// The named session the run is a turn of (`run --session NAME`)
    pub session: Option<String>,
    pub frustration: Frustration,
    pub workspace: String,
    /// The limits the run recorded when it started or was last continued
    pub limits_recorded: Limits,
    /// Where each limit in force comes from
    pub limit_sources: Map<String, Value>,
    pub pending: Option<Pending>,
    pub budgets: Budgets,
    pub usage: Usage,
    pub started_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Frustration {
    pub score: u32,
    pub threshold: u32,
    pub reframed: bool,
}

/// Budgets used, their maximum and what is left.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Budgets {
    pub steps: Used<u32, u32>,
    pub reframes: Used<u32, u32>,
    pub tokens: Used<u64, Option<u64>>,
    pub cost_usd: CostUsed,
    pub time_secs: Used<u64, u64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Used<U, M> {
    pub used: U,
    /// null: no limit
    pub max: M,
    pub left: M,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CostUsed {
    /// USD spent; null when a price was unknown or the run was scripted (one display for an
    /// unknown cost: `$?` for people, null in JSON)
    pub used: Option<f64>,
    pub max: Option<f64>,
    pub left: Option<f64>,
    /// A price was unknown, so `used` undercounts
    pub incomplete: bool,
    /// The answers were replayed by the scripted model (no cost)
    pub scripted: bool,
}

/// One row of `runs --json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunRow {
    pub run_id: String,
    pub agent: Option<String>,
    /// The scheduler's slot the run is for (`run --slot KEY`)
    pub slot: Option<String>,
    /// The named session the run is a turn of (`run --session NAME`)
    pub session: Option<String>,
    /// running, done, escalated, or interrupted (an archived run `run --new` cut short)
    pub status: String,
    /// Whether it is the workspace's current run (not one under runs/)
    pub current: bool,
    pub step: u32,
    pub steps_taken: usize,
    pub goal: String,
    pub model: Option<String>,
    pub cost_usd: Option<f64>,
    pub started_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
    pub reason: Option<String>,
    /// The run's workspace folder
    pub workspace: String,
}

/// One entry of `tools list --json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    /// The JSON Schema of the tool's arguments
    pub parameters: Value,
    /// read, write, network, exec, none or external
    pub side_effect: Value,
    /// Whether allowed_tools lets Act run it
    pub allowed: bool,
    /// The allowed_tools entry that allows it: its own name, or the Ductile plugin (or MCP
    /// server) whose tool it is; absent without an allowed_tools list
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_by: Option<String>,
    pub timeout_secs: u64,
    pub output_cap: usize,
}

/// `handle`'s response (Ductile protocol v2): one JSON object on stdout.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HandleResponse {
    /// ok or error
    #[schemars(with = "String")]
    pub status: HandleStatus,
    /// One line for people
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The errors behind `error` (a system's, a parser's), outermost first; `error` already
    /// ends with them, for a router that shows one line
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<String>,
    /// The next steps `error` names, one each
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    /// Whether the router should retry the job
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<bool>,
    /// `agentic.tool_request.<tool>` events and the one completion event of a run
    #[schemars(with = "Vec<HandleEvent>")]
    pub events: Vec<Value>,
    /// Left out when the turn changed no run (`health`, and `poll` when its sweep changed nothing)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_updates: Option<StateUpdates>,
    #[schemars(with = "Vec<LogLine>")]
    pub logs: Vec<Value>,
}

/// Whether `handle` did what the request asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HandleStatus {
    #[default]
    Ok,
    Error,
}

/// How much a line of `handle`'s `logs` matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Info,
    Warn,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
        }
    }
}

/// An event `handle` emits: a tool request (payload: run_id, step, tool, tool_command,
/// requested_at, attempt and the tool's arguments) or a completion event.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HandleEvent {
    /// `agentic.tool_request.<tool>`, `agent.completed` or `agent.escalated`
    #[serde(rename = "type")]
    pub kind: String,
    pub payload: Map<String, Value>,
    pub dedupe_key: String,
}

/// The router's state changes. Ductile merges them into the plugin's state one top-level key at a
/// time, so each run has a key of its own and concurrent turns cannot overwrite each other's runs.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StateUpdates {
    /// `run:<run_id>`: the snapshot of a run this turn changed (status, step, pending_step,
    /// pending_tool, pending_since, attempts, completed_steps, ...); null for a finished run
    /// dropped from the bounded state, and `runs: null` once an older `runs` map was moved into
    /// per-run keys
    #[serde(flatten)]
    pub runs: Map<String, Value>,
    pub last_run_id: Option<String>,
    /// When the last run last changed (its `updated_at`): an RFC 3339 UTC time
    pub last_run: Option<String>,
    pub last_goal: Value,
    pub total_steps: Value,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LogLine {
    #[schemars(with = "String")]
    pub level: LogLevel,
    pub message: String,
}

/// `trace stats --json`: sums over the trace entries read.
#[derive(Debug, Default, Clone, Serialize, JsonSchema)]
pub struct TraceStats {
    /// Runs the entries belong to
    pub runs: usize,
    /// Steps across those runs: the sum of each run's highest step
    pub steps: u32,
    pub total: TraceSum,
    /// Sums by phase (frame, plan, act, reflect; `-` for entries of no phase)
    pub phases: std::collections::BTreeMap<String, TraceSum>,
    /// Sums of the Act entries by tool
    pub tools: std::collections::BTreeMap<String, TraceSum>,
    /// The highest step of each run
    #[serde(skip)]
    #[schemars(skip)]
    pub by_run: std::collections::BTreeMap<String, u32>,
}

impl TraceStats {
    pub fn add(&mut self, e: &Entry) {
        self.total.add(e);
        let steps = self.by_run.entry(e.run_id.clone()).or_default();
        *steps = (*steps).max(e.step);
        self.runs = self.by_run.len();
        self.steps = self.by_run.values().sum();
        self.phases.entry(e.phase.map(|p| p.as_str()).unwrap_or("-").to_string()).or_default().add(e);
        if let (Some(t), Some(agentloop_types::trace::Phase::Act)) = (&e.tool, e.phase) {
            self.tools.entry(t.clone()).or_default().add(e);
        }
    }
}

/// Whether an entry is a model call that cost something nobody priced: usage, no cost, and not
/// the scripted model's (a replay spends nothing).
pub fn unpriced(e: &Entry) -> bool {
    e.cost_usd.is_none()
        && e.event != agentloop_types::trace::Event::RunFinished
        && e.usage.is_some_and(|u| u.total() > 0)
        && !e.model.as_deref().is_some_and(agentloop_types::trace::is_scripted)
}

/// Sums over a set of trace entries.
#[derive(Debug, Default, Clone, Serialize, JsonSchema)]
pub struct TraceSum {
    pub entries: u64,
    /// Entries that record a failure
    pub errors: u64,
    pub duration_ms: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// USD of the model calls; null when some call had no price (its model is not in the price
    /// table or under `prices:`)
    pub cost_usd: Option<f64>,
    /// USD of the priced model calls
    #[serde(skip)]
    #[schemars(skip)]
    pub priced_usd: f64,
    /// Model calls with usage and no price
    #[serde(skip)]
    #[schemars(skip)]
    pub unpriced_calls: u64,
    /// Model calls the scripted model answered: they spend nothing and are never priced
    pub scripted_calls: u64,
    /// Model calls with a price (those in cost_usd)
    #[serde(skip)]
    #[schemars(skip)]
    pub priced_calls: u64,
}

impl TraceSum {
    pub fn add(&mut self, e: &Entry) {
        self.entries += 1;
        self.errors += e.is_error() as u64;
        self.duration_ms += e.duration_ms.unwrap_or(0);
        // run.finished carries the run's totals; counting it would count everything twice.
        if e.event == agentloop_types::trace::Event::RunFinished {
            return;
        }
        if let Some(u) = e.usage {
            self.input_tokens += u.input_tokens;
            self.output_tokens += u.output_tokens;
            self.cache_read_tokens += u.cache_read_tokens;
            self.cache_write_tokens += u.cache_write_tokens;
        }
        self.priced_usd += e.cost_usd.unwrap_or(0.0);
        self.priced_calls += e.cost_usd.is_some() as u64;
        self.unpriced_calls += unpriced(e) as u64;
        self.cost_usd = (self.unpriced_calls == 0).then_some(self.priced_usd);
        self.scripted_calls += e.model.as_deref().is_some_and(agentloop_types::trace::is_scripted) as u64;
    }
}

/// One server of `mcp list --json` (and `mcp check --json`, which adds `ok`). The command
/// builds it from the server's config and its cached listing; this type is its published shape,
/// held to the real output by the tests.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct McpServerView {
    pub name: String,
    /// stdio or http
    pub transport: String,
    /// The command line (stdio) or the address (http), secrets hidden
    pub command: String,
    /// Names of the environment variables given to it (never their values)
    pub env: Vec<String>,
    /// Names of the HTTP headers sent (never their values)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<String>>,
    pub enabled: bool,
    pub timeout_secs: f64,
    pub startup_timeout_secs: f64,
    /// listed (from the cache or just now), disabled, failed or not listed yet
    pub status: String,
    /// Why it failed (status failed)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The server's own `serverInfo` (name, version)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_ms: Option<u64>,
    pub tools: Vec<McpToolView>,
    /// Tools its config's filter left out
    pub filtered: Vec<String>,
    /// Tools left out, and why
    pub dropped: Vec<McpDropped>,
    /// `mcp check` only: whether it answered
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// HTTP servers: who is signed in (`mcp login`), or null; never the token
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_in: Option<McpSignedIn>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct McpSignedIn {
    /// The OAuth client agentloop signed in as
    pub client_id: String,
    /// The scopes granted
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct McpToolView {
    /// The tool's name in agentloop (`<server>__<tool>`)
    pub name: String,
    /// The server's own name for it
    pub tool: String,
    pub description: Option<String>,
    /// The JSON Schema of its arguments
    pub parameters: Option<Value>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct McpDropped {
    pub tool: String,
    pub reason: String,
}

/// `config show --json`: the effective configuration and where each key came from.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ConfigShow {
    /// The effective configuration (agentloop.yaml's keys), secrets shown as `[hidden]`
    pub config: Map<String, Value>,
    /// Where each dotted key came from (`default`, a file, `AGENTLOOP_*`, a flag)
    pub sources: std::collections::BTreeMap<String, String>,
    /// What a run with this configuration would call, without calling it
    pub resolved: ResolvedModel,
    /// Keys an untrusted layer set and was refused
    pub refused: Vec<ConfigRefusal>,
    /// Each allowed_tools entry and the tools it allows (a tool's own name, every command of a
    /// Ductile plugin, or none: an entry that names no tool); absent without an allowed_tools list
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_tools_named: Option<std::collections::BTreeMap<String, Vec<String>>>,
}

/// The provider and model a run would use, with why; or why there is none.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct ResolvedModel {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_why: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_why: Option<String>,
    /// Why no provider can be used
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ConfigRefusal {
    pub file: String,
    pub key: String,
    pub why: String,
}

/// `skills show --json`: one skill's metadata and its instructions.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SkillView {
    #[serde(flatten)]
    pub skill: agentloop_tools::skills::Skill,
    /// The instructions (the markdown after the frontmatter)
    pub body: String,
}

/// A published schema: file name, title, and the schema of the type.
fn document<T: JsonSchema>(file: &str, title: &str, description: &str) -> (String, Value) {
    let settings = schemars::generate::SchemaSettings::draft2020_12();
    let mut v = settings.into_generator().into_root_schema_for::<T>().to_value();
    let mut out = Map::new();
    out.insert("$schema".into(), json!("https://json-schema.org/draft/2020-12/schema"));
    out.insert("$id".into(), json!(format!("urn:agentloop:schema:{}:v{VERSION}", file.trim_end_matches(".json"))));
    out.insert("title".into(), json!(title));
    out.insert("description".into(), json!(description));
    out.insert("schema_version".into(), json!(VERSION));
    if let Some(o) = v.as_object_mut() {
        for k in ["$schema", "title", "description"] {
            o.remove(k);
        }
        out.extend(std::mem::take(o));
    }
    (file.to_string(), Value::Object(out))
}

/// Every published schema, as written to docs/schema/ (file name, document).
pub fn documents() -> Vec<(String, Value)> {
    vec![
        document::<RunResult>("result.json", "result.json", "The final outcome of a run, written when it ends."),
        document::<State>("state.json", "state.json", "The machine state of one run."),
        document::<Entry>("trace-entry.json", "trace.jsonl entry", "One line of trace.jsonl (and of `run --events`, which streams the same entries live, with `model.delta` entries when streaming)."),
        document::<CompletionEvent>("completion-event.json", "Completion event", "`agent.completed` / `agent.escalated`: what `run --json` prints and `handle`'s last event of a run."),
        document::<StatusView>("status.json", "status --json", "Where a run stands: budgets used and left, limits and their source, the pending action."),
        document::<agentloop_workspace::runs_diff::RunsDiff>("runs-diff.json", "runs diff --json", "What changed from one run of a job to another: the ending, facts added and dropped, files under artifacts/ added, removed and changed, steps, tokens and cost, and a one-line verdict."),
        document::<Vec<RunRow>>("runs.json", "runs --json", "The runs of a workspace, newest first."),
        document::<Vec<ToolInfo>>("tools.json", "tools list --json", "The tool registry."),
        document::<TraceStats>("trace-stats.json", "trace stats --json", "Sums over trace entries: in total, by phase and by tool."),
        document::<Vec<McpServerView>>("mcp-list.json", "mcp list --json", "The configured MCP servers, their state and tools (`mcp check --json` adds `ok`)."),
        document::<ConfigShow>("config-show.json", "config show --json", "The effective configuration, each key's source, the model a run would use and the refused keys."),
        document::<SkillView>("skills-show.json", "skills show --json", "One skill: its metadata, resource files and instructions."),
        document::<handle::HandleRequest>("handle-request.json", "handle request", "What `agentloop handle` reads on stdin: a Ductile protocol v2 request or a bare event. Fields not named here are accepted and ignored."),
        document::<HandleResponse>("handle-response.json", "handle response", "`agentloop handle`'s one JSON object on stdout (Ductile protocol v2)."),
        document::<eval::EvalReport>("eval.json", "eval --json", "What `agentloop eval` found: each case of a suite with each model, its trials, pass rate, medians and commonest failure."),
    ]
}
