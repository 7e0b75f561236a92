//! `agentloop serve`: an HTTP API over a root folder of runs and a read-only
//! panel of them, on tiny_http.
//!
//! Invariants:
//! - The server holds the root's workspace lock for its life: one server per root. The root's
//!   own run (one `agentloop -w ROOT run` made) is advanced under that lock ([`runs::Held`]).
//! - Every request names this server in its `Host` ([`host`]: on loopback only its own names
//!   and `serve.allowed_hosts`, so a page of another site cannot reach it by DNS rebinding),
//!   checked before anything else.
//! - Every request but GET /health presents a bearer token ([`auth`]); each token has its own
//!   rate limit. Without `AGENTLOOP_TOKEN` a token is generated (kept in the user's state
//!   folder for the next start) and printed, and the server refuses to listen beyond loopback.
//!   A browser (a GET that accepts HTML) without a token gets a sign-in page; others a JSON 401.
//! - Runs are workspaces under `<root>/runs/<id>/`, executed by a fixed pool of workers from a
//!   bounded queue ([`queue`]); a full queue is a 503 with Retry-After, decided before anything
//!   is created.
//! - A slow client holds no thread that answers others: a request with a body is handled on a
//!   thread of its own, its body read under a deadline, with a limit of such requests per client
//!   address (`http::Bodies`). A run's files are opened through folder handles that follow no
//!   symbolic link, and a run folder that is a symbolic link is neither served nor listed. A run's state lives only in its files, so a server killed at any instant loses
//!   nothing: the next start queues the runs it had not finished (`runs::recover`).

pub mod command;

mod agents;
mod api;
pub mod auth;
#[cfg(feature = "queue")]
mod fleet;
mod forms;
mod host;
mod http;
mod pages;
pub mod queue;
mod raise;
mod runs;

mod stream;

use agentloop_engine::settings::Global;
use agentloop_io::output::Printer;
use agentloop_types::error::{Error, Result};
use camino::Utf8PathBuf;
use serde_json::json;
use std::net::ToSocketAddrs;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// Threads reading requests (streams get their own).
const HTTP_THREADS: usize = 8;

/// What `serve` was asked to do.
pub struct Options {
    pub root: Utf8PathBuf,
    pub listen: String,
    pub workers: usize,
    pub queue: usize,
    pub rate: Option<auth::Rate>,
    pub resume: bool,
    /// `--redis URL` and `--streams NAME`: queue runs for `agentloop worker`s instead (refused
    /// before it gets here without the `queue` feature).
    #[cfg_attr(not(feature = "queue"), allow(dead_code))]
    pub redis: Option<(String, String)>,
    /// Replace the kept generated token.
    pub new_token: bool,
}

/// What every request handler and worker shares.
pub struct Shared {
    pub root: Utf8PathBuf,
    /// Folder under the root holding the runs (`handle.runs_dir`).
    pub runs_dir: String,
    /// The server's own flags with `-w` set to the root: the top layers of every run's config.
    pub global: Global,
    pub auth: auth::Auth,
    /// The names a request's `Host` may give (checked before the token).
    pub(crate) hosts: host::Hosts,
    pub queue: queue::Queue,
    pub printer: Printer,
    pub streams: AtomicUsize,
    /// The root's workspace lock, held for the server's life (one server per root); the root's
    /// own run is advanced under it, one worker or request at a time.
    pub root_lock: std::sync::Mutex<agentloop_workspace::workspace::Session>,
    /// Requests whose bodies are being read, by client address.
    pub(crate) bodies: http::Bodies,
    /// With --redis: the stream new runs are queued on (no local worker runs them).
    #[cfg(feature = "queue")]
    pub(crate) fleet: Option<fleet::Fleet>,
}

impl Shared {
    /// A line for people on stderr (unless -q).
    pub fn log(&self, msg: &str) {
        self.printer.info(&format!("{} {msg}", agentloop_types::clock::now_rfc3339()));
    }
    /// A line with -v only.
    pub fn debug(&self, msg: &str) {
        self.printer.debug(msg);
    }
}

