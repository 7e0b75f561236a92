//! Dumps read back: a secret spelled out byte by byte by a dump program (`od`, `xxd` of any
//! grouping and width, `xxd -b`, `hexdump -C`) is found by reading the dump's columns as
//! streams — the bytes its hex or bit columns spell, its text column, its numbers in every
//! width and radix — and every line it spans is replaced. An unknown secret's assignment is
//! found the same way.

use super::{assignment, find_all, needles, only_names};

/// One column of a dump read as a stream: its text, and where each line's part of it starts.
#[derive(Default)]
struct Stream {
    text: Vec<u8>,
    /// (offset in `text`, line number), one entry per line that added text.
    starts: Vec<(usize, usize)>,
}

impl Stream {
    fn push(&mut self, s: &[u8], line: usize) {
        if s.is_empty() {
            return;
        }
        if self.starts.last().is_none_or(|(_, l)| *l != line) {
            self.starts.push((self.text.len(), line));
        }
        self.text.extend_from_slice(s);
    }

    /// The line the byte at `at` came from.
    fn line_of(&self, at: usize) -> usize {
        let i = self.starts.partition_point(|(o, _)| *o <= at);
        self.starts[i.saturating_sub(1)].1
    }

    /// Marks the lines every occurrence of `needle` spans.
    fn mark(&self, needle: &[u8], marked: &mut [bool]) {
        if needle.is_empty() {
            return;
        }
        for a in find_all(&self.text, needle) {
            marked[self.line_of(a)..=self.line_of(a + needle.len() - 1)].fill(true);
        }
    }
}

/// The columns of numbers in a dump (`od -to1`, `od -tu1`, `od -tx2`, `od -tx4`, `hexdump`),
/// read as bytes: one stream for each radix (8, 10, 16), width of a number (1, 2, 4, 8 bytes,
/// little-endian as `od` prints words) and reading of a line's first number (a leading offset
/// or a number of the dump, which `od -An` output cannot tell apart).
#[derive(Default)]
struct Numbers {
    streams: Vec<Stream>,
}

impl Numbers {
    const RADICES: [u32; 3] = [8, 10, 16];
    const WIDTHS: [usize; 4] = [1, 2, 4, 8];

    /// Adds a line whose tokens are all numbers; any other line adds nothing.
    fn line(&mut self, toks: &[&str], line: usize) {
        if toks.is_empty() || !toks.iter().all(|t| t.len() <= 22 && t.bytes().all(|b| b.is_ascii_hexdigit())) {
            return;
        }
        if self.streams.is_empty() {
            self.streams.resize_with(Self::RADICES.len() * Self::WIDTHS.len() * 2, Stream::default);
        }
        let mut k = 0;
        for skip in [0, 1] {
            let toks = if skip == 1 && toks.len() > 1 && is_offset(toks[0]) { &toks[1..] } else { toks };
            for radix in Self::RADICES {
                let values: Option<Vec<u64>> = toks.iter().map(|t| u64::from_str_radix(t, radix).ok()).collect();
                for width in Self::WIDTHS {
                    let stream = &mut self.streams[k];
                    k += 1;
                    let Some(values) = &values else { continue };
                    if width < 8 && values.iter().any(|v| *v >> (8 * width) != 0) {
                        continue;
                    }
                    for v in values {
                        stream.push(&v.to_le_bytes()[..width], line);
                    }
                }
            }
        }
    }

