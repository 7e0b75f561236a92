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

/// An ES256 key as a PKCS#8 PEM, and its public key.
fn es256_key() -> (String, Vec<u8>) {
    use base64::Engine;
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let kp = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
    );
    (pem, kp.public_key().as_ref().to_vec())
}

/// The header and claims of a JWT whose ES256 signature `public` verifies.
fn verified_jwt(jwt: &str, public: &[u8]) -> (Value, Value) {
    use base64::Engine;
    let dec = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).unwrap();
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3, "{jwt}");
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, public)
        .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &dec(parts[2]))
        .expect("the assertion's signature verifies with the client's public key");
    (serde_json::from_slice(&dec(parts[0])).unwrap(), serde_json::from_slice(&dec(parts[1])).unwrap())
}

#[test]
fn a_machine_client_signs_in_with_its_key_or_an_identity_assertion_with_no_browser() {
    let t = T::new();
    let (mut server, port) = oauth_server(&t, "a.jsonl");
    let base = format!("http://127.0.0.1:{port}");
    let (pem, public) = es256_key();
    // The key lives outside the workspace, in a file the configuration names.
    t.write("keys/client.pem", &pem);
    let key_path = t.path("keys/client.pem").display().to_string();
    let call = |ws: &str, envs: &[(&str, &str)]| {
        t.cmd()
            .args(["-w", ws, "mcp", "call", "web", "echo", "--args", r#"{"text": "hi"}"#])
            .envs(envs.iter().copied())
            .output()
            .unwrap()
    };
    let token_forms = |grant: &str| -> Vec<Value> {
        lines(&t, "a.jsonl")
            .into_iter()
            .filter(|l| l["oauth"] == "POST /token" && l["form"]["grant_type"] == grant)
            .map(|l| l["form"].clone())
            .collect()
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // private_key_jwt: no secret, a signed assertion; no --login and no $BROWSER needed.
        t.write(
            "ws/agentloop.yaml",
            &format!("mcp:\n  servers:\n    web:\n      url: {base}/mcp\n      oauth: {{grant: client_credentials, client_id: jwt-client, private_key_file: '{key_path}', signing_alg: ES256}}\n"),
        );
        let out = call("ws", &[]);
        assert_eq!(out.status.code(), Some(0), "{}\n{}", stdout(&out), stderr(&out));
        assert_eq!(json_out(&out)["output"], "echo: hi");
        let forms = token_forms("client_credentials");
        assert_eq!(forms.len(), 1, "{forms:?}");
        let form = &forms[0];
        assert_eq!(form["client_assertion_type"], "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
        assert_eq!(form["resource"], format!("{base}/mcp"));
        assert!(form.get("client_id").is_none() && form.get("client_secret").is_none(), "{form}");
        let (header, claims) = verified_jwt(form["client_assertion"].as_str().unwrap(), &public);
        assert_eq!(header["alg"], "ES256");
        assert_eq!((claims["iss"].as_str(), claims["sub"].as_str()), (Some("jwt-client"), Some("jwt-client")));
        // The audience is the authorization server's issuer.
        assert_eq!(claims["aud"], base);
        assert_eq!(claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(), 300);
        assert!(lines(&t, "a.jsonl").iter().any(|l| l["http_headers"]["authorization"] == "Bearer access-1"));
        // The server drops its tokens: a new assertion (a new jti) gets a new token, unattended.
        let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        std::io::Write::write_all(&mut s, b"GET /fake/expire HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let _ = std::io::Read::read_to_end(&mut s, &mut vec![]);
        let out = call("ws", &[]);
        assert_eq!(out.status.code(), Some(0), "{}\n{}", stdout(&out), stderr(&out));
        let forms = token_forms("client_credentials");
        assert_eq!(forms.len(), 2, "{forms:?}");
        let jti = |f: &Value| verified_jwt(f["client_assertion"].as_str().unwrap(), &public).1["jti"].clone();
        assert_ne!(jti(&forms[0]), jti(&forms[1]));
        // The key is nowhere but its own file: not in output, the workspace or the token store.
        let key_line = pem.lines().nth(1).unwrap();
        assert!(!stdout(&out).contains(key_line) && !stderr(&out).contains(key_line));
        assert!(files_holding(&t.path("ws"), key_line).is_empty());
        assert!(files_holding(&t.path("home"), key_line).is_empty());
        // RS256 with an RSA key (openssl makes one: ring cannot generate RSA keys).
        let made = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out"])
            .arg(t.path("keys/rsa.pem"))
            .output();
        if made.is_ok_and(|o| o.status.success()) {
            use base64::Engine;
            t.write(
                "ws8/agentloop.yaml",
                &format!("mcp:\n  servers:\n    web:\n      url: {base}/mcp\n      oauth: {{grant: client_credentials, client_id: rsa-client, private_key_file: '{}', signing_alg: RS256}}\n", t.path("keys/rsa.pem").display()),
            );
            let out = call("ws8", &[]);
            assert_eq!(out.status.code(), Some(0), "{}\n{}", stdout(&out), stderr(&out));
            let rsa = t.read("keys/rsa.pem");
            let b64: String = rsa.lines().filter(|l| !l.starts_with("-----")).collect();
            let der = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
            let kp = ring::signature::RsaKeyPair::from_pkcs8(&der).unwrap();
            let forms = token_forms("client_credentials");
            let jwt = forms.last().unwrap()["client_assertion"].as_str().unwrap().to_string();
            let parts: Vec<&str> = jwt.split('.').collect();
            let dec = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).unwrap();
            ring::signature::UnparsedPublicKey::new(&ring::signature::RSA_PKCS1_2048_8192_SHA256, kp.public().as_ref())
                .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &dec(parts[2]))
                .expect("the RS256 assertion verifies");
            let header: Value = serde_json::from_slice(&dec(parts[0])).unwrap();
            assert_eq!(header["alg"], "RS256");
        } else {
            missing("openssl (to make an RSA key)");
        }
        let sent = token_forms("client_credentials").len();
        // A key path that is not absolute, or a key that is not one: configuration errors
        // naming the key, and nothing is sent.
        for (key, why) in [
            ("private_key_file: keys/client.pem", "oauth.private_key_file `keys/client.pem` is not an absolute path"),
            ("private_key: not a key", "oauth.private_key: the private key is not a PEM"),
            ("private_key_file: '/nonexistent/key.pem'", "oauth.private_key_file: cannot read /nonexistent/key.pem"),
        ] {
            t.write(
                "ws4/agentloop.yaml",
                &format!("mcp:\n  servers:\n    web:\n      url: {base}/mcp\n      oauth: {{grant: client_credentials, client_id: jwt-client, {key}}}\n"),
            );
            let out = call("ws4", &[]);
            assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
            assert!(stderr(&out).contains(why), "{}", stderr(&out));
        }
        assert_eq!(token_forms("client_credentials").len(), sent);
        // A workspace from elsewhere may not name a key: refused before anything is read.
        t.write("ws5/agentloop.yaml", &t.read("ws/agentloop.yaml"));
        let out = t
            .untrusted()
            .args(["-w", "ws5", "mcp", "call", "web", "echo", "--args", r#"{"text": "hi"}"#])
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stderr(&out).contains("mcp.servers.web"), "{}", stderr(&out));
        assert_eq!(token_forms("client_credentials").len(), sent);

        // Enterprise-managed: the ID token from the identity provider is exchanged there for an
        // ID-JAG, which the server's authorization server redeems; the IdP's token endpoint is
        // found from its metadata.
        t.write(
            "ws6/agentloop.yaml",
            &format!(
                "mcp:\n  servers:\n    web:\n      url: {base}/mcp\n      oauth:\n        grant: identity_assertion\n        client_id: xaa-client\n        client_secret: '${{XAA_SECRET}}'\n        identity_provider: {{issuer: '{base}/idp', client_id: idp-client, id_token: '${{ID_TOKEN}}'}}\n"
            ),
        );
        let envs = [("XAA_SECRET", "xaa-secret"), ("ID_TOKEN", "id-token-1")];
        let out = call("ws6", &envs);
        assert_eq!(out.status.code(), Some(0), "{}\n{}", stdout(&out), stderr(&out));
        assert_eq!(json_out(&out)["output"], "echo: hi");
        let log = lines(&t, "a.jsonl");
        assert!(log.iter().any(|l| l["oauth"] == "GET /idp/.well-known/openid-configuration"));
        let exchange = log.iter().find(|l| l["oauth"] == "POST /idp/token").expect("a token exchange at the IdP");
        let f = &exchange["form"];
        assert_eq!(f["grant_type"], "urn:ietf:params:oauth:grant-type:token-exchange");
        assert_eq!(f["subject_token_type"], "urn:ietf:params:oauth:token-type:id_token");
        assert_eq!(f["requested_token_type"], "urn:ietf:params:oauth:token-type:id-jag");
        assert_eq!(f["audience"], base);
        assert_eq!(f["resource"], format!("{base}/mcp"));
        assert_eq!(f["client_id"], "idp-client");
        let bearer = token_forms("urn:ietf:params:oauth:grant-type:jwt-bearer");
        assert_eq!(bearer.len(), 1, "{bearer:?}");
        // The client authenticated with HTTP Basic (the fake logs it as client_id).
        assert_eq!(bearer[0]["client_id"], "xaa-client");
        assert!(
            log.iter().any(|l| l["http_headers"]["authorization"] == "Bearer access-3"),
            "the redeemed token is sent"
        );
        for secret in ["id-token-1", "xaa-secret"] {
            assert!(!stdout(&out).contains(secret) && !stderr(&out).contains(secret), "{secret}");
        }
        // Without the identity provider the grant is a configuration error saying what to add.
        t.write(
            "ws7/agentloop.yaml",
            &format!("mcp:\n  servers:\n    web:\n      url: {base}/mcp\n      oauth: {{grant: identity_assertion, client_id: xaa-client}}\n"),
        );
        let out = call("ws7", &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("`grant: identity_assertion` needs oauth.identity_provider"), "{}", stderr(&out));
    }));
    let _ = server.kill();
    let _ = server.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn a_sign_in_does_not_count_against_startup_timeout_and_every_command_says_when_it_gives_up() {
    use std::os::unix::fs::PermissionsExt;
    let t = T::new();
    // A person who takes 4 seconds in the browser, against a startup_timeout of 2 seconds.
    t.write("browser.sh", "#!/bin/sh\nsleep 4\nexec curl -s -o /dev/null -L \"$1\"\n");
    std::fs::set_permissions(t.path("browser.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let browser = t.path("browser.sh").display().to_string();
    let (mut slow, port) = oauth_server(&t, "a.jsonl");
    // A server that takes no token it issues.
    let (mut never, other) = oauth_server_with(&t, "b.jsonl", &[("FAKE_MCP_OAUTH_REFUSE", "1")]);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        t.write(
            "ws/agentloop.yaml",
            &format!("mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:{port}/mcp\n      startup_timeout: 2s\n"),
        );
        let out = t.al(&["mcp", "list", "--refresh", "--login", "--json"]).env("BROWSER", &browser).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}\n{}", stdout(&out), stderr(&out));
        assert!(stderr(&out).contains("signed in to MCP server web"), "{}", stderr(&out));
        assert!(json_out(&out)[0]["tools"].as_array().is_some_and(|a| !a.is_empty()), "{}", stdout(&out));
        // Without a sign-in, the timeout still bounds the start.
        t.write(
            "ws2/agentloop.yaml",
            "mcp:\n  servers:\n    slow:\n      command: sleep\n      args: ['30']\n      startup_timeout: 1s\n",
        );
        let out = t.cmd().args(["-w", "ws2", "mcp", "list", "--refresh", "--login"]).output().unwrap();
        assert!(
            stdout(&out).contains("startup_timeout") || stderr(&out).contains("startup_timeout"),
            "{}",
            stderr(&out)
        );
        // A server that is never satisfied: each command that signs in stops after 3 sign-ins
        // and says so.
        let quick = t.path("quick.sh");
        std::fs::write(&quick, "#!/bin/sh\nexec curl -s -o /dev/null -L \"$1\"\n").unwrap();
        std::fs::set_permissions(&quick, std::fs::Permissions::from_mode(0o755)).unwrap();
        t.write(
            "ws3/agentloop.yaml",
            &format!("mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:{other}/mcp\n"),
        );
        let authorizations = || lines(&t, "b.jsonl").iter().filter(|l| l["oauth"] == "GET /authorize").count();
        for (i, args) in [
            vec!["mcp", "list", "--refresh", "--login"],
            vec!["mcp", "call", "--login", "web", "echo", "--args", r#"{"text": "hi"}"#],
            vec!["mcp", "check", "--login"],
        ]
        .into_iter()
        .enumerate()
        {
            let out = t.cmd().args(["-w", "ws3"]).args(&args).env("BROWSER", &quick).output().unwrap();
            // (`mcp list` reports a failing server and goes on: exit 0.)
            if args[1] != "list" {
                assert_ne!(out.status.code(), Some(0), "{args:?}");
            }
            let said = format!("{}{}", stdout(&out), stderr(&out));
            assert!(said.contains("(gave up after 3 sign-ins)"), "{args:?}: {said}");
            assert_eq!(authorizations(), 3 * (i + 1), "{args:?}");
        }
    }));
    for c in [&mut slow, &mut never] {
        let _ = c.kill();
        let _ = c.wait();
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// A server whose authorization endpoint is not a web address (`file:`, `javascript:`, `data:`,
/// an operating system's handler) is refused: `$BROWSER` is never handed it, and the address
/// is not printed for a person to open.
#[test]
fn only_a_web_address_is_opened_to_sign_in() {
    use std::os::unix::fs::PermissionsExt;
    for endpoint in ["file:///etc/passwd", "javascript:alert(1)", "data:text/html,hi", "ms-settings:privacy"] {
        let t = T::new();
        let (mut server, port) = oauth_server_with(&t, "a.jsonl", &[("FAKE_MCP_OAUTH_AUTHORIZE", endpoint)]);
        t.write("browser.sh", &format!("#!/bin/sh\necho \"$1\" > {}\n", t.path("opened").display()));
        std::fs::set_permissions(t.path("browser.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        t.write("ws/agentloop.yaml", &format!("mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:{port}/mcp\n"));
        let out = t.al(&["mcp", "login", "web"]).env("BROWSER", t.path("browser.sh")).output().unwrap();
        let _ = server.kill();
        let _ = server.wait();
        assert_ne!(out.status.code(), Some(0), "{endpoint}: {}", stderr(&out));
        let scheme = endpoint.split(':').next().unwrap();
        let err = stderr(&out);
        assert!(err.contains(&format!("its authorization endpoint is a `{scheme}:` address, not http(s)")), "{err}");
        assert!(!err.contains(endpoint), "{endpoint} was shown: {err}");
        assert!(!t.exists("opened"), "{endpoint}: $BROWSER was started");
    }
}

/// A token is bound to the authorization server that issued it, even where that server names
/// no issuer (a 2025-03-26 server found by its default endpoints): when the MCP server later
/// names another authorization server, the kept refresh token is discarded, never sent there.
#[test]
fn a_kept_token_never_goes_to_an_authorization_server_that_did_not_issue_it() {
    use std::os::unix::fs::PermissionsExt;
    let t = T::new();
    let moved = t.path("moved");
    let moved_env = moved.display().to_string();
    let (mut a, port) = oauth_server_with(
        &t,
        "a.jsonl",
        &[("FAKE_MCP_OAUTH_NO_PRM", "1"), ("FAKE_MCP_OAUTH_NO_ASM", "1"), ("FAKE_MCP_OAUTH_MOVED", &moved_env)],
    );
    let (mut b, other) = oauth_server(&t, "b.jsonl");
    t.write("browser.sh", "#!/bin/sh\nexec curl -s -o /dev/null -L \"$1\"\n");
    std::fs::set_permissions(t.path("browser.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let browser = t.path("browser.sh").display().to_string();
    t.write("ws/agentloop.yaml", &format!("mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:{port}/mcp\n"));
    let call =
        || t.cmd().args(["-w", "ws", "mcp", "call", "web", "echo", "--args", r#"{"text": "hi"}"#]).output().unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let out = t.cmd().args(["-w", "ws", "mcp", "login", "web"]).env("BROWSER", &browser).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let steps: Vec<String> =
            lines(&t, "a.jsonl").iter().filter_map(|l| l["oauth"].as_str().map(str::to_string)).collect();
        assert!(steps.iter().any(|s| s == "POST /token"), "{steps:?}");
        // The kept token names the authorization server it came from: A's token endpoint.
        let store = t.path("home/.local/state/agentloop/mcp-auth");
        let kept = files_holding(&store, "refresh-1");
        assert_eq!(kept.len(), 1, "{kept:?}");
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&kept[0]).unwrap()).unwrap();
        assert_eq!(file["authority"], format!("http://127.0.0.1:{port}/token"));
        let out = call();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        // The server now names B as its authorization server and drops its access tokens.
        std::fs::write(&moved, format!("http://127.0.0.1:{other}")).unwrap();
        let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        std::io::Write::write_all(&mut s, b"GET /fake/expire HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let _ = std::io::Read::read_to_end(&mut s, &mut vec![]);
        let out = call();
        assert_eq!(out.status.code(), Some(6), "{}", stdout(&out));
        assert!(stderr(&out).contains("the token was discarded"), "{}", stderr(&out));
        assert!(stdout(&out).contains("agentloop mcp login web"), "{}", stdout(&out));
        // B never saw the refresh token (nor any token request), and the token is gone.
        let seen = std::fs::read_to_string(t.path("b.jsonl")).unwrap_or_default();
        assert!(!seen.contains("refresh-1") && !seen.contains("POST /token"), "{seen}");
        assert!(files_holding(&store, "refresh-1").is_empty());
    }));
    let _ = a.kill();
    let _ = b.kill();
    let _ = a.wait();
    let _ = b.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
