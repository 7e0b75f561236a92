//! Learned facts as memory.md keeps them: one line each, the fact's text followed by where it
//! came from, in parentheses — `(step 2)`, `(from run 01K…)`, `artifacts/x.md`. The same fact
//! learned again (in a later step, or by a later run it is carried into) stays one line that
//! lists every source: `alpha rose 3% (step 1, from run A; step 2, from run B)`.
//!
//! Compaction's "Summary of earlier facts" is one line too, whose header counts the facts it
//! stands for and names their sources by run; compacting again folds the earlier summary into
//! the new one instead of summarising a summary.

use std::collections::BTreeSet;

/// The first words of the line compaction writes.
pub const SUMMARY: &str = "Summary of earlier facts";

/// Whether a fact is a compaction summary (this run's or one carried from an earlier run).
pub fn is_summary(fact: &str) -> bool {
    fact.starts_with(SUMMARY)
}

/// The first words of the fact an answer to a run's question becomes (`A person answered
/// "QUESTION": ANSWER (step N)`).
pub const ANSWERED: &str = "A person answered";

/// Whether a fact is a person's answer: it is never dropped — not by the cap on what a
/// follow-up carries, not by compaction — since no run can learn it again on its own.
pub fn is_answer(fact: &str) -> bool {
    fact.starts_with(ANSWERED)
}

/// The facts a follow-up carries, in order: every person's answer, and the newest others, up
/// to `cap` lines in all (at least the last line, the earlier run's outcome).
pub fn capped_keeping_answers(facts: Vec<String>, cap: usize) -> Vec<String> {
    let answers = facts.iter().filter(|f| is_answer(f)).count();
    let others = facts.len() - answers;
    let keep_others = cap.saturating_sub(answers).max(1);
    let mut skip = others.saturating_sub(keep_others);
    facts
        .into_iter()
        .filter(|f| {
            if is_answer(f) || skip == 0 {
                return true;
            }
            skip -= 1;
            false
        })
        .collect()
}

/// A part of a provenance group: `step N`, `from run ID`, `run ID` or an artifact path.
fn is_source_part(p: &str) -> bool {
    let p = p.trim();
    p.starts_with("step ") || p.starts_with("from run ") || p.starts_with("run ") || p.starts_with("artifacts/")
}

/// A fact's text and its sources (one per time it was learned; each a comma-separated list of
/// parts, such as `step 1, from run A`). A trailing run tag (`(from run B)`, added when the fact
/// was carried out of run B) applies to the sources that name no run yet.
pub fn split(fact: &str) -> (String, Vec<String>) {
    let mut text = fact.trim_end();
    let mut groups: Vec<&str> = Vec::new();
    while text.ends_with(')') {
        let Some(open) = text.rfind('(') else { break };
        let inner = &text[open + 1..text.len() - 1];
        if inner.is_empty() || !inner.split([';', ',']).all(is_source_part) {
            break;
        }
        groups.push(inner);
        text = text[..open].trim_end();
    }
    groups.reverse();
    // A group that is only a run tag names the run of the groups before it.
    let mut sources: Vec<String> = Vec::new();
    let mut untagged_from = 0;
    for g in groups {
        let tag = g.trim();
        if let Some(run) = tag.strip_prefix("from run ").filter(|r| !r.contains([',', ';'])) {
            let mut tagged = false;
            for s in sources[untagged_from..].iter_mut() {
                if !s.contains("run ") {
                    s.push_str(&format!(", from run {run}"));
                    tagged = true;
                }
            }
            if !tagged && sources[untagged_from..].is_empty() {
                sources.push(format!("from run {run}"));
            }
            untagged_from = sources.len();
            continue;
        }
        sources.extend(g.split(';').map(|s| s.split(',').map(str::trim).collect::<Vec<_>>().join(", ")));
    }
    (text.to_string(), sources)
}

/// What makes two facts the same: their text, case and spacing aside.
pub fn key(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").trim_end_matches('.').to_lowercase()
}

