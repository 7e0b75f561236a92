//! http_call and web_fetch, behind a network policy.
//!
//! Policy, checked for the first URL and again for every redirect hop: the scheme must be
//! allowed, the host must not be denied (and must be allowed when an allowlist is set), the
//! port must be allowed, and every address the host resolves to must be public unless
//! `tools.http.allow_private` is set (loopback, private, link-local, CGNAT, unique-local,
//! unspecified, multicast and IPv4-mapped forms of them are refused). Redirects are followed by
//! hand, never by the HTTP client, so no hop escapes the check.

use super::{ToolEnv, ToolResult};
use crate::config::HttpToolConfig;
use serde_json::{json, Map, Value};
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};
use std::time::Duration;
use ureq::http::Uri;

pub struct Target {
    pub uri: Uri,
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (64..128).contains(&o[1]))
        || (o[0] == 198 && (o[1] == 18 || o[1] == 19))
        || o[0] >= 240
}

pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private_v4(v4);
            }
            let s = v6.segments();
            // IPv4-compatible (::a.b.c.d, deprecated but routed by some stacks) and 6to4
            // (2002:AABB:CCDD::/48 embeds a.b.c.d) carry an IPv4 address: judge that one.
            if s[..6].iter().all(|x| *x == 0) && (s[6] != 0 || s[7] > 1) {
                let [a, b] = s[6].to_be_bytes();
                let [c, d] = s[7].to_be_bytes();
                return is_private_v4(Ipv4Addr::new(a, b, c, d));
            }
            if s[0] == 0x2002 {
                let [a, b] = s[1].to_be_bytes();
                let [c, d] = s[2].to_be_bytes();
                if is_private_v4(Ipv4Addr::new(a, b, c, d)) {
                    return true;
                }
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || (s[0] == 0x64 && s[1] == 0xff9b)
                || (s[0] == 0x2001 && s[1] == 0xdb8)
                || v6 == Ipv6Addr::from([0, 0, 0, 0, 0, 0, 0, 1])
        }
    }
}

fn host_matches(host: &str, pattern: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.ends_with(&format!(".{suffix}")) || host == suffix,
        None => host == pattern,
    }
}

