//! A real browser for the page tests: Debian's chromium, headless, with no driver (its
//! `--dump-dom` prints the DOM after the page is parsed and laid out; `--screenshot` saves a
//! PNG). Where chromium is not installed the tests that need it say so and skip; .ci/run
//! installs it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The chromium binary on PATH, if any.
pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The chromium binary, or None after printing why the test is skipped.
pub fn or_skip(test: &str) -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        eprintln!("skipping the browser part of {test}: chromium is not installed (apt-get install chromium; .ci/run installs it)");
    }
    found
}

fn run(bin: &Path, args: &[String]) -> String {
    let profile = tempfile::tempdir().expect("profile dir");
    let mut cmd = Command::new(bin);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(args)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start chromium");
    // Read stdout on a thread so a large DOM cannot block the browser.
    let mut out = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            let dom = reader.join().expect("reader");
            assert!(status.success() || !dom.is_empty(), "chromium failed: {status}");
            return dom;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 180 s: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The DOM of `url` after the browser has loaded it.
pub fn dump_dom(bin: &Path, url: &str) -> String {
    run(bin, &["--dump-dom".into(), url.into()])
}

/// A screenshot of `url` saved to `to` (a PNG of `width` × `height`).
pub fn screenshot(bin: &Path, url: &str, to: &Path, width: u32, height: u32) {
    std::fs::create_dir_all(to.parent().expect("parent")).expect("screenshot dir");
    let _ = std::fs::remove_file(to);
    run(bin, &[format!("--screenshot={}", to.display()), format!("--window-size={width},{height}"), url.into()]);
    let bytes = std::fs::read(to).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", to.display()));
    assert!(bytes.starts_with(b"\x89PNG"), "{} is not a PNG", to.display());
}

/// Where screenshots go for people to look at: target/tmp/screenshots/.
pub fn shots_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots")
}

/// A `file://` URL for a local file.
pub fn file_url(p: &Path) -> String {
    format!("file://{}", p.canonicalize().expect("page exists").display())
}

/// How often `needle` occurs in `hay`.
pub fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// The value of attribute `attr` on the element with `id` in a DOM dump.
pub fn attr_of(dom: &str, id: &str, attr: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let tag = &dom[start..end];
    let key = format!("{attr}=\"");
    let v = tag.find(&key)? + key.len();
    Some(tag[v..v + tag[v..].find('"')?].to_string())
}

/// The text of the element with `id` (its markup up to the closing tag, entities decoded).
pub fn text_of(dom: &str, id: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let open_end = at + dom[at..].find('>')? + 1;
    let close = open_end + dom[open_end..].find("</")?;
    Some(decode(&dom[open_end..close]))
}

fn decode(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}
