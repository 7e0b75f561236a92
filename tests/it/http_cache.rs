//! The per-user HTTP cache of `web_fetch` and `http_call` GETs, against a local server that
//! counts requests: an unchanged feed revalidated with a conditional request and answered from
//! the cache (304), a fresh answer served with no request, the floor for sources that send no
//! headers, nothing credentialed stored (by header, by URL, by a known secret in the answer),
//! `off`, owner-only files, and the trace's record.

use crate::common::*;
use crate::tools::call;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;

/// A server whose paths answer with the caching headers each case needs.
fn server() -> Server {
    Server::start_with(|_, r| {
        let path = r.url.split('?').next().unwrap_or("").to_string();
        match path.as_str() {
            // Revalidate every time; unchanged while the ETag matches.
            "/feed" if r.header("if-none-match") == Some("\"v1\"") => {
                Reply::text(304, "text/plain", "").header("ETag", "\"v1\"").header("Cache-Control", "no-cache")
            }
            "/feed" => Reply::text(200, "text/plain", "item a\nitem b\n")
                .header("ETag", "\"v1\"")
                .header("Cache-Control", "no-cache"),
            "/fresh" => Reply::text(200, "text/plain", "fresh body").header("Cache-Control", "max-age=600"),
            "/plain" => Reply::text(200, "text/plain", "no headers at all"),
            "/echo" => {
                Reply::text(200, "text/plain", &format!("your key is {SECRET}")).header("Cache-Control", "max-age=600")
            }
            p if p.starts_with("/page/") => {
                Reply::text(200, "text/plain", "a page").header("Cache-Control", "max-age=600")
            }
            "/private" => Reply::text(200, "text/plain", "yours").header("Cache-Control", "private, max-age=600"),
            "/cookie" => Reply::text(200, "text/plain", "c")
                .header("Cache-Control", "max-age=600")
                .header("Set-Cookie", "session=1"),
            _ => Reply::text(404, "text/plain", "no"),
        }
    })
}

/// A key the process knows (an environment variable named like one): what it is in must not
/// be kept.
const SECRET: &str = "sk-cache-0123456789abcdef";

fn hits(s: &Server, path: &str) -> usize {
    s.requests.lock().unwrap().iter().filter(|r| r.url.starts_with(path)).count()
}

fn config(t: &T, cache: Option<&str>) {
    let cache = cache.map(|c| format!("    cache: {c}\n")).unwrap_or_default();
    t.write("ws/agentloop.yaml", &format!("tools:\n  http:\n    allow_private: true\n{cache}"));
}

