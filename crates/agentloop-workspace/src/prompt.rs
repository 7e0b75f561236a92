//! minijinja templates for prompts and workspace files.
//!
//! The templates in `templates/` are embedded in the binary, so agentloop works anywhere; a file
//! of the same name in `<workspace>/templates/` (or `templates_dir` in config) overrides one.
//! Undefined variables are errors (strict mode), so a typo in an override fails loudly.
//!
//! An override is code from whoever wrote the workspace: every render has a budget of template
//! work ([`FUEL`], minijinja's fuel), so an override that loops for ever (nested loops over
//! `range(100000)`) fails at once naming its file, instead of outliving `--timeout`, which is
//! only checked between phases; what one render writes is capped ([`MAX_OUTPUT`]), since one
//! step can write 100 MB (`"x" * 100000000`); and what it holds is capped ([`MAX_MEMORY`]), since
//! a few steps can build a string of gigabytes (`{% set s = s ~ s %}`, 30 times), and how long it
//! works is capped ([`MAX_RENDER_TIME`]), since one step can do a great deal of work (`replace`
//! over a 20 MB string, in a loop). A render runs on a thread of its own with that budget
//! (`alloc.rs`); one that goes over is left asleep and the render fails naming its file. A built-in template renders on the caller's thread: it
//! builds nothing but its output, which is capped, from values already held.

use agentloop_types::error::{Error, Result};
use agentloop_types::error::{Kind, ResultExt};
use camino::Utf8Path;
use minijinja::{Environment, ErrorKind, UndefinedBehavior};
use serde::Serialize;
use std::collections::HashMap;

/// Steps of template work (minijinja instructions) one render may take. The built-ins take about
/// 11 per list item (memory.md with 10,000 items in each of its five lists: 535,000), so this
/// leaves room for lists of about a million items, while an override that loops for ever is
/// stopped within a second or two.
pub const FUEL: u64 = 10_000_000;

/// Bytes one render may write (64 MiB): far more than a prompt a model takes or a workspace
/// file a run writes.
pub const MAX_OUTPUT: usize = 64 << 20;

/// Bytes one render may hold at once (256 MiB): its output at the cap, and room for the values
/// it builds on the way.
pub const MAX_MEMORY: usize = 256 << 20;

/// How long one render of an override may work (5 s): far longer than any built-in takes on a
/// run's files, while a step that does a great deal of work (a filter over a large string, in a
/// loop) is stopped instead of outliving `--timeout`, which is only checked between phases.
pub const MAX_RENDER_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// The render's output, refusing to grow past [`MAX_OUTPUT`].
struct Capped(Vec<u8>);

