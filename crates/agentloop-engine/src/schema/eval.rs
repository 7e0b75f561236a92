//! `agentloop eval --json`: what a suite's trials showed, case by case and model by model. The
//! command builds this document and nothing else, so docs/schema/eval.json describes exactly
//! what it prints; `--baseline FILE` reads an earlier one back.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One run of a suite: every case with every model.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvalReport {
    /// The suite's name (its `name:`, else its file name without `.yaml`)
    pub suite: String,
    /// Where the suite was read from: its file, `-` for stdin, or `builtin:NAME`
    pub source: String,
    /// The folder holding every trial's workspace, as `CASE/MODEL/TRIAL`
    pub out: String,
    /// Whether every case reached its pass rate with every model
    pub passed: bool,
    /// One entry per case and model, in the suite's order
    pub cases: Vec<EvalCase>,
    /// Each model over the whole suite, in the order they ran
    pub models: Vec<EvalModel>,
}

/// One model over every case of the suite: how the models compare side by side.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvalModel {
    pub model: String,
    /// Cases that reached their pass rate
    pub cases_ok: u32,
    pub cases: u32,
    /// Trials that passed, over all cases
    pub trials_passed: u32,
    pub trials: u32,
}

/// One case run with one model, over its trials.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvalCase {
    /// The case's `name`
    pub case: String,
    /// The model it ran with (`default`: the model the flags and configuration choose)
    pub model: String,
    /// The share of trials that must pass (the case's `pass_rate`, else the suite's, else 1)
    pub pass_rate: f64,
    /// Trials that passed every check
    pub passed: u32,
    /// Trials run
    pub trials: u32,
    /// passed / trials
    pub rate: f64,
    /// Whether `rate` reached `pass_rate`
    pub ok: bool,
    /// The median of the trials' steps taken (null when no trial left a result)
    pub median_steps: Option<f64>,
    /// The median of the trials' tokens (input, output and cache)
    pub median_tokens: Option<f64>,
    /// The median of the trials' cost in USD (null when no trial's cost is known, as for
    /// scripted answers)
    pub median_cost_usd: Option<f64>,
    /// The median of the trials' wall time in seconds
    pub median_seconds: f64,
    /// The failure most trials had: the check that failed (`file answer.txt contains`), the
    /// stop kind when it was the stop (`stop max_steps`), or `no result (exit N)`
    pub commonest_failure: Option<String>,
    /// Each trial, in order
    pub results: Vec<EvalTrial>,
}

/// One trial: one run in a fresh workspace.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvalTrial {
    /// 1, 2, ... up to the case's trials
    pub trial: u32,
    /// The trial's workspace, kept for inspection
    pub workspace: String,
    /// Whether every check held
    pub passed: bool,
    /// The exit code of the trial's `agentloop run` (null when it died of a signal)
    pub exit_code: Option<i32>,
    /// How the run stopped, as result.json says (`done`, `escalated`, `max_steps`, ...)
    pub stop: Option<String>,
    /// Steps taken
    pub steps: Option<u64>,
    /// Tokens used (input, output and cache)
    pub tokens: Option<u64>,
    /// Cost in USD (null when unknown or scripted)
    pub cost_usd: Option<f64>,
    /// Wall time of the run in seconds
    pub seconds: f64,
    /// The first failure's short name (see `commonest_failure`)
    pub failure: Option<String>,
    /// Every check that failed, with what was found
    pub failures: Vec<String>,
}
