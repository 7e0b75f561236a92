//! Streamed answers (`llm.stream`): the event streams of both wire formats read into the same
//! [`Response`] a non-streamed call returns, with the text and tool-argument pieces reported as
//! they arrive.
//!
//! Each decoder rebuilds the provider's non-streamed response body from the events and hands
//! it to that provider's own parser (passed in by the provider, so this file names neither
//! provider and they can both import it), so a streamed answer cannot differ from a plain one in
//! content, tool calls, stop reason or usage.
//!
//! - OpenAI Chat Completions: `data:` chunks of `chat.completion.chunk`, ended by `data:
//!   [DONE]`; `choices[0].delta` carries `content` and `tool_calls` pieces keyed by `index`.
//!   Servers differ in what they repeat: OpenAI sends a call's `id` and `function.name` in its
//!   first piece only, llama-cpp-python repeats them in every piece, so the first non-empty
//!   value is kept and never appended to. The `usage` chunk (`stream_options.include_usage`)
//!   has no choices; a server that sends no usage, or `usage: null`, gives zero counts. A body
//!   that ends without `[DONE]` is complete when a `finish_reason` was seen.
//! - Anthropic Messages: `message_start` (id, model, input usage), `content_block_start`,
//!   `content_block_delta` (`text_delta`, `input_json_delta`), `content_block_stop`,
//!   `message_delta` (stop reason, output usage), `message_stop`; `ping` and unknown event
//!   types are skipped; `error` ends the exchange with the error it carries.

use super::{Delta, Response};
use agentloop_types::error::Result;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::BufRead;

/// The stream failed part-way; whether live output had been reported decides whether the
/// exchange may be sent again.
#[derive(Debug, Clone)]
pub struct Broken {
    pub message: String,
    /// Live pieces had already been reported when it failed.
    pub shown: bool,
    /// An outage (an `overloaded_error` event, a dropped connection) rather than a refusal.
    pub retryable: bool,
}

/// A provider's parser of a whole (non-streamed) response body.
pub type Parse = fn(&Value) -> Result<Response>;

/// Largest single line accepted in an event stream.
const MAX_LINE: usize = 4 * 1024 * 1024;

/// Reads events, calling `on` with each event's name and parsed data, until `data: [DONE]` or
/// `on` says the stream is complete (true), or the body ends (false: the caller decides whether
/// what it has is a whole answer).
fn read_events(
    body: &mut dyn BufRead,
    shown: &dyn Fn() -> bool,
    on: &mut dyn FnMut(&str, Value) -> std::result::Result<bool, Broken>,
) -> std::result::Result<bool, Broken> {
    let mut reader = super::sse::Reader::new(body, MAX_LINE);
    loop {
        let ev = match reader.next_event() {
            Ok(Some(ev)) => ev,
            Ok(None) => return Ok(false),
            Err(e) => {
                return Err(Broken {
                    message: format!("reading the stream failed: {e}"),
                    shown: shown(),
                    retryable: true,
                })
            }
        };
        let data = ev.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(data).map_err(|e| Broken {
            message: format!("the stream sent an event that is not JSON ({e}): {}", short(data)),
            shown: shown(),
            retryable: false,
        })?;
        if on(&ev.event, v)? {
            return Ok(true);
        }
    }
}

fn short(s: &str) -> String {
    s.chars().take(200).collect()
}

/// The error an `error` event or chunk carries.
fn stream_error(v: &Value, shown: bool) -> Broken {
    let err = v.get("error").unwrap_or(v);
    let ty = err.get("type").or_else(|| err.get("code")).and_then(Value::as_str).unwrap_or("error");
    let msg = err.get("message").and_then(Value::as_str).unwrap_or("(no message)");
    let retryable = matches!(ty, "overloaded_error" | "api_error" | "rate_limit_error" | "server_error" | "error");
    Broken { message: format!("the stream reported an error ({ty}): {msg}"), shown, retryable }
}

