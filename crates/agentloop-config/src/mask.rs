//! The one masking of configuration for people to read: `config show`, `agents show` (text and
//! `--json`) and the configuration errors that would echo a value all go through [`config`] or
//! [`shown`], so what one command hides no other prints.
//!
//! Secrets are recognised by what a value means, not by one spelling of it:
//! - a key, option or variable **named** like a credential ([`secret_name`]: a part or ending
//!   such as `token`, `key`, `apikey`, `secret`, `pass`, `pw`, `password`, `auth`, `bearer`,
//!   `credential`, `cookie`; `--api-key`, `--apikey`, `--pw`, `--bearer`, `AUTH=`, `GH_TOKEN=`),
//!   except names that say where a secret is rather than hold it (`*_env`, `*_cmd`, `*_file`,
//!   `*_url`, `*_endpoint`, ...);
//! - every MCP header and environment value, and the progress webhook's address (a chat
//!   webhook's address is its credential), except values that only reference variables
//!   (`Bearer ${GH_TOKEN}`);
//! - a credential after an **auth scheme** (`Bearer X`, `Basic X`) or in a header line whose
//!   name is a credential's (`Authorization: X`, `X-Api-Key: X`), in one word or over several;
//! - the password of `user:pass` after a user option (`-u user:pass`, `--user=u:p`,
//!   `--proxy-user`) and of `user:pass@host`, with or without a scheme, and an address's query.
//!
//! Commands are masked word by word, whether they are argument lists or one command line
//! (`tools.external.*.command`, `llm.api_key_cmd`): the words keep their places, a secret's is
//! `[hidden]`. A name with one letter (`-p`) means different things to different programs and
//! is left as it is, but for `-u`, whose `user:pass` value says what it is.

use serde_json::Value;

/// What is shown instead of a secret.
pub const MASK: &str = "[hidden]";

/// The configuration (agentloop.yaml's shape, from its root) with every secret hidden.
pub fn config(v: &mut Value) {
    mask(v, "", "");
}

/// The value at the dotted key `path` as the masking shows it (its last part the key, the one
/// before its parent): what an error about that key may echo.
pub fn shown(path: &str, v: &Value) -> Value {
    let mut parts = path.rsplit('.');
    let key = parts.next().unwrap_or("");
    let parent = parts.next().unwrap_or("");
    let mut v = v.clone();
    mask(&mut v, key, parent);
    v
}

/// Whether a key, option or variable name says it holds a credential.
pub fn secret_name(name: &str) -> bool {
    let n = name.trim_start_matches('-').to_ascii_lowercase();
    let parts: Vec<&str> = n.split(|c: char| !c.is_ascii_alphanumeric()).filter(|p| !p.is_empty()).collect();
    let Some(last) = parts.last() else { return false };
    // Names of where a secret is, or of something about it, hold none.
    const WHERE: &[&str] = &[
        "env", "cmd", "command", "file", "path", "dir", "url", "uri", "endpoint", "id", "type", "method", "name",
        "names", "alg", "scheme", "header", "timeout", "ttl", "len", "length",
    ];
    if WHERE.contains(last) {
        return false;
    }
    const WORDS: &[&str] = &[
        "key",
        "apikey",
        "token",
        "secret",
        "secrets",
        "pass",
        "passwd",
        "password",
        "passphrase",
        "pw",
        "pwd",
        "auth",
        "authorization",
        "bearer",
        "credential",
        "credentials",
        "cookie",
    ];
    const ENDINGS: &[&str] = &["key", "token", "secret", "password", "passwd", "passphrase", "credentials"];
    let compact = parts.concat();
    parts.iter().any(|p| WORDS.contains(p))
        || ENDINGS.iter().any(|e| compact.ends_with(e))
        || ["secret", "password", "passwd", "credential"].iter().any(|w| compact.contains(w))
}

/// Whether a URL's query parameter of this name carries a credential: a name [`secret_name`]
/// reads as one (`api_key`, `apikey`, `key`, `token`, `access_token`, `secret`, `password`,
/// `auth`, ...), or a request signature (`sig`, `signature`, `X-Amz-Signature`, `hmac`), which
/// lets whoever holds the URL act as its signer. The HTTP cache stores no URL with one.
pub fn secret_query_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    let last = n.rsplit(|c: char| !c.is_ascii_alphanumeric()).find(|p| !p.is_empty()).unwrap_or("");
    secret_name(name) || ["sig", "signature", "hmac"].contains(&last)
}

