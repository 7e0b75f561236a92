//! The per-user HTTP cache of `web_fetch` and `http_call` GETs: a source fetched once is
//! answered from `$XDG_CACHE_HOME/agentloop/http/` (else `~/.cache/agentloop/http/`) while
//! it is fresh, and revalidated with a conditional request (If-None-Match, If-Modified-Since)
//! when it is not, so an unchanged feed costs a 304 and no body.
//!
//! Freshness is decided by `http-cache-semantics` (RFC 9111: Cache-Control, Expires, Age,
//! ETag, Last-Modified, Vary), as a shared cache would decide it, so `private` is never
//! stored; `tools.http.cache` adds a floor for sources that send no Cache-Control or Expires,
//! applied when an answer is read (so one workspace's floor never changes what another reads).
//!
//! Invariants:
//! - Nothing credentialed is stored or served: a request carrying any header outside the short
//!   list of harmless ones (credentials have many names), or a URL that carries a credential (a
//!   query parameter named like one, `mask::secret_query_name`; a `user:pass@`; a known secret,
//!   as written or percent-decoded), bypasses the cache both ways; a response that sets a
//!   cookie, says `private` or `no-store`, comes from such a URL after redirects, or holds a
//!   known secret (`redact::contains_secret`: the environment's and the registered ones, in
//!   its body or headers) is never stored.
//! - The folder is the user's own: created 0700, each file written whole (temp + rename) as
//!   0600; a folder that is a link, is not the user's, or is open to others is not used.
//! - Bounded: entries over [`MAX_ENTRY`] are not stored; when the folder passes [`MAX_TOTAL`],
//!   the least recently written entries go until it is under three quarters of it.
//! - A cached answer is served only where the network policy would fetch it now (the URL and
//!   the URL it came from are checked again), and a file that cannot be read is a miss.

use super::fetch::{fetch, Failed, Fetched};
use agentloop_config::config::HttpToolConfig;
use camino::{Utf8Path, Utf8PathBuf};
use http_cache_semantics::{AfterResponse, BeforeRequest, CacheOptions, CachePolicy};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::time::{Duration, SystemTime};

/// Largest entry stored (headers and body).
const MAX_ENTRY: usize = 8 * 1024 * 1024;
/// Most bytes the cache folder holds before the oldest entries go.
pub const MAX_TOTAL: u64 = 64 * 1024 * 1024;
/// The entry format (the first line of each file).
const FORMAT: u32 = 1;

/// Request headers that carry no credentials: only a request with none but these is cached.
const HARMLESS: &[&str] = &["accept", "accept-encoding", "accept-language", "user-agent"];

/// What the cache did for one GET: the tool result and the trace say it.
#[derive(Debug, Clone)]
pub struct Hit {
    /// `fresh` (no request sent) or `revalidated` (the server answered 304 Not Modified).
    pub kind: &'static str,
    /// How old the answer is (since the server sent it).
    pub age: Duration,
}

impl Hit {
    /// The tool result's `metadata.http_cache` and the trace's `data.http_cache`.
    pub fn to_value(&self) -> Value {
        let mut v = json!({"hit": self.kind, "age_seconds": self.age.as_secs()});
        if self.kind == "revalidated" {
            v["status"] = json!(304);
        }
        v
    }

