//! The HTTP API held to its published OpenAPI document (docs/schema/openapi.json) by tools
//! nobody on the project wrote: openapi-spec-validator on the document, and schemathesis
//! fuzzing `agentloop serve` on 127.0.0.1 (a scripted model, a token) with its five standard
//! response checks. Both are Python programs from PyPI (.ci/run installs them); without one a
//! test says why and returns, but fails under CI. Beside them, each operation's refusals are
//! checked against the document directly through the real binary.

use crate::common::*;
use crate::serve::{root_with, serve, TOKEN};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A run that finishes in one step (each run the fuzzer starts reads the script afresh).
const QUICK: &str = r#"frame:
  - answer: {goal: g, definition_of_done: [done], can_proceed: true}
    usage: {input_tokens: 100, output_tokens: 20}
plan:
  - answer: {next_action: {tool: list_dir, args: {}}, rationale: look around}
    usage: {input_tokens: 200, output_tokens: 30}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}], decision: done, reason: ok, outcome: summarised}
    usage: {input_tokens: 300, output_tokens: 40}
"#;

fn document_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/openapi.json")
}

fn document() -> Value {
    serde_json::from_str(&std::fs::read_to_string(document_path()).unwrap()).unwrap()
}

/// A program on PATH, if there is one.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Runs `cmd` to its end, killing it after `limit` (then it failed: the suite is bounded).
fn run_bounded(mut cmd: Command, limit: Duration, what: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    assert!(status.is_some(), "{what} ran longer than {limit:?}; its output:\n{text}");
    (status.and_then(|s| s.code()), text)
}

#[test]
fn the_openapi_document_is_valid_openapi() {
    let Some(validator) = on_path("openapi-spec-validator") else {
        return missing("openapi-spec-validator is not on PATH (python3 -m pip install openapi-spec-validator)");
    };
    let mut cmd = Command::new(validator);
    cmd.arg(document_path());
    let (code, out) = run_bounded(cmd, Duration::from_secs(120), "openapi-spec-validator");
    assert_eq!(code, Some(0), "openapi-spec-validator refuses docs/schema/openapi.json:\n{out}");
    assert!(out.contains("OK"), "{out}");
}

#[test]
fn schemathesis_finds_no_reply_the_document_does_not_describe() {
    let Some(st) = on_path("schemathesis") else {
        return missing("schemathesis is not on PATH (python3 -m pip install schemathesis)");
    };
    let t = T::new();
    // Skills come only from one host, which does not exist: every URL the fuzzer makes is
    // refused by policy (403) before anything is sent. No rate limit and a long queue, so the
    // fuzzer reaches every handler instead of the limits (which the document lists too).
    root_with(&t, QUICK, "max_steps: 8\ntools: {http: {allow_hosts: [skills.invalid]}}\n");
    t.write("root/agents/brief.yaml", "description: Short answers\nsystem_prompt: Be brief.\nmax_steps: 4\n");
    let s = serve(&t, &["--script", "script.yaml"], &["--rate-limit", "0", "--queue", "1000"], Some(TOKEN));
    // A run to find: the stateful phase follows the links of what POST /runs answers.
    let r = crate::serve::agent()
        .post(format!("{}/runs", s.url))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send(json!({"goal": "say done"}).to_string())
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let mut cmd = Command::new(st);
    cmd.current_dir(t.root())
        .args(["run", document_path().to_str().unwrap(), "--url", &s.url])
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance",
        ])
        .args(["--max-examples", "40", "--request-timeout", "20", "--workers", "1"])
        .args(["--generation-database", "none", "--no-color"]);
    let (code, out) = run_bounded(cmd, Duration::from_secs(420), "schemathesis");
    assert_eq!(code, Some(0), "schemathesis found replies the document does not describe:\n{out}\n{}", s.log());
    assert!(!out.contains("ST10") && out.contains("Tested: 18"), "{out}");
}

struct Got {
    status: u16,
    content_type: String,
    allow: Option<String>,
}

fn send(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Got {
    let mut req = ureq::http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = crate::serve::agent().run(req.body(body.to_string()).unwrap()).unwrap();
    let h = |k: &str| resp.headers().get(k).and_then(|v| v.to_str().ok()).map(String::from);
    Got { status: resp.status().as_u16(), content_type: h("content-type").unwrap_or_default(), allow: h("allow") }
}

/// `method path` sent as written with `Host: evil.example` and the token (an HTTP client would
/// put the address it connects to).
fn misdirected(base: &str, method: &str, path: &str) -> Got {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(c, "{method} {path} HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}").unwrap();
    let mut reply = String::new();
    let _ = c.read_to_string(&mut reply);
    let head = reply.split("\r\n\r\n").next().unwrap_or("");
    let header = |k: &str| {
        head.lines().find_map(|l| {
            l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case(k)).map(|(_, v)| v.trim().to_string())
        })
    };
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Got { status, content_type: header("content-type").unwrap_or_default(), allow: header("allow") }
}

