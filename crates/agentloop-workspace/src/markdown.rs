//! The parseable forms of memory.md and plan.md.
//!
//! People and models read these files; the program reads back only what it must, in one
//! documented form each:
//! - memory.md: `## ` sections; the Definition of Done is a list of `- [ ] item` / `- [x] item`,
//!   an item optionally followed by one indented `evidence: step 2, artifacts/notes.md` line (the
//!   steps and workspace files that show it; Reflect writes it when it ticks the item).
//! - plan.md: the Next Action is one fenced block opened by ```` ```json next-action ```` holding
//!   `{"tool": NAME, "args": {...}}`.
//!
//! A human edit that breaks either form is an error naming the file, the line and the fix.

use agentloop_types::error::{Error, Result};
use camino::Utf8Path;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::evidence::Evidence;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Item {
    pub done: bool,
    pub text: String,
    /// What shows a Definition-of-Done item is met (empty for open items and plan outlines).
    #[serde(default)]
    pub evidence: Evidence,
}

impl Item {
    pub fn open(text: impl Into<String>) -> Self {
        Item { done: false, text: text.into(), evidence: Evidence::default() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Memory {
    pub goal: String,
    pub dod: Vec<Item>,
    pub constraints: Vec<String>,
    pub assumptions: Vec<String>,
    pub hypothesis: String,
    pub facts: Vec<String>,
    pub status: String,
    pub open_question: Option<String>,
    pub log: Vec<String>,
    /// Sections a person added under other headings, kept as written.
    #[serde(default)]
    pub extra: Vec<Extra>,
}

/// A `## ` section the program does not own; re-rendered verbatim after the known ones.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Extra {
    pub heading: String,
    pub body: String,
}

fn extra(s: &Section) -> Extra {
    Extra { heading: s.title.clone(), body: s.lines.join("\n").trim_end().to_string() }
}

impl Memory {
    pub fn open_items(&self) -> Vec<String> {
        self.dod.iter().filter(|i| !i.done).map(|i| i.text.clone()).collect()
    }
    /// The open items as plan.md's risk and a held `finish` name them: `"a", "b"`.
    pub fn open_items_quoted(&self) -> String {
        self.open_items().iter().map(|i| format!("\"{i}\"")).collect::<Vec<_>>().join(", ")
    }
    pub fn all_done(&self) -> bool {
        !self.dod.is_empty() && self.dod.iter().all(|i| i.done)
    }
}

/// A `## ` section: heading, first line number (1-based, of the line after the heading), lines.
struct Section<'a> {
    heading: String,
    title: String,
    first_line: usize,
    lines: Vec<&'a str>,
}

/// Splits a document at its `## ` headings. A heading inside a fenced code block (``` or ~~~)
/// is text, not a section: a person's section quoting markdown cannot overwrite the goal.
fn sections(text: &str) -> Vec<Section<'_>> {
    let mut out: Vec<Section> = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        let run = |c: char| t.chars().take_while(|x| *x == c).count();
        let opener =
            if indent <= 3 { [('`', run('`')), ('~', run('~'))].into_iter().find(|(_, n)| *n >= 3) } else { None };
        match (fence, opener) {
            (None, Some(f)) => fence = Some(f),
            (Some((c, n)), Some((c2, n2))) if c == c2 && n2 >= n && t.trim_end().chars().all(|x| x == c) => {
                fence = None
            }
            _ => {}
        }
        let in_fence = fence.is_some() || opener.is_some();
        if let (false, Some(h)) = (in_fence, line.strip_prefix("## ")) {
            out.push(Section {
                heading: h.trim().to_lowercase(),
                title: h.trim().to_string(),
                first_line: i + 2,
                lines: vec![],
            });
        } else if let Some(s) = out.last_mut() {
            s.lines.push(line);
        }
    }
    out
}

fn is_placeholder(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('(') && t.ends_with(')')
}

/// A list section's items. An item's later lines are indented (`md_text::bullet` writes them
/// so) and read back as part of it, blank lines between them kept; an indented line that is a
/// list item itself (a person's nested list: `md_text` never writes one) is an item of its own.
fn bullets(s: &Section) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let (mut open, mut blanks) = (false, 0);
    for line in s.lines.iter().map(|l| l.trim_end()) {
        let t = line.trim_start();
        if t.is_empty() {
            blanks += 1;
            continue;
        }
        let marker = t.strip_prefix("- ").or_else(|| t.strip_prefix("* "));
        let indented = t.len() < line.len();
        match out.last_mut() {
            Some(item) if open && indented && marker.is_none() => {
                item.push_str(&"\n".repeat(blanks + 1));
                item.push_str(&crate::md_text::unescape(line.strip_prefix("  ").unwrap_or(t)));
            }
            _ if is_placeholder(t) => open = false,
            _ => {
                out.push(crate::md_text::unescape(marker.unwrap_or(t).trim()));
                open = true;
            }
        }
        blanks = 0;
    }
    out
}

