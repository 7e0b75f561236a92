//! Runs that go on: history under runs/<id>/, follow-ups that carry facts, answers to
//! escalations, continuing after a stop, budgets given now, and nothing created by mistake.

use crate::common::*;
use predicates::prelude::*;
use serde_json::Value;

fn state(t: &T, rel: &str) -> Value {
    t.json(&format!("{rel}/state.json"))
}

#[test]
fn three_daily_runs_keep_their_history_and_carry_facts() {
    let t = T::new();
    t.write("ws/notes.txt", "monday\n");
    let mut ids = Vec::new();
    for (day, fact) in ["alpha rose 3%", "beta fell 2%", "gamma flat"].iter().enumerate() {
        t.write("script.yaml", &daily_script(fact));
        let out = t
            .al(&["--script", "script.yaml", "run", "--goal", &format!("Digest of day {}", day + 1)])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "day {}: {}", day + 1, stderr(&out));
        ids.push(state(&t, "ws")["run_id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.iter().collect::<std::collections::BTreeSet<_>>().len(), 3, "three distinct runs: {ids:?}");
    // The third run sees the first two in `runs`, each with its own paper trail.
    let out = t.al(&["runs", "--json"]).output().unwrap();
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<&str> = rows.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    for id in &ids {
        assert!(listed.contains(&id.as_str()), "{id} listed in {listed:?}");
    }
    assert_eq!(rows.iter().filter(|r| r["current"] == true).count(), 1);
    for id in &ids[..2] {
        assert_eq!(t.json(&format!("ws/runs/{id}/result.json"))["status"], "done");
        assert!(t.read(&format!("ws/runs/{id}/trace.jsonl")).contains("run.finished"));
    }
    // ...and carries both earlier runs' facts, each naming the run it came from.
    let memory = t.read("ws/memory.md");
    assert!(memory.contains(&format!("alpha rose 3% (step 1) (from run {})", ids[0])), "{memory}");
    assert!(memory.contains(&format!("beta fell 2% (step 1) (from run {})", ids[1])), "{memory}");
    let context = t.read(&format!("ws/runs/{}/context.md", ids[1]));
    assert!(context.contains("## Carried from earlier runs") && context.contains("alpha rose 3%"), "{context}");
    // Old runs are readable by id and as `last`.
    let out = t.al(&["trace", "show", "--json", "--run", &ids[0]]).output().unwrap();
    let entries: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(!entries.is_empty() && entries.iter().all(|e| e["run_id"] == ids[0].as_str()));
    let out = t.al(&["status", "--json", "--run", &ids[1]]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["run_id"], ids[1].as_str());
    // --new carries nothing.
    t.write("script.yaml", &daily_script("delta"));
    t.al(&["--script", "script.yaml", "run", "--new", "--goal", "Fresh"]).assert().success();
    assert!(!t.read("ws/memory.md").contains("(from run "));
    // Retention: keep the newest two archived runs.
    let out = t.al(&["runs", "prune", "--keep", "2", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["deleted"], serde_json::json!([ids[0]]));
    assert!(!t.exists(&format!("ws/runs/{}", ids[0])));
    assert!(t.exists(&format!("ws/runs/{}/state.json", ids[1])));
    t.al(&["runs", "prune"]).assert().code(2).stderr(predicate::str::contains("--keep"));
}

const ESCALATING: &str = r#"frame:
  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: false, open_question: "Which year's figures?"}
  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}
plan:
  - answer: {next_action: {tool: list_dir, args: {}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: answered, outcome: used the 2024 figures}
"#;

/// `program` (the CLI, or a shell) as a plain process with the CLI's hermetic environment, so
/// the test decides what its stdout is.
fn process(t: &T, program: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(program);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("AGENTLOOP_NOW", NOW)
        .current_dir(t.root());
    c
}

/// Whether `ws`'s commit journal was checkpointed (its first header zeroed, or no journal at
/// all): the next locker finds nothing to replay.
fn checkpointed(t: &T, ws: &str) -> bool {
    let journal = std::fs::read(t.path(&format!("{ws}/.agentloop.journal.json"))).unwrap_or_default();
    !journal.starts_with(b"AGJ")
}

#[test]
fn a_closed_stdout_keeps_an_escalated_runs_exit_code_and_releases_its_lock() {
    let t = T::new();
    t.write("script.yaml", ESCALATING);
    // The reader is gone before the run writes its outcome (with --json, the escalation event:
    // an escalated run's account is otherwise on stderr): every write to stdout fails.
    let bin = assert_cmd::cargo::cargo_bin("agentloop");
    let mut child = process(&t, &bin)
        .args(["-w", "ws", "--json", "--script", "script.yaml", "run", "--goal", "g"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!stderr(&out).contains("stdout"), "a closed pipe is not an error: {}", stderr(&out));
    assert_eq!(t.json("ws/result.json")["stop"], "escalated");
    // The lock was released as usual: the journal is checkpointed, nothing is left to replay.
    assert!(checkpointed(&t, "ws"), "the journal still holds the run's records");
    t.al(&["status"]).assert().success().stdout(predicate::str::contains("Which year's figures?"));
    assert!(checkpointed(&t, "ws"));

    // The same through a shell pipe into `head -c1`: the run's code, whatever head does.
    let out = process(&t, std::path::Path::new("sh"))
        .args(["-c", r#"{ "$0" -w ws2 --json --script script.yaml run --goal g; echo $? > code.txt; } | head -c1"#])
        .arg(&bin)
        .output()
        .unwrap();
    assert_eq!(stdout(&out).len(), 1, "head printed one byte: {}", stderr(&out));
    assert_eq!(t.read("code.txt").trim(), "3", "{}", stderr(&out));
    assert!(checkpointed(&t, "ws2"));
}

#[test]
fn an_escalation_is_answered_and_the_run_completes() {
    let t = T::new();
    t.write("script.yaml", ESCALATING);
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let id = state(&t, "ws")["run_id"].as_str().unwrap().to_string();
    // status shows the question and the command that answers it.
    let out = t.al(&["status"]).output().unwrap();
    assert!(stdout(&out).contains("question    Which year's figures?"), "{}", stdout(&out));
    assert!(stdout(&out).contains("answer \"...\""));
    // A plain run says what happened and how to go on: exit 0, not the stale code.
    let out = t.al(&["--script", "script.yaml", "run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("open question: Which year's figures?") && stdout(&out).contains("answer"),
        "{}",
        stdout(&out)
    );
    // --continue is for budget and provider stops.
    t.al(&["--script", "script.yaml", "run", "--continue"]).assert().code(2).stderr(predicate::str::contains("answer"));
    // The answer goes into memory.md and the trace; the same run goes on and finishes.
    let out = t.al(&["--script", "script.yaml", "answer", "Use the 2024 figures"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(state(&t, "ws")["run_id"], id.as_str());
    assert_eq!(t.json("ws/result.json")["status"], "done");
    let trace = t.trace();
    let answered = trace.iter().find(|e| e["event"] == "run.answered").expect("run.answered entry");
    assert_eq!(answered["data"]["answer"], "Use the 2024 figures");
    assert_eq!(answered["data"]["question"], "Which year's figures?");
    assert!(t.read("ws/memory.md").contains("Use the 2024 figures"));
    assert_eq!(trace.iter().filter(|e| e["event"] == "reframe").count(), 1, "an answer at framing reframes");
    // The reframe prompt says why, without counting a reframe that reflect never asked for; the
    // transcript numbers steps as the trace does.
    let transcript = t.read("ws/transcript.md");
    assert!(
        transcript
            .contains("Frame the task again, after a person's answer to the open question: Use the 2024 figures."),
        "{transcript}"
    );
    assert!(!transcript.contains("reframe number 0"), "{transcript}");
    let plan_steps: Vec<u64> =
        trace.iter().filter(|e| e["event"] == "plan").map(|e| e["step"].as_u64().unwrap()).collect();
    for s in plan_steps {
        assert!(transcript.contains(&format!("step {s} · plan")), "step {s} · plan in the transcript:\n{transcript}");
    }
    assert!(!transcript.contains("step 0 · plan"), "{transcript}");
    // A done run has nothing to answer.
    t.al(&["answer", "more"]).assert().code(2).stderr(predicate::str::contains("no question"));
}

const LONG: &str = r#"frame:
  - answer: {goal: g, definition_of_done: [a, b, c]}
plan:
  - answer: {next_action: {tool: list_dir, args: {}}}
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}}
  - answer: {next_action: {tool: finish, args: {summary: done it}}}
reflect:
  - answer: {decision: continue, reason: more}
  - answer: {decision: continue, reason: more}
  - answer: {satisfied: [{item: 1, steps: [2]}, {item: 2, steps: [2]}, {item: 3, steps: [2]}], decision: done, reason: finished, outcome: done it}
"#;

#[test]
fn a_budget_stop_is_continued_with_the_budgets_given_now() {
    let t = T::new();
    t.write("script.yaml", LONG);
    t.write("ws/notes.txt", "n\n");
    // Limits given to `init` are recorded; limits given to `run` apply.
    t.al(&["init", "--goal", "g", "--max-steps", "7"]).assert().success();
    let out = t.al(&["--script", "script.yaml", "run", "--max-steps", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(state(&t, "ws")["step"], 1);
    let trace = t.trace();
    let changed = trace.iter().find(|e| e["event"] == "limits.changed").expect("limits.changed");
    assert_eq!(
        (changed["data"]["from"]["max_steps"].as_u64(), changed["data"]["to"]["max_steps"].as_u64()),
        (Some(7), Some(1))
    );
    // result.json names the limit that ran out.
    assert_eq!(t.json("ws/result.json")["stop"], "max_steps");
    // A plain run reports the stop and the ways on, with exit 0, never the stale error; the way
    // on names the flag that raises that limit.
    let out = t.al(&["--script", "script.yaml", "run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("run --continue --max-steps 5` goes on with a higher limit (max_steps is 1 now)"),
        "{}",
        stdout(&out)
    );
    t.al(&["answer", "x"]).assert().code(2);
    // --continue with the limit not raised would stop again at once: refused, the trace untouched.
    let before = t.read("ws/trace.jsonl");
    let out = t.al(&["--script", "script.yaml", "run", "--continue", "--max-steps", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("max_steps is still over (1 of 1 steps used)"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--max-steps"), "{}", stderr(&out));
    assert_eq!(t.read("ws/trace.jsonl"), before, "nothing written");
    // --continue with more steps goes on in the same run to done.
    let out = t.al(&["--script", "script.yaml", "run", "--continue", "--max-steps", "5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.json("ws/result.json")["status"], "done");
    let trace = t.trace();
    assert_eq!(trace.iter().filter(|e| e["event"] == "run.continued").count(), 1);
    assert_eq!(trace.iter().filter(|e| e["event"] == "run.started").count(), 1, "the same run");
    let acts: Vec<&str> = trace.iter().filter(|e| e["phase"] == "act").map(|e| e["tool"].as_str().unwrap()).collect();
    assert_eq!(acts, ["list_dir", "file_read", "finish"]);
}

#[test]
fn run_new_archives_an_interrupted_run_which_can_go_on_later() {
    let t = T::new();
    t.write("script.yaml", LONG);
    t.write("ws/notes.txt", "n\n");
    t.al(&["init", "--goal", "first"]).assert().success();
    let first = state(&t, "ws")["run_id"].as_str().unwrap().to_string();
    // Another goal for a run in progress is refused, not ignored.
    t.al(&["--script", "script.yaml", "run", "--goal", "second"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--new"));
    t.al(&["--script", "script.yaml", "run", "--new", "--goal", "second"]).assert().success();
    assert_eq!(t.json(&format!("ws/runs/{first}/state.json"))["interrupted"], true);
    let out = t.al(&["runs"]).output().unwrap();
    assert!(stdout(&out).contains("interrupted"), "{}", stdout(&out));
    // The interrupted run comes back and finishes; the finished second run is archived.
    let second = state(&t, "ws")["run_id"].as_str().unwrap().to_string();
    let out = t.al(&["--script", "script.yaml", "run", "--continue", "--run", &first]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(state(&t, "ws")["run_id"], first.as_str());
    assert_eq!(t.json(&format!("ws/runs/{second}/result.json"))["status"], "done");
    assert!(!t.exists(&format!("ws/runs/{first}")));
}

#[test]
fn nothing_is_created_for_a_mistyped_workspace_or_a_missing_key() {
    let t = T::new();
    for cmd in [&["frame"][..], &["plan"], &["act"], &["reflect"], &["run"], &["status"], &["runs"], &["answer", "x"]] {
        let mut args = vec!["-w", "nope"];
        args.extend_from_slice(cmd);
        t.cmd().args(&args).assert().code(2).stderr(predicate::str::contains("nope"));
        assert!(!t.exists("nope"), "{cmd:?} created the folder");
    }
    // A provider without its key is refused before the workspace or run is created.
    t.cmd()
        .args(["-w", "fresh", "--provider", "anthropic", "run", "--goal", "g"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("ANTHROPIC_API_KEY"));
    assert!(!t.exists("fresh/state.json") && !t.exists("fresh/trace.jsonl"));
}

#[test]
fn archiving_survives_a_kill_at_every_point() {
    let points: Vec<String> = std::iter::once("archive:journaled".to_string())
        .chain(agentloop_workspace::history::RUN_FILES.iter().map(|n| format!("archive:moved:{n}")))
        .collect();
    for point in points {
        let t = T::new();
        t.write("ws/notes.txt", "n\n");
        t.write("script.yaml", &daily_script("one"));
        t.al(&["--script", "script.yaml", "run", "--goal", "day one"]).assert().success();
        // With its report, the run has every one of its files.
        t.al(&["report"]).assert().success();
        let first = state(&t, "ws")["run_id"].as_str().unwrap().to_string();
        t.write("script.yaml", &daily_script("two"));
        let killed = t
            .al(&["--script", "script.yaml", "run", "--goal", "day two"])
            .env("AGENTLOOP_CRASH_AT", &point)
            .output()
            .unwrap();
        assert!(!killed.status.success(), "{point}: the crash point was reached");
        // The next command finishes the move, then the follow-up starts as asked.
        let out = t.al(&["--script", "script.yaml", "run", "--goal", "day two"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{point}: {}", stderr(&out));
        let out = t.al(&["runs", "--json"]).output().unwrap();
        let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rows.len(), 2, "{point}: no run lost or duplicated: {rows:?}");
        assert_eq!(rows.iter().filter(|r| r["run_id"] == first.as_str()).count(), 1, "{point}");
        assert_eq!(t.json(&format!("ws/runs/{first}/result.json"))["status"], "done", "{point}");
        assert_eq!(t.read(&format!("ws/runs/{first}/trace.jsonl")).matches("run.started").count(), 1, "{point}");
        assert_eq!(t.read("ws/trace.jsonl").matches("run.started").count(), 1, "{point}");
        assert!(t.exists(&format!("ws/runs/{first}/report.html")) && !t.exists("ws/report.html"), "{point}");
        assert!(t.read("ws/memory.md").contains("(from run "), "{point}: facts carried");
    }
}

#[test]
fn goal_from_stdin_and_context_kept_as_written() {
    let t = T::new();
    t.write("bg.txt", "Audience: managers\nTone: plain\n");
    t.write("bg.yaml", "audience: managers\ntone: plain\n");
    t.cmd()
        .args(["-w", "ws", "init", "--goal", "-", "--context", "bg.txt"])
        .write_stdin("Digest the feeds\n")
        .assert()
        .success();
    let c = t.read("ws/context.md");
    assert!(c.contains("## Goal\nDigest the feeds\n"), "{c}");
    assert!(c.contains("Audience: managers\nTone: plain") && !c.contains("```"), "prose is kept as written: {c}");
    t.cmd().args(["-w", "ws2", "init", "--goal", "g", "--context", "bg.yaml"]).assert().success();
    assert!(t.read("ws2/context.md").contains("```yaml\naudience: managers"));
    t.cmd()
        .args(["-w", "ws3", "init", "--goal", "-", "--context", "-"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("stdin"));
}

/// One morning of the README's cron recipe with the bundled daily-digest skill, played by the
/// scripted model: activate the skill, read the job's state, read the source, write the digest
/// of the items not yet seen, save the state.
fn digest_script(date: &str, seen: &[String], feed: &[&str]) -> (String, Vec<String>) {
    let new: Vec<String> = feed.iter().map(|s| s.to_string()).filter(|i| !seen.contains(i)).collect();
    let mut all = seen.to_vec();
    all.extend(new.iter().cloned());
    let digest = format!(
        "# Digest {date}\n\n{}\n",
        if new.is_empty() {
            "nothing new".to_string()
        } else {
            new.iter().map(|i| format!("- {i}")).collect::<Vec<_>>().join("\n")
        }
    );
    let action = |tool: &str, args: Value| serde_json::json!({"answer": {"next_action": {"tool": tool, "args": args}}});
    let go =
        |ticks: Value| serde_json::json!({"answer": {"satisfied": ticks, "decision": "continue", "reason": "next"}});
    let script = serde_json::json!({
        "frame": [{"answer": {"goal": "Today's digest", "definition_of_done": ["state read", "digest written", "state saved"], "can_proceed": true}}],
        "plan": [
            action("skill_read", serde_json::json!({"name": "daily-digest"})),
            action("file_read", serde_json::json!({"path": "state/daily-digest.json"})),
            action("file_read", serde_json::json!({"path": "feed.txt"})),
            action("file_write", serde_json::json!({"path": format!("artifacts/digest-{date}.md"), "content": digest})),
            action("file_write", serde_json::json!({"path": "state/daily-digest.json", "content": serde_json::json!({"seen": all}).to_string()})),
        ],
        "reflect": [
            go(serde_json::json!([])),
            go(serde_json::json!([])),
            go(serde_json::json!([])),
            go(serde_json::json!([{"item": 2, "steps": [4], "artifacts": [format!("artifacts/digest-{date}.md")]}])),
            serde_json::json!({"answer": {"satisfied": [{"item": 1, "steps": [5], "artifacts": ["state/daily-digest.json"]}, {"item": 3, "steps": [5]}], "decision": "done", "reason": "saved", "outcome": format!("{} new items", new.len())}}),
        ],
    });
    (script.to_string(), new)
}

/// The README's cron recipe (`run --goal "Today's digest"` each morning) with daily-digest
/// reports each item once across days: the job's `state/` stays when a new goal moves the run's
/// artifacts into runs/<id>/, so the second and third mornings see what the first reported.
#[test]
fn a_daily_digest_reports_each_item_once_across_days() {
    let t = T::new();
    let days = [
        ("2026-03-01", vec!["alpha", "beta"]),
        ("2026-03-02", vec!["alpha", "beta", "gamma"]),
        ("2026-03-03", vec!["beta", "gamma", "delta", "epsilon"]),
    ];
    let mut reported: Vec<String> = Vec::new();
    for (date, feed) in &days {
        t.write("ws/feed.txt", &feed.join("\n"));
        // The model reads the state the way file_read shows it: what is on disk now.
        let seen: Vec<String> = if t.exists("ws/state/daily-digest.json") {
            let v = t.json("ws/state/daily-digest.json");
            v["seen"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
        } else {
            vec![]
        };
        let (script, new) = digest_script(date, &seen, feed);
        t.write("script.yaml", &script);
        let fire = || {
            t.al(&["--script", "script.yaml", "run", "--goal", "Today's digest", "--slot", date, "-q"])
                .env("AGENTLOOP_NOW", format!("{date}T07:00:00Z"))
                .output()
                .unwrap()
        };
        let out = fire();
        assert_eq!(out.status.code(), Some(0), "{date}: {}", stderr(&out));
        // Cron fired twice (or a retry wrapper ran it again): the slot ran already.
        assert_eq!(fire().status.code(), Some(11), "{date}: the same slot runs once");
        if !seen.is_empty() {
            // file_read reached the state the earlier mornings left.
            let transcript = t.read("ws/transcript.md");
            assert!(
                transcript.contains(&seen.join("\\\",\\\"")) || transcript.contains(&seen.join("\",\"")),
                "{transcript}"
            );
        }
        reported.extend(new);
    }
    // Each morning's digest stays with its run: two in runs/<id>/artifacts/, today's in artifacts/.
    let mut digests = vec![t.read("ws/artifacts/digest-2026-03-03.md")];
    for entry in std::fs::read_dir(t.path("ws/runs")).unwrap() {
        let dir = entry.unwrap().path();
        for f in std::fs::read_dir(dir.join("artifacts")).unwrap() {
            digests.push(std::fs::read_to_string(f.unwrap().path()).unwrap());
        }
    }
    assert_eq!(digests.len(), 3, "{digests:?}");
    let lines: Vec<&str> = digests.iter().flat_map(|d| d.lines()).filter_map(|l| l.strip_prefix("- ")).collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(sorted, ["alpha", "beta", "delta", "epsilon", "gamma"], "each item once: {digests:?}");
    assert_eq!(reported.len(), 5);
    // The state outlived the three runs and is the job's, not a run's.
    assert!(!t.exists("ws/artifacts/daily-digest.json"));
    assert_eq!(t.json("ws/state/daily-digest.json")["seen"].as_array().unwrap().len(), 5);
    // The bundled skill keeps its state there.
    let out = t.al(&["skills", "show", "daily-digest"]).output().unwrap();
    assert!(stdout(&out).contains("state/daily-digest.json"), "{}", stdout(&out));
}

/// A scheduler's slot runs once: a second firing (or a retry wrapper) for a slot whose run ended
/// calls no model and exits 11; an archived run of the slot counts too; the next slot runs.
#[test]
fn a_slot_runs_once_however_often_it_is_fired() {
    let t = T::new();
    t.write("ws/notes.txt", "monday\n");
    t.write("script.yaml", &daily_script("alpha"));
    let fire = |slot: &str| {
        t.al(&["--script", "script.yaml", "run", "--goal", "Today's digest", "--slot", slot]).output().unwrap()
    };
    let out = fire("2026-01-01");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = state(&t, "ws");
    assert_eq!(first["slot"], "2026-01-01");
    assert_eq!(t.json("ws/result.json")["slot"], "2026-01-01");
    assert_eq!(t.trace()[0]["data"]["slot"], "2026-01-01");
    // Fired again: the script has no answers left, so any model call would fail (exit 5).
    let trace = t.read("ws/trace.jsonl");
    let out = fire("2026-01-01");
    assert_eq!(out.status.code(), Some(11), "{}", stderr(&out));
    assert!(stderr(&out)
        .contains(&format!("slot 2026-01-01 already ran: run {} ended done", first["run_id"].as_str().unwrap())));
    assert_eq!(t.read("ws/trace.jsonl"), trace, "nothing written");
    let out = t
        .al(&["--json", "--script", "script.yaml", "run", "--goal", "Today's digest", "--slot", "2026-01-01"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(11));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["type"].as_str(), v["payload"]["skipped"].as_bool()), (Some("agent.completed"), Some(true)));
    // The next day's slot runs (a follow-up); the first day's, now archived, is still taken.
    t.write("script.yaml", &daily_script("beta"));
    assert_eq!(fire("2026-01-02").status.code(), Some(0));
    assert_eq!(fire("2026-01-01").status.code(), Some(11));
    assert_eq!(fire("2026-01-02").status.code(), Some(11));
    // `runs` shows each run's slot, and the report's header names it.
    let listed = stdout(&t.al(&["runs"]).output().unwrap());
    let head: Vec<&str> = listed.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(head, ["run", "status", "steps", "cost", "started", "slot", "goal"], "{listed}");
    assert!(listed.lines().nth(1).unwrap().contains("  2026-01-02  Today's digest"), "{listed}");
    assert!(listed.lines().nth(2).unwrap().contains("  2026-01-01  Today's digest"), "{listed}");
    t.al(&["report"]).assert().success();
    let page = t.read("ws/report.html");
    assert!(page.contains("<dt>slot</dt><dd id=\"slot\">2026-01-02</dd>"), "the header names the slot");
    // --slot goes with --goal.
    t.al(&["run", "--slot", "x"]).assert().code(2).stderr(predicate::str::contains("--goal"));
}

/// The same `run --goal` again on the run it started (to see the output again) runs nothing:
/// it prints that run's outcome, says what `--follow-up` would do and exits 11, calling no
/// model; `--follow-up` (or another goal, `--new`, a new `--slot`) starts the next run.
#[test]
fn the_same_command_again_prints_the_ended_run_and_a_follow_up_is_asked_for() {
    let t = T::new();
    t.write("ws/notes.txt", "monday\n");
    t.write("script.yaml", &daily_script("alpha"));
    let run = |extra: &[&str]| {
        let mut args = vec!["--script", "script.yaml", "run", "--goal", "Today's digest"];
        args.extend_from_slice(extra);
        t.al(&args).output().unwrap()
    };
    let first = run(&[]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let id = state(&t, "ws")["run_id"].as_str().unwrap().to_string();
    let trace = t.read("ws/trace.jsonl");
    // Again, as typed: the script has no answers left, so any model call would fail (exit 5).
    let again = run(&[]);
    assert_eq!(again.status.code(), Some(11), "{}", stderr(&again));
    assert_eq!(stdout(&again), stdout(&first), "the outcome again, on stdout");
    let err = stderr(&again);
    assert!(err.contains(&format!("run {id} already had this goal and ended done; nothing was run")), "{err}");
    assert!(err.contains("--follow-up` starts a follow-up with the same goal"), "{err}");
    assert_eq!(t.read("ws/trace.jsonl"), trace, "nothing written");
    assert!(!t.exists(&format!("ws/runs/{id}")), "nothing archived");
    let out = t.al(&["--json", "--script", "script.yaml", "run", "--goal", "Today's digest"]).output().unwrap();
    assert_eq!(out.status.code(), Some(11));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["payload"]["run_id"].as_str(), v["payload"]["skipped"].as_bool()), (Some(id.as_str()), Some(true)));
    // Asked for: a follow-up with the same goal, carrying the ended run's facts.
    t.write("script.yaml", &daily_script("beta"));
    let follow = run(&["--follow-up"]);
    assert_eq!(follow.status.code(), Some(0), "{}", stderr(&follow));
    assert_ne!(state(&t, "ws")["run_id"].as_str(), Some(id.as_str()));
    assert!(t.exists(&format!("ws/runs/{id}/state.json")), "the ended run archived");
    assert!(t.read("ws/context.md").contains(&format!("from run {id}")), "its facts carried");
    // --follow-up is a follow-up's flag: not with --new, and it needs --goal.
    t.al(&["run", "--goal", "g", "--new", "--follow-up"]).assert().code(2);
    t.al(&["run", "--follow-up"]).assert().code(2).stderr(predicate::str::contains("--goal"));
}

/// The paper trail tells the truth about the workspace at rest: the journal is empty after a
/// finished run, a command refused before it starts creates nothing in the folder, a missing
/// --script is a usage error naming it, and --events starts with `run.started`.
#[test]
fn a_workspace_at_rest_holds_no_journal_and_a_refused_command_creates_nothing() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("script.yaml", &daily_script("alpha"));
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "g", "--events"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(first["event"], "run.started", "the event stream starts with the run");
    let journal = t.path("ws/.agentloop.journal.json");
    assert_eq!(std::fs::metadata(&journal).map(|m| m.len()).unwrap_or(0), 0, "the journal is emptied");
    // A folder with no run, and a command refused before it starts: nothing is created in it.
    std::fs::create_dir_all(t.path("empty")).unwrap();
    let out = t.cmd().args(["-w", "empty", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "no provider: {}", stderr(&out));
    assert_eq!(std::fs::read_dir(t.path("empty")).unwrap().count(), 0, "nothing created");
    let out = t.cmd().args(["-w", "empty", "--script", "nowhere.yaml", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("nowhere.yaml: no such file"), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(t.path("empty")).unwrap().count(), 0, "nothing created");
}

/// `run --continue --run ID` refuses a run that ended done, as `run --continue` refuses the
/// current done run: whether ID names an archived run or the current one, nothing moves and
/// its result stays.
#[test]
fn continue_with_a_run_id_refuses_a_done_run_as_continue_does() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("script.yaml", &daily_script("one"));
    t.al(&["--script", "script.yaml", "run", "--goal", "day one"]).assert().success();
    let first = state(&t, "ws")["run_id"].as_str().unwrap().to_string();
    t.write("script.yaml", &daily_script("two"));
    t.al(&["--script", "script.yaml", "run", "--goal", "day two"]).assert().success();
    let second = state(&t, "ws")["run_id"].as_str().unwrap().to_string();
    let archived = t.read(&format!("ws/runs/{first}/result.json"));
    let current = t.read("ws/result.json");
    let trace = t.read("ws/trace.jsonl");
    t.al(&["--script", "script.yaml", "run", "--continue"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!("run {second} is done")));
    for id in [first.as_str(), second.as_str(), "last"] {
        let out = t.al(&["--script", "script.yaml", "run", "--continue", "--run", id]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{id}: {}", stderr(&out));
        assert!(stderr(&out).contains(" is done") && stderr(&out).contains("follow-up"), "{id}: {}", stderr(&out));
        assert_eq!(state(&t, "ws")["run_id"], second.as_str(), "{id}: the current run stays");
        assert_eq!(t.read(&format!("ws/runs/{first}/result.json")), archived, "{id}");
        assert_eq!(t.read("ws/result.json"), current, "{id}");
        assert_eq!(t.read("ws/trace.jsonl"), trace, "{id}");
    }
}
