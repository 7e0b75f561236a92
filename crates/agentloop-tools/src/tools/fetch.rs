//! The HTTP client of http_call and web_fetch (and `skills fetch`), behind a network policy.
//!
//! Policy, checked for the first URL and again for every redirect hop: the scheme must be
//! allowed; the host must not be denied — `tools.http.deny_hosts` matches the host as written
//! (any case, a final dot or not, `*.suffix`) and every address the host stands for against
//! the addresses the entries name (an IP in any spelling the resolver takes, such as `127.1` or
//! `2130706433`; a block such as `10.0.0.0/8`; a name, resolved at the check with the same
//! resolver); the host must be allowed when an allowlist is set; the port must be allowed; and
//! every address the host resolves to must be public unless `tools.http.allow_private` is set
//! (loopback, private, link-local, CGNAT, unique-local, unspecified, multicast and IPv4-mapped
//! forms of them are refused). Redirects are followed by hand, never by the HTTP client, so no
//! hop escapes the check, and the addresses are judged again where the client connects (DNS
//! rebinding). On a hop to another origin only a short list of harmless headers goes on; the
//! rest, credentials of any name, stay with the origin they were given for. A call's timeout
//! bounds it whole, redirects included, and never exceeds `tools.timeout`.

use super::hosts::{host_matches, is_private, normal_host, parse_ip, DenyList};
use agentloop_config::config::HttpToolConfig;
use serde_json::{Map, Value};
use std::io::Read;
use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;
use ureq::http::Uri;

pub struct Target {
    pub uri: Uri,
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

/// Parses and checks a URL against the policy, resolving the host when an address decides.
pub fn check_url(url: &str, p: &HttpToolConfig, deny: &DenyList) -> Result<Target, BadUrl> {
    judge_url(url, p, deny).map_err(|(problem, why)| BadUrl { problem, why })
}

/// A URL [`check_url`] will not fetch: which kind of problem, and the sentence saying it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadUrl {
    pub problem: UrlProblem,
    pub why: String,
}

impl std::fmt::Display for BadUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl std::error::Error for BadUrl {}

/// Why a URL cannot be fetched before anything is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlProblem {
    /// Not a URL with a scheme and a host, or one carrying credentials.
    Invalid,
    /// The policy refuses it: its scheme, host, port, or the addresses it stands for.
    Refused,
    /// Its host cannot be resolved (the name service failed or knows no such name).
    Unresolved,
}

/// [`check_url`], saying which kind of problem stopped it: a caller reporting to someone else
/// tells a refusal by policy from a host that could not be reached.
pub fn judge_url(url: &str, p: &HttpToolConfig, deny: &DenyList) -> Result<Target, (UrlProblem, String)> {
    use UrlProblem::{Invalid, Refused, Unresolved};
    let uri: Uri = url.trim().parse().map_err(|e| (Invalid, format!("`{url}` is not a valid URL: {e}")))?;
    let scheme = uri
        .scheme_str()
        .map(str::to_ascii_lowercase)
        .ok_or_else(|| (Invalid, format!("`{url}` has no scheme; use http:// or https://")))?;
    if !p.schemes.iter().any(|s| s.eq_ignore_ascii_case(&scheme)) {
        return Err((Refused, format!("scheme `{scheme}` is not allowed (allowed: {})", p.schemes.join(", "))));
    }
    let host = normal_host(uri.host().ok_or_else(|| (Invalid, format!("`{url}` has no host")))?);
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err((Invalid, format!("`{url}` carries credentials in the URL; pass them as headers")));
    }
    let port = uri.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
    if let Some(entry) = deny.name(&host) {
        return Err((Refused, format!("host `{host}` is denied by tools.http.deny_hosts (the entry `{entry}`)")));
    }
    if !p.allow_hosts.is_empty() && !p.allow_hosts.iter().any(|a| host_matches(&host, a)) {
        return Err((Refused, format!("host `{host}` is not in tools.http.allow_hosts")));
    }
    if !p.ports.is_empty() && !p.ports.contains(&port) {
        return Err((Refused, format!("port {port} is not in tools.http.ports")));
    }
    if deny.has_addresses() || !p.allow_private {
        // The resolver reads `127.1` and `2130706433` as 127.0.0.1, so the host is judged by
        // the addresses it stands for, never by its spelling.
        let addrs: Vec<IpAddr> = match parse_ip(&host) {
            Some(ip) => vec![ip],
            None => (host.as_str(), port)
                .to_socket_addrs()
                .map_err(|e| (Unresolved, format!("cannot resolve `{host}`: {e}")))?
                .map(|a| a.ip())
                .collect(),
        };
        if let Some(why) = addrs.iter().find_map(|ip| deny.address(*ip)) {
            return Err((Refused, format!("host `{host}` is denied by tools.http.deny_hosts: {why}")));
        }
        if let Some(ip) = addrs.iter().find(|ip| !p.allow_private && is_private(**ip)) {
            return Err((
                Refused,
                format!("host `{host}` resolves to {ip}, a loopback, private or link-local address; set tools.http.allow_private: true to allow it"),
            ));
        }
    }
    Ok(Target { uri, scheme, host, port })
}

