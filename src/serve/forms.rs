//! The panel's forms: the index lets a signed-in browser start a run, and a run's page answer
//! the run's question or continue a stopped run, posting to the same endpoints API clients use.
//!
//! A form is posted with the sign-in cookie (`HttpOnly`, `SameSite=Strict`), so besides that
//! it must hold the server's form value (`csrf`, shown only on pages a signed-in browser gets)
//! and, when the browser names an `Origin`, come from this server's own address: a page of
//! another site can neither read the value nor pass the check. The page's policy lets its forms
//! post to this server only (`form-action 'self'`). A form that acts is answered with a
//! redirect to the run's page. A refused one posted by a browser is answered with the form's
//! own page (the start page, or the run's page) under the refusal's status, the error and its
//! fix in a box above the form and what was typed kept; API clients (a JSON body, a bearer token
//! without `Accept: text/html`, or `Accept` asking for JSON only) get the JSON error, naming the
//! field.

use super::http::{self, ApiError, ApiResult, Reply};
use super::raise::{self, Offer};
use super::Shared;
use agentloop_engine::report::html::{encode_segment, esc};
use agentloop_types::budget::Budget;
use agentloop_workspace::workspace::{State, Status, StopKind};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Which form: the fields it may hold (besides `csrf`).
#[derive(Clone, Copy)]
pub struct Form {
    name: &'static str,
    fields: &'static [&'static str],
    /// What did not happen when it is refused, as its page says it.
    undone: &'static str,
}

impl Form {
    /// What did not happen when the form is refused (e.g. "The run was not continued").
    pub fn undone(&self) -> &'static str {
        self.undone
    }
}

pub const ANSWER: Form = Form { name: "answer", fields: &["answer"], undone: "The answer was not taken" };
pub const CONTINUE: Form = Form {
    name: "continue",
    fields: &["max_steps", "max_reframes", "timeout", "max_tokens", "max_cost_usd"],
    undone: "The run was not continued",
};
pub const START: Form = Form {
    name: "start",
    undone: "The run was not started",
    fields: &[
        "goal",
        "context",
        "agent",
        "session",
        "max_steps",
        "max_reframes",
        "timeout",
        "max_tokens",
        "max_cost_usd",
    ],
};

/// Reads a posted form into the JSON body its endpoint takes. One posted with the cookie must
/// pass [`super::auth::Auth::form_ok`]; a field the form does not have is refused, naming it.
pub fn fields(
    shared: &Shared,
    headers: &[tiny_http::Header],
    mut got: BTreeMap<String, String>,
    by_cookie: bool,
    form: Form,
) -> ApiResult<Map<String, Value>> {
    let csrf = got.remove("csrf");
    if by_cookie && !shared.auth.form_ok(headers, csrf.as_deref()) {
        return Err(ApiError::new(403, format!("this {} form was not sent from this server's own page", form.name))
            .hint("reload the page and send the form again (the form value changes when the server restarts)"));
    }
    if let Some(k) = got.keys().find(|k| !form.fields.contains(&k.as_str())) {
        return Err(ApiError::new(400, format!("the {} form has no field `{k}`", form.name))
            .hint(format!("its fields: csrf, {}", form.fields.join(", "))));
    }
    if form.name == ANSWER.name {
        return Ok(got.into_iter().map(|(k, v)| (k, Value::String(v))).collect());
    }
    // Start: the goal as typed (the endpoint says when it is empty), the context, agent and
    // session when filled in; the rest are budgets, as the continue form's.
    let mut body = Map::new();
    if form.name == START.name {
        for k in ["goal", "context", "agent", "session"] {
            match got.remove(k) {
                Some(v) if k == "goal" || !v.trim().is_empty() => {
                    body.insert(k.into(), Value::String(v));
                }
                _ => {}
            }
        }
    }
    // Continue and start: the budgets filled in (an empty field asks for nothing).
    let mut budgets = Map::new();
    for (k, v) in got.into_iter().filter(|(_, v)| !v.trim().is_empty()) {
        let v = v.trim();
        let bad = || ApiError::new(400, format!("`{k}` = `{v}` is not a number")).hint("e.g. 20, or leave it empty");
        let value = match Budget::from_key(&k) {
            Some(Budget::Timeout) => json!(v),
            Some(Budget::MaxCostUsd) => json!(v.parse::<f64>().ok().filter(|c| c.is_finite()).ok_or_else(bad)?),
            _ => json!(v.parse::<u64>().map_err(|_| bad())?),
        };
        budgets.insert(k, value);
    }
    if !budgets.is_empty() {
        body.insert("budgets".into(), Value::Object(budgets));
    }
    Ok(body)
}