/// The normal form `dream` compares facts (and `dream --explore` its questions) in: lower case,
/// words only, citations dropped.
pub fn norm(f: &str) -> String {
    let cut = f.find(" (step").or_else(|| f.find(" (from run")).unwrap_or(f.len());
    f[..cut]
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

fn render(text: &str, sources: &[String]) -> String {
    if sources.is_empty() {
        text.to_string()
    } else {
        format!("{text} ({})", sources.join("; "))
    }
}

/// Adds `fact` to `facts`: a fact already there with the same text gains its sources (the line
/// is rewritten listing every one), a new one is appended as written. Summaries are kept as
/// they are.
pub fn add(facts: &mut Vec<String>, fact: String) {
    if is_summary(&fact) {
        facts.push(fact);
        return;
    }
    let (text, sources) = split(&fact);
    let k = key(&text);
    let same = facts.iter().position(|f| !is_summary(f) && key(&split(f).0) == k);
    let Some(i) = same else {
        facts.push(fact);
        return;
    };
    let (kept, mut have) = split(&facts[i]);
    let before = have.len();
    for s in sources {
        if !have.contains(&s) {
            have.push(s);
        }
    }
    if have.len() != before {
        facts[i] = render(&kept, &have);
    }
}

/// The facts with each text once, every source kept, in first-seen order.
pub fn merged(facts: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    for f in facts {
        add(&mut out, f);
    }
    out
}

/// `text` cut to at most `max` characters at a word boundary, with `…` when cut.
pub fn clip_words(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max).collect();
    // The character after the cut: a space means the last word is whole.
    let whole = text.chars().nth(max).is_some_and(char::is_whitespace);
    let cut = if whole { head.as_str() } else { head.rfind(char::is_whitespace).map_or("", |i| &head[..i]) };
    let cut = cut.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '-' | '—'));
    if cut.is_empty() {
        // One word longer than max: nothing whole fits; keep the word's start, marked.
        return head.trim_end().to_string() + "…";
    }
    cut.to_string() + "…"
}

/// The sources a fact cites, each naming its run: `run A step 1`, `run A`, `artifacts/x.md`.
/// Sources that name no run are `current_run`'s.
pub fn sources_of(fact: &str, current_run: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for s in split(fact).1 {
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        let run = parts
            .iter()
            .find_map(|p| p.strip_prefix("from run ").or_else(|| p.strip_prefix("run ")))
            .unwrap_or(current_run);
        let steps: Vec<&str> = parts.iter().filter(|p| p.starts_with("step ")).copied().collect();
        if steps.is_empty() {
            out.insert(format!("run {run}"));
        }
        for step in steps {
            out.insert(format!("run {run} {step}"));
        }
        out.extend(parts.iter().filter(|p| p.starts_with("artifacts/")).map(|p| p.to_string()));
    }
    out
}

/// A compaction summary: how many facts it stands for, their sources and its text.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub sources: BTreeSet<String>,
    pub body: String,
}

const HEADER_END: &str = "): ";

/// Most sources a summary names step by step.
pub const MAX_STEP_SOURCES: usize = 12;

impl Summary {
    /// Reads a summary line (this form, or the earlier `N facts; step 1, …; all in …` one).
    /// A run tag added when it was carried names the run of sources that name none.
    pub fn parse(fact: &str, current_run: &str) -> Summary {
        let rest = fact.strip_prefix(SUMMARY).unwrap_or(fact).trim_start();
        let (header, body) = match rest.strip_prefix('(').and_then(|r| r.split_once(HEADER_END)) {
            Some((h, b)) => (h, b),
            None => ("", rest),
        };
        // A tag carried along after the body: `… (from run B)`.
        let (body, tag_run) = match body.trim_end().strip_suffix(')').and_then(|b| b.rsplit_once(" (from run ")) {
            Some((b, run)) if !run.contains([' ', ',', ';']) => (b.to_string(), run.to_string()),
            _ => (body.trim_end().to_string(), current_run.to_string()),
        };
        let mut s = Summary { body, ..Default::default() };
        for part in header.split("; ") {
            let part = part.trim();
            if part.starts_with("all in ") || part == "no references" {
                continue;
            }
            let (count, refs) = match part.split_once(" facts") {
                Some((n, r)) if n.parse::<usize>().is_ok() => (n.parse().unwrap_or(0), r.trim_start_matches(" from ")),
                _ => (0, part),
            };
            s.count += count;
            for r in refs.split(", ").map(str::trim).filter(|r| !r.is_empty()) {
                let r = r.strip_prefix("from ").unwrap_or(r);
                s.sources.insert(if r.starts_with("step ") { format!("run {tag_run} {r}") } else { r.to_string() });
            }
        }
        s
    }

