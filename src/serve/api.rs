//! The routes of `serve`: the `Host`, authentication, the rate limit, then one handler per
//! endpoint.
//!
//! Every reply is JSON (errors too: `{"error", "status", "causes"?, "hint"?, "hints"?}`) except the HTML pages, the
//! JSONL trace, its event stream and run files.

use super::http::{self, only_keys, ApiError, ApiResult, Out, Reply};
use super::queue::Place;
use super::runs::{self, Budgets, NewRun};
use super::{agents, auth, forms, pages, stream, Shared};
use agentloop_engine::lifecycle::Request;
use agentloop_types::budget::Budget;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What POST /runs takes.
const START_KEYS: &[&str] = &["goal", "context", "agent", "session", "budgets", "force", "output_schema"];

/// Seconds a client is asked to wait when the queue is full.
const RETRY_FULL: u64 = 10;

/// Whether a request presents a valid token (without taking from its rate limit).
pub fn signed_in(shared: &Shared, req: &tiny_http::Request) -> bool {
    let query = http::target(req.url()).map(|(_, q)| q).unwrap_or_default();
    let (token, _) = token_of(req, &query);
    token.as_deref().and_then(|t| shared.auth.check(t)).is_some()
}

/// The token a request presents, and whether it came from the cookie of a posted form (which
/// may act only with the panel's form value: [`forms::fields`] checks it).
fn token_of(req: &tiny_http::Request, query: &BTreeMap<String, String>) -> (Option<String>, bool) {
    let get = matches!(req.method(), tiny_http::Method::Get | tiny_http::Method::Head);
    match auth::presented(req.headers(), get, query.get("token").map(String::as_str)) {
        Some(t) => (Some(t), false),
        None if *req.method() == tiny_http::Method::Post && http::is_form(req) && is_form_target(req.url()) => {
            (auth::cookie(req.headers()), true)
        }
        None => (None, false),
    }
}

/// Whether `url` is one the panel's forms post to (the only POSTs the cookie may sign).
fn is_form_target(url: &str) -> bool {
    let Ok((segs, _)) = http::target(url) else { return false };
    matches!(
        segs.iter().map(String::as_str).collect::<Vec<_>>().as_slice(),
        ["runs"] | ["runs", _, "answer" | "continue"]
    )
}

/// Handles one request; a reply is always sent (or the stream started).
pub fn handle(shared: &Arc<Shared>, mut req: tiny_http::Request) {
    let method = req.method().as_str().to_ascii_uppercase();
    let raw = req.url().to_string();
    let path = raw.split('?').next().unwrap_or("").to_string();
    let out = route(shared, &mut req, &method, &raw).unwrap_or_else(|e| Out::Reply(e.reply()));
    match out {
        Out::Reply(reply) => {
            shared.debug(&format!("{method} {path} → {}", reply.status));
            reply.send(req);
        }
        Out::Stream(ws, after) => {
            shared.debug(&format!("{method} {path} → 200 (event stream)"));
            let s = shared.clone();
            std::thread::spawn(move || {
                stream::follow(&s, ws, req, after);
                s.streams.fetch_sub(1, Ordering::SeqCst);
            });
        }
        Out::File(f, ctype) => {
            shared.debug(&format!("{method} {path} → 200"));
            let mut resp = tiny_http::Response::from_file(f);
            for (k, v) in [
                ("Content-Type", ctype),
                ("X-Content-Type-Options", "nosniff"),
                ("Content-Security-Policy", "sandbox; default-src 'none'"),
                ("Cache-Control", "no-store"),
            ] {
                if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                    resp.add_header(h);
                }
            }
            let _ = req.respond(resp);
        }
    }
}

