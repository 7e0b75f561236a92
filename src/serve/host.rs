//! The `Host` a request names, checked before anything else (the token included).
//!
//! A page of any site can make a browser send requests to a server on this machine by pointing
//! its own name at 127.0.0.1 once the page has loaded (DNS rebinding): the browser then takes
//! the server for that site, and the requests carry the site's name as `Host`. So a server on a
//! loopback address answers only the names it has there — `127.0.0.1`, `localhost`, `[::1]` (any
//! port, so a forwarded port works) and the address it listens on — and those listed in
//! `serve.allowed_hosts`; any other `Host` is a 421 naming it. Beyond loopback any `Host` will
//! do until `serve.allowed_hosts` lists some, and then only those and the server's own. An
//! HTTP/1.1 request without `Host`, with two, or with one that is no host is a 400 (RFC 9112);
//! an HTTP/1.0 one without `Host` is no browser's and goes on.

use super::http::ApiError;
use agentloop_config::config::HostPort;
use agentloop_types::error::{Error, Result};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest `Host` an error quotes (the rest is cut).
const QUOTED: usize = 100;

/// The names a server answers to.
pub struct Hosts {
    /// The address it listens on.
    bound: SocketAddr,
    /// Any `Host` will do: beyond loopback with no `serve.allowed_hosts`.
    any: bool,
    /// `serve.allowed_hosts`, read.
    allowed: Vec<HostPort>,
}

impl Hosts {
    /// For a server listening on `bound` with `serve.allowed_hosts` set to `allowed`.
    pub fn new(bound: SocketAddr, allowed: &[String]) -> Result<Hosts> {
        let allowed = allowed
            .iter()
            .map(|h| {
                HostPort::parse(h, true).ok_or_else(|| {
                    Error::config(format!(
                        "invalid configuration at key `serve.allowed_hosts`: `{h}` is not a host name, `name:port`, `*.suffix` or `[IPv6]`"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Hosts { bound, any: !bound.ip().is_loopback() && allowed.is_empty(), allowed })
    }

    /// Whether a request may go on, by its `Host` headers and its HTTP version.
    pub fn check(&self, req: &tiny_http::Request) -> std::result::Result<(), ApiError> {
        let given: Vec<&str> =
            req.headers().iter().filter(|h| h.field.equiv("Host")).map(|h| h.value.as_str()).collect();
        let host = match given.as_slice() {
            [] if *req.http_version() >= tiny_http::HTTPVersion(1, 1) => {
                return Err(ApiError::new(400, "an HTTP/1.1 request must name the server in a `Host` header")
                    .hint(format!("send `Host: {}` (every HTTP/1.1 client does)", self.bound)));
            }
            [] => return Ok(()),
            [one] => *one,
            more => {
                return Err(ApiError::new(
                    400,
                    format!("the request has {} `Host` headers; it may have one", more.len()),
                )
                .hint(format!("send one `Host: {}`", self.bound)));
            }
        };
        let Some(parsed) = HostPort::parse(host, false) else {
            return Err(ApiError::new(
                400,
                format!("`Host: {}` is not a host name or address, with an optional port", quote(host)),
            )
            .hint(format!("send `Host: {}`", self.bound)));
        };
        if self.any || self.ours(&parsed) {
            return Ok(());
        }
        let mut names = vec!["127.0.0.1".to_string(), "localhost".into(), "[::1]".into()];
        let bound = match self.bound.ip() {
            IpAddr::V6(a) => format!("[{a}]"),
            a => a.to_string(),
        };
        if !names.contains(&bound) {
            names.push(bound);
        }
        names.extend(self.allowed.iter().map(|h| match h.port {
            Some(p) => format!("{}:{p}", h.name),
            None => h.name.clone(),
        }));
        Err(ApiError::new(
            421,
            format!(
                "`Host: {}` is not a name of this server, which answers only {} (a page whose site's name was pointed at this address, DNS rebinding, is refused this way)",
                quote(host),
                names.join(", ")
            ),
        )
        .hint(format!(
            "address the server by one of those names; if `{}` is yours, add it to `serve.allowed_hosts` in the root's agentloop.yaml or your own config and restart the server",
            quote(&parsed.name)
        )))
    }

    /// `127.0.0.1`, `localhost`, `[::1]`, the address listened on, or a name `serve.allowed_hosts` lists.
    fn ours(&self, h: &HostPort) -> bool {
        let ip = h.name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok();
        h.name == "localhost"
            || ip.is_some_and(|ip| {
                ip == IpAddr::V4(Ipv4Addr::LOCALHOST) || ip == IpAddr::V6(Ipv6Addr::LOCALHOST) || ip == self.bound.ip()
            })
            || self.allowed.iter().any(|a| a.covers(h))
    }
}

/// `s` cut to [`QUOTED`] characters.
fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTED) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}
