//! `eval --queue ROOT`: a suite's trials as queued runs for the workers sharing ROOT, through
//! the binary with a real `redis-server` and a worker process playing the scripted model. Each
//! trial is seeded into ROOT/runs/ID, enqueued with that id as its key and awaited; the checks
//! read what the worker's run left there. What only this command line could give a trial (a
//! model, a script, a case's configuration) is refused.

use super::{worker, Redis};
use crate::common::*;
use serde_json::Value;

const SCRIPT: &str = "frame:\n  - answer: {goal: write hello, definition_of_done: [hello.txt holds hello, the run ends, nothing else]}\n\
plan:\n  - answer: {next_action: {tool: file_write, args: {path: hello.txt, content: hello}}}\n\
reflect:\n  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, outcome: wrote hello.txt}\n";

const SUITE: &str = "name: fleet\ncases:\n  - name: hello\n    goal: Write hello.txt\n    trials: 2\n    files: {notes.txt: seeded}\n    \
checks:\n      - stop: done\n      - file: {path: hello.txt, contains: hello}\n      - file: {path: notes.txt, contains: seeded}\n  \
- name: other\n    goal: Write other.txt\n    checks:\n      - file: other.txt\n  \
- name: Hello the notes into two sentences, once more\n    goal: Write hello.txt\n    files: {notes.txt: seeded}\n    \
checks:\n      - file: {path: notes.txt, contains: seeded}\n      - file: {path: hello.txt, contains: hello}\n";

#[test]
fn a_suites_trials_run_as_queued_runs_on_the_workers() {
    let t = T::new();
    let Some(redis) = Redis::start(&t.path("redis")) else { return };
    t.write("script.yaml", SCRIPT);
    t.write("suite.yaml", SUITE);
    let w = worker(&t, &redis, "w1", &["--concurrency", "2"]);
    let out = t
        .cmd()
        .args(["--json", "eval", "suite.yaml", "--queue", "root", "--redis", &redis.url(), "--jobs", "2", "--out", "o"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap_or_else(|_| panic!("{}\n{}", stderr(&out), w.log()));
    assert_eq!(out.status.code(), Some(1), "one case falls short: {v}\n{}", w.log());
    let hello = &v["cases"][0];
    assert_eq!(
        (hello["case"].as_str(), hello["passed"].as_u64(), hello["trials"].as_u64()),
        (Some("hello"), Some(2), Some(2)),
        "{v}"
    );
    assert_eq!(v["cases"][1]["passed"], 0, "{v}");
    // A long name that differs from another only in case and punctuation: its own run, seeded.
    assert_eq!(v["cases"][2]["passed"], 1, "{v}");
    assert_eq!(hello["model"], "workers", "queued trials run on the workers' model: {v}");
    // The trials ran in the workers' root, each its own run, with the case's files seeded.
    let runs: Vec<String> = std::fs::read_dir(t.path("root/runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("eval-"))
        .collect();
    assert_eq!(runs.len(), 4, "{runs:?}");
    assert!(runs.iter().all(|r| r.len() <= 64), "{runs:?}");
    let one = runs.iter().find(|r| r.contains("-1-hello-1-")).unwrap();
    assert_eq!(t.read(&format!("root/runs/{one}/notes.txt")), "seeded");
    assert_eq!(t.read(&format!("root/runs/{one}/hello.txt")), "hello");
    assert!(w.log().contains(&format!("run {one} done")), "{}", w.log());
    // Each trial's command line is kept beside the report: an enqueue, keyed by the run id.
    let command = t.read("o/hello/workers/1.run/command.sh");
    assert!(
        command.contains("enqueue --goal 'Write hello.txt' --key eval-") && command.contains("--wait="),
        "{command}"
    );
}

#[test]
fn what_only_this_command_line_could_give_a_trial_is_refused_with_queue() {
    let t = T::new();
    t.write("suite.yaml", SUITE);
    for (flags, named) in [
        (vec!["--model", "m"], "--model cannot go with --queue"),
        (vec!["--script", "s.yaml"], "--script cannot go with --queue"),
    ] {
        let out = t.cmd().args(&flags).args(["eval", "suite.yaml", "--queue", "root", "--out", "o"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(named), "{}", stderr(&out));
    }
    t.write("s2.yaml", "cases:\n  - name: c\n    goal: g\n    config: {max_steps: 3}\n    checks: [{stop: done}]\n");
    let out = t.cmd().args(["eval", "s2.yaml", "--queue", "root", "--out", "o"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("case `c` sets `config`, which cannot go with --queue"), "{}", stderr(&out));
    assert!(!t.path("o").exists() && !t.path("root").exists(), "nothing is written before the refusal");
}