fn mask(v: &mut Value, key: &str, parent: &str) {
    match v {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                mask(v, k, key);
            }
        }
        Value::Null => {}
        // What only references variables (`Bearer ${GH_TOKEN}`) says where a secret is.
        _ if (matches!(parent, "headers" | "env") || secret_name(key)) && only_references(v) => {}
        _ if matches!(parent, "headers" | "env") => *v = Value::String(MASK.into()),
        // A map of headers or variables written as one string (`env: "TOKEN=X"`, a mistake an
        // error echoes): hidden whole, as each of its values would be.
        Value::String(_) if matches!(key, "headers" | "env") => *v = Value::String(MASK.into()),
        _ if secret_name(key) || key == "progress_url" => *v = Value::String(MASK.into()),
        Value::Array(items) => {
            let mut hide = Hide::No;
            for item in items.iter_mut() {
                match item {
                    // An item that is a command line of its own (`sh -c "curl -u a:b ..."`).
                    Value::String(s) if hide == Hide::No && s.contains(char::is_whitespace) => *s = command(s),
                    Value::String(s) => *s = word(s, &mut hide),
                    other => {
                        hide = Hide::No;
                        mask(other, key, parent)
                    }
                }
            }
        }
        Value::String(s) => *s = command(s),
        _ => {}
    }
}

/// An argument list with every credential hidden, as [`config`] hides one in a configuration.
pub fn argv(items: &[String]) -> Vec<String> {
    let mut v = Value::Array(items.iter().cloned().map(Value::String).collect());
    mask(&mut v, "args", "");
    v.as_array().into_iter().flatten().filter_map(|x| x.as_str().map(String::from)).collect()
}

/// What the word before asked of the next one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hide {
    No,
    /// The next word is a secret (`--token X`, `Bearer X`).
    Whole,
    /// The next word's part after its first `:` is (`-u user:pass`).
    AfterColon,
}

/// A command line with each word masked as an argument list's items are; a quoted word
/// (`-H 'Authorization: Bearer X'`) is one word. Text that is not a command goes through
/// unchanged but for the credentials in it.
pub fn command(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let (mut hide, mut w, mut quote) = (Hide::No, String::new(), None);
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c.is_whitespace() => {
                if !w.is_empty() {
                    out.push_str(&word(&std::mem::take(&mut w), &mut hide));
                }
                out.push(c);
                continue;
            }
            _ => {}
        }
        w.push(c);
    }
    if !w.is_empty() {
        out.push_str(&word(&w, &mut hide));
    }
    out
}

/// `w` without the quotes around it, and the quotes.
fn unquote(w: &str) -> (&str, &str, &str) {
    let open = if w.starts_with(['"', '\'']) { &w[..1] } else { "" };
    let inner = &w[open.len()..];
    let close = if !open.is_empty() && inner.ends_with(open) { open } else { "" };
    (open, &inner[..inner.len() - close.len()], close)
}

/// An auth scheme's name (`Authorization: Bearer X`), which stays when the credential after it
/// is hidden.
fn is_scheme_word(w: &str) -> bool {
    ["bearer", "basic", "digest", "token"].contains(&w.to_ascii_lowercase().as_str())
}

