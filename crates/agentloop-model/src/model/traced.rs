//! A `chat {model}` span around every model call, when traces are on (src/otel): the GenAI
//! attributes of the request and the answer, and the messages only with `otel.capture_content`.
//!
//! `gen_ai.usage.input_tokens` counts every prompt token, cached ones included (agentloop's own
//! `usage.input_tokens` leaves out the cache reads and writes). The conventions of the declared
//! version ([`crate::otel::SEMCONV`]) have no cache-token attributes, so the cache reads and
//! writes go on the span under agentloop's own names (`agentloop.usage.cache_*_tokens`).

use super::{Live, Model, Part, Probe, Request, Response, Role};
use crate::otel::{content, Span};
use agentloop_types::error::Result;
use opentelemetry::trace::SpanKind;
use opentelemetry::{Array, KeyValue, StringValue, Value};
use serde_json::{json, Value as Json};

/// Wraps a model: each call is a span, a child of the run's `invoke_agent` span.
pub struct Traced {
    pub inner: Box<dyn Model>,
    /// Message content goes on the spans ([`crate::otel::capture`] for the run's configuration).
    pub capture: bool,
}

fn int(n: u64) -> Value {
    Value::I64(i64::try_from(n).unwrap_or(i64::MAX))
}

fn parts(parts: &[Part]) -> Vec<Json> {
    parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => json!({"type": "text", "content": t}),
            Part::ToolCall(c) => json!({"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}),
            Part::ToolResult { id, content, .. } => {
                json!({"type": "tool_call_response", "id": id, "response": content})
            }
        })
        .collect()
}

fn input_messages(req: &Request) -> String {
    let msgs: Vec<Json> = req
        .messages
        .iter()
        .map(|m| {
            let role = if m.role == Role::User { "user" } else { "assistant" };
            json!({"role": role, "parts": parts(&m.parts)})
        })
        .collect();
    Json::Array(msgs).to_string()
}

fn output_messages(r: &Response) -> String {
    let mut out: Vec<Json> = Vec::new();
    if !r.text.is_empty() {
        out.push(json!({"type": "text", "content": r.text}));
    }
    for c in &r.tool_calls {
        out.push(json!({"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}));
    }
    json!([{"role": "assistant", "parts": out, "finish_reason": r.stop_reason}]).to_string()
}

fn answered(span: &mut Span, r: &Response, capture: bool) {
    let u = &r.usage;
    let prompt = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
    span.set(KeyValue::new("gen_ai.response.model", r.model.clone()));
    span.set(KeyValue::new("gen_ai.usage.input_tokens", int(prompt)));
    span.set(KeyValue::new("gen_ai.usage.output_tokens", int(u.output_tokens)));
    span.set(KeyValue::new("agentloop.usage.cache_read_tokens", int(u.cache_read_tokens)));
    span.set(KeyValue::new("agentloop.usage.cache_write_tokens", int(u.cache_write_tokens)));
    let reasons = Array::String(vec![StringValue::from(r.stop_reason.clone())]);
    span.set(KeyValue::new("gen_ai.response.finish_reasons", Value::Array(reasons)));
    // The completion's own id; the provider's request id is a support handle, not this.
    if let Some(id) = &r.response_id {
        span.set(KeyValue::new("gen_ai.response.id", id.clone()));
    }
    if capture {
        span.set(KeyValue::new("gen_ai.output.messages", content(&output_messages(r))));
    }
}

/// `server.address` and `server.port` of a model server's URL; the port is the scheme's
/// default (443, 80) when the URL names none.
fn server(endpoint: &str) -> Option<(String, u16)> {
    let url = url::Url::parse(endpoint).ok()?;
    let host = url.host_str()?.trim_start_matches('[').trim_end_matches(']').to_string();
    Some((host, url.port_or_known_default()?))
}

impl Model for Traced {
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
        let model = self.inner.model().to_string();
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", self.inner.provider().to_string()),
            KeyValue::new("gen_ai.request.model", model.clone()),
            KeyValue::new("gen_ai.request.max_tokens", i64::from(req.max_tokens)),
            KeyValue::new("agentloop.phase", req.phase.clone()),
        ];
        if let Some(t) = req.temperature {
            attrs.push(KeyValue::new("gen_ai.request.temperature", t));
        }
        if let Some((host, port)) = self.inner.endpoint().and_then(server) {
            attrs.push(KeyValue::new("server.address", host));
            attrs.push(KeyValue::new("server.port", i64::from(port)));
        }
        let mut span = Span::start(format!("chat {model}"), SpanKind::Client, attrs);
        if span.is_on() && self.capture {
            let system = json!([{"type": "text", "content": req.system}]).to_string();
            span.set(KeyValue::new("gen_ai.system_instructions", content(&system)));
            span.set(KeyValue::new("gen_ai.input.messages", content(&input_messages(req))));
        }
        let r = self.inner.complete(req, live);
        match &r {
            Ok(resp) => answered(&mut span, resp, self.capture),
            Err(e) => span.fail(&crate::otel::error_type(e), &e.message),
        }
        r
    }
    fn cursor(&self) -> Json {
        self.inner.cursor()
    }
    fn seek(&mut self, c: &Json) {
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

/// The run's `invoke_agent` span ([`crate::otel::RunSpan`]), naming the provider and model the
/// run's calls go to as this configuration resolves them.
pub fn run_span(
    cfg: &agentloop_config::config::Config,
    run_id: &str,
    agent: Option<&str>,
    stored: &mut Option<String>,
) -> crate::otel::RunSpan {
    let provider = super::provider_and_why(cfg).map_or(cfg.llm.provider, |(p, _)| p);
    let model = super::name_for_estimate(cfg).ok();
    crate::otel::RunSpan::start(cfg, (provider.as_str(), model), run_id, agent, stored)
}

#[cfg(test)]
mod tests {
    use super::server;

    #[test]
    fn the_server_port_is_the_urls_or_its_schemes_default() {
        assert_eq!(server("https://api.anthropic.com/v1/messages"), Some(("api.anthropic.com".into(), 443)));
        assert_eq!(server("http://localhost:11434/v1/chat/completions"), Some(("localhost".into(), 11434)));
        assert_eq!(server("http://gpu-box/v1/chat/completions"), Some(("gpu-box".into(), 80)));
        assert_eq!(server("http://[::1]:8080/v1"), Some(("::1".into(), 8080)));
        assert_eq!(server("not a url"), None);
    }
}
