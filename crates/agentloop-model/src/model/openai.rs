//! OpenAI-compatible Chat Completions: `POST {base}/chat/completions`. Serves OpenAI, Ollama
//! (`http://localhost:11434/v1`), llama.cpp's server, llama-cpp-python, vLLM, LM Studio,
//! OpenRouter and others.
//!
//! Tools go as `{type: function, function: {name, description, parameters}}`; assistant
//! `tool_calls` (with `content: ""`, never null) and `role: tool` results carry the
//! conversation. Arguments arrive as a JSON string: invalid JSON there is kept as
//! `invalid_arguments` for the phase to correct, never a crash.
//!
//! A forced answer is negotiated ([`wire`]): it goes out in the kept form (from the cache, else
//! a named `tool_choice`), and a shape the server rejects, or a reply without the forced call
//! and without a JSON answer in its text, is followed at once by the next form — `"required"`,
//! `"auto"` with an instruction, `response_format` `json_schema`, `json_object`, then a plain
//! JSON instruction. A real outage (connection refused, 429, 503) keeps the retry policy.
//!
//! With `llm.stream`, every form is sent with `stream: true` and `stream_options:
//! {include_usage: true}` and the reply is read by [`super::stream::openai`]; a server that
//! answers plain JSON instead is read as usual.

use super::http::{Client, Failure, Rejection, Shapes};
use super::wire::{self, Form, Structured};
use super::{json_in_text, Live, Model, Part, Probe, Request, Response, Role, ToolCall, ToolChoice, ToolDef};
use agentloop_config::config::{Config, Provider, Strict};
use agentloop_types::error::{Error, Result};
use agentloop_types::trace::Usage;
use serde_json::{json, Value};

pub const DEFAULT_BASE: &str = "https://api.openai.com/v1";
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
pub const OLLAMA_MODEL: &str = "llama3.2";

pub struct OpenAi {
    client: Client,
    provider: Provider,
    /// The base URL as configured (trailing `/` trimmed): with the model, the cache key.
    base: String,
    url: String,
    key: Option<String>,
    model: String,
    structured: Structured,
    /// Whether schemas go in their strict form (`llm.strict`; `auto` means api.openai.com only).
    strict: bool,
    official: bool,
    /// The form that worked last in this run (at first: the cached one).
    kept: Option<Form>,
    /// What the cache holds for this server and model.
    cached: Option<Form>,
    /// The form of the last answer returned.
    last: Option<Form>,
    /// `llm.stream`: ask for an event stream and report its pieces live.
    stream: bool,
    /// `llm.tool_messages` as set (`auto` is resolved by [`Model::tool_messages`]).
    tool_messages: wire::ToolMessages,
    /// What `models test` found: whether a `role: tool` message reaches the model.
    tool_results: Option<bool>,
    /// Whether `stream_options: {include_usage: true}` goes with a streamed request (dropped
    /// for the rest of the run when a server rejects it by name).
    stream_options: bool,
}

impl OpenAi {
    pub fn new(cfg: &Config, provider: Provider) -> Result<Self> {
        let ollama = provider == Provider::Ollama;
        let base = match (&cfg.llm.base_url, ollama) {
            (Some(b), _) => b.clone(),
            (None, true) => {
                let host = std::env::var("OLLAMA_HOST")
                    .ok()
                    .filter(|h| !h.trim().is_empty())
                    .unwrap_or_else(|| "http://localhost:11434".into());
                let host = if host.contains("://") { host } else { format!("http://{host}") };
                format!("{}/v1", host.trim_end_matches('/').trim_end_matches("/v1"))
            }
            (None, false) => DEFAULT_BASE.into(),
        };
        let base = base.trim_end_matches('/').to_string();
        let official = base.contains("api.openai.com");
        let key = if ollama && cfg.llm.api_key_env.is_none() && cfg.llm.api_key_cmd.is_none() {
            None
        } else {
            super::api_key(cfg, "OPENAI_API_KEY")?
        };
        if official && key.is_none() {
            return Err(Error::usage("the openai provider needs an API key for api.openai.com")
                .with_hint("set OPENAI_API_KEY, or pass --base-url for a local server that needs no key"));
        }
        let url = if base.ends_with("/chat/completions") { base.clone() } else { format!("{base}/chat/completions") };
        let model = cfg.llm.model.clone().unwrap_or_else(|| if ollama { OLLAMA_MODEL } else { DEFAULT_MODEL }.into());
        let structured = cfg.llm.structured;
        let (cached, tool_results) = wire::load(&base, &model);
        Ok(OpenAi {
            client: Client::new(cfg, provider.as_str(), key.clone()),
            provider,
            base,
            url,
            key,
            model,
            structured,
            strict: match cfg.llm.strict {
                Strict::Auto => official,
                Strict::On => true,
                Strict::Off => false,
            },
            official,
            kept: cached,
            cached,
            last: None,
            stream: cfg.llm.stream,
            stream_options: true,
            tool_messages: cfg.llm.tool_messages,
            tool_results,
        })
    }
}

