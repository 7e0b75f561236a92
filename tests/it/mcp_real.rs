//! Opt-in (`make test-real`): agentloop against the real reference MCP servers that
//! `../shared/harness/install.sh` installs (filesystem, everything, memory from npm; time,
//! fetch from PyPI), through the harness's own `mcp-servers.json`, read as is.
//!
//! Every server gets a marker variable in its environment, so the tests can prove that no
//! process carrying it is left once a command ends (other processes on the machine are not
//! looked at). Nothing here reaches the internet: fetch reads a page from 127.0.0.1.

use crate::common::*;
use crate::mcp::{alive, gone};
use serde_json::{json, Value};
use std::time::Duration;

const SERVERS: [&str; 5] = ["filesystem", "everything", "memory", "time", "fetch"];

fn harness() -> String {
    let h = std::env::var("HARNESS_DIR").unwrap_or_else(|_| {
        let cache = std::env::var("XDG_CACHE_HOME")
            .unwrap_or_else(|_| format!("{}/.cache", std::env::var("HOME").unwrap_or_default()));
        format!("{cache}/agentloop-harness")
    });
    assert!(
        std::path::Path::new(&h).join("mcp-servers.json").is_file(),
        "no MCP harness in {h}: run ../shared/harness/install.sh first (or set HARNESS_DIR)"
    );
    h
}

struct R {
    t: T,
    h: String,
    mark: String,
}

impl R {
    fn new() -> Self {
        let h = harness();
        let t = T::new();
        let mark = t.root().display().to_string();
        std::fs::create_dir_all(t.path("sandbox")).unwrap();
        t.write("sandbox/hello.txt", "hello from the sandbox\n");
        // The harness file as is, with the sandbox and memory file moved into the temp folder
        // and a marker in every server's environment.
        let mut servers = String::new();
        for s in SERVERS {
            let mut extra = String::new();
            if s == "memory" {
                extra = format!(", MEMORY_FILE_PATH: '{}'", t.path("memory.jsonl").display());
            }
            servers.push_str(&format!("    {s}: {{env: {{AGENTLOOP_TEST_MARK: '{mark}'{extra}}}}}\n"));
        }
        servers = servers
            .replace("    filesystem: {", &format!("    filesystem: {{args: ['{}'], ", t.path("sandbox").display()));
        t.write(
            "ws/agentloop.yaml",
            &format!("mcp:\n  config_file: {h}/mcp-servers.json\n  servers:\n{servers}tools:\n  timeout: 60s\n"),
        );
        R { t, h, mark }
    }
    fn al(&self, args: &[&str]) -> assert_cmd::Command {
        let mut c = self.t.al(args);
        // Real clocks: the report shows real start-up times.
        c.env("HARNESS_DIR", &self.h).env("ANTHROPIC_API_KEY", "sk-ant-not-for-servers").env_remove("AGENTLOOP_NOW");
        c
    }
    fn call(&self, server: &str, tool: &str, args: Value) -> (Option<i32>, Value) {
        let out = self.al(&["mcp", "call", server, tool, "--args", &args.to_string()]).output().unwrap();
        let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)));
        (out.status.code(), v)
    }
    /// Processes that carry this test's marker.
    fn marked(&self) -> Vec<u32> {
        let needle = format!("AGENTLOOP_TEST_MARK={}", self.mark);
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                    .unwrap_or(false)
                    && alive(*pid)
            })
            .collect()
    }
    fn none_left(&self) {
        let left = self.marked();
        assert!(gone(&left, Duration::from_secs(5)), "server processes left behind: {left:?}");
    }
}