/// Resolves a Location header against the URL it came from, as a browser does (WHATWG URL:
/// `?q`, `../`, `//host`, absolute URLs); a fragment is dropped, since it is never sent.
fn join(base: &Target, loc: &str) -> String {
    match url::Url::parse(&base.uri.to_string()).and_then(|b| b.join(loc.trim())) {
        Ok(mut u) => {
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => loc.to_string(),
    }
}

pub struct Fetched {
    pub status: u16,
    pub url: String,
    pub headers: Map<String, Value>,
    pub body: Vec<u8>,
    pub truncated: bool,
}

/// Resolves like the default resolver, then refuses denied addresses, and private ones unless
/// allowed: the addresses actually connected to are judged, not only those seen at the check.
#[derive(Debug)]
struct PinnedResolver {
    allow_private: bool,
    deny: DenyList,
}

impl ureq::unversioned::resolver::Resolver for PinnedResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let addrs = ureq::unversioned::resolver::DefaultResolver::default().resolve(uri, config, timeout)?;
        let refuse = |msg: String| Err(ureq::Error::Io(std::io::Error::new(std::io::ErrorKind::PermissionDenied, msg)));
        if let Some(why) = addrs.iter().find_map(|a| self.deny.address(a.ip())) {
            return refuse(format!(
                "refused: the host now resolves to an address tools.http.deny_hosts denies ({why})"
            ));
        }
        if !self.allow_private && addrs.iter().any(|a| is_private(a.ip())) {
            return refuse("refused: the host now resolves to a loopback, private or link-local address".into());
        }
        Ok(addrs)
    }
}

/// The headers a call set that go on to another origin after a redirect. Any other header
/// (credentials of whatever name: `Authorization`, `Cookie`, `X-Auth-Token`, `Private-Token`,
/// `X-Goog-Api-Key`, ...) stays with the origin it was given for. `Content-Type` goes on only
/// with the body it describes.
const CROSS_ORIGIN_HEADERS: &[&str] = &["accept", "accept-encoding", "accept-language", "cache-control", "user-agent"];

/// Whether a header the call set is sent on a hop to another origin.
fn crosses_origin(name: &str, body_kept: bool) -> bool {
    let name = name.trim().to_ascii_lowercase();
    CROSS_ORIGIN_HEADERS.contains(&name.as_str()) || (body_kept && name == "content-type")
}

/// Why a fetch failed: the message, whether it may be tried again, and whether the call's
/// timeout ran out (which the caller words by the limit that set it, not by the message).
#[derive(Debug, Clone)]
pub struct Failed {
    pub message: String,
    pub retry: bool,
    pub timed_out: bool,
}

impl Failed {
    fn new(message: impl Into<String>, retry: bool) -> Failed {
        Failed { message: message.into(), retry, timed_out: false }
    }
}

/// One request with manual, policy-checked redirects; `timeout` bounds the whole call, every
/// hop included.
pub fn fetch(
    p: &HttpToolConfig,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Option<&str>,
    timeout: Duration,
) -> Result<Fetched, Failed> {
    let started = std::time::Instant::now();
    let deny = DenyList::new(&p.deny_hosts);
    let mut url = url.to_string();
    let mut method = method.to_ascii_uppercase();
    let mut body = body.map(str::to_string);
    let mut origin: Option<(String, String, u16)> = None;
    for _hop in 0..=p.max_redirects {
        let target = check_url(&url, p, &deny).map_err(|e| Failed::new(e.why, false))?;
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            let message = format!("timed out after {} (before {url})", humantime::format_duration(timeout));
            return Err(Failed { message, retry: true, timed_out: true });
        }
        let agent = pinned_agent(p, &deny, left);
        let here = (target.scheme.clone(), target.host.clone(), target.port);
        let same_origin = origin.get_or_insert_with(|| here.clone()) == &here;
        let hop = Hop { method: &method, headers, body: body.as_deref(), same_origin };
        let resp = hop.send(&agent, &target, timeout)?;
        let status = resp.status().as_u16();
        if let Some(loc) = redirect_location(&resp, status) {
            url = join(&target, loc);
            if status == 303 || ((status == 301 || status == 302) && method == "POST") {
                method = "GET".into();
                body = None;
            }
            continue;
        }
        return read_response(resp, status, url, p.max_bytes);
    }
    Err(Failed::new(format!("too many redirects (more than {})", p.max_redirects), false))
}

/// An HTTP client for one hop: it follows no redirect, takes no status as an error, gives up
/// when the call's time `left` is spent, and connects only to addresses the policy allows.
fn pinned_agent(p: &HttpToolConfig, deny: &DenyList, left: Duration) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(left))
        .max_redirects(0)
        .http_status_as_error(false)
        .user_agent(p.user_agent.as_str())
        .build();
    // The policy is checked again on the addresses actually connected to, so a host that
    // resolves differently the second time (DNS rebinding) cannot reach a refused address.
    ureq::Agent::with_parts(
        config,
        ureq::unversioned::transport::DefaultConnector::new(),
        PinnedResolver { allow_private: p.allow_private, deny: deny.clone() },
    )
}

