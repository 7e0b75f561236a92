//! A run's status as the pages show it (the runs list and the run's page alike): a badge whose
//! words say how the run stands and whose class gives it a colour of its own. `runs` and the
//! API say `escalated` both for a run whose model asks a question (exit 3) and for one a limit
//! stopped (exit 4); a person acts differently on each, so the badge tells them apart — in words
//! first, so nothing depends on seeing the colour.

use super::html::esc;
use agentloop_types::budget::Budget;
use agentloop_workspace::workspace::StopKind;

/// The class (colour) and words of the badge of a run whose status is `status` (as `runs`
/// shows it: running, done, escalated, interrupted), stopped as `stop`; `asks`: it has an open
/// question.
pub fn badge(status: &str, stop: Option<StopKind>, asks: bool) -> (&'static str, &'static str) {
    if status != "escalated" {
        return match status {
            "done" => ("s-done", "done"),
            "running" => ("s-running", "running"),
            "interrupted" => ("s-interrupted", "interrupted"),
            _ => ("s-other", "unknown"),
        };
    }
    match stop {
        Some(StopKind::Budget(b)) => (
            "s-budget",
            match b {
                Budget::MaxSteps => "out of steps",
                Budget::MaxReframes => "out of reframes",
                Budget::Timeout => "out of time",
                Budget::MaxTokens => "out of tokens",
                Budget::MaxCostUsd => "out of budget",
            },
        ),
        Some(StopKind::Provider) => ("s-provider", "provider failed"),
        Some(StopKind::Resting) => ("s-resting", "resting"),
        Some(StopKind::Escalated) | None if asks => ("s-question", "needs an answer"),
        _ => ("s-escalated", "escalated"),
    }
}

/// The badge as HTML: its words, its class, `data-status` the status `runs` prints, and a title
/// saying both with how the run stopped. `id`: the element's id, if any.
pub fn badge_html(status: &str, stop: Option<StopKind>, asks: bool, id: Option<&str>) -> String {
    let (class, words) = badge(status, stop, asks);
    let title = match stop {
        Some(s) if status == "escalated" => format!("{status} ({})", s.as_str()),
        _ => status.to_string(),
    };
    format!(
        "<span data-status=\"{}\" title=\"{}\"{} class=\"badge {class}\">{words}</span>",
        esc(status),
        esc(&title),
        id.map(|i| format!(" id=\"{}\"", esc(i))).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_and_a_limit_have_badges_of_their_own() {
        let q = badge("escalated", Some(StopKind::Escalated), true);
        let steps = badge("escalated", Some(StopKind::Budget(Budget::MaxSteps)), false);
        assert_eq!(q, ("s-question", "needs an answer"));
        assert_eq!(steps, ("s-budget", "out of steps"));
        assert_eq!(badge("escalated", Some(StopKind::Escalated), false).0, "s-escalated");
        assert_eq!(badge("done", Some(StopKind::Done), false), ("s-done", "done"));
        let html = badge_html("escalated", Some(StopKind::Budget(Budget::MaxCostUsd)), false, Some("status"));
        assert_eq!(
            html,
            "<span data-status=\"escalated\" title=\"escalated (max_cost_usd)\" id=\"status\" class=\"badge s-budget\">out of budget</span>"
        );
    }
}
