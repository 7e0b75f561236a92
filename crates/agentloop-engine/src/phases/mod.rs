//! The phases of the loop and what they share: the phase environment, the structured model
//! call with one corrective retry, budget checks and the finish step.
//!
//! Every phase reads the workspace, decides, and applies all its effects through one
//! [`Commit`], the last thing it does; so a phase killed part-way has no effect and is simply
//! run again, and a committed phase is never applied twice.

pub mod act;
pub mod ask;
pub mod frame;
pub mod frustration;
pub mod fused;
pub mod init;
pub mod live;
pub mod negotiate;
pub mod plan;
pub mod reflect;
pub mod run;
pub mod values;

pub use ask::{account, ask, ask_checked, fail_phase, Answer, AskError, Refused};

use crate::settings::Ctx;
use agentloop_config::config::Config;
use agentloop_io::output::Printer;
use agentloop_model::model::{self, Model};
use agentloop_tools::skills::SkillSet;
use agentloop_tools::tools::Registry;
use agentloop_types::budget::Budget;
use agentloop_types::error::Result;
use agentloop_types::trace::{Entry, Event, Phase};
use agentloop_workspace::markdown::{self, Memory, Plan};
use agentloop_workspace::prompt::Templates;
use agentloop_workspace::workspace::{Commit, Next, Session, State, Status, StopKind, Workspace};
use serde_json::{json, Value};

/// The templates for a workspace: built-ins, overridden from `templates_dir` (default
/// `<workspace>/templates`).
/// Overrides inside the workspace are read only from inside it, whoever named the folder: a
/// `templates/` that is a link to a folder elsewhere is refused, not read into a prompt.
pub fn templates(ws: &Workspace, cfg: &Config) -> Result<Templates> {
    let (dir, within) = match &cfg.templates_dir {
        Some(d) => match agentloop_io::fs::in_workspace(&ws.root, d) {
            Some(rel) => (ws.root.join(rel), ws.root.clone()),
            // Trusted configuration may name a folder elsewhere: links stay inside that one.
            None => {
                let dir = agentloop_io::fs::resolve_in(&ws.root, d);
                (dir.clone(), dir)
            }
        },
        None => (ws.root.join("templates"), ws.root.clone()),
    };
    Templates::load_within(Some(&dir), &within)
}

/// What a phase needs: the workspace, config, templates, tools, skills and (lazily) a model.
pub struct Env<'a> {
    pub ws: &'a Workspace,
    /// The workspace lock's session, through which commits go (see [`Env::hold`]); None for a
    /// read-only environment.
    session: Option<&'a Session>,
    pub cfg: &'a Config,
    pub tpl: Templates,
    pub registry: Registry,
    pub skills: SkillSet,
    pub printer: Printer,
    /// Stream committed trace entries as JSONL on stdout (`run --events`).
    pub events: bool,
    /// Keep the trace lines this environment commits in `committed` (single-phase commands).
    pub keep_committed: bool,
    pub committed: std::cell::RefCell<Vec<String>>,
    /// transcript.md sections not yet committed (model calls, tool calls); the next commit
    /// appends them, so the transcript is exactly as durable as the phase it records.
    pub transcript: std::cell::RefCell<Vec<String>>,
    /// End of the run's wall-clock budget (set by `run`), passed to every model call.
    pub deadline: Option<std::time::Instant>,
    /// When this invocation began driving the run, and the run's elapsed time then (set by
    /// `run`): `state.elapsed_ms` is brought up to date from it at every step and at the end.
    pub clock: Option<(std::time::Instant, u64)>,
    /// A provider failure (after the model client's own retries) leaves the run where it was
    /// and returns the error instead of ending the run: event mode answers it as retryable, so
    /// the router retries the job, and the redelivered event picks the run up at that phase.
    pub provider_failure_resumable: bool,
    /// What the run had used (tokens, USD) when this invocation began driving it, set when its
    /// usage counts toward the agent's rest window: the usage since then is not in the ledger
    /// yet, so the loop adds it when it asks whether the window filled ([`run::drive`]).
    pub ledger_base: Option<(u64, f64)>,
    model: Option<Box<dyn Model>>,
    /// Plan's answer tool: its schema depends only on the tools allowed, which are fixed for
    /// the environment's life, so it is built once.
    plan_tool: std::cell::OnceCell<agentloop_model::model::ToolDef>,
    /// The catalog, for the same reason.
    catalog: std::cell::OnceCell<String>,
    /// The catalog as the shared system message shows it ([`Env::prompt_catalog`]), chosen
    /// once so every call sends the same one.
    prompt_catalog: std::cell::OnceCell<String>,
    /// The answer tool whose schema never changes in a run and that every Plan and Reflect call
    /// sends first (plan's; [`Env::answer_tools`]).
    fixed_tools: std::cell::OnceCell<Vec<agentloop_model::model::ToolDef>>,
    /// Reflect's answer tool for the Definition of Done's length, as the other phases send it.
    reflect_tool: std::cell::RefCell<Option<(usize, agentloop_model::model::ToolDef)>>,
    /// Whether Plan has compared skills.md with the catalog (once per environment).
    skills_checked: std::cell::Cell<bool>,
    /// The fused answer tool for the Definition of Done's length ([`fused`]), kept with its
    /// compiled validator.
    fused_tool: std::cell::RefCell<Option<(usize, agentloop_model::model::ToolDef)>>,
    /// This environment drives a run, whose Reflect and next Plan may share one call
    /// ([`fused`], as `llm.fuse_phases` says: [`Env::fuses`]): set by [`run::drive`] and event
    /// mode, so the single-phase commands stay as they are.
    pub fuse: bool,
    /// The model's verdict on the task against the agent's values, when admission asked it
    /// (`values_check: model`; [`crate::lifecycle::admit`]): a new run records it in its
    /// `run.started` entry, the negotiation's record of why the task was taken.
    pub values_judged: Option<values::Verdict>,
}

