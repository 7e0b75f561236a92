//! Progress posts: with `handle.progress_url` set (the user's own configuration only), each
//! phase a turn runs is posted there as a small JSON event, from a thread of its own with a
//! short timeout, so a slow or absent listener never fails the run and delays the turn's answer
//! by at most `handle.progress_timeout`.

use agentloop_config::config::HandleConfig;
use agentloop_types::error::{Error, Result};
use serde_json::{json, Value};
use std::sync::mpsc;
use std::time::Duration;

pub(super) struct Progress {
    tx: mpsc::Sender<Value>,
    done: mpsc::Receiver<()>,
    timeout: Duration,
}

impl Progress {
    /// None when no webhook is configured; an address that is not http(s) is a configuration error.
    pub(super) fn new(cfg: &HandleConfig) -> Result<Option<Progress>> {
        let Some(url) = cfg.progress_url.clone() else { return Ok(None) };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Error::config(
                "invalid configuration at key `handle.progress_url`: it must be an http:// or https:// address",
            )
            .with_hint("give the webhook's full address, e.g. http://localhost:9000/progress, or remove the key"));
        }
        let token = cfg.progress_token.clone().filter(|t| !t.trim().is_empty());
        if let Some(t) = &token {
            agentloop_io::redact::register(t);
        }
        let timeout = cfg.progress_timeout.0;
        let (tx, rx) = mpsc::channel::<Value>();
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let agent = agentloop_tools::ductile::agent(timeout);
            for event in rx {
                let mut r = agent.post(url.as_str()).header("content-type", "application/json");
                if let Some(t) = &token {
                    r = r.header("authorization", format!("Bearer {t}"));
                }
                if let Err(e) = r.send(event.to_string().as_bytes()) {
                    agentloop_io::output::stderr_line(&format!("agentloop handle: warn: progress webhook: {e}"));
                }
            }
            let _ = done_tx.send(());
        });
        Ok(Some(Progress { tx, done, timeout }))
    }

    /// Queues one event: `{type: agent.progress, run_id, phase, step, status, summary}`.
    pub(super) fn post(&self, state: &agentloop_workspace::workspace::State, phase: &str, summary: &str) {
        let _ = self.tx.send(json!({
            "type": "agent.progress",
            "run_id": state.run_id,
            "phase": phase,
            "step": state.step,
            "status": state.status,
            "summary": agentloop_io::redact::redact(summary),
            "at": agentloop_types::clock::now_rfc3339(),
        }));
    }

    /// Lets the posts queued go out, waiting at most the timeout for them.
    pub(super) fn finish(self) {
        drop(self.tx);
        let _ = self.done.recv_timeout(self.timeout);
    }
}
