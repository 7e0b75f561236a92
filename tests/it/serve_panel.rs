//! The served panel in a browser's shoes: the sign-in page and its cookie, redirects that stay
//! on the site, a running run's page, the answer and continue forms, and Ctrl-C on a served run.

use crate::browser;
use crate::common::*;
use crate::serve::*;
use serde_json::json;
use std::process::Command;
use std::sync::atomic::Ordering;

/// GET `path` as a browser would (`Accept: text/html`), with `token` as a bearer token if any.
fn browse(s: &Serve, path: &str, token: Option<&str>) -> Resp {
    let mut r = agent().get(&format!("{}{path}", s.url)).header("Accept", "text/html,application/xhtml+xml,*/*;q=0.8");
    if let Some(t) = token {
        r = r.header("Authorization", &format!("Bearer {t}"));
    }
    let mut resp = r.call().unwrap();
    let headers = resp.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
    let status = resp.status().as_u16();
    Resp { status, headers, body: resp.body_mut().read_to_string().unwrap_or_default() }
}

/// A browser without a token gets a sign-in page; API clients the JSON 401 naming both ways to
/// sign in. A generated token is kept (owner-only) in the user's state folder and reused by the
/// next start; --new-token replaces it.
#[test]
fn a_browser_without_a_token_gets_a_sign_in_page_and_a_made_token_is_kept() {
    use predicates::prelude::PredicateBooleanExt;
    let t = T::new();
    root_with(&t, QUICK, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], None);
    let kept = t.path("home/.local/state/agentloop/serve-token");
    assert_eq!(std::fs::read_to_string(&kept).unwrap().trim(), s.token);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777, 0o600);
    wait_until("serve says where the token is kept", &s, || {
        s.log().contains("serve-token (serve --new-token replaces it)")
    });
    // A browser: the sign-in page, still a 401.
    let page = browse(&s, "/", None);
    assert_eq!(page.status, 401);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    assert!(page.body.contains("<form method=\"get\" action=\"/\" id=\"sign-in\">"), "{}", page.body);
    assert!(page.body.contains("name=\"token\"") && page.body.contains("?token=TOKEN"));
    assert!(page.header("content-security-policy").unwrap().contains("form-action 'self'"));
    assert!(!page.body.contains("id=\"refused\""));
    // A wrong token says so; the page asked for is where the form goes.
    let wrong = browse(&s, "/runs/X/report?token=wrong-token-0123456789", None);
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("id=\"refused\"") && wrong.body.contains("action=\"/runs/X/report\""));
    // The form never leads to another host, whatever the address asked for.
    for odd in ["//evil.example/x", "/%5Cevil.example/", "/\\evil.example/"] {
        let page = browse(&s, odd, None);
        assert_eq!(page.status, 401);
        assert!(!page.body.contains("action=\"//") && !page.body.contains("action=\"/\\"), "{odd}: {}", page.body);
    }
    // The form's target signs in: a cookie and the page without the token.
    let ok = browse(&s, &format!("/?token={}", s.token), None);
    assert_eq!((ok.status, ok.header("location")), (303, Some("/")));
    // An API client: JSON, with a hint naming the header and ?token=.
    let api = s.call("GET", "/runs", None, None);
    assert_eq!(api.status, 401);
    let hint = api.json()["hint"].as_str().unwrap().to_string();
    assert!(hint.contains("Authorization: Bearer TOKEN") && hint.contains("?token=TOKEN"), "{hint}");
    if let Some(chromium) = browser::or_skip("a_browser_without_a_token_gets_a_sign_in_page") {
        let dom = browser::dump_dom(&chromium, &format!("{}/runs", s.url));
        assert!(dom.contains("id=\"sign-in\"") && dom.contains("Sign in to agentloop"), "{dom}");
        for w in [1280, 420] {
            let shot = browser::shots_dir().join(format!("serve-sign-in-{w}.png"));
            browser::screenshot(&chromium, &format!("{}/", s.url), &shot, w, 700);
        }
        eprintln!("screenshots of the sign-in page: {}", browser::shots_dir().display());
    }
    let first = s.token.clone();
    drop(s);
    // The next start uses the kept token; --new-token replaces it and the old one is refused.
    let s = serve(&t, &["--script", "script.yaml"], &[], None);
    assert_eq!(s.token, first);
    drop(s);
    let s = serve(&t, &["--script", "script.yaml"], &["--new-token"], None);
    assert_ne!(s.token, first);
    assert_eq!(std::fs::read_to_string(&kept).unwrap().trim(), s.token);
    assert_eq!(s.call("GET", "/runs", None, Some(&first)).status, 401);
    assert_eq!(s.get("/runs").status, 200);
    drop(s);
    t.cmd()
        .env("AGENTLOOP_TOKEN", TOKEN)
        .args(["serve", "--root", "root", "--listen", "127.0.0.1:0", "--new-token"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--new-token").and(predicates::str::contains("AGENTLOOP_TOKEN")));
    // A kept file that holds no token is named, with the fix.
    std::fs::write(&kept, "x\n").unwrap();
    t.cmd().args(["serve", "--root", "root", "--listen", "127.0.0.1:0"]).assert().code(2).stderr(
        predicates::str::contains("serve-token does not hold a serve token")
            .and(predicates::str::contains("--new-token")),
    );
}

/// Sends `GET target` as written (no client in between to tidy it) and returns the status line's
/// code and the head's lines.
fn get_as_written(s: &Serve, target: &str) -> (u16, Vec<String>) {
    use std::io::{Read, Write};
    let addr = s.url.trim_start_matches("http://");
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(c, "GET {target} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/html\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = Vec::new();
    let _ = c.read_to_end(&mut reply);
    let text = String::from_utf8_lossy(&reply).to_string();
    let head: Vec<String> = text.split("\r\n\r\n").next().unwrap_or("").lines().map(String::from).collect();
    let code = head.first().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, head)
}

/// Signing in with a valid `?token=` sends the browser, now holding the cookie, only to a page of
/// this server: an address that a browser would read as another host goes to `/`.
#[test]
fn a_sign_in_never_redirects_to_another_site() {
    let t = T::new();
    root_with(&t, QUICK, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let location = |target: &str| {
        let (code, head) = get_as_written(&s, target);
        assert_eq!(code, 303, "{target}: {head:?}");
        assert!(head.iter().any(|h| h.to_ascii_lowercase().starts_with("set-cookie: agentloop_token=")), "{head:?}");
        let at = head.iter().find_map(|h| h.split_once(": ").filter(|(k, _)| k.eq_ignore_ascii_case("location")));
        at.map(|(_, v)| v.to_string()).unwrap_or_else(|| panic!("{target}: no Location in {head:?}"))
    };
    for off in ["//evil.example/x", "/\\evil.example", "///evil.example", "/\\/evil.example", "//evil.example"] {
        assert_eq!(location(&format!("{off}?token={TOKEN}")), "/", "{off}");
        assert_eq!(location(&format!("{off}?a=1&token={TOKEN}")), "/", "{off} with more query");
    }
    // A path of this server keeps its page and the rest of its query.
    assert_eq!(location(&format!("/runs/X/report?token={TOKEN}&x=1")), "/runs/X/report?x=1");
    assert_eq!(location(&format!("/runs?token={TOKEN}")), "/runs");
}

/// Ctrl-C stops serve saying what it interrupted; the run it was driving is marked so (`runs`
/// and GET /runs show `interrupted`), and the next start goes on with it.
#[test]
fn sigint_marks_the_served_run_interrupted_and_the_next_start_goes_on() {
    let t = T::new();
    let (slow, hold) = gate();
    root_with(&t, &slow_script(&slow.url), "tools: {http: {allow_private: true}}\n");
    let mut s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = s.post("/runs", &json!({"goal": "fetch slowly"})).json()["run_id"].as_str().unwrap().to_string();
    wait_until("the slow service is called", &s, || slow.count() >= 1);
    // Its page says what it is doing now.
    let page = s.get(&format!("/runs/{id}/report"));
    assert!(
        page.body.contains("<p class=\"now\" id=\"now\"><strong>Now:</strong> running the tool http_call"),
        "{}",
        page.body
    );
    let ok = Command::new("kill").args(["-INT", &s.child.id().to_string()]).status().unwrap();
    assert!(ok.success());
    let status = s.child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert!(status.signal() == Some(2) || status.code() == Some(130), "{status:?}");
    let log = s.log();
    assert!(log.contains(&format!("agentloop serve on {} stopped by SIGINT; 1 run was in progress", s.url)), "{log}");
    assert!(
        log.contains(&format!("interrupted: run {id} at step 1 is marked interrupted; every committed phase is kept")),
        "{log}"
    );
    assert!(t.json(&format!("root/runs/{id}/state.json"))["interrupted"].as_bool().unwrap());
    let listed = t.cmd().args(["-w", "root", "runs"]).output().unwrap();
    let line = stdout(&listed).lines().find(|l| l.contains(&id)).map(String::from).unwrap_or_default();
    assert!(line.contains("interrupted"), "{}", stdout(&listed));
    drop(s);
    // With --no-resume it stays interrupted, and the panel says so.
    let s = serve(&t, &["--script", "script.yaml"], &["--no-resume"], Some(TOKEN));
    let panel = s.get("/").body;
    assert!(panel.contains(&format!("data-run=\"{id}\"")) && panel.contains("badge s-interrupted"), "{panel}");
    assert_eq!(s.get(&format!("/runs/{id}")).json()["interrupted"], true);
    drop(s);
    hold.store(false, Ordering::SeqCst);
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    assert_eq!(s.finished(&id)["status"], "done", "{}", s.log());
    assert!(s.log().contains(&format!("run {id} was interrupted by SIGINT; queued to go on")), "{}", s.log());
}

/// A running run's page says what it is doing now: asking the model during its first call,
/// waiting for a worker while another run holds the only one.
#[test]
fn a_running_runs_page_says_what_it_is_doing_now() {
    let t = T::new();
    let (model, hold) = gate();
    let config = format!(
        "llm: {{provider: openai, base_url: '{}/v1', model: m, api_key_cmd: [echo, sk-test], attempts: 1}}\n",
        model.url
    );
    t.write("root/agentloop.yaml", &config);
    let s = serve(&t, &[], &["--workers", "1"], Some(TOKEN));
    let a = s.post("/runs", &json!({"goal": "first"}));
    assert_eq!(a.status, 202, "{}", a.body);
    let a = a.json()["run_id"].as_str().unwrap().to_string();
    wait_until("the model is asked", &s, || model.count() >= 1);
    let page = s.get(&format!("/runs/{a}/report")).body;
    assert!(page.contains("<strong>Now:</strong> asking the model to frame the goal</p>"), "{page}");
    assert!(page.contains("No phase has finished yet."));
    let b = s.post("/runs", &json!({"goal": "second"})).json()["run_id"].as_str().unwrap().to_string();
    let page = s.get(&format!("/runs/{b}/report")).body;
    assert!(page.contains("<strong>Now:</strong> waiting for a worker (1 in line)</p>"), "{page}");
    hold.store(false, Ordering::SeqCst);
}

#[test]
fn the_panels_start_page_starts_a_run_with_a_form_only_its_pages_can_post() {
    let t = T::new();
    root_with(&t, TWO_STEPS, "max_steps: 5\n");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    // The index links to the start page; that page's form posts to POST /runs.
    let index = browse(&s, "/", Some(TOKEN));
    assert!(index.body.contains("href=\"/start\""), "{}", index.body);
    let page = browse(&s, "/start", Some(TOKEN));
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("id=\"start-form\"") && page.body.contains("action=\"/runs\""), "{}", page.body);
    assert!(page.header("Content-Security-Policy").unwrap().contains("form-action 'self'"));
    assert!(!page.body.contains("http-equiv=\"refresh\""), "a goal being typed is not wiped");
    let csrf = csrf_of(&page.body);
    let origin = s.url.clone();
    let runs = || std::fs::read_dir(t.path("root/runs")).map(|d| d.count()).unwrap_or(0);
    // Refused as the other forms are: no form value, another site, a field it lacks; and as
    // POST /runs refuses: a blank goal, a limit above the server's.
    for (form, from, status, says) in [
        ("goal=g".to_string(), origin.as_str(), 403, "reload the page"),
        (format!("csrf={csrf}&goal=g"), "http://evil.example", 403, "form"),
        (format!("csrf={csrf}&goal=g&force=true"), origin.as_str(), 400, "no field `force`"),
        (format!("csrf={csrf}&goal=+"), origin.as_str(), 400, "`goal` is required"),
        (format!("csrf={csrf}&goal=g&max_steps=9"), origin.as_str(), 400, "max_steps"),
    ] {
        let r = s.post_form("/runs", &form, Some(from));
        assert_eq!(r.status, status, "{form}: {}", r.body);
        assert!(r.body.contains(says), "{form}: {}", r.body);
    }
    assert_eq!(runs(), 0, "a refused form started nothing");
    // Filled in as a person would: the run starts with its background and narrower limit, and
    // the browser is sent to its page.
    let r = s.post_form(
        "/runs",
        &format!("csrf={csrf}&goal=List+the+folder&context=It+is+the+root&agent=&max_steps=3&max_reframes=&timeout=&max_tokens=&max_cost_usd="),
        Some(&origin),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let to = r.header("Location").unwrap().to_string();
    let id = to.strip_prefix("/runs/").and_then(|r| r.strip_suffix("/report")).unwrap().to_string();
    let v = s.finished(&id);
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(v["limits_recorded"]["max_steps"], 3, "{v}");
    assert!(t.read(&format!("root/runs/{id}/context.md")).contains("It is the root"));
    assert_eq!(runs(), 1);
}

impl Serve {
    /// POSTs a form as a signed-in browser does: the sign-in cookie, no bearer token.
    fn post_form(&self, path: &str, form: &str, origin: Option<&str>) -> Resp {
        let cookie = format!("agentloop_token={}", self.token);
        let mut headers = vec![("Cookie", cookie.as_str())];
        if let Some(o) = origin {
            headers.push(("Origin", o));
        }
        self.post_with(path, form, &headers)
    }

    /// POSTs a form-encoded `form` with `headers` (and nothing else: no token, no cookie).
    fn post_with(&self, path: &str, form: &str, headers: &[(&str, &str)]) -> Resp {
        let mut r =
            agent().post(&format!("{}{path}", self.url)).header("Content-Type", "application/x-www-form-urlencoded");
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        let mut resp = r.send(form).unwrap();
        let headers =
            resp.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
        let status = resp.status().as_u16();
        Resp { status, headers, body: resp.body_mut().read_to_string().unwrap_or_default() }
    }
}

/// The form value a served page carries.
fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("the page has a form") + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_string()
}

/// The panel answers an escalated run and continues a stopped one with forms; a form posted
/// with the cookie acts only with the value its page carries and from the server's own origin,
/// and a refused form changes nothing.
#[test]
fn the_panel_answers_and_continues_runs_with_forms_only_its_pages_can_post() {
    let t = T::new();
    root_with(&t, ASKS, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = s.post("/runs", &json!({"goal": "Report the figures"})).json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&id)["status"], "escalated");
    let page = browse(&s, &format!("/runs/{id}/report"), Some(TOKEN));
    assert!(
        page.body.contains("id=\"answer-form\"") && page.body.contains("Which year&#39;s figures?"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("id=\"continue-form\""));
    assert!(page.header("Content-Security-Policy").unwrap().contains("form-action 'self'"));
    assert!(page.body.contains("form-action 'self'"));
    let csrf = csrf_of(&page.body);
    let origin = s.url.clone();
    let trace = t.read(&format!("root/runs/{id}/trace.jsonl"));
    // Without the page's value, from another site, or with a field the form lacks: refused.
    let r = s.post_form(&format!("/runs/{id}/answer"), "answer=2024", Some(&origin));
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(r.body.contains("reload the page"), "{}", r.body);
    let r =
        s.post_form(&format!("/runs/{id}/answer"), &format!("csrf={csrf}&answer=2024"), Some("http://evil.example"));
    assert_eq!(r.status, 403, "{}", r.body);
    let r = s.post_form(&format!("/runs/{id}/answer"), &format!("csrf={csrf}&answer=2024&goal=x"), Some(&origin));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("no field `goal`"), "{}", r.body);
    // No cookie at all: the sign-in is needed.
    let r = agent()
        .post(&format!("{}/runs/{id}/answer", s.url))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .send(format!("csrf={csrf}&answer=2024"))
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // The cookie signs no other POST, whatever its body says it is; nor a body for the start
    // form that reads as JSON.
    let r = s.post_form("/skills/fetch", r#"{"id": "x", "url": "http://127.0.0.1:9/x"}"#, None);
    assert_eq!(r.status, 401, "{}", r.body);
    let r = s.post_form("/runs", r#"{"goal": "spend their money"}"#, None);
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(t.read(&format!("root/runs/{id}/trace.jsonl")), trace, "a refused form changed nothing");
    let r =
        s.post_form(&format!("/runs/{id}/answer"), &format!("csrf={csrf}&answer=Use+the+2024+figures"), Some(&origin));
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.header("Location"), Some(format!("/runs/{id}/report").as_str()));
    assert_eq!(s.finished(&id)["status"], "done");
    let answered = t.read(&format!("root/runs/{id}/trace.jsonl"));
    assert!(answered.contains("\"answer\":\"Use the 2024 figures\""), "{answered}");
    // A done run's page offers no form, and its policy lets no form post.
    let page = browse(&s, &format!("/runs/{id}/report"), Some(TOKEN));
    assert!(!page.body.contains("<form") && page.body.contains("form-action 'none'"), "{}", page.body);

    // A run stopped by its step budget: the continue form raises it.
    t.write("script.yaml", TWO_STEPS);
    drop(s);
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = s.post("/runs", &json!({"goal": "g", "budgets": {"max_steps": 1}})).json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(s.finished(&id)["stop"], "max_steps");
    let page = browse(&s, &format!("/runs/{id}/report"), Some(TOKEN));
    assert!(page.body.contains("id=\"continue-form\"") && page.body.contains("name=\"max_steps\""), "{}", page.body);
    let csrf = csrf_of(&page.body);
    let r = s.post_form(&format!("/runs/{id}/continue"), &format!("csrf={csrf}&max_steps=many"), None);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("`max_steps` = `many` is not a number"), "{}", r.body);
    let r =
        s.post_form(&format!("/runs/{id}/continue"), &format!("csrf={csrf}&max_steps=4&max_tokens=&timeout="), None);
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(s.finished(&id)["status"], "done");
    assert_eq!(t.json(&format!("root/.agentloop-runs/{id}.json"))["budgets"]["max_steps"], 4);
}

