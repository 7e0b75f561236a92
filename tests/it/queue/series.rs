//! A queued job is a series, as a cron job is: `enqueue --slot` runs of one agent and goal (or
//! of `--series NAME`) carry facts, a person's answers and `state/` from the series' last ended
//! run, through the binary with a real `redis-server` and a worker process. The README's queued
//! digest, played by the scripted model with the bundled daily-digest skill, reports each item
//! once over three slots; a named series groups two goals; a run of its own carries nothing; a
//! link in the previous run's `state/` (or `state/` itself a link) is never followed.

use super::{worker, worker_with, Redis, Worker, DEADLINE};
use crate::common::*;
use serde_json::{json, Value};
use std::time::Instant;

/// `enqueue --wait` for the run's outcome: (exit code, the completion event).
fn enqueue_wait(t: &T, redis: &Redis, w: &Worker, args: &[&str]) -> (Option<i32>, Value) {
    let out = t.cmd().args(["--json", "--wait=120", "enqueue", "--redis", &redis.url()]).args(args).output().unwrap();
    let v = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|_| panic!("{args:?}: {}\nworker:\n{}", stderr(&out), w.log()));
    (out.status.code(), v)
}

fn run_id(v: &Value) -> String {
    v["payload"]["run_id"].as_str().unwrap().to_string()
}

