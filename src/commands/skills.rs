//! `agentloop skills gen|list|show|check|fetch`.

use agentloop_engine::settings::Ctx;
use agentloop_tools::skills::{self, SkillSet};
use agentloop_types::error::{Error, Result};
use camino::{Utf8Path, Utf8PathBuf};
use clap::{Subcommand, ValueEnum};
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq)]
pub enum Format {
    Md,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Print the tool + skill catalog (skills.md) on stdout.
    ///
    /// The same catalog the Plan prompt shows; byte-identical between runs.
    /// Example: agentloop skills gen > skills.md
    #[command(verbatim_doc_comment)]
    Gen {
        #[arg(long, value_enum, default_value_t = Format::Md)]
        format: Format,
        /// Write to FILE (atomically) instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<Utf8PathBuf>,
        /// Also read Ductile plugin manifests (DIR/<plugin>/manifest.yaml, manifest_spec
        /// ductile.plugin) into the catalog, without a running gateway (as ductile.manifests).
        #[arg(long, value_name = "DIR")]
        ductile_manifests: Option<Utf8PathBuf>,
    },
    /// List the skills found (name, format, location, description).
    List,
    /// Show one skill: metadata, instructions and resource files.
    Show { name: String },
    /// Validate skills against the spec; print every problem. Exit 1 when any error is found.
    ///
    /// Judged as the spec's reference validator (skills-ref) judges: what the spec refuses but
    /// still loads (an unknown frontmatter key, a description over 1024 characters) is a
    /// warning that also makes the check fail. PATH may be a skill folder, its SKILL.md, a
    /// folder of skills, or omitted for every configured folder.
    Check { path: Option<Utf8PathBuf> },
    /// Fetch a skill's instructions from an http(s) URL into the user skills folder.
    ///
    /// Writes <skills>/<ID>/skill.md and skill.json and registers it in registry.json.
    /// Example: agentloop skills fetch moltbook https://example.com/skill.md
    #[command(verbatim_doc_comment)]
    Fetch {
        id: String,
        url: String,
        /// Skills folder to write into (default: $XDG_CONFIG_HOME/agentloop/skills).
        #[arg(long, value_name = "DIR")]
        dir: Option<Utf8PathBuf>,
    },
    /// Turn a done run's successful path into a skill: skills/NAME/ in the workspace.
    ///
    /// One model call drafts the description, the triggers and the steps from the run's trace;
    /// agentloop adds the tools used, the Definition of Done the run met, the run it came from
    /// and references/facts.md (the run's key facts), redacts secrets, and checks the skill as
    /// `skills check` does before writing it. A later run whose goal holds a trigger is offered
    /// the skill at Frame. Refuses a run that did not end done and a folder that exists.
    ///
    /// Exit codes: 0 written, 1 the draft fails the check, 2 no such run or not done, 5 provider.
    ///
    /// Example: agentloop -w ~/digest skills learn --run last morning-digest
    #[command(verbatim_doc_comment)]
    Learn {
        /// The skill's name (lowercase letters, digits, hyphens).
        name: String,
        /// The run to learn from (an id, a unique prefix, or `last`; default: the current run).
        #[arg(long, value_name = "ID")]
        run: Option<String>,
    },
}

pub fn run(ctx: Ctx, cmd: SkillsCommand) -> Result<u8> {
    match cmd {
        SkillsCommand::Gen { format, output, ductile_manifests } => {
            write_catalog(&ctx, format, output, ductile_manifests)
        }
        SkillsCommand::List => list(&ctx),
        SkillsCommand::Show { name } => show(&ctx, &name),
        SkillsCommand::Check { path } => check(&ctx, path),
        SkillsCommand::Fetch { id, url, dir } => fetch(&ctx, &id, &url, dir),
        SkillsCommand::Learn { name, run } => super::learn::learn(&ctx, &name, run.as_deref()),
    }
}

