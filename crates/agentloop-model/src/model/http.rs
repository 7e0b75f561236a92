//! JSON over HTTP for the providers: connect and read timeouts, retries with exponential
//! backoff and jitter on 429, 5xx, `overloaded_error` and connection failures (honouring
//! `retry-after` in seconds or as an HTTP date), no retry on other 4xx, a size cap on bodies,
//! and a final error that names the status, the provider's error type and message, the request
//! id and the attempts made. The API key never appears in an error.
//!
//! The run's deadline bounds each attempt (ureq's global timeout) and each wait between
//! attempts; no thread is started per call (host names are looked up on the calling thread, see
//! `Lookup`). A `text/event-stream` reply is handed to the caller's decoder (see
//! [`super::stream`]): a stream that breaks before any live piece was shown is retried like a
//! dropped connection, one that breaks after is not.
//!
//! A read timeout (no whole answer within `llm.read_timeout`) is always said on stderr and kept
//! for the caller to record ([`take_timeouts`]): the server may still be generating the
//! abandoned answer, up to the request's `max_tokens`. A server on this machine (a loopback
//! address) is not sent the same request again, since it would queue behind the one it is still
//! working on; a remote server gets the retry policy.
//!
//! A caller that can send the same request in another shape (the OpenAI-compatible client)
//! asks [`Client::post`] to tell a *shape rejection* from an outage, so that a rejected shape
//! costs one request and no backoff:
//!
//! - HTTP 400 and 422 are rejections of the request as sent.
//! - HTTP 500 is a rejection when its error message reads as request validation: it names
//!   an assertion, a validation or invalid value, a field of the request (`tool_choice`,
//!   `response_format`, `content`, a schema or template), or something "not supported"
//!   ([`SHAPE_WORDS`]). Servers such as llama-cpp-python answer every request error this way.
//! - A 500 with any other message (an empty one included) is *unclear*: with
//!   [`Shapes::Probe`] the first attempt returns it at once as an unclear rejection, so the
//!   caller may try its next shape once; otherwise it is an outage like 502, 503, 504, 429 and
//!   connection failures, and gets the retry policy.

use super::stream::Broken;
use agentloop_config::config::Config;
use agentloop_types::error::{Error, Kind, Result};
use serde_json::Value;
use std::io::{BufRead, Read};
use std::time::{Duration, Instant, SystemTime};

pub struct Client {
    agent: ureq::Agent,
    pub provider: String,
    read_timeout: Duration,
    attempts: u32,
    backoff_ms: u64,
    max_backoff: Duration,
    max_bytes: u64,
    secret: Option<String>,
}

/// Time spent waiting on the wire, from handing a request to the connection until its whole
/// reply was read (plain replies; streamed ones are read while decoded), for the whole process.
static EXCHANGE_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The time this process has spent in model calls on the wire so far (see `EXCHANGE_NS`):
/// `make bench` subtracts it from a step's wall time to get agentloop's own cost.
pub fn time_on_the_wire() -> Duration {
    Duration::from_nanos(EXCHANGE_NS.load(std::sync::atomic::Ordering::Relaxed))
}

/// A request that got no whole answer within `llm.read_timeout`.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedOut {
    pub url: String,
    pub waited_ms: u64,
    /// The request's `max_tokens`: the most the abandoned answer may still cost.
    pub max_tokens: Option<u64>,
    /// Whether the same request was sent again (a remote server), or the call ended (loopback).
    pub sent_again: bool,
    /// What was said on stderr.
    pub message: String,
}