/// A refused panel form is answered with its own page, never raw JSON: the run's page (or the
/// start page) under the refusal's status, the error and what to change in a box above the
/// form, what was typed filled in again and escaped. API clients keep the JSON error: a JSON
/// body, or `Accept` asking for JSON only. A browser's form without a valid sign-in gets the
/// sign-in page, which leads back to the form's page.
#[test]
fn a_refused_panel_form_gets_its_page_back_with_the_error_and_what_to_change() {
    let t = T::new();
    root_with(&t, TWO_STEPS, "max_steps: 6\n");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = s.post("/runs", &json!({"goal": "g", "budgets": {"max_steps": 1}})).json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(s.finished(&id)["stop"], "max_steps");
    let page = browse(&s, &format!("/runs/{id}/report"), Some(TOKEN));
    let csrf = csrf_of(&page.body);
    let trace = t.read(&format!("root/runs/{id}/trace.jsonl"));
    let html = |r: &Resp| {
        assert!(r.header("Content-Type").unwrap().starts_with("text/html"), "{:?}: {}", r.headers, r.body);
        assert!(!r.body.trim_start().starts_with('{'), "{}", r.body);
        assert!(r.body.contains("id=\"refused\" role=\"alert\""), "{}", r.body);
    };
    // Continue with nothing raised, as the form is sent with every field empty: the run's page
    // again, 409, saying which limit to raise above what.
    let empty = format!("csrf={csrf}&max_steps=&max_reframes=&timeout=&max_tokens=&max_cost_usd=");
    let r = s.post_form(&format!("/runs/{id}/continue"), &empty, Some(&s.url));
    assert_eq!(r.status, 409, "{}", r.body);
    html(&r);
    assert!(r.body.contains("The run was not continued") && r.body.contains("max_steps is still over"), "{}", r.body);
    assert!(
        r.body.contains("raise max_steps above 1 to continue: put 6 in Steps (at most 6, this server&#39;s limit)"),
        "{}",
        r.body
    );
    assert!(r.body.contains("id=\"continue-form\"") && r.body.contains("id=\"goal\""), "the run's page: {}", r.body);
    assert!(r.header("Content-Security-Policy").unwrap().contains("form-action 'self'"));
    assert!(!r.body.contains("http-equiv=\"refresh\""), "a page answering a POST does not reload itself");
    // What was typed is kept, escaped; a limit above the server's names the most it may be.
    let r = s.post_form(&format!("/runs/{id}/continue"), &format!("csrf={csrf}&max_steps=9&timeout="), None);
    assert_eq!(r.status, 400, "{}", r.body);
    html(&r);
    assert!(
        r.body.contains("is above the root&#39;s 6") && r.body.contains("ask for at most 6 as max_steps"),
        "{}",
        r.body
    );
    let r = s.post_form(
        &format!("/runs/{id}/continue"),
        &format!("csrf={csrf}&max_steps=9&max_tokens=%22%3E%3Cb%3Ex"),
        None,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("value=\"9\"") && r.body.contains("value=\"&quot;&gt;&lt;b&gt;x\""), "{}", r.body);
    assert!(!r.body.contains("\"><b>x"), "{}", r.body);
    // Without the page's form value: 403, the page (with the current value) to send it from.
    let r = s.post_form(&format!("/runs/{id}/continue"), "max_steps=4", None);
    assert_eq!(r.status, 403, "{}", r.body);
    html(&r);
    assert!(r.body.contains("reload the page") && r.body.contains(&csrf), "{}", r.body);
    // No such run: the box and the way back to the runs.
    let r = s.post_form("/runs/01NOSUCHRUN0000000000000000/continue", &empty, None);
    assert_eq!(r.status, 404, "{}", r.body);
    html(&r);
    assert!(r.body.contains("href=\"/\""), "{}", r.body);
    // API clients keep the JSON error: a JSON body with the token, a form asking for JSON only.
    let r = s.post(&format!("/runs/{id}/continue"), &json!({}));
    assert_eq!(
        (r.status, r.json()["hint"].as_str().unwrap().contains("raise max_steps above 1")),
        (409, true),
        "{}",
        r.body
    );
    let cookie = format!("agentloop_token={TOKEN}");
    let r =
        s.post_with(&format!("/runs/{id}/continue"), &empty, &[("Cookie", &cookie), ("Accept", "application/json")]);
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.json()["error"].as_str().unwrap().contains("max_steps is still over"), "{}", r.body);
    let bearer = format!("Bearer {TOKEN}");
    let r = s.post_with(&format!("/runs/{id}/continue"), "max_steps=", &[("Authorization", &bearer)]);
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.json()["hint"].is_string(), "{}", r.body);
    // A browser's form without a valid sign-in: the sign-in page, back to the run's page.
    let r = s.post_with(
        &format!("/runs/{id}/continue"),
        &empty,
        &[("Cookie", "agentloop_token=stale-token-0123456789"), ("Accept", "text/html")],
    );
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(
        r.body.contains("id=\"sign-in\"") && r.body.contains(&format!("action=\"/runs/{id}/report\"")),
        "{}",
        r.body
    );
    assert_eq!(t.read(&format!("root/runs/{id}/trace.jsonl")), trace, "a refused form changed nothing");

    // The start form: its page again with what was typed; the answer form: the run's page.
    let r = s.post_form("/runs", &format!("csrf={csrf}&goal=+&context=%3Ci%3Ebackground%3C%2Fi%3E&max_steps=3"), None);
    assert_eq!(r.status, 400, "{}", r.body);
    html(&r);
    assert!(r.body.contains("The run was not started") && r.body.contains("`goal` is required"), "{}", r.body);
    assert!(
        r.body.contains("id=\"start-form\"") && r.body.contains("&lt;i&gt;background&lt;/i&gt;</textarea>"),
        "{}",
        r.body
    );
    assert!(
        r.body.contains("id=\"max_steps\" name=\"max_steps\" type=\"number\" min=\"1\" step=\"1\" value=\"3\""),
        "{}",
        r.body
    );
    let r = s.post_form(&format!("/runs/{id}/answer"), &format!("csrf={csrf}&answer=%3Cscript%3E1"), None);
    assert_eq!(r.status, 409, "{}", r.body);
    html(&r);
    assert!(r.body.contains("The answer was not taken") && !r.body.contains("<script>1"), "{}", r.body);
    let r = s.post_form(&format!("/runs/{id}/answer"), &format!("csrf={csrf}&answer=x&goal=y"), None);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("no field `goal`") && r.body.contains("its fields: csrf, answer"), "{}", r.body);
}

