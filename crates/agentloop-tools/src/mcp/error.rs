//! Why the MCP client could not reach, sign in to or list a server: one error for the whole
//! chain (connect, sign-in, the machine grants, listing), so callers decide on the variant and
//! never on the text. `Display` is the text a person or the model reads (word for word what it
//! has always been); the SDK's, the HTTP client's or the system's error behind it is kept as
//! [`std::error::Error::source`].

use std::sync::Arc;

/// A foreign error kept behind an [`McpError`].
pub type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug)]
pub enum McpError {
    /// The client's tokio runtime could not start (shared: every server's listing reports it).
    Runtime(Arc<std::io::Error>),
    /// The server could not be started, reached or initialized, or is disabled.
    Connect { message: String, source: Option<Source> },
    /// Authorization failed: a kept token, a grant, discovery or the sign-in itself.
    Auth { message: String, source: Option<Source> },
    /// The server asks for authorization that no sign-in here gave (none may run, or the
    /// sign-ins did not satisfy it).
    NeedsSignIn { message: String },
    /// The server did not start (and list its tools) within its `startup_timeout`.
    Timeout { message: String },
    /// The server answered, but not as the protocol has it (its tool list could not be read).
    Protocol { message: String },
}

impl McpError {
    pub fn connect(message: impl Into<String>) -> Self {
        McpError::Connect { message: message.into(), source: None }
    }

    pub fn connect_from(message: impl Into<String>, source: impl Into<Source>) -> Self {
        McpError::Connect { message: message.into(), source: Some(source.into()) }
    }

    pub fn auth(message: impl Into<String>) -> Self {
        McpError::Auth { message: message.into(), source: None }
    }

    pub fn auth_from(message: impl Into<String>, source: impl Into<Source>) -> Self {
        McpError::Auth { message: message.into(), source: Some(source.into()) }
    }
}

impl std::fmt::Display for McpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpError::Runtime(e) => write!(f, "cannot start the MCP client runtime: {e}"),
            McpError::Connect { message, .. }
            | McpError::Auth { message, .. }
            | McpError::NeedsSignIn { message }
            | McpError::Timeout { message }
            | McpError::Protocol { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for McpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            McpError::Runtime(e) => Some(&**e),
            McpError::Connect { source, .. } | McpError::Auth { source, .. } => {
                source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn says_its_text_and_keeps_what_caused_it() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "taken");
        let e = McpError::auth_from("cannot open a loopback port for the sign-in redirect: taken", io);
        assert_eq!(e.to_string(), "cannot open a loopback port for the sign-in redirect: taken");
        assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("taken"));
        let r = McpError::Runtime(Arc::new(std::io::Error::other("no threads")));
        assert_eq!(r.to_string(), "cannot start the MCP client runtime: no threads");
        assert!(r.source().is_some());
        assert!(McpError::NeedsSignIn { message: "x".into() }.source().is_none());
    }
}
