//! `runs diff` and the report's "Since last run" card: a daily job run three mornings, each
//! compared with the one before — facts added, a dated digest paired with yesterday's and diffed,
//! an unchanged morning that exits 0 under `--exit-code`, a changed one that exits 12.

use crate::common::*;
use predicates::prelude::*;
use serde_json::Value;

/// One morning of the digest job: writes artifacts/digest-DATE.md and learns `fact`.
fn morning(date: &str, fact: &str, items: &str) -> String {
    format!(
        r#"frame:
  - answer: {{goal: digest, definition_of_done: [digest written, facts noted, nothing else], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: file_write, args: {{path: "artifacts/digest-{date}.md", content: "{items}"}}}}}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], facts: ["{fact}"], decision: done, reason: written, outcome: "digest of {date}"}}
"#
    )
}

/// Runs the job for `date` (its clock set to that morning) and returns the run's id.
fn run_day(t: &T, date: &str, fact: &str, items: &str) -> String {
    t.write("script.yaml", &morning(date, fact, items));
    let out = t
        .al(&["--script", "script.yaml", "run", "--goal", "Morning digest", "--slot", date])
        .env("AGENTLOOP_NOW", format!("{date}T06:00:00Z"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{date}: {}", stderr(&out));
    t.json("ws/state.json")["run_id"].as_str().unwrap().to_string()
}

fn diff_json(t: &T, args: &[&str]) -> Value {
    let mut all = vec!["runs", "diff", "--json"];
    all.extend_from_slice(args);
    let out = t.al(&all).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::schemas::check("runs-diff.json", &v);
    v
}

#[test]
fn each_morning_shows_what_changed_since_the_one_before() {
    let t = T::new();
    let day1 = run_day(&t, "2026-01-01", "the feed has 3 items", "item a\\nitem b\\nitem c\\n");
    // The first run of the job has nothing to compare with: said, exit 2.
    t.al(&["runs", "diff"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!("run {day1} has no earlier run to compare with")));

    let day2 = run_day(&t, "2026-01-02", "the feed has 4 items", "item a\\nitem b\\nitem d\\nitem e\\n");
    let d = diff_json(&t, &[]);
    assert_eq!(d["then"]["run_id"], day1.as_str());
    assert_eq!(d["now"]["run_id"], day2.as_str());
    assert_eq!(d["now"]["slot"], "2026-01-02");
    assert_eq!((d["then"]["status"].as_str(), d["now"]["status"].as_str()), (Some("done"), Some("done")));
    assert_eq!(d["outcome_changed"], false);
    // Yesterday's fact is carried (so not dropped); today's is new.
    assert_eq!(d["facts"]["added"], serde_json::json!(["the feed has 4 items"]), "{d:#}");
    assert_eq!(d["facts"]["dropped"], serde_json::json!([]), "{d:#}");
    // The dated digest is paired with yesterday's and diffed line by line.
    let changed = &d["artifacts"]["changed"];
    assert_eq!(changed.as_array().map(Vec::len), Some(1), "{d:#}");
    assert_eq!(changed[0]["path"], "artifacts/digest-2026-01-02.md");
    assert_eq!(changed[0]["path_then"], "artifacts/digest-2026-01-01.md");
    let text = changed[0]["diff"].as_str().unwrap();
    for line in ["-item c", "+item d", "+item e", " item b"] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
    assert_eq!(d["artifacts"]["added"], serde_json::json!([]));
    assert_eq!(d["changes"], 2);
    let verdict = d["verdict"].as_str().unwrap();
    assert!(verdict.starts_with("changed: done again; 1 fact added, 0 dropped; files 1 changed"), "{verdict}");

    // For people: the verdict, both runs, the facts and the diff.
    let out = t.al(&["runs", "diff"]).output().unwrap();
    let shown = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for want in [verdict, &format!("then  {day1} slot 2026-01-01  done"), "  + the feed has 4 items", "+item e"] {
        assert!(shown.contains(want), "{want:?} in\n{shown}");
    }
    assert!(shown.contains("changed  artifacts/digest-2026-01-02.md (was artifacts/digest-2026-01-01.md)"), "{shown}");
    // Something changed: --exit-code says so with 12; a threshold above the count does not.
    t.al(&["runs", "diff", "--exit-code"]).assert().code(12);
    t.al(&["runs", "diff", "--threshold", "2"]).assert().code(12);
    t.al(&["runs", "diff", "--threshold", "3"]).assert().code(0);
    t.al(&["runs", "diff", "--threshold", "0"]).assert().code(2).stderr(predicate::str::contains("--threshold"));

    // The report's "Since last run" card says the same.
    t.al(&["report"]).assert().success();
    let page = t.read("ws/report.html");
    assert!(page.contains("id=\"since-last-run\""), "no card");
    assert!(page.contains("data-changes=\"2\""));
    assert!(page.contains("+ the feed has 4 items"));
    assert!(page.contains("+item e"));

    // A third morning with the same items and facts: unchanged, exit 0 under --exit-code.
    let day3 = run_day(&t, "2026-01-03", "the feed has 4 items", "item a\\nitem b\\nitem d\\nitem e\\n");
    let d = diff_json(&t, &[]);
    assert_eq!((d["then"]["run_id"].as_str(), d["now"]["run_id"].as_str()), (Some(day2.as_str()), Some(day3.as_str())));
    assert_eq!(d["changes"], 0, "{d:#}");
    assert_eq!(d["artifacts"]["unchanged"], 1);
    assert!(d["verdict"].as_str().unwrap().starts_with("unchanged"), "{d:#}");
    t.al(&["runs", "diff", "--exit-code"]).assert().code(0);
    // Two runs named: A then, B now; one: that run against the current one.
    let d = diff_json(&t, &[&day1, &day3]);
    assert_eq!((d["then"]["run_id"].as_str(), d["now"]["run_id"].as_str()), (Some(day1.as_str()), Some(day3.as_str())));
    let d = diff_json(&t, &[&day1]);
    assert_eq!(d["now"]["run_id"], day3.as_str());
    t.al(&["runs", "diff", &day3, &day3]).assert().code(2).stderr(predicate::str::contains("with itself"));
    t.al(&["runs", "diff", "nosuchrun"]).assert().code(2).stderr(predicate::str::contains("no run `nosuchrun`"));
    // `report --all` gives every run after the first its card.
    t.al(&["report", "--all"]).assert().success();
    assert!(!t.read(&format!("ws/runs/{day1}/report.html")).contains("since-last-run"));
    assert!(t.read(&format!("ws/runs/{day2}/report.html")).contains("data-changes=\"2\""));
    assert!(t.read("ws/report.html").contains("data-changes=\"0\""));
}