/// Waits until the worker's log holds `what`.
fn logged(w: &Worker, what: &str) {
    let start = Instant::now();
    while !w.log().contains(what) {
        assert!(start.elapsed() < DEADLINE, "the worker did not log {what:?}:\n{}", w.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// One day of the README's queued digest with the bundled daily-digest skill, played by the
/// scripted model: activate the skill, read the job's state, write the digest of the items not
/// yet seen, save the state, learn a fact. With `ask`, Reflect first asks which topics matter.
fn digest_script(date: &str, seen: &[String], feed: &[&str], ask: bool) -> (String, Vec<String>) {
    let new: Vec<String> = feed.iter().map(|s| s.to_string()).filter(|i| !seen.contains(i)).collect();
    let mut all = seen.to_vec();
    all.extend(new.iter().cloned());
    let lines: Vec<String> = new.iter().map(|i| format!("- {i}")).collect();
    let digest =
        format!("# Digest {date}\n\n{}\n", if new.is_empty() { "nothing new".into() } else { lines.join("\n") });
    let action = |tool: &str, args: Value| json!({"answer": {"next_action": {"tool": tool, "args": args}}});
    let go = json!({"answer": {"satisfied": [], "decision": "continue", "reason": "next"}});
    let first = if ask {
        json!({"answer": {"decision": "escalate", "reason": "Which topics matter most?"}})
    } else {
        go.clone()
    };
    let file = format!("artifacts/digest-{date}.md");
    let script = json!({
        "frame": [{"answer": {"goal": "Today's digest", "definition_of_done": ["state saved", "digest written", "facts noted"], "can_proceed": true}}],
        "plan": [
            action("skill_read", json!({"name": "daily-digest"})),
            action("file_read", json!({"path": "state/daily-digest.json"})),
            action("file_write", json!({"path": file, "content": digest})),
            action("file_write", json!({"path": "state/daily-digest.json", "content": json!({"seen": all}).to_string()})),
        ],
        "reflect": [
            first,
            go,
            {"answer": {"satisfied": [{"item": 2, "steps": [3], "artifacts": [file]}], "decision": "continue", "reason": "next"}},
            {"answer": {"satisfied": [{"item": 1, "steps": [4], "artifacts": ["state/daily-digest.json"]}, {"item": 3, "steps": [4]}],
                "facts": [format!("the feed of {date} held {} new items (step 4)", new.len())],
                "decision": "done", "reason": "saved", "outcome": format!("{} new items", new.len())}},
        ],
    });
    (script.to_string(), new)
}

/// What a run's `state/daily-digest.json` says was seen (none when it has none).
fn seen_by(t: &T, run: &str) -> Vec<String> {
    let rel = format!("root/runs/{run}/state/daily-digest.json");
    if !t.exists(&rel) {
        return vec![];
    }
    t.json(&rel)["seen"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// The README's queued digest over three slots: the first asks a question, answered on the
/// run's folder; each later slot's run starts from the one before — the answer and the facts
/// in its context.md, the skill's state in its `state/` — and each item is reported once.
#[test]
fn the_queued_digest_reports_each_item_once_over_three_slots() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    t.write("root/agentloop.yaml", "max_steps: 10\n");
    // The README's profile, which says nothing of folders: the agent's sandbox takes in each
    // run's own artifacts/ and state/, in its own folder under the root.
    t.write("root/agents/digest.yaml", "description: The morning digest of the team's feeds\nmax_steps: 10\n");
    let days = [
        ("2026-03-01", vec!["alpha", "beta"]),
        ("2026-03-02", vec!["alpha", "beta", "gamma"]),
        ("2026-03-03", vec!["beta", "gamma", "delta", "epsilon"]),
    ];
    // Written before the worker starts: it reads the script each time a run starts.
    let (script, _) = digest_script(days[0].0, &[], &days[0].1, true);
    t.write("script.yaml", &script);
    let w = worker(&t, &redis, "w1", &[]);
    let goal = "Today's digest of the feed: new items, one line each";
    let enqueue = |date: &str, feed: &[&str]| {
        let context = format!("Feed: {}", feed.join(", "));
        let args = ["--goal", goal, "--agent", "digest", "--slot", date, "--context", &context];
        enqueue_wait(&t, &redis, &w, &args)
    };

    // Slot 1 asks which topics matter: escalated (exit 3), then answered on its folder.
    let (code, v) = enqueue(days[0].0, &days[0].1);
    assert_eq!(code, Some(3), "{v}\n{}", w.log());
    let first = run_id(&v);
    assert!(first.starts_with("slot-2026-03-01-"), "{first}");
    let folder = format!("root/runs/{first}");
    let out = t
        .cmd()
        .args(["-w", &folder, "--script", "script.yaml", "answer", "Rust releases and security advisories"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.json(&format!("{folder}/state.json"))["status"], "done");
    let series = t.json(&format!("{folder}/state.json"))["series"].as_str().unwrap().to_string();
    assert!(series.starts_with("job-") && first.ends_with(&series["job-".len()..]), "{series} {first}");
    assert_eq!(t.json(&format!("root/.agentloop-runs/{first}.json"))["series"], series.as_str());
    let mut runs = vec![first];

    for (date, feed) in &days[1..] {
        let prev = runs.last().unwrap().clone();
        let seen = seen_by(&t, &prev);
        assert!(!seen.is_empty(), "run {prev} saved its state");
        let (script, _) = digest_script(date, &seen, feed, false);
        t.write("script.yaml", &script);
        let (code, v) = enqueue(date, feed);
        let id = run_id(&v);
        let trace = || std::fs::read_to_string(t.path(&format!("root/runs/{id}/trace.jsonl"))).unwrap_or_default();
        assert_eq!(code, Some(0), "{v}\n{}\n{}", w.log(), trace());
        let folder = format!("root/runs/{id}");
        // The person's answer and the facts of the slot before are in the run's context.
        let context = t.read(&format!("{folder}/context.md"));
        assert!(
            context.contains("A person answered \"Which topics matter most?\": Rust releases and security advisories"),
            "{context}"
        );
        let prev_date = days.iter().find(|d| prev.starts_with(&format!("slot-{}", d.0))).unwrap().0;
        assert!(context.contains(&format!("the feed of {prev_date} held")), "{context}");
        assert!(context.contains(&format!("(from run {prev})")), "{context}");
        assert!(t.read(&format!("{folder}/memory.md")).contains("Rust releases and security advisories"));
        // file_read reached the state the slot before left, copied into this run's folder.
        let transcript = t.read(&format!("{folder}/transcript.md"));
        assert!(
            transcript.contains(&seen.join("\\\",\\\"")) || transcript.contains(&seen.join("\",\"")),
            "{transcript}"
        );
        assert_eq!(t.json(&format!("{folder}/state.json"))["series"], series.as_str());
        logged(&w, &format!("run {id} started for message"));
        assert!(w.log().contains(&format!("(series {series}: carried")), "{}", w.log());
        assert!(w.log().contains(&format!("state/ (1 file) from run {prev})")), "{}", w.log());
        // The run before keeps its own state as it ended.
        assert_eq!(seen_by(&t, &prev), seen);
        runs.push(id);
    }
    // Each slot's digest stays with its run; every item reported once over the three.
    let mut lines: Vec<String> = Vec::new();
    for (run, (date, _)) in runs.iter().zip(&days) {
        let digest = t.read(&format!("root/runs/{run}/artifacts/digest-{date}.md"));
        lines.extend(digest.lines().filter_map(|l| l.strip_prefix("- ")).map(String::from));
    }
    lines.sort();
    assert_eq!(lines, ["alpha", "beta", "delta", "epsilon", "gamma"], "each item once");
    assert_eq!(seen_by(&t, &runs[2]).len(), 5);
    // The same slot enqueued again runs nothing new.
    let calls_before = t.read(&format!("root/runs/{}/trace.jsonl", runs[2]));
    let (code, v) = enqueue(days[2].0, &days[2].1);
    assert_eq!((code, run_id(&v)), (Some(0), runs[2].clone()));
    assert_eq!(t.read(&format!("root/runs/{}/trace.jsonl", runs[2])), calls_before);
}

/// A script that reads the job's notes and writes them again with a fact of its own.
fn notes_script(tag: &str) -> String {
    let action = |tool: &str, args: Value| json!({"answer": {"next_action": {"tool": tool, "args": args}}});
    json!({
        "frame": [{"answer": {"goal": tag, "definition_of_done": ["notes read", "notes written", "fact noted"], "can_proceed": true}}],
        "plan": [
            action("file_read", json!({"path": "state/notes.txt"})),
            action("file_write", json!({"path": "state/notes.txt", "content": format!("notes of {tag}\n")})),
        ],
        "reflect": [
            {"answer": {"satisfied": [], "decision": "continue", "reason": "next"}},
            {"answer": {"satisfied": [{"item": 1, "steps": [2]}, {"item": 2, "steps": [2], "artifacts": ["state/notes.txt"]}, {"item": 3, "steps": [2]}],
                "facts": [format!("the {tag} was written (step 2)")], "decision": "done", "reason": "written", "outcome": tag}},
        ],
    })
    .to_string()
}

/// `--series NAME` groups two goals: the second carries the first's facts and `state/`. A slot
/// run of another goal, or a run of its own, carries nothing. A link inside the previous run's
/// `state/` is left out and `state/` itself a link is not carried; nothing is written through
/// either.
#[test]
fn a_named_series_groups_goals_and_no_link_in_state_is_followed() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    t.write("root/agentloop.yaml", "max_steps: 6\n");
    t.write("script.yaml", &notes_script("weekly summary"));
    let w = worker(&t, &redis, "w1", &[]);
    let run = |tag: &str, args: &[&str]| {
        t.write("script.yaml", &notes_script(tag));
        let mut all = vec!["--goal", tag];
        all.extend_from_slice(args);
        let (code, v) = enqueue_wait(&t, &redis, &w, &all);
        assert_eq!(code, Some(0), "{tag}: {v}\n{}", w.log());
        let id = run_id(&v);
        assert_eq!(t.json(&format!("root/runs/{id}/state.json"))["status"], "done", "{tag}");
        id
    };
    let context = |id: &str| t.read(&format!("root/runs/{id}/context.md"));

    let weekly = run("weekly summary", &["--series", "news", "--slot", "2026-W10"]);
    assert_eq!(t.read(&format!("root/runs/{weekly}/state/notes.txt")), "notes of weekly summary\n");
    let monthly = run("monthly summary", &["--series", "news", "--slot", "2026-03"]);
    let c = context(&monthly);
    assert!(c.contains("the weekly summary was written") && c.contains(&format!("(from run {weekly})")), "{c}");
    let transcript = t.read(&format!("root/runs/{monthly}/transcript.md"));
    assert!(transcript.contains("notes of weekly summary"), "file_read saw the copied state: {transcript}");
    assert_eq!(t.json(&format!("root/runs/{monthly}/state.json"))["series"], "news");
    assert_eq!(t.json(&format!("root/.agentloop-runs/{monthly}.json"))["series"], "news");
    assert!(w.log().contains("(series news: carried"), "{}", w.log());

    // Another goal's slot is another series (none ended yet); a run of its own is in none.
    let other = run("monthly summary", &["--slot", "2026-04"]);
    assert!(!context(&other).contains("from run"), "{}", context(&other));
    let transcript = t.read(&format!("root/runs/{other}/transcript.md"));
    assert!(!transcript.contains("notes of weekly summary"), "{transcript}");
    assert!(t.json(&format!("root/runs/{other}/state.json"))["series"].as_str().unwrap().starts_with("job-"));
    let single = run("one-off summary", &[]);
    assert!(!context(&single).contains("from run"), "{}", context(&single));
    assert!(t.json(&format!("root/runs/{single}/state.json")).get("series").is_none());
    assert!(t.json(&format!("root/.agentloop-runs/{single}.json")).get("series").is_none());

    // A link inside the last run's state/ is left out; its files are copied.
    std::fs::create_dir_all(t.path("outside")).unwrap();
    t.write("outside/secret.txt", "hunter2");
    std::os::unix::fs::symlink(t.path("outside/secret.txt"), t.path(&format!("root/runs/{monthly}/state/secret.txt")))
        .unwrap();
    std::os::unix::fs::symlink(t.path("outside"), t.path(&format!("root/runs/{monthly}/state/shared"))).unwrap();
    let quarterly = run("quarterly summary", &["--series", "news"]);
    let state = t.path(&format!("root/runs/{quarterly}/state"));
    let mut names: Vec<String> =
        std::fs::read_dir(&state).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["notes.txt"], "only the file was copied");
    assert!(context(&quarterly).contains(&format!("(from run {monthly})")), "{}", context(&quarterly));
    assert!(w.log().contains("state/secret.txt not carried"), "{}", w.log());
    assert!(w.log().contains("state/shared not carried"), "{}", w.log());

    // state/ itself a link: not carried, and the run still starts from the facts.
    let linked = t.path(&format!("root/runs/{quarterly}/state"));
    std::fs::remove_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(t.path("outside"), &linked).unwrap();
    let yearly = run("yearly summary", &["--series", "news"]);
    assert!(context(&yearly).contains(&format!("(from run {quarterly})")), "{}", context(&yearly));
    assert!(!t.exists(&format!("root/runs/{yearly}/state/secret.txt")));
    assert!(w.log().contains(&format!("run {yearly}: state/ not carried")), "{}", w.log());
    // The yearly run wrote its own notes into a state/ of its own, not through the link.
    assert_eq!(t.read(&format!("root/runs/{yearly}/state/notes.txt")), "notes of yearly summary\n");
    let outside: Vec<_> = std::fs::read_dir(t.path("outside")).unwrap().collect();
    assert_eq!(outside.len(), 1, "nothing was written where the links point");
    assert_eq!(t.read("outside/secret.txt"), "hunter2");
}

/// A worker killed while it copies `state/` (after the copy, before it is renamed into place)
/// leaves no half `state/`: the worker that takes the message over drops the partial copy,
/// copies again and runs the run once.
#[test]
fn a_worker_killed_mid_copy_leaves_no_half_state() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    t.write("root/agentloop.yaml", "max_steps: 6\n");
    t.write("script.yaml", &notes_script("weekly summary"));
    let mut crashing =
        worker_with(&t, &redis, "w1", &["--claim-idle", "1s"], &[("AGENTLOOP_CRASH_AT", "series:copied")]);
    let (code, v) = enqueue_wait(&t, &redis, &crashing, &["--goal", "weekly summary", "--series", "news"]);
    assert_eq!(code, Some(0), "the first run carries nothing, so it passes no crash point: {v}");
    let weekly = run_id(&v);
    t.write("script.yaml", &notes_script("monthly summary"));
    let out = t
        .cmd()
        .args(["--json", "enqueue", "--redis", &redis.url(), "--goal", "monthly summary", "--series", "news"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let monthly = serde_json::from_str::<Value>(&stdout(&out)).unwrap()["run_id"].as_str().unwrap().to_string();
    logged(&crashing, "crash point series:copied reached");
    let _ = crashing.child.wait();
    let folder = format!("root/runs/{monthly}");
    assert!(t.exists(&format!("{folder}/.state.carrying/notes.txt")) && !t.exists(&format!("{folder}/state")));
    let w = worker(&t, &redis, "w2", &["--claim-idle", "1s"]);
    let start = Instant::now();
    while redis.entries("agentloop:results").len() < 2 {
        assert!(start.elapsed() < DEADLINE, "no outcome:\n{}", w.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(t.json(&format!("{folder}/state.json"))["status"], "done", "{}", w.log());
    assert!(!t.exists(&format!("{folder}/.state.carrying")));
    assert_eq!(t.read(&format!("{folder}/state/notes.txt")), "notes of monthly summary\n");
    let transcript = t.read(&format!("{folder}/transcript.md"));
    assert!(transcript.contains("notes of weekly summary"), "the copy was whole: {transcript}");
    assert!(t.read(&format!("{folder}/context.md")).contains(&format!("(from run {weekly})")));
    assert!(w.log().contains(&format!("run {monthly} started for message")), "{}", w.log());
}
