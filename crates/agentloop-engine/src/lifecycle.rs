//! The run lifecycle as library code: a domain [`Request`] (start with a goal and background,
//! go on, continue with the limits given now, answer) goes in, an [`RequestEnd`] comes out.
//! `agentloop run` and `agentloop answer` are adapters from flags, `serve` one from HTTP
//! requests; event mode drives the same phases one turn at a time.
//!
//! What a request does to the run in the workspace is decided by one pure function,
//! [`decide`]; its [`Course`] carries the state it was decided on, so nothing after it has to
//! look the run up again or assume it is there.

use crate::phases::{self, Env};
use agentloop_config::config::{Config, Resolved};
use agentloop_io::output::Printer;
use agentloop_types::budget::Budget;
use agentloop_types::error::{Error, Result};
use agentloop_types::trace::{Entry, Event, Phase};
use agentloop_workspace::workspace::{Commit, Next, Session, State, Status, StopKind, Workspace};
use serde_json::json;
use std::time::Duration;

/// What a person, a script or a client asks of a workspace's run.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Start a run (a follow-up when the workspace holds an ended run).
    Start(Start),
    /// Go on with the run there: resume one in progress, or say how an ended one ended.
    Go,
    /// Go on with a run that stopped on a budget or a provider failure, or was interrupted;
    /// `archived` names a run under `runs/` to bring back first.
    Continue { archived: Option<String> },
    /// Answer an escalated run's open question and go on.
    Answer(String),
}

/// A new run's goal and background.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub goal: String,
    /// context.md's background, as read (`phases::init::read_context`).
    pub background: String,
    /// Carry the previous run's facts and outcome (a follow-up); false starts afresh.
    pub carry: bool,
    /// Start even when the estimate says the run cannot fit its budget, and run a slot that
    /// already has an ended run again.
    pub force: bool,
    /// The scheduler's slot (e.g. the date): a run for a slot that already has an ended run is
    /// skipped, unless `force`.
    pub slot: Option<String>,
    /// Asked for explicitly as a follow-up (`run --follow-up`). Without it, a carrying start
    /// with no slot whose goal is the ended run's own is a repeat of the command that started
    /// that run: it is reported ([`Course::Repeat`]), never run, so seeing an output again
    /// never pays for a new run.
    pub follow_up: bool,
    /// The named session the run is the next turn of (`run --session NAME`): the session's
    /// earlier turns (each run's goal and what it answered) are the new run's context.
    pub session: Option<String>,
}

/// What a request does to the run there; each variant carries the state it was decided on.
#[derive(Debug, PartialEq)]
pub enum Course {
    /// Start a run. `previous`: the root's run, archived first (`interrupted` when it was still
    /// going); with `start.carry` the new run carries its facts (or, with none at the root, the
    /// newest archived run's).
    Start { start: Start, previous: Option<State>, interrupted: bool },
    /// Go on with the root's run as it is.
    Resume(State),
    /// Bring the archived run `id` back to the root (archiving `current` first), then continue it.
    Restore { id: String, current: Option<State> },
    /// Reopen the root's stopped run and go on.
    Continue(State),
    /// Record the answer to the run's open question and go on.
    Answer(State, String),
    /// Nothing to run: the run ended; say how and how to go on.
    Report(State),
    /// Nothing run: the start repeats the ended run's goal without asking for a follow-up.
    Repeat(State),
}

/// How a request ended.
#[derive(Debug)]
pub enum RequestEnd {
    /// The run went until it stopped: its state and how it stopped.
    Ran { state: State, stop: StopKind },
    /// Nothing was run (a plain `run` on an ended run).
    Ended(State),
    /// Nothing was run: the request's slot already has this run, which ended.
    SlotTaken(State),
    /// Nothing was run: the start repeats this ended run's goal and asked for no follow-up.
    Repeated(State),
}

/// Decides what `req` does, a pure function of the root's run (`existing`) and the request.
pub fn decide(ws: &Workspace, existing: Option<State>, req: &Request) -> Result<Course> {
    if let Request::Continue { archived: Some(id) } = req {
        return Ok(Course::Restore { id: id.clone(), current: existing });
    }
    let Some(s) = existing else {
        return match req {
            Request::Start(st) => Ok(Course::Start { start: st.clone(), previous: None, interrupted: false }),
            Request::Go => {
                Err(Error::usage("the workspace holds no run").with_hint("pass --goal \"...\" to start one"))
            }
            _ => Err(Error::usage("the workspace holds no run to continue or answer")
                .with_hint("start one with --goal \"...\"")),
        };
    };
    if !(s.status.is_terminal() || s.interrupted) {
        return decide_going(ws, s, req);
    }
    match req {
        // An interrupted run never stopped: a plain go resumes it.
        Request::Go if s.interrupted && !s.status.is_terminal() => Ok(Course::Continue(s)),
        // A retry of an interrupted slot goes on with it rather than running the slot again.
        Request::Start(st) if st.slot.is_some() && st.slot == s.slot && s.interrupted => Ok(Course::Continue(s)),
        // The same command again (to see its output, or by habit) is not a paid follow-up: a
        // follow-up with the same goal is asked for with `follow_up`, a new slot or afresh.
        Request::Start(st) if is_repeat(st, &s) => Ok(Course::Repeat(s)),
        Request::Start(st) => Ok(Course::Start { start: st.clone(), previous: Some(s), interrupted: false }),
        Request::Answer(text) => match s.stop {
            Some(StopKind::Escalated) => Ok(Course::Answer(s, text.clone())),
            _ => Err(Error::usage(format!("run {} ended {} and has no question to answer", s.run_id, stop_word(&s)))
                .with_hint(ways_on(ws, &s))),
        },
        Request::Continue { .. } => decide_continue(ws, s),
        Request::Go => Ok(Course::Report(s)),
    }
}

