//! Any door goes on with a run another door started, and sessions over HTTP: `serve` answers and
//! continues the root's own run that `agentloop -w ROOT run` made (a cron job), driving it in
//! the root; `agentloop -w ROOT/runs/ID answer` answers a run `serve` started; the run's lock
//! decides who may advance it (a run another process is advancing is a 409 that says so); and
//! `POST /runs {"session"}` continues a named session whose turns the CLI and the server share,
//! listed by `GET /runs?session=`, `GET /agents/{name}/sessions` and `runs --session`.

use crate::common::*;
use crate::serve::{gate, root_with, serve, Serve, ASKS, QUICK, TOKEN};
use serde_json::{json, Value};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A run of the CLI's in the root that stops at `max_steps: 1` (the list_dir step), then goes on
/// to finish.
const TWO_STEPS: &str = crate::serve::TWO_STEPS;

/// The line of docs/HTTP-API.md that holds `part` (continued lines joined), as written.
fn doc_line(part: &str) -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/HTTP-API.md")).unwrap();
    let at = doc.find(part).unwrap_or_else(|| panic!("docs/HTTP-API.md has no line with {part}"));
    let start = doc[..at].rfind('\n').map_or(0, |i| i + 1);
    let mut text = String::new();
    for l in doc[start..].lines() {
        text.push_str(l.trim_end_matches('\\'));
        if !l.ends_with('\\') {
            break;
        }
    }
    text
}

