//! Network trust boundaries: `tools.http.deny_hosts` judged by address (every spelling and
//! every name of a denied address), headers that do not follow a redirect to another origin,
//! http_call's timeout capped at `tools.timeout`, and `serve` against slow request bodies and
//! symbolic links in its runs.

use crate::common::*;
use crate::tools::call;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn port(url: &str) -> &str {
    url.rsplit(':').next().unwrap()
}

fn net_config(t: &T, http: &str) {
    t.write("ws/agentloop.yaml", &format!("tools:\n  http:\n    allow_private: true\n{http}"));
}

fn refused_by_deny(t: &T, url: &str) {
    let (code, v) = call(t, "http_call", json!({"method": "GET", "url": url}));
    assert_eq!(code, Some(6), "{url}: {v}");
    let e = v["error"].as_str().unwrap_or_default();
    assert!(e.contains("tools.http.deny_hosts"), "{url}: {v}");
}

#[test]
fn deny_hosts_refuse_every_spelling_and_name_of_a_denied_address() {
    let t = T::new();
    let s = Server::start(vec![Reply::text(200, "text/plain", "reached")]).expect_calls(0);
    let p = port(&s.url).to_string();
    net_config(&t, "    deny_hosts: [\"127.0.0.1\"]\n");
    for host in [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f.1",
        "0177.0.0.1",
        "0x7f000001",
        "127.0.0.1.",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "localhost",
        "LOCALHOST.",
    ] {
        refused_by_deny(&t, &format!("http://{host}:{p}/"));
    }
    // The unspecified address connects to this machine: it is judged as the loopback address.
    net_config(&t, "    deny_hosts: [\"127.0.0.1\", \"::1\"]\n");
    for host in ["0.0.0.0", "0", "[::]", "[::ffff:0.0.0.0]"] {
        refused_by_deny(&t, &format!("http://{host}:{p}/"));
    }
    net_config(&t, "    deny_hosts: [\"127.0.0.1\"]\n");
    // The error says which address and which entry.
    let (_, v) = call(&t, "web_fetch", json!({"url": format!("http://2130706433:{p}/")}));
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("127.0.0.1") && e.contains("`127.0.0.1`"), "{e}");
}

#[test]
fn deny_entries_may_be_names_blocks_or_other_spellings() {
    let t = T::new();
    let s = Server::start(vec![Reply::text(200, "text/plain", "reached")]).expect_calls(1);
    let p = port(&s.url).to_string();
    // A denied name denies the addresses it resolves to; a block denies its addresses; an
    // entry in another spelling denies the address it spells.
    for deny in ["LocalHost.", "127.0.0.0/8", "2130706433", "::ffff:127.0.0.1"] {
        net_config(&t, &format!("    deny_hosts: [\"{deny}\"]\n"));
        refused_by_deny(&t, &format!("http://127.0.0.1:{p}/"));
    }
    // A block that does not hold the address leaves it alone.
    net_config(&t, "    deny_hosts: [\"10.0.0.0/8\", \"*.internal\"]\n");
    let (code, v) = call(&t, "http_call", json!({"method": "GET", "url": format!("http://127.0.0.1:{p}/")}));
    assert_eq!(code, Some(0), "{v}");
}

#[test]
fn deny_hosts_are_checked_again_at_every_redirect_hop() {
    let t = T::new();
    // 2130706434 is 127.0.0.2: the hop is refused before anything connects to it.
    let a = Server::start(vec![Reply::text(302, "text/plain", "").header("location", "http://2130706434:9/next")]);
    net_config(&t, "    deny_hosts: [\"127.0.0.2\"]\n");
    let (code, v) = call(&t, "http_call", json!({"method": "GET", "url": format!("{}/start", a.url)}));
    assert_eq!(code, Some(6), "{v}");
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("tools.http.deny_hosts") && e.contains("127.0.0.2"), "{e}");
    assert_eq!(a.count(), 1);
}