/// `skills gen`: the catalog of the skills found (with --ductile-manifests, of that folder's
/// manifests too), to stdout or a file.
fn write_catalog(
    ctx: &Ctx,
    format: Format,
    output: Option<Utf8PathBuf>,
    ductile_manifests: Option<Utf8PathBuf>,
) -> Result<u8> {
    let cfg = ctx.config();
    let p = &ctx.printer;
    let mut with_manifests;
    let cfg = match ductile_manifests {
        Some(dir) => {
            with_manifests = cfg.clone();
            with_manifests.ductile.manifests = Some(agentloop_engine::settings::from_cwd(&dir));
            &with_manifests
        }
        None => cfg,
    };
    let set = SkillSet::load(cfg, &ctx.ws.root);
    warn_problems(p, &set.problems);
    let text = agentloop_tools::catalog::of_config(cfg, &ctx.ws.root, &set, format == Format::Json || p.json)?;
    match output {
        Some(path) => agentloop_io::fs::write_atomic(&path, text.as_bytes())?,
        None => p.out(&text),
    }
    Ok(0)
}

/// `skills list`: one line per skill found (name, format, location, description).
fn list(ctx: &Ctx) -> Result<u8> {
    let p = &ctx.printer;
    let set = SkillSet::load(ctx.config(), &ctx.ws.root);
    warn_problems(p, &set.problems);
    if p.json {
        p.json_value(&agentloop_types::json::to_value(&set.skills));
    } else {
        for s in &set.skills {
            p.outln(&format!(
                "{:<24} {:<12} {:<40} {}",
                s.name,
                s.format,
                s.location,
                s.description.chars().take(80).collect::<String>()
            ));
        }
    }
    Ok(0)
}

/// `skills show`: one skill's fields and body, after its own warnings.
fn show(ctx: &Ctx, name: &str) -> Result<u8> {
    let p = &ctx.printer;
    let set = SkillSet::load(ctx.config(), &ctx.ws.root);
    let s = set.get(name).ok_or_else(|| {
        Error::usage(format!("no skill named `{name}`")).with_hint("`agentloop skills list` shows the skills found")
    })?;
    // The shown skill's own warnings (a value ignored, a field the spec refuses).
    let own: Vec<skills::Problem> = set
        .problems
        .iter()
        .filter(|x| s.dir.as_deref().is_some_and(|d| Utf8Path::new(&x.file).parent() == Some(d)))
        .cloned()
        .collect();
    warn_problems(p, &own);
    if p.json {
        let view = agentloop_engine::schema::SkillView { skill: s.clone(), body: s.body.clone() };
        p.json_value(&agentloop_types::json::to_value(&view));
        return Ok(0);
    }
    p.outln(&format!(
        "name         {}\nformat       {}\nlocation     {}\ndescription  {}",
        s.name, s.format, s.location, s.description
    ));
    if let Some(v) = &s.version {
        p.outln(&format!("version      {v}"));
    }
    if let Some(l) = &s.license {
        p.outln(&format!("license      {l}"));
    }
    if !s.triggers.is_empty() {
        p.outln(&format!("triggers     {}", s.triggers.join(", ")));
    }
    if !s.requires_tools.is_empty() || !s.requires_env.is_empty() {
        p.outln(&format!("requires     tools: {}; env: {}", s.requires_tools.join(", "), s.requires_env.join(", ")));
    }
    if !s.files.is_empty() {
        p.outln(&format!("files        {}", s.files.join(", ")));
    }
    p.outln(&format!("\n{}", s.body));
    Ok(0)
}