thread_local! {
    /// Read timeouts not yet recorded by the caller (the phase that made the call).
    static TIMEOUTS: std::cell::RefCell<Vec<TimedOut>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The read timeouts of this thread's calls since the last take, oldest first.
pub fn take_timeouts() -> Vec<TimedOut> {
    TIMEOUTS.with(|t| std::mem::take(&mut *t.borrow_mut()))
}

/// Whether a URL's host is this machine (127.0.0.0/8, ::1, `localhost` or a name under it):
/// a server the user runs, which is not sent a request again while it may still be answering,
/// and whose unpriced model costs nothing.
pub fn loopback(url: &str) -> bool {
    let Ok(uri) = url.parse::<ureq::http::Uri>() else { return false };
    let host = uri.host().unwrap_or("").trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// How a caller wants 4xx/5xx answers sorted (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shapes {
    /// Every failure is an error; 500s are retried as outages (the Anthropic client).
    Off,
    /// 400, 422 and validation-like 500s come back at once as rejections.
    Definite,
    /// As `Definite`, and an unclear 500 on the first attempt too.
    Probe,
}

/// The server refused this request's shape: another shape may work; nothing was retried.
#[derive(Debug, Clone)]
pub struct Rejection {
    pub status: u16,
    /// False for an unclear 500 (no validation words in its message): maybe an outage.
    pub definite: bool,
    /// `HTTP 500 (type): message; request id ...`
    pub summary: String,
    /// The same, as the error the caller returns when it has no other shape to try.
    pub error: Error,
}

/// A failed exchange: a rejected shape, or anything else (after the retry policy ran).
#[derive(Debug, Clone)]
pub enum Failure {
    Rejected(Rejection),
    Failed(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Failed(e)
    }
}

impl Failure {
    pub fn into_error(self) -> Error {
        match self {
            Failure::Rejected(r) => r.error,
            Failure::Failed(e) => e,
        }
    }
}

/// Words that make an HTTP 500's error message a request-validation error rather than an
/// outage (matched case-insensitively). Deliberately no bare "expected" or "error", which
/// outage messages ("unexpected error") carry too.
pub const SHAPE_WORDS: &[&str] = &[
    "assert",
    "validation",
    "invalid",
    "not valid",
    "must be",
    "input should",
    "field required",
    "extra inputs",
    "unrecognized",
    "unknown field",
    "unknown parameter",
    "not supported",
    "unsupported",
    "not implemented",
    "tool_choice",
    "tool choice",
    "tool_calls",
    "response_format",
    "json_schema",
    "content",
    "schema",
    "template",
    "grammar",
];

/// Sorts a failed status: Some(true) a shape rejection, Some(false) an unclear 500, None
/// neither (auth, not found, rate limit, outage).
pub fn classify(status: u16, message: &str) -> Option<bool> {
    match status {
        400 | 422 => Some(true),
        500 => {
            let m = message.to_lowercase();
            Some(SHAPE_WORDS.iter().any(|w| m.contains(w)))
        }
        _ => None,
    }
}

/// What a successful exchange brought back.
pub enum Body {
    /// A JSON body (also what a server that ignores `stream: true` answers).
    Json(Value),
    /// A `text/event-stream` body, already read into the answer by the caller's decoder.
    Streamed(crate::model::Response),
}

pub struct Reply {
    pub body: Body,
    pub request_id: Option<String>,
    pub latency_ms: u64,
}

impl Reply {
    /// The response a provider's parser makes of the body (a streamed one is already parsed).
    pub fn response(&self, parse: fn(&Value) -> Result<crate::model::Response>) -> Result<crate::model::Response> {
        match &self.body {
            Body::Json(v) => parse(v),
            Body::Streamed(r) => Ok(r.clone()),
        }
    }

    /// Fills what every provider's response takes from the HTTP exchange: the completion's id
    /// (the body's `id`), the request id (header, else the body's `id`), the latency, and the
    /// model asked for when the body names none.
    pub fn complete(&self, r: &mut crate::model::Response, model: &str) {
        let body_id = match &self.body {
            Body::Json(v) => v.get("id").and_then(Value::as_str).map(String::from),
            Body::Streamed(s) => s.response_id.clone(),
        };
        r.response_id = body_id.clone();
        r.request_id = self.request_id.clone().or(body_id);
        r.latency_ms = self.latency_ms;
        if r.model.is_empty() {
            r.model = model.to_string();
        }
    }
}

/// Reads a `text/event-stream` body into the answer, reporting live pieces as they arrive.
pub type Decode<'a> = &'a mut DecodeFn<'a>;
pub type DecodeFn<'a> = dyn FnMut(&mut dyn BufRead) -> std::result::Result<crate::model::Response, Broken> + 'a;

/// Extracts (error type, message) from a provider's error body.
fn error_parts(body: &Value) -> (Option<String>, Option<String>) {
    let err = body.get("error").unwrap_or(body);
    let ty =
        err.get("type").and_then(Value::as_str).or_else(|| err.get("code").and_then(Value::as_str)).map(String::from);
    let msg = err.get("message").and_then(Value::as_str).map(String::from).or_else(|| err.as_str().map(String::from));
    (ty, msg)
}

fn retry_after(h: Option<&str>) -> Option<Duration> {
    let h = h?.trim();
    if let Ok(secs) = h.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(600.0)));
    }
    let when = httpdate::parse_http_date(h).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO).min(Duration::from_secs(600)))
}

