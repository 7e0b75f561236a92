//! Secrets never reach a file agentloop writes. The secrets are the values of environment
//! variables named like keys (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, and the one
//! `llm.api_key_env` names) and keys read by `llm.api_key_cmd`; each is replaced, raw, in its
//! base64 forms (standard, URL-safe, with or without padding), as hex (lower and upper case) and
//! reversed (`rev`), by `[REDACTED]` in tool results (before anything sees them), in every workspace commit
//! (markdown, trace, state, result.json) and in `--record` files.
//!
//! A secret can also be rendered by a dump program, one byte at a time and over several lines
//! (`od -c`, `od -An -tx1`, `xxd`, `xxd -p`, `hexdump -C`, hex with `:` or `0x` separators).
//! Such text is read the way a person would: offsets dropped, the hex columns joined into one
//! stream and the character columns into another; when a secret is in either stream, every line
//! it spans is replaced by `[REDACTED]`. That scan runs only when there is a secret to look for.

use base64::Engine;
use std::sync::Mutex;

static EXTRA: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Adds a secret found at run time (a key printed by `llm.api_key_cmd`, a named variable).
pub fn register(secret: &str) {
    let s = secret.trim();
    if s.len() >= 8 {
        if let Ok(mut g) = EXTRA.lock() {
            if !g.iter().any(|x| x == s) {
                g.push(s.to_string());
            }
        }
    }
}

fn forms(secret: &str) -> Vec<String> {
    let b = secret.as_bytes();
    let mut out = vec![secret.to_string(), hex(secret), hex(secret).to_uppercase(), secret.chars().rev().collect()];
    for e in [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        let enc = e.encode(b);
        if !out.contains(&enc) {
            out.push(enc);
        }
    }
    out
}

fn hex(secret: &str) -> String {
    secret.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The environment's secrets as they are, read once: the environment of a running process
/// does not change.
fn env_secrets() -> &'static [String] {
    static SECRETS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    SECRETS.get_or_init(|| {
        let mut out: Vec<String> = Vec::new();
        for (k, v) in std::env::vars() {
            let k = k.to_uppercase();
            let v = v.trim();
            if v.len() >= 8
                && ["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_APIKEY"].iter().any(|s| k.ends_with(s))
                && !out.iter().any(|x| x == v)
            {
                out.push(v.to_string());
            }
        }
        out
    })
}

/// The environment's secrets in every form, read once: encoding each secret anew for every
/// string redacted cost more than the rest of a commit.
fn env_forms() -> &'static [String] {
    static FORMS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    FORMS.get_or_init(|| {
        let mut out: Vec<String> = Vec::new();
        for v in env_secrets() {
            out.extend(forms(v).into_iter().filter(|f| !out.contains(f)).collect::<Vec<_>>());
        }
        out
    })
}

/// The text with every secret (raw, base64, hex, and in dump renderings) replaced.
pub fn redact(text: &str) -> String {
    let mut out = text.to_string();
    for f in env_forms() {
        if out.contains(f.as_str()) {
            out = out.replace(f.as_str(), "[REDACTED]");
        }
    }
    let extra: Vec<String> = EXTRA.lock().map(|g| g.clone()).unwrap_or_default();
    for s in &extra {
        for f in forms(s) {
            if out.contains(&f) {
                out = out.replace(&f, "[REDACTED]");
            }
        }
    }
    let env = env_secrets();
    if env.is_empty() && extra.is_empty() {
        return out;
    }
    let secrets: Vec<&str> = env.iter().chain(extra.iter()).map(String::as_str).collect();
    redact_dumps(&out, &secrets)
}

/// One column of a dump read as a stream: its text, and where each line's part of it starts.
#[derive(Default)]
struct Stream {
    text: String,
    /// (offset in `text`, line number), one entry per line that added text.
    starts: Vec<(usize, usize)>,
}

impl Stream {
    fn push(&mut self, s: &str, line: usize) {
        if self.starts.last().is_none_or(|(_, l)| *l != line) {
            self.starts.push((self.text.len(), line));
        }
        self.text.push_str(s);
    }

    /// The line the byte at `at` came from.
    fn line_of(&self, at: usize) -> usize {
        let i = self.starts.partition_point(|(o, _)| *o <= at);
        self.starts[i.saturating_sub(1)].1
    }

    /// Marks the lines every occurrence of `needle` spans.
    fn mark(&self, needle: &str, marked: &mut [bool]) {
        if needle.is_empty() {
            return;
        }
        let mut from = 0;
        while let Some(i) = self.text[from..].find(needle) {
            let (a, b) = (from + i, from + i + needle.len() - 1);
            marked[self.line_of(a)..=self.line_of(b)].fill(true);
            from = a + 1;
            while !self.text.is_char_boundary(from) {
                from += 1;
            }
        }
    }
}

