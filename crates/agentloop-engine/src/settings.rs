//! Resolve step: merges flags, environment, config files and defaults into one validated
//! [`Config`], so commands never see raw strings.

use crate::trust::Refusal;
use agentloop_config::config::{self, Config, Layer, Resolved, Source};
use agentloop_io::output::ColorChoice;
use agentloop_io::output::Printer;
use agentloop_types::error::{Error, Result};
use agentloop_workspace::workspace::Workspace;
use camino::{Utf8Path, Utf8PathBuf};
use serde_json::{json, Map, Value};

/// The global flags' values: the raw input of the resolve step (every command takes them). The
/// binary parses them (`cli::global`); the meaning of each is its flag's `--help`.
#[derive(Debug, Clone, Default)]
pub struct Global {
    pub workspace: Utf8PathBuf,
    pub quiet: bool,
    pub verbose: bool,
    pub json: bool,
    pub color: ColorChoice,
    pub wait: Option<u64>,
    pub config: Option<Utf8PathBuf>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub script: Option<Utf8PathBuf>,
    pub record: Option<Utf8PathBuf>,
    pub stream: bool,
    pub agent: Option<String>,
    pub skills_dir: Vec<Utf8PathBuf>,
    pub skills: Option<Vec<String>>,
    pub max_steps: Option<u32>,
    pub max_reframes: Option<u32>,
    pub timeout: Option<String>,
    pub max_tokens: Option<u64>,
    pub max_cost: Option<f64>,
    pub allowed_tools: Option<Vec<String>>,
    /// Set for commands that only read: an `AGENTLOOP_*` variable that is no valid key is left
    /// out with a warning instead of refused. Not a flag.
    pub read_only: bool,
}

/// Everything a command needs, resolved once: the workspace, the effective config (with the
/// source of every key), the printer and how long to wait for the workspace lock. Commands never
/// see the raw flags; one that needs the same settings for another workspace or agent asks for
/// them with [`Ctx::rebuild`].
pub struct Ctx {
    pub printer: Printer,
    pub ws: Workspace,
    pub resolved: Resolved,
    lock_wait: Option<std::time::Duration>,
    flags: Global,
    /// Keys the workspace's configuration set and may not (it is not trusted); already taken out
    /// of `resolved`.
    pub refused: Vec<Refusal>,
}

impl Ctx {
    /// The context of a run another door drives (`serve`, the worker, `handle`): its workspace
    /// and resolved configuration, no flags of its own.
    pub fn for_run(ws: Workspace, config: Config, printer: Printer) -> Ctx {
        let resolved = Resolved { config, value: serde_json::Value::Null, sources: Default::default() };
        Ctx { printer, ws, resolved, lock_wait: None, flags: Global::default(), refused: Vec::new() }
    }

    /// The agent profile the flags name (`--agent`), if any.
    pub fn agent_flag(&self) -> Option<&str> {
        self.flags.agent.as_deref()
    }
    pub fn config(&self) -> &Config {
        &self.resolved.config
    }
    /// `--wait[=SECS]`: how long to wait for another process's lock (None: fail at once).
    pub fn lock_wait(&self) -> Option<std::time::Duration> {
        self.lock_wait
    }
    /// For commands that act (run a phase, call a tool, start a server): an untrusted
    /// workspace's refused keys are an error naming each, not something to go on without.
    pub fn require_trusted(&self) -> Result<()> {
        if self.refused.is_empty() {
            return Ok(());
        }
        Err(crate::trust::refusal_error(&self.refused, &self.ws.root))
    }
    /// For read-only commands: one warning naming the keys left out.
    pub fn warn_refused(&self) {
        if !self.refused.is_empty() {
            self.printer.warn(&crate::trust::refusal_warning(&self.refused, &self.ws.root));
        }
    }
    /// The same resolution with some flags changed (another workspace, agent or script).
    pub fn rebuild(&self, change: impl FnOnce(&mut Global)) -> Result<Ctx> {
        let mut flags = self.flags.clone();
        change(&mut flags);
        build(&flags)
    }
}

/// A path given on the command line: relative to the current folder, not the workspace.
pub fn from_cwd(p: &Utf8Path) -> Utf8PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    std::env::current_dir()
        .ok()
        .and_then(|d| Utf8PathBuf::from_path_buf(d).ok())
        .map(|d| d.join(p))
        .unwrap_or_else(|| p.to_path_buf())
}