fn route(shared: &Arc<Shared>, req: &mut tiny_http::Request, method: &str, raw: &str) -> ApiResult<Out> {
    // Before anything, the token and the target included: a page of another site that reached
    // this address by DNS rebinding learns nothing, not even whether a path exists.
    shared.hosts.check(req)?;
    let (segs, query) = http::target(raw)?;
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let get = method == "GET" || method == "HEAD";
    if segs == ["health"] {
        return allow(method, &["GET"]).map(|_| Out::Reply(health()));
    }
    if segs == ["openapi.json"] {
        return allow(method, &["GET"]).map(|_| Out::Reply(Reply::json(200, &crate::openapi::openapi())));
    }
    let (token, by_cookie) = token_of(req, &query);
    let Some(who) = token.as_deref().and_then(|t| shared.auth.check(t)) else {
        // A person in a browser gets a page to sign in on; API clients the JSON error.
        if get && wants_html(req) {
            // Rebuilt from the decoded segments: always one leading slash, so never another host.
            let path: Vec<String> = segs.iter().map(|s| agentloop_engine::report::html::encode_segment(s)).collect();
            let path = format!("/{}", path.join("/"));
            return Ok(Out::Reply(pages::sign_in(&path, token.is_some(), shared.auth.generated)));
        }
        // A browser's panel form without a valid sign-in (its cookie expired, the token
        // changed): the sign-in page, which leads back to the form's page.
        if let Some(back) = form_page(&segs).filter(|_| method == "POST" && http::is_form(req) && wants_html(req)) {
            return Ok(Out::Reply(pages::sign_in(&back, token.is_some(), shared.auth.generated)));
        }
        return Err(ApiError::new(401, "a valid bearer token is required").hint(
            "send `Authorization: Bearer TOKEN` (the token serve printed at start, or AGENTLOOP_TOKEN); \
             a browser opens the page once with ?token=TOKEN, which signs it in with a cookie",
        ));
    };
    if let Err(secs) = shared.auth.take(who) {
        return Err(ApiError::new(429, "too many requests for this token").retry_after(secs));
    }
    // A browser signs in once with ?token=...: it gets a cookie and the same page without it.
    if get && query.contains_key("token") {
        let rest: Vec<&str> = raw
            .split_once('?')
            .map(|(_, q)| q)
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("token="))
            .collect();
        let path = raw.split('?').next().unwrap_or("/");
        let to = if rest.is_empty() { path.to_string() } else { format!("{path}?{}", rest.join("&")) };
        // The address asked for is the client's to spell: `//host` would send the browser, now
        // holding the cookie, to another site.
        let to = http::same_origin_path(&to).to_string();
        let cookie = format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
            auth::COOKIE,
            token.unwrap_or_default(),
            auth::COOKIE_MAX_AGE
        );
        return Ok(Out::Reply(
            Reply::json(303, &json!({"see": to})).header("Location", &to).header("Set-Cookie", &cookie),
        ));
    }
    let reply = match segs.as_slice() {
        [] => allow(method, &["GET"]).map(|_| pages::index(shared))?,
        ["start"] => allow(method, &["GET"]).map(|_| pages::start(shared))?,
        ["runs"] if method == "POST" => start(shared, req, by_cookie)?,
        ["runs"] => allow(method, &["GET", "POST"]).and_then(|_| list(shared, &query))?,
        ["runs", id] => allow(method, &["GET"]).and_then(|_| status(shared, id))?,
        ["runs", id, "trace"] => return allow(method, &["GET"]).and_then(|_| trace(shared, req, id, &query)),
        ["runs", id, "answer"] => allow(method, &["POST"]).and_then(|_| answer(shared, req, id, by_cookie))?,
        ["runs", id, "continue"] => allow(method, &["POST"]).and_then(|_| resume(shared, req, id, by_cookie))?,
        ["runs", id, "report"] => allow(method, &["GET"]).and_then(|_| pages::report(shared, id))?,
        ["runs", id, "files", rest @ ..] => return allow(method, &["GET"]).and_then(|_| pages::file(shared, id, rest)),
        ["skills"] => allow(method, &["GET"]).and_then(|_| skills(shared))?,
        ["skills", "fetch"] => allow(method, &["POST"]).and_then(|_| fetch_skill(shared, req))?,
        ["agents"] => allow(method, &["GET"]).and_then(|_| agents::list(shared))?,
        ["agents", name, "status"] => allow(method, &["GET"]).and_then(|_| agents::status(shared, name))?,
        ["agents", name, "sessions"] => allow(method, &["GET"]).and_then(|_| agents::sessions(shared, name))?,
        ["agents", name, "run"] => allow(method, &["POST"]).and_then(|_| agent_run(shared, req, name))?,
        _ => return Err(ApiError::new(404, format!("no such endpoint: {method} /{}", segs.join("/")))),
    };
    Ok(Out::Reply(reply))
}

