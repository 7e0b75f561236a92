//! `eval --queue ROOT`: each trial a queued run for the `agentloop worker`s sharing ROOT — its
//! files seeded into `ROOT/runs/ID/`, the goal enqueued with that id as its key and awaited
//! (`agentloop enqueue --key ID --wait`), and what the run left read there as any trial's. The
//! workers run it with their own configuration and model, so what a trial could only get from
//! this command line (a model, a script, a case's configuration) is refused, not dropped.

use super::suite::{Case, Suite};
use super::EvalArgs;
use agentloop_engine::settings::Global;
use agentloop_types::error::{Error, Result};
use camino::Utf8Path;

/// How a queued trial reaches the workers.
#[derive(Debug, Clone)]
pub struct Queued {
    /// The run id (the request's key), also the trial's folder name under `ROOT/runs/`.
    pub id: String,
    /// `--redis`, when given (else `enqueue` reads AGENTLOOP_REDIS or `queue.redis`).
    pub redis: Option<String>,
}

/// What cannot go through the queue, refused naming the flag or the case and its key.
pub fn refusals(g: &Global, args: &EvalArgs, suite: &Suite) -> Result<()> {
    let why = "a queued trial runs on the workers' configuration and model";
    let flags = [
        ("--models", args.models.is_some()),
        ("--record", args.record.is_some()),
        ("--replay", args.replay.is_some()),
        ("--provider", g.provider.is_some()),
        ("--model", g.model.is_some()),
        ("--base-url", g.base_url.is_some()),
        ("--script", g.script.is_some()),
        ("--skills-dir", !g.skills_dir.is_empty()),
        ("--skills", g.skills.is_some()),
        ("--allowed-tools", g.allowed_tools.is_some()),
    ];
    if let Some((flag, _)) = flags.iter().find(|(_, set)| *set) {
        return Err(Error::usage(format!("{flag} cannot go with --queue: {why}")).with_hint(
            "set it in the workers' root configuration (agentloop.yaml), or run the suite without --queue",
        ));
    }
    if !suite.models.is_empty() {
        return Err(Error::usage(format!("{}: `models` cannot go with --queue: {why}", suite.source)));
    }
    for case in &suite.cases {
        let key = case_key(case);
        if let Some(key) = key {
            return Err(Error::usage(format!(
                "{}: case `{}` sets `{key}`, which cannot go with --queue: {why}",
                suite.source, case.name
            ))
            .with_hint("give the workers' root what the case needs, or run the suite without --queue"));
        }
    }
    Ok(())
}

/// The key of a case that a queued run could not honour.
fn case_key(case: &Case) -> Option<&'static str> {
    match () {
        _ if case.script.is_some() => Some("script"),
        _ if !case.config.is_empty() => Some("config"),
        _ if !case.slots.is_empty() => Some("slots"),
        _ => None,
    }
}

/// A run id for trial `trial` of the `case`-th case (from 0), named `name`, with model
/// `model`: `eval-STAMP-PID-N-NAME-M-T`, unique to this eval (its start, its process, the case's
/// place in the suite), a plain name of at most 64 characters (the worker's limit on a key it
/// takes as it is): the case's name cut to 16 letters, digits and dashes.
pub fn run_id(stamp: &str, case: usize, name: &str, model: usize, trial: u32) -> String {
    let plain: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).take(16).collect();
    let id = format!("eval-{stamp}-{}-{}-{plain}-{}-{trial}", std::process::id(), case + 1, model + 1);
    id.chars().take(64).collect()
}

/// The trial's command line: the user's config (where `queue.redis` may be), the case's agent
/// and budgets as the request's, then `enqueue` for the run id, awaited for the run's timeout
/// and ten minutes more (thirty minutes when none is given).
pub fn argv(g: &Global, case: &Case, q: &Queued, context: Option<&Utf8Path>) -> Vec<String> {
    let mut v: Vec<String> = vec!["--color".into(), "never".into()];
    let mut opt = |flag: &str, value: Option<String>| {
        if let Some(value) = value {
            v.push(flag.into());
            v.push(value);
        }
    };
    opt("--config", g.config.as_ref().map(|p| p.to_string()));
    opt("--agent", case.agent.clone().or_else(|| g.agent.clone()));
    for (flag, value) in case.budget_flags(g) {
        opt(flag, value);
    }
    let timeout = case.timeout.as_deref().or(g.timeout.as_deref());
    let run_secs = timeout.and_then(seconds).unwrap_or(1800);
    v.push("enqueue".into());
    v.extend(["--goal".into(), case.goal.clone(), "--key".into(), q.id.clone()]);
    v.push(format!("--wait={}", run_secs + 600));
    if let Some(r) = &q.redis {
        v.extend(["--redis".into(), r.clone()]);
    }
    if let Some(p) = context {
        v.extend(["--context-file".into(), p.to_string()]);
    }
    v
}

/// A duration as the flags write it (`90`, `90s`, `10m`, `1h`), in seconds.
fn seconds(text: &str) -> Option<u64> {
    let t = text.trim();
    t.parse::<u64>().ok().or_else(|| humantime::parse_duration(t).ok().map(|d| d.as_secs()))
}