/// A prose section's text, as `md_text::prose` wrote it read back.
fn prose(s: &Section) -> String {
    let text = s.lines.join("\n").trim().to_string();
    if is_placeholder(&text) {
        String::new()
    } else {
        crate::md_text::unprose(&text)
    }
}

/// Parses a checkbox line: `- [ ] text`, `- [x] text`, optionally numbered `1. [x] text`.
fn checkbox(line: &str) -> Option<Item> {
    let t = line.trim();
    let rest = t
        .strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .or_else(|| t.split_once(". ").filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit())).map(|(_, r)| r))?;
    let (done, text) = if let Some(r) = rest.strip_prefix("[ ]") {
        (false, r)
    } else if let Some(r) = rest.strip_prefix("[x]").or_else(|| rest.strip_prefix("[X]")) {
        (true, r)
    } else {
        return None;
    };
    Some(Item { done, text: text.trim().to_string(), evidence: Evidence::default() })
}

/// An item's evidence line: indented, `evidence: ...`.
fn evidence_line(line: &str) -> Option<Evidence> {
    let t = line.trim_start();
    if t.len() == line.len() {
        return None;
    }
    t.strip_prefix("evidence:").map(Evidence::parse)
}

pub fn parse_memory(text: &str, path: &Utf8Path) -> Result<Memory> {
    let mut m = Memory::default();
    let mut saw_dod = false;
    for s in sections(text) {
        match s.heading.as_str() {
            "goal" => m.goal = prose(&s),
            "definition of done" => {
                saw_dod = true;
                for (k, line) in s.lines.iter().enumerate() {
                    if line.trim().is_empty() || is_placeholder(line) {
                        continue;
                    }
                    if let (Some(e), Some(item)) = (evidence_line(line), m.dod.last_mut()) {
                        item.evidence = e;
                        continue;
                    }
                    match checkbox(line) {
                        Some(item) => m.dod.push(item),
                        None => {
                            return Err(Error::data(format!(
                                "{path}:{}: Definition of Done item is not a checkbox: `{}`",
                                s.first_line + k,
                                line.trim()
                            ))
                            .with_hint("write each item as `- [ ] text` (open) or `- [x] text` (done), optionally followed by an indented `evidence: step N, artifacts/file` line"))
                        }
                    }
                }
            }
            "constraints" => m.constraints = bullets(&s),
            "assumptions and unknowns" => m.assumptions = bullets(&s),
            "hypothesis" => m.hypothesis = prose(&s),
            "learned facts" => m.facts = bullets(&s),
            "status" => m.status = prose(&s),
            "open question" => m.open_question = Some(prose(&s)).filter(|q| !q.is_empty()),
            "decision log" => m.log = bullets(&s),
            _ => m.extra.push(extra(&s)),
        }
    }
    if !saw_dod {
        return Err(Error::data(format!("{path}: no `## Definition of Done` section")).with_hint(
            "restore the heading `## Definition of Done` followed by `- [ ] item` lines, or run `agentloop frame`",
        ));
    }
    Ok(m)
}

/// One call of one tool: the binding part of plan.md.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NextAction {
    pub tool: String,
    #[serde(default = "empty_object")]
    pub args: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Plan {
    pub outline: Vec<Item>,
    pub next_step: Option<u32>,
    pub next_action: Option<NextAction>,
    pub expected: String,
    pub risk: String,
    pub rationale: String,
    pub completed: Vec<String>,
    #[serde(default)]
    pub extra: Vec<Extra>,
}

pub const FENCE: &str = "```json next-action";

