//! OAuth for streamable-HTTP MCP servers, as the MCP authorization specification profiles
//! OAuth 2.1: protected-resource metadata (RFC 9728) found from the server's 401
//! `WWW-Authenticate` challenge or the well-known paths, authorization-server metadata (RFC 8414
//! and OpenID discovery), a client from configuration, a client metadata document or dynamic
//! registration (RFC 7591), the authorization code flow with PKCE (S256) and the `resource`
//! parameter (RFC 8707) for people, the client-credentials grant for unattended use, refresh,
//! and step-up on 403 `insufficient_scope`. The protocol itself is rmcp's `auth` feature (the
//! official SDK's, built on the `oauth2` crate); this module keeps the tokens, runs the loopback
//! redirect and decides when a person may be asked.
//!
//! Invariants:
//! - Tokens live in one file per server URL under `$XDG_STATE_HOME/agentloop/mcp-auth/`
//!   (else `~/.local/state/...`), written atomically and readable by the owner only; never in a
//!   workspace, a trace, a log or a report.
//! - A stored token is found by the exact URL it was issued for (the resource) and the file
//!   repeats that URL, checked on every read: a configuration that names another host under the
//!   same server name finds no token, so a token is only ever sent to its own server.
//! - A browser sign-in runs only where a person asked for it (`mcp login`, or `--login` on
//!   `mcp list|call|check`); everywhere else a server that asks for authorization is an error
//!   naming `agentloop mcp login NAME`.

use super::config::{OAuth, Server};
use super::error::McpError;
pub use super::tokens::{auth_error, forget, store_dir, token_path, FileStore};
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest, AuthorizationSession,
    ClientCredentialsConfig, OAuthState,
};
use std::time::Duration;

pub use agentloop_config::config::{Grant, OAuthConfig};

/// Whether `server` may be signed in to here when it asks: where a person asked for sign-ins,
/// or anywhere for a machine grant (no browser, no person).
pub fn may_sign_in(server: &Server) -> bool {
    server.sign_in || server.oauth.as_ref().is_some_and(OAuth::is_machine)
}

/// The error when a server still asks for authorization: how to sign in, and, after sign-ins
/// that did not satisfy it, that agentloop gave up after them.
pub fn still_refused(server: &Server, challenge: &str, sign_ins: u32) -> String {
    if sign_ins == 0 {
        needs_sign_in(server, challenge)
    } else {
        format!("{} (gave up after {sign_ins} sign-ins)", needs_sign_in(server, challenge))
    }
}

tokio::task_local! {
    /// The time spent waiting for a person in the browser during one bounded operation.
    static WAITED: std::sync::Arc<std::sync::Mutex<Waited>>;
}

/// Time a person spent signing in: finished waits, and when the one under way began.
#[derive(Default)]
struct Waited {
    done: Duration,
    since: Option<std::time::Instant>,
}

impl Waited {
    fn total(&self) -> Duration {
        self.done + self.since.map(|s| s.elapsed()).unwrap_or_default()
    }
}

/// Marks the wait for the browser in the bounded operation this runs in (if any).
struct Waiting;

impl Waiting {
    fn start() -> Waiting {
        let _ =
            WAITED.try_with(|w| w.lock().unwrap_or_else(|e| e.into_inner()).since = Some(std::time::Instant::now()));
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let _ = WAITED.try_with(|w| {
            let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = w.since.take() {
                w.done += s.elapsed();
            }
        });
    }
}

/// `work` bounded by `limit`, not counting the time a person spends signing in in the browser
/// (`startup_timeout` bounds a server's start, not the person). None: the time ran out.
pub async fn bounded<F: std::future::Future>(limit: Duration, work: F) -> Option<F::Output> {
    let waited = std::sync::Arc::new(std::sync::Mutex::new(Waited::default()));
    let state = {
        let w = waited.clone();
        move || {
            let w = w.lock().unwrap_or_else(|e| e.into_inner());
            (w.total(), w.since.is_some())
        }
    };
    let started = tokio::time::Instant::now();
    let work = WAITED.scope(waited.clone(), work);
    tokio::pin!(work);
    loop {
        let (seen, waiting) = state();
        let mut deadline = started + limit + seen;
        if waiting {
            // While the person is in the browser, look again each second rather than at once.
            deadline = deadline.max(tokio::time::Instant::now() + Duration::from_secs(1));
        }
        let total = || state().0;
        match tokio::time::timeout_at(deadline, &mut work).await {
            Ok(out) => return Some(out),
            // A sign-in ran (or runs) meanwhile: the deadline moves by the time it took.
            Err(_) if total() > seen => continue,
            Err(_) => return None,
        }
    }
}