    fn mark(&self, needle: &[u8], marked: &mut [bool]) {
        for s in &self.streams {
            s.mark(needle, marked);
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

/// A dump line read greedily: an offset dropped, hex groups of one width (a shorter last one)
/// as bytes, then the rest as the character column (blanks and `|` out).
fn greedy_line(toks: &[&str]) -> (Vec<u8>, String) {
    let mut t = toks;
    if t.len() > 1 && is_offset(t[0]) {
        t = &t[1..];
    }
    let (mut bytes, mut width) = (Vec::new(), None);
    while let Some(g) = t.first().and_then(|tok| hex_group(tok)) {
        let w = *width.get_or_insert(g.len());
        if g.len() > w {
            break;
        }
        bytes.extend(unhex(&g));
        t = &t[1..];
        if g.len() < w {
            break;
        }
    }
    (bytes, t.iter().map(|tok| tok.replace('|', "")).collect())
}

/// Hex text as bytes (`hex_group` gives an even number of hex digits).
fn unhex(h: &str) -> Vec<u8> {
    h.as_bytes().chunks(2).filter_map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok()).collect()
}

/// A token of a binary dump (`xxd -b`): eight binary digits a byte.
fn bin_group(tok: &str) -> Option<Vec<u8>> {
    (!tok.is_empty() && tok.len().is_multiple_of(8) && tok.bytes().all(|b| b == b'0' || b == b'1')).then(|| {
        tok.as_bytes().chunks(8).filter_map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 2).ok()).collect()
    })
}

/// One line of a dump that ends in a text column (`xxd`, `xxd -g0/-c2/-c4/-b`, `hexdump -C`),
/// as the bytes its groups spell and the column (blanks out, `|` frames off); None for any
/// other line. The split is where the groups before it spell exactly as many bytes as the
/// column after it shows (one blank or more between them): a column that looks like hex
/// (`0123`) is then not taken for a group.
fn dump_line(line: &str) -> Option<(Vec<u8>, String)> {
    let line = line.trim_end_matches(['\n', '\r']);
    let mut toks: Vec<(usize, &str)> = Vec::new();
    let mut at = 0;
    for tok in line.split(' ') {
        if !tok.is_empty() {
            toks.push((at, tok));
        }
        at += tok.len() + 1;
    }
    let first = usize::from(toks.len() > 1 && is_offset(toks[0].1));
    for group in [0, 1] {
        let mut bytes = Vec::new();
        for &(start, tok) in toks.iter().skip(first) {
            let g = if group == 0 { hex_group(tok).map(|h| unhex(&h)) } else { bin_group(tok) };
            let Some(g) = g else { break };
            bytes.extend(g);
            let rest = &line[start + tok.len()..];
            let column = rest.trim_start();
            let blanks = rest.len() - column.len();
            let framed = column.strip_prefix('|').and_then(|c| c.strip_suffix('|'));
            let column = framed.unwrap_or(column);
            let more = if framed.is_some() { 0 } else { blanks.saturating_sub(1) };
            if blanks > 0 && !column.is_empty() && (column.len()..=column.len() + more).contains(&bytes.len()) {
                return Some((bytes, column.split_whitespace().collect()));
            }
        }
    }
    None
}

