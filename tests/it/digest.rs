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
