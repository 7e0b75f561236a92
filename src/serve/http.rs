//! What the API handlers share: replies, errors as JSON, the request target, bounded bodies.
//! HTTP itself (parsing, keep-alive, chunking) is tiny_http's.

use crate::error::{Error, Kind};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Read;

/// Largest request body accepted.
pub const MAX_BODY: usize = 1024 * 1024;

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
        let csp = format!("{}; frame-ancestors 'none'", crate::report::html::CSP);
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
            ("Referrer-Policy".into(), "no-referrer".into()),
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

/// An error reply: status, message, an optional hint and Retry-After.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub hint: Option<String>,
    pub retry_after: Option<u64>,
    /// The methods an endpoint takes (405).
    pub allow: Option<String>,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), hint: None, retry_after: None, allow: None }
    }
    pub fn hint(mut self, h: impl Into<String>) -> Self {
        self.hint = Some(h.into());
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
    pub fn reply(self) -> Reply {
        let mut v = json!({"error": self.message, "status": self.status});
        if let Some(h) = &self.hint {
            v["hint"] = json!(h);
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
        ApiError { status, message: e.message, hint: e.hint, retry_after: None, allow: None }
    }
}

pub type ApiResult<T = Reply> = std::result::Result<T, ApiError>;

/// The path's segments (percent-decoded) and the query parameters of a request target.
pub fn target(url: &str) -> std::result::Result<(Vec<String>, BTreeMap<String, String>), ApiError> {
    let bad = || ApiError::new(400, "the request target is not a valid path");
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    if !path.starts_with('/') {
        return Err(bad());
    }
    let segs =
        path.split('/').filter(|s| !s.is_empty()).map(|s| decode(s).ok_or_else(bad)).collect::<Result<Vec<_>, _>>()?;
    let mut q = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = decode(&k.replace('+', " ")).ok_or_else(bad)?;
        let v = decode(&v.replace('+', " ")).ok_or_else(bad)?;
        q.insert(k, v);
    }
    Ok((segs, q))
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

/// Reads a JSON object body of at most [`MAX_BODY`] bytes.
pub fn json_body(req: &mut tiny_http::Request) -> ApiResult<serde_json::Map<String, Value>> {
    let mut buf = Vec::new();
    let read = req.as_reader().take(MAX_BODY as u64 + 1).read_to_end(&mut buf);
    if let Err(e) = read {
        return Err(ApiError::new(400, format!("cannot read the request body: {e}")));
    }
    if buf.len() > MAX_BODY {
        return Err(ApiError::new(413, format!("the request body is larger than {MAX_BODY} bytes")));
    }
    match serde_json::from_slice::<Value>(&buf) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::new(400, "the request body must be a JSON object")),
        Err(e) if buf.iter().all(u8::is_ascii_whitespace) => {
            Err(ApiError::new(400, format!("the request body is empty ({e}); send a JSON object")))
        }
        Err(e) => Err(ApiError::new(400, format!("the request body is not valid JSON: {e}"))),
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
}
