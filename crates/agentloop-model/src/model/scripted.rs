//! The offline scripted model: replays responses from a YAML or JSONL file, for tests, demos and
//! reproducible runs. `--record FILE` on any provider writes the same format.
//!
//! A script is either a list (responses consumed in order) or a mapping from phase name to a
//! list (each phase consumes its own queue). A response is:
//!
//! ```yaml
//! - phase: plan            # optional in a list; when present it must match the asking phase
//!   answer: {...}          # shorthand: a call of the tool the phase forces, with these arguments
//!   tool_calls: [{name: x, arguments: {...}}]   # or explicit calls (arguments may be a string)
//!   text: "..."            # plain text
//!   usage: {input_tokens: 120, output_tokens: 30}
//!   model: claude-sonnet-4-5   # a note: which model a recorded answer came from
//!   error: "message"       # fail this call as a provider error
//! ```
//!
//! Whatever a response's `model:` says, a replayed answer comes from the script: its model is
//! recorded as `scripted` everywhere (trace, result.json, status, report) and it has no cost —
//! a replay spends nothing, so it is never priced, not even by `prices:`. The tokens are the ones
//! the script states. `model:` is kept so a `--record` file says where its answers came from,
//! and transcript.md shows it beside each replayed call.

use super::{Delta, Live, Model, Request, Response, ToolCall, ToolChoice};
use agentloop_types::error::{Error, Result};
use agentloop_types::error::{Kind, ResultExt};
use agentloop_types::trace::Usage;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ScriptAnswer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptCall>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
}

enum Queues {
    Ordered(Vec<ScriptAnswer>),
    Keyed(BTreeMap<String, Vec<ScriptAnswer>>),
}

pub struct Scripted {
    path: Utf8PathBuf,
    queues: Queues,
    pos: BTreeMap<String, usize>,
    /// `llm.stream`: report each answer's text and tool arguments as live pieces.
    pub stream: bool,
}

fn parse_entries(v: Value, path: &Utf8Path, what: &str) -> Result<Vec<ScriptAnswer>> {
    let list = match v {
        Value::Array(a) => a,
        Value::Null => vec![],
        _ => return Err(Error::usage(format!("script {path}: {what} must be a list of responses"))),
    };
    list.into_iter()
        .enumerate()
        .map(|(i, e)| {
            serde_path_to_error::deserialize::<_, ScriptAnswer>(e).map_err(|err| {
                Error::usage(format!("script {path}: {what} response {}: {err}", i + 1))
                    .with_hint("see `Scripted model` in docs/MODELS.md for the format")
            })
        })
        .collect()
}

impl Scripted {
    pub fn load(path: &Utf8PathBuf) -> Result<Self> {
        if !path.is_file() {
            return Err(Error::usage(format!("--script {path}: no such file"))
                .with_hint("give the path of a script (YAML or JSONL of answers), or drop --script"));
        }
        let text = agentloop_io::fs::read_to_string(path)?;
        let jsonl = path.extension() == Some("jsonl");
        let queues = if jsonl {
            let mut list = Vec::new();
            for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                let v: Value =
                    serde_json::from_str(line).context_as(Kind::Usage, format!("script {path}:{}", i + 1))?;
                list.push(v);
            }
            Queues::Ordered(parse_entries(Value::Array(list), path, "the script")?)
        } else {
            let v: Value = agentloop_config::config::parse_yaml(&text)
                .context_as(Kind::Usage, format!("script {path}: invalid YAML"))?;
            match v {
                Value::Object(m) => {
                    let mut q = BTreeMap::new();
                    for (k, v) in m {
                        let entries = parse_entries(v, path, &format!("phase `{k}`"))?;
                        q.insert(k, entries);
                    }
                    Queues::Keyed(q)
                }
                other => Queues::Ordered(parse_entries(other, path, "the script")?),
            }
        };
        Ok(Scripted { path: path.clone(), queues, pos: BTreeMap::new(), stream: false })
    }

    fn next(&mut self, phase: &str) -> Result<ScriptAnswer> {
        let (key, queue) = match &self.queues {
            Queues::Ordered(q) => ("".to_string(), q),
            Queues::Keyed(m) => (
                phase.to_string(),
                m.get(phase).ok_or_else(|| {
                    Error::provider(format!("script {} has no responses for phase `{phase}`", self.path))
                        .with_hint(format!("add a `{phase}:` list to the script"))
                })?,
            ),
        };
        let pos = self.pos.get(&key).copied().unwrap_or(0);
        let Some(entry) = queue.get(pos).cloned() else {
            return Err(Error::provider(format!(
                "script {} ran out: all {} response{} used and phase `{phase}` asked for another",
                self.path,
                queue.len(),
                if queue.len() == 1 { "" } else { "s" }
            ))
            .with_hint("add responses to the script, or lower max_steps"));
        };
        if let Some(p) = &entry.phase {
            if p != phase {
                return Err(Error::provider(format!(
                    "script {}: response {} is for phase `{p}` but phase `{phase}` asked",
                    self.path,
                    pos + 1
                ))
                .with_hint("reorder the script, or key it by phase (a mapping of phase name to responses)"));
            }
        }
        self.pos.insert(key, pos + 1);
        Ok(entry)
    }
}