/// Replaces every line of `text` over which a secret is spelled out byte by byte: in a hex
/// column (xxd, od -tx1, hexdump -C, hex with separators), a character column (od -c, the
/// right-hand side of xxd and hexdump -C), a column of numbers (od -to1, -tu1, -tx2, -tx4) or
/// the text with its blanks taken out (a secret cut into pieces), across lines.
pub(super) fn redact_dumps(text: &str, secrets: &[&str]) -> String {
    let shortest = secrets.iter().map(|s| s.len()).min().unwrap_or(0);
    if text.len() < shortest {
        return text.to_string();
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (mut bytes, mut chars, mut all) = (Stream::default(), Stream::default(), Stream::default());
    let (mut gbytes, mut gchars) = (Stream::default(), Stream::default());
    let mut numbers = Numbers::default();
    for (n, line) in lines.iter().enumerate() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        // Everything but the blanks: a secret cut into pieces (`fold -w2`, two `cut`s).
        for tok in &toks {
            all.push(tok.as_bytes(), n);
        }
        numbers.line(&toks, n);
        // A dump with a text column (`xxd` of any grouping and width, `xxd -b`, `hexdump -C`)
        // is read by its shape: the groups before it spell as many bytes as it shows.
        // Read greedily too, into streams of their own: a list of hex numbers (`0x73, ...`)
        // can have a text column's shape by chance.
        let (greedy_bytes, greedy_chars) = greedy_line(&toks);
        gbytes.push(&greedy_bytes, n);
        gchars.push(greedy_chars.as_bytes(), n);
        match dump_line(line) {
            Some((b, column)) => {
                bytes.push(&b, n);
                chars.push(column.as_bytes(), n);
            }
            None => {
                bytes.push(&greedy_bytes, n);
                chars.push(greedy_chars.as_bytes(), n);
            }
        }
    }
    let mut marked = vec![false; lines.len()];
    for s in secrets {
        let compact: String = s.split_whitespace().collect();
        all.mark(compact.as_bytes(), &mut marked);
        for needle in needles(s) {
            // A dump's text column shows a byte it cannot print (UTF-16's NULs) as `.`.
            let shown: Vec<u8> =
                needle.iter().filter(|b| !b.is_ascii_whitespace()).map(|b| if *b == 0 { b'.' } else { *b }).collect();
            chars.mark(&shown, &mut marked);
            gchars.mark(&shown, &mut marked);
            bytes.mark(&needle, &mut marked);
            gbytes.mark(&needle, &mut marked);
            numbers.mark(&needle, &mut marked);
        }
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

/// [`super::mask_assignments`] for a file a dump program shows (`xxd .env` of any grouping and width,
/// `xxd -p`, `xxd -b`, `hexdump -C`, `od -An -tx1`): the bytes its hex (or bit) columns spell
/// and its text column are read as text, and every line over which a secret-looking
/// assignment's value is spelled is replaced by `[REDACTED]`.
pub(super) fn mask_dumped_assignments(text: &str) -> String {
    match dumped_assignment_lines(text) {
        Some(marked) => mask_lines(text, &marked),
        None => text.to_string(),
    }
}

/// Which lines of `text` (split after each `\n`) show the value of a secret-looking assignment
/// in a dump; None when none does.
pub(super) fn dumped_assignment_lines(text: &str) -> Option<Vec<bool>> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (mut bytes, mut chars, mut any) = (Stream::default(), Stream::default(), false);
    for (n, line) in lines.iter().enumerate() {
        if let Some((b, column)) = dump_line(line) {
            bytes.push(&b, n);
            chars.push(column.as_bytes(), n);
            any = true;
            continue;
        }
        let toks: Vec<&str> = line.split_whitespace().collect();
        let (b, rest) = greedy_line(&toks);
        if rest.is_empty() && !b.is_empty() {
            bytes.push(&b, n);
            any = true;
        }
    }
    if !any {
        return None;
    }
    let mut marked = vec![false; lines.len()];
    for stream in [&bytes, &chars] {
        // One character a byte, so a match's place is the byte's (UTF-16's NULs read past).
        let shown: String =
            stream.text.iter().map(|b| if b.is_ascii_graphic() || *b == b' ' { *b as char } else { '.' }).collect();
        for wide in [false, true] {
            let (view, at): (String, Vec<usize>) = if wide {
                stream
                    .text
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b != 0)
                    .map(|(i, _)| (shown.as_bytes()[i] as char, i))
                    .unzip()
            } else {
                (shown.clone(), (0..shown.len()).collect())
            };
            for c in assignment().captures_iter(&view) {
                let Some(m) = c.get(2) else { continue };
                if only_names(m.as_str().trim_matches(|q| q == '"' || q == '\'')) {
                    continue;
                }
                let (first, last) = (stream.line_of(at[m.start()]), stream.line_of(at[m.end() - 1]));
                marked[first..=last].fill(true);
            }
        }
    }
    marked.contains(&true).then_some(marked)
}

/// `text` with each marked line (split after each `\n`) replaced by `[REDACTED]`.
pub(super) fn mask_lines(text: &str, marked: &[bool]) -> String {
    text.split_inclusive('\n')
        .zip(marked.iter().chain(std::iter::repeat(&false)))
        .map(|(l, m)| match (m, l.ends_with('\n')) {
            (true, true) => "[REDACTED]\n",
            (true, false) => "[REDACTED]",
            (false, _) => l,
        })
        .collect()
}
