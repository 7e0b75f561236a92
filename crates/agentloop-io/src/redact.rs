//! Secrets never reach a file agentloop writes. The secrets are the values of environment
//! variables named like keys (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, and the one
//! `llm.api_key_env` names) and keys read by `llm.api_key_cmd`; each is replaced by `[REDACTED]`
//! in tool results (before anything sees them), in every workspace commit (markdown, trace,
//! state, result.json) and in `--record` files: raw, reversed (`rev`), split over lines
//! (`fold -w2`, halves printed one after the other), and encoded.
//!
//! Encodings are read back, not guessed: every run of base64 (standard or URL-safe), base32
//! (standard or `base32hex`) or hex text, with the line breaks of wrapped output (`base64 -w 20`)
//! taken out, is decoded at every alignment and the decoded bytes searched for a secret, so a key
//! at any offset of an encoded file is found; the characters that spell it are replaced.
//!
//! Base64 that decodes to base64 is decoded again ([`NESTED`] times over), and every secret is
//! also looked for in UTF-16, either byte order: as text (its NULs read past), encoded and
//! dumped.
//!
//! A secret can also be rendered by a dump program, one byte or one word at a time and over
//! several lines (`od -c`, `od -An -tx1`, `od -tx2/-tx4/-to1/-tu1`, `xxd` of any grouping and
//! width, `xxd -b`, `xxd -p`, `hexdump -C`, hex with `:` or `0x` separators). Such text is read
//! the way a person would: offsets dropped, a line with a text column split where the groups
//! before it spell as many bytes as it shows (so `xxd -c4`'s `0123` is text, not hex), and read
//! greedily too, the hex (or bit) columns joined into one stream, the character columns into another,
//! each column of numbers read as bytes of every width in octal, decimal and hex (words in the
//! machine's little-endian order); when a secret is in a stream, every line it spans is replaced
//! by `[REDACTED]`. These scans run only when there is a secret to look for.
//!
//! Secrets agentloop was never given (a key in `~/.bashrc` or a `.env` a tool reads) are masked
//! in tool results where they are written as one: the value of an assignment whose name ends
//! like a secret's (`export FOO_API_KEY=...`, `DB_PASSWORD: ...`, `"token": "..."`), kept name,
//! hidden value; in UTF-16 too, and in a dump's hex, bit and text columns (every line the value
//! spans).

use base64::Engine;
use std::sync::Mutex;

mod dumps;
use dumps::{mask_dumped_assignments, redact_dumps};

/// The secrets every byte that leaves the process is redacted against: those registered at run
/// time and the environment's (read once, as they are and in every encoded form). One set for
/// the process, its one static, because a secret registered anywhere (a key printed by
/// `llm.api_key_cmd`, a token a sign-in got) must be hidden everywhere from then on: in files,
/// on stderr, in what a tool is shown.
struct Secrets {
    registered: Mutex<Vec<String>>,
    env: std::sync::OnceLock<Vec<String>>,
    env_forms: std::sync::OnceLock<Vec<String>>,
}

static SECRETS: Secrets = Secrets {
    registered: Mutex::new(Vec::new()),
    env: std::sync::OnceLock::new(),
    env_forms: std::sync::OnceLock::new(),
};

