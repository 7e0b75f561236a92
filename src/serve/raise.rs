//! What a stopped run needs to go on, in the words of the continue form and of a refused
//! continue: each limit's field, how much of it the run has used, and a value that lets it go
//! on within the server's own limits.

use agentloop_types::budget::Budget;
use agentloop_workspace::workspace::{Limits, State, Workspace};

/// The label of `b`'s field in the panel's forms.
pub fn label(b: Budget) -> &'static str {
    match b {
        Budget::MaxSteps => "Steps",
        Budget::MaxReframes => "Reframes",
        Budget::Timeout => "Time limit",
        Budget::MaxTokens => "Tokens",
        Budget::MaxCostUsd => "Cost (USD)",
    }
}

/// How much of `b` the run has used, as a limit's value (steps taken, reframes, tokens, dollars
/// spent; a time limit starts afresh with every continue: none).
pub fn used(b: Budget, s: &State) -> String {
    match b {
        Budget::MaxSteps => s.step.to_string(),
        Budget::MaxReframes => s.reframes.to_string(),
        Budget::Timeout => "0s".into(),
        Budget::MaxTokens => s.usage.total().to_string(),
        Budget::MaxCostUsd => format!("{:.4}", s.cost_usd),
    }
}

/// `b`'s limit in `l` as a form field takes it (empty: no limit).
pub fn value(b: Budget, l: &Limits) -> String {
    match b {
        Budget::MaxSteps => l.max_steps.to_string(),
        Budget::MaxReframes => l.max_reframes.to_string(),
        Budget::Timeout => format!("{}s", l.timeout_secs),
        Budget::MaxTokens => l.max_tokens.map(|t| t.to_string()).unwrap_or_default(),
        Budget::MaxCostUsd => l.max_cost_usd.map(|c| c.to_string()).unwrap_or_default(),
    }
}

/// What a continue of a stopped run can ask for.
pub struct Offer {
    /// The limits a continue that raises nothing runs under: the run's own, or the server's
    /// where its configuration now gives one.
    pub now: Limits,
    /// The most the server allows (its configuration, with no request's budgets).
    pub most: Limits,
    /// `now` with every limit the run has used up raised so that it goes on: by the built-in
    /// default's steps or reframes, tokens and cost doubled, never above `most`.
    pub next: Limits,
    /// A limit the run has used up that even `most` does not let it go on under.
    pub stuck: Option<Budget>,
}

/// What a continue of the run `s` (in `ws`) can ask for, given the limits in force (`now`) and
/// the server's own (`most`).
pub fn offer(ws: &Workspace, s: &State, now: Limits, most: Limits) -> Offer {
    let mut next = now.clone();
    let mut stuck = None;
    // Each round raises the limit the loop would stop on first; at most once each.
    for _ in Budget::ALL {
        let Some((b, _)) = agentloop_engine::lifecycle::still_over(ws, s, &next) else { break };
        let up = raised(b, s, &next, &most);
        if up == next {
            stuck = Some(b);
            break;
        }
        next = up;
    }
    Offer { now, most, next, stuck }
}

/// `l` with `b` raised past what the run used, held to `most`.
fn raised(b: Budget, s: &State, l: &Limits, most: &Limits) -> Limits {
    let default = agentloop_config::config::Config::default();
    let mut up = l.clone();
    match b {
        Budget::MaxSteps => {
            up.max_steps = l.max_steps.max(s.step).saturating_add(default.max_steps).min(most.max_steps)
        }
        Budget::MaxReframes => {
            let more = default.max_reframes.max(1);
            up.max_reframes = l.max_reframes.max(s.reframes).saturating_add(more).min(most.max_reframes)
        }
        Budget::MaxTokens => {
            let now = l.max_tokens.unwrap_or_default().max(s.usage.total()).max(1000);
            let twice = now.saturating_mul(2);
            up.max_tokens = Some(most.max_tokens.map_or(twice, |m| m.min(twice)))
        }
        Budget::MaxCostUsd => {
            let now = l.max_cost_usd.unwrap_or_default().max(s.cost_usd).max(0.01);
            let cents = ((now * 2.0) * 100.0).ceil() / 100.0;
            up.max_cost_usd = Some(most.max_cost_usd.map_or(cents, |m| m.min(cents)))
        }
        // A time limit is counted afresh by every continue: never used up.
        Budget::Timeout => {}
    }
    up
}

/// The fix of a continue refused because `b` is still used up, for an API client and for the
/// panel's continue form: the value to raise it above, and one that lets the run go on (or that
/// the server's own limit does not).
pub fn fix(b: Budget, s: &State, o: &Offer) -> (String, String) {
    let (key, used) = (b.key(), used(b, s));
    if o.stuck == Some(b) || value(b, &o.next) == value(b, &o.now) {
        let why = stuck(b, s, o);
        return (why.clone(), why);
    }
    let most = match value(b, &o.most) {
        m if m.is_empty() => String::new(),
        m => format!(" (at most {m}, this server's limit)"),
    };
    let next = value(b, &o.next);
    (
        format!("raise {key} above {used} to continue: {{\"budgets\": {{\"{key}\": {next}}}}}{most}"),
        format!("raise {key} above {used} to continue: put {next} in {}{most}", label(b)),
    )
}

/// Why no continue a request may ask for lets the run go on: `b` is used up to the server's own
/// limit.
pub fn stuck(b: Budget, s: &State, o: &Offer) -> String {
    format!(
        "the run has used {} of {}, and this server allows at most {}: it goes on only once the server's own limit is raised (`{}` in the root's agentloop.yaml)",
        used(b, s),
        b.key(),
        value(b, &o.most),
        b.key()
    )
}
