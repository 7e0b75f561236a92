//! The secrets agentloop holds itself, for redaction and out of the tools' reach.
//!
//! Registered ([`agentloop_io::redact::register`]) when a run's tools are loaded, before any tool runs:
//! the Ductile token (written, or named by `api_token_env`; one `api_token_cmd` prints is
//! registered when it is run), the progress webhook's token and address (a chat webhook's address
//! is its credential), and `serve`'s kept API token (so a run that reads it some other way than
//! the file tools and the shell sandbox allow, `sandbox: none`, still writes `[REDACTED]`). The
//! others are registered where they are obtained: provider keys (`model`), MCP header and
//! environment credentials, OAuth client secrets and keys (`mcp::config`), MCP access and refresh
//! tokens (`mcp::tokens`, on every load and save), OTel header values (`otel`), and every API
//! token of a running `serve` (`serve`).
//!
//! Kept out of reach ([`Stores`]): agentloop's stores of tokens in the user's state folder —
//! `serve-token` and `mcp-auth/` under `$XDG_STATE_HOME/agentloop` — are refused by the file
//! tools however they are reached (a path, a link, a hard link: judged by the real path and by
//! the file's identity), and hidden inside the shell tool's sandbox.

use agentloop_config::config::Config;
use camino::{Utf8Path, Utf8PathBuf};
use std::os::unix::fs::MetadataExt;

/// agentloop's folder in the user's state folder (`$XDG_STATE_HOME/agentloop`, else
/// `~/.local/state/agentloop`); None without either variable.
pub fn state_dir() -> Option<Utf8PathBuf> {
    Some(agentloop_config::config::xdg_dir("XDG_STATE_HOME", ".local/state")?.join("agentloop"))
}

/// Where `serve` keeps the token it generated.
pub fn serve_token_path() -> Option<Utf8PathBuf> {
    Some(state_dir()?.join("serve-token"))
}

/// Where MCP sign-in tokens are kept, one file per server URL.
pub fn mcp_token_dir() -> Option<Utf8PathBuf> {
    Some(state_dir()?.join("mcp-auth"))
}

/// Makes a folder for tokens, owner-only (0700) — and its parents, when missing — and makes an
/// existing one owner-only too, whoever's umask made it: the names of its files say which
/// servers the user signed in to.
pub fn private_dir(d: &Utf8Path) -> agentloop_types::error::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(d)
        .map_err(|e| agentloop_types::error::Error::io("create folder", d, e))?;
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| agentloop_types::error::Error::io("set permissions of", d, e))
}

/// Registers the secrets `cfg` holds and serve's kept token (see the module's doc).
pub fn register(cfg: &Config) {
    let d = &cfg.ductile;
    let env_token = d.api_token_env.as_deref().and_then(|v| std::env::var(v).ok());
    let kept = serve_token_path().and_then(|p| read_small(&p));
    let held = [d.api_token.as_deref(), env_token.as_deref(), cfg.handle.progress_token.as_deref(), kept.as_deref()];
    for s in held.into_iter().flatten() {
        agentloop_io::redact::register(s);
    }
    if let Some(url) = &cfg.handle.progress_url {
        agentloop_io::redact::register(url);
    }
}

/// A small file's text (a token file: at most 4 KiB is read), None when it is missing or no
/// regular file.
fn read_small(p: &Utf8Path) -> Option<String> {
    use std::io::Read;
    let f = std::fs::File::open(p).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut s = String::new();
    f.take(4096).read_to_string(&mut s).ok()?;
    Some(s.trim().to_string())
}

/// The token stores as they are now: their real paths and the identities (device, inode) of
/// the files in them, so a link or a hard link to one is known too.
#[derive(Debug, Default, Clone)]
pub struct Stores {
    /// Real paths of the stores that exist (the token file, the token folder).
    pub paths: Vec<Utf8PathBuf>,
    ids: Vec<(u64, u64)>,
}

impl Stores {
    pub fn load() -> Stores {
        let mut s = Stores::default();
        for p in [serve_token_path(), mcp_token_dir()].into_iter().flatten() {
            let Ok(real) = p.canonicalize_utf8() else { continue };
            if let Ok(m) = std::fs::metadata(&real) {
                s.ids.push((m.dev(), m.ino()));
                if m.is_dir() {
                    for e in std::fs::read_dir(&real).into_iter().flatten().flatten() {
                        if let Ok(m) = e.metadata() {
                            s.ids.push((m.dev(), m.ino()));
                        }
                    }
                }
            }
            s.paths.push(real);
        }
        s
    }

    /// Whether `path` (as the tool would open it) is, or is inside, a store, or is a file of one
    /// under another name.
    pub fn holds(&self, path: &Utf8Path) -> bool {
        if self.paths.is_empty() {
            return false;
        }
        let real = path.canonicalize_utf8().unwrap_or_else(|_| path.to_path_buf());
        self.paths.iter().any(|p| real.starts_with(p))
            || std::fs::metadata(&real).is_ok_and(|m| self.ids.contains(&(m.dev(), m.ino())))
    }

    /// [`Stores::holds`] for a file met in a walk that follows no link (its path is real).
    pub fn holds_real(&self, real: &std::path::Path, m: &std::fs::Metadata) -> bool {
        !self.paths.is_empty()
            && (self.paths.iter().any(|p| real.starts_with(p)) || self.ids.contains(&(m.dev(), m.ino())))
    }
}
