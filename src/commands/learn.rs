//! `agentloop skills learn [--run ID] NAME`: a done run's successful path as an Agent Skills
//! folder in the workspace's `skills/NAME/` — SKILL.md (name, description, triggers, the steps
//! as instructions, the tools used, the Definition of Done it met, the run it came from) and
//! `references/facts.md` (the run's key facts).
//!
//! One model call drafts the description, the triggers and the instructions from the run's
//! goal, its successful actions, its Definition of Done and its facts; agentloop writes the rest
//! itself and checks the result as `skills check` does (any problem refuses it, nothing is
//! written). Everything written passes through redaction, so no secret of the run's arguments or
//! results reaches the skill. A later run whose goal holds one of the triggers is offered the
//! skill at Frame, as any skill whose triggers match.

use agentloop_engine::contract;
use agentloop_engine::settings::Ctx;
use agentloop_types::error::{Error, Result};
use agentloop_types::trace::Phase;
use agentloop_workspace::history;
use camino::Utf8PathBuf;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

/// The model's draft of the skill.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LearnAnswer {
    /// What the skill does and when to use it (one or two sentences, at most 1024 characters)
    #[schemars(length(min = 1, max = 1024))]
    pub description: String,
    /// Words or short phrases that, found in a later goal, mean this skill applies
    #[schemars(length(min = 1, max = 8))]
    pub triggers: Vec<String>,
    /// The steps that worked, as numbered markdown instructions for a later run
    #[schemars(length(min = 1))]
    pub instructions: String,
}

/// What the run did that worked: read from its files.
struct Path {
    run_id: String,
    goal: String,
    steps: Vec<(u32, String, String)>,
    tools: Vec<String>,
    dod: Vec<String>,
    facts: Vec<String>,
}

pub fn learn(ctx: &Ctx, name: &str, run: Option<&str>) -> Result<u8> {
    agentloop_tools::skills::valid_name(name).map_err(|e| {
        Error::usage(format!("`{name}` is no skill name: {e}"))
            .with_hint("e.g. morning-digest: lowercase, digits, hyphens")
    })?;
    ctx.ws.require_dir()?;
    let runs_dir = &ctx.config().handle.runs_dir;
    let ws = match run {
        Some(id) => history::find(&ctx.ws, runs_dir, id)?,
        None if ctx.ws.has_run() => ctx.ws.clone(),
        None => {
            return Err(Error::usage(format!("{} holds no current run", ctx.ws.root))
                .with_hint("name one with --run ID (or `last`)"))
        }
    };
    let rel = Utf8PathBuf::from(format!("skills/{name}"));
    if ctx.ws.root.join(&rel).exists() {
        return Err(Error::usage(format!("{}/{rel} already exists", ctx.ws.root))
            .with_hint("pick another NAME, or move that folder aside"));
    }
    let path = read_path(&ws)?;
    let mut answer = draft(ctx, &path)?;
    // A trigger too short to mean anything would offer the skill to nearly every goal.
    let (kept, short): (Vec<String>, Vec<String>) =
        answer.triggers.drain(..).partition(|t| agentloop_tools::skills::meaningful_trigger(t));
    answer.triggers = kept;
    if !short.is_empty() {
        ctx.printer.warn(&format!(
            "left out trigger(s) shorter than {} letters or digits: {}",
            agentloop_tools::skills::MIN_TRIGGER,
            short.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(", ")
        ));
    }
    if answer.triggers.is_empty() {
        return Err(Error::failure("the drafted skill has no trigger of meaningful length; nothing was written")
            .with_hint("run `skills learn` again, or write the skill by hand"));
    }
    let (skill_md, facts_md) = render(name, &path, &answer);
    // Checked as `skills check` checks a skill, before anything is written.
    let file = ctx.ws.root.join(&rel).join("SKILL.md");
    let problems = match agentloop_tools::skills::parse_skill_md(&skill_md, &file, Some(name)) {
        Ok((_, p)) => p,
        Err(p) => p,
    };
    if let Some(p) = problems.iter().find(|p| p.fails_check()) {
        return Err(Error::failure(format!("the drafted skill does not pass `skills check`: {}", p.detail()))
            .with_hint("run `skills learn` again, or write the skill by hand"));
    }
    // skills.md as `skills gen` wrote it before, to be written again with the new skill in it.
    let catalog_before = catalog_md(ctx)?;
    agentloop_io::fs::write_in(&ctx.ws.root, &rel.join("references/facts.md"), facts_md.as_bytes())?;
    agentloop_io::fs::write_in(&ctx.ws.root, &rel.join("SKILL.md"), skill_md.as_bytes())?;
    let p = &ctx.printer;
    if refresh_skills_md(ctx, &catalog_before)? {
        p.info(&format!("refreshed {} with the new skill", ctx.ws.skills()));
    } else if ctx.ws.skills().exists() {
        p.info(&format!(
            "{} was edited by hand and is left as it is; `agentloop -w {} skills gen -o {}` writes it anew",
            ctx.ws.skills(),
            ctx.ws.root,
            ctx.ws.skills()
        ));
    }
    if p.json {
        p.json_value(&json!({"skill": name, "path": ctx.ws.root.join(&rel), "run_id": path.run_id,
            "triggers": answer.triggers, "tools": path.tools}));
    } else {
        p.outln(ctx.ws.root.join(&rel).as_str());
        p.info(&format!(
            "learned skill `{name}` from run {} ({} steps); a goal with {} is offered it",
            path.run_id,
            path.steps.len(),
            answer.triggers.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(" or ")
        ));
    }
    Ok(0)
}

