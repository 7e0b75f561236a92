//! The README's cron digest, run as written over three mornings: the crontab line is taken from
//! the README's `crontab` block, its schedule fields dropped and `\%` read as `%` (as cron does),
//! and run by `sh` with the binary on PATH as `agentloop`, HOME in a temp folder, a `date` that
//! tells the test's morning, and the fake chat model (tests/it/chat.rs) configured as the
//! user's provider. A person's answer on day 1 reaches every later morning's prompt, each run's
//! date and slot reach it, the digest is on stdout and in `today.txt`, and a second firing the
//! same morning exits 11 leaving `today.txt` as it was.

use crate::chat::{model_server_with, Behaviour};
use crate::common::*;
use std::path::{Path, PathBuf};

/// The command of the README's crontab line, as cron hands it to `sh`.
fn crontab_command() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let block = readme.split("```crontab\n").nth(1).expect("README has a crontab block");
    let block = &block[..block.find("```").unwrap()];
    let line = block.lines().find(|l| !l.trim().is_empty() && !l.starts_with('#')).expect("a crontab line");
    let mut rest = line.trim_start();
    for _ in 0..5 {
        rest = rest.split_once(char::is_whitespace).expect("five schedule fields").1.trim_start();
    }
    rest.replace("\\%", "%")
}

/// A folder with `agentloop` (the built binary) and a `date` that prints the time in
/// AGENTLOOP_NOW (the program's own clock override) through the system's date.
fn bin_dir(t: &T) -> PathBuf {
    let dir = t.path("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let real_date = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("date"))
        .find(|p| p.is_file())
        .expect("date on PATH");
    let shim = dir.join("date");
    std::fs::write(&shim, format!("#!/bin/sh\nexec {} -u -d \"$AGENTLOOP_NOW\" \"$@\"\n", real_date.display()))
        .unwrap();
    std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin("agentloop"), dir.join("agentloop")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `sh -c COMMAND` as cron would run it on the morning `now`: (exit code, stdout, stderr).
fn fire(t: &T, bin: &Path, command: &str, now: &str) -> (Option<i32>, String, String) {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .env_clear()
        .env("PATH", path)
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("XDG_CACHE_HOME", t.path("cache"))
        .env("AGENTLOOP_NOW", now)
        .current_dir(t.path("home"))
        .output()
        .unwrap();
    (out.status.code(), stdout(&out), stderr(&out))
}

#[test]
fn the_readme_cron_digest_runs_as_written_over_three_mornings() {
    let t = T::new();
    // Each run learns 25 new facts, more than a follow-up carries: the answer must survive.
    let model = model_server_with(Behaviour { asks_once: true, facts: 25 });
    t.write(
        "xdg/agentloop/config.yaml",
        &format!("llm: {{provider: openai, base_url: \"{}/v1\", model: qwen2.5:7b}}\n", model.url),
    );
    let bin = bin_dir(&t);
    let cron = crontab_command();
    assert!(cron.contains("--output ~/digest/today.txt") && cron.contains("--slot"), "{cron}");
    let today = || std::fs::read_to_string(t.path("home/digest/today.txt")).ok();

    // Day 1: the model asks which topics matter; nothing is written to today.txt.
    let (code, out, err) = fire(&t, &bin, &cron, "2026-03-01T07:00:00Z");
    assert_eq!(code, Some(0), "the shell's `|| echo` ends it: {err}");
    assert!(out.contains("digest: exit 3"), "{out}\n{err}");
    assert_eq!(today(), None);
    let answer = "agentloop -w ~/digest answer \"Rust releases and security advisories\"";
    let (code, out, err) = fire(&t, &bin, answer, "2026-03-01T08:00:00Z");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("Digest for 2026-03-01 (slot 2026-03-01); a person's answer reached the model: yes"), "{out}");

    for day in ["2026-03-02", "2026-03-03"] {
        let (code, out, err) = fire(&t, &bin, &cron, &format!("{day}T07:00:00Z"));
        assert_eq!(code, Some(0), "{err}");
        let digest = format!("Digest for {day} (slot {day}); a person's answer reached the model: yes");
        assert_eq!(out.trim(), digest, "the digest itself is on stdout: {err}");
        assert_eq!(today().as_deref(), Some(format!("{digest}\n").as_str()));
        let context = std::fs::read_to_string(t.path("home/digest/context.md")).unwrap();
        assert!(
            context.contains(&format!("Date: {day} (UTC")) && context.contains(&format!("Slot: {day}")),
            "{context}"
        );
        assert!(
            context.contains("A person answered") && context.contains("Rust releases and security advisories"),
            "{context}"
        );
        // A second firing the same morning runs nothing and leaves today.txt as it was.
        let calls = model.count();
        let (code, out, _) = fire(&t, &bin, &cron, &format!("{day}T07:05:00Z"));
        assert_eq!(code, Some(0));
        assert_eq!(out.trim(), "digest: exit 11");
        assert_eq!(today().as_deref(), Some(format!("{digest}\n").as_str()), "untouched");
        assert_eq!(model.count(), calls, "no model call");
    }
    // Every morning's run is kept: two archived, the third in place.
    let archived = std::fs::read_dir(t.path("home/digest/runs")).unwrap().count();
    assert_eq!(archived, 2);
}

/// `--output` into a folder that does not exist is refused before anything is spent or created.
#[test]
fn output_into_a_missing_folder_is_refused_before_the_run() {
    let t = T::new();
    let model = crate::chat::model_server().expect_calls(0);
    let out = t
        .al(&["--provider", "openai", "--base-url", &model.url, "run", "--goal", "g", "--output", "nowhere/today.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--output nowhere/today.txt: nowhere is not an existing folder"), "{}", stderr(&out));
    assert!(!t.exists("ws") && !t.exists("nowhere"));
}

/// Framing asks a question; once answered, the digest is written.
const ASKS: &str = r#"frame:
  - answer: {goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: false, open_question: "Which topics matter?"}
  - answer: {goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: true}
plan:
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: all good, outcome: "Digest: Rust 1.90"}
"#;

