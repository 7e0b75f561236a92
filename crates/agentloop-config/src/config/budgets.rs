//! The five budgets as configuration: each limit as a request would give it, a request's budgets
//! set into a configuration, and clamped to what a configuration allows. The budgets themselves
//! (their keys and flags) are vocabulary (`agentloop_types::budget`).

use super::Config;
use agentloop_types::budget::{Budget, Budgets};

impl Config {
    /// The limit `b` in this configuration, as a request would give it (a timeout in seconds,
    /// `none` for no limit).
    pub fn limit(&self, b: Budget) -> String {
        match b {
            Budget::MaxSteps => self.max_steps.to_string(),
            Budget::MaxReframes => self.max_reframes.to_string(),
            Budget::Timeout => format!("{}s", self.timeout.0.as_secs()),
            Budget::MaxTokens => self.max_tokens.map_or_else(|| "none".into(), |t| t.to_string()),
            Budget::MaxCostUsd => self.max_cost_usd.map_or_else(|| "none".into(), |u| u.to_string()),
        }
    }

    /// Sets `b` to the value `asked` gives it (nothing when it gives none).
    pub fn set_budget(&mut self, b: Budget, asked: &Budgets) {
        match b {
            Budget::MaxSteps => self.max_steps = asked.max_steps.unwrap_or(self.max_steps),
            Budget::MaxReframes => self.max_reframes = asked.max_reframes.unwrap_or(self.max_reframes),
            Budget::Timeout => self.timeout = asked.timeout.unwrap_or(self.timeout),
            Budget::MaxTokens => self.max_tokens = asked.max_tokens.or(self.max_tokens),
            Budget::MaxCostUsd => self.max_cost_usd = asked.max_cost_usd.or(self.max_cost_usd),
        }
    }

    /// Narrows each budget `asked` gives to what this configuration allows (a run driven again
    /// after the server's limits went down).
    pub fn clamp_budgets(&self, asked: &mut Budgets) {
        fn min<T: PartialOrd + Copy>(want: &mut Option<T>, limit: Option<T>) {
            if let (Some(w), Some(l)) = (*want, limit) {
                if w > l {
                    *want = Some(l);
                }
            }
        }
        min(&mut asked.max_steps, Some(self.max_steps));
        min(&mut asked.max_reframes, Some(self.max_reframes));
        min(&mut asked.max_tokens, self.max_tokens);
        min(&mut asked.max_cost_usd, self.max_cost_usd);
        if asked.timeout.is_some_and(|t| t.0 > self.timeout.0) {
            asked.timeout = Some(self.timeout);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_budget_is_a_config_key() {
        let defaults = serde_json::to_value(Config::default()).unwrap();
        for b in Budget::ALL {
            assert!(defaults.get(b.key()).is_some(), "{} is a config key", b.key());
        }
    }

    #[test]
    fn budgets_are_set_and_clamped() {
        let mut cfg = Config::default();
        let mut b: Budgets =
            serde_json::from_value(json!({"max_steps": 50, "timeout": "10m", "max_cost_usd": 0.5})).unwrap();
        cfg.clamp_budgets(&mut b);
        assert_eq!(b.max_steps, Some(cfg.max_steps), "above the limit: the limit");
        assert_eq!(b.max_cost_usd, Some(0.5), "no limit: anything narrows it");
        for k in Budget::ALL {
            cfg.set_budget(k, &b);
        }
        assert_eq!((cfg.max_steps, cfg.timeout.0.as_secs(), cfg.max_cost_usd), (20, 600, Some(0.5)));
        assert_eq!(cfg.limit(Budget::Timeout), "600s");
    }
}