/// Adds a secret found at run time (a key printed by `llm.api_key_cmd`, a named variable).
pub fn register(secret: &str) {
    let s = secret.trim();
    if s.len() >= 8 {
        if let Ok(mut g) = SECRETS.registered.lock() {
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

/// The bytes a secret is written as: itself, and in UTF-16 either way round (`iconv -t
/// UTF-16LE`), which a dump or an encoder may render in turn.
fn needles(secret: &str) -> Vec<Vec<u8>> {
    let le: Vec<u8> = secret.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let be: Vec<u8> = secret.encode_utf16().flat_map(u16::to_be_bytes).collect();
    vec![secret.as_bytes().to_vec(), le, be]
}

fn hex(secret: &str) -> String {
    secret.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Whether an environment variable's name says it holds a secret (`*_API_KEY`, `*_APIKEY`,
/// `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, any case): the one rule, for redaction and the log.
pub fn is_secret_name(name: &str) -> bool {
    let k = name.to_uppercase();
    ["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_APIKEY"].iter().any(|s| k.ends_with(s))
}

/// The environment's secrets as they are, read once: the environment of a running process
/// does not change.
fn env_secrets() -> &'static [String] {
    SECRETS.env.get_or_init(|| {
        let mut out: Vec<String> = Vec::new();
        for (k, v) in std::env::vars() {
            let v = v.trim();
            if v.len() >= 8 && is_secret_name(&k) && !out.iter().any(|x| x == v) {
                out.push(v.to_string());
            }
        }
        out
    })
}

/// The environment's secrets in every form, read once: encoding each secret anew for every
/// string redacted cost more than the rest of a commit.
fn env_forms() -> &'static [String] {
    SECRETS.env_forms.get_or_init(|| {
        let mut out: Vec<String> = Vec::new();
        for v in env_secrets() {
            out.extend(forms(v).into_iter().filter(|f| !out.contains(f)).collect::<Vec<_>>());
        }
        out
    })
}

/// [`redact`], borrowing the text when there is no secret to look for: what a long read
/// (`trace show` over a whole trace) prints costs no copy per line then.
pub fn redact_cow(text: &str) -> std::borrow::Cow<'_, str> {
    let extra: Vec<String> = SECRETS.registered.lock().map(|g| g.clone()).unwrap_or_default();
    let env = env_secrets();
    if env.is_empty() && extra.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for f in env_forms() {
        if out.contains(f.as_str()) {
            out = out.replace(f.as_str(), "[REDACTED]");
        }
    }
    for s in &extra {
        for f in forms(s) {
            if out.contains(&f) {
                out = out.replace(&f, "[REDACTED]");
            }
        }
    }
    let secrets: Vec<&str> = env.iter().chain(extra.iter()).map(String::as_str).collect();
    let out = redact_wide(&out, &secrets);
    std::borrow::Cow::Owned(redact_dumps(&redact_encoded(&out, &secrets), &secrets))
}

/// Whether `bytes` hold a secret [`redact`] knows (the environment's, the registered ones), in
/// any form it would replace: what may be kept somewhere [`redact`] does not pass over (the HTTP
/// cache) holds none. Bytes that are not UTF-8 are read as text around them.
pub fn contains_secret(bytes: &[u8]) -> bool {
    let extra: Vec<String> = SECRETS.registered.lock().map(|g| g.clone()).unwrap_or_default();
    if env_secrets().is_empty() && extra.is_empty() {
        return false;
    }
    let text = String::from_utf8_lossy(bytes);
    redact_cow(&text) != text
}

/// The text with every secret (raw, base64, hex, and in dump renderings) replaced.
pub fn redact(text: &str) -> String {
    redact_cow(text).into_owned()
}

/// A tool's result with every secret replaced ([`redact`]), and the values of secret-looking
/// assignments too ([`mask_assignments`]): what a program prints from a file agentloop never
/// read (`~/.bashrc`, a `.env`) reaches neither the model nor the paper trail. agentloop's own
/// output is left to [`redact`], since it prints secrets the user asked for (`serve`'s token).
pub fn redact_tool_output(text: &str) -> String {
    // The dumped assignments are found in the dump as the program printed it: a known secret
    // hidden first changes the dump's shape, and the unknown value beside it would be missed.
    // Redaction keeps the lines, so the lines found are hidden in what it returns.
    // Redaction makes no assignment, so text with none dumped is scanned for dumps once.
    let found = dumps::dumped_assignment_lines(text);
    let r = redact(text);
    let r = match found {
        Some(marked) if marked.len() == r.split_inclusive('\n').count() => dumps::mask_lines(&r, &marked),
        Some(_) => mask_dumped_assignments(&r),
        None => r,
    };
    // Dumps before the rest: masking a value in a dump's text column would change its shape.
    mask_assignments(&mask_wide_assignments(&r))
}

/// [`mask_assignments`] for text in UTF-16 (`iconv -t UTF-16 .env`): read past its NULs.
fn mask_wide_assignments(text: &str) -> String {
    if !text.contains('\0') {
        return text.to_string();
    }
    let (mut kept, mut at) = (String::with_capacity(text.len()), Vec::with_capacity(text.len()));
    for (i, c) in text.char_indices().filter(|(_, c)| *c != '\0') {
        kept.push(c);
        at.extend(std::iter::repeat_n(i, c.len_utf8()));
    }
    let mut spans = Vec::new();
    for c in assignment().captures_iter(&kept) {
        let Some(m) = c.get(2) else { continue };
        if !only_names(m.as_str().trim_matches(|q| q == '"' || q == '\'')) {
            spans.push((at[m.start()], at[m.end() - 1] + 1));
        }
    }
    replace_spans(text, spans)
}

/// Whether an assigned value only names or stands for a secret: a reference (`$TOKEN`), a
/// placeholder (`[hidden]`, `<key>`, `...`), a number, `null`, or under 6 characters.
fn only_names(inner: &str) -> bool {
    inner.chars().count() < 6
        || inner.starts_with(['$', '[', '<', '{', '%', '(', '*', '.'])
        || inner.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        || ["null", "none", "true", "false"].iter().any(|w| inner.eq_ignore_ascii_case(w))
}

/// An assignment to a name that ends like a secret's: `NAME=value`, `export NAME=value`,
/// `NAME: value`, `"name": "value"`, quoted or not.
/// The pattern is a literal, so it compiles (a unit test compiles it).
#[allow(clippy::expect_used)]
fn assignment() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r#"(?i)(\b[a-z0-9_]*(?:api_?key|token|secret|password|passwd)\b["']?[ \t]*[:=][ \t]*)("[^"\n]*"|'[^'\n]*'|[^\s"',;}\]]+)"#,
        )
        .expect("the assignment pattern is valid")
    })
}

