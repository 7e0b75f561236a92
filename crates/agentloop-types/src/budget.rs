//! The limits a run is held to, named once: the same five keys are configuration keys
//! (`max_steps`, … in agentloop.yaml, `AGENTLOOP_*`, flags), state.json's `limits`, `status`'s
//! budget lines, a `serve` request's `budgets` and a `handle` request's `config`. Code that walks
//! the budgets walks [`Budget::ALL`]; nothing else lists their names.

use crate::clock::Dur;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

// Recorded costs are checked where the trace is read (the base layer); re-exported here, with
// the rest of what a budget is.
pub use crate::trace::{bad_cost, MAX_RECORDED_COST_USD};

/// One limit of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Budget {
    /// Plan → act → reflect steps.
    MaxSteps,
    /// Times the run may go back to Frame.
    MaxReframes,
    /// Wall-clock time of one invocation.
    Timeout,
    /// Tokens, prompt and completion together.
    MaxTokens,
    /// Spend in US dollars (by the price table).
    MaxCostUsd,
}

impl Budget {
    /// Every budget, in the order they are shown.
    pub const ALL: [Budget; 5] =
        [Budget::MaxSteps, Budget::MaxReframes, Budget::Timeout, Budget::MaxTokens, Budget::MaxCostUsd];

    /// The key, the same in configuration, state.json's `limits` (bar `timeout_secs`) and requests.
    pub fn key(self) -> &'static str {
        match self {
            Budget::MaxSteps => "max_steps",
            Budget::MaxReframes => "max_reframes",
            Budget::Timeout => "timeout",
            Budget::MaxTokens => "max_tokens",
            Budget::MaxCostUsd => "max_cost_usd",
        }
    }

    /// The budget a stop's reason names (the reasons the loop writes start with it).
    pub fn from_reason(reason: &str) -> Option<Budget> {
        let r = reason.trim_start();
        [
            ("max_steps", Budget::MaxSteps),
            ("max_reframes", Budget::MaxReframes),
            ("timeout", Budget::Timeout),
            ("token budget", Budget::MaxTokens),
            ("cost budget", Budget::MaxCostUsd),
        ]
        .into_iter()
        .find(|(p, _)| r.starts_with(p))
        .map(|(_, b)| b)
    }

    /// The flag that sets it for one command.
    pub fn flag(self) -> &'static str {
        match self {
            Budget::MaxSteps => "--max-steps",
            Budget::MaxReframes => "--max-reframes",
            Budget::Timeout => "--timeout",
            Budget::MaxTokens => "--max-tokens",
            Budget::MaxCostUsd => "--max-cost",
        }
    }

    /// The budget a configuration key names, if it names one.
    pub fn from_key(key: &str) -> Option<Budget> {
        Budget::ALL.into_iter().find(|b| b.key() == key)
    }
}

/// Budgets a request asks for (a `serve` request's `budgets`); each may only narrow the limit
/// the server's own configuration sets (see `trust::narrow_budgets`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reframes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

impl Budgets {
    /// The value asked for `b`, as its configuration value (a timeout as seconds), if any.
    pub fn get(&self, b: Budget) -> Option<Value> {
        match b {
            Budget::MaxSteps => self.max_steps.map(|v| json!(v)),
            Budget::MaxReframes => self.max_reframes.map(|v| json!(v)),
            Budget::Timeout => self.timeout.map(|d| json!(d.0.as_secs())),
            Budget::MaxTokens => self.max_tokens.map(|v| json!(v)),
            Budget::MaxCostUsd => self.max_cost_usd.map(|v| json!(v)),
        }
    }

    /// These budgets with those `new` names put in their place.
    pub fn replaced_by(&self, new: &Budgets) -> Budgets {
        Budgets {
            max_steps: new.max_steps.or(self.max_steps),
            max_reframes: new.max_reframes.or(self.max_reframes),
            timeout: new.timeout.or(self.timeout),
            max_tokens: new.max_tokens.or(self.max_tokens),
            max_cost_usd: new.max_cost_usd.or(self.max_cost_usd),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        for b in Budget::ALL {
            assert_eq!(Budget::from_key(b.key()), Some(b));
        }
        assert_eq!(Budget::from_key("max_loops"), None);
        let b: Budgets = serde_json::from_value(json!({"max_steps": 50, "timeout": "10m"})).unwrap();
        assert_eq!(b.get(Budget::Timeout), Some(json!(600)));
    }
}