/// The command-line flags as a configuration layer.
pub fn flag_layer(g: &Global) -> Layer {
    let abs = |p: &Utf8PathBuf| from_cwd(p);
    let mut v = Value::Object(Map::new());
    let mut set = |path: &[&str], val: Value| {
        config::set_path(&mut v, &path.iter().map(|s| s.to_string()).collect::<Vec<_>>(), val);
    };
    if let Some(p) = &g.provider {
        set(&["llm", "provider"], json!(p));
    }
    if let Some(m) = &g.model {
        set(&["llm", "model"], json!(m));
    }
    if let Some(u) = &g.base_url {
        set(&["llm", "base_url"], json!(u));
    }
    if let Some(s) = &g.script {
        set(&["llm", "script"], json!(abs(s)));
        if g.provider.is_none() {
            set(&["llm", "provider"], json!("scripted"));
        }
    }
    if let Some(r) = &g.record {
        set(&["llm", "record"], json!(abs(r)));
    }
    if g.stream {
        set(&["llm", "stream"], json!(true));
    }
    if let Some(a) = &g.agent {
        set(&["agent"], json!(a));
    }
    if !g.skills_dir.is_empty() {
        set(&["skills", "dirs"], json!(g.skills_dir.iter().map(abs).collect::<Vec<_>>()));
    }
    if let Some(only) = &g.skills {
        set(&["skills", "only"], json!(only));
    }
    if let Some(n) = g.max_steps {
        set(&["max_steps"], json!(n));
    }
    if let Some(n) = g.max_reframes {
        set(&["max_reframes"], json!(n));
    }
    if let Some(t) = &g.timeout {
        set(&["timeout"], json!(t));
    }
    if let Some(n) = g.max_tokens {
        set(&["max_tokens"], json!(n));
    }
    if let Some(c) = g.max_cost {
        set(&["max_cost_usd"], json!(c));
    }
    if let Some(t) = &g.allowed_tools {
        set(&["allowed_tools"], json!(t));
    }
    Layer { source: Source::CommandLine, value: v }
}

/// All layers for a workspace, lowest precedence first. `request` is event mode's `config`
/// object. A workspace that is not trusted may only narrow: a key of its config or agent profile
/// that would widen is refused here (see [`crate::trust`]).
pub fn layers(g: &Global, root: &Utf8Path, request: Option<Layer>) -> Result<Vec<Layer>> {
    let (layers, refused) = gather(g, root, request)?;
    if !refused.is_empty() {
        return Err(crate::trust::refusal_error(&refused, root));
    }
    Ok(layers)
}

/// The layers, with the keys an untrusted workspace may not set taken out and returned.
fn gather(g: &Global, root: &Utf8Path, request: Option<Layer>) -> Result<(Vec<Layer>, Vec<Refusal>)> {
    let user_dir = config::user_config_dir();
    let user = match &user_dir {
        Some(dir) => match config::find_in(dir, "config") {
            Some(p) => config::load_file(&p, Source::UserConfig)?,
            None => None,
        },
        None => None,
    };
    let workspace = match config::find_in(root, "agentloop") {
        Some(p) => config::load_file(&p, Source::Workspace)?,
        None => None,
    };
    let extra = match &g.config {
        Some(p) => Some(config::load_file(p, Source::ConfigFlag)?.ok_or_else(|| {
            Error::config(format!("config file {p} does not exist")).with_hint("check the --config path")
        })?),
        None => None,
    };
    let (env, skipped) = config::env_layer(g.read_only)?;
    for config::SkippedVar { var, error: e, unknown } in skipped {
        // The list of valid keys is for the error; the warning stays one readable line.
        let what = e.message.split(", expected one of").next().unwrap_or_default();
        let near = match &e.cause {
            Some(agentloop_types::error::Cause::ConfigKey(k)) => {
                k.near.as_deref().map(|n| format!(" (did you mean {}?)", config::env_name(n))).unwrap_or_default()
            }
            _ => String::new(),
        };
        if unknown {
            agentloop_io::output::warning(&format!("{what}; {var} names no configuration key, so it is ignored{near}"));
        } else {
            agentloop_io::output::warning(&format!(
                "{what}; this command only reads, so it goes on without {var}{near}"
            ));
        }
    }
    let flags = flag_layer(g);
    // What the user's own config, flags and environment say: the measure an untrusted
    // workspace may only narrow.
    let trusted_only: Vec<Layer> = user.iter().chain(&extra).chain(&request).chain([&env, &flags]).cloned().collect();
    let base = config::resolve(&trusted_only)?.config;
    let trusted = crate::trust::is_trusted(root, &base)?;
    let mut refused = Vec::new();
    let mut out: Vec<Layer> = user.into_iter().collect();
    if let Some(mut layer) = workspace {
        if !trusted {
            layer.validate()?;
            refused.extend(crate::trust::sanitize(&mut layer, &base, root));
        }
        out.push(layer);
    }
    out.extend(extra);
    out.extend(request);
    // The agent profile sits above the files and below env and flags.
    let mut probe = out.clone();
    probe.push(env.clone());
    probe.push(flags.clone());
    let agent = config::resolve(&probe)?.config.agent;
    if let Some(name) = agent {
        let (mut layer, from_workspace) = load_profile(&name, root, user_dir.as_deref(), trusted)?;
        if from_workspace && !trusted {
            layer.validate()?;
            refused.extend(crate::trust::sanitize(&mut layer, &base, root));
        }
        out.push(layer);
    }
    out.push(env);
    out.push(flags);
    Ok((out, refused))
}

