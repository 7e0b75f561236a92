//! What `status --redis` and `runs --redis` show of a queue: runs queued (not yet read by a
//! worker), claimed (read, not yet acknowledged: which worker, how long idle, how often
//! delivered) and dead-lettered (with the reason).

use super::request::RunRequest;
use super::streams::{self, Link, Names};
use agentloop_io::output::Printer;
use agentloop_types::error::Result;
use serde_json::{json, Value};
use std::time::Duration;

/// At most this many of each kind are shown.
const LIMIT: usize = 100;

/// The queue's state as JSON: `queued`, `claimed` and `dead` arrays.
pub fn queue(url: &str, prefix: &str, printer: Printer) -> Result<Value> {
    let n = Names::new(prefix)?;
    let mut link = Link::open(url, "--redis", printer, Some(Duration::from_secs(10)))?;
    let o = link.call("read the queue", |c| streams::overview(c, &n, LIMIT))?;
    let about = |id: &str, req: Option<&str>| {
        let r = req.and_then(|t| RunRequest::parse(t).ok());
        let mut v = json!({
            "message_id": id,
            "run_id": r.as_ref().map(|r| r.run_id(id)),
            "goal": r.as_ref().filter(|r| r.go_on().is_none()).map(|r| r.goal.clone()),
        });
        // An answer or a continue of a run: which.
        if let Some(go) = r.as_ref().and_then(|r| r.go_on()) {
            v["request"] = json!(go.verb());
        }
        v
    };
    let queued: Vec<Value> = o.queued.iter().map(|(id, req)| about(id, req.as_deref())).collect();
    let mut claimed = Vec::new();
    for (id, consumer, idle_ms, deliveries) in &o.claimed {
        let req = link.call("read a request", |c| streams::request_of(c, &n, id))?;
        let mut v = about(id, req.as_deref());
        v["worker"] = json!(consumer);
        v["idle_ms"] = json!(idle_ms);
        v["deliveries"] = json!(deliveries);
        claimed.push(v);
    }
    let dead: Vec<Value> = o
        .dead
        .iter()
        .map(|(id, reason, req)| {
            let mut v = about(id, req.as_deref());
            v["reason"] = json!(reason);
            v
        })
        .collect();
    Ok(json!({"stream": n.requests, "queued": queued, "claimed": claimed, "dead": dead}))
}

/// Prints [`queue`]'s view for people.
pub fn print(p: &Printer, v: &Value) {
    let line = agentloop_io::output::one_line;
    let list = |k: &str| v[k].as_array().cloned().unwrap_or_default();
    let what = |e: &Value| {
        let run = e["run_id"].as_str().map(|r| format!("run {r}")).unwrap_or_else(|| "no valid request".into());
        let goal = e["goal"].as_str().map(|g| format!(": {}", line(g))).unwrap_or_default();
        match e["request"].as_str() {
            Some(verb) => format!("{verb} of {run}"),
            None => format!("{run}{goal}"),
        }
    };
    p.outln(&format!("queue          {}", v["stream"].as_str().unwrap_or("")));
    let queued = list("queued");
    p.outln(&format!("queued {}", queued.len()));
    for e in &queued {
        p.outln(&format!("  {}  {}", e["message_id"].as_str().unwrap_or(""), what(e)));
    }
    let claimed = list("claimed");
    p.outln(&format!("claimed {}", claimed.len()));
    for e in &claimed {
        p.outln(&format!(
            "  {}  {} (worker {}, idle {:.1}s, delivered {}x)",
            e["message_id"].as_str().unwrap_or(""),
            what(e),
            line(e["worker"].as_str().unwrap_or("")),
            e["idle_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
            e["deliveries"].as_u64().unwrap_or(0)
        ));
    }
    let dead = list("dead");
    p.outln(&format!("dead-lettered {}", dead.len()));
    for e in &dead {
        p.outln(&format!(
            "  {}  {} — {}",
            e["message_id"].as_str().unwrap_or(""),
            what(e),
            line(e["reason"].as_str().unwrap_or(""))
        ));
    }
}