#[test]
fn a_redirect_to_another_origin_carries_only_safe_headers() {
    let t = T::new();
    let b = Server::start(vec![Reply::text(200, "text/plain", "arrived")]);
    let to = format!("{}/landing", b.url);
    let a = Server::start_with(move |_, _| Reply::text(307, "text/plain", "").header("location", &to));
    net_config(&t, "");
    let headers = json!({
        "Authorization": "Bearer a-secret", "Cookie": "session=a-secret", "X-Auth-Token": "a-secret",
        "Private-Token": "a-secret", "X-Goog-Api-Key": "a-secret", "X-Custom": "kept-home",
        "Accept": "application/json", "Accept-Language": "en", "Content-Type": "application/json",
    });
    let (code, v) = call(
        &t,
        "http_call",
        json!({"method": "POST", "url": format!("{}/start", a.url), "headers": headers, "body": "{\"q\": 1}"}),
    );
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["output"].as_str().map(|o| o.contains("arrived")), Some(true), "{v}");
    // The origin the headers were given for gets them all.
    let home = a.request(0);
    for h in ["authorization", "cookie", "x-auth-token", "private-token", "x-goog-api-key", "x-custom"] {
        assert!(home.header(h).is_some(), "{h} reaches the first origin");
    }
    // Another origin (another port) gets only the safe ones, and the body with its type (307).
    let there = b.request(0);
    for h in ["authorization", "cookie", "x-auth-token", "private-token", "x-goog-api-key", "x-custom"] {
        assert_eq!(there.header(h), None, "{h} must not follow the redirect: {:?}", there.headers);
    }
    assert_eq!(there.header("accept"), Some("application/json"));
    assert_eq!(there.header("accept-language"), Some("en"));
    assert_eq!((there.method.as_str(), there.body.as_str()), ("POST", "{\"q\": 1}"));
    assert_eq!(there.header("content-type"), Some("application/json"));
}

#[test]
fn http_call_timeout_is_capped_at_tools_timeout() {
    let t = T::new();
    let s = Server::start_with(|_, _| {
        std::thread::sleep(Duration::from_secs(3));
        Reply::text(200, "text/plain", "late")
    });
    t.write("ws/agentloop.yaml", "tools:\n  timeout: 1s\n  http:\n    allow_private: true\n");
    let started = Instant::now();
    let (code, v) =
        call(&t, "http_call", json!({"method": "GET", "url": format!("{}/slow", s.url), "timeout_seconds": 30}));
    let took = started.elapsed();
    assert_eq!(code, Some(6), "{v}");
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("timed out") && e.contains("stopped at tools.timeout (1s)"), "{e}");
    assert!(took < Duration::from_millis(2500), "the call took {took:?}");
    // The schema says so.
    let out = t.al(&["tools", "list", "--json"]).output().unwrap();
    let tools: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let http = tools.iter().find(|t| t["name"] == "http_call").unwrap();
    let d = http["parameters"]["properties"]["timeout_seconds"]["description"].as_str().unwrap();
    assert!(d.contains("at most tools.timeout (1s)"), "{d}");
}

const TOKEN: &str = "test-token-0123456789abcdef";