/// How a phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseEnd {
    /// The run goes on; state.next says where.
    Next,
    /// The run is over.
    Stopped(StopKind),
    /// Act ran and the tool reported an error (the run goes on to Reflect).
    ToolFailed,
}

impl<'a> Env<'a> {
    pub fn new(ctx: &'a Ctx) -> Result<Self> {
        Self::with(&ctx.ws, ctx.config(), ctx.printer)
    }

    /// For read-only commands (`run --dry-run`): tool lists from caches only, no program
    /// started, nothing sent.
    pub fn read_only(ctx: &'a Ctx) -> Result<Self> {
        Self::reaching(&ctx.ws, ctx.config(), ctx.printer, agentloop_tools::tools::Reach::CachesOnly)
    }

    /// For event mode, where the workspace and config are built per run.
    pub fn with(ws: &'a Workspace, cfg: &'a Config, printer: Printer) -> Result<Self> {
        Self::reaching(ws, cfg, printer, agentloop_tools::tools::Reach::Start)
    }

    fn reaching(
        ws: &'a Workspace,
        cfg: &'a Config,
        printer: Printer,
        reach: agentloop_tools::tools::Reach,
    ) -> Result<Self> {
        let skills = SkillSet::load(cfg, &ws.root);
        if let Some(only) = &cfg.skills.only {
            let missing: Vec<&str> = only.iter().filter(|n| skills.get(n).is_none()).map(String::as_str).collect();
            if !missing.is_empty() {
                return Err(agentloop_types::error::Error::usage(format!(
                    "skills.only names skills that do not exist: {}",
                    missing.join(", ")
                ))
                .with_hint("`agentloop skills list` shows the skills found"));
            }
        }
        Ok(Env {
            ws,
            session: None,
            cfg,
            tpl: templates(ws, cfg)?,
            registry: Registry::load(cfg, &ws.root, reach)?,
            skills,
            printer,
            events: false,
            keep_committed: false,
            committed: Default::default(),
            transcript: Default::default(),
            deadline: None,
            clock: None,
            provider_failure_resumable: false,
            ledger_base: None,
            values_judged: None,
            model: None,
            plan_tool: Default::default(),
            catalog: Default::default(),
            prompt_catalog: Default::default(),
            fixed_tools: Default::default(),
            reflect_tool: Default::default(),
            skills_checked: Default::default(),
            fused_tool: Default::default(),
            fuse: false,
        })
    }

    /// Commits go through `session` from now on: the lock of this environment's workspace,
    /// taken after the environment was built (a new run's folder is locked once its checks pass).
    /// Brings the run's elapsed time up to date (nothing under a fixed clock, or outside `run`).
    pub fn tick(&self, state: &mut State) {
        if let (Some((t0, base)), false) = (self.clock, agentloop_types::clock::is_fixed()) {
            state.elapsed_ms = base + t0.elapsed().as_millis() as u64;
        }
    }

    pub fn hold(&mut self, session: &'a Session) {
        self.session = Some(session);
    }

