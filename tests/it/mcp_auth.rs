//! MCP servers that ask for more than a tool call: signing in with OAuth (discovery,
//! registration, PKCE, client credentials, refresh, a token that goes only to its server, the
//! 2025-03-26 metadata at the server's origin) and elicitation answered for an unattended tool.

use crate::common::*;
use crate::mcp::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// The fake server over HTTP as an OAuth-protected server and its own authorization server,
/// logging to `LOG` (a file of the test); its port.
fn oauth_server(t: &T, log: &str) -> (std::process::Child, String) {
    oauth_server_with(t, log, &[])
}

fn oauth_server_with(t: &T, log: &str, env: &[(&str, &str)]) -> (std::process::Child, String) {
    let port_file = t.path(&format!("{log}.port"));
    let server = std::process::Command::new("python3")
        .arg(fake_server())
        .arg("--http")
        .arg(&port_file)
        .env("FAKE_MCP_LOG", t.path(log))
        .env("FAKE_MCP_OAUTH", "1")
        .envs(env.iter().copied())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 runs the fake server");
    assert!(wait_for(|| port_file.exists(), Duration::from_secs(20)), "the HTTP server started");
    (server, std::fs::read_to_string(&port_file).unwrap())
}

fn lines(t: &T, log: &str) -> Vec<Value> {
    std::fs::read_to_string(t.path(log))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_holding(&p, needle));
        } else if std::fs::read(&p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle)) {
            out.push(p.display().to_string());
        }
    }
    out
}