#[test]
#[ignore = "needs the real MCP servers: make test-real"]
fn mcp_real_check_lists_every_server() {
    let r = R::new();
    let out = r.al(&["mcp", "check", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)));
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&v)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("        "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for s in v.as_array().unwrap() {
        eprintln!(
            "verified: {} {} protocol {} tools {} startup {} ms",
            s["name"],
            s["server_info"],
            s["protocol_version"],
            s["tools"].as_array().unwrap().len(),
            s["startup_ms"]
        );
        assert_eq!(s["ok"], true, "{s}");
        assert!(
            ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"].contains(&s["protocol_version"].as_str().unwrap())
        );
        assert!(!s["tools"].as_array().unwrap().is_empty(), "{s}");
        assert!(s["dropped"].as_array().unwrap().is_empty(), "every real schema is accepted: {s}");
    }
    r.none_left();
    // The cache now serves the catalog with no server started.
    let out = r.al(&["tools", "list", "--json"]).output().unwrap();
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    for n in [
        "time__get_current_time",
        "fetch__fetch",
        "filesystem__read_text_file",
        "everything__echo",
        "memory__read_graph",
    ] {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
    assert!(names
        .iter()
        .all(|n| n.len() <= 64 && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')));
    assert!(r.marked().is_empty());
}

#[test]
#[ignore = "needs the real MCP servers: make test-real"]
fn mcp_real_calls() {
    let r = R::new();
    // time
    let (code, v) = r.call("time", "get_current_time", json!({"timezone": "Asia/Tokyo"}));
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().contains("Asia/Tokyo"), "{v}");
    let (code, v) = r.call("time", "get_current_time", json!({"timezone": "Mars/Olympus_Mons"}));
    assert_eq!(code, Some(6), "{v}");
    assert!(v["error"].as_str().unwrap().contains("Mars/Olympus_Mons"), "{v}");
    // fetch, from a page on 127.0.0.1
    let page = Server::start(vec![Reply::text(
        200,
        "text/html",
        "<html><body><main><h1>Local page</h1><p>Served for the fetch server.</p></main></body></html>",
    )]);
    let url = format!("{}/page", page.url);
    let (code, v) = r.call("fetch", "fetch", json!({"url": url}));
    // As configured by the harness it refuses private addresses: the server's own message.
    assert_eq!(code, Some(6), "{v}");
    assert!(v["error"].as_str().unwrap().starts_with("MCP server fetch: tool fetch reported an error: "), "{v}");
    assert!(v["error"].as_str().unwrap().contains("--allow-private-ips"), "{v}");
    let cfg =
        r.t.read("ws/agentloop.yaml")
            .replace("    fetch: {", "    fetch: {args: [--ignore-robots-txt, --allow-private-ips], ");
    r.t.write("ws/agentloop.yaml", &cfg);
    let (code, v) = r.call("fetch", "fetch", json!({"url": url}));
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().contains("Served for the fetch server"), "{v}");
    // filesystem, confined to the sandbox
    let sandbox = r.t.path("sandbox").display().to_string();
    let (code, v) = r.call("filesystem", "read_text_file", json!({"path": format!("{sandbox}/hello.txt")}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["output"], "hello from the sandbox\n");
    let (code, v) = r.call("filesystem", "read_text_file", json!({"path": "/etc/passwd"}));
    assert_eq!(code, Some(6), "{v}");
    assert!(v["error"].as_str().unwrap().starts_with("MCP server filesystem: tool read_text_file"), "{v}");
    // everything: text, an image saved under artifacts/, structured content, the environment
    let (code, v) = r.call("everything", "echo", json!({"message": "hi there"}));
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().contains("hi there"), "{v}");
    let (code, v) = r.call("everything", "get-tiny-image", json!({}));
    assert_eq!(code, Some(0), "{v}");
    let art = v["artifacts"][0].as_str().expect("the image is saved");
    assert!(std::fs::read(r.t.path(&format!("ws/{art}"))).unwrap().starts_with(b"\x89PNG"), "{v}");
    let (code, v) = r.call("everything", "get-env", json!({}));
    assert_eq!(code, Some(0), "{v}");
    let env = v["output"].as_str().unwrap();
    assert!(
        env.contains("AGENTLOOP_TEST_MARK") && !env.contains("sk-ant-not-for-servers"),
        "provider keys stay with agentloop"
    );
    // memory, in the temp folder
    let (code, v) = r.call(
        "memory",
        "create_entities",
        json!({"entities": [{"name": "agentloop", "entityType": "tool", "observations": ["speaks MCP"]}]}),
    );
    assert_eq!(code, Some(0), "{v}");
    let (code, v) = r.call("memory", "read_graph", json!({}));
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().contains("speaks MCP"), "{v}");
    r.none_left();
}

#[test]
#[ignore = "needs the real MCP servers: make test-real"]
fn mcp_real_tokyo_run_reaches_done() {
    let r = R::new();
    r.t.write("script.yaml", crate::mcp::TOKYO_SCRIPT);
    r.al(&["mcp", "list"]).assert().success();
    let out = r
        .al(&["--script", "script.yaml", "run", "--goal", "What time is it in Tokyo? Into artifacts/time.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(r.t.json("ws/result.json")["status"], "done");
    let act = r.t.trace().into_iter().find(|e| e["phase"] == "act" && e["tool"] == "time__get_current_time").unwrap();
    assert_eq!(act["result_status"], "ok", "{act}");
    assert!(act["result_summary"].as_str().unwrap().contains("Asia/Tokyo"), "{act}");
    r.none_left();
}

#[test]
#[ignore = "needs the real MCP servers: make test-real"]
fn mcp_real_ctrl_c_leaves_no_server() {
    use std::os::unix::process::ExitStatusExt;
    let r = R::new();
    r.al(&["mcp", "list"]).assert().success();
    // A long operation of the everything server, interrupted.
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    c.env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", r.t.path("home"))
        .env("XDG_CONFIG_HOME", r.t.path("xdg"))
        .env("HARNESS_DIR", &r.h)
        .current_dir(r.t.root())
        .args([
            "-w",
            "ws",
            "mcp",
            "call",
            "everything",
            "trigger-long-running-operation",
            "--args",
            r#"{"duration": 30, "steps": 5}"#,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let start = std::time::Instant::now();
    while r.marked().is_empty() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!r.marked().is_empty(), "the server runs");
    std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(2));
    r.none_left();
}