/// `answer --output FILE` writes what stdout shows of the run that ends done, as `run --output`
/// does; a run that did not end done leaves FILE as it was.
#[test]
fn answer_writes_the_done_runs_output_to_a_file() {
    let t = T::new();
    t.write("ws/notes.txt", "news\n");
    t.write("script.yaml", ASKS);
    t.write("today.txt", "yesterday's digest\n");
    let out = t
        .al(&["--script", "script.yaml", "run", "--goal", "Today's digest", "-q", "--output", "today.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(t.read("today.txt"), "yesterday's digest\n", "an escalated run leaves it as it was");
    // Refused before anything is done: the folder does not exist.
    let out = t.al(&["--script", "script.yaml", "answer", "Rust", "--output", "nowhere/today.txt"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--output nowhere/today.txt: nowhere is not an existing folder"), "{}", stderr(&out));
    assert_eq!(t.json("ws/state.json")["status"], "escalated", "the question is still open");
    let out = t.al(&["--script", "script.yaml", "answer", "Rust", "-q", "--output", "today.txt"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Digest: Rust 1.90\n");
    assert_eq!(t.read("today.txt"), stdout(&out), "the file holds what stdout shows");
    // --output and --events do not go together (the stream is stdout's).
    t.al(&["answer", "x", "--events", "--output", "today.txt"]).assert().code(2);
}

/// A slot whose run did not end done is run again with --force; exit 11 says so, and names the
/// way on with the run itself when it is the workspace's own.
#[test]
fn a_taken_slot_says_how_to_run_it_again_and_force_does() {
    let t = T::new();
    t.write("ws/notes.txt", "news\n");
    t.write("script.yaml", ASKS);
    let fire = |extra: &[&str]| {
        let mut args = vec!["--script", "script.yaml", "run", "--goal", "Today's digest", "--slot", "2026-03-01"];
        args.extend_from_slice(extra);
        t.al(&args).output().unwrap()
    };
    assert_eq!(fire(&[]).status.code(), Some(3));
    let first = t.json("ws/state.json")["run_id"].as_str().unwrap().to_string();
    let out = fire(&[]);
    assert_eq!(out.status.code(), Some(11), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "slot 2026-03-01 already ran: run {first} ended escalated (cannot proceed: Which topics matter?); nothing \
             was run. Ways on: `agentloop -w ws answer \"...\"` answers its question and goes on; the same command \
             with --force runs the slot again, a new run that calls the model (`agentloop -w ws run --goal \"...\" \
             --slot 2026-03-01 --force`)"
        )
    );
    // --force runs the slot again: a new run of the same slot, the first one archived.
    t.write(
        "script.yaml",
        &ASKS.replacen("can_proceed: false, open_question: \"Which topics matter?\"", "can_proceed: true", 1),
    );
    let out = fire(&["--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let again = t.json("ws/state.json");
    assert_ne!(again["run_id"], first.as_str());
    assert_eq!((again["slot"].as_str(), again["status"].as_str()), (Some("2026-03-01"), Some("done")));
    assert_eq!(t.json(&format!("ws/runs/{first}/state.json"))["status"], "escalated");
    // Ended done, the slot is taken again; the way on is --force only.
    let out = fire(&[]);
    assert_eq!(out.status.code(), Some(11));
    assert!(stderr(&out).contains("Ways on: the same command with --force runs the slot again"), "{}", stderr(&out));
}
