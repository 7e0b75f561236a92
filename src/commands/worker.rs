//! `agentloop worker`: runs goals from a Redis stream (see `crate::worker`).

use agentloop_engine::settings::Global;
use agentloop_types::error::Result;
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
/// SIGTERM (or Ctrl-C) drains the worker: it takes no new message, each of its runs finishes the
/// phase under way, commits it and stops there, and its message is handed back so another
/// worker goes on from that commit at once; then the worker exits 0. A second signal stops it at
/// once (every committed phase is still kept; the message is taken over after --claim-idle). Give
/// a drain as long as one phase may take (a model call, a tool's timeout). While Redis is down or
/// restarting, workers retry with backoff and say so; runs go on meanwhile.
///
/// Streams, for --streams P: P:runs (requests), P:results (outcomes), P:dead (dead letters).
///
/// Exit codes: 0 drained after a signal, 1 the worker stopped, 2 bad flags or configuration,
/// 143 a second SIGTERM (130 Ctrl-C).
///
/// Examples:
///   agentloop worker --redis redis://127.0.0.1:6379 --root /srv/agent-runs
///   agentloop --script script.yaml worker --redis redis://redis:6379 --root runs --concurrency 4
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct WorkerArgs {
    /// Redis URL, e.g. redis://127.0.0.1:6379/0 (or AGENTLOOP_REDIS, or `queue.redis`).
    #[arg(long, value_name = "URL", env = "AGENTLOOP_REDIS")]
    pub redis: Option<String>,
    /// Folder holding the runs (shared by every worker; created when missing); default: the -w
    /// folder.
    #[arg(long, value_name = "DIR")]
    pub root: Option<Utf8PathBuf>,
    /// Runs this worker drives at once (default: `queue.concurrency`, 1).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// How long a message may go unclaimed before another worker takes it over, e.g. 90s or 5m
    /// (default: `queue.claim_idle`, 60s).
    #[arg(long, value_name = "DUR")]
    pub claim_idle: Option<String>,
    /// Deliveries after which a message goes to the dead-letter stream (default:
    /// `queue.max_deliveries`, 5).
    #[arg(long, value_name = "N")]
    pub max_deliveries: Option<u64>,
    /// Prefix of the stream names (default: `queue.streams`, agentloop).
    #[arg(long, value_name = "NAME")]
    pub streams: Option<String>,
    /// This worker's consumer name (default: host name and process id).
    #[arg(long, value_name = "NAME")]
    pub consumer: Option<String>,
}

/// Without the `queue` feature there is no Redis client: `worker` is refused.
#[cfg(not(feature = "queue"))]
pub fn run(_: &Global, _: WorkerArgs) -> Result<u8> {
    Err(agentloop_types::error::Error::not_built("queue", "`agentloop worker`", false))
}

#[cfg(feature = "queue")]
pub fn run(global: &Global, args: WorkerArgs) -> Result<u8> {
    let root = args.root.unwrap_or_else(|| global.workspace.clone());
    // The root's configuration (its `queue:` keys among them) must be valid before anything runs.
    let q = agentloop_config::config::resolve(&agentloop_engine::settings::layers(global, &root, None)?)?.config.queue;
    let claim_idle = match &args.claim_idle {
        Some(v) => parse_duration("--claim-idle", v)?,
        None => q.claim_idle.0,
    };
    let opts = crate::worker::Options {
        root,
        redis: redis_url(args.redis, &q)?,
        stream: args.streams.unwrap_or(q.streams),
        concurrency: args.concurrency.unwrap_or(q.concurrency),
        claim_idle,
        max_deliveries: args.max_deliveries.unwrap_or(q.max_deliveries),
        consumer: args.consumer,
        modes: super::modes::AUTO,
    };
    crate::worker::main(global, opts)
}

/// The Redis URL: the flag (or AGENTLOOP_REDIS), else `queue.redis`.
#[cfg(feature = "queue")]
pub fn redis_url(flag: Option<String>, q: &agentloop_config::config::QueueConfig) -> Result<String> {
    flag.or_else(|| q.redis.clone()).ok_or_else(|| {
        agentloop_types::error::Error::usage("no Redis to queue runs on")
            .with_hint("pass --redis redis://HOST:6379/0, set AGENTLOOP_REDIS, or set `queue.redis` in agentloop.yaml")
    })
}

/// A duration flag such as `90s` or `5m`.
#[cfg(feature = "queue")]
pub fn parse_duration(flag: &str, v: &str) -> Result<std::time::Duration> {
    humantime::parse_duration(v.trim()).map_err(|e| {
        agentloop_types::error::Error::usage(format!("{flag} `{v}`: {e}"))
            .with_hint("write it as 90s, 5m or 1h")
            .with_source(e)
    })
}
