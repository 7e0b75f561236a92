//! What a stopped run needs to go on, in the words of the continue form and of a refused
//! continue: each limit's field and how much of it the run has used.

use crate::budget::Budget;
use crate::workspace::State;

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

/// The fix of a continue refused because `b` is still used up, for an API client and for the
/// panel's continue form.
pub fn fix(b: Budget, s: &State) -> (String, String) {
    let (key, used) = (b.key(), used(b, s));
    (
        format!(
            "raise {key} above {used} to continue: {{\"budgets\": {{\"{key}\": N}}}} with N above {used}, up to this server's limit"
        ),
        format!("raise {key} above {used} to continue: put a number above {used} in {}, up to this server's limit", label(b)),
    )
}