/// The tools a forced request wants answered: the named one, else all of them.
fn wanted(req: &Request) -> Vec<&ToolDef> {
    match &req.tool_choice {
        ToolChoice::Tool(n) if req.tools.iter().any(|t| &t.name == n) => {
            req.tools.iter().filter(|t| &t.name == n).collect()
        }
        _ => req.tools.iter().collect(),
    }
}

/// The schema sent for a tool: its strict form when strict mode applies and one exists.
fn schema(t: &ToolDef, strict: bool) -> (&Value, bool) {
    match (&t.strict, strict) {
        (Some(s), true) => (s, true),
        _ => (&t.parameters, false),
    }
}

/// A request body: the object built by [`body`], and the tools, written straight from the
/// request's own schemas when it is serialized. Copying the plan answer's schema — most of a
/// request — into a JSON value on every call cost more than sending it.
pub struct Body<'a> {
    pub value: Value,
    tools: Vec<ToolEntry<'a>>,
}

#[derive(serde::Serialize)]
struct ToolEntry<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionEntry<'a>,
}

#[derive(serde::Serialize)]
struct FunctionEntry<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    strict: bool,
}

impl serde::Serialize for Body<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.value.as_object().into_iter().flatten() {
            m.serialize_entry(k, v)?;
        }
        if !self.tools.is_empty() {
            m.serialize_entry("tools", &self.tools)?;
        }
        m.end()
    }
}

/// The request body in one [`Form`] (None: tools as given, `tool_choice` as asked, for a
/// request that forces nothing). JSON forms replace the tools with a JSON-only instruction and
/// the answer's schema; `strict` sends the strict form of a schema that has one.
pub fn body<'a>(model: &str, req: &'a Request, form: Option<Form>, strict: bool, official: bool) -> Body<'a> {
    let json_mode = form.is_some_and(|f| !f.uses_tools());
    let wanted = wanted(req);
    let system = system_prompt(req, form, &wanted, strict);
    let mut messages = vec![json!({"role": "system", "content": system})];
    for m in &req.messages {
        match m.role {
            Role::User => user_messages(&m.parts, json_mode, &mut messages),
            Role::Assistant => messages.push(assistant_message(&m.parts, json_mode)),
        }
    }
    let mut b = json!({"model": model, "messages": messages});
    if official {
        b["max_completion_tokens"] = json!(req.max_tokens);
    } else {
        b["max_tokens"] = json!(req.max_tokens);
    }
    if let Some(t) = req.temperature {
        b["temperature"] = json!(t);
    }
    if req.tools.is_empty() {
        return Body { value: b, tools: Vec::new() };
    }
    let tools = ask_for_answer(&mut b, req, form, &wanted, strict);
    Body { value: b, tools }
}

/// The system prompt, with what the form asks of the answer: one tool call when `"auto"` is
/// backed by an instruction; in a JSON form, only a JSON object and the schema it must match.
fn system_prompt(req: &Request, form: Option<Form>, wanted: &[&ToolDef], strict: bool) -> String {
    let mut system = req.system.clone();
    if form == Some(Form::AutoInstructed) {
        match wanted {
            [t] => system.push_str(&format!(
                "\n\nAnswer by calling the `{}` tool once, with arguments matching its schema; do not answer in prose.",
                t.name
            )),
            _ => system.push_str(
                "\n\nAnswer by calling one of the tools, with arguments matching its schema; do not answer in prose.",
            ),
        }
    }
    if form.is_some_and(|f| !f.uses_tools()) {
        system.push_str("\n\nReply with only one JSON object, no prose and no code fence.");
        if let [t] = wanted {
            system.push_str(&format!("\nThe object must match this JSON Schema:\n{}", schema(t, strict).0));
        } else {
            system.push_str("\nThe object must be {\"tool\": NAME, \"arguments\": {...}} where NAME is one of these tools and arguments match its schema:");
            for t in wanted {
                system.push_str(&format!("\n- {}: {} Schema: {}", t.name, t.description, schema(t, strict).0));
            }
        }
    }
    system
}

