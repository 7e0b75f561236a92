//! `serve` answers only requests that name it in their `Host` (DNS rebinding): on loopback its
//! own names and `serve.allowed_hosts`; beyond loopback any, until `serve.allowed_hosts` lists
//! some. Checked before the token, on every route, /health and /openapi.json included. Requests
//! go over raw sockets: an HTTP client would tidy the very headers under test.

use crate::common::*;
use crate::serve::{root_with, serve, serve_on, Serve, DEADLINE, QUICK, TOKEN};
use serde_json::Value;
use std::io::{Read, Write};

struct Got {
    status: u16,
    content_type: String,
    body: String,
}

impl Got {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// `head` (the request line and headers, as written) and `body` on a fresh connection to `addr`.
fn raw(addr: &str, head: &str, body: &str) -> Got {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    let length = if body.is_empty() { String::new() } else { format!("Content-Length: {}\r\n", body.len()) };
    write!(c, "{head}\r\n{length}Connection: close\r\n\r\n{body}").unwrap();
    let mut reply = Vec::new();
    let _ = c.read_to_end(&mut reply);
    let text = String::from_utf8_lossy(&reply).to_string();
    let (top, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = top.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let content_type = top
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.trim()))
        .unwrap_or("")
        .to_string();
    Got { status, content_type, body: body.to_string() }
}

fn addr(s: &Serve) -> String {
    s.url.trim_start_matches("http://").to_string()
}

/// `method path` with `Host: host` (and the token), HTTP/1.1.
fn with_host(addr: &str, method: &str, path: &str, host: &str, body: &str) -> Got {
    raw(addr, &format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}"), body)
}

