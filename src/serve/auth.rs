//! Bearer tokens and the per-token rate limit of `serve`.
//!
//! Tokens come from `AGENTLOOP_TOKEN` (one, or several separated by commas, each at least 16
//! characters) or are generated from the system's random source, printed at start and kept in
//! the user's state folder ([`token_path`], owner-only) so a restart keeps it (`--new-token`
//! replaces it). A request
//! presents its token as `Authorization: Bearer TOKEN`; a browser may instead present it once as
//! `?token=TOKEN` on a GET, which sets an HttpOnly, SameSite=Strict cookie, and the cookie is
//! then accepted on GET and HEAD only (so a page cannot make the browser POST with it). Tokens are
//! compared in constant time. Each token has its own bucket of requests (N per DUR).

use agentloop_types::error::{Error, Result};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const COOKIE: &str = "agentloop_token";

/// How long the sign-in cookie lasts, in seconds (30 days): with an expiry it is kept on disk,
/// so a new browser process stays signed in; a session cookie would not be.
pub const COOKIE_MAX_AGE: u64 = 30 * 24 * 60 * 60;

/// Requests allowed per token: `n` per `per`, refilled continuously.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub n: u32,
    pub per: Duration,
}

/// Parses `N/DUR` (e.g. `120/1m`); `0` turns the limit off.
pub fn parse_rate(s: &str) -> Result<Option<Rate>> {
    let s = s.trim();
    if s == "0" {
        return Ok(None);
    }
    let bad = || {
        Error::usage(format!("--rate-limit `{s}` is not N/DUR"))
            .with_hint("e.g. 120/1m (120 requests a minute per token), or 0 for no limit")
    };
    let (n, per) = s.split_once('/').ok_or_else(bad)?;
    let n: u32 = n.trim().parse().map_err(|_| bad())?;
    let per = agentloop_types::clock::parse_duration(per)
        .map_err(|e| Error::usage(format!("--rate-limit: {e}")).with_source(e))?;
    if n == 0 || per.is_zero() {
        return Err(bad());
    }
    Ok(Some(Rate { n, per }))
}

struct Bucket {
    level: f64,
    last: Instant,
}

pub struct Auth {
    tokens: Vec<String>,
    rate: Option<Rate>,
    buckets: Mutex<Vec<Bucket>>,
    /// The token was made here (and printed), not given by the operator.
    pub generated: bool,
    /// The value the panel's forms carry (made at start from the system's random source, shown
    /// only on pages a signed-in browser gets): a form posted with the cookie must hold it, so a
    /// page of another site cannot post one (see [`Auth::form_ok`]).
    csrf: String,
}

impl Auth {
    /// From `AGENTLOOP_TOKEN` (the value given), else a generated token.
    pub fn new(env: Option<String>, rate: Option<Rate>) -> Result<Auth> {
        let (tokens, generated) = match env.filter(|v| !v.trim().is_empty()) {
            Some(v) => {
                let tokens: Vec<String> = v.split(',').map(|t| t.trim().to_string()).collect();
                // Printable ASCII that can sit in a header and a cookie as it is.
                let bad = |c: char| !c.is_ascii_graphic() || matches!(c, ';' | ',' | '"' | '\\');
                if let Some(t) = tokens.iter().find(|t| t.len() < 16 || t.chars().any(bad)) {
                    return Err(Error::usage(format!(
                        "AGENTLOOP_TOKEN holds a token of {} characters; each needs at least 16, printable ASCII, no spaces, quotes, backslashes or semicolons",
                        t.chars().count()
                    ))
                    .with_hint("use a long random value, e.g. AGENTLOOP_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \\n')"));
                }
                (tokens, false)
            }
            None => (vec![generate()?], true),
        };
        let buckets = tokens
            .iter()
            .map(|_| Bucket { level: rate.map(|r| r.n as f64).unwrap_or(0.0), last: Instant::now() })
            .collect();
        Ok(Auth { tokens, rate, buckets: Mutex::new(buckets), generated, csrf: generate()? })
    }

    /// The one token `token` (a kept or generated one, printed at start).
    pub fn generated(token: String, rate: Option<Rate>) -> Result<Auth> {
        let level = rate.map(|r| r.n as f64).unwrap_or(0.0);
        Ok(Auth {
            tokens: vec![token],
            rate,
            buckets: Mutex::new(vec![Bucket { level, last: Instant::now() }]),
            generated: true,
            csrf: generate()?,
        })
    }