pub fn parse_plan(text: &str, path: &Utf8Path) -> Result<Plan> {
    let mut p = Plan::default();
    for s in sections(text) {
        match s.heading.as_str() {
            "outline" => {
                p.outline =
                    s.lines
                        .iter()
                        .filter(|l| !l.trim().is_empty() && !is_placeholder(l))
                        .map(|l| {
                            checkbox(l).unwrap_or_else(|| {
                                Item::open(l.trim().trim_start_matches(|c: char| {
                                    c.is_ascii_digit() || c == '.' || c == '-' || c == ' '
                                }))
                            })
                        })
                        .collect()
            }
            "next action" => {
                let (step, action) = parse_next_action(&s, path)?;
                p.next_step = step;
                p.next_action = action;
            }
            "expected outcome" => p.expected = prose(&s),
            "risk" => p.risk = prose(&s),
            "rationale" => p.rationale = prose(&s),
            "completed steps" => p.completed = bullets(&s),
            _ => p.extra.push(extra(&s)),
        }
    }
    Ok(p)
}

fn parse_next_action(s: &Section, path: &Utf8Path) -> Result<(Option<u32>, Option<NextAction>)> {
    let step = s.lines.iter().find_map(|l| {
        let rest = l.trim().strip_prefix("Step ")?;
        rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    });
    let Some(open) = s.lines.iter().position(|l| l.trim_start().starts_with("```")) else {
        return Ok((step, None));
    };
    let open_line = s.first_line + open;
    let fix = format!("the Next Action must be one block opened by `{FENCE}` and closed by ``` holding {{\"tool\": \"NAME\", \"args\": {{...}}}}");
    if s.lines[open].trim() != FENCE {
        return Err(Error::data(format!(
            "{path}:{open_line}: the Next Action block opens with `{}`, expected `{FENCE}`",
            s.lines[open].trim()
        ))
        .with_hint(fix));
    }
    let Some(close) = s.lines[open + 1..].iter().position(|l| l.trim() == "```") else {
        return Err(Error::data(format!("{path}:{open_line}: the Next Action block is not closed")).with_hint(fix));
    };
    // A second block is ambiguous: which one is binding? Say where both are.
    if let Some(second) = s.lines[open + 2 + close..].iter().position(|l| l.trim() == FENCE) {
        let second_line = open_line + 2 + close + second;
        return Err(Error::data(format!(
            "{path}:{open_line} and {path}:{second_line}: plan.md holds two Next Action blocks; only one is binding"
        ))
        .with_hint("delete one of the two blocks (keep the action you want `act` to run)"));
    }
    let body = s.lines[open + 1..open + 1 + close].join("\n");
    let action: NextAction = serde_json::from_str(&body).map_err(|e| {
        let line = open_line + e.line().max(1);
        Error::data(format!("{path}:{line}: the Next Action is not valid")).with_hint(fix.clone()).with_source(e)
    })?;
    if action.tool.trim().is_empty() {
        return Err(Error::data(format!("{path}:{open_line}: the Next Action has an empty \"tool\"")).with_hint(fix));
    }
    if !action.args.is_object() {
        return Err(
            Error::data(format!("{path}:{open_line}: the Next Action's \"args\" must be a JSON object")).with_hint(fix)
        );
    }
    Ok((step, Some(action)))
}