/// Whether `st` repeats the ended run `s`: carrying, no slot, not asked for as a follow-up, and
/// the same goal.
fn is_repeat(st: &Start, s: &State) -> bool {
    st.carry && !st.follow_up && st.slot.is_none() && st.goal.trim() == s.goal.trim()
}

/// [`decide`] for a run still in progress.
fn decide_going(ws: &Workspace, s: State, req: &Request) -> Result<Course> {
    match req {
        Request::Start(st) if !st.carry => {
            Ok(Course::Start { start: st.clone(), previous: Some(s), interrupted: true })
        }
        Request::Start(st) if st.goal.trim() != s.goal.trim() => {
            Err(Error::usage(format!("run {} is still in progress (goal: {}); --goal names another", s.run_id, s.goal))
                .with_hint(format!(
                    "{} resumes it; {} archives it as interrupted and starts the new one",
                    ws.cli("run"),
                    ws.cli("run --new --goal \"...\"")
                )))
        }
        Request::Answer(_) => Err(Error::usage(format!("run {} is in progress and has no open question", s.run_id))
            .with_hint(format!("{} resumes it", ws.cli("run")))),
        _ => Ok(Course::Resume(s)),
    }
}

/// [`decide`] for `--continue` on an ended run.
fn decide_continue(ws: &Workspace, s: State) -> Result<Course> {
    match s.stop {
        Some(k) if k.can_continue() => Ok(Course::Continue(s)),
        _ if s.interrupted => Ok(Course::Continue(s)),
        Some(StopKind::Escalated) => Err(Error::usage(format!(
            "run {} escalated with a question; --continue is for budget and provider stops",
            s.run_id
        ))
        .with_hint(format!("answer it: {}", ws.cli("answer \"...\"")))),
        _ => Err(Error::usage(format!("run {} is done", s.run_id))
            .with_hint("start a follow-up with --goal \"...\" (or a fresh run with --new --goal)")),
    }
}

fn stop_word(s: &State) -> &'static str {
    match s.stop {
        Some(StopKind::Done) => "done",
        Some(StopKind::Budget(_)) => "on a budget",
        Some(StopKind::Provider) => "on a provider failure",
        Some(StopKind::Resting) => "resting",
        Some(StopKind::Escalated) => "escalated",
        None => "interrupted",
    }
}

/// The ways on from an ended run, for people.
pub fn ways_on(ws: &Workspace, s: &State) -> String {
    let mut ways: Vec<String> = way_back(ws, s).into_iter().collect();
    ways.push(format!("{} starts a follow-up that carries its facts", ws.cli("run --goal \"...\"")));
    ways.push(format!("{} starts afresh", ws.cli("run --new --goal \"...\"")));
    ways.join("; ")
}

/// How the run `s` at the workspace's root goes on where it stopped, if it can: `run
/// --continue` after a limit, a provider failure or an interruption, `answer` after an
/// escalation; none for a run that ended done.
pub fn way_back(ws: &Workspace, s: &State) -> Option<String> {
    match s.stop {
        Some(k) if k.can_continue() => Some(continue_way(ws, s, k)),
        Some(StopKind::Escalated) => Some(format!("{} answers its question and goes on", ws.cli("answer \"...\""))),
        _ if s.interrupted => Some(format!("{} goes on", ws.cli("run --continue"))),
        _ => None,
    }
}

/// How `run --continue` goes on from a stop: the flag that raises the limit that ran out (with
/// a value to start from), or what to change after a provider failure.
fn continue_way(ws: &Workspace, s: &State, stop: StopKind) -> String {
    let l = &s.limits;
    let raise = |b: Budget, now: String, more: String| {
        format!(
            "{} goes on with a higher limit ({} is {now} now)",
            ws.cli(&format!("run --continue {} {more}", b.flag())),
            b.key()
        )
    };
    match stop {
        StopKind::Budget(b @ Budget::MaxSteps) => {
            raise(b, l.max_steps.to_string(), (l.max_steps * 2).max(5).to_string())
        }
        StopKind::Budget(b @ Budget::MaxReframes) => {
            raise(b, l.max_reframes.to_string(), (l.max_reframes + 2).to_string())
        }
        StopKind::Budget(b @ Budget::MaxTokens) => {
            let now = l.max_tokens.unwrap_or_default();
            raise(b, now.to_string(), (now * 2).max(1000).to_string())
        }
        StopKind::Budget(b @ Budget::MaxCostUsd) => {
            let now = l.max_cost_usd.unwrap_or_default();
            raise(b, format!("${now:.2}"), format!("{:.2}", (now * 2.0).max(0.01)))
        }
        StopKind::Budget(Budget::Timeout) => format!(
            "{} goes on with a fresh wall-clock limit of {}s ({} for a longer one)",
            ws.cli("run --continue"),
            l.timeout_secs,
            "--timeout 30m"
        ),
        StopKind::Resting => format!(
            "{} goes on once the agent has rested ({} rests it now; else wait for the time `status` names)",
            ws.cli("run --continue"),
            "`agentloop rest`"
        ),
        StopKind::Provider if s.provider_status == Some(404) => format!(
            "{} goes on with a model the provider has (the provider said 404: check the model's name)",
            ws.cli("run --continue --model NAME")
        ),
        _ => format!("{} tries the provider again", ws.cli("run --continue")),
    }
}

