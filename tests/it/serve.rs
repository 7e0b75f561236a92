//! `agentloop serve` through real HTTP on 127.0.0.1: the API, the queue, tokens and the rate
//! limit, a restart in the middle of a run, and the served pages in a browser. Nothing is
//! timed: every wait polls with a generous deadline.

use crate::browser;
use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const TOKEN: &str = "test-token-0123456789abcdef";
pub(crate) const DEADLINE: Duration = Duration::from_secs(120);

/// A running `agentloop serve` (killed when dropped).
pub struct Serve {
    pub(crate) child: Child,
    pub url: String,
    pub token: String,
    stderr: std::path::PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agentloop [global] serve --root root --listen 127.0.0.1:0 [args]` in `t` and waits
/// for the line that gives its address. `token`: AGENTLOOP_TOKEN, or None to have one made.
pub fn serve(t: &T, global: &[&str], args: &[&str], token: Option<&str>) -> Serve {
    serve_on(t, "127.0.0.1:0", global, args, token)
}

/// [`serve`] listening on `listen`.
pub fn serve_on(t: &T, listen: &str, global: &[&str], args: &[&str], token: Option<&str>) -> Serve {
    let n = std::fs::read_dir(t.root()).unwrap().count();
    let stderr = t.path(&format!("serve-{n}.err"));
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    cmd.env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("AGENTLOOP_NOW", NOW)
        .current_dir(t.root())
        .args(global)
        .args(["serve", "--root", "root", "--listen", listen])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap());
    if let Some(tok) = token {
        cmd.env("AGENTLOOP_TOKEN", tok);
    }
    let mut child = cmd.spawn().expect("start serve");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut url = None;
    let mut made = None;
    while url.is_none() || (token.is_none() && made.is_none()) {
        let line = rx.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            panic!("serve printed no address: {}", std::fs::read_to_string(&stderr).unwrap_or_default())
        });
        if let Some(u) = line.strip_prefix("listening on ") {
            url = Some(u.to_string());
        }
        if let Some(tok) = line.strip_prefix("token ") {
            made = Some(tok.to_string());
        }
    }
    Serve { child, url: url.unwrap(), token: token.map(String::from).or(made).unwrap(), stderr }
}

pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    pub fn header(&self, k: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(k)).map(|(_, v)| v.as_str())
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(DEADLINE))
        .build()
        .into()
}

impl Serve {
    pub(crate) fn call(&self, method: &str, path: &str, body: Option<&str>, token: Option<&str>) -> Resp {
        let url = format!("{}{path}", self.url);
        let a = agent();
        let auth = token.map(|t| format!("Bearer {t}"));
        let result = match (method, body) {
            ("GET", _) => {
                let mut r = a.get(&url);
                if let Some(h) = &auth {
                    r = r.header("Authorization", h);
                }
                r.call()
            }
            (m, body) => {
                let mut r = match m {
                    "POST" => a.post(&url),
                    "PUT" => a.put(&url),
                    other => panic!("method {other}"),
                };
                if let Some(h) = &auth {
                    r = r.header("Authorization", h);
                }
                r.send(body.unwrap_or(""))
            }
        };
        let mut resp = result.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let headers =
            resp.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
        let status = resp.status().as_u16();
        let body = resp.body_mut().read_to_string().unwrap_or_default();
        Resp { status, headers, body }
    }
    pub fn get(&self, path: &str) -> Resp {
        self.call("GET", path, None, Some(&self.token))
    }
    pub fn post(&self, path: &str, body: &Value) -> Resp {
        self.call("POST", path, Some(&body.to_string()), Some(&self.token))
    }
    /// Polls GET /runs/{id} until `ok` holds.
    pub fn wait_for(&self, id: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let r = self.get(&format!("/runs/{id}"));
            assert_eq!(r.status, 200, "GET /runs/{id}: {}\n{}", r.body, self.log());
            let v = r.json();
            if ok(&v) {
                return v;
            }
            assert!(start.elapsed() < DEADLINE, "run {id} never became {what}: {v}\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    pub fn finished(&self, id: &str) -> Value {
        self.wait_for(id, "finished", |v| v["status"] != "running" && v["queue"].is_null())
    }
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// A run that ends done in one step: a look at the root backs every tick.
pub(crate) const QUICK: &str = r#"frame:
  - answer: {goal: g, definition_of_done: [read, written, noted], can_proceed: true}
    usage: {input_tokens: 100, output_tokens: 20}
    model: claude-sonnet-4-5
plan:
  - answer: {next_action: {tool: list_dir, args: {}}, rationale: look around}
    usage: {input_tokens: 200, output_tokens: 30}
    model: claude-sonnet-4-5
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: summarised}
    usage: {input_tokens: 300, output_tokens: 40}
    model: claude-sonnet-4-5
"#;

pub fn root_with(t: &T, script: &str, config: &str) {
    t.write("script.yaml", script);
    t.write("root/agentloop.yaml", config);
}

#[test]
pub(crate) fn the_api_starts_lists_follows_and_reports_runs() {
    let t = T::new();
    root_with(&t, QUICK, "max_steps: 8\ntools: {http: {allow_private: true}}\n");
    t.write("root/agents/brief.yaml", "description: Short answers\nsystem_prompt: Be brief.\nmax_steps: 4\n");
    let skill_host = Server::start_with(|_, r| {
        match r.url.as_str() {
        "/digest.md" => Reply::text(200, "text/markdown", "---\nname: digest\ndescription: Digest a feed into five bullets\n---\n# Digest\nRead, then list five bullets.\n"),
        _ => Reply::text(404, "text/plain", "no"),
    }
    });
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    // Health needs no token; everything else does.
    let h = s.call("GET", "/health", None, None);
    assert_eq!((h.status, h.json()["status"].clone()), (200, json!("healthy")));
    let r = s.call("GET", "/runs", None, None);
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"agentloop\""));
    assert_eq!(s.call("GET", "/runs", None, Some("wrong-token-0123456789")).status, 401);
    assert_eq!(s.call("POST", "/runs", Some(r#"{"goal": "x"}"#), Some("wrong-token-0123456789")).status, 401);
    // Start a run: 202 with its id; it runs and ends done.
    let r = s.post("/runs", &json!({"goal": "Summarise the notes", "context": {"audience": "ops"}, "agent": "brief", "budgets": {"max_steps": 3, "timeout": "10m"}}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(r.header("location"), Some(format!("/runs/{id}").as_str()));
    let v = s.finished(&id);
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(v["served"], true);
    assert_eq!(v["limits_recorded"]["max_steps"], 3, "budgets narrow the limits");
    assert_eq!(v["limits_recorded"]["timeout_secs"], 600);
    assert!(t.read(&format!("root/runs/{id}/context.md")).contains("\"audience\": \"ops\""));
    // The same run through the CLI: it is a workspace like any other.
    let out = t.cmd().args(["-w", "root", "runs", "--json"]).output().unwrap();
    assert!(stdout(&out).contains(&id));
    // The trace as JSONL, and as server-sent events that end when the run has.
    let trace = s.get(&format!("/runs/{id}/trace"));
    assert_eq!(trace.header("content-type"), Some("application/x-ndjson"));
    let lines: Vec<Value> = trace.body.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.last().unwrap()["event"], "run.finished");
    let events = s.get(&format!("/runs/{id}/trace?follow=1"));
    assert_eq!(events.header("content-type"), Some("text/event-stream"));
    let data: Vec<&str> = events.body.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.len(), lines.len() + 1, "one event per line, then `end`: {}", events.body);
    assert!(events.body.contains(&format!("event: end\ndata: {{\"lines\": {}}}", lines.len())));
    // A client that reconnects with Last-Event-ID gets only what it missed.
    let mut r = agent()
        .get(&format!("{}/runs/{id}/trace?follow=1", s.url))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .header("Last-Event-ID", &(lines.len() - 2).to_string())
        .call()
        .unwrap();
    let rest = r.body_mut().read_to_string().unwrap();
    assert_eq!(rest.matches("data: ").count(), 3, "{rest}");
    assert!(rest.starts_with(&format!("id: {}\n", lines.len() - 1)), "{rest}");
    // The list, the report, the files it links to.
    let list = s.get("/runs").json();
    assert_eq!(list["runs"][0]["run_id"], id.as_str());
    let page = s.get(&format!("/runs/{id}/report"));
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(page.header("content-security-policy").unwrap().contains("default-src 'none'"));
    assert!(page.body.contains("<h1 id=\"goal\">Summarise the notes</h1>"));
    let f = s.get(&format!("/runs/{id}/files/memory.md"));
    assert_eq!((f.status, f.header("content-type")), (200, Some("text/plain; charset=utf-8")));
    assert_eq!(s.get(&format!("/runs/{id}/files/artifacts/..%2Fstate.json")).status, 404);
    assert_eq!(s.get(&format!("/runs/{id}/files/.agentloop.lock")).status, 404);
    // Skills and agents.
    let skills = s.get("/skills").json();
    assert!(skills["skills"].as_array().unwrap().iter().any(|k| k["name"] == "critique"), "{skills}");
    let r = s.post("/skills/fetch", &json!({"id": "digest", "url": format!("{}/digest.md", skill_host.url)}));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["description"], "Digest a feed into five bullets");
    assert!(t.exists("root/skills/digest/skill.md") && t.exists("root/skills/registry.json"));
    let skills = s.get("/skills").json();
    assert!(skills["skills"].as_array().unwrap().iter().any(|k| k["name"] == "digest"), "{skills}");
    let digest = skills["skills"].as_array().unwrap().iter().find(|k| k["name"] == "digest").unwrap();
    assert_eq!((&digest["id"], &digest["enabled"]), (&json!("digest"), &json!(true)), "{digest}");
    let r = s.post("/skills/fetch", &json!({"id": "gone", "url": format!("{}/gone.md", skill_host.url)}));
    assert_eq!(r.status, 502, "{}", r.body);
    assert_eq!(s.post("/skills/fetch", &json!({"id": "x", "url": "file:///etc/passwd"})).status, 400);
    assert_eq!(s.post("/skills/fetch", &json!({"id": "../x", "url": "http://127.0.0.1/"})).status, 400);
    let agents = s.get("/agents").json();
    assert_eq!(agents["agents"][0]["name"], "brief");
    assert_eq!(agents["agents"][0]["description"], "Short answers");
    // Bad requests name what is wrong; nothing is created for them.
    let bad = |body: &str, status: u16, says: &str| {
        let r = s.call("POST", "/runs", Some(body), Some(TOKEN));
        assert_eq!(r.status, status, "{body}: {}", r.body);
        assert!(r.json()["error"].as_str().unwrap().contains(says), "{body}: {}", r.body);
    };
    bad(
        r#"{"goal": "x", "tools": {}, "budgets": {"max_steps": 2, "llm": {"base_url": "http://x"}}}"#,
        400,
        "`tools`, `budgets.llm`",
    );
    bad(r#"{"goal": "x", "allowed_tools": ["shell"]}"#, 400, "`allowed_tools`");
    bad(r#"{"goal": "x", "budgets": {"max_steps": 9}}"#, 400, "budgets.max_steps: 9 is above the root's 8 (set by");
    bad(r#"{"goal": "x", "budgets": {"max_steps": "many"}}"#, 400, "budgets.max_steps");
    bad(r#"{"goal": "x", "budgets": {"max_cost_usd": -1}}"#, 400, "max_cost_usd");
    bad(r#"{"goal": "x", "agent": "nope"}"#, 400, "agent profile `nope` not found");
    bad(r#"{"goal": "   "}"#, 400, "`goal` is required");
    bad(r#"{"goal": "#, 400, "not valid JSON");
    // As `curl -d` sends it (typed as a form): still answered as the JSON it was meant to be.
    let out = std::process::Command::new("curl")
        .args(["-s", "-H", &format!("Authorization: Bearer {TOKEN}"), "-d", "{bad json", &format!("{}/runs", s.url)])
        .output()
        .expect("curl runs");
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(answer.contains("not valid JSON") && !answer.contains("has no field"), "{answer}");
    bad(r#"["goal"]"#, 400, "must be a JSON object");
    bad("", 400, "empty");
    bad(&format!("{{\"goal\": \"{}\"}}", "x".repeat(1024 * 1024 + 10)), 413, "larger than");
    assert_eq!(s.get("/runs").json()["runs"].as_array().unwrap().len(), 1, "refused requests created nothing");
    // Garbage on the socket gets an HTTP error, and the server goes on.
    let addr = s.url.trim_start_matches("http://").to_string();
    for junk in [
        &b"NOT HTTP AT ALL\r\n\r\n"[..],
        b"GET /runs HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
        b"\xff\xfe\x00\r\n\r\n",
    ] {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(DEADLINE)).unwrap();
        std::io::Write::write_all(&mut c, junk).unwrap();
        let _ = c.shutdown(std::net::Shutdown::Write);
        let mut answer = String::new();
        let _ = std::io::Read::read_to_string(&mut c, &mut answer);
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 4"), "{answer}");
    }
    assert_eq!(s.call("GET", "/health", None, None).status, 200);
    let r = s.call("GET", "/runs/%ff", None, Some(TOKEN));
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(s.get("/runs/NOPE").status, 404);
    assert_eq!(s.get("/runs/..%2F..%2Fetc").status, 404);
    assert_eq!(s.get("/nowhere").status, 404);
    let r = s.call("PUT", "/runs", Some("{}"), Some(TOKEN));
    assert_eq!((r.status, r.header("allow")), (405, Some("GET, POST")));
    // A done run has no question to answer and nothing to continue.
    let r = s.post(&format!("/runs/{id}/answer"), &json!({"answer": "yes"}));
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(s.post(&format!("/runs/{id}/answer"), &json!({"text": "yes"})).status, 400);
    assert_eq!(s.post(&format!("/runs/{id}/continue"), &json!({})).status, 409);
}

pub const ASKS: &str = r#"frame:
  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: false, open_question: "Which year's figures?"}
  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}
plan:
  - answer: {next_action: {tool: list_dir, args: {}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: answered, outcome: used the 2024 figures}
"#;

#[test]
pub(crate) fn serve_over_a_cli_workspace_lists_and_serves_its_current_run() {
    let t = T::new();
    root_with(&t, QUICK, "");
    // Two runs made by the CLI: the first archived under runs/, the second the root's own.
    for goal in ["first", "second"] {
        let out = t.cmd().args(["-w", "root", "--script", "script.yaml", "run", "--goal", goal]).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = t.cmd().args(["-w", "root", "runs", "--json"]).output().unwrap();
    let cli: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let id = cli.iter().find(|r| r["current"] == true).expect("a current run")["run_id"].as_str().unwrap().to_string();
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    // GET /runs lists what `runs` lists, the current run too.
    let listed = s.get("/runs").json()["runs"].as_array().unwrap().clone();
    let shown = |rows: &[Value]| -> Vec<Value> {
        let keys = ["run_id", "status", "current", "steps_taken", "goal", "started_at", "finished_at"];
        rows.iter().map(|r| keys.iter().map(|k| (k.to_string(), r[*k].clone())).collect()).collect()
    };
    assert_eq!(shown(&listed), shown(&cli), "{listed:?}");
    assert_eq!(cli.len(), 2);
    // Its status, trace, report and files are served from the root.
    let v = s.get(&format!("/runs/{id}")).json();
    assert_eq!(
        (v["run_id"].as_str(), v["status"].as_str(), &v["served"]),
        (Some(id.as_str()), Some("done"), &json!(false))
    );
    let r = s.get(&format!("/runs/{id}/trace"));
    assert_eq!((r.status, r.body.as_str()), (200, t.read("root/trace.jsonl").as_str()));
    let r = s.get(&format!("/runs/{id}/trace?follow=1"));
    assert!(r.body.contains("run.finished") && r.body.contains("event: end"), "{}", r.body);
    let r = s.get(&format!("/runs/{id}/report"));
    assert!(r.status == 200 && r.body.contains("second"), "{}", r.body);
    assert_eq!(s.get(&format!("/runs/{id}/files/result.json")).json()["status"], "done");
    assert!(s.get("/").body.contains(&format!("/runs/{id}/report")));
    // A done run has nothing to continue, whoever started it (serve_doors:: goes on with the
    // root's escalated and stopped runs)...
    let r = s.post(&format!("/runs/{id}/continue"), &json!({}));
    assert_eq!(r.status, 409, "{}", r.body);
    // ...and the server holds the root's lock: a CLI run there waits for the server to stop.
    let out = t.cmd().args(["-w", "root", "--script", "script.yaml", "run", "--goal", "third"]).output().unwrap();
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
}

#[test]
pub(crate) fn an_escalated_run_is_answered_over_http() {
    let t = T::new();
    root_with(&t, ASKS, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = s.post("/runs", &json!({"goal": "Report the figures"})).json()["run_id"].as_str().unwrap().to_string();
    let v = s.finished(&id);
    assert_eq!((v["status"].as_str(), v["open_question"].as_str()), (Some("escalated"), Some("Which year's figures?")));
    let r = s.post(&format!("/runs/{id}/answer"), &json!({"answer": "Use the 2024 figures"}));
    assert_eq!(r.status, 202, "{}", r.body);
    let v = s.finished(&id);
    assert_eq!(v["status"], "done", "{v}");
    let trace = t.read(&format!("root/runs/{id}/trace.jsonl"));
    let answered: Value = trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "run.answered")
        .unwrap();
    assert_eq!(answered["data"]["answer"], "Use the 2024 figures");
}

/// A fake slow service: requests wait while `hold` is set (at most two minutes).
pub(crate) fn gate() -> (Server, Arc<AtomicBool>) {
    let hold = Arc::new(AtomicBool::new(true));
    let h = hold.clone();
    let server = Server::start_with(move |_, _| {
        let start = Instant::now();
        while h.load(Ordering::SeqCst) && start.elapsed() < DEADLINE {
            std::thread::sleep(Duration::from_millis(20));
        }
        Reply::text(200, "text/plain", "the slow answer")
    });
    (server, hold)
}

pub(crate) fn wait_until(what: &str, s: &Serve, ok: impl Fn() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < DEADLINE, "{what} did not happen:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
pub(crate) fn a_full_queue_answers_503_and_tokens_are_rate_limited() {
    let t = T::new();
    let (slow, hold) = gate();
    root_with(&t, &slow_script(&slow.url), "tools: {http: {allow_private: true}}\n");
    let s = serve(&t, &["--script", "script.yaml"], &["--workers", "1", "--queue", "1"], Some(TOKEN));
    // One worker and one place: the first run takes the worker, the second waits, the third
    // is refused before anything is created.
    let a = s.post("/runs", &json!({"goal": "first"}));
    let b = s.post("/runs", &json!({"goal": "second"}));
    assert_eq!((a.status, b.status), (202, 202), "{} {}", a.body, b.body);
    let c = s.post("/runs", &json!({"goal": "third"}));
    assert_eq!(c.status, 503, "{}", c.body);
    assert_eq!(c.header("retry-after"), Some("10"));
    assert!(c.json()["error"].as_str().unwrap().contains("the queue is full"));
    assert_eq!(std::fs::read_dir(t.path("root/runs")).unwrap().count(), 2, "the refused run was not created");
    // The second run follows live: its stream sees every entry until the end.
    let bid = b.json()["run_id"].as_str().unwrap().to_string();
    let url = format!("{}/runs/{bid}/trace?follow=1", s.url);
    let follower = std::thread::spawn(move || {
        let mut r = agent().get(&url).header("Authorization", &format!("Bearer {TOKEN}")).call().unwrap();
        r.body_mut().read_to_string().unwrap()
    });
    wait_until("the slow service is called", &s, || slow.count() >= 1);
    hold.store(false, Ordering::SeqCst);
    let aid = a.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&aid)["status"], "done");
    assert_eq!(s.finished(&bid)["status"], "done");
    let events = follower.join().unwrap();
    let lines = t.read(&format!("root/runs/{bid}/trace.jsonl")).lines().count();
    assert_eq!(events.matches("\ndata: ").count() + events.starts_with("data: ") as usize, lines + 1, "{events}");
    assert!(events.contains("\"event\":\"run.finished\"") && events.contains("event: end"));
    // A generated token; three requests an hour: the fourth waits (429, Retry-After).
    let u = T::new();
    root_with(&u, QUICK, "");
    let s = serve(&u, &["--script", "script.yaml"], &["--rate-limit", "3/1h"], None);
    assert_eq!(s.token.len(), 48);
    for _ in 0..3 {
        assert_eq!(s.get("/runs").status, 200);
    }
    let r = s.get("/runs");
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(r.header("retry-after").unwrap().parse::<u64>().unwrap() > 0);
    assert_eq!(s.call("GET", "/health", None, None).status, 200, "health is not limited");
}

#[test]
pub(crate) fn a_run_a_worker_gave_up_on_is_continued() {
    let t = T::new();
    let (slow, hold) = gate();
    root_with(&t, &slow_script(&slow.url), "tools: {http: {allow_private: true}}\n");
    let s = serve(&t, &["--script", "script.yaml", "--wait", "1"], &["--workers", "1"], Some(TOKEN));
    let a = s.post("/runs", &json!({"goal": "first"})).json()["run_id"].as_str().unwrap().to_string();
    let b = s.post("/runs", &json!({"goal": "second"})).json()["run_id"].as_str().unwrap().to_string();
    // Someone else holds the second run's lock when the worker comes to it.
    let held = std::fs::File::open(t.path(&format!("root/runs/{b}/.agentloop.lock"))).unwrap();
    held.try_lock().unwrap();
    hold.store(false, Ordering::SeqCst);
    assert_eq!(s.finished(&a)["status"], "done");
    let v = s.wait_for(&b, "given up", |v| !v["worker_error"].is_null());
    assert!(v["worker_error"].as_str().unwrap().contains("is locked by"), "{v}");
    assert_eq!((v["status"].as_str(), v["queue"].is_null()), (Some("running"), true));
    drop(held);
    let r = s.post(&format!("/runs/{b}/continue"), &json!({}));
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(s.finished(&b)["status"], "done");
}

/// Two runs driven at once by two workers of one process: each commits through its own lock's
/// session (its journal holds only its own records, and each is checkpointed when its run ends),
/// and each run's hints name its own folder.
#[test]
pub(crate) fn two_workers_drive_two_runs_each_with_its_own_session() {
    let t = T::new();
    let (slow, hold) = gate();
    root_with(&t, &slow_script(&slow.url), "tools: {http: {allow_private: true}}\n");
    let s = serve(&t, &["--script", "script.yaml"], &["--workers", "2"], Some(TOKEN));
    let a = s.post("/runs", &json!({"goal": "first"})).json()["run_id"].as_str().unwrap().to_string();
    let b = s.post("/runs", &json!({"goal": "second"})).json()["run_id"].as_str().unwrap().to_string();
    // Both workers wait in Act (the fake answers one request at a time: one is held there, the
    // other waits to be heard), each holding its run's lock with framing and planning journaled.
    let planned = |id: &str| {
        std::fs::read_to_string(t.path(&format!("root/runs/{id}/trace.jsonl")))
            .is_ok_and(|tr| tr.lines().any(|l| l.contains(r#""event":"plan""#)))
    };
    wait_until("both runs plan and call the slow service", &s, || slow.count() >= 1 && planned(&a) && planned(&b));
    let journal =
        |id: &str| std::fs::read(t.path(&format!("root/runs/{id}/.agentloop.journal.json"))).unwrap_or_default();
    for (mine, other) in [(&a, &b), (&b, &a)] {
        let text = String::from_utf8_lossy(&journal(mine)).to_string();
        assert!(text.starts_with("AGJ2 "), "run {mine}'s journal holds its records: {text:.200}");
        assert!(text.contains(mine.as_str()) && !text.contains(other.as_str()), "only its own run's records");
    }
    hold.store(false, Ordering::SeqCst);
    for (mine, other) in [(&a, &b), (&b, &a)] {
        let v = s.finished(mine);
        assert_eq!(v["status"], "done", "{v}");
        assert!(journal(mine).iter().take(81).all(|b| *b == 0), "run {mine}'s journal is checkpointed");
        let ways = v["ways_on"].as_str().unwrap();
        assert!(ways.contains(&format!("runs/{mine} run --goal")) && !ways.contains(other.as_str()), "{ways}");
        let trace = t.read(&format!("root/runs/{mine}/trace.jsonl"));
        assert!(trace.lines().all(|l| l.contains(mine.as_str())), "{trace}");
    }
}

#[test]
pub(crate) fn runs_go_on_after_a_restart() {
    let t = T::new();
    let (slow, hold) = gate();
    root_with(&t, &slow_script(&slow.url), "tools: {http: {allow_private: true}}\n");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = s.post("/runs", &json!({"goal": "fetch slowly", "budgets": {"max_steps": 5}})).json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The run is in the middle of its first action when the server is killed.
    wait_until("the slow service is called", &s, || slow.count() >= 1);
    drop(s);
    hold.store(false, Ordering::SeqCst);
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let v = s.finished(&id);
    assert_eq!(v["status"], "done", "{v}\n{}", s.log());
    assert!(s.log().contains(&format!("run {id} was unfinished; queued to go on")), "{}", s.log());
    assert_eq!(v["limits_recorded"]["max_steps"], 5, "the request's budgets still apply");
    let trace: Vec<Value> =
        t.read(&format!("root/runs/{id}/trace.jsonl")).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let acts: Vec<&Value> = trace.iter().filter(|e| e["event"] == "act").collect();
    assert_eq!(acts.len(), 1, "the interrupted action ran again, and was recorded once");
    assert_eq!(acts[0]["result_status"], "ok");
    assert_eq!(slow.count(), 2);
    // With --no-resume an unfinished run is marked interrupted; POST continue goes on.
    hold.store(true, Ordering::SeqCst);
    let id2 = s.post("/runs", &json!({"goal": "fetch again"})).json()["run_id"].as_str().unwrap().to_string();
    wait_until("the slow service is called again", &s, || slow.count() >= 3);
    drop(s);
    hold.store(false, Ordering::SeqCst);
    let s = serve(&t, &["--script", "script.yaml"], &["--no-resume"], Some(TOKEN));
    let v = s.get(&format!("/runs/{id2}")).json();
    assert_eq!((v["status"].as_str(), v["interrupted"].as_bool()), (Some("running"), Some(true)), "{v}");
    let list = s.get("/runs").json();
    let row = list["runs"].as_array().unwrap().iter().find(|r| r["run_id"] == id2.as_str()).unwrap().clone();
    assert_eq!(row["status"], "interrupted");
    let r = s.post(&format!("/runs/{id2}/continue"), &json!({}));
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(s.finished(&id2)["status"], "done");
}

#[test]
pub(crate) fn serve_refuses_what_it_cannot_do_safely() {
    let t = T::new();
    t.cmd()
        .args(["serve", "--root", "root", "--listen", "0.0.0.0:0"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("refusing to listen on 0.0.0.0:0 (beyond loopback) without AGENTLOOP_TOKEN"));
    t.cmd()
        .env("AGENTLOOP_TOKEN", "short")
        .args(["serve", "--root", "root", "--listen", "127.0.0.1:0"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("at least 16"));
    t.cmd().args(["serve", "--rate-limit", "lots"]).assert().code(2).stderr(predicates::str::contains("N/DUR"));
    t.cmd().args(["serve", "--workers", "0"]).assert().code(2);
    t.write("root/agentloop.yaml", "max_stepz: 3\n");
    t.cmd()
        .args(["serve", "--root", "root", "--listen", "127.0.0.1:0"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("max_stepz"));
    // One server per root.
    t.write("root/agentloop.yaml", "");
    let _s = serve(&t, &[], &[], Some(TOKEN));
    t.cmd()
        .env("AGENTLOOP_TOKEN", TOKEN)
        .args(["serve", "--root", "root", "--listen", "127.0.0.1:0"])
        .assert()
        .code(7)
        .stderr(predicates::str::contains("another `agentloop serve`"));
}

#[test]
pub(crate) fn a_browser_shows_the_served_pages() {
    let t = T::new();
    root_with(&t, QUICK, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let goal = "Check <script>document.title='pwned'</script> & report";
    let id = s.post("/runs", &json!({"goal": goal})).json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&id)["status"], "done");
    // Without a browser the pages are still checked as served.
    let index = s.get("/");
    assert_eq!(index.status, 200);
    assert!(index.body.contains("Check &lt;script&gt;"), "{}", index.body);
    let Some(chromium) = browser::or_skip("a_browser_shows_the_served_pages") else { return };
    // The browser signs in with ?token=, which sets a cookie and drops the token from the URL.
    let dom = browser::dump_dom(&chromium, &format!("{}/?token={TOKEN}", s.url));
    assert!(dom.contains(&format!("<tr class=\"run\" data-run=\"{id}\">")), "{dom}");
    assert!(dom.contains(&format!("href=\"/runs/{id}/report\"")));
    assert!(!dom.contains("<script"));
    let dom = browser::dump_dom(&chromium, &format!("{}/runs/{id}/report?token={TOKEN}", s.url));
    assert_eq!(browser::text_of(&dom, "goal").as_deref(), Some(goal));
    let entries =
        t.read(&format!("root/runs/{id}/trace.jsonl")).lines().filter(|l| !l.contains("\"phase\":\"run\"")).count();
    assert_eq!(browser::count(&dom, "<rect class=\"bar "), entries);
    assert!(!dom.contains("<title>pwned</title>") && !dom.contains("<script"));
    let shot = browser::shots_dir().join("serve-index.png");
    browser::screenshot(&chromium, &format!("{}/?token={TOKEN}", s.url), &shot, 1200, 700);
    browser::screenshot(
        &chromium,
        &format!("{}/runs/{id}/report?token={TOKEN}", s.url),
        &browser::shots_dir().join("serve-report.png"),
        1200,
        1600,
    );
    eprintln!("screenshots of the served pages: {}", shot.parent().unwrap().display());
}

pub const TWO_STEPS: &str = r#"frame:
  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}
plan:
  - answer: {next_action: {tool: list_dir, args: {}}}
  - answer: {next_action: {tool: finish, args: {summary: done it}}}
reflect:
  - answer: {decision: continue, reason: more}
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: finished, outcome: done it}
"#;

/// A served run stopped by a budget goes on when the continue raises that budget, up to the
/// server's own limit; a continue that would stop again at once is refused, changing nothing.
#[test]
pub(crate) fn a_served_run_stopped_by_a_budget_goes_on_with_a_raised_budget() {
    let t = T::new();
    root_with(&t, TWO_STEPS, "max_steps: 6\n");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = s.post("/runs", &json!({"goal": "g", "budgets": {"max_steps": 1}})).json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let v = s.finished(&id);
    assert_eq!(v["stop"], "max_steps", "{v}");
    let trace = t.read(&format!("root/runs/{id}/trace.jsonl"));
    let r = s.post(&format!("/runs/{id}/continue"), &json!({}));
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("max_steps is still over") && r.body.contains("budgets"), "{}", r.body);
    let r = s.post(&format!("/runs/{id}/continue"), &json!({"budgets": {"max_steps": 9}}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("budgets.max_steps: 9 is above the root's 6"), "{}", r.body);
    assert_eq!(t.read(&format!("root/runs/{id}/trace.jsonl")), trace, "nothing written");
    let r = s.post(&format!("/runs/{id}/continue"), &json!({"budgets": {"max_steps": 4}}));
    assert_eq!(r.status, 202, "{}", r.body);
    let v = s.finished(&id);
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(t.json(&format!("root/.agentloop-runs/{id}.json"))["budgets"]["max_steps"], 4);
}

#[test]
pub(crate) fn a_served_run_ends_with_the_output_in_the_requested_shape() {
    let t = T::new();
    // A look backs the ticks; then `finish` gives the output.
    let script = r#"frame:
  - answer: {goal: g, definition_of_done: [read, written, noted], can_proceed: true}
plan:
  - answer: {next_action: {tool: list_dir, args: {}}, rationale: look around}
  - answer: {next_action: {tool: finish, args: {summary: all done, output: {title: t, score: 3}}}, rationale: rated}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: continue, reason: looked}
  - answer: {decision: done, reason: ok, outcome: rated}
"#;
    root_with(&t, script, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let schema = json!({"type": "object", "properties": {"title": {"type": "string"}, "score": {"type": "integer"}},
        "required": ["title", "score"], "additionalProperties": false});
    let r = s.post("/runs", &json!({"goal": "Rate it", "output_schema": schema}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&id)["status"], "done");
    let result: Value = serde_json::from_str(&t.read(&format!("root/runs/{id}/result.json"))).unwrap();
    assert_eq!(result["output"], json!({"title": "t", "score": 3}));
    // What serve answers holds to the published schemas; its OpenAPI document is the committed one.
    crate::schemas::check("result.json", &result);
    crate::schemas::check("status.json", &s.get(&format!("/runs/{id}")).json());
    crate::schemas::check("runs.json", &s.get("/runs").json()["runs"]);
    let doc = s.call("GET", "/openapi.json", None, None);
    assert_eq!(doc.status, 200);
    assert_eq!(doc.json(), crate::schemas::schema("openapi.json"));
    assert_eq!(doc.json()["openapi"], "3.1.0");
    let r = s.post("/runs", &json!({"goal": "Rate it", "output_schema": "schema.json"}));
    assert_eq!((r.status, r.json()["error"].as_str()), (400, Some("`output_schema` must be a JSON Schema object")));
}

/// Runs record their agent: GET /runs?agent= and `runs --agent` list one agent's runs, and
/// GET /agents/{name}/status sums them up with the agent's profile and usage window.
#[test]
pub(crate) fn each_agent_has_its_own_view_of_its_runs() {
    let t = T::new();
    root_with(&t, QUICK, "");
    t.write("root/agents/digest.yaml", "description: The morning digest\nrest: {max_runs: 5, window: 1d}\n");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let mine =
        s.post("/runs", &json!({"goal": "digest", "agent": "digest"})).json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&mine)["status"], "done");
    let other = s.post("/runs", &json!({"goal": "other"})).json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&other)["status"], "done");
    let ids = |v: Value| -> Vec<String> {
        v["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids(s.get("/runs?agent=digest").json()), vec![mine.clone()]);
    assert!(ids(s.get("/runs").json()).contains(&other));
    assert!(ids(s.get("/runs?agent=nobody").json()).is_empty());
    let r = s.get("/runs?agnt=digest");
    assert_eq!(r.status, 400);
    assert!(r.body.contains("`agnt`"), "{}", r.body);
    let v = s.get("/agents/digest/status").json();
    assert_eq!(v["agent"], "digest");
    assert_eq!(v["profile"]["description"], "The morning digest");
    assert_eq!(v["runs"], json!({"total": 1, "by_status": {"done": 1}}));
    assert_eq!(v["last_run"]["run_id"], mine.as_str());
    assert_eq!(v["running"], json!([]));
    assert_eq!(v["rest"]["agent"], "digest");
    assert_eq!(v["rest"]["runs"], 1, "{v}");
    let r = s.get("/agents/nobody/status");
    assert_eq!(r.status, 404);
    assert!(r.body.contains("GET /agents"), "{}", r.body);
    // The CLI's list, by agent.
    let out = t.cmd().args(["-w", "root", "--json", "runs", "--agent", "digest"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["run_id"], mine.as_str());
    t.write("root/agents/idle.yaml", "description: Never ran\n");
    let out = t.cmd().args(["-w", "root", "runs", "--agent", "idle"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("no runs of agent `idle`"), "{}", stderr(&out));
    let out = t.cmd().args(["-w", "root", "runs", "--agent", "nobody"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("agent profile `nobody` not found"), "{}", stderr(&out));
}
