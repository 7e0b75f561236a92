//! The OpenAPI 3.1 document of `serve` (GET /openapi.json, and docs/schema/openapi.json): the
//! routes of `serve`'s API, with the bodies that have Rust types given by their generated
//! schemas. It lives with the server it describes (built with or without the `serve` feature,
//! since the document is published either way); a test holds the committed file to this.

use agentloop_engine::schema::{CompletionEvent, RunResult, RunRow, StatusView, VERSION};
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

/// The schemas of the typed bodies, as OpenAPI components (their definitions lifted beside them).
fn components() -> Value {
    let mut out = Map::new();
    let mut add = |name: &str, mut v: Value| {
        // The generator puts the definitions at the path its refs name, `components.schemas`.
        if let Some(defs) = v.as_object_mut().and_then(|o| o.remove("components")) {
            for (k, d) in defs["schemas"].as_object().cloned().unwrap_or_default() {
                out.insert(k, d);
            }
        }
        if let Some(o) = v.as_object_mut() {
            o.remove("$schema");
        }
        out.insert(name.to_string(), v);
    };
    fn gen<T: JsonSchema>() -> Value {
        // OpenAPI 3.1's dialect is JSON Schema 2020-12; definitions live among the components.
        let s = schemars::generate::SchemaSettings::draft2020_12()
            .with(|d| d.definitions_path = "#/components/schemas/".into());
        s.into_generator().into_root_schema_for::<T>().to_value()
    }
    add("RunResult", gen::<RunResult>());
    add("CompletionEvent", gen::<CompletionEvent>());
    add("RunRow", gen::<RunRow>());
    add("StatusView", gen::<StatusView>());
    add("State", gen::<agentloop_workspace::workspace::State>());
    add("TraceEntry", gen::<agentloop_types::trace::Entry>());
    out.insert(
        "Error".into(),
        json!({"type": "object", "required": ["error", "status"], "properties": {
            "error": {"type": "string"}, "status": {"type": "integer"},
            "causes": {"type": "array", "items": {"type": "string"}, "description": "The errors behind this one (a system's, a parser's), outermost first; absent when none"},
            "hint": {"type": "string", "description": "The next step"},
            "hints": {"type": "array", "items": {"type": "string"}, "description": "Every next step, `hint` first"}}}),
    );
    out.insert(
        "StartRun".into(),
        json!({"type": "object", "required": ["goal"], "additionalProperties": false, "properties": {
            "goal": {"type": "string", "pattern": NOT_BLANK, "description": "Not blank (it is read trimmed)"},
            "context": {"description": "Background: text, or any JSON (shown pretty-printed)"},
            "agent": {"type": ["string", "null"], "pattern": AGENT, "description": "A profile in the root's agents/ (an unknown one is 400)"},
            "session": {"type": ["string", "null"], "pattern": SESSION, "description": "The named session the run is the next turn of (as `run --session`): its earlier turns are the run's context, and the run is tagged with it. Not taken in front of a fleet (--redis): 400"},
            "budgets": budgets("Only narrower than the server's limits"),
            "force": {"type": ["boolean", "null"], "description": "Start even when the estimate says it cannot fit its budget"},
            "output_schema": {"type": ["object", "null"], "description": "The JSON Schema the final output must match"}}}),
    );
    Value::Object(out)
}