/// The document's path for `path` with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{id}", "01NOSUCHRUN0000000000000000").replace("{path}", "state.json").replace("{name}", "brief")
}

/// Whether `doc` lists `status` with content type `ctype` (its media type, parameters aside)
/// for `method path`.
fn documented(doc: &Value, path: &str, method: &str, status: u16, ctype: &str) -> bool {
    let media = ctype.split(';').next().unwrap_or("").trim();
    doc["paths"][path][method]["responses"][status.to_string()]["content"]
        .as_object()
        .is_some_and(|c| c.contains_key(media))
}

#[test]
fn every_refusal_of_every_operation_is_in_the_document() {
    let t = T::new();
    root_with(&t, QUICK, "tools: {http: {allow_hosts: [skills.invalid]}}\n");
    let s = serve(&t, &["--script", "script.yaml"], &["--rate-limit", "0"], Some(TOKEN));
    let doc = document();
    let bearer = format!("Bearer {TOKEN}");
    for (path, ops) in doc["paths"].as_object().unwrap() {
        let url = format!("{}{}", s.url, concrete(path));
        let methods: Vec<String> = ops.as_object().unwrap().keys().map(|m| m.to_ascii_uppercase()).collect();
        for method in ops.as_object().unwrap().keys() {
            let m = method.to_ascii_uppercase();
            let guarded = ops[method]["security"] != json!([]);
            // A broken %-escape in the query, and another method on the path.
            let g = send(&m, &format!("{url}?x=%zz"), &[("Authorization", &bearer)], "");
            assert!(documented(&doc, path, method, g.status, &g.content_type), "{m} {path}?x=%zz: {}", g.status);
            // Another site's name as `Host` (DNS rebinding): 421 first, the token notwithstanding.
            let g = misdirected(&s.url, &m, &concrete(path));
            assert_eq!(g.status, 421, "{m} {path} with another Host");
            assert!(documented(&doc, path, method, 421, &g.content_type), "{m} {path}: 421");
            let g = send("DELETE", &url, &[("Authorization", &bearer)], "");
            assert_eq!(g.status, 405, "DELETE {path}");
            assert!(documented(&doc, path, method, 405, &g.content_type), "{m} {path}: 405");
            let allow = ops[method]["responses"]["405"]["headers"]["Allow"]["required"].clone();
            assert_eq!((g.allow.as_deref(), allow), (Some(methods.join(", ").as_str()), json!(true)), "{path}");
            if !guarded {
                continue;
            }
            // Without a token: JSON for programs; for a browser's GET, the sign-in page.
            let g = send(&m, &url, &[], "{}");
            assert_eq!(g.status, 401, "{m} {path}");
            assert!(documented(&doc, path, method, 401, &g.content_type), "{m} {path}: 401 {}", g.content_type);
            if m == "GET" {
                let g = send(&m, &url, &[("Accept", "text/html")], "");
                assert_eq!((g.status, g.content_type.starts_with("text/html")), (401, true), "{path}");
                assert!(documented(&doc, path, method, 401, &g.content_type), "{m} {path}: 401 as HTML");
            } else {
                // Bodies: over 1 MiB is 413 (POSTs only: a GET's body is never read).
                let big = format!("{{\"goal\": \"{}\"}}", "x".repeat(1_100_000));
                let g = send(&m, &url, &[("Authorization", &bearer)], &big);
                assert_eq!(g.status, 413, "{m} {path}");
                assert!(documented(&doc, path, method, 413, &g.content_type), "{m} {path}: 413");
                for code in ["408", "429", "503"] {
                    assert!(ops[method]["responses"].get(code).is_some(), "{m} {path}: {code}");
                }
            }
        }
    }
    drop(s);
    // The token's rate limit is a 429 with Retry-After on any operation.
    let t = T::new();
    root_with(&t, QUICK, "");
    let s = serve(&t, &["--script", "script.yaml"], &["--rate-limit", "1/1h"], Some(TOKEN));
    let codes: Vec<u16> =
        (0..2).map(|_| send("GET", &format!("{}/runs", s.url), &[("Authorization", &bearer)], "").status).collect();
    assert_eq!(codes, [200, 429]);
    let g = send("POST", &format!("{}/runs", s.url), &[("Authorization", &bearer)], "{}");
    assert_eq!(g.status, 429);
    for (path, method) in [("/runs", "get"), ("/runs", "post")] {
        assert!(documented(&doc, path, method, 429, &g.content_type), "{method} {path}");
        assert!(doc["paths"][path][method]["responses"]["429"]["headers"].get("Retry-After").is_some());
    }
}