/// The text with the value of every secret-looking assignment hidden, the name kept
/// (`export GITHUB_TOKEN=[REDACTED]`): a key agentloop was never given, read from `~/.bashrc`
/// or a `.env`. What only names a secret is left: a reference (`$TOKEN`, `${TOKEN}`), a
/// placeholder (`[hidden]`, `<token>`, `...`), a number, `null`, and values under 6 characters.
fn mask_assignments(text: &str) -> String {
    let re = assignment();
    if !re.is_match(text) {
        return text.to_string();
    }
    re.replace_all(text, |c: &regex::Captures| {
        let value = &c[2];
        let inner = value.trim_matches(|q| q == '"' || q == '\'');
        let quote = if value.len() > inner.len() { &value[..1] } else { "" };
        if only_names(inner) {
            c[0].to_string()
        } else {
            format!("{}{quote}[REDACTED]{quote}", &c[1])
        }
    })
    .into_owned()
}

/// The text with every secret written in UTF-16 (`iconv -t UTF-16`, either byte order, with or
/// without a byte-order mark) replaced: the NULs between its characters are read past.
fn redact_wide(text: &str, secrets: &[&str]) -> String {
    if !text.contains('\0') {
        return text.to_string();
    }
    let (mut kept, mut at) = (Vec::with_capacity(text.len()), Vec::with_capacity(text.len()));
    for (i, b) in text.bytes().enumerate() {
        if b != 0 {
            kept.push(b);
            at.push(i);
        }
    }
    let mut spans = Vec::new();
    for s in secrets {
        for f in forms(s) {
            for p in find_all(&kept, f.as_bytes()) {
                spans.push((at[p], at[p + f.len() - 1] + 1));
            }
        }
    }
    replace_spans(text, spans)
}

/// The value of a base64 character, standard (`+/`) or URL-safe (`-_`).
fn base64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

/// The value of a base32 character (RFC 4648, either case).
fn base32_value(c: u8) -> Option<u8> {
    match c.to_ascii_uppercase() {
        c @ b'A'..=b'Z' => Some(c - b'A'),
        c @ b'2'..=b'7' => Some(c - b'2' + 26),
        _ => None,
    }
}