/// How many times one operation re-authorizes before giving up: a server that keeps answering
/// 403 must not loop a person (or a script) through sign-ins for ever.
pub const MAX_SIGN_INS: u32 = 3;

/// rustls needs one process-wide crypto provider before any HTTP client is built; ring is the
/// one already in the tree.
fn crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The authorization manager of a server with its stored token (if any), for every request.
/// A kept token is used only while the server still names the authorization server that issued
/// it ([`super::tokens::authority`]): where it now names another, the token is discarded before
/// anything is sent, so a refresh token never goes to an authorization server it did not come
/// from.
pub async fn manager(server: &Server, url: &str) -> Result<AuthorizationManager, McpError> {
    crypto();
    let mut m = AuthorizationManager::new(url).await.map_err(|e| auth_error(server, e))?;
    m.set_credential_store(FileStore::new(url));
    let kept = FileStore::new(url)
        .kept()
        .map_err(|e| McpError::auth_from(format!("MCP server {}: {}", server.name, e.detail()), e))?;
    let machine = server.oauth.as_ref().filter(|o| o.is_machine());
    if let (Some(o), Some(k)) = (machine, &kept) {
        // A machine grant's token that has run out, or that another client got (the
        // configuration changed), is replaced at once: there is nobody to ask.
        let c = &k.credentials;
        if super::grants::expired(c) || o.client_id.as_deref() != Some(c.client_id.as_str()) {
            return machine_grant(server, url).await;
        }
    }
    let Some(kept) = kept else {
        return match machine {
            Some(_) => machine_grant(server, url).await,
            None => Ok(m),
        };
    };
    let md = metadata(server, &m, url, None).await?;
    let now = super::tokens::authority(&md);
    if kept.authority.as_deref() != Some(now.as_str()) {
        discard(server, url, kept.authority.as_deref(), &now)?;
        return match machine {
            Some(_) => machine_grant(server, url).await,
            // No token: the server's 401 asks for a sign-in, as for one never signed in to.
            None => Ok(m),
        };
    }
    m.set_credential_store(FileStore::bound(url, &md));
    m.set_metadata(md);
    m.initialize_from_store().await.map_err(|e| auth_error(server, e))?;
    Ok(m)
}

/// The authorization-server metadata of `url` as a sign-in finds it: from the challenge or the
/// server's protected-resource metadata, else at its origin, a 2025-03-26 server's document
/// taken as [`back_compat_metadata`] says.
async fn metadata(
    server: &Server,
    m: &AuthorizationManager,
    url: &str,
    challenge: Option<&str>,
) -> Result<AuthorizationMetadata, McpError> {
    match m.resolve_metadata_from_challenge(challenge).await {
        Ok(r) => Ok(r.metadata),
        Err(e @ AuthError::AuthorizationServerMismatch { .. }) => {
            back_compat_metadata(url, challenge).await.ok_or_else(|| auth_error(server, e))
        }
        Err(e) => Err(auth_error(server, e)),
    }
}

/// Forgets a kept token the server's authorization server no longer vouches for, saying so.
fn discard(server: &Server, url: &str, was: Option<&str>, now: &str) -> Result<(), McpError> {
    super::tokens::forget(url).map_err(|e| McpError::auth_from(format!("MCP server {}: {}", server.name, e), e))?;
    let was = match was {
        Some(a) => format!("was issued by {a}"),
        None => "names no authorization server (kept by an earlier agentloop)".to_string(),
    };
    agentloop_io::output::stderr_line(&format!(
        "warning: MCP server {}: the kept sign-in {was}, but the server now names {now}; the token was discarded and nothing sent to {now}: sign in again with `agentloop mcp login {}`",
        server.name, server.name
    ));
    Ok(())
}