    /// The session commits go through: an environment commits only under its workspace's lock.
    fn session(&self) -> Result<&'a Session> {
        match self.session {
            Some(s) if s.workspace().root == self.ws.root => Ok(s),
            _ => Err(agentloop_types::error::Error::failure(format!(
                "a commit to {} was attempted without holding its lock; nothing was written",
                self.ws.root
            ))
            .with_hint("this is a bug in agentloop; please report it")),
        }
    }

    /// Plan's forced answer tool (see [`crate::contract::plan_tool`]); `finish` takes the run's
    /// output schema, which is fixed for the run.
    /// Each tool's parameters are in the catalog rather than this answer's schema when
    /// [`Env::args_in_answer`] says so ([`crate::tool_args::plan_tool`]).
    pub fn plan_tool(&self, state: &State) -> agentloop_model::model::ToolDef {
        self.plan_tool
            .get_or_init(|| {
                let tools = self.registry.allowed(self.cfg);
                crate::tool_args::plan_tool_as(self.args_in_answer(), &tools, state.output_schema.as_ref())
            })
            .clone()
    }

    /// Whether each tool's parameters are given in Plan's answer schema (`llm.tool_schemas`),
    /// rather than in the catalog: always for lean prompts, which hold a small model to them.
    pub fn args_in_answer(&self) -> bool {
        crate::tool_args::in_answer(self.cfg, &self.registry.allowed(self.cfg))
    }

    /// The answer tools a call sends. With prefix sharing ([`shared_prefix`]), every Plan and
    /// Reflect call — all but one or two of a run's calls — sends the same two, plan then reflect
    /// (the one whose schema changes with the Definition of Done's length, so last), the phase's
    /// answer forced by `tool_choice`; a compaction sends them and its own after them, so a
    /// server that matches prefixes token by token still reuses theirs. Frame, the run's first
    /// call (and a reframe's), has nothing to share a prefix with and sends its own tool alone:
    /// carrying it in every later call would cost more than it saves. Without prefix sharing,
    /// the phase's own alone.
    /// A fused call ([`fused`]) sends its own tool alone too: it is every call of a fused run but
    /// the Plan calls, so it is the prefix those calls share. A Plan call of a fused run (the
    /// first, and one after a fused answer that left its plan half out, as small models often
    /// do) sends the fused tool first and its own after it, so a server that reads the tools
    /// first keeps the fused tool's part of the prefix at each switch; only those calls carry
    /// the extra tool.
    pub fn answer_tools(
        &self,
        phase: &agentloop_model::model::ToolDef,
        state: &State,
    ) -> Result<Vec<agentloop_model::model::ToolDef>> {
        if !shared_prefix(self.cfg) || phase.name == "frame_answer" || phase.name == crate::contract::FUSED_TOOL {
            return Ok(vec![phase.clone()]);
        }
        if phase.name == "plan_answer" && self.fused_run() {
            let n = self.read_memory()?.1.dod.len();
            return Ok(vec![self.fused_tool(state, n), phase.clone()]);
        }
        let plan = self.fixed_tools.get_or_init(|| vec![self.plan_tool(state)]);
        let reflect = if phase.name == "reflect_answer" {
            phase.clone()
        } else {
            let n = self.read_memory()?.1.dod.len();
            let mut memo = self.reflect_tool.borrow_mut();
            match &*memo {
                Some((m, t)) if *m == n => t.clone(),
                _ => memo.insert((n, crate::contract::reflect_tool(n))).1.clone(),
            }
        };
        let mut tools: Vec<agentloop_model::model::ToolDef> = plan
            .iter()
            .chain([&reflect])
            .map(|t| if t.name == phase.name { phase.clone() } else { t.clone() })
            .collect();
        if !tools.iter().any(|t| t.name == phase.name) {
            tools.push(phase.clone());
        }
        Ok(tools)
    }

    /// Whether this environment drives a fused run: [`Env::fuses`] without building the model
    /// (not built yet under `auto`: nothing was asked fused yet).
    fn fused_run(&self) -> bool {
        use agentloop_config::config::FusePhases;
        self.fuse
            && self.cfg.prompts == agentloop_config::config::Prompts::Full
            && match self.cfg.llm.fuse_phases {
                FusePhases::On => true,
                FusePhases::Off => false,
                FusePhases::Auto => self.model.as_ref().is_some_and(|m| m.fuses_by_default()),
            }
    }

    /// Whether this run's Reflect asks with the next Plan ([`fused`]): `llm.fuse_phases`, with
    /// `auto` resolved by the model (every provider but a scripted model whose script is written
    /// per phase). A model that cannot be built here is not fused: the Reflect call reports why.
    pub fn fuses(&mut self, state: &State) -> bool {
        if self.fuse && self.cfg.llm.fuse_phases == agentloop_config::config::FusePhases::Auto {
            // Built here so the model can decide; one that cannot be built is not fused.
            let _ = self.model(state);
        }
        self.fused_run()
    }

    /// The fused call's answer tool ([`crate::contract::fused_tool`]) for a Definition of Done of
    /// `items` items.
    pub fn fused_tool(&self, state: &State, items: usize) -> agentloop_model::model::ToolDef {
        let mut memo = self.fused_tool.borrow_mut();
        match &*memo {
            Some((n, t)) if *n == items => t.clone(),
            _ => {
                let t = crate::contract::fused_tool(&crate::contract::reflect_tool(items), &self.plan_tool(state));
                memo.insert((items, t)).1.clone()
            }
        }
    }

    /// The stable part of every call's task (`prompt-task.j2`): context.md, bounded. It comes
    /// after the shared tools and system message and before what changes from call to call.
    pub fn task_prompt(&self) -> Result<String> {
        let context = agentloop_io::fs::read_inside(&self.ws.root, &self.ws.context())?.unwrap_or_default();
        self.tpl.render("prompt-task.j2", json!({"context": frame::bounded(context.trim(), 20_000)}))
    }

    /// The catalog the shared system message shows: one line a tool and a skill
    /// ([`agentloop_tools::catalog::prompt`]), unless `llm.context_window` says the shared prefix
    /// (`tools`, the system message, `task`) would not leave room for `llm.max_tokens` and
    /// [`PROMPT_RESERVE`] tokens of what changes per call; then shortened
    /// ([`agentloop_tools::catalog::shortened`]: skills by name only) rather than the request failing. Tokens are estimated as bytes / 3. Chosen once, so every call sends the
    /// same bytes; when even the shortest does not fit it goes anyway and the server decides.
    pub fn prompt_catalog(&self, state: &State, task: &str) -> Result<String> {
        if let Some(c) = self.prompt_catalog.get() {
            return Ok(c.clone());
        }
        let allowed = self.registry.allowed(self.cfg);
        let mut pick = self.compact_catalog();
        if let Some(window) = self.cfg.llm.context_window {
            // The largest call that shows the catalog: Plan's, with the tools it sends (and a
            // compaction's tool, which may join them) at the longest Definition of Done.
            let mut tools = vec![self.plan_tool(state)];
            if shared_prefix(self.cfg) {
                tools.extend([crate::contract::reflect_tool(7), crate::contract::compact_tool()]);
            }
            let tool_bytes: usize = tools
                .iter()
                .map(|t| {
                    t.name.len() + t.description.len() + serde_json::to_string(&t.parameters).map_or(0, |s| s.len())
                })
                .sum();
            let room = u64::from(window).saturating_sub(u64::from(self.cfg.llm.max_tokens) + PROMPT_RESERVE);
            for level in [0u8, 2] {
                if level > 0 {
                    pick = agentloop_tools::catalog::shortened(&allowed, &self.skills, level, !self.args_in_answer());
                }
                let system = self.system_prompt("", "", &pick)?;
                let estimate = ((system.len() + task.len() + tool_bytes) / 3) as u64;
                if estimate <= room {
                    break;
                }
                self.printer.debug(&format!(
                    "llm.context_window {window}: a prompt of about {estimate} tokens leaves too little room; shortening the catalog"
                ));
            }
        }
        Ok(self.prompt_catalog.get_or_init(|| pick).clone())
    }

    /// The catalog as a prompt shows it when no context window asks for less: one line a tool
    /// and a skill ([`agentloop_tools::catalog::prompt`]; each tool's parameters on its line, or in
    /// the plan answer's schema: [`Env::args_in_answer`]), or a seeded skills.md as it is (the
    /// user's own catalog).
    pub fn compact_catalog(&self) -> String {
        match self.seeded_skills_md() {
            Some(_) => self.catalog(),
            None => agentloop_tools::catalog::prompt(
                &self.registry.allowed(self.cfg),
                &self.skills,
                self.registry.ductile.plugins(),
                !self.args_in_answer(),
            ),
        }
    }

    /// The tool + skill catalog (what `skills gen` prints and the Plan prompt shows), or, when
    /// the workspace came with a skills.md of its own (seeded by whatever started the run), that
    /// file followed by the tools that can actually be called.
    pub fn catalog(&self) -> String {
        self.catalog
            .get_or_init(|| {
                let allowed = self.registry.allowed(self.cfg);
                match self.seeded_skills_md() {
                    Some(text) => agentloop_tools::catalog::seeded(&text, &allowed).0,
                    None => {
                        agentloop_tools::catalog::with_plugins(&allowed, &self.skills, self.registry.ductile.plugins())
                    }
                }
            })
            .clone()
    }

    /// The skills.md seeded into the workspace before the run started, which Plan uses.
    pub fn seeded_skills_md(&self) -> Option<String> {
        agentloop_tools::catalog::seeded_text(self.ws)
    }

    /// Writes skills.md into the workspace when it is missing (the loop never rewrites it).
    pub fn ensure_skills_md(&self) -> Result<()> {
        let path = self.ws.skills();
        if path.exists() {
            return Ok(());
        }
        agentloop_io::fs::write_atomic(&path, self.catalog().as_bytes())
    }

    fn model(&mut self, state: &State) -> Result<&mut Box<dyn Model>> {
        let m = match self.model.take() {
            Some(m) => m,
            None => {
                let mut m = model::from_config(self.cfg, &self.ws.root)?;
                m.seek(&state.model_cursor);
                m
            }
        };
        Ok(self.model.insert(m))
    }

    pub fn read_memory(&self) -> Result<(String, Memory)> {
        let path = self.ws.memory();
        let text = agentloop_io::fs::read_inside(&self.ws.root, &path)?.unwrap_or_default();
        let mem = if text.trim().is_empty() { Memory::default() } else { markdown::parse_memory(&text, &path)? };
        Ok((text, mem))
    }

    pub fn read_plan(&self) -> Result<(String, Plan)> {
        let path = self.ws.plan();
        let text = agentloop_io::fs::read_inside(&self.ws.root, &path)?.unwrap_or_default();
        let plan = markdown::parse_plan(&text, &path)?;
        Ok((text, plan))
    }

    /// memory.md as a file: every learned fact; the last 10 decisions (decisions.md has all).
    pub fn render_memory(&self, m: &Memory) -> Result<String> {
        let mut view = m.clone();
        keep_last(&mut view.log, 10);
        self.tpl.render("memory.md.j2", &view)
    }

    /// memory.md as a prompt sees it: bounded (the newest facts and decisions), so input tokens
    /// per step stay flat as a run grows.
    pub fn memory_prompt(&self, m: &Memory) -> Result<String> {
        let mut view = m.clone();
        keep_last(&mut view.log, 3);
        let dropped = view.facts.len().saturating_sub(8);
        keep_last(&mut view.facts, 8);
        if dropped > 0 {
            view.facts.insert(0, format!("({dropped} earlier facts are in memory.md; file_read it if needed)"));
        }
        Ok(prompt_view(&self.tpl.render("memory.md.j2", &view)?))
    }

    /// plan.md as a file: the last 10 completed steps (trace.jsonl has all).
    pub fn render_plan(&self, p: &Plan) -> Result<String> {
        let mut view = p.clone();
        keep_last(&mut view.completed, 10);
        self.tpl.render("plan.md.j2", markdown::plan_view(&view))
    }

    /// plan.md as a prompt sees it: the last 3 completed steps, each in a line of at most 100
    /// characters (the step's result in full is the latest result, or in trace.jsonl).
    pub fn plan_prompt(&self, p: &Plan) -> Result<String> {
        let mut view = p.clone();
        keep_last(&mut view.completed, 3);
        view.completed.iter_mut().for_each(|c| agentloop_types::text::cap_chars(c, 100));
        Ok(prompt_view(&self.tpl.render("plan.md.j2", markdown::plan_view(&view))?))
    }

    /// decisions.md with one more entry appended.
    /// A decision record to append to decisions.md (with the file's heading when it is new).
    pub fn decisions_with(&self, step: u32, phase: &str, title: &str, body: &str) -> Result<String> {
        let exists = std::fs::metadata(self.ws.decisions()).is_ok_and(|m| m.len() > 0);
        let mut text = if exists { String::new() } else { self.tpl.render("decisions.md.j2", json!({}))? };
        let entry = self.tpl.render(
            "decision.md.j2",
            json!({"step": step, "phase": phase, "ts": agentloop_types::clock::now_rfc3339(), "title": title, "body": body}),
        )?;
        text.push_str(&entry);
        Ok(text)
    }

    /// The system prompt: the phase's role, the profile's instructions and, for Plan, the
    /// catalog. It is the stable prefix that Anthropic prompt caching reuses across calls.
    /// With prefix sharing, `phase` and `answer_tool` are empty and the catalog is always
    /// given: the same system message for every call of a run.
    pub fn system_prompt(&self, phase: &str, answer_tool: &str, catalog: &str) -> Result<String> {
        let lean = self.lean();
        let catalog = if lean && !catalog.is_empty() { self.lean_catalog() } else { catalog.to_string() };
        self.tpl.render(
            "prompt-system.j2",
            json!({"phase": phase, "answer_tool": answer_tool, "system_prompt": self.cfg.system_prompt, "catalog": catalog, "lean": lean}),
        )
    }

    /// Plan's answer tool in a lean run ([`crate::lean::plan`]): while items of the Definition of
    /// Done are open it offers no `finish`, which would be refused then (the run ends by
    /// Reflect's `done`, each item ticked with its evidence).
    pub fn lean_plan_tool(&self, state: &State) -> Result<agentloop_model::model::ToolDef> {
        let open = !self.read_memory()?.1.open_items().is_empty() || !self.lean_pending(state).is_empty();
        // Its paths are held to what exists and what the goal names ([`crate::lean::hold_paths`]).
        let all = self.registry.allowed(self.cfg);
        let only_finish = all.iter().all(|t| agentloop_types::tool_spec::is_finish(&t.name));
        let tools: Vec<_> = all
            .into_iter()
            .filter(|t| only_finish || !open || !agentloop_types::tool_spec::is_finish(&t.name))
            .collect();
        let mut tool = crate::lean::plan(&tools, state.output_schema.as_ref());
        let (mut files, folders) = crate::lean::workspace_paths(&self.ws.root);
        // The files the goal names that exist are readable wherever they are.
        for n in crate::lean::named_files(&state.goal) {
            if crate::lean::unlinked(&self.ws.root, &n) && self.ws.root.join(&n).is_file() && !files.contains(&n) {
                files.push(n);
            }
        }
        // The files the goal names that did not exist before this run (not yet, or written by
        // it) are what it asks to be written; the others are its inputs, written only when it
        // names no other.
        let named =
            if self.lean_writes_named() { crate::lean::writable_names(&state.goal, &self.ws.root) } else { Vec::new() };
        let new: Vec<String> = named
            .iter()
            .filter(|n| state.artifacts.contains(n) || !crate::lean::present(&self.ws.root, n))
            .cloned()
            .collect();
        crate::lean::hold_paths(&mut tool, &files, &folders, if new.is_empty() { &named } else { &new });
        let inputs: Vec<String> = named.iter().filter(|n| !new.contains(n)).cloned().collect();
        let last = state.tools_called.last().map(String::as_str);
        if crate::lean::read_what_goal_needs(last, state.last_result.as_ref(), &inputs) && !new.is_empty() {
            crate::lean::write_first(&mut tool);
        }
        Ok(tool)
    }

    /// Whether a lean run holds `file_write` to the files the goal names and waits for them
    /// before `done`: only when `file_write` is offered and not confined to folders of its own
    /// (`tools.write_paths`, `tools.file_write.allowed_paths`), where a named file may not be.
    fn lean_writes_named(&self) -> bool {
        let tools = &self.cfg.tools;
        let offered = self.registry.allowed(self.cfg).iter().any(|t| t.name == "file_write");
        offered && tools.write_paths.is_empty() && tools.file_write.allowed_paths.is_none()
    }

    /// The files the goal names that a lean run still has to write ([`crate::lean::pending_writes`]);
    /// none when it does not hold writes to them ([`Env::lean_writes_named`]).
    pub fn lean_pending(&self, state: &State) -> Vec<String> {
        match self.lean_writes_named() {
            true => crate::lean::pending_writes(&state.goal, &self.ws.root),
            false => Vec::new(),
        }
    }

    /// The catalog of lean prompts ([`agentloop_tools::catalog::lean`]): the tools on one line.
    pub fn lean_catalog(&self) -> String {
        agentloop_tools::catalog::lean(&self.registry.allowed(self.cfg), &self.skills)
    }

    /// Whether this run's prompts are lean (`prompts: lean`).
    pub fn lean(&self) -> bool {
        self.cfg.prompts == agentloop_config::config::Prompts::Lean
    }

    /// What a lean prompt (`prompts: lean`) shows of the run: the goal, the Definition of Done,
    /// the last three steps in a line each, the newest five facts, the action just run and the
    /// first 800 characters of its output (what a small model copies from).
    pub fn lean_view(&self, mem: &Memory, plan: &markdown::Plan, state: &State) -> serde_json::Value {
        let capped = |t: &str, max: usize| {
            let mut t = t.to_string();
            agentloop_types::text::cap_chars(&mut t, max);
            t
        };
        let last =
            |v: &[String], n: usize| v[v.len().saturating_sub(n)..].iter().map(|t| capped(t, 100)).collect::<Vec<_>>();
        let action = plan.next_action.as_ref().map_or_else(String::new, |a| format!("{} {}", a.tool, a.args));
        json!({
            "lean": true,
            "goal": mem.goal,
            "items": mem.dod.iter().map(|i| json!({"text": i.text, "done": i.done})).collect::<Vec<_>>(),
            "open": mem.dod.iter().filter(|i| !i.done).count(),
            "completed": last(&plan.completed, 3),
            "facts": last(&mem.facts, 5),
            "action": action,
            "pending": self.lean_pending(state),
            "latest": capped(self.lean_output(state).unwrap_or_default().trim(), 800),
        })
    }

    /// What a lean prompt shows of the output of the step just run ([`crate::lean::shown_output`]);
    /// none without lean prompts or a step run.
    pub fn lean_output(&self, state: &State) -> Option<String> {
        let r = state.last_result.as_ref().filter(|_| self.lean())?;
        Some(crate::lean::shown_output(state.tools_called.last().map(String::as_str), r, &self.ws.root))
    }

    /// Adds a section to the run's transcript (written with the phase's commit).
    pub fn note(&self, section: String) {
        self.transcript.borrow_mut().push(section);
    }

    /// Applies a commit and reports its trace entries (events stream, progress lines).
    pub fn commit(&self, commit: &Commit) -> Result<()> {
        let pending: Vec<String> = self.transcript.borrow_mut().drain(..).collect();
        if !pending.is_empty() {
            let mut commit = commit.clone();
            // Appended, not rewritten: a phase journals and writes its own sections only.
            let path = self.ws.path("transcript.md");
            let exists = std::fs::metadata(&path).is_ok_and(|m| m.len() > 0);
            let mut text = if exists { String::new() } else { "# Transcript\n".to_string() };
            for s in pending {
                text.push('\n');
                text.push_str(&s);
            }
            commit.append("transcript.md", text);
            return self.commit_inner(&commit);
        }
        self.commit_inner(commit)
    }

    fn commit_inner(&self, commit: &Commit) -> Result<()> {
        self.session()?.commit(commit)?;
        if self.keep_committed {
            self.committed.borrow_mut().extend(commit.trace.iter().cloned());
        }
        for line in &commit.trace {
            if self.events {
                if let Err(e) = self.printer.try_outln(line) {
                    // The commit is done: the run stops here, at a commit point, and resumes.
                    let ws = &self.ws.root;
                    return Err(agentloop_types::error::Error::failure(format!(
                        "--events: cannot write to stdout ({e}); the run stopped after its last commit"
                    ))
                    .with_hint(format!("nothing was lost; `agentloop -w {ws} run` resumes it")));
                }
            }
            if let Ok(e) = serde_json::from_str::<Entry>(line) {
                self.printer.progress(&progress_line(&e));
            }
        }
        Ok(())
    }
}