/// A user turn: each tool result its own `tool` message (in a JSON form, which sends no tools,
/// part of the text), then the text as one `user` message.
fn user_messages(parts: &[Part], json_mode: bool, messages: &mut Vec<Value>) {
    let mut text = String::new();
    for p in parts {
        match p {
            Part::Text(t) => text.push_str(t),
            Part::ToolResult { id, content, .. } if !json_mode => {
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            }
            Part::ToolResult { content, .. } => text.push_str(content),
            Part::ToolCall(_) => {}
        }
    }
    if !text.is_empty() {
        messages.push(json!({"role": "user", "content": text}));
    }
}

/// An assistant turn: its text and its tool calls, or, without tools, the text or the JSON
/// the calls carried.
fn assistant_message(parts: &[Part], json_mode: bool) -> Value {
    let text: String =
        parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(t.as_str()) } else { None }).collect();
    let calls: Vec<&ToolCall> =
        parts.iter().filter_map(|p| if let Part::ToolCall(c) = p { Some(c) } else { None }).collect();
    if json_mode || calls.is_empty() {
        // Without tools, an earlier call is shown as the JSON it carried.
        let shown = if calls.is_empty() {
            text
        } else {
            calls.iter().map(|c| c.invalid_arguments.clone().unwrap_or_else(|| c.arguments.to_string())).collect()
        };
        return json!({"role": "assistant", "content": shown});
    }
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.invalid_arguments.clone().unwrap_or_else(|| c.arguments.to_string())}}))
        .collect();
    // `content` is a string, never null or absent: llama-cpp-python answers both with HTTP
    // 500, and every server takes "".
    json!({"role": "assistant", "content": text, "tool_calls": calls})
}

/// Says in `b` how the answer must come, by the form: a `response_format` for the JSON forms,
/// otherwise the tools sent (returned) and a `tool_choice`.
fn ask_for_answer<'a>(
    b: &mut Value,
    req: &'a Request,
    form: Option<Form>,
    wanted: &[&'a ToolDef],
    strict: bool,
) -> Vec<ToolEntry<'a>> {
    match form {
        Some(Form::JsonSchema) => {
            let t = wanted[0];
            let (s, is_strict) = schema(t, strict);
            b["response_format"] =
                json!({"type": "json_schema", "json_schema": {"name": t.name, "schema": s, "strict": is_strict}});
            Vec::new()
        }
        Some(Form::JsonObject) => {
            b["response_format"] = json!({"type": "json_object"});
            Vec::new()
        }
        Some(Form::JsonPrompt) => Vec::new(),
        _ => {
            // A named `tool_choice` forces one answer among all the tools sent (the run's shared
            // prefix); `"required"` and `"auto"` would let the model pick another, so they get
            // the wanted tools alone.
            let sent = if matches!(form, Some(Form::Required | Form::AutoInstructed)) {
                wanted.to_vec()
            } else {
                req.tools.iter().collect()
            };
            b["tool_choice"] = match (form, &req.tool_choice) {
                (Some(Form::Required), _) | (None, ToolChoice::Any) => json!("required"),
                (Some(Form::AutoInstructed), _) | (None, ToolChoice::Auto) => json!("auto"),
                (_, ToolChoice::Tool(n)) => json!({"type": "function", "function": {"name": n}}),
                (_, _) => json!({"type": "function", "function": {"name": wanted[0].name}}),
            };
            sent.into_iter()
                .map(|t| {
                    let (parameters, strict) = schema(t, strict);
                    ToolEntry {
                        kind: "function",
                        function: FunctionEntry { name: &t.name, description: &t.description, parameters, strict },
                    }
                })
                .collect()
        }
    }
}

