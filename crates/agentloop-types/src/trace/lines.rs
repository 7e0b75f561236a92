//! The lines of a workspace's line files (trace.jsonl), read with a bound on one line: a line
//! over [`MAX_LINE`] is passed over to its newline without being held and handed on as
//! [`Piece::TooLong`] in its place, so a reader reports it as it reports a corrupt line and
//! goes on. A file is data from whoever wrote the workspace: without the bound, 512 MB with no
//! newline (a sparse file costs nothing in a tar) made a read-only `trace show` hold 1 GB.

use std::io::Read;

/// The most bytes one line may hold, its newline aside. A line agentloop writes never comes
/// near it: the journal refuses a commit that would take trace.jsonl past 64 MiB (agentloop-workspace
/// checks that its cap is no more than this one), so a longer line came from elsewhere.
pub const MAX_LINE: usize = 64 << 20;

/// What a reader says of a line over [`MAX_LINE`] (after the line's number).
pub fn too_long(bytes: u64) -> String {
    format!("{bytes} bytes, longer than the {} MiB a line may hold", MAX_LINE >> 20)
}

/// One line as a [`Splitter`] hands it on.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// The line's bytes without its newline (a `\r` before the newline is the reader's to trim).
    Line(&'a [u8]),
    /// A line over the cap, passed over: its length in bytes, newline aside.
    TooLong(u64),
}

/// Cuts bytes that come in blocks (a file read block by block, what a followed file appends)
/// into lines. A line inside one block is handed on as a slice of it, with no copy; only a line
/// that spans blocks is held, and never more than the cap of it.
#[derive(Debug)]
pub struct Splitter {
    max: usize,
    /// The start of a line that a later block ends.
    held: Vec<u8>,
    /// The bytes so far of a line over the cap that is being passed over.
    skipped: Option<u64>,
    /// The lines handed on so far.
    lines: usize,
}

impl Default for Splitter {
    fn default() -> Self {
        Self::with_max(MAX_LINE)
    }
}

impl Splitter {
    /// A splitter with another cap (the tests' small one).
    pub fn with_max(max: usize) -> Self {
        Splitter { max, held: Vec::new(), skipped: None, lines: 0 }
    }

    /// Hands `f` each line that `block` ends, in order, with its 1-based number; the start of a
    /// line it does not end is kept for the next block.
    pub fn feed(&mut self, block: &[u8], f: &mut impl FnMut(usize, Piece<'_>)) {
        let mut rest = block;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            self.end(&rest[..nl], f);
            rest = &rest[nl + 1..];
        }
        self.hold(rest);
    }

    /// The end of the input: a last line without a newline is a line too.
    pub fn finish(&mut self, f: &mut impl FnMut(usize, Piece<'_>)) {
        if !self.is_empty() {
            self.end(&[], f);
        }
    }

    /// The lines handed on so far.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// No line is begun: nothing is held or being passed over.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.skipped.is_none()
    }