/// A limit the run is still over with the limits in force now (`now`), which a continue would
/// stop on again at once: which, and the refusal naming the flag that raises it.
pub fn still_over(ws: &Workspace, s: &State, now: &agentloop_workspace::workspace::Limits) -> Option<(Budget, Error)> {
    let mut raised = s.clone();
    raised.limits = now.clone();
    // The checks the loop itself makes (tokens and cost: `phases::budget_exceeded`).
    let (b, used) = if s.step >= now.max_steps {
        (Budget::MaxSteps, format!("{} of {} steps used", s.step, now.max_steps))
    } else if s.stop == Some(StopKind::Budget(Budget::MaxReframes)) && s.reframes > now.max_reframes {
        (Budget::MaxReframes, format!("{} reframes of at most {}", s.reframes, now.max_reframes))
    } else {
        phases::budget_exceeded(&raised)?
    };
    raised.stop = Some(StopKind::Budget(b));
    Some((
        b,
        Error::usage(format!(
            "run {} would stop again at once: {} is still over ({used}); nothing was changed",
            s.run_id,
            b.key()
        ))
        .with_hint(continue_way(ws, &raised, StopKind::Budget(b))),
    ))
}

/// Where a request runs: the workspace, its resolved configuration, the printer phases use, how
/// long to wait for another process's lock, and whether trace entries stream on stdout.
pub struct Runner<'a> {
    pub ws: &'a Workspace,
    pub resolved: &'a Resolved,
    pub printer: Printer,
    pub wait: Option<Duration>,
    pub events: bool,
    /// Count what the run uses toward the agent's rest window (false for the demo's replay).
    pub ledger: bool,
    /// The agent's own mode switches after the run stops ([`Modes`]).
    pub modes: &'a dyn Modes,
}

