//! Reading a tool call's arguments as the model wrote them: JSON text that a constrained
//! decoder's grammar allowed, which is not always JSON that `serde_json` takes.
//!
//! Local servers (llama.cpp and llama-cpp-python) hold a model to a JSON grammar whose string
//! rule admits raw control characters (a newline typed inside a string) and `\uXXXX` escapes of
//! any four hex digits, lone surrogates included. Strict JSON refuses both, so an answer the
//! schema's grammar produced would be refused as "not a JSON object" — the model did what it was
//! asked and cannot do better on a retry. [`parse`] takes such text: inside strings, a raw
//! control character becomes its escape and a lone surrogate escape becomes U+FFFD; nothing
//! outside strings changes, so text that is not JSON stays refused.

use serde_json::Value;
use std::borrow::Cow;

/// Parses `text` as JSON, taking what a JSON grammar's string rule allows (see the module
/// docs). Err: strict serde_json's error on the text as written.
pub fn parse(text: &str) -> Result<Value, serde_json::Error> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(v),
        Err(e) => match mend(text) {
            Cow::Owned(mended) => serde_json::from_str(&mended).map_err(|_| e),
            Cow::Borrowed(_) => Err(e),
        },
    }
}

/// `text` with raw control characters inside strings escaped and lone surrogate escapes
/// replaced by `\ufffd`; borrowed when there was nothing to mend.
pub fn mend(text: &str) -> Cow<'_, str> {
    let b = text.as_bytes();
    let mut out = String::new();
    // Text before `copied` is in `out` (when anything was mended).
    let mut copied = 0;
    let replace = |out: &mut String, at: usize, len: usize, with: &str, copied: &mut usize| {
        out.push_str(&text[*copied..at]);
        out.push_str(with);
        *copied = at + len;
    };
    let mut in_str = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !in_str {
            in_str = c == b'"';
            i += 1;
            continue;
        }
        match c {
            b'"' => {
                in_str = false;
                i += 1;
            }
            b'\\' if b.get(i + 1) == Some(&b'u') => {
                let Some(unit) = hex4(b, i + 2) else {
                    i += 2;
                    continue;
                };
                let paired = b.get(i + 6) == Some(&b'\\')
                    && b.get(i + 7) == Some(&b'u')
                    && hex4(b, i + 8).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low));
                match unit {
                    // A valid pair is passed whole, so its low half is not judged alone.
                    0xD800..=0xDBFF if paired => i += 12,
                    0xD800..=0xDFFF => {
                        replace(&mut out, i, 6, "\\ufffd", &mut copied);
                        i += 6;
                    }
                    _ => i += 6,
                }
            }
            // Any other escape: the escaped character is passed as it is.
            b'\\' => i += 1 + text[i + 1..].chars().next().map_or(0, char::len_utf8),
            0x00..=0x1F => {
                let with = match c {
                    b'\n' => "\\n".to_string(),
                    b'\t' => "\\t".to_string(),
                    b'\r' => "\\r".to_string(),
                    _ => format!("\\u{c:04x}"),
                };
                replace(&mut out, i, 1, &with, &mut copied);
                i += 1;
            }
            _ => i += 1,
        }
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// The four hex digits at `at` as a number.
fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = b.get(at..at + 4)?;
    let s = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(s, 16).ok().filter(|_| digits.iter().all(u8::is_ascii_hexdigit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn raw_control_characters_and_lone_surrogates_inside_strings_are_taken() {
        let v =
            parse("{\"content\": \"line one\nline\ttwo\r\u{1}\", \"k\": \"\\ud800 \\udc00 \\ud83d\\ude00\"}").unwrap();
        assert_eq!(v, json!({"content": "line one\nline\ttwo\r\u{1}", "k": "\u{fffd} \u{fffd} 😀"}));
        // Outside strings nothing is mended: text that is not JSON stays refused.
        assert!(parse("{\"a\": 1,}").is_err());
        assert!(parse("{\"a\"\n: tru}").is_err());
        assert!(matches!(mend("{\"a\": \"ok\\n\"}"), Cow::Borrowed(_)));
    }

    /// A JSON value as a grammar of the llama.cpp family may emit it: strings of any character
    /// but `"` and `\`, control characters included, or escapes of `"\/bfnrt` or four hex digits
    /// (any four, lone surrogates too); numbers, literals, nested arrays and objects; blanks
    /// between tokens.
    fn value(rng: &mut fastrand::Rng, depth: u32, out: &mut String) {
        let ws = |rng: &mut fastrand::Rng, out: &mut String| {
            for _ in 0..rng.usize(0..3) {
                out.push([' ', '\n', '\t'][rng.usize(0..3)]);
            }
        };
        match if depth > 3 { rng.u32(0..3) } else { rng.u32(0..5) } {
            0 => string(rng, out),
            1 => out.push_str(["0", "-12", "3.5", "1e9", "-0.25E-3", "42"][rng.usize(0..6)]),
            2 => out.push_str(["true", "false", "null"][rng.usize(0..3)]),
            3 => {
                out.push('[');
                for k in 0..rng.usize(0..4) {
                    if k > 0 {
                        out.push(',');
                    }
                    ws(rng, out);
                    value(rng, depth + 1, out);
                    ws(rng, out);
                }
                out.push(']');
            }
            _ => object(rng, depth + 1, out),
        }
    }

    fn object(rng: &mut fastrand::Rng, depth: u32, out: &mut String) {
        out.push('{');
        for k in 0..rng.usize(0..4) {
            if k > 0 {
                out.push(',');
            }
            string(rng, out);
            out.push(':');
            if rng.bool() {
                out.push(' ');
            }
            value(rng, depth, out);
        }
        out.push('}');
    }

    fn string(rng: &mut fastrand::Rng, out: &mut String) {
        out.push('"');
        for _ in 0..rng.usize(0..12) {
            match rng.u32(0..10) {
                0..=2 => out.push(char::from(rng.u8(0..0x20))),
                3 => out.push_str(&format!("\\u{:04x}", rng.u32(0..0x10000))),
                4 => {
                    out.push('\\');
                    out.push(['"', '\\', '/', 'b', 'f', 'n', 'r', 't'][rng.usize(0..8)]);
                }
                5 => out.push(['é', '€', '😀', '\u{7f}'][rng.usize(0..4)]),
                _ => out.push(rng.alphanumeric()),
            }
        }
        out.push('"');
    }

    /// Every object such a grammar can emit is taken, and what strict JSON already takes is
    /// read exactly as strict JSON reads it.
    #[test]
    fn every_object_a_json_grammar_emits_is_taken() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..20_000 {
            let mut text = String::new();
            object(&mut rng, 0, &mut text);
            let v = parse(&text).unwrap_or_else(|e| panic!("{text:?} refused: {e}"));
            assert!(v.is_object());
            if let Ok(strict) = serde_json::from_str::<Value>(&text) {
                assert_eq!(v, strict, "{text:?}");
            }
        }
    }
}
