//! Done backed by evidence: Reflect ticks a Definition-of-Done item only when what the tick
//! cites checks out against the run's own record.
//!
//! A tick cites steps (the actions that showed the item) and/or files (relative to the
//! workspace). Each step must be an Act step of this run whose action succeeded (its result is
//! `ok`: an error never counts, a held `finish` included); each file must lie inside the
//! workspace (no `..`, no absolute path, no link leading out), exist, and have been written or
//! read by one of this run's successful actions (the action's `path` argument or an artifact it
//! reported). A tick citing nothing is refused too. [`check`] is the decision, a pure
//! function; [`Footprint::read`] gathers this run's record from trace.jsonl, which the model cannot
//! write (it is part of the paper trail).

use agentloop_types::error::Result;
use agentloop_types::tool_spec::ToolStatus;
use agentloop_types::trace::{Entry, Event, Phase};
use camino::{Utf8Component, Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The evidence for a ticked item: the steps of the run whose actions showed it and the
/// workspace files (relative paths) that show it. In memory.md, one line under the item:
/// `  evidence: step 2, step 3, artifacts/notes.md` (a part that is not `step N` is a path).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct Evidence {
    /// Steps of the run whose actions showed the item
    #[serde(default)]
    pub steps: Vec<u32>,
    /// Workspace files, relative to the workspace, written or read during the run
    #[serde(default)]
    pub artifacts: Vec<String>,
}

impl Evidence {
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.artifacts.is_empty()
    }

    /// The citation as memory.md writes it: `step 2, artifacts/notes.md`.
    pub fn line(&self) -> String {
        let steps = self.steps.iter().map(|s| format!("step {s}"));
        steps.chain(self.artifacts.iter().cloned()).collect::<Vec<_>>().join(", ")
    }

    /// Reads [`Evidence::line`] back.
    pub fn parse(line: &str) -> Self {
        let mut e = Evidence::default();
        for part in line.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.strip_prefix("step ").and_then(|n| n.trim().parse().ok()) {
                Some(n) => e.steps.push(n),
                None => e.artifacts.push(part.to_string()),
            }
        }
        e
    }
}

/// What this run did, as its trace records it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Footprint {
    /// Each Act step of the run and whether its action succeeded (its latest act entry).
    pub steps: BTreeMap<u32, bool>,
    /// Workspace-relative paths written or read by the run's successful actions.
    pub touched: BTreeSet<String>,
}

impl Footprint {
    /// This run's record from its trace entries (other runs' entries are ignored).
    pub fn of<'a>(entries: impl IntoIterator<Item = &'a Entry>, run_id: &str) -> Self {
        let mut r = Footprint::default();
        for e in
            entries.into_iter().filter(|e| e.run_id == run_id && e.phase == Some(Phase::Act) && e.event == Event::Act)
        {
            // Only a result of `ok` is evidence. A step whose result is an error showed nothing,
            // whatever it was: a `finish` held while items were open (`data.finish_held`) ran
            // nothing and wrote nothing, so it cannot show the items it was held for.
            let ok = !e.is_error() && e.status() == Some(ToolStatus::Ok);
            r.steps.insert(e.step, ok);
            // The files `finish` lists are a claim about the run, not files it wrote or read.
            if !ok || agentloop_types::tool_spec::is_finish(e.tool.as_deref().unwrap_or("")) {
                continue;
            }
            let path = e.args.as_ref().and_then(|a| a.get("path")).and_then(|p| p.as_str());
            r.touched.extend(path.into_iter().chain(e.artifacts.iter().map(String::as_str)).filter_map(normal));
        }
        r
    }

    /// This run's record from the workspace's trace.jsonl (corrupt lines are skipped).
    pub fn read(trace: &Utf8Path, run_id: &str) -> Result<Self> {
        let mut entries = Vec::new();
        agentloop_types::trace::scan(trace, |e| {
            if let Ok(e) = e {
                if e.run_id == run_id && e.phase == Some(Phase::Act) {
                    entries.push(e);
                }
            }
        })?;
        Ok(Footprint::of(&entries, run_id))
    }
}

/// A workspace-relative path in one spelling (`./a//b.md` is `a/b.md`); None for an absolute
/// path, one with `..`, or an empty one.
pub fn normal(p: &str) -> Option<String> {
    let mut out = Utf8PathBuf::new();
    for c in Utf8Path::new(p.trim()).components() {
        match c {
            Utf8Component::Normal(n) => out.push(n),
            Utf8Component::CurDir => {}
            _ => return None,
        }
    }
    (!out.as_str().is_empty()).then(|| out.into_string())
}

/// What the filesystem says of a cited file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileCheck {
    Present,
    Missing,
    /// Reached through a link that leads out of the workspace.
    Outside,
}

/// The filesystem check of a cited (normalised) path inside `root`.
pub fn file_check(root: &Utf8Path, rel: &str) -> FileCheck {
    let path = root.join(rel);
    if agentloop_io::fs::leads_outside(root, &path) {
        FileCheck::Outside
    } else if std::fs::metadata(&path).is_ok() {
        FileCheck::Present
    } else {
        FileCheck::Missing
    }
}