/// Tokens `llm.context_window` keeps free, besides `llm.max_tokens`, for what changes from call
/// to call (memory, plan, the latest result, the phase's instruction).
pub const PROMPT_RESERVE: u64 = 1024;

/// Whether every model call of a run starts with the same bytes (tools, system message, task),
/// which pays only where the provider caches a prompt's prefix and bills the repeat at a
/// fraction: a server on the user's machine (llama.cpp and the like keep the last prompt in
/// their slot; Ollama), OpenAI's own API (automatic caching past 1,024 tokens), Anthropic with
/// `llm.cache` (its breakpoints), and the scripted model (it bills nothing; its transcript shows
/// what a cached provider is sent). Any other server — a remote OpenAI-compatible one, Anthropic
/// with `llm.cache: false` — bills every token of every call, so each phase gets the smallest
/// prompt instead: its own answer tool and system message, the catalog only in Plan. The hidden
/// `AGENTLOOP_UNSHARED_PREFIX=1`, which `make bench-real` sets to measure the difference, forces
/// the latter.
pub fn shared_prefix(cfg: &agentloop_config::config::Config) -> bool {
    if std::env::var_os("AGENTLOOP_UNSHARED_PREFIX").is_some_and(|v| !v.is_empty() && v != "0") {
        return false;
    }
    // Lean prompts are each phase's own, smallest: nothing is shared.
    if cfg.prompts == agentloop_config::config::Prompts::Lean {
        return false;
    }
    caches_prefix(cfg)
}