/// Parses a Chat Completions response.
pub fn parse(v: &Value) -> Result<Response> {
    let choice = v.get("choices").and_then(|c| c.get(0)).ok_or_else(|| {
        Error::provider(format!(
            "provider openai: the response has no choices: {}",
            v.to_string().chars().take(300).collect::<String>()
        ))
    })?;
    let msg = choice.get("message").cloned().unwrap_or(Value::Null);
    let mut r = Response {
        text: msg.get("content").and_then(Value::as_str).unwrap_or("").to_string(),
        stop_reason: choice.get("finish_reason").and_then(Value::as_str).unwrap_or("").into(),
        model: v.get("model").and_then(Value::as_str).unwrap_or("").into(),
        ..Default::default()
    };
    for (i, c) in msg.get("tool_calls").and_then(Value::as_array).cloned().unwrap_or_default().iter().enumerate() {
        let f = c.get("function").cloned().unwrap_or(Value::Null);
        let raw = f.get("arguments").cloned().unwrap_or(Value::Null);
        let (arguments, invalid) = match &raw {
            Value::String(s) if s.trim().is_empty() => (json!({}), None),
            Value::String(s) => match super::json_text::parse(s) {
                Ok(v @ Value::Object(_)) => (v, None),
                _ => (json!({}), Some(s.clone())),
            },
            Value::Object(_) => (raw.clone(), None),
            Value::Null => (json!({}), None),
            other => (json!({}), Some(other.to_string())),
        };
        r.tool_calls.push(ToolCall {
            id: c.get("id").and_then(Value::as_str).map(String::from).unwrap_or_else(|| format!("call_{i}")),
            name: f.get("name").and_then(Value::as_str).unwrap_or("").into(),
            arguments,
            invalid_arguments: invalid,
        });
    }
    let u = v.get("usage").cloned().unwrap_or(Value::Null);
    let prompt = u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0);
    let cached = u.pointer("/prompt_tokens_details/cached_tokens").and_then(Value::as_u64).unwrap_or(0).min(prompt);
    r.usage = Usage {
        input_tokens: prompt - cached,
        output_tokens: u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
        cache_write_tokens: 0,
        cache_read_tokens: cached,
    };
    Ok(r)
}

/// Turns a JSON-in-text answer into the tool call the phase asked for.
fn synthesize(req: &Request, r: &mut Response) {
    if !r.tool_calls.is_empty() || req.tools.is_empty() {
        return;
    }
    let Some(mut obj) = json_in_text(&r.text) else {
        return;
    };
    // Models that print their tool call as text wrap it: {"name": T, "arguments": {...}}.
    let wrapped = obj.get("name").or_else(|| obj.get("tool")).and_then(Value::as_str).map(String::from);
    if let (Some(name), Some(args)) = (wrapped, obj.get("arguments").or_else(|| obj.get("parameters")).cloned()) {
        if req.tools.iter().any(|t| t.name == name) {
            let args = match args {
                Value::String(s) => super::json_text::parse(&s).unwrap_or(Value::String(s)),
                other => other,
            };
            let invalid = (!args.is_object()).then(|| args.to_string());
            let arguments = if args.is_object() { args } else { json!({}) };
            r.tool_calls.push(ToolCall { id: "call_text_0".into(), name, arguments, invalid_arguments: invalid });
            return;
        }
    }
    if let Some(inner) = obj.get("arguments").filter(|a| a.is_object()).cloned() {
        if obj.as_object().is_some_and(|o| o.len() == 1) {
            obj = inner;
        }
    }
    let call = match &req.tool_choice {
        ToolChoice::Tool(n) => Some((n.clone(), obj)),
        _ if req.tools.len() == 1 => Some((req.tools[0].name.clone(), obj)),
        _ => match (obj.get("tool").and_then(Value::as_str), obj.get("arguments")) {
            (Some(n), Some(a)) => Some((n.to_string(), a.clone())),
            _ => None,
        },
    };
    if let Some((name, arguments)) = call {
        let invalid = (!arguments.is_object()).then(|| arguments.to_string());
        r.tool_calls.push(ToolCall {
            id: "call_text_0".into(),
            name,
            arguments: if arguments.is_object() { arguments } else { json!({}) },
            invalid_arguments: invalid,
        });
    }
}

/// Whether a response carries the forced answer: a call of a wanted tool.
fn answered(req: &Request, r: &Response) -> bool {
    let wanted = wanted(req);
    r.tool_calls.iter().any(|c| wanted.iter().any(|t| t.name == c.name))
}

/// One exchange in one form.
enum Outcome {
    /// HTTP 2xx: the response (JSON in text already read into a tool call where allowed).
    Reply(Response),
    Rejected(Rejection),
}

impl OpenAi {
    fn headers(&self) -> Vec<(&'static str, String)> {
        self.key.iter().map(|k| ("authorization", format!("Bearer {k}"))).collect()
    }

