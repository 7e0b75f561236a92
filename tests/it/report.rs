//! `agentloop report`: the HTML page of a run and the index of runs, read back as written and
//! as a real browser renders them.

use crate::browser;
use crate::common::*;
use predicates::prelude::*;
use serde_json::Value;

fn demo(t: &T) -> assert_cmd::Command {
    demo_files(t);
    let mut c = t.al(&[
        "--script",
        "examples/critique/script.yaml",
        "--config",
        "examples/critique/agentloop.yaml",
        "run",
        "--goal",
        "Write a two-paragraph critique of the bundled article",
        "--context",
        "examples/critique/context.md",
    ]);
    c.env("AGENTLOOP_SEED", "7");
    c
}

/// `trace stats --json` of the workspace.
fn stats(t: &T) -> Value {
    let out = t.al(&["trace", "stats", "--json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

fn phase_entries(t: &T, rel: &str) -> usize {
    t.read(rel).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).filter(|e| e["phase"] != "run").count()
}

#[test]
fn report_of_a_run_shows_its_steps_costs_and_files() {
    let t = T::new();
    demo(&t).assert().success();
    let out = t.al(&["report"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ws/report.html\n");
    let html = t.read("ws/report.html");
    // One self-contained page: no script, no fetch from anywhere.
    assert!(html.starts_with("<!doctype html>") && html.trim_end().ends_with("</html>"));
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"), "self-contained");
    assert!(html.contains("Content-Security-Policy") && html.contains("default-src 'none'"));
    // Header, timeline (one bar per phase entry), a card per step, the end files.
    assert!(html.contains("<h1 id=\"goal\">Write a two-paragraph critique of the bundled article</h1>"));
    assert!(html.contains("id=\"status\" class=\"badge s-done\">done</span>"));
    assert_eq!(browser::count(&html, "<rect class=\"bar "), phase_entries(&t, "ws/trace.jsonl"));
    for step in 1..=3 {
        assert!(html.contains(&format!("<article class=\"step\" id=\"step-{step}\"")), "step {step}");
    }
    assert!(html.contains("<code class=\"tool\">file_write</code>"));
    assert!(html.contains("The goal asks for a critique and a bundled skill covers exactly that."), "plan rationale");
    assert!(
        html.contains("<ul class=\"ticked\"><li>The article has been read in full</li></ul>"),
        "DoD ticked at step 2"
    );
    assert!(html.contains("<a href=\"artifacts/critique.md\">artifacts/critique.md</a>"), "artifact link");
    // The files themselves, folded at the end: what they say is on the cards above.
    assert!(html.contains("<section id=\"memory\"><details class=\"file\"><summary><h2>memory.md</h2></summary>"));
    assert!(html.contains("<section id=\"plan\"><details class=\"file\"><summary><h2>plan.md</h2></summary>"));
    // A scripted run spends nothing: no price anywhere on its page, the model is `scripted`.
    assert_eq!(browser::text_of(&html, "cost-total").unwrap(), "none (a scripted run spends nothing)");
    assert_eq!(browser::attr_of(&html, "cost-total", "data-usd").unwrap(), "0");
    assert!(html.contains("<dd>scripted</dd>"), "the model shown");
    assert!(!html.contains("$0.0"), "no price shown for a scripted run");
    // A priced run (the same trail, as if a provider had answered at $0.01 a call): the cost
    // total is the one `trace stats` sums.
    let priced: Vec<String> = t
        .read("ws/trace.jsonl")
        .lines()
        .map(|l| {
            let mut e: Value = serde_json::from_str(l).unwrap();
            if e["model"] == "scripted" {
                e["model"] = "claude-sonnet-4-5".into();
                e["cost_usd"] = 0.01.into();
            }
            e.to_string()
        })
        .collect();
    t.write("ws/trace.jsonl", &(priced.join("\n") + "\n"));
    let mut state = t.json("ws/state.json");
    state["model"] = "claude-sonnet-4-5".into();
    t.write("ws/state.json", &state.to_string());
    t.al(&["report"]).assert().success();
    let html = t.read("ws/report.html");
    let total = stats(&t)["total"]["cost_usd"].as_f64().unwrap();
    assert!(total > 0.0);
    let shown: f64 = browser::attr_of(&html, "cost-total", "data-usd").unwrap().parse().unwrap();
    assert!((shown - total).abs() < 1e-12, "{shown} vs {total}");
    assert_eq!(browser::text_of(&html, "cost-total").unwrap(), format!("${total:.4}"));
    // Written elsewhere, links go back to the run's folder; - writes to stdout.
    std::fs::create_dir_all(t.path("out")).unwrap();
    t.al(&["report", "-o", "out/r.html"]).assert().success().stdout("out/r.html\n");
    assert!(t.read("out/r.html").contains("<a href=\"../ws/artifacts/critique.md\">"));
    let out = t.al(&["report", "-o", "-"]).output().unwrap();
    assert!(stdout(&out).starts_with("<!doctype html>") && stdout(&out).contains("<a href=\"artifacts/critique.md\">"));
    t.al(&["report", "--json"]).assert().success().stdout(predicate::str::contains("\"report\": \"ws/report.html\""));
    // No such run, no such folder, no such output folder: usage errors that say so.
    t.al(&["report", "--run", "NOPE"]).assert().code(2).stderr(predicate::str::contains("no run `NOPE`"));
    t.cmd().args(["-w", "missing", "report"]).assert().code(2).stderr(predicate::str::contains("does not exist"));
    assert!(!t.exists("missing"));
    t.al(&["report", "-o", "nodir/r.html"]).assert().code(1).stderr(predicate::str::contains("nodir"));
    t.al(&["report", "--all", "--run", "x"]).assert().code(2);
}

#[test]
fn report_all_indexes_every_run_and_works_from_a_run_folder() {
    let t = T::new();
    demo(&t).assert().success();
    let first = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
    // A follow-up archives the first run to runs/<id>/; its report moves with it.
    t.al(&["report"]).assert().success();
    t.write("ws/notes.txt", "n\n");
    t.write(
        "s2.yaml",
        "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c]}\nplan:\n  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}}\nreflect:\n  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: second}\n",
    );
    t.al(&["--script", "s2.yaml", "run", "--goal", "Second <b>run</b>"]).assert().success();
    assert!(t.exists(&format!("ws/runs/{first}/report.html")), "report.html moved with its run");
    assert!(!t.exists("ws/report.html"));
    // From the run's own folder.
    t.cmd()
        .args(["-w", &format!("ws/runs/{first}"), "report", "-o", "-"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Write a two-paragraph critique"));
    t.al(&["report", "--run", &first, "-o", "-"]).assert().success();
    let out = t.al(&["report", "--all"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ws/index.html\n");
    let index = t.read("ws/index.html");
    assert_eq!(browser::count(&index, "<tr class=\"run\""), 2);
    assert!(index.contains(&format!("<a href=\"runs/{first}/report.html\"><code>{first}</code></a>")));
    assert!(index.contains("<a href=\"report.html\">") && index.contains("Second &lt;b&gt;run&lt;/b&gt;"));
    let archived = t.read(&format!("ws/runs/{first}/report.html"));
    assert!(archived.contains("<a href=\"../../index.html\">all runs</a>"), "reports link back to the index");
    // A root holding only runs/ (serve, event mode) has no current run: --all is the way.
    std::fs::create_dir_all(t.path("root/runs")).unwrap();
    std::fs::rename(t.path(&format!("ws/runs/{first}")), t.path(&format!("root/runs/{first}"))).unwrap();
    t.cmd()
        .args(["-w", "root", "report"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no current run").and(predicate::str::contains("--all")));
    t.cmd().args(["-w", "root", "report", "--all"]).assert().success().stdout("root/index.html\n");
}

/// A goal and a tool result full of markup: the page shows them as text.
fn hostile(t: &T) {
    t.write("ws/notes.txt", "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>\n");
    t.write(
        "script.yaml",
        "frame:\n  - answer: {goal: \"<script>document.title='pwned'</script>\", definition_of_done: [\"<b>read</b>\", b, c]}\nplan:\n  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}, rationale: \"<iframe src=x></iframe>\"}\nreflect:\n  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: \"<svg onload=alert(1)>\", outcome: \"<script>alert(1)</script>\"}\n",
    );
    let goal = "Summarise <script>document.title='pwned'</script> \"quoted\" & more";
    t.al(&["--script", "script.yaml", "run", "--goal", goal]).assert().success();
    t.al(&["report"]).assert().success();
}

#[test]
fn untrusted_text_is_escaped() {
    let t = T::new();
    hostile(&t);
    let html = t.read("ws/report.html");
    for bad in ["<script", "<img", "<iframe", "<svg onload", "<b>read"] {
        assert!(!html.contains(bad), "{bad} reached the page");
    }
    assert!(html.contains(
        "Summarise &lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt; &quot;quoted&quot; &amp; more"
    ));
}

#[test]
fn a_browser_renders_the_report() {
    let t = T::new();
    // Real durations for the picture (no fixed clock), so the timeline shows them.
    demo(&t).env_remove("AGENTLOOP_NOW").assert().success();
    t.al(&["report"]).env_remove("AGENTLOOP_NOW").assert().success();
    let Some(chromium) = browser::or_skip("a_browser_renders_the_report") else { return };
    let page = t.path("ws/report.html");
    let dom = browser::dump_dom(&chromium, &browser::file_url(&page));
    assert!(dom.contains("<h1 id=\"goal\">Write a two-paragraph critique of the bundled article</h1>"), "{dom}");
    assert_eq!(
        browser::count(&dom, "<rect class=\"bar "),
        phase_entries(&t, "ws/trace.jsonl"),
        "one bar per phase entry"
    );
    assert_eq!(browser::text_of(&dom, "cost-total").unwrap(), "none (a scripted run spends nothing)");
    let shot = browser::shots_dir().join("report.png");
    browser::screenshot(&chromium, &browser::file_url(&page), &shot, 1200, 2000);
    eprintln!("screenshot of the report: {}", shot.display());
    // UPDATE_SCREENSHOTS=1 refreshes the picture the README shows.
    if std::env::var_os("UPDATE_SCREENSHOTS").is_some() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report.png");
        browser::screenshot(&chromium, &browser::file_url(&page), &docs, 1200, 1700);
    }
    // A goal with a script renders as text, and no script ran.
    let h = T::new();
    hostile(&h);
    let dom = browser::dump_dom(&chromium, &browser::file_url(&h.path("ws/report.html")));
    assert_eq!(
        browser::text_of(&dom, "goal").unwrap(),
        "Summarise <script>document.title='pwned'</script> \"quoted\" & more"
    );
    assert!(!dom.contains("<script") && !dom.contains("<img") && !dom.contains("<iframe"), "{dom}");
    assert!(!dom.contains("<title>pwned</title>"));
}

/// A run that writes a long file in step 1 and finishes in step 2, with an outline.
fn long_write(t: &T) {
    let content: String = (1..=60).map(|i| format!("line {i} of the notes")).collect::<Vec<_>>().join("\\n");
    t.write(
        "long.yaml",
        &format!(
            r#"frame:
  - answer: {{goal: "Write the long notes", definition_of_done: [the notes are written, the notes are checked, the notes are linked], constraints: [Offline only, Sixty lines], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: file_write, args: {{path: artifacts/notes.md, content: "{content}"}}}}, outline: [Write the notes, Finish], rationale: write them}}
  - answer: {{next_action: {{tool: finish, args: {{summary: wrote the notes}}}}, rationale: all there}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}], decision: continue, reason: written and checked}}
  - answer: {{satisfied: [{{item: 3, steps: [1]}}], decision: done, reason: all met, outcome: Sixty lines of notes in artifacts/notes.md, outline: [Write the notes, Finish]}}
"#
        ),
    );
    t.al(&["--script", "long.yaml", "run", "--goal", "Write notes"]).assert().success();
    t.al(&["report"]).assert().success();
}

/// The Framing card shows the goal statement, the Definition of Done (each item ticked or
/// open), the constraints and any question asked; a written file shows as text, folded when
/// long, with a link to it; the outline shows the run as it ended.
#[test]
fn the_report_shows_the_framing_written_text_and_the_outline_as_ended() {
    let t = T::new();
    long_write(&t);
    let html = t.read("ws/report.html");
    let framing = &html[html.find("<div class=\"framing\" id=\"framing\">").expect("a framing card")..];
    let framing = &framing[..framing.find("</div>").unwrap()];
    assert!(framing.contains("<p id=\"framed-goal\">Write the long notes</p>"), "{framing}");
    assert!(framing.contains("Definition of Done · 3 of 3 met"), "{framing}");
    assert_eq!(browser::count(framing, "<li class=\"dod-item met\" title=\"met\">☑ "), 3, "{framing}");
    assert!(framing.contains("<ul id=\"constraints\"><li>Offline only</li><li>Sixty lines</li></ul>"), "{framing}");
    // The written file: text, not a JSON string; 24 lines shown, the rest folded; a link.
    let arg = &html[html.find("<div class=\"text-arg\" data-arg=\"content\">").expect("content as text")..];
    let arg = &arg[..arg.find("</div>").unwrap()];
    assert!(arg.contains("<a href=\"artifacts/notes.md\">artifacts/notes.md</a>"), "{arg}");
    assert!(arg.contains("<pre class=\"text\">line 1 of the notes\nline 2 of the notes\n"), "{arg}");
    assert!(arg.contains("<summary>36 more lines</summary><pre class=\"text\">line 25 of the notes\n"), "{arg}");
    assert!(!arg.contains("\\n") && !arg.contains("\\\""), "{arg}");
    // A run that ended done carried out its outline: plan.md says so, and the page shows it as
    // written.
    let plan = &html[html.find("<section id=\"plan\">").unwrap()..];
    assert!(plan.contains("<li class=\"check done\">☑ Finish</li>"), "{plan}");
    assert!(!plan.contains("☐"), "{plan}");
    assert!(t.read("ws/plan.md").contains("2. [x] Finish"), "plan.md itself ticks it");
    // A run that could not proceed: the question asked is on the card.
    let u = T::new();
    u.write(
        "q.yaml",
        "frame:\n  - answer: {goal: Review the article, definition_of_done: [a, b, c], can_proceed: false, open_question: Which article should be reviewed?}\n",
    );
    u.al(&["--script", "q.yaml", "run", "--goal", "Review it"]).assert().code(3);
    u.al(&["report"]).assert().success();
    let html = u.read("ws/report.html");
    // The question is the header's: the reason and the card do not say it again.
    assert!(html.contains("<p class=\"question\" id=\"open-question\"><strong>Open question:</strong> Which article should be reviewed?</p>"), "{html}");
    assert!(html.contains("<p class=\"reason\" id=\"reason\">cannot proceed</p>"), "{html}");
    assert!(!html.contains("id=\"framing-question\""), "{html}");
    assert!(
        html.contains("Definition of Done · 0 of 3 met")
            && html.contains("<li class=\"dod-item\" title=\"open\">☐ a</li>")
    );
}

/// At 420 px the report reads: chart labels keep their drawn size (each chart scrolls in its
/// own box), an escalated run's question shows once, and the Outcome card shows the text of
/// what the run made, escaped.
#[test]
fn the_report_reads_at_420_px_asks_once_and_shows_what_the_run_made() {
    let t = T::new();
    demo(&t).assert().success();
    t.al(&["report"]).assert().success();
    let html = t.read("ws/report.html");
    let critique = t.read("ws/artifacts/critique.md");
    let first = critique.lines().find(|l| !l.trim().is_empty()).unwrap();
    let outcome = &html[html.find("<section id=\"outcome\">").expect("an Outcome card")..];
    let outcome = &outcome[..outcome.find("</section>").unwrap()];
    let escaped = first.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    assert!(outcome.contains("<div class=\"artifact-text\" data-file=\"artifacts/critique.md\">"), "{outcome}");
    assert!(outcome.contains(&escaped), "the critique itself: {outcome}");
    // Its text is escaped: markup in an artifact is shown, never run.
    t.write("ws/artifacts/critique.md", "<script>alert(1)</script> & more\n");
    t.al(&["report"]).assert().success();
    let page = t.read("ws/report.html");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; more"), "escaped");
    assert!(!page.contains("<script>alert(1)"));
    // An escalated run with a question.
    let u = T::new();
    u.write(
        "q.yaml",
        "frame:\n  - answer: {goal: Review the article, definition_of_done: [a, b, c], can_proceed: false, open_question: Which article should be reviewed?}\n",
    );
    u.al(&["--script", "q.yaml", "run", "--goal", "Review it"]).assert().code(3);
    u.al(&["report"]).assert().success();
    let Some(chromium) = browser::or_skip("the_report_reads_at_420_px_asks_once_and_shows_what_the_run_made") else {
        return;
    };
    // The smallest label as drawn: its font size times the chart's scale on the screen.
    let smallest = "(() => { let m = 1e9; for (const t of document.querySelectorAll('svg text')) { \
        const c = t.getScreenCTM(); if (!c || !t.textContent.trim()) continue; \
        m = Math.min(m, parseFloat(getComputedStyle(t).fontSize) * Math.hypot(c.a, c.b)); } return m.toFixed(1); })()";
    for w in [420u32, 1280] {
        let px: f64 = browser::probe(&chromium, &t.path("ws/report.html"), w, smallest).parse().unwrap();
        assert!(px >= 9.5, "at {w} px the smallest chart label is {px} px");
        assert!(browser::scroll_width(&chromium, &t.path("ws/report.html"), w) <= w, "only a chart's box scrolls");
    }
    let seen = browser::probe(
        &chromium,
        &u.path("ws/report.html"),
        420,
        "document.body.innerText.split('Which article should be reviewed?').length - 1",
    );
    assert_eq!(seen, "1", "the question is shown once");
}

/// The run ids and dollar amounts a page shows that its layout breaks across lines, comma-separated.
const BROKEN_IDS_AND_AMOUNTS: &str = "(() => { const bad = []; \
    for (const el of document.querySelectorAll('code, td, dd, span')) { \
      const t = el.textContent.trim(); \
      if (el.children.length || !/^(\\$[0-9.,]+|[0-9A-Z]{26})$/.test(t)) continue; \
      const r = document.createRange(); r.selectNodeContents(el); \
      const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))); \
      if (tops.size > 1) bad.push(t); } \
    return bad.join(','); })()";

/// `report --all` shows each run's goal with its date, slot and outcome, so daily runs of one
/// goal are told apart; pages reflow on a narrow screen without sideways scrolling.
#[test]
fn report_all_tells_daily_runs_apart_and_pages_fit_narrow_screens() {
    let t = T::new();
    for day in ["2026-01-01", "2026-01-02", "2026-01-03"] {
        t.write(
            &format!("{day}.yaml"),
            &format!("frame:\n  - answer: {{goal: digest, definition_of_done: [a, b, c]}}\nplan:\n  - answer: {{next_action: {{tool: list_dir, args: {{}}}}}}\nreflect:\n  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], decision: done, reason: ok, outcome: \"## Digest of {day}\\n\\n- 3 items\"}}\n"),
        );
        t.al(&["--script", &format!("{day}.yaml"), "run", "--goal", "Today's digest", "--slot", day])
            .assert()
            .success();
    }
    t.al(&["report", "--all"]).assert().success();
    let index = t.read("ws/index.html");
    assert_eq!(browser::count(&index, "<tr class=\"run\""), 3, "{index}");
    for day in ["2026-01-01", "2026-01-02", "2026-01-03"] {
        assert!(index.contains(&format!("<span class=\"run-when\">· slot {day}</span>")), "{day}: {index}");
        // A markdown outcome reads as one plain line: its heading and items apart.
        assert!(
            index.contains(&format!("<small class=\"outcome\">Digest of {day} · 3 items</small>")),
            "{day}: {index}"
        );
    }
    assert!(index.contains(">Today&#39;s digest</a> <span class=\"run-when\">· 20"), "{index}");
    long_write(&t);
    let Some(chromium) = browser::or_skip("report_all_tells_daily_runs_apart_and_pages_fit_narrow_screens") else {
        return;
    };
    for (name, page) in [("report", t.path("ws/report.html")), ("index", t.path("ws/index.html"))] {
        for w in [1280u32, 420] {
            let width = browser::scroll_width(&chromium, &page, w);
            assert!(width <= w, "the {name} page is {width} px wide in a {w} px window: it scrolls sideways");
            // A run id or an amount of dollars is never broken across lines.
            let broken = browser::probe(&chromium, &page, w, BROKEN_IDS_AND_AMOUNTS);
            assert_eq!(broken, "", "the {name} page at {w} px breaks these across lines");
            let shot = browser::shots_dir().join(format!("{name}-{w}.png"));
            browser::screenshot(&chromium, &browser::file_url(&page), &shot, w, if w == 420 { 2400 } else { 1600 });
        }
    }
    eprintln!("screenshots of the report and the index at 1280 and 420 px: {}", browser::shots_dir().display());
}