/// Whether the configured provider serves a repeated prompt prefix from a cache (see
/// [`shared_prefix`]).
pub fn caches_prefix(cfg: &agentloop_config::config::Config) -> bool {
    use agentloop_config::config::Provider;
    match agentloop_model::model::resolve_provider(cfg) {
        Ok(Provider::Anthropic) => cfg.llm.cache,
        Ok(Provider::Openai) => {
            agentloop_model::model::pricing::is_local(cfg)
                || cfg
                    .llm
                    .base_url
                    .as_deref()
                    .unwrap_or(agentloop_model::model::openai::DEFAULT_BASE)
                    .contains("api.openai.com")
        }
        Ok(Provider::Ollama | Provider::Scripted | Provider::Auto) | Err(_) => true,
    }
}

/// memory.md or plan.md as a prompt quotes it: what the next step needs, not what a person
/// editing the file does — sections that only say they are empty (`(none)`, `(none yet)`, `(no
/// plan yet: ...)`), the goal (context.md states it) and the note on editing the next action by
/// hand are left out.
fn prompt_view(text: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with("## ") {
            // The section's body: up to the next heading, blank lines aside.
            let end = lines[i + 1..].iter().position(|l| l.starts_with("## ")).map_or(lines.len(), |p| i + 1 + p);
            let body: Vec<&str> = lines[i + 1..end].iter().copied().filter(|l| !l.trim().is_empty()).collect();
            if let [only] = body.as_slice() {
                if only.starts_with("(none") || only.starts_with("(no plan yet") {
                    i = end;
                    continue;
                }
            }
        }
        // The goal: context.md, which every call quotes first, states it.
        if line == "## Goal" {
            i = lines[i + 1..].iter().position(|l| l.starts_with("## ")).map_or(lines.len(), |p| i + 1 + p);
            continue;
        }
        if line.starts_with("You may edit it before `act`") {
            i += 1;
            continue;
        }
        out.push(
            line.strip_suffix(" This block is binding: `agentloop act` runs exactly this tool call.").unwrap_or(line),
        );
        i += 1;
    }
    let mut text = out.join("\n");
    while text.contains("\n\n\n") {
        text = text.replace("\n\n\n", "\n\n");
    }
    text.trim().to_string()
}

