//! One trial: a fresh workspace seeded with the case's files, and `agentloop -w WS run --goal
//! ...` as a child process of this same binary, with the user's model flags and the case's
//! settings; what it left is read back from result.json.

use super::suite::{Case, Model, Script};
use agentloop_engine::settings::Global;
use agentloop_types::error::{Error, Result};
use camino::{Utf8Path, Utf8PathBuf};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

/// Where one trial runs and what it keeps.
#[derive(Debug, Clone)]
pub struct Job {
    pub case: usize,
    pub model: usize,
    pub trial: u32,
    /// The trial's workspace (`OUT/CASE/MODEL/TRIAL`).
    pub ws: Utf8PathBuf,
    /// Beside it, `TRIAL.run/`: the command line, stdout, stderr, the context and script written.
    pub side: Utf8PathBuf,
    /// `--record DIR`: the file this trial's answers are recorded to.
    pub record: Option<Utf8PathBuf>,
    /// `--replay DIR`: the recording this trial replays.
    pub replay: Option<Utf8PathBuf>,
    /// `--queue ROOT`: the trial is a queued run for the workers (`ws` is under ROOT/runs/).
    pub queued: Option<super::queued::Queued>,
}

/// What a trial's run left.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    pub exit: Option<i32>,
    pub seconds: f64,
    /// result.json, when the run wrote one.
    pub result: Option<Value>,
    /// Why there is no result: the last line of the run's stderr, or why it could not start.
    pub note: String,
    /// The slot whose run did not end done, ending the trial before its later slots.
    pub stopped_at: Option<String>,
}

/// Seeds the workspace and runs the trial; a trial that cannot start is a failed trial.
pub fn run(g: &Global, case: &Case, model: &Model, job: &Job) -> Ran {
    let ran = prepare(case, job).and_then(|extra| match case.slots.is_empty() {
        true => launch(g, case, model, job, &extra, None),
        false => slots(g, case, model, job, extra.context),
    });
    ran.unwrap_or_else(|e| Ran { note: e.message, ..Ran::default() })
}

/// A case with slots: its goal run once per slot, in order, in the one workspace, each slot's
/// files written over what is there first. The first run that does not end done ends the
/// trial; what the trial left is the last run's, its time all of theirs. Each slot keeps its
/// command line and output in `TRIAL.run/slot-NAME/`, and its recording (`--record`) as
/// `TRIAL.SLOT.jsonl`.
fn slots(g: &Global, case: &Case, model: &Model, job: &Job, context: Option<Utf8PathBuf>) -> Result<Ran> {
    let mut seconds = 0.0;
    let mut last = Ran::default();
    for (i, slot) in case.slots.iter().enumerate() {
        for (path, content) in &slot.files {
            agentloop_io::fs::write_in(&job.ws, Utf8Path::new(path), content.as_bytes())?;
        }
        let per_slot = |p: &Utf8PathBuf| slot_recording(p, &slot.name);
        let slot_job = Job {
            side: job.side.join(format!("slot-{}", slot.name)),
            record: job.record.as_ref().map(per_slot),
            replay: job.replay.as_ref().map(per_slot),
            ..job.clone()
        };
        agentloop_io::fs::create_dir_all(&slot_job.side)?;
        let script = script_file(&slot_job, slot.script.as_ref().or(case.script.as_ref()))?;
        let extra = Extra { context: context.clone(), script };
        last = launch(g, case, model, &slot_job, &extra, Some(&slot.name))?;
        seconds += last.seconds;
        if last.exit != Some(0) {
            last.stopped_at = (i + 1 < case.slots.len()).then(|| slot.name.clone());
            break;
        }
    }
    last.seconds = seconds;
    Ok(last)
}

/// The files a trial's command line names besides the workspace: its context and script.
struct Extra {
    context: Option<Utf8PathBuf>,
    script: Option<Utf8PathBuf>,
}

fn prepare(case: &Case, job: &Job) -> Result<Extra> {
    if job.ws.exists() || job.ws.is_symlink() {
        return Err(Error::usage(format!("{} already exists: each trial needs a fresh workspace", job.ws)));
    }
    agentloop_io::fs::create_dir_all(&job.ws)?;
    agentloop_io::fs::create_dir_all(&job.side)?;
    for (path, content) in &case.files {
        agentloop_io::fs::write_in(&job.ws, Utf8Path::new(path), content.as_bytes())?;
    }
    let context = match &case.context {
        Some(text) => {
            let p = job.side.join("context.md");
            agentloop_io::fs::write_atomic(&p, text.as_bytes())?;
            Some(p)
        }
        None => None,
    };
    let script = if case.slots.is_empty() { script_file(job, case.script.as_ref())? } else { None };
    if let Some(r) = &job.record {
        if let Some(parent) = r.parent() {
            agentloop_io::fs::create_dir_all(parent)?;
        }
        // A trial recorded again replaces its earlier recording (--record appends).
        if r.is_file() {
            std::fs::remove_file(r).map_err(|e| Error::io("replace", r, e))?;
        }
    }
    Ok(Extra { context, script })
}

/// A slot's recording beside its trial's (`TRIAL.jsonl` → `TRIAL.SLOT.jsonl`).
pub fn slot_recording(trial: &Utf8Path, slot: &str) -> Utf8PathBuf {
    trial.with_extension(format!("{slot}.jsonl"))
}

