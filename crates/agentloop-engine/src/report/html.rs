//! HTML primitives for reports: escaping, link encoding, number formats and a small markdown
//! renderer for memory.md and plan.md.
//!
//! Invariant: every function here returns markup whose only tags are the fixed ones it writes
//! itself; text from a run is always escaped, and links are never made from text (markdown
//! links stay text), so model output cannot add an element or an attribute.

use std::fmt::Write;

/// Escapes text for use in element content and in double- or single-quoted attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes one path segment (everything but unreserved characters), so a file name can
/// never become a scheme (`javascript:`), a query or another folder.
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Encodes a relative path (segments joined by `/`).
pub fn encode_path(rel: &str) -> String {
    rel.split('/').map(encode_segment).collect::<Vec<_>>().join("/")
}

/// 1234567 → "1,234,567".
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Milliseconds for people: "0 ms", "850 ms", "1.2 s", "3 min 05 s", "1 h 02 min".
pub fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{} min {:02} s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{} h {:02} min", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

/// USD with four decimals, as every cost is printed (`status`, `runs`, `trace`, reports). A
/// negative zero (a sum that cancelled out) prints as `$0.0000`, never `$-0.0000`.
pub fn usd(c: f64) -> String {
    format!("${:.4}", c + 0.0)
}

/// How a cost that is not known is shown to people, everywhere (`status`, `runs`, `trace`,
/// reports): some call of the run had no price (a model not in the price table and not under
/// `prices:`). JSON says `null`.
pub const UNKNOWN_COST: &str = "$?";

/// A cost for people: dollars, or [`UNKNOWN_COST`].
pub fn cost_text(c: Option<f64>) -> String {
    c.map(usd).unwrap_or_else(|| UNKNOWN_COST.into())
}

/// A cost as the report shows it: `none` for a scripted run (a replay spends nothing and is
/// never shown as a price), else dollars.
pub fn spend(c: f64, scripted: bool) -> String {
    if scripted {
        "none".into()
    } else {
        usd(c)
    }
}

/// A short excerpt of `s`: at most `n` characters, on one line.
pub fn excerpt(s: &str, n: usize) -> String {
    let line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= n {
        return line;
    }
    line.chars().take(n).collect::<String>() + "…"
}

/// Inline markdown: `code` and **bold**; everything else is text (an unpaired marker too).
fn inline(s: &str) -> String {
    let mut out = String::new();
    let parts: Vec<&str> = s.split('`').collect();
    for (i, part) in parts.iter().enumerate() {
        if i % 2 == 1 && i + 1 < parts.len() {
            let _ = write!(out, "<code>{}</code>", esc(part));
            continue;
        }
        if i % 2 == 1 {
            out.push('`');
        }
        let bold: Vec<&str> = part.split("**").collect();
        for (j, b) in bold.iter().enumerate() {
            if j % 2 == 1 && j + 1 < bold.len() {
                let _ = write!(out, "<strong>{}</strong>", esc(b));
            } else {
                if j % 2 == 1 {
                    out.push_str("**");
                }
                out.push_str(&esc(b));
            }
        }
    }
    out
}

/// Renders the markdown of memory.md and plan.md: headings (shifted to start at `<h3>`),
/// lists, checkboxes, fenced blocks and paragraphs.
pub fn markdown(text: &str) -> String {
    let mut out = String::new();
    let mut para: Vec<&str> = Vec::new();
    let mut list = false;
    let mut fence: Option<Vec<&str>> = None;
    let flush_para = |out: &mut String, para: &mut Vec<&str>| {
        if !para.is_empty() {
            let _ = write!(out, "<p>{}</p>", inline(&para.join(" ")));
            para.clear();
        }
    };
    for line in text.lines() {
        if let Some(block) = fence.as_mut() {
            if line.trim_start().starts_with("```") {
                let _ = write!(out, "<pre><code>{}</code></pre>", esc(&block.join("\n")));
                fence = None;
            } else {
                block.push(line);
            }
            continue;
        }
        let t = line.trim();
        let item = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")).or_else(|| {
            let digits = t.chars().take_while(char::is_ascii_digit).count();
            (digits > 0).then(|| t[digits..].strip_prefix(". ")).flatten()
        });
        if item.is_none() && list {
            out.push_str("</ul>");
            list = false;
        }
        if t.starts_with("```") {
            flush_para(&mut out, &mut para);
            fence = Some(Vec::new());
        } else if let Some(item) = item {
            flush_para(&mut out, &mut para);
            if !list {
                out.push_str("<ul>");
                list = true;
            }
            let (class, mark, rest) = if let Some(r) = item.strip_prefix("[x] ").or_else(|| item.strip_prefix("[X] ")) {
                (" class=\"check done\"", "☑ ", r)
            } else if let Some(r) = item.strip_prefix("[ ] ") {
                (" class=\"check\"", "☐ ", r)
            } else {
                ("", "", item)
            };
            let _ = write!(out, "<li{class}>{mark}{}</li>", inline(rest));
        } else if t.starts_with('#') {
            flush_para(&mut out, &mut para);
            let level = t.chars().take_while(|c| *c == '#').count();
            let h = (level + 2).min(6);
            let _ = write!(out, "<h{h}>{}</h{h}>", inline(t[level..].trim()));
        } else if t.is_empty() {
            flush_para(&mut out, &mut para);
        } else {
            para.push(t);
        }
    }
    if let Some(block) = fence {
        let _ = write!(out, "<pre><code>{}</code></pre>", esc(&block.join("\n")));
    }
    flush_para(&mut out, &mut para);
    if list {
        out.push_str("</ul>");
    }
    out
}