fn keep_last(v: &mut Vec<String>, n: usize) {
    if v.len() > n {
        v.drain(..v.len() - n);
    }
}

fn progress_line(e: &Entry) -> String {
    let mut s = format!("[step {}] {:<7}", e.step, e.phase.map(|p| p.as_str()).unwrap_or("-"));
    // A phase's own entry (`plan` in Plan) is said once: `plan    file_write`, not `plan    plan`.
    if e.phase.is_none_or(|p| e.event != p) {
        s.push_str(&format!(" {}", e.event));
    }
    if let Some(t) = &e.tool {
        s.push_str(&format!(" {t}"));
    }
    if let Some(st) = e.verdict() {
        s.push_str(&format!(" → {st}"));
    }
    if let Some(d) = e.duration_ms {
        s.push_str(&format!(" ({:.1}s", d as f64 / 1000.0));
        if let Some(u) = e.usage {
            s.push_str(&format!(", {} tok", u.total()));
        }
        s.push(')');
    }
    if let Some(r) = e.error.as_ref().or(e.reason.as_ref()) {
        let r: String = r.chars().take(100).collect();
        s.push_str(&format!(": {r}"));
    }
    s
}

/// The budgets in force are the ones given now (flags, environment, config files), counted from
/// what the run already used; a limit given nowhere keeps the run's recorded value. A change is
/// committed with a `limits.changed` trace entry (from, to).
pub fn refresh_limits(env: &Env, state: &mut State, sources: &agentloop_config::config::Sources) -> Result<()> {
    let now = state.limits.in_force(env.cfg, sources);
    if now == state.limits || state.status.is_terminal() {
        return Ok(());
    }
    let mut e = Entry::new(&state.run_id, state.step, Phase::Run, Event::LimitsChanged);
    e.data = Some(json!({"from": state.limits, "to": now}));
    state.limits = now;
    let mut commit = Commit::default();
    commit.entry(&e);
    commit.state = Some(state.clone());
    env.commit(&commit)
}