/// The page a panel form posted to `segs` is on (the start page, or the run's page).
fn form_page(segs: &[&str]) -> Option<String> {
    match segs {
        ["runs"] => Some("/start".into()),
        ["runs", id, "answer" | "continue"] => {
            Some(format!("/runs/{}/report", agentloop_engine::report::html::encode_segment(id)))
        }
        _ => None,
    }
}

/// Whether the client is a browser asking for a page (`Accept` names `text/html`).
fn wants_html(req: &tiny_http::Request) -> bool {
    req.headers().iter().any(|h| h.field.equiv("Accept") && h.value.as_str().contains("text/html"))
}

/// Refuses a method the endpoint does not take (405 with `Allow`); HEAD goes with GET.
fn allow(method: &str, ok: &[&str]) -> ApiResult<()> {
    if ok.contains(&method) || (method == "HEAD" && ok.contains(&"GET")) {
        return Ok(());
    }
    Err(ApiError::new(405, format!("{method} is not allowed here; use {}", ok.join(" or "))).allow(&ok.join(", ")))
}

fn health() -> Reply {
    Reply::json(200, &json!({"status": "healthy", "version": env!("CARGO_PKG_VERSION")}))
}

fn place(shared: &Shared, id: &str) -> Value {
    match shared.queue.place(id) {
        Some(Place::Running) => json!({"state": "running"}),
        Some(Place::Waiting(n)) => json!({"state": "waiting", "position": n}),
        None => Value::Null,
    }
}

/// The budget keys a request may set, for hints.
fn budget_keys() -> String {
    Budget::ALL.map(Budget::key).join(", ")
}

/// A request's `budgets` (none: no budgets asked for).
fn budgets_of(body: &Map<String, Value>) -> ApiResult<Budgets> {
    match body.get("budgets") {
        None | Some(Value::Null) => Ok(Budgets::default()),
        Some(Value::Object(m)) => serde_path_to_error::deserialize(Value::Object(m.clone())).map_err(|e| {
            let path = e.path().to_string();
            ApiError::new(400, format!("budgets.{path}: {}", e.into_inner()))
        }),
        Some(_) => Err(ApiError::new(400, "`budgets` must be an object").hint(format!("keys: {}", budget_keys()))),
    }
}

/// POST /runs (a JSON body, or the panel's start form)
fn start(shared: &Shared, req: &mut tiny_http::Request, by_cookie: bool) -> ApiResult {
    let (sent, body) = forms::body_of(shared, req, by_cookie, forms::START);
    let r = body.and_then(|body| start_body(shared, body, sent.form));
    pages::answered(shared, &sent, forms::START, None, r)
}

/// POST /agents/{name}/run: the seed's way to give an agent a message — `message` is the new
/// run's goal and `session_id` the session it is the next turn of; `context`, `budgets`,
/// `force` and `output_schema` as POST /runs takes them. The agent is the path's (`default`, with
/// no profile of that name, is the agent without one).
fn agent_run(shared: &Shared, req: &mut tiny_http::Request, name: &str) -> ApiResult {
    let mut body = http::json_body(req)?;
    let named: Vec<String> =
        ["goal", "session", "agent"].into_iter().filter(|k| body.contains_key(*k)).map(|k| format!("`{k}`")).collect();
    if !named.is_empty() {
        return Err(ApiError::new(400, format!("POST /agents/{name}/run may not set {}", named.join(", ")))
            .hint("give the goal as `message` and the session as `session_id`; the agent is the path's"));
    }
    match body.remove("message") {
        Some(Value::String(m)) if !m.trim().is_empty() => body.insert("goal".into(), json!(m)),
        _ => return Err(ApiError::new(400, "`message` is required: a non-empty string")),
    };
    if let Some(sid) = body.remove("session_id") {
        if !sid.is_null() {
            session_of(&sid).map_err(|mut e| {
                e.message = e.message.replace("`session`", "`session_id`");
                e
            })?;
        }
        body.insert("session".into(), sid);
    }
    let has_profile = crate::commands::agents::profiles(&shared.root)?
        .iter()
        .any(|p| p.get("name").and_then(Value::as_str) == Some(name));
    if name != "default" || has_profile {
        body.insert("agent".into(), json!(name));
    }
    start_body(shared, body, false)
}

