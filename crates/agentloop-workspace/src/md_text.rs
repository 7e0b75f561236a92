//! Text from a model or a person placed inside a markdown file the program writes (memory.md,
//! context.md, a learned skill's facts): it never makes structure.
//!
//! Invariants:
//! - A value is one list item ([`bullet`]) or one block of prose ([`prose`]): no line of it can
//!   open a heading, a list, a fence, a quote, an HTML block or a thematic break. Such a line is
//!   escaped with a backslash where markdown reads one (`\## Example News`, `1\. first`), so a
//!   viewer shows the text as written.
//! - A bullet's second and later lines are indented two spaces, which keeps them inside the item
//!   for markdown and for `markdown::parse_memory`.
//! - [`unescape`] undoes [`escape`] exactly (a line that already starts with a backslash gets one
//!   more), so reading a file back gives the values that were written.
//!
//! Line ends are `\n`; a `\r\n` or lone `\r` (which markdown also ends a line at) becomes `\n`.

/// Whether a line (its leading whitespace removed) would start structure in markdown: a heading,
/// a fence, a quote, an HTML block, a bullet, or a thematic break or setext underline.
fn structural(t: &str) -> bool {
    let first = t.chars().next();
    matches!(first, Some('#' | '>' | '<'))
        || t.starts_with("```")
        || t.starts_with("~~~")
        || ["-", "*", "+"]
            .iter()
            .any(|m| t == *m || t.starts_with(&format!("{m} ")) || t.starts_with(&format!("{m}\t")))
        || (first.is_some() && t.chars().all(|c| matches!(c, '-' | '=' | '*' | '_' | ' ' | '\t')))
}

/// The digits and backslashes that start an ordered-list marker (`1.`, `2)`), with how many
/// backslashes stand before its `.` or `)`: `None` when the line is not one.
fn ordered(t: &str) -> Option<(usize, usize)> {
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let slashes = t[digits..].bytes().take_while(|b| *b == b'\\').count();
    let after = t[digits + slashes..].strip_prefix(['.', ')'])?;
    let spaced = after.is_empty() || after.starts_with([' ', '\t']);
    // A marker is escaped when it would open a list, and whenever it is already escaped (so the
    // escape can be undone exactly).
    (slashes > 0 || spaced).then_some((digits, slashes))
}

/// One line with its structure neutralised: a backslash after its leading whitespace, or before
/// an ordered-list marker's `.`/`)`.
pub fn escape(line: &str) -> String {
    let t = line.trim_start();
    let lead = &line[..line.len() - t.len()];
    if structural(t) || t.starts_with('\\') {
        return format!("{lead}\\{t}");
    }
    match ordered(t) {
        Some((digits, _)) => format!("{lead}{}\\{}", &t[..digits], &t[digits..]),
        None => line.to_string(),
    }
}

/// Undoes [`escape`].
pub fn unescape(line: &str) -> String {
    let t = line.trim_start();
    let lead = &line[..line.len() - t.len()];
    if let Some(rest) = t.strip_prefix('\\') {
        return format!("{lead}{rest}");
    }
    match ordered(t) {
        Some((digits, slashes)) if slashes > 0 => format!("{lead}{}{}", &t[..digits], &t[digits + 1..]),
        _ => line.to_string(),
    }
}

/// The value's lines, `\r\n` and `\r` read as line ends, trailing whitespace dropped.
fn lines(value: &str) -> Vec<String> {
    let value = value.replace("\r\n", "\n").replace('\r', "\n");
    value.trim().lines().map(|l| l.trim_end().to_string()).collect()
}

/// A value as the text after a list item's `- `: every line escaped, the second and later ones
/// indented two spaces (a blank line stays blank).
pub fn bullet(value: &str) -> String {
    lines(value)
        .iter()
        .enumerate()
        .map(|(i, l)| match (i, l.is_empty()) {
            (_, true) => String::new(),
            (0, _) => escape(l),
            _ => format!("  {}", escape(l)),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A value as a block of prose under a heading: every line escaped.
pub fn prose(value: &str) -> String {
    lines(value).iter().map(|l| escape(l)).collect::<Vec<_>>().join("\n")
}

/// Undoes [`prose`] on a block read back.
pub fn unprose(text: &str) -> String {
    text.lines().map(unescape).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_structural_line_is_escaped_and_read_back_as_written() {
        for line in [
            "## Example News (2026-03-01)",
            "# Title",
            "```rust",
            "~~~",
            "- item",
            "* item",
            "+ item",
            "-",
            "---",
            "===",
            "> quoted",
            "<!-- open",
            "1. first",
            "12) twelfth",
            "1\\. already escaped",
            "\\## a backslash first",
            "   ## indented",
            "plain text",
            "1.5 million",
            "#hashtag",
        ] {
            let e = escape(line);
            assert_eq!(unescape(&e), line, "{e}");
            let t = e.trim_start();
            assert!(!t.starts_with('#') && !t.starts_with("```") && !t.starts_with("- "), "{e}");
        }
        assert_eq!(escape("plain text"), "plain text");
        assert_eq!(escape("1. first"), "1\\. first");
        assert_eq!(escape("1.5 million"), "1.5 million");
    }

    #[test]
    fn a_bullet_keeps_its_lines_inside_the_item() {
        let b = bullet("Run A ended done: today\r\n## Example News\n\n```\n- x\n");
        assert_eq!(b, "Run A ended done: today\n  \\## Example News\n\n  \\```\n  \\- x");
        assert_eq!(prose("a\n# b"), "a\n\\# b");
        assert_eq!(unprose(&prose("a\n# b\n1. c")), "a\n# b\n1. c");
    }
}
