//! `agentloop enqueue`: adds a run request to a Redis stream for `agentloop worker` — a new run,
//! or an answer or a continue for a run under the workers' root — and optionally waits for its
//! outcome.

use clap::Args;

#[cfg(feature = "queue")]
mod exec;
#[cfg(feature = "queue")]
pub use exec::run;

/// Without the `queue` feature there is no Redis client: `enqueue` is refused.
#[cfg(not(feature = "queue"))]
pub fn run(_: &agentloop_engine::settings::Global, _: EnqueueArgs) -> agentloop_types::error::Result<u8> {
    Err(agentloop_types::error::Error::not_built("queue", "`agentloop enqueue`", false))
}

/// A new run's flags: none goes with --answer or --continue.
const NEW_RUN: [&str; 6] = ["goal", "context", "context_file", "slot", "series", "force"];

/// Queue a goal, an answer or a continue on a Redis stream for `agentloop worker`.
///
/// Adds one run request to the stream P:runs and prints the run id it maps to and the message
/// id. The agent (--agent) and budgets (--max-steps, --max-reframes, --timeout, --max-tokens,
/// --max-cost) given are part of the request; a worker refuses budgets wider than its root
/// allows (the message goes to the dead-letter stream with the reason).
///
/// The run id comes from --key, else from --slot with the agent and goal (the same daily job
/// enqueued twice for one slot runs once), else from the message id. With --wait[=SECS] the
/// command waits for the outcome and prints it (with --json, the agent.completed /
/// agent.escalated event), exiting as `run` would.
///
/// A --slot run belongs to a series, as a cron job's runs do: the slot runs of its agent and
/// goal, or --series NAME (which may group several goals). A run of a series starts from the
/// series' last ended run under the workers' root: its facts and a person's answers are carried
/// into context.md and memory.md, and its state/ folder (a job's own state, such as the
/// daily-digest skill's state/daily-digest.json) is copied into the new run's folder, links
/// left out. A run with neither --slot nor --series is a run of its own.
///
/// --answer TEXT --run ID answers the open question of the escalated run ID under the workers'
/// root (ROOT/runs/ID: one a worker, `serve` or `handle` started, or the CLI made there) and
/// goes on with it, as `agentloop answer` does; --continue ID goes on with a run stopped on a
/// budget, a provider failure or a rest, or interrupted, as `run --continue` does. Budgets given
/// (--max-steps ...) raise its limits, each up to the root's. A request that cannot apply (no
/// such run, no question to answer, a continue that would stop again at once) is dead-lettered
/// with the reason; one for a run another process is driving waits in the queue. Each message
/// is applied once, however often it is delivered (its --key, else its message id).
///
/// Exit codes: 0 queued (with --wait: the run ended done), 1 Redis unreachable, no outcome in
/// time or the request dead-lettered (the reason said), 2 bad flags, 3 escalated, 4 budget
/// exhausted, 5 provider failure.
///
/// Examples:
///   agentloop enqueue --redis redis://127.0.0.1:6379 --goal "Digest today's feed"
///   agentloop enqueue --redis $R --goal "Daily digest" --slot $(date +%F) --agent digest
///   agentloop enqueue --redis $R --goal "Weekly summary" --slot 2026-W10 --series news
///   agentloop --json enqueue --redis $R --goal "Triage ticket 42" --key ticket-42 --wait=600
///   agentloop --wait=600 enqueue --redis $R --answer "Use the 2024 figures" --run ticket-42
///   agentloop --max-steps 40 enqueue --redis $R --continue ticket-42
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct EnqueueArgs {
    /// Redis URL, e.g. redis://127.0.0.1:6379/0 (or AGENTLOOP_REDIS, or `queue.redis` of the
    /// -w folder's configuration).
    #[arg(long, value_name = "URL", env = "AGENTLOOP_REDIS")]
    pub redis: Option<String>,
    /// The goal of the run.
    #[arg(long, value_name = "TEXT", required_unless_present_any = ["answer", "continue_", "run"])]
    pub goal: Option<String>,
    /// Background for the run's context.md.
    #[arg(long, value_name = "TEXT", conflicts_with = "context_file")]
    pub context: Option<String>,
    /// Background read from a file (- for stdin).
    #[arg(long, value_name = "FILE")]
    pub context_file: Option<String>,
    /// A slot such as a date: the same goal and agent run once per slot.
    #[arg(long, value_name = "KEY")]
    pub slot: Option<String>,
    /// The series the run belongs to (default with --slot: its agent and goal): it starts from
    /// the facts, answers and state/ of the series' last ended run.
    #[arg(long, value_name = "NAME")]
    pub series: Option<String>,
    /// The idempotency key the run id is derived from (with --answer or --continue: the key
    /// that makes the request apply once).
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// Start even when the estimate says the run cannot fit its budget.
    #[arg(long)]
    pub force: bool,
    /// Answer the open question of the escalated run --run ID (TEXT, or - for stdin) and go on.
    #[arg(long, value_name = "TEXT|-", requires = "run", conflicts_with_all = NEW_RUN)]
    pub answer: Option<String>,
    /// Go on with the run ID (or --run ID), stopped on a budget, a provider failure or a rest,
    /// or interrupted.
    #[arg(long = "continue", value_name = "ID", num_args = 0..=1)]
    #[arg(conflicts_with_all = ["answer", "goal", "context", "context_file", "slot", "series", "force"])]
    pub continue_: Option<Option<String>>,
    /// The run under the workers' root that --answer or --continue goes on with.
    #[arg(long, value_name = "ID", conflicts_with_all = NEW_RUN)]
    pub run: Option<String>,
    /// Prefix of the stream names (default: `queue.streams`, agentloop).
    #[arg(long, value_name = "NAME")]
    pub streams: Option<String>,
}