#[test]
fn an_oauth_server_is_signed_in_to_and_its_token_goes_only_to_it() {
    use std::os::unix::fs::PermissionsExt;
    let t = T::new();
    let (mut a, port) = oauth_server(&t, "a.jsonl");
    let (mut b, other) = oauth_server(&t, "b.jsonl");
    // The browser a person would use, headless: it follows the authorization server's redirect
    // to agentloop's loopback port.
    t.write("browser.sh", "#!/bin/sh\nexec curl -s -o /dev/null -L \"$1\"\n");
    std::fs::set_permissions(t.path("browser.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let browser = t.path("browser.sh").display().to_string();
    t.write("ws/agentloop.yaml", &format!("mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:{port}/mcp\n"));
    let call = |ws: &str| {
        t.cmd().args(["-w", ws, "mcp", "call", "web", "echo", "--args", r#"{"text": "hi"}"#]).output().unwrap()
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // Not signed in: the 401 says what to run; no browser opens.
        let out = call("ws");
        assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
        assert!(stdout(&out).contains("requires authorization: run `agentloop mcp login web`"), "{}", stdout(&out));
        // Sign in: discovery from the challenge, registration, PKCE with the resource, a token.
        let out = t.al(&["mcp", "login", "web"]).env("BROWSER", &browser).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stderr(&out).contains("signed in to MCP server web"), "{}", stderr(&out));
        let log = lines(&t, "a.jsonl");
        let steps: Vec<&str> = log.iter().filter_map(|l| l["oauth"].as_str()).collect();
        for step in [
            "GET /.well-known/oauth-protected-resource/mcp",
            "GET /.well-known/oauth-authorization-server",
            "POST /register",
            "GET /authorize",
            "POST /token",
        ] {
            assert!(steps.contains(&step), "{step} missing from {steps:?}");
        }
        let authorize = log.iter().find(|l| l["oauth"] == "GET /authorize").unwrap();
        assert_eq!(authorize["query"]["code_challenge_method"], "S256");
        assert_eq!(authorize["query"]["resource"], format!("http://127.0.0.1:{port}/mcp"));
        assert_eq!(authorize["query"]["client_id"], "dyn-client");
        assert!(authorize["query"]["redirect_uri"].as_str().unwrap().starts_with("http://127.0.0.1:"));
        let token = log.iter().find(|l| l["oauth"] == "POST /token").unwrap();
        assert_eq!(token["form"]["grant_type"], "authorization_code");
        assert_eq!(token["form"]["resource"], format!("http://127.0.0.1:{port}/mcp"));
        // The token is kept owner-only in the user's state folder, never in the workspace.
        let store = t.path("home/.local/state/agentloop/mcp-auth");
        let kept = files_holding(&store, "access-1");
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(std::fs::metadata(&kept[0]).unwrap().permissions().mode() & 0o777, 0o600);
        let out = call("ws");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(json_out(&out)["output"], "echo: hi");
        assert!(lines(&t, "a.jsonl").iter().any(|l| l["http_headers"]["authorization"] == "Bearer access-1"));
        // `mcp list` says who is signed in, never the token.
        let out = t.al(&["mcp", "list", "--json"]).output().unwrap();
        assert_eq!(json_out(&out)[0]["signed_in"]["client_id"], "dyn-client");
        assert!(!stdout(&out).contains("access-"), "{}", stdout(&out));
        // The server drops its access tokens: the refresh token gets a new one, no browser.
        let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        std::io::Write::write_all(&mut s, b"GET /fake/expire HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let _ = std::io::Read::read_to_end(&mut s, &mut vec![]);
        let out = call("ws");
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        let log = lines(&t, "a.jsonl");
        assert!(log.iter().any(|l| l["form"]["grant_type"] == "refresh_token"), "refreshed");
        assert!(log.iter().any(|l| l["http_headers"]["authorization"] == "Bearer access-2"));
        assert_eq!(files_holding(&t.path("ws"), "access-"), Vec::<String>::new(), "no token in the workspace");
        // A workspace from elsewhere naming the same server at another address gets no token:
        // its server sees no Authorization header at all.
        t.write(
            "ws2/agentloop.yaml",
            &format!("mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:{other}/mcp\n"),
        );
        let out = call("ws2");
        assert_eq!(out.status.code(), Some(6), "{}", stdout(&out));
        assert!(stdout(&out).contains("agentloop mcp login web"), "{}", stdout(&out));
        let seen = lines(&t, "b.jsonl");
        assert!(!seen.is_empty());
        assert!(seen.iter().all(|l| l["http_headers"].get("authorization").is_none()), "{seen:?}");
        // Signed out: the token file is gone and the server asks again.
        let out = t.al(&["mcp", "logout", "web"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(files_holding(&store, "access-").is_empty());
        assert_eq!(call("ws").status.code(), Some(6));
        // A machine client: the client-credentials grant, its secret from the environment.
        t.write(
            "ws3/agentloop.yaml",
            &format!("mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:{port}/mcp\n      oauth: {{grant: client_credentials, client_id: cc-client, client_secret: '${{CC_SECRET}}'}}\n"),
        );
        let out = t
            .cmd()
            .args(["-w", "ws3", "mcp", "call", "web", "echo", "--args", r#"{"text": "cc"}"#])
            .env("CC_SECRET", "cc-secret")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        assert!(lines(&t, "a.jsonl").iter().any(|l| l["form"]["grant_type"] == "client_credentials"));
        assert!(!stdout(&out).contains("cc-secret") && !stderr(&out).contains("cc-secret"));
    }));
    let _ = a.kill();
    let _ = b.kill();
    let _ = a.wait();
    let _ = b.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

const ASK_SCRIPT: &str = r#"frame:
  - answer: {goal: ask the server's form, definition_of_done: [the form was answered, the answer is known, nothing is left running], can_proceed: true}
plan:
  - answer: {next_action: {tool: fake__ask, args: {message: Which plan?, schema: {type: object, properties: {plan: {type: string, enum: [free, pro], default: free}, seats: {type: integer, default: 1}}, required: [plan]}}}, expected_outcome: the answer, rationale: try}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: it answered, outcome: the form was answered}
"#;

#[test]
fn elicitation_is_answered_with_the_forms_defaults_or_declined_and_recorded() {
    let t = with_server("fake", "");
    let cfg = t.read("ws/agentloop.yaml").replace("env: {", "env: {FAKE_MCP_ELICIT: '1', ");
    t.write("ws/agentloop.yaml", &cfg);
    let ask = |message: &str, schema: Value| {
        let args = json!({"message": message, "schema": schema}).to_string();
        let out = t.al(&["mcp", "call", "fake", "ask", "--args", &args]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        json_out(&out)
    };
    // Every required field has a default: accepted with the defaults (SEP-1034), and said so.
    let form = json!({"type": "object", "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "verified": {"type": "boolean", "default": true},
        "note": {"type": "string"}}, "required": ["name"]});
    let v = ask("Who are you?", form);
    // (The server's own JSON, as Python writes it: what it received.)
    assert_eq!(
        v["output"].as_str().unwrap().lines().next().unwrap(),
        r#"answer: {"action": "accept", "content": {"age": 30, "name": "John Doe", "verified": true}}"#,
        "{v}"
    );
    assert_eq!(
        v["metadata"]["mcp"]["elicitations"],
        json!([{"mode": "form", "message": "Who are you?", "action": "accept",
                "content": {"age": 30, "name": "John Doe", "verified": true}}])
    );
    assert!(v["output"].as_str().unwrap().contains(
        r#"[the server asked for input (elicitation: "Who are you?"); agentloop accepted the form's defaults: {"name":"John Doe","age":30,"verified":true}]"#
    ), "{v}");
    // The client announced form elicitation.
    let init = calls(&t).into_iter().find(|c| c["method"] == "initialize").unwrap();
    assert_eq!(init["params"]["capabilities"]["elicitation"], json!({"form": {}}), "{init}");
    // A required field without a default: declined, with why.
    let form = json!({"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]});
    let v = ask("Your email?", form);
    assert!(v["output"].as_str().unwrap().starts_with(r#"answer: {"action": "decline"}"#), "{v}");
    let rec = &v["metadata"]["mcp"]["elicitations"][0];
    assert_eq!(rec["action"], "decline");
    assert!(rec["reason"].as_str().unwrap().contains("the required field `email` has no default"), "{rec}");
    assert!(v["output"].as_str().unwrap().contains("agentloop declined: the required field `email` has no default"));
    // No default at all: declined too (accepting would make up an answer).
    let v = ask("Anything?", json!({"type": "object", "properties": {"x": {"type": "string"}}}));
    assert_eq!(v["metadata"]["mcp"]["elicitations"][0]["action"], "decline", "{v}");
    // In a run, the act trace entry keeps what was asked and answered.
    t.write("script.yaml", ASK_SCRIPT);
    t.al(&["--script", "script.yaml", "init", "--goal", "Answer the server's form"]).assert().success();
    let out = t.al(&["--script", "script.yaml", "run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let act = t.trace().into_iter().find(|e| e["phase"] == "act" && e["tool"] == "fake__ask").unwrap();
    assert_eq!(
        act["data"]["mcp_elicitations"],
        json!([{"mode": "form", "message": "Which plan?", "action": "accept", "content": {"plan": "free", "seats": 1}}]),
        "{act}"
    );
    assert!(gone(&starts(&t), Duration::from_secs(3)));
}

#[test]
fn a_2025_03_26_server_is_signed_in_to_through_the_metadata_at_its_origin_and_only_then() {
    use std::os::unix::fs::PermissionsExt;
    let t = T::new();
    t.write("browser.sh", "#!/bin/sh\nexec curl -s -o /dev/null -L \"$1\"\n");
    std::fs::set_permissions(t.path("browser.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let browser = t.path("browser.sh").display().to_string();
    // No protected-resource metadata, and the authorization server lives under /oauth: its
    // metadata at the server's origin names an issuer other than the address it was read from.
    // (the server's environment, and why a sign-in is refused)
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
    let cases: [Case; 3] = [
        (&[("FAKE_MCP_OAUTH_NO_PRM", "1"), ("FAKE_MCP_OAUTH_ISSUER", "/oauth")], None),
        // Where the server publishes protected-resource metadata, the newer specification
        // applies and a mismatched issuer stays refused (RFC 8414 section 3.3).
        (&[("FAKE_MCP_OAUTH_ISSUER", "/oauth")], Some("issuer mismatch")),
        // An issuer at another origin is never taken from this origin's document.
        (
            &[("FAKE_MCP_OAUTH_NO_PRM", "1"), ("FAKE_MCP_OAUTH_ISSUER", "https://elsewhere.example")],
            Some("issuer mismatch"),
        ),
    ];
    for (i, (env, refused)) in cases.into_iter().enumerate() {
        let log = format!("s{i}.jsonl");
        let (mut server, port) = oauth_server_with(&t, &log, env);
        let ws = format!("ws{i}");
        t.write(
            &format!("{ws}/agentloop.yaml"),
            &format!("mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:{port}/mcp\n"),
        );
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let out = t.cmd().args(["-w", &ws, "mcp", "login", "web"]).env("BROWSER", &browser).output().unwrap();
            match refused {
                None => {
                    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
                    let steps: Vec<String> =
                        lines(&t, &log).iter().filter_map(|l| l["oauth"].as_str().map(str::to_string)).collect();
                    assert!(steps.iter().any(|s| s == "POST /token"), "{steps:?}");
                    // Later commands use the kept token (the same discovery, no browser).
                    for _ in 0..2 {
                        let out = t
                            .cmd()
                            .args(["-w", &ws, "mcp", "call", "web", "echo", "--args", r#"{"text": "hi"}"#])
                            .output()
                            .unwrap();
                        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
                        assert_eq!(json_out(&out)["output"], "echo: hi");
                    }
                }
                Some(why) => {
                    assert_ne!(out.status.code(), Some(0));
                    assert!(stderr(&out).contains(why), "{}", stderr(&out));
                    let steps: Vec<String> =
                        lines(&t, &log).iter().filter_map(|l| l["oauth"].as_str().map(str::to_string)).collect();
                    assert!(!steps.iter().any(|s| s == "GET /authorize" || s == "POST /token"), "{steps:?}");
                }
            }
        }));
        let _ = server.kill();
        let _ = server.wait();
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    }
}