/// A budget that has run out, if any (tokens, cost), and why.
pub fn budget_exceeded(state: &State) -> Option<(Budget, String)> {
    let l = &state.limits;
    if let Some(max) = l.max_tokens {
        if state.usage.total() >= max {
            let why = format!("token budget exhausted: {} of {max} tokens used", state.usage.total());
            return Some((Budget::MaxTokens, why));
        }
    }
    if let Some(max) = l.max_cost_usd {
        if state.cost_usd >= max {
            return Some((
                Budget::MaxCostUsd,
                format!("cost budget exhausted: ${:.4} of ${max:.4} spent", state.cost_usd),
            ));
        }
    }
    None
}

/// Keeps as artifacts only the files that exist in the workspace when the run ends; what was
/// claimed (by `finish` or Reflect's done) that is not such a file — `*`, a glob, a folder, a
/// file never written or since removed, a path outside — moves to `claimed_missing`, so
/// result.json, the completion event and the report never offer a file nobody can open.
fn keep_real_artifacts(root: &camino::Utf8Path, state: &mut State) {
    let (kept, missing): (Vec<String>, Vec<String>) =
        std::mem::take(&mut state.artifacts).into_iter().partition(|a| is_workspace_file(root, a));
    state.artifacts = kept;
    for m in missing {
        if !state.claimed_missing.contains(&m) {
            state.claimed_missing.push(m);
        }
    }
}

/// Whether `rel` names a plain file below `root` reached without leaving it through a link.
fn is_workspace_file(root: &camino::Utf8Path, rel: &str) -> bool {
    let p = camino::Utf8Path::new(rel);
    let plain = !rel.is_empty() && p.components().all(|c| matches!(c, camino::Utf8Component::Normal(_)));
    let at = root.join(p);
    plain && !agentloop_io::fs::leads_outside(root, &at) && std::fs::metadata(&at).is_ok_and(|m| m.is_file())
}