impl std::io::Write for Capped {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.0.len().saturating_add(b.len()) > MAX_OUTPUT {
            return Err(std::io::Error::other("the template output cap is reached"));
        }
        self.0.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub const BUILTIN: &[(&str, &str)] = &[
    ("context.md.j2", include_str!("../../../templates/context.md.j2")),
    ("memory.md.j2", include_str!("../../../templates/memory.md.j2")),
    ("plan.md.j2", include_str!("../../../templates/plan.md.j2")),
    ("decisions.md.j2", include_str!("../../../templates/decisions.md.j2")),
    ("decision.md.j2", include_str!("../../../templates/decision.md.j2")),
    ("prompt-system.j2", include_str!("../../../templates/prompt-system.j2")),
    ("prompt-task.j2", include_str!("../../../templates/prompt-task.j2")),
    ("prompt-frame.j2", include_str!("../../../templates/prompt-frame.j2")),
    ("prompt-plan.j2", include_str!("../../../templates/prompt-plan.j2")),
    ("prompt-reflect.j2", include_str!("../../../templates/prompt-reflect.j2")),
];

pub struct Templates {
    env: std::sync::Arc<Environment<'static>>,
    /// The file each overridden template was read from.
    overrides: HashMap<&'static str, String>,
    /// The thread renders run on, started by the first render and kept for the next: a thread
    /// of its own (with its 8 MiB stack) for each of the several renders of a step cost more
    /// than the renders did. One whose render went over is left asleep and replaced.
    renderer: std::sync::Mutex<Option<std::sync::mpsc::Sender<Job>>>,
}

/// One render for the renderer thread: the template, its values, the flag it raises when it
/// goes over its budget, and where its output goes.
struct Job {
    name: String,
    ctx: minijinja::Value,
    over: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// When the render's time is up ([`MAX_RENDER_TIME`] from when it was asked for).
    until: std::time::Instant,
    done: std::sync::mpsc::Sender<std::result::Result<Vec<u8>, minijinja::Error>>,
}

/// Renders `name` with its output capped at [`MAX_OUTPUT`] (and its work at [`FUEL`]).
fn render_capped(
    env: &Environment<'static>,
    name: &str,
    ctx: minijinja::Value,
) -> std::result::Result<Vec<u8>, minijinja::Error> {
    let mut out = Capped(Vec::new());
    env.get_template(name).and_then(|t| t.render_captured_to(ctx, &mut out)).map(|_| out.0)
}

/// Starts a renderer: each job is rendered with a budget of [`MAX_MEMORY`], and the thread
/// keeps the flag of the job it runs for as long as it may raise it (`alloc::set_budget`).
fn start_renderer(env: std::sync::Arc<Environment<'static>>) -> std::io::Result<std::sync::mpsc::Sender<Job>> {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    std::thread::Builder::new().name("render".into()).stack_size(8 << 20).spawn(move || {
        // The running job's flag, kept here past its job: the budget points at it until the next.
        let mut flag;
        for job in rx {
            flag = job.over;
            agentloop_io::alloc::set_budget(MAX_MEMORY, &flag);
            agentloop_io::alloc::set_deadline(Some(job.until));
            let r = render_capped(&env, &job.name, job.ctx);
            // Between renders nothing is held to a budget.
            agentloop_io::alloc::set_deadline(None);
            agentloop_io::alloc::set_budget(usize::MAX, &flag);
            let _ = job.done.send(r);
        }
    })?;
    Ok(tx)
}

impl Templates {
    /// Loads the built-ins, then overrides from `dir` when it exists.
    pub fn load(dir: Option<&Utf8Path>) -> Result<Self> {
        Self::load_within(dir, dir.unwrap_or(Utf8Path::new(".")))
    }