/// A new token from the server's machine grant, replacing any kept one.
async fn machine_grant(server: &Server, url: &str) -> Result<AuthorizationManager, McpError> {
    crypto();
    super::grants::clear(url).await;
    let o = server.oauth.clone().unwrap_or_default();
    match (o.grant, &o.private_key) {
        (Grant::IdentityAssertion, _) => super::grants::identity_assertion(server, url, &o).await,
        (_, Some(key)) => super::grants::client_credentials_jwt(server, url, &o, key).await,
        _ => client_credentials(server, url).await,
    }
}

/// The client-credentials grant: a token for the configured machine client, kept like any other.
async fn client_credentials(server: &Server, url: &str) -> Result<AuthorizationManager, McpError> {
    crypto();
    let o = server.oauth.clone().unwrap_or_default();
    let (Some(client_id), Some(client_secret)) = (o.client_id, o.client_secret) else {
        return Err(McpError::auth(format!(
            "MCP server {}: mcp.servers.{}.oauth.grant `client_credentials` needs oauth.client_id and oauth.client_secret (or oauth.private_key_file)",
            server.name, server.name
        )));
    };
    let mut m = AuthorizationManager::new(url).await.map_err(|e| auth_error(server, e))?;
    let md = metadata(server, &m, url, None).await?;
    m.set_credential_store(FileStore::bound(url, &md));
    let mut st = OAuthState::Unauthorized(m);
    let config = ClientCredentialsConfig::ClientSecret {
        client_id,
        client_secret,
        scopes: o.scopes,
        resource: Some(url.to_string()),
    };
    st.authenticate_client_credentials(config).await.map_err(|e| auth_error(server, e))?;
    st.into_authorization_manager().ok_or_else(|| {
        McpError::auth(format!("MCP server {}: the client-credentials grant did not finish", server.name))
    })
}

/// The authorization-server metadata of a server that keeps to the 2025-03-26 MCP
/// specification, when rmcp refused it for naming an issuer other than the address it was read
/// from. That specification has no protected-resource metadata: the client reads the metadata
/// at the MCP server's own origin (`/.well-known/oauth-authorization-server`, the path
/// discarded), where an authorization server living under a path (`https://host/oauth`) is
/// found, so its issuer cannot match the address as RFC 8414 section 3.3 asks.
///
/// Taken only when the server publishes no protected-resource metadata (where it does, the
/// newer specification applies and its issuer check stands) and the issuer is at the MCP
/// server's own origin (the origin that served the document speaks only for itself). None:
/// keep rmcp's refusal.
async fn back_compat_metadata(url: &str, challenge: Option<&str>) -> Option<AuthorizationMetadata> {
    let base = url::Url::parse(url).ok()?;
    let origin = base.origin();
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let at = |path: &str| {
        let mut u = base.clone();
        u.set_path(path);
        u.set_query(None);
        u.set_fragment(None);
        u
    };
    let mut prm = vec![at("/.well-known/oauth-protected-resource")];
    if base.path() != "/" {
        prm.insert(0, at(&format!("/.well-known/oauth-protected-resource{}", base.path())));
    }
    if let Some(u) = challenge.and_then(challenge_resource_metadata).and_then(|u| url::Url::parse(&u).ok()) {
        prm.insert(0, u);
    }
    for u in prm {
        if client.get(u).send().await.is_ok_and(|r| r.status().is_success()) {
            return None;
        }
    }
    let r = client.get(at("/.well-known/oauth-authorization-server")).send().await.ok()?;
    if !r.status().is_success() {
        return None;
    }
    let md: AuthorizationMetadata = r.json().await.ok()?;
    let issuer = url::Url::parse(md.issuer.as_deref()?).ok()?;
    (issuer.origin() == origin).then_some(md)
}

/// The `resource_metadata` address a `WWW-Authenticate` challenge names.
fn challenge_resource_metadata(challenge: &str) -> Option<String> {
    let i = challenge.find("resource_metadata=\"")?;
    let rest = &challenge[i + 19..];
    Some(rest[..rest.find('"')?].to_string())
}