impl Runner<'_> {
    fn cfg(&self) -> &Config {
        &self.resolved.config
    }

    /// Carries out `req` and drives the run until it stops. Everything that can refuse it — the
    /// request against the run there, the provider and key, the rest window and, for a new run,
    /// whether it can fit its budget — is checked before any file is written. An existing
    /// folder is locked first (the lock finishes a commit or a move a killed process left); a
    /// new one only once the checks pass (the lock creates it). The lock is released (the
    /// journal checkpointed) before this returns, so printing the outcome never holds it.
    pub fn request(&self, req: &Request) -> Result<RequestEnd> {
        // Locked at once only when there is a run or a journal to finish: a command refused
        // before it starts creates nothing in a folder that holds neither.
        // Asked before anything is made there: only a folder this command creates (or finds
        // empty) is recorded as trusted, never one handed over with files in it.
        let was_new = crate::trust::is_new_folder(&self.ws.root);
        let early = if self.ws.has_run() || self.ws.has_journal() { Some(self.ws.lock(self.wait)?) } else { None };
        // Declared before the environment, which commits through it.
        let session: Session;
        if let Some(s) = self.slot_taken(req) {
            return Ok(RequestEnd::SlotTaken(s));
        }
        let first = decide(self.ws, self.existing()?, req)?;
        match first {
            Course::Report(s) => return Ok(RequestEnd::Ended(s)),
            Course::Repeat(s) => return Ok(RequestEnd::Repeated(s)),
            _ => {}
        }
        self.refuse_stopping_again(&first)?;
        let start = match &first {
            Course::Start { start, .. } => Some(start),
            _ => None,
        };
        let mut env = admit(self.ws, self.cfg(), self.printer, start)?;
        env.events = self.events;
        session = match early {
            Some(l) => l,
            None => {
                let lock = self.ws.lock(self.wait)?;
                // A folder of this command's own making: its config is the user's to write.
                crate::trust::record_created(&self.ws.root, was_new, &self.printer);
                lock
            }
        };
        env.hold(&session);
        // Decided again under the lock: another process may have moved on since the first look.
        if let Some(s) = self.slot_taken(req) {
            return Ok(RequestEnd::SlotTaken(s));
        }
        let decision = decide(self.ws, self.existing()?, req)?;
        self.refuse_stopping_again(&decision)?;
        let started = matches!(decision, Course::Start { .. });
        let mut state = match decision {
            Course::Report(s) => return Ok(RequestEnd::Ended(s)),
            Course::Repeat(s) => return Ok(RequestEnd::Repeated(s)),
            d => self.carry_out(&env, &session, d)?,
        };
        // Known to the signal watcher while it goes on.
        let _running = (!state.status.is_terminal()).then(|| {
            self.printer.progress(&format!("run {} in {}", state.run_id, self.ws.root));
            agentloop_tools::interrupt::run_in(&self.ws.root)
        });
        let stop = go_on(&mut env, &mut state, &self.resolved.sources, started, self.ledger, self.modes)?;
        Ok(RequestEnd::Ran { state, stop })
    }

    /// A continue that would stop again at once on a limit not raised is refused before anything
    /// is written (the trace stays as it was).
    fn refuse_stopping_again(&self, d: &Course) -> Result<()> {
        if let Course::Continue(s) = d {
            let now = s.limits.in_force(self.cfg(), &self.resolved.sources);
            if let Some((_, e)) = still_over(self.ws, s, &now) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// For a start with a slot: the run of the same slot that already ended (the root's or an
    /// archived one), if any. A run of the slot still going is not taken: the start resumes it.
    /// A forced start (`run --slot KEY --force`) runs the slot again: none is taken.
    fn slot_taken(&self, req: &Request) -> Option<State> {
        let Request::Start(Start { slot: Some(slot), force: false, .. }) = req else { return None };
        if !self.ws.root.is_dir() {
            return None;
        }
        agentloop_workspace::history::list(self.ws, &self.cfg().handle.runs_dir, &|m| self.printer.warn(m))
            .into_iter()
            .map(|r| r.state)
            .find(|s| s.slot.as_deref() == Some(slot.as_str()) && s.status.is_terminal())
    }

    /// The root's run, if it holds one.
    fn existing(&self) -> Result<Option<State>> {
        if self.ws.has_run() {
            self.ws.load_state().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Applies a decision under the lock: the state to drive (an ended run's, for a report, is
    /// driven nowhere).
    fn carry_out(&self, env: &Env, session: &Session, d: Course) -> Result<State> {
        match d {
            Course::Report(s) | Course::Repeat(s) | Course::Resume(s) => Ok(s),
            Course::Start { start, previous, interrupted } => self.start(env, session, &start, previous, interrupted),
            Course::Restore { id, current } => {
                self.restore(session, &id, current)?;
                reopen(env, self.ws.load_state()?, None, None)
            }
            Course::Continue(s) => reopen(env, s, None, None),
            Course::Answer(s, text) => reopen(env, s, Some(text), None),
        }
    }

    /// Starts a run, archiving the root's previous one first.
    fn start(
        &self,
        env: &Env,
        session: &Session,
        st: &Start,
        previous: Option<State>,
        interrupted: bool,
    ) -> Result<State> {
        let runs = &self.cfg().handle.runs_dir;
        let carried = if st.carry { carried_for(self.ws, runs, previous.as_ref())? } else { Vec::new() };
        if let Some(mut old) = previous {
            if interrupted {
                old.interrupted = true;
                session.save_state(&old)?;
            }
            let to = agentloop_workspace::history::archive(session, runs, &old)?;
            let shown = to.strip_prefix(&self.ws.root).map(|r| r.to_string()).unwrap_or_else(|_| to.to_string());
            self.printer.info(&format!("run {} moved to {shown}", old.run_id));
        }
        let slot = st.slot.as_deref();
        // Read before the move, from every run of the history: the session's turns so far.
        let background = match &st.session {
            Some(name) => with_conversation(self.ws, runs, name, &st.background),
            None => st.background.clone(),
        };
        let state = phases::init::init_run_carrying(
            session,
            self.cfg(),
            &env.tpl,
            &st.goal,
            &background,
            &carried,
            phases::init::Tags { slot, session: st.session.as_deref(), judged: env.values_judged.as_ref() },
        )?;
        // The event stream starts with the run: its `run.started` entry first.
        if self.events {
            let trace = agentloop_io::fs::read_inside(&self.ws.root, &self.ws.trace())?.unwrap_or_default();
            if let Some(line) = trace.lines().find(|l| l.contains("\"run.started\"")) {
                let _ = self.printer.try_outln(line);
            }
        }
        Ok(state)
    }

    /// Brings the archived run `id` back to the root, archiving the root's own first.
    fn restore(&self, session: &Session, id: &str, current: Option<State>) -> Result<()> {
        let runs = &self.cfg().handle.runs_dir;
        let found = agentloop_workspace::history::find(self.ws, runs, id)?;
        let s = found.load_state()?;
        // The run named is refused as `--continue` refuses the current one (a done run stays
        // done: reopening it would overwrite its result), before anything is moved.
        decide_continue(self.ws, s.clone())?;
        if found.root == self.ws.root {
            return Ok(());
        }
        if let Some(cur) = &current {
            if !cur.status.is_terminal() && !cur.interrupted {
                return Err(Error::usage(format!("run {} is in progress here", cur.run_id))
                    .with_hint("finish it first, or archive it with `run --new --goal ...`"));
            }
            agentloop_workspace::history::archive(session, runs, cur)?;
        }
        agentloop_workspace::history::restore(session, runs, &s.run_id)
    }
}

/// Characters of each message, and of the whole conversation, shown to a session's next turn
/// (the newest turns kept): the conversation stays a bounded part of context.md, which the
/// prompt shows up to 20,000 characters of, however long the session runs.
const SESSION_MESSAGE_CHARS: usize = 2000;
const SESSION_CHARS: usize = 12_000;

/// `background` with the conversation of the session `name` so far appended: each earlier run
/// of the session that ended (the root's or archived), oldest first, as the message it was
/// given and what it answered.
pub fn with_conversation(ws: &Workspace, runs: &str, name: &str, background: &str) -> String {
    let mut turns: Vec<State> = agentloop_workspace::history::list(ws, runs, &|_| {})
        .into_iter()
        .map(|r| r.state)
        .filter(|s| s.session.as_deref() == Some(name) && s.status.is_terminal())
        .collect();
    turns.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.run_id.cmp(&b.run_id)));
    if turns.is_empty() {
        return background.to_string();
    }
    // A message or an answer is text: none of its lines makes a heading or a fence here.
    let cut = |t: &str| -> String {
        let t = t.trim();
        agentloop_workspace::md_text::prose(&match t.char_indices().nth(SESSION_MESSAGE_CHARS) {
            Some((i, _)) => format!("{} […]", &t[..i]),
            None => t.to_string(),
        })
    };
    let shown: Vec<String> = turns
        .iter()
        .map(|s| {
            let answer = match (&s.outcome, s.status) {
                (Some(o), Status::Done) => cut(o),
                _ => {
                    let q = s.open_question.as_ref().map(|q| format!(" Open question: {}", cut(q))).unwrap_or_default();
                    format!("(ended {}: {}){q}", s.status.as_str(), cut(s.reason.as_deref().unwrap_or_default()))
                }
            };
            let output = s.output.as_ref().map(|o| format!("\nOutput: {}", cut(&o.to_string()))).unwrap_or_default();
            format!("\n**User** (run {}): {}\n\n**Agent**: {answer}{output}\n", s.run_id, cut(&s.goal))
        })
        .collect();
    // The newest turns that fit, always the last one.
    let (mut keep, mut size) = (0, 0);
    for t in shown.iter().rev() {
        if keep > 0 && size + t.len() > SESSION_CHARS {
            break;
        }
        size += t.len();
        keep += 1;
    }
    let skipped = shown.len() - keep;
    let mut text = format!(
        "## Session `{name}`: the conversation so far\n\nThis run is the next turn of the session: the messages below were given to its earlier runs, each followed by what that run answered. The goal is the new message.\n"
    );
    if skipped > 0 {
        text.push_str(&format!("\n({skipped} earlier turns not shown)\n"));
    }
    for t in &shown[skipped..] {
        text.push_str(t);
    }
    if background.trim().is_empty() {
        text
    } else {
        // Formatted as on its own first (a JSON background stays a fenced block).
        format!("{}\n\n{text}", phases::init::format_background(background))
    }
}

/// The facts a follow-up of `previous` (the root's ended run) carries; with none at the root (a
/// pruned or recovered history), the newest archived run that ended is carried.
pub fn carried_for(ws: &Workspace, runs: &str, previous: Option<&State>) -> Result<Vec<String>> {
    match previous {
        Some(old) => carried_facts(ws, old),
        None => match newest_ended(ws, runs) {
            Some(r) => carried_facts(&r.ws, &r.state),
            None => Ok(Vec::new()),
        },
    }
}

/// The newest archived run that ended.
fn newest_ended(ws: &Workspace, runs: &str) -> Option<agentloop_workspace::history::Run> {
    agentloop_workspace::history::list(ws, runs, &|_| {})
        .into_iter()
        .filter(|r| !r.current && r.state.status.is_terminal())
        .max_by(|a, b| a.state.started_at.cmp(&b.state.started_at).then(a.state.run_id.cmp(&b.state.run_id)))
}

/// The one admission of a run, whichever door asks (`run`, `serve`, the worker, `handle`),
/// before anything of it is written: the provider and its key (a model that cannot be built is
/// refused here, never as a run left at step 0), the agent's rest (stress or a full usage
/// window), and for a new run (`start`) the negotiation ([`check_fits`]). `ws` is where the run
/// lives or will live (it need not exist yet). Returns the phase environment to drive it with.
pub fn admit<'a>(ws: &'a Workspace, cfg: &'a Config, printer: Printer, start: Option<&Start>) -> Result<Env<'a>> {
    let model = agentloop_model::model::from_config(cfg, &ws.root)?;
    agentloop_workspace::rest_window::check(cfg, &ws.root)?;
    let mut env = Env::with(ws, cfg, printer)?;
    if let Some(start) = start {
        env.values_judged = check_fits(&env, model.model(), start)?;
    }
    Ok(env)
}

/// Refuses a new run whose smallest course cannot fit `max_tokens` / `max_cost_usd`, whose
/// cost cap cannot be counted, whose agent is too tired (fatigue above `rest.max_fatigue`), or
/// whose task conflicts with the agent's values (never forced) — negotiation, before anything is written; with `start.force` the refusal is a warning and
/// the run starts. The refusal says why in words; `run --dry-run --json` gives the seed's answer
/// (canProceed, reason, estimatedCost, currentBudget, currentFatigue). Returns the model's
/// verdict on the task against the agent's values, when it was asked (`values_check: model`).
pub fn check_fits(env: &Env, model: &str, start: &Start) -> Result<Option<phases::values::Verdict>> {
    check_model_name(env.cfg, model)?;
    let limits = agentloop_workspace::workspace::Limits::from_config(env.cfg);
    let est = phases::negotiate::estimate(env, model, &start.goal, &start.background, &limits)?;
    let window = agentloop_workspace::rest_window::current(env.cfg);
    let values = phases::values::check_with(env.cfg, &env.ws.root, &start.goal, &start.background)?;
    let n = phases::negotiate::negotiate(&est, &limits, window.as_ref(), values);
    // A log a person reads: an unknown price or an unset limit is said in words.
    let usd = |c: Option<f64>| c.map_or_else(|| "price unknown".to_string(), |c| format!("${c:.4}"));
    let or_none = |v: Option<String>| v.unwrap_or_else(|| "none".to_string());
    agentloop_io::log::info(&format!(
        "negotiation: smallest run ~{} tokens ({}), {} steps ~{} tokens ({}); limits: tokens {}, cost {}; fatigue {}",
        est.min_tokens,
        usd(est.min_cost_usd),
        est.max_steps,
        est.max_tokens,
        usd(est.max_cost_usd),
        or_none(limits.max_tokens.map(|t| t.to_string())),
        or_none(limits.max_cost_usd.map(|c| format!("${c:.2}"))),
        or_none(n.current_fatigue.map(|f| format!("{f}%"))),
    ));
    if let Some(c) = &n.values.conflict {
        return Err(phases::values::declined(c, Some(serde_json::json!(n))));
    }
    match &n.reason {
        None => Ok(n.values.judged),
        Some(why) if start.force => {
            env.printer.warn(&format!("starting anyway (--force): {why}"));
            Ok(n.values.judged)
        }
        Some(why) => Err(phases::negotiate::refused(&est, &limits, window.as_ref(), why)),
    }
}

/// Refuses a hosted provider's model name that is a near miss of a model agentloop knows (a
/// typo would otherwise surface as a 404 after the run was created). Local servers (Ollama, a
/// `base_url` of one's own) take any name, so they are not checked; a `prices:` entry for the
/// name makes it known.
fn check_model_name(cfg: &Config, model: &str) -> Result<()> {
    let hosted = match agentloop_model::model::resolve_provider(cfg)? {
        agentloop_config::config::Provider::Anthropic => true,
        agentloop_config::config::Provider::Openai => {
            cfg.llm.base_url.as_deref().is_none_or(|u| u.contains("api.openai.com"))
        }
        _ => false,
    };
    let Some(known) = hosted.then(|| agentloop_model::model::pricing::likely_typo(model, &cfg.prices)).flatten() else {
        return Ok(());
    };
    Err(Error::usage(format!("model `{model}` looks like a mistyping of `{known}`; nothing was started")).with_hint(
        format!("fix --model (or llm.model); if `{model}` is a real model, add it under `prices:` in agentloop.yaml"),
    ))
}

/// What the agent does itself once a run stopped (`modes.auto`: it rests when the run left it
/// tired or stressed). The binary holds what resting does; every door passes it to [`go_on`],
/// so a run ended by `run`, `serve`, the worker or `handle` is followed by the same rest.
pub trait Modes: Sync {
    /// After a run stopped, its lock still held by `env` (a mode switch commits through it).
    fn after_stop(&self, env: &Env, state: &State);
}

/// Goes on with a run (`env` holds its lock's session) until it stops: the limits given now apply
/// (`sources` says which were given), the loop runs, and what this invocation used counts
/// toward the agent's rest window (with `ledger`), even when it failed; a run that stopped is
/// followed by the agent's own mode switches (`modes`). `started`: the run is new.
pub fn go_on(
    env: &mut Env,
    state: &mut State,
    sources: &agentloop_config::config::Sources,
    started: bool,
    ledger: bool,
    modes: &dyn Modes,
) -> Result<StopKind> {
    let how = Drive { started, ledger, modes, door: &mut phases::run::Here, traced: true };
    match drive_on(env, state, sources, how)? {
        phases::run::Driven::Stopped(k) => Ok(k),
        phases::run::Driven::Waiting(p) => Err(Error::failure(format!(
            "run {}: step {} waits for tool `{}`, which no process here runs",
            state.run_id, p.step, p.tool
        ))),
    }
}

/// How [`drive_on`] drives: whether the run is new, whether its usage counts toward the rest
/// window, the agent's mode switches, and the door's part of the loop.
pub struct Drive<'d> {
    pub started: bool,
    pub ledger: bool,
    pub modes: &'d dyn Modes,
    pub door: &'d mut dyn phases::run::Door,
    /// Drive inside a run span of its own (false: the door holds one around the whole turn, as
    /// event mode does, whose turn records a tool's result before it drives).
    pub traced: bool,
}

/// This invocation's wall-clock limit: the run's recorded `timeout` (the one given now when
/// `refresh_limits` took it), to the configuration's precision when the two agree.
fn wall_clock(cfg: &Config, state: &State) -> Duration {
    if cfg.timeout.0.as_secs() == state.limits.timeout_secs {
        cfg.timeout.0
    } else {
        Duration::from_secs(state.limits.timeout_secs)
    }
}

/// [`go_on`] for every door: the one loop ([`phases::run::drive`]) inside the run's span, with
/// the limits given now, the ledger and the mode switches; the drive may end waiting for a tool
/// the door hands off (event mode).
pub fn drive_on(
    env: &mut Env,
    state: &mut State,
    sources: &agentloop_config::config::Sources,
    how: Drive,
) -> Result<phases::run::Driven> {
    phases::refresh_limits(env, state, sources)?;
    let (tokens0, cost0) = (state.usage.total(), state.cost_usd);
    env.ledger_base = how.ledger.then_some((tokens0, cost0));
    let span = how.traced.then(|| {
        agentloop_model::model::traced::run_span(
            env.cfg,
            &state.run_id,
            state.agent.as_deref(),
            &mut state.trace_parent,
        )
    });
    let driven = phases::run::drive(env, state, wall_clock(env.cfg, state), how.door);
    if let Some(span) = span {
        span.ended(driven.as_ref().map(|d| d.as_str()));
    }
    let used = state.usage.total().saturating_sub(tokens0);
    let cost = (state.cost_usd - cost0).max(0.0);
    if !how.ledger {
        return driven;
    }
    if let Err(e) = agentloop_workspace::rest_window::record(env.cfg, &state.run_id, used, cost, how.started) {
        env.printer.warn(&format!("usage ledger: {e}"));
    }
    if state.status.is_terminal() {
        how.modes.after_stop(env, state);
    }
    driven
}

/// Reopens a stopped run for `req` — an answer to its question, or a continue — without driving
/// it (`env` holds its lock's session; [`go_on`] drives it later). What the run's state does not
/// allow is refused as [`decide`] refuses it; a start or a plain go is not a reopening.
pub fn reopen_for(env: &Env, state: State, req: &Request) -> Result<State> {
    reopen_keyed(env, state, req, None)
}

/// [`reopen_for`] on behalf of a request with an idempotency key (a queued answer or continue):
/// the `run.answered` / `run.continued` entry records it as `key`, in the commit that reopens
/// the run, so [`reopened_by`] knows the request was applied whatever happens after.
pub fn reopen_keyed(env: &Env, state: State, req: &Request, key: Option<&str>) -> Result<State> {
    if !state.status.is_terminal() && !state.interrupted {
        return Err(Error::usage(format!("run {} is still in progress", state.run_id)));
    }
    match (decide(env.ws, Some(state), req)?, req) {
        (Course::Answer(s, text), _) => reopen(env, s, Some(text), key),
        (Course::Continue(s), Request::Continue { archived: None }) => reopen(env, s, None, key),
        (other, _) => Err(Error::failure(format!("internal error: {req:?} was decided as {other:?}"))),
    }
}

/// Whether the run in `ws` was reopened by the request with idempotency key `key` (its trace's
/// `run.answered` or `run.continued` entry names it).
pub fn reopened_by(ws: &Workspace, key: &str) -> Result<bool> {
    let mut found = false;
    let quoted = agentloop_types::json::to_string(&key);
    let (answered, continued) = (Event::RunAnswered.quoted(), Event::RunContinued.quoted());
    let wanted = |l: &str| l.contains(&quoted) && (l.contains(&answered) || l.contains(&continued));
    agentloop_types::trace::scan_where(&ws.trace(), wanted, |e| {
        if let Some(Ok(e)) = e {
            let reopening = e.event.reopens();
            found |= reopening && e.data.as_ref().and_then(|d| d["key"].as_str()) == Some(key);
        }
    })?;
    Ok(found)
}

/// The previous run's learned facts and outcome, each with the run it came from (bounded: the
/// newest 20).
fn carried_facts(ws: &Workspace, old: &State) -> Result<Vec<String>> {
    let path = ws.memory();
    let text = agentloop_io::fs::read_optional(&path)?.unwrap_or_default();
    let mem = if text.trim().is_empty() {
        agentloop_workspace::markdown::Memory::default()
    } else {
        agentloop_workspace::markdown::parse_memory(&text, &path)?
    };
    let tag = format!("(from run {})", old.run_id);
    let mut facts: Vec<String> = mem
        .facts
        .iter()
        .filter(|f| !f.starts_with('(') || !f.contains("earlier facts"))
        .map(|f| if f.contains("(from run ") { f.clone() } else { format!("{f} {tag}") })
        .collect();
    let outcome = match (&old.outcome, old.status) {
        (Some(o), Status::Done) => format!("Run {} ({}) ended done: {}", old.run_id, old.goal, o.trim()),
        _ => format!(
            "Run {} ({}) ended {}: {}",
            old.run_id,
            old.goal,
            old.status.as_str(),
            old.reason.clone().unwrap_or_default()
        ),
    };
    facts.push(outcome.chars().take(600).collect());
    // 20 lines at most, but a person's answer is never dropped: it cannot be learned again.
    Ok(agentloop_workspace::facts::capped_keeping_answers(facts, 20))
}

/// Reopens an ended (or interrupted) run: the trace records why (`run.continued` with the
/// limits in force, or `run.answered` with the question and answer) and the run goes on where
/// it stopped — from Frame when it could not proceed at framing, else from Plan.
fn reopen(env: &Env, mut s: State, answer: Option<String>, key: Option<&str>) -> Result<State> {
    let event = if answer.is_some() { Event::RunAnswered } else { Event::RunContinued };
    let mut commit = Commit::default();
    let mut e = Entry::new(&s.run_id, s.step, Phase::Run, event);
    let resume = match s.resume_at {
        // An interrupted run never stopped: it goes on where it was.
        _ if !s.status.is_terminal() => s.next,
        Some(Next::Frame) => Next::Frame,
        Some(n) if answer.is_none() && n != Next::Finish && n != Next::None => n,
        _ => Next::Plan,
    };
    match &answer {
        Some(text) => e.data = Some(record_answer(env, &mut s, &mut commit, text, resume)?),
        None => e.data = Some(json!({"after": s.stop, "reason": s.reason, "limits": s.limits})),
    }
    if let (Some(key), Some(data)) = (key, e.data.as_mut()) {
        data["key"] = json!(key);
    }
    e.reason = s.reason.clone();
    s.status = Status::Running;
    s.next = resume;
    s.stop = None;
    s.reason = None;
    s.provider_status = None;
    s.finished_at = None;
    s.open_question = None;
    s.interrupted = false;
    s.resume_at = None;
    commit.entry(&e);
    commit.state = Some(s.clone());
    env.commit(&commit)?;
    // result.json describes an ended run; the reopened run writes it again when it ends.
    let _ = std::fs::remove_file(env.ws.result());
    Ok(s)
}

/// Puts a person's answer into memory.md and decisions.md (in `commit`) and clears the counters
/// that led to the escalation; returns the trace entry's data.
fn record_answer(env: &Env, s: &mut State, commit: &mut Commit, text: &str, resume: Next) -> Result<serde_json::Value> {
    let (_, mut mem) = env.read_memory()?;
    let q = s.open_question.clone().unwrap_or_else(|| s.reason.clone().unwrap_or_default());
    mem.facts.push(format!("A person answered \"{}\": {text} (step {})", q.trim(), s.step));
    mem.open_question = None;
    mem.log.push(format!("step {} answered: {}", s.step, text.chars().take(160).collect::<String>()));
    mem.status = format!("answered; going on from {}", if resume == Next::Frame { "frame" } else { "plan" });
    commit.file("memory.md", env.render_memory(&mem)?);
    commit.file(
        "decisions.md",
        env.decisions_with(s.step, "answer", "A person answered", &format!("Question: {q}\n\nAnswer: {text}\n"))?,
    );
    s.done_refusals = 0;
    s.consecutive_failures = 0;
    s.repeats = 0;
    s.last_action = None;
    // A reframe is the way to act on an answer given at framing.
    if resume == Next::Frame {
        s.reframe_reason = Some(format!("a person's answer to the open question: {text}"));
    }
    Ok(json!({"question": q, "answer": text}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(status: Status, stop: Option<StopKind>) -> State {
        let mut s: State = serde_json::from_value(json!({
            "schema_version": 1, "run_id": "R1", "goal": "g", "status": "running", "next": "plan", "step": 0, "reframes": 0,
            "started_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "limits": {"max_steps": 1, "max_reframes": 1, "timeout_secs": 1, "max_tokens": null, "max_cost_usd": null}
        }))
        .unwrap();
        s.status = status;
        s.stop = stop;
        s
    }

    fn start(goal: &str, carry: bool) -> Request {
        Request::Start(Start {
            goal: goal.into(),
            background: String::new(),
            carry,
            force: false,
            slot: None,
            follow_up: false,
            session: None,
        })
    }

    #[test]
    fn the_way_on_names_the_flag_for_each_stop() {
        let ws = Workspace::new("/nonexistent/ws");
        let mut s = state(Status::Escalated, None);
        s.limits.max_tokens = Some(1000);
        s.limits.max_cost_usd = Some(0.5);
        for (stop, want) in [
            (StopKind::Budget(Budget::MaxSteps), "run --continue --max-steps 5`"),
            (StopKind::Budget(Budget::MaxReframes), "run --continue --max-reframes 3`"),
            (StopKind::Budget(Budget::MaxTokens), "run --continue --max-tokens 2000`"),
            (StopKind::Budget(Budget::MaxCostUsd), "run --continue --max-cost 1.00`"),
            (StopKind::Budget(Budget::Timeout), "--timeout 30m"),
            (StopKind::Provider, "run --continue` tries the provider again"),
            (StopKind::Escalated, "answer \"...\"` answers its question"),
        ] {
            s.stop = Some(stop);
            let ways = ways_on(&ws, &s);
            assert!(ways.contains(want), "{stop:?}: {ways}");
        }
        s.stop = Some(StopKind::Provider);
        // The status recorded when the provider failed decides, not the reason's words.
        s.reason = Some("provider failure in frame: HTTP 404 (not_found_error): model: claude-x".into());
        assert!(ways_on(&ws, &s).contains("tries the provider again"), "{}", ways_on(&ws, &s));
        s.provider_status = Some(404);
        s.reason = Some("provider failure in frame: no such model".into());
        assert!(ways_on(&ws, &s).contains("run --continue --model NAME`"), "{}", ways_on(&ws, &s));
    }

    #[test]
    fn decisions_carry_the_state_they_were_made_on() {
        let ws = Workspace::new("/nonexistent/ws");
        let ended = || state(Status::Escalated, Some(StopKind::Escalated));
        assert!(matches!(decide(&ws, Some(ended()), &Request::Go).unwrap(), Course::Report(s) if s.run_id == "R1"));
        assert!(matches!(
            decide(&ws, Some(ended()), &Request::Answer("yes".into())).unwrap(),
            Course::Answer(s, t) if s.run_id == "R1" && t == "yes"
        ));
        assert!(matches!(
            decide(&ws, Some(ended()), &start("h", true)).unwrap(),
            Course::Start { previous: Some(_), interrupted: false, .. }
        ));
        // The ended run's own goal again is a repeat unless asked for as a follow-up or afresh.
        assert!(
            matches!(decide(&ws, Some(ended()), &start("g", true)).unwrap(), Course::Repeat(s) if s.run_id == "R1")
        );
        assert!(matches!(decide(&ws, Some(ended()), &start("g", false)).unwrap(), Course::Start { .. }));
        let mut again = start("g", true);
        if let Request::Start(st) = &mut again {
            st.follow_up = true;
        }
        assert!(matches!(decide(&ws, Some(ended()), &again).unwrap(), Course::Start { .. }));
        let going = || state(Status::Running, None);
        assert!(matches!(decide(&ws, Some(going()), &Request::Go).unwrap(), Course::Resume(_)));
        assert!(matches!(decide(&ws, Some(going()), &start("g", true)).unwrap(), Course::Resume(_)));
        assert!(decide(&ws, Some(going()), &start("other", true)).is_err());
        assert!(matches!(
            decide(&ws, Some(going()), &start("other", false)).unwrap(),
            Course::Start { interrupted: true, .. }
        ));
        let budget = state(Status::Escalated, Some(StopKind::Budget(Budget::MaxSteps)));
        assert!(matches!(
            decide(&ws, Some(budget), &Request::Continue { archived: None }).unwrap(),
            Course::Continue(_)
        ));
        let done = state(Status::Done, Some(StopKind::Done));
        assert!(decide(&ws, Some(done), &Request::Continue { archived: None }).is_err());
        // A retry of an interrupted slot goes on with it; another slot starts anew.
        let mut cut = state(Status::Running, None);
        cut.interrupted = true;
        cut.slot = Some("2026-01-01".into());
        let slotted = |slot: &str| {
            Request::Start(Start {
                goal: "g".into(),
                background: String::new(),
                carry: true,
                force: false,
                slot: Some(slot.into()),
                follow_up: false,
                session: None,
            })
        };
        assert!(matches!(decide(&ws, Some(cut.clone()), &slotted("2026-01-01")).unwrap(), Course::Continue(_)));
        assert!(matches!(decide(&ws, Some(cut), &slotted("2026-01-02")).unwrap(), Course::Start { .. }));
        assert!(decide(&ws, None, &Request::Go).is_err());
        assert!(decide(&ws, None, &Request::Answer("x".into())).is_err());
    }
}