/// The start of a page: the inline stylesheet and a policy that forbids scripts, plug-ins,
/// frames and every network fetch (the page is self-contained).
pub fn head(title: &str, refresh: Option<u32>) -> String {
    head_with(title, refresh, CSP)
}

/// [`head`] under the policy `csp` ([`CSP`], or [`CSP_FORMS`] for a served page with forms).
pub fn head_with(title: &str, refresh: Option<u32>, csp: &str) -> String {
    let mut s = String::from("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    s.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"");
    s.push_str(csp);
    // Same origin only: a served page's form posts carry its `Origin` (see serve's form check);
    // no link sends the address to another site.
    s.push_str("\"><meta name=\"referrer\" content=\"same-origin\">");
    if let Some(n) = refresh {
        let _ = write!(s, "<meta http-equiv=\"refresh\" content=\"{n}\">");
    }
    let _ = write!(
        s,
        "<meta name=\"generator\" content=\"agentloop {}\"><title>{}</title><style>{}</style></head>\n<body><main>",
        env!("CARGO_PKG_VERSION"),
        esc(title),
        include_str!("style.css")
    );
    s
}

/// The Content-Security-Policy of every page (served pages also send it as a header, with
/// `frame-ancestors 'none'`, which only a header can say).
pub const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";

/// [`CSP`] for a served run's page that carries the panel's forms: they may post to the server
/// that served the page, and nowhere else.
pub const CSP_FORMS: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'self'";

/// The end of a page.
pub fn foot() -> String {
    format!(
        "<footer>Made by agentloop {} at {} from the run's files; rewrite it any time with <code>agentloop report</code>.</footer></main></body></html>\n",
        env!("CARGO_PKG_VERSION"),
        esc(&agentloop_types::clock::now_rfc3339())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_that_cancelled_out_prints_as_zero() {
        assert_eq!(usd(-0.0), "$0.0000");
        assert_eq!(usd(0.5 - 0.5), "$0.0000");
        assert_eq!(usd(0.01234), "$0.0123");
    }

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn segments_cannot_become_schemes_or_folders() {
        assert_eq!(encode_segment("javascript:alert(1)"), "javascript%3Aalert%281%29");
        assert_eq!(encode_path("artifacts/a b/../c"), "artifacts/a%20b/../c");
        assert_eq!(encode_segment("a/b?c#d"), "a%2Fb%3Fc%23d");
    }

    #[test]
    fn formats() {
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(1250), "1.2 s");
        assert_eq!(duration(125_000), "2 min 05 s");
        assert_eq!(excerpt("a\n b   c", 3), "a b…");
    }

    #[test]
    fn markdown_escapes_everything_it_does_not_own() {
        let md = "# Goal\n\n<img src=x onerror=alert(1)>\n\n- [x] done `<b>`\n- [ ] open **bold <i>**\n\n```\n<script>\n```\n[link](javascript:alert(1))";
        let html = markdown(md);
        assert_eq!(
            html,
            "<h3>Goal</h3><p>&lt;img src=x onerror=alert(1)&gt;</p><ul><li class=\"check done\">☑ done <code>&lt;b&gt;</code></li><li class=\"check\">☐ open <strong>bold &lt;i&gt;</strong></li></ul><pre><code>&lt;script&gt;</code></pre><p>[link](javascript:alert(1))</p>"
        );
        assert_eq!(markdown("a `b"), "<p>a `b</p>");
        assert_eq!(markdown("a **b"), "<p>a **b</p>");
    }
}
