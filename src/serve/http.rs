//! What the API handlers share: replies, errors as JSON, the request target, bounded bodies.
//! HTTP itself (parsing, keep-alive, chunking) is tiny_http's.
//!
//! Bodies are where a slow client can hold a thread: tiny_http hands a request over once its
//! head has arrived and reads the body only when it is read — and reads the rest of it anyway
//! when the request is dropped, replied to or not. So a request with a body is handled on a
//! thread of its own ([`Bodies`] counts them, per client address and in all), never on the
//! threads that answer everyone else, and the handler reads it under [`BODY_DEADLINE`].

use agentloop_types::error::{Error, Kind};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Largest request body accepted (the same cap as a worker's messages).
pub const MAX_BODY: usize = agentloop_engine::runs_root::MAX_REQUEST_BYTES;

/// How long a request body may take to arrive, all of it; a slower one is a 408.
pub const BODY_DEADLINE: Duration = Duration::from_secs(10);

/// Requests with a body in progress from one client address; more are a 429, unread.
pub const BODIES_PER_CLIENT: usize = 8;

/// Requests with a body in progress from all clients; more are a 503, unread.
pub const BODIES_TOTAL: usize = 64;

/// The requests whose bodies are being read (or drained) now, by client address.
#[derive(Default)]
pub struct Bodies {
    open: Mutex<HashMap<Option<IpAddr>, usize>>,
}

impl Bodies {
    /// Counts one more request with a body from `client`; Err (the reply) when over a limit.
    /// Every `Ok` is followed by one [`Bodies::leave`] when the request is gone.
    pub fn enter(&self, client: Option<IpAddr>) -> Result<(), ApiError> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = open.values().sum();
        let mine = open.get(&client).copied().unwrap_or(0);
        if mine >= BODIES_PER_CLIENT {
            return Err(ApiError::new(
                429,
                format!("too many requests with a body from this address at once (at most {BODIES_PER_CLIENT})"),
            )
            .hint("send the next one when an earlier one is answered")
            .retry_after(1));
        }
        if total >= BODIES_TOTAL {
            return Err(ApiError::new(503, format!("too many requests with a body at once (at most {BODIES_TOTAL})"))
                .retry_after(1));
        }
        *open.entry(client).or_insert(0) += 1;
        Ok(())
    }

    pub fn leave(&self, client: Option<IpAddr>) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&client) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&client);
            }
        }
    }
}

/// Whether a request carries a body (a length, or chunks) that reading or dropping it would
/// wait for.
pub fn has_body(req: &tiny_http::Request) -> bool {
    req.body_length().is_some_and(|n| n > 0) || req.headers().iter().any(|h| h.field.equiv("Transfer-Encoding"))
}

/// A reply before it is sent.
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub headers: Vec<(String, String)>,
}

impl Reply {
    pub fn json(status: u16, v: &Value) -> Reply {
        let mut body = serde_json::to_vec_pretty(v).unwrap_or_default();
        body.push(b'\n');
        Reply { status, content_type: "application/json", body, headers: vec![] }
    }
    pub fn html(page: String) -> Reply {
        Reply::html_with(page, agentloop_engine::report::html::CSP)
    }
    /// A page under the policy `csp` (e.g. one that lets the page's forms post to this server).
    pub fn html_with(page: String, csp: &str) -> Reply {
        let csp = format!("{csp}; frame-ancestors 'none'");
        Reply { status: 200, content_type: "text/html; charset=utf-8", body: page.into_bytes(), headers: vec![] }
            .header("Content-Security-Policy", &csp)
    }
    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.to_string(), v.to_string()));
        self
    }
    pub fn send(self, req: tiny_http::Request) {
        let mut resp = tiny_http::Response::from_data(self.body).with_status_code(self.status);
        let mut headers = vec![
            ("Content-Type".to_string(), self.content_type.to_string()),
            ("X-Content-Type-Options".into(), "nosniff".into()),
            ("Cache-Control".into(), "no-store".into()),
            // `same-origin`: no address leaves for another site, while the panel's own form
            // posts carry the real `Origin` (under `no-referrer` a browser sends `Origin: null`,
            // which the form check must refuse).
            ("Referrer-Policy".into(), "same-origin".into()),
        ];
        headers.extend(self.headers);
        for (k, v) in headers {
            if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                resp.add_header(h);
            }
        }
        // A client that went away is not an error of the server.
        let _ = req.respond(resp);
    }
}