#[test]
fn an_unchanged_source_is_revalidated_and_answered_from_the_cache() {
    let t = T::new();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    config(&t, None);
    let s = server();
    let feed = json!({"url": format!("{}/feed", s.url)});
    let (code, v) = call(&t, "web_fetch", feed.clone());
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().starts_with("item a\nitem b"), "{v}");
    assert!(v["metadata"].get("http_cache").is_none(), "a first fetch is no hit: {v}");
    // Again: one conditional request, a 304, and the body from the cache, said so.
    let (code, v) = call(&t, "web_fetch", feed.clone());
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(hits(&s, "/feed"), 2);
    let second = s.request(1);
    assert_eq!(second.header("if-none-match"), Some("\"v1\""), "{second:?}");
    let out = v["output"].as_str().unwrap();
    assert!(out.starts_with("item a\nitem b"), "{out}");
    assert!(
        out.contains("[from the HTTP cache, 0s old; the server confirmed it unchanged (304 Not Modified)]"),
        "{out}"
    );
    assert_eq!(v["metadata"]["http_cache"], json!({"hit": "revalidated", "age_seconds": 0, "status": 304}));
    assert_eq!(v["metadata"]["status_code"], 200);
    // How old it is: the clock an hour on.
    let out = t
        .al(&["tools", "call", "web_fetch", "--args", &feed.to_string()])
        .env("AGENTLOOP_NOW", "2026-01-01T01:00:00Z")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["metadata"]["http_cache"]["age_seconds"], 3600, "{v}");
    assert!(v["output"].as_str().unwrap().contains("1h old"), "{v}");

    // Fresh by max-age: the second call sends nothing; http_call says so in its own output.
    let fresh = json!({"method": "GET", "url": format!("{}/fresh", s.url)});
    call(&t, "http_call", fresh.clone());
    let (code, v) = call(&t, "http_call", fresh.clone());
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(hits(&s, "/fresh"), 1);
    let body: Value = serde_json::from_str(v["output"].as_str().unwrap()).unwrap();
    assert_eq!(body["body"], "fresh body");
    assert!(body["cache"].as_str().unwrap().contains("still fresh, so the server was not asked"), "{body}");
    assert_eq!(v["metadata"]["http_cache"]["hit"], "fresh");
    // A request with credentials bypasses the cache both ways.
    let authed = json!({"method": "GET", "url": format!("{}/fresh", s.url), "headers": {"Authorization": "Bearer x"}});
    let (_, v) = call(&t, "http_call", authed.clone());
    assert!(v["metadata"].get("http_cache").is_none(), "{v}");
    assert_eq!(hits(&s, "/fresh"), 2);
    let keyed = json!({"method": "GET", "url": format!("{}/fresh", s.url), "headers": {"X-Api-Key": "k"}});
    call(&t, "http_call", keyed);
    assert_eq!(hits(&s, "/fresh"), 3);
    // Private answers and answers that set a cookie are never stored.
    for p in ["/private", "/cookie"] {
        let a = json!({"method": "GET", "url": format!("{}{p}", s.url)});
        call(&t, "http_call", a.clone());
        let (_, v) = call(&t, "http_call", a);
        assert!(v["metadata"].get("http_cache").is_none(), "{p}: {v}");
        assert_eq!(hits(&s, p), 2, "{p}");
    }
    // No headers, no floor: fetched every time.
    let plain = json!({"url": format!("{}/plain", s.url)});
    call(&t, "web_fetch", plain.clone());
    call(&t, "web_fetch", plain.clone());
    assert_eq!(hits(&s, "/plain"), 2);

    // The folder is the user's own, outside the workspace.
    let dir = t.path("cache/agentloop/http");
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 2, "the feed and the fresh answer only: {files:?}");
    for f in files {
        assert_eq!(f.metadata().unwrap().permissions().mode() & 0o777, 0o600, "{f:?}");
        let text = String::from_utf8_lossy(&std::fs::read(f.path()).unwrap()).into_owned();
        assert!(!text.contains("Bearer") && !text.contains("session=1"), "{text}");
    }
    assert!(!t.path("ws/.agentloop").join("http").exists());
}

#[test]
fn a_floor_keeps_headerless_sources_and_off_turns_the_cache_off() {
    let t = T::new();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    let s = server();
    let plain = json!({"url": format!("{}/plain", s.url)});
    config(&t, Some("10m"));
    call(&t, "web_fetch", plain.clone());
    let (_, v) = call(&t, "web_fetch", plain.clone());
    assert_eq!(hits(&s, "/plain"), 1);
    assert_eq!(v["metadata"]["http_cache"]["hit"], "fresh", "{v}");
    // Past the floor it is fetched again.
    let out = t
        .al(&["tools", "call", "web_fetch", "--args", &plain.to_string()])
        .env("AGENTLOOP_NOW", "2026-01-01T00:11:00Z")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(hits(&s, "/plain"), 2);
    // off: nothing read, nothing stored.
    config(&t, Some("off"));
    let fresh = json!({"method": "GET", "url": format!("{}/fresh", s.url)});
    call(&t, "http_call", fresh.clone());
    call(&t, "http_call", fresh);
    assert_eq!(hits(&s, "/fresh"), 2);
    // A value that is no setting is refused, naming the key.
    config(&t, Some("sometimes"));
    let out = t.al(&["tools", "call", "web_fetch", "--args", &plain.to_string()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("tools.http.cache"), "{}", stderr(&out));
}

#[test]
fn the_trace_records_a_revalidated_fetch() {
    let t = T::new();
    let s = server();
    let url = format!("{}/feed", s.url);
    t.write(
        "script.yaml",
        &format!(
            r#"frame:
  - answer: {{goal: read the feed twice, definition_of_done: [read, read again, noted], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: web_fetch, args: {{url: "{url}"}}}}}}
  - answer: {{next_action: {{tool: web_fetch, args: {{url: "{url}"}}}}}}
reflect:
  - answer: {{decision: continue, reason: once more}}
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [2]}}, {{item: 3, steps: [2]}}], decision: done, reason: read, outcome: read twice}}
"#
        ),
    );
    config(&t, None);
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "read the feed twice"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let acts: Vec<Value> = t.trace().into_iter().filter(|e| e["event"] == "act").collect();
    assert_eq!(acts.len(), 2);
    assert!(acts[0]["data"].get("http_cache").is_none(), "{}", acts[0]);
    assert_eq!(acts[1]["data"]["http_cache"], json!({"hit": "revalidated", "age_seconds": 0, "status": 304}));
    assert_eq!(hits(&s, "/feed"), 2);
}

