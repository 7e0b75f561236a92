//! The page for one run: header, outcome, timeline, tokens and cost, one card per step, and
//! memory.md and plan.md as they are now.

use super::html::{self, duration, esc, excerpt, spend, thousands, usd};
use super::{charts, Links, Run, Step};
use crate::trace::Entry;
use crate::workspace::Status;
use serde_json::Value;
use std::fmt::Write;

/// How the run's status is shown: a run replaced while going is `interrupted`.
pub fn shown_status(run: &Run) -> &'static str {
    match run.state.status {
        Status::Running if run.state.interrupted => "interrupted",
        s => s.as_str(),
    }
}

/// A link to a file of the run when it exists there, else the name as text.
fn file_link(run: &Run, links: &Links, rel: &str) -> String {
    if run.has_file(rel) {
        format!("<a href=\"{}{}\">{}</a>", esc(&links.files), esc(&html::encode_path(rel)), esc(rel))
    } else {
        format!("<code>{}</code>", esc(rel))
    }
}

fn badge(class: &str, text: &str) -> String {
    format!("<span class=\"badge {}\">{}</span>", esc(class), esc(text))
}

pub fn render(run: &Run, links: &Links) -> String {
    let s = &run.state;
    let totals = run.totals();
    let steps = run.steps();
    let status = shown_status(run);
    let title = format!("{} · agentloop run {}", excerpt(&s.goal, 80), s.run_id);
    let refresh = links.refresh.filter(|_| s.status == Status::Running && !s.interrupted);
    let mut p = html::head(&title, refresh);
    // Header: what, how it ended, what it used.
    p.push_str("<section class=\"summary\" id=\"summary\"><p class=\"kicker\">agentloop run <code>");
    p.push_str(&esc(&s.run_id));
    p.push_str("</code>");
    if let Some(ix) = &links.index {
        let _ = write!(p, " · <a href=\"{}\">all runs</a>", esc(ix));
    }
    let _ = write!(
        p,
        "</p><h1 id=\"goal\">{}</h1><p><span id=\"status\" class=\"badge s-{status}\">{status}</span></p>",
        esc(&s.goal)
    );
    if let (Some(now), Status::Running, false) = (&links.now, s.status, s.interrupted) {
        let _ = write!(p, "<p class=\"now\" id=\"now\"><strong>Now:</strong> {}</p>", esc(now));
    }
    if let Some(r) = &s.reason {
        let _ = write!(p, "<p class=\"reason\" id=\"reason\">{}</p>", esc(r));
    }
    let u = &totals.usage;
    let models = run.models();
    let facts: Vec<(&str, String, String)> = vec![
        ("steps", format!("{} of {}", s.completed_steps.len(), s.limits.max_steps), String::new()),
        ("tokens", thousands(u.total()), format!(" id=\"tokens-total\" data-tokens=\"{}\"", u.total())),
        (
            "cost",
            if s.scripted() {
                "none (a scripted run spends nothing)".into()
            } else {
                format!("{}{}", usd(totals.cost_usd), if s.cost_incomplete { " + unpriced calls" } else { "" })
            },
            format!(" id=\"cost-total\" data-usd=\"{}\"", totals.cost_usd),
        ),
        ("wall time", duration(s.elapsed_ms), format!(" id=\"wall-time\" data-ms=\"{}\"", s.elapsed_ms)),
        ("model", if models.is_empty() { "none yet".into() } else { models.join(", ") }, String::new()),
        ("reframes", format!("{} of {}", s.reframes, s.limits.max_reframes), String::new()),
        ("started", when(&s.started_at), String::new()),
        ("finished", s.finished_at.as_deref().map(when).unwrap_or_else(|| "not yet".into()), String::new()),
    ];
    p.push_str("<dl class=\"facts\">");
    for (k, v, attrs) in facts {
        // `attrs` are built above from numbers only.
        let _ = write!(p, "<div><dt>{}</dt><dd{attrs}>{}</dd></div>", esc(k), esc(&v));
    }
    let _ = write!(
        p,
        "</dl><p class=\"reason\">{} in, {} out{}</p></section>",
        thousands(u.input_tokens + u.cache_read_tokens + u.cache_write_tokens),
        thousands(u.output_tokens),
        if u.cache_read_tokens + u.cache_write_tokens > 0 {
            format!(
                " ({} cache reads, {} cache writes)",
                thousands(u.cache_read_tokens),
                thousands(u.cache_write_tokens)
            )
        } else {
            String::new()
        }
    );
    if let Some(q) = &s.open_question {
        let _ = write!(p, "<p class=\"question\" id=\"open-question\"><strong>Open question:</strong> {}</p>", esc(q));
    }
    if s.outcome.is_some() || !s.artifacts.is_empty() {
        p.push_str("<section id=\"outcome\"><h2>Outcome</h2>");
        if let Some(o) = &s.outcome {
            let _ = write!(p, "<div class=\"md\">{}</div>", html::markdown(o));
        }
        if !s.artifacts.is_empty() {
            p.push_str("<h4>Artifacts</h4><ul>");
            for a in &s.artifacts {
                let _ = write!(p, "<li>{}</li>", file_link(run, links, a));
            }
            p.push_str("</ul>");
        }
        p.push_str("</section>");
    }
    let _ = write!(
        p,
        "<section id=\"timeline\"><h2>Timeline</h2>{}<div class=\"legend\"><span><i style=\"background:var(--frame)\"></i>frame</span><span><i style=\"background:var(--plan)\"></i>plan</span><span><i style=\"background:var(--act)\"></i>act</span><span><i style=\"background:var(--reflect)\"></i>reflect</span><span>one bar per phase entry; click a bar for its step</span></div></section>",
        charts::timeline(run)
    );
    p.push_str("<section id=\"usage\"><h2>Tokens and cost per step</h2>");
    p.push_str(&charts::usage(&steps, s.scripted()));
    p.push_str("<div class=\"legend\"><span><i style=\"background:var(--in)\"></i>input (with cache)</span><span><i style=\"background:var(--out)\"></i>output</span></div>");
    usage_table(&mut p, &steps, &totals, s.scripted());
    p.push_str("</section>");
    for st in &steps {
        step_card(&mut p, run, links, st);
    }
    let _ = write!(
        p,
        "<div class=\"twin\"><section id=\"memory\"><h2>memory.md</h2><div class=\"md\">{}</div></section><section id=\"plan\"><h2>plan.md</h2><div class=\"md\">{}</div></section></div>",
        html::markdown(&run.memory),
        html::markdown(&run.plan)
    );
    if run.bad_lines > 0 {
        let _ = write!(
            p,
            "<p class=\"question\">trace.jsonl has {} line(s) that could not be read; they are left out.</p>",
            run.bad_lines
        );
    }
    p.push_str(&html::foot());
    p
}

