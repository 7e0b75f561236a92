//! JSON over HTTP for the providers: connect and read timeouts, retries with exponential
//! backoff and jitter on 429, 5xx, `overloaded_error` and connection failures (honouring
//! `retry-after` in seconds or as an HTTP date), no retry on other 4xx, a size cap on bodies,
//! and a final error that names the status, the provider's error type and message, the request
//! id and the attempts made. The API key never appears in an error.
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

use crate::config::Config;
use crate::error::{Error, Kind, Result};
use serde_json::Value;
use std::io::Read;
use std::time::{Duration, Instant, SystemTime};

pub struct Client {
    agent: ureq::Agent,
    pub provider: String,
    attempts: u32,
    backoff_ms: u64,
    max_backoff: Duration,
    max_bytes: u64,
    secret: Option<String>,
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

pub struct Reply {
    pub body: Value,
    pub request_id: Option<String>,
    pub latency_ms: u64,
}

impl Reply {
    /// Fills what every provider's response takes from the HTTP exchange: the request id
    /// (header, else the body's `id`), the latency, and the model asked for when the body
    /// names none.
    pub fn complete(&self, r: &mut crate::model::Response, model: &str) {
        r.request_id =
            self.request_id.clone().or_else(|| self.body.get("id").and_then(Value::as_str).map(String::from));
        r.latency_ms = self.latency_ms;
        if r.model.is_empty() {
            r.model = model.to_string();
        }
    }
}

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

impl Client {
    pub fn new(cfg: &Config, provider: &str, secret: Option<String>) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(cfg.llm.connect_timeout.0))
            .timeout_recv_response(Some(cfg.llm.read_timeout.0))
            .timeout_recv_body(Some(cfg.llm.read_timeout.0))
            .http_status_as_error(false)
            .user_agent(concat!("agentloop/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Client {
            agent,
            provider: provider.to_string(),
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

    /// POSTs a JSON body and returns the JSON reply, retrying what is worth retrying.
    pub fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
        request_id_header: &str,
        deadline: Option<Instant>,
    ) -> Result<Reply> {
        self.post(url, headers, body, request_id_header, deadline, Shapes::Off).map_err(Failure::into_error)
    }

    /// POSTs a JSON body; rejections of the request's shape come back at once as
    /// [`Failure::Rejected`] as `shapes` asks, everything else after the retry policy.
    pub fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
        request_id_header: &str,
        deadline: Option<Instant>,
        shapes: Shapes,
    ) -> std::result::Result<Reply, Failure> {
        let payload = serde_json::to_vec(body).expect("request serializes");
        let start = Instant::now();
        let mut last = String::new();
        let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let out_of_time =
            || Error::new(Kind::Budget, "timeout: the run's wall-clock limit ran out while waiting for the model");
        // Waits before a retry, unless the wait would outlast the run's time budget.
        let pause = |d: Duration| -> Result<()> {
            if left().is_some_and(|l| l <= d) {
                return Err(out_of_time());
            }
            crate::log::info(&format!("provider {}: retrying {url} in {} ms", self.provider, d.as_millis()));
            std::thread::sleep(d);
            Ok(())
        };
        for attempt in 1..=self.attempts {
            let mut req = self.agent.post(url).header("content-type", "application/json");
            for (k, v) in headers {
                req = req.header(*k, v.as_str());
            }
            if let Some(l) = left() {
                if l.is_zero() {
                    return Err(out_of_time().into());
                }
                req = req.config().timeout_global(Some(l)).build();
            }
            let resp = match req.send(&payload[..]) {
                Ok(r) => r,
                Err(e) => {
                    let retry = matches!(
                        e,
                        ureq::Error::Timeout(_)
                            | ureq::Error::Io(_)
                            | ureq::Error::ConnectionFailed
                            | ureq::Error::HostNotFound
                    );
                    last = format!("cannot reach {url}: {e}");
                    if left().is_some_and(|l| l < Duration::from_millis(50)) {
                        return Err(out_of_time().into());
                    }
                    if retry && attempt < self.attempts {
                        pause(self.backoff(attempt))?;
                        continue;
                    }
                    return Err(self
                        .fail(format!(
                            "provider {}: {last} (after {attempt} attempt{})",
                            self.provider,
                            if attempt == 1 { "" } else { "s" }
                        ))
                        .with_hint("check the base URL, that the server is running, and your network")
                        .into());
                }
            };
            let status = resp.status().as_u16();
            let request_id = resp.headers().get(request_id_header).and_then(|v| v.to_str().ok()).map(String::from);
            let ra = retry_after(resp.headers().get("retry-after").and_then(|v| v.to_str().ok()));
            let mut buf = Vec::new();
            if let Err(e) = resp.into_body().into_reader().take(self.max_bytes + 1).read_to_end(&mut buf) {
                last = format!("reading the response failed: {e}");
                if left().is_some_and(|l| l < Duration::from_millis(50)) {
                    return Err(out_of_time().into());
                }
                if attempt < self.attempts {
                    pause(self.backoff(attempt))?;
                    continue;
                }
                return Err(self.fail(format!("provider {}: {last} (after {attempt} attempts)", self.provider)).into());
            }
            if buf.len() as u64 > self.max_bytes {
                return Err(self
                    .fail(format!(
                        "provider {}: the response from {url} is larger than llm.max_response_bytes ({} bytes)",
                        self.provider, self.max_bytes
                    ))
                    .into());
            }
            let parsed: std::result::Result<Value, _> = serde_json::from_slice(&buf);
            let rid = request_id.as_deref().map(|r| format!("; request id {r}")).unwrap_or_default();
            if (200..300).contains(&status) {
                return match parsed {
                    Ok(body) => Ok(Reply { body, request_id, latency_ms: start.elapsed().as_millis() as u64 }),
                    Err(_) => Err(self
                        .fail(format!(
                            "provider {}: HTTP {status} but the body is not JSON: {}{rid}",
                            self.provider,
                            String::from_utf8_lossy(&buf[..buf.len().min(200)])
                        ))
                        .into()),
                };
            }
            let (ty, msg) = parsed.as_ref().map(error_parts).unwrap_or((None, None));
            let msg = msg.unwrap_or_else(|| String::from_utf8_lossy(&buf[..buf.len().min(300)]).trim().to_string());
            last = format!(
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
            let final_error = |last: &str| {
                self.fail(format!(
                    "provider {}: {last} (after {attempt} attempt{})",
                    self.provider,
                    if attempt == 1 { "" } else { "s" }
                ))
                .with_hint(hint)
            };
            let shape = match (shapes, classify(status, &msg)) {
                (Shapes::Off, _) | (_, None) => None,
                (_, Some(true)) => Some(true),
                (Shapes::Probe, Some(false)) if attempt == 1 => Some(false),
                (_, Some(false)) => None,
            };
            if let Some(definite) = shape {
                let summary = crate::model::redact(&last, self.secret.as_deref());
                return Err(Failure::Rejected(Rejection { status, definite, summary, error: final_error(&last) }));
            }
            let retry = status == 429 || status >= 500 || ty.as_deref() == Some("overloaded_error");
            if retry && attempt < self.attempts {
                pause(ra.unwrap_or_else(|| self.backoff(attempt)))?;
                continue;
            }
            return Err(final_error(&last).into());
        }
        Err(self.fail(format!("provider {}: {last}", self.provider)).into())
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
    fn retry_after_forms() {
        assert_eq!(super::retry_after(Some("2")), Some(std::time::Duration::from_secs(2)));
        assert_eq!(super::retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT")), Some(std::time::Duration::ZERO));
        assert_eq!(super::retry_after(Some("soon")), None);
    }
}