/// The value of a `base32hex` character (`basenc --base32hex`, either case).
fn base32hex_value(c: u8) -> Option<u8> {
    match c.to_ascii_uppercase() {
        c @ b'0'..=b'9' => Some(c - b'0'),
        c @ b'A'..=b'V' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn hex_value(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Every start of `needle` in `hay`.
fn find_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    // Overlapping matches, as a scan at every position would find them.
    let finder = memchr::memmem::Finder::new(needle);
    let mut at = 0;
    std::iter::from_fn(move || {
        if needle.is_empty() || at > hay.len() {
            return None;
        }
        let p = at + finder.find(&hay[at..])?;
        at = p + 1;
        Some(p)
    })
}

/// The text with every encoded rendering of a secret replaced: base64, base32 and hex runs,
/// wrapped over lines or not, decoded at every alignment and searched for each secret.
fn redact_encoded(text: &str, secrets: &[&str]) -> String {
    let needles: Vec<Vec<u8>> = secrets.iter().flat_map(|s| needles(s)).collect();
    let needles: Vec<&[u8]> = needles.iter().map(Vec::as_slice).collect();
    let mut spans = Vec::new();
    for (value, bits) in
        [(base64_value as fn(u8) -> Option<u8>, 6), (base32_value, 5), (base32hex_value, 5), (hex_value, 4)]
    {
        encoded_spans(text.as_bytes(), value, bits, &needles, NESTED, &mut spans);
    }
    replace_spans(text, spans)
}

/// How many times over base64 is read inside what base64 decoded to (`base64 | base64`).
const NESTED: usize = 2;

/// Where the needles lie in `decoded`, as (start, length): found as they are, or, `depth` times
/// over, base64-encoded inside it.
fn hits(decoded: &[u8], needles: &[&[u8]], depth: usize) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> =
        needles.iter().flat_map(|n| find_all(decoded, n).map(move |p| (p, n.len()))).collect();
    if depth > 0 {
        let mut inner = Vec::new();
        encoded_spans(decoded, base64_value, 6, needles, depth - 1, &mut inner);
        out.extend(inner.into_iter().map(|(a, b)| (a, b - a)));
    }
    out
}

/// Collects, as byte ranges of `text`, the characters that spell a secret in an encoding of
/// `bits` bits a character. A run of the encoding's characters goes on over a line break and
/// the blanks around it (wrapped output: `base64 -w 20`, `fold`); anything else ends it,
/// padding (`=`) included, since what follows padding is encoded afresh.
fn encoded_spans(
    b: &[u8],
    value: fn(u8) -> Option<u8>,
    bits: usize,
    secrets: &[&[u8]],
    depth: usize,
    out: &mut Vec<(usize, usize)>,
) {
    let mut run: Vec<(u8, usize)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if let Some(v) = value(b[i]) {
            run.push((v, i));
            i += 1;
            continue;
        }
        if b[i].is_ascii_whitespace() && !run.is_empty() {
            let gap = b[i..].iter().take_while(|c| c.is_ascii_whitespace()).count();
            if b[i..i + gap].contains(&b'\n') {
                i += gap;
                continue;
            }
        }
        decode_run(&run, bits, secrets, depth, out);
        run.clear();
        i += 1;
    }
    decode_run(&run, bits, secrets, depth, out);
}

/// Decodes one run at each alignment (the run may start in the middle of an encoded group) and
/// adds the characters of every whole group that spells part of a secret.
fn decode_run(run: &[(u8, usize)], bits: usize, secrets: &[&[u8]], depth: usize, out: &mut Vec<(usize, usize)>) {
    let shortest = secrets.iter().map(|s| s.len()).min().unwrap_or(0);
    if shortest == 0 || run.len() * bits / 8 < shortest {
        return;
    }
    // Characters in a group that decodes to whole bytes: 4 in base64, 8 in base32, 2 in hex.
    let group = match bits {
        6 => 4,
        5 => 8,
        _ => 2,
    };
    let group_bytes = group * bits / 8;
    let mut decoded = Vec::with_capacity(run.len());
    for a in 0..group.min(run.len()) {
        decoded.clear();
        let (mut acc, mut n) = (0u32, 0);
        for &(v, _) in &run[a..] {
            acc = (acc << bits) | u32::from(v);
            n += bits;
            if n >= 8 {
                n -= 8;
                decoded.push((acc >> n) as u8);
                acc &= (1 << n) - 1;
            }
        }
        // Base64 inside base64 is read only where base64 was decoded.
        for (p, len) in hits(&decoded, secrets, if bits == 6 { depth } else { 0 }) {
            let first = a + p / group_bytes * group;
            let last = (a + (p + len).div_ceil(group_bytes) * group).min(run.len()) - 1;
            out.push((run[first].1, run[last].1 + 1));
        }
    }
}