/// One tool call being assembled from pieces.
#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// Reads an OpenAI Chat Completions stream into a response.
pub fn openai(
    body: &mut dyn BufRead,
    live: &mut dyn FnMut(&Delta),
    parse: Parse,
) -> std::result::Result<Response, Broken> {
    let shown = std::cell::Cell::new(false);
    let mut answer = ChatAnswer::default();
    let done = read_events(body, &|| shown.get(), &mut |_, chunk| answer.chunk(&chunk, &shown, live))?;
    if !done && answer.finish.is_none() {
        return Err(Broken {
            message: "the stream ended before the answer was complete (no finish_reason and no [DONE])".into(),
            shown: shown.get(),
            retryable: true,
        });
    }
    let id = answer.id.clone();
    finish_parse(parse(&answer.whole()), id)
}

/// A Chat Completions answer being assembled from its chunks.
#[derive(Default)]
struct ChatAnswer {
    text: String,
    calls: BTreeMap<usize, Call>,
    finish: Option<String>,
    model: String,
    id: Option<String>,
    usage: Value,
}

impl ChatAnswer {
    /// Takes one chunk: the first model and id seen, the usage, and choice 0's text and
    /// tool-call pieces, each piece reported to `live` (and `shown` set) as it arrives.
    fn chunk(
        &mut self,
        chunk: &Value,
        shown: &std::cell::Cell<bool>,
        live: &mut dyn FnMut(&Delta),
    ) -> std::result::Result<bool, Broken> {
        if chunk.get("error").is_some() {
            return Err(stream_error(chunk, shown.get()));
        }
        if self.model.is_empty() {
            self.model = chunk.get("model").and_then(Value::as_str).unwrap_or("").to_string();
        }
        if self.id.is_none() {
            self.id = chunk.get("id").and_then(Value::as_str).map(String::from);
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = u.clone();
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0))
        else {
            return Ok(false);
        };
        let delta = choice.get("delta").or_else(|| choice.get("message")).cloned().unwrap_or(Value::Null);
        if let Some(t) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            self.text.push_str(t);
            shown.set(true);
            live(&Delta::Text(t.to_string()));
        }
        for (pos, piece) in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
            self.call_piece(pos, piece, shown, live);
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
        Ok(false)
    }

    /// One piece of a tool call, at position `pos` of its chunk: the call's first id and name
    /// are kept (servers differ in repeating them), its argument text appended and reported.
    fn call_piece(&mut self, pos: usize, piece: &Value, shown: &std::cell::Cell<bool>, live: &mut dyn FnMut(&Delta)) {
        let piece_id = piece.get("id").and_then(Value::as_str).filter(|s| !s.is_empty());
        // The call's slot: its index; else the call with this id; else its position.
        let index = piece.get("index").and_then(Value::as_u64).map(|i| i as usize).unwrap_or_else(|| {
            piece_id.and_then(|pid| self.calls.iter().find(|(_, c)| c.id == pid).map(|(i, _)| *i)).unwrap_or(pos)
        });
        let call = self.calls.entry(index).or_default();
        if call.id.is_empty() {
            call.id = piece_id.unwrap_or("").to_string();
        }
        let f = piece.get("function").cloned().unwrap_or(Value::Null);
        if call.name.is_empty() {
            call.name = f.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        }
        let args = match f.get("arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(v @ Value::Object(_)) => v.to_string(),
            _ => String::new(),
        };
        if !args.is_empty() {
            call.arguments.push_str(&args);
            shown.set(true);
            live(&Delta::ToolArguments { index, id: call.id.clone(), name: call.name.clone(), fragment: args });
        }
    }

    /// The non-streamed response body the chunks add up to.
    fn whole(self) -> Value {
        let tool_calls: Vec<Value> = self
            .calls
            .into_values()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .map(|mut c| {
                if c["id"] == "" {
                    c.as_object_mut().map(|o| o.remove("id"));
                }
                c
            })
            .collect();
        let mut message = json!({"role": "assistant", "content": self.text});
        if !tool_calls.is_empty() {
            message["tool_calls"] = Value::Array(tool_calls);
        }
        json!({
            "id": self.id, "model": self.model, "usage": self.usage,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
        })
    }
}

fn finish_parse(r: Result<Response>, id: Option<String>) -> std::result::Result<Response, Broken> {
    let mut r = r.map_err(|e| Broken { message: e.detail(), shown: true, retryable: false })?;
    r.response_id = id.clone();
    r.request_id = id;
    Ok(r)
}

/// One content block being assembled.
struct Block {
    start: Value,
    text: String,
    json: String,
}

