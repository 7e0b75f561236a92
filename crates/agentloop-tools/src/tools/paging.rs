//! Windows of lines: how file_read pages through a file and how a spilled output tells the
//! model exactly which call reads on.
//!
//! Lines are numbered from 1 and end at `\n` (kept, with any `\r`); a final line without one
//! still counts, an empty text has no lines. A window holds whole lines only, except when its
//! first line alone is longer than the budget: then that line is cut and the window says so.

use serde_json::json;

/// Part of a text, by lines.
#[derive(Debug, PartialEq)]
pub struct Page {
    pub text: String,
    /// First and last line in the window (1-based; `last < first` when the window is empty).
    pub first: usize,
    pub last: usize,
    pub total: usize,
    /// The window's only line was cut at the budget (its full length in characters).
    pub cut: Option<usize>,
}

impl Page {
    /// The whole text is in the window.
    pub fn is_whole(&self) -> bool {
        self.first == 1 && self.last == self.total && self.cut.is_none()
    }
    /// The line the next window starts at, if any is left.
    pub fn next(&self) -> Option<usize> {
        (self.last < self.total).then_some(self.last + 1)
    }
}

pub fn count_lines(text: &str) -> usize {
    text.split_inclusive('\n').count()
}

/// Lines `offset..` of `text`: at most `limit` lines and `budget` characters.
/// `Err` when `offset` lies past the last line (an empty text accepts offset 1).
pub fn window(text: &str, offset: usize, limit: Option<usize>, budget: usize) -> Result<Page, usize> {
    let total = count_lines(text);
    let offset = offset.max(1);
    if offset > total.max(1) {
        return Err(total);
    }
    let mut out = String::new();
    let mut used = 0usize;
    let mut last = offset - 1;
    let mut cut = None;
    for line in text.split_inclusive('\n').skip(offset - 1) {
        if limit.is_some_and(|l| last + 1 - offset >= l) {
            break;
        }
        let n = line.chars().count();
        if used + n > budget {
            if last + 1 == offset {
                // The first line alone does not fit: show its start.
                out.extend(line.chars().take(budget));
                last += 1;
                cut = Some(n);
            }
            break;
        }
        out.push_str(line);
        used += n;
        last += 1;
    }
    Ok(Page { text: out, first: offset, last, total, cut })
}

/// Characters of file text a window may hold under `output_cap`, leaving room for the closing
/// note (which names `path` twice).
pub fn budget(output_cap: usize, path: &str) -> usize {
    output_cap.saturating_sub(160 + 2 * path.chars().count()).max(output_cap / 2).max(1)
}

/// The exact call that reads the window after `page` (same budget rules as file_read).
pub fn next_call(path: &str, next: usize, limit: usize) -> String {
    format!("file_read {{\"path\": {}, \"offset\": {next}, \"limit\": {limit}}}", json!(path))
}

/// How many lines a default file_read would return from `offset` (at least one).
pub fn lines_that_fit(text: &str, offset: usize, budget: usize) -> usize {
    window(text, offset, None, budget).map(|p| (p.last + 1).saturating_sub(p.first).max(1)).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_hold_whole_lines() {
        let text = "a\nbb\nccc\n";
        assert_eq!(count_lines(text), 3);
        assert_eq!(count_lines("a\nb"), 2);
        assert_eq!(count_lines(""), 0);
        let p = window(text, 2, Some(1), 100).unwrap();
        assert_eq!((p.text.as_str(), p.first, p.last, p.total, p.next()), ("bb\n", 2, 2, 3, Some(3)));
        let p = window(text, 1, None, 5).unwrap();
        assert_eq!((p.text.as_str(), p.last), ("a\nbb\n", 2));
        let p = window(text, 1, None, 100).unwrap();
        assert!(p.is_whole());
        assert_eq!(window(text, 4, None, 100), Err(3));
        assert!(window("", 1, None, 10).unwrap().is_whole());
    }

    #[test]
    fn an_overlong_first_line_is_cut_not_skipped() {
        let p = window("xxxxxxxxxx\nyy\n", 1, None, 4).unwrap();
        assert_eq!((p.text.as_str(), p.last, p.cut, p.next()), ("xxxx", 1, Some(11), Some(2)));
    }

    #[test]
    fn the_next_call_is_json() {
        assert_eq!(
            next_call("logs/a.log", 201, 200),
            r#"file_read {"path": "logs/a.log", "offset": 201, "limit": 200}"#
        );
    }
}
