//! Whole outputs held as snapshots (insta): for the commands people read, all of stdout, all of
//! stderr and the exit code together, the human form and `--json`, in `tests/it/snapshots/`.
//! Any change to what a command prints shows up here as a diff to review, where the other tests
//! check the parts they are about. What varies between machines (temp paths, run ids, times,
//! the version) is redacted by [`snapshot_settings`]; the runs themselves are scripted, offline
//! and on a frozen clock, so everything else is the same on every run.
//!
//! `INSTA_UPDATE=always cargo test --test it snapshots` rewrites them after a deliberate change
//! (then review the diff); under `CI` a mismatch or a missing snapshot fails and nothing is written.

use crate::common::*;

/// `agentloop ARGS` run in `t`'s folder as [`T::cmd`] runs it (with `env` added), its whole
/// output held as the snapshot `name`: the command line, the exit code, all of stdout and all
/// of stderr.
fn snapshot(t: &T, name: &str, args: &[&str], env: &[(&str, &str)]) {
    let mut c = t.cmd();
    c.env("NO_COLOR", "1").args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let code = out.status.code().map_or("none (a signal)".to_string(), |c| c.to_string());
    let line: Vec<String> =
        args.iter().map(|a| if a.is_empty() || a.contains(' ') { format!("{a:?}") } else { a.to_string() }).collect();
    let shown = format!(
        "$ agentloop {}\nexit: {code}\n--- stdout\n{}--- stderr\n{}",
        line.join(" "),
        stdout(&out),
        stderr(&out)
    );
    snapshot_settings(t).bind(|| insta::assert_snapshot!(name, shown));
}

