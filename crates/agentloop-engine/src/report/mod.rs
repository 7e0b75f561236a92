//! Run reports: one self-contained HTML page per run (and an index page of runs), read from a
//! workspace's files and never written back into them.
//!
//! Invariants: a report is derived data — it can be rewritten at any time and no program reads
//! it back. Every string that came from a run (goal, model answers, tool output, file names) is
//! untrusted and reaches the page only through [`html::esc`] or as a percent-encoded link that
//! stays under the run's folder; the page carries no script and a Content-Security-Policy that
//! forbids any, so a goal or a tool result cannot inject one. Nothing is fetched from the
//! network: the CSS and the SVG charts are inline.

mod charts;
pub mod html;
mod index;
mod page;
mod since;
pub mod status;

pub use index::{render_index, render_index_with, Row};

use agentloop_types::error::Result;
use agentloop_types::trace::{self, Entry, Event, Phase, Usage};
use agentloop_workspace::workspace::{State, Workspace};

/// Where a page's links go.
#[derive(Debug, Clone, Default)]
pub struct Links {
    /// Prefix that turns a path relative to the run's folder into a link: "" when the page is
    /// written in that folder, "../ws/" beside it, "/runs/ID/" when served.
    pub files: String,
    /// The index of runs, when there is one.
    pub index: Option<String>,
    /// Reload the page every N seconds while the run is going (served pages).
    pub refresh: Option<u32>,
    /// What a running run is doing now, when the page's maker knows (served pages: asking the
    /// model, running a tool, waiting for a worker).
    pub now: Option<String>,
    /// Forms that act on the run (served pages: answer its question, continue it), as HTML put
    /// under the run's status; the page's policy then lets forms post to the server.
    pub actions: Option<String>,
}

/// Everything a run report shows, read from the run's folder.
pub struct Run {
    pub ws: Workspace,
    pub state: State,
    /// The run's trace entries (entries of other runs in a shared trace are left out).
    pub entries: Vec<Entry>,
    /// Trace lines that could not be read (reported on the page).
    pub bad_lines: usize,
    pub memory: String,
    pub plan: String,
    /// What changed since the previous run of its series (the "Since last run" card), when the
    /// page's maker compared it with one ([`agentloop_workspace::runs_diff`]).
    pub since: Option<agentloop_workspace::runs_diff::RunsDiff>,
}

/// One step of the run: what Plan chose, what Act got, what Reflect decided.
pub struct Step<'a> {
    pub n: u32,
    pub frames: Vec<&'a Entry>,
    pub plan: Option<&'a Entry>,
    pub acts: Vec<&'a Entry>,
    pub reflect: Option<&'a Entry>,
    /// Other entries at this step (answers, continues, limit changes, frustration, compaction).
    pub notes: Vec<&'a Entry>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub duration_ms: u64,
}

/// Sums over the run's trace, counted as `trace stats` counts them (run.finished carries the
/// run's totals and is left out).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    pub usage: Usage,
    pub cost_usd: f64,
    pub duration_ms: u64,
}

impl Run {
    /// Reads the run in `ws` (state.json, trace.jsonl, memory.md, plan.md).
    pub fn load(ws: &Workspace) -> Result<Run> {
        let state = ws.load_state()?;
        // Streamed, only this run's entries kept: the trace may hold earlier runs too.
        let (mut entries, mut bad_lines) = (Vec::new(), 0);
        trace::scan(&ws.trace(), |r| match r {
            Ok(e) if e.run_id == state.run_id => entries.push(e),
            Ok(_) => {}
            Err(_) => bad_lines += 1,
        })?;
        let read = |p: camino::Utf8PathBuf| agentloop_io::fs::read_inside(&ws.root, &p).map(Option::unwrap_or_default);
        Ok(Run {
            ws: ws.clone(),
            state,
            entries,
            bad_lines,
            memory: read(ws.memory())?,
            plan: read(ws.plan())?,
            since: None,
        })
    }

    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for e in self.entries.iter().filter(|e| e.event != Event::RunFinished) {
            if let Some(u) = &e.usage {
                t.usage.add(u);
            }
            t.cost_usd += e.cost_usd.unwrap_or(0.0);
            t.duration_ms += e.duration_ms.unwrap_or(0);
        }
        t
    }

    /// The entries the phases wrote (not `run` bookkeeping): one timeline bar each.
    pub fn phase_entries(&self) -> Vec<&Entry> {
        self.entries.iter().filter(|e| e.phase.is_some_and(|p| p != Phase::Run)).collect()
    }

    /// The models that answered, in order of first use.
    pub fn models(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for m in self.entries.iter().filter_map(|e| e.model.as_ref()) {
            if !out.contains(m) {
                out.push(m.clone());
            }
        }
        out
    }

    /// The run's steps in order; step 0 holds the first framing.
    pub fn steps(&self) -> Vec<Step<'_>> {
        let mut steps: std::collections::BTreeMap<u32, Step> = std::collections::BTreeMap::new();
        for e in &self.entries {
            if e.event.is_run_bound() {
                continue;
            }
            let s = steps.entry(e.step).or_insert_with(|| Step {
                n: e.step,
                frames: vec![],
                plan: None,
                acts: vec![],
                reflect: None,
                notes: vec![],
                usage: Usage::default(),
                cost_usd: 0.0,
                duration_ms: 0,
            });
            if let Some(u) = &e.usage {
                s.usage.add(u);
            }
            s.cost_usd += e.cost_usd.unwrap_or(0.0);
            s.duration_ms += e.duration_ms.unwrap_or(0);
            match (e.phase, &e.event) {
                (Some(Phase::Frame), _) => s.frames.push(e),
                (Some(Phase::Plan), _) => s.plan = Some(e),
                (Some(Phase::Act), _) => s.acts.push(e),
                (Some(Phase::Reflect), Event::Reflect) => s.reflect = Some(e),
                _ => s.notes.push(e),
            }
        }
        steps.into_values().collect()
    }

    /// Whether `rel` names an existing file inside the run's folder (only those are linked).
    pub fn has_file(&self, rel: &str) -> bool {
        let p = camino::Utf8Path::new(rel);
        !rel.is_empty()
            && p.is_relative()
            && p.components().all(|c| matches!(c, camino::Utf8Component::Normal(_)))
            && self.ws.root.join(p).is_file()
    }
}

/// The page for one run.
pub fn render(run: &Run, links: &Links) -> String {
    page::render(run, links)
}

/// A path from folder `from` to `to` (both absolute), as a link prefix ending in `/`, or None
/// when there is no relative way (another drive).
pub fn relative_link(from: &camino::Utf8Path, to: &camino::Utf8Path) -> Option<String> {
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let same = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if same == 0 {
        return None;
    }
    let mut out = String::new();
    for _ in same..a.len() {
        out.push_str("../");
    }
    for c in &b[same..] {
        out.push_str(&html::encode_segment(c.as_str()));
        out.push('/');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_links() {
        let p = |s: &str| camino::Utf8PathBuf::from(s);
        assert_eq!(relative_link(&p("/a/b"), &p("/a/b")).as_deref(), Some(""));
        assert_eq!(relative_link(&p("/a/b"), &p("/a/b/runs/X")).as_deref(), Some("runs/X/"));
        assert_eq!(relative_link(&p("/a/out"), &p("/a/b c")).as_deref(), Some("../b%20c/"));
    }
}