/// A start's body, read: every key checked, the run created (or queued on the fleet).
fn start_body(shared: &Shared, body: Map<String, Value>, form: bool) -> ApiResult {
    // Every key a request may not set is named at once, the budgets' too.
    let mut unknown: Vec<String> =
        body.keys().filter(|k| !START_KEYS.contains(&k.as_str())).map(|k| format!("`{k}`")).collect();
    if let Some(Value::Object(b)) = body.get("budgets") {
        unknown.extend(b.keys().filter(|k| Budget::from_key(k).is_none()).map(|k| format!("`budgets.{k}`")));
    }
    if !unknown.is_empty() {
        return Err(ApiError::new(400, format!("POST /runs may not set {}", unknown.join(", "))).hint(format!(
            "a request sets only {}; budgets only {} (and only to narrow the server's limits); provider, keys, tools and paths are the server's",
            START_KEYS.join(", "),
            budget_keys()
        )));
    }
    let goal = match body.get("goal") {
        Some(Value::String(g)) if !g.trim().is_empty() => g.trim().to_string(),
        _ => return Err(ApiError::new(400, "`goal` is required: a non-empty string")),
    };
    let agent = match body.get("agent") {
        None | Some(Value::Null) => None,
        Some(Value::String(a)) => Some(a.clone()),
        Some(_) => return Err(ApiError::new(400, "`agent` must be the name of an agent profile (a string)")),
    };
    let budgets = budgets_of(&body)?;
    let force = match body.get("force") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::new(400, "`force` must be true or false")),
    };
    let output_schema = match body.get("output_schema") {
        None | Some(Value::Null) => None,
        Some(s) if s.is_object() => Some(s.clone()),
        Some(_) => return Err(ApiError::new(400, "`output_schema` must be a JSON Schema object")),
    };
    let session = match body.get("session") {
        None | Some(Value::Null) => None,
        Some(v) => Some(session_of(v)?),
    };
    let context = agentloop_engine::phases::init::context_text(body.get("context"));
    let new = NewRun { goal, context, agent, budgets, force, output_schema, session };
    #[cfg(feature = "queue")]
    if let Some(fleet) = &shared.fleet {
        if new.session.is_some() {
            return Err(ApiError::new(400, "`session` is not taken by a server in front of a fleet (--redis)")
                .hint("leave out `session`, or start the session's runs on a server without --redis"));
        }
        let (id, message) = super::fleet::enqueue(shared, fleet, new)?;
        shared.log(&format!("run {id} queued on {} (message {message})", fleet.names.requests));
        if form {
            // Its page exists once a worker takes it: back to the list, where it will show.
            return Ok(Reply::json(303, &json!({"see": "/", "run_id": id})).header("Location", "/"));
        }
        return Ok(Reply::json(
            202,
            &json!({"run_id": id, "status": "queued", "queue": {"state": "queued", "stream": fleet.names.requests, "message_id": message}, "links": runs::links(&id)}),
        )
        .header("Location", &format!("/runs/{id}")));
    }
    let ticket = shared.queue.reserve().ok_or_else(|| full(shared))?;
    let id = runs::create(shared, new, ticket)?;
    shared.log(&format!("run {id} queued"));
    if form {
        return Ok(forms::back_to_run(&id));
    }
    Ok(Reply::json(
        202,
        &json!({"run_id": id, "status": "running", "queue": place(shared, &id), "links": runs::links(&id)}),
    )
    .header("Location", &format!("/runs/{id}")))
}