/// Ends the run inside `commit`: result.json, the `run.finished` entry, terminal state.
pub fn finish(
    env: &Env,
    state: &mut State,
    commit: &mut Commit,
    stop: StopKind,
    reason: &str,
    outcome: Option<(String, Vec<String>)>,
) -> Result<()> {
    let now = agentloop_types::clock::now_rfc3339();
    env.tick(state);
    state.status = Status::ended(stop);
    if stop != StopKind::Done && state.next != Next::None && state.next != Next::Finish {
        state.resume_at = Some(state.next);
    }
    state.next = Next::None;
    state.stop = Some(stop);
    state.reason = Some(reason.to_string());
    state.pending = None;
    state.finished_at = Some(now.clone());
    frustration::on_end(env.cfg, &env.ws.root, state, stop == StopKind::Escalated, &|m| env.printer.warn(m));
    if let Some((text, arts)) = &outcome {
        state.outcome = Some(text.clone());
        for a in arts {
            if !state.artifacts.contains(a) {
                state.artifacts.push(a.clone());
            }
        }
    }
    keep_real_artifacts(&env.ws.root, state);
    let (goal, dod) = final_memory(env, state, commit, stop, reason)?;
    index_outcome(env, state, stop, reason, &goal);
    let open_question = state.open_question.clone();
    let result = crate::schema::RunResult {
        run_id: state.run_id.clone(),
        agent: state.agent.clone(),
        slot: state.slot.clone(),
        goal,
        status: state.status,
        stop,
        reason: reason.to_string(),
        open_question,
        outcome: state.outcome.clone(),
        steps_taken: state.completed_steps.len(),
        tools_called: state.tools_called.clone(),
        duration_ms: state.elapsed_ms,
        artifacts: state.artifacts.clone(),
        claimed_missing: state.claimed_missing.clone(),
        model: state.model.clone(),
        usage: state.usage,
        cost_usd: state.cost(),
        started_at: state.started_at.clone(),
        finished_at: now,
        output: state.output.clone(),
        definition_of_done: dod.iter().map(crate::schema::DodItem::of).collect(),
    };
    commit.file("result.json", agentloop_types::json::to_string_pretty(&result) + "\n");
    let mut e = Entry::new(&state.run_id, state.step, Phase::Run, Event::RunFinished);
    e.data = state.open_question.as_ref().map(|q| json!({"open_question": q}));
    e.decision = Some(state.status.as_str().to_string());
    e.reason = Some(reason.to_string());
    e.usage = Some(state.usage);
    e.cost_usd = state.cost();
    e.artifacts = state.artifacts.clone();
    commit.entry(&e);
    commit.state = Some(state.clone());
    Ok(())
}

/// memory.md records the final status (and an open question when escalated), on top of
/// whatever this commit already changed in it; returns the goal as memory.md states it and its
/// Definition of Done, and sets the state's open question.
fn final_memory(
    env: &Env,
    state: &mut State,
    commit: &mut Commit,
    stop: StopKind,
    reason: &str,
) -> Result<(String, Vec<markdown::Item>)> {
    let pending = commit.files.iter().position(|(n, _)| n == "memory.md");
    let base = match pending {
        Some(pos) => markdown::parse_memory(&commit.files[pos].1, &env.ws.memory()),
        None => env.read_memory().map(|(_, m)| m),
    };
    let mut goal = state.goal.clone();
    let mut open_question = None;
    let mut dod = Vec::new();
    if let Ok(mut mem) = base {
        mem.status = format!("{}: {reason}", state.status.as_str());
        // Only an escalation waits for a person's answer; a limit or a provider that ran out
        // is gone on from with `run --continue` (the ways on say how), not answered.
        if stop == StopKind::Escalated && mem.open_question.is_none() {
            mem.open_question = Some(format!("The run stopped and needs a human: {reason}"));
        }
        if !mem.goal.is_empty() {
            goal = mem.goal.clone();
        }
        if stop != StopKind::Done {
            open_question = mem.open_question.clone();
        }
        let text = env.render_memory(&mem)?;
        dod = mem.dod;
        match pending {
            Some(pos) => commit.files[pos].1 = text,
            None => {
                commit.file("memory.md", text);
            }
        }
    }
    state.open_question = open_question;
    Ok((goal, dod))
}

/// The run's outcome goes to long-term memory (`memory.auto_index`), so later runs recall it.
fn index_outcome(env: &Env, state: &State, stop: StopKind, reason: &str, goal: &str) {
    if !env.cfg.memory.auto_index {
        return;
    }
    let what = match &state.outcome {
        Some(o) if stop == StopKind::Done => format!("Outcome: {o}"),
        _ => format!("Stopped ({}): {reason}", state.status.as_str()),
    };
    let n = agentloop_workspace::longterm::New {
        topic: "outcomes".into(),
        content_id: Some(agentloop_workspace::longterm::loop_id(&state.run_id, 0, "outcome")),
        title: goal.to_string(),
        content: format!("{what}\nArtifacts: {}", state.artifacts.join(", ")),
        provenance: agentloop_workspace::longterm::Provenance {
            run_id: Some(state.run_id.clone()),
            step: Some(state.step),
            artifact: state.artifacts.first().cloned(),
            ..Default::default()
        },
        ..Default::default()
    };
    if let Err(e) = agentloop_workspace::longterm::write_from_loop(env.cfg, &env.ws.root, n) {
        env.printer.warn(&format!("long-term memory: {e}"));
    }
}

/// The event object of the seeds for a finished run (`agent.completed` / `agent.escalated`).
pub fn completion_event(state: &State) -> Value {
    crate::schema::CompletionEvent::of(state).to_value()
}