/// One word of a command, masked; sets `hide` for the next word when this one is an option, a
/// header name or an auth scheme whose value comes next.
fn word(w: &str, hide: &mut Hide) -> String {
    let (open, bare, close) = unquote(w);
    let requote = |s: String| format!("{open}{s}{close}");
    match std::mem::replace(hide, Hide::No) {
        Hide::Whole if !bare.starts_with('-') => {
            // `Authorization: Bearer X` over three words: the scheme stays, X is hidden.
            if is_scheme_word(bare) {
                *hide = Hide::Whole;
                return w.to_string();
            }
            return if only_references(&Value::String(bare.into())) { w.to_string() } else { MASK.into() };
        }
        Hide::AfterColon if !bare.starts_with('-') => {
            return match bare.split_once(':') {
                Some((user, _)) => requote(format!("{user}:{MASK}")),
                None => w.to_string(),
            };
        }
        _ => {}
    }
    if let Some(flag) = bare.strip_prefix('-') {
        let long = flag.starts_with('-');
        let body = flag.trim_start_matches('-');
        let (name, value) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        let user = matches!(name, "user" | "proxy-user" | "proxy_user") || (!long && (name == "u" || name == "U"));
        // A one-letter option with its value attached (`-HAuthorization: Basic X`): the value
        // is masked as the text it is.
        if let Some(masked) = attached(body, long) {
            return requote(masked);
        }
        return match value {
            None if name.len() > 1 && secret_name(name) => {
                *hide = Hide::Whole;
                w.to_string()
            }
            None if user => {
                *hide = Hide::AfterColon;
                w.to_string()
            }
            None => w.to_string(),
            Some(v) => {
                let head = &bare[..bare.len() - v.len()];
                if name.len() > 1 && secret_name(name) && !only_references(&Value::String(v.into())) {
                    requote(format!("{head}{MASK}"))
                } else if user {
                    requote(format!("{head}{}", after_colon(v)))
                } else {
                    requote(format!("{head}{}", text(v)))
                }
            }
        };
    }
    // `NAME=X`: a variable for the command's environment.
    if let Some((name, v)) = bare.split_once('=') {
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && secret_name(name) {
            return if only_references(&Value::String(v.into())) {
                w.to_string()
            } else {
                requote(format!("{name}={MASK}"))
            };
        }
    }
    // A header name alone (`Authorization:`), or an auth scheme alone (`Bearer`): the secret
    // is the next word.
    if let Some(name) = bare.strip_suffix(':') {
        if credential_header(name) {
            *hide = Hide::Whole;
            return w.to_string();
        }
    }
    if bare.eq_ignore_ascii_case("bearer") {
        *hide = Hide::Whole;
        return w.to_string();
    }
    requote(text(bare))
}

/// A one-letter option's attached value masked (`-uuser:pass` as curl spells it, the password
/// hidden; `-HAuthorization: Basic X`, the header's credential hidden), or None when the
/// option is long, has no attached value, or the value holds nothing to hide.
fn attached(body: &str, long: bool) -> Option<String> {
    let letter = body.chars().next().filter(|_| !long && body.len() > 1)?;
    let value = &body[letter.len_utf8()..];
    if matches!(letter, 'u' | 'U') && value.contains(':') {
        let (u, _) = value.split_once(':').unwrap_or((value, ""));
        return Some(format!("-{letter}{u}:{MASK}"));
    }
    let masked = text(value);
    (masked != value).then(|| format!("-{letter}{masked}"))
}

/// A header's name that says it carries a credential (`X-Api-Key`, `Private-Token`,
/// `Authorization`, `Cookie`), not a word of prose before a colon ("Key: value").
fn credential_header(n: &str) -> bool {
    let header = n.contains(['-', '_']) || ["authorization", "cookie"].contains(&n.to_ascii_lowercase().as_str());
    header && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') && secret_name(n)
}

fn after_colon(v: &str) -> String {
    match v.split_once(':') {
        Some((user, _)) => format!("{user}:{MASK}"),
        None => v.to_string(),
    }
}

/// Free text (one word, or a value that is not a command): a header line naming a credential
/// (`X-Api-Key: X`), every auth scheme's credential (`Bearer X`), and every address's password
/// and query hidden.
pub fn text(s: &str) -> String {
    if let Some((name, value)) = s.split_once(':') {
        let n = name.trim();
        if credential_header(n) && !value.starts_with("//") {
            let value = value.trim_start();
            let shown = match value.split_once(' ') {
                Some((scheme, _)) if is_scheme_word(scheme) => format!("{scheme} {MASK}"),
                _ => MASK.to_string(),
            };
            if !only_references(&Value::String(value.into())) {
                return format!("{name}: {shown}");
            }
            return s.to_string();
        }
    }
    urls(&schemes(s))
}

/// Every `Bearer X` (any case) and `Basic X` (X base64 of 8 characters or more: prose says "a
/// basic idea") in the text with X hidden (a `${VAR}` kept).
fn schemes(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let found = [lower[i..].find("bearer ").map(|at| (i + at, 7)), s[i..].find("Basic ").map(|at| (i + at, 6))]
            .into_iter()
            .flatten()
            .min_by_key(|(at, _)| *at);
        let Some((at, len)) = found else { break };
        // A word of its own: not the tail of another word.
        let starts_word = at == 0 || !s.as_bytes()[at - 1].is_ascii_alphanumeric();
        let mut from = at + len;
        while s[from..].starts_with(' ') {
            from += 1;
        }
        let end = s[from..].find(|c: char| c.is_whitespace() || c == '"' || c == '\'').map_or(s.len(), |e| from + e);
        out.push_str(&s[i..from]);
        let cred = &s[from..end];
        let basic = len == 6;
        let credential =
            !basic || (cred.len() >= 8 && cred.chars().all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c)));
        if starts_word && credential && !cred.is_empty() && !only_references(&Value::String(cred.into())) {
            out.push_str(MASK);
        } else {
            out.push_str(cred);
        }
        i = end;
    }
    out.push_str(&s[i.min(s.len())..]);
    out
}