/// The text with each byte range replaced by `[REDACTED]`, one for each line a range spans (the
/// line breaks stay, so the lines around it keep their place).
fn replace_spans(text: &str, mut spans: Vec<(usize, usize)>) -> String {
    if spans.is_empty() {
        return text.to_string();
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in spans {
        let start = start.max(at);
        if end <= start {
            continue;
        }
        out.push_str(&text[at..start]);
        let mut first = true;
        for piece in text[start..end].split('\n') {
            if !first {
                out.push('\n');
            }
            first = false;
            if !piece.trim().is_empty() {
                out.push_str("[REDACTED]");
            }
        }
        at = end;
    }
    out.push_str(&text[at..]);
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
    fn a_secret_is_found_in_bytes_in_every_form_redaction_replaces() {
        register(KEY);
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("x{KEY}y"));
        for with in [format!("<p>{KEY}</p>"), hex(KEY), b64, KEY.chars().rev().collect()] {
            assert!(contains_secret(with.as_bytes()), "{with}");
        }
        let mut binary = vec![0xff, 0xfe, 0x00];
        binary.extend_from_slice(KEY.as_bytes());
        assert!(contains_secret(&binary));
        for without in ["<p>nothing here</p>", "sk-test-0123", "[REDACTED]", ""] {
            assert!(!contains_secret(without.as_bytes()), "{without}");
        }
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

    /// What `redact` does with [`KEY`] as the one secret.
    fn scrub(text: &str) -> String {
        redact_dumps(&redact_encoded(text, &[KEY]), &[KEY])
    }

    /// `text` wrapped at `width` characters a line, as `base64 -w` and `fold -w` do.
    fn wrap(text: &str, width: usize) -> String {
        text.as_bytes().chunks(width).map(|c| format!("{}\n", String::from_utf8_lossy(c))).collect()
    }

    /// A key at every offset of an encoded file, in every encoding, wrapped at every width, is
    /// found: the encoding is decoded at every alignment, not matched against a precomputed form.
    #[test]
    fn an_encoded_key_is_found_at_every_offset_and_wrap_width() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let b32 = |data: &[u8]| {
            let abc = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
            let mut out = String::new();
            for chunk in data.chunks(5) {
                let mut buf = [0u8; 5];
                buf[..chunk.len()].copy_from_slice(chunk);
                let n = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
                let chars = (chunk.len() * 8).div_ceil(5);
                for i in 0..8 {
                    out.push(if i < chars { abc[(n >> (35 - 5 * i) & 31) as usize] as char } else { '=' });
                }
            }
            out
        };
        // Each encoding, and its groups: bytes, and the characters that spell them.
        type Encode<'a> = &'a dyn Fn(&[u8]) -> String;
        let encoders: [(&str, Encode, (usize, usize)); 4] = [
            ("base64", &|d| STANDARD.encode(d), (3, 4)),
            ("base64url", &|d| URL_SAFE_NO_PAD.encode(d), (3, 4)),
            ("base32", &b32, (5, 8)),
            ("hex", &|d| d.iter().map(|b| format!("{b:02x}")).collect(), (1, 2)),
        ];
        for (name, encode, groups) in encoders {
            for offset in 0..12 {
                let data = format!("{}{KEY} trailing bytes", "p".repeat(offset));
                let encoded = encode(data.as_bytes());
                for width in [0, 1, 2, 3, 7, 20, 40, 76] {
                    let text = if width == 0 { encoded.clone() } else { wrap(&encoded, width) };
                    let r = scrub(&format!("output:\n{text}done\n"));
                    assert!(r.contains("[REDACTED]"), "{name} at offset {offset}, wrapped at {width}:\n{text}");
                    // What is left holds none of the groups that spell the key alone.
                    let (gb, gc) = groups;
                    let (first, last) = (offset.div_ceil(gb), (offset + KEY.len()) / gb);
                    let core = &encoded[first * gc..last * gc];
                    let left: String = r.split_whitespace().collect();
                    assert!(!left.contains(core), "{name} at offset {offset}, wrapped at {width}: {r}");
                    assert!(r.starts_with("output:\n") && r.ends_with("done\n"), "the text around it stays: {r}");
                }
            }
        }
    }

    #[test]
    #[allow(clippy::print_stderr)]
    fn word_dumps_base32_and_pieces_are_redacted() {
        let input = format!("before\n{KEY}\nafter\n");
        for offset in 0..4 {
            let input = format!("{}{input}", "x".repeat(offset));
            for argv in [
                &["od", "-tx2"][..],
                &["od", "-An", "-tx2"],
                &["od", "-tx4"],
                &["od", "-An", "-tx4"],
                &["od", "-to1"],
                &["od", "-An", "-to1"],
                &["od", "-tu1"],
                &["od", "-An", "-tu1"],
                &["od", "-to2"],
                &["od", "-tu2"],
                &["od", "-td1"],
                &["hexdump"],
                &["basenc", "--base32"],
                &["basenc", "--base32hex"],
                &["base32", "-w", "7"],
                &["base64", "-w", "20"],
                &["fold", "-w2"],
                &["fold", "-w3"],
            ] {
                let Some(out) = dump(argv, &input) else {
                    eprintln!("skipped: {} is not installed", argv[0]);
                    continue;
                };
                let r = scrub(&out);
                assert!(r.contains("[REDACTED]"), "{argv:?} at offset {offset}:\n{out}");
                assert_ne!(scrub(&r), out);
            }
        }
        // Two halves printed one after the other (`cut -c1-10`, then `cut -c11-`).
        let (a, b) = KEY.split_at(10);
        let r = scrub(&format!("{a}\n{b}\n"));
        assert!(!r.contains(a) && !r.contains(b), "{r}");
    }

    #[test]
    fn assignments_of_secret_names_are_masked() {
        let text = "export GITHUB_TOKEN=ghp_abcdefghijklmnop\nOPENAI_API_KEY='sk-proj-123456789'\n\
                    DB_PASSWORD: hunter2x\n{\"api_key\": \"AKIAEXAMPLEKEY\", \"n\": 1}\npassword=s3cr3tpass # note\n";
        let r = mask_assignments(text);
        for secret in ["ghp_abcdefghijklmnop", "sk-proj-123456789", "hunter2x", "AKIAEXAMPLEKEY", "s3cr3tpass"] {
            assert!(!r.contains(secret), "{secret} in\n{r}");
        }
        assert!(r.contains("export GITHUB_TOKEN=[REDACTED]\n") && r.contains("OPENAI_API_KEY='[REDACTED]'"), "{r}");
        assert!(r.contains("\"api_key\": \"[REDACTED]\", \"n\": 1") && r.contains("# note"), "{r}");
        // What names a secret without holding one stays.
        let kept = "AGENTLOOP_TOKEN=$(cat f)\nOPENAI_API_KEY=${KEY}\nllm.api_key = [hidden]\n\
                    handle.progress_token = null\nmax_tokens: 4096\nllm.api_key_env = OPENAI_API_KEY\nTOKEN=...\n";
        assert_eq!(mask_assignments(kept), kept);
    }

    /// xxd of any grouping and width (`-g0`, `-c2`, `-c4`: the text column can look like hex),
    /// binary dumps, UTF-16 (raw, and dumped or encoded in turn) and base64 of base64, of a
    /// `.env` holding the key.
    #[test]
    #[allow(clippy::print_stderr)]
    fn every_grouping_width_and_wide_encoding_is_redacted() {
        let env = format!("# settings\nOPENAI_API_KEY={KEY}\nDEBUG=1\n");
        let wide: String = env.encode_utf16().flat_map(u16::to_le_bytes).map(char::from).collect();
        let wide_be: String = env.encode_utf16().flat_map(u16::to_be_bytes).map(char::from).collect();
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let mut cases: Vec<(String, String)> = vec![
            ("utf-16le".into(), wide.clone()),
            ("utf-16be".into(), format!("\u{feff}{wide_be}")),
            ("base64 of base64".into(), b64(&b64(&env))),
            ("base64 of base64 of base64".into(), b64(&b64(&b64(&env)))),
            ("base64 of utf-16".into(), b64(&wide)),
        ];
        for offset in 0..4 {
            let input = format!("{}{env}", "x".repeat(offset));
            for argv in [
                &["xxd", "-g0"][..],
                &["xxd", "-c4"],
                &["xxd", "-c2"],
                &["xxd", "-c3"],
                &["xxd", "-g0", "-c7"],
                &["xxd", "-g4", "-c8"],
                &["xxd", "-b"],
                &["xxd", "-b", "-c4"],
                &["hexdump", "-C"],
            ] {
                match dump(argv, &input) {
                    Some(out) => cases.push((format!("{argv:?} at {offset}"), out)),
                    None => eprintln!("skipped: {} is not installed", argv[0]),
                }
            }
            for argv in [&["xxd"][..], &["xxd", "-c4"], &["od", "-tx1"]] {
                if let Some(out) = dump(argv, &format!("{}{wide}", "x".repeat(offset))) {
                    cases.push((format!("{argv:?} of utf-16 at {offset}"), out));
                }
            }
        }
        for (name, text) in cases {
            let r = redact_wide(&scrub(&text), &[KEY]);
            assert!(r.contains("[REDACTED]"), "{name}:\n{text}");
            let letters: String = r.split_whitespace().collect::<String>().replace(['|', '\0', '.'], "");
            assert!(!letters.contains("0123456789"), "{name}: {r}");
            let hexes: String = r.chars().filter(char::is_ascii_hexdigit).collect::<String>().to_lowercase();
            assert!(!hexes.contains(&hex("0123456789")), "{name}: {r}");
        }
    }

    /// A key agentloop was never given, assigned in a `.env` that a dump program shows.
    #[test]
    #[allow(clippy::print_stderr)]
    fn an_unknown_secrets_assignment_in_a_dump_is_masked() {
        let env = "# settings\nSOME_SERVICE_TOKEN=unknown-secret-value-777\nDEBUG=1\n";
        let wide: String = env.encode_utf16().flat_map(u16::to_le_bytes).map(char::from).collect();
        let r = redact_tool_output(&wide).replace('\0', "");
        assert!(r.contains("SOME_SERVICE_TOKEN=[REDACTED]") && !r.contains("secret-v"), "{r}");
        for argv in [
            &["xxd"][..],
            &["xxd", "-g0"],
            &["xxd", "-c4"],
            &["xxd", "-c2"],
            &["xxd", "-p"],
            &["xxd", "-b"],
            &["hexdump", "-C"],
            &["od", "-An", "-tx1"],
        ] {
            for input in [env.to_string(), wide.clone()] {
                let Some(out) = dump(argv, &input) else {
                    eprintln!("skipped: {} is not installed", argv[0]);
                    continue;
                };
                let r = redact_tool_output(&out);
                let letters: String = r.split_whitespace().collect::<String>().replace(['|', '.'], "");
                assert!(!letters.contains("secret-v") && !letters.contains("value-7"), "{argv:?}: {r}");
                let hexes: String = r.chars().filter(char::is_ascii_hexdigit).collect();
                assert!(!hexes.contains(&hex("secret-v")) && !hexes.contains(&hex("value-7")), "{argv:?}: {r}");
            }
        }
        // Ordinary hex is left alone.
        let text = "00000000: 6465 6275 673d 310a  debug=1.\n";
        assert_eq!(redact_tool_output(text), text);
    }

    /// A known secret just before an unknown one in the same `.env`: hiding the known one must
    /// not keep the unknown one's assignment from being found in the dump, and a known one
    /// sharing a dump line with an unknown assignment is hidden whole too.
    #[test]
    #[allow(clippy::print_stderr)]
    fn a_known_secret_beside_an_unknown_one_in_a_dump_hides_both() {
        register(KEY);
        for env in [
            format!("FOO_API_KEY={KEY}\nDB_PASSWORD=unknownPassw0rdXYZ123\n"),
            format!("{KEY}\nDB_PASSWORD=unknownPassw0rdXYZ123\n"),
            format!("x{KEY}DB_PASSWORD=unknownPassw0rdXYZ123\n"),
        ] {
            for argv in [&["xxd"][..], &["hexdump", "-C"], &["xxd", "-c1"], &["xxd", "-g3", "-c7"], &["xxd", "-c4"]] {
                let Some(out) = dump(argv, &env) else {
                    eprintln!("skipped: {} is not installed", argv[0]);
                    continue;
                };
                let r = redact_tool_output(&out);
                let letters: String = r.split_whitespace().collect::<String>().replace(['|', '.'], "");
                let hexes: String = r.chars().filter(char::is_ascii_hexdigit).collect::<String>().to_lowercase();
                for piece in ["unknownP", "w0rdXYZ", "01234567", "89abcdef"] {
                    assert!(!letters.contains(piece), "{argv:?} {env:?}: {piece} in\n{r}");
                    assert!(!hexes.contains(&hex(piece)), "{argv:?} {env:?}: {piece} in hex\n{r}");
                }
            }
        }
    }

    #[test]
    fn ordinary_text_is_scanned_quickly() {
        let text = "exit code: 0 -- a line of ordinary output, words and 42 numbers | pipes\n".repeat(2000);
        let start = std::time::Instant::now();
        for _ in 0..10 {
            assert_eq!(scrub(&text), text);
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