/// Whether a failure to exchange at all is worth another attempt: timeouts, connection and
/// I/O failures, and name lookups that failed (a DNS server that did not answer, or answered
/// nothing) — all of which pass. A malformed URL or a TLS refusal does not.
pub fn transport_retryable(e: &ureq::Error) -> bool {
    matches!(
        e,
        ureq::Error::Timeout(_) | ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound
    )
}

/// Name lookup on the calling thread. ureq's default resolver starts a thread per lookup
/// whenever a timeout applies (and the run's deadline always makes one apply); this one never
/// does. A lookup is bounded by the system resolver's own timeout (`/etc/resolv.conf`), which
/// is seconds; connecting, sending and receiving stay bounded by the run's deadline. An IP
/// address in the URL needs no lookup at all.
#[derive(Debug, Default)]
struct Lookup;

impl ureq::unversioned::resolver::Resolver for Lookup {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        _config: &ureq::config::Config,
        _timeout: ureq::unversioned::transport::NextTimeout,
    ) -> std::result::Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        use std::net::ToSocketAddrs;
        let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
            return Err(ureq::Error::BadUri(format!("{uri} is not an absolute URL")));
        };
        let addr = ureq::unversioned::resolver::DefaultResolver::host_and_port(scheme, authority)
            .ok_or_else(|| ureq::Error::BadUri(format!("{uri} has no port and an unknown scheme")))?;
        let found = addr.to_socket_addrs().map_err(|e| {
            ureq::Error::Io(std::io::Error::new(e.kind(), format!("cannot resolve {}: {e}", authority.host())))
        })?;
        let mut out = self.empty();
        for a in found.take(16) {
            out.push(a);
        }
        if out.is_empty() {
            return Err(ureq::Error::HostNotFound);
        }
        Ok(out)
    }
}

/// How one attempt ended.
enum Step {
    Done(Reply),
    /// A failure worth another attempt: what happened, the hint for the final error, and the
    /// wait the server asked for.
    Again {
        what: String,
        hint: &'static str,
        wait: Option<Duration>,
        /// The HTTP status the server answered, when it answered one.
        status: Option<u16>,
    },
    Stop(Failure),
}

const REACH_HINT: &str = "check the base URL, that the server is running, and your network";

/// One POST's fixed parts.
struct Call<'a> {
    url: &'a str,
    headers: &'a [(&'a str, String)],
    payload: Vec<u8>,
    request_id_header: &'a str,
    deadline: Option<Instant>,
    shapes: Shapes,
    start: Instant,
}

impl Call<'_> {
    fn left(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }
    /// Whether the run's time is (nearly) gone, so a failure is the budget's, not the server's.
    fn out_of_time(&self) -> bool {
        self.left().is_some_and(|l| l < Duration::from_millis(50))
    }
}

/// A provider error carrying the HTTP status it ended on, for code to branch on (the way on
/// after a 404 names `--model`) instead of reading the message.
fn with_status(e: Error, status: Option<u16>) -> Error {
    match status {
        Some(s) => e.with_cause(agentloop_types::error::Cause::Status(s)),
        None => e,
    }
}

fn out_of_time() -> Error {
    Error::new(Kind::Budget, "timeout: the run's wall-clock limit ran out while waiting for the model")
}

