//! HTML to markdown or text, keeping the page's main content.
//!
//! Main-content extraction: when the page has an `<article>` or `<main>` element, only its
//! inside is converted; navigation, headers, footers, asides, scripts, styles and forms are
//! dropped. Conversion to markdown uses the `htmd` crate (html5ever underneath).

fn find_ci(hay: &str, needle: &str, from: usize) -> Option<usize> {
    hay.get(from..)?.to_ascii_lowercase().find(needle).map(|i| i + from)
}

/// The inside of the first `<article>` (else `<main>`), or the whole document.
pub fn main_content(html: &str) -> &str {
    for tag in ["article", "main"] {
        if let Some(open) = find_ci(html, &format!("<{tag}"), 0) {
            if let Some(gt) = html[open..].find('>') {
                let start = open + gt + 1;
                let lower = html.to_ascii_lowercase();
                if let Some(end) = lower.rfind(&format!("</{tag}>")) {
                    if end > start {
                        return &html[start..end];
                    }
                }
            }
        }
    }
    html
}

pub fn title(html: &str) -> Option<String> {
    let open = find_ci(html, "<title", 0)?;
    let start = open + html[open..].find('>')? + 1;
    let end = find_ci(html, "</title>", start)?;
    let t = decode_entities(html[start..end].trim());
    (!t.is_empty()).then_some(t)
}

const SKIP: [&str; 10] = ["script", "style", "nav", "header", "footer", "aside", "noscript", "form", "svg", "iframe"];

pub fn to_markdown(html: &str) -> String {
    let converter = htmd::HtmlToMarkdown::builder().skip_tags(SKIP.to_vec()).build();
    let body = main_content(html);
    match converter.convert(body) {
        Ok(md) => collapse_blank_lines(&md),
        Err(_) => to_text(html),
    }
}

/// Plain text: tags removed, block elements become line breaks, entities decoded.
pub fn to_text(html: &str) -> String {
    let body = main_content(html);
    let mut out = String::with_capacity(body.len() / 2);
    let mut i = 0;
    let bytes = body.as_bytes();
    while i < body.len() {
        if bytes[i] == b'<' {
            let Some(gt) = body[i..].find('>') else { break };
            let tag = body[i + 1..i + gt]
                .trim_start_matches('/')
                .split(|c: char| c.is_whitespace() || c == '/')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            let closing = body[i + 1..].starts_with('/');
            if !closing && SKIP.contains(&tag.as_str()) {
                match find_ci(body, &format!("</{tag}"), i + gt) {
                    Some(end) => {
                        i = end + body[end..].find('>').map(|g| g + 1).unwrap_or(body.len() - end);
                        continue;
                    }
                    None => break,
                }
            }
            if matches!(
                tag.as_str(),
                "p" | "div"
                    | "br"
                    | "li"
                    | "tr"
                    | "h1"
                    | "h2"
                    | "h3"
                    | "h4"
                    | "h5"
                    | "h6"
                    | "section"
                    | "pre"
                    | "blockquote"
            ) {
                out.push('\n');
            }
            i += gt + 1;
        } else {
            let next = body[i..].find('<').map(|n| i + n).unwrap_or(body.len());
            out.push_str(&decode_entities(&body[i..next]));
            i = next;
        }
    }
    let lines: Vec<String> = out.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    collapse_blank_lines(&lines.join("\n"))
}

fn collapse_blank_lines(s: &str) -> String {
    let mut out = String::new();
    let mut blank = 0;
    for line in s.lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.trim().to_string()
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&mdash;", "—")
        .replace("&ndash;", "–")
        .replace("&hellip;", "…")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_article_drops_nav() {
        let html = "<html><head><title>T &amp; U</title></head><body><nav>Menu</nav><article><h1>Head</h1><p>Body <b>text</b>.</p><script>x()</script></article><footer>foot</footer></body></html>";
        let md = super::to_markdown(html);
        assert!(
            md.contains("# Head") && md.contains("**text**") && !md.contains("Menu") && !md.contains("x()"),
            "{md}"
        );
        assert_eq!(super::title(html).as_deref(), Some("T & U"));
        let text = super::to_text(html);
        assert!(text.contains("Body text.") && !text.contains("foot"), "{text}");
    }
}