/// Runs a documented shell line with `TOKEN` and the served port filled in; its stdout.
fn sh(s: &Serve, line: &str) -> String {
    let port = s.url.rsplit(':').next().unwrap();
    let line = line.replace("localhost:8700", &format!("localhost:{port}"));
    let out = Command::new("sh").arg("-c").arg(&line).env("TOKEN", &s.token).output().expect("run sh");
    assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn events(trace: &str) -> Vec<String> {
    trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["event"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_cron_run_that_escalated_is_answered_over_http_and_finishes_in_the_root() {
    let t = T::new();
    root_with(&t, ASKS, "");
    // The cron job: `agentloop -w ROOT run`, which escalates (exit 3).
    let out = t
        .cmd()
        .args(["-w", "root", "--script", "script.yaml", "run", "--goal", "Report the figures"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let id = t.json("root/state.json")["run_id"].as_str().unwrap().to_string();
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    // Listed with its question, the way on and how it stopped; no record of this server's yet.
    let v = s.get(&format!("/runs/{id}")).json();
    assert_eq!(
        (&v["status"], &v["stop"], &v["open_question"], &v["outcome"], &v["served"]),
        (&json!("escalated"), &json!("escalated"), &json!("Which year's figures?"), &Value::Null, &json!(false)),
        "{v}"
    );
    // The panel's page of the run has the form that answers it.
    let page = s.get(&format!("/runs/{id}/report")).body;
    assert!(page.contains("id=\"answer-form\"") && page.contains(&format!("action=\"/runs/{id}/answer\"")), "{page}");
    // A refused request leaves no record behind: a question is answered, not continued.
    let r = s.post(&format!("/runs/{id}/continue"), &json!({}));
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(!t.exists(&format!("root/.agentloop-runs/{id}.json")));
    // The documented curl line, as written: 202, and the run goes on to done in the root.
    let answered = sh(&s, &doc_line("/answer -d '{").replace("01K...", &id));
    let r: Value = serde_json::from_str(&answered).unwrap_or_else(|e| panic!("{e}: {answered}"));
    assert_eq!(r["run_id"], id.as_str(), "{r}");
    let v = s.finished(&id);
    assert_eq!(
        (&v["status"], &v["stop"], &v["outcome"], &v["open_question"], &v["served"]),
        (&json!("done"), &json!("done"), &json!("used the 2024 figures"), &Value::Null, &json!(true)),
        "{v}"
    );
    assert_eq!(v["workspace"], t.path("root").canonicalize().unwrap().to_str().unwrap(), "driven in the root");
    let state = t.json("root/state.json");
    assert_eq!((&state["run_id"], &state["status"]), (&json!(id), &json!("done")));
    assert!(!t.exists(&format!("root/runs/{id}")), "the root's run stays the root's");
    let trace = t.read("root/trace.jsonl");
    let answered: Value = trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "run.answered")
        .expect("run.answered");
    assert_eq!(answered["data"]["answer"], "Use the 2024 figures");
    assert_eq!(events(&trace).last().map(String::as_str), Some("run.finished"));
    // Its record, derived from its state: no agent, no budgets of a request's.
    let rec = t.json(&format!("root/.agentloop-runs/{id}.json"));
    assert_eq!((&rec["run_id"], &rec["agent"], &rec["budgets"]["max_steps"]), (&json!(id), &Value::Null, &Value::Null));
    // A done run has nothing left to answer or continue, whoever started it.
    assert_eq!(s.post(&format!("/runs/{id}/answer"), &json!({"answer": "again"})).status, 409);
    assert_eq!(s.post(&format!("/runs/{id}/continue"), &json!({})).status, 409);
    // A restart keeps its record (the root's run is still there) and leaves it done.
    drop(s);
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    assert!(t.exists(&format!("root/.agentloop-runs/{id}.json")), "{}", s.log());
    assert_eq!(s.get(&format!("/runs/{id}")).json()["status"], "done");
}

#[test]
fn a_cron_run_stopped_by_a_budget_is_continued_over_http_with_a_raised_budget() {
    let t = T::new();
    root_with(&t, TWO_STEPS, "");
    let out = t
        .cmd()
        .args(["-w", "root", "--script", "script.yaml", "--max-steps", "1", "run", "--goal", "List then finish"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let id = t.json("root/state.json")["run_id"].as_str().unwrap().to_string();
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let v = s.get(&format!("/runs/{id}")).json();
    assert_eq!((&v["status"], &v["stop"]), (&json!("escalated"), &json!("max_steps")), "{v}");
    let page = s.get(&format!("/runs/{id}/report")).body;
    assert!(page.contains("id=\"continue-form\""), "the panel offers to continue it: {page}");
    let before = t.read("root/trace.jsonl");
    // Its own limit (1 step, recorded by the run) still holds: a continue as it is would stop
    // again at once, so it is refused, naming the limit and the fix; nothing changes.
    let r = s.post(&format!("/runs/{id}/continue"), &json!({}));
    assert_eq!(r.status, 409, "{}", r.body);
    let e = r.json();
    assert!(e["error"].as_str().unwrap().contains("max_steps"), "{e}");
    assert!(e["hint"].as_str().unwrap().contains("\"budgets\": {\"max_steps\""), "{e}");
    assert_eq!(t.read("root/trace.jsonl"), before);
    assert!(!t.exists(&format!("root/.agentloop-runs/{id}.json")));
    // Above the server's own limit (the built-in 20): 400 naming it.
    let r = s.post(&format!("/runs/{id}/continue"), &json!({"budgets": {"max_steps": 50}}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.json()["error"].as_str().unwrap().contains("budgets.max_steps"), "{}", r.body);
    // Raised within it: the run goes on in the root and finishes.
    let r = s.post(&format!("/runs/{id}/continue"), &json!({"budgets": {"max_steps": 4}}));
    assert_eq!(r.status, 202, "{}", r.body);
    let v = s.finished(&id);
    assert_eq!((&v["status"], &v["stop"], &v["outcome"]), (&json!("done"), &json!("done"), &json!("done it")), "{v}");
    assert_eq!(v["limits_recorded"]["max_steps"], 4, "{v}");
    assert_eq!(t.json("root/state.json")["status"], "done");
    assert_eq!(t.json(&format!("root/.agentloop-runs/{id}.json"))["budgets"]["max_steps"], 4);
    // The server holds the root: the CLI cannot advance the root's run meanwhile (exit 7).
    let out = t.cmd().args(["-w", "root", "--script", "script.yaml", "run", "--continue"]).output().unwrap();
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
}

/// A script whose run escalates at framing, then, answered, fetches `url`/slow (so the run
/// goes on as long as the service takes) and finishes.
fn asks_then_slow(url: &str) -> String {
    format!(
        r#"frame:
  - answer: {{goal: g, definition_of_done: [a, b, c], can_proceed: false, open_question: "Which year's figures?"}}
  - answer: {{goal: g, definition_of_done: [a, b, c], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: http_call, args: {{method: GET, url: "{url}/slow"}}}}}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], decision: done, reason: fetched, outcome: fetched the 2024 figures}}
"#
    )
}

#[test]
fn a_served_run_is_answered_by_the_cli_and_its_lock_decides_who_advances_it() {
    let t = T::new();
    let (slow, hold) = gate();
    let config = "tools: {http: {allow_private: true}}\n";
    root_with(&t, &asks_then_slow(&slow.url), config);
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = s.post("/runs", &json!({"goal": "Report the figures"})).json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&id)["status"], "escalated");
    // The CLI answers it in its folder. It resolves its configuration from that folder (not
    // the root's), so the run folder gets the same http policy for this test.
    t.write(&format!("root/runs/{id}/agentloop.yaml"), config);
    let mut cli = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    cli.env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("AGENTLOOP_NOW", NOW)
        .current_dir(t.root())
        .args(["-w", &format!("root/runs/{id}"), "--script", "script.yaml", "answer", "Use the 2024 figures"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let cli = cli.spawn().unwrap();
    // While the CLI holds the run (it waits on the slow service), the server does not advance
    // it: answer and continue are 409, naming the process that holds it.
    let start = Instant::now();
    while slow.count() == 0 {
        assert!(start.elapsed() < Duration::from_secs(120), "the CLI never reached the slow service: {}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    for (path, body) in [("answer", json!({"answer": "again"})), ("continue", json!({}))] {
        let r = s.post(&format!("/runs/{id}/{path}"), &body);
        assert_eq!(r.status, 409, "{path}: {}", r.body);
        let e = r.json();
        let msg = e["error"].as_str().unwrap();
        assert!(msg.contains(&format!("run {id} is being advanced elsewhere")), "{e}");
        assert!(msg.contains(&format!("locked by agentloop process {}", cli.id())), "{e}");
        assert!(e["hint"].as_str().unwrap().contains("wait for that command to finish"), "{e}");
    }
    hold.store(false, Ordering::SeqCst);
    let out = cli.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v = s.get(&format!("/runs/{id}")).json();
    assert_eq!(
        (&v["status"], &v["stop"], &v["outcome"], &v["served"]),
        (&json!("done"), &json!("done"), &json!("fetched the 2024 figures"), &json!(true)),
        "{v}"
    );
    let trace = t.read(&format!("root/runs/{id}/trace.jsonl"));
    assert_eq!(events(&trace).iter().filter(|e| *e == "run.answered").count(), 1, "answered once: {trace}");
}

#[test]
fn sessions_go_on_over_http_and_are_listed_by_every_door() {
    let t = T::new();
    root_with(&t, QUICK, "");
    t.write("root/agents/brief.yaml", "description: Short answers\nsystem_prompt: Be brief.\n");
    // The first turn of `alpha` is the CLI's, in the root.
    let out = t
        .cmd()
        .args([
            "-w",
            "root",
            "--script",
            "script.yaml",
            "run",
            "--session",
            "alpha",
            "--goal",
            "What is the capital of France?",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = t.json("root/state.json")["run_id"].as_str().unwrap().to_string();
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    // The next turn over HTTP: its context is the conversation so far, and it is tagged.
    let r = s.post("/runs", &json!({"goal": "And of Italy?", "session": "alpha", "context": "Answer in one word."}));
    assert_eq!(r.status, 202, "{}", r.body);
    let second = r.json()["run_id"].as_str().unwrap().to_string();
    let v = s.finished(&second);
    assert_eq!(
        (&v["status"], &v["session"], &v["outcome"]),
        (&json!("done"), &json!("alpha"), &json!("summarised")),
        "{v}"
    );
    let context = t.read(&format!("root/runs/{second}/context.md"));
    assert!(context.contains("Answer in one word."), "{context}");
    assert!(context.contains("Session `alpha`: the conversation so far"), "{context}");
    assert!(context.contains(&format!("**User** (run {first}): What is the capital of France?")), "{context}");
    assert!(context.contains("**Agent**: summarised"), "{context}");
    let trace = t.read(&format!("root/runs/{second}/trace.jsonl"));
    let started: Value = serde_json::from_str(trace.lines().next().unwrap()).unwrap();
    assert_eq!(started["data"]["session"], "alpha", "{started}");
    // A third turn sees both; another session sees none of them.
    let third = s.post("/runs", &json!({"goal": "And of Spain?", "session": "alpha"})).json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(s.finished(&third)["status"], "done");
    let context = t.read(&format!("root/runs/{third}/context.md"));
    assert!(context.contains("capital of France") && context.contains("And of Italy?"), "{context}");
    let beta = s.post("/runs", &json!({"goal": "Name a colour", "session": "beta"})).json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(s.finished(&beta)["status"], "done");
    let context = t.read(&format!("root/runs/{beta}/context.md"));
    assert!(!context.contains("conversation so far") && !context.contains("France"), "{context}");
    let brief = s.post("/runs", &json!({"goal": "Hello", "agent": "brief", "session": "support-42"})).json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(s.finished(&brief)["status"], "done");
    let plain = s.post("/runs", &json!({"goal": "No session"})).json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&plain)["status"], "done");
    // GET /runs?session= lists a session's turns (the CLI's too); rows carry `session`.
    let ids = |q: &str| -> Vec<String> {
        let r = s.get(&format!("/runs{q}"));
        assert_eq!(r.status, 200, "{q}: {}", r.body);
        let mut v: Vec<String> =
            r.json()["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap().to_string()).collect();
        v.sort();
        v
    };
    let mut alpha = vec![first.clone(), second.clone(), third.clone()];
    alpha.sort();
    assert_eq!(ids("?session=alpha"), alpha);
    assert_eq!(ids("?session=beta"), [beta.as_str()]);
    assert_eq!(ids("?session=support-42&agent=brief"), [brief.as_str()]);
    assert!(ids("?session=support-42&agent=other").is_empty());
    assert!(ids("?session=nobody").is_empty());
    let rows = s.get("/runs").json()["runs"].as_array().unwrap().clone();
    let row = rows.iter().find(|r| r["run_id"] == third.as_str()).unwrap();
    assert_eq!(row["session"], "alpha", "{row}");
    assert!(rows.iter().find(|r| r["run_id"] == plain.as_str()).unwrap()["session"].is_null());
    // A bad session name is a 400 naming `session` and the rule; nothing is created.
    for (q, bad) in [("?session=a%20b", "`a b`"), ("?session=", "``")] {
        let r = s.get(&format!("/runs{q}"));
        assert_eq!(r.status, 400, "{q}: {}", r.body);
        let e = r.json();
        assert!(e["error"].as_str().unwrap().contains(&format!("`session`: {bad} is not a session name")), "{e}");
        assert!(e["hint"].as_str().unwrap().contains("letters, digits"), "{e}");
    }
    let count = s.get("/runs").json()["runs"].as_array().unwrap().len();
    for body in [
        json!({"goal": "g", "session": "a b/c"}),
        json!({"goal": "g", "session": ""}),
        json!({"goal": "g", "session": "x".repeat(65)}),
        json!({"goal": "g", "session": 7}),
    ] {
        let r = s.post("/runs", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.json()["error"].as_str().unwrap().starts_with("`session`: "), "{}", r.body);
    }
    assert_eq!(s.get("/runs").json()["runs"].as_array().unwrap().len(), count, "refused starts created nothing");
    // GET /agents/{name}/sessions: newest first; `default` is the runs of no profile.
    let r = s.get("/agents/default/sessions");
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["agent"], "default");
    let sessions = v["sessions"].as_array().unwrap();
    let names: Vec<&str> = sessions.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["beta", "alpha"], "{v}");
    let a = &sessions[1];
    assert_eq!((&a["runs"], &a["last_run_id"], &a["last_status"]), (&json!(3), &json!(third), &json!("done")), "{a}");
    let third_state = t.json(&format!("root/runs/{third}/state.json"));
    assert_eq!(a["last_updated"], third_state["updated_at"], "{a}");
    assert_eq!(a["links"]["runs"], "/runs?session=alpha");
    let v = s.get("/agents/brief/sessions").json();
    assert_eq!(v["sessions"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!((&v["sessions"][0]["name"], &v["sessions"][0]["runs"]), (&json!("support-42"), &json!(1)));
    let r = s.get("/agents/nobody/sessions");
    assert_eq!(r.status, 404, "{}", r.body);
    // The start page's form has the field, and its post (here with the bearer token, as an
    // API client may send it) starts the session's next turn; a bad name is refused, named.
    assert!(s.get("/start").body.contains("name=\"session\""));
    let form = |body: &str| {
        let mut r = crate::serve::agent()
            .post(&format!("{}/runs", s.url))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .send(body)
            .unwrap();
        let to = r.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        (r.status().as_u16(), to, r.body_mut().read_to_string().unwrap_or_default())
    };
    let (status, to, body) = form("goal=From+the+form&context=&agent=&session=beta&max_steps=");
    assert_eq!(status, 303, "{body}");
    let from_form = to.strip_prefix("/runs/").and_then(|r| r.strip_suffix("/report")).unwrap().to_string();
    let v = s.finished(&from_form);
    assert_eq!((&v["status"], &v["session"]), (&json!("done"), &json!("beta")), "{v}");
    assert!(t.read(&format!("root/runs/{from_form}/context.md")).contains("Name a colour"));
    let (status, _, body) = form("goal=g&session=no+spaces");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("`session`: `no spaces` is not a session name"), "{body}");
    // The documented lines of HTTP-API.md's Sessions, as written.
    let geo1 = sh(&s, &doc_line("\"goal\": \"What is the capital of France?\", \"session\": \"geo\""));
    let geo1 = serde_json::from_str::<Value>(&geo1).unwrap()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&geo1)["status"], "done");
    let geo2 = sh(&s, &doc_line("\"goal\": \"And of Italy?\", \"session\": \"geo\""));
    let geo2 = serde_json::from_str::<Value>(&geo2).unwrap()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&geo2)["session"], "geo");
    assert!(t.read(&format!("root/runs/{geo2}/context.md")).contains(&format!("**User** (run {geo1})")));
    if std::env::split_paths(&std::env::var_os("PATH").unwrap()).any(|d| d.join("jq").is_file()) {
        let listed = sh(&s, &doc_line("runs?session=geo"));
        assert_eq!(listed.lines().count(), 2, "{listed}");
        assert!(listed.contains(&geo1) && listed.contains(&geo2), "{listed}");
    } else {
        missing("jq is not installed: the documented `?session=` line is not run");
    }
    let v: Value = serde_json::from_str(&sh(&s, &doc_line("localhost:8700/agents/default/sessions"))).unwrap();
    assert_eq!(v["sessions"][0]["name"], "geo", "{v}");
    // `runs --session` lists the same turns (the server holds the root's lock; listing takes none).
    let out = t.cmd().args(["-w", "root", "runs", "--session", "alpha", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut listed: Vec<String> = rows.iter().map(|r| r["run_id"].as_str().unwrap().to_string()).collect();
    listed.sort();
    assert_eq!(listed, alpha);
    assert!(rows.iter().all(|r| r["session"] == "alpha"));
    let out = t.cmd().args(["-w", "root", "runs", "--session", "beta"]).output().unwrap();
    let text = stdout(&out);
    assert!(text.lines().next().unwrap().contains("session"), "{text}");
    assert_eq!(text.lines().count(), 3, "a header and beta's two turns: {text}");
    assert!(text.contains(&beta) && text.contains(&from_form), "{text}");
    let out = t.cmd().args(["-w", "root", "runs", "--session", "a b"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--session: `a b` is not a session name"), "{}", stderr(&out));
    let out = t.cmd().args(["-w", "root", "runs", "--session", "nobody"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("no runs of session `nobody`"), "{}", stderr(&out));
}

/// A cron run answered over HTTP goes on in the root; a server killed while it runs (nothing
/// marks it) goes on with it at the next start, as with the runs it started itself.
#[test]
fn a_cron_run_the_server_was_driving_goes_on_after_a_restart() {
    let t = T::new();
    let (slow, hold) = gate();
    root_with(&t, &asks_then_slow(&slow.url), "tools: {http: {allow_private: true}}\n");
    let out = t
        .cmd()
        .args(["-w", "root", "--script", "script.yaml", "run", "--goal", "Report the figures"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let id = t.json("root/state.json")["run_id"].as_str().unwrap().to_string();
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    assert_eq!(s.post(&format!("/runs/{id}/answer"), &json!({"answer": "Use the 2024 figures"})).status, 202);
    let start = Instant::now();
    while slow.count() == 0 {
        assert!(start.elapsed() < Duration::from_secs(120), "the run never reached the slow service: {}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(s.get(&format!("/runs/{id}")).json()["queue"]["state"], "running");
    drop(s); // killed: no signal to mark the run
    assert_eq!(t.json("root/state.json")["status"], "running");
    hold.store(false, Ordering::SeqCst);
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let v = s.finished(&id);
    assert_eq!((&v["status"], &v["outcome"]), (&json!("done"), &json!("fetched the 2024 figures")), "{v}\n{}", s.log());
    assert!(s.log().contains(&format!("run {id} was unfinished; queued to go on")), "{}", s.log());
    assert_eq!(t.json("root/state.json")["status"], "done");
    assert!(!t.exists(&format!("root/runs/{id}")));
}

/// In front of a fleet: a run an `agentloop worker` made and left escalated is answered over
/// HTTP and goes on in its folder, driven by the server; `session` is refused there, naming it.
#[test]
fn a_run_a_queue_worker_left_escalated_is_answered_by_the_server_in_front_of_the_fleet() {
    let t = T::new();
    let Some(redis) = crate::queue::Redis::start(&t.path("redis")) else { return };
    root_with(&t, ASKS, "");
    let s = serve(&t, &["--script", "script.yaml"], &["--redis", &redis.url()], Some(TOKEN));
    let r = s.post("/runs", &json!({"goal": "g", "session": "alpha"}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.json()["error"].as_str().unwrap().contains("`session`"), "{}", r.body);
    assert!(redis.entries("agentloop:runs").is_empty(), "nothing was queued");
    let r = s.post("/runs", &json!({"goal": "Report the figures"}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let w = crate::queue::worker(&t, &redis, "w1", &[]);
    let start = Instant::now();
    while redis.entries("agentloop:results").is_empty() {
        assert!(start.elapsed() < Duration::from_secs(120), "no outcome:\n{}\n{}", w.log(), s.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(w);
    let v = s.get(&format!("/runs/{id}")).json();
    assert_eq!((&v["status"], &v["served"]), (&json!("escalated"), &json!(false)), "{v}");
    let r = s.post(&format!("/runs/{id}/answer"), &json!({"answer": "Use the 2024 figures"}));
    assert_eq!(r.status, 202, "{}", r.body);
    let v = s.finished(&id);
    assert_eq!((&v["status"], &v["outcome"]), (&json!("done"), &json!("used the 2024 figures")), "{v}\n{}", s.log());
    assert_eq!(t.json(&format!("root/runs/{id}/state.json"))["status"], "done");
}

/// A cron run stopped by Ctrl-C or killed outright (still `running` in its state.json, its lock
/// free) is continued over HTTP, as a run a worker gave up on is.
#[test]
fn a_cron_run_interrupted_or_killed_is_continued_over_http() {
    for signal in ["INT", "KILL"] {
        let t = T::new();
        let (slow, hold) = gate();
        root_with(&t, &slow_script(&slow.url), "tools: {http: {allow_private: true}}\n");
        let mut cli = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
        cli.env_clear()
            .env("AGENTLOOP_TRUST_ALL", "1")
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", t.path("home"))
            .env("XDG_CONFIG_HOME", t.path("xdg"))
            .env("AGENTLOOP_NOW", NOW)
            .current_dir(t.root())
            .args(["-w", "root", "--script", "script.yaml", "run", "--goal", "Fetch it"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let cli = cli.spawn().unwrap();
        let start = Instant::now();
        while slow.count() == 0 {
            assert!(start.elapsed() < Duration::from_secs(120), "the CLI never reached the slow service");
            std::thread::sleep(Duration::from_millis(20));
        }
        let killed = Command::new("kill").args([&format!("-{signal}"), &cli.id().to_string()]).status().unwrap();
        assert!(killed.success());
        let out = cli.wait_with_output().unwrap();
        assert_ne!(out.status.code(), Some(0), "{signal}: {}", String::from_utf8_lossy(&out.stderr));
        let state = t.json("root/state.json");
        let id = state["run_id"].as_str().unwrap().to_string();
        assert_eq!(state["status"], "running", "{state}");
        hold.store(false, Ordering::SeqCst);
        let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
        let v = s.get(&format!("/runs/{id}")).json();
        assert_eq!((&v["status"], &v["served"]), (&json!("running"), &json!(false)), "{v}");
        // The page shows the way on: the continue form for a run marked interrupted, else the
        // continue no worker waits for.
        let page = s.get(&format!("/runs/{id}/report")).body;
        let interrupted = t.json("root/state.json")["interrupted"] == true;
        let way =
            if interrupted { "id=\"continue-form\"".to_string() } else { format!("POST /runs/{id}/continue goes on") };
        assert!(page.contains(&way), "{page}");
        let r = s.post(&format!("/runs/{id}/continue"), &json!({}));
        assert_eq!(r.status, 202, "{signal}: {}", r.body);
        let v = s.finished(&id);
        assert_eq!(
            (&v["status"], &v["outcome"], &v["served"]),
            (&json!("done"), &json!("fetched the slow answer"), &json!(true)),
            "{signal}: {v}\n{}",
            s.log()
        );
        assert_eq!(t.json("root/state.json")["status"], "done");
    }
}

/// A served run a budget stopped is continued by the CLI in its folder, with the limit the
/// command gives, while the server is up; the server then shows it done.
#[test]
fn a_served_run_stopped_by_a_budget_is_continued_by_the_cli() {
    let t = T::new();
    root_with(&t, TWO_STEPS, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let r = s.post("/runs", &json!({"goal": "List then finish", "budgets": {"max_steps": 1}}));
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&id)["stop"], "max_steps");
    let dir = format!("root/runs/{id}");
    let out = t.cmd().args(["-w", &dir, "--script", "script.yaml", "run", "--continue"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "the run's own limit still holds: {}", stderr(&out));
    assert!(stderr(&out).contains("max_steps is still over"), "{}", stderr(&out));
    let out = t
        .cmd()
        .args(["-w", &dir, "--script", "script.yaml", "--max-steps", "4", "run", "--continue"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = s.get(&format!("/runs/{id}")).json();
    assert_eq!((&v["status"], &v["outcome"]), (&json!("done"), &json!("done it")), "{v}");
}

/// Seed 002's form: `POST /agents/{id}/run {message, session_id}` starts a run as the agent,
/// the next turn of its session, and `GET /agents/{id}/sessions` lists it.
#[test]
fn the_seeds_agent_run_gives_an_agent_a_message_in_a_session() {
    let t = T::new();
    root_with(&t, QUICK, "");
    t.write("root/agents/brief.yaml", "description: Short answers\nsystem_prompt: Be brief.\n");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let r = s.post("/agents/brief/run", &json!({"message": "What is the capital of France?", "session_id": "chat-1"}));
    assert_eq!(r.status, 202, "{}", r.body);
    let first = r.json()["run_id"].as_str().unwrap().to_string();
    let v = s.finished(&first);
    assert_eq!((&v["agent"], &v["session"], &v["status"]), (&json!("brief"), &json!("chat-1"), &json!("done")), "{v}");
    let r = s.post("/agents/brief/run", &json!({"message": "And of Italy?", "session_id": "chat-1"}));
    let second = r.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&second)["status"], "done");
    let context = t.read(&format!("root/runs/{second}/context.md"));
    assert!(context.contains(&format!("**User** (run {first}): What is the capital of France?")), "{context}");
    let sessions = s.get("/agents/brief/sessions").json();
    assert_eq!(
        (&sessions["sessions"][0]["name"], &sessions["sessions"][0]["runs"]),
        (&json!("chat-1"), &json!(2)),
        "{sessions}"
    );
    // `default` is the agent without a profile: the documented line, as written.
    let out = sh(&s, &doc_line("localhost:8700/agents/default/run"));
    let id = serde_json::from_str::<Value>(&out).unwrap()["run_id"].as_str().unwrap().to_string();
    let v = s.finished(&id);
    assert!(v["agent"].is_null() && v["session"] == "geo", "{v}");
    // Its own names only; each refusal names the field.
    for (body, says) in [
        (json!({"goal": "x"}), "may not set `goal`"),
        (json!({"message": "x", "session": "a"}), "may not set `session`"),
        (json!({"message": " "}), "`message` is required"),
        (json!({"message": "x", "session_id": "no spaces"}), "`session_id`"),
        (json!({"message": "x", "shell": true}), "`shell`"),
    ] {
        let r = s.post("/agents/brief/run", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(says), "{body}: {}", r.body);
    }
    let r = s.post("/agents/nobody/run", &json!({"message": "x"}));
    assert_eq!(r.status, 400, "an unknown agent: {}", r.body);
}