/// A session's name as a request gives it (`session`, or `?session=`): the rule of
/// `run --session`.
fn session_of(v: &Value) -> ApiResult<String> {
    match v {
        Value::String(n) if crate::commands::run::is_session_name(n) => Ok(n.clone()),
        other => {
            // Shown as given, cut short: a request may send a megabyte.
            let text = match other {
                Value::String(n) => format!("`{}`", agentloop_io::output::one_line(n)),
                v => format!("{v}"),
            };
            let mut shown: String = text.chars().take(80).collect();
            if shown.len() < text.len() {
                shown.push('…');
            }
            Err(ApiError::new(400, format!("`session`: {shown} is not a session name")).hint(
                "a session's name is letters, digits, `.`, `_` and `-` (at most 64), e.g. \"session\": \"support-42\"",
            ))
        }
    }
}

fn full(shared: &Shared) -> ApiError {
    let (waiting, running) = shared.queue.counts();
    ApiError::new(503, format!("the queue is full: {running} run(s) running and {waiting} waiting"))
        .hint("try again later, or start serve with more --workers or a longer --queue")
        .retry_after(RETRY_FULL)
}

/// GET /runs: what `agentloop -w ROOT runs --json` lists (the root's current run too);
/// `?agent=NAME` one agent's runs, `?session=NAME` one session's (as `runs --agent`/`--session`).
fn list(shared: &Shared, query: &BTreeMap<String, String>) -> ApiResult {
    if let Some(k) = query.keys().find(|k| !["agent", "session", "token"].contains(&k.as_str())) {
        return Err(ApiError::new(400, format!("GET /runs takes no query parameter `{k}`"))
            .hint("filter with ?agent=NAME and ?session=NAME"));
    }
    let agent = query.get("agent");
    let session = query.get("session").map(|n| session_of(&json!(n))).transpose()?;
    let root = agentloop_workspace::workspace::Workspace::new(shared.root.clone());
    let rows: Vec<Value> = agentloop_workspace::history::list(&root, &shared.runs_dir, &|m| shared.printer.warn(m))
        .iter()
        .filter(|r| !runs::is_link(&r.ws.root))
        .filter(|r| agent.is_none() || r.state.agent.as_ref() == agent)
        .filter(|r| session.is_none() || r.state.session == session)
        .map(|r| {
            let mut v = crate::commands::runs::row(r);
            let id = r.state.run_id.clone();
            v["served"] = json!(runs::load_record(shared, &id).ok().flatten().is_some_and(|r| r.served()));
            v["queue"] = place(shared, &id);
            // Queued here, not yet taken by a worker: waiting, not interrupted.
            if !v["queue"].is_null() {
                v["status"] = json!("running");
            }
            v["links"] = runs::links(&id);
            v
        })
        .collect();
    Ok(Reply::json(200, &json!({"runs": rows})))
}

/// GET /runs/{id}
fn status(shared: &Shared, id: &str) -> ApiResult {
    let ws = runs::existing(shared, id)?;
    let record = runs::load_record(shared, id)?;
    let mut s = ws.load_state()?;
    // A run another door started is shown with the configuration it would be driven with here.
    let resolved = match &record {
        Some(r) => runs::config(shared, r.agent.as_deref(), &r.budgets, false)?,
        None => runs::config(shared, s.agent.as_deref(), &Budgets::default(), false)
            .or_else(|_| runs::config(shared, None, &Budgets::default(), false))?,
    };
    let recorded = s.limits.clone();
    // A run that says running with nothing running it (and not queued here) was interrupted.
    if shared.queue.place(id).is_none() && agentloop_workspace::history::stopped_unseen(&ws, &s) {
        s.interrupted = true;
    }
    if !s.status.is_terminal() && !s.interrupted {
        s.limits = s.limits.in_force(&resolved.config, &resolved.sources);
    }
    let mut v = crate::commands::status::view(&ws, &s, &recorded, &resolved.config, &resolved.sources);
    v["served"] = json!(record.as_ref().is_some_and(|r| r.served()));
    v["queue"] = place(shared, id);
    v["worker_error"] = json!(shared.queue.error(id));
    v["links"] = runs::links(id);
    Ok(Reply::json(200, &v))
}

