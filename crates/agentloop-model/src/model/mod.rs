//! The model interface every phase uses, and provider selection.
//!
//! A phase sends a system prompt, messages, tool definitions (JSON Schema) and a tool choice; it
//! gets back text, tool calls (id, name, JSON arguments), the stop reason, usage (input, output,
//! cache-write, cache-read tokens), the model id, the request id and the latency. Two wire
//! protocols cover nearly every provider (Anthropic Messages, OpenAI Chat Completions); the
//! scripted model replays a file for tests, demos and reproducible runs.
//!
//! API keys are read from the environment or `api_key_cmd` and never written to the trace,
//! the workspace or an error message.

pub mod anthropic;
pub mod http;
pub mod json_text;
pub mod openai;
pub mod pricing;
pub mod scripted;
pub mod sse;
pub mod stream;
#[cfg(feature = "otel")]
pub mod traced;
/// Without the `otel` feature no call is wrapped in a span; the run's span is the no-op one.
#[cfg(not(feature = "otel"))]
pub mod traced {
    pub fn run_span(
        cfg: &agentloop_config::config::Config,
        run_id: &str,
        agent: Option<&str>,
        stored: &mut Option<String>,
    ) -> crate::otel::RunSpan {
        crate::otel::RunSpan::start(cfg, ("", None), run_id, agent, stored)
    }
}
pub mod wire;

use agentloop_types::error::{Kind, ResultExt};
use agentloop_types::trace::SCRIPTED;

use agentloop_config::config::{Config, Provider};
use agentloop_types::error::{Error, Result};
use agentloop_types::trace::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Serialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    /// The strict-mode form of `parameters` (every property required, optional ones nullable,
    /// objects closed), when the schema can be said that way; providers with a strict schema
    /// mode send it when `llm.strict` allows.
    #[serde(skip)]
    pub strict: Option<Value>,
    /// The compiled validator of `parameters`, made on first use and shared by clones.
    #[serde(skip)]
    pub validator: ValidatorMemo,
    /// The parameters of each tool an answer may name, by tool, where `parameters` does not carry
    /// them (`llm.tool_schemas: catalog`): a named tool's arguments are mended against them.
    #[serde(skip)]
    pub tool_params: Option<std::sync::Arc<serde_json::Map<String, Value>>>,
}

/// A validator compiled once per [`ToolDef`] (its clones share it). The schema is fixed once a
/// ToolDef is made, so the validator always matches it.
#[derive(Clone, Default)]
pub struct ValidatorMemo(
    pub  std::sync::Arc<
        std::sync::OnceLock<
            std::result::Result<std::sync::Arc<jsonschema::Validator>, agentloop_types::tool_spec::SchemaError>,
        >,
    >,
);

impl std::fmt::Debug for ValidatorMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "ValidatorMemo(compiled)" } else { "ValidatorMemo(empty)" })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must call this tool.
    Tool(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    ToolCall(ToolCall),
    ToolResult { id: String, content: String, is_error: bool },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Message { role: Role::User, parts: vec![Part::Text(text.into())] }
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    /// Which phase asks (frame, plan, reflect, test); used by the scripted model and records.
    pub phase: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    pub tool_choice: ToolChoice,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    /// When the run's wall-clock budget ends; a call still waiting then is cut off.
    pub deadline: Option<std::time::Instant>,
}

impl Request {
    /// A call outside the loop's phases (`dream`, `dream --explore`, `skills learn`): one user
    /// message and one tool the model must call, with the configured temperature.
    pub fn forced(phase: &str, system: &str, prompt: String, tool: &ToolDef, max_tokens: u32, cfg: &Config) -> Self {
        Request {
            phase: phase.into(),
            system: system.into(),
            messages: vec![Message::user(prompt)],
            tools: vec![tool.clone()],
            tool_choice: ToolChoice::Tool(tool.name.clone()),
            max_tokens,
            temperature: cfg.llm.temperature,
            deadline: None,
        }
    }