#[test]
fn a_loopback_server_answers_only_its_own_names_before_the_token() {
    let t = T::new();
    root_with(&t, QUICK, "serve: {allowed_hosts: [agents.example, \"*.corp.example:8700\"]}\n");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let a = addr(&s);
    let port = a.rsplit(':').next().unwrap().to_string();
    // Another site's name pointed at 127.0.0.1: refused on every route, with the token or
    // without, before the target or the body is looked at.
    for (method, path) in [("GET", "/health"), ("GET", "/openapi.json"), ("GET", "/runs"), ("GET", "/nowhere")] {
        for host in [format!("evil.example:{port}"), "evil.example".into(), format!("localhost.evil.example:{port}")] {
            let g = with_host(&a, method, path, &host, "");
            assert_eq!(
                (g.status, g.content_type.as_str()),
                (421, "application/json"),
                "{method} {path} {host}: {}",
                g.body
            );
            let v = g.json();
            assert_eq!(v["status"], 421);
            assert!(
                v["error"].as_str().unwrap().contains(&format!("`Host: {host}` is not a name of this server")),
                "{v}"
            );
            assert!(v["error"].as_str().unwrap().contains("127.0.0.1, localhost, [::1], agents.example"), "{v}");
            assert!(v["hint"].as_str().unwrap().contains("serve.allowed_hosts"), "{v}");
        }
        let g = raw(&a, &format!("{method} {path} HTTP/1.1\r\nHost: evil.example"), "");
        assert_eq!(g.status, 421, "{method} {path} without a token: {}", g.body);
    }
    let g = with_host(&a, "POST", "/runs", "evil.example", r#"{"goal": "g"}"#);
    assert_eq!(g.status, 421, "{}", g.body);
    assert_eq!(s.get("/runs").json()["runs"].as_array().unwrap().len(), 0, "a refused POST started nothing");
    // Its own names, on any port (a forwarded one too), and the names listed.
    for host in [
        a.clone(),
        format!("localhost:{port}"),
        "LocalHost.".into(),
        format!("[::1]:{port}"),
        "127.0.0.1:9".into(),
        "agents.example".into(),
        "Agents.Example:1234".into(),
        "x.corp.example:8700".into(),
    ] {
        let g = with_host(&a, "GET", "/health", &host, "");
        assert_eq!(g.status, 200, "{host}: {}", g.body);
        assert_eq!(with_host(&a, "GET", "/runs", &host, "").status, 200, "{host}");
    }
    // A listed name on another port than the one listed is not one.
    assert_eq!(with_host(&a, "GET", "/health", "x.corp.example:8701", "").status, 421);
    assert_eq!(with_host(&a, "GET", "/health", "corp.example:8700", "").status, 421);
    // HTTP/1.1 without Host, with two, or with one that is no host: 400. HTTP/1.0 without one
    // is no browser's: it goes on.
    for head in [
        "GET /health HTTP/1.1".to_string(),
        format!("GET /health HTTP/1.1\r\nHost: {a}\r\nHost: {a}"),
        "GET /health HTTP/1.1\r\nHost: a b".into(),
        "GET /health HTTP/1.1\r\nHost: localhost:http".into(),
    ] {
        let g = raw(&a, &head, "");
        assert_eq!((g.status, g.content_type.as_str()), (400, "application/json"), "{head:?}: {}", g.body);
        assert!(g.json()["error"].as_str().unwrap().contains("Host"), "{}", g.body);
    }
    assert_eq!(raw(&a, "GET /health HTTP/1.0", "").status, 200);
    assert_eq!(raw(&a, "GET /health HTTP/1.0\r\nHost: evil.example", "").status, 421);
    drop(s);
    // A name that is no host is refused at start, naming the key and the file.
    t.write("root/agentloop.yaml", "serve: {allowed_hosts: [\"agents example\"]}\n");
    t.cmd()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("AGENTLOOP_TOKEN", TOKEN)
        .args(["serve", "--root", "root", "--listen", "127.0.0.1:0"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "agentloop.yaml at key `serve.allowed_hosts`: `agents example` is not a host",
        ));
    // Names are trusted configuration's to add: an untrusted root's are refused.
    t.write("root/agentloop.yaml", "serve: {allowed_hosts: [agents.example]}\n");
    t.untrusted()
        .env("AGENTLOOP_TOKEN", TOKEN)
        .args(["serve", "--root", "root", "--listen", "127.0.0.1:0"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("agentloop.yaml sets `serve.allowed_hosts`"));
}

#[test]
fn beyond_loopback_any_host_goes_until_some_are_listed() {
    let t = T::new();
    root_with(&t, QUICK, "");
    let s = serve_on(&t, "0.0.0.0:0", &["--script", "script.yaml"], &[], Some(TOKEN));
    let a = format!("127.0.0.1:{}", addr(&s).rsplit(':').next().unwrap());
    for host in ["agents.example", "10.1.2.3:8700", "whatever.invalid"] {
        assert_eq!(with_host(&a, "GET", "/runs", host, "").status, 200, "{host}");
    }
    // Still one Host, and a host: the HTTP rule holds on any address.
    assert_eq!(raw(&a, "GET /health HTTP/1.1", "").status, 400);
    drop(s);
    root_with(&t, QUICK, "serve: {allowed_hosts: [agents.example]}\n");
    let s = serve_on(&t, "0.0.0.0:0", &["--script", "script.yaml"], &[], Some(TOKEN));
    let port = addr(&s).rsplit(':').next().unwrap().to_string();
    let a = format!("127.0.0.1:{port}");
    for host in ["agents.example".to_string(), format!("agents.example:{port}"), a.clone(), format!("0.0.0.0:{port}")] {
        assert_eq!(with_host(&a, "GET", "/runs", &host, "").status, 200, "{host}");
    }
    let g = with_host(&a, "GET", "/health", "other.example", "");
    assert_eq!(g.status, 421, "{}", g.body);
    assert!(g.json()["error"]
        .as_str()
        .unwrap()
        .contains("answers only 127.0.0.1, localhost, [::1], 0.0.0.0, agents.example"));
}