/// An error reply: status, message, the errors behind it (`causes`), an optional hint (with
/// every hint in `hints`) and Retry-After.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    /// The errors behind this one, the hints after the first and the form's fix, when there
    /// are any (boxed: an error stays small to return).
    pub more: Option<Box<More>>,
    pub hint: Option<String>,
    pub retry_after: Option<u64>,
    /// The methods an endpoint takes (405).
    pub allow: Option<String>,
}

/// What an [`ApiError`] made from an [`Error`] says beyond its message and first hint.
#[derive(Debug, Default)]
pub struct More {
    /// [`Error::causes`]: the text of each error behind this one, outermost first.
    pub causes: Vec<String>,
    /// Hints after the first (which is `hint`).
    pub hints: Vec<String>,
    /// The fix as a panel form's page says it (the fields of the form, not the JSON body), when
    /// it differs from `hint`.
    pub form_hint: Option<String>,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), more: None, hint: None, retry_after: None, allow: None }
    }
    pub fn hint(mut self, h: impl Into<String>) -> Self {
        self.hint = Some(h.into());
        self
    }
    /// The fix as the panel's form page says it (see [`More::form_hint`]).
    pub fn form_hint(mut self, h: impl Into<String>) -> Self {
        self.more.get_or_insert_with(Box::default).form_hint = Some(h.into());
        self
    }
    /// Replaces the status `from` by `to` (a handler's reading of a generic error).
    pub fn status_if(mut self, from: u16, to: u16) -> Self {
        if self.status == from {
            self.status = to;
        }
        self
    }
    pub fn allow(mut self, methods: &str) -> Self {
        self.allow = Some(methods.to_string());
        self
    }
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }
    /// The message and the errors behind it on one line (the panel's refusal box).
    pub fn text(&self) -> String {
        let causes = self.more.as_ref().map_or(&[][..], |m| &m.causes[..]);
        std::iter::once(&self.message).chain(causes).map(String::as_str).collect::<Vec<_>>().join(": ")
    }
    pub fn reply(self) -> Reply {
        let mut v = json!({"error": self.message, "status": self.status});
        let more = self.more.unwrap_or_default();
        if !more.causes.is_empty() {
            v["causes"] = json!(more.causes);
        }
        if let Some(h) = &self.hint {
            v["hint"] = json!(h);
            v["hints"] = json!(std::iter::once(h).chain(&more.hints).collect::<Vec<_>>());
        }
        let mut r = Reply::json(self.status, &v);
        if let Some(s) = self.retry_after {
            v["retry_after"] = json!(s);
            r = Reply::json(self.status, &v).header("Retry-After", &s.to_string());
        }
        if let Some(a) = &self.allow {
            r = r.header("Allow", a);
        }
        if self.status == 401 {
            r = r.header("WWW-Authenticate", "Bearer realm=\"agentloop\"");
        }
        r
    }
}

/// The program's errors as HTTP: what the client got wrong is 4xx, the rest 5xx.
impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let status = match e.kind {
            Kind::Usage | Kind::Config => 400,
            Kind::Negotiation => 422,
            Kind::Resting => 429,
            Kind::LockBusy => 409,
            Kind::Provider => 502,
            Kind::Escalated | Kind::Budget | Kind::Tool | Kind::Data | Kind::Failure => 500,
        };
        let causes = e.causes();
        let mut hints = e.hints.into_iter();
        let hint = hints.next();
        let more = More { causes, hints: hints.collect(), form_hint: None };
        let more = (!more.causes.is_empty() || !more.hints.is_empty()).then(|| Box::new(more));
        ApiError { more, hint, ..ApiError::new(status, e.message) }
    }
}

pub type ApiResult<T = Reply> = std::result::Result<T, ApiError>;