/// The value a page's input `name` suggests (its placeholder).
fn placeholder(page: &str, name: &str) -> String {
    let at = page.find(&format!("<input id=\"{name}\"")).unwrap_or_else(|| panic!("no input {name}: {page}"));
    let tag = &page[at..at + page[at..].find('>').unwrap()];
    let p = tag.find("placeholder=\"").unwrap() + "placeholder=\"".len();
    tag[p..].split('"').next().unwrap().to_string()
}

/// The continue form says each limit in force ("now N") and suggests a value that lets the run
/// go on, held to the server's own limit: sending what it suggests continues the run. A limit
/// the server's own does not let the run go on under is said on the page, and a continue then
/// names the server's limit as what must change.
#[test]
fn the_continue_form_suggests_limits_that_let_the_run_go_on() {
    let t = T::new();
    root_with(&t, TWO_STEPS, "max_steps: 6\n");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = s.post("/runs", &json!({"goal": "g", "budgets": {"max_steps": 1}})).json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(s.finished(&id)["stop"], "max_steps");
    let page = browse(&s, &format!("/runs/{id}/report"), Some(TOKEN)).body;
    assert!(page.contains("<label for=\"max_steps\">Steps <span class=\"now\">(now 1)</span></label>"), "{page}");
    assert!(page.contains("Tokens <span class=\"now\">(now no limit)</span>"), "{page}");
    let steps = placeholder(&page, "max_steps");
    assert_eq!(steps, "6", "the old limit raised, held to the server's 6");
    assert_eq!(placeholder(&page, "max_reframes"), "2", "a limit not used up suggests itself");
    assert!(!page.contains("id=\"stuck\""), "{page}");
    let form = format!("csrf={}&max_steps={steps}&max_reframes=&timeout=&max_tokens=&max_cost_usd=", csrf_of(&page));
    let r = s.post_form(&format!("/runs/{id}/continue"), &form, Some(&s.url));
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(s.finished(&id)["status"], "done");
    assert_eq!(t.json(&format!("root/.agentloop-runs/{id}.json"))["budgets"]["max_steps"], 6);

    // Stopped by the server's own limit: nothing a form may ask lets it go on, and it says so.
    t.write("root/agentloop.yaml", "max_steps: 1\n");
    drop(s);
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let id = s.post("/runs", &json!({"goal": "g"})).json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&id)["stop"], "max_steps");
    let page = browse(&s, &format!("/runs/{id}/report"), Some(TOKEN)).body;
    assert!(
        page.contains("id=\"stuck\"") && page.contains("used 1 of max_steps, and this server allows at most 1"),
        "{page}"
    );
    assert_eq!(placeholder(&page, "max_steps"), "");
    let r = s.post(&format!("/runs/{id}/continue"), &json!({}));
    assert_eq!(r.status, 409, "{}", r.body);
    let hint = r.json()["hint"].as_str().unwrap().to_string();
    assert!(hint.contains("this server allows at most 1:") && hint.contains("root's agentloop.yaml"), "{hint}");
}