fn reply(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// What every POST body is read as (the server's one rule; see `serve::http::body`).
const JSON_ANY_TYPE: &str = "A JSON object, read as JSON whatever the Content-Type says (`curl -d '{...}'` sends application/x-www-form-urlencoded)";
const JSON_OR_FORM: &str = "A JSON object, read as JSON whatever the Content-Type says (`curl -d '{...}'` sends application/x-www-form-urlencoded); a form-encoded body that is not a JSON object is the panel's form, which needs its `csrf` value with the sign-in cookie";

/// The 400 every operation can answer before its own checks.
const BAD_TARGET: &str = "A request target that is not a valid path or query (a broken %-escape), or an HTTP/1.1 request without one `Host` header that names a host";

/// The 421 every operation answers first, before the token is looked at.
const MISDIRECTED: &str = "The `Host` header names none of this server's names (on loopback: 127.0.0.1, localhost, [::1], the address it listens on and those in `serve.allowed_hosts`; beyond loopback, when `serve.allowed_hosts` is set, those and the server's own): a page reaching it by DNS rebinding is refused";

/// A string the server reads trimmed and refuses when nothing is left.
const NOT_BLANK: &str = "\\S";

/// A run id: what can name a run folder (anything else is no run: 404).
const RUN_ID: &str = "^[A-Za-z0-9_-]{1,64}$";

/// A session's name (`run --session`'s rule): letters, digits, `.`, `_` and `-`, at most 64.
const SESSION: &str = "^[A-Za-z0-9._-]{1,64}$";

/// An agent profile's name: a plain file name in `agents/` (no separator, no leading dot).
const AGENT: &str = "^[^./\\\\\\u0000][^/\\\\\\u0000]*$";

/// A duration as `budgets.timeout` takes it: seconds, or numbers with humantime's units
/// (`90s`, `10m`, `1h 30m`).
const DURATION: &str = "^\\s*[0-9]+(\\s*(nsec|ns|usec|us|µs|msec|ms|seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|w|months|month|M|years|year|y)(\\s*[0-9]+\\s*(nsec|ns|usec|us|µs|msec|ms|seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|w|months|month|M|years|year|y))*)?\\s*$";

/// The budgets a request may set (each only narrower than the server's limits, or for a
/// continue up to them).
fn budgets(description: &str) -> Value {
    json!({"type": ["object", "null"], "additionalProperties": false, "description": description, "properties": {
        "max_steps": {"type": ["integer", "null"], "minimum": 0, "maximum": u32::MAX},
        "max_reframes": {"type": ["integer", "null"], "minimum": 0, "maximum": u32::MAX},
        "timeout": {"description": "Seconds, or a duration such as `90s`, `10m`, `1h 30m`",
            "anyOf": [{"type": "number", "minimum": 0}, {"type": "string", "pattern": DURATION}, {"type": "null"}]},
        "max_tokens": {"type": ["integer", "null"], "minimum": 0, "maximum": u64::MAX},
        "max_cost_usd": {"type": ["number", "null"]}}})
}

fn header(description: &str, required: bool, schema: Value) -> Value {
    json!({"description": description, "required": required, "schema": schema})
}

/// An error reply with the headers it always carries.
fn err_with(description: &str, headers: Value) -> Value {
    let mut r = reply(description, reference("Error"));
    r["headers"] = headers;
    r
}

/// The replies every operation behind the bearer token can give, besides its own: the
/// request target, the token, the rate limit, the limits on requests with a body, and another
/// method on the path. `get`: a browser (Accept: text/html) is answered the sign-in page, and
/// `?token=` signs it in.
fn guarded(mut op: Value, get: bool) -> Value {
    let Some(r) = op["responses"].as_object_mut() else { return op };
    let err = |d: &str| reply(d, reference("Error"));
    r.entry("400").or_insert_with(|| err(BAD_TARGET));
    r.insert("421".into(), err(MISDIRECTED));
    let www = json!({"WWW-Authenticate": header("`Bearer realm=\"agentloop\"`", true, json!({"type": "string"}))});
    let mut unauthorized = err_with("No valid bearer token", www);
    if get {
        unauthorized["description"] =
            json!("No valid bearer token: JSON, or for a browser (`Accept` naming text/html) the sign-in page");
        unauthorized["content"]["text/html"] = json!({"schema": {"type": "string"}});
        r.insert(
            "303".into(),
            json!({"description": "`?token=TOKEN` signed a browser in: the same page without the token, with the sign-in cookie",
                "headers": {"Location": header("The page asked for, without `token`", true, json!({"type": "string"})),
                    "Set-Cookie": header("The HttpOnly, SameSite=Strict sign-in cookie", true, json!({"type": "string"}))},
                "content": {"application/json": {"schema": {"type": "object", "required": ["see"], "properties": {"see": {"type": "string"}}}}}}),
        );
    }
    r.insert("401".into(), unauthorized);
    let retry = |required: bool| json!({"Retry-After": header("Seconds to wait before trying again", required, json!({"type": "string", "pattern": "^[0-9]+$"}))});
    r.entry("429").or_insert_with(|| {
        err_with("Too many requests: the token's rate limit (`--rate-limit`), or more than 8 requests with a body from one address at once", retry(true))
    });
    r.entry("503").or_insert_with(|| err_with("More than 64 requests with a body at once", retry(true)));
    r.entry("500").or_insert_with(|| {
        err("The server cannot read or write its own files (e.g. a run's state.json damaged by hand): the error names the file")
    });
    r.insert(
        "405".into(),
        err_with(
            "Another method on this path: not one it takes",
            json!({"Allow": header("The methods the path takes", true, json!({"type": "string"}))}),
        ),
    );
    let Some(o) = op.as_object_mut() else { return op };
    if get {
        let mut params = o.remove("parameters").and_then(|p| p.as_array().cloned()).unwrap_or_default();
        params.push(json!({"name": "token", "in": "query", "required": false, "schema": {"type": "string"},
            "description": "A browser's sign-in: with a valid token, 303 to the same page without it, setting the sign-in cookie"}));
        o.insert("parameters".into(), Value::Array(params));
    }
    op
}

/// [`guarded`], for a POST: its body must arrive whole within 10 s (408) and hold at most
/// 1 MiB (413).
fn posted(op: Value) -> Value {
    let mut op = guarded(op, false);
    let Some(r) = op["responses"].as_object_mut() else { return op };
    r.insert("408".into(), reply("The body did not arrive whole within 10 s", reference("Error")));
    r.insert("413".into(), reply("A body over 1 MiB", reference("Error")));
    op
}

/// A POST the panel's forms use: a refusal of a browser's form (the sign-in cookie, or `Accept`
/// naming text/html, not asking for JSON only) is the form's page as text/html, the error in a
/// box above the form; every other client gets the JSON error.
fn panel_form(mut op: Value) -> Value {
    let Some(r) = op["responses"].as_object_mut() else { return op };
    for (code, reply) in r.iter_mut().filter(|(c, _)| c.starts_with('4') || c.starts_with('5')) {
        if code == "421" {
            continue;
        }
        reply["content"]["text/html"] = json!({"schema": {"type": "string"}});
        if let Some(d) = reply["description"].as_str() {
            let page = if code == "401" { "the sign-in page" } else { "the form's page with the error" };
            reply["description"] = json!(format!("{d}. A browser's panel form is answered {page} as text/html"));
        }
    }
    op
}

/// An error reply of the API: the JSON error, described.
fn err(d: &str) -> Value {
    reply(d, reference("Error"))
}

/// The path parameter naming a run.
fn run_id_param() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": RUN_ID},
        "description": "A run id (as `runs` lists them)"})
}

