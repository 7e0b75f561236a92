//! `agentloop mcp list|call|check|login|logout`: the configured MCP servers from the shell, no
//! model.

use clap::Subcommand;

#[cfg(feature = "mcp")]
mod exec;
#[cfg(feature = "mcp")]
pub use exec::run;

/// Without the `mcp` feature there is no MCP client: every `mcp` subcommand is refused.
#[cfg(not(feature = "mcp"))]
pub fn run(_: agentloop_engine::settings::Ctx, _: McpCommand) -> agentloop_types::error::Result<u8> {
    Err(agentloop_types::error::Error::not_built("mcp", "`agentloop mcp`", false))
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// List the MCP servers: transport, status, protocol version and the tools each offers.
    ///
    /// Tool lists come from the cache ($XDG_CACHE_HOME/agentloop/mcp); a server is started
    /// only when its list is not cached (or with --refresh), and stopped again at once.
    /// Status: cached, listed (started now), disabled, failed.
    ///
    /// Example: agentloop mcp list --json | jq -r '.[].tools[].name'
    #[command(verbatim_doc_comment)]
    List {
        /// Start every enabled server and list its tools again (refreshes the cache).
        #[arg(long)]
        refresh: bool,
        /// Sign in (in the browser) to a server that asks for authorization, then go on.
        #[arg(long)]
        login: bool,
    },
    /// Call one tool of one server with JSON arguments and print its result as JSON.
    ///
    /// TOOL is the server's own name for it (`mcp list` shows both names). Same checks,
    /// sandbox and result as `tools call SERVER__TOOL`; the server is stopped afterwards.
    /// Exit codes: 0 ok, 6 the tool or the server reported an error, 2 unknown server or
    /// tool, or invalid arguments.
    ///
    /// Example: agentloop mcp call time get_current_time --args '{"timezone": "Asia/Tokyo"}'
    #[command(verbatim_doc_comment)]
    Call {
        /// Server name (a key of mcp.servers or of the mcpServers file).
        server: String,
        /// The server's tool name.
        tool: String,
        /// Arguments as a JSON object, or - to read them from stdin.
        #[arg(long, value_name = "JSON|-", default_value = "{}")]
        args: String,
        /// Sign in (in the browser) when the server asks for authorization or more scopes
        /// (a 401, or a 403 insufficient_scope), then call again; at most 3 sign-ins.
        #[arg(long)]
        login: bool,
    },
    /// Start each enabled server, initialize, list its tools; report and refresh the cache.
    ///
    /// Prints per server: ok or FAIL, the protocol version it answered, its name and version,
    /// how many tools it offers (and any left out, with why), and the start-up time.
    /// Exit codes: 0 every enabled server passed, 1 one or more failed.
    #[command(verbatim_doc_comment)]
    Check {
        /// Sign in (in the browser) to a server that asks for authorization, then go on.
        #[arg(long)]
        login: bool,
    },
    /// Sign in to an HTTP MCP server that uses OAuth, and keep its token for later commands.
    ///
    /// Finds the server's authorization server (protected-resource and authorization-server
    /// metadata), registers agentloop as a client unless mcp.servers.NAME.oauth.client_id is
    /// set, and opens the sign-in page with $BROWSER (else prints its address). The browser
    /// comes back to a loopback port (127.0.0.1); the token is kept, owner-only, in
    /// $XDG_STATE_HOME/agentloop/mcp-auth/ (never in a workspace) and refreshed when it
    /// expires. With oauth.grant: client_credentials or identity_assertion, gets a machine
    /// token instead (no browser).
    /// Exit codes: 0 signed in, 1 the sign-in failed, 2 unknown or non-HTTP server.
    ///
    /// Example: agentloop mcp login github
    #[command(verbatim_doc_comment)]
    Login {
        /// Server name (a key of mcp.servers or of the mcpServers file).
        server: String,
    },
    /// Forget the token kept for an HTTP MCP server (`mcp login` signs in again).
    Logout {
        /// Server name (a key of mcp.servers or of the mcpServers file).
        server: String,
    },
}
