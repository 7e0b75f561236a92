//! The one tool registry. It feeds the Plan prompt, `skills gen`, `tools list` and Act, so they
//! can never disagree about which tools exist and what their parameters are. The built-ins come
//! from one table ([`builtin::BUILTINS`]); external, MCP and Ductile tools join after them.
//!
//! Invariants: arguments are validated against the tool's JSON Schema before anything runs; a
//! tool never panics the loop or returns a Rust error for a failed action — every outcome is a
//! [`ToolResult`] with status ok|error; output over the cap goes to artifacts/ and the result
//! carries its first lines plus a note with the file_read call that reads on; what a result
//! says names workspace-relative paths only.

pub mod allowed;
pub mod builtin;
pub mod fetch;
pub mod files;
pub mod grep;
pub mod hosts;
pub mod html;
pub mod http_cache;
pub mod memory;
pub mod net;
pub mod paging;
pub mod sandbox;
pub mod shell;
pub mod tool;

pub use crate::tool_env::ToolEnv;
use agentloop_config::config::Config;
pub use agentloop_types::tool_spec::{SideEffect, ToolResult, ToolSpec};
use camino::Utf8Path;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

pub struct Registry {
    specs: Vec<ToolSpec>,
    /// MCP servers' tools and the servers running for this command.
    pub mcp: crate::mcp::Hub,
    /// Ductile plugins' tools (run as jobs through the gateway).
    pub ductile: crate::ductile::Hub,
}

/// How far building the registry may reach for tool lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Start an MCP server whose list is not cached; ask Ductile's API (running a token command).
    Start,
    /// As `Start`, and a person at this command may be asked to sign in to an MCP server that
    /// asks for authorization (`mcp call --login`).
    SignIn,
    /// Caches and manifests only: no program runs, nothing is sent.
    CachesOnly,
}

impl Registry {
    /// Built-ins, the shell tool when enabled, external tools declared in config and the tools
    /// of the configured MCP servers (from their cache; see [`crate::mcp`]). Fails only on an
    /// MCP configuration mistake; a server that cannot be listed is a warning on stderr.
    pub fn new(cfg: &Config, root: &Utf8Path) -> agentloop_types::error::Result<Self> {
        Self::load(cfg, root, Reach::Start)
    }

    /// The registry, reaching servers only as far as `reach` allows: read-only commands
    /// (`tools list`, `skills gen`, `run --dry-run`) list MCP and Ductile tools from their caches
    /// and never start a program or call out.
    pub fn load(cfg: &Config, root: &Utf8Path, reach: Reach) -> agentloop_types::error::Result<Self> {
        Self::load_logging(cfg, root, reach, crate::mcp::client::Logs::Workspace(root.to_path_buf()))
    }

    /// [`Registry::load`] with MCP servers' logs kept where `logs` says (a command outside a
    /// run keeps them out of the current folder).
    pub fn load_logging(
        cfg: &Config,
        root: &Utf8Path,
        reach: Reach,
        logs: crate::mcp::client::Logs,
    ) -> agentloop_types::error::Result<Self> {
        // Before any tool can run, what the configuration holds is a secret to every write.
        crate::held_secrets::register(cfg);
        let mut specs = builtin::specs(cfg, root);
        external_tools(cfg, &mut specs);
        let source = match reach {
            Reach::Start | Reach::SignIn => crate::mcp::Source::CacheFirst,
            Reach::CachesOnly => crate::mcp::Source::CacheOnly,
        };
        let mcp = crate::mcp::Hub::load_with(cfg, root, source, logs, reach == Reach::SignIn)?;
        join(&mut specs, &mcp.warnings, mcp.specs(), "MCP");
        let ductile = crate::ductile::Hub::load(cfg, root, reach != Reach::CachesOnly)?;
        join(&mut specs, &ductile.warnings, ductile.specs(), "Ductile");
        let registry = Registry { specs, mcp, ductile };
        registry.warn_unmatched(cfg);
        Ok(registry)
    }

    pub fn all(&self) -> &[ToolSpec] {
        &self.specs
    }

    pub fn canonical(name: &str) -> &str {
        agentloop_types::tool_spec::canonical(name)
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        let name = Self::canonical(name);
        self.specs.iter().find(|s| s.name == name)
    }