impl Client {
    pub fn new(cfg: &Config, provider: &str, secret: Option<String>) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_connect(Some(cfg.llm.connect_timeout.0))
            .timeout_recv_response(Some(cfg.llm.read_timeout.0))
            .timeout_recv_body(Some(cfg.llm.read_timeout.0))
            .http_status_as_error(false)
            .user_agent(concat!("agentloop/", env!("CARGO_PKG_VERSION")))
            .build();
        let agent = ureq::Agent::with_parts(config, ureq::unversioned::transport::DefaultConnector::default(), Lookup);
        Client {
            agent,
            provider: provider.to_string(),
            read_timeout: cfg.llm.read_timeout.0,
            attempts: cfg.llm.attempts.max(1),
            backoff_ms: cfg.llm.backoff_ms,
            max_backoff: cfg.llm.max_backoff.0,
            max_bytes: cfg.llm.max_response_bytes,
            secret,
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let base = self.backoff_ms.saturating_mul(1u64 << (attempt - 1).min(16));
        let jitter = fastrand::u64(0..=base / 2 + 1);
        Duration::from_millis(base + jitter).min(self.max_backoff)
    }

    fn fail(&self, msg: String) -> Error {
        Error::provider(crate::model::redact(&msg, self.secret.as_deref()))
    }

    /// The final error after `attempt` attempts.
    fn final_error(&self, what: &str, attempt: u32, hint: &str) -> Error {
        let s = if attempt == 1 { "" } else { "s" };
        self.fail(format!("provider {}: {what} (after {attempt} attempt{s})", self.provider)).with_hint(hint)
    }

