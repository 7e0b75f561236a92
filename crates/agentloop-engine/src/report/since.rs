//! The "Since last run" card: what changed from the previous run of the same job (the
//! [`agentloop_workspace::runs_diff`] the page's maker computed) — the verdict, the two runs side by side, facts
//! added and dropped, files added, removed and changed with their text diffs folded.
//!
//! Every string comes from a run's files and reaches the page through [`esc`] only.

use super::html::{esc, thousands, usd};
use agentloop_workspace::runs_diff::{RunsDiff, Side};
use std::fmt::Write;

pub fn card(p: &mut String, d: &RunsDiff) {
    let _ = write!(
        p,
        "<section id=\"since-last-run\"><h2>Since last run</h2><p class=\"reason\" id=\"since-verdict\" data-changes=\"{}\">{}</p>",
        d.changes,
        esc(&d.verdict)
    );
    // The table scrolls in its own box on a narrow screen; the page never scrolls sideways.
    p.push_str("<div class=\"chart\"><table class=\"since\"><thead><tr><th></th><th>run</th><th>status</th><th>steps</th><th>tokens</th><th>cost</th></tr></thead><tbody>");
    for (label, s) in [("then", &d.then), ("now", &d.now)] {
        row(p, label, s);
    }
    p.push_str("</tbody></table></div>");
    let f = &d.facts;
    if !f.added.is_empty() || !f.dropped.is_empty() {
        p.push_str("<h4>Facts</h4><ul class=\"since-facts\">");
        for (sign, class, list) in [("+", "added", &f.added), ("−", "dropped", &f.dropped)] {
            for x in list {
                let _ = write!(p, "<li class=\"{class}\">{sign} {}</li>", esc(x));
            }
        }
        p.push_str("</ul>");
    }
    let a = &d.artifacts;
    if !a.added.is_empty() || !a.removed.is_empty() || !a.changed.is_empty() {
        p.push_str("<h4>Files</h4><ul class=\"since-files\">");
        for x in &a.added {
            let _ = write!(p, "<li>added <code>{}</code></li>", esc(x));
        }
        for x in &a.removed {
            let _ = write!(p, "<li>removed <code>{}</code></li>", esc(x));
        }
        for c in &a.changed {
            let was = c.path_then.as_deref().map(|t| format!(" (was <code>{}</code>)", esc(t))).unwrap_or_default();
            let _ = write!(p, "<li>changed <code>{}</code>{was}", esc(&c.path));
            if let Some(diff) = &c.diff {
                let _ = write!(p, "<details class=\"fold\"><summary>diff</summary><pre>{}</pre></details>", esc(diff));
            }
            p.push_str("</li>");
        }
        p.push_str("</ul>");
    }
    p.push_str("</section>");
}

fn row(p: &mut String, label: &str, s: &Side) {
    let cost = s.cost_usd.map(usd).unwrap_or_else(|| "—".into());
    let _ = write!(
        p,
        "<tr><th>{label}</th><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        esc(&s.run_id),
        esc(&s.status),
        s.steps,
        thousands(s.tokens),
        esc(&cost)
    );
}
