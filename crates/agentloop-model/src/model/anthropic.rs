//! The Anthropic Messages API: `POST {base}/v1/messages` with `x-api-key` and
//! `anthropic-version: 2023-06-01`; content blocks text / tool_use / tool_result; tools with
//! `input_schema`; `tool_choice` auto / any / tool; prompt caching with `cache_control` on the
//! stable prefix every call of a run shares (the answer tools, the system prompt with the
//! catalog, and the task part of the first message), so every phase reads it from the cache
//! from the second call on; usage including `cache_creation_input_tokens` and `cache_read_input_tokens`.
//! With `llm.stream`, `stream: true` and the event stream read by [`super::stream::anthropic`].

use super::http::{Client, Shapes};
use super::{Live, Model, Part, Request, Response, Role, ToolCall, ToolChoice};
use agentloop_config::config::Config;
use agentloop_types::error::{Error, Result};
use agentloop_types::trace::Usage;
use serde_json::{json, Value};

pub const DEFAULT_BASE: &str = "https://api.anthropic.com";
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
pub const VERSION: &str = "2023-06-01";

pub struct Anthropic {
    client: Client,
    url: String,
    key: String,
    model: String,
    cache: bool,
    /// `llm.stream`: ask for an event stream and report its pieces live.
    stream: bool,
    /// Whether a corrective turn goes as a tool result (`llm.tool_messages` is not `user`).
    tool_messages: bool,
}

impl Anthropic {
    pub fn new(cfg: &Config) -> Result<Self> {
        let key = super::api_key(cfg, "ANTHROPIC_API_KEY")?.ok_or_else(|| {
            Error::usage("the anthropic provider needs an API key")
                .with_hint("set ANTHROPIC_API_KEY, or llm.api_key_env / llm.api_key_cmd in config")
        })?;
        if cfg.llm.strict == agentloop_config::config::Strict::On {
            // Anthropic's strict tool use rejects count and range rules (minItems above 1,
            // minimum, maximum), so it could not carry the 3-to-7-item Definition of Done.
            return Err(Error::usage(
                "llm.strict: true is not supported with the anthropic provider: its strict tool use cannot express the answer schemas' count and range rules",
            )
            .with_hint("use llm.strict: auto (the default; Anthropic gets the full schema, validated on receipt) or false"));
        }
        let base = cfg.llm.base_url.clone().unwrap_or_else(|| DEFAULT_BASE.into());
        let base = base.trim_end_matches('/');
        let url = if base.ends_with("/v1") { format!("{base}/messages") } else { format!("{base}/v1/messages") };
        Ok(Anthropic {
            client: Client::new(cfg, "anthropic", Some(key.clone())),
            url,
            key,
            model: cfg.llm.model.clone().unwrap_or_else(|| DEFAULT_MODEL.into()),
            cache: cfg.llm.cache,
            stream: cfg.llm.stream,
            // Anthropic's API shows every tool result; `user` is honoured all the same.
            tool_messages: cfg.llm.tool_messages != super::wire::ToolMessages::User,
        })
    }
}

/// The request body (public so tests can compare it with a golden file).
pub fn body(model: &str, req: &Request, cache: bool) -> Value {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| {
            let content: Vec<Value> = m
                .parts
                .iter()
                .map(|p| match p {
                    Part::Text(t) => json!({"type": "text", "text": t}),
                    Part::ToolCall(c) => json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}),
                    Part::ToolResult { id, content, is_error } => {
                        json!({"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error})
                    }
                })
                .collect();
            json!({"role": if m.role == Role::User { "user" } else { "assistant" }, "content": content})
        })
        .collect();
    let mut messages = messages;
    // The task part every call of a run shares (the first block of a first message in parts)
    // ends the cached prefix: tools, system and task are read from the cache from the second
    // call on, whatever the phase.
    if cache {
        if let Some(first) = messages.first_mut().and_then(|m| m["content"].as_array_mut()).filter(|c| c.len() > 1) {
            first[0]["cache_control"] = json!({"type": "ephemeral"});
        }
    }
    let mut system = json!({"type": "text", "text": req.system});
    if cache {
        system["cache_control"] = json!({"type": "ephemeral"});
    }
    let mut b = json!({
        "model": model,
        "max_tokens": req.max_tokens,
        "system": [system],
        "messages": messages,
    });
    if !req.tools.is_empty() {
        let n = req.tools.len();
        let tools: Vec<Value> = req
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut v = json!({"name": t.name, "description": t.description, "input_schema": t.parameters});
                if cache && i + 1 == n {
                    v["cache_control"] = json!({"type": "ephemeral"});
                }
                v
            })
            .collect();
        b["tools"] = Value::Array(tools);
        b["tool_choice"] = match &req.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::Any => json!({"type": "any"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        };
    }
    if let Some(t) = req.temperature {
        b["temperature"] = json!(t);
    }
    b
}

/// Parses a Messages API response.
pub fn parse(v: &Value) -> Result<Response> {
    let content = v.get("content").and_then(Value::as_array).ok_or_else(|| {
        Error::provider(format!(
            "provider anthropic: the response has no `content` array: {}",
            truncate(&v.to_string())
        ))
    })?;
    let mut r = Response::default();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => r.text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => {
                let input = block.get("input").cloned().unwrap_or(Value::Null);
                let invalid = (!input.is_object()).then(|| input.to_string());
                r.tool_calls.push(ToolCall {
                    id: block.get("id").and_then(Value::as_str).unwrap_or("").into(),
                    name: block.get("name").and_then(Value::as_str).unwrap_or("").into(),
                    arguments: if input.is_object() { input } else { json!({}) },
                    invalid_arguments: invalid,
                })
            }
            _ => {}
        }
    }
    r.stop_reason = v.get("stop_reason").and_then(Value::as_str).unwrap_or("").into();
    r.model = v.get("model").and_then(Value::as_str).unwrap_or("").into();
    let u = v.get("usage").cloned().unwrap_or(Value::Null);
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    r.usage = Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
    };
    Ok(r)
}

fn truncate(s: &str) -> String {
    s.chars().take(300).collect()
}

impl Model for Anthropic {
    fn provider(&self) -> &str {
        "anthropic"
    }
    fn endpoint(&self) -> Option<&str> {
        Some(&self.url)
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn tool_messages(&self) -> bool {
        self.tool_messages
    }
    fn complete(&mut self, req: &Request, live: Live) -> Result<Response> {
        let headers = [("x-api-key", self.key.clone()), ("anthropic-version", VERSION.to_string())];
        let mut b = body(&self.model, req, self.cache);
        let mut decode = |r: &mut dyn std::io::BufRead| super::stream::anthropic(r, live, parse);
        let decode: Option<super::http::Decode> = if self.stream {
            b["stream"] = json!(true);
            Some(&mut decode)
        } else {
            None
        };
        let reply = self
            .client
            .post(&self.url, &headers, &b, "request-id", req.deadline, Shapes::Off, decode)
            .map_err(super::http::Failure::into_error)?;
        let mut r = reply.response(parse)?;
        reply.complete(&mut r, &self.model);
        Ok(r)
    }
}