/// A table of snapshots taken one after the other in the same folder: name, command line.
type Table<'a> = &'a [(&'a str, &'a [&'a str])];

fn take(t: &T, table: Table) {
    for (name, args) in table {
        snapshot(t, name, args, &[]);
    }
}

/// The bundled demo (`make demo`): the scripted model drives real tools over the bundled article.
const DEMO: &[&str] = &[
    "-w",
    "ws",
    "--script",
    "examples/critique/script.yaml",
    "--config",
    "examples/critique/agentloop.yaml",
    "run",
    "--goal",
    "Write a two-paragraph critique of the bundled article",
    "--context",
    "examples/critique/context.md",
];

const SEED: &[(&str, &str)] = &[("AGENTLOOP_SEED", "7")];

/// What reads a done run: its status, the list of runs, its trace and its numbers, the memory it
/// left, its report; then the ways that do not reach it.
const AFTER_THE_DEMO: Table = &[
    ("demo-status", &["-w", "ws", "status"]),
    ("demo-status-json", &["-w", "ws", "status", "--json"]),
    ("demo-runs", &["-w", "ws", "runs"]),
    ("demo-runs-json", &["-w", "ws", "runs", "--json"]),
    ("demo-trace-show", &["-w", "ws", "trace", "show"]),
    ("demo-trace-show-json", &["-w", "ws", "trace", "show", "--json"]),
    ("demo-trace-show-act", &["-w", "ws", "trace", "show", "--phase", "act", "--wide"]),
    ("demo-trace-stats", &["-w", "ws", "trace", "stats"]),
    ("demo-trace-stats-json", &["-w", "ws", "trace", "stats", "--json"]),
    ("demo-memory-list", &["-w", "ws", "memory", "list"]),
    ("demo-memory-list-json", &["-w", "ws", "memory", "list", "--json"]),
    ("demo-memory-search", &["-w", "ws", "memory", "search", "critique of the article"]),
    ("demo-memory-search-json", &["-w", "ws", "memory", "search", "critique of the article", "--json"]),
    ("demo-report", &["-w", "ws", "report"]),
    ("demo-runs-diff-alone", &["-w", "ws", "runs", "diff"]),
    ("demo-answer-not-asked", &["-w", "ws", "answer", "yes"]),
    ("error-status-unknown-run", &["-w", "ws", "status", "--run", "01KDVDNA00000000000000E999"]),
    ("error-report-unknown-run", &["-w", "ws", "report", "--run", "nope"]),
    ("error-trace-show-unknown-run", &["-w", "ws", "trace", "show", "--run", "nope"]),
    ("error-memory-show-unknown", &["-w", "ws", "memory", "show", "nope/x"]),
];

#[test]
fn the_demo_run_and_what_reads_it() {
    let t = T::new();
    demo_files(&t);
    snapshot(&t, "demo-run", DEMO, SEED);
    take(&t, AFTER_THE_DEMO);
    // The same goal again runs nothing (exit 11) and prints the outcome again.
    snapshot(&t, "demo-run-again", DEMO, SEED);
}

#[test]
fn the_demo_run_as_json_and_as_events() {
    let t = T::new();
    demo_files(&t);
    snapshot(&t, "demo-run-json", &[DEMO, &["--json"]].concat(), SEED);
    let t = T::new();
    demo_files(&t);
    snapshot(&t, "demo-run-events", &[DEMO, &["--events"]].concat(), SEED);
}

#[test]
fn a_workspace_made_by_init() {
    let t = T::new();
    take(
        &t,
        &[
            ("init", &["-w", "ws", "init", "--goal", "Summarise notes.txt"]),
            ("init-again", &["-w", "ws", "init", "--goal", "Something else"]),
            ("init-status", &["-w", "ws", "status"]),
            ("init-status-json", &["-w", "ws", "status", "--json"]),
            ("init-runs", &["-w", "ws", "runs"]),
            ("init-runs-json", &["-w", "ws", "runs", "--json"]),
            ("init-trace-show", &["-w", "ws", "trace", "show"]),
            ("init-trace-stats-json", &["-w", "ws", "trace", "stats", "--json"]),
            ("error-act-out-of-turn", &["-w", "ws", "act"]),
        ],
    );
}

/// What a workspace can use, with a configuration of its own: the effective config and where
/// each value came from, the tools, the skills, the agent profiles, the MCP servers (none).
#[test]
fn what_a_workspace_can_use() {
    let t = T::new();
    t.write("ws/agentloop.yaml", "max_steps: 8\ntools:\n  read_paths: [docs]\n");
    take(
        &t,
        &[
            ("config-show", &["-w", "ws", "config", "show"]),
            ("config-show-json", &["-w", "ws", "config", "show", "--json"]),
            ("tools-list", &["-w", "ws", "tools", "list"]),
            ("tools-list-json", &["-w", "ws", "tools", "list", "--json"]),
            ("skills-list", &["-w", "ws", "skills", "list"]),
            ("skills-list-json", &["-w", "ws", "skills", "list", "--json"]),
            ("skills-gen", &["-w", "ws", "skills", "gen"]),
            ("skills-gen-json", &["-w", "ws", "skills", "gen", "--format", "json"]),
            ("agents-list-none", &["-w", "ws", "agents", "list"]),
            ("mcp-list-none", &["-w", "ws", "mcp", "list"]),
            ("mcp-list-none-json", &["-w", "ws", "mcp", "list", "--json"]),
        ],
    );
    t.write("ws/agents/researcher.yaml", "description: Digs deep.\nmax_steps: 30\n");
    t.write("ws/agents/broken.yaml", "nonsense_key: 1\n");
    take(
        &t,
        &[
            ("agents-list", &["-w", "ws", "agents", "list"]),
            ("agents-show", &["-w", "ws", "agents", "show", "researcher"]),
        ],
    );
}

/// Framing asks a question; once answered, the run reads its notes and is done.
const ASKS: &str = r#"frame:
  - answer: {goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: false, open_question: "Which topics matter?"}
  - answer: {goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: true}
plan:
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], facts: ["Rust matters"], decision: done, reason: all good, outcome: "Digest: Rust 1.90"}
"#;

#[test]
fn an_escalated_run_and_its_answer() {
    let t = T::new();
    t.write("ws/notes.txt", "news\n");
    t.write("script.yaml", ASKS);
    take(
        &t,
        &[
            ("escalated-run", &["-w", "ws", "--script", "script.yaml", "run", "--goal", "Today's digest"]),
            ("escalated-status", &["-w", "ws", "status"]),
            ("escalated-status-json", &["-w", "ws", "status", "--json"]),
            ("escalated-runs", &["-w", "ws", "runs"]),
            ("escalated-answer", &["-w", "ws", "--script", "script.yaml", "answer", "Rust"]),
            ("escalated-answered-status", &["-w", "ws", "status"]),
            ("escalated-answered-trace-show", &["-w", "ws", "trace", "show"]),
        ],
    );
}

/// One morning of a digest job: writes artifacts/digest-DATE.md and learns `fact`.
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

#[test]
fn two_mornings_of_a_job_and_what_changed() {
    let t = T::new();
    let day = |name: &str, date: &str, fact: &str, items: &str| {
        t.write("script.yaml", &morning(date, fact, items));
        let now = format!("{date}T06:00:00Z");
        let args = ["-w", "ws", "--script", "script.yaml", "run", "--goal", "Morning digest", "--slot", date];
        snapshot(&t, name, &args, &[("AGENTLOOP_NOW", &now)]);
    };
    day("job-day1-run", "2026-01-01", "the feed has 3 items", "item a\\nitem b\\nitem c\\n");
    snapshot(&t, "job-diff-first", &["-w", "ws", "runs", "diff"], &[]);
    day("job-day2-run", "2026-01-02", "the feed has 4 items", "item a\\nitem b\\nitem d\\nitem e\\n");
    day("job-day2-again", "2026-01-02", "the feed has 4 items", "item a\\nitem b\\nitem d\\nitem e\\n");
    take(
        &t,
        &[
            ("job-diff", &["-w", "ws", "runs", "diff"]),
            ("job-diff-json", &["-w", "ws", "runs", "diff", "--json"]),
            ("job-diff-exit-code", &["-w", "ws", "runs", "diff", "--exit-code"]),
            ("job-runs", &["-w", "ws", "runs"]),
            ("job-runs-json", &["-w", "ws", "runs", "--json"]),
            ("job-trace-stats-all-runs", &["-w", "ws", "trace", "stats", "--all-runs"]),
            ("job-trace-show-all-runs", &["-w", "ws", "trace", "show", "--all-runs"]),
            ("job-runs-prune-dry-run", &["-w", "ws", "runs", "prune", "--keep", "1", "--dry-run"]),
        ],
    );
}

/// Runs that end short of done: a limit (exit 4), repeated failures (exit 3), a model that has
/// no more answers (exit 5); and what their traces say.
#[test]
fn runs_that_end_short_of_done() {
    let t = T::new();
    t.write("failing.yaml", &frustrating_script());
    t.write("short.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\n");
    t.write("notes/ws/notes.txt", "one\ntwo\n");
    take(
        &t,
        &[
            (
                "stop-max-steps",
                &["-w", "limited", "--script", "failing.yaml", "--max-steps", "2", "run", "--goal", "g"],
            ),
            ("stop-max-steps-status", &["-w", "limited", "status"]),
            ("stop-failures", &["-w", "failing", "--script", "failing.yaml", "run", "--goal", "g"]),
            ("stop-failures-trace-errors", &["-w", "failing", "trace", "show", "--errors"]),
            ("stop-failures-trace-stats", &["-w", "failing", "trace", "stats"]),
            ("stop-script-ran-out", &["-w", "short", "--script", "short.yaml", "run", "--goal", "g"]),
            ("stop-script-ran-out-status-json", &["-w", "short", "status", "--json"]),
            (
                "tools-call-file-read",
                &["-w", "notes/ws", "tools", "call", "file_read", "--args", r#"{"path":"notes.txt"}"#],
            ),
            ("skills-show", &["-w", "notes/ws", "skills", "show", "critique"]),
        ],
    );
}

/// Common mistakes: each says what is wrong and how to go on, with its exit code.
#[test]
fn the_errors_of_common_mistakes() {
    let t = T::new();
    t.write("typo/agentloop.yaml", "max_stpes: 3\n");
    t.write("wrongtype/agentloop.yaml", "max_steps: many\n");
    std::fs::create_dir_all(t.path("ws")).unwrap();
    take(
        &t,
        &[
            ("error-no-workspace", &["-w", "nowhere", "status"]),
            ("error-config-unknown-key", &["-w", "typo", "status"]),
            ("error-config-unknown-key-show", &["-w", "typo", "config", "show"]),
            ("error-config-wrong-type", &["-w", "wrongtype", "status"]),
            ("error-missing-context-file", &["-w", "ws", "run", "--goal", "g", "--context", "missing.md"]),
            ("error-no-provider", &["-w", "ws", "run", "--goal", "g"]),
            ("error-bad-duration", &["-w", "ws", "status", "--timeout", "soon"]),
            ("error-unknown-tool", &["-w", "ws", "tools", "call", "no_such_tool", "--args", "{}"]),
            ("error-missing-script", &["-w", "ws", "--script", "missing.yaml", "run", "--goal", "g"]),
        ],
    );
}
