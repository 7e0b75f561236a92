//! The panel in a real browser: Debian's chromium driven over W3C WebDriver (chromedriver) by a
//! small client over HTTP. It signs in through the sign-in form, starts a run from the start
//! page, answers an escalated run and continues a budget-stopped one with the pages' own forms,
//! and checks each run went on; a browser started again on the same profile is still signed in.
//! The documented curl lines of the API run as written against the same kind of server. Where
//! chromedriver or chromium is missing the browser test says so and skips (under CI it fails).

use crate::common::*;
use crate::serve::{agent, root_with, serve, Serve, ASKS, TOKEN, TWO_STEPS};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(120);
/// The W3C name of an element reference in a WebDriver answer.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A program on PATH, if any.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

/// A running chromedriver (killed when dropped).
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One WebDriver request; the answer's `value`. A WebDriver error fails the test, naming it.
fn wd(method: &str, url: &str, body: Option<Value>) -> Value {
    let a = agent();
    let result = match method {
        "GET" => a.get(url).call(),
        "DELETE" => a.delete(url).call(),
        _ => a.post(url).header("Content-Type", "application/json").send(body.unwrap_or_else(|| json!({})).to_string()),
    };
    let mut resp = result.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {url}: {e}: {text}"));
    assert_eq!(status, 200, "{method} {url}: {v}");
    v["value"].clone()
}

impl Driver {
    fn start(bin: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(bin)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let d = Driver { child, url: format!("http://127.0.0.1:{port}") };
        let start = Instant::now();
        loop {
            let ready = agent()
                .get(&format!("{}/status", d.url))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_to_string().ok())
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| v["value"]["ready"] == true);
            if ready {
                return d;
            }
            assert!(start.elapsed() < DEADLINE, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A headless chromium on the profile folder `profile`.
    fn session(&self, chromium: &Path, profile: &Path) -> Browser {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ]
        .iter()
        .map(|a| a.to_string())
        .chain([format!("--user-data-dir={}", profile.display())])
        .collect::<Vec<_>>();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {"binary": chromium.to_string_lossy(), "args": args}}}});
        let v = wd("POST", &format!("{}/session", self.url), Some(caps));
        let id = v["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {v}"));
        Browser { base: format!("{}/session/{id}", self.url) }
    }
}

/// One browser session.
struct Browser {
    base: String,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Closing the session ends the browser cleanly, so its profile (the cookie) is written.
        let _ = agent().delete(&self.base).call();
    }
}