/// GET /runs/{id}/trace[?follow=1]
fn trace(shared: &Shared, req: &tiny_http::Request, id: &str, q: &BTreeMap<String, String>) -> ApiResult<Out> {
    let ws = runs::existing(shared, id)?;
    let follow = match q.get("follow").map(String::as_str) {
        None | Some("0" | "false") => false,
        Some("1" | "true" | "") => true,
        Some(other) => return Err(ApiError::new(400, format!("follow=`{other}`: use follow=1"))),
    };
    if !follow {
        // Through the run's folder handle, as its files are: trace.jsonl may be a link a run made.
        let mut text = String::new();
        match pages::open_in_run(shared, id, &["trace.jsonl"]) {
            Ok(mut f) => {
                std::io::Read::read_to_string(&mut f, &mut text)
                    .map_err(|e| ApiError::new(500, format!("cannot read the trace of run {id}: {e}")))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(pages::refused(id, "trace.jsonl", &e)
                    .unwrap_or_else(|| ApiError::new(500, format!("cannot read the trace of run {id}: {e}"))))
            }
        }
        return Ok(Out::Reply(Reply {
            status: 200,
            content_type: "application/x-ndjson",
            body: text.into_bytes(),
            headers: vec![],
        }));
    }
    if *req.http_version() < tiny_http::HTTPVersion(1, 1) {
        return Err(ApiError::new(400, "follow=1 streams with chunked encoding, which needs HTTP/1.1"));
    }
    if req.method() == &tiny_http::Method::Head {
        return Ok(Out::Reply(Reply { status: 200, content_type: "text/event-stream", body: vec![], headers: vec![] }));
    }
    let after = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Last-Event-ID"))
        .and_then(|h| h.value.as_str().trim().parse::<usize>().ok())
        .unwrap_or(0);
    if shared.streams.fetch_add(1, Ordering::SeqCst) >= stream::MAX_STREAMS {
        shared.streams.fetch_sub(1, Ordering::SeqCst);
        return Err(ApiError::new(503, "too many open trace streams").retry_after(RETRY_FULL));
    }
    Ok(Out::Stream(ws, after))
}

fn text_field(body: &Map<String, Value>, key: &str) -> ApiResult<String> {
    match body.get(key) {
        Some(Value::String(t)) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ => Err(ApiError::new(400, format!("`{key}` is required: a non-empty string"))),
    }
}

/// POST /runs/{id}/answer
fn answer(shared: &Shared, req: &mut tiny_http::Request, id: &str, by_cookie: bool) -> ApiResult {
    let (sent, body) = forms::body_of(shared, req, by_cookie, forms::ANSWER);
    let r = body.and_then(|body| answer_body(shared, id, body, sent.form));
    pages::answered(shared, &sent, forms::ANSWER, Some(id), r)
}

fn answer_body(shared: &Shared, id: &str, body: Map<String, Value>, form: bool) -> ApiResult {
    only_keys(&body, &["answer"], "POST /runs/{id}/answer")?;
    let text = text_field(&body, "answer")?;
    runs::existing(shared, id)?;
    let ticket = shared.queue.reserve().ok_or_else(|| full(shared))?;
    let s = runs::reopen(shared, id, Request::Answer(text), ticket, None)?;
    shared.log(&format!("run {id} answered; queued to go on"));
    if form {
        return Ok(forms::back_to_run(id));
    }
    Ok(Reply::json(
        202,
        &json!({"run_id": s.run_id, "status": s.status, "queue": place(shared, id), "links": runs::links(id)}),
    ))
}

/// POST /runs/{id}/continue
fn resume(shared: &Shared, req: &mut tiny_http::Request, id: &str, by_cookie: bool) -> ApiResult {
    // The body may be empty; if there is one it may raise the run's budgets (up to the server's
    // own limits).
    if http::is_form(req) || req.body_length().unwrap_or(0) > 0 {
        let (sent, body) = forms::body_of(shared, req, by_cookie, forms::CONTINUE);
        let r = body.and_then(|body| {
            only_keys(&body, &["budgets"], "POST /runs/{id}/continue")?;
            go_on(shared, id, Some(budgets_of(&body)?), sent.form)
        });
        return pages::answered(shared, &sent, forms::CONTINUE, Some(id), r);
    }
    go_on(shared, id, None, false)
}