    /// The tools Act may run under this config (`allowed_tools`, see [`allowed`]; `finish` is
    /// always allowed).
    pub fn allowed<'a>(&'a self, cfg: &Config) -> Vec<&'a ToolSpec> {
        self.specs.iter().filter(|s| self.is_allowed(cfg, &s.name)).collect()
    }

    /// Checks that a tool exists, is allowed and its arguments match its schema.
    pub fn check(&self, cfg: &Config, name: &str, args: &Value) -> Result<&ToolSpec, Refused> {
        let Some(spec) = self.get(name) else {
            let available = self.allowed(cfg).iter().map(|s| s.name.clone()).collect();
            return Err(Refused::Unknown { name: name.to_string(), available });
        };
        if !self.is_allowed(cfg, &spec.name) {
            return Err(if cfg.tools.is_disabled(&spec.name) {
                Refused::Disabled(name.to_string())
            } else {
                Refused::NotAllowed(name.to_string())
            });
        }
        validate(&spec.parameters, args).map_err(Refused::Arguments)?;
        Ok(spec)
    }

    /// Runs one tool call: check, execute with its timeout, move oversized output to artifacts/.
    pub fn call(&self, env: &ToolEnv, name: &str, args: &Value) -> ToolResult {
        let spec = match self.check(env.config, name, args) {
            Ok(s) => s.clone(),
            Err(e) => return ToolResult::err(e.to_string(), false),
        };
        // A tool that panics is a recorded tool error, never a crash that wedges the run; it runs
        // on its own thread with a large stack so deep but legal input (nested HTML) fits.
        let run = || match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.dispatch(env, &spec, args))) {
            Ok(r) => r,
            Err(p) => {
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown cause".into());
                ToolResult::err(format!("tool `{}` failed inside agentloop: {what}", spec.name), false)
            }
        };
        let mut result = std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(TOOL_STACK)
                .spawn_scoped(s, run)
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        ToolResult::err(format!("tool `{}` failed inside agentloop", spec.name), false)
                    })
                })
                .unwrap_or_else(|e| ToolResult::err(format!("cannot start tool `{}`: {e}", spec.name), true))
        });
        // A response that echoes a key is redacted before anything records it.
        result.output = agentloop_io::redact::redact_tool_output(&result.output);
        result.error = result.error.as_deref().map(agentloop_io::redact::redact_tool_output);
        agentloop_io::redact::redact_value(&mut result.metadata);
        if result.output.chars().count() > spec.output_cap {
            spill(env, &spec, &mut result);
        }
        result
    }

    fn dispatch(&self, env: &ToolEnv, spec: &ToolSpec, args: &Value) -> ToolResult {
        if let Some(b) = builtin::find(env.config, &spec.name) {
            return (b.run)(&tool::Call { env, registry: self, spec }, args);
        }
        match spec.name.as_str() {
            mcp if self.mcp.handles(mcp) => self.mcp.call(env, mcp, args),
            plugin if self.ductile.handles(plugin) => self.ductile.call(env, plugin, args),
            other => ToolResult::err(
                format!("`{other}` is an external tool: only `agentloop handle` can request it (it emits agentic.tool_request.{other})"),
                false,
            ),
        }
    }
}

/// Tools declared in `tools.external` (run by the router in event mode).
fn external_tools(cfg: &Config, specs: &mut Vec<ToolSpec>) {
    let (t, cap) = (cfg.tools.timeout.0, cfg.tools.output_cap);
    for (name, ext) in &cfg.tools.external {
        if specs.iter().any(|s| &s.name == name) {
            continue;
        }
        // Recursion guard: agentloop's own plugin is no tool unless ductile.max_depth allows.
        if *name == cfg.ductile.self_name && cfg.ductile.max_depth == 0 {
            agentloop_io::output::debug_note(&format!(
                "external tool `{name}` is agentloop itself (ductile.self_name) and ductile.max_depth is 0: left out"
            ));
            continue;
        }
        specs.push(ToolSpec {
            name: name.clone(),
            description: if ext.description.is_empty() {
                format!("External tool {name}.")
            } else {
                ext.description.clone()
            },
            parameters: ext.parameters.clone().unwrap_or_else(|| json!({"type": "object"})),
            side_effect: SideEffect::External,
            timeout: t,
            output_cap: cap,
        });
    }
}

/// Adds another source's tools (MCP servers, Ductile plugins); a name already taken is left out.
fn join(specs: &mut Vec<ToolSpec>, warnings: &[String], more: &[ToolSpec], what: &str) {
    for w in warnings {
        agentloop_io::output::warning(w);
    }
    for m in more {
        if specs.iter().any(|s| s.name == m.name) {
            agentloop_io::output::warning(&format!("{what} tool {} is left out: a tool of that name exists", m.name));
            continue;
        }
        specs.push(m.clone());
    }
}

/// Stack for a tool's thread: deep recursion in a parser must not overflow it.
const TOOL_STACK: usize = 64 * 1024 * 1024;

/// Compiled validators by schema: a step validates the plan answer and the action's
/// arguments against the same few schemas, and compiling one costs far more than looking it up.
#[allow(clippy::type_complexity)]
static VALIDATORS: std::sync::Mutex<Vec<(u32, Value, std::sync::Arc<jsonschema::Validator>)>> =
    std::sync::Mutex::new(Vec::new());

