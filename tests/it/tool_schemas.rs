//! `llm.tool_schemas`: where each tool's parameters are given to the model. With `catalog` (the
//! default where no strict schema mode holds the model) the catalog gives them on each tool's
//! line and Plan's answer names the tool with its arguments as an object: arguments that do not
//! fit are a failed step whose error names them, which the next Plan sees. With `answer` the
//! answer's schema is the union of every tool's parameters, and such arguments are refused before
//! Act with one corrective retry. Lean prompts keep the union, and refuse `catalog` beside them.

use crate::common::*;
use crate::loop_::{run, write_script};
use serde_json::{json, Value};

/// A plan that names `file_read` with an argument it does not take, then the right one.
const WRONG_THEN_RIGHT: &str = r#"plan:
  - answer: {next_action: {tool: file_read, args: {file: notes.txt}}, rationale: read the notes}
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}, rationale: the argument is path}
  - answer: {next_action: {tool: file_write, args: {path: artifacts/n.md, content: note}}, rationale: y}
reflect:
  - answer: {decision: continue, reason: file_read takes path}
  - answer: {satisfied: [{item: 1, steps: [2]}], decision: continue, reason: read}
  - answer: {satisfied: [{item: 2, steps: [3]}, {item: 3, steps: [3]}], decision: done, reason: ok, outcome: noted}
"#;

fn dry_run(t: &T, config: &str) -> Value {
    t.write("ws/agentloop.yaml", config);
    json_out(
        &t.al(&["--provider", "scripted", "run", "--goal", "read notes.txt", "--dry-run", "--json"]).output().unwrap(),
    )
}

#[test]
fn arguments_that_do_not_fit_are_a_failed_step_naming_them() {
    let t = T::new();
    write_script(&t, WRONG_THEN_RIGHT);
    let out = run(&t);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let trace = t.trace();
    let plans: Vec<&Value> = trace.iter().filter(|e| e["phase"] == "plan").collect();
    assert_eq!(plans[0]["attempt"], 1, "the answer fits the schema it was sent: not refused");
    // `file` is a key file_read does not take: dropped, as the union would drop it.
    assert_eq!(plans[0]["args"], json!({}));
    let act = trace.iter().find(|e| e["phase"] == "act").unwrap();
    assert_eq!(act["result_status"], "error", "{act}");
    let error = act["error"].as_str().unwrap();
    assert!(error.contains("\"path\" is a required property"), "the error names the argument: {act}");
    assert!(t.read("ws/artifacts/n.md").contains("note"));
}

#[test]
fn with_answer_they_are_refused_before_act() {
    let t = T::new();
    write_script(&t, WRONG_THEN_RIGHT);
    t.write("ws/agentloop.yaml", "llm:\n  tool_schemas: answer\n");
    let out = run(&t);
    // The refused answer's retry takes the second plan; the third answers the next step, and the
    // script runs out of reflections one short of done.
    let trace = t.trace();
    let plan = trace.iter().find(|e| e["phase"] == "plan").unwrap();
    assert_eq!(plan["attempt"], 2, "{plan}");
    assert_eq!(plan["args"]["path"], "notes.txt");
    assert!(!trace.iter().any(|e| e["phase"] == "act" && e["result_status"] == "error"), "{}", stderr(&out));
}

#[test]
fn the_catalog_or_the_answer_schema_carries_the_parameters() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    let v = dry_run(&t, "");
    let catalog = v["prompts"]["catalog"].as_str().unwrap();
    assert!(
        catalog.contains("`?`: optional") && catalog.contains("- file_write(path, content, mode?: overwrite|append"),
        "{catalog}"
    );
    // `finish` keeps its parameters in the answer's schema, with the run's output schema.
    assert!(catalog.contains("- finish: Finish the run"), "{catalog}");
    let v = dry_run(&t, "llm:\n  tool_schemas: answer\n");
    let catalog = v["prompts"]["catalog"].as_str().unwrap();
    assert!(catalog.contains("parameters are in the plan answer's schema") && catalog.contains("- file_write: "));
    // Strict mode holds the model to the schema it is sent: `auto` gives it the union, where
    // strict mode can take it (http_call's free-form headers leave it unenforced: not then).
    let v = dry_run(&t, "llm:\n  strict: true\nallowed_tools: [file_read, file_write, finish]\n");
    assert!(v["prompts"]["catalog"].as_str().unwrap().contains("- file_write: "));
    let v = dry_run(&t, "llm:\n  strict: true\n");
    assert!(v["prompts"]["catalog"].as_str().unwrap().contains("- file_write(path, content"));
}

