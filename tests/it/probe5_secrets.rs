//! Hostile probe round 5 (issue 51), the holes around evidence and secrets: a held `finish` is
//! no evidence; every field of a queue message is bounded; every command that shows
//! configuration masks it one way; every secret agentloop holds or hands out is redacted; serve's
//! token file is out of the tools' reach.

use crate::common::*;
use serde_json::Value;

/// The probe's script: `finish` at once (held: report.md does not exist), then Reflect cites
/// that step for "report.md exists" and says done; then the work, and a tick it can back.
const HELD_FINISH_FRAME: &str = r#"frame:
  - answer: {goal: write the report, definition_of_done: [report.md exists, the report is short, the report is plain], can_proceed: true}
plan:
  - answer: {next_action: {tool: finish, args: {summary: report written}}, rationale: done already}
"#;

fn held_finish_checks(t: &T, out: &std::process::Output) {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let trace = t.trace();
    let refused: Vec<&Value> = trace.iter().filter(|e| e["event"] == "tick.refused").collect();
    assert_eq!(refused.len(), 3, "{trace:?}");
    assert_eq!(refused[0]["data"]["reasons"], serde_json::json!(["step 1's action failed"]), "{:?}", refused[0]);
    let result = t.json("ws/result.json");
    assert_eq!(result["status"], "done", "{result}");
    // The item is ticked by the step that wrote the file, never by the held finish.
    let dod = &result["definition_of_done"][0];
    assert_eq!(dod["evidence"]["steps"], serde_json::json!([2]), "{result}");
    assert_eq!(t.read("ws/report.md"), "the report");
}

/// (6) The held `finish` cited as evidence is refused: the run goes on, writes report.md, and
/// ends done only on that step's evidence.
#[test]
fn a_held_finish_is_no_evidence() {
    let t = T::new();
    let probe = T::new();
    // The probe as filed: finish at once, cite the held step, done. The run is not done.
    probe.write(
        "script.yaml",
        &format!(
            "{HELD_FINISH_FRAME}reflect:\n  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], decision: done, reason: report written}}\n"
        ),
    );
    let out = probe.al(&["--script", "script.yaml", "run", "--goal", "write the report"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!probe.exists("ws/report.md"));
    assert_ne!(probe.json("ws/result.json")["status"], "done");
    assert!(!probe.read("ws/memory.md").contains("[x]"), "{}", probe.read("ws/memory.md"));

    t.write(
        "script.yaml",
        &format!(
            r#"{HELD_FINISH_FRAME}  - answer: {{next_action: {{tool: file_write, args: {{path: report.md, content: the report}}}}, rationale: write it}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], decision: done, reason: report written}}
  - answer: {{satisfied: [{{item: 1, steps: [2], artifacts: [report.md]}}, {{item: 2, steps: [2]}}, {{item: 3, steps: [2]}}], decision: done, reason: report written}}
"#
        ),
    );
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "write the report"]).output().unwrap();
    held_finish_checks(&t, &out);
}

/// (6) The same through the fused Reflect+Plan call.
#[test]
fn a_held_finish_is_no_evidence_when_fused() {
    let t = T::new();
    t.write("fused.yaml", "llm:\n  fuse_phases: true\n");
    t.write(
        "script.yaml",
        &format!(
            r#"{HELD_FINISH_FRAME}reflect+plan:
  - answer:
      reflect: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], decision: done, reason: report written}}
      plan: {{next_action: {{tool: file_write, args: {{path: report.md, content: the report}}}}, rationale: write it}}
  - answer:
      reflect: {{satisfied: [{{item: 1, steps: [2], artifacts: [report.md]}}, {{item: 2, steps: [2]}}, {{item: 3, steps: [2]}}], decision: done, reason: report written}}
"#
        ),
    );
    let out = t
        .al(&["--script", "script.yaml", "--config", "fused.yaml", "run", "--goal", "write the report"])
        .output()
        .unwrap();
    held_finish_checks(&t, &out);
    assert!(t.trace().iter().any(|e| e["data"]["fused"] == true));
}

/// Every secret the probe put in a configuration, each a value no output may hold.
const SECRETS: &[&str] = &[
    "DUCTILETOKEN1234",
    "HOOKPATHSECRET1",
    "PROGRESSTOKEN123",
    "BASEPASSWORD1",
    "QUERYSECRET1",
    "MCPHEADER123",
    "OAUTHSECRET123",
    "OTELHEADER1234",
    "ARGBEARER123",
    "APIKEYFLAG12",
    "PWSECRET123",
    "BEARERFLAG123",
    "USERPASS123",
    "AUTHVAR12345",
    "CURLBEARER12",
    "MCPARGBEARER1",
    "SECRETU111",
    "SECRETQ777",
];