/// `skills check`: each skill valid, loading against the spec, or not loading, and a count;
/// exit 1 when any problem fails the check.
fn check(ctx: &Ctx, path: Option<Utf8PathBuf>) -> Result<u8> {
    let p = &ctx.printer;
    let (skills, problems) = skills_to_check(ctx, path.as_deref())?;
    let errors = problems.iter().filter(|x| x.is_error()).count();
    let failing = problems.iter().filter(|x| x.fails_check()).count();
    // A skill that loads but breaks the spec is not counted valid: `skills check` judges
    // as the reference validator does.
    let against_spec = |s: &skills::Skill| {
        s.dir.as_deref().is_some_and(|d| problems.iter().any(|x| x.spec && Utf8Path::new(&x.file).parent() == Some(d)))
    };
    let (valid, loaded): (Vec<&skills::Skill>, Vec<&skills::Skill>) = skills.iter().partition(|s| !against_spec(s));
    if p.json {
        let entry = |s: &&skills::Skill| json!({"name": s.name, "location": s.location});
        p.json_value(&json!({
            "valid": valid.iter().map(entry).collect::<Vec<_>>(),
            "against_spec": loaded.iter().map(entry).collect::<Vec<_>>(),
            "problems": problems,
        }));
    } else {
        for s in &valid {
            p.outln(&format!("ok      {} ({})", s.name, s.location));
        }
        for s in &loaded {
            p.outln(&format!("loads   {} ({}), against the Agent Skills spec", s.name, s.location));
        }
        for prob in &problems {
            p.outln(&prob.to_string());
        }
        let warnings = problems.len() - errors;
        let spec = failing - errors;
        p.info(&format!(
            "{} valid, {} error{}, {} warning{}{}",
            valid.len(),
            errors,
            if errors == 1 { "" } else { "s" },
            warnings,
            if warnings == 1 { "" } else { "s" },
            if spec > 0 { format!(" ({spec} against the Agent Skills spec)") } else { String::new() }
        ));
    }
    Ok(if failing > 0 { 1 } else { 0 })
}

/// The skills `skills check` judges, with their problems: those of the folder (or SKILL.md)
/// named, else those the workspace loads.
fn skills_to_check(ctx: &Ctx, path: Option<&Utf8Path>) -> Result<(Vec<skills::Skill>, Vec<skills::Problem>)> {
    let Some(dir) = path else {
        let set = SkillSet::load(ctx.config(), &ctx.ws.root);
        return Ok((set.skills, set.problems));
    };
    // A SKILL.md named directly stands for its folder, as the reference validator takes it.
    let named_file = dir.is_file() && dir.file_name().is_some_and(|n| n.eq_ignore_ascii_case("skill.md"));
    let dir = match dir.parent() {
        Some(parent) if named_file => {
            if parent.as_str().is_empty() {
                Utf8Path::new(".")
            } else {
                parent
            }
        }
        _ => dir,
    };
    if !dir.is_dir() {
        return Err(Error::usage(format!("{dir} is not a folder"))
            .with_hint("name a skill folder, its SKILL.md, or a folder of skills"));
    }
    let (skills, mut problems) = skills::scan(dir, skills::Limits::of(ctx.config()));
    // Checking a folder that holds no skill at all is a mistake worth an error
    // (the reference validator says the same of a folder with no SKILL.md).
    if skills.is_empty() && problems.is_empty() {
        problems.push(skills::Problem::nothing_found(dir));
    }
    Ok((skills, problems))
}

/// Problems met while loading, on stderr, each worded once: a skill with an error is skipped.
fn warn_problems(p: &agentloop_io::output::Printer, problems: &[skills::Problem]) {
    for prob in problems {
        if prob.is_error() {
            p.warn(&format!("{} (skipped)", prob.detail()));
        } else {
            p.warn(&prob.detail());
        }
    }
}

fn fetch(ctx: &Ctx, id: &str, url: &str, dir: Option<Utf8PathBuf>) -> Result<u8> {
    let root = match dir {
        Some(d) => d,
        None => skills::user_dir().ok_or_else(|| {
            Error::usage("cannot find the user config folder").with_hint("set XDG_CONFIG_HOME or HOME, or pass --dir")
        })?,
    };
    let fetched = fetch_into(ctx.config(), id, url, &root, Utf8Path::new(""))?;
    ctx.printer.outln(fetched.dir.as_str());
    ctx.printer.info(&format!(
        "fetched skill `{id}` into {} and registered it in {}",
        fetched.dir,
        root.join("registry.json")
    ));
    Ok(0)
}

/// A skill written by [`fetch_into`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct Fetched {
    pub id: String,
    pub description: String,
    pub dir: Utf8PathBuf,
}