/// One hop's request: the method, the call's headers, the body, and whether the hop goes to
/// the origin the call was made to.
struct Hop<'a> {
    method: &'a str,
    headers: &'a [(String, String)],
    body: Option<&'a str>,
    same_origin: bool,
}

impl Hop<'_> {
    /// Sends the request to `target`: the body only with a method that carries one, and on
    /// another origin only the headers that may cross ([`crosses_origin`]).
    fn send(
        &self,
        agent: &ureq::Agent,
        target: &Target,
        timeout: Duration,
    ) -> Result<ureq::http::Response<ureq::Body>, Failed> {
        let with_body = matches!(self.method, "POST" | "PUT" | "PATCH" | "DELETE") && self.body.is_some();
        let mut req = ureq::http::Request::builder().method(self.method).uri(target.uri.clone());
        for (k, v) in self.headers {
            if self.same_origin || crosses_origin(k, with_body) {
                req = req.header(k.as_str(), v.as_str());
            }
        }
        match (self.body, with_body) {
            (Some(b), true) => req
                .body(b.to_string())
                .map_err(|e| Failed::new(e.to_string(), false))
                .and_then(|r| agent.run(r).map_err(|e| classify(e, timeout))),
            _ => req
                .body(())
                .map_err(|e| Failed::new(e.to_string(), false))
                .and_then(|r| agent.run(r).map_err(|e| classify(e, timeout))),
        }
    }
}

/// Where a redirect answer (3xx but 304, with a readable `Location`) sends the call next.
fn redirect_location(resp: &ureq::http::Response<ureq::Body>, status: u16) -> Option<&str> {
    if !(300..400).contains(&status) || status == 304 {
        return None;
    }
    resp.headers().get("location").and_then(|v| v.to_str().ok())
}

/// The final answer from `url`: its status, headers, and at most `max_bytes` of its body
/// (marked truncated when there was more).
fn read_response(
    resp: ureq::http::Response<ureq::Body>,
    status: u16,
    url: String,
    max_bytes: u64,
) -> Result<Fetched, Failed> {
    let mut hmap = Map::new();
    for (k, v) in resp.headers() {
        hmap.insert(k.as_str().to_string(), Value::String(v.to_str().unwrap_or("").to_string()));
    }
    let mut buf = Vec::new();
    let mut reader = resp.into_body().into_reader().take(max_bytes + 1);
    reader.read_to_end(&mut buf).map_err(|e| Failed {
        timed_out: e.kind() == std::io::ErrorKind::TimedOut,
        message: format!("reading the response from {url} failed: {e}"),
        retry: true,
    })?;
    let truncated = buf.len() as u64 > max_bytes;
    buf.truncate(max_bytes as usize);
    Ok(Fetched { status, url, headers: hmap, body: buf, truncated })
}

fn classify(e: ureq::Error, timeout: Duration) -> Failed {
    let refused = matches!(&e, ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied);
    let retry = !refused
        && matches!(
            e,
            ureq::Error::Timeout(_) | ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound
        );
    let timed_out = matches!(e, ureq::Error::Timeout(_));
    let message = match &e {
        ureq::Error::Timeout(_) => format!("timed out after {} ({e})", humantime::format_duration(timeout)),
        _ => e.to_string(),
    };
    Failed { message, retry, timed_out }
}

#[cfg(test)]
mod join_tests {
    use super::*;

    fn target(u: &str) -> Target {
        let uri: Uri = u.parse().unwrap();
        Target { scheme: uri.scheme_str().unwrap().into(), host: uri.host().unwrap().into(), port: 80, uri }
    }

    #[test]
    fn redirects_join_as_a_browser_would() {
        let base = target("http://a.example/dir/page?x=1");
        for (loc, want) in [
            ("?q=2", "http://a.example/dir/page?q=2"),
            ("../up", "http://a.example/up"),
            ("next#frag", "http://a.example/dir/next"),
            ("/root", "http://a.example/root"),
            ("//b.example/x", "http://b.example/x"),
            ("https://c.example", "https://c.example/"),
            ("./same", "http://a.example/dir/same"),
        ] {
            assert_eq!(join(&base, loc), want, "{loc}");
        }
    }

    #[test]
    fn private_addresses_are_classified() {
        let private = [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ];
        for ip in private {
            assert!(is_private(ip.parse().unwrap()), "{ip} is private");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip} is public");
        }
    }
}

#[cfg(test)]
mod header_tests {
    use super::*;

    #[test]
    fn only_safe_headers_cross_origins() {
        for h in ["Accept", "accept-language", "User-Agent", "Cache-Control", "Accept-Encoding"] {
            assert!(crosses_origin(h, false), "{h}");
        }
        for h in ["Authorization", "Cookie", "X-Auth-Token", "Private-Token", "X-Goog-Api-Key", "X-Anything"] {
            assert!(!crosses_origin(h, true), "{h}");
        }
        assert!(crosses_origin("Content-Type", true) && !crosses_origin("Content-Type", false));
    }
}