/// The scripted model's file for a run: the recording it replays, the suite's file, or the
/// answers written in place, saved beside the trial.
fn script_file(job: &Job, script: Option<&Script>) -> Result<Option<Utf8PathBuf>> {
    Ok(match (&job.replay, script) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(Script::File(p))) => Some(p.clone()),
        (None, Some(Script::Inline(v))) => {
            // JSON is YAML: the scripted model reads it as written.
            let p = job.side.join("script.yaml");
            agentloop_io::fs::write_atomic(&p, agentloop_types::json::to_string_pretty(v).as_bytes())?;
            Some(p)
        }
        (None, None) => None,
    })
}

/// The command line of a trial: the user's global flags, the case's own settings over them.
fn argv(g: &Global, case: &Case, model: &Model, job: &Job, extra: &Extra, slot: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> = vec!["--color".into(), "never".into(), "-w".into(), job.ws.to_string()];
    let mut opt = |flag: &str, value: Option<String>| {
        if let Some(value) = value {
            v.push(flag.into());
            v.push(value);
        }
    };
    opt("--config", g.config.as_ref().map(|p| p.to_string()));
    match &extra.script {
        Some(p) => {
            opt("--provider", Some("scripted".into()));
            opt("--script", Some(p.to_string()));
        }
        None => {
            opt("--provider", model.provider.clone().or_else(|| g.provider.clone()));
            opt("--model", model.model.clone().or_else(|| g.model.clone()));
            opt("--base-url", model.base_url.clone().or_else(|| g.base_url.clone()));
            opt("--script", g.script.as_ref().map(|p| p.to_string()));
        }
    }
    opt("--agent", case.agent.clone().or_else(|| g.agent.clone()));
    for d in &g.skills_dir {
        opt("--skills-dir", Some(d.to_string()));
    }
    opt("--skills", g.skills.as_ref().map(|s| s.join(",")));
    for (flag, value) in case.budget_flags(g) {
        opt(flag, value);
    }
    opt("--allowed-tools", g.allowed_tools.as_ref().map(|s| s.join(",")));
    opt("--record", job.record.as_ref().map(|p| p.to_string()));
    if g.stream {
        v.push("--stream".into());
    }
    if g.verbose {
        v.push("-v".into());
    }
    v.push("run".into());
    v.push("--goal".into());
    v.push(case.goal.clone());
    if let Some(p) = &extra.context {
        v.push("--context".into());
        v.push(p.to_string());
    }
    if let Some(slot) = slot {
        v.push("--slot".into());
        v.push(slot.into());
    }
    v
}

/// The case's configuration as `AGENTLOOP_*` variables (one per top-level key, its value as
/// JSON, which the variables read as YAML): above `--config` and agent profiles, below flags.
fn env_of(case: &Case) -> Vec<(String, String)> {
    case.config
        .iter()
        .map(|(k, v)| (format!("AGENTLOOP_{}", k.to_uppercase()), agentloop_types::json::to_string(v)))
        .collect()
}

fn launch(g: &Global, case: &Case, model: &Model, job: &Job, extra: &Extra, slot: Option<&str>) -> Result<Ran> {
    let exe = std::env::current_exe().map_err(|e| Error::failure(format!("cannot find this program: {e}")))?;
    let args = match &job.queued {
        Some(q) => super::queued::argv(g, case, q, extra.context.as_deref()),
        None => argv(g, case, model, job, extra, slot),
    };
    let shown: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    let env = env_of(case);
    let env_shown: Vec<String> = env.iter().map(|(k, v)| format!("{k}={} ", shell_word(v))).collect();
    agentloop_io::fs::write_atomic(
        &job.side.join("command.sh"),
        format!("{}agentloop {}\n", env_shown.concat(), shown.join(" ")).as_bytes(),
    )?;
    let out_path = job.side.join("stdout.txt");
    let err_path = job.side.join("stderr.txt");
    let out = std::fs::File::create(&out_path).map_err(|e| Error::io("create", &out_path, e))?;
    let err = std::fs::File::create(&err_path).map_err(|e| Error::io("create", &err_path, e))?;
    let watch = agentloop_types::clock::Stopwatch::start();
    // Each trial in a process group of its own, known to the signal watcher: a signal to `eval`
    // (Ctrl-C, a CI job's SIGTERM) ends every trial as it would end a run, then `eval`.
    let mut child = std::process::Command::new(exe)
        .args(&args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| Error::failure(format!("cannot start the trial's run: {e}")))?;
    agentloop_tools::interrupt::register(child.id());
    let status = child.wait();
    agentloop_tools::interrupt::unregister(child.id());
    agentloop_tools::interrupt::park_if_interrupted();
    let status = status.map_err(|e| Error::failure(format!("the trial's run could not be awaited: {e}")))?;
    let seconds = watch.elapsed().as_secs_f64();
    let result =
        agentloop_io::fs::read_optional(&job.ws.join("result.json"))?.and_then(|t| serde_json::from_str(&t).ok());
    let stderr = agentloop_io::fs::read_optional(&err_path)?.unwrap_or_default();
    // The error the run gave, else its last word (how it ended).
    let note = stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .or_else(|| stderr.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("")
        .to_string();
    Ok(Ran { exit: status.code(), seconds, result, note, stopped_at: None })
}

/// A word as a POSIX shell reads it back.
fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