    /// Like [`Templates::load`], reading overrides only from inside `within` (no link on the
    /// way to one, the folder included, may lead out of it).
    pub fn load_within(dir: Option<&Utf8Path>, within: &Utf8Path) -> Result<Self> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_keep_trailing_newline(true);
        env.set_fuel(Some(FUEL));
        // A model's or a person's text never makes structure in the files rendered (md_text).
        env.add_filter("bullet", |v: String| crate::md_text::bullet(&v));
        env.add_filter("prose", |v: String| crate::md_text::prose(&v));
        let mut overrides = HashMap::new();
        for (name, src) in BUILTIN {
            let over = dir.map(|d| (d, d.join(name))).filter(|(_, p)| p.is_file());
            let (src, origin) = match &over {
                // A link in the overrides folder (or the folder itself) may not lead out.
                Some((_, p)) => (agentloop_io::fs::read_inside(within, p)?.unwrap_or_default(), p.to_string()),
                None => (src.to_string(), format!("built-in {name}")),
            };
            env.add_template_owned(name.to_string(), src)
                .context_as(Kind::Usage, format!("template {origin} does not parse"))?;
            if let Some((_, p)) = over {
                overrides.insert(*name, p.to_string());
            }
        }
        Ok(Templates { env: std::sync::Arc::new(env), overrides, renderer: std::sync::Mutex::new(None) })
    }

    pub fn render<S: Serialize>(&self, name: &str, ctx: S) -> Result<String> {
        self.env.get_template(name).context(format!("template {name}"))?;
        let over = self.overrides.get(name);
        let ctx = minijinja::Value::from_serialize(ctx);
        // An override is code from whoever wrote the workspace: it renders under a memory
        // budget. A built-in builds nothing but its output (capped) from values already held,
        // so it renders here, without the hand-off to another thread.
        let rendered = match over {
            Some(_) => self.render_budgeted(name, ctx),
            None => render_capped(&self.env, name, ctx).map(Some),
        };
        let out = rendered.map_err(|e| match (e.kind(), over) {
            (ErrorKind::OutOfFuel, Some(path)) => Error::config(format!(
                "template {path} used more than {FUEL} steps of template work (nested loops?) and was stopped"
            ))
            .with_hint(format!("fix the override or remove {path} to use the built-in {name}")),
            (ErrorKind::OutOfFuel, None) => Error::failure(format!(
                "built-in template {name} used more than {FUEL} steps of template work on this workspace's files"
            ))
            .with_hint("the lists it shows (memory.md, plan.md) may be far longer than a run writes; shorten them"),
            (ErrorKind::WriteFailure, Some(path)) => {
                Error::config(format!("template {path} wrote more than {} MiB and was stopped", MAX_OUTPUT >> 20))
                    .with_hint(format!("fix the override or remove {path} to use the built-in {name}"))
            }
            (ErrorKind::WriteFailure, None) => Error::failure(format!(
                "built-in template {name} wrote more than {} MiB from this workspace's files",
                MAX_OUTPUT >> 20
            ))
            .with_hint("the files it quotes (context.md, memory.md, plan.md) may be far larger than a run writes"),
            (_, Some(path)) => Error::usage(format!("template {name} failed to render"))
                .with_hint(format!("check the override {path}; undefined variables are errors"))
                .with_source(e),
            (_, None) => Error::usage(format!("template {name} failed to render"))
                .with_hint("check the override in the templates folder; undefined variables are errors")
                .with_source(e),
        })?;
        let out = match out {
            Some(out) => out,
            None => {
                let held = format!(
                    "held more than {} MiB of memory or worked longer than {}s",
                    MAX_MEMORY >> 20,
                    MAX_RENDER_TIME.as_secs()
                );
                return Err(match over {
                    Some(path) => Error::config(format!("template {path} {held} and was stopped")).with_hint(format!(
                        "a string that doubles (`{{% set s = s ~ s %}}`) or a filter looped over a large one outgrows any bound in a few steps; fix the override or remove {path} to use the built-in {name}"
                    )),
                    None => Error::failure(format!("built-in template {name} {held} on this workspace's files"))
                        .with_hint("the files it quotes (context.md, memory.md, plan.md) may be far larger than a run writes"),
                });
            }
        };
        // minijinja writes only whole UTF-8 strings.
        String::from_utf8(out).context(format!("template {name} wrote text that is not UTF-8"))
    }

    /// Renders on the renderer thread, holding at most [`MAX_MEMORY`]: the output, or `None`
    /// when the render went over (that thread is then left asleep, holding what it took, and
    /// the next render starts another).
    fn render_budgeted(
        &self,
        name: &str,
        ctx: minijinja::Value,
    ) -> std::result::Result<Option<Vec<u8>>, minijinja::Error> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::mpsc::RecvTimeoutError;
        let over = std::sync::Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let until = std::time::Instant::now() + MAX_RENDER_TIME;
        let job = Job { name: name.to_string(), ctx, over: over.clone(), until, done: tx };
        // Held while the render runs: one render at a time on this set of templates.
        let mut renderer = self.renderer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let no_thread = |e| minijinja::Error::new(ErrorKind::InvalidOperation, format!("no thread to render on: {e}"));
        let sent = match renderer.as_ref() {
            Some(r) => r.send(job).map_err(|e| e.0),
            None => Err(job),
        };
        if let Err(job) = sent {
            // The first render, or the renderer is gone: start one.
            let r = start_renderer(self.env.clone()).map_err(no_thread)?;
            r.send(job).map_err(|_| no_thread(std::io::Error::other("the renderer stopped")))?;
            *renderer = Some(r);
        }
        loop {
            match rx.recv_timeout(std::time::Duration::from_millis(20)) {
                Ok(r) => return r.map(Some),
                // Over its memory or its time (a render that works on without allocating is
                // given up on a second after its deadline, and left to finish alone).
                Err(RecvTimeoutError::Timeout)
                    if over.load(Ordering::SeqCst)
                        || std::time::Instant::now() > until + std::time::Duration::from_secs(1) =>
                {
                    *renderer = None;
                    return Ok(None);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    *renderer = None;
                    return Err(minijinja::Error::new(ErrorKind::InvalidOperation, "the render stopped unexpectedly"));
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::markdown::{Item, Memory, Plan};

    /// Renders share one thread, and a render that goes over its memory budget leaves that
    /// thread asleep: the render after it gets a thread of its own and succeeds.
    #[test]
    fn a_render_after_one_that_went_over_gets_a_new_thread() {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(dir.path()).unwrap();
        let doubling = format!("{{% set s = 'abcdefgh' %}}{}{{{{ s|length }}}}\n", "{% set s = s ~ s %}".repeat(40));
        std::fs::write(root.join("prompt-frame.j2"), doubling).unwrap();
        let tpl = Templates::load(Some(root)).unwrap();
        let mem = serde_json::to_value(Memory { goal: "g".into(), ..Default::default() }).unwrap();
        assert!(tpl.render("memory.md.j2", &mem).unwrap().contains("g"));
        let e = tpl.render("prompt-frame.j2", serde_json::json!({})).unwrap_err();
        assert!(e.message.contains("held more than 256 MiB"), "{}", e.message);
        for _ in 0..2 {
            assert!(tpl.render("memory.md.j2", &mem).unwrap().contains("g"));
        }
    }

    /// The built-ins on lists far longer than a run writes stay well inside [`FUEL`]: about 11
    /// steps an item (the `bullet` filter included), so the budget holds lists of about a
    /// million items.
    #[test]
    fn the_builtins_on_long_lists_use_a_small_part_of_the_fuel() {
        let tpl = Templates::load(None).unwrap();
        let n = 10_000;
        let lines: Vec<String> = (0..n).map(|i| format!("step {i} reflect: continue")).collect();
        let items: Vec<Item> =
            (0..n).map(|i| Item { done: i % 2 == 0, text: format!("item {i}"), ..Default::default() }).collect();
        let mem = Memory {
            dod: items.clone(),
            constraints: lines.clone(),
            assumptions: lines.clone(),
            facts: lines.clone(),
            log: lines.clone(),
            ..Default::default()
        };
        let plan = Plan { outline: items, completed: lines, ..Default::default() };
        for (name, ctx) in
            [("memory.md.j2", serde_json::to_value(&mem).unwrap()), ("plan.md.j2", crate::markdown::plan_view(&plan))]
        {
            let t = tpl.env.get_template(name).unwrap();
            let captured = t.render_captured(ctx).unwrap();
            let (used, _) = captured.state().fuel_levels().unwrap();
            assert!(used < FUEL / 15, "{name} used {used} steps for {n} items of each list");
        }
    }

    #[test]
    fn an_override_that_runs_out_names_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = camino::Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).unwrap();
        std::fs::write(
            root.join("plan.md.j2"),
            "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}",
        )
        .unwrap();
        let tpl = Templates::load(Some(&root)).unwrap();
        let e = tpl.render("plan.md.j2", serde_json::json!({})).unwrap_err();
        assert_eq!(e.kind, agentloop_types::error::Kind::Config);
        assert!(e.message.starts_with(&format!("template {root}/plan.md.j2 used more than")), "{}", e.message);
        // The others are still the built-ins, and render.
        assert!(tpl.render("decisions.md.j2", serde_json::json!({})).is_ok());
        // One step can write 100 MB: what a render writes is capped too.
        std::fs::write(root.join("plan.md.j2"), r#"{% for a in range(100) %}{{ "x" * 10000000 }}{% endfor %}"#)
            .unwrap();
        let tpl = Templates::load(Some(&root)).unwrap();
        let e = tpl.render("plan.md.j2", serde_json::json!({})).unwrap_err();
        assert_eq!(e.kind, agentloop_types::error::Kind::Config);
        assert_eq!(e.message, format!("template {root}/plan.md.j2 wrote more than 64 MiB and was stopped"));
        // A few steps can build gigabytes that are never written: what a render holds is capped.
        std::fs::write(
            root.join("plan.md.j2"),
            format!("{{% set s = 'xxxxxxxx' %}}{}{{{{ s|length }}}}", "{% set s = s ~ s %}".repeat(40)),
        )
        .unwrap();
        let tpl = Templates::load(Some(&root)).unwrap();
        let e = tpl.render("plan.md.j2", serde_json::json!({})).unwrap_err();
        assert_eq!(e.kind, agentloop_types::error::Kind::Config);
        assert_eq!(
            e.message,
            format!(
                "template {root}/plan.md.j2 held more than 256 MiB of memory or worked longer than 5s and was stopped"
            )
        );
        // The next render has its own budget.
        assert!(tpl.render("decisions.md.j2", serde_json::json!({})).is_ok());
    }
}
