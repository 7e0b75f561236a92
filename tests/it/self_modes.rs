//! Fatigue that ends a running run at a commit point (stop `resting`, exit 10, resumable with
//! `run --continue` after a rest), and the agent switching modes itself (`modes.auto`): it rests
//! after a run that left it tired or stressed, at most once per window, and dreams when a `run`
//! has nothing to do.

use crate::common::*;
use serde_json::Value;

/// Three steps of 45,000 tokens after a framing of 50,000: over a window of 150,000 after the
/// third plan (160,000 tokens), before it acts. The replay goes on where the run's cursor stopped, so
/// the same script finishes the run when it goes on: it acts, and Reflect says done.
const LONG: &str = r#"frame:
  - answer: {goal: g, definition_of_done: [notes read, summary written, facts noted]}
    usage: {input_tokens: 50000, output_tokens: 0}
plan:
  - answer: {next_action: {tool: file_read, args: {path: n1.txt}}}
    usage: {input_tokens: 20000, output_tokens: 0}
  - answer: {next_action: {tool: file_read, args: {path: n2.txt}}}
    usage: {input_tokens: 20000, output_tokens: 0}
  - answer: {next_action: {tool: file_read, args: {path: n3.txt}}}
    usage: {input_tokens: 20000, output_tokens: 0}
reflect:
  - answer: {decision: continue, reason: more to read}
    usage: {input_tokens: 25000, output_tokens: 0}
  - answer: {decision: continue, reason: more to read}
    usage: {input_tokens: 25000, output_tokens: 0}
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [2]}, {item: 3, steps: [3]}], decision: done, reason: ok, outcome: all read}
    usage: {input_tokens: 25000, output_tokens: 0}
"#;

const LATER: &str = "2026-01-01T00:01:00Z";

fn setup(t: &T, config: &str) {
    for n in ["n1", "n2", "n3"] {
        t.write(&format!("ws/{n}.txt"), "a note\n");
    }
    t.write("ws/agentloop.yaml", config);
    t.write("long.yaml", LONG);
}

fn events(t: &T, name: &str) -> Vec<Value> {
    t.trace().into_iter().filter(|e| e["event"] == name).collect()
}