    /// Bytes of prompt text sent, for the trace (shows that prompts stay bounded).
    pub fn prompt_bytes(&self) -> u64 {
        let mut n = self.system.len();
        for m in &self.messages {
            for p in &m.parts {
                n += match p {
                    Part::Text(t) => t.len(),
                    Part::ToolCall(c) => json_len(&c.arguments),
                    Part::ToolResult { content, .. } => content.len(),
                };
            }
        }
        n += self.tools.iter().map(|t| json_len(&t.parameters) + t.description.len()).sum::<usize>();
        n as u64
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    /// Set when the provider sent arguments that are not a JSON object (the raw text is kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_arguments: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Response {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub stop_reason: String,
    pub usage: Usage,
    pub model: String,
    /// A replayed answer's `model:` note (the scripted model only): which model it was
    /// recorded from. The call is still `scripted` and unpriced.
    pub recorded_from: Option<String>,
    /// The provider's request id for support (its response header, else the body's `id`).
    pub request_id: Option<String>,
    /// The completion's own id, from the response body (OpenAI's and Anthropic's `id`): what
    /// `gen_ai.response.id` names, which a request-id header is not.
    pub response_id: Option<String>,
    pub latency_ms: u64,
    /// The request form that produced this answer (OpenAI-compatible servers: [`wire::Form`]).
    pub wire_form: Option<&'static str>,
}

/// A piece of a model's answer as it arrives (`llm.stream`): text, or a fragment of a tool
/// call's JSON arguments. The pieces of one call, joined, are its final text and arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    Text(String),
    ToolArguments {
        /// The call's position in the answer.
        index: usize,
        id: String,
        name: String,
        fragment: String,
    },
}

/// Where live pieces go while a call is under way.
pub type Live<'a> = &'a mut dyn FnMut(&Delta);

/// What one request form got from the server (`models test`).
#[derive(Debug, Clone)]
pub struct Probe {
    pub form: wire::Form,
    /// The HTTP status; None when the exchange failed before one arrived.
    pub status: Option<u16>,
    /// Whether the forced answer came back (a tool call, or JSON read out of the text).
    pub answered: bool,
    /// The rejection, or what came back instead of the answer.
    pub detail: String,
    pub response: Option<Response>,
}

/// The phase name the fused Reflect + Plan call is made under (`phases::fused`: transcript,
/// progress, a scripted model's queue, a recording's entries).
pub const FUSED_PHASE: &str = "reflect+plan";

pub trait Model {
    /// Provider name (anthropic, openai, ollama, scripted).
    fn provider(&self) -> &str;
    /// Model id requested.
    fn model(&self) -> &str;
    /// Sends the request and returns the whole answer; with `llm.stream` on, the pieces of the
    /// answer go to `live` as they arrive (the response is the same either way).
    fn complete(&mut self, req: &Request, live: Live) -> Result<Response>;
    /// Replay position (scripted model only), persisted in state.json so a resumed run goes on
    /// where the last committed phase left off.
    fn cursor(&self) -> Value {
        Value::Null
    }
    fn seek(&mut self, _cursor: &Value) {}
    /// The request form of the last answer (OpenAI-compatible servers), for the trace.
    fn wire_form(&self) -> Option<&'static str> {
        None
    }
    /// Sends `req` once in every request form the provider negotiates between; None for a
    /// provider with one form.
    fn probe(&mut self, _req: &Request) -> Option<Result<Vec<Probe>>> {
        None
    }
    /// The URL requests go to; None for a model that is not a server (scripted).
    fn endpoint(&self) -> Option<&str> {
        None
    }
    /// Whether a corrective turn goes as a tool result (true) or as a user message (false):
    /// `llm.tool_messages`, with `auto` resolved for this provider and server.
    fn tool_messages(&self) -> bool {
        true
    }
    /// Records what `models test` found: whether a `role: tool` message reaches the model.
    fn learned_tool_results(&mut self, _reach: bool) {}
    /// Whether `llm.fuse_phases: auto` fuses Reflect and the next Plan for this model: every
    /// model answers the fused call but a scripted one whose script is written per phase.
    fn fuses_by_default(&self) -> bool {
        true
    }
}

/// Wraps a model and appends every response to a JSONL file the scripted model can replay.
pub struct Recorder {
    inner: Box<dyn Model>,
    path: camino::Utf8PathBuf,
}

impl Model for Recorder {
    fn provider(&self) -> &str {
        self.inner.provider()
    }
    fn endpoint(&self) -> Option<&str> {
        self.inner.endpoint()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn complete(&mut self, req: &Request, live: Live) -> Result<Response> {
        let r = self.inner.complete(req, live)?;
        let line = agentloop_io::redact::redact(&scripted::record_line(&req.phase, &r));
        agentloop_io::fs::append_line(&self.path, &line)?;
        Ok(r)
    }
    fn cursor(&self) -> Value {
        self.inner.cursor()
    }
    fn seek(&mut self, c: &Value) {
        self.inner.seek(c)
    }
    fn wire_form(&self) -> Option<&'static str> {
        self.inner.wire_form()
    }
    fn probe(&mut self, req: &Request) -> Option<Result<Vec<Probe>>> {
        self.inner.probe(req)
    }
    fn tool_messages(&self) -> bool {
        self.inner.tool_messages()
    }
    fn learned_tool_results(&mut self, reach: bool) {
        self.inner.learned_tool_results(reach)
    }
    fn fuses_by_default(&self) -> bool {
        self.inner.fuses_by_default()
    }
}

