//! The grants no person takes part in, beyond rmcp's client-credentials grant with a secret:
//! - the client-credentials grant with `private_key_jwt` client authentication (RFC 7523
//!   section 2.2): the client signs an assertion with its key ([`super::jwt`]);
//! - the identity assertion grant of enterprise-managed authorization: the person's ID token
//!   from the enterprise identity provider is exchanged there for an ID-JAG (RFC 8693 token
//!   exchange), which the MCP server's authorization server redeems for an access token
//!   (RFC 7523 JWT bearer grant). Both exchanges are rmcp's (`enterprise`).
//!
//! Either way the token is kept like any other ([`super::tokens::FileStore`]: the user's state
//! folder, owner-only, found by the exact server URL) and a new one is obtained, with no browser,
//! when it has expired or the server refuses it.

use super::config::{IdentityProvider, OAuth, Server};
use super::error::McpError;
use super::jwt::Key;
use super::tokens::{auth_error, FileStore};
use rmcp::transport::auth::enterprise::{
    EmaAuthorizationServer, EmaClientAssertion, EmaClientAssertionProvider, EmaClientAuthentication, EmaExchangeRequest,
};
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadata, CredentialStore, OAuthTokenResponse, StoredCredentials,
};
use serde_json::Value;
use std::time::Duration;

/// The authorization server of `url` (discovered as for a sign-in) and a manager on its store.
async fn discover(server: &Server, url: &str) -> Result<(AuthorizationManager, AuthorizationMetadata), McpError> {
    let mut m = AuthorizationManager::new(url).await.map_err(|e| auth_error(server, e))?;
    let md = m.resolve_metadata().await.map_err(|e| auth_error(server, e))?.metadata;
    m.set_credential_store(FileStore::bound(url, &md));
    m.set_metadata(md.clone());
    Ok((m, md))
}

/// An endpoint a credential may be sent to: https, or http on the loopback interface.
fn secure(endpoint: &str) -> bool {
    let Ok(u) = url::Url::parse(endpoint) else { return false };
    let loopback = match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    u.scheme() == "https" || (u.scheme() == "http" && loopback)
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

/// Keeps a token response (its JSON) for `url` and returns the manager that will send it.
async fn keep(
    server: &Server,
    url: &str,
    mut m: AuthorizationManager,
    md: &AuthorizationMetadata,
    client_id: &str,
    token: Value,
) -> Result<AuthorizationManager, McpError> {
    let scopes: Vec<String> =
        token["scope"].as_str().map(|s| s.split_whitespace().map(str::to_string).collect()).unwrap_or_default();
    let response: OAuthTokenResponse = serde_json::from_value(token).map_err(|e| {
        McpError::auth_from(
            format!("MCP server {}: the authorization server's token answer is not valid: {e}", server.name),
            e,
        )
    })?;
    let creds = StoredCredentials::new(client_id.to_string(), Some(response), scopes, Some(now()))
        .with_issuer(md.issuer.clone());
    FileStore::bound(url, md).save(creds).await.map_err(|e| auth_error(server, e))?;
    m.initialize_from_store().await.map_err(|e| auth_error(server, e))?;
    Ok(m)
}

/// The client-credentials grant, the client authenticated by a JWT signed with `key`.
pub(super) async fn client_credentials_jwt(
    server: &Server,
    url: &str,
    o: &OAuth,
    key: &Key,
) -> Result<AuthorizationManager, McpError> {
    let name = &server.name;
    let client_id = o.client_id.as_deref().ok_or_else(|| {
        McpError::auth(format!(
            "MCP server {name}: mcp.servers.{name}.oauth.private_key_file (or private_key) needs oauth.client_id"
        ))
    })?;
    let (m, md) = discover(server, url).await?;
    if !secure(&md.token_endpoint) {
        return Err(McpError::auth(format!(
            "MCP server {name}: the token endpoint {} is neither https nor on this machine; no assertion is sent to it",
            md.token_endpoint
        )));
    }
    // RFC 7523 section 3 and its update for OAuth 2.1: the audience is the authorization
    // server's issuer identifier (the token endpoint where it names none).
    let audience = md.issuer.clone().unwrap_or_else(|| md.token_endpoint.clone());
    let assertion =
        key.assertion(client_id, &audience).map_err(|e| McpError::auth_from(format!("MCP server {name}: {e}"), e))?;
    let mut form: Vec<(&str, String)> = vec![
        ("grant_type", "client_credentials".into()),
        ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into()),
        ("client_assertion", assertion),
        ("resource", url.to_string()),
    ];
    if !o.scopes.is_empty() {
        form.push(("scope", o.scopes.join(" ")));
    }
    let client = http_client(name)?;
    let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
    let r = client
        .post(&md.token_endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| {
            McpError::auth_from(format!("MCP server {name}: the token request to {} failed: {e}", md.token_endpoint), e)
        })?;
    let status = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let what = [v["error"].as_str(), v["error_description"].as_str()].into_iter().flatten().collect::<Vec<_>>();
        return Err(McpError::auth(server.redact(&format!(
            "MCP server {name}: the authorization server refused the client-credentials grant (HTTP {}): {}",
            status.as_u16(),
            if what.is_empty() { "no reason given".to_string() } else { what.join(": ") }
        ))));
    }
    keep(server, url, m, &md, client_id, v).await
}

/// A `private_key_jwt` client assertion for one of the identity assertion grant's servers.
struct Signer {
    key: Key,
}

#[async_trait::async_trait]
impl EmaClientAssertionProvider for Signer {
    async fn create_assertion(
        &self,
        server: &EmaAuthorizationServer,
    ) -> Result<EmaClientAssertion, Box<dyn std::error::Error + Send + Sync>> {
        Ok(EmaClientAssertion::new(self.key.assertion(&server.client_id, &server.issuer)?))
    }
}

