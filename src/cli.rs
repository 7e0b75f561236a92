//! The command-line definition (clap derive). It describes the CLI only: flags become a
//! configuration layer in [`crate::settings`], and each subcommand's args struct lives beside
//! its implementation in `commands/`.

use crate::commands;
use crate::output::ColorChoice;
use camino::Utf8PathBuf;
use clap::{Args, Parser, Subcommand};

/// Goal-directed LLM work as a Frame → Plan → Act → Reflect loop over a workspace of plain files.
///
/// Every phase is its own subcommand and all state lives in the workspace folder (context.md,
/// memory.md, skills.md, plan.md, decisions.md, trace.jsonl, state.json, artifacts/), so a run can
/// be stepped by hand, edited between phases, scripted, scheduled, or driven one turn at a time.
///
/// Quick start, offline:  agentloop demo
/// With a real model:     ANTHROPIC_API_KEY=... agentloop -w ws run --goal "..."
/// Step by hand:          agentloop -w ws init --goal "..."; then frame, plan, act, reflect
///
/// Exit codes: 0 ok/done, 1 failure, 2 usage or config error, 3 escalated, 4 budget exhausted,
/// 5 provider failure, 6 tool failure, 7 workspace locked, 8 broken workspace file,
/// 9 refused: cannot fit its budget, 10 resting, 78 configuration error in `handle`,
/// 130 interrupted (Ctrl-C; `run` resumes).
#[derive(Debug, Parser)]
#[command(name = "agentloop", version, propagate_version = true, max_term_width = 100, verbatim_doc_comment)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// Workspace folder (for `handle`: the root folder holding one workspace per run).
    #[arg(short, long, global = true, env = "AGENTLOOP_WORKSPACE", value_name = "DIR", default_value = ".")]
    pub workspace: Utf8PathBuf,
    /// Print only data and errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Print debugging detail on stderr.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// When to colour output (NO_COLOR is honoured for auto).
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
    /// Wait for the workspace lock instead of failing at once (optionally at most SECS seconds).
    #[arg(long, global = true, value_name = "SECS", num_args = 0..=1, default_missing_value = "86400")]
    pub wait: Option<u64>,
    /// One more configuration file, applied after the workspace's agentloop.yaml.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<Utf8PathBuf>,
    /// Model provider: anthropic, openai, ollama, scripted or auto.
    #[arg(long, global = true, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model id (e.g. claude-sonnet-4-5, gpt-4o-mini, qwen2.5:0.5b).
    #[arg(long, global = true, value_name = "ID")]
    pub model: Option<String>,
    /// Base URL of the provider's API.
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
    /// Script file for the scripted provider (YAML or JSONL).
    #[arg(long, global = true, value_name = "FILE")]
    pub script: Option<Utf8PathBuf>,
    /// Record every model response to FILE (JSONL, replayable with --provider scripted --script FILE).
    #[arg(long, global = true, value_name = "FILE")]
    pub record: Option<Utf8PathBuf>,
    /// Stream the model's answers and show them as they arrive (llm.stream: true).
    #[arg(long, global = true)]
    pub stream: bool,
    /// Apply the agent profile agents/NAME.yaml.
    #[arg(long, global = true, value_name = "NAME")]
    pub agent: Option<String>,
    /// Extra skills folder (repeatable; later wins).
    #[arg(long = "skills-dir", global = true, value_name = "DIR")]
    pub skills_dir: Vec<Utf8PathBuf>,
    /// Only these skills for this invocation (comma-separated names; skills.only).
    #[arg(long, global = true, value_name = "LIST", value_delimiter = ',')]
    pub skills: Option<Vec<String>>,
    /// Most plan→act→reflect steps.
    #[arg(long, global = true, value_name = "N")]
    pub max_steps: Option<u32>,
    /// Most reframes.
    #[arg(long, global = true, value_name = "N")]
    pub max_reframes: Option<u32>,
    /// Wall-clock limit for `run` (e.g. 90s, 10m).
    #[arg(long, global = true, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Token budget for the whole run.
    #[arg(long, global = true, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Cost budget in USD for the whole run.
    #[arg(long, global = true, value_name = "USD")]
    pub max_cost: Option<f64>,
    /// Comma-separated tools Act may run.
    #[arg(long, global = true, value_name = "LIST", value_delimiter = ',')]
    pub allowed_tools: Option<Vec<String>>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Init(commands::init::InitArgs),
    Run(commands::run::RunArgs),
    Answer(commands::answer::AnswerArgs),
    /// Frame: turn context.md into a goal and a 3-7 item Definition of Done in memory.md.
    ///
    /// One model call. Reads context.md (and memory.md when reframing); writes memory.md,
    /// decisions.md and a trace entry. Exit codes: 0 ok, 3 escalated (cannot proceed), 4 budget,
    /// 5 provider failure. Refuses to run out of turn unless --force.
    Frame(commands::phase::PhaseArgs),
    /// Plan: choose the one Next Action (a tool call) and write plan.md.
    ///
    /// One model call. The Next Action is the `json next-action` block in plan.md, which you may
    /// edit before `act`. Exit codes: 0 ok, 3 escalated, 4 budget (max_steps, tokens, cost),
    /// 5 provider failure. Refuses to run out of turn unless --force.
    Plan(commands::phase::PhaseArgs),
    /// Act: run the Next Action in plan.md; no model call.
    ///
    /// Large output goes to artifacts/. Exit codes: 0 ok, 6 the tool reported an error (recorded
    /// for reflect), 3 escalated (repeated failures or actions), 8 broken Next Action block.
    Act(commands::phase::PhaseArgs),
    /// Reflect: check the result against the Definition of Done; continue, done, reframe or escalate.
    ///
    /// One model call. `done` counts only when every item is ticked. Exit codes: 0 ok (done or
    /// continuing), 3 escalated, 4 budget (max_reframes), 5 provider failure.
    Reflect(commands::phase::PhaseArgs),
    Status(commands::status::StatusArgs),
    Runs(commands::runs::RunsArgs),
    Report(commands::report::ReportArgs),
    Serve(commands::serve::ServeArgs),
    /// Read trace.jsonl: a timeline (show) or sums (stats).
    #[command(subcommand)]
    Trace(commands::trace::TraceCommand),
    /// Show the effective configuration and where each value came from.
    #[command(subcommand)]
    Config(commands::config::ConfigCommand),
    /// List the tools, or call one from the shell with no model.
    #[command(subcommand)]
    Tools(commands::tools::ToolsCommand),
    /// MCP servers: list them and their tools, call one tool, check that each starts.
    #[command(subcommand)]
    Mcp(commands::mcp::McpCommand),
    /// Generate the catalog (skills.md); list, show, check and fetch skills.
    #[command(subcommand)]
    Skills(commands::skills::SkillsCommand),
    /// Check a provider with one tiny request.
    #[command(subcommand)]
    Models(commands::models::ModelsCommand),
    /// List agent profiles (agents/NAME.yaml).
    #[command(subcommand)]
    Agents(commands::agents::AgentsCommand),
    /// Long-term memory across runs: list, search, show, add, forget, prune.
    #[command(subcommand)]
    Memory(commands::memory::MemoryCommand),
    Dream(commands::dream::DreamArgs),
    Demo(commands::demo::DemoArgs),
    Handle(commands::handle::HandleArgs),
    Completions(commands::completions::CompletionsArgs),
    Man(commands::completions::ManArgs),
}