/// The decision: what a tick cited, as evidence (paths normalised) when every citation checks
/// out, or why not, one reason per failed citation.
pub fn check(
    cited: &Evidence,
    record: &Footprint,
    file: impl Fn(&str) -> FileCheck,
) -> std::result::Result<Evidence, Vec<String>> {
    if cited.steps.is_empty() && cited.artifacts.iter().all(|a| a.trim().is_empty()) {
        return Err(vec![
            "no evidence: cite the step whose action showed it (`steps`) and/or a file this run wrote or read (`artifacts`)"
                .into(),
        ]);
    }
    let mut why = Vec::new();
    let mut ev = Evidence::default();
    for &s in &cited.steps {
        match record.steps.get(&s) {
            None => why.push(format!("step {s} is not a step of this run that ran an action")),
            Some(false) => why.push(format!("step {s}'s action failed")),
            Some(true) if !ev.steps.contains(&s) => ev.steps.push(s),
            Some(true) => {}
        }
    }
    for a in cited.artifacts.iter().map(|a| a.trim()).filter(|a| !a.is_empty()) {
        let Some(p) = normal(a) else {
            why.push(format!("`{a}` is outside the workspace"));
            continue;
        };
        match file(&p) {
            FileCheck::Outside => why.push(format!("`{a}` leads outside the workspace")),
            FileCheck::Missing => why.push(format!("`{a}` does not exist in the workspace")),
            FileCheck::Present if !record.touched.contains(&p) => {
                why.push(format!("`{a}` was not written or read by an action of this run"))
            }
            FileCheck::Present if !ev.artifacts.contains(&p) => ev.artifacts.push(p),
            FileCheck::Present => {}
        }
    }
    if why.is_empty() {
        Ok(ev)
    } else {
        Err(why)
    }
}

/// A refused tick, for the trace, decisions.md and the next prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub item: u32,
    pub text: String,
    /// What the tick cited.
    pub cited: Evidence,
    pub reasons: Vec<String>,
}

impl Refusal {
    /// One line: `item 2 (write the note): step 9 is not a step of this run ...`.
    pub fn line(&self) -> String {
        format!("item {} ({}): {}", self.item, self.text, self.reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Footprint {
        let mut r = Footprint::default();
        r.steps.insert(1, true);
        r.steps.insert(2, false);
        r.touched.insert("notes.txt".into());
        r.touched.insert("artifacts/n.md".into());
        r
    }

    fn tick(steps: &[u32], artifacts: &[&str]) -> Evidence {
        Evidence { steps: steps.to_vec(), artifacts: artifacts.iter().map(|s| s.to_string()).collect() }
    }

    fn fs(p: &str) -> FileCheck {
        match p {
            "linked.md" => FileCheck::Outside,
            "gone.md" => FileCheck::Missing,
            _ => FileCheck::Present,
        }
    }

    #[test]
    fn real_steps_and_files_are_evidence() {
        let ev = check(&tick(&[1, 1], &["./artifacts//n.md", "notes.txt"]), &record(), fs).unwrap();
        assert_eq!(ev, Evidence { steps: vec![1], artifacts: vec!["artifacts/n.md".into(), "notes.txt".into()] });
    }

    #[test]
    fn every_bad_citation_is_named() {
        let why = check(&tick(&[2, 7], &["../x", "/etc/passwd", "linked.md", "gone.md", "other.md"]), &record(), fs)
            .unwrap_err();
        assert_eq!(
            why,
            [
                "step 2's action failed",
                "step 7 is not a step of this run that ran an action",
                "`../x` is outside the workspace",
                "`/etc/passwd` is outside the workspace",
                "`linked.md` leads outside the workspace",
                "`gone.md` does not exist in the workspace",
                "`other.md` was not written or read by an action of this run",
            ]
        );
    }

    #[test]
    fn a_tick_without_evidence_is_refused() {
        let why = check(&tick(&[], &[" "]), &record(), fs).unwrap_err();
        assert!(why[0].starts_with("no evidence"), "{why:?}");
    }

    #[test]
    fn only_this_runs_successful_actions_count() {
        let act = |run: &str, step: u32, status: ToolStatus, path: &str| {
            let mut e = Entry::new(run, step, Phase::Act, Event::Act);
            e.result_status = Some(status.into());
            e.args = Some(serde_json::json!({"path": path}));
            e
        };
        let entries = [
            act("r1", 1, ToolStatus::Ok, "./a.md"),
            act("r0", 2, ToolStatus::Ok, "b.md"),
            act("r1", 3, ToolStatus::Error, "c.md"),
            act("r1", 4, ToolStatus::Ok, "/etc/x"),
        ];
        let r = Footprint::of(&entries, "r1");
        assert_eq!(r.steps, BTreeMap::from([(1, true), (3, false), (4, true)]));
        assert_eq!(r.touched, BTreeSet::from(["a.md".to_string()]));
    }

    /// A `finish` held while items were open is an error that ran nothing: citing it is refused.
    #[test]
    fn a_held_finish_is_no_evidence() {
        let mut fin = Entry::new("r1", 1, Phase::Act, Event::Act);
        fin.tool = Some("finish".into());
        fin.result_status = Some(ToolStatus::Error.into());
        fin.error = Some("`finish` refused".into());
        fin.data = Some(serde_json::json!({"finish_held": true}));
        let r = Footprint::of(&[fin], "r1");
        assert_eq!(r.steps, BTreeMap::from([(1, false)]));
        assert_eq!(check(&tick(&[1], &[]), &r, fs).unwrap_err(), ["step 1's action failed"]);
    }

    /// `finish` lists files; it neither wrote nor read them, so its list is no evidence.
    #[test]
    fn a_file_finish_merely_lists_is_no_evidence() {
        let mut fin = Entry::new("r1", 2, Phase::Act, Event::Act);
        fin.tool = Some("submit_response".into());
        fin.result_status = Some(ToolStatus::Ok.into());
        fin.artifacts = vec!["context.md".into()];
        let r = Footprint::of(&[fin], "r1");
        assert!(r.touched.is_empty());
        let why = check(&tick(&[2], &["context.md"]), &r, fs).unwrap_err();
        assert_eq!(why, ["`context.md` was not written or read by an action of this run"]);
    }
}
