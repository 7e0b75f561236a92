//! Workspace, trace, config, locks, errors and exit codes.

use crate::common::*;
use predicates::prelude::*;
use std::io::{BufRead, BufReader};

#[test]
fn init_writes_the_workspace_layout() {
    let t = T::new();
    let out = t.cmd().args(["init", "ws", "--goal", "Summarise the news"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let run_id = stdout(&out).trim().to_string();
    assert_eq!(run_id.len(), 26, "ULID run id");
    for f in
        ["context.md", "memory.md", "plan.md", "decisions.md", "skills.md", "trace.jsonl", "state.json", "artifacts"]
    {
        assert!(t.exists(&format!("ws/{f}")), "missing {f}");
    }
    let trace = t.trace();
    assert_eq!(trace.len(), 1);
    assert_eq!(trace[0]["event"], "run.started");
    assert_eq!(trace[0]["schema_version"], 1);
    assert_eq!(trace[0]["run_id"], run_id.as_str());
    assert_eq!(trace[0]["ts"], "2026-01-01T00:00:00.000Z");
    let state = t.json("ws/state.json");
    assert_eq!(state["schema_version"], 1);
    assert_eq!(state["status"], "running");
    assert_eq!(state["step"], 0);
    assert_eq!(state["limits"]["max_steps"], 20);
    assert_eq!(state["limits"]["max_reframes"], 2);
    assert!(t.read("ws/memory.md").contains("## Definition of Done"));
    assert!(t.read("ws/plan.md").contains("## Next Action"));
    assert!(t.read("ws/context.md").contains("Summarise the news"));
    // Byte-stable under the fixed clock.
    t.cmd().args(["init", "ws2", "--goal", "Summarise the news"]).assert().success();
    assert_eq!(t.read("ws/trace.jsonl"), t.read("ws2/trace.jsonl"));
}

#[test]
fn init_context_from_stdin_json_and_yaml() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g", "--context", "-"]).write_stdin("{\"tone\": \"dry\"}").assert().success();
    assert!(t.read("ws/context.md").contains("```json\n{\n  \"tone\": \"dry\"\n}\n```"));
    t.write("ctx.yaml", "tone: warm\nmax_words: 200\n");
    t.cmd().args(["init", "ws2", "--goal", "g", "--context", "ctx.yaml"]).assert().success();
    assert!(t.read("ws2/context.md").contains("```yaml\ntone: warm"));
    t.write("ctx.md", "# Notes\nplain *markdown*");
    t.cmd().args(["init", "ws3", "--goal", "g", "--context", "ctx.md"]).assert().success();
    assert!(t.read("ws3/context.md").contains("# Notes\nplain *markdown*"));
}

#[test]
fn init_refuses_to_clobber_without_force() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "one"]).assert().success();
    t.cmd()
        .args(["init", "ws", "--goal", "two"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already holds run").and(predicate::str::contains("hint: ")));
    assert!(t.read("ws/context.md").contains("one"));
    let first = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
    t.cmd().args(["init", "ws", "--goal", "two", "--force"]).assert().success();
    assert!(t.read("ws/context.md").contains("two"));
    assert_eq!(t.trace().len(), 1, "the new run has its own trace");
    // Nothing is overwritten: the first run moved to runs/<id>/, marked interrupted.
    assert!(t.read(&format!("ws/runs/{first}/context.md")).contains("one"));
    assert_eq!(t.read(&format!("ws/runs/{first}/trace.jsonl")).lines().count(), 1);
    assert_eq!(t.json(&format!("ws/runs/{first}/state.json"))["interrupted"], true);
    assert_ne!(t.json("ws/state.json")["run_id"], first.as_str());
}

#[test]
fn status_reports_budgets_as_json() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g", "--max-steps", "7"]).assert().success();
    let out = t.al(&["status", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["budgets"]["steps"], serde_json::json!({"used": 0, "max": 7, "left": 7}));
    assert_eq!(v["next"], "frame");
    t.al(&["status"]).assert().success().stdout(predicate::str::contains("steps       0 of 7"));
    t.cmd()
        .args(["-w", "nowhere", "status"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("workspace nowhere does not exist"));
}

#[test]
fn corrupt_trace_lines_are_reported_and_skipped() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let mut trace = t.read("ws/trace.jsonl");
    trace.push_str("{not json\n");
    trace.push_str(&t.read("ws/trace.jsonl"));
    trace.push_str("{\"ts\": \"trunc");
    t.write("ws/trace.jsonl", &trace);
    let out = t.al(&["trace", "show", "--json"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(stdout(&out).lines().count(), 2);
    let err = stderr(&out);
    assert!(err.contains("trace.jsonl:2: skipped a corrupt line"), "{err}");
    assert!(err.contains("trace.jsonl:4: skipped a corrupt line"), "{err}");
    t.al(&["trace", "stats"]).assert().success();
}

fn synthetic_trace(t: &T, n: usize) {
    let mut s = String::new();
    for i in 0..n {
        let phase = ["plan", "act", "reflect"][i % 3];
        let mut e = serde_json::json!({"ts": format!("2026-01-01T00:{:02}:00.000Z", i % 60), "run_id": if i < n / 2 { "RUN1" } else { "RUN2" }, "step": i / 3, "phase": phase, "event": phase});
        if phase == "act" {
            e["tool"] = serde_json::json!(if i % 2 == 0 { "file_read" } else { "web_fetch" });
            e["result_status"] = serde_json::json!(if i % 7 == 1 { "error" } else { "ok" });
            if i % 7 == 1 {
                e["error"] = serde_json::json!("boom");
            }
        } else {
            e["usage"] = serde_json::json!({"input_tokens": 10, "output_tokens": 2});
            e["cost_usd"] = serde_json::json!(0.001);
        }
        s.push_str(&e.to_string());
        s.push('\n');
    }
    t.write("ws/trace.jsonl", &s);
}

#[test]
fn trace_filters() {
    let t = T::new();
    synthetic_trace(&t, 30);
    let count = |args: &[&str]| {
        let mut a = vec!["trace", "show", "--json", "--all-runs"];
        a.extend_from_slice(args);
        let out = t.al(&a).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out).lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect::<Vec<_>>()
    };
    assert!(count(&["--phase", "act"]).iter().all(|e| e["phase"] == "act"));
    assert_eq!(count(&["--phase", "act"]).len(), 10);
    assert!(count(&["--tool", "web_fetch"]).iter().all(|e| e["tool"] == "web_fetch"));
    let errors = count(&["--errors"]);
    assert!(!errors.is_empty() && errors.iter().all(|e| e["result_status"] == "error"));
    assert_eq!(count(&["--step", "2"]).len(), 3);
    assert!(count(&["--run", "last"]).iter().all(|e| e["run_id"] == "RUN2"));
    assert_eq!(count(&["--run", "RUN1"]).len(), 15);
    assert_eq!(count(&["--since", "2026-01-01T00:20:00Z"]).len(), 10);
    // --since as a duration counts back from the (fixed) clock: all 30 are within the hour.
    assert_eq!(count(&["--since", "1h"]).len(), 30);
    t.al(&["trace", "show", "--since", "yesterday-ish"]).assert().code(2);
    // Without --run or --all-runs: the latest run, saying so on stderr.
    let out = t.al(&["trace", "show", "--json"]).output().unwrap();
    let latest: Vec<serde_json::Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(latest.len(), 15);
    assert!(latest.iter().all(|e| e["run_id"] == "RUN2"));
    assert!(stderr(&out).contains("showing the latest run, RUN2; 1 earlier run(s)"), "{}", stderr(&out));
    // Every run: a rule where the next run begins.
    let all = stdout(&t.al(&["trace", "show", "--all-runs"]).output().unwrap());
    assert_eq!(all.lines().filter(|l| l.starts_with("── run ")).collect::<Vec<_>>(), ["── run RUN2 ──"]);
    let stats = t.al(&["trace", "stats", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(v["runs"], 2);
    // Steps across runs add up: RUN1 reached step 4, RUN2 step 9.
    assert_eq!(v["steps"], 13);
    // Notes are cut to 80 characters off a terminal; --wide keeps them whole.
    let long = "x".repeat(200);
    t.write(
        "ws/trace.jsonl",
        &format!(
            "{{\"ts\":\"t\",\"run_id\":\"R\",\"step\":1,\"event\":\"act\",\"phase\":\"act\",\"error\":\"{long}\"}}\n"
        ),
    );
    let cut = stdout(&t.al(&["trace", "show"]).output().unwrap());
    assert!(cut.contains(&"x".repeat(80)) && !cut.contains(&"x".repeat(81)), "{cut}");
    assert!(stdout(&t.al(&["trace", "show", "--wide"]).output().unwrap()).contains(&long));
    assert_eq!(v["phases"]["plan"]["input_tokens"], 100);
    assert_eq!(v["tools"]["file_read"]["entries"], 5);
}

/// `trace show` and `trace stats` pass over lines a filter cannot keep before parsing them; the
/// lines here hold a filter's value in other fields, or the filtered field written in forms the
/// trace writer never uses (spaces, `\u` and `\/` escapes), and every filter must still keep
/// exactly the entries a full reading keeps.
#[test]
fn trace_prefilter_never_changes_results() {
    let t = T::new();
    let lines = [
        // A plan entry whose words and args name the act phase, a tool, an error, a step.
        r#"{"ts":"2026-01-01T00:00:00Z","run_id":"R","step":1,"phase":"plan","event":"plan","args":{"phase":"act","tool":"web_fetch","step":7,"x":"error"},"reason":"next: \"phase\":\"act\" with \"tool\":\"web_fetch\", \"step\":7"}"#,
        // The event is `act` but the phase is not.
        r#"{"ts":"2026-01-01T00:01:00Z","run_id":"R","step":2,"phase":"reflect","event":"act","tool":"file_read"}"#,
        // Written by hand: spaces around the colons.
        r#"{"ts": "2026-01-01T00:02:00Z", "run_id": "R", "step" : 7, "phase": "act", "event": "act", "tool": "web_fetch", "error" : "boom"}"#,
        // Escapes serde_json never writes: the same values, spelt otherwise.
        r#"{"ts":"2026-01-01T00:03:00Z","run_id":"R","step":3,"phase":"\u0061ct","event":"act","tool":"mcp\/fetch","result_status":"\u0065rror"}"#,
        // Steps that only start like 7, or come after another "step" that is not the key.
        r#"{"ts":"2026-01-01T00:04:00Z","run_id":"R","step":70,"phase":"act","event":"act","tool":"web_fetch"}"#,
        r#"{"ts":"2026-01-01T00:05:00Z","run_id":"R","reason":"\"step\":7","step":17,"phase":"act","event":"act"}"#,
        // The writer's own form.
        r#"{"ts":"2026-01-01T00:06:00Z","run_id":"R","step":7,"phase":"act","event":"act","tool":"mcp/fetch","result_status":"error"}"#,
        r#"{"ts":"2026-01-01T00:07:00Z","run_id":"R","step":7,"phase":"reflect","event":"reflect","error":null}"#,
    ];
    t.write("ws/trace.jsonl", &(lines.join("\n") + "\n"));
    let show = |args: &[&str]| {
        let mut a = vec!["trace", "show", "--json", "--all-runs"];
        a.extend_from_slice(args);
        let out = t.al(&a).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stderr(&out).is_empty(), "no line is corrupt: {}", stderr(&out));
        stdout(&out).lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect::<Vec<_>>()
    };
    let all = show(&[]);
    assert_eq!(all.len(), lines.len());
    let is_error = |e: &serde_json::Value| !e["error"].is_null() || e["result_status"] == "error";
    type Keep = fn(&serde_json::Value) -> bool;
    let cases: [(&[&str], Keep, usize); 6] = [
        (&["--phase", "act"], |e| e["phase"] == "act", 5),
        (&["--tool", "web_fetch"], |e| e["tool"] == "web_fetch", 2),
        (&["--tool", "mcp/fetch"], |e| e["tool"] == "mcp/fetch", 2),
        (&["--step", "7"], |e| e["step"] == 7, 3),
        (&["--errors"], |e| !e["error"].is_null() || e["result_status"] == "error", 3),
        (&["--phase", "act", "--step", "7", "--errors"], |e| e["phase"] == "act" && e["step"] == 7, 2),
    ];
    for (args, keep, n) in cases {
        let want: Vec<_> = all.iter().filter(|e| keep(e)).cloned().collect();
        let got = show(args);
        assert_eq!(got.len(), n, "{args:?}: {got:?}");
        assert_eq!(got, want, "{args:?}");
        if args.contains(&"--errors") {
            assert!(got.iter().all(is_error));
        }
        // Stats sum the same entries.
        let mut a = vec!["trace", "stats", "--json"];
        a.extend_from_slice(args);
        let stats: serde_json::Value = serde_json::from_slice(&t.al(&a).output().unwrap().stdout).unwrap();
        assert_eq!(stats["total"]["entries"], n, "{args:?}: {stats}");
    }
    // Human output goes through the same buffered writer: one row per kept entry.
    let human = stdout(&t.al(&["trace", "show", "--phase", "act"]).output().unwrap());
    assert_eq!(human.lines().count(), 1 + 5, "{human}");
}

#[test]
fn broken_pipe_exits_quietly() {
    let t = T::new();
    synthetic_trace(&t, 5000);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .args(["-w", "ws", "trace", "show", "--all-runs"])
        .current_dir(t.root())
        .env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("AGENTLOOP_NOW", NOW)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    // The reader is dropped here, like `| head -1`.
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit {:?}: {}", out.status, stderr(&out));
    assert!(!line.is_empty());
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[test]
fn config_layers_and_sources() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    t.write("xdg/agentloop/config.yaml", "max_steps: 11\nmax_reframes: 4\nllm: {model: user-model}\n");
    t.write("ws/agentloop.yaml", "max_steps: 12\nllm:\n  temperature: 0.5\n");
    let out = t
        .al(&["config", "show", "--json", "--max-reframes", "9"])
        .env("AGENTLOOP_LLM__MODEL", "env-model")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["max_steps"], 12);
    assert_eq!(v["config"]["max_reframes"], 9);
    assert_eq!(v["config"]["llm"]["model"], "env-model");
    assert_eq!(v["config"]["llm"]["temperature"], 0.5);
    assert_eq!(v["sources"]["max_steps"], "ws/agentloop.yaml");
    assert_eq!(v["sources"]["max_reframes"], "command line");
    assert_eq!(v["sources"]["llm.model"], "environment");
    assert_eq!(v["sources"]["timeout"], "default");
    let text = t.al(&["config", "show"]).env("AGENTLOOP_MAX_STEPS", "13").output().unwrap();
    assert!(stdout(&text).contains("max_steps = 13  # environment"), "{}", stdout(&text));
    // What `auto` resolves to, and why.
    let text = stdout(&t.al(&["config", "show"]).env("OPENAI_API_KEY", "sk-test").output().unwrap());
    assert!(text.contains("# provider: openai (llm.provider is auto and OPENAI_API_KEY is set"), "{text}");
    assert!(text.contains("# model: user-model (llm.model names it)"), "{text}");
    let v: serde_json::Value =
        serde_json::from_slice(&t.al(&["config", "show", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(v["resolved"]["error"], "no model provider is configured");
    // JSON config files work too.
    std::fs::remove_file(t.path("ws/agentloop.yaml")).unwrap();
    t.write("ws/agentloop.json", "{\"max_steps\": 14}");
    let out = t.al(&["config", "show", "--json"]).output().unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["config"]["max_steps"], 14);
}

#[test]
fn config_errors_name_the_file_and_key() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    t.write("ws/agentloop.yaml", "llm:\n  modle: x\n");
    t.al(&["status"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("ws/agentloop.yaml at key `llm.modle`: unknown field `modle`"));
    t.write("ws/agentloop.yaml", "max_steps: many\n");
    t.al(&["status"]).assert().code(2).stderr(predicate::str::contains("ws/agentloop.yaml at key `max_steps`"));
    t.write("ws/agentloop.yaml", "max_steps: [1\n");
    t.al(&["status"]).assert().code(2).stderr(predicate::str::contains("invalid YAML in ws/agentloop.yaml"));
    // The man page and completions come from the CLI alone: a broken config cannot stop them.
    t.al(&["man"]).assert().success().stdout(predicate::str::contains(".SH \"EXIT STATUS\""));
    t.al(&["completions", "bash"]).assert().success().stdout(predicate::str::contains("agentloop"));
    std::fs::remove_file(t.path("ws/agentloop.yaml")).unwrap();
    t.write("xdg/agentloop/config.yaml", "colour: red\n");
    t.al(&["status"]).assert().code(2).stderr(predicate::str::contains("xdg/agentloop/config.yaml at key `colour`"));
    std::fs::remove_file(t.path("xdg/agentloop/config.yaml")).unwrap();
    // An AGENTLOOP_* variable naming no key is ignored with a warning; a bad value for a real
    // key stops commands that act (those that only read warn and go on).
    t.al(&["status"])
        .env("AGENTLOOP_BOGUS_KEY", "1")
        .assert()
        .success()
        .stderr(predicate::str::contains("AGENTLOOP_BOGUS_KEY names no configuration key, so it is ignored"));
    t.al(&["plan"])
        .env("AGENTLOOP_MAX_STEPS", "lots")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("AGENTLOOP_MAX_STEPS"));
    t.al(&["status", "--provider", "nope"]).assert().code(2).stderr(predicate::str::contains("llm.provider"));
    t.al(&["status", "--config", "missing.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("missing.yaml does not exist"));
    t.al(&["--no-such-flag"]).assert().code(2);
}

#[test]
fn a_value_outside_a_closed_set_is_refused_naming_the_valid_ones() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    for (yaml, key, expected) in [
        (
            "llm: {structured: xml}\n",
            "llm.structured",
            "unknown variant `xml`, expected one of `tools`, `json`, `auto`",
        ),
        (
            "llm: {provider: gemini}\n",
            "llm.provider",
            "unknown variant `gemini`, expected one of `anthropic`, `openai`, `ollama`, `scripted`, `auto`",
        ),
        ("logging: {format: yaml}\n", "logging.format", "unknown variant `yaml`, expected `text` or `json`"),
        (
            "logging: {level: loud}\n",
            "logging.level",
            "unknown variant `loud`, expected one of `debug`, `info`, `warn` (in any case; `warning` is `warn`)",
        ),
        (
            "memory: {compact_with: magic}\n",
            "memory.compact_with",
            "unknown variant `magic`, expected `model` or `mechanical`",
        ),
        (
            "mcp: {servers: {a: {type: websocket, url: 'http://h'}}}\n",
            "mcp.servers.a.type",
            "unknown variant `websocket`, expected `stdio` or `http`",
        ),
    ] {
        t.write("ws/agentloop.yaml", yaml);
        let out = t.al(&["status"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{yaml}");
        assert_eq!(
            stderr(&out).lines().next().unwrap_or(""),
            format!("error: invalid configuration in ws/agentloop.yaml at key `{key}`: {expected}"),
            "{yaml}"
        );
    }
    std::fs::remove_file(t.path("ws/agentloop.yaml")).unwrap();
    let providers = "expected one of `anthropic`, `openai`, `ollama`, `scripted`, `auto`";
    let out = t.al(&["status", "--provider", "gemini"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).lines().next().unwrap_or(""),
        format!("error: invalid value on the command line for `llm.provider`: unknown variant `gemini`, {providers}")
    );
    let out = t.al(&["plan"]).env("AGENTLOOP_PROVIDER", "gemini").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).lines().next().unwrap_or(""),
        format!("error: invalid configuration in environment variable AGENTLOOP_PROVIDER at key `llm.provider`: unknown variant `gemini`, {providers}")
    );
    // The values that are valid still read as they did.
    t.write("ws/agentloop.yaml", "llm: {structured: json, provider: ollama}\nlogging: {format: json, level: warn}\nmemory: {compact_with: mechanical}\n");
    t.al(&["status"]).assert().success();
}

#[test]
fn agent_profiles_are_a_layer() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    t.write(
        "ws/agents/researcher.yaml",
        "system_prompt: Be thorough.\nmax_steps: 30\nallowed_tools: [web_fetch, file_write]\n",
    );
    let out = t.al(&["config", "show", "--json", "--agent", "researcher"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["max_steps"], 30);
    assert_eq!(v["config"]["system_prompt"], "Be thorough.");
    assert!(v["sources"]["max_steps"].as_str().unwrap().contains("agent profile"));
    t.al(&["config", "show", "--agent", "ghost"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("agent profile `ghost` not found"));
}

#[test]
fn lock_contention_fails_fast_or_waits() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let lock = std::fs::OpenOptions::new().read(true).write(true).open(t.path("ws/.agentloop.lock")).unwrap();
    lock.try_lock().unwrap();
    std::fs::write(t.path("ws/.agentloop.lock"), "4242").unwrap();
    t.al(&["frame"])
        .assert()
        .code(7)
        .stderr(predicate::str::contains("locked by agentloop process 4242").and(predicate::str::contains("--wait")));
    let start = std::time::Instant::now();
    t.al(&["frame", "--wait=1"]).assert().code(7);
    assert!(start.elapsed() >= std::time::Duration::from_millis(900));
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        lock.unlock().unwrap();
    });
    // With the lock released during the wait, the command proceeds (and fails later for want of a model).
    t.al(&["frame", "--wait=10"]).assert().code(2).stderr(predicate::str::contains("no model provider"));
    releaser.join().unwrap();
}

#[test]
fn two_processes_never_both_write() {
    let t = T::new();
    crate::shell_sandbox::bwrap_or_none(&t);
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [sleep], timeout: 10s}\n");
    t.write(
        "script.yaml",
        "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\nplan:\n  - answer: {next_action: {tool: shell, args: {argv: [sleep, '3']}}, expected_outcome: x, rationale: y}\nreflect:\n  - answer: {decision: escalate, reason: stop here}\n",
    );
    let bin = assert_cmd::cargo::cargo_bin("agentloop");
    let spawn = || {
        std::process::Command::new(&bin)
            .args(["-w", "ws", "--script", "script.yaml", "run", "--goal", "g"])
            .current_dir(t.root())
            .env_clear()
            .env("AGENTLOOP_TRUST_ALL", "1")
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", t.path("home"))
            .env("XDG_CONFIG_HOME", t.path("xdg"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn();
    // Start the second process only once the first holds the lock (its pid is in the lock file).
    let pid = a.id().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::read_to_string(t.path("ws/.agentloop.lock")).unwrap_or_default().trim() != pid {
        assert!(std::time::Instant::now() < deadline, "the first process never took the lock");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let b = spawn().wait_with_output().unwrap();
    let a = a.wait_with_output().unwrap();
    assert_eq!(b.status.code(), Some(7), "second: {}", stderr(&b));
    assert_eq!(a.status.code(), Some(3), "first: {}", stderr(&a));
    let runs: std::collections::BTreeSet<String> =
        t.trace().iter().map(|e| e["run_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(runs.len(), 1, "only one process wrote");
}

#[test]
fn interrupted_write_leaves_the_old_file_intact() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let before_memory = t.read("ws/memory.md");
    let before_state = t.read("ws/state.json");
    t.write("script.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\n");
    // Killed right before memory.md's rename: the old file is intact and the temp file is left aside.
    let out =
        t.al(&["--script", "script.yaml", "frame"]).env("AGENTLOOP_CRASH_AT", "write:memory.md").output().unwrap();
    assert!(!out.status.success());
    assert_eq!(t.read("ws/memory.md"), before_memory);
    assert_eq!(t.read("ws/state.json"), before_state);
    // The journal was written first, so the next locker completes the phase exactly once.
    t.al(&["status", "--json"]).assert().success();
    t.al(&["--script", "script.yaml", "plan", "--force"]).env("AGENTLOOP_CRASH_AT", "never").assert().code(5);
    let frames = t.trace().iter().filter(|e| e["event"] == "frame").count();
    assert_eq!(frames, 1, "frame applied exactly once");
    assert!(t.read("ws/memory.md").contains("- [ ] a"));
}

#[test]
fn man_page_and_completions_match_the_cli() {
    let t = T::new();
    let out = t.cmd().arg("man").output().unwrap();
    let committed =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man/agentloop.1")).unwrap();
    assert_eq!(stdout(&out), committed, "man/agentloop.1 is stale: run `make man`");
    t.cmd().args(["completions", "bash"]).assert().success().stdout(predicate::str::contains("agentloop"));
    t.cmd().arg("--help").assert().success().stdout(predicate::str::contains("Exit codes"));
    t.cmd().args(["trace", "show", "--help"]).assert().success().stdout(predicate::str::contains("--follow"));
    // A subcommand's help shows its own options and one line pointing at the global ones.
    let help = stdout(&t.cmd().args(["trace", "show", "--help"]).output().unwrap());
    assert!(help.contains("--follow") && !help.contains("--workspace"), "{help}");
    assert!(help.contains("Global options (-w DIR") && help.contains("`agentloop --help`"), "{help}");
    // So does a nested one, and the global options still work after it.
    let help = stdout(&t.cmd().args(["memory", "add", "--help"]).output().unwrap());
    assert!(!help.contains("--workspace") && help.contains("Global options (-w DIR"), "{help}");
    t.cmd().args(["config", "show", "--json"]).assert().success();
    // `--version` or `-V` alone is answered before the CLI is built, word for word as clap says it.
    for flag in ["--version", "-V"] {
        let alone = stdout(&t.cmd().arg(flag).output().unwrap());
        assert_eq!(alone, stdout(&t.cmd().args(["-q", flag]).output().unwrap()), "{flag}");
        assert!(alone.starts_with(&format!("agentloop {}", env!("CARGO_PKG_VERSION"))), "{alone}");
    }
    let top = stdout(&t.cmd().arg("--help").output().unwrap());
    let (_, global) = top.split_once("Global options:").expect("a Global options heading");
    assert!(global.contains("--workspace") && global.contains("--max-cost"), "{top}");
    // The man page keeps the quick start one command per line (no-fill), as --help shows it.
    let quick = committed.find("Quick start").expect("quick start in the man page");
    assert!(committed[..quick].ends_with(".nf\n"), "quick start is not a no-fill block");
    // Help output is snapshotted, so a change to the CLI shows up in review.
    for (args, name) in [
        (vec!["--help"], "help.txt"),
        (vec!["run", "--help"], "help-run.txt"),
        (vec!["handle", "--help"], "help-handle.txt"),
    ] {
        let out = t.cmd().args(&args).output().unwrap();
        golden(name, &stdout(&out));
    }
}

#[test]
fn follow_tails_until_the_run_finishes() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .args(["-w", "ws", "trace", "show", "--json", "--follow"])
        .current_dir(t.root())
        .env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let line = serde_json::json!({"ts": "2026-01-01T00:00:01.000Z", "run_id": "R", "step": 0, "phase": "run", "event": "run.finished"}).to_string();
    let mut f = std::fs::OpenOptions::new().append(true).open(t.path("ws/trace.jsonl")).unwrap();
    std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
    // A watchdog: a follower that never stops must fail the test, not hang it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("trace show --follow did not stop at run.finished");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(stdout(&out).lines().count(), 2);
}

#[test]
fn agents_list_shows_profiles() {
    let t = T::new();
    t.write("ws/agents/researcher.yaml", "description: Digs deep.\nmax_steps: 30\n");
    t.write("ws/agents/broken.yaml", "nonsense_key: 1\n");
    let out = t.al(&["agents", "list"]).output().unwrap();
    let s = stdout(&out);
    assert!(s.contains("researcher") && s.contains("Digs deep."), "{s}");
    assert!(s.contains("INVALID") && s.contains("nonsense_key"), "{s}");
}

#[test]
fn a_torn_trace_line_does_not_swallow_the_next_entry() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let mut f = std::fs::OpenOptions::new().append(true).open(t.path("ws/trace.jsonl")).unwrap();
    std::io::Write::write_all(&mut f, b"{\"ts\": \"2026-01-01T00:00:00Z\", \"run_").unwrap();
    t.write("s.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\n");
    t.al(&["--script", "s.yaml", "frame"]).assert().success();
    let out = t.al(&["trace", "show", "--json"]).output().unwrap();
    assert!(stderr(&out).contains("trace.jsonl:2: skipped a corrupt line"));
    assert!(stdout(&out).lines().any(|l| l.contains("\"event\":\"frame\"")));
}

/// `frame` by hand says where its framing went (never a colon with nothing after it), and
/// `trace show --errors` with no error prints nothing on stdout and says so on stderr, as other
/// empty listings do.
#[test]
fn a_frame_by_hand_says_where_it_went_and_no_errors_is_said_not_headed() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    t.write("s.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\n");
    let out = t.al(&["--script", "s.yaml", "frame"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "step 0 frame proceed: the goal and its Definition of Done are in memory.md\n");
    let out = t.al(&["trace", "show", "--errors"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "", "no header without an entry");
    assert!(stderr(&out).contains("no errors"), "{}", stderr(&out));
    let out = t.al(&["trace", "show", "--tool", "nothing_like_this"]).output().unwrap();
    assert_eq!((stdout(&out).as_str(), stderr(&out).contains("no entries match")), ("", true), "{}", stderr(&out));
    // With entries, the header comes first.
    let shown = stdout(&t.al(&["trace", "show"]).output().unwrap());
    assert!(shown.starts_with("time") && shown.contains(" frame "), "{shown}");
}

/// The README's lines for a binary installed without `make install`: `agentloop man` written
/// to ~/.local/share/man/man1/ is found by `man agentloop`, and piped to `man -l -` reads.
#[test]
fn the_man_page_of_a_copied_binary_installs_as_the_readme_says() {
    if std::process::Command::new("man").arg("--version").output().is_err() {
        missing("man (man-db)");
        return;
    }
    let t = T::new();
    let home = t.path("home");
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    std::fs::create_dir_all(home.join(".local/share/man/man1")).unwrap();
    let page = t.cmd().arg("man").output().unwrap();
    assert_eq!(page.status.code(), Some(0));
    std::fs::write(home.join(".local/share/man/man1/agentloop.1"), &page.stdout).unwrap();
    let path = format!("{}:/usr/bin:/bin", home.join(".local/bin").display());
    let man = |args: &[&str]| {
        let mut c = std::process::Command::new("man");
        c.args(args).env_remove("MANPATH").env("HOME", &home).env("PATH", &path).env("MANPAGER", "cat");
        c.env("MANWIDTH", "80");
        c
    };
    let found = man(&["-w", "agentloop"]).output().unwrap();
    assert_eq!(found.status.code(), Some(0), "{}", stderr(&found));
    assert!(stdout(&found).trim_end().ends_with(".local/share/man/man1/agentloop.1"), "{}", stdout(&found));
    let mut read =
        man(&["-l", "-"]).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(read.stdin.as_mut().unwrap(), &page.stdout).unwrap();
    let read = read.wait_with_output().unwrap();
    assert!(stdout(&read).contains("EXIT STATUS"), "{}", stdout(&read));
}

#[test]
fn the_exit_code_table_has_one_source() {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/COMMANDS.md")).unwrap();
    let section = &readme[readme.find("### Exit codes").unwrap()..];
    let rows: Vec<(u8, String)> = section
        .lines()
        .skip_while(|l| !l.starts_with("|---"))
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            (cells[0].parse().unwrap(), cells[1].to_string())
        })
        .collect();
    let table: Vec<(u8, String)> =
        agentloop_types::error::code::TABLE.iter().map(|(n, m)| (*n, m.to_string())).collect();
    assert_eq!(rows, table, "docs/COMMANDS.md's exit-code table must equal error::code::TABLE");
    let t = T::new();
    let help = stdout(&t.cmd().arg("--help").output().unwrap());
    let footer = &help[help.find("Exit codes:").unwrap()..];
    for (n, _) in agentloop_types::error::code::TABLE {
        assert!(footer.contains(&format!("{n} ")), "help footer misses exit code {n}");
    }
    let man = stdout(&t.cmd().arg("man").output().unwrap());
    for (n, _) in agentloop_types::error::code::TABLE {
        assert!(man.contains(&format!(".TP\n{n}\n")), "man page misses exit code {n}");
    }
}

#[test]
#[should_panic(expected = "the fake server's reply function failed")]
fn a_failed_assert_inside_a_fake_server_fails_the_test() {
    let s = Server::start_with(|_, req| {
        assert_eq!(req.method, "GET", "only GET expected");
        Reply::text(200, "text/plain", "ok")
    });
    let r = ureq::post(&s.url).send("x");
    assert!(r.is_err(), "the failed assert answers 500");
}

#[test]
#[should_panic(expected = "the fake server expected 2 requests")]
fn a_fake_server_checks_its_expected_call_count() {
    let s = Server::start(vec![Reply::text(200, "text/plain", "ok")]).expect_calls(2);
    ureq::get(&s.url).call().unwrap();
}

/// The field names a struct deserializes, read from what serde asks the deserializer for.
fn struct_fields<'de, T: serde::Deserialize<'de>>() -> &'static [&'static str] {
    struct Probe(std::cell::Cell<&'static [&'static str]>);
    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("probe")
        }
    }
    impl std::error::Error for Stop {}
    impl serde::de::Error for Stop {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Stop
        }
    }
    impl<'de> serde::Deserializer<'de> for &Probe {
        type Error = Stop;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0.set(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
            unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let probe = Probe(std::cell::Cell::new(&[]));
    let _ = T::deserialize(&probe);
    probe.0.get()
}

#[test]
fn the_documented_trace_table_names_every_field_of_an_entry() {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/WORKSPACE.md")).unwrap();
    let section = &readme[readme.find("## Trace schema").unwrap()..readme.find("### Recipes").unwrap()];
    let mut documented: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| {
            let cell = l.trim_start_matches('|').split('|').next().unwrap();
            cell.split(',').map(|f| f.trim().trim_matches('`').to_string()).collect::<Vec<_>>()
        })
        .collect();
    documented.sort();
    let mut fields: Vec<String> =
        struct_fields::<agentloop_types::trace::Entry>().iter().map(|s| s.to_string()).collect();
    fields.sort();
    assert_eq!(documented, fields, "docs/WORKSPACE.md's trace-schema table must list exactly trace::Entry's fields");
}

