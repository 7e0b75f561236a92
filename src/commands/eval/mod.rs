//! `agentloop eval`: runs a suite of goals with checks over models and trials, each trial a
//! child `agentloop run` in a fresh workspace, and says case by case whether the agent still
//! does its job.

mod checks_de;
mod judge;
mod queued;
mod report;
mod suite;
mod trial;

use agentloop_engine::schema::eval::{EvalReport, EvalTrial};
use agentloop_engine::settings::Global;
use agentloop_io::output::Printer;
use agentloop_types::error::{code, Error, Result};
use camino::{Utf8Path, Utf8PathBuf};
use clap::Args;
use suite::{Model, Suite};
use trial::{Job, Ran};

/// The bundled suites (`--builtin NAME`).
const BUILTIN: &[(&str, &str)] = &[
    ("smoke", include_str!("smoke.yaml")),
    // A suite for each bundled skill that needs no network.
    ("digest", include_str!("digest.yaml")),
    ("critique", include_str!("critique.yaml")),
];

/// Run a suite of goals with checks over models and trials: which cases still pass.
///
/// A suite (YAML) lists cases: a goal, files to seed a fresh workspace with, optional context,
/// agent, config and budgets, and checks on what the run left (its stop, a file's content, its
/// output, steps, tokens, cost). Each case runs --trials times with each model (--models, or the
/// suite's `models:`, else the model the flags and configuration choose), every trial a child
/// `agentloop -w WS run --goal ...` with the global flags given here, in --jobs lanes. The
/// workspaces are kept under --out DIR as CASE/MODEL/TRIAL (beside each, TRIAL.run/ holds its
/// command line, stdout and stderr). The suite format: docs/EVAL.md.
///
/// Prints a table per case and model: pass k/N, the medians of steps, tokens, cost and seconds,
/// and the commonest failure; --json prints one document (docs/schema/eval.json), --junit FILE
/// writes JUnit XML. --record DIR keeps each trial's model answers as DIR/CASE/MODEL/TRIAL.jsonl,
/// and --replay DIR replays them offline with the scripted model. --queue ROOT runs each trial
/// on a fleet instead: seeded into ROOT/runs/ID and enqueued for the `agentloop worker`s sharing
/// ROOT (`enqueue --key ID --wait`), on their configuration and model.
///
/// Exit codes: 0 every case reached its pass rate; 1 a case fell short (stderr names each);
/// 2 a bad suite or flag (the file, line and key named); 12 with --baseline, a case's pass rate
/// fell below the baseline's (stderr names each).
///
/// Examples:
///   agentloop eval digest-suite.yaml --models claude-sonnet-4-5,gpt-4o-mini --trials 3
///   agentloop eval --builtin smoke --provider ollama --model qwen2.5:7b --jobs 2
///   agentloop eval --builtin smoke --print > smoke.yaml
///   agentloop eval suite.yaml --record answers/ && agentloop eval suite.yaml --replay answers/
///   agentloop --json eval suite.yaml --baseline last.json > now.json
///   agentloop eval suite.yaml --queue /srv/agent-runs --redis redis://127.0.0.1:6379 --jobs 8
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct EvalArgs {
    /// The suite file (YAML), or - for stdin.
    #[arg(value_name = "SUITE", required_unless_present = "builtin", conflicts_with = "builtin")]
    pub suite: Option<String>,
    /// A bundled suite instead of a file: smoke (five small goals), digest (the daily-digest
    /// skill over three mornings), critique (the critique skill).
    #[arg(long, value_name = "NAME")]
    pub builtin: Option<String>,
    /// Print the suite's text (with --builtin: the bundled file, to copy) and run nothing.
    #[arg(long)]
    pub print: bool,
    /// Run only these cases (comma-separated names).
    #[arg(long = "case", value_name = "NAMES", value_delimiter = ',')]
    pub cases: Option<Vec<String>>,
    /// Trials per case and model (default: the case's `trials`, the suite's, else 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub trials: Option<u32>,
    /// Trials run at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: u32,
    /// Run the suite with each of these models (comma-separated `--model` values), side by side.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub models: Option<Vec<String>>,
    /// The folder for the trials' workspaces (default: eval/SUITE-TIMESTAMP in this folder).
    #[arg(long, value_name = "DIR")]
    pub out: Option<Utf8PathBuf>,
    /// Also write JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<Utf8PathBuf>,
    /// An earlier `eval --json`: exit 12 when a case's pass rate fell below it.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<Utf8PathBuf>,
    /// Keep each trial's model answers in DIR/CASE/MODEL/TRIAL.jsonl.
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    pub record: Option<Utf8PathBuf>,
    /// Replay the answers --record kept in DIR, offline, with the scripted model.
    #[arg(long, value_name = "DIR")]
    pub replay: Option<Utf8PathBuf>,
    /// Run each trial as a queued run for the `agentloop worker`s sharing ROOT: seeded into
    /// ROOT/runs/ID, enqueued with that id as its key and awaited (on their configuration and model).
    #[arg(long, value_name = "ROOT")]
    pub queue: Option<Utf8PathBuf>,
    /// With --queue: the Redis URL (else AGENTLOOP_REDIS, or `queue.redis` of --config).
    #[arg(long, value_name = "URL", requires = "queue")]
    pub redis: Option<String>,
}

