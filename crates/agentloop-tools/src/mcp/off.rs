//! MCP in a build without the `mcp` feature: the registry's view of MCP (a hub with no servers
//! and no tools), so the rest of the engine reads the same either way. A configured server never
//! gets here: `mcp.servers` and `mcp.config_file` are refused when the configuration is
//! resolved, and the `mcp` subcommands refuse to run, each naming the feature.

use crate::tool_env::ToolEnv;
use agentloop_types::error::{Error, Result};
use agentloop_types::tool_spec::{ToolResult, ToolSpec};
use camino::Utf8Path;
use serde_json::Value;

pub use agentloop_config::config::McpConfig;

/// The refusal for MCP servers in this build.
pub fn not_built(what: &str) -> Error {
    Error::not_built("mcp", what, true)
}

/// Where tool lists come from when the hub is built (no server is ever started here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    CacheFirst,
    Servers,
    CacheOnly,
}

/// Where servers' logs would go (no server is started in this build).
pub mod client {
    use camino::{Utf8Path, Utf8PathBuf};

    /// The same choice as the `mcp` build's, with nothing ever written.
    #[derive(Debug, Clone)]
    pub enum Logs {
        Workspace(Utf8PathBuf),
        User,
    }

    impl Logs {
        pub fn for_command(root: &Utf8Path) -> Logs {
            Logs::Workspace(root.to_path_buf())
        }
    }
}

/// No servers and no tools.
#[derive(Default)]
pub struct Hub {
    /// Always empty: nothing was left out.
    pub warnings: Vec<String>,
}

impl Hub {
    /// An empty hub; a configuration naming servers is refused (it is refused on resolving
    /// too; this holds for a configuration built some other way).
    pub fn load(cfg: &agentloop_config::config::Config, _root: &Utf8Path, _source: Source) -> Result<Hub> {
        if !cfg.mcp.servers.is_empty() || cfg.mcp.config_file.is_some() {
            return Err(not_built("`mcp.servers` (or `mcp.config_file`)"));
        }
        Ok(Hub::default())
    }
    /// [`Hub::load`]: there are no logs to keep.
    pub fn load_logging(
        cfg: &agentloop_config::config::Config,
        root: &Utf8Path,
        source: Source,
        _logs: client::Logs,
    ) -> Result<Hub> {
        Self::load(cfg, root, source)
    }
    /// [`Hub::load`]: there is no server to sign in to.
    pub fn load_with(
        cfg: &agentloop_config::config::Config,
        root: &Utf8Path,
        source: Source,
        _logs: client::Logs,
        _sign_in: bool,
    ) -> Result<Hub> {
        Self::load(cfg, root, source)
    }
    pub fn specs(&self) -> &[ToolSpec] {
        &[]
    }
    pub fn handles(&self, _name: &str) -> bool {
        false
    }
    pub fn call(&self, _env: &ToolEnv, name: &str, _args: &Value) -> ToolResult {
        ToolResult::err(format!("tool `{name}` is an MCP tool, and this agentloop was built without MCP"), false)
    }
}