    /// POSTs a JSON body and returns the JSON reply, retrying what is worth retrying.
    pub fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
        request_id_header: &str,
        deadline: Option<Instant>,
    ) -> Result<Reply> {
        self.post(url, headers, body, request_id_header, deadline, Shapes::Off, None).map_err(Failure::into_error)
    }

    /// POSTs a JSON body; rejections of the request's shape come back at once as
    /// [`Failure::Rejected`] as `shapes` asks, everything else after the retry policy. With
    /// `decode`, an event-stream reply is read by it; a stream that breaks before any live
    /// piece was reported is retried like a dropped connection, one that breaks after is not
    /// (the pieces shown would be shown again), and the error says so.
    #[allow(clippy::too_many_arguments)]
    pub fn post<B: serde::Serialize + ?Sized>(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &B,
        request_id_header: &str,
        deadline: Option<Instant>,
        shapes: Shapes,
        mut decode: Option<Decode>,
    ) -> std::result::Result<Reply, Failure> {
        let payload = agentloop_types::json::to_vec(body);
        let call = Call { url, headers, payload, request_id_header, deadline, shapes, start: Instant::now() };
        let mut last = String::new();
        for attempt in 1..=self.attempts {
            match self.attempt(&call, attempt, decode.as_deref_mut()) {
                Step::Done(reply) => return Ok(reply),
                Step::Stop(f) => return Err(f),
                Step::Again { what, hint, wait, status } => {
                    if attempt == self.attempts {
                        return Err(with_status(self.final_error(&what, attempt, hint), status).into());
                    }
                    let wait = wait.unwrap_or_else(|| self.backoff(attempt));
                    // A wait that would outlast the run's time budget is not started.
                    if call.left().is_some_and(|l| l <= wait) {
                        return Err(out_of_time().into());
                    }
                    agentloop_io::output::progress_note(&format!(
                        "provider {}: {what}; attempt {} of {} in {}",
                        self.provider,
                        attempt + 1,
                        self.attempts,
                        if wait < Duration::from_secs(1) {
                            format!("{} ms", wait.as_millis())
                        } else {
                            format!("{:.1}s", wait.as_secs_f64())
                        }
                    ));
                    std::thread::sleep(wait);
                    last = what;
                }
            }
        }
        Err(self.fail(format!("provider {}: {last}", self.provider)).into())
    }

    /// Sends the request once and sorts what came back.
    fn attempt(&self, call: &Call, attempt: u32, decode: Option<&mut DecodeFn<'_>>) -> Step {
        agentloop_io::output::debug_note(&format!(
            "provider {}: POST {} (attempt {attempt} of {}, {} bytes)",
            self.provider,
            call.url,
            self.attempts,
            call.payload.len()
        ));
        let mut req = self.agent.post(call.url).header("content-type", "application/json");
        for (k, v) in call.headers {
            req = req.header(*k, v.as_str());
        }
        if let Some(l) = call.left() {
            if l.is_zero() {
                return Step::Stop(out_of_time().into());
            }
            req = req.config().timeout_global(Some(l)).build();
        }
        let sent_at = Instant::now();
        let resp = match req.send(&call.payload[..]) {
            Ok(r) => r,
            Err(e) => return self.unsent(call, attempt, e, sent_at),
        };
        let status = resp.status().as_u16();
        let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(String::from);
        let request_id = header(call.request_id_header);
        let wait = retry_after(header("retry-after").as_deref());
        let streamed = header("content-type").is_some_and(|c| c.trim_start().starts_with("text/event-stream"));
        let mut reader = resp.into_body().into_reader().take(self.max_bytes + 1);
        let rid = request_id.as_deref().map(|r| format!("; request id {r}")).unwrap_or_default();
        if (200..300).contains(&status) && streamed {
            if let Some(decode) = decode {
                let mut buffered = std::io::BufReader::new(&mut reader);
                let read = decode(&mut buffered);
                drop(buffered);
                return self.streamed(call, attempt, read, reader.limit() == 0, request_id);
            }
        }
        let mut buf = Vec::new();
        let read = reader.read_to_end(&mut buf);
        EXCHANGE_NS.fetch_add(sent_at.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        if let Err(e) = read {
            if call.out_of_time() {
                return Step::Stop(out_of_time().into());
            }
            if e.kind() == std::io::ErrorKind::TimedOut {
                return self.read_timeout(call, attempt, sent_at);
            }
            return Step::Again {
                what: format!("reading the response failed: {e}"),
                hint: REACH_HINT,
                wait: None,
                status: None,
            };
        }
        if buf.len() as u64 > self.max_bytes {
            return Step::Stop(self.too_large(call.url).into());
        }
        let parsed: std::result::Result<Value, _> = serde_json::from_slice(&buf);
        if (200..300).contains(&status) {
            return match parsed {
                Ok(body) => Step::Done(Reply {
                    body: Body::Json(body),
                    request_id,
                    latency_ms: call.start.elapsed().as_millis() as u64,
                }),
                Err(_) => Step::Stop(
                    self.fail(format!(
                        "provider {}: HTTP {status} but the body is not JSON: {}{rid}",
                        self.provider,
                        String::from_utf8_lossy(&buf[..buf.len().min(200)])
                    ))
                    .into(),
                ),
            };
        }
        self.refused(call, attempt, status, parsed.ok(), &buf, &rid, wait)
    }

    /// Sorts a request that got no response: the run's time gone, a read timeout, a retry, or
    /// a final error.
    fn unsent(&self, call: &Call, attempt: u32, e: ureq::Error, sent_at: Instant) -> Step {
        if call.out_of_time() {
            return Step::Stop(out_of_time().into());
        }
        if matches!(
            e,
            ureq::Error::Timeout(ureq::Timeout::RecvResponse | ureq::Timeout::RecvBody | ureq::Timeout::PerRead)
        ) {
            return self.read_timeout(call, attempt, sent_at);
        }
        let what = format!("cannot reach {}: {e}", call.url);
        if transport_retryable(&e) {
            return Step::Again { what, hint: REACH_HINT, wait: None, status: None };
        }
        Step::Stop(self.final_error(&what, attempt, REACH_HINT).into())
    }

    /// No whole answer within `llm.read_timeout`: said on stderr and kept for the caller's
    /// record; sent again only to a remote server (see the module comment).
    fn read_timeout(&self, call: &Call, attempt: u32, sent_at: Instant) -> Step {
        let waited_ms = sent_at.elapsed().as_millis() as u64;
        // Read back from the body only now, when it is needed: the bound of what was abandoned.
        let max_tokens = serde_json::from_slice::<Value>(&call.payload)
            .ok()
            .and_then(|v| v.get("max_tokens").or_else(|| v.get("max_completion_tokens")).and_then(Value::as_u64));
        let local = loopback(call.url);
        let sent_again = !local && attempt < self.attempts;
        let bound = match max_tokens {
            Some(n) => format!("; the server may still be generating the abandoned answer, up to {n} tokens (their count is unknown: a server reports usage only with a whole answer)"),
            None => "; the server may still be generating the abandoned answer".into(),
        };
        let what = format!(
            "no answer from {} within llm.read_timeout ({}s){bound}",
            call.url,
            self.read_timeout.as_secs_f64()
        );
        let message = if local {
            format!("provider {}: {what}; not sent again, since a server on this machine would queue it behind the abandoned one", self.provider)
        } else if sent_again {
            format!("provider {}: {what}; sending it again", self.provider)
        } else {
            format!("provider {}: {what}", self.provider)
        };
        agentloop_io::output::warning(&message);
        TIMEOUTS.with(|t| {
            t.borrow_mut().push(TimedOut { url: call.url.to_string(), waited_ms, max_tokens, sent_again, message })
        });
        const HINT: &str =
            "raise llm.read_timeout, or lower llm.max_tokens so an answer ends sooner; `-v` shows each request";
        if local {
            let e = self.final_error(&format!("{what}; not sent again to a server on this machine"), attempt, HINT);
            return Step::Stop(e.into());
        }
        Step::Again { what, hint: HINT, wait: None, status: None }
    }

    fn too_large(&self, url: &str) -> Error {
        self.fail(format!(
            "provider {}: the response from {url} is larger than llm.max_response_bytes ({} bytes)",
            self.provider, self.max_bytes
        ))
    }

    /// Sorts a streamed reply: the answer, a retry (nothing shown yet), or a final error.
    fn streamed(
        &self,
        call: &Call,
        attempt: u32,
        read: std::result::Result<crate::model::Response, Broken>,
        capped: bool,
        request_id: Option<String>,
    ) -> Step {
        let broken = match read {
            Ok(r) => {
                let latency_ms = call.start.elapsed().as_millis() as u64;
                return Step::Done(Reply { body: Body::Streamed(r), request_id, latency_ms });
            }
            Err(_) if capped => return Step::Stop(self.too_large(call.url).into()),
            Err(_) if call.out_of_time() => return Step::Stop(out_of_time().into()),
            Err(b) => b,
        };
        let what = format!("the stream from {} broke: {}", call.url, broken.message);
        if broken.shown {
            let e = self.fail(format!(
                "provider {}: {what}, after part of the answer had been shown live; not sent again (attempt {attempt})",
                self.provider
            ));
            return Step::Stop(e.with_hint("try again, or set llm.stream: false to receive whole answers").into());
        }
        if broken.retryable {
            return Step::Again {
                what,
                hint: "the provider is failing; try again later or raise llm.attempts",
                wait: None,
                status: None,
            };
        }
        Step::Stop(
            self.final_error(&what, attempt, "the server sent a stream agentloop cannot read; set llm.stream: false")
                .into(),
        )
    }

    /// Sorts a 4xx/5xx: a shape rejection, a retry, or a final error.
    #[allow(clippy::too_many_arguments)]
    fn refused(
        &self,
        call: &Call,
        attempt: u32,
        status: u16,
        parsed: Option<Value>,
        buf: &[u8],
        rid: &str,
        wait: Option<Duration>,
    ) -> Step {
        let (ty, msg) = parsed.as_ref().map(error_parts).unwrap_or((None, None));
        let msg = msg.unwrap_or_else(|| String::from_utf8_lossy(&buf[..buf.len().min(300)]).trim().to_string());
        let what = format!(
            "HTTP {status}{} {}{rid}",
            ty.as_ref().map(|t| format!(" ({t}):")).unwrap_or_else(|| ":".into()),
            if msg.is_empty() { "(no message)" } else { msg.as_str() }
        );
        let hint = match status {
            401 | 403 => "check the API key (ANTHROPIC_API_KEY / OPENAI_API_KEY or llm.api_key_env)",
            404 => "check the model id (--model) and the base URL (--base-url)",
            400 | 422 => "the provider rejected the request; see the message above",
            _ => "the provider is failing; try again later or raise llm.attempts",
        };
        let shape = match (call.shapes, classify(status, &msg)) {
            (Shapes::Off, _) | (_, None) => None,
            (_, Some(true)) => Some(true),
            (Shapes::Probe, Some(false)) if attempt == 1 => Some(false),
            (_, Some(false)) => None,
        };
        if let Some(definite) = shape {
            let summary = crate::model::redact(&what, self.secret.as_deref());
            let error = with_status(self.final_error(&what, attempt, hint), Some(status));
            return Step::Stop(Failure::Rejected(Rejection { status, definite, summary, error }));
        }
        let retry = status == 429 || status >= 500 || ty.as_deref() == Some("overloaded_error");
        if retry {
            return Step::Again { what, hint, wait, status: Some(status) };
        }
        Step::Stop(with_status(self.final_error(&what, attempt, hint), Some(status)).into())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shape_rejections_are_told_from_outages() {
        use super::classify;
        assert_eq!(classify(400, "anything"), Some(true));
        assert_eq!(classify(422, ""), Some(true));
        // llama-cpp-python: request validation and template errors come back as HTTP 500.
        assert_eq!(classify(500, "1 validation error: ... Input should be 'text' or 'json_object'"), Some(true));
        assert_eq!(classify(500, "AssertionError: tool_choice"), Some(true));
        assert_eq!(classify(500, "'dict object' has no attribute 'content'"), Some(true));
        // An empty assertion message or a plain crash: unclear.
        assert_eq!(classify(500, ""), Some(false));
        assert_eq!(classify(500, "Internal Server Error"), Some(false));
        assert_eq!(classify(500, "unexpected error"), Some(false));
        for outage in [429, 502, 503, 504, 401, 404] {
            assert_eq!(classify(outage, "invalid"), None);
        }
    }

    #[test]
    fn names_are_looked_up_on_the_calling_thread_and_failures_retry() {
        use ureq::unversioned::resolver::Resolver;
        let cfg = ureq::config::Config::default();
        let none = ureq::unversioned::transport::NextTimeout::default;
        let uri: ureq::http::Uri = "http://127.0.0.1:9/v1".parse().unwrap();
        let found = super::Lookup.resolve(&uri, &cfg, none()).unwrap();
        assert_eq!(found[0], "127.0.0.1:9".parse().unwrap());
        let uri: ureq::http::Uri = "http://agentloop-test.invalid/v1".parse().unwrap();
        let e = super::Lookup.resolve(&uri, &cfg, none()).unwrap_err();
        assert!(e.to_string().contains("agentloop-test.invalid") || matches!(e, ureq::Error::HostNotFound), "{e}");
        assert!(super::transport_retryable(&e), "{e}");
    }

    #[test]
    fn loopback_servers_are_told_from_remote_ones() {
        for local in [
            "http://127.0.0.1:8088/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8080/v1",
            "http://127.3.2.1/x",
            "http://a.localhost/v1",
            "http://u:p@127.0.0.2",
        ] {
            assert!(super::loopback(local), "{local}");
        }
        for remote in [
            "https://api.openai.com/v1",
            "http://192.168.1.5:8088/v1",
            "http://localhost.example/v1",
            "http://localhost.evil.com/v1",
            "http://[2001:db8::1]:80",
            "nonsense",
        ] {
            assert!(!super::loopback(remote), "{remote}");
        }
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(super::retry_after(Some("2")), Some(std::time::Duration::from_secs(2)));
        assert_eq!(super::retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT")), Some(std::time::Duration::ZERO));
        assert_eq!(super::retry_after(Some("soon")), None);
    }
}