/// Reads an Anthropic Messages stream into a response.
pub fn anthropic(
    body: &mut dyn BufRead,
    live: &mut dyn FnMut(&Delta),
    parse: Parse,
) -> std::result::Result<Response, Broken> {
    let shown = std::cell::Cell::new(false);
    let mut answer = MessageAnswer::default();
    let done = read_events(body, &|| shown.get(), &mut |event, v| answer.event(event, &v, &shown, live))?;
    if !done {
        return Err(Broken {
            message: "the stream ended before message_stop".into(),
            shown: shown.get(),
            retryable: true,
        });
    }
    let id = answer.message.get("id").and_then(Value::as_str).map(String::from);
    finish_parse(parse(&answer.whole(&id)), id)
}

/// A Messages answer being assembled from its events.
#[derive(Default)]
struct MessageAnswer {
    /// `message_start`'s message.
    message: Value,
    blocks: BTreeMap<usize, Block>,
    usage: Map<String, Value>,
    stop: Option<Value>,
}

impl MessageAnswer {
    /// Takes one event (its `type`, else the event's name); true at `message_stop`.
    fn event(
        &mut self,
        event: &str,
        v: &Value,
        shown: &std::cell::Cell<bool>,
        live: &mut dyn FnMut(&Delta),
    ) -> std::result::Result<bool, Broken> {
        let ty = v.get("type").and_then(Value::as_str).unwrap_or(event).to_string();
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        match ty.as_str() {
            "message_start" => {
                self.message = v.get("message").cloned().unwrap_or(Value::Null);
                if let Some(Value::Object(u)) = self.message.get("usage") {
                    self.usage.extend(u.clone());
                }
            }
            "content_block_start" => {
                let start = v.get("content_block").cloned().unwrap_or(json!({"type": "text", "text": ""}));
                let text = start.get("text").and_then(Value::as_str).unwrap_or("").to_string();
                self.blocks.insert(index, Block { start, text, json: String::new() });
            }
            "content_block_delta" => self.block_delta(index, v, shown, live),
            "message_delta" => {
                if let Some(s) = v.pointer("/delta/stop_reason").filter(|s| !s.is_null()) {
                    self.stop = Some(s.clone());
                }
                if let Some(Value::Object(u)) = v.get("usage") {
                    self.usage.extend(u.iter().filter(|(_, n)| !n.is_null()).map(|(k, n)| (k.clone(), n.clone())));
                }
            }
            "message_stop" => return Ok(true),
            "error" => return Err(stream_error(v, shown.get())),
            _ => {}
        }
        Ok(false)
    }

    /// A piece of block `index`'s text or tool input, reported to `live` as it arrives; a
    /// block whose start was not seen is begun by the kind of its first piece.
    fn block_delta(&mut self, index: usize, v: &Value, shown: &std::cell::Cell<bool>, live: &mut dyn FnMut(&Delta)) {
        let d = v.get("delta").cloned().unwrap_or(Value::Null);
        let kind = d.get("type").and_then(Value::as_str).unwrap_or("");
        let b = self.blocks.entry(index).or_insert_with(|| {
            let start = if kind == "input_json_delta" {
                json!({"type": "tool_use", "id": "", "name": "", "input": {}})
            } else {
                json!({"type": "text", "text": ""})
            };
            Block { start, text: String::new(), json: String::new() }
        });
        match kind {
            "text_delta" => {
                let t = d.get("text").and_then(Value::as_str).unwrap_or("");
                b.text.push_str(t);
                if !t.is_empty() {
                    shown.set(true);
                    live(&Delta::Text(t.to_string()));
                }
            }
            "input_json_delta" => {
                let p = d.get("partial_json").and_then(Value::as_str).unwrap_or("");
                b.json.push_str(p);
                if !p.is_empty() {
                    shown.set(true);
                    let field = |k: &str| b.start.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    live(&Delta::ToolArguments {
                        index,
                        id: field("id"),
                        name: field("name"),
                        fragment: p.to_string(),
                    });
                }
            }
            _ => {}
        }
    }