/// Template view of a plan (the action rendered as pretty JSON for the fenced block).
pub fn plan_view(p: &Plan) -> Value {
    let next = match (&p.next_action, p.next_step) {
        (Some(a), step) => serde_json::json!({
            "step": step.unwrap_or(0),
            "json": agentloop_types::json::to_string_pretty(a),
        }),
        _ => Value::Null,
    };
    serde_json::json!({
        "outline": p.outline,
        "next_action": next,
        "expected": p.expected,
        "risk": p.risk,
        "rationale": p.rationale,
        "completed": p.completed,
        "extra": p.extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkbox_forms() {
        assert_eq!(checkbox("- [x] a").unwrap(), Item { done: true, text: "a".into(), ..Default::default() });
        assert_eq!(checkbox("2. [ ] b").unwrap(), Item::open("b"));
        assert!(checkbox("- b").is_none());
    }

    #[test]
    fn broken_block_names_line() {
        let text = "# Plan\n\n## Next Action\nStep 1.\n\n```json next-action\n{\"tool\": \"x\", \n```\n";
        let e = parse_plan(text, Utf8Path::new("plan.md")).unwrap_err();
        assert!(e.message.starts_with("plan.md:"), "{}", e.message);
    }
}

#[cfg(test)]
mod fence_tests {
    #[test]
    fn a_heading_in_a_code_fence_is_text() {
        let text = "## Goal\nthe real goal\n\n## Definition of Done\n- [ ] a\n\n## Notes\n```markdown\n## Goal\nnot the goal\n```\n~~~~\n## Status\n~~~\n~~~~\n";
        let m = super::parse_memory(text, camino::Utf8Path::new("memory.md")).unwrap();
        assert_eq!(m.goal, "the real goal");
        assert_eq!(m.status, "");
    }
}

#[cfg(test)]
mod round_trip_tests {
    use super::*;

    /// memory.md and plan.md rendered by the bundled templates parse back to what was rendered.
    #[test]
    fn memory_and_plan_render_then_parse_to_the_same_values() {
        let tpl = crate::prompt::Templates::load(None).unwrap();
        let mem = Memory {
            goal: "Critique the essay".into(),
            dod: vec![
                Item {
                    done: true,
                    text: "read it".into(),
                    evidence: Evidence { steps: vec![1, 3], artifacts: vec!["artifacts/essay.md".into()] },
                },
                Item { done: true, text: "cite it".into(), evidence: Evidence { steps: vec![2], artifacts: vec![] } },
                Item::open("write two paragraphs"),
            ],
            constraints: vec!["two paragraphs".into()],
            assumptions: vec!["the essay is in English".into()],
            hypothesis: "the argument rests on one anecdote".into(),
            facts: vec!["the essay has 900 words (step 1)".into()],
            status: "step 1 done".into(),
            open_question: Some("Which audience?".into()),
            log: vec!["step 1 reflect: continue".into()],
            extra: vec![Extra { heading: "Notes from a person".into(), body: "Keep it kind.".into() }],
        };
        let text = tpl.render("memory.md.j2", &mem).unwrap();
        assert_eq!(parse_memory(&text, Utf8Path::new("memory.md")).unwrap(), mem, "{text}");
        let plan = Plan {
            outline: vec![Item { done: true, text: "read".into(), ..Default::default() }, Item::open("write")],
            next_step: Some(2),
            next_action: Some(NextAction {
                tool: "file_write".into(),
                args: serde_json::json!({"path": "a.md", "content": "x"}),
            }),
            expected: "the critique".into(),
            risk: "low".into(),
            rationale: "the essay is read".into(),
            completed: vec!["step 1: file_read ok — the essay".into()],
            ..Default::default()
        };
        let text = tpl.render("plan.md.j2", plan_view(&plan)).unwrap();
        assert_eq!(parse_plan(&text, Utf8Path::new("plan.md")).unwrap(), plan, "{text}");
    }

    /// A model's or a person's text over several lines, headings, lists and fences in it, stays
    /// in its item or section and reads back whole.
    #[test]
    fn text_with_structure_in_it_stays_one_value() {
        let tpl = crate::prompt::Templates::load(None).unwrap();
        let many = "Digest written\n## Example News (2026-03-01)\n- item one\n\n```\n1. first\n\\back\n#tag";
        let mem = Memory {
            goal: "Today's digest\n# not a title".into(),
            dod: vec![Item::open("digest written")],
            constraints: vec![many.into()],
            hypothesis: many.into(),
            facts: vec![
                format!("Run A (g) ended done: {many}"),
                "A person answered \"Q\": yes\nand no (step 2)".into(),
            ],
            status: many.into(),
            open_question: Some(many.into()),
            log: vec![many.into(), "step 2 reflect: done".into()],
            ..Default::default()
        };
        let text = tpl.render("memory.md.j2", &mem).unwrap();
        let headings: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
        assert_eq!(
            headings,
            [
                "# Memory",
                "## Goal",
                "## Definition of Done",
                "## Constraints",
                "## Assumptions and Unknowns",
                "## Hypothesis",
                "## Learned Facts",
                "## Status",
                "## Open Question",
                "## Decision Log"
            ],
            "{text}"
        );
        assert_eq!(parse_memory(&text, Utf8Path::new("memory.md")).unwrap(), mem, "{text}");
        let plan =
            Plan { expected: many.into(), risk: many.into(), completed: vec![many.into()], ..Default::default() };
        let text = tpl.render("plan.md.j2", plan_view(&plan)).unwrap();
        assert_eq!(parse_plan(&text, Utf8Path::new("plan.md")).unwrap(), plan, "{text}");
    }

    /// A person's nested list is read as items, as before.
    #[test]
    fn a_nested_list_is_items_of_its_own() {
        let text = "## Definition of Done\n- [ ] a\n\n## Constraints\n- one\n  - two\n  more of two\n";
        let m = parse_memory(text, Utf8Path::new("memory.md")).unwrap();
        assert_eq!(m.constraints, ["one", "two\nmore of two"]);
    }
}