const SECRET_CONFIG: &str = r#"ductile: {api_url: "http://127.0.0.1:9", api_token: DUCTILETOKEN1234}
handle: {progress_url: "https://hooks.example/HOOKPATHSECRET1", progress_token: PROGRESSTOKEN123}
llm:
  provider: openai
  base_url: "https://u:BASEPASSWORD1@h.example/v1?key=QUERYSECRET1"
  api_key_cmd: [sh, -c, "curl -s -H 'Authorization: Bearer CURLBEARER12' https://vault.example/key"]
otel: {endpoint: "http://127.0.0.1:9", headers: {x-key: OTELHEADER1234}}
tools:
  external:
    fetch:
      description: Fetch a page.
      command: "AUTH=AUTHVAR12345 fetcher --apikey APIKEYFLAG12 --pw PWSECRET123 --bearer BEARERFLAG123 -u bob:USERPASS123"
      parameters: {type: object, properties: {url: {type: string}}}
    curl:
      description: The same, as curl attaches an option's value.
      command: "curl -uuser:SECRETU111 '-HAuthorization: Basic SECRETQ777' https://x"
      parameters: {type: object}
mcp:
  servers:
    web:
      url: "https://mcp.example/mcp"
      headers: {Authorization: "Bearer MCPHEADER123"}
      oauth: {client_id: c, client_secret: OAUTHSECRET123}
    local:
      command: srv
      args: ["-H", "Authorization: Bearer ARGBEARER123", "--header=Authorization: Bearer MCPARGBEARER1"]
"#;

fn no_secret(what: &str, out: &std::process::Output) {
    assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(out));
    let all = stdout(out) + &stderr(out);
    for s in SECRETS {
        assert!(!all.contains(s), "{what} shows {s}:\n{all}");
    }
    assert!(all.contains("[hidden]"), "{what}: {all}");
}

/// (8) `agents show` (text and `--json`) and `config show` mask alike: the Ductile token, the
/// progress webhook, a base_url password and query, MCP headers and client secret, OTel headers,
/// and the credentials in commands and MCP args whatever their spelling.
#[test]
fn every_command_that_shows_configuration_masks_it() {
    let t = T::new();
    t.write("ws/agentloop.yaml", SECRET_CONFIG);
    t.write("ws/agents/r.yaml", &format!("description: a profile with secrets\n{SECRET_CONFIG}"));
    for args in [
        &["config", "show"][..],
        &["config", "show", "--json"],
        &["agents", "show", "r"],
        &["agents", "show", "r", "--json"],
        &["agents", "show", "default"],
        &["agents", "show", "default", "--json"],
    ] {
        let out = t.al(args).output().unwrap();
        no_secret(&args.join(" "), &out);
    }
    let out = t.al(&["config", "show"]).output().unwrap();
    let text = stdout(&out);
    // What is not secret stays: the option names, the user, the host.
    assert!(text.contains("--apikey [hidden] --pw [hidden] --bearer [hidden] -u bob:[hidden]"), "{text}");
    assert!(text.contains("Authorization: Bearer [hidden]"), "{text}");
    assert!(text.contains("https://u:[hidden]@h.example/v1?[hidden]"), "{text}");
}