    /// One line for the model: where the answer came from and how old it is.
    pub fn note(&self) -> String {
        let age = humantime::format_duration(Duration::from_secs(self.age.as_secs()));
        match self.kind {
            "revalidated" => {
                format!("[from the HTTP cache, {age} old; the server confirmed it unchanged (304 Not Modified)]")
            }
            _ => format!("[from the HTTP cache, {age} old; still fresh, so the server was not asked]"),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Meta {
    format: u32,
    url: String,
    /// The URL the answer came from (after redirects).
    final_url: String,
    status: u16,
    headers: Map<String, Value>,
    truncated: bool,
    /// When the answer was stored (seconds since the epoch); a 304 does not change it.
    stored_at: u64,
    policy: CachePolicy,
}

/// A GET through the cache (`setting` off, or a request with other headers: straight to
/// [`fetch`]). Returns the answer and, when it came from the cache, how.
pub fn get(
    p: &HttpToolConfig,
    url: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<(Fetched, Option<Hit>), Failed> {
    let plain = || fetch(p, "GET", url, headers, None, timeout).map(|f| (f, None));
    let Some(floor) = p.cache.floor() else { return plain() };
    if headers.iter().any(|(k, v)| {
        !HARMLESS.contains(&k.trim().to_ascii_lowercase().as_str())
            || agentloop_io::redact::contains_secret(v.as_bytes())
    }) || credentialed(url)
    {
        return plain();
    }
    let Some(dir) = folder() else { return plain() };
    let Ok(req) = request(p, url, headers) else { return plain() };
    let path = dir.join(key(url, headers));
    let now = agentloop_types::clock::now();
    let Some((meta, body)) = read(&path).filter(|(m, _)| m.url == url) else {
        let f = fetch(p, "GET", url, headers, None, timeout)?;
        store(&dir, &path, url, &req, &f, floor, now);
        return Ok((f, None));
    };
    // Served only where the policy would fetch it now: the URL and where it came from.
    let deny = super::hosts::DenyList::new(&p.deny_hosts);
    if super::fetch::check_url(&meta.final_url, p, &deny).is_err() {
        return plain();
    }
    let age = meta.policy.age(now);
    let sends_no_freshness = !meta.headers.contains_key("cache-control") && !meta.headers.contains_key("expires");
    let by_floor = sends_no_freshness && age < floor;
    let conditional = match meta.policy.before_request(&req, now) {
        BeforeRequest::Fresh(_) => return Ok((cached(&meta, body), Some(Hit { kind: "fresh", age }))),
        _ if by_floor => return Ok((cached(&meta, body), Some(Hit { kind: "fresh", age }))),
        BeforeRequest::Stale { request, .. } => request,
    };
    // Revalidate: the request as the policy rewrote it (with If-None-Match / If-Modified-Since).
    let mut asked: Vec<(String, String)> = headers.to_vec();
    for name in ["if-none-match", "if-modified-since"] {
        if let Some(v) = conditional.headers.get(name).and_then(|v| v.to_str().ok()) {
            asked.push((name.to_string(), v.to_string()));
        }
    }
    let f = fetch(p, "GET", url, &asked, None, timeout)?;
    if f.status == 304 {
        let Ok(res) = response(&f) else { return Ok((f, None)) };
        if let AfterResponse::NotModified(policy, parts) = meta.policy.after_response(&req, &res, now) {
            let mut kept = meta;
            for (k, v) in &parts.headers {
                kept.headers.insert(k.as_str().to_string(), Value::String(v.to_str().unwrap_or("").to_string()));
            }
            // How old the copy is: since it was first stored (the 304 only confirmed it).
            let age = now
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .saturating_sub(Duration::from_secs(kept.stored_at));
            kept.policy = policy;
            write(&dir, &path, &kept, &body);
            return Ok((cached(&kept, body), Some(Hit { kind: "revalidated", age })));
        }
        // A 304 that matches nothing stored: the stored answer is not trusted; fetch it whole.
        let f = fetch(p, "GET", url, headers, None, timeout)?;
        store(&dir, &path, url, &req, &f, floor, now);
        return Ok((f, None));
    }
    store(&dir, &path, url, &req, &f, floor, now);
    Ok((f, None))
}

fn cached(meta: &Meta, body: Vec<u8>) -> Fetched {
    Fetched {
        status: meta.status,
        url: meta.final_url.clone(),
        headers: meta.headers.clone(),
        body,
        truncated: meta.truncated,
    }
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs()
}

/// The request as the policy sees it: GET, the URL, the headers sent.
fn request(p: &HttpToolConfig, url: &str, headers: &[(String, String)]) -> Result<http::Request<()>, ()> {
    let mut b = http::Request::builder().method("GET").uri(url.trim()).header("user-agent", p.user_agent.as_str());
    for (k, v) in headers {
        b = b.header(k.trim(), v.as_str());
    }
    b.body(()).map_err(|_| ())
}

fn response(f: &Fetched) -> Result<http::Response<()>, ()> {
    let mut b = http::Response::builder().status(f.status);
    for (k, v) in &f.headers {
        b = b.header(k.as_str(), v.as_str().unwrap_or(""));
    }
    b.body(()).map_err(|_| ())
}

/// The file name of a request: a hash of the URL and the headers sent (any of which may change
/// the answer).
fn key(url: &str, headers: &[(String, String)]) -> String {
    use sha2::Digest;
    let mut h: Vec<String> =
        headers.iter().map(|(k, v)| format!("{}: {}", k.trim().to_ascii_lowercase(), v.trim())).collect();
    h.sort();
    let digest = sha2::Sha256::digest(format!("GET {}\n{}", url.trim(), h.join("\n")).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a URL carries a credential: a query parameter named like one (`?api_key=`,
/// `?token=`, `?sig=`; [`agentloop_config::mask::secret_query_name`]), a `user:pass@`, or a known secret
/// anywhere in it, as written or percent-decoded. A URL that cannot be read counts as one.
fn credentialed(url: &str) -> bool {
    let Ok(u) = url::Url::parse(url.trim()) else { return true };
    !u.username().is_empty()
        || u.password().is_some()
        || u.query_pairs().any(|(k, _)| agentloop_config::mask::secret_query_name(&k))
        || agentloop_io::redact::contains_secret(url.as_bytes())
        || agentloop_io::redact::contains_secret(&percent_decode(url))
}

/// `%XX` escapes read as bytes (a broken one is kept as it is).
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = (b[i] == b'%').then(|| s.get(i + 1..i + 3)).flatten().and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(v) => {
                out.push(v);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    out
}

/// Stores an answer the policy allows a shared cache to keep, and nothing credentialed.
fn store(
    dir: &Utf8Path,
    path: &Utf8Path,
    url: &str,
    req: &http::Request<()>,
    f: &Fetched,
    floor: Duration,
    now: SystemTime,
) {
    let h = |k: &str| f.headers.get(k).and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    if f.truncated
        || f.body.len() > MAX_ENTRY
        || f.headers.contains_key("set-cookie")
        || h("cache-control").contains("private")
        || credentialed(&f.url)
        || agentloop_io::redact::contains_secret(&f.body)
        || agentloop_io::redact::contains_secret(&serde_json::to_vec(&f.headers).unwrap_or_default())
    {
        return;
    }
    let Ok(res) = response(f) else { return };
    let opts = CacheOptions { shared: true, ..CacheOptions::default() };
    let policy = CachePolicy::new_options(req, &res, now, opts);
    if !policy.is_storable() {
        return;
    }
    // Kept only when it can ever be reused: fresh for a while, a floor, or a validator.
    let validator = f.headers.contains_key("etag") || f.headers.contains_key("last-modified");
    if policy.time_to_live(now).is_zero() && floor.is_zero() && !validator {
        return;
    }
    let meta = Meta {
        format: FORMAT,
        url: url.to_string(),
        final_url: f.url.clone(),
        status: f.status,
        headers: f.headers.clone(),
        truncated: false,
        stored_at: secs(now),
        policy,
    };
    write(dir, path, &meta, &f.body);
}

/// Writes an entry (its meta line, then the body) as one owner-only file, then keeps the
/// folder within its bound. A failure only means the next call fetches again.
fn write(dir: &Utf8Path, path: &Utf8Path, meta: &Meta, body: &[u8]) {
    let Ok(mut bytes) = serde_json::to_vec(meta) else { return };
    bytes.push(b'\n');
    bytes.extend_from_slice(body);
    if bytes.len() > MAX_ENTRY + 64 * 1024 {
        return;
    }
    if let Err(e) = agentloop_io::fs::write_private(path, &bytes) {
        agentloop_io::log::info(&format!("http cache: {}", e.detail()));
        return;
    }
    trim(dir);
}

/// A stored entry, or None (a miss) for anything but a good file of this format.
fn read(path: &Utf8Path) -> Option<(Meta, Vec<u8>)> {
    let m = std::fs::symlink_metadata(path).ok()?;
    if !m.is_file() || !own(&m) {
        return None;
    }
    let bytes = agentloop_io::fs::read_bytes_optional(path).ok()??;
    let nl = bytes.iter().position(|b| *b == b'\n')?;
    let meta: Meta = serde_json::from_slice(&bytes[..nl]).ok()?;
    (meta.format == FORMAT).then(|| (meta, bytes[nl + 1..].to_vec()))
}

fn own(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    m.uid() == rustix::process::getuid().as_raw()
}

/// The cache folder, created 0700; None when it cannot be the user's own.
pub fn folder() -> Option<Utf8PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = agentloop_config::config::xdg_dir("XDG_CACHE_HOME", ".cache")?.join("agentloop").join("http");
    if std::fs::symlink_metadata(&dir).is_err() {
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir);
    }
    let m = std::fs::symlink_metadata(&dir).ok()?;
    if !m.is_dir() || !own(&m) {
        agentloop_io::log::info(&format!("http cache: {dir} is not a folder of this user's own; not used"));
        return None;
    }
    if m.permissions().mode() & 0o077 != 0
        && std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).is_err()
    {
        return None;
    }
    Some(dir)
}

/// Keeps the folder under [`MAX_TOTAL`]: past it, the least recently written entries go until
/// it holds three quarters of it.
fn trim(dir: &Utf8Path) {
    trim_to(dir, MAX_TOTAL)
}

/// [`trim`] with the bound given.
fn trim_to(dir: &Utf8Path, max_total: u64) {
    let mut files: Vec<(SystemTime, u64, Utf8PathBuf)> = dir
        .read_dir_utf8()
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let m = e.path().symlink_metadata().ok()?;
            let when = m.modified().ok()?;
            (m.is_file() && !e.file_name().starts_with('.')).then(|| (when, m.len(), e.path().to_owned()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    if total <= max_total {
        return;
    }
    files.sort();
    for (_, len, path) in files {
        if total <= max_total / 4 * 3 {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_with_a_credential_is_known_by_its_query_its_user_or_a_secret() {
        for url in [
            "https://h.example/a?api_key=k",
            "https://h.example/a?q=1&ApiKey=k",
            "https://h.example/a?access_token=t",
            "https://h.example/a?X-Amz-Signature=abc&X-Amz-Date=1",
            "https://h.example/a?sig=abc",
            "https://u:p@h.example/a",
            "https://u@h.example/a",
            "not a url",
        ] {
            assert!(credentialed(url), "{url}");
        }
        for url in ["https://h.example/a", "https://h.example/a?q=rust&page=2", "http://127.0.0.1:8/feed?format=rss"] {
            assert!(!credentialed(url), "{url}");
        }
        agentloop_io::redact::register("cache-test-secret-0123");
        assert!(credentialed("https://h.example/cache-test-secret-0123"));
        assert!(credentialed("https://h.example/a?q=cache%2Dtest%2Dsecret%2D0123"));
        assert_eq!(percent_decode("a%41%zz%4"), b"aA%zz%4");
    }

    /// Past the bound, the entries written longest ago go until three quarters of it are left;
    /// under it, nothing goes.
    #[test]
    fn the_folder_is_kept_under_its_bound_oldest_written_first() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Utf8Path::from_path(tmp.path()).unwrap();
        let epoch = SystemTime::UNIX_EPOCH;
        for i in 0..10u64 {
            let path = dir.join(format!("entry-{i}"));
            let f = std::fs::File::create(&path).unwrap();
            f.set_len(100).unwrap();
            f.set_modified(epoch + std::time::Duration::from_secs(1_000 + i)).unwrap();
        }
        let names = || {
            let mut v: Vec<String> = dir.read_dir_utf8().unwrap().map(|e| e.unwrap().file_name().to_string()).collect();
            v.sort();
            v
        };
        trim_to(dir, 1_000);
        assert_eq!(names().len(), 10, "at the bound nothing goes");
        trim_to(dir, 800);
        let left = names();
        assert_eq!(left.len(), 6, "{left:?}");
        assert!(left.iter().all(|n| n.as_str() >= "entry-4"), "the oldest written went first: {left:?}");
    }
}
