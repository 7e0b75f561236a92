//! The page for one run: header, outcome, timeline, tokens and cost, one card per step, and
//! memory.md and plan.md as they are now.

use super::html::{self, cost_text, duration, esc, excerpt, spend, thousands};
use super::{charts, Links, Run, Step};
use agentloop_types::tool_spec::ToolStatus;
use agentloop_types::trace::{Entry, Event, ResultStatus};
use agentloop_workspace::workspace::Status;
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
    let csp = if links.actions.is_some() { html::CSP_FORMS } else { html::CSP };
    let mut p = html::head_with(&title, refresh, csp);
    // Header: what, how it ended, what it used.
    header(&mut p, run, links, status);
    facts(&mut p, run, &totals);
    if let Some(q) = &s.open_question {
        let _ = write!(p, "<p class=\"question\" id=\"open-question\"><strong>Open question:</strong> {}</p>", esc(q));
    }
    if s.outcome.is_some() || !s.artifacts.is_empty() || !s.claimed_missing.is_empty() {
        outcome(&mut p, run, links);
    }
    if let Some(d) = &run.since {
        super::since::card(&mut p, d);
    }
    let _ = write!(
        p,
        "<section id=\"timeline\"><h2>Timeline</h2><div class=\"chart\">{}</div><div class=\"legend\"><span><i style=\"background:var(--frame)\"></i>frame</span><span><i style=\"background:var(--plan)\"></i>plan</span><span><i style=\"background:var(--act)\"></i>act</span><span><i style=\"background:var(--reflect)\"></i>reflect</span><span>one bar per phase entry; click a bar for its step</span></div></section>",
        charts::timeline(run)
    );
    p.push_str("<section id=\"usage\"><h2>Tokens and cost per step</h2>");
    let _ = write!(p, "<div class=\"chart\">{}</div>", charts::usage(&steps, s.scripted()));
    p.push_str("<div class=\"legend\"><span><i style=\"background:var(--in)\"></i>input (with cache)</span><span><i style=\"background:var(--out)\"></i>output</span></div>");
    usage_table(&mut p, &steps, &totals, s.scripted());
    p.push_str("</section>");
    for st in &steps {
        step_card(&mut p, run, links, st);
    }
    let _ = write!(
        p,
        "<div class=\"twin\"><section id=\"memory\"><details class=\"file\"><summary><h2>memory.md</h2></summary><div class=\"md\">{}</div></details></section><section id=\"plan\"><details class=\"file\"><summary><h2>plan.md</h2></summary><div class=\"md\">{}</div></details></section></div>",
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

/// The page's header: the run's id and goal, its status, what it does now, why it stopped, and
/// the actions offered.
fn header(p: &mut String, run: &Run, links: &Links, status: &str) {
    let s = &run.state;
    p.push_str("<section class=\"summary\" id=\"summary\"><p class=\"kicker\">agentloop run <code>");
    p.push_str(&esc(&s.run_id));
    p.push_str("</code>");
    if let Some(ix) = &links.index {
        let _ = write!(p, " · <a href=\"{}\">all runs</a>", esc(ix));
    }
    let _ = write!(
        p,
        "</p><h1 id=\"goal\">{}</h1><p>{}</p>",
        esc(&s.goal),
        super::status::badge_html(status, s.stop, s.open_question.is_some(), Some("status"))
    );
    if let (Some(now), Status::Running, false) = (&links.now, s.status, s.interrupted) {
        let _ = write!(p, "<p class=\"now\" id=\"now\"><strong>Now:</strong> {}</p>", esc(now));
    }
    if let Some(r) = &s.reason {
        // The open question has its own box below: the reason does not say it again.
        let r = match &s.open_question {
            Some(q) => r
                .strip_suffix(q.as_str())
                .map(|h| h.trim_end_matches([' ', ':']))
                .filter(|h| !h.is_empty())
                .unwrap_or(r),
            None => r,
        };
        let _ = write!(p, "<p class=\"reason\" id=\"reason\">{}</p>", esc(r));
    }
    if let Some(actions) = &links.actions {
        p.push_str(actions);
    }
}

/// The facts of the run (steps, tokens, cost, time, models, reframes, when, slot and values) and
/// its tokens in and out, closing the summary.
fn facts(p: &mut String, run: &Run, totals: &super::Totals) {
    let s = &run.state;
    let u = &totals.usage;
    let models = run.models();
    let mut facts: Vec<(&str, String, String)> = vec![
        ("steps", format!("{} of {}", s.completed_steps.len(), s.limits.max_steps), String::new()),
        ("tokens", thousands(u.total()), format!(" id=\"tokens-total\" data-tokens=\"{}\"", u.total())),
        (
            "cost",
            if s.scripted() {
                "none (a scripted run spends nothing)".into()
            } else {
                cost_text((!s.cost_incomplete).then_some(totals.cost_usd))
            },
            format!(" id=\"cost-total\" data-usd=\"{}\"", totals.cost_usd),
        ),
        ("wall time", duration(s.elapsed_ms), format!(" id=\"wall-time\" data-ms=\"{}\"", s.elapsed_ms)),
        ("model", if models.is_empty() { "none yet".into() } else { models.join(", ") }, String::new()),
        ("reframes", format!("{} of {}", s.reframes, s.limits.max_reframes), String::new()),
        ("started", when(&s.started_at), String::new()),
        ("finished", s.finished_at.as_deref().map(when).unwrap_or_else(|| "not yet".into()), String::new()),
    ];
    // The scheduler's slot (`run --slot`): which day's run this page is.
    if let Some(slot) = &s.slot {
        facts.insert(0, ("slot", slot.clone(), " id=\"slot\"".into()));
    }
    // The values negotiation checked the task against when it was accepted.
    let started = run.entries.iter().find(|e| e.event == Event::RunStarted).and_then(|e| e.data.as_ref());
    if let Some(names) = started.and_then(|d| d.get("values")?.as_array()).filter(|v| !v.is_empty()) {
        let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
        // With `values_check: model`, the model's reason for letting the task through.
        let judged = started.and_then(|d| d.pointer("/values_judged/reason")?.as_str());
        let why = judged.map(|r| format!("; the model judged: {r}")).unwrap_or_default();
        facts.push(("values", format!("{} (no conflict{why})", names.join(", ")), " id=\"values\"".into()));
    }
    p.push_str("<dl class=\"facts\">");
    for (k, v, attrs) in facts {
        // `attrs` are built above from numbers and fixed ids only; values are escaped.
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
}

/// The run's outcome: its text, the artifacts it made (linked, then shown as text) and those it
/// claimed but the workspace does not hold.
fn outcome(p: &mut String, run: &Run, links: &Links) {
    let s = &run.state;
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
        // What the run made, itself: the digest or the critique, as text.
        for a in &s.artifacts {
            artifact_text(p, run, links, a);
        }
    }
    // Shown apart and unlinked: these names lead to no file.
    if !s.claimed_missing.is_empty() {
        p.push_str("<h4>Claimed but not found in the workspace</h4><ul class=\"claimed-missing\">");
        for a in &s.claimed_missing {
            let _ = write!(p, "<li><code>{}</code></li>", esc(a));
        }
        p.push_str("</ul>");
    }
    p.push_str("</section>");
}

fn usage_table(p: &mut String, steps: &[Step], t: &super::Totals, scripted: bool) {
    p.push_str("<table class=\"per-step\"><thead><tr><th>step</th><th class=\"num\">tokens in</th><th class=\"num\">tokens out</th><th class=\"num\">cost</th><th class=\"num\">time</th></tr></thead><tbody>");
    let row = |label: String, u: &agentloop_types::trace::Usage, cost: f64, ms: u64| {
        format!(
            "<td>{}</td><td class=\"num\" data-label=\"tokens in\">{}</td><td class=\"num\" data-label=\"tokens out\">{}</td><td class=\"num\" data-label=\"cost\">{}</td><td class=\"num\" data-label=\"time\">{}</td>",
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
    if st.n == 0 {
        framing(p, run);
    }
    for f in &st.frames {
        frame_part(p, f);
    }
    if let Some(e) = st.plan {
        plan_part(p, run, links, e);
    }
    for e in &st.acts {
        act_part(p, run, links, e);
    }
    if let Some(e) = st.reflect {
        reflect_part(p, e);
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
            let _ = write!(p, "<li><code>{}</code> {}</li>", esc(e.event.as_str()), esc(&excerpt(&what, 300)));
        }
        p.push_str("</ul>");
    }
    p.push_str("</article>");
}

/// One framing entry of a step: its event, decision, reason, model and error.
fn frame_part(p: &mut String, f: &Entry) {
    let _ = write!(
        p,
        "<div class=\"frame\"><h4>{}</h4>{}",
        esc(f.event.as_str()),
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

/// A step's plan: the next action's tool and arguments, why, and any error.
fn plan_part(p: &mut String, run: &Run, links: &Links, e: &Entry) {
    p.push_str("<div class=\"plan\"><h4>Plan: next action</h4>");
    if let Some(t) = &e.tool {
        let _ = write!(p, "<p><code class=\"tool\">{}</code></p>", esc(t));
    }
    if let Some(a) = &e.args {
        args(p, run, links, e.tool.as_deref(), a);
    }
    if let Some(r) = e.reason.as_deref().filter(|r| !r.is_empty()) {
        let _ = write!(p, "<p class=\"why\"><strong>Why:</strong> {}</p>", esc(r));
    }
    if let Some(err) = &e.error {
        let _ = write!(p, "<blockquote>{}</blockquote>", esc(&excerpt(err, 600)));
    }
    p.push_str("</div>");
}

/// One action of a step: its tool, result status and time, an excerpt and the artifacts it made.
fn act_part(p: &mut String, run: &Run, links: &Links, e: &Entry) {
    let status = e
        .result_status
        .as_ref()
        .map_or_else(|| if e.is_error() { ToolStatus::Error.as_str() } else { "-" }, ResultStatus::as_str);
    let _ = write!(
        p,
        "<div class=\"act\"><h4>{}{}</h4><p>{} {}</p>",
        if e.event == Event::Act { "Act".to_string() } else { esc(e.event.as_str()) },
        e.tool.as_deref().map(|t| format!(": <code>{}</code>", esc(t))).unwrap_or_default(),
        badge(&format!("r-{status}"), status),
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

/// A step's reflection: its reason, the Definition of Done items ticked and how many are done.
fn reflect_part(p: &mut String, e: &Entry) {
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

/// The framing as memory.md holds it now: the goal statement, the Definition of Done with each
/// item ticked (with its evidence) or open, constraints, assumptions, the hypothesis, and any question asked when
/// the run could not proceed.
fn framing(p: &mut String, run: &Run) {
    let Ok(m) = agentloop_workspace::markdown::parse_memory(&run.memory, &run.ws.memory()) else { return };
    let question = m.open_question.clone().or_else(|| run.state.open_question.clone());
    if m.goal.is_empty() && m.dod.is_empty() && question.is_none() {
        return;
    }
    p.push_str("<div class=\"framing\" id=\"framing\"><h4>Goal statement</h4>");
    let _ = write!(p, "<p id=\"framed-goal\">{}</p>", esc(&m.goal));
    if !m.dod.is_empty() {
        let done = m.dod.iter().filter(|i| i.done).count();
        let _ = write!(p, "<h4>Definition of Done · {done} of {} met</h4><ul class=\"dod\" id=\"dod\">", m.dod.len());
        for i in &m.dod {
            let (class, mark, title) =
                if i.done { ("dod-item met", "☑", "met") } else { ("dod-item", "☐", "open") };
            let evidence = if i.evidence.is_empty() {
                String::new()
            } else {
                format!(" <span class=\"evidence\">evidence: {}</span>", esc(&i.evidence.line()))
            };
            let _ = write!(p, "<li class=\"{class}\" title=\"{title}\">{mark} {}{evidence}</li>", esc(&i.text));
        }
        p.push_str("</ul>");
    }
    for (id, title, items) in
        [("constraints", "Constraints", &m.constraints), ("assumptions", "Assumptions and unknowns", &m.assumptions)]
    {
        if !items.is_empty() {
            let _ = write!(p, "<h4>{title}</h4><ul id=\"{id}\">");
            for c in items.iter() {
                let _ = write!(p, "<li>{}</li>", esc(c));
            }
            p.push_str("</ul>");
        }
    }
    if !m.hypothesis.is_empty() {
        let _ = write!(p, "<h4>Hypothesis</h4><p>{}</p>", esc(&m.hypothesis));
    }
    // The run's open question is in the header's box; the card shows one it no longer asks.
    if let Some(q) = question.filter(|q| run.state.open_question.as_deref() != Some(q.as_str())) {
        let _ =
            write!(p, "<p class=\"question\" id=\"framing-question\"><strong>Question asked:</strong> {}</p>", esc(&q));
    }
    p.push_str("</div>");
}

/// Lines of a written file shown before the rest is folded.
const SHOWN_LINES: usize = 24;

/// Bytes of an artifact shown on the Outcome card; a larger file is linked only.
const ARTIFACT_BYTES: u64 = 64 * 1024;

/// An artifact's own text on the Outcome card (escaped, folded after [`SHOWN_LINES`]): a text
/// file of the workspace, read without following a link out of it; anything else is linked
/// only.
fn artifact_text(p: &mut String, run: &Run, links: &Links, rel: &str) {
    if !run.has_file(rel) {
        return;
    }
    let path = run.ws.root.join(rel);
    if std::fs::metadata(&path).map(|m| m.len() > ARTIFACT_BYTES).unwrap_or(true) {
        return;
    }
    let Ok(Some(text)) = agentloop_io::fs::read_inside(&run.ws.root, &path) else { return };
    if text.trim().is_empty() || text.contains('\0') {
        return;
    }
    let lines: Vec<&str> = text.lines().collect();
    let _ =
        write!(p, "<div class=\"artifact-text\" data-file=\"{}\"><h4>{}</h4>", esc(rel), file_link(run, links, rel));
    if lines.len() <= SHOWN_LINES {
        let _ = write!(p, "<pre class=\"text\">{}</pre>", esc(text.trim_end()));
    } else {
        let _ = write!(
            p,
            "<pre class=\"text\">{}</pre><details class=\"fold\"><summary>{} more lines</summary><pre class=\"text\">{}</pre></details>",
            esc(&lines[..SHOWN_LINES].join("\n")),
            lines.len() - SHOWN_LINES,
            esc(&lines[SHOWN_LINES..].join("\n"))
        );
    }
    p.push_str("</div>");
}

/// A planned call's arguments: text that spans lines (what `file_write` writes, a command) as
/// text, folded when long, with a link to the file written; the other arguments as JSON.
fn args(p: &mut String, run: &Run, links: &Links, tool: Option<&str>, a: &Value) {
    let Some(obj) = a.as_object() else {
        let pretty = serde_json::to_string_pretty(a).unwrap_or_default();
        let _ = write!(p, "<pre class=\"args\">{}</pre>", esc(&excerpt_lines(&pretty, 40)));
        return;
    };
    let is_text = |v: &Value| v.as_str().is_some_and(|t| t.contains('\n') || t.len() > 120);
    let rest: serde_json::Map<String, Value> =
        obj.iter().filter(|(_, v)| !is_text(v)).map(|(k, v)| (k.clone(), v.clone())).collect();
    if !rest.is_empty() {
        let pretty = serde_json::to_string_pretty(&Value::Object(rest)).unwrap_or_default();
        let _ = write!(p, "<pre class=\"args\">{}</pre>", esc(&excerpt_lines(&pretty, 40)));
    }
    let path = obj.get("path").and_then(Value::as_str).filter(|_| tool == Some("file_write"));
    for (k, v) in obj.iter().filter(|(_, v)| is_text(v)) {
        let text = v.as_str().unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let _ = write!(p, "<div class=\"text-arg\" data-arg=\"{}\"><h4>{}", esc(k), esc(k));
        if let (Some(path), "content") = (path, k.as_str()) {
            let _ = write!(p, " · {}", file_link(run, links, path));
        }
        p.push_str("</h4>");
        if lines.len() <= SHOWN_LINES {
            let _ = write!(p, "<pre class=\"text\">{}</pre>", esc(text));
        } else {
            let _ = write!(
                p,
                "<pre class=\"text\">{}</pre><details class=\"fold\"><summary>{} more lines</summary><pre class=\"text\">{}</pre></details>",
                esc(&lines[..SHOWN_LINES].join("\n")),
                lines.len() - SHOWN_LINES,
                esc(&lines[SHOWN_LINES..].join("\n"))
            );
        }
        p.push_str("</div>");
    }
}