/// Resolves `auto` and builds the model named by the config.
pub fn from_config(cfg: &Config, root: &camino::Utf8Path) -> Result<Box<dyn Model>> {
    let provider = resolve_provider(cfg)?;
    let model: Box<dyn Model> = match provider {
        Provider::Scripted => {
            let Some(script) = &cfg.llm.script else {
                return Err(Error::usage("the scripted provider needs a script file")
                    .with_hint("pass --script FILE or set llm.script"));
            };
            let mut s = scripted::Scripted::load(&agentloop_io::fs::resolve_in(root, script).to_string().into())?;
            s.stream = cfg.llm.stream;
            Box::new(s)
        }
        Provider::Anthropic => Box::new(anthropic::Anthropic::new(cfg)?),
        Provider::Openai | Provider::Ollama => Box::new(openai::OpenAi::new(cfg, provider)?),
        // `provider_and_why` resolves `auto` or fails; never reached.
        Provider::Auto => return Err(Error::usage("no model provider is configured")),
    };
    let model: Box<dyn Model> = match &cfg.llm.record {
        Some(path) => Box::new(Recorder { inner: model, path: agentloop_io::fs::resolve_in(root, path) }),
        None => model,
    };
    // Without the feature, never (said once when the environment asks for spans).
    if !crate::otel::wanted(cfg) {
        return Ok(model);
    }
    #[cfg(feature = "otel")]
    let model: Box<dyn Model> = Box::new(traced::Traced { inner: model, capture: crate::otel::capture(cfg) });
    Ok(model)
}

/// The name a run's model is known by before anything is built (no key read, no key command
/// run): what an estimate prices; `scripted` for a replay.
pub fn name_for_estimate(cfg: &Config) -> Result<String> {
    let (provider, _) = provider_and_why(cfg)?;
    Ok(match provider {
        Provider::Scripted => SCRIPTED.to_string(),
        p => model_and_why(cfg, &p).0,
    })
}

/// The model a provider will be asked for: `llm.model`, else the provider's default.
pub fn model_and_why(cfg: &Config, provider: &Provider) -> (String, String) {
    if let Some(m) = &cfg.llm.model {
        return (m.clone(), "llm.model names it".into());
    }
    let default = match provider {
        Provider::Anthropic => anthropic::DEFAULT_MODEL,
        Provider::Ollama => openai::OLLAMA_MODEL,
        Provider::Openai => openai::DEFAULT_MODEL,
        Provider::Scripted | Provider::Auto => {
            return ("(from the script)".into(), "the scripted model answers from its file".into())
        }
    };
    (default.into(), format!("the default for {provider}; set llm.model or --model to choose"))
}

pub fn resolve_provider(cfg: &Config) -> Result<Provider> {
    provider_and_why(cfg).map(|(p, _)| p)
}

/// The provider `llm.provider` resolves to (never `auto`), and why (what `config show` prints
/// for `auto`).
/// Whether the answer schemas go to the provider in their strict form (`llm.strict`: `auto` means
/// OpenAI's own API), so a schema strict mode cannot take must be refused before a run starts.
pub fn strict_schemas(cfg: &Config) -> bool {
    match cfg.llm.strict {
        agentloop_config::config::Strict::Off => false,
        agentloop_config::config::Strict::On => true,
        agentloop_config::config::Strict::Auto => {
            matches!(provider_and_why(cfg), Ok((Provider::Openai, _)))
                && cfg.llm.base_url.as_deref().unwrap_or(openai::DEFAULT_BASE).contains("api.openai.com")
        }
    }
}