/// The reply to a path naming no run.
fn no_run() -> Value {
    err("No such run")
}

/// The reply to a run folder or file that is a symbolic link, or no regular file.
fn linked() -> Value {
    err("The run's folder, or the file, is a symbolic link (or not a regular file): not served")
}

/// The reply to a run queued: its id, status, place in the queue and links (and its
/// `Location` when `location`).
fn queued(location: bool) -> Value {
    let queue = json!({"type": ["object", "null"], "description": "Its place: `{\"state\": \"running\"}`, `{\"state\": \"waiting\", \"position\"}` (or, queued for workers, `{\"state\": \"queued\", \"stream\", \"message_id\"}`); null once no worker holds it"});
    let mut r = reply(
        "Queued",
        json!({"type": "object", "required": ["run_id", "status", "queue", "links"], "properties": {"run_id": {"type": "string"}, "status": {"type": "string"},
            "queue": queue, "links": {"type": "object"}}}),
    );
    if location {
        r["headers"] = json!({"Location": header("`/runs/{id}`", true, json!({"type": "string"}))});
    }
    r
}

/// The reply to a request refused because the queue is full, or too many bodies come at once.
fn full() -> Value {
    err_with(
        "The queue is full (created nothing), or more than 64 requests with a body at once",
        json!({"Retry-After": header("Seconds to wait before trying again", true, json!({"type": "string", "pattern": "^[0-9]+$"}))}),
    )
}

/// The reply to a panel form that acted: back to the run's page.
fn form_back() -> Value {
    json!({"description": "A form acted: back to the run's page",
        "headers": {"Location": header("The run's page", true, json!({"type": "string"}))},
        "content": {"application/json": {"schema": {"type": "object", "required": ["see"], "properties": {"see": {"type": "string"}}}}}})
}

/// A page of the panel, as text/html.
fn html(d: &str) -> Value {
    json!({"description": d, "content": {"text/html": {"schema": {"type": "string"}}}})
}