/// A line's leading offset (`0000020`, `00000010:`): hex or octal digits, 6 to 16 of them.
fn is_offset(tok: &str) -> bool {
    let t = tok.strip_suffix(':').unwrap_or(tok);
    (6..=16).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A token of hex bytes (`73`, `736b`, `73:6b`, `0x73,`, `\\x73\\x6b`), as lower-case hex.
fn hex_group(tok: &str) -> Option<String> {
    // Most tokens are words: refused before anything is allocated.
    if !tok.bytes().all(|b| b.is_ascii_hexdigit() || b"x[](),:;'\"\\".contains(&b)) {
        return None;
    }
    let t = tok.replace("0x", "").replace("\\x", "");
    let t: String = t.chars().filter(|c| !"[](),:;'\"".contains(*c)).collect();
    (t.len() >= 2 && t.len().is_multiple_of(2) && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| t.to_ascii_lowercase())
}

/// Replaces every line of `text` over which a secret is spelled out byte by byte: in a hex
/// column (xxd, od -tx1, hexdump -C, hex with separators) or a character column (od -c, the
/// right-hand side of xxd and hexdump -C), across lines.
fn redact_dumps(text: &str, secrets: &[&str]) -> String {
    let shortest = secrets.iter().map(|s| s.len()).min().unwrap_or(0);
    if text.len() < shortest {
        return text.to_string();
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (mut hexs, mut chars) = (Stream::default(), Stream::default());
    for (n, line) in lines.iter().enumerate() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        let mut t = &toks[..];
        if t.len() > 1 && is_offset(t[0]) {
            t = &t[1..];
        }
        // Hex groups of one width (a shorter last one), then the character column.
        let mut width = None;
        while let Some(g) = t.first().and_then(|tok| hex_group(tok)) {
            let w = *width.get_or_insert(g.len());
            if g.len() > w {
                break;
            }
            hexs.push(&g, n);
            t = &t[1..];
            if g.len() < w {
                break;
            }
        }
        for tok in t {
            if tok.contains('|') {
                chars.push(&tok.replace('|', ""), n);
            } else {
                chars.push(tok, n);
            }
        }
    }
    let mut marked = vec![false; lines.len()];
    for s in secrets {
        let compact: String = s.split_whitespace().collect();
        chars.mark(&compact, &mut marked);
        hexs.mark(&hex(s), &mut marked);
    }
    if !marked.contains(&true) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for (line, m) in lines.iter().zip(marked) {
        if m {
            out.push_str("[REDACTED]");
            if line.ends_with('\n') {
                out.push('\n');
            }
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Redacts every string inside a JSON value.
pub fn redact_value(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            let r = redact(s);
            if r != *s {
                *s = r;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(redact_value),
        serde_json::Value::Object(o) => o.values_mut().for_each(redact_value),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-test-0123456789abcdefXYZ";

    /// The output of a dump program run on `input`.
    fn dump(argv: &[&str], input: &str) -> Option<String> {
        let mut child = std::process::Command::new(argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        use std::io::Write;
        child.stdin.take()?.write_all(input.as_bytes()).ok()?;
        let out = child.wait_with_output().ok()?;
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn hidden(text: &str) {
        let r = redact_dumps(text, &[KEY]);
        assert!(r.contains("[REDACTED]"), "not redacted:\n{text}");
        // Nothing of the key is left in any rendering: not its characters in a row, not its hex.
        let letters: String = r.split_whitespace().collect::<String>().replace('|', "");
        assert!(!letters.contains("0123456789abcdef"), "{r}");
        let hexes: String = r.chars().filter(char::is_ascii_hexdigit).collect::<String>().to_lowercase();
        assert!(!hexes.contains(&hex("0123456789abcdef")), "{r}");
    }

    #[test]
    #[allow(clippy::print_stderr)]
    fn every_dump_rendering_is_redacted() {
        let input = format!("before\n{KEY}\nafter\n");
        let mut seen = 0;
        for argv in [
            &["od", "-c"][..],
            &["od", "-An", "-c"],
            &["od", "-An", "-tx1"],
            &["od", "-tx1"],
            &["xxd"],
            &["xxd", "-p"],
            &["xxd", "-u"],
            &["hexdump", "-C"],
        ] {
            let Some(out) = dump(argv, &input) else {
                eprintln!("skipped: {} is not installed", argv[0]);
                continue;
            };
            seen += 1;
            hidden(&out);
        }
        assert!(seen > 0, "no dump program to test with");
    }

    #[test]
    fn hex_with_separators_and_plain_hex_are_redacted() {
        let h = hex(KEY);
        hidden(&h.as_bytes().chunks(2).map(|c| String::from_utf8_lossy(c).into_owned()).collect::<Vec<_>>().join(":"));
        hidden(&KEY.bytes().map(|b| format!("0x{b:02x},")).collect::<Vec<_>>().join(" "));
        hidden(&KEY.bytes().map(|b| format!("\\x{b:02x}")).collect::<String>());
        assert!(forms(KEY).contains(&h) && forms(KEY).contains(&h.to_uppercase()));
        assert!(forms(KEY).contains(&KEY.chars().rev().collect::<String>()), "`rev` output");
        // One character a line (`fold -w1`) or spaced out (`sed 's/./& /g'`) is a dump too.
        hidden(&KEY.chars().map(|c| format!("{c}\n")).collect::<String>());
        hidden(&KEY.chars().map(|c| format!("{c} ")).collect::<String>());
    }

    #[test]
    fn ordinary_text_is_scanned_quickly() {
        let text = "exit code: 0 -- a line of ordinary output, words and 42 numbers | pipes\n".repeat(2000);
        let start = std::time::Instant::now();
        for _ in 0..10 {
            assert_eq!(redact_dumps(&text, &[KEY]), text);
        }
        // 140 KB ten times: a generous bound even for a debug build on a busy machine.
        assert!(start.elapsed() < std::time::Duration::from_secs(2), "{:?}", start.elapsed());
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let text = "exit code: 0\n--- stdout ---\n0000000 total 12\ndead beef cafe\nsk-test is a prefix\n";
        assert_eq!(redact_dumps(text, &[KEY]), text);
    }
}
