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
        crate::common::missing(&format!(
            "the browser part of {test}: chromium is not installed (apt-get install chromium; .ci/run installs it)"
        ));
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

/// The DOM of `url` laid out in a window `width` × `height`.
pub fn dump_dom_sized(bin: &Path, url: &str, width: u32, height: u32) -> String {
    run(bin, &[format!("--window-size={width},{height}"), "--dump-dom".into(), url.into()])
}

/// How wide the page at `page` (a file) lays out in `width` px: a copy without the page's
/// script ban gets a probe that writes the body's scroll width (what its content needs) into it, and the
/// browser's DOM is read back. A page that needs sideways scrolling is wider than `width`.
/// Headless chromium lays out no window narrower than 500 px, so the copy's root element is
/// held to `width` (the page's narrow-screen rules apply below 640 px either way).
pub fn scroll_width(bin: &Path, page: &Path, width: u32) -> u32 {
    probe(bin, page, width, "document.body.scrollWidth").parse().expect("a width")
}

/// What the JavaScript expression `js` gives on the page at `page` (a file) laid out `width` px
/// wide, as text: computed in the browser, on a copy without the page's script ban, the root
/// element held to `width` (see [`scroll_width`]).
pub fn probe(bin: &Path, page: &Path, width: u32, js: &str) -> String {
    let html = std::fs::read_to_string(page).expect("page");
    let csp = html.find("<meta http-equiv=\"Content-Security-Policy\"").expect("the page has a policy");
    let end = csp + html[csp..].find('>').expect("meta ends") + 1;
    let probe = format!("<script>document.body.setAttribute('data-probe', String({js}))</script>");
    let copy = format!("{}<style>html {{ width: {width}px; }}</style>{}", &html[..csp], &html[end..])
        .replace("</body>", &format!("{probe}</body>"));
    let dir = tempfile::tempdir().expect("probe dir");
    let probe_page = dir.path().join("probe.html");
    std::fs::write(&probe_page, copy).expect("probe page");
    let dom = dump_dom_sized(bin, &file_url(&probe_page), width, 900);
    let at = dom.find("data-probe=\"").expect("the probe ran") + "data-probe=\"".len();
    decode(&dom[at..at + dom[at..].find('"').unwrap()])
}
