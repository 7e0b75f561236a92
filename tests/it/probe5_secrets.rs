//! Hostile probe round 5 (issue 51), the holes around evidence and secrets: a held `finish` is
//! no evidence; every field of a queue message is bounded; every command that shows
//! configuration masks it one way; every secret agentloop holds or hands out is redacted; serve's
//! token file is out of the tools' reach.

use crate::common::*;
use serde_json::Value;

/// The probe's script: `finish` at once (held: report.md does not exist), then Reflect cites
/// that step for "report.md exists" and says done; then the work, and a tick it can back.
const HELD_FINISH_FRAME: &str = r#"frame:
  - answer: {goal: write the report, definition_of_done: [report.md exists, the report is short, the report is plain], can_proceed: true}
plan:
  - answer: {next_action: {tool: finish, args: {summary: report written}}, rationale: done already}
"#;

fn held_finish_checks(t: &T, out: &std::process::Output) {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let trace = t.trace();
    let refused: Vec<&Value> = trace.iter().filter(|e| e["event"] == "tick.refused").collect();
    assert_eq!(refused.len(), 3, "{trace:?}");
    assert_eq!(refused[0]["data"]["reasons"], serde_json::json!(["step 1's action failed"]), "{:?}", refused[0]);
    let result = t.json("ws/result.json");
    assert_eq!(result["status"], "done", "{result}");
    // The item is ticked by the step that wrote the file, never by the held finish.
    let dod = &result["definition_of_done"][0];
    assert_eq!(dod["evidence"]["steps"], serde_json::json!([2]), "{result}");
    assert_eq!(t.read("ws/report.md"), "the report");
}

/// (6) The held `finish` cited as evidence is refused: the run goes on, writes report.md, and
/// ends done only on that step's evidence.
#[test]
fn a_held_finish_is_no_evidence() {
    let t = T::new();
    let probe = T::new();
    // The probe as filed: finish at once, cite the held step, done. The run is not done.
    probe.write(
        "script.yaml",
        &format!(
            "{HELD_FINISH_FRAME}reflect:\n  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], decision: done, reason: report written}}\n"
        ),
    );
    let out = probe.al(&["--script", "script.yaml", "run", "--goal", "write the report"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!probe.exists("ws/report.md"));
    assert_ne!(probe.json("ws/result.json")["status"], "done");
    assert!(!probe.read("ws/memory.md").contains("[x]"), "{}", probe.read("ws/memory.md"));

    t.write(
        "script.yaml",
        &format!(
            r#"{HELD_FINISH_FRAME}  - answer: {{next_action: {{tool: file_write, args: {{path: report.md, content: the report}}}}, rationale: write it}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], decision: done, reason: report written}}
  - answer: {{satisfied: [{{item: 1, steps: [2], artifacts: [report.md]}}, {{item: 2, steps: [2]}}, {{item: 3, steps: [2]}}], decision: done, reason: report written}}
"#
        ),
    );
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "write the report"]).output().unwrap();
    held_finish_checks(&t, &out);
}

/// (6) The same through the fused Reflect+Plan call.
#[test]
fn a_held_finish_is_no_evidence_when_fused() {
    let t = T::new();
    t.write("fused.yaml", "llm:\n  fuse_phases: true\n");
    t.write(
        "script.yaml",
        &format!(
            r#"{HELD_FINISH_FRAME}reflect+plan:
  - answer:
      reflect: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], decision: done, reason: report written}}
      plan: {{next_action: {{tool: file_write, args: {{path: report.md, content: the report}}}}, rationale: write it}}
  - answer:
      reflect: {{satisfied: [{{item: 1, steps: [2], artifacts: [report.md]}}, {{item: 2, steps: [2]}}, {{item: 3, steps: [2]}}], decision: done, reason: report written}}
"#
        ),
    );
    let out = t
        .al(&["--script", "script.yaml", "--config", "fused.yaml", "run", "--goal", "write the report"])
        .output()
        .unwrap();
    held_finish_checks(&t, &out);
    assert!(t.trace().iter().any(|e| e["data"]["fused"] == true));
}