/// Fetches a skill's instructions from an http(s) URL (under the `tools.http` policy, at most
/// 1 MiB) into `<root>/<id>/` (skill.md + skill.json) and registers it in `<root>/registry.json`.
/// The folders below `base` (`sub`, then `<id>/`) are entered without following a link, so a
/// linked `skills/` in a served root cannot send the files elsewhere.
pub fn fetch_into(
    cfg: &agentloop_config::config::Config,
    id: &str,
    url: &str,
    base: &Utf8Path,
    sub: &Utf8Path,
) -> Result<Fetched> {
    let root = &base.join(sub);
    skills::valid_name(&id.replace('_', "-")).map_err(|e| Error::usage(format!("skill id {e}")))?;
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(Error::usage(format!("`{url}` is not an http(s) URL"))
            .with_hint("skills fetch only downloads over http or https"));
    }
    let mut policy = cfg.tools.http.clone();
    policy.max_bytes = policy.max_bytes.min(1024 * 1024);
    let f = agentloop_tools::tools::fetch::fetch(&policy, "GET", url, &[], None, cfg.tools.timeout.0).map_err(|f| {
        Error::failure(format!("cannot fetch {url}: {}", f.message)).with_cause(agentloop_types::error::Cause::Upstream)
    })?;
    if f.status >= 400 {
        return Err(Error::failure(format!("cannot fetch {url}: HTTP {}", f.status))
            .with_cause(agentloop_types::error::Cause::Upstream));
    }
    if f.truncated {
        return Err(Error::failure(format!("{url} is larger than 1 MiB; not a skill file"))
            .with_cause(agentloop_types::error::Cause::Upstream));
    }
    let text = String::from_utf8(f.body).map_err(|e| {
        Error::failure(format!("{url} is not UTF-8 text"))
            .with_cause(agentloop_types::error::Cause::Upstream)
            .with_source(e)
    })?;
    let skill_dir = root.join(id);
    let open = |rel: &Utf8Path| -> Result<agentloop_io::fs::Folder> { agentloop_io::fs::Folder::create(base, rel) };
    let skill_folder = open(&sub.join(id))?;
    let top = open(sub)?;
    let description = skills::parse_skill_md(&text, Utf8Path::new(url), None)
        .ok()
        .map(|(s, _)| s.description)
        .or_else(|| {
            text.lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("---"))
                .map(|l| l.chars().take(200).collect())
        })
        .unwrap_or_else(|| format!("Skill fetched from {url}"));
    let meta = json!({
        "id": id, "name": id, "version": "1.0.0", "description": description,
        "source": {"type": "url", "url": url, "last_fetched": agentloop_types::clock::now_rfc3339()},
        "files": [{"name": "skill.md", "url": url}],
        "triggers": [], "requires": {"tools": [], "env_vars": []}, "enabled": true
    });
    skill_folder.write_atomic("skill.md", text.as_bytes())?;
    skill_folder.write_atomic("skill.json", (agentloop_types::json::to_string_pretty(&meta) + "\n").as_bytes())?;
    let reg_path = root.join("registry.json");
    let mut reg: Value = match agentloop_io::fs::read_optional(&reg_path)? {
        Some(t) => serde_json::from_str(&t).map_err(|e| {
            Error::data(format!("cannot read {reg_path}")).with_hint("fix or remove registry.json").with_source(e)
        })?,
        None => json!({"version": "1.0.0", "skills": []}),
    };
    let list =
        reg["skills"].as_array_mut().ok_or_else(|| Error::data(format!("{reg_path}: `skills` must be a list")))?;
    list.retain(|e| e.get("id").and_then(Value::as_str) != Some(id));
    list.push(json!({"id": id, "path": format!("{id}/"), "enabled": true}));
    reg["last_updated"] = json!(agentloop_types::clock::now_rfc3339());
    top.write_atomic("registry.json", (agentloop_types::json::to_string_pretty(&reg) + "\n").as_bytes())?;
    Ok(Fetched { id: id.to_string(), description, dir: skill_dir })
}
