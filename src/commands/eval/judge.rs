//! Judging a trial: each of its case's checks against what the run left (result.json and the
//! workspace's files, read without following a link).

use super::checks_de::{Check, Matcher};
use super::trial::Ran;
use agentloop_types::outcome::StopKind;
use camino::Utf8Path;
use serde_json::Value;

/// A check that did not hold: its short name (what the table counts) and what was found.
#[derive(Debug, Clone)]
pub struct Failure {
    pub label: String,
    pub detail: String,
}

/// Most bytes of a file a check reads.
const MAX_READ: u64 = 16 * 1024 * 1024;

/// Every check that failed, in the case's order; none when the trial passed.
pub fn judge(checks: &[Check], ws: &Utf8Path, ran: &Ran) -> Vec<Failure> {
    let Some(result) = &ran.result else {
        let exit = ran.exit.map_or("a signal".to_string(), |c| c.to_string());
        let why = if ran.note.is_empty() { String::new() } else { format!(": {}", ran.note) };
        return vec![Failure {
            label: format!("no result (exit {exit})"),
            detail: format!("the run left no result.json (exit {exit}){why}"),
        }];
    };
    let mut failed: Vec<Failure> = checks.iter().filter_map(|c| one(c, ws, result)).collect();
    if let Some(slot) = &ran.stopped_at {
        let exit = ran.exit.map_or("a signal".to_string(), |c| c.to_string());
        failed.insert(
            0,
            Failure {
                label: format!("slot {slot} stopped"),
                detail: format!("the run for slot {slot} did not end done (exit {exit}); the later slots did not run"),
            },
        );
    }
    failed
}

fn fail(label: String, detail: String) -> Option<Failure> {
    Some(Failure { label, detail })
}

fn one(check: &Check, ws: &Utf8Path, result: &Value) -> Option<Failure> {
    let number = |k: &str| result[k].as_u64();
    match check {
        Check::Stop(wanted) => {
            let got = result["stop"].as_str().unwrap_or("");
            let kind = StopKind::parse(got, result["reason"].as_str());
            let held = wanted.0.iter().any(|w| {
                w == got || kind.is_some_and(|k| k.as_str() == w || (w == "budget" && matches!(k, StopKind::Budget(_))))
            });
            (!held).then(|| Failure {
                label: format!("stop {got}"),
                detail: format!(
                    "stop: wanted {}, the run stopped {got}: {}",
                    wanted.0.join(" or "),
                    text(&result["reason"])
                ),
            })
        }
        Check::File(f) => {
            let label = |what: &str| format!("file {} {what}", f.path);
            let content = agentloop_io::fs::read_no_link(ws, Utf8Path::new(&f.path), MAX_READ);
            match (content, f.exists) {
                (Ok(None), Some(false)) => None,
                (Ok(Some(_)), Some(false)) => fail(label("exists"), format!("file {}: wanted none, found one", f.path)),
                (Ok(None), _) => fail(label("missing"), format!("file {}: the run left no such file", f.path)),
                (Err(e), _) => fail(label("unreadable"), format!("file {}: {}", f.path, e.message)),
                (Ok(Some(bytes)), _) => {
                    let text = String::from_utf8_lossy(&bytes);
                    matches(&f.matcher(), &text)
                        .map(|(what, why)| Failure { label: label(what), detail: format!("file {}: {why}", f.path) })
                }
            }
        }
        Check::Output(m) => {
            let out = match &result["output"] {
                Value::Null => text(&result["outcome"]),
                Value::String(s) => s.clone(),
                v => agentloop_types::json::to_string(v),
            };
            matches(m, &out)
                .map(|(what, why)| Failure { label: format!("output {what}"), detail: format!("output: {why}") })
        }
        Check::StepsAtMost(n) => at_most("steps_at_most", *n as f64, number("steps_taken").map(|s| s as f64)),
        Check::TokensAtMost(n) => at_most("tokens_at_most", *n as f64, Some(tokens(result) as f64)),
        Check::CostAtMost(c) => match result["cost_usd"].as_f64() {
            Some(cost) => at_most("cost_at_most", *c, Some(cost)),
            // A scripted run spends nothing; a cost that is unknown cannot be held to a cap.
            None if result["model"].as_str() == Some("scripted") => None,
            None => {
                fail("cost_at_most".into(), "cost_at_most: the run's cost is unknown (no price for its model)".into())
            }
        },
    }
}

fn at_most(name: &str, cap: f64, got: Option<f64>) -> Option<Failure> {
    match got {
        Some(v) if v <= cap => None,
        Some(v) => fail(name.into(), format!("{name}: {v} is over {cap}")),
        None => fail(name.into(), format!("{name}: the result does not say")),
    }
}

/// Every token the run used: input, output and cache.
pub fn tokens(result: &Value) -> u64 {
    let u = &result["usage"];
    ["input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens"]
        .iter()
        .filter_map(|k| u[*k].as_u64())
        .sum()
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

/// The first way `text` fails `m`: (its name, what was found).
fn matches(m: &Matcher, text: &str) -> Option<(&'static str, String)> {
    if let Some(want) = &m.equals {
        // A file's last line ending is not part of what it says.
        if text.trim_end_matches(['\n', '\r']) != want.0.trim_end_matches(['\n', '\r']) {
            return Some(("equals", format!("wanted exactly {:?}, found {:?}", want.0, cut(text))));
        }
    }
    for want in m.contains.iter().flat_map(|c| &c.0) {
        if !text.contains(want.as_str()) {
            return Some(("contains", format!("wanted text containing {want:?}, found {:?}", cut(text))));
        }
    }
    for unwanted in m.lacks.iter().flat_map(|c| &c.0) {
        if text.contains(unwanted.as_str()) {
            return Some(("lacks", format!("wanted text without {unwanted:?}, found {:?}", cut(text))));
        }
    }
    if let Some(pattern) = &m.regex {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(text) => {}
            _ => return Some(("regex", format!("wanted a match of /{pattern}/, found {:?}", cut(text)))),
        }
    }
    if let Some(schema) = &m.schema {
        let doc: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return Some(("schema", format!("wanted JSON for its schema, found none ({e})"))),
        };
        match jsonschema::validator_for(schema) {
            Ok(v) => {
                let errors: Vec<String> = v.iter_errors(&doc).map(|e| format!("{}: {e}", e.instance_path())).collect();
                if !errors.is_empty() {
                    return Some(("schema", format!("breaks its schema: {}", errors.join("; "))));
                }
            }
            Err(e) => return Some(("schema", format!("the schema is unusable: {e}"))),
        }
    }
    None
}

/// At most 200 characters of what was found, for a failure's message.
fn cut(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