/// (8) A configuration error about a value of the wrong type does not echo a command that
/// prints a secret, nor a secret.
#[test]
fn a_wrong_type_error_echoes_no_command_or_secret() {
    let t = T::new();
    for (config, secret) in [
        ("llm: {api_key_cmd: \"echo APIKEYCMDSECRET1\"}\n", "APIKEYCMDSECRET1"),
        ("ductile: {api_token: [TOKENINALIST12]}\n", "TOKENINALIST12"),
        ("handle: {progress_token: {t: NESTEDTOKEN123}}\n", "NESTEDTOKEN123"),
        ("mcp: {servers: {m: {command: x, env: \"FOO=SECRETW6\"}}}\n", "SECRETW6"),
    ] {
        t.write("ws/agentloop.yaml", config);
        let out = t.al(&["config", "show"]).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{config}: {err}");
        assert!(err.contains("invalid configuration"), "{err}");
        assert!(!err.contains(secret) && !stdout(&out).contains(secret), "{config}: {err}");
    }
    // A value that holds no secret is still echoed, to help the fix.
    t.write("ws/agentloop.yaml", "max_steps: many\n");
    let err = stderr(&t.al(&["config", "show"]).output().unwrap());
    assert!(err.contains("invalid type: string \"many\", expected u32"), "{err}");
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &std::path::Path, needle: &str) -> Vec<String> {
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

/// (11) An MCP access token kept by agentloop is a registered secret: echoed back in a tool
/// result, it reaches no file of the workspace (transcript.md, trace.jsonl, plan.md, the spare
/// copies). (Also seen) the token folder is owner-only.
#[test]
fn an_mcp_access_token_echoed_by_its_server_is_redacted() {
    use std::os::unix::fs::PermissionsExt;
    let t = T::new();
    let port_file = t.path("mcp.port");
    let mut server = std::process::Command::new("python3")
        .arg(crate::mcp::fake_server())
        .arg("--http")
        .arg(&port_file)
        .env("FAKE_MCP_LOG", t.path("mcp.jsonl"))
        .env("FAKE_MCP_OAUTH", "1")
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 runs the fake server");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert!(crate::mcp::wait_for(|| port_file.exists(), std::time::Duration::from_secs(20)));
        let port = std::fs::read_to_string(&port_file).unwrap();
        t.write(
            "ws/agentloop.yaml",
            &format!("mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:{port}/mcp\n      oauth: {{grant: client_credentials, client_id: cc-client, client_secret: '${{CC_SECRET}}'}}\n"),
        );
        // The machine grant gets `access-1` and keeps it.
        let out = t
            .al(&["mcp", "call", "web", "echo", "--args", r#"{"text": "hi"}"#])
            .env("CC_SECRET", "cc-secret")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let store = t.path("home/.local/state/agentloop/mcp-auth");
        assert_eq!(files_holding(&store, "access-1").len(), 1);
        assert_eq!(std::fs::metadata(&store).unwrap().permissions().mode() & 0o777, 0o700);
        // A run whose server echoes the token back.
        t.write(
            "script.yaml",
            r#"frame:
  - answer: {goal: ask the server, definition_of_done: [asked, answered, noted], can_proceed: true}
plan:
  - answer: {next_action: {tool: web__echo, args: {text: "the token is access-1"}}, rationale: ask}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: answered, outcome: answered}
"#,
        );
        let out = t
            .al(&["--script", "script.yaml", "run", "--goal", "ask the server"])
            .env("CC_SECRET", "cc-secret")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let transcript = t.read("ws/transcript.md");
        assert!(transcript.contains("echo: the token is [REDACTED]"), "{transcript}");
        assert_eq!(files_holding(&t.path("ws"), "access-1"), Vec::<String>::new());
        assert!(!stdout(&out).contains("access-1") && !stderr(&out).contains("access-1"));
    }));
    let _ = server.kill();
    let _ = server.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// (15) A served run cannot read serve's own token: the file tools refuse its file however it
/// is named, the shell's sandbox shows it empty, and with no sandbox (`sandbox: none`) what it
/// prints is redacted; the token reaches neither transcript.md nor trace.jsonl.
#[test]
fn a_served_run_cannot_read_serves_token() {
    use std::os::unix::fs::PermissionsExt;
    for sandbox in ["bwrap", "none"] {
        if sandbox == "bwrap" && which("bwrap").is_none() {
            missing("bwrap (bubblewrap)");
            continue;
        }
        let t = T::new();
        let home = t.path("home");
        let token_file = home.join(".local/state/agentloop/serve-token");
        let token_path = token_file.display().to_string();
        // A link to it in a folder the tools may read: the file tools judge where it leads.
        std::os::unix::fs::symlink(&token_file, home.join("linked-token")).unwrap();
        let linked = home.join("linked-token").display().to_string();
        let script = format!(
            r#"frame:
  - answer: {{goal: read it, definition_of_done: [tried, recorded, noted], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: file_read, args: {{path: "{token_path}"}}}}, rationale: read}}
  - answer: {{next_action: {{tool: list_dir, args: {{}}}}, rationale: look}}
  - answer: {{next_action: {{tool: file_read, args: {{path: "{linked}"}}}}, rationale: read}}
  - answer: {{next_action: {{tool: shell, args: {{argv: [cat, "{token_path}"]}}}}, rationale: read}}
reflect:
  - answer: {{decision: continue, reason: more}}
  - answer: {{decision: continue, reason: more}}
  - answer: {{decision: continue, reason: more}}
  - answer: {{satisfied: [{{item: 1, steps: [2]}}, {{item: 2, steps: [2]}}, {{item: 3, steps: [2]}}], decision: done, reason: tried, outcome: tried}}
"#
        );
        crate::serve::root_with(
            &t,
            &script,
            &format!("tools:\n  read_paths: [\"{}\"]\n  shell: {{enabled: true, allow: [cat]}}\n", home.display()),
        );
        if sandbox == "none" {
            t.write("xdg/agentloop/config.yaml", "sandbox: none\n");
        }
        let s = crate::serve::serve(&t, &["--script", "script.yaml"], &[], None);
        let token = s.token.clone();
        assert_eq!(std::fs::read_to_string(&token_file).unwrap().trim(), token);
        assert_eq!(std::fs::metadata(token_file.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        let r = s.post("/runs", &serde_json::json!({"goal": "read it"}));
        assert_eq!(r.status, 202, "{}", r.body);
        let id = r.json()["run_id"].as_str().unwrap().to_string();
        let run = format!("root/runs/{id}");
        let v = s.finished(&id);
        let transcript = t.read(&format!("{run}/transcript.md"));
        assert_eq!(v["status"], "done", "{sandbox}: {v}\n{}\n{transcript}", s.log());
        let trace = t.read(&format!("{run}/trace.jsonl"));
        for (name, text) in [("transcript.md", &transcript), ("trace.jsonl", &trace)] {
            assert!(!text.contains(&token), "{sandbox}: {name} holds serve's token:\n{text}");
        }
        assert_eq!(files_holding(&t.path("root"), &token), Vec::<String>::new(), "{sandbox}");
        let refusals = trace
            .lines()
            .filter(|l| l.contains("\"event\":\"act\"") && l.contains("agentloop's own store of tokens"))
            .count();
        assert_eq!(refusals, 2, "{sandbox}: both file_reads refused: {trace}");
        // Inside the sandbox the file is not there to read; with none, what cat prints is
        // redacted.
        let step4 = &transcript[transcript.find("step 4 · act").unwrap_or(0)..];
        if sandbox == "none" {
            assert!(step4.contains("[REDACTED]"), "{step4}");
        } else {
            assert!(step4.contains("denied") || step4.contains("exit code: 0"), "{step4}");
        }
    }
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(program)).find(|p| p.is_file()))
}