impl Model for Scripted {
    fn provider(&self) -> &str {
        "scripted"
    }
    fn model(&self) -> &str {
        "scripted"
    }
    fn complete(&mut self, req: &Request, live: Live) -> Result<Response> {
        let r = self.answer(req)?;
        if self.stream {
            // Replayed answers arrive whole: one piece for the text, one per call's arguments.
            if !r.text.is_empty() {
                live(&Delta::Text(r.text.clone()));
            }
            for (index, c) in r.tool_calls.iter().enumerate() {
                let fragment = c.invalid_arguments.clone().unwrap_or_else(|| c.arguments.to_string());
                live(&Delta::ToolArguments { index, id: c.id.clone(), name: c.name.clone(), fragment });
            }
        }
        Ok(r)
    }
    fn cursor(&self) -> Value {
        json!(self.pos)
    }
    fn seek(&mut self, cursor: &Value) {
        if let Ok(pos) = serde_json::from_value::<BTreeMap<String, usize>>(cursor.clone()) {
            self.pos = pos;
        }
    }
    /// A script is written per phase: it fuses only when it holds fused answers (a
    /// `reflect+plan` queue, or a list with answers marked `phase: reflect+plan`, as a recording
    /// of a fused run is), so a script written for separate calls means what it meant.
    fn fuses_by_default(&self) -> bool {
        let fused = super::FUSED_PHASE;
        match &self.queues {
            Queues::Keyed(m) => m.get(fused).is_some_and(|q| !q.is_empty()),
            Queues::Ordered(q) => q.iter().any(|e| e.phase.as_deref() == Some(fused)),
        }
    }
}

impl Scripted {
    /// The next scripted answer for this request.
    fn answer(&mut self, req: &Request) -> Result<Response> {
        let e = self.next(&req.phase)?;
        if let Some(msg) = e.error {
            return Err(Error::provider(format!("provider scripted: {msg}")));
        }
        let mut calls: Vec<ToolCall> = e
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (arguments, invalid) = match &c.arguments {
                    Value::Object(_) => (c.arguments.clone(), None),
                    Value::Null => (json!({}), None),
                    Value::String(s) => match super::json_text::parse(s) {
                        Ok(v @ Value::Object(_)) => (v, None),
                        _ => (json!({}), Some(s.clone())),
                    },
                    other => (json!({}), Some(other.to_string())),
                };
                ToolCall {
                    id: c.id.clone().unwrap_or_else(|| format!("call_{i}")),
                    name: c.name.clone(),
                    arguments,
                    invalid_arguments: invalid,
                }
            })
            .collect();
        if let Some(a) = e.answer {
            let name = match &req.tool_choice {
                ToolChoice::Tool(n) => n.clone(),
                _ => req.tools.first().map(|t| t.name.clone()).unwrap_or_default(),
            };
            let invalid = (!a.is_object()).then(|| a.to_string());
            calls.push(ToolCall {
                id: format!("call_{}", calls.len()),
                name,
                arguments: if a.is_object() { a } else { json!({}) },
                invalid_arguments: invalid,
            });
        }
        Ok(Response {
            text: e.text,
            stop_reason: e.stop_reason.unwrap_or_else(|| {
                if calls.is_empty() {
                    "end_turn".into()
                } else {
                    "tool_use".into()
                }
            }),
            tool_calls: calls,
            usage: e.usage.unwrap_or_default(),
            model: agentloop_types::trace::SCRIPTED.into(),
            recorded_from: e.model,
            request_id: None,
            response_id: None,
            latency_ms: 0,
            wire_form: None,
        })
    }
}

/// One JSONL line of a recording: a script entry reproducing the response.
pub fn record_line(phase: &str, r: &Response) -> String {
    let e = ScriptAnswer {
        phase: Some(phase.to_string()),
        answer: None,
        tool_calls: r
            .tool_calls
            .iter()
            .map(|c| ScriptCall {
                id: Some(c.id.clone()),
                name: c.name.clone(),
                arguments: c.invalid_arguments.clone().map(Value::String).unwrap_or_else(|| c.arguments.clone()),
            })
            .collect(),
        text: r.text.clone(),
        usage: Some(r.usage),
        model: Some(r.model.clone()),
        stop_reason: Some(r.stop_reason.clone()),
        error: None,
    };
    agentloop_types::json::to_string(&e)
}