    /// The non-streamed response body the events add up to, with the message's `id`.
    fn whole(self, id: &Option<String>) -> Value {
        let content: Vec<Value> = self
            .blocks
            .into_values()
            .map(|b| {
                let mut out = b.start;
                match out.get("type").and_then(Value::as_str) {
                    Some("text") => out["text"] = json!(b.text),
                    Some("tool_use") if !b.json.trim().is_empty() => {
                        out["input"] = super::json_text::parse(&b.json).unwrap_or(Value::String(b.json))
                    }
                    _ => {}
                }
                out
            })
            .collect();
        json!({
            "id": id,
            "model": self.message.get("model").cloned().unwrap_or(Value::Null),
            "content": content,
            "stop_reason": self.stop.or_else(|| self.message.get("stop_reason").cloned()).unwrap_or(Value::Null),
            "usage": self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The decoders with their providers' parsers, as the providers call them.
    fn openai(b: &mut dyn BufRead, l: &mut dyn FnMut(&Delta)) -> std::result::Result<Response, Broken> {
        super::openai(b, l, crate::model::openai::parse)
    }
    fn anthropic(b: &mut dyn BufRead, l: &mut dyn FnMut(&Delta)) -> std::result::Result<Response, Broken> {
        super::anthropic(b, l, crate::model::anthropic::parse)
    }

    type Decoder = fn(&mut dyn BufRead, &mut dyn FnMut(&Delta)) -> std::result::Result<Response, Broken>;

    fn run(f: Decoder, s: &str) -> (std::result::Result<Response, Broken>, Vec<Delta>) {
        let mut deltas = Vec::new();
        let mut bytes = s.as_bytes();
        let r = f(&mut bytes, &mut |d| deltas.push(d.clone()));
        (r, deltas)
    }

    #[test]
    fn openai_pieces_with_repeated_ids_and_names_make_one_call() {
        let s = concat!(
            ": ping\n\n",
            "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"answer\",\"arguments\":\"{\\\"a\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"answer\",\"arguments\":\"1}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3}}\n\n",
            "data: [DONE]\n\n",
        );
        let (r, deltas) = run(openai, s);
        let r = r.unwrap();
        assert_eq!(r.text, "Hi");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].id, "call_1");
        assert_eq!(r.tool_calls[0].name, "answer");
        assert_eq!(r.tool_calls[0].arguments, json!({"a": 1}));
        assert_eq!(r.stop_reason, "tool_calls");
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (10, 3));
        assert_eq!(r.request_id.as_deref(), Some("c1"));
        assert_eq!(deltas.len(), 3);
    }

    #[test]
    fn openai_without_usage_or_done_and_broken_streams() {
        let s = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n";
        let r = run(openai, s).0.unwrap();
        assert_eq!((r.text.as_str(), r.usage.total()), ("x", 0));
        let b = run(openai, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n").0.unwrap_err();
        assert!(b.shown && b.retryable, "{b:?}");
        let b = run(openai, "data: {not json\n\n").0.unwrap_err();
        assert!(!b.shown && !b.retryable && b.message.contains("not JSON"), "{b:?}");
        assert!(run(openai, "").0.is_err());
    }

    #[test]
    fn anthropic_events_make_the_message() {
        let s = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":50,\"cache_read_input_tokens\":7,\"output_tokens\":1}}}\n\n",
            "event: ping\ndata: {\"type\": \"ping\"}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"answer\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\": [1,\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\" 2]}\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let (r, deltas) = run(anthropic, s);
        let r = r.unwrap();
        assert_eq!(r.text, "Hello");
        assert_eq!(r.tool_calls[0].arguments, json!({"a": [1, 2]}));
        assert_eq!(r.tool_calls[0].id, "toolu_1");
        assert_eq!(r.stop_reason, "tool_use");
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens, r.usage.cache_read_tokens), (50, 15, 7));
        assert_eq!(r.request_id.as_deref(), Some("msg_1"));
        assert_eq!(deltas.len(), 4);
        assert!(matches!(&deltas[2], Delta::ToolArguments { name, .. } if name == "answer"));
    }

    #[test]
    fn anthropic_error_events_and_truncation() {
        let s = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let b = run(anthropic, s).0.unwrap_err();
        assert!(b.retryable && !b.shown && b.message.contains("overloaded_error"), "{b:?}");
        let s = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"no\"}}\n\n";
        assert!(!run(anthropic, s).0.unwrap_err().retryable);
        let s = "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n";
        let b = run(anthropic, s).0.unwrap_err();
        assert!(b.shown && b.message.contains("message_stop"), "{b:?}");
    }
}