/// The run's successful path: only a run that ended done has one.
fn read_path(ws: &agentloop_workspace::workspace::Workspace) -> Result<Path> {
    let state = ws.load_state()?;
    if state.status != agentloop_workspace::workspace::Status::Done {
        return Err(Error::usage(format!(
            "run {} ended {}, not done: only a run that worked is learned from",
            state.run_id,
            state.status.as_str()
        ))
        .with_hint("name a done run with --run ID; `agentloop runs` lists them"));
    }
    let (entries, _) = agentloop_types::trace::read(&ws.trace())?;
    let cut = |v: &Value| -> String {
        let s = agentloop_io::redact::redact(&v.to_string());
        if s.chars().count() > 300 {
            s.chars().take(300).collect::<String>() + "…"
        } else {
            s
        }
    };
    let mut steps = Vec::new();
    let mut tools: Vec<String> = Vec::new();
    for e in entries.iter().filter(|e| e.run_id == state.run_id && e.phase == Some(Phase::Act) && !e.is_error()) {
        let Some(tool) = &e.tool else { continue };
        steps.push((e.step, tool.clone(), e.args.as_ref().map(cut).unwrap_or_default()));
        if !tools.contains(tool) && tool != "finish" {
            tools.push(tool.clone());
        }
    }
    let text = agentloop_io::fs::read_inside(&ws.root, &ws.memory())?.unwrap_or_default();
    let mem = agentloop_workspace::markdown::parse_memory(&text, &ws.memory())?;
    let facts = mem
        .facts
        .iter()
        .filter(|f| !(agentloop_workspace::facts::is_summary(f) || f.starts_with("Run ") && f.contains(") ended ")))
        .map(|f| agentloop_io::redact::redact(&agentloop_workspace::facts::split(f).0))
        .collect();
    Ok(Path {
        run_id: state.run_id.clone(),
        goal: agentloop_io::redact::redact(&state.goal),
        steps,
        tools,
        dod: mem.dod.iter().filter(|i| i.done).map(|i| agentloop_io::redact::redact(&i.text)).collect(),
        facts,
    })
}