/// A continue, its body read: the run reopened with `budgets` (if any) and queued again.
fn go_on(shared: &Shared, id: &str, budgets: Option<Budgets>, form: bool) -> ApiResult {
    runs::existing(shared, id)?;
    let ticket = shared.queue.reserve().ok_or_else(|| full(shared))?;
    let s = runs::reopen(shared, id, Request::Continue { archived: None }, ticket, budgets)?;
    shared.log(&format!("run {id} continued; queued to go on"));
    if form {
        return Ok(forms::back_to_run(id));
    }
    Ok(Reply::json(
        202,
        &json!({"run_id": s.run_id, "status": s.status, "queue": place(shared, id), "links": runs::links(id)}),
    ))
}

/// GET /skills
/// GET /skills — every skill found, each with its `id` (its name) and whether a run is offered
/// it (`enabled`: not left out by `skills.only` or `skills.disabled`).
fn skills(shared: &Shared) -> ApiResult {
    let cfg = runs::config(shared, None, &Budgets::default(), false)?.config;
    let offered = agentloop_tools::skills::SkillSet::load(&cfg, &shared.root);
    let mut every = cfg.clone();
    every.skills.only = None;
    every.skills.disabled.clear();
    let all = agentloop_tools::skills::SkillSet::load(&every, &shared.root);
    let items: Vec<Value> = all
        .skills
        .iter()
        .map(|s| {
            let mut v = agentloop_types::json::to_value(s);
            v["id"] = json!(s.name);
            v["enabled"] = json!(offered.get(&s.name).is_some());
            v
        })
        .collect();
    Ok(Reply::json(200, &json!({"skills": items, "problems": all.problems})))
}

/// POST /skills/fetch — into `<root>/skills/`, which every served run reads.
fn fetch_skill(shared: &Shared, req: &mut tiny_http::Request) -> ApiResult {
    let body = http::json_body(req)?;
    only_keys(&body, &["id", "skill_id", "url"], "POST /skills/fetch")?;
    // `skill_id` is the seed's name for it.
    let id = text_field(&body, "id").or_else(|e| text_field(&body, "skill_id").map_err(|_| e))?;
    let url = text_field(&body, "url")?;
    let cfg = runs::config(shared, None, &Budgets::default(), false)?.config;
    // What the request names is judged before anything is sent, so that 502 means only an
    // upstream that failed: a URL the policy refuses is the request's problem (403), a
    // malformed one a bad request.
    use agentloop_tools::tools::fetch::{judge_url, UrlProblem};
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(ApiError::new(400, format!("`url`: `{url}` is not an http(s) URL"))
            .hint("skills are fetched over http or https"));
    }
    let deny = agentloop_tools::tools::hosts::DenyList::new(&cfg.tools.http.deny_hosts);
    if let Err((problem, why)) = judge_url(&url, &cfg.tools.http, &deny) {
        return Err(match problem {
            UrlProblem::Invalid => ApiError::new(400, format!("`url`: {why}")),
            UrlProblem::Refused => ApiError::new(403, format!("`url` is refused by the server's policy: {why}"))
                .hint("the server's tools.http settings (schemes, allow_hosts, deny_hosts, ports, allow_private) say where skills may come from"),
            UrlProblem::Unresolved => ApiError::new(502, format!("cannot fetch {url}: {why}")),
        });
    }
    let f = crate::commands::skills::fetch_into(&cfg, &id, &url, &shared.root, camino::Utf8Path::new("skills"))
        .map_err(|e| {
            // The upstream's failure (it could not be reached, answered an error, sent too much
            // or not text) is a bad gateway; anything else (the id, the skills folder) keeps its
            // own status.
            let upstream = e.cause == Some(agentloop_types::error::Cause::Upstream);
            let e = ApiError::from(e);
            if upstream {
                ApiError { status: 502, ..e }
            } else {
                e
            }
        })?;
    shared.log(&format!("skill `{id}` fetched from {url}"));
    Ok(Reply::json(201, &json!({"skill_id": f.id, "name": f.id, "description": f.description, "path": f.dir})))
}
