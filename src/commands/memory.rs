//! `agentloop memory`: the long-term memory store from the shell.

use agentloop_engine::settings::Ctx;
use agentloop_types::error::{code, Error, Result};
use agentloop_workspace::longterm::{New, Store};
use clap::{Args, Subcommand};
use serde_json::json;

/// Long-term memory across runs: list, search, show, add, forget, prune.
///
/// The loop recalls the best entries for the goal (Frame) and the current step (Plan), writes
/// Reflect's `remember` items and each run's outcome. The store is memory.dir, else the
/// workspace's own .agentloop/memory/ (memory.scope: workspace, the default) or the one every
/// workspace shares, $XDG_DATA_HOME/agentloop/memory (memory.scope: user). Ids are
/// TOPIC/CONTENT_ID.
///
/// Examples:
///   agentloop memory search "release checklist" --json | jq -r '.[].id'
///   agentloop memory add --topic notes --title "Deploys" "Deploys happen on Tuesdays" --ttl 30d
///   agentloop memory forget notes/content_001
#[derive(Debug, Subcommand)]
#[command(verbatim_doc_comment)]
pub enum MemoryCommand {
    /// List every entry that has not expired (id, summary, provenance).
    List(ListArgs),
    /// Rank entries for a query (BM25 over summary, keywords and content).
    Search(SearchArgs),
    /// Print one entry's full document.
    Show {
        /// TOPIC/CONTENT_ID
        id: String,
    },
    /// Add an entry (TEXT, or - for stdin).
    Add(AddArgs),
    /// Remove an entry.
    Forget {
        /// TOPIC/CONTENT_ID
        id: String,
    },
    /// Remove expired entries.
    Prune,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this topic.
    #[arg(long)]
    pub topic: Option<String>,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    pub query: String,
    /// Most results.
    #[arg(long, short = 'k', default_value_t = 5)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The content, or - for stdin.
    #[arg(value_name = "TEXT|-")]
    pub text: String,
    #[arg(long, default_value = "notes")]
    pub topic: String,
    #[arg(long, default_value = "")]
    pub title: String,
    /// Comma-separated keywords.
    #[arg(long, value_delimiter = ',')]
    pub keywords: Vec<String>,
    /// Forget it after DUR (e.g. 30d).
    #[arg(long, value_name = "DUR")]
    pub ttl: Option<String>,
}

fn store(ctx: &Ctx) -> Result<Store> {
    Store::open(ctx.config(), &ctx.ws.root)
        .ok_or_else(|| Error::usage("no memory folder").with_hint("set memory.dir, or HOME / XDG_DATA_HOME"))
}

pub fn run(ctx: Ctx, cmd: MemoryCommand) -> Result<u8> {
    let s = store(&ctx)?;
    match cmd {
        MemoryCommand::List(a) => list(&ctx, &s, a)?,
        MemoryCommand::Search(a) => search(&ctx, &s, a)?,
        MemoryCommand::Show { id } => show(&ctx, &s, &id)?,
        MemoryCommand::Add(a) => add(&ctx, &s, a)?,
        MemoryCommand::Forget { id } => forget(&ctx, &s, &id)?,
        MemoryCommand::Prune => prune(&ctx, &s)?,
    }
    Ok(code::OK)
}

/// `memory list`: every entry not expired (of one topic with --topic), with its provenance.
fn list(ctx: &Ctx, s: &Store, a: ListArgs) -> Result<()> {
    let p = &ctx.printer;
    let mut entries = s.entries()?;
    entries.retain(|e| a.topic.as_ref().is_none_or(|t| &e.topic == t));
    if p.json {
        p.json_value(&json!(entries));
    } else {
        for e in &entries {
            let from = e.provenance.describe();
            p.outln(&format!(
                "{}  {}{}",
                e.id,
                e.summary,
                if from.is_empty() { String::new() } else { format!("  ({from})") }
            ));
        }
    }
    Ok(())
}

/// `memory search`: the best entries for a query, with their scores.
fn search(ctx: &Ctx, s: &Store, a: SearchArgs) -> Result<()> {
    let p = &ctx.printer;
    let index = s.index()?;
    let hits: Vec<serde_json::Value> = index
        .search(&a.query, a.limit)
        .into_iter()
        .map(|(e, score)| json!({"id": e.id, "score": (score * 1000.0).round() / 1000.0, "summary": e.summary, "provenance": e.provenance}))
        .collect();
    if p.json {
        p.json_value(&json!(hits));
    } else {
        for h in &hits {
            p.outln(&format!(
                "{}  {:.3}  {}",
                h["id"].as_str().unwrap_or(""),
                h["score"].as_f64().unwrap_or(0.0),
                h["summary"].as_str().unwrap_or("")
            ));
        }
    }
    Ok(())
}

/// `memory show`: one entry's full document.
fn show(ctx: &Ctx, s: &Store, id: &str) -> Result<()> {
    let Some(v) = s.show(id)? else {
        return Err(Error::usage(format!("no memory `{id}`")).with_hint("list them with `agentloop memory list`"));
    };
    ctx.printer.json_value(&v);
    Ok(())
}

/// `memory add`: stores the text (or stdin) under its topic, and prints the new entry's id.
fn add(ctx: &Ctx, s: &Store, a: AddArgs) -> Result<()> {
    let p = &ctx.printer;
    let text = if a.text == "-" { agentloop_io::fs::read_arg("-")? } else { a.text.clone() };
    if text.trim().is_empty() {
        return Err(Error::usage("the memory is empty"));
    }
    let ttl = match &a.ttl {
        Some(d) => Some(
            agentloop_types::clock::parse_duration(d)
                .map_err(|e| Error::usage(format!("--ttl: {e}")).with_source(e))?,
        ),
        None => None,
    };
    let n = New {
        topic: a.topic,
        title: a.title,
        content: text.trim().to_string(),
        keywords: a.keywords,
        ttl,
        ..Default::default()
    };
    let id = s.add(&n)?;
    if p.json {
        p.json_value(&json!({"id": id}));
    } else {
        p.outln(&id);
    }
    Ok(())
}

/// `memory forget`: removes one entry; one that is not there is a usage error.
fn forget(ctx: &Ctx, s: &Store, id: &str) -> Result<()> {
    if !s.forget(id)? {
        return Err(Error::usage(format!("no memory `{id}`")));
    }
    ctx.printer.info(&format!("forgot {id}"));
    Ok(())
}

/// `memory prune`: removes the expired entries and says which.
fn prune(ctx: &Ctx, s: &Store) -> Result<()> {
    let p = &ctx.printer;
    let gone = s.prune()?;
    if p.json {
        p.json_value(&json!({"deleted": gone}));
    } else {
        for g in &gone {
            p.outln(&format!("deleted {g}"));
        }
    }
    Ok(())
}
