//! HTML to markdown or text, keeping the page's main content.
//!
//! Main-content extraction: when the page has an `<article>` or `<main>` element, only its
//! inside is converted; navigation, headers, footers, asides, scripts, styles and forms are
//! dropped. Conversion to markdown uses the `htmd` crate (html5ever underneath).

/// Finds `needle` (lower case) in `lower` (the document already lower-cased once, so offsets
/// are the original's): no per-call copy, so extraction stays linear in the page size.
fn find_ci(lower: &str, needle: &str, from: usize) -> Option<usize> {
    lower.get(from..)?.find(needle).map(|i| i + from)
}

/// Tags that never hold content, so they do not nest.
const VOID: [&str; 14] =
    ["br", "img", "hr", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr", "param"];

/// How deeply the tags of a page nest (an upper bound: unclosed tags count as open).
pub fn nesting(html: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let b = html.as_bytes();
    let mut i = 0;
    while let Some(off) = memchr_lt(&b[i..]) {
        i += off + 1;
        let closing = b.get(i) == Some(&b'/');
        let start = if closing { i + 1 } else { i };
        let end = b[start..].iter().position(|c| !c.is_ascii_alphanumeric()).map(|n| start + n).unwrap_or(b.len());
        if end == start {
            continue;
        }
        let name = html[start..end].to_ascii_lowercase();
        if closing {
            depth = depth.saturating_sub(1);
        } else if !VOID.contains(&name.as_str()) {
            depth += 1;
            max = max.max(depth);
        }
    }
    max
}

fn memchr_lt(b: &[u8]) -> Option<usize> {
    b.iter().position(|c| *c == b'<')
}

/// Deeper than this, a page is converted as plain text (linear, no recursion).
pub const MAX_NESTING: usize = 400;

/// The first start tag `<tag ...>` at or after `from`: a whole tag name (not `<mainframe>` for
/// `main`), outside comments. Linear in the page: every search starts where the last one ended.
fn find_tag(lower: &str, tag: &str, from: usize) -> Option<usize> {
    let needle = format!("<{tag}");
    let mut comment = find_ci(lower, "<!--", from);
    let mut at = find_ci(lower, &needle, from)?;
    loop {
        if let Some(c) = comment.filter(|c| *c < at) {
            // A comment opens first: go on after its end (an unclosed one hides the rest).
            let after = find_ci(lower, "-->", c + 4)? + 3;
            comment = find_ci(lower, "<!--", after);
            if at < after {
                at = find_ci(lower, &needle, after)?;
            }
            continue;
        }
        let next = lower.as_bytes().get(at + needle.len()).copied();
        if matches!(next, Some(b'>' | b'/' | b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')) {
            return Some(at);
        }
        at = find_ci(lower, &needle, at + needle.len())?;
    }
}

/// The inside of the first `<article>` (else `<main>`), or the whole document.
pub fn main_content(html: &str) -> &str {
    let lower = html.to_ascii_lowercase();
    for tag in ["article", "main"] {
        if let Some(open) = find_tag(&lower, tag, 0) {
            if let Some(gt) = html[open..].find('>') {
                let start = open + gt + 1;
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
    let lower = html.to_ascii_lowercase();
    let open = find_ci(&lower, "<title", 0)?;
    let start = open + html[open..].find('>')? + 1;
    let end = find_ci(&lower, "</title>", start)?;
    let t = decode_entities(html[start..end].trim());
    (!t.is_empty()).then_some(t)
}

const SKIP: [&str; 10] = ["script", "style", "nav", "header", "footer", "aside", "noscript", "form", "svg", "iframe"];

pub fn to_markdown(html: &str) -> String {
    let body = main_content(html);
    // The converter recurses per nesting level: a page nested deeper than any real one is
    // converted as text instead of risking the stack.
    if nesting(body) > MAX_NESTING {
        return to_text(html);
    }
    let converter = htmd::HtmlToMarkdown::builder().skip_tags(SKIP.to_vec()).build();
    match converter.convert(body) {
        Ok(md) => collapse_blank_lines(&md),
        Err(_) => to_text(html),
    }
}

/// Plain text: tags removed, block elements become line breaks, entities decoded.
pub fn to_text(html: &str) -> String {
    let body = main_content(html);
    let lower = body.to_ascii_lowercase();
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
                match find_ci(&lower, &format!("</{tag}"), i + gt) {
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

/// Decodes character references as HTML5 does: every named entity of the standard (from the
/// html5ever project's table), decimal `&#39;` and hex `&#x27;` references (invalid code points
/// become U+FFFD); an `&` that starts no reference stays as it is.
fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        match reference(rest) {
            Some((text, len)) => {
                out.push_str(&text);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The text of the character reference at the start of `s` (which starts with `&`) and its
/// length in bytes.
fn reference(s: &str) -> Option<(String, usize)> {
    let body = &s[1..];
    if let Some(num) = body.strip_prefix('#') {
        let (digits, radix, skip) = match num.strip_prefix(['x', 'X']) {
            Some(hex) => (hex, 16, 3),
            None => (num, 10, 2),
        };
        let n = digits.chars().take_while(|c| c.is_digit(radix)).count();
        if n == 0 {
            return None;
        }
        let code = u32::from_str_radix(&digits[..n.min(8)], radix).unwrap_or(0xFFFD);
        let c = char::from_u32(code).filter(|c| *c != '\0').unwrap_or('\u{FFFD}');
        let semi = usize::from(digits[n..].starts_with(';'));
        return Some((c.to_string(), skip + n + semi));
    }
    let n = body.chars().take_while(|c| c.is_ascii_alphanumeric()).count().min(32);
    if n == 0 {
        return None;
    }
    let with_semi = body[n..].starts_with(';');
    let key = &body[..n + usize::from(with_semi)];
    // The table also holds every prefix of a name, with no character (0): those are no entity.
    let (a, b) = markup5ever::data::NAMED_ENTITIES.get(key).filter(|(a, _)| *a != 0)?;
    let mut text: String = char::from_u32(*a).into_iter().collect();
    text.extend(char::from_u32(*b).filter(|_| *b != 0));
    Some((text, 1 + key.len()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tags_are_whole_names_outside_comments() {
        let page = "<html><!-- <main>old</main> --><mainframe>menu</mainframe><main id=m>the content</main></html>";
        assert_eq!(super::main_content(page), "the content");
        assert_eq!(super::main_content("<articles>x</articles>"), "<articles>x</articles>");
    }

    #[test]
    fn every_character_reference_decodes() {
        let d = super::decode_entities;
        assert_eq!(d("&eacute;t&eacute; &euro;5 &rarr; &notin; &amp;&lt;b&gt;"), "été €5 → ∉ &<b>");
        assert_eq!(d("&#39;q&#x27; &#X263A; &#0; &#xD800;"), "'q' ☺ \u{FFFD} \u{FFFD}");
        assert_eq!(d("AT&T &unknown; & ;"), "AT&T &unknown; & ;");
        assert_eq!(d("&NotEqualTilde;"), "\u{2242}\u{338}");
    }

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