/// A posted body, and how the request is answered.
#[derive(Default)]
pub struct Sent {
    /// The body is a form (not JSON): one that acts is answered with a redirect.
    pub form: bool,
    /// A refusal is answered with the form's page ([`wants_page`]).
    pub page: bool,
    /// The form's fields as typed (not `csrf`), filled in again on that page.
    pub typed: BTreeMap<String, String>,
}

/// Whether a refused form is answered with a page: a browser posted it (with the sign-in
/// cookie, or `Accept` naming `text/html`), and it does not ask for JSON only.
fn wants_page(req: &tiny_http::Request, by_cookie: bool) -> bool {
    let accept = req.headers().iter().find(|h| h.field.equiv("Accept")).map(|h| h.value.as_str().to_ascii_lowercase());
    let html = accept.as_deref().is_some_and(|a| a.contains("text/html"));
    let json_only = accept.as_deref().is_some_and(|a| a.contains("application/json")) && !html;
    !json_only && (by_cookie || html)
}

/// A posted body as its endpoint takes it: a form's fields through [`fields`]; a JSON object as
/// it is, except under the sign-in cookie alone, which signs only the panel's own forms (a
/// page of another site can make a form body that reads as JSON, but not the form value). With
/// it, how the request is answered ([`Sent`]), whether the body could be read or not.
pub fn body_of(
    shared: &Shared,
    req: &mut tiny_http::Request,
    by_cookie: bool,
    form: Form,
) -> (Sent, ApiResult<Map<String, Value>>) {
    let headers = req.headers().to_vec();
    let typed_form = http::is_form(req);
    let browser = typed_form && wants_page(req, by_cookie);
    let buf = match http::read(req) {
        Ok(b) => b,
        // Too big or too slow: a browser's form is answered with its page.
        Err(e) => return (Sent { form: typed_form, page: browser, ..Sent::default() }, Err(e)),
    };
    let is_form = typed_form && !http::opens_as_json(&buf);
    let mut sent = Sent { form: is_form, page: is_form && browser, ..Sent::default() };
    let body = match http::parse(typed_form, &buf) {
        Ok(http::Body::Form(got)) => {
            sent.typed = got.iter().filter(|(k, _)| *k != "csrf").map(|(k, v)| (k.clone(), v.clone())).collect();
            fields(shared, &headers, got, by_cookie, form)
        }
        Ok(http::Body::Json(_)) if by_cookie => {
            Err(ApiError::new(403, format!("this {} form was not sent from this server's own page", form.name))
                .hint("send a JSON body with `Authorization: Bearer TOKEN`, or use the page's form"))
        }
        Ok(http::Body::Json(m)) => Ok(m),
        Err(e) => Err(e),
    };
    (sent, body)
}

/// The box a refused form's page shows above the form: what did not happen and why, and what to
/// change (the fix as the form says it, else the API's).
pub fn refusal(form: Form, e: &ApiError) -> String {
    let fix = e.more.as_ref().and_then(|m| m.form_hint.as_ref()).or(e.hint.as_ref());
    format!(
        "<div class=\"refused\" id=\"refused\" role=\"alert\" data-status=\"{}\"><p><strong>{}:</strong> {}</p>{}</div>",
        e.status,
        form.undone,
        esc(&e.text()),
        fix.map(|f| format!("<p class=\"fix\"><strong>What to change:</strong> {}</p>", esc(f))).unwrap_or_default()
    )
}

/// A typed value as an input's `value` attribute (nothing when none was typed).
fn value_of(typed: &BTreeMap<String, String>, k: &str) -> String {
    typed.get(k).map(|v| format!(" value=\"{}\"", esc(v))).unwrap_or_default()
}

/// After a form acted: back to the run's page (303, so the browser asks for it with GET).
pub fn back_to_run(id: &str) -> Reply {
    let to = format!("/runs/{}/report", encode_segment(id));
    Reply::json(303, &json!({"see": to})).header("Location", &to)
}