/// The profile's layer, and whether it came from the workspace (not the user's own folder).
/// A trusted workspace's `agents/` comes first; an untrusted one's only after the user's own
/// folder, so it cannot stand in for the user's profile of the same name and drop what that
/// profile restricts.
fn load_profile(name: &str, root: &Utf8Path, user_dir: Option<&Utf8Path>, trusted: bool) -> Result<(Layer, bool)> {
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(Error::usage(format!("agent profile name `{name}` is not a plain name")));
    }
    let mut dirs: Vec<(Utf8PathBuf, bool)> = vec![(root.join("agents"), true)];
    if let Some(u) = user_dir {
        let own = (u.join("agents"), false);
        if trusted {
            dirs.push(own);
        } else {
            dirs.insert(0, own);
        }
    }
    for (d, from_workspace) in &dirs {
        if let Some(p) = config::find_in(d, name) {
            let Some(layer) = config::load_file(&p, Source::AgentProfile)? else {
                continue;
            };
            return Ok((layer, *from_workspace));
        }
    }
    Err(Error::config(format!(
        "agent profile `{name}` not found (looked for {name}.yaml in {})",
        dirs.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>().join(", ")
    ))
    .with_hint("create agents/NAME.yaml with config keys and a system_prompt, or drop --agent"))
}

/// Reads `system_prompt_file` (the agent's identity text) into the system prompt, before any
/// `system_prompt` given as text. A file in the workspace is read as the workspace's own, whoever
/// named it: a link on the way may not lead out (its text goes to the model).
pub fn load_identity(cfg: &mut Config, root: &Utf8Path) -> Result<()> {
    let Some(file) = cfg.system_prompt_file.clone() else { return Ok(()) };
    let path = agentloop_io::fs::resolve_in(root, &file);
    let text = agentloop_io::fs::read_named(root, &file)
        .map_err(|e| Error { message: format!("system_prompt_file: {}", e.message), ..e })?
        .ok_or_else(|| {
            Error::config(format!("invalid configuration at key `system_prompt_file`: {path} does not exist"))
                .with_hint("give a file relative to the workspace, or drop the key")
        })?;
    let text = text.trim();
    cfg.system_prompt = Some(match cfg.system_prompt.take().filter(|s| !s.trim().is_empty()) {
        Some(extra) => format!("{text}\n\n{extra}"),
        None => text.to_string(),
    });
    Ok(())
}

/// `prompts: lean` asks Reflect and Plan apart, and gives each tool's parameters in the answer's
/// schema: a `llm.fuse_phases: true` or `llm.tool_schemas: catalog` beside it cannot be
/// honoured, and is refused rather than ignored.
fn check_prompts(cfg: &Config) -> Result<()> {
    if cfg.prompts != agentloop_config::config::Prompts::Lean {
        return Ok(());
    }
    if cfg.llm.fuse_phases == agentloop_config::config::FusePhases::On {
        return Err(Error::config(
            "invalid configuration: `llm.fuse_phases: true` cannot apply with `prompts: lean`, which asks Reflect and Plan apart",
        )
        .with_hint("set llm.fuse_phases to auto or false, or prompts to full"));
    }
    if cfg.llm.tool_schemas == agentloop_config::config::ToolSchemas::Catalog {
        return Err(Error::config(
            "invalid configuration: `llm.tool_schemas: catalog` cannot apply with `prompts: lean`, whose answer schema holds a small model to each tool's parameters",
        )
        .with_hint("set llm.tool_schemas to auto or answer, or prompts to full"));
    }
    // Lean Reflect's answer is a union at its top level: a local server's grammar takes it;
    // Anthropic's API and OpenAI's strict mode do not.
    let anthropic =
        agentloop_model::model::resolve_provider(cfg).is_ok_and(|p| p == agentloop_config::config::Provider::Anthropic);
    if anthropic || agentloop_model::model::strict_schemas(cfg) {
        let why = if anthropic { "the Anthropic API" } else { "a provider's strict schema mode (`llm.strict`)" };
        return Err(Error::config(format!(
            "invalid configuration: `prompts: lean` is for a model on a local server; {why} does not take its answer schemas"
        ))
        .with_hint("use prompts: full with this provider (or llm.strict: false for an OpenAI-compatible server)"));
    }
    Ok(())
}