/// What a route produces: a reply, or a stream or a file that needs the request itself.
pub enum Out {
    Reply(Reply),
    Stream(agentloop_workspace::workspace::Workspace, usize),
    File(std::fs::File, &'static str),
}

/// The path's segments (percent-decoded) and the query parameters of a request target.
pub fn target(url: &str) -> std::result::Result<(Vec<String>, BTreeMap<String, String>), ApiError> {
    let bad = || ApiError::new(400, "the request target is not a valid path");
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    if !path.starts_with('/') {
        return Err(bad());
    }
    let segs =
        path.split('/').filter(|s| !s.is_empty()).map(|s| decode(s).ok_or_else(bad)).collect::<Result<Vec<_>, _>>()?;
    Ok((segs, pairs(query).ok_or_else(bad)?))
}

/// Where a browser goes after signing in: `to` when it is a path on this server, else `/`.
///
/// A browser resolves `Location` against the page's address by the WHATWG URL rules, under
/// which `//host/x`, `/\host` and `///host` name another host (a backslash counts as a slash;
/// tabs and newlines are dropped first). So `to` must begin with one `/` not followed by `/` or
/// `\`, hold no control character or space, and, resolved by those same rules (the `url`
/// crate), keep this server's origin: a scheme or another host, however spelled, fails.
pub fn same_origin_path(to: &str) -> &str {
    let mut chars = to.chars();
    let one_slash = chars.next() == Some('/') && !matches!(chars.next(), Some('/' | '\\'));
    let plain = !to.chars().any(|c| c.is_control() || c.is_whitespace());
    let Ok(here) = url::Url::parse("http://agentloop.invalid/") else { return "/" };
    let stays = here.join(to).is_ok_and(|u| u.origin() == here.origin());
    if one_slash && plain && stays {
        to
    } else {
        "/"
    }
}

/// `k=v&k2=v2` (a query, or a form's `application/x-www-form-urlencoded` body), decoded; None
/// when an escape is broken. A name given twice keeps its last value.
fn pairs(text: &str) -> Option<BTreeMap<String, String>> {
    let mut q = BTreeMap::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        q.insert(decode(&k.replace('+', " "))?, decode(&v.replace('+', " "))?);
    }
    Some(q)
}

/// Whether the request's body is a browser form (`application/x-www-form-urlencoded`).
pub fn is_form(req: &tiny_http::Request) -> bool {
    req.headers().iter().any(|h| {
        h.field.equiv("Content-Type")
            && h.value.as_str().trim().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded")
    })
}

/// Percent-decoding; None for a broken escape or bytes that are not UTF-8.
pub fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A POST body as [`parse`] reads it.
pub enum Body {
    /// A JSON object (whatever the content type said).
    Json(serde_json::Map<String, Value>),
    /// A browser form's fields.
    Form(BTreeMap<String, String>),
}

/// Reads a POST body whole: at most [`MAX_BODY`] bytes, within [`BODY_DEADLINE`].
pub fn read(req: &mut tiny_http::Request) -> ApiResult<Vec<u8>> {
    if req.body_length().is_some_and(|n| n > MAX_BODY) {
        return Err(ApiError::new(413, format!("the request body is larger than {MAX_BODY} bytes")));
    }
    read_within(req.as_reader(), MAX_BODY, BODY_DEADLINE)
}

/// Whether a body opens as JSON does (`{` or `[`): then it is meant as JSON, whatever its
/// content type says (`curl -d '{...'` types it as a form).
pub fn opens_as_json(buf: &[u8]) -> bool {
    buf.iter().find(|b| !b.is_ascii_whitespace()).is_some_and(|b| matches!(b, b'{' | b'['))
}

/// A POST body that may be a browser form, read by [`read`]. One rule for every POST: a body
/// that opens as JSON is read as JSON whatever the content type says; only a form-typed
/// (`form`) body that does not is a form. A JSON body that is not valid says why as JSON, not
/// that a form has no such field.
pub fn parse(form: bool, buf: &[u8]) -> ApiResult<Body> {
    if form && !opens_as_json(buf) {
        return std::str::from_utf8(buf)
            .ok()
            .and_then(|t| pairs(t.trim()))
            .map(Body::Form)
            .ok_or_else(|| ApiError::new(400, "the form body is not valid `application/x-www-form-urlencoded` UTF-8"));
    }
    json_object(buf).map(Body::Json)
}

/// Reads a JSON object body of at most [`MAX_BODY`] bytes, all of it within [`BODY_DEADLINE`]
/// (whatever the content type says: see `body`).
pub fn json_body(req: &mut tiny_http::Request) -> ApiResult<serde_json::Map<String, Value>> {
    json_object(&read(req)?)
}

fn json_object(buf: &[u8]) -> ApiResult<serde_json::Map<String, Value>> {
    match serde_json::from_slice::<Value>(buf) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::new(400, "the request body must be a JSON object")),
        Err(e) if buf.iter().all(u8::is_ascii_whitespace) => {
            Err(ApiError::new(400, format!("the request body is empty ({e}); send a JSON object")))
        }
        Err(e) => Err(ApiError::new(400, format!("the request body is not valid JSON: {e}"))),
    }
}

/// Reads to the end, at most `max` bytes, giving up once `deadline` has passed (checked after
/// every read, so a client trickling a byte at a time is cut off too).
fn read_within(r: &mut dyn Read, max: usize, deadline: Duration) -> ApiResult<Vec<u8>> {
    let started = Instant::now();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if started.elapsed() > deadline {
            return Err(ApiError::new(408, format!("the request body did not arrive within {} s", deadline.as_secs()))
                .hint("send the whole body at once, right after the headers"));
        }
        match r.read(&mut chunk) {
            Ok(0) => return Ok(buf),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > max {
                    return Err(ApiError::new(413, format!("the request body is larger than {max} bytes")));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ApiError::new(400, format!("cannot read the request body: {e}"))),
        }
    }
}

