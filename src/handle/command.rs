//! `agentloop handle`: one turn of event mode (see `crate::handle`).

use agentloop_engine::settings::Global;
use agentloop_types::error::Result;
use clap::Args;

/// Event mode: read one request on stdin, perform exactly one turn, write one JSON response.
///
/// Input: a Ductile protocol v2 request ({"protocol": 2, "command": "handle", "event": {...},
/// "config": {...}, "state": {...}, "context": {...}}) or a bare event object. Events:
/// agentic.start (payload goal, context) and api.trigger start a run; agentic.tool_result
/// (payload run_id, step, tool, status, result, error) resumes the pending step.
/// Output: {"status", "result", "events", "state_updates", "logs"} on stdout.
/// -w names the root folder; each run lives in <root>/runs/<run_id>/.
///
/// Exit codes: 0 whenever a response was written; 78 configuration error (never retry).
///
/// Example: echo '{"type":"agentic.start","payload":{"goal":"..."}}' | agentloop -w runs handle
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct HandleArgs {}

pub fn run(global: &Global, _args: HandleArgs) -> Result<u8> {
    crate::handle::main(global)
}