/// Starts the server and serves until the process is stopped (it never returns `Ok` otherwise).
pub fn main(g: &Global, o: Options) -> Result<u8> {
    if o.workers == 0 {
        return Err(Error::usage("--workers must be at least 1"));
    }
    let printer = Printer::new(g.quiet, g.verbose, g.json, g.color);
    // The root's configuration must be valid before anything listens.
    let agentloop_engine::runs_root::Root { root, global, runs_dir, serve } =
        agentloop_engine::runs_root::prepare(g, &o.root)?;
    let addr = o
        .listen
        .to_socket_addrs()
        .map_err(|e| Error::usage(format!("--listen `{}`: {e}", o.listen)).with_source(e))?
        .next()
        .ok_or_else(|| Error::usage(format!("--listen `{}` names no address", o.listen)))?;
    let (auth, kept) = auth_for(addr, &o)?;
    #[cfg(feature = "queue")]
    let fleet = o.redis.as_ref().map(|(url, prefix)| fleet::Fleet::open(url, prefix, printer)).transpose()?;
    let root_lock = agentloop_workspace::workspace::Workspace::new(root.clone()).lock(None).map_err(root_busy)?;
    let server = tiny_http::Server::http(addr)
        .map_err(|e| Error::failure(format!("cannot listen on {addr}")).with_boxed_source(e))?;
    let bound = server.server_addr().to_ip().unwrap_or(addr);
    let url = format!("http://{bound}");
    let hosts = host::Hosts::new(bound, &serve.allowed_hosts)?;
    let shared = Arc::new(Shared {
        root: root.clone(),
        runs_dir,
        global,
        auth,
        hosts,
        queue: queue::Queue::new(o.workers, o.queue),
        printer,
        streams: AtomicUsize::new(0),
        root_lock: std::sync::Mutex::new(root_lock),
        bodies: http::Bodies::default(),
        #[cfg(feature = "queue")]
        fleet,
    });
    // The address (and a generated token) on stdout, one parseable line each.
    let token = shared.auth.generated.then(|| shared.auth.first().to_string());
    if printer.json {
        printer.outln(&json!({"listening": url, "token": token, "root": root}).to_string());
    } else {
        printer.outln(&format!("listening on {url}"));
        if let Some(t) = &token {
            printer.outln(&format!("token {t}"));
        }
    }
    let panel = match &token {
        Some(t) => format!("{url}/?token={t}"),
        None => format!("{url}/?token=$AGENTLOOP_TOKEN"),
    };
    if let Some(path) = &kept {
        printer.info(&format!("the token is kept in {path} (serve --new-token replaces it)"));
    }
    printer.info(&format!(
        "serving runs under {}/{} with {} worker(s) and {} queue place(s); panel: {panel}",
        root, shared.runs_dir, o.workers, o.queue
    ));
    // Printed once above; from here on a token is a secret to every write and every run.
    shared.auth.register_secrets();
    // Ctrl-C or SIGTERM: say so, and mark the runs being driven interrupted.
    agentloop_tools::interrupt::doing(&format!("agentloop serve on {url}"));
    runs::recover(&shared, o.resume)?;
    for _ in 0..o.workers {
        let s = shared.clone();
        std::thread::spawn(move || worker(&s));
    }
    let server = Arc::new(server);
    let mut threads = Vec::new();
    for _ in 0..HTTP_THREADS {
        let (s, srv) = (shared.clone(), server.clone());
        threads.push(std::thread::spawn(move || serve_requests(&s, &srv)));
    }
    for t in threads {
        let _ = t.join();
    }
    Err(Error::failure(format!("the server on {url} stopped")))
}