#[test]
fn a_run_that_fills_its_window_stops_resting_at_a_commit_point_and_goes_on_after_a_rest() {
    let t = T::new();
    setup(&t, "rest: {window: 1h, max_tokens: 150000}\nmodes: {auto: false}\n");
    let out = t.al(&["--script", "long.yaml", "run", "--goal", "read the notes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    // It stopped after the third plan, before acting: 160000 tokens, not the whole run.
    let st = t.json("ws/state.json");
    assert_eq!((st["status"].as_str(), st["stop"].as_str()), (Some("escalated"), Some("resting")), "{st}");
    assert_eq!(st["usage"]["input_tokens"], 160000, "{st}");
    assert_eq!(st["resume_at"], "act", "{st}");
    let reason = st["reason"].as_str().unwrap();
    assert!(reason.contains("160000 tokens used in the last 1h (rest.max_tokens 150000)"), "{reason}");
    assert!(reason.contains("it may go on at 2026-01-01T01:00:00"), "{reason}");
    let result = t.json("ws/result.json");
    assert_eq!(result["stop"], "resting");
    let fin = events(&t, "run.finished");
    assert_eq!(fin.len(), 1);
    assert!(fin[0]["reason"].as_str().unwrap().starts_with("resting: agent `default` is tired"), "{}", fin[0]);
    assert!(events(&t, "agent.rested").is_empty(), "modes.auto: false: the agent does not rest itself");
    assert!(!stderr(&out).contains("rested itself"), "{}", stderr(&out));
    // status says how it ended and how to go on.
    let human = stdout(&t.al(&["status"]).output().unwrap());
    assert!(human.contains("status      escalated (resting: agent `default` is tired"), "{human}");
    assert!(human.contains("run --continue` goes on once the agent has rested"), "{human}");
    assert!(human.contains("modes       manual (modes.auto: false)"), "{human}");
    let sj = json_out(&t.al(&["status", "--json"]).output().unwrap());
    assert_eq!(sj["stop"], "resting");
    // While the window is full, going on is refused (exit 10) and nothing is written.
    let before = t.read("ws/trace.jsonl");
    let out = t.al(&["--script", "long.yaml", "run", "--continue"]).output().unwrap();
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    assert_eq!(t.read("ws/trace.jsonl"), before);
    // Rested, it goes on where it stopped (it acts on the third plan) and ends done.
    assert_eq!(t.al(&["rest"]).output().unwrap().status.code(), Some(0));
    let out = t.al(&["--script", "long.yaml", "run", "--continue"]).env("AGENTLOOP_NOW", LATER).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let st = t.json("ws/state.json");
    assert_eq!(st["status"], "done", "{st}");
    assert_eq!(st["tools_called"].as_array().unwrap().len(), 3, "{st}");
    let cont = events(&t, "run.continued");
    assert_eq!(cont.len(), 1);
    assert_eq!(cont[0]["data"]["after"], "resting");
}

#[test]
fn the_agent_rests_itself_when_a_run_tires_it_once_per_window_and_not_when_told_not_to() {
    let t = T::new();
    setup(&t, "rest: {window: 1h, max_tokens: 150000, tasks: [memory_prune]}\n");
    let out = t.al(&["--script", "long.yaml", "run", "--goal", "read the notes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("the agent rested itself (its rolling usage window filled during the run): fatigue 100% -> 53.3%"),
        "{err}"
    );
    // The switch is in the trace, after the run's end, and in status.
    let rested = events(&t, "agent.rested");
    assert_eq!(rested.len(), 1, "{:?}", t.trace());
    assert_eq!(rested[0]["data"]["auto"], true);
    assert_eq!(rested[0]["data"]["tasks"][0]["task"], "memory_prune");
    assert_eq!(t.trace().last().unwrap()["event"], "agent.rested");
    let sj = json_out(&t.al(&["status", "--json"]).output().unwrap());
    assert_eq!(sj["modes"]["auto"], true, "{sj}");
    assert_eq!(sj["modes"]["last_rest"]["by"], "agent", "{sj}");
    assert_eq!(sj["rest"]["fatigue"], 53.3, "{sj}");
    let human = stdout(&t.al(&["status"]).output().unwrap());
    assert!(
        human.contains("modes       auto (rests when tired, dreams when idle); last rest 2026-01-01T00:00:00.000Z, by the agent itself"),
        "{human}"
    );
    // Rested, it goes on at once: no one had to run `agentloop rest`.
    let out = t.al(&["--script", "long.yaml", "run", "--continue"]).env("AGENTLOOP_NOW", LATER).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Tired again within the window, it does not rest itself again: the window still binds.
    let out = t
        .al(&["--script", "long.yaml", "run", "--new", "--goal", "read them again"])
        .env("AGENTLOOP_NOW", LATER)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(10), "{err}");
    assert!(
        err.contains("rested at 2026-01-01T00:00:00.000Z, within rest.window: it does not rest itself again"),
        "{err}"
    );
    assert!(events(&t, "agent.rested").is_empty(), "{:?}", t.trace());
}

/// Every phase fails: the run escalates after the forced reframe (see wellbeing.rs).
#[test]
fn stress_at_its_threshold_puts_the_agent_to_rest_on_its_own() {
    let t = T::new();
    t.write("script.yaml", &frustrating_script());
    t.write("ws/agentloop.yaml", "stress: {per_escalation: 80, threshold: 75}\nrest: {tasks: []}\n");
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the agent rested itself (stress 80 reached stress.threshold 75)"),
        "{}",
        stderr(&out)
    );
    let sj = json_out(&t.al(&["status", "--json"]).output().unwrap());
    assert_eq!(sj["stress"]["level"], 40.0, "{sj}");
    // So the next run is not refused.
    let out = t.al(&["--script", "script.yaml", "run", "--new", "--goal", "g", "--dry-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Turned off, the same stress refuses the next run until someone rests the agent.
    let t = T::new();
    t.write("script.yaml", &frustrating_script());
    t.write("ws/agentloop.yaml", "stress: {per_escalation: 80, threshold: 75}\nmodes: {auto: false}\n");
    assert_eq!(t.al(&["--script", "script.yaml", "run", "--goal", "g"]).output().unwrap().status.code(), Some(3));
    let out = t.al(&["--script", "script.yaml", "run", "--new", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
}

const DONE: &str = r#"frame:
  - answer: {goal: g, definition_of_done: [notes read, summary written, facts noted]}
plan:
  - answer: {next_action: {tool: file_read, args: {path: n1.txt}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: read}
"#;

#[test]
fn a_run_with_nothing_to_do_dreams_without_a_model_and_only_when_there_is_something_new() {
    let t = T::new();
    t.write("ws/n1.txt", "a note\n");
    t.write("script.yaml", DONE);
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "read the note"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run_id = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
    // Nothing to do: the run is reported, and the idle agent consolidates it (no model: no
    // script is named, and no curiosity budget is set).
    let out = t.al(&["run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains(&format!("run {run_id} ended done")), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("the agent dreamed while idle: 1 run(s) consolidated, 0 question(s) explored"),
        "{}",
        stderr(&out)
    );
    let dreamed = events(&t, "agent.dreamed");
    assert_eq!(dreamed.len(), 1);
    assert_eq!(dreamed[0]["data"]["dream"]["runs"][0], run_id.as_str());
    assert_eq!(dreamed[0]["data"]["dream"]["model"], false);
    // Idle again with nothing new: no dream, no entry.
    let out = t.al(&["run"]).output().unwrap();
    assert!(!stderr(&out).contains("dreamed"), "{}", stderr(&out));
    assert_eq!(events(&t, "agent.dreamed").len(), 1);
    // Turned off: a run with nothing to do only reports.
    let t = T::new();
    t.write("ws/n1.txt", "a note\n");
    t.write("ws/agentloop.yaml", "modes: {auto: false}\n");
    t.write("script.yaml", DONE);
    assert_eq!(
        t.al(&["--script", "script.yaml", "run", "--goal", "read the note"]).output().unwrap().status.code(),
        Some(0)
    );
    let out = t.al(&["run"]).output().unwrap();
    assert!(!stderr(&out).contains("dreamed"), "{}", stderr(&out));
    assert!(events(&t, "agent.dreamed").is_empty());
}

#[test]
fn a_workspace_from_elsewhere_may_turn_the_modes_off_but_not_on() {
    let t = T::new();
    t.write("xdg/agentloop/config.yaml", "modes: {auto: false}\n");
    t.write("ws/agentloop.yaml", "modes: {auto: true}\n");
    let out = t.untrusted().args(["-w", "ws", "rest"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("modes.auto"), "{}", stderr(&out));
    t.write("ws/agentloop.yaml", "modes: {auto: false}\n");
    t.untrusted().args(["-w", "ws", "rest"]).assert().success();
}