/// A fingerprint of a schema's JSON text (CRC-32), computed without building the text.
fn fingerprint(schema: &Value) -> u32 {
    let mut h = crc32fast::Hasher::new();
    agentloop_model::model::json_pieces(schema, |b| h.update(b));
    h.finalize()
}

/// Why a tool call cannot run, before it runs: what the model (or `tools call`) is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// No tool has this name; `available` are the ones allowed.
    Unknown {
        name: String,
        available: Vec<String>,
    },
    /// `tools.disabled` or `tools.<name>.enabled: false` turns it off.
    Disabled(String),
    /// Not in `allowed_tools`.
    NotAllowed(String),
    Arguments(SchemaError),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Unknown { name, available } => {
                write!(f, "unknown tool `{name}`; available: {}", available.join(", "))
            }
            Refused::Disabled(name) => {
                write!(f, "tool `{name}` is disabled (tools.disabled or tools.{name}.enabled: false)")
            }
            Refused::NotAllowed(name) => write!(f, "tool `{name}` is not in allowed_tools"),
            Refused::Arguments(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Refused {}

pub use agentloop_types::tool_spec::SchemaError;

/// The compiled validator for a schema (kept: at most 32, the oldest dropped first).
pub fn validator(schema: &Value) -> Result<std::sync::Arc<jsonschema::Validator>, SchemaError> {
    let key = fingerprint(schema);
    let mut kept = VALIDATORS.lock().unwrap_or_else(|p| p.into_inner());
    // The fingerprint finds it; the schema itself must match too.
    if let Some(pos) = kept.iter().position(|(k, v, _)| *k == key && v == schema) {
        let hit = kept.remove(pos);
        let v = hit.2.clone();
        kept.push(hit);
        return Ok(v);
    }
    let v = std::sync::Arc::new(jsonschema::validator_for(schema).map_err(|e| SchemaError::Invalid(e.to_string()))?);
    if kept.len() >= 32 {
        kept.remove(0);
    }
    kept.push((key, schema.clone(), v.clone()));
    Ok(v)
}

/// Validates arguments against a JSON Schema; the error names the field.
pub fn validate(schema: &Value, args: &Value) -> Result<(), SchemaError> {
    validate_with(&*validator(schema)?, args)
}

/// Validates arguments with a compiled validator; the error names the field.
pub fn validate_with(validator: &jsonschema::Validator, args: &Value) -> Result<(), SchemaError> {
    let errors: Vec<(String, String)> = validator
        .iter_errors(args)
        .map(|e| {
            let at = e.instance_path().to_string();
            // A choice outside a set names the whole set (the crate's text names only two).
            let what = match e.kind() {
                jsonschema::error::ValidationErrorKind::Enum { options } => {
                    let all: Vec<String> = options.as_array().into_iter().flatten().map(Value::to_string).collect();
                    format!("{} is not one of {}", e.instance(), all.join(", "))
                }
                // A known pattern is said in words (a model cannot read a regular expression).
                jsonschema::error::ValidationErrorKind::Pattern { pattern }
                    if pattern == agentloop_types::tool_spec::CHECKABLE_ITEM =>
                {
                    format!("{} {}", e.instance(), agentloop_types::tool_spec::CHECKABLE_ITEM_MEANS)
                }
                _ => e.to_string(),
            };
            (at.trim_start_matches('/').replace('/', "."), what)
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SchemaError::Mismatch(errors))
    }
}

/// Moves output over the cap into artifacts/ and keeps its first lines inline, with a note
/// naming the file_read call that reads on from there.
fn spill(env: &ToolEnv, spec: &ToolSpec, result: &mut ToolResult) {
    let rel = format!("artifacts/{}.txt", env.artifact_stem);
    let full = std::mem::take(&mut result.output);
    // Never through a link: a symlinked artifacts/ is refused (fs::Folder), not written into.
    let write = agentloop_io::fs::write_in(env.root, camino::Utf8Path::new(&rel), full.as_bytes());
    let excerpt_budget = spec.output_cap.min(2000);
    let page = paging::window(&full, 1, None, excerpt_budget).unwrap_or(paging::Page {
        text: String::new(),
        first: 1,
        last: 0,
        total: 0,
        cut: None,
    });
    let chars = full.chars().count();
    let mut out = page.text.clone();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    match write {
        Ok(()) => {
            // The call reads on after the whole lines shown; a cut first line is read again.
            let next = if page.cut.is_some() { 1 } else { page.last + 1 };
            let shown = match (page.cut, page.last) {
                (Some(_), _) => "the start of line 1 is shown above".to_string(),
                (None, 1) => "line 1 is shown above".to_string(),
                (None, n) => format!("lines 1-{n} are shown above"),
            };
            let budget = paging::budget(spec.output_cap, &rel);
            let call = paging::next_call(&rel, next, paging::lines_that_fit(&full, next, budget));
            result.output = format!(
                "{out}\n[output truncated: {chars} characters, {} lines in total; {shown}. The full output is in {rel}; read on with {call}]",
                page.total
            );
            result.artifacts.push(rel);
        }
        Err(e) if e.cause == Some(agentloop_types::error::Cause::Link) => {
            // Said plainly, so whoever reads the run learns why and what to do.
            result.output = format!(
                "{out}\n[output truncated at {chars} characters; could not save the rest to {rel}: artifacts/ is a symbolic link, and agentloop never writes through links (replace it with a real folder)]"
            );
        }
        Err(_) => {
            // The error names the machine path; the model gets the workspace-relative one.
            result.output =
                format!("{out}\n[output truncated at {chars} characters; could not save the rest to {rel}]");
        }
    }
}

/// skill_read: activates a skill by reading its instructions or one of its files.
pub struct SkillRead;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillReadArgs {
    /// Skill name from the catalog
    #[schemars(length(min = 1))]
    name: String,
    /// A file in the skill (default: SKILL.md)
    file: Option<String>,
}

impl tool::Tool for SkillRead {
    const NAME: &'static str = "skill_read";
    const SIDE_EFFECT: SideEffect = SideEffect::Read;
    type Args = SkillReadArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "Activate a skill: read its instructions (SKILL.md) or one of its files. Its instructions then stay in view while the run uses it.".into()
    }
    fn run(call: &tool::Call, args: SkillReadArgs) -> ToolResult {
        let (env, name) = (call.env, args.name.as_str());
        if let Some(skill) = env.skills.get(name) {
            let missing: Vec<&str> = skill
                .requires_tools
                .iter()
                .map(String::as_str)
                .filter(|t| call.registry.get(t).is_none() || !call.registry.is_allowed(env.config, t))
                .collect();
            if !missing.is_empty() {
                return ToolResult::err(
                    format!(
                        "skill `{name}` requires the tool(s) {} which are not available or not in allowed_tools",
                        missing.join(", ")
                    ),
                    false,
                );
            }
        }
        match env.skills.read(name, args.file.as_deref(), env.config.tools.max_file_bytes) {
            Ok((text, meta)) => ToolResult::ok(text, meta),
            Err(e) => ToolResult::err(e.to_string(), false),
        }
    }
}