/// The resolve step for a folder of runs (`handle`, `serve`): the same layers as [`build`] under
/// `root`, plus a request's own layer, with relative paths taken from `root` and the agent's
/// identity file loaded.
pub fn resolve_under(g: &Global, root: &Utf8Path, request: Option<Layer>) -> Result<Resolved> {
    let mut r = config::resolve(&layers(g, root, request)?)?;
    crate::tool_settings::check(&r.config, root)?;
    check_prompts(&r.config)?;
    r.config = absolutize(r.config, root, &r.sources);
    load_identity(&mut r.config, root)?;
    Ok(r)
}

pub fn build(g: &Global) -> Result<Ctx> {
    let printer = Printer::new(g.quiet, g.verbose, g.json, g.color);
    let ws = Workspace::new(g.workspace.clone());
    // A run folder under a root (`ROOT/runs/ID/`, as `serve`, the worker and event mode make
    // them, and as a workspace archives its runs) is configured by its root, as those doors
    // configure it: any door goes on with it on the same configuration.
    let owner = owning_root(&ws.root);
    let cfg_root = owner.clone().unwrap_or_else(|| ws.root.clone());
    let (layers, refused) = gather(g, &cfg_root, None)?;
    let mut resolved = config::resolve(&layers)?;
    crate::tool_settings::check(&resolved.config, &cfg_root)?;
    check_prompts(&resolved.config)?;
    if let Some(root) = &owner {
        resolved.config = absolutize(std::mem::take(&mut resolved.config), root, &resolved.sources);
        let shared_skills = root.join("skills");
        if !resolved.config.skills.dirs.contains(&shared_skills) {
            resolved.config.skills.dirs.insert(0, shared_skills);
        }
    }
    load_identity(&mut resolved.config, &ws.root)?;
    // The log exists only for a workspace that does (a mistyped -w creates nothing).
    if ws.root.is_dir() || resolved.config.logging.file.as_ref().is_some_and(|f| f.is_absolute()) {
        if let Err(e) = agentloop_io::log::init(&resolved.config.logging, &ws.root) {
            // Logging is diagnostics: the command goes on without it, and says why.
            agentloop_io::output::warning(&format!("logging.file: {}; logging is off", e.detail()));
        }
    }
    agentloop_io::log::debug(&format!(
        "agentloop {} {:?} in {}; config sources: {}",
        env!("CARGO_PKG_VERSION"),
        std::env::args().skip(1).collect::<Vec<_>>(),
        ws.root,
        resolved
            .sources
            .iter()
            .filter(|(_, s)| s.is_given())
            .map(|(k, s)| format!("{k} from {s}"))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    Ok(Ctx { printer, ws, resolved, lock_wait: g.wait.map(std::time::Duration::from_secs), flags: g.clone(), refused })
}

/// The root a run folder belongs to: `ROOT` for a folder `ROOT/runs/ID` that has no
/// configuration of its own when `ROOT` has one. None for any other folder.
pub fn owning_root(ws: &Utf8Path) -> Option<Utf8PathBuf> {
    if config::find_in(ws, "agentloop").is_some() {
        return None;
    }
    let abs = std::path::absolute(ws).ok().and_then(|p| Utf8PathBuf::from_path_buf(p).ok())?;
    let runs = abs.parent()?;
    let root = runs.parent()?;
    (runs.file_name() == Some("runs") && config::find_in(root, "agentloop").is_some()).then(|| root.to_path_buf())
}

/// Makes the relative paths of a root's configuration absolute, taken from `root`, so they mean
/// the same from every run's workspace under it (`serve` and event mode keep runs in
/// `<root>/runs/<id>/`). An agent sandbox's own default keeps the run's own folders
/// (`artifacts/`, `state/`) relative: they are each run's, in its own folder.
pub fn absolutize(mut c: Config, root: &Utf8Path, sources: &config::Sources) -> Config {
    let abs = |p: &mut Utf8PathBuf| {
        if p.is_relative() {
            *p = root.join(&*p);
        }
    };
    if let Some(s) = c.llm.script.as_mut() {
        abs(s);
    }
    if let Some(s) = c.llm.record.as_mut() {
        abs(s);
    }
    if let Some(d) = c.templates_dir.as_mut() {
        abs(d);
    }
    if let Some(d) = c.ductile.manifests.as_mut() {
        abs(d);
    }
    c.tools.read_paths.iter_mut().for_each(abs);
    let sandbox_default = sources.get("tools.write_paths") == Some(&config::Source::AgentSandbox);
    let runs_own = |p: &Utf8PathBuf| sandbox_default && config::RUN_OWN_FOLDERS.contains(&p.as_str());
    c.tools.write_paths.iter_mut().filter(|p| !runs_own(p)).for_each(abs);
    c.skills.dirs.iter_mut().for_each(abs);
    c.tools.absolutize_tool_paths(root);
    c
}