/// A run whose model asks a question (exit 3) and one a limit stopped (exit 4) are both
/// `escalated` to `runs`, but the panel gives each a badge of its own, the same in the runs list
/// and on the run's page: words that say it (`needs an answer`, `out of steps`), and a colour
/// of its own, distinct from the red of other escalations.
#[test]
fn a_question_and_a_spent_limit_have_badges_of_their_own() {
    let t = T::new();
    root_with(&t, ASKS, "");
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let asks = s.post("/runs", &json!({"goal": "Report the figures"})).json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(s.finished(&asks)["stop"], "escalated");
    t.write("script.yaml", TWO_STEPS);
    drop(s);
    let s = serve(&t, &["--script", "script.yaml"], &[], Some(TOKEN));
    let spent = s.post("/runs", &json!({"goal": "g", "budgets": {"max_steps": 1}})).json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(s.finished(&spent)["stop"], "max_steps");
    assert_eq!(s.get(&format!("/runs/{asks}")).json()["status"], "escalated", "the API's status is unchanged");
    let question = "title=\"escalated (escalated)\" class=\"badge s-question\">needs an answer</span>";
    let steps = "title=\"escalated (max_steps)\" class=\"badge s-budget\">out of steps</span>";
    let index = browse(&s, "/", Some(TOKEN)).body;
    let row = |id: &str| {
        let at = index.find(&format!("data-run=\"{id}\"")).unwrap_or_else(|| panic!("no row {id}: {index}"));
        index[at..at + index[at..].find("</tr>").unwrap()].to_string()
    };
    assert!(row(&asks).contains(question), "{}", row(&asks));
    assert!(row(&spent).contains(steps), "{}", row(&spent));
    let page = browse(&s, &format!("/runs/{asks}/report"), Some(TOKEN)).body;
    assert!(page.contains("data-status=\"escalated\" title=\"escalated (escalated)\" id=\"status\" class=\"badge s-question\">needs an answer"), "{page}");
    let page = browse(&s, &format!("/runs/{spent}/report"), Some(TOKEN)).body;
    assert!(page.contains("id=\"status\" class=\"badge s-budget\">out of steps</span>"), "{page}");
    // Each has a colour of its own, and neither is the red of another escalation.
    for rule in [".s-question { background: var(--ask); }", ".s-budget { background: var(--limit); }"] {
        assert!(index.contains(rule), "{rule}");
    }
    let Some(chromium) = browser::or_skip("a_question_and_a_spent_limit_have_badges_of_their_own") else { return };
    let file = t.path("index.html");
    let other = "<span class=\"badge s-escalated\" id=\"other\">escalated</span></main>";
    std::fs::write(&file, index.replace("</main>", other)).unwrap();
    let colours = browser::probe(
        &chromium,
        &file,
        1024,
        "['.s-question', '.s-budget', '#other'].map(c => getComputedStyle(document.querySelector(c)).backgroundColor).join('|')",
    );
    let c: Vec<&str> = colours.split('|').collect();
    assert_eq!(c.len(), 3, "{colours}");
    assert!(c[0] != c[1] && c[0] != c[2] && c[1] != c[2], "three distinct colours: {colours}");
}