/// Parses and checks a URL against the policy, resolving the host.
pub fn check_url(url: &str, p: &HttpToolConfig) -> Result<Target, String> {
    let uri: Uri = url.trim().parse().map_err(|e| format!("`{url}` is not a valid URL: {e}"))?;
    let scheme = uri
        .scheme_str()
        .map(str::to_ascii_lowercase)
        .ok_or_else(|| format!("`{url}` has no scheme; use http:// or https://"))?;
    if !p.schemes.iter().any(|s| s.eq_ignore_ascii_case(&scheme)) {
        return Err(format!("scheme `{scheme}` is not allowed (allowed: {})", p.schemes.join(", ")));
    }
    let host = uri
        .host()
        .ok_or_else(|| format!("`{url}` has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(format!("`{url}` carries credentials in the URL; pass them as headers"));
    }
    let port = uri.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
    if p.deny_hosts.iter().any(|d| host_matches(&host, d)) {
        return Err(format!("host `{host}` is denied by tools.http.deny_hosts"));
    }
    if !p.allow_hosts.is_empty() && !p.allow_hosts.iter().any(|a| host_matches(&host, a)) {
        return Err(format!("host `{host}` is not in tools.http.allow_hosts"));
    }
    if !p.ports.is_empty() && !p.ports.contains(&port) {
        return Err(format!("port {port} is not in tools.http.ports"));
    }
    if !p.allow_private {
        let addrs: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => (host.as_str(), port)
                .to_socket_addrs()
                .map_err(|e| format!("cannot resolve `{host}`: {e}"))?
                .map(|a| a.ip())
                .collect(),
        };
        if let Some(ip) = addrs.iter().find(|ip| is_private(**ip)) {
            return Err(format!(
                "host `{host}` resolves to {ip}, a loopback, private or link-local address; set tools.http.allow_private: true to allow it"
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

/// Resolves like the default resolver, then refuses private addresses unless allowed.
#[derive(Debug)]
struct PinnedResolver {
    allow_private: bool,
}

impl ureq::unversioned::resolver::Resolver for PinnedResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let addrs = ureq::unversioned::resolver::DefaultResolver::default().resolve(uri, config, timeout)?;
        if !self.allow_private && addrs.iter().any(|a| is_private(a.ip())) {
            return Err(ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "refused: the host now resolves to a loopback, private or link-local address",
            )));
        }
        Ok(addrs)
    }
}

/// One request with manual, policy-checked redirects.
pub fn fetch(
    p: &HttpToolConfig,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Option<&str>,
    timeout: Duration,
) -> Result<Fetched, (String, bool)> {
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .max_redirects(0)
        .http_status_as_error(false)
        .user_agent(p.user_agent.as_str())
        .build();
    // The policy is checked again on the addresses actually connected to, so a host that
    // resolves differently the second time (DNS rebinding) cannot reach a private address.
    let agent = ureq::Agent::with_parts(
        config,
        ureq::unversioned::transport::DefaultConnector::new(),
        PinnedResolver { allow_private: p.allow_private },
    );
    let mut url = url.to_string();
    let mut method = method.to_ascii_uppercase();
    let mut body = body.map(str::to_string);
    let mut origin: Option<(String, String, u16)> = None;
    for _hop in 0..=p.max_redirects {
        let target = check_url(&url, p).map_err(|e| (e, false))?;
        let here = (target.scheme.clone(), target.host.clone(), target.port);
        // Credentials go to the origin they were given for, never to another after a redirect.
        let same_origin = origin.get_or_insert_with(|| here.clone()) == &here;
        let mut req = ureq::http::Request::builder().method(method.as_str()).uri(target.uri.clone());
        for (k, v) in headers {
            let secret = ["authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"]
                .contains(&k.to_ascii_lowercase().as_str());
            if same_origin || !secret {
                req = req.header(k.as_str(), v.as_str());
            }
        }
        let sent = match (&body, method.as_str()) {
            (Some(b), "POST" | "PUT" | "PATCH" | "DELETE") => {
                req.body(b.clone()).map_err(|e| (e.to_string(), false)).and_then(|r| agent.run(r).map_err(classify))
            }
            _ => req.body(()).map_err(|e| (e.to_string(), false)).and_then(|r| agent.run(r).map_err(classify)),
        };
        let resp = sent?;
        let status = resp.status().as_u16();
        if (300..400).contains(&status) && status != 304 {
            if let Some(loc) = resp.headers().get("location").and_then(|v| v.to_str().ok()) {
                url = join(&target, loc);
                if status == 303 || ((status == 301 || status == 302) && method == "POST") {
                    method = "GET".into();
                    body = None;
                }
                continue;
            }
        }
        let mut hmap = Map::new();
        for (k, v) in resp.headers() {
            hmap.insert(k.as_str().to_string(), Value::String(v.to_str().unwrap_or("").to_string()));
        }
        let mut buf = Vec::new();
        let mut reader = resp.into_body().into_reader().take(p.max_bytes + 1);
        reader.read_to_end(&mut buf).map_err(|e| (format!("reading the response from {url} failed: {e}"), true))?;
        let truncated = buf.len() as u64 > p.max_bytes;
        buf.truncate(p.max_bytes as usize);
        return Ok(Fetched { status, url, headers: hmap, body: buf, truncated });
    }
    Err((format!("too many redirects (more than {})", p.max_redirects), false))
}

fn classify(e: ureq::Error) -> (String, bool) {
    let refused = matches!(&e, ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied);
    let retry = !refused
        && matches!(
            e,
            ureq::Error::Timeout(_) | ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound
        );
    let msg = match &e {
        ureq::Error::Timeout(_) => format!("timed out ({e})"),
        _ => e.to_string(),
    };
    (msg, retry)
}

pub fn http_call(env: &ToolEnv, args: &Value) -> ToolResult {
    let p = &env.config.tools.http;
    let method = args["method"].as_str().unwrap_or("GET");
    let url = args["url"].as_str().unwrap_or_default();
    let headers: Vec<(String, String)> = args
        .get("headers")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default();
    let timeout = args
        .get("timeout_seconds")
        .and_then(Value::as_u64)
        .map(Duration::from_secs)
        .unwrap_or(env.config.tools.timeout.0);
    match fetch(p, method, url, &headers, args.get("body").and_then(Value::as_str), timeout) {
        Err((e, retry)) => ToolResult::err(e, retry),
        Ok(f) => {
            let body = String::from_utf8_lossy(&f.body).into_owned();
            let out =
                json!({"status": f.status, "url": f.url, "headers": f.headers, "body": body, "truncated": f.truncated});
            let text = serde_json::to_string_pretty(&out).unwrap_or_default();
            let meta = json!({"status_code": f.status, "url": f.url});
            if f.status >= 400 {
                let mut r =
                    ToolResult::err(format!("HTTP {} from {}", f.status, f.url), f.status == 429 || f.status >= 500);
                r.output = text;
                r.metadata = meta;
                r
            } else {
                ToolResult::ok(text, meta)
            }
        }
    }
}

pub fn web_fetch(env: &ToolEnv, args: &Value) -> ToolResult {
    let p = &env.config.tools.http;
    let url = args["url"].as_str().unwrap_or_default();
    let mode = args.get("extract_mode").and_then(Value::as_str).unwrap_or("markdown");
    let max = args.get("max_length").and_then(Value::as_u64).unwrap_or(15_000) as usize;
    let headers =
        vec![("accept".to_string(), "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5".to_string())];
    let f = match fetch(p, "GET", url, &headers, None, env.config.tools.timeout.0) {
        Err((e, retry)) => return ToolResult::err(e, retry),
        Ok(f) => f,
    };
    if f.status >= 400 {
        return ToolResult::err(format!("HTTP {} from {}", f.status, f.url), f.status == 429 || f.status >= 500);
    }
    let ctype = f.headers.get("content-type").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    let raw = String::from_utf8_lossy(&f.body).into_owned();
    let is_html = ctype.contains("html") || (ctype.is_empty() && raw.trim_start().starts_with('<'));
    let title = if is_html { super::html::title(&raw) } else { None };
    let content = match (mode, is_html) {
        ("html", _) | (_, false) => raw,
        ("text", true) => super::html::to_text(&raw),
        _ => super::html::to_markdown(&raw),
    };
    let total = content.chars().count();
    let mut content: String = content.chars().take(max).collect();
    // Say what was left out: the model cannot tell a short page from a cut one.
    if total > max {
        content.push_str(&format!(
            "\n\n[page cut at {max} of {total} characters (max_length); fetch again with a larger max_length for the rest]"
        ));
    } else if f.truncated {
        content.push_str(&format!(
            "\n\n[the response was cut at tools.http.max_bytes ({} bytes); the page goes on]",
            p.max_bytes
        ));
    }
    ToolResult::ok(
        content,
        json!({"url": f.url, "status_code": f.status, "content_type": ctype, "title": title, "length": total, "truncated": total > max || f.truncated}),
    )
}

#[cfg(test)]
mod private_tests {
    use super::is_private;

    #[test]
    fn embedded_and_site_local_ipv6_forms_are_private() {
        for a in [
            "::127.0.0.1",
            "::ffff:10.0.0.1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "fec0::1",
            "fe80::1",
            "::1",
            "fc00::1",
        ] {
            assert!(is_private(a.parse().unwrap()), "{a}");
        }
        for a in ["2606:4700::1111", "2002:0808:0808::1", "8.8.8.8"] {
            assert!(!is_private(a.parse().unwrap()), "{a}");
        }
    }
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