    /// The forms a request may be sent in, in order; empty when it forces no answer.
    fn forms(&self, req: &Request) -> Vec<Form> {
        if req.tools.is_empty() || req.tool_choice == ToolChoice::Auto {
            return vec![];
        }
        let single = wanted(req).len() == 1;
        wire::order(self.kept, self.structured, |f| single || !matches!(f, Form::Named | Form::JsonSchema))
    }

    fn send(&mut self, req: &Request, form: Option<Form>, shapes: Shapes, live: Live) -> Result<Outcome> {
        let mut b = body(&self.model, req, form, self.strict, self.official);
        if self.stream {
            b.value["stream"] = json!(true);
            if self.stream_options {
                b.value["stream_options"] = json!({"include_usage": true});
            }
        }
        let sent = self.exchange(req, &b, shapes, &mut *live)?;
        // A server that refuses `stream_options` by name is asked again without it, once.
        let sent = match sent {
            Outcome::Rejected(rej)
                if b.value.get("stream_options").is_some() && rej.summary.contains("stream_options") =>
            {
                agentloop_io::output::debug_note(&format!(
                    "{}: stream_options rejected; sending without it",
                    self.provider
                ));
                self.stream_options = false;
                b.value.as_object_mut().map(|o| o.remove("stream_options"));
                self.exchange(req, &b, shapes, live)?
            }
            other => other,
        };
        Ok(match sent {
            Outcome::Reply(mut r) => {
                r.wire_form = form.map(Form::as_str);
                Outcome::Reply(r)
            }
            other => other,
        })
    }

    /// One POST of a request body, read into a response.
    fn exchange(&self, req: &Request, b: &Body<'_>, shapes: Shapes, live: Live) -> Result<Outcome> {
        let mut decode = |r: &mut dyn std::io::BufRead| super::stream::openai(r, &mut *live, parse);
        let decode: Option<super::http::Decode> = if self.stream { Some(&mut decode) } else { None };
        match self.client.post(&self.url, &self.headers(), b, "x-request-id", req.deadline, shapes, decode) {
            Ok(reply) => {
                let mut r = reply.response(parse)?;
                if self.structured != Structured::Tools {
                    synthesize(req, &mut r);
                }
                reply.complete(&mut r, &self.model);
                Ok(Outcome::Reply(r))
            }
            Err(Failure::Rejected(rej)) => Ok(Outcome::Rejected(rej)),
            Err(Failure::Failed(e)) => Err(e),
        }
    }

    /// Keeps the form that worked for the rest of the run, and caches it for later runs.
    fn keep(&mut self, form: Form) {
        self.kept = Some(form);
        if self.cached != Some(form) {
            wire::store(&self.base, &self.model, form);
            self.cached = Some(form);
            // What was learned of another form's tool messages does not hold for this one.
            self.tool_results = None;
        }
    }
}

impl Model for OpenAi {
    fn provider(&self) -> &str {
        self.provider.as_str()
    }
    fn endpoint(&self) -> Option<&str> {
        Some(&self.url)
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn wire_form(&self) -> Option<&'static str> {
        self.last.map(Form::as_str)
    }

    /// `auto`: tool messages on api.openai.com and where `models test` saw a tool result reach
    /// the model; elsewhere a user message, which no chat template drops.
    fn tool_messages(&self) -> bool {
        match self.tool_messages {
            wire::ToolMessages::Tool => true,
            wire::ToolMessages::User => false,
            wire::ToolMessages::Auto => self.official || self.tool_results == Some(true),
        }
    }

    fn learned_tool_results(&mut self, reach: bool) {
        self.tool_results = Some(reach);
        if let Some(form) = self.kept {
            wire::store_tool_results(&self.base, &self.model, form, reach);
        }
    }