    /// Ends the current line with `tail`, the last of its bytes.
    fn end(&mut self, tail: &[u8], f: &mut impl FnMut(usize, Piece<'_>)) {
        self.lines += 1;
        let len = self.skipped.take().unwrap_or(self.held.len() as u64) + tail.len() as u64;
        if len > self.max as u64 {
            self.held.clear();
            f(self.lines, Piece::TooLong(len));
        } else if self.held.is_empty() {
            f(self.lines, Piece::Line(tail));
        } else {
            self.held.extend_from_slice(tail);
            f(self.lines, Piece::Line(&self.held));
            self.held.clear();
        }
    }

    /// Keeps the start of a line for the next block, up to the cap; past it, only counts.
    fn hold(&mut self, part: &[u8]) {
        if part.is_empty() {
            return;
        }
        match &mut self.skipped {
            Some(n) => *n += part.len() as u64,
            None if self.held.len() + part.len() > self.max => {
                self.skipped = Some((self.held.len() + part.len()) as u64);
                // Given back rather than cleared: the line it held is not coming back.
                self.held = Vec::new();
            }
            None => self.held.extend_from_slice(part),
        }
    }
}

/// Bytes read from a file at a time.
const BLOCK: usize = 256 * 1024;

/// Reads `r` to its end and hands `f` each of its lines as a [`Splitter`] does: memory stays
/// at a block and at most one line's cap however long the input. Returns the bytes read.
pub fn each(mut r: impl Read, mut f: impl FnMut(usize, Piece<'_>)) -> std::io::Result<u64> {
    let mut lines = Splitter::default();
    let mut block = vec![0; BLOCK];
    let mut total = 0u64;
    loop {
        let n = match r.read(&mut block) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        lines.feed(&block[..n], &mut f);
    }
    lines.finish(&mut f);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `input` fed in blocks of `block` bytes to a splitter capped at `max`, as
    /// (number, text or length).
    fn split(input: &[u8], block: usize, max: usize) -> Vec<(usize, Result<String, u64>)> {
        let mut out = Vec::new();
        let mut s = Splitter::with_max(max);
        let mut f = |n: usize, p: Piece<'_>| {
            out.push((
                n,
                match p {
                    Piece::Line(b) => Ok(String::from_utf8_lossy(b).into_owned()),
                    Piece::TooLong(len) => Err(len),
                },
            ))
        };
        for b in input.chunks(block.max(1)) {
            s.feed(b, &mut f);
        }
        s.finish(&mut f);
        out
    }

    fn line(n: usize, s: &str) -> (usize, Result<String, u64>) {
        (n, Ok(s.to_string()))
    }

    /// However the input is cut into blocks, the lines are the same.
    fn every_block_size(input: &[u8], max: usize, want: &[(usize, Result<String, u64>)]) {
        for block in [1, 2, 3, 5, 7, 64, input.len().max(1)] {
            assert_eq!(split(input, block, max), want, "blocks of {block} bytes");
        }
    }

    #[test]
    fn a_line_exactly_at_the_cap_is_kept_and_one_byte_more_is_passed_over() {
        let input = b"12345678\n123456789\nok\n";
        every_block_size(input, 8, &[line(1, "12345678"), (2, Err(9)), line(3, "ok")]);
    }

    #[test]
    fn a_line_far_over_the_cap_is_passed_over_without_being_held() {
        let mut input = b"first\n".to_vec();
        input.extend(vec![b'x'; 1000]);
        input.extend(b"\nlast\n");
        every_block_size(&input, 8, &[line(1, "first"), (2, Err(1000)), line(3, "last")]);
        // Fed a block at a time, the splitter never holds more than the cap.
        let mut s = Splitter::with_max(8);
        for b in input.chunks(7) {
            s.feed(b, &mut |_, _| {});
            assert!(s.held.len() <= 8, "{}", s.held.len());
        }
    }

    #[test]
    fn a_last_line_without_a_newline_is_a_line_even_over_the_cap() {
        every_block_size(b"a\nbc", 8, &[line(1, "a"), line(2, "bc")]);
        every_block_size(b"a\nbcdefghijk", 8, &[line(1, "a"), (2, Err(10))]);
        // Nothing after the last newline: no empty line is made up.
        every_block_size(b"a\n", 8, &[line(1, "a")]);
        every_block_size(b"", 8, &[]);
    }

    #[test]
    fn empty_lines_count_and_crlf_keeps_its_cr_for_the_reader() {
        every_block_size(b"a\r\n\n\r\nb\r\n", 8, &[line(1, "a\r"), line(2, ""), line(3, "\r"), line(4, "b\r")]);
        // The `\r` is a byte of the line: a line at the cap with it is over.
        every_block_size(b"12345678\r\n1234567\r\n", 8, &[(1, Err(9)), line(2, "1234567\r")]);
    }

    #[test]
    fn each_reads_a_file_to_its_end() {
        let mut seen = Vec::new();
        let input = [&b"x".repeat(BLOCK + 3)[..], b"\ntail"].concat();
        let total = each(&input[..], |n, p| {
            seen.push((n, matches!(p, Piece::Line(b) if b.len() == BLOCK + 3 || b == b"tail")))
        })
        .unwrap();
        assert_eq!(total, input.len() as u64);
        assert_eq!(seen, [(1, true), (2, true)]);
    }
}