/// The index's form that starts a run: the goal, its background, an agent profile, and limits
/// (each empty field asks for nothing; a limit only narrows the server's). `typed`: what a
/// refused post held, filled in again.
pub fn start_form(csrf: &str, typed: &BTreeMap<String, String>) -> String {
    let hidden = format!("<input type=\"hidden\" name=\"csrf\" value=\"{}\">", esc(csrf));
    let field = |k: &str, label: &str, kind: &str| {
        format!(
            "<label for=\"{k}\">{label}</label><input id=\"{k}\" name=\"{k}\" {kind}{} autocomplete=\"off\">",
            value_of(typed, k)
        )
    };
    let text = |k: &str| typed.get(k).map(|v| esc(v)).unwrap_or_default();
    let limits = [
        field("max_steps", "Steps", "type=\"number\" min=\"1\" step=\"1\""),
        field("max_reframes", "Reframes", "type=\"number\" min=\"0\" step=\"1\""),
        field("timeout", "Time limit", "type=\"text\" placeholder=\"e.g. 10m\""),
        field("max_tokens", "Tokens", "type=\"number\" min=\"1\" step=\"1\""),
        field("max_cost_usd", "Cost (USD)", "type=\"number\" min=\"0\" step=\"any\""),
    ];
    format!(
        "<section class=\"actions\" id=\"actions\"><h2>Start a run</h2>\
         <form method=\"post\" action=\"/runs\" id=\"start-form\">{hidden}\
         <label for=\"goal\">Goal</label><textarea id=\"goal\" name=\"goal\" rows=\"3\" required>{}</textarea>\
         <label for=\"context\">Background (optional)</label><textarea id=\"context\" name=\"context\" rows=\"3\">{}</textarea>\
         {}{}\
         <fieldset><legend>Limits (optional: empty keeps the server's; at most the server's)</legend>{}</fieldset>\
         <button type=\"submit\">Start</button></form></section>",
        text("goal"),
        text("context"),
        field("agent", "Agent profile (optional)", "type=\"text\""),
        field(
            "session",
            "Session (optional: the next turn of this named conversation)",
            "type=\"text\" pattern=\"[A-Za-z0-9._\\-]{1,64}\" maxlength=\"64\""
        ),
        limits.join("")
    )
}

/// The forms a run's page shows: answer the question of a run whose model asked one; continue
/// one that a limit or the provider stopped, or that was interrupted. None for a run going on
/// or done. `offer`: what a continue can ask for (without it, the run's own limits); `typed`:
/// what a refused post held, filled in again.
pub fn actions(
    csrf: &str,
    s: &State,
    going: bool,
    offer: Option<&Offer>,
    typed: &BTreeMap<String, String>,
) -> Option<String> {
    let id = encode_segment(&s.run_id);
    let hidden = format!("<input type=\"hidden\" name=\"csrf\" value=\"{}\">", esc(csrf));
    if going {
        return None;
    }
    // A question the model asked is answered; a run a limit or the provider stopped goes on.
    if let (Status::Escalated, Some(q), Some(StopKind::Escalated)) = (s.status, &s.open_question, s.stop) {
        return Some(format!(
            "<section class=\"actions\" id=\"actions\"><h2>Answer the question</h2>\
             <form method=\"post\" action=\"/runs/{id}/answer\" id=\"answer-form\">{hidden}\
             <label for=\"answer\">{}</label><textarea id=\"answer\" name=\"answer\" rows=\"4\" required>{}</textarea>\
             <button type=\"submit\">Answer and go on</button></form></section>",
            esc(q),
            typed.get("answer").map(|a| esc(a)).unwrap_or_default()
        ));
    }
    if s.status == Status::Done || (s.status == Status::Running && !s.interrupted) {
        return None;
    }
    // Each limit says what it is now, and suggests a value that lets the run go on.
    let own = Offer { now: s.limits.clone(), most: s.limits.clone(), next: s.limits.clone(), stuck: None };
    let o = offer.unwrap_or(&own);
    let inputs: Vec<String> = Budget::ALL
        .into_iter()
        .map(|b| {
            let k = b.key();
            let kind = match b {
                Budget::MaxSteps | Budget::MaxTokens => "type=\"number\" min=\"1\" step=\"1\"",
                Budget::MaxReframes => "type=\"number\" min=\"0\" step=\"1\"",
                Budget::Timeout => "type=\"text\"",
                Budget::MaxCostUsd => "type=\"number\" min=\"0\" step=\"any\"",
            };
            let now = match raise::value(b, &o.now) {
                v if v.is_empty() => "no limit".to_string(),
                v if b == Budget::Timeout => format!("{v}, counted afresh"),
                v => v,
            };
            let hint = if o.stuck == Some(b) { String::new() } else { raise::value(b, &o.next) };
            format!(
                "<label for=\"{k}\">{} <span class=\"now\">(now {})</span></label><input id=\"{k}\" name=\"{k}\" {kind} placeholder=\"{}\"{} autocomplete=\"off\">",
                raise::label(b),
                esc(&now),
                esc(&hint),
                value_of(typed, k)
            )
        })
        .collect();
    // A limit the server's own does not let the run go on under: said, not left to a refusal.
    let stuck = o.stuck.map(|b| format!("<p class=\"stuck\" id=\"stuck\">{}</p>", esc(&raise::stuck(b, s, o))));
    Some(format!(
        "<section class=\"actions\" id=\"actions\"><h2>Continue the run</h2>\
         <form method=\"post\" action=\"/runs/{id}/continue\" id=\"continue-form\">{hidden}\
         <fieldset><legend>New limits (optional: empty keeps the limit in force, shown as now; each suggestion lets the run go on; at most the server's)</legend>{}</fieldset>{}\
         <button type=\"submit\">Continue</button></form></section>",
        inputs.join(""),
        stuck.unwrap_or_default()
    ))
}