/// The root's lock cannot be taken: the lock's error, saying who may hold it (its kind, cause
/// and source kept, its hints replaced by that).
fn root_busy(e: Error) -> Error {
    Error { message: format!("{} (is another `agentloop serve` using this root?)", e.message), hints: Vec::new(), ..e }
}

/// The token(s) to accept: `AGENTLOOP_TOKEN`, else the kept generated one (where it is kept);
/// refuses a non-loopback address without `AGENTLOOP_TOKEN`, and `--new-token` with it.
fn auth_for(addr: std::net::SocketAddr, o: &Options) -> Result<(auth::Auth, Option<Utf8PathBuf>)> {
    let env_token = std::env::var("AGENTLOOP_TOKEN").ok().filter(|t| !t.trim().is_empty());
    if env_token.is_none() && !addr.ip().is_loopback() {
        return Err(Error::usage(format!("refusing to listen on {addr} (beyond loopback) without AGENTLOOP_TOKEN"))
            .with_hint("set AGENTLOOP_TOKEN to a long random value, or listen on 127.0.0.1"));
    }
    if o.new_token && env_token.is_some() {
        return Err(Error::usage(
            "--new-token replaces the kept generated token; AGENTLOOP_TOKEN is set, so none is used",
        )
        .with_hint("unset AGENTLOOP_TOKEN, or change its value instead"));
    }
    let (auth, kept) = match env_token {
        Some(_) => (auth::Auth::new(env_token, o.rate)?, None),
        None => {
            let (token, kept) = auth::kept_token(o.new_token)?;
            (auth::Auth::generated(token, o.rate)?, kept)
        }
    };
    Ok((auth, kept))
}

fn serve_requests(shared: &Arc<Shared>, server: &tiny_http::Server) {
    loop {
        let req = match server.recv() {
            Ok(r) => r,
            Err(e) => {
                shared.printer.warn(&format!("cannot accept a request: {e}"));
                std::thread::sleep(std::time::Duration::from_millis(100));
                continue;
            }
        };
        if http::has_body(&req) {
            with_body(shared, req);
        } else {
            handle(shared, req);
        }
    }
}

/// Handles one request; a bug in one handler must not take a thread of the server with it.
fn handle(shared: &Arc<Shared>, req: tiny_http::Request) {
    let s = shared.clone();
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| api::handle(&s, req))).is_err() {
        shared.printer.warn("a request handler failed (see above); the request was dropped");
    }
}

/// A request with a body goes to a thread of its own: reading the body, and tiny_http reading
/// what is left of it when the request is dropped, wait on the client, which may be slow on
/// purpose. One without a valid token or naming another `Host` is answered unread (401, 421);
/// a signed-in one over the limits
/// of [`http::Bodies`] is answered unread too (so strangers cannot use up a client's share).
fn with_body(shared: &Arc<Shared>, req: tiny_http::Request) {
    let s = shared.clone();
    let spawned = std::thread::Builder::new().name("serve-body".into()).spawn(move || {
        if s.hosts.check(&req).is_err() || !api::signed_in(&s, &req) {
            return handle(&s, req);
        }
        let client = req.remote_addr().map(|a| a.ip());
        match s.bodies.enter(client) {
            Ok(()) => {
                handle(&s, req);
                s.bodies.leave(client);
            }
            Err(e) => {
                s.debug(&format!("{} {} → {} (unread)", req.method(), req.url(), e.status));
                e.reply().send(req);
            }
        }
    });
    if let Err(e) = spawned {
        shared.printer.warn(&format!("cannot start a thread for a request: {e}; the request was dropped"));
    }
}

fn worker(shared: &Arc<Shared>) {
    loop {
        let id = shared.queue.pop();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runs::drive(shared, &id)));
        let error = match result {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e.detail()),
            Err(_) => Some("internal error while driving the run (see the server's stderr)".to_string()),
        };
        if let Some(e) = &error {
            shared.printer.warn(&format!("run {id}: {e}"));
        }
        shared.queue.done(&id, error);
    }
}