impl Browser {
    fn go(&self, url: &str) {
        wd("POST", &format!("{}/url", self.base), Some(json!({"url": url})));
    }
    fn source(&self) -> String {
        wd("GET", &format!("{}/source", self.base), None).as_str().unwrap_or_default().to_string()
    }
    fn find(&self, css: &str) -> String {
        let v = wd("POST", &format!("{}/element", self.base), Some(json!({"using": "css selector", "value": css})));
        v[ELEMENT].as_str().unwrap_or_else(|| panic!("no element {css}: {v}")).to_string()
    }
    fn type_into(&self, css: &str, text: &str) {
        let el = self.find(css);
        wd("POST", &format!("{}/element/{el}/value", self.base), Some(json!({"text": text})));
    }
    fn attribute(&self, css: &str, name: &str) -> String {
        let el = self.find(css);
        wd("GET", &format!("{}/element/{el}/attribute/{name}", self.base), None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
    fn click(&self, css: &str) {
        let el = self.find(css);
        wd("POST", &format!("{}/element/{el}/click", self.base), None);
    }
    /// Waits until the page's source holds `text`.
    fn wait_for(&self, text: &str, s: &Serve) -> String {
        let start = Instant::now();
        loop {
            let src = self.source();
            if src.contains(text) {
                return src;
            }
            assert!(start.elapsed() < DEADLINE, "the page never showed {text:?}:\n{src}\nserver:\n{}", s.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The run a POST /runs started.
fn started(s: &Serve, body: Value) -> String {
    let r = s.post("/runs", &body);
    assert_eq!(r.status, 202, "{}", r.body);
    r.json()["run_id"].as_str().unwrap().to_string()
}

#[test]
fn a_browser_signs_in_answers_and_continues_runs_through_the_panel() {
    let (Some(driver_bin), Some(chromium)) = (on_path("chromedriver"), crate::browser::chromium()) else {
        crate::common::missing(
            "the panel's browser test: chromedriver or chromium is not installed (apt-get install chromium chromium-driver; .ci/run installs them)",
        );
        return;
    };
    let t = T::new();
    let profile = tempfile::tempdir().unwrap();
    root_with(&t, ASKS, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = started(&s, json!({"goal": "Report the figures"}));
    assert_eq!(s.finished(&id)["status"], "escalated");
    let driver = Driver::start(&driver_bin);
    {
        let b = driver.session(&chromium, profile.path());
        // Not signed in: the sign-in page, whose form signs the browser in and comes back.
        b.go(&format!("{}/runs/{id}/report", s.url));
        b.wait_for("id=\"sign-in\"", &s);
        b.type_into("#token", TOKEN);
        b.click("#sign-in button");
        b.wait_for("id=\"answer-form\"", &s);
        // The answer form, as a person fills it in.
        b.type_into("#answer", "Use the 2024 figures");
        b.click("#answer-form button");
        let v = s.wait_for(&id, "done", |v| v["status"] == "done");
        assert_eq!(v["status"], "done", "{v}");
        let trace = t.read(&format!("root/runs/{id}/trace.jsonl"));
        assert!(trace.contains("\"answer\":\"Use the 2024 figures\""), "{trace}");
    }
    // A run stopped by its step budget, on a server started again (a new form value).
    drop(s);
    t.write("script.yaml", TWO_STEPS);
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = started(&s, json!({"goal": "g", "budgets": {"max_steps": 1}}));
    assert_eq!(s.finished(&id)["stop"], "max_steps");
    // A new browser process on the same profile is still signed in (the cookie has an expiry).
    let b = driver.session(&chromium, profile.path());
    b.go(&format!("{}/runs/{id}/report", s.url));
    let page = b.wait_for("id=\"continue-form\"", &s);
    assert!(!page.contains("id=\"sign-in\""), "{page}");
    // Continue with nothing raised: the run's page again (never raw JSON), saying what to change.
    b.click("#continue-form button");
    let refused = b.wait_for("id=\"refused\"", &s);
    assert!(refused.contains("raise max_steps above 1 to continue"), "{refused}");
    assert!(refused.contains("id=\"continue-form\"") && !refused.contains("\"status\": 409"), "{refused}");
    // What the form suggests lets the run go on: typed as suggested, it continues.
    let suggested = b.attribute("#max_steps", "placeholder");
    assert_eq!(suggested, "20", "the old limit raised, held to the server's (the default 20)");
    b.type_into("#max_steps", &suggested);
    b.click("#continue-form button");
    let v = s.wait_for(&id, "done", |v| v["status"] == "done");
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(t.json(&format!("root/.agentloop-runs/{id}.json"))["budgets"]["max_steps"], 20);
    // The browser came back to the run's page.
    let at = wd("GET", &format!("{}/url", b.base), None);
    assert_eq!(at.as_str(), Some(format!("{}/runs/{id}/report", s.url).as_str()), "{at}");
}

#[test]
fn a_browser_starts_a_run_from_the_panel() {
    let (Some(driver_bin), Some(chromium)) = (on_path("chromedriver"), crate::browser::chromium()) else {
        crate::common::missing(
            "the panel's browser test: chromedriver or chromium is not installed (apt-get install chromium chromium-driver; .ci/run installs them)",
        );
        return;
    };
    let t = T::new();
    let profile = tempfile::tempdir().unwrap();
    root_with(&t, TWO_STEPS, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let driver = Driver::start(&driver_bin);
    let b = driver.session(&chromium, profile.path());
    b.go(&format!("{}/?token={TOKEN}", s.url));
    b.wait_for("id=\"start\"", &s);
    b.click("#start a");
    b.wait_for("id=\"start-form\"", &s);
    b.type_into("#goal", "List the folder");
    b.type_into("#context", "It is the served root");
    b.type_into("#max_steps", "4");
    b.click("#start-form button");
    // The browser lands on the new run's page, and the run goes to done.
    let page = b.wait_for("List the folder", &s);
    assert!(!page.contains("id=\"start-form\""), "{page}");
    let at = wd("GET", &format!("{}/url", b.base), None);
    let id = at
        .as_str()
        .unwrap()
        .strip_prefix(&format!("{}/runs/", s.url))
        .unwrap()
        .strip_suffix("/report")
        .unwrap()
        .to_string();
    let v = s.wait_for(&id, "done", |v| v["status"] == "done");
    assert_eq!(v["limits_recorded"]["max_steps"], 4, "{v}");
    assert!(t.read(&format!("root/runs/{id}/context.md")).contains("It is the served root"));
}

/// What the sign-in and the pages send: a cookie with an expiry, and a referrer policy under
/// which a browser's form post names the page's origin; a post from another origin is still
/// refused, and a JSON body signed only by the cookie acts on nothing.
#[test]
fn the_sign_in_cookie_lasts_and_pages_let_forms_name_their_origin() {
    let t = T::new();
    root_with(&t, ASKS, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = started(&s, json!({"goal": "Report the figures"}));
    assert_eq!(s.finished(&id)["status"], "escalated");
    let r = agent().get(&format!("{}/runs/{id}/report?token={TOKEN}", s.url)).call().unwrap();
    assert_eq!(r.status().as_u16(), 303);
    let cookie = r.headers().get("Set-Cookie").unwrap().to_str().unwrap().to_string();
    assert!(cookie.contains("Max-Age=2592000") && cookie.contains("HttpOnly"), "{cookie}");
    let mut page = agent()
        .get(&format!("{}/runs/{id}/report", s.url))
        .header("Cookie", &format!("agentloop_token={TOKEN}"))
        .call()
        .unwrap();
    assert_eq!(page.headers().get("Referrer-Policy").unwrap(), "same-origin");
    let body = page.body_mut().read_to_string().unwrap();
    assert!(body.contains("<meta name=\"referrer\" content=\"same-origin\">"), "{body}");
    assert!(!body.contains("no-referrer"), "{body}");
    let at = body.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    let csrf = body[at..].split('"').next().unwrap();
    let trace = t.read(&format!("root/runs/{id}/trace.jsonl"));
    let post = |form: &str, origin: &str| {
        agent()
            .post(&format!("{}/runs/{id}/answer", s.url))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Cookie", &format!("agentloop_token={TOKEN}"))
            .header("Origin", origin)
            .send(form.to_string())
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(post(&format!("csrf={csrf}&answer=2024"), "http://evil.example"), 403);
    assert_eq!(post(&format!("csrf={csrf}&answer=2024"), "null"), 403);
    // A form body built to read as JSON, with the cookie alone: refused, whatever it holds.
    assert_eq!(post(&format!(r#"{{"answer": "2024", "csrf": "{csrf}"}}"#), &s.url), 403);
    assert_eq!(t.read(&format!("root/runs/{id}/trace.jsonl")), trace, "a refused post changed nothing");
    assert_eq!(post(&format!("csrf={csrf}&answer=2024"), &s.url), 303);
    assert_eq!(s.finished(&id)["status"], "done");
}

/// Runs a shell line as the docs write it, with `TOKEN` and the served port in its environment;
/// its stdout.
fn sh(s: &Serve, line: &str) -> String {
    let port = s.url.rsplit(':').next().unwrap();
    let line = line.replace("localhost:8700", &format!("localhost:{port}"));
    let out = Command::new("sh").arg("-c").arg(&line).env("TOKEN", &s.token).output().expect("run sh");
    assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The documented curl lines of docs/HTTP-API.md, as written (`-d '{...}'`: curl sends
/// `application/x-www-form-urlencoded`), with only the run id and the port filled in.
#[test]
fn the_documented_curl_lines_start_answer_and_continue_runs() {
    if on_path("curl").is_none() {
        crate::common::missing("the documented curl lines: curl is not installed (apt-get install curl)");
        return;
    }
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/HTTP-API.md")).unwrap();
    let line = |part: &str| -> String {
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
    };
    let t = T::new();
    root_with(&t, ASKS, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let started = sh(&s, &line("localhost:8700/runs \\"));
    let v: Value = serde_json::from_str(&started).unwrap_or_else(|e| panic!("{e}: {started}"));
    let id = v["run_id"].as_str().unwrap_or_else(|| panic!("{v}")).to_string();
    assert_eq!(s.finished(&id)["status"], "escalated");
    let answered = sh(&s, &line("/answer -d '{").replace("01K...", &id));
    assert_eq!(serde_json::from_str::<Value>(&answered).unwrap()["run_id"], id.as_str(), "{answered}");
    let v = s.finished(&id);
    assert_eq!(v["status"], "done", "{v}");

    t.write("script.yaml", TWO_STEPS);
    drop(s);
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = started_with_budget(&s);
    let continued = sh(&s, &line("/continue -d '{").replace("01K...", &id));
    assert_eq!(serde_json::from_str::<Value>(&continued).unwrap()["run_id"], id.as_str(), "{continued}");
    let v = s.finished(&id);
    assert_eq!(v["status"], "done", "{v}");
}

fn started_with_budget(s: &Serve) -> String {
    let id = started(s, json!({"goal": "g", "budgets": {"max_steps": 1}}));
    assert_eq!(s.finished(&id)["stop"], "max_steps");
    id
}