fn usage_table(p: &mut String, steps: &[Step], t: &super::Totals, scripted: bool) {
    p.push_str("<table class=\"per-step\"><thead><tr><th>step</th><th class=\"num\">tokens in</th><th class=\"num\">tokens out</th><th class=\"num\">cost</th><th class=\"num\">time</th></tr></thead><tbody>");
    let row = |label: String, u: &crate::trace::Usage, cost: f64, ms: u64| {
        format!(
            "<td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
            label,
            thousands(u.input_tokens + u.cache_read_tokens + u.cache_write_tokens),
            thousands(u.output_tokens),
            esc(&spend(cost, scripted)),
            esc(&duration(ms))
        )
    };
    for st in steps {
        let label = if st.n == 0 { "frame".to_string() } else { format!("<a href=\"#step-{0}\">step {0}</a>", st.n) };
        let _ = write!(p, "<tr>{}</tr>", row(label, &st.usage, st.cost_usd, st.duration_ms));
    }
    let _ = write!(
        p,
        "</tbody><tfoot><tr>{}</tr></tfoot></table>",
        row("total".into(), &t.usage, t.cost_usd, t.duration_ms)
    );
}

fn data_str<'a>(e: &'a Entry, key: &str) -> Option<&'a str> {
    e.data.as_ref().and_then(|d| d.get(key)).and_then(Value::as_str)
}

