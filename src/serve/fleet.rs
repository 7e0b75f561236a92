//! `serve --redis`: the HTTP API fronts a fleet of `agentloop worker`s. POST /runs checks the
//! request as it would for a local run (agent, budgets that may only narrow the root's limits)
//! and adds it to the Redis stream instead of a local queue; the workers create and drive the
//! run under the same root, where the API lists, follows and reports it once a worker started
//! it.

use super::runs::NewRun;
use super::Shared;
use crate::worker::request::RunRequest;
use crate::worker::streams::{self, Link, Names};
use agentloop_types::error::Result;
use std::sync::Mutex;
use std::time::Duration;

/// The stream runs are queued on.
pub struct Fleet {
    link: Mutex<Link>,
    pub names: Names,
}

impl Fleet {
    pub fn open(url: &str, prefix: &str, printer: agentloop_io::output::Printer) -> Result<Fleet> {
        let names = Names::new(prefix)?;
        let mut link = Link::open(url, "--redis", printer, Some(Duration::from_secs(10)))?;
        link.call("create the consumer group", |c| streams::ensure_group(c, &names))?;
        printer.info(&format!("new runs are queued on {} for `agentloop worker`s", names.requests));
        Ok(Fleet { link: Mutex::new(link), names })
    }
}

/// Checks a new run as a local one is checked, then queues it for the workers; returns the run
/// id it maps to and the message id.
pub fn enqueue(shared: &Shared, fleet: &Fleet, new: NewRun) -> Result<(String, String)> {
    let resolved = super::runs::config(shared, new.agent.as_deref(), &new.budgets, true)?;
    agentloop_model::model::from_config(&resolved.config, &shared.root)?;
    if let Some(schema) = &new.output_schema {
        let strict = agentloop_model::model::strict_schemas(&resolved.config);
        agentloop_engine::output_schema::check_schema(schema, "`output_schema`", strict)?;
    }
    let req = RunRequest {
        output_schema: new.output_schema,
        goal: new.goal,
        context: if new.context.is_empty() { serde_json::Value::Null } else { serde_json::Value::String(new.context) },
        agent: new.agent,
        budgets: new.budgets,
        force: new.force,
        ..Default::default()
    };
    let text = agentloop_types::json::to_string(&req);
    let mut link = fleet.link.lock().unwrap_or_else(|p| p.into_inner());
    let message_id = link.call("queue the run", |c| streams::enqueue(c, &fleet.names, &text))?;
    Ok((req.run_id(&message_id), message_id))
}