/// A running `agentloop serve` on 127.0.0.1 (killed when dropped).
struct Serve {
    child: Child,
    addr: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(t: &T) -> Serve {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("AGENTLOOP_NOW", NOW)
        .env("AGENTLOOP_TOKEN", TOKEN)
        .current_dir(t.root())
        .args(["-v", "serve", "--root", "root", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(t.path("serve.err")).unwrap())
        .spawn()
        .expect("start serve");
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    let addr = loop {
        let line = lines.next().expect("serve printed its address").unwrap();
        if let Some(u) = line.strip_prefix("listening on http://") {
            break u.to_string();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Serve { child, addr }
}

/// One request on a fresh connection; the status and body, or None when no answer came
/// within `wait`.
fn ask(addr: &str, method: &str, path: &str, token: Option<&str>, wait: Duration) -> Option<(u16, String)> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(wait)).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(c, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}

/// A POST that announces a large body, then sends it a byte at a time until `stop`. Returns
/// the connection (to read its answer from).
fn trickle(addr: &str, token: Option<&str>, stop: Arc<AtomicBool>) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        c,
        "POST /runs HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{"
    )
    .unwrap();
    let mut w = c.try_clone().unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            if w.write_all(b" ").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    c
}

#[test]
fn slow_request_bodies_do_not_hold_the_server() {
    let t = T::new();
    let s = serve(&t);
    let stop = Arc::new(AtomicBool::new(false));
    // More slow clients than the server has threads answering requests. They come one after
    // another: tiny_http's connection pool may leave one of a burst of connections waiting for
    // a thread until an earlier connection ends.
    let mut slow = Vec::new();
    for _ in 0..12 {
        slow.push(trickle(&s.addr, None, stop.clone()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut signed = trickle(&s.addr, Some(TOKEN), stop.clone());
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    // Others are still answered at once.
    let health = ask(&s.addr, "GET", "/health", None, Duration::from_secs(5));
    assert_eq!(health.map(|h| h.0), Some(200), "GET /health while slow bodies trickle");
    let runs = ask(&s.addr, "GET", "/runs", Some(TOKEN), Duration::from_secs(5));
    assert_eq!(runs.map(|r| r.0), Some(200), "GET /runs while slow bodies trickle");
    // A signed-in request whose body never ends is cut off at the body deadline (10 s).
    signed.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = [0u8; 12];
    signed.read_exact(&mut head).unwrap_or_else(|e| panic!("{e}: {}", t.read("serve.err")));
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    assert_eq!(&head, b"HTTP/1.1 408", "{}", String::from_utf8_lossy(&head));
    assert!(took >= Duration::from_secs(9) && took < Duration::from_secs(25), "the 408 came after {took:?}");
}

/// A workspace made by `agentloop init` at `dir` (relative to the test folder); its run id.
fn init_run(t: &T, dir: &str) -> String {
    t.cmd().args(["init", dir, "--goal", "Collect the figures"]).assert().success();
    t.json(&format!("{dir}/state.json"))["run_id"].as_str().unwrap().to_string()
}

#[test]
fn serve_follows_no_symbolic_link_in_its_runs() {
    use std::os::unix::fs::symlink;
    let t = T::new();
    t.write("secret.txt", "TOP SECRET\n");
    t.write("outside/s.txt", "TOP SECRET\n");
    // A run folder that is a link to a workspace elsewhere.
    let linked = init_run(&t, "elsewhere");
    // Its own run id (the clock is fixed, so both would get the same one).
    let other = "01KLINKED00000000000000000";
    let state = t.read("elsewhere/state.json").replace(&linked, other);
    t.write("elsewhere/state.json", &state);
    let linked = other.to_string();
    t.write("elsewhere/artifacts/secret.txt", "TOP SECRET\n");
    std::fs::create_dir_all(t.path("root/runs")).unwrap();
    symlink(t.path("elsewhere"), t.path("root/runs/LINKED")).unwrap();
    // A real run folder holding links.
    let real = init_run(&t, "root/runs/REAL");
    t.write("root/runs/REAL/artifacts/ok.txt", "fine\n");
    symlink(t.path("secret.txt"), t.path("root/runs/REAL/artifacts/out.txt")).unwrap();
    symlink("../state.json", t.path("root/runs/REAL/artifacts/alias.json")).unwrap();
    symlink(t.path("outside"), t.path("root/runs/REAL/artifacts/sub")).unwrap();
    std::fs::remove_file(t.path("root/runs/REAL/trace.jsonl")).ok();
    symlink(t.path("secret.txt"), t.path("root/runs/REAL/trace.jsonl")).unwrap();
    let s = serve(&t);
    let get = |path: &str| ask(&s.addr, "GET", path, Some(TOKEN), Duration::from_secs(30)).expect(path);
    let (status, body) = get("/runs/REAL/files/artifacts/ok.txt");
    assert_eq!((status, body.as_str()), (200, "fine\n"));
    for path in ["/runs/LINKED/files/artifacts/secret.txt", "/runs/LINKED/files/state.json", "/runs/LINKED"] {
        let (status, body) = get(path);
        assert_eq!(status, 403, "{path}: {body}");
        assert!(!body.contains("TOP SECRET"), "{path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        assert!(v["error"].as_str().unwrap().contains("symbolic link"), "{path}: {v}");
    }
    for path in [
        "/runs/REAL/files/artifacts/out.txt",
        "/runs/REAL/files/artifacts/alias.json",
        "/runs/REAL/files/artifacts/sub/s.txt",
        "/runs/REAL/files/trace.jsonl",
        "/runs/REAL/trace",
    ] {
        let (status, body) = get(path);
        assert_eq!(status, 403, "{path}: {body}");
        assert!(!body.contains("TOP SECRET") && !body.contains("run_id"), "{path}: {body}");
    }
    // Listed: the real run, not the linked one.
    let (status, list) = get("/runs");
    assert_eq!(status, 200, "{list}");
    assert!(list.contains(&real) && !list.contains(&linked), "{list}");
}