/// finish: ends the run with the final answer.
pub struct Finish;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishArgs {
    /// The final outcome, for the person who asked
    #[schemars(length(min = 1))]
    summary: String,
    /// Files produced
    artifacts: Option<Vec<String>>,
}

impl tool::Tool for Finish {
    const NAME: &'static str = "finish";
    const SIDE_EFFECT: SideEffect = SideEffect::None;
    type Args = FinishArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "Finish the run with the final answer once the Definition of Done is met (alias: submit_response).".into()
    }
    fn run(call: &tool::Call, args: FinishArgs) -> ToolResult {
        finish(call.env, args)
    }
}

/// Ends the run. Artifacts are normalised to workspace-relative paths (`./a.md` and an
/// absolute path inside the workspace become `a.md`) and must lie inside the workspace.
fn finish(env: &ToolEnv, args: FinishArgs) -> ToolResult {
    let summary = args.summary;
    let listed: Vec<&str> = args.artifacts.iter().flatten().map(String::as_str).collect();
    let mut artifacts: Vec<String> = Vec::new();
    if !listed.is_empty() {
        let sb = match sandbox::Sandbox::open(env, sandbox::Access::Workspace) {
            Ok(s) => s,
            Err(e) => return ToolResult::err(e.to_string(), false),
        };
        for p in listed {
            let inside = sb.locate(p).ok().filter(|t| t.root.is_workspace && !t.rel.as_str().is_empty());
            let Some(t) = inside else {
                let what =
                    if Utf8Path::new(p).is_absolute() { "an absolute path".to_string() } else { format!("`{p}`") };
                return ToolResult::err(
                    format!("argument `artifacts`: {what} is not a file inside the workspace; list only files the run produced there, e.g. artifacts/report.md"),
                    false,
                );
            };
            // It must not lead out through a symlink either (a missing file is reported as is).
            if let Err(e) = t.root.dir.metadata(t.rel_str()) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return ToolResult::err(
                        format!("argument `artifacts`: {}", sandbox::io_error(&t.shown(), &e)),
                        false,
                    );
                }
            }
            let shown = t.shown();
            if !artifacts.contains(&shown) {
                artifacts.push(shown);
            }
        }
    }
    let mut r = ToolResult::ok(summary, json!({"finish": true}));
    r.artifacts = artifacts;
    r
}