/// Every address in the text with its password and query hidden
/// (`https://user:[hidden]@host/p?[hidden]`), and `user:pass@host` without a scheme.
fn urls(s: &str) -> String {
    if !s.contains("://") {
        return userinfo(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("://") {
        // The scheme: the letters right before `://`.
        let start = rest[..at]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || "+-.".contains(*c))
            .last()
            .map_or(at, |(i, _)| i);
        let end = rest[at..].find(|c: char| c.is_whitespace() || c == '"' || c == '\'').map_or(rest.len(), |e| at + e);
        out.push_str(&rest[..start]);
        if start == at {
            out.push_str(&rest[at..at + 3]);
            rest = &rest[at + 3..];
            continue;
        }
        out.push_str(&url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// One address, its password and query hidden.
pub fn url(s: &str) -> String {
    let Some((scheme, rest)) = s.split_once("://") else { return userinfo(s) };
    let (authority, tail) = rest.find(['/', '?', '#']).map(|i| rest.split_at(i)).unwrap_or((rest, ""));
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:{MASK}@{host}"),
            None => format!("{MASK}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, _)) => format!("{path}?{MASK}"),
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// `user:pass@host` (an ssh or proxy address without a scheme): the password hidden.
fn userinfo(s: &str) -> String {
    let Some((user, host)) = s.split_once('@') else { return s.to_string() };
    match user.split_once(':') {
        Some((name, pass))
            if !pass.is_empty()
                && !host.is_empty()
                && !name.contains(['/', ' '])
                && !pass.contains(['/', ' '])
                && !only_references(&Value::String(pass.into())) =>
        {
            format!("{name}:{MASK}@{host}")
        }
        _ => s.to_string(),
    }
}

/// A value that only references variables (`${TOKEN}`, `Bearer ${TOKEN}`): it says where the
/// secret comes from without holding it.
pub fn only_references(v: &Value) -> bool {
    let Some(s) = v.as_str() else { return false };
    let mut rest = s.trim();
    if rest.is_empty() {
        return true;
    }
    if let Some((scheme, tail)) = rest.split_once(' ') {
        if scheme.chars().all(|c| c.is_ascii_alphabetic()) {
            rest = tail.trim();
        }
    }
    while let Some(r) = rest.strip_prefix("${") {
        match r.split_once('}') {
            Some((name, tail)) if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                rest = tail
            }
            _ => return false,
        }
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_by_meaning() {
        for n in [
            "api_token",
            "--api-key",
            "--apikey",
            "--pw",
            "--bearer",
            "AUTH",
            "GH_TOKEN",
            "client_secret",
            "--password",
            "DB_PASS",
            "private_key",
            "progress_token",
            "--key",
            "--auth-token",
            "X-Api-Key",
            "Authorization",
            "Cookie",
        ] {
            assert!(secret_name(n), "{n}");
        }
        for n in [
            "api_key_env",
            "api_key_cmd",
            "private_key_file",
            "token_endpoint",
            "max_tokens",
            "client_id",
            "--verbose",
            "-p",
            "keep",
            "headers",
            "PATH",
            "user",
            "id_token_file",
            "base_url",
        ] {
            assert!(!secret_name(n), "{n}");
        }
    }

    #[test]
    fn query_parameters_by_meaning() {
        for n in ["api_key", "apikey", "key", "token", "access_token", "secret", "password", "auth", "sig"] {
            assert!(secret_query_name(n), "{n}");
        }
        for n in ["X-Amz-Signature", "X-Amz-Credential", "X-Goog-Signature", "client_secret", "id_token", "hmac"] {
            assert!(secret_query_name(n), "{n}");
        }
        for n in ["q", "page", "lang", "id", "format", "signed", "design", "keyword", "token_type"] {
            assert!(!secret_query_name(n), "{n}");
        }
    }

    #[test]
    fn addresses_and_arguments_keep_what_is_not_secret() {
        assert_eq!(url("https://u:pw@h.example/v1?key=k#f"), "https://u:[hidden]@h.example/v1?[hidden]");
        assert_eq!(url("https://tok@h.example"), "https://[hidden]@h.example");
        assert_eq!(url("http://localhost:8080/x"), "http://localhost:8080/x");
        assert_eq!(command("not a url"), "not a url");
        let mut v =
            json!({"args": ["--api-key", "k1", "--token=k2", "-v", "file", "--password", "--x"], "command": "srv"});
        config(&mut v);
        assert_eq!(v["args"], json!(["--api-key", "[hidden]", "--token=[hidden]", "-v", "file", "--password", "--x"]));
        assert_eq!(
            command("fetch --token t1  --auth-token=t2 -p 22 --password \"a b\" API_KEY=k3 ./key=v https://u:pw@h/x"),
            "fetch --token [hidden]  --auth-token=[hidden] -p 22 --password [hidden] API_KEY=[hidden] ./key=v https://u:[hidden]@h/x"
        );
        assert_eq!(command("a plain sentence, with words"), "a plain sentence, with words");
    }

    /// The probe's spellings, each hidden by what it means.
    #[test]
    fn credentials_by_meaning() {
        let cases = [
            (
                "curl -H 'Authorization: Bearer s3cr3tv' https://h/x",
                "curl -H 'Authorization: Bearer [hidden]' https://h/x",
            ),
            ("curl -H Authorization: Bearer s3cr3tv x", "curl -H Authorization: Bearer [hidden] x"),
            ("curl -H \"X-Api-Key: s3cr3tv\" x", "curl -H \"X-Api-Key: [hidden]\" x"),
            ("tool --apikey s3cr3tv --pw p4ss --bearer b34r", "tool --apikey [hidden] --pw [hidden] --bearer [hidden]"),
            ("curl -u bob:s3cr3tv x", "curl -u bob:[hidden] x"),
            ("curl -ubob:s3cr3tv x", "curl -ubob:[hidden] x"),
            ("curl -uuser:SECRETU111 x", "curl -uuser:[hidden] x"),
            ("curl '-HAuthorization: Basic SECRETQ777' x", "curl '-HAuthorization: Basic [hidden]' x"),
            ("curl -HX-Api-Key:k3y12345 x", "curl -HX-Api-Key: [hidden] x"),
            ("ls -la x", "ls -la x"),
            ("wget --user=bob:s3cr3tv x", "wget --user=bob:[hidden] x"),
            ("AUTH=s3cr3tv DB_PASS=p4ss run", "AUTH=[hidden] DB_PASS=[hidden] run"),
            ("rsync bob:s3cr3tv@host:/x .", "rsync bob:[hidden]@host:/x ."),
            ("x --header=Authorization: Bearer s3cr3tv", "x --header=Authorization: Bearer [hidden]"),
            ("'https://u:pw@h/x?k=v'", "'https://u:[hidden]@h/x?[hidden]'"),
            ("Bearer ${GH_TOKEN}", "Bearer ${GH_TOKEN}"),
            ("sort -u file", "sort -u file"),
            ("git@github.com:a/b.git", "git@github.com:a/b.git"),
            ("A basic idea. Key: value", "A basic idea. Key: value"),
        ];
        for (given, want) in cases {
            assert_eq!(command(given), want, "{given}");
        }
        let mut v = json!({"args": ["--header", "Authorization: Bearer s3cr3tv", "-H", "Cookie: c00kie1"]});
        config(&mut v);
        assert_eq!(v["args"], json!(["--header", "Authorization: Bearer [hidden]", "-H", "Cookie: [hidden]"]));
        let mut v = json!({"api_key_cmd": ["sh", "-c", "curl --user a:b0b1234 -H 'X-Api-Key: k3y12345' x"]});
        config(&mut v);
        assert_eq!(v["api_key_cmd"][2], "curl --user a:[hidden] -H 'X-Api-Key: [hidden]' x");
    }

    #[test]
    fn an_argument_list_is_masked_as_in_a_configuration() {
        let args: Vec<String> =
            ["--apikey", "k3y12345", "-H", "Authorization: Bearer b34r3r12", "--verbose"].map(String::from).to_vec();
        assert_eq!(argv(&args), ["--apikey", "[hidden]", "-H", "Authorization: Bearer [hidden]", "--verbose"]);
    }

    #[test]
    fn an_error_echoes_what_the_masking_shows() {
        assert_eq!(shown("llm.api_key_cmd", &json!("pass --pw s3cr3tv")), json!("pass --pw [hidden]"));
        assert_eq!(shown("ductile.api_token", &json!(12345678)), json!("[hidden]"));
        assert_eq!(shown("max_steps", &json!("many")), json!("many"));
    }
}
