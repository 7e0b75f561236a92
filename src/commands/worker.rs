//! `agentloop worker`: runs goals from a Redis stream (see `crate::worker`).

use crate::error::Result;
use crate::settings::Global;
use camino::Utf8PathBuf;
use clap::Args;

/// Run goals queued on a Redis stream, as one of many workers sharing a root folder.
///
/// Joins the consumer group of the stream of run requests (`agentloop enqueue` adds them) and
/// runs each in <root>/runs/<id>/ with the root's configuration (agentloop.yaml, agents/, the
/// flags given here); a request's budgets may only narrow its limits. The run id comes from the
/// request's idempotency key (its `key`; else its `slot`, agent and goal; else the message id),
/// so a message delivered twice maps to one run: a finished run is not run again, an unfinished
/// one goes on from its journal. A message is acknowledged only once its run's outcome is
/// durable and published on the results stream.
///
/// While a run goes on its message is re-claimed every third of --claim-idle; any worker takes
/// over a message idle for longer (its worker was killed or cut off) and resumes the run. A
/// message delivered more than --max-deliveries times, or one that can never run (a bad
/// request, budgets wider than the root's), goes to the dead-letter stream with the reason.
/// SIGTERM or Ctrl-C stops the worker at once: every committed phase is kept and the message
/// stays pending for another worker. While Redis is down or restarting, workers retry with
/// backoff and say so; runs go on meanwhile.
///
/// Streams, for --streams P: P:runs (requests), P:results (outcomes), P:dead (dead letters).
///
/// Exit codes: 1 the worker stopped, 2 bad flags or configuration, 143 SIGTERM.
///
/// Examples:
///   agentloop worker --redis redis://127.0.0.1:6379 --root /srv/agent-runs
///   agentloop --script script.yaml worker --redis redis://redis:6379 --root runs --concurrency 4
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct WorkerArgs {
    /// Redis URL, e.g. redis://127.0.0.1:6379/0 (or AGENTLOOP_REDIS).
    #[arg(long, value_name = "URL", env = "AGENTLOOP_REDIS")]
    pub redis: String,
    /// Folder holding the runs (shared by every worker; created when missing); default: the -w
    /// folder.
    #[arg(long, value_name = "DIR")]
    pub root: Option<Utf8PathBuf>,
    /// Runs this worker drives at once.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub concurrency: usize,
    /// How long a message may go unclaimed before another worker takes it over (e.g. 60s, 5m).
    #[arg(long, value_name = "DUR", default_value = "60s")]
    pub claim_idle: String,
    /// Deliveries after which a message goes to the dead-letter stream.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub max_deliveries: u64,
    /// Prefix of the stream names.
    #[arg(long, value_name = "NAME", default_value = "agentloop")]
    pub streams: String,
    /// This worker's consumer name (default: host name and process id).
    #[arg(long, value_name = "NAME")]
    pub consumer: Option<String>,
}

pub fn run(global: &Global, args: WorkerArgs) -> Result<u8> {
    let claim_idle = parse_duration("--claim-idle", &args.claim_idle)?;
    let opts = crate::worker::Options {
        root: args.root.unwrap_or_else(|| global.workspace.clone()),
        redis: args.redis,
        stream: args.streams,
        concurrency: args.concurrency,
        claim_idle,
        max_deliveries: args.max_deliveries,
        consumer: args.consumer,
    };
    crate::worker::main(global, opts)
}

/// A duration flag such as `90s` or `5m`.
pub fn parse_duration(flag: &str, v: &str) -> Result<std::time::Duration> {
    humantime::parse_duration(v.trim())
        .map_err(|e| crate::error::Error::usage(format!("{flag} `{v}`: {e}")).with_hint("write it as 90s, 5m or 1h"))
}