/// The one model call: the description, triggers and instructions.
fn draft(ctx: &Ctx, path: &Path) -> Result<LearnAnswer> {
    let cfg = ctx.config();
    let mut m = agentloop_model::model::from_config(cfg, &ctx.ws.root)?;
    let tool = contract::answer_tool(
        "learn_answer",
        "Record the skill drafted from the run.",
        contract::schema_of::<LearnAnswer>(),
    );
    let steps: Vec<String> = path.steps.iter().map(|(n, t, a)| format!("step {n}: {t} {a}")).collect();
    let prompt = format!(
        "A run reached its goal. Turn what worked into a reusable skill for later runs with a goal like it: a description (what it does, when to use it), a few triggers (words a later goal would contain) and numbered instructions that repeat the path without its detours.\n\nGoal: {}\n\nSuccessful actions:\n{}\n\nDefinition of Done it met:\n{}\n\nFacts it learned:\n{}",
        path.goal,
        steps.join("\n"),
        path.dod.iter().map(|d| format!("- {d}")).collect::<Vec<_>>().join("\n"),
        path.facts.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n"),
    );
    let system = "You write Agent Skills from runs that worked. Answer only by calling the tool.";
    let req = agentloop_model::model::Request::forced("learn", system, prompt, &tool, cfg.llm.max_tokens, cfg);
    let r = m.complete(&req, &mut |_| {})?;
    contract::forced_answer(r, &tool)
}

/// A YAML scalar: a JSON string is a valid double-quoted YAML one.
fn quoted(s: &str) -> String {
    agentloop_types::json::to_string(s)
}

/// SKILL.md and references/facts.md, redacted.
fn render(name: &str, path: &Path, a: &LearnAnswer) -> (String, String) {
    let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let description: String = one_line(&agentloop_io::redact::redact(&a.description)).chars().take(1024).collect();
    let triggers: Vec<String> =
        a.triggers.iter().map(|t| one_line(&t.replace(',', " "))).filter(|t| !t.is_empty()).collect();
    let list = |v: &[String], mark: &str| v.iter().map(|x| format!("{mark}{x}\n")).collect::<String>();
    let skill = format!(
        "---\nname: {name}\ndescription: {}\nmetadata:\n  triggers: {}\n  requires-tools: {}\n  learned-from-run: {}\n---\n# {name}\n\nLearned from run `{}` (goal: {}), which ended done in {} steps.\n\n## Steps\n\n{}\n\n## Tools used\n\n{}\n## Definition of Done it met\n\n{}\n## Reference\n\nThe run's key facts: [references/facts.md](references/facts.md).\n",
        quoted(&description),
        quoted(&triggers.join(", ")),
        quoted(&path.tools.join(" ")),
        quoted(&path.run_id),
        path.run_id,
        quoted(&path.goal),
        path.steps.len(),
        agentloop_io::redact::redact(a.instructions.trim()),
        list(&path.tools, "- "),
        list(&path.dod, "- [x] "),
    );
    // A fact or the goal is text: each fact one item, none of its lines a heading or a list.
    let bullets =
        path.facts.iter().map(|f| format!("- {}\n", agentloop_workspace::md_text::bullet(f))).collect::<String>();
    let goal = agentloop_workspace::md_text::prose(&path.goal);
    let facts = format!("# Key facts of run {}\n\nGoal: {goal}\n\n{bullets}", path.run_id);
    (skill, facts)
}

/// skills.md as `skills gen` would write it now, when the workspace's file was written that way
/// before (`was`, the catalog then): a file someone edited is left alone. Whether it was rewritten.
fn refresh_skills_md(ctx: &Ctx, was: &str) -> Result<bool> {
    let path = ctx.ws.skills();
    if agentloop_io::fs::read_inside(&ctx.ws.root, &path)?.as_deref() != Some(was) {
        return Ok(false);
    }
    let now = catalog_md(ctx)?;
    agentloop_io::fs::write_in(&ctx.ws.root, camino::Utf8Path::new("skills.md"), now.as_bytes())?;
    Ok(true)
}

/// The workspace's catalog in markdown, as skills.md holds it.
fn catalog_md(ctx: &Ctx) -> Result<String> {
    let set = agentloop_tools::skills::SkillSet::load(ctx.config(), &ctx.ws.root);
    agentloop_tools::catalog::of_config(ctx.config(), &ctx.ws.root, &set, false)
}
