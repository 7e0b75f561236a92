//! Where MCP sign-in tokens are kept: one owner-only file per server URL under
//! `$XDG_STATE_HOME/agentloop/mcp-auth/`, the URL repeated inside and checked on every read (so
//! a token is only ever sent to the server it was issued for). rmcp's credential store on that
//! file, for the browser sign-in ([`super::auth`]) and the machine grants ([`super::grants`]) alike.

use super::config::Server;
use super::error::McpError;
use camino::Utf8PathBuf;
use rmcp::transport::auth::{AuthError, AuthorizationMetadata, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

/// The folder of stored tokens; None without `XDG_STATE_HOME` and `HOME`.
pub fn store_dir() -> Option<Utf8PathBuf> {
    crate::held_secrets::mcp_token_dir()
}

/// The token file of a server URL.
pub fn token_path(url: &str) -> Option<Utf8PathBuf> {
    Some(store_dir()?.join(format!("{:016x}.json", agentloop_types::run_id::fnv1a(url.as_bytes()))))
}

/// What a token file holds: the URL the token was issued for, the authorization server that
/// issued it ([`authority`]), and rmcp's credentials.
#[derive(Serialize, Deserialize)]
struct TokenFile {
    resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    authority: Option<String>,
    credentials: StoredCredentials,
}

/// The authorization server a token is bound to: its issuer identifier, or, for a server that
/// names none (a 2025-03-26 server found by the default endpoints at its origin), its token
/// endpoint — the one address a refresh token is ever sent to.
pub fn authority(md: &AuthorizationMetadata) -> String {
    md.issuer.clone().unwrap_or_else(|| md.token_endpoint.clone())
}

/// A kept token and the authorization server it is bound to (None: a file written before
/// tokens were bound, which names no issuer either).
pub struct Kept {
    pub credentials: StoredCredentials,
    pub authority: Option<String>,
}

/// rmcp's credential store on the token file of one server URL. A store made [`FileStore::bound`]
/// records the authorization server whose metadata the manager holds with what it saves.
#[derive(Clone)]
pub struct FileStore {
    pub url: String,
    pub path: Option<Utf8PathBuf>,
    authority: Option<String>,
}

impl FileStore {
    pub fn new(url: &str) -> Self {
        FileStore { url: url.to_string(), path: token_path(url), authority: None }
    }

    /// The store of `url` for a manager holding the metadata `md`.
    pub fn bound(url: &str, md: &AuthorizationMetadata) -> Self {
        FileStore { authority: Some(authority(md)), ..FileStore::new(url) }
    }

    pub fn read(&self) -> agentloop_types::error::Result<Option<StoredCredentials>> {
        Ok(self.kept()?.map(|k| k.credentials))
    }

    /// The kept token of this URL with the authorization server it is bound to.
    pub fn kept(&self) -> agentloop_types::error::Result<Option<Kept>> {
        let Some(path) = &self.path else { return Ok(None) };
        let Some(text) = agentloop_io::fs::read_optional(path)? else { return Ok(None) };
        let f: TokenFile = serde_json::from_str(&text).map_err(|e| {
            agentloop_types::error::Error::data(format!("{path} is not a token file: {e}")).with_source(e)
        })?;
        // The file name is a hash of the URL; the URL inside is what decides.
        if f.resource != self.url {
            return Ok(None);
        }
        register(&f.credentials);
        let authority = f.authority.or_else(|| f.credentials.issuer.clone());
        Ok(Some(Kept { credentials: f.credentials, authority }))
    }

    /// Who is signed in: the client id and the granted scopes, never the token.
    pub fn describe(&self) -> Option<serde_json::Value> {
        let c = self.read().ok()??;
        c.token_response.as_ref()?;
        Some(serde_json::json!({"client_id": c.client_id, "scopes": c.granted_scopes}))
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.read().map_err(|e| AuthError::CredentialStoreError(e.detail()))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let Some(path) = &self.path else {
            return Err(AuthError::CredentialStoreError(
                "no state folder to keep MCP tokens in (set XDG_STATE_HOME or HOME)".into(),
            ));
        };
        register(&credentials);
        let authority = self.authority.clone().or_else(|| credentials.issuer.clone());
        let f = TokenFile { resource: self.url.clone(), authority, credentials };
        let text = serde_json::to_vec_pretty(&f).map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        let write = || -> agentloop_types::error::Result<()> {
            if let Some(d) = path.parent() {
                crate::held_secrets::private_dir(d)?;
            }
            agentloop_io::fs::write_private(path, &text)
        };
        write().map_err(|e| AuthError::CredentialStoreError(e.detail()))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match &self.path {
            Some(p) => match std::fs::remove_file(p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(AuthError::CredentialStoreError(format!("cannot remove {p}: {e}")))
                }
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }
}

/// Every token agentloop holds is a secret of the run's: an access token a server echoes in a
/// tool result, or a program prints, is redacted like a provider key ([`agentloop_io::redact`]). Called
/// whenever credentials are read from the store or put in it (a sign-in, a grant, a refresh).
fn register(c: &StoredCredentials) {
    use oauth2::TokenResponse;
    if let Some(t) = &c.token_response {
        agentloop_io::redact::register(t.access_token().secret());
        if let Some(r) = t.refresh_token() {
            agentloop_io::redact::register(r.secret());
        }
    }
}

/// Removes the stored token of a server URL; whether there was one.
pub fn forget(url: &str) -> agentloop_types::error::Result<bool> {
    let Some(path) = token_path(url) else { return Ok(false) };
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(agentloop_types::error::Error::io("remove", &path, e)),
    }
}

/// An rmcp auth error as an error naming the server (secrets masked), rmcp's error kept.
pub fn auth_error(server: &Server, e: AuthError) -> McpError {
    let message = server.redact(&format!("MCP server {} ({}): authorization failed: {e}", server.name, server.display));
    McpError::auth_from(message, e)
}
