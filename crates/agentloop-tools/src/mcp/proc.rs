//! Server processes never outlive agentloop.
//!
//! Every stdio server starts as the leader of its own process group (so a terminal's Ctrl-C
//! does not reach it half-way through a reply, and everything it spawns — `npx` → `node`,
//! `uvx` → `python` — can be signalled at once). The groups alive are kept in one list:
//! - a normal stop closes the server's stdin, waits, then signals the group (TERM, then KILL);
//! - on SIGINT, SIGTERM or SIGHUP to agentloop, the process's watcher ([`crate::interrupt`],
//!   installed when the first group starts) terminates every live group, then lets the signal
//!   take its default effect, so agentloop still dies of it (exit 130 for Ctrl-C);
//! - SIGKILL to agentloop cannot be caught: the servers' stdin then closes, and a server that
//!   follows the MCP stdio rule (exit when stdin closes) exits; one that ignores it is left
//!   running. `PR_SET_PDEATHSIG` would need `unsafe` between fork and exec, which this crate
//!   forbids.

// The list of live groups and how to end them live with the signal watcher
// (crate::interrupt), which ends them first; MCP servers and the shell tool register theirs.
pub use crate::interrupt::{group_exists, kill_all, kill_group, live, park_if_interrupted, register, unregister};
