//! OpenAI-compatible Chat Completions: `POST {base}/chat/completions`. Serves OpenAI, Ollama
//! (`http://localhost:11434/v1`), llama.cpp's server, vLLM, LM Studio, OpenRouter and others.
//!
//! Tools go as `{type: function, function: {name, description, parameters}}`; `tool_choice` is
//! `auto`, `required` or a named function; assistant `tool_calls` and `role: tool` results carry
//! the conversation. Arguments arrive as a JSON string: invalid JSON there is kept as
//! `invalid_arguments` for the phase to correct, never a crash. Servers without tool support
//! work through a JSON-in-text fallback: `llm.structured: json` (or `auto` after the server
//! rejects tools, or answers in text) asks for one JSON object with `response_format` and
//! parses it out of the text.

use super::http::Client;
use super::{json_in_text, Model, Part, Request, Response, Role, ToolCall, ToolChoice};
use crate::config::Config;
use crate::error::{Error, Kind, Result};
use crate::trace::Usage;
use serde_json::{json, Value};

pub const DEFAULT_BASE: &str = "https://api.openai.com/v1";
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
pub const OLLAMA_MODEL: &str = "llama3.2";

pub struct OpenAi {
    client: Client,
    provider: String,
    url: String,
    key: Option<String>,
    model: String,
    /// tools | json | auto
    structured: String,
    official: bool,
}

impl OpenAi {
    pub fn new(cfg: &Config, provider: &str) -> Result<Self> {
        let ollama = provider == "ollama";
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
        Ok(OpenAi {
            client: Client::new(cfg, provider, key.clone()),
            provider: provider.into(),
            url,
            key,
            model: cfg.llm.model.clone().unwrap_or_else(|| {
                if ollama {
                    OLLAMA_MODEL.into()
                } else {
                    DEFAULT_MODEL.into()
                }
            }),
            structured: cfg.llm.structured.clone(),
            official,
        })
    }
}

/// The request body; `json_mode` replaces tools with a JSON-in-text instruction.
pub fn body(model: &str, req: &Request, json_mode: bool, official: bool) -> Value {
    let mut system = req.system.clone();
    if json_mode && !req.tools.is_empty() {
        system.push_str("\n\nReply with only one JSON object, no prose and no code fence.");
        let wanted: Vec<&super::ToolDef> = match &req.tool_choice {
            ToolChoice::Tool(n) => req.tools.iter().filter(|t| &t.name == n).collect(),
            _ => req.tools.iter().collect(),
        };
        if wanted.len() == 1 {
            system.push_str(&format!("\nThe object must match this JSON Schema:\n{}", wanted[0].parameters));
        } else {
            system.push_str("\nThe object must be {\"tool\": NAME, \"arguments\": {...}} where NAME is one of these tools and arguments match its schema:");
            for t in wanted {
                system.push_str(&format!("\n- {}: {} Schema: {}", t.name, t.description, t.parameters));
            }
        }
    }
    let mut messages = vec![json!({"role": "system", "content": system})];
    for m in &req.messages {
        match m.role {
            Role::User => {
                let mut text = String::new();
                for p in &m.parts {
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
            Role::Assistant => {
                let text: String = m
                    .parts
                    .iter()
                    .filter_map(|p| if let Part::Text(t) = p { Some(t.as_str()) } else { None })
                    .collect();
                let calls: Vec<Value> = m
                    .parts
                    .iter()
                    .filter_map(|p| if let Part::ToolCall(c) = p { Some(c) } else { None })
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.invalid_arguments.clone().unwrap_or_else(|| c.arguments.to_string())}}))
                    .collect();
                if json_mode || calls.is_empty() {
                    let shown =
                        if calls.is_empty() {
                            text
                        } else {
                            m.parts
                                .iter()
                                .filter_map(|p| {
                                    if let Part::ToolCall(c) = p {
                                        Some(c.arguments.to_string())
                                    } else {
                                        None
                                    }
                                })
                                .collect()
                        };
                    messages.push(json!({"role": "assistant", "content": shown}));
                } else {
                    messages.push(json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }, "tool_calls": calls}));
                }
            }
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
    if json_mode {
        if !req.tools.is_empty() {
            b["response_format"] = json!({"type": "json_object"});
        }
    } else if !req.tools.is_empty() {
        b["tools"] = Value::Array(
            req.tools.iter().map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}})).collect(),
        );
        b["tool_choice"] = match &req.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Any => json!("required"),
            // With one tool offered, "required" forces it and is understood by more servers
            // (llama.cpp, vLLM, LM Studio) than the named-function form.
            ToolChoice::Tool(n) if req.tools.len() == 1 && &req.tools[0].name == n => {
                json!("required")
            }
            ToolChoice::Tool(n) => json!({"type": "function", "function": {"name": n}}),
        };
    }
    b
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
            Value::String(s) => match serde_json::from_str::<Value>(s) {
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
                Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
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

/// Whether an error says the server cannot do tool calling (HTTP 400/422/500 naming tools).
fn rejects_tools(msg: &str) -> bool {
    let m = msg.to_lowercase();
    ["http 400", "http 422", "http 500"].iter().any(|c| m.contains(c)) && (m.contains("tool") || m.contains("function"))
}

/// Whether an error says the server cannot do `response_format: json_object`.
fn rejects_format(msg: &str) -> bool {
    let m = msg.to_lowercase();
    (m.contains("http 400") || m.contains("http 422")) && (m.contains("response_format") || m.contains("json_object"))
}

impl Model for OpenAi {
    fn provider(&self) -> &str {
        &self.provider
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn complete(&mut self, req: &Request) -> Result<Response> {
        let headers: Vec<(&str, String)> = self.key.iter().map(|k| ("authorization", format!("Bearer {k}"))).collect();
        let post = |b: &Value| self.client.post_json(&self.url, &headers, b, "x-request-id", req.deadline);
        let json_mode = self.structured == "json";
        let mut b = body(&self.model, req, json_mode, self.official);
        let reply = match post(&b) {
            // A server that rejects tools gets the JSON-in-text form from now on.
            Err(e)
                if e.kind == Kind::Provider
                    && self.structured == "auto"
                    && !req.tools.is_empty()
                    && rejects_tools(&e.message) =>
            {
                self.structured = "json".into();
                b = body(&self.model, req, true, self.official);
                match post(&b) {
                    Err(e) if rejects_format(&e.message) => {
                        b.as_object_mut().map(|o| o.remove("response_format"));
                        post(&b)?
                    }
                    other => other?,
                }
            }
            // A server that rejects `response_format` gets the instruction in the prompt alone.
            Err(e) if e.kind == Kind::Provider && b.get("response_format").is_some() && rejects_format(&e.message) => {
                b.as_object_mut().map(|o| o.remove("response_format"));
                post(&b)?
            }
            other => other?,
        };
        let mut r = parse(&reply.body)?;
        if self.structured != "tools" {
            synthesize(req, &mut r);
        }
        // A model that ignored the tools and wrote no JSON either is asked for JSON from now on
        // (`response_format` makes servers such as llama.cpp and Ollama constrain the output).
        if self.structured == "auto" && !req.tools.is_empty() && r.tool_calls.is_empty() {
            self.structured = "json".into();
        }
        reply.complete(&mut r, &self.model);
        Ok(r)
    }
}