/// How a client authenticates: a signed JWT, a secret (HTTP Basic, unless the server takes only
/// `client_secret_post`), or nothing (a public client).
fn authentication(secret: Option<&str>, key: Option<&Key>, methods: Option<&Value>) -> EmaClientAuthentication {
    if let Some(key) = key {
        return EmaClientAuthentication::JwtAssertion(std::sync::Arc::new(Signer { key: key.clone() }));
    }
    let Some(secret) = secret else { return EmaClientAuthentication::None };
    let secret = oauth2::ClientSecret::new(secret.to_string());
    let listed = |m: &str| methods.and_then(Value::as_array).is_some_and(|a| a.iter().any(|x| x == m));
    if listed("client_secret_post") && !listed("client_secret_basic") {
        EmaClientAuthentication::ClientSecretPost(secret)
    } else {
        EmaClientAuthentication::ClientSecretBasic(secret)
    }
}

/// The identity provider's token endpoint: as configured, else from its metadata (OpenID, then
/// OAuth), whose issuer must be the one configured.
async fn idp_token_endpoint(server: &Server, idp: &IdentityProvider) -> Result<String, McpError> {
    if let Some(t) = &idp.token_endpoint {
        return Ok(t.clone());
    }
    let name = &server.name;
    let client = http_client(name)?;
    let base = idp.issuer.trim_end_matches('/');
    for well_known in ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"] {
        let Ok(r) = client.get(format!("{base}{well_known}")).send().await else { continue };
        if !r.status().is_success() {
            continue;
        }
        let Ok(md) = r.json::<Value>().await else { continue };
        if md["issuer"].as_str() != Some(idp.issuer.as_str()) {
            return Err(McpError::auth(format!(
                "MCP server {name}: the identity provider's metadata names the issuer {} where oauth.identity_provider.issuer is {}",
                md["issuer"], idp.issuer
            )));
        }
        if let Some(t) = md["token_endpoint"].as_str() {
            return Ok(t.to_string());
        }
    }
    Err(McpError::auth(format!(
        "MCP server {name}: no token endpoint in the metadata of the identity provider {}; set mcp.servers.{name}.oauth.identity_provider.token_endpoint",
        idp.issuer
    )))
}

/// The identity assertion grant: the ID token exchanged at the identity provider for an
/// ID-JAG naming this server, redeemed at the server's authorization server.
pub(super) async fn identity_assertion(
    server: &Server,
    url: &str,
    o: &OAuth,
) -> Result<AuthorizationManager, McpError> {
    let name = &server.name;
    let (Some(idp), Some(client_id)) = (&o.identity_provider, o.client_id.as_deref()) else {
        return Err(McpError::auth(format!(
            "MCP server {name}: mcp.servers.{name}.oauth.grant `identity_assertion` needs oauth.client_id and oauth.identity_provider"
        )));
    };
    let (m, md) = discover(server, url).await?;
    let Some(issuer) = md.issuer.clone() else {
        return Err(McpError::auth(format!(
            "MCP server {name}: its authorization server's metadata names no issuer, which an identity assertion must name"
        )));
    };
    let idp_server = EmaAuthorizationServer::new(&idp.issuer, idp_token_endpoint(server, idp).await?, &idp.client_id)
        .with_client_authentication(authentication(idp.client_secret.as_deref(), None, None));
    let methods = md.additional_fields.get("token_endpoint_auth_methods_supported");
    let resource_as = EmaAuthorizationServer::new(&issuer, &md.token_endpoint, client_id)
        .with_client_authentication(authentication(o.client_secret.as_deref(), o.private_key.as_ref(), methods));
    let http = rmcp::transport::auth::default_oauth_http_client().map_err(|e| auth_error(server, e))?;
    let token = EmaExchangeRequest::new_with_id_token(idp_server, resource_as, url, &idp.id_token)
        .with_scopes(o.scopes.iter().cloned())
        .exchange(&http, &http)
        .await
        .map_err(|e| {
            McpError::auth_from(
                server.redact(&format!("MCP server {name}: the identity assertion grant failed: {e}")),
                e,
            )
        })?;
    let mut scopes: Vec<&str> = token.scopes.iter().map(String::as_str).collect();
    scopes.sort();
    let mut v = serde_json::json!({"access_token": token.access_token.secret(), "token_type": "Bearer"});
    if let Some(d) = token.expires_in {
        v["expires_in"] = d.as_secs().into();
    }
    if !scopes.is_empty() {
        v["scope"] = scopes.join(" ").into();
    }
    keep(server, url, m, &md, client_id, v).await
}

/// Whether a kept token of a machine grant must be replaced: it has expired (or will within a
/// minute) and there is no refresh token to renew it with.
pub(super) fn expired(creds: &StoredCredentials) -> bool {
    let Some(t) = &creds.token_response else { return true };
    let v = serde_json::to_value(t).unwrap_or(Value::Null);
    if v.get("refresh_token").is_some_and(|r| !r.is_null()) {
        return false;
    }
    match (v["expires_in"].as_u64(), creds.token_received_at) {
        (Some(e), Some(at)) => at + e < now() + 60,
        _ => false,
    }
}

/// Forgets the kept token of `url` so the next grant starts afresh.
pub(super) async fn clear(url: &str) {
    let _ = FileStore::new(url).clear().await;
}

/// The client for token and metadata requests: bounded in time, and following no redirect (a
/// token request must reach the endpoint the metadata named, not wherever it points).
fn http_client(name: &str) -> Result<reqwest::Client, McpError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| McpError::auth_from(format!("MCP server {name}: cannot build the HTTP client: {e}"), e))
}