pub fn provider_and_why(cfg: &Config) -> Result<(Provider, String)> {
    if cfg.llm.provider != Provider::Auto {
        return Ok((cfg.llm.provider, "llm.provider names it".into()));
    }
    let auto = |p: Provider, why: &str| Ok((p, format!("llm.provider is auto and {why}")));
    if cfg.llm.script.is_some() {
        return auto(Provider::Scripted, "llm.script is set");
    }
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.trim().is_empty());
    if set("ANTHROPIC_API_KEY") {
        auto(Provider::Anthropic, "ANTHROPIC_API_KEY is set")
    } else if set("OPENAI_API_KEY") {
        auto(Provider::Openai, "OPENAI_API_KEY is set and ANTHROPIC_API_KEY is not")
    } else if set("OLLAMA_HOST") {
        auto(Provider::Ollama, "OLLAMA_HOST is set and neither ANTHROPIC_API_KEY nor OPENAI_API_KEY is")
    } else {
        Err(Error::usage("no model provider is configured").with_hint(
            "set ANTHROPIC_API_KEY (Anthropic), OPENAI_API_KEY (OpenAI) or OLLAMA_HOST (e.g. http://localhost:11434 for Ollama), \
             or pass --provider openai --base-url URL for another OpenAI-compatible server, or --script FILE for the offline scripted model",
        ))
    }
}

/// Runs a configured command (`llm.api_key_cmd`, `ductile.api_token_cmd`) for a secret: its
/// trimmed stdout, registered for redaction; stderr goes to the terminal (a password prompt).
pub fn secret_from_command(cmd: &[String], key: &str) -> Result<Option<String>> {
    let Some((prog, args)) = cmd.split_first() else {
        return Err(Error::config(format!("invalid configuration at key `{key}`: the command is empty"))
            .with_hint("give a command as a list, e.g. [pass, show, anthropic]"));
    };
    let out = std::process::Command::new(prog)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .context_as(Kind::Config, format!("{key}: cannot run `{prog}`"))?;
    if !out.status.success() {
        return Err(Error::config(format!("{key}: `{prog}` exited with {}", out.status)));
    }
    let secret = String::from_utf8_lossy(&out.stdout).trim().to_string();
    agentloop_io::redact::register(&secret);
    Ok(Some(secret).filter(|k| !k.is_empty()))
}

/// The API key: `llm.api_key_cmd`, else `llm.api_key_env`, else the provider's usual variable.
pub fn api_key(cfg: &Config, default_env: &str) -> Result<Option<String>> {
    if let Some(cmd) = &cfg.llm.api_key_cmd {
        return secret_from_command(cmd, "llm.api_key_cmd");
    }
    let var = cfg.llm.api_key_env.as_deref().unwrap_or(default_env);
    if let Ok(v) = std::env::var(var) {
        agentloop_io::redact::register(&v);
    }
    Ok(std::env::var(var).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty()))
}

/// Removes a secret from a message before it is shown or stored.
pub fn redact(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(s) if s.len() >= 4 => text.replace(s, "[REDACTED]"),
        _ => text.to_string(),
    }
}

/// Finds the first JSON object in text (bare, or in a ``` fence), for servers without tools.
pub fn json_in_text(text: &str) -> Option<Value> {
    let t = text.trim();
    if let Ok(v @ Value::Object(_)) = json_text::parse(t) {
        return Some(v);
    }
    // Try each `{` in turn: the first balanced span that parses as an object wins.
    let mut from = 0;
    while let Some(off) = t[from..].find('{') {
        let start = from + off;
        if let Some(end) = balanced_end(&t[start..]) {
            if let Ok(v @ Value::Object(_)) = json_text::parse(&t[start..start + end]) {
                return Some(v);
            }
        }
        from = start + 1;
    }
    None
}

/// Length of the balanced `{...}` span at the start of `s`, honouring JSON strings.
fn balanced_end(s: &str) -> Option<usize> {
    let mut depth = 0i32;
    let mut in_str = false;
    let mut esc = false;
    for (i, c) in s.char_indices() {
        if in_str {
            match c {
                _ if esc => esc = false,
                '\\' => esc = true,
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Feeds a value's JSON text, piece by piece as it is written, to `f` (no text is built).
pub fn json_pieces(v: &Value, f: impl FnMut(&[u8])) {
    struct Pieces<F>(F);
    impl<F: FnMut(&[u8])> std::io::Write for Pieces<F> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            (self.0)(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let _ = serde_json::to_writer(Pieces(f), v);
}

/// The length of a value's JSON text.
fn json_len(v: &Value) -> usize {
    let mut n = 0;
    json_pieces(v, |b| n += b.len());
    n
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_json_in_prose() {
        let v = super::json_in_text("Sure!\n```json\n{\"a\": \"}\", \"b\": {\"c\": 1}}\n```\nDone").unwrap();
        assert_eq!(v["b"]["c"], 1);
        assert!(super::json_in_text("no json here").is_none());
        let v = super::json_in_text("use {braces} like {\"x\": 2}").unwrap();
        assert_eq!(v["x"], 2);
    }
}
