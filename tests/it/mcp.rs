//! MCP servers as tools, against `tests/mcp/fake_server.py` (a small MCP server over stdio and
//! streamable HTTP): config, cache, `mcp list|call|check`, results, errors, timeouts, crashes,
//! signals, a scripted run, event mode, elicitation, and no server process left behind.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

pub fn fake_server() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/fake_server.py").to_str().unwrap().to_string()
}

/// A workspace whose config has the fake server as `NAME` (plus extra YAML under it).
pub(crate) fn with_server(name: &str, extra: &str) -> T {
    let t = T::new();
    t.write("ws/.keep", "");
    t.write(
        "ws/agentloop.yaml",
        &format!(
            "mcp:\n  servers:\n    {name}:\n      command: python3\n      args: [{}]\n      env: {{FAKE_MCP_STARTS: '{}', FAKE_MCP_LOG: '{}'}}\n{extra}",
            fake_server(),
            t.path("starts.txt").display(),
            t.path("calls.jsonl").display()
        ),
    );
    t
}

pub(crate) fn starts(t: &T) -> Vec<u32> {
    std::fs::read_to_string(t.path("starts.txt"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

pub(crate) fn calls(t: &T) -> Vec<Value> {
    std::fs::read_to_string(t.path("calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Alive and not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(s) => s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')).unwrap_or(false),
    }
}

/// Waits up to `limit` for every pid to be gone.
pub fn gone(pids: &[u32], limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if pids.iter().all(|p| !alive(*p)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
pub(crate) fn list_starts_a_server_once_then_reads_the_cache() {
    let t = with_server("fake", "");
    let out = t.al(&["mcp", "list", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_out(&out);
    let s = &v[0];
    assert_eq!(s["name"], "fake");
    assert_eq!(s["status"], "listed");
    assert_eq!(s["protocol_version"], "2025-11-25");
    assert_eq!(s["server_info"], json!({"name": "fake-mcp", "version": "1.0.0"}));
    let names: Vec<&str> = s["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"fake__echo") && names.contains(&"fake__get_current_time"), "{names:?}");
    // A name providers refuse is made safe, and maps back to the server's name.
    let weird = s["tools"].as_array().unwrap().iter().find(|t| t["tool"] == "weird.name/x").unwrap();
    let wn = weird["name"].as_str().unwrap();
    assert!(wn.starts_with("fake__weird_name_x_") && wn.len() <= 64, "{wn}");
    // Its $ref was inlined and a type added.
    assert_eq!(weird["parameters"]["type"], "object");
    assert_eq!(weird["parameters"]["properties"]["p"]["properties"]["x"]["type"], "integer");
    // An invalid schema drops that tool only, with a warning that says why.
    assert_eq!(s["dropped"][0]["tool"], "bad_schema");
    assert!(stderr(&out).contains("warning: MCP server fake: tool bad_schema is left out"), "{}", stderr(&out));
    // The server's stderr went to its log, not to the terminal.
    assert!(!stderr(&out).contains("fake MCP server"), "{}", stderr(&out));
    assert!(t.read("ws/artifacts/mcp-fake.log").contains("fake MCP server"));
    assert_eq!(starts(&t).len(), 1);
    assert!(gone(&starts(&t), Duration::from_secs(3)), "the listing server is stopped");

    // Cached: no start.
    let v = json_out(&t.al(&["mcp", "list", "--json"]).output().unwrap());
    assert_eq!(v[0]["status"], "cached");
    assert_eq!(starts(&t).len(), 1);
    let cache: Vec<_> = std::fs::read_dir(t.path("cache/agentloop/mcp")).unwrap().collect();
    assert_eq!(cache.len(), 1);
    // tools list, skills gen and the text listing read the same cache.
    let out = t.al(&["tools", "list", "--json"]).output().unwrap();
    let tools: Value = json_out(&out);
    let echo = tools.as_array().unwrap().iter().find(|x| x["name"] == "fake__echo").expect("fake__echo listed");
    assert_eq!(echo["side_effect"], "read");
    assert!(echo["description"].as_str().unwrap().contains("(MCP server fake)"));
    let gen = t.al(&["skills", "gen"]).output().unwrap();
    assert!(stdout(&gen).contains("fake__get_current_time"));
    let text = t.al(&["mcp", "list"]).output().unwrap();
    assert!(
        stdout(&text).starts_with("fake (stdio) cached: 9 tools, protocol 2025-11-25 fake-mcp 1.0.0\n"),
        "{}",
        stdout(&text)
    );
    assert!(stdout(&text).contains("    left out: bad_schema: "), "{}", stdout(&text));
    assert_eq!(starts(&t).len(), 1);

    // --refresh starts it again; so does a change of args (a new cache key).
    t.al(&["mcp", "list", "--refresh"]).assert().success();
    assert_eq!(starts(&t).len(), 2);
    let cfg = t.read("ws/agentloop.yaml").replace("args: [", "args: [-u, ");
    t.write("ws/agentloop.yaml", &cfg);
    let v = json_out(&t.al(&["mcp", "list", "--json"]).output().unwrap());
    assert_eq!(v[0]["status"], "listed");
    assert_eq!(starts(&t).len(), 3);
    assert!(gone(&starts(&t), Duration::from_secs(3)));
}

#[test]
pub(crate) fn a_stale_cache_heals_when_a_call_starts_the_server() {
    let t = with_server("fake", "");
    t.al(&["mcp", "list"]).assert().success();
    let dir = t.path("cache/agentloop/mcp");
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let mut l: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    l["tools"].as_array_mut().unwrap().retain(|t| t["name"] != "get_current_time");
    std::fs::write(&file, l.to_string()).unwrap();
    let names = |t: &T| -> Vec<String> {
        let v = json_out(&t.al(&["mcp", "list", "--json"]).output().unwrap());
        v[0]["tools"].as_array().unwrap().iter().map(|x| x["tool"].as_str().unwrap().to_string()).collect()
    };
    assert!(!names(&t).contains(&"get_current_time".to_string()));
    t.al(&["mcp", "call", "fake", "echo", "--args", r#"{"text": "x"}"#]).assert().success();
    assert!(names(&t).contains(&"get_current_time".to_string()), "the call's start refreshed the cache");
    assert_eq!(starts(&t).len(), 2);
}

#[test]
pub(crate) fn protocol_version_is_what_the_server_answers() {
    let t = with_server("old", "");
    let out = t.al(&["mcp", "list", "--json"]).env("FAKE_MCP_PROTOCOL", "2024-11-05").output().unwrap();
    // FAKE_MCP_PROTOCOL is not inherited: only the listed variables and the server's env are.
    assert_eq!(json_out(&out)[0]["protocol_version"], "2025-11-25");
    let cfg = t.read("ws/agentloop.yaml").replace("env: {", "env: {FAKE_MCP_PROTOCOL: '2024-11-05', ");
    t.write("ws/agentloop.yaml", &cfg);
    let out = t.al(&["mcp", "call", "old", "echo", "--args", r#"{"text": "hi"}"#]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_out(&out);
    assert_eq!(v["metadata"]["mcp"]["protocol_version"], "2024-11-05");
    let init = calls(&t).into_iter().find(|c| c["method"] == "initialize").unwrap();
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["params"]["clientInfo"]["name"], "agentloop");
}

#[test]
pub(crate) fn call_outcomes_text_error_rpc_error_image_and_arguments() {
    let t = with_server("fake", "");
    let call = |tool: &str, args: Value| {
        let out = t.al(&["mcp", "call", "fake", tool, "--args", &args.to_string()]).output().unwrap();
        (out.status.code(), json_out(&out), stderr(&out))
    };
    let (code, v, _) = call("echo", json!({"text": "hello"}));
    assert_eq!(code, Some(0));
    assert_eq!(v["status"], "ok");
    assert_eq!(v["output"], "echo: hello");
    assert_eq!(v["metadata"]["mcp"], json!({"server": "fake", "tool": "echo", "protocol_version": "2025-11-25"}));
    // tools call reaches the same tool by its registry name.
    let out = t.al(&["tools", "call", "fake__echo", "--args", r#"{"text": "again"}"#]).output().unwrap();
    assert_eq!(json_out(&out)["output"], "echo: again");

    let (code, v, _) = call("fail", json!({"message": "no such city"}));
    assert_eq!(code, Some(6));
    assert_eq!(v["error"], "MCP server fake: tool fail reported an error: no such city");
    assert_eq!(v["retryable"], false);

    let (code, v, _) = call("rpc_error", json!({}));
    assert_eq!(code, Some(6));
    assert_eq!(v["error"], "MCP server fake: tool rpc_error failed: database is locked (JSON-RPC error -32000)");

    let (code, v, _) = call("image", json!({}));
    assert_eq!(code, Some(0));
    let art = v["artifacts"][0].as_str().unwrap();
    assert!(art.starts_with("artifacts/tool-fake__image-") && art.ends_with("-1.png"), "{art}");
    assert!(v["output"].as_str().unwrap().contains(&format!("[image image/png, 66 bytes, saved to {art}]")), "{v}");
    assert!(std::fs::read(t.path(&format!("ws/{art}"))).unwrap().starts_with(b"\x89PNG"));

    let (code, v, _) = call("get_current_time", json!({"timezone": "Asia/Tokyo"}));
    assert_eq!(code, Some(0));
    assert!(v["output"].as_str().unwrap().contains("2026-01-01T09:00:00+09:00"));
    assert_eq!(v["metadata"]["structured_content"]["timezone"], "Asia/Tokyo");

    let (code, v, _) = call("weird.name/x", json!({"p": {"x": 1}}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["output"], r#"weird got {"p": {"x": 1}}"#);

    // Arguments are checked against the schema before the server is asked.
    let n = starts(&t).len();
    let (code, v, err) = call("echo", json!({}));
    assert_eq!(code, Some(2));
    assert!(v["error"].as_str().unwrap().contains("\"text\" is a required property"), "{v}");
    assert!(err.contains("error: tools call fake__echo: invalid arguments"), "{err}");
    assert_eq!(starts(&t).len(), n, "no server started for invalid arguments");
    // Unknown server, unknown tool, dropped tool.
    let out = t.al(&["mcp", "call", "nope", "echo"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("error: no MCP server named `nope`; configured: fake"), "{}", stderr(&out));
    let out = t.al(&["mcp", "call", "fake", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("MCP server fake has no tool `nope`; its tools: echo, fail,"), "{}", stderr(&out));
    assert!(stderr(&out).contains("hint: the list may be stale"), "{}", stderr(&out));
    let out = t.al(&["mcp", "call", "fake", "bad_schema"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out)
        .contains("tool bad_schema of MCP server fake is left out: its inputSchema is not a valid JSON Schema"));
    assert!(gone(&starts(&t), Duration::from_secs(3)), "every server stopped after its command");
}

#[test]
pub(crate) fn a_timeout_cancels_only_the_call() {
    let t = with_server("fake", "      timeout: 1\n");
    let start = Instant::now();
    let out = t.al(&["mcp", "call", "fake", "slow", "--args", r#"{"seconds": 20}"#]).output().unwrap();
    assert!(start.elapsed() < Duration::from_secs(8), "{:?}", start.elapsed());
    assert_eq!(out.status.code(), Some(6));
    let v = json_out(&out);
    assert_eq!(
        v["error"],
        "MCP server fake: tool slow timed out after 1s (the call was cancelled; the server keeps running)"
    );
    assert_eq!(v["retryable"], true);
    // The server was told, and stopped only because the command ended.
    let c = calls(&t);
    assert!(c.iter().any(|c| c["method"] == "notifications/cancelled"), "{c:?}");
    assert!(gone(&starts(&t), Duration::from_secs(3)));
}

#[test]
pub(crate) fn a_crashing_server_is_a_clear_error_naming_its_log() {
    let t = with_server("fake", "");
    let out = t.al(&["mcp", "call", "fake", "crash"]).output().unwrap();
    assert_eq!(out.status.code(), Some(6));
    let v = json_out(&out);
    assert_eq!(
        v["error"],
        "MCP server fake exited (or closed the connection) during the call to crash; its log: artifacts/mcp-fake.log"
    );
    assert_eq!(v["retryable"], true);
    assert!(t.read("ws/artifacts/mcp-fake.log").contains("crashing on purpose"));
}

#[test]
pub(crate) fn servers_that_fail_to_start_are_warnings_for_the_catalog_and_failures_for_check() {
    // Refuses initialize.
    let t = with_server("fake", "");
    let cfg = t.read("ws/agentloop.yaml").replace("env: {", "env: {FAKE_MCP_FAIL_INIT: '1', ");
    t.write("ws/agentloop.yaml", &cfg);
    let out = t.al(&["tools", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the catalog still works");
    assert!(!stdout(&out).contains("fake__"));
    assert!(stderr(&out).contains("its tools are not cached and this command starts no program"), "{}", stderr(&out));
    // A command that may start it (a tool call) says why it failed.
    let out = t.al(&["tools", "call", "file_read", "--args", "{\"path\": \"agentloop.yaml\"}"]).output().unwrap();
    assert!(stderr(&out).contains("warning: MCP server fake (python3 "), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("exited before answering initialize; its log: artifacts/mcp-fake.log; its tools are left out"),
        "{}",
        stderr(&out)
    );
    let out = t.al(&["mcp", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).starts_with("FAIL fake (stdio): MCP server fake"), "{}", stdout(&out));
    assert!(stderr(&out).contains("error: 1 of 1 enabled MCP servers failed the check"), "{}", stderr(&out));
    assert!(t.read("ws/artifacts/mcp-fake.log").contains("refusing to initialize"));

    // A command that does not exist.
    let t = T::new();
    t.write("ws/agentloop.yaml", "mcp: {servers: {nope: {command: /no/such/server}}}\n");
    let out = t.al(&["mcp", "check", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json_out(&out);
    assert_eq!(v[0]["ok"], false);
    assert!(v[0]["error"].as_str().unwrap().starts_with("MCP server nope could not start `/no/such/server`: "), "{v}");

    // Too slow to start: killed at startup_timeout, nothing left behind.
    let t = with_server("fake", "      startup_timeout: 1\n");
    let cfg = t.read("ws/agentloop.yaml").replace("env: {", "env: {FAKE_MCP_SLOW_START: '30', ");
    t.write("ws/agentloop.yaml", &cfg);
    let start = Instant::now();
    let out = t.al(&["mcp", "call", "fake", "echo", "--args", r#"{"text": "x"}"#]).output().unwrap();
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    assert_eq!(out.status.code(), Some(6));
    assert!(json_out(&out)["error"].as_str().unwrap().contains(
        "MCP server fake did not start and list its tools within 1s (startup_timeout); its log: artifacts/mcp-fake.log"
    ));
    assert!(gone(&starts(&t), Duration::from_secs(3)));
}

#[test]
pub(crate) fn no_process_is_left_behind_even_by_a_server_that_ignores_stdin_and_sigterm() {
    let t = with_server("fake", "");
    let out = t.al(&["mcp", "call", "fake", "spawn_child"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let child: u32 = json_out(&out)["output"].as_str().unwrap().parse().unwrap();
    let mut pids = starts(&t);
    pids.push(child);
    assert!(gone(&pids, Duration::from_secs(3)), "server and its child are gone: {pids:?}");

    let cfg = t.read("ws/agentloop.yaml").replace("env: {", "env: {FAKE_MCP_IGNORE_EOF: '1', ");
    t.write("ws/agentloop.yaml", &cfg);
    let out = t.al(&["mcp", "call", "fake", "spawn_child"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let child: u32 = json_out(&out)["output"].as_str().unwrap().parse().unwrap();
    let mut pids = starts(&t);
    pids.push(child);
    assert!(gone(&pids, Duration::from_secs(3)), "killed by process group: {pids:?}");
}

pub(crate) fn wait_for(f: impl Fn() -> bool, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Runs a slow call in the background, sends `sig` to agentloop once the server is busy, and
/// returns how agentloop ended and the server's pids.
pub(crate) fn interrupt(t: &T, sig: &str) -> (std::process::ExitStatus, Vec<u32>) {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    c.env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("XDG_CACHE_HOME", t.path("cache"))
        .current_dir(t.root())
        .args(["-w", "ws", "mcp", "call", "fake", "slow", "--args", r#"{"seconds": 60}"#])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let busy = wait_for(|| calls(t).iter().any(|c| c["params"]["name"] == "slow"), Duration::from_secs(20));
    assert!(busy, "the server got the call");
    let pids = starts(t);
    let killed = std::process::Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    (status, pids)
}

#[test]
pub(crate) fn ctrl_c_and_sigterm_stop_the_servers_and_agentloop_dies_of_the_signal() {
    use std::os::unix::process::ExitStatusExt;
    for (sig, num) in [("-INT", 2), ("-TERM", 15), ("-HUP", 1)] {
        let t = with_server("fake", "");
        t.al(&["mcp", "list"]).assert().success();
        std::fs::remove_file(t.path("starts.txt")).unwrap();
        let (status, pids) = interrupt(&t, sig);
        assert_eq!(status.signal(), Some(num), "{sig}: {status:?}");
        assert_eq!(pids.len(), 1);
        assert!(gone(&pids, Duration::from_secs(3)), "{sig}: the server is gone");
    }
}

#[test]
pub(crate) fn after_sigkill_a_server_that_follows_the_stdio_rule_exits() {
    let t = with_server("fake", "");
    t.al(&["mcp", "list"]).assert().success();
    std::fs::remove_file(t.path("starts.txt")).unwrap();
    let (_, pids) = interrupt(&t, "-KILL");
    assert!(gone(&pids, Duration::from_secs(5)), "stdin closed: the server exits");
}

#[test]
pub(crate) fn streamable_http_with_headers_from_the_environment() {
    let t = T::new();
    let port_file = t.path("port");
    let mut server = std::process::Command::new("python3")
        .arg(fake_server())
        .arg("--http")
        .arg(&port_file)
        .env("FAKE_MCP_LOG", t.path("calls.jsonl"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 runs the fake server");
    assert!(wait_for(|| port_file.exists(), Duration::from_secs(20)), "the HTTP server started");
    let port = std::fs::read_to_string(&port_file).unwrap();
    t.write(
        "ws/agentloop.yaml",
        &format!("mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:{port}/mcp\n      headers: {{Authorization: 'Bearer ${{FAKE_TOKEN}}'}}\n"),
    );
    let out = t
        .al(&["mcp", "call", "web", "echo", "--args", r#"{"text": "over http"}"#])
        .env("FAKE_TOKEN", "s3cret")
        .output()
        .unwrap();
    let code = out.status.code();
    let list = t.al(&["mcp", "list", "--json"]).env("FAKE_TOKEN", "s3cret").output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, Some(0), "{}", stderr(&out));
    let v = json_out(&out);
    assert_eq!(v["output"], "echo: over http");
    let c = calls(&t);
    assert!(c.iter().any(|c| c["http_headers"]["authorization"] == "Bearer s3cret"), "{c:?}");
    assert!(c.iter().any(|c| c["http_headers"]["mcp-session-id"] == "fake-session-1"), "the session id is sent back");
    let l = json_out(&list);
    assert_eq!(l[0]["transport"], "http");
    assert_eq!(l[0]["headers"], json!(["Authorization"]));
    assert!(!stdout(&list).contains("s3cret"), "{}", stdout(&list));
    // The server is gone now: a clear failure, naming what could not be reached.
    let out = t.al(&["mcp", "check", "--json"]).env("FAKE_TOKEN", "s3cret").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = json_out(&out)[0]["error"].as_str().unwrap().to_string();
    assert!(
        err.starts_with(&format!("MCP server web (http://127.0.0.1:{port}/mcp) could not be reached (send initialize request): error sending request for url")),
        "{err}"
    );
    assert!(err.contains("refused"), "{err}");
    // Without the variable the config is refused, naming the header and the variable.
    let out = t.al(&["mcp", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "MCP server `web` (mcp.servers.web): headers.Authorization: environment variable FAKE_TOKEN is not set"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
pub(crate) fn config_file_as_is_with_overrides_and_errors() {
    let t = T::new();
    t.write(
        "ws/servers.json",
        &json!({"mcpServers": {
            "fake": {"command": "python3", "args": [fake_server()], "env": {"FAKE_MCP_STARTS": t.path("starts.txt")}},
            "off": {"command": "${NOT_SET_ANYWHERE}", "disabled": true}
        }})
        .to_string(),
    );
    t.write(
        "ws/agentloop.yaml",
        "mcp:\n  config_file: servers.json\n  servers:\n    fake: {allowed_tools: [echo, 'get_*', fail], denied_tools: [fail]}\n",
    );
    // Listing tools starts no program: `mcp list` starts the server and caches its tools.
    t.al(&["mcp", "list"]).assert().success();
    let out = t.al(&["tools", "list", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let names: Vec<String> =
        json_out(&out).as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap().to_string()).collect();
    let mcp: Vec<&String> = names.iter().filter(|n| n.contains("__")).collect();
    assert_eq!(mcp, ["fake__echo", "fake__get_current_time"]);
    let v = json_out(&t.al(&["mcp", "list", "--json"]).output().unwrap());
    assert_eq!(v[0]["name"], "fake");
    assert_eq!(v[1]["name"], "off");
    assert_eq!(v[1]["status"], "disabled");
    let out = t.al(&["mcp", "call", "fake", "fail"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out)
        .contains("tool fail of MCP server fake is left out by mcp.servers.fake.allowed_tools/denied_tools"));
    let out = t.al(&["mcp", "call", "off", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("error: MCP server off is disabled\nhint: set mcp.servers.off.enabled: true"),
        "{}",
        stderr(&out)
    );
    // Global allowed_tools applies to MCP tools like any other.
    let out = t
        .al(&["--allowed-tools", "fake__echo", "tools", "call", "fake__get_current_time", "--args", "{}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is not in allowed_tools"), "{}", stderr(&out));

    for (cfg, msg) in [
        (
            "mcp: {servers: {a: {command: x, url: 'http://h'}}}",
            "MCP server `a` (mcp.servers.a): give either `command` (stdio) or `url` (HTTP), not both",
        ),
        ("mcp: {servers: {a: {comand: x}}}", "at key `mcp.servers.a.comand`: unknown field `comand`"),
        ("mcp: {servers: {a: {args: [x]}}}", "MCP server `a` (mcp.servers.a): no `command` and no `url`"),
        ("mcp: {servers: {a: {command: x, env: {K: '${NOPE_X}'}}}}", "env.K: environment variable NOPE_X is not set"),
        ("mcp: {config_file: missing.json}", "mcp.config_file"),
        ("mcp: {servers: {a: {type: sse, url: 'http://h'}}}", "the legacy SSE transport is not supported"),
    ] {
        t.write("ws/agentloop.yaml", cfg);
        let out = t.al(&["tools", "list"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cfg}");
        assert!(stderr(&out).contains(msg), "{cfg}: {}", stderr(&out));
    }
}

/// A server name is shown on one line as written: one holding a newline, an escape sequence or
/// a bidi control (from `.mcp.json` or `mcp.servers`) is refused when the configuration is
/// read, naming it with those characters escaped, so nothing of it reaches the terminal raw.
#[test]
pub(crate) fn a_server_name_with_a_newline_is_refused_and_shown_escaped() {
    let t = T::new();
    t.write("ws/.mcp.json", r#"{"mcpServers": {"time\nerror: forged line \u001b[2J": {"command": "x"}}}"#);
    t.write("ws/agentloop.yaml", "mcp: {config_file: .mcp.json}\n");
    for args in [&["tools", "list"][..], &["mcp", "list"][..]] {
        let out = t.al(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("MCP server `time␤error: forged line ␛[2J`") && err.contains("a server name must be"),
            "{args:?}: {err}"
        );
        assert!(!err.lines().any(|l| l.starts_with("error: forged")) && !err.contains('\u{1b}'), "{err}");
    }
    t.write("ws/agentloop.yaml", "mcp: {servers: {\"a\\u202Eb\": {command: x}}}\n");
    let out = t.al(&["tools", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("MCP server `a<U+202E>b` (mcp.servers.a<U+202E>b)"), "{}", stderr(&out));
    // A workspace from elsewhere: the refusal of its server names the key on one line too.
    t.write("ws/agentloop.yaml", "mcp: {servers: {\"a\\nerror: forged\": {command: x}}}\n");
    for args in [&["tools", "list"][..], &["run", "--goal", "x"][..]] {
        let out = t.untrusted().args(["-w", "ws"]).args(args).output().unwrap();
        let err = stderr(&out);
        assert!(err.contains("sets `mcp.servers.a␤error: forged`"), "{args:?}: {err}");
        assert!(!err.lines().any(|l| l.starts_with("error: forged")), "{err}");
    }
}

pub const TOKYO_SCRIPT: &str = r#"frame:
  - answer: {goal: Write the current time in Tokyo to artifacts/time.txt, definition_of_done: [the time in Tokyo is known, it is written to artifacts/time.txt, the file names the timezone], can_proceed: true}
plan:
  - answer: {next_action: {tool: time__get_current_time, args: {timezone: Asia/Tokyo}}, expected_outcome: the time in Tokyo, rationale: the time server knows it}
  - answer: {next_action: {tool: file_write, args: {path: artifacts/time.txt, content: "Asia/Tokyo: 2026-01-01T09:00:00+09:00\n"}}, expected_outcome: the file, rationale: write it down}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}], facts: ["Tokyo time is 2026-01-01T09:00:00+09:00 (step 1)"], decision: continue, reason: write it next}
  - answer: {satisfied: [{item: 1, steps: [2]}, {item: 2, steps: [2]}, {item: 3, steps: [2]}], decision: done, reason: written, outcome: "The time in Tokyo is in artifacts/time.txt", artifacts: [artifacts/time.txt]}
"#;

#[test]
pub(crate) fn a_run_that_needs_an_mcp_tool_reaches_done_without_starting_the_server_to_plan() {
    let t = with_server("time", "      env_extra: x\n");
    // (env_extra is not a key: the config is refused, naming it.)
    let out = t.al(&["tools", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("mcp.servers.time.env_extra"), "{}", stderr(&out));
    let cfg = t
        .read("ws/agentloop.yaml")
        .replace("      env_extra: x\n", "")
        .replace("env: {", "env: {SECRET_TOKEN: '${FAKE_SECRET}', ");
    t.write("ws/agentloop.yaml", &cfg);
    t.write("script.yaml", TOKYO_SCRIPT);
    // Warm the cache; then plan must not start the server, and act starts it once.
    t.al(&["mcp", "list"]).env("FAKE_SECRET", "hunter2").assert().success();
    assert_eq!(starts(&t).len(), 1);
    // A variable a server's env names is needed by every command that builds the tool list.
    let out = t.al(&["--script", "script.yaml", "init", "--goal", "What time is it in Tokyo?"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("env.SECRET_TOKEN: environment variable FAKE_SECRET is not set"), "{}", stderr(&out));
    t.al(&["--script", "script.yaml", "init", "--goal", "What time is it in Tokyo? Into artifacts/time.txt"])
        .env("FAKE_SECRET", "hunter2")
        .assert()
        .success();
    let out = t.al(&["--script", "script.yaml", "frame"]).env("FAKE_SECRET", "hunter2").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    t.al(&["--script", "script.yaml", "plan"]).env("FAKE_SECRET", "hunter2").assert().success();
    assert_eq!(starts(&t).len(), 1, "plan read the cache");
    assert!(t.read("ws/plan.md").contains("time__get_current_time"));
    let out = t.al(&["--script", "script.yaml", "run"]).env("FAKE_SECRET", "hunter2").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(starts(&t).len(), 2, "act started the server once");
    assert!(gone(&starts(&t), Duration::from_secs(3)));
    assert_eq!(t.read("ws/artifacts/time.txt"), "Asia/Tokyo: 2026-01-01T09:00:00+09:00\n");
    assert_eq!(t.json("ws/result.json")["status"], "done");
    let act = t.trace().into_iter().find(|e| e["phase"] == "act" && e["tool"] == "time__get_current_time").unwrap();
    assert_eq!(act["result_status"], "ok");
    assert!(act["result_summary"].as_str().unwrap().contains("2026-01-01T09:00:00+09:00"), "{act}");
    // What a server sends back is redacted of the values its config took from the environment.
    let out = t
        .al(&["mcp", "call", "time", "echo", "--args", r#"{"text": "say hunter2"}"#])
        .env("FAKE_SECRET", "hunter2")
        .output()
        .unwrap();
    assert_eq!(json_out(&out)["output"], "echo: say [redacted]");
    // The secret passed to the server through its env is nowhere in the workspace.
    for f in ["trace.jsonl", "state.json", "plan.md", "memory.md", "decisions.md", "artifacts/mcp-time.log"] {
        assert!(!t.read(&format!("ws/{f}")).contains("hunter2"), "{f}");
    }
}

#[test]
pub(crate) fn a_cold_run_lists_then_calls_and_a_slow_step_does_not_kill_the_server() {
    let t = with_server("fake", "      timeout: 1\n");
    t.write(
        "script.yaml",
        r#"frame:
  - answer: {goal: echo after a slow call, definition_of_done: [the slow call was tried, the echo came back, nothing is left running], can_proceed: true}
plan:
  - answer: {next_action: {tool: fake__slow, args: {seconds: 20}}, expected_outcome: it may time out, rationale: try}
  - answer: {next_action: {tool: fake__echo, args: {text: still here}}, expected_outcome: echo, rationale: same server}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}], decision: continue, reason: it timed out}
  - answer: {satisfied: [{item: 1, steps: [2]}, {item: 2, steps: [2]}, {item: 3, steps: [2]}], decision: done, reason: echoed, outcome: the server kept running}
"#,
    );
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "echo after a slow call"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // One start to list (cold cache), one for both calls: the timeout did not stop the server.
    assert_eq!(starts(&t).len(), 2);
    let acts: Vec<Value> = t.trace().into_iter().filter(|e| e["phase"] == "act" && e["event"] == "act").collect();
    assert_eq!(acts[0]["result_status"], "error");
    assert!(acts[0]["error"].as_str().unwrap().contains("timed out after 1s"));
    assert_eq!(acts[1]["result_status"], "ok");
    assert!(gone(&starts(&t), Duration::from_secs(3)));
}

#[test]
pub(crate) fn event_mode_runs_mcp_tools_locally_when_listed_in_tools_local() {
    let t = with_server("time", "");
    let cfg = t.read("ws/agentloop.yaml").replace("ws/", "root/");
    t.write(
        "root/agentloop.yaml",
        &format!("{cfg}llm: {{provider: scripted, script: script.yaml}}\ntools:\n  local: [file_write, finish, time__get_current_time]\n"),
    );
    t.write("root/script.yaml", TOKYO_SCRIPT);
    let req = json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "What time is it in Tokyo?"}}});
    let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let types: Vec<&str> = v["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["agent.completed"], "{v}");
    assert!(gone(&starts(&t), Duration::from_secs(3)));
    // A request's config cannot add servers: they run commands (exit 78, nothing started).
    let evil = json!({"protocol": 2, "command": "handle", "config": {"mcp": {"servers": {"x": {"command": "touch", "args": [t.path("pwned")]}}}}, "event": {"type": "agentic.start", "payload": {"goal": "x"}}});
    let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(evil.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
    assert!(stdout(&out).contains("may not set `mcp."), "{}", stdout(&out));
    assert!(!t.exists("pwned"));
    // Not listed in tools.local: requested from the router like an external tool.
    let t2 = with_server("time", "");
    let cfg = t2.read("ws/agentloop.yaml").replace("ws/", "root/");
    t2.write("root/agentloop.yaml", &format!("{cfg}llm: {{provider: scripted, script: script.yaml}}\n"));
    t2.write("root/script.yaml", TOKYO_SCRIPT);
    let out = t2.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["events"][0]["type"], "agentic.tool_request.time__get_current_time", "{v}");
}

pub(crate) const SLOW_SCRIPT: &str = r#"frame:
  - answer: {goal: call the slow tool, definition_of_done: [the slow call came back, its answer is known, nothing is left running], can_proceed: true}
plan:
  - answer: {next_action: {tool: fake__slow, args: {seconds: SECONDS}}, expected_outcome: it answers, rationale: try}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: it answered, outcome: the slow call came back}
"#;

pub(crate) fn run_child(t: &T, args: &[&str]) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .env_clear()
        .env("AGENTLOOP_TRUST_ALL", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("XDG_CACHE_HOME", t.path("cache"))
        .current_dir(t.root())
        .args(["-w", "ws", "--script", "script.yaml"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
pub(crate) fn ctrl_c_during_a_run_says_what_was_kept_and_how_to_resume() {
    use std::os::unix::process::ExitStatusExt;
    let t = with_server("fake", "");
    t.write("script.yaml", &SLOW_SCRIPT.replace("SECONDS", "60"));
    let child = run_child(&t, &["run", "--goal", "call the slow tool"]);
    let busy = wait_for(|| calls(&t).iter().any(|c| c["params"]["name"] == "slow"), Duration::from_secs(30));
    assert!(busy, "the run reached the slow call");
    let pids = starts(&t);
    assert!(std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    // It dies of the signal, as a shell expects ($? = 130), after saying how to go on.
    assert_eq!(out.status.signal(), Some(2), "{:?}", out.status);
    let err = stderr(&out);
    assert!(err.contains("interrupted: every committed phase is kept in ws (step 1, next act)"), "{err}");
    assert!(err.contains("Resume with: agentloop -w ws run"), "{err}");
    assert!(gone(&pids, Duration::from_secs(3)), "the server is gone");
    assert_eq!(t.json("ws/state.json")["next"], "act", "the planned action is kept for the resume");
}

#[test]
pub(crate) fn a_closed_events_stream_stops_the_run_at_a_commit_point_not_with_0() {
    use std::io::BufRead;
    let t = with_server("fake", "");
    t.write("script.yaml", &SLOW_SCRIPT.replace("SECONDS", "2"));
    let mut child = run_child(&t, &["run", "--events", "--goal", "call the slow tool"]);
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains("\"run_id\""), "{first}");
    // The reader goes away while the slow call runs; the next event cannot be written.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--events: cannot write to stdout") && err.contains("agentloop -w ws run"), "{err}");
    let state = t.json("ws/state.json");
    assert_eq!(state["status"], "running", "the run is not over: it resumes");
    // Resuming finishes it.
    t.al(&["--script", "script.yaml", "run"]).assert().code(0);
    assert_eq!(t.json("ws/result.json")["status"], "done");
}