#[test]
fn skills_fetch_answers_502_only_for_an_upstream_that_failed() {
    let t = T::new();
    let upstream = Server::start_with(|_, _| Reply::text(500, "text/plain", "broken"));
    let port = upstream.url.rsplit(':').next().unwrap().trim_end_matches('/').to_string();
    root_with(&t, QUICK, &format!("tools: {{http: {{allow_private: true, ports: [{port}]}}}}\n"));
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let doc = document();
    let fetch = |body: Value| {
        let g = send(
            "POST",
            &format!("{}/skills/fetch", s.url),
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            &body.to_string(),
        );
        assert!(documented(&doc, "/skills/fetch", "post", g.status, &g.content_type), "{body}: {}", g.status);
        g.status
    };
    // The policy refuses the port: the request's problem, nothing sent.
    assert_eq!(fetch(json!({"id": "digest", "url": "http://127.0.0.1:1/SKILL.md"})), 403);
    assert_eq!(upstream.requests.lock().unwrap().len(), 0);
    // Not http(s), or not a URL: a bad request.
    assert_eq!(fetch(json!({"id": "digest", "url": "ftp://127.0.0.1/SKILL.md"})), 400);
    assert_eq!(fetch(json!({"id": "digest", "url": "http://"})), 400);
    // The upstream answered an error: 502.
    assert_eq!(fetch(json!({"id": "digest", "url": format!("{}/SKILL.md", upstream.url.trim_end_matches('/'))})), 502);
    assert_eq!(upstream.requests.lock().unwrap().len(), 1);
}

#[test]
fn request_bodies_the_document_refuses_the_server_refuses() {
    let t = T::new();
    root_with(&t, QUICK, "");
    t.write("root/agents/brief.yaml", "description: Short answers\nmax_steps: 4\n");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let doc = document();
    let start = json!({"$ref": "#/components/schemas/StartRun", "components": doc["components"]});
    let v = jsonschema::validator_for(&start).unwrap();
    let bearer = format!("Bearer {TOKEN}");
    for body in [
        json!({"goal": "   "}),
        json!({"goal": "g", "agent": ""}),
        json!({"goal": "g", "agent": "../x"}),
        json!({"goal": "g", "budgets": {"timeout": ""}}),
        json!({"goal": "g", "budgets": {"timeout": "soon"}}),
        json!({"goal": "g", "budgets": {"timeout": -1}}),
        json!({"goal": "g", "budgets": {"max_steps": -1}}),
        json!({"goal": "g", "budgets": {"max_steps": 4294967296u64}}),
        json!({"goal": "g", "provider": "x"}),
    ] {
        assert!(!v.is_valid(&body), "the document takes {body}");
        let g = send("POST", &format!("{}/runs", s.url), &[("Authorization", &bearer)], &body.to_string());
        assert_eq!(g.status, 400, "{body}");
    }
    // A timeout too large for any clock is refused, never a crash of the handler.
    let g = send(
        "POST",
        &format!("{}/runs", s.url),
        &[("Authorization", &bearer)],
        r#"{"goal": "g", "budgets": {"timeout": 2.7e235}}"#,
    );
    assert_eq!((g.status, g.content_type.as_str()), (400, "application/json"));
    for body in [
        json!({"goal": "g", "agent": "brief", "budgets": {"timeout": "10m 30s", "max_steps": 3}}),
        json!({"goal": "g", "budgets": {"timeout": 90}}),
    ] {
        assert!(v.is_valid(&body), "the document refuses {body}");
        let g = send("POST", &format!("{}/runs", s.url), &[("Authorization", &bearer)], &body.to_string());
        assert_eq!(g.status, 202, "{body}");
    }
    // An answer is not blank.
    let answer = &doc["paths"]["/runs/{id}/answer"]["post"]["requestBody"]["content"]["application/json"]["schema"];
    let v = jsonschema::validator_for(answer).unwrap();
    assert!(
        !v.is_valid(&json!({"answer": ""}))
            && !v.is_valid(&json!({"answer": " \n"}))
            && v.is_valid(&json!({"answer": "yes"}))
    );
}
