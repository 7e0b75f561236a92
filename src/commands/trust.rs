//! `agentloop trust`: record, list and revoke the folders whose own configuration is trusted
//! (see [`agentloop_engine::trust`]). The record is the user's, in `$XDG_CONFIG_HOME/agentloop/trusted.json`;
//! nothing a workspace holds can add to it.

use agentloop_engine::settings::Ctx;
use agentloop_engine::trust::Store;
use agentloop_types::error::{Error, Result};
use camino::Utf8PathBuf;
use clap::Args;
use serde_json::json;

/// Trust a workspace's own configuration, or list or revoke trust.
///
/// A workspace you were handed is data, not code: until you trust it, its agentloop.yaml and
/// agent profiles may only narrow what your own config, flags and environment allow (lower
/// budgets, fewer tools, stricter hosts). They cannot name a program to run, an endpoint or
/// header that receives a credential, a file outside the workspace, or widen the sandbox; a
/// command that acts refuses such a key, naming it, and read-only commands go on without it.
/// Trust is kept per folder (its real path) in ~/.config/agentloop/trusted.json.
/// AGENTLOOP_TRUST_ALL=1, or `trust_all: true` in your own config, trusts every folder (CI).
///
/// Examples:
///   agentloop trust ~/digest            trust that folder
///   agentloop -w ~/digest trust         the same
///   agentloop trust --list --json
///   agentloop trust --revoke ~/digest
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct TrustArgs {
    /// The folder (default: the workspace, -w).
    #[arg(value_name = "DIR")]
    pub dir: Option<Utf8PathBuf>,
    /// List the trusted folders.
    #[arg(long, conflicts_with_all = ["dir", "revoke"])]
    pub list: bool,
    /// Stop trusting the folder.
    #[arg(long)]
    pub revoke: bool,
}

pub fn run(ctx: Ctx, args: TrustArgs) -> Result<u8> {
    let p = &ctx.printer;
    let mut store = Store::load()?;
    if args.list {
        if p.json {
            p.json_value(&agentloop_types::json::to_value(&store.folders));
        } else if store.folders.is_empty() {
            p.info("no trusted folders (agentloop trust DIR trusts one)");
        } else {
            for t in &store.folders {
                p.outln(&format!("{}  # since {}", t.path, t.since));
            }
        }
        return Ok(0);
    }
    let given = args.dir.map(|d| agentloop_engine::settings::from_cwd(&d)).unwrap_or_else(|| ctx.ws.root.clone());
    if args.revoke {
        // A folder that is gone can still be revoked by the path it was recorded under.
        let dir = agentloop_engine::trust::canonical(&given).unwrap_or(given);
        let removed = store.remove(&dir);
        if removed {
            store.save()?;
        }
        if p.json {
            p.json_value(&json!({"path": dir, "trusted": false, "changed": removed}));
        } else if removed {
            p.info(&format!("{dir} is no longer trusted"));
        } else {
            p.info(&format!("{dir} was not trusted"));
        }
        return Ok(0);
    }
    if !given.is_dir() {
        return Err(Error::usage(format!("cannot trust {given}: it is not a folder"))
            .with_hint("give the workspace folder, e.g. `agentloop trust ~/digest`"));
    }
    let dir = agentloop_engine::trust::canonical(&given)?;
    let added = store.add(&dir);
    let file = if added { Some(store.save()?) } else { Store::path() };
    if p.json {
        p.json_value(&json!({"path": dir, "trusted": true, "changed": added, "store": file}));
    } else if added {
        p.info(&format!(
            "trusted {dir}: its agentloop.yaml and agents/ now apply in full (recorded in {})",
            file.map(|f| f.to_string()).unwrap_or_default()
        ));
    } else {
        p.info(&format!("{dir} was already trusted"));
    }
    Ok(0)
}