/// The suite's text, where it came from, the folder its relative paths start from, its name.
fn read_suite(args: &EvalArgs) -> Result<(String, String, Utf8PathBuf, String)> {
    let here = Utf8PathBuf::from(".");
    if let Some(name) = &args.builtin {
        let Some((_, text)) = BUILTIN.iter().find(|(n, _)| n == name) else {
            let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
            return Err(Error::usage(format!("--builtin: no bundled suite `{name}`; there are {}", names.join(", "))));
        };
        return Ok((text.to_string(), format!("builtin:{name}"), here, name.clone()));
    }
    let path = args.suite.clone().unwrap_or_default();
    if path == "-" {
        return Ok((agentloop_io::fs::read_arg("-")?, "-".into(), here, "stdin".into()));
    }
    let p = Utf8PathBuf::from(&path);
    let text = agentloop_io::fs::read_optional(&p)?.ok_or_else(|| {
        Error::usage(format!("suite {p} does not exist")).with_hint("give a suite file, or --builtin smoke")
    })?;
    let dir = p.parent().filter(|d| !d.as_str().is_empty()).map_or(here, Utf8Path::to_path_buf);
    let stem = p.file_stem().unwrap_or("suite").to_string();
    Ok((text, path, dir, stem))
}

pub fn run(g: &Global, args: EvalArgs) -> Result<u8> {
    let printer = Printer::new(g.quiet, g.verbose, g.json, g.color);
    let (text, source, dir, stem) = read_suite(&args)?;
    if args.print {
        printer.out(&text);
        return Ok(code::OK);
    }
    let suite = only(suite::parse(&text, &source, &dir, &stem)?, args.cases.as_deref())?;
    // What can refuse the command is checked before anything is written.
    let baseline = args.baseline.as_deref().map(report::read_baseline).transpose()?;
    if args.queue.is_some() {
        queued::refusals(g, &args, &suite)?;
    }
    // Queued trials run on the workers' model: the column names them.
    let models = match args.queue {
        Some(_) => vec![Model { name: Some("workers".into()), provider: None, model: None, base_url: None }],
        None => models(g, &args, &suite),
    };
    let out = out_path(&args, &suite)?;
    let jobs = plan(&args, &suite, &models, &out)?;
    agentloop_io::fs::create_dir_all(&out)?;
    agentloop_tools::interrupt::doing(&format!("eval of {} (its trials kept in {out}/)", suite.name));
    let place = match &args.queue {
        Some(root) => {
            format!("queued for the workers of {root}, their runs in {root}/runs/eval-*; command lines in {out}/")
        }
        None => format!("workspaces in {out}/"),
    };
    printer.info(&format!(
        "eval {}: {} case(s) × {} model(s), {} trial(s) in {} lane(s); {place}",
        suite.name,
        suite.cases.len(),
        models.len(),
        jobs.len(),
        args.jobs
    ));
    let ran = lanes(g, &printer, &suite, &models, &jobs, args.jobs as usize);
    // A signal ended the trials: no verdict on runs that were cut short; the watcher ends `eval`.
    agentloop_tools::interrupt::park_if_interrupted();
    let report = assemble(&suite, &models, &jobs, ran, &out);
    if printer.json {
        printer.json_value(&agentloop_types::json::to_value(&report));
    } else {
        report::table(&printer, &report);
    }
    if let Some(path) = &args.junit {
        agentloop_io::fs::write_atomic(path, report::junit(&report).as_bytes())?;
    }
    printer.info(&match &args.queue {
        Some(root) => format!("runs kept in {root}/runs/ (eval-*), command lines in {out}/"),
        None => format!("trials kept in {out}/ (CASE/MODEL/TRIAL)"),
    });
    finish(&report, baseline.as_ref())
}