/// The peak resident memory of a process, in bytes (`VmHWM`).
fn peak_memory(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap_or("0 kB");
    kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0) * 1024
}

/// (7) Every field a queue message carries is bounded, not only `request`: a tiny request with
/// a large field of another name, or many fields adding up, is dead-lettered naming the field
/// (or the whole), measured inside Redis: the worker never holds it. A message within bounds
/// still runs.
#[test]
fn every_field_of_a_queue_message_is_bounded() {
    use redis::Commands;
    let t = T::new();
    let Some(redis) = crate::queue::Redis::start(&t.path("redis")) else { return };
    t.write(
        "script.yaml",
        r#"frame:
  - answer: {goal: look, definition_of_done: [looked, listed, noted], can_proceed: true}
plan:
  - answer: {next_action: {tool: list_dir, args: {}}, rationale: look}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: looked, outcome: looked}
"#,
    );
    t.write("root/agentloop.yaml", "max_steps: 8\n");
    const BLOB: usize = 96 << 20;
    let blob = "x".repeat(BLOB);
    let small = r#"{"goal": "look around"}"#;
    let mut con = redis.con();
    let _: String = con.xadd("agentloop:runs", "*", &[("request", small), ("blob", blob.as_str())]).unwrap();
    drop(blob);
    let many: Vec<(String, String)> = (0..40).map(|i| (format!("f{i}"), "y".repeat(60 << 10))).collect();
    let mut fields = vec![("request".to_string(), small.to_string())];
    fields.extend(many);
    let _: String = con.xadd("agentloop:runs", "*", &fields).unwrap();
    let _: String = con.xadd("agentloop:runs", "*", &[("request", small), ("tag", "ok")]).unwrap();
    let w = crate::queue::worker(&t, &redis, "w1", &[]);
    let start = std::time::Instant::now();
    loop {
        let results: usize = con.xlen("agentloop:results").unwrap();
        if redis.entries("agentloop:dead").len() >= 2 && results >= 1 {
            break;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(120), "{}", w.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let peak = peak_memory(w.child.id());
    let dead = redis.entries("agentloop:dead");
    assert_eq!(
        dead[0].1["reason"],
        format!("the message's field `blob` is {BLOB} bytes, over the limit of 65536 bytes for a field other than `request`"),
        "{dead:?}"
    );
    assert!(dead[1].1["reason"].starts_with("the message is "), "{dead:?}");
    assert!(dead[1].1["reason"].ends_with("bytes in all, over the limit of 1114112 bytes"), "{dead:?}");
    for d in &dead {
        assert_eq!(d.1["request"], "", "a dead letter copies no oversized message");
    }
    assert_eq!(redis.pending(), 0);
    // The worker never held the large field.
    assert!(peak > 0 && peak < (BLOB as u64) / 2, "the worker peaked at {peak} bytes");
}