#[test]
fn an_untrusted_workspace_may_turn_the_cache_off_but_not_lengthen_it() {
    let t = T::new();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    let s = server();
    let fresh = json!({"method": "GET", "url": format!("{}/fresh", s.url)}).to_string();
    // The user's own config allows the local server; the workspace's own is not trusted.
    t.write("xdg/agentloop/config.yaml", "tools:\n  http:\n    allow_private: true\n");
    t.write("ws/agentloop.yaml", "tools:\n  http:\n    cache: 1h\n");
    let out = t.untrusted().args(["-w", "ws", "tools", "call", "http_call", "--args", &fresh]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("tools.http.cache"), "{}", stderr(&out));
    assert_eq!(s.count(), 0);
    t.write("ws/agentloop.yaml", "tools:\n  http:\n    cache: off\n");
    for _ in 0..2 {
        let out = t.untrusted().args(["-w", "ws", "tools", "call", "http_call", "--args", &fresh]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert_eq!(s.count(), 2, "off: both calls reach the server");
}

/// Two scripted runs fetch the same five URLs: only the plain one is kept and served the second
/// time; a URL with a credential in its query or a known secret in it (percent-encoded), and an
/// answer holding a known secret, are fetched afresh each time and leave no file.
#[test]
fn credentialed_urls_and_answers_holding_a_secret_are_never_kept() {
    let t = T::new();
    let s = server();
    let urls = [
        format!("{}/fresh?api_key=k-0001", s.url),
        format!("{}/fresh?X-Amz-Signature=abc&X-Amz-Date=20260101", s.url),
        format!("{}/echo", s.url),
        // The key percent-encoded: the model's arguments are redacted, but not of this form.
        format!("{}/page/{}", s.url, SECRET.replace('-', "%2D")),
        format!("{}/fresh?q=plain", s.url),
    ];
    let plans: String = urls
        .iter()
        .map(|u| format!("  - answer: {{next_action: {{tool: web_fetch, args: {{url: \"{u}\"}}}}}}\n"))
        .collect();
    t.write(
        "script.yaml",
        &format!(
            r#"frame:
  - answer: {{goal: read five pages, definition_of_done: [read the pages, read them again, noted], can_proceed: true}}
plan:
{plans}reflect:
  - answer: {{decision: continue, reason: next}}
  - answer: {{decision: continue, reason: next}}
  - answer: {{decision: continue, reason: next}}
  - answer: {{decision: continue, reason: next}}
  - answer: {{satisfied: [{{item: 1, steps: [1, 2, 3]}}, {{item: 2, steps: [4, 5]}}, {{item: 3, steps: [5]}}], decision: done, reason: read, outcome: read five pages}}
"#
        ),
    );
    for ws in ["ws", "ws2"] {
        t.write(&format!("{ws}/agentloop.yaml"), "tools:\n  http:\n    allow_private: true\n");
        let out = t
            .cmd()
            .args(["-w", ws, "--script", "script.yaml", "run", "--goal", "read five pages"])
            .env("EXAMPLE_API_KEY", SECRET)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{ws}: {}", stderr(&out));
    }
    let asked = |u: &str| s.requests.lock().unwrap().iter().filter(|r| u.ends_with(&r.url)).count();
    for u in &urls[..4] {
        assert_eq!(asked(u), 2, "{u}: fetched by both runs");
    }
    assert_eq!(asked(&urls[4]), 1, "the plain page came from the cache the second time");
    let files: Vec<_> = std::fs::read_dir(t.path("cache/agentloop/http")).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "only the plain page is kept: {files:?}");
    let text = String::from_utf8_lossy(&std::fs::read(files[0].path()).unwrap()).into_owned();
    assert!(text.contains("q=plain") && !text.contains(SECRET) && !text.contains("api_key"), "{text}");
}