    /// The value the panel's forms carry.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Whether a form posted with the cookie may act: it holds this server's form value, and a
    /// browser's `Origin` (sent with every form post), when there is one, is this server's own
    /// address (`Host`).
    pub fn form_ok(&self, headers: &[tiny_http::Header], csrf: Option<&str>) -> bool {
        let header = |name: &'static str| headers.iter().find(|h| h.field.equiv(name)).map(|h| h.value.as_str());
        let same_origin = match (header("Origin"), header("Host")) {
            (None, _) => true,
            (Some(origin), Some(host)) => {
                origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) == Some(host)
            }
            (Some(_), None) => false,
        };
        same_origin && csrf.is_some_and(|c| ct_eq(c.as_bytes(), self.csrf.as_bytes()))
    }

    /// Registers every token for redaction (after the generated one is printed: what agentloop
    /// prints is redacted too): a served run that reads one — serve's token file, the
    /// environment of a process that has it — writes `[REDACTED]` in transcript.md and
    /// trace.jsonl, and sends the model nothing of it.
    pub fn register_secrets(&self) {
        for t in &self.tokens {
            agentloop_io::redact::register(t);
        }
    }

    /// The first token (the one printed when generated).
    pub fn first(&self) -> &str {
        &self.tokens[0]
    }

    /// The index of the token `presented`, if it is one.
    pub fn check(&self, presented: &str) -> Option<usize> {
        // Every token is compared, in time that depends only on the lengths.
        let mut found = None;
        for (i, t) in self.tokens.iter().enumerate() {
            if ct_eq(t.as_bytes(), presented.as_bytes()) {
                found = Some(i);
            }
        }
        found
    }

    /// Takes one request from the token's bucket, or says in how many seconds one is free.
    pub fn take(&self, token: usize) -> std::result::Result<(), u64> {
        let Some(rate) = self.rate else { return Ok(()) };
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let Some(b) = buckets.get_mut(token) else { return Ok(()) };
        let per_sec = rate.n as f64 / rate.per.as_secs_f64();
        let now = Instant::now();
        b.level = (b.level + now.duration_since(b.last).as_secs_f64() * per_sec).min(rate.n as f64);
        b.last = now;
        if b.level >= 1.0 {
            b.level -= 1.0;
            return Ok(());
        }
        Err(((1.0 - b.level) / per_sec).ceil().max(1.0) as u64)
    }
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// 24 bytes from the operating system's random source, as hex.
fn generate() -> Result<String> {
    use std::io::Read;
    let mut buf = [0u8; 24];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)).map_err(|e| {
        Error::failure("cannot generate a token from /dev/urandom")
            .with_hint("set AGENTLOOP_TOKEN to a long random value")
            .with_source(e)
    })?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Where a generated token is kept: `$XDG_STATE_HOME/agentloop/serve-token`, else
/// `~/.local/state/agentloop/serve-token`; None without either variable.
pub fn token_path() -> Option<camino::Utf8PathBuf> {
    agentloop_tools::held_secrets::serve_token_path()
}

/// The token to use without `AGENTLOOP_TOKEN`: the kept one, else (or with `rotate`) a new one,
/// kept (written atomically, readable by the owner only). Returns where it is kept; None when
/// there is no state folder, and the token lives as long as the server.
pub fn kept_token(rotate: bool) -> Result<(String, Option<camino::Utf8PathBuf>)> {
    let Some(path) = token_path() else { return Ok((generate()?, None)) };
    if !rotate {
        if let Some(text) = agentloop_io::fs::read_optional(&path)? {
            let t = text.trim();
            if t.len() < 16 || !t.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(Error::config(format!(
                    "{path} does not hold a serve token (at least 16 letters and digits)"
                ))
                .with_hint("run `agentloop serve --new-token` to replace it, or remove the file"));
            }
            return Ok((t.to_string(), Some(path)));
        }
    }
    let token = generate()?;
    if let Some(dir) = path.parent() {
        agentloop_tools::held_secrets::private_dir(dir)?;
    }
    agentloop_io::fs::write_private(&path, format!("{token}\n").as_bytes())?;
    Ok((token, Some(path)))
}

/// The token a browser's cookie holds (the sign-in's).
pub fn cookie(headers: &[tiny_http::Header]) -> Option<String> {
    let cookies = headers.iter().find(|h| h.field.equiv("Cookie"))?.value.as_str();
    cookies.split(';').filter_map(|c| c.trim().split_once('=')).find(|(k, _)| *k == COOKIE).map(|(_, v)| v.to_string())
}

/// The token a request presents: the bearer header; on GET and HEAD also the cookie or the
/// `token` query parameter. (A form posted with the cookie is let in by [`Auth::form_ok`].)
pub fn presented(headers: &[tiny_http::Header], safe_method: bool, query_token: Option<&str>) -> Option<String> {
    let header =
        |name: &'static str| headers.iter().find(|h| h.field.equiv(name)).map(|h| h.value.as_str().to_string());
    if let Some(v) = header("Authorization") {
        let v = v.trim();
        let (scheme, rest) = v.split_once(' ').unwrap_or((v, ""));
        return scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim().to_string());
    }
    if !safe_method {
        return None;
    }
    if let Some(t) = query_token {
        return Some(t.to_string());
    }
    cookie(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse() {
        assert_eq!(parse_rate("0").unwrap(), None);
        assert_eq!(parse_rate("120/1m").unwrap(), Some(Rate { n: 120, per: Duration::from_secs(60) }));
        assert!(parse_rate("x").is_err());
        assert!(parse_rate("0/1m").is_err());
        assert!(parse_rate("5/0s").is_err());
    }

    #[test]
    fn tokens_are_checked_and_limited() {
        let a = Auth::new(
            Some("aaaaaaaaaaaaaaaa,bbbbbbbbbbbbbbbb".into()),
            Some(Rate { n: 2, per: Duration::from_secs(3600) }),
        )
        .unwrap();
        assert_eq!(a.check("bbbbbbbbbbbbbbbb"), Some(1));
        assert_eq!(a.check("bbbbbbbbbbbbbbb"), None);
        assert_eq!(a.take(0), Ok(()));
        assert_eq!(a.take(0), Ok(()));
        assert!(a.take(0).unwrap_err() >= 1);
        // Each token has its own bucket.
        assert_eq!(a.take(1), Ok(()));
        assert!(Auth::new(Some("short".into()), None).is_err());
        assert!(Auth::new(Some("aaaaaaaaaaaaaaaa;b".into()), None).is_err());
        assert!(Auth::new(Some("aaaaaaaa aaaaaaaa".into()), None).is_err());
        let g = Auth::new(None, None).unwrap();
        assert!(g.generated && g.first().len() == 48);
    }
}
