//! Live model output while a call is under way (`llm.stream`): each
//! piece of the answer becomes a `model.delta` entry on the `--events` stream and grows the
//! progress line on a terminal. Pieces are never written to trace.jsonl or the transcript:
//! those keep the one whole answer per call, exactly as without streaming.

use agentloop_io::output::Printer;
use agentloop_model::model::Delta;
use agentloop_types::trace::{Entry, Event, Phase};
use serde_json::json;

/// Characters of one call shown on the progress line; the rest is elided (the events carry all).
const SHOWN: usize = 2000;

pub struct Live {
    printer: Printer,
    events: bool,
    run_id: String,
    step: u32,
    phase: Phase,
    attempt: u32,
    /// Characters put on the progress line so far (0: the line is not open).
    shown: usize,
}

impl Live {
    pub fn new(printer: Printer, events: bool, run_id: &str, step: u32, phase: &str, attempt: u32) -> Self {
        // Memory compaction ("compact") is part of Reflect.
        let phase = phase.parse::<Phase>().unwrap_or(Phase::Reflect);
        Live { printer, events, run_id: run_id.to_string(), step, phase, attempt, shown: 0 }
    }

    /// The `model.delta` entry for a piece (what `--events` prints).
    pub fn entry(&self, d: &Delta) -> Entry {
        let mut e = Entry::new(&self.run_id, self.step, self.phase, Event::ModelDelta);
        e.attempt = Some(self.attempt);
        e.data = Some(match d {
            Delta::Text(t) => json!({"text": t}),
            Delta::ToolArguments { index, id, name, fragment } => {
                json!({"tool": name, "call_id": id, "index": index, "arguments": fragment})
            }
        });
        e
    }

    pub fn delta(&mut self, d: &Delta) {
        if self.events {
            self.printer.outln(&self.entry(d).to_line());
        }
        if !self.printer.progress || self.shown > SHOWN {
            return;
        }
        let piece = match d {
            Delta::Text(t) => t.as_str(),
            Delta::ToolArguments { fragment, .. } => fragment.as_str(),
        };
        if self.shown == 0 {
            self.printer.progress_piece(&format!("[step {}] {:<7} ▸ ", self.step, self.phase.as_str()));
        }
        let mut text = terminal_safe(piece);
        let room = SHOWN + 1 - self.shown;
        if text.chars().count() > room {
            text = text.chars().take(room).collect::<String>() + " …";
        }
        self.shown += text.chars().count().max(1);
        self.printer.progress_piece(&text);
    }

    /// Ends the progress line, if one was started.
    pub fn end(&mut self) {
        if self.shown > 0 {
            self.printer.progress_piece("\n");
            self.shown = 0;
        }
    }
}

/// A piece fit for one terminal line: line breaks and tabs become spaces, and other control
/// characters (escape sequences a model could print) are dropped.
pub fn terminal_safe(s: &str) -> String {
    s.chars()
        .filter_map(|c| match c {
            '\n' | '\r' | '\t' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn terminal_safe_drops_escapes() {
        assert_eq!(super::terminal_safe("a\nb\x1b[31mc\td"), "a b[31mc d");
    }
}
