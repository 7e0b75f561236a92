//! `agentloop serve`: the HTTP API and panel (see `crate::serve`).

use agentloop_engine::settings::Global;
use agentloop_types::error::Result;
use camino::Utf8PathBuf;
use clap::Args;

/// Serve runs over HTTP: start, watch, answer and report runs under a root folder.
///
/// Each run is a workspace <root>/runs/<id>/ (as in event mode; `agentloop -w ROOT runs` lists
/// them), configured by the root's agentloop.yaml, agents/ and the flags given here, and run by
/// a pool of --workers from a queue of --queue places. A request chooses the goal, context,
/// agent profile and budgets that may only narrow the limits (never provider, keys, tools or
/// paths). Runs survive a restart: unfinished ones go on when the server starts again (or,
/// with --no-resume, are marked interrupted; POST /runs/{id}/continue goes on). Runs other
/// doors made are answered and continued too: the root's own run (`agentloop -w ROOT run`, a
/// cron job) goes on in the root, under the lock the server holds.
///
/// Endpoints (JSON unless noted; all but /health need `Authorization: Bearer TOKEN`):
///   GET  /health                  status and version
///   POST /runs                    {"goal", "context"?, "agent"?, "session"?, "budgets"?, "force"?}
///                                 → 202 {"run_id"}; "session" continues a named session
///   GET  /runs                    every run under the root (?agent=NAME, ?session=NAME)
///   GET  /runs/{id}               status: step, budgets, stop, outcome, open question, queue place
///   GET  /runs/{id}/trace         trace.jsonl (JSONL); ?follow=1 streams it as server-sent events
///   POST /runs/{id}/answer        {"answer"}: answer an escalated run's question and go on
///                                 (any run listed, whichever door started it; 409 while
///                                 another process holds its lock)
///   POST /runs/{id}/continue      go on after a budget or provider stop, an interruption, or a
///                                 worker error
///   GET  /runs/{id}/report        the run's HTML report; GET / the index of runs (a browser
///                                 signs in once with ?token=TOKEN, which sets a cookie)
///   GET  /runs/{id}/files/PATH    artifacts/... and the run's paper-trail files, as text
///   GET  /skills, POST /skills/fetch {"id", "url"}, GET /agents, GET /agents/{name}/status,
///   GET  /agents/{name}/sessions  an agent's named sessions (`default`: runs of no profile)
/// Errors are {"error", "status", "causes"?, "hint"?, "hints"?}: 400 bad request (naming the field), 401 token,
/// 404, 405, 409 the run's state does not allow it, 413 body over 1 MiB, 421 a Host that is
/// not the server's, 422 refused by negotiation, 429 rate limit (Retry-After) or a resting
/// agent, 503 queue full (Retry-After).
///
/// Every request must name the server in its Host header, checked before the token: on a
/// loopback address only 127.0.0.1, localhost, ::1 (any port) and the address listened on,
/// so a web page cannot reach the server by pointing its own name at 127.0.0.1 (DNS
/// rebinding); beyond loopback any name. `serve.allowed_hosts` in the configuration adds names
/// (`name`, `name:port`, `*.suffix`), and beyond loopback then allows only those and the
/// server's own.
///
/// The token is AGENTLOOP_TOKEN (several may be given, separated by commas; each at least 16
/// printable characters) or generated, printed at start and kept (owner-only) in
/// $XDG_STATE_HOME/agentloop/serve-token (else ~/.local/state/agentloop/serve-token), so a
/// restart keeps it; --new-token replaces it. Without AGENTLOOP_TOKEN the server refuses to
/// listen beyond loopback. A browser without the token gets a sign-in page; other clients a
/// JSON 401. stdout gets `listening on http://ADDR` (and
/// `token TOKEN` when generated); with --json one JSON object. Logs go to stderr (-v: every
/// request).
///
/// --redis URL: POST /runs queues the run on a Redis stream for `agentloop worker`s sharing
/// the root instead of running it here (see `agentloop worker --help`).
///
/// --wait SECS: how long to wait for the root's lock at start, and how long a worker waits for
/// a run's lock held by another process before it gives up on the run (default 30 s).
///
/// Ctrl-C or SIGTERM stops the server: each run it was driving is marked interrupted (as
/// `runs` and the panel show it) and stderr says which; the next start goes on with them.
///
/// Exit codes: 1 cannot listen or the server stopped, 2 bad flags or configuration (or a
/// non-loopback address without a token), 7 another process holds the root.
///
/// Examples:
///   agentloop serve --root ~/agent-runs
///   AGENTLOOP_TOKEN=$(cat ~/.agentloop-token) agentloop serve --root runs --listen 0.0.0.0:8700
///   agentloop serve --root runs --listen 127.0.0.1:0 --workers 4 --queue 32 --rate-limit 600/1m
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ServeArgs {
    /// Folder holding the runs (each in <root>/runs/<id>/; created when missing); default: the
    /// -w folder.
    #[arg(long, value_name = "DIR")]
    pub root: Option<Utf8PathBuf>,
    /// Address to listen on; port 0 picks a free port (the bound address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8700")]
    pub listen: String,
    /// Runs executed at once.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub workers: usize,
    /// Runs that may wait for a worker; beyond that POST /runs answers 503.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub queue: usize,
    /// Requests allowed per token, as N/DURATION (e.g. 120/1m); 0 for no limit.
    #[arg(long, value_name = "N/DUR", default_value = "120/1m")]
    pub rate_limit: String,
    /// At start, mark unfinished runs as interrupted instead of going on with them.
    #[arg(long)]
    pub no_resume: bool,
    /// Queue new runs on this Redis for `agentloop worker`s sharing the root, instead of running
    /// them here: POST /runs answers 202 with the run id, and the run is listed once a worker
    /// has started it.
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// Prefix of the stream names (with --redis).
    #[arg(long, value_name = "NAME", default_value = "agentloop", requires = "redis")]
    pub streams: String,
    /// Replace the kept generated token with a new one (the old one stops working); refused
    /// with AGENTLOOP_TOKEN.
    #[arg(long)]
    pub new_token: bool,
}

/// Without the `serve` feature there is no HTTP server: `serve` is refused.
#[cfg(not(feature = "serve"))]
pub fn run(_: &Global, _: ServeArgs) -> Result<u8> {
    Err(agentloop_types::error::Error::not_built("serve", "`agentloop serve`", false))
}

#[cfg(feature = "serve")]
pub fn run(global: &Global, args: ServeArgs) -> Result<u8> {
    if args.redis.is_some() && !cfg!(feature = "queue") {
        return Err(agentloop_types::error::Error::not_built("queue", "`serve --redis`", false));
    }
    let rate = crate::serve::auth::parse_rate(&args.rate_limit)?;
    let opts = crate::serve::Options {
        root: args.root.unwrap_or_else(|| global.workspace.clone()),
        listen: args.listen,
        workers: args.workers,
        queue: args.queue,
        rate,
        resume: !args.no_resume,
        redis: args.redis.map(|u| (u, args.streams)),
        new_token: args.new_token,
    };
    crate::serve::main(global, opts)
}