/// Refuses keys of `body` outside `allowed`, naming every one.
pub fn only_keys(body: &serde_json::Map<String, Value>, allowed: &[&str], what: &str) -> ApiResult<()> {
    let unknown: Vec<String> =
        body.keys().filter(|k| !allowed.contains(&k.as_str())).map(|k| format!("`{k}`")).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(ApiError::new(400, format!("{what} may not set {}", unknown.join(", ")))
        .hint(format!("{what} takes only: {}", allowed.join(", "))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_answers_its_causes_and_hints() {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, "key must be a string at line 1 column 2");
        let e = Error::data("cannot read runs/r1/state.json")
            .with_source(io)
            .with_hint("restore it")
            .with_hint("or remove it");
        let r = ApiError::from(e).reply();
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(r.status, 500);
        assert_eq!(v["error"], "cannot read runs/r1/state.json");
        assert_eq!(v["causes"], json!(["key must be a string at line 1 column 2"]));
        assert_eq!(
            (v["hint"].clone(), v["hints"].clone()),
            (json!("restore it"), json!(["restore it", "or remove it"]))
        );
        let plain: Value = serde_json::from_slice(&ApiError::new(404, "no run").reply().body).unwrap();
        assert_eq!(plain, json!({"error": "no run", "status": 404}));
    }

    #[test]
    fn a_sign_in_goes_only_to_a_path_here() {
        for ok in ["/", "/runs/X/report", "/runs?status=done", "/a:b", "/.%2F%2Fevil"] {
            assert_eq!(same_origin_path(ok), ok);
        }
        for off in [
            "//evil/x",
            "/\\evil",
            "///evil",
            "/\\/evil",
            "/\t/evil",
            "/\n/evil",
            "http://evil/",
            "evil",
            "",
            "https:evil",
            "/x y",
            "/x\u{85}",
        ] {
            assert_eq!(same_origin_path(off), "/", "{off:?}");
        }
    }

    #[test]
    fn targets_decode() {
        let (segs, q) = target("/runs/A%20B/trace?follow=1&x=a+b").unwrap();
        assert_eq!(segs, ["runs", "A B", "trace"]);
        assert_eq!(q["follow"], "1");
        assert_eq!(q["x"], "a b");
        assert!(target("/runs/%zz").is_err());
        assert!(target("/runs/%C3").is_err());
        assert!(target("*").is_err());
        assert_eq!(decode("%2e%2E").as_deref(), Some(".."));
    }

    /// Gives one byte per read, waiting `pause` before each.
    struct Trickle {
        left: usize,
        pause: Duration,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.left == 0 || buf.is_empty() {
                return Ok(0);
            }
            std::thread::sleep(self.pause);
            self.left -= 1;
            buf[0] = b' ';
            Ok(1)
        }
    }

    #[test]
    fn bodies_are_read_within_a_deadline_and_a_size() {
        let mut slow = Trickle { left: 1000, pause: Duration::from_millis(20) };
        let e = read_within(&mut slow, 10_000, Duration::from_millis(200)).unwrap_err();
        assert_eq!(e.status, 408, "{}", e.message);
        assert!(slow.left > 900, "it stopped soon after the deadline");
        let mut quick = Trickle { left: 50, pause: Duration::ZERO };
        assert_eq!(read_within(&mut quick, 100, Duration::from_secs(5)).unwrap().len(), 50);
        let mut big = Trickle { left: 50, pause: Duration::ZERO };
        assert_eq!(read_within(&mut big, 10, Duration::from_secs(5)).unwrap_err().status, 413);
    }

    #[test]
    fn bodies_in_progress_are_limited_per_client_and_in_all() {
        let b = Bodies::default();
        let a: Option<IpAddr> = Some("127.0.0.1".parse().unwrap());
        for _ in 0..BODIES_PER_CLIENT {
            b.enter(a).unwrap();
        }
        assert_eq!(b.enter(a).unwrap_err().status, 429);
        b.leave(a);
        b.enter(a).unwrap();
        for i in 0..(BODIES_TOTAL - BODIES_PER_CLIENT) {
            b.enter(Some(IpAddr::from([10, 0, (i / 250) as u8, (i % 250) as u8]))).unwrap();
        }
        assert_eq!(b.enter(Some("10.9.9.9".parse().unwrap())).unwrap_err().status, 503);
    }
}