#[test]
fn the_documented_config_block_is_the_defaults_and_loads() {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/CONFIGURATION.md"))
            .unwrap();
    let section = &readme[readme.find("## Configuration").unwrap()..];
    let block = &section[section.find("```yaml\n").unwrap() + 8..];
    let block = &block[..block.find("```").unwrap()];
    let documented: serde_json::Value =
        serde_yaml_ng::from_str(block).expect("docs/CONFIGURATION.md's config block is YAML");
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    let out = t.al(&["config", "show", "--json"]).output().unwrap();
    let defaults = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["config"].clone();
    assert_eq!(
        documented, defaults,
        "docs/CONFIGURATION.md's config block must equal the defaults (`config show --json`)"
    );
    // And it loads as a config file as written.
    t.write("ws/agentloop.yaml", block);
    t.al(&["config", "show"]).assert().success();
}

/// A stderr that is gone (its reader closed it) loses the messages, never the exit code: the
/// command ends with the code it documents, not a panic's 101.
#[test]
fn a_closed_stderr_keeps_the_documented_exit_code() {
    let t = T::new();
    let expected = t.al(&["status"]).output().unwrap().status.code();
    assert_ne!(expected, Some(0));
    for _ in 0..5 {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
            .args(["-w", "ws", "status"])
            .current_dir(t.root())
            .env_clear()
            .env("HOME", t.path("home"))
            .env("XDG_CONFIG_HOME", t.path("xdg"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stderr.take());
        assert_eq!(child.wait().unwrap().code(), expected);
    }
}

/// A key given twice in one mapping is refused, naming the file, the line and the key: two
/// `tools:` blocks would otherwise keep only the second, silently dropping `tools.external`.
#[test]
fn a_key_given_twice_is_refused_naming_the_file_line_and_key() {
    let t = T::new();
    t.cmd().args(["init", "ws", "--goal", "g"]).assert().success();
    t.write(
        "ws/agentloop.yaml",
        "max_steps: 5\ntools:\n  external:\n    greet: {command: [echo, hi]}\nmax_reframes: 1\ntools:\n  http: {allow_private: true}\n",
    );
    let out = t.al(&["status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("invalid YAML in ws/agentloop.yaml"), "{err}");
    assert!(err.contains("the key `tools` appears twice"), "{err}");
    assert!(err.contains("line 6"), "{err}");
    // Nested too, and in an agent profile.
    t.write("ws/agentloop.yaml", "llm:\n  model: a\n  model: b\n");
    let err = stderr(&t.al(&["status"]).output().unwrap());
    assert!(err.contains("the key `model` appears twice") && err.contains("line 3"), "{err}");
    std::fs::remove_file(t.path("ws/agentloop.yaml")).unwrap();
    t.write("ws/agents/digest.yaml", "max_steps: 3\nmax_steps: 4\n");
    let out = t.al(&["--agent", "digest", "config", "show"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("ws/agents/digest.yaml") && err.contains("the key `max_steps` appears twice"), "{err}");
    // The same keys in separate mappings are fine.
    t.write("ws/agentloop.yaml", "tools:\n  external:\n    a: {command: echo a}\n    b: {command: echo b}\n");
    t.al(&["status"]).assert().success();
}
