//! The global flags (`-w`, `-q`, `--provider`, `--max-steps`, ...) as clap parses them. The
//! engine takes them as plain [`Global`] settings: clap stays in this crate.

use agentloop_engine::settings::Global;
use agentloop_io::output::ColorChoice;
use camino::Utf8PathBuf;
use clap::{Args, ValueEnum};

/// The global flags as clap parses them; [`GlobalArgs::settings`] hands them to the engine as
/// plain [`Global`] settings (the engine crates know no clap).
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
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
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto, value_name = "WHEN")]
    pub color: Color,
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
    /// Comma-separated tools Act may run: a tool's name, a Ductile plugin (all its commands) or one
    /// `<plugin>__<command>`.
    #[arg(long, global = true, value_name = "LIST", value_delimiter = ',')]
    pub allowed_tools: Option<Vec<String>>,
}

/// `--color WHEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Color {
    #[default]
    Auto,
    Always,
    Never,
}

impl From<Color> for ColorChoice {
    fn from(c: Color) -> Self {
        match c {
            Color::Auto => ColorChoice::Auto,
            Color::Always => ColorChoice::Always,
            Color::Never => ColorChoice::Never,
        }
    }
}

impl GlobalArgs {
    /// The flags as the engine's settings (`read_only` is the command's to say).
    pub fn settings(&self) -> Global {
        let this = self.clone();
        Global {
            workspace: this.workspace,
            quiet: this.quiet,
            verbose: this.verbose,
            json: this.json,
            color: this.color.into(),
            wait: this.wait,
            config: this.config,
            provider: this.provider,
            model: this.model,
            base_url: this.base_url,
            script: this.script,
            record: this.record,
            stream: this.stream,
            agent: this.agent,
            skills_dir: this.skills_dir,
            skills: this.skills,
            max_steps: this.max_steps,
            max_reframes: this.max_reframes,
            timeout: this.timeout,
            max_tokens: this.max_tokens,
            max_cost: this.max_cost,
            allowed_tools: this.allowed_tools,
            read_only: false,
        }
    }
}