    /// Sends a forced request in the kept form, then in each next form at once when the server
    /// rejects the shape or answers without the forced call. Only the first unclear HTTP 500
    /// of a call moves on to the next form; after that an unclear 500 is an outage and gets the
    /// retry policy. Usage of every answer received is counted.
    fn complete(&mut self, req: &Request, live: Live) -> Result<Response> {
        let forms = self.forms(req);
        if forms.is_empty() {
            return match self.send(req, None, Shapes::Off, live)? {
                Outcome::Reply(r) => Ok(r),
                Outcome::Rejected(rej) => Err(rej.error),
            };
        }
        let mut usage = Usage::default();
        let mut unanswered: Option<Response> = None;
        let mut tried: Vec<String> = Vec::new();
        let mut last_rejection: Option<Rejection> = None;
        let mut probe_unclear = true;
        let n = forms.len();
        for (i, form) in forms.into_iter().enumerate() {
            // An unclear 500 moves on only when there is a next form to move on to.
            let shapes = if probe_unclear && i + 1 < n { Shapes::Probe } else { Shapes::Definite };
            match self.send(req, Some(form), shapes, &mut *live)? {
                Outcome::Reply(mut r) => {
                    usage.add(&r.usage);
                    r.usage = usage;
                    self.last = Some(form);
                    if answered(req, &r) {
                        self.keep(form);
                        return Ok(r);
                    }
                    agentloop_io::output::debug_note(&format!(
                        "{}: {} was answered without the `{}` call; trying the next form",
                        self.provider,
                        form.as_str(),
                        wanted(req).first().map_or("", |t| t.name.as_str())
                    ));
                    tried.push(format!("{}: answered without the call", form.as_str()));
                    unanswered = Some(r);
                }
                Outcome::Rejected(rej) => {
                    probe_unclear &= rej.definite;
                    agentloop_io::output::debug_note(&format!(
                        "{}: {} rejected ({}); trying the next form",
                        self.provider,
                        form.as_str(),
                        rej.summary
                    ));
                    tried.push(format!("{}: {}", form.as_str(), rej.summary));
                    last_rejection = Some(rej);
                }
            }
        }
        // No form gave the forced call: the last answer goes back for the phase to correct.
        if let Some(r) = unanswered {
            return Ok(r);
        }
        match last_rejection {
            Some(rej) if n == 1 => Err(rej.error),
            _ => {
                let limited = match self.structured {
                    Structured::Auto => String::new(),
                    Structured::Tools => {
                        "; llm.structured: tools allows the tool forms only (auto allows all six)".into()
                    }
                    Structured::Json => {
                        "; llm.structured: json allows the JSON forms only (auto allows all six)".into()
                    }
                };
                Err(Error::provider(format!(
                    "provider {}: the server rejected every request form it was sent ({}){limited}",
                    self.provider,
                    tried.join("; ")
                ))
                .with_hint("`agentloop models test` shows what the server accepts"))
            }
        }
    }

    /// Sends the request once in every form (`llm.structured` allowing), unclear 500s counted
    /// as rejections; keeps and caches the first form that gave the forced answer.
    fn probe(&mut self, req: &Request) -> Option<Result<Vec<Probe>>> {
        let single = wanted(req).len() == 1;
        let forms: Vec<Form> =
            wire::order(None, self.structured, |f| single || !matches!(f, Form::Named | Form::JsonSchema));
        let mut out = Vec::new();
        for form in forms {
            let probe = match self.send(req, Some(form), Shapes::Probe, &mut |_| {}) {
                Ok(Outcome::Reply(r)) => {
                    let answered = answered(req, &r);
                    let detail = if answered {
                        let c = r.tool_calls.iter().find(|c| wanted(req).iter().any(|t| t.name == c.name));
                        let how = if r.tool_calls.iter().any(|c| c.id.starts_with("call_text_")) {
                            "JSON in text"
                        } else {
                            "tool call"
                        };
                        format!("{how}: {}", c.map(|c| c.arguments.to_string()).unwrap_or_default())
                    } else {
                        format!("no answer: {}", short(if r.text.is_empty() { "(empty)" } else { &r.text }))
                    };
                    Probe { form, status: Some(200), answered, detail, response: Some(r) }
                }
                Ok(Outcome::Rejected(rej)) => Probe {
                    form,
                    status: Some(rej.status),
                    answered: false,
                    detail: format!("rejected: {}", short(rej.summary.split("; request id").next().unwrap_or(""))),
                    response: None,
                },
                Err(e) => return Some(Err(e)),
            };
            out.push(probe);
        }
        if let Some(p) = out.iter().find(|p| p.answered) {
            self.keep(p.form);
        }
        Some(Ok(out))
    }
}

/// The first line of a text, at most 100 characters.
fn short(s: &str) -> String {
    let line = s.trim().lines().next().unwrap_or("");
    let mut out: String = line.chars().take(100).collect();
    if out.len() < line.len() || s.trim().lines().nth(1).is_some() {
        out.push('…');
    }
    out
}