/// The scopes a `WWW-Authenticate` challenge names (`scope="a b"`).
pub fn challenge_scopes(challenge: &str) -> Vec<String> {
    let Some(i) = challenge.find("scope=\"") else { return vec![] };
    let rest = &challenge[i + 7..];
    let end = rest.find('"').unwrap_or(rest.len());
    rest[..end].split_whitespace().map(str::to_string).collect()
}

/// Runs a sign-in for `server`: the authorization URL is opened with `$BROWSER` (else printed
/// for the person to open), the redirect comes back to a loopback port, and the token is kept.
/// `challenge` is the server's `WWW-Authenticate` (None: discover from the URL); `scopes` are
/// asked for beyond what the challenge names (the ones already granted, on a step-up).
pub async fn sign_in(server: &Server, url: &str, challenge: Option<&str>) -> Result<(), McpError> {
    crypto();
    let o = server.oauth.clone().unwrap_or_default();
    if o.is_machine() {
        machine_grant(server, url).await?;
        return Ok(());
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| McpError::auth_from(format!("cannot open a loopback port for the sign-in redirect: {e}"), e))?;
    let port = listener.local_addr().map_err(|e| McpError::auth_from(e.to_string(), e))?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    // A step-up keeps what was granted and adds what the server now asks for.
    let store = FileStore::new(url);
    let mut scopes: Vec<String> = o.scopes.clone();
    if let Some(ch) = challenge {
        let asked = challenge_scopes(ch);
        if !asked.is_empty() && ch.contains("insufficient_scope") {
            if let Ok(Some(c)) = store.read() {
                scopes.extend(c.granted_scopes);
            }
        }
        scopes.extend(asked);
    }
    let mut seen = std::collections::BTreeSet::new();
    scopes.retain(|s| seen.insert(s.clone()));
    let mut req = AuthorizationRequest::new(&redirect).with_client_name("agentloop");
    if !scopes.is_empty() {
        req = req.with_scopes(scopes);
    } else {
        req = req.with_initial_scope_selection();
    }
    if let Some(id) = &o.client_id {
        req = req.with_preregistered_client(id);
        if let Some(s) = &o.client_secret {
            req = req.with_client_secret(s);
        }
    }
    if let Some(u) = &o.client_metadata_url {
        req = req.with_client_metadata_url(u);
    }
    if let Some(ch) = challenge {
        req = req.with_challenge(ch);
    }
    // The metadata is found here rather than by rmcp's `start_authorization` so the token is
    // kept bound to the authorization server that issues it.
    let mut m = AuthorizationManager::new(url).await.map_err(|e| auth_error(server, e))?;
    let md = metadata(server, &m, url, challenge).await?;
    m.set_credential_store(FileStore::bound(url, &md));
    m.set_metadata(md);
    let session = AuthorizationSession::new(m, req).await.map_err(|(_, e)| auth_error(server, e))?;
    let mut st = OAuthState::Session(session);
    let auth_url = st.get_authorization_url().await.map_err(|e| auth_error(server, e))?;
    web_address(server, &auth_url)?;
    let waiting = Waiting::start();
    open_browser(server, &auth_url);
    let callback = tokio::time::timeout(SIGN_IN_WAIT, receive(listener)).await.map_err(|_| McpError::Timeout {
        message: format!(
            "MCP server {}: no sign-in came back within {} minutes",
            server.name,
            SIGN_IN_WAIT.as_secs() / 60
        ),
    })??;
    drop(waiting);
    st.handle_callback_url(&callback).await.map_err(|e| auth_error(server, e))?;
    agentloop_io::output::stderr_line(&format!("signed in to MCP server {}", server.name));
    Ok(())
}

/// [`sign_in`] on a runtime of its own, for `mcp login` (which has no hub).
pub fn sign_in_now(server: &Server, url: &str) -> Result<(), McpError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| McpError::Runtime(std::sync::Arc::new(e)))?;
    rt.block_on(sign_in(server, url, None))
}

/// How long a sign-in waits for the browser to come back.
const SIGN_IN_WAIT: Duration = Duration::from_secs(300);