#[test]
fn lean_prompts_refuse_catalog_and_a_bad_value_names_the_choices() {
    let t = T::new();
    t.write("ws/agentloop.yaml", "prompts: lean\nllm:\n  tool_schemas: catalog\n");
    let out = t.al(&["--provider", "scripted", "run", "--goal", "g", "--dry-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("llm.tool_schemas: catalog") && e.contains("prompts: lean"), "{e}");
    t.write("ws/agentloop.yaml", "llm:\n  tool_schemas: sometimes\n");
    let out = t.al(&["--provider", "scripted", "run", "--goal", "g", "--dry-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("llm.tool_schemas") && e.contains("`auto`, `answer`, `catalog`"), "{e}");
}

/// In event mode a tool the router runs is handed off, not run by Act: arguments its schema does
/// not take never leave. The step records the refusal as Act would, and the next plan's request
/// is the one emitted.
#[test]
fn arguments_that_do_not_fit_are_never_handed_to_the_router() {
    let t = T::new();
    t.write("root/agentloop.yaml", crate::handle::CONFIG);
    t.write(
        "root/script.yaml",
        r#"frame:
  - answer: {goal: fetch a page, definition_of_done: [page fetched, notes written, done], can_proceed: true}
plan:
  - answer: {next_action: {tool: jina-reader, args: {uri: "http://example.com"}}, rationale: fetch}
  - answer: {next_action: {tool: jina-reader, args: {url: "http://example.com"}}, rationale: the argument is url}
reflect:
  - answer: {decision: continue, reason: jina-reader takes url}
"#,
    );
    let start = serde_json::json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "fetch http://example.com"}}});
    let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(start.to_string()).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let events = v["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{v}");
    assert_eq!(events[0]["type"], "agentic.tool_request.jina-reader");
    assert_eq!(
        (&events[0]["payload"]["step"], &events[0]["payload"]["url"]),
        (&json!(2), &json!("http://example.com"))
    );
    assert!(events[0]["payload"].get("uri").is_none(), "{v}");
    let run = v["state_updates"]["last_run_id"].as_str().unwrap();
    let trace = std::fs::read_to_string(t.path(&format!("root/runs/{run}/trace.jsonl"))).unwrap();
    let act: Value =
        trace.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).find(|e| e["phase"] == "act").unwrap();
    assert_eq!((act["step"].as_u64(), act["result_status"].as_str()), (Some(1), Some("error")), "{act}");
    assert!(act["error"].as_str().unwrap().contains("url"), "{act}");
}

/// Near misses are mended against the named tool's own schema before Act checks them, as the
/// union mends them against its variant: a number as text, an enum value in another case, a
/// null for an optional argument, a key the tool does not take; and a key beside `tool` and
/// `args` is dropped whichever tool is named.
#[test]
fn near_misses_are_mended_against_the_tool_the_answer_names() {
    let t = T::new();
    write_script(
        &t,
        r#"plan:
  - answer: {next_action: {tool: file_read, args: {path: notes.txt, limit: "5", offset: null}}, rationale: read}
  - answer: {next_action: {tool: file_write, args: {path: artifacts/n.md, content: note, mode: Append, evil: 1}, note: x}, rationale: y}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}], decision: continue, reason: read}
  - answer: {satisfied: [{item: 2, steps: [2]}, {item: 3, steps: [2]}], decision: done, reason: ok, outcome: noted}
"#,
    );
    let out = run(&t);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let trace = t.trace();
    let plans: Vec<&Value> = trace.iter().filter(|e| e["phase"] == "plan").collect();
    assert_eq!((&plans[0]["attempt"], &plans[1]["attempt"]), (&json!(1), &json!(1)));
    assert_eq!(plans[0]["args"], json!({"path": "notes.txt", "limit": 5}));
    assert_eq!(plans[1]["args"], json!({"path": "artifacts/n.md", "content": "note", "mode": "append"}));
    assert!(trace.iter().filter(|e| e["phase"] == "act").all(|e| e["result_status"] == "ok"));
    assert_eq!(t.read("ws/artifacts/n.md"), "note");
}

/// A failed tool is requested again only with arguments its schema still takes: when the
/// operator narrowed the schema between two turns, the run escalates, saying why, and nothing is
/// sent to the router.
#[test]
fn a_retry_sends_nothing_the_tool_no_longer_takes() {
    let h = crate::handle::H::new();
    let (run, _) = h.start();
    let narrowed = crate::handle::CONFIG.replace("url: {type: string}", "url: {type: string, maxLength: 5}");
    h.t.write("root/agentloop.yaml", &narrowed);
    let v = h.result(&run, 1, "jina-reader", "error");
    assert!(crate::handle::types(&v).iter().all(|t| !t.starts_with("agentic.tool_request")), "{v}");
    assert_eq!(crate::handle::types(&v), ["agent.escalated"], "{v}");
    let r = h.t.json(&format!("root/runs/{run}/result.json"));
    assert!(
        r["reason"].as_str().unwrap().contains("is not requested again")
            && r["reason"].as_str().unwrap().contains("url"),
        "{r}"
    );
}