    /// The one line memory.md keeps. Past [`MAX_STEP_SOURCES`] sources, each run is named once
    /// (its steps are in the facts archive).
    pub fn render(&self) -> String {
        let mut sources = self.sources.clone();
        if sources.len() > MAX_STEP_SOURCES {
            sources = sources
                .into_iter()
                .map(|s| match s.split_once(" step ") {
                    Some((run, _)) if s.starts_with("run ") => run.to_string(),
                    _ => s,
                })
                .collect();
        }
        let from = if sources.is_empty() {
            String::new()
        } else {
            format!(" from {}", sources.into_iter().collect::<Vec<_>>().join(", "))
        };
        format!(
            "{SUMMARY} ({} facts{from}; all in artifacts/facts-archive.md{HEADER_END}{}",
            self.count,
            self.body.trim()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_learned_again_is_one_line_with_every_source() {
        let mut facts = vec!["alpha rose 3% (step 1) (from run A)".to_string(), "beta (step 1)".to_string()];
        add(&mut facts, "Alpha rose  3%. (step 2)".into());
        add(&mut facts, "alpha rose 3% (step 1) (from run A)".into());
        assert_eq!(facts, ["alpha rose 3% (step 1, from run A; step 2)", "beta (step 1)"]);
        // Carried out of run B, then learned again in run C.
        let carried = format!("{} (from run B)", facts[0]);
        let mut next = merged([carried, "alpha rose 3% (step 4)".to_string()]);
        assert_eq!(next, ["alpha rose 3% (step 1, from run A; step 2, from run B; step 4)"]);
        add(&mut next, "text (with a remark) (step 5)".into());
        assert_eq!(split(&next[1]), ("text (with a remark)".to_string(), vec!["step 5".to_string()]));
        let src = sources_of(&next[0], "C");
        assert_eq!(src.into_iter().collect::<Vec<_>>(), ["run A step 1", "run B step 2", "run C step 4"]);
    }

    #[test]
    fn clipping_keeps_whole_words() {
        assert_eq!(clip_words("the quick brown fox", 12), "the quick…");
        assert_eq!(clip_words("the quick brown fox", 9), "the quick…");
        assert_eq!(clip_words("short", 12), "short");
        assert_eq!(clip_words("antidisestablishment", 5), "antid…");
    }

    #[test]
    fn a_summary_reads_back_what_it_wrote() {
        let s = Summary {
            count: 7,
            sources: ["run A step 1", "artifacts/x.md"].iter().map(|s| s.to_string()).collect(),
            body: "a; b".into(),
        };
        let line = s.render();
        assert_eq!(Summary::parse(&line, "Z"), s);
        let carried = Summary::parse(&format!("{line} (from run B)"), "Z");
        assert_eq!(carried, s, "sources already name their run");
        let many =
            Summary { count: 20, sources: (1..=13).map(|i| format!("run A step {i}")).collect(), body: "b".into() };
        assert!(
            many.render().starts_with("Summary of earlier facts (20 facts from run A; all in"),
            "{}",
            many.render()
        );
        let old = Summary::parse(
            "Summary of earlier facts (3 facts; step 2, from run A; all in artifacts/facts-archive.md): x (from run B)",
            "Z",
        );
        assert_eq!(old.count, 3);
        assert_eq!(old.sources.into_iter().collect::<Vec<_>>(), ["run A", "run B step 2"]);
        assert_eq!(old.body, "x");
    }

    #[test]
    fn the_cap_keeps_every_answer_and_the_newest_others() {
        let mut facts: Vec<String> = (1..=30).map(|i| format!("fact {i}")).collect();
        facts.insert(2, "A person answered \"which feed?\": https://example.com/feed (step 1)".into());
        facts.push("Run R ended done: ok".into());
        let kept = capped_keeping_answers(facts, 20);
        assert_eq!(kept.len(), 20);
        assert!(is_answer(&kept[0]), "{kept:?}");
        assert_eq!(kept[1], "fact 13");
        assert_eq!(kept.last().unwrap(), "Run R ended done: ok");
        let answers: Vec<String> = (0..25).map(|i| format!("A person answered \"q{i}\": a")).collect();
        let kept = capped_keeping_answers([answers.clone(), vec!["outcome".into()]].concat(), 20);
        assert_eq!(kept.len(), 26, "every answer and the outcome");
    }
}