/// The suite with only the cases `--case` names, each of which must be one.
fn only(mut suite: Suite, names: Option<&[String]>) -> Result<Suite> {
    let Some(names) = names.filter(|n| !n.is_empty()) else { return Ok(suite) };
    if let Some(n) = names.iter().find(|n| !suite.cases.iter().any(|c| &c.name == *n)) {
        let all: Vec<&str> = suite.cases.iter().map(|c| c.name.as_str()).collect();
        return Err(Error::usage(format!("--case: {} has no case `{n}`; its cases: {}", suite.source, all.join(", "))));
    }
    suite.cases.retain(|c| names.contains(&c.name));
    Ok(suite)
}

/// The exit code, with a stderr line naming each case that fell short or regressed.
fn finish(report: &EvalReport, baseline: Option<&report::Baseline>) -> Result<u8> {
    let short: Vec<String> = report
        .cases
        .iter()
        .filter(|c| !c.ok)
        .map(|c| format!("{} ({}) {}/{} < {}", c.case, c.model, c.passed, c.trials, c.pass_rate))
        .collect();
    if !short.is_empty() {
        agentloop_io::output::stderr_line(&format!("eval: below their pass rate: {}", short.join("; ")));
    }
    // A run that refused every trial (no provider, a bad flag) says why once.
    let mut trials = report.cases.iter().flat_map(|c| &c.results);
    if trials.clone().next().is_some() && trials.all(|t| t.stop.is_none()) {
        if let Some(why) = report.cases.iter().flat_map(|c| &c.results).find_map(|t| t.failures.first()) {
            agentloop_io::output::stderr_line(&format!("eval: no trial ran to a result; the first: {why}"));
        }
    }
    if let Some(b) = baseline {
        let worse = report::regressions(report, b);
        if !worse.is_empty() {
            agentloop_io::output::stderr_line(&format!(
                "eval: worse than the baseline {}: {}",
                b.path,
                worse.join("; ")
            ));
            return Ok(code::CHANGED);
        }
    }
    Ok(if short.is_empty() { code::OK } else { code::FAILURE })
}

/// The models to run: --models, else the suite's, else the one the flags choose (`default`
/// when they name none).
fn models(g: &Global, args: &EvalArgs, suite: &Suite) -> Vec<Model> {
    let ids: Vec<&String> = args.models.iter().flatten().filter(|m| !m.trim().is_empty()).collect();
    match Some(ids).filter(|m| !m.is_empty()) {
        Some(ids) => ids.into_iter().map(|id| Model::named(id.trim())).collect(),
        None if !suite.models.is_empty() => suite.models.clone(),
        None => vec![Model { name: g.model.clone(), provider: None, model: None, base_url: None }],
    }
}

/// --out (which must be empty or new), or a new eval/SUITE-TIMESTAMP here; made once the
/// trials are planned.
fn out_path(args: &EvalArgs, suite: &Suite) -> Result<Utf8PathBuf> {
    if let Some(dir) = &args.out {
        let taken = std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some());
        if taken || (dir.exists() && !dir.is_dir()) {
            return Err(Error::usage(format!("--out {dir} is not empty: each trial needs a fresh workspace"))
                .with_hint("name a new folder, or leave --out out for a new eval/SUITE-TIMESTAMP"));
        }
        return Ok(dir.clone());
    }
    let stamp: String =
        agentloop_types::clock::now_rfc3339().chars().filter(|c| c.is_ascii_digit() || *c == 'T').take(15).collect();
    let base = Utf8PathBuf::from("eval").join(format!("{}-{stamp}", suite.name));
    let mut dir = base.clone();
    let mut n = 1;
    while dir.exists() || dir.is_symlink() {
        n += 1;
        dir = Utf8PathBuf::from(format!("{base}-{n}"));
    }
    Ok(dir)
}