/// Only an http(s) authorization endpoint is shown or handed to `$BROWSER`: one a server names
/// with another scheme (`file:`, `javascript:`, `data:`, an operating system's handler such as
/// `ms-settings:`) is refused, and nothing is opened.
fn web_address(server: &Server, auth_url: &str) -> Result<(), McpError> {
    match url::Url::parse(auth_url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
        Ok(u) => Err(McpError::auth(format!(
            "MCP server {}: its authorization endpoint is a `{}:` address, not http(s); nothing was opened",
            server.name,
            u.scheme()
        ))),
        Err(e) => Err(McpError::auth(format!(
            "MCP server {}: its authorization endpoint is not a URL ({e}); nothing was opened",
            server.name
        ))),
    }
}

/// Opens the authorization URL: with `$BROWSER` when set (a command that takes the URL as its
/// argument), else by printing it for the person to open.
fn open_browser(server: &Server, url: &str) {
    agentloop_io::output::stderr_line(&format!("sign in to MCP server {} in your browser:", server.name));
    agentloop_io::output::stderr_line(&format!("  {url}"));
    let Ok(browser) = std::env::var("BROWSER") else { return };
    let Some(cmd) = browser.split(':').find(|c| !c.trim().is_empty()) else { return };
    let mut parts = cmd.split_whitespace();
    let Some(program) = parts.next() else { return };
    let mut args: Vec<String> = parts.map(str::to_string).collect();
    if args.iter().any(|a| a.contains("%s")) {
        args = args.into_iter().map(|a| a.replace("%s", url)).collect();
    } else {
        args.push(url.to_string());
    }
    let spawned = std::process::Command::new(program)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        agentloop_io::output::stderr_line(&format!(
            "warning: cannot start $BROWSER ({program}): {e}; open the address above yourself"
        ));
    }
}

/// Waits for the browser's redirect on the loopback port: the first request to `/callback`
/// carrying `code` or `error`. Returns the full redirect URL.
async fn receive(listener: tokio::net::TcpListener) -> Result<String, McpError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let (mut sock, _) =
            listener.accept().await.map_err(|e| McpError::auth_from(format!("the sign-in redirect failed: {e}"), e))?;
        let mut buf = vec![0u8; 8192];
        let mut n = 0;
        while n < buf.len() {
            match sock.read(&mut buf[n..]).await {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
            if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        let head = String::from_utf8_lossy(&buf[..n]).to_string();
        let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
        let is_callback = target.starts_with("/callback?");
        let query = target.split_once('?').map(|(_, q)| q).unwrap_or("");
        let has = |k: &str| query.split('&').any(|p| p.starts_with(&format!("{k}=")));
        let (status, body) = if is_callback && (has("code") || has("error")) {
            ("200 OK", "Signed in. You can close this page and go back to agentloop.")
        } else {
            ("404 Not Found", "Not the sign-in redirect.")
        };
        let _ = sock
            .write_all(
                format!(
                    "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await;
        if !(is_callback && (has("code") || has("error"))) {
            continue;
        }
        if has("error") {
            let err = query.split('&').find_map(|p| p.strip_prefix("error=")).unwrap_or("error");
            return Err(McpError::auth(format!("the authorization server refused the sign-in: {err}")));
        }
        return Ok(format!("http://127.0.0.1{target}"));
    }
}

/// What to tell a person when a server wants authorization and no sign-in may run here.
pub fn needs_sign_in(server: &Server, challenge: &str) -> String {
    let what = if challenge.contains("insufficient_scope") {
        let s = challenge_scopes(challenge);
        if s.is_empty() {
            "needs more scopes".to_string()
        } else {
            format!("needs the scope {}", s.join(" "))
        }
    } else {
        "requires authorization".to_string()
    };
    format!(
        "MCP server {} ({}) {what}: run `agentloop mcp login {}` (or configure mcp.servers.{}.oauth with grant: client_credentials)",
        server.name, server.display, server.name, server.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_scopes_of_a_challenge() {
        assert_eq!(
            challenge_scopes(
                r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="x""#
            ),
            ["mcp:basic", "mcp:write"]
        );
        assert!(challenge_scopes(r#"Bearer resource_metadata="x""#).is_empty());
    }
}
