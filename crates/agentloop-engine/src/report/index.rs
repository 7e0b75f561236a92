//! The index page: every run under a root, newest first, each linking to its report.

use super::html::{self, esc, excerpt, thousands, usd};
use std::fmt::Write;

/// One run in the index.
#[derive(Debug, Clone)]
pub struct Row {
    pub run_id: String,
    /// As `agentloop runs` shows it (running, done, escalated, interrupted).
    pub status: String,
    /// How the run stopped, if it did (the badge tells a question from a limit by it).
    pub stop: Option<agentloop_workspace::workspace::StopKind>,
    /// The run has an open question (its model asked one).
    pub asks: bool,
    pub goal: String,
    pub reason: Option<String>,
    pub steps: usize,
    pub tokens: u64,
    /// None when some model's price is unknown, or the run was scripted.
    pub cost_usd: Option<f64>,
    /// The answers were replayed by the scripted model: the cost shows as `scripted`.
    pub scripted: bool,
    pub started_at: String,
    /// Link to the run's report, already a URL (relative or absolute path).
    pub href: String,
    /// A note shown under the goal (e.g. `queued` when served).
    pub note: Option<String>,
    /// What the run produced (result.json's outcome), shown under the goal of a done run.
    pub outcome: Option<String>,
    /// The agent profile the run started as, if any.
    pub agent: Option<String>,
    /// The scheduler's slot (`run --slot KEY`, e.g. a date), if any.
    pub slot: Option<String>,
}

/// The index page of `rows` (shown newest first); `title` names the root.
pub fn render_index(title: &str, rows: &[Row], refresh: Option<u32>) -> String {
    render_index_with(title, rows, refresh, None)
}

/// [`render_index`] with `extra` (HTML, e.g. the served panel's link to start a run) after the
/// summary.
pub fn render_index_with(title: &str, rows: &[Row], refresh: Option<u32>, extra: Option<&str>) -> String {
    let mut rows: Vec<&Row> = rows.iter().collect();
    rows.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(b.run_id.cmp(&a.run_id)));
    let mut p = html::head(&format!("agentloop runs · {title}"), refresh);
    let count = |s: &str| rows.iter().filter(|r| r.status == s).count();
    let _ = write!(
        p,
        "<section class=\"summary\"><p class=\"kicker\">agentloop runs</p><h1 id=\"root\">{}</h1><dl class=\"facts\"><div><dt>runs</dt><dd id=\"run-count\">{}</dd></div><div><dt>done</dt><dd>{}</dd></div><div><dt>escalated</dt><dd>{}</dd></div><div><dt>running</dt><dd>{}</dd></div></dl></section>",
        esc(title),
        rows.len(),
        count("done"),
        count("escalated"),
        count("running")
    );
    p.push_str(extra.unwrap_or_default());
    if rows.is_empty() {
        p.push_str("<section><p class=\"empty\">No runs yet.</p></section>");
        p.push_str(&html::foot());
        return p;
    }
    p.push_str("<section><table class=\"runs\"><thead><tr><th>run</th><th>status</th><th>goal</th><th class=\"num\">steps</th><th class=\"num\">tokens</th><th class=\"num\">cost</th><th>started</th></tr></thead><tbody>");
    let (mut tokens, mut cost, mut unpriced) = (0u64, 0.0f64, false);
    for r in &rows {
        tokens += r.tokens;
        match r.cost_usd {
            Some(c) => cost += c,
            None if r.scripted => {}
            None => unpriced = true,
        }
        let _ = write!(
            p,
            "<tr class=\"run\" data-run=\"{id}\"><td data-label=\"run\"><a href=\"{href}\"><code>{id}</code></a></td><td>{badge}</td><td class=\"goal\"><a class=\"goal-link\" href=\"{href}\">{goal}</a> <span class=\"run-when\">· {day}</span>{tags}{note}{summary}</td><td class=\"num\" data-label=\"steps\">{steps}</td><td class=\"num\" data-label=\"tokens\">{tok}</td><td class=\"num\" data-label=\"cost\"{usd_attr}>{cost}</td><td data-label=\"started\">{date}</td></tr>",
            id = esc(&r.run_id),
            href = esc(&r.href),
            badge = super::status::badge_html(&r.status, r.stop, r.asks, None),
            goal = esc(&excerpt(&r.goal, 160)),
            note = r.note.as_deref().map(|n| format!(" <span class=\"badge\">{}</span>", esc(n))).unwrap_or_default(),
            day = esc(crate::report::page::when(&r.started_at).get(..10).unwrap_or("")),
            tags = [r.slot.as_ref().map(|s| format!("slot {s}")), r.agent.as_ref().map(|a| format!("agent {a}"))]
                .into_iter()
                .flatten()
                .map(|t| format!(" <span class=\"run-when\">· {}</span>", esc(&t)))
                .collect::<String>(),
            summary = match (r.status.as_str(), &r.outcome, &r.reason) {
                ("done", Some(o), _) => format!("<br><small class=\"outcome\">{}</small>", esc(&excerpt(&plain(o), 200))),
                (st, _, Some(x)) if st != "done" => format!("<br><small class=\"reason\">{}</small>", esc(&excerpt(x, 200))),
                _ => String::new(),
            },
            steps = r.steps,
            tok = thousands(r.tokens),
            usd_attr = r.cost_usd.map(|c| format!(" data-usd=\"{c}\"")).unwrap_or_default(),
            cost = match r.cost_usd {
                _ if r.scripted => "scripted".into(),
                Some(c) => usd(c),
                None => html::UNKNOWN_COST.into(),
            },
            date = esc(r.started_at.get(..16).unwrap_or(&r.started_at).replace('T', " ").as_str()),
        );
    }
    let _ = write!(
        p,
        "</tbody><tfoot><tr><td>total</td><td></td><td></td><td></td><td class=\"num\">{}</td><td class=\"num\" id=\"cost-total\" data-usd=\"{cost}\">{}</td><td></td></tr></tfoot></table></section>",
        thousands(tokens),
        html::cost_text((!unpriced).then_some(cost)),
    );
    p.push_str(&html::foot());
    p
}

/// A markdown outcome as one line of plain text: each line's heading, list and quote marks
/// dropped, fences left out, the lines joined with ` · ` (so `## News` and its items do not run
/// together as one sentence).
fn plain(md: &str) -> String {
    let parts: Vec<&str> = md
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("```") && !l.starts_with("~~~"))
        .map(|l| {
            let l = l.trim_start_matches('#').trim_start_matches('>').trim_start();
            let l = l.strip_prefix("- ").or_else(|| l.strip_prefix("* ")).or_else(|| l.strip_prefix("+ ")).unwrap_or(l);
            l.strip_prefix("[ ] ").or_else(|| l.strip_prefix("[x] ")).unwrap_or(l).trim()
        })
        .filter(|l| !l.is_empty())
        .collect();
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_outcome_in_markdown_reads_as_one_plain_line() {
        let md = "## Example News (2 items)\n\n- first item\n- second item\n```\ncode\n```\n> quoted";
        assert_eq!(super::plain(md), "Example News (2 items) · first item · second item · code · quoted");
        assert_eq!(super::plain("Digest of 2026-01-01: 3 items"), "Digest of 2026-01-01: 3 items");
    }
}