/// Every trial of every case with every model, in the suite's order.
fn plan(args: &EvalArgs, suite: &Suite, models: &[Model], out: &Utf8Path) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    let stamp: String = agentloop_types::clock::now_rfc3339().chars().filter(char::is_ascii_digit).take(14).collect();
    for (ci, case) in suite.cases.iter().enumerate() {
        let n = args.trials.or(case.trials).or(suite.trials).unwrap_or(1);
        for (mi, model) in models.iter().enumerate() {
            for trial in 1..=n {
                let rel = Utf8PathBuf::from(&case.slug).join(model.label());
                let replay = args.replay.as_ref().map(|d| d.join(&rel).join(format!("{trial}.jsonl")));
                // A case with slots has a recording per slot (`TRIAL.SLOT.jsonl`).
                let first = |r: &Utf8PathBuf| match case.slots.first() {
                    Some(s) => trial::slot_recording(r, &s.name),
                    None => r.clone(),
                };
                if let Some(r) = replay.as_ref().map(first).filter(|r| !r.is_file()) {
                    return Err(Error::usage(format!(
                        "--replay: no recording {r} for case `{}` trial {trial}",
                        case.name
                    ))
                    .with_hint("replay with the suite, --models and --trials the recording was made with"));
                }
                let replay = replay.map(|r| agentloop_io::fs::absolute(&r));
                // Queued: the run's folder is the workers', under their root.
                let queued = args.queue.as_ref().map(|_| queued::Queued {
                    id: queued::run_id(&stamp, ci, &case.name, mi, trial),
                    redis: args.redis.clone(),
                });
                let ws = match (&args.queue, &queued) {
                    (Some(root), Some(q)) => agentloop_io::fs::absolute(&root.join("runs").join(&q.id)),
                    _ => out.join(&rel).join(trial.to_string()),
                };
                jobs.push(Job {
                    case: ci,
                    model: mi,
                    trial,
                    queued,
                    ws,
                    side: out.join(&rel).join(format!("{trial}.run")),
                    record: args
                        .record
                        .as_ref()
                        .map(|d| agentloop_io::fs::absolute(&d.join(&rel).join(format!("{trial}.jsonl")))),
                    replay,
                });
            }
        }
    }
    Ok(jobs)
}

/// A trial's run and the checks it failed.
type Judged = (Ran, Vec<judge::Failure>);

/// Runs the jobs in `width` lanes, judging each as it ends; the results in the jobs' order.
fn lanes(g: &Global, p: &Printer, suite: &Suite, models: &[Model], jobs: &[Job], width: usize) -> Vec<Judged> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Judged>>> = std::sync::Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|s| {
        for _ in 0..width.min(jobs.len()).max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { break };
                let case = &suite.cases[job.case];
                let model = &models[job.model];
                let ran = trial::run(g, case, model, job);
                let failed = judge::judge(&case.checks, &job.ws, &ran);
                let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                let verdict = failed.first().map_or("pass".to_string(), |f| format!("fail: {}", f.label));
                p.progress(&format!(
                    "[{n}/{}] {} · {} · trial {}: {verdict}",
                    jobs.len(),
                    case.name,
                    model.label(),
                    job.trial
                ));
                if let Ok(mut r) = results.lock() {
                    r[i] = Some((ran, failed));
                }
            });
        }
    });
    let kept = results.into_inner().unwrap_or_else(|p| p.into_inner());
    // Every job is run once; one that was not (a lane that could not report) fails.
    let not_run = || {
        let label = "not run".to_string();
        (Ran::default(), vec![judge::Failure { detail: "the trial was not run".into(), label }])
    };
    kept.into_iter().map(|k| k.unwrap_or_else(not_run)).collect()
}

/// The report: each case with each model, its trials judged.
fn assemble(suite: &Suite, models: &[Model], jobs: &[Job], ran: Vec<Judged>, out: &Utf8Path) -> EvalReport {
    let mut cases = Vec::new();
    for (ci, case) in suite.cases.iter().enumerate() {
        for (mi, model) in models.iter().enumerate() {
            let trials: Vec<EvalTrial> = jobs
                .iter()
                .zip(&ran)
                .filter(|(j, _)| j.case == ci && j.model == mi)
                .map(|(j, (r, failed))| trial_row(j, r, failed.clone()))
                .collect();
            cases.push(report::row(&case.name, &model.label(), case.pass_rate, trials));
        }
    }
    let passed = cases.iter().all(|c| c.ok);
    let models = report::per_model(&cases);
    EvalReport { suite: suite.name.clone(), source: suite.source.clone(), out: out.to_string(), passed, cases, models }
}

fn trial_row(job: &Job, ran: &Ran, failures: Vec<judge::Failure>) -> EvalTrial {
    let r = ran.result.as_ref();
    EvalTrial {
        trial: job.trial,
        workspace: job.ws.to_string(),
        passed: failures.is_empty(),
        exit_code: ran.exit,
        stop: r.and_then(|r| r["stop"].as_str()).map(str::to_string),
        steps: r.and_then(|r| r["steps_taken"].as_u64()),
        tokens: r.map(judge::tokens),
        cost_usd: r.and_then(|r| r["cost_usd"].as_f64()),
        seconds: (ran.seconds * 1000.0).round() / 1000.0,
        failure: failures.first().map(|f| f.label.clone()),
        failures: failures.into_iter().map(|f| f.detail).collect(),
    }
}
