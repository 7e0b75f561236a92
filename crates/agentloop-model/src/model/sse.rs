//! Server-sent events (`text/event-stream`), read one event at a time from a response body.
//!
//! Follows the WHATWG event-stream rules: lines end with LF, CRLF or CR; a line starting with
//! `:` is a comment (servers send `: ping` to keep a connection open) and is skipped; `field:
//! value` loses one space after the colon; `data` lines are joined with `\n`; `event` names the
//! event; `id` and `retry` are read and ignored; a blank line ends the event, and an event
//! without data is dropped. Unlike a browser, an event left open when the body ends is still
//! delivered, because some servers close the stream right after their last `data:` line.
//! Malformed input never panics: invalid UTF-8 is replaced, and a line longer than the cap is an
//! error.

use std::io::BufRead;

/// One event: its name (empty when the server sent no `event:` line) and its data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    pub event: String,
    pub data: String,
}

pub struct Reader<'a> {
    inner: &'a mut dyn BufRead,
    buf: Vec<u8>,
    /// Lines split off a CR-only chunk, not yet read.
    pending: std::collections::VecDeque<String>,
    first: bool,
    max_line: usize,
}

impl<'a> Reader<'a> {
    pub fn new(inner: &'a mut dyn BufRead, max_line: usize) -> Self {
        Reader { inner, buf: Vec::new(), pending: Default::default(), first: true, max_line }
    }

    /// The next line without its ending, or None at the end of the body.
    fn line(&mut self) -> std::io::Result<Option<String>> {
        if let Some(l) = self.pending.pop_front() {
            return Ok(Some(l));
        }
        self.buf.clear();
        let inner: &mut dyn BufRead = &mut *self.inner;
        let n = std::io::Read::take(inner, self.max_line as u64 + 1).read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        if self.buf.len() > self.max_line {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("an event-stream line is longer than {} bytes", self.max_line),
            ));
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        }
        let mut text = String::from_utf8_lossy(&self.buf).into_owned();
        if self.first {
            self.first = false;
            if let Some(rest) = text.strip_prefix('\u{feff}') {
                text = rest.to_string();
            }
        }
        // A lone CR also ends a line.
        let mut parts = text.split('\r').map(String::from);
        let head = parts.next().unwrap_or_default();
        self.pending.extend(parts);
        Ok(Some(head))
    }

    /// The next event with data, or None when the body has ended.
    pub fn next_event(&mut self) -> std::io::Result<Option<Event>> {
        let mut event = String::new();
        let mut data: Option<String> = None;
        loop {
            let Some(line) = self.line()? else {
                return Ok(data.map(|data| Event { event, data }));
            };
            if line.is_empty() {
                match data.take() {
                    Some(data) => return Ok(Some(Event { event, data })),
                    None => {
                        event.clear();
                        continue;
                    }
                }
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line.as_str(), ""),
            };
            match field {
                "data" => match data.as_mut() {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_string()),
                },
                "event" => event = value.to_string(),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<Event> {
        let mut bytes = text.as_bytes();
        let mut r = Reader::new(&mut bytes, 1000);
        let mut out = Vec::new();
        while let Some(e) = r.next_event().unwrap() {
            out.push(e);
        }
        out
    }

    fn ev(event: &str, data: &str) -> Event {
        Event { event: event.into(), data: data.into() }
    }

    #[test]
    fn comments_event_names_multiline_data_and_line_endings() {
        let text = ": ping\n\nevent: message_start\ndata: {\"a\":1}\n\n: keep-alive\r\ndata: one\r\ndata:two\r\n\r\ndata: x\rdata: y\r\revent: e\nid: 7\nretry: 10\ndata\n\n";
        assert_eq!(all(text), vec![ev("message_start", "{\"a\":1}"), ev("", "one\ntwo"), ev("", "x\ny"), ev("e", "")]);
    }

    #[test]
    fn an_open_event_at_the_end_is_delivered_and_empty_events_are_dropped() {
        assert_eq!(all("event: ping\n\ndata: [DONE]"), vec![ev("", "[DONE]")]);
        assert_eq!(all("\u{feff}data: a\n\n\n\n"), vec![ev("", "a")]);
        assert_eq!(all(""), vec![]);
    }

    #[test]
    fn malformed_input_is_an_error_or_replaced_never_a_panic() {
        let long = format!("data: {}\n\n", "x".repeat(2000));
        let mut bytes = long.as_bytes();
        assert!(Reader::new(&mut bytes, 1000).next_event().is_err());
        let mut bad: &[u8] = b"data: \xff\xfe\n\n";
        assert_eq!(Reader::new(&mut bad, 1000).next_event().unwrap().unwrap().data, "\u{fffd}\u{fffd}");
    }
}