fn step_card(p: &mut String, run: &Run, links: &Links, st: &Step) {
    let decision =
        st.reflect.and_then(|e| e.decision.clone()).or_else(|| st.frames.last().and_then(|e| e.decision.clone()));
    let _ = write!(
        p,
        "<article class=\"step\" id=\"step-{n}\" data-step=\"{n}\"><header><h3>{}</h3>{}<span class=\"meta\">{} tokens · {} · {}</span></header><div class=\"cols\">",
        if st.n == 0 { "Framing".to_string() } else { format!("Step {}", st.n) },
        decision.as_deref().map(|d| badge(&format!("d-{d}"), d)).unwrap_or_default(),
        thousands(st.usage.total()),
        esc(&spend(st.cost_usd, run.state.scripted())),
        esc(&duration(st.duration_ms)),
        n = st.n,
    );
    for f in &st.frames {
        let _ = write!(
            p,
            "<div class=\"frame\"><h4>{}</h4>{}",
            esc(&f.event),
            f.decision.as_deref().map(|d| badge(&format!("d-{d}"), d)).unwrap_or_default()
        );
        if let Some(r) = &f.reason {
            let _ = write!(p, "<p>{}</p>", esc(r));
        }
        if let (Some(m), Some(u)) = (&f.model, &f.usage) {
            let _ = write!(p, "<p class=\"reason\">{} · {} tokens</p>", esc(m), thousands(u.total()));
        }
        if let Some(e) = &f.error {
            let _ = write!(p, "<blockquote>{}</blockquote>", esc(&excerpt(e, 600)));
        }
        p.push_str("</div>");
    }
    if let Some(e) = st.plan {
        p.push_str("<div class=\"plan\"><h4>Plan: next action</h4>");
        if let Some(t) = &e.tool {
            let _ = write!(p, "<p><code class=\"tool\">{}</code></p>", esc(t));
        }
        if let Some(a) = &e.args {
            let pretty = serde_json::to_string_pretty(a).unwrap_or_default();
            let _ = write!(p, "<pre class=\"args\">{}</pre>", esc(&excerpt_lines(&pretty, 40)));
        }
        if let Some(r) = e.reason.as_deref().filter(|r| !r.is_empty()) {
            let _ = write!(p, "<p class=\"why\"><strong>Why:</strong> {}</p>", esc(r));
        }
        if let Some(err) = &e.error {
            let _ = write!(p, "<blockquote>{}</blockquote>", esc(&excerpt(err, 600)));
        }
        p.push_str("</div>");
    }
    for e in &st.acts {
        let status = e.result_status.clone().unwrap_or_else(|| if e.is_error() { "error".into() } else { "-".into() });
        let _ = write!(
            p,
            "<div class=\"act\"><h4>{}{}</h4><p>{} {}</p>",
            if e.event == "act" { "Act".to_string() } else { esc(&e.event) },
            e.tool.as_deref().map(|t| format!(": <code>{}</code>", esc(t))).unwrap_or_default(),
            badge(&format!("r-{status}"), &status),
            esc(&duration(e.duration_ms.unwrap_or(0)))
        );
        let text = e.error.as_ref().or(e.result_summary.as_ref());
        if let Some(t) = text.filter(|t| !t.is_empty()) {
            let _ = write!(p, "<blockquote class=\"excerpt\">{}</blockquote>", esc(&excerpt(t, 400)));
        }
        if !e.artifacts.is_empty() {
            p.push_str("<ul class=\"artifacts\">");
            for a in &e.artifacts {
                let _ = write!(p, "<li>{}</li>", file_link(run, links, a));
            }
            p.push_str("</ul>");
        }
        p.push_str("</div>");
    }
    if let Some(e) = st.reflect {
        p.push_str("<div class=\"reflect\"><h4>Reflect</h4>");
        if let Some(r) = &e.reason {
            let _ = write!(p, "<p>{}</p>", esc(r));
        }
        let data = e.data.as_ref();
        let ticked: Vec<&str> = data
            .and_then(|d| d.get("ticked"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if !ticked.is_empty() {
            p.push_str("<h4>Definition of Done ticked</h4><ul class=\"ticked\">");
            for t in ticked {
                let _ = write!(p, "<li>{}</li>", esc(t));
            }
            p.push_str("</ul>");
        }
        if let Some(dod) = data.and_then(|d| d.get("dod")) {
            let _ = write!(
                p,
                "<p class=\"dod\">{} of {} done</p>",
                dod["done"].as_u64().unwrap_or(0),
                dod["total"].as_u64().unwrap_or(0)
            );
        }
        p.push_str("</div>");
    }
    p.push_str("</div>");
    if !st.notes.is_empty() {
        p.push_str("<ul class=\"notes\">");
        for e in &st.notes {
            let what = data_str(e, "answer")
                .map(|a| format!("answer: {a}"))
                .or_else(|| e.reason.clone())
                .or_else(|| e.error.clone())
                .unwrap_or_default();
            let _ = write!(p, "<li><code>{}</code> {}</li>", esc(&e.event), esc(&excerpt(&what, 300)));
        }
        p.push_str("</ul>");
    }
    p.push_str("</article>");
}

/// An RFC 3339 time for people: `2026-01-01 09:30:00 UTC`.
pub fn when(ts: &str) -> String {
    match (ts.get(..10), ts.get(11..19)) {
        (Some(d), Some(t)) if ts.ends_with('Z') => format!("{d} {t} UTC"),
        _ => ts.to_string(),
    }
}

/// At most `n` lines of `s`, with a note of how many more there were.
fn excerpt_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    if lines.len() <= n {
        return s.to_string();
    }
    format!("{}\n… {} more lines", lines[..n].join("\n"), lines.len() - n)
}