/// An operation open to anyone (no token): besides its own replies, only a bad request target,
/// a misdirected request and another method.
fn open(mut op: Value) -> Value {
    // No token needed: only the request target can be refused, and another method.
    let Some(r) = op["responses"].as_object_mut() else { return op };
    r.insert("400".into(), err(BAD_TARGET));
    r.insert("421".into(), err(MISDIRECTED));
    r.insert(
        "405".into(),
        err_with(
            "Another method on this path: not one it takes",
            json!({"Allow": header("The methods the path takes", true, json!({"type": "string"}))}),
        ),
    );
    op
}

/// The paths of an object built with `json!`, in their order.
fn paths(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// POST /runs/{id}/answer: answer an escalated run's open question, by JSON or the panel's form.
fn answer_op() -> Value {
    let id = run_id_param();
    let form_back = form_back();
    panel_form(posted(json!({"summary": "Answer an escalated run's open question", "parameters": [id],
                "requestBody": {"required": true, "description": JSON_OR_FORM, "content": {
                    "application/json": {"schema": {"type": "object", "required": ["answer"], "additionalProperties": false,
                        "properties": {"answer": {"type": "string", "pattern": NOT_BLANK, "description": "Not blank (it is read trimmed)"}}}},
                    "application/x-www-form-urlencoded": {"schema": {"type": "object", "required": ["answer"], "additionalProperties": false,
                        "properties": {"answer": {"type": "string", "pattern": NOT_BLANK}, "csrf": {"type": "string", "description": "The form value of the run's page; required with the sign-in cookie"}}}}}},
                "responses": {"202": queued(false), "303": form_back.clone(),
                    "400": err("A bad body: not a JSON object or form, a key other than `answer` (named), a blank answer"),
                    "403": err("A form posted with the cookie without this server's form value or from another origin; a JSON body under the cookie alone; the run's folder is a symbolic link"),
                    "404": no_run(), "409": err("The run has no open question, is queued or running, or is being advanced elsewhere (another process holds its lock)"),
                    "503": full()}})))
}

/// POST /runs/{id}/continue: go on with a stopped run, by JSON or the panel's form.
fn continue_op() -> Value {
    let id = run_id_param();
    let form_back = form_back();
    panel_form(posted(
        json!({"summary": "Go on after a budget or provider stop, or an interruption", "parameters": [id],
                "requestBody": {"required": false, "description": JSON_OR_FORM, "content": {
                    "application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {"budgets": budgets("Up to the server's limits")}}},
                    "application/x-www-form-urlencoded": {"schema": {"type": "object", "additionalProperties": false, "properties": {
                        "csrf": {"type": "string"}, "max_steps": {"type": "string", "pattern": "^\\s*([0-9]+)?\\s*$"}, "max_reframes": {"type": "string", "pattern": "^\\s*([0-9]+)?\\s*$"},
                        "timeout": {"type": "string"}, "max_tokens": {"type": "string", "pattern": "^\\s*([0-9]+)?\\s*$"}, "max_cost_usd": {"type": "string"}}}}}},
                "responses": {"202": queued(false), "303": form_back,
                    "400": err("A bad body: not a JSON object or form, a key other than `budgets` (named), a budget of the wrong type or above the server's limit"),
                    "403": err("A form posted with the cookie without this server's form value or from another origin; a JSON body under the cookie alone; the run's folder is a symbolic link"),
                    "404": no_run(), "409": err("The run is done, queued or running, is being advanced elsewhere (another process holds its lock), or would stop again at once on the limit that ran out (named, with the value to raise it above)"),
                    "503": full()}}),
    ))
}

/// The paths open to anyone and the panel's pages: health, this document, the index and the start form.
fn open_and_panel_paths() -> Map<String, Value> {
    paths(json!({
        "/health": {"get": open(json!({"summary": "Liveness; no token needed", "security": [],
            "responses": {"200": reply("Healthy", json!({"type": "object", "required": ["status", "version"], "properties": {"status": {"const": "healthy"}, "version": {"type": "string"}}}))}}))},
        "/openapi.json": {"get": open(json!({"summary": "This document; no token needed", "security": [],
            "responses": {"200": reply("The OpenAPI document", json!({"type": "object"}))}}))},
        "/": {"get": guarded(json!({"summary": "The panel: the index of runs, as HTML",
            "responses": {"200": html("The index of runs")}}), true)},
        "/start": {"get": guarded(json!({"summary": "The panel's page that starts a run: a form posting to POST /runs",
            "responses": {"200": html("The form")}}), true)},
    }))
}

/// `/runs`: the list of runs, and starting one.
fn runs_paths() -> Map<String, Value> {
    paths(json!({
        "/runs": {
            "get": guarded(json!({"summary": "Every run, as `runs --json` shows them, with `served`, `queue` and `links`",
                "parameters": [{"name": "agent", "in": "query", "required": false, "schema": {"type": "string"},
                    "description": "Only the runs of this agent profile"},
                    {"name": "session", "in": "query", "required": false, "schema": {"type": "string", "pattern": SESSION},
                    "description": "Only the turns of this named session"}],
                "responses": {"200": reply("The runs", json!({"type": "object", "required": ["runs"], "properties": {"runs": {"type": "array", "items": reference("RunRow")}}})),
                    "400": err("A query parameter other than `agent` and `session` (named), a `session` that is not a session name, or a broken request target")}}), true),
            "post": panel_form(posted(json!({"summary": "Start a run",
                "requestBody": {"required": true, "description": JSON_OR_FORM, "content": {"application/json": {"schema": reference("StartRun")},
                    "application/x-www-form-urlencoded": {"schema": {"type": "object", "required": ["goal"], "additionalProperties": false, "properties": {
                        "csrf": {"type": "string", "description": "The form value of the panel's pages; required with the sign-in cookie"},
                        "goal": {"type": "string", "pattern": NOT_BLANK}, "context": {"type": "string"}, "agent": {"type": "string"},
                        "session": {"type": "string", "pattern": "^(\\s*|[A-Za-z0-9._-]{1,64})$", "description": "Empty: no session"},
                        "max_steps": {"type": "string", "pattern": "^\\s*([0-9]+)?\\s*$"}, "max_reframes": {"type": "string", "pattern": "^\\s*([0-9]+)?\\s*$"},
                        "timeout": {"type": "string"}, "max_tokens": {"type": "string", "pattern": "^\\s*([0-9]+)?\\s*$"}, "max_cost_usd": {"type": "string"}}}}}},
                "responses": {"202": queued(true),
                    "303": {"description": "The start form acted: to the new run's page (to the index when runs are queued for workers)",
                        "headers": {"Location": header("The run's page, or /", true, json!({"type": "string"}))},
                        "content": {"application/json": {"schema": {"type": "object", "required": ["see"], "properties": {"see": {"type": "string"}}}}}},
                    "400": err("A bad body: not a JSON object or form, a key it may not set (all named), a field of the wrong type or value, an unknown agent, a budget wider than the server's, an output_schema strict mode cannot take"),
                    "403": err("A form posted with the cookie without this server's form value or from another origin; a JSON body under the cookie alone"),
                    "422": err("Refused before it started: the estimate says it cannot fit its budget (`force: true` starts it anyway)"),
                    "429": err_with("The token's rate limit, too many requests with a body from this address, or the agent is resting (its usage window is spent)",
                        json!({"Retry-After": header("Seconds to wait, when known", false, json!({"type": "string", "pattern": "^[0-9]+$"}))})),
                    "503": full()}}))),
        },
    }))
}

/// The paths of one run: its status, trace, answer, continue, report and files.
fn run_paths() -> Map<String, Value> {
    let id = run_id_param();
    let run_body = json!({"description": "As `status --json` shows it (with `stop`, `outcome` and `open_question`), with `served`, `queue`, `worker_error` and `links`",
        "allOf": [reference("StatusView"), {"type": "object", "required": ["served", "queue", "worker_error", "links"], "properties": {
            "served": {"type": "boolean", "description": "Whether the run has a record of this server's: it started it, or answered or continued it"},
            "queue": {"type": ["object", "null"]}, "worker_error": {"type": ["string", "null"]}, "links": {"type": "object"}}}]});
    paths(json!({
        "/runs/{id}": {"get": guarded(json!({"summary": "The run's status", "parameters": [id],
            "responses": {"200": reply("The status", run_body), "403": linked(), "404": no_run()}}), true)},
        "/runs/{id}/trace": {"get": guarded(json!({"summary": "trace.jsonl (`?follow=1`: server-sent events)",
            "parameters": [id, {"name": "follow", "in": "query", "required": false, "schema": {"enum": ["", "0", "1", "false", "true"]},
                "description": "1 (or true, or empty): stream the trace as server-sent events until the run stops"}],
            "responses": {"200": {"description": "One trace entry a line; with `follow`, server-sent events (`id:` the line number, `data:` the entry, `event: end` at the end)", "content": {
                "application/x-ndjson": {"schema": {"type": "string"}},
                "text/event-stream": {"schema": {"type": "object", "description": "One event: a trace line, or the closing `end`",
                    "properties": {"id": {"type": "string"}, "event": {"enum": ["message", "end"]}, "data": {"type": "string"}}}}}},
                "400": err("`follow` other than 1, true, 0 or false; follow over HTTP/1.0; a broken request target"),
                "403": linked(), "404": no_run(),
                "503": full()}}), true)},
        "/runs/{id}/answer": {"post": answer_op()},
        "/runs/{id}/continue": {"post": continue_op()},
        "/runs/{id}/report": {"get": guarded(json!({"summary": "The run's HTML report", "parameters": [id],
            "responses": {"200": html("The report"), "403": linked(), "404": no_run()}}), true)},
        "/runs/{id}/files/{path}": {"get": guarded(json!({"summary": "A file of the run (artifacts/..., result.json, state.json, ...), never as a page of the server",
            "parameters": [id, {"name": "path", "in": "path", "required": true, "schema": {"type": "string"},
                "description": "context.md, memory.md, plan.md, decisions.md, trace.jsonl, state.json, result.json, or artifacts/NAME..."}],
            "responses": {"200": {"description": "The file; result.json follows RunResult, state.json State", "content": {
                    "text/plain": {"schema": {"type": "string"}}, "application/json": {}, "image/png": {}, "image/jpeg": {}, "image/gif": {}, "image/webp": {}}},
                "403": linked(), "404": err("No such run, or no such file of it")}}), true)},
    }))
}

/// The skills every run sees, and fetching one.
fn skill_paths() -> Map<String, Value> {
    let skills_fetch = posted(json!({"summary": "Fetch a skill into the root's skills/",
                "requestBody": {"required": true, "description": JSON_ANY_TYPE, "content": {"application/json": {"schema": {"type": "object", "required": ["id", "url"], "additionalProperties": false, "properties": {
                    "id": {"type": "string", "pattern": "^\\s*[a-z0-9]+([-_][a-z0-9]+)*\\s*$", "maxLength": 64, "description": "The skill's name: lowercase letters, digits and single inner hyphens"},
                    "url": {"type": "string", "pattern": "^\\s*[hH][tT][tT][pP][sS]?://", "description": "An http(s) URL the server's tools.http policy allows"}}}}}},
                "responses": {"201": reply("Fetched", json!({"type": "object", "required": ["skill_id", "name", "path"], "properties": {"skill_id": {"type": "string"}, "name": {"type": "string"}, "description": {"type": ["string", "null"]}, "path": {"type": "string"}}})),
                    "400": err("A bad body: a key other than `id` and `url` (named), a blank or invalid id, a URL that is not http(s)"),
                    "403": err("The server's tools.http policy refuses the URL (a scheme, host, port or private address it does not allow): nothing was fetched"),
                    "502": err("The upstream failed: it could not be reached or resolved, answered an HTTP error, sent more than 1 MiB or not UTF-8 text")}}));
    paths(json!({
        "/skills": {"get": guarded(json!({"summary": "The skills every run sees",
            "responses": {"200": reply("Skills", json!({"type": "object", "required": ["skills", "problems"], "properties": {"skills": {"type": "array", "items": {"type": "object", "required": ["id", "name", "enabled"], "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "enabled": {"type": "boolean"}}}}, "problems": {"type": "array"}}}))}}), true)},
        "/skills/fetch": {"post": skills_fetch},
    }))
}

/// The agent profiles, and one agent's status, sessions and runs.
fn agent_paths() -> Map<String, Value> {
    let agent_status = guarded(
        json!({"summary": "One agent: its profile, its runs by status, the one going on, the last one, its usage window",
                "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": reply("The agent's status", json!({"type": "object", "required": ["agent", "runs"], "properties": {
                    "agent": {"type": "string"}, "profile": {"type": ["object", "null"]},
                    "runs": {"type": "object", "properties": {"total": {"type": "integer"}, "by_status": {"type": "object", "additionalProperties": {"type": "integer"}}}},
                    "running": {"type": "array", "items": {"type": "string"}}, "last_run": {"anyOf": [reference("RunRow"), {"type": "null"}]},
                    "rest": {"type": ["object", "null"]}, "links": {"type": "object"}}})), "404": err("No profile of that name and no run of it")}}),
        true,
    );
    let agent_sessions = guarded(
        json!({"summary": "An agent's named sessions, newest first: each with the agent's runs in it, its last run and that run's status, and when it last changed. `default` names the runs of no agent profile",
                "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": reply("The sessions", json!({"type": "object", "required": ["agent", "sessions"], "properties": {
                    "agent": {"type": "string"},
                    "sessions": {"type": "array", "items": {"type": "object", "required": ["name", "runs", "last_run_id", "last_updated", "last_status", "links"], "properties": {
                        "name": {"type": "string"}, "runs": {"type": "integer", "minimum": 1}, "last_run_id": {"type": "string"},
                        "last_updated": {"type": "string"}, "last_status": {"type": "string"}, "links": {"type": "object"}}}}}})),
                    "404": err("No profile of that name and no run of it (`default` is never 404)")}}),
        true,
    );
    let agent_run = posted(
        json!({"summary": "Give an agent a message: start a run as the agent (the seed's form of POST /runs). `default`, with no profile of that name, is the agent without one",
                "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
                "requestBody": {"required": true, "description": JSON_ANY_TYPE, "content": {"application/json": {"schema": {"type": "object", "required": ["message"], "additionalProperties": false, "properties": {
                    "message": {"type": "string", "pattern": NOT_BLANK, "description": "The new run's goal"},
                    "session_id": {"type": ["string", "null"], "pattern": SESSION, "description": "The named session the run is the next turn of"},
                    "context": {"description": "Background: text, or any JSON"},
                    "budgets": budgets("Only narrower than the server's limits"),
                    "force": {"type": ["boolean", "null"]},
                    "output_schema": {"type": ["object", "null"]}}}}}},
                "responses": {"202": queued(true),
                    "400": err("A bad body: not a JSON object, a key it may not set (all named; `goal`, `session` and `agent` are `message`, `session_id` and the path here), a field of the wrong type or value, an unknown agent, a budget wider than the server's"),
                    "422": err("Refused before it started: the estimate says it cannot fit its budget, or the task conflicts with the agent's values"),
                    "429": err_with("The token's rate limit, too many requests with a body from this address, or the agent is resting (its usage window is spent)",
                        json!({"Retry-After": header("Seconds to wait, when known", false, json!({"type": "string", "pattern": "^[0-9]+$"}))})),
                    "503": full()}}),
    );
    paths(json!({
        "/agents": {"get": guarded(json!({"summary": "The agent profiles", "responses": {"200": reply("Profiles", json!({"type": "object", "required": ["agents"], "properties": {"agents": {"type": "array"}}}))}}), true)},
        "/agents/{name}/status": {"get": agent_status},
        "/agents/{name}/sessions": {"get": agent_sessions},
        "/agents/{name}/run": {"post": agent_run},
    }))
}

/// The whole document.
pub fn openapi() -> Value {
    let mut paths = open_and_panel_paths();
    paths.extend(runs_paths());
    paths.extend(run_paths());
    paths.extend(skill_paths());
    paths.extend(agent_paths());
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "agentloop serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Start, follow and answer agentloop runs over HTTP (docs/HTTP-API.md). Every reply an operation can give is listed with it: besides its own, every operation can answer 421 (a `Host` that is not one of the server's names, checked first) and 400 (a broken request target, a missing `Host`), and each operation behind the bearer token 401, 405 with `Allow` (another method on its path), 429 and 503 with `Retry-After`, and each POST 408 and 413. Errors are JSON `{\"error\", \"status\", \"causes\"?, \"hint\"?, \"hints\"?}`: `causes` are the errors behind it (a system's, a parser's), outermost first.",
            "x-schema-version": VERSION,
        },
        "components": {
            "schemas": components(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    })
}
