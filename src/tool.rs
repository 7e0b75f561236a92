//! What a tool is and what it returns: the spec every part of agentloop describes tools with
//! (the registry, MCP servers, Ductile plugins, the catalog, the answer schema) and the uniform
//! result of a call. A leaf below the registry, so tool sources do not depend on it.

use crate::config::Config;
use crate::skills::SkillSet;
use camino::Utf8Path;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SideEffect {
    /// Reads local files only.
    Read,
    /// Writes local files.
    Write,
    /// Talks to the network.
    Network,
    /// Runs a program.
    Exec,
    /// Ends the run; no effect outside agentloop.
    None,
    /// Run by another system (event mode); effects unknown.
    External,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub side_effect: SideEffect,
    #[serde(serialize_with = "ser_secs")]
    pub timeout: Duration,
    pub output_cap: usize,
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

/// Whether a tool call worked (`ok`) or failed (`error`, with the reason in `error`); written
/// as that word in state.json, the trace's `result_status` and the prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    Ok,
    Error,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
        }
    }
}

impl std::fmt::Display for ToolStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The uniform result of every tool call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolResult {
    pub status: ToolStatus,
    pub output: String,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub retryable: bool,
    #[serde(default)]
    pub metadata: Value,
    #[serde(default)]
    pub artifacts: Vec<String>,
}

impl ToolResult {
    pub fn ok(output: impl Into<String>, metadata: Value) -> Self {
        ToolResult {
            status: ToolStatus::Ok,
            output: output.into(),
            error: None,
            retryable: false,
            metadata,
            artifacts: vec![],
        }
    }
    pub fn err(error: impl Into<String>, retryable: bool) -> Self {
        ToolResult {
            status: ToolStatus::Error,
            output: String::new(),
            error: Some(error.into()),
            retryable,
            metadata: Value::Null,
            artifacts: vec![],
        }
    }
    pub fn is_ok(&self) -> bool {
        self.status == ToolStatus::Ok
    }
    /// One line for the trace and for people.
    pub fn summary(&self) -> String {
        let base = match &self.error {
            Some(e) => e.clone(),
            None => self.output.clone(),
        };
        let line: String = base.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut s: String = line.chars().take(200).collect();
        if line.chars().count() > 200 {
            s.push('…');
        }
        s
    }
}

/// Everything a tool may touch.
pub struct ToolEnv<'a> {
    pub root: &'a Utf8Path,
    pub config: &'a Config,
    pub skills: &'a SkillSet,
    /// Name stem for artifacts written by the registry (e.g. `step-3-web_fetch`).
    pub artifact_stem: String,
}
