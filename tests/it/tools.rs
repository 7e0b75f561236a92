//! The tool registry, the built-in tools, the sandbox and `tools list|call`.

use crate::common::*;
use predicates::prelude::*;
use serde_json::{json, Value};

pub fn call(t: &T, tool: &str, args: Value) -> (Option<i32>, Value) {
    let out = t.al(&["tools", "call", tool, "--args", &args.to_string()]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), v)
}

fn sandbox() -> T {
    let t = T::new();
    t.write("ws/notes.txt", "hello notes\n");
    t.write("ws/sub/inner.txt", "inner\n");
    t.write("secret.txt", "TOP SECRET\n");
    t.write("ws_evil/x.txt", "evil\n");
    t.write("ws/artifacts/.keep", "");
    t
}

#[test]
fn file_tools_work_inside_the_sandbox() {
    let t = sandbox();
    let (code, v) = call(&t, "file_read", json!({"path": "notes.txt"}));
    assert_eq!(code, Some(0));
    assert_eq!(v["output"], "hello notes\n");
    let (code, v) = call(&t, "file_write", json!({"path": "artifacts/out/report.md", "content": "# R"}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(t.read("ws/artifacts/out/report.md"), "# R");
    let (_, v) =
        call(&t, "file_write", json!({"path": "artifacts/out/report.md", "content": "\nmore", "mode": "append"}));
    assert_eq!(v["status"], "ok");
    assert_eq!(t.read("ws/artifacts/out/report.md"), "# R\nmore");
    let (_, v) = call(&t, "list_dir", json!({"path": "."}));
    let out = v["output"].as_str().unwrap();
    assert!(out.contains("notes.txt\t12") && out.contains("sub/") && !out.contains(".agentloop"), "{out}");
    let (code, v) = call(&t, "file_write", json!({"path": "memory.md", "content": "overwrite"}));
    assert_eq!(code, Some(6));
    assert!(v["error"].as_str().unwrap().contains("access denied"));
    assert!(!t.exists("ws/memory.md"));
}

/// Every escape must be refused with nothing read or written outside the sandbox.
#[test]
fn path_escapes_are_refused() {
    let t = sandbox();
    let root = t.root().to_str().unwrap().to_string();
    std::os::unix::fs::symlink(t.path("secret.txt"), t.path("ws/link_out.txt")).unwrap();
    std::os::unix::fs::symlink(t.root(), t.path("ws/dirlink")).unwrap();
    std::os::unix::fs::symlink(t.path("ws_evil"), t.path("ws/artifacts/evil_dir")).unwrap();
    std::os::unix::fs::symlink("../../secret.txt", t.path("ws/artifacts/rel_link.txt")).unwrap();
    std::os::unix::fs::symlink(t.path("ws/notes.txt"), t.path("ws/artifacts/to_ws_notes.txt")).unwrap();
    let reads = [
        "../secret.txt".to_string(),
        "../../etc/passwd".into(),
        "/etc/passwd".into(),
        format!("{root}/secret.txt"),
        format!("{root}/ws_evil/x.txt"),
        format!("{root}/ws/../secret.txt"),
        "sub/../../secret.txt".into(),
        "./../secret.txt".into(),
        "link_out.txt".into(),
        "dirlink/secret.txt".into(),
        "artifacts/rel_link.txt".into(),
        "artifacts/evil_dir/x.txt".into(),
        "..%2fsecret.txt".into(),
        "..\\secret.txt".into(),
        "sub/\u{2025}/secret.txt".into(),
        "notes.txt\u{0}../secret.txt".into(),
        "../ws_evil/x.txt".into(),
        "//etc/passwd".into(),
    ];
    for p in &reads {
        let (code, v) = call(&t, "file_read", json!({"path": p}));
        assert_eq!(code, Some(6), "read {p:?} was not refused: {v}");
        let out = v["output"].as_str().unwrap_or("");
        assert!(!out.contains("SECRET") && !out.contains("evil") && !out.contains("root:"), "read {p:?} leaked: {v}");
    }
    let writes = [
        "../pwned.txt".to_string(),
        "artifacts/../../pwned.txt".into(),
        format!("{root}/pwned.txt"),
        format!("{root}/ws_evil/pwned.txt"),
        "../ws_evil/pwned.txt".into(),
        "artifacts/evil_dir/pwned.txt".into(),
        "dirlink/pwned.txt".into(),
        "/tmp/pwned.txt".into(),
        "artifacts/".into(),
        ".".into(),
    ];
    for p in &writes {
        let (code, v) = call(&t, "file_write", json!({"path": p, "content": "pwned"}));
        assert_eq!(code, Some(6), "write {p:?} was not refused: {v}");
    }
    // Appending through a symlink that points out is refused; overwriting replaces the link
    // itself (the rename never follows it), so the target is untouched either way.
    for p in ["artifacts/rel_link.txt", "artifacts/to_ws_notes.txt", "artifacts/evil_dir/x.txt"] {
        let (code, v) = call(&t, "file_write", json!({"path": p, "content": "pwned", "mode": "append"}));
        assert_eq!(code, Some(6), "append {p:?} was not refused: {v}");
    }
    for p in ["artifacts/rel_link.txt", "artifacts/to_ws_notes.txt"] {
        call(&t, "file_write", json!({"path": p, "content": "pwned"}));
    }
    assert_eq!(t.read("ws_evil/x.txt"), "evil\n");
    assert!(!t.exists("pwned.txt") && !t.exists("ws_evil/pwned.txt"));
    assert_eq!(t.read("secret.txt"), "TOP SECRET\n");
    assert_eq!(t.read("ws/notes.txt"), "hello notes\n");
    let (code, _) = call(&t, "list_dir", json!({"path": ".."}));
    assert_eq!(code, Some(6));
    let (code, _) = call(&t, "list_dir", json!({"path": "dirlink"}));
    assert_eq!(code, Some(6));
}

#[test]
fn symlink_swapped_between_calls_cannot_escape() {
    let t = sandbox();
    // A real file first, then the same name swapped for a symlink pointing out.
    let (code, _) = call(&t, "file_read", json!({"path": "sub/inner.txt"}));
    assert_eq!(code, Some(0));
    std::fs::remove_dir_all(t.path("ws/sub")).unwrap();
    std::os::unix::fs::symlink(t.root(), t.path("ws/sub")).unwrap();
    let (code, v) = call(&t, "file_read", json!({"path": "sub/secret.txt"}));
    assert_eq!(code, Some(6), "{v}");
}

#[test]
fn extra_read_and_write_paths_are_honoured_but_not_their_neighbours() {
    let t = sandbox();
    t.write("data/in.txt", "data in\n");
    t.write("data_evil/in.txt", "evil\n");
    t.write("ws/agentloop.yaml", "tools:\n  read_paths: [../data]\n  write_paths: [../out]\n");
    std::fs::create_dir_all(t.path("out")).unwrap();
    let (code, v) = call(&t, "file_read", json!({"path": "../data/in.txt"}));
    assert_eq!((code, v["output"].as_str().unwrap()), (Some(0), "data in\n"));
    let (code, _) = call(&t, "file_read", json!({"path": "../data_evil/in.txt"}));
    assert_eq!(code, Some(6));
    let (code, _) = call(&t, "file_write", json!({"path": "../out/o.txt", "content": "o"}));
    assert_eq!(code, Some(0));
    assert_eq!(t.read("out/o.txt"), "o");
}

#[test]
fn invalid_arguments_name_the_field() {
    let t = sandbox();
    let out = t
        .al(&["tools", "call", "file_write", "--args", "{\"path\": \"artifacts/a\", \"content\": 5}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("argument `content`"), "{}", stderr(&out));
    let out = t.al(&["tools", "call", "file_read", "--args", "{}"]).output().unwrap();
    assert!(stderr(&out).contains("\"path\" is a required property"), "{}", stderr(&out));
    t.al(&["tools", "call", "file_read", "--args", "{\"path\": \"a\", \"extra\": 1}"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("extra"));
    t.al(&["tools", "call", "nope"]).assert().code(2).stderr(predicate::str::contains("unknown tool `nope`"));
    t.al(&["tools", "call", "file_read", "--args", "not json"]).assert().code(2);
}

#[test]
fn generated_schemas_name_the_field_and_take_what_they_allow() {
    let t = sandbox();
    // A limit from grep's args struct is refused naming the field, before grep runs.
    let out = t.al(&["tools", "call", "grep", "--args", r#"{"pattern": "x", "context": 11}"#]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("argument `context`"), "{}", stderr(&out));
    // An enum from file_write's args struct: the valid values are in the schema shown.
    let out = t
        .al(&["tools", "call", "file_write", "--args", r#"{"path": "a.txt", "content": "x", "mode": "insert"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("argument `mode`"), "{}", stderr(&out));
    // JSON Schema's integer takes 2.0: so does the args struct.
    t.write("ws/lines.txt", "one\ntwo\nthree\n");
    let (code, v) = call(&t, "file_read", json!({"path": "lines.txt", "offset": 2.0, "limit": 1.0}));
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().starts_with("two"), "{v}");
}

#[test]
fn args_from_stdin_and_an_overlong_line_is_cut_with_a_note() {
    let t = sandbox();
    t.write("ws/big.txt", &"x".repeat(20_000));
    let out =
        t.al(&["tools", "call", "file_read", "--args", "-"]).write_stdin("{\"path\": \"big.txt\"}").output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "ok");
    let text = v["output"].as_str().unwrap();
    assert!(text.chars().count() <= 8000, "file_read stays under the output cap");
    assert!(text.contains("[line 1 of 1 in big.txt is 20000 characters long; only its first"), "{text}");
    assert_eq!(v["artifacts"], json!([]), "nothing spilled: the note says what was left out");
}

#[test]
fn tools_list_matches_the_plan_catalog() {
    let t = sandbox();
    let out = t.al(&["tools", "list", "--json"]).output().unwrap();
    let tools: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["file_read", "file_write", "list_dir", "grep", "http_call", "web_fetch", "skill_read", "finish"]
    );
    let gen = t.al(&["skills", "gen", "--format", "json"]).output().unwrap();
    let cat: Value = serde_json::from_slice(&gen.stdout).unwrap();
    let cat_names: Vec<&str> = cat["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, cat_names);
    let out = t.al(&["tools", "list", "--json", "--allowed-tools", "file_read,web_fetch"]).output().unwrap();
    let tools: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        tools.iter().map(|t| t["name"].as_str().unwrap()).collect::<Vec<_>>(),
        ["file_read", "web_fetch", "finish"]
    );
}

fn net_config(t: &T, extra: &str) {
    t.write("ws/agentloop.yaml", &format!("tools:\n  http:\n    allow_private: true\n{extra}"));
}

#[test]
fn web_fetch_extracts_markdown_and_http_call_returns_status() {
    let t = sandbox();
    let html = "<html><head><title>Hi</title></head><body><nav>menu</nav><article><h1>Title</h1><p>Para <a href=\"/x\">link</a>.</p></article></body></html>";
    let s = Server::start(vec![
        Reply::text(200, "text/html", html),
        Reply::json(201, json!({"ok": true})),
        Reply::text(503, "text/plain", "down"),
    ]);
    net_config(&t, "");
    let (code, v) = call(&t, "web_fetch", json!({"url": format!("{}/page", s.url)}));
    assert_eq!(code, Some(0), "{v}");
    let out = v["output"].as_str().unwrap();
    assert!(out.contains("# Title") && out.contains("[link](/x)") && !out.contains("menu"), "{out}");
    assert_eq!(v["metadata"]["title"], "Hi");
    let (code, v) = call(
        &t,
        "http_call",
        json!({"method": "POST", "url": format!("{}/api", s.url), "headers": {"x-test": "1"}, "body": "{}"}),
    );
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["metadata"]["status_code"], 201);
    let req = s.request(1);
    assert_eq!((req.method.as_str(), req.header("x-test")), ("POST", Some("1")));
    let (code, v) = call(&t, "http_call", json!({"method": "GET", "url": format!("{}/down", s.url)}));
    assert_eq!(code, Some(6));
    assert_eq!(v["retryable"], true);
}

#[test]
fn network_policy_refuses_private_addresses_and_redirect_escapes() {
    let t = sandbox();
    let s = Server::start(vec![Reply::text(200, "text/plain", "private")]);
    // Default policy: loopback refused before any connection.
    for url in [
        format!("{}/", s.url),
        "http://localhost:9/".into(),
        "http://[::1]:9/".into(),
        "http://169.254.169.254/latest".into(),
        "http://10.0.0.1/".into(),
        "http://[::ffff:127.0.0.1]/".into(),
        "http://0.0.0.0/".into(),
    ] {
        let (code, v) = call(&t, "web_fetch", json!({"url": url}));
        assert_eq!(code, Some(6), "{url}: {v}");
        assert!(v["error"].as_str().unwrap().contains("allow_private"), "{url}: {v}");
    }
    assert_eq!(s.count(), 0);
    for url in ["file:///etc/passwd", "ftp://example.com/", "gopher://x/", "http://user:pw@example.com/"] {
        let (code, _) = call(&t, "http_call", json!({"method": "GET", "url": url}));
        assert_eq!(code, Some(6), "{url}");
    }
    // A redirect to a denied host is refused at the hop.
    let target = Server::start(vec![Reply::text(200, "text/plain", "should not be fetched")]);
    let target_port = target.url.rsplit(':').next().unwrap().to_string();
    let redirect = Server::start(vec![
        Reply::text(302, "text/plain", "").header("location", &format!("http://localhost:{target_port}/x"))
    ]);
    net_config(&t, "    deny_hosts: [localhost]\n");
    let (code, v) = call(&t, "web_fetch", json!({"url": format!("{}/start", redirect.url)}));
    assert_eq!(code, Some(6), "{v}");
    assert!(v["error"].as_str().unwrap().contains("denied"), "{v}");
    assert_eq!(target.count(), 0);
    // Ports and allowlists.
    net_config(&t, "    allow_hosts: [example.org]\n");
    let (code, v) = call(&t, "web_fetch", json!({"url": format!("{}/", s.url)}));
    assert_eq!(code, Some(6));
    assert!(v["error"].as_str().unwrap().contains("allow_hosts"));
}

#[test]
fn redirects_within_policy_are_followed() {
    let t = sandbox();
    let s = Server::start_with(|_, r| {
        if r.url == "/start" {
            Reply::text(301, "text/plain", "").header("location", "/final")
        } else {
            Reply::text(200, "text/plain", "arrived")
        }
    });
    net_config(&t, "");
    let (code, v) = call(&t, "web_fetch", json!({"url": format!("{}/start", s.url)}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["output"], "arrived");
    assert!(v["metadata"]["url"].as_str().unwrap().ends_with("/final"));
}

#[test]
fn http_timeouts_are_retryable_errors() {
    let t = sandbox();
    let s = Server::start_with(|_, _| {
        std::thread::sleep(std::time::Duration::from_secs(3));
        Reply::text(200, "text/plain", "late")
    });
    net_config(&t, "");
    let (code, v) =
        call(&t, "http_call", json!({"method": "GET", "url": format!("{}/slow", s.url), "timeout_seconds": 1}));
    assert_eq!(code, Some(6), "{v}");
    assert_eq!(v["retryable"], true);
    assert!(v["error"].as_str().unwrap().contains("timed out"), "{v}");
}

#[test]
fn shell_is_off_by_default_and_confined_when_on() {
    let t = sandbox();
    t.al(&["tools", "call", "shell", "--args", "{\"argv\": [\"echo\", \"hi\"]}"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown tool `shell`"));
    crate::shell_sandbox::bwrap_or_none(&t);
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [echo, sleep], timeout: 1s}\n");
    let (code, v) = call(&t, "shell", json!({"argv": ["echo", "hi; rm -rf /"]}));
    assert_eq!(code, Some(0));
    assert!(v["output"].as_str().unwrap().contains("hi; rm -rf /"), "argv, not a shell string");
    let (code, v) = call(&t, "shell", json!({"argv": ["cat", "/etc/passwd"]}));
    assert_eq!(code, Some(6));
    assert!(v["error"].as_str().unwrap().contains("not in tools.shell.allow"));
    let (code, v) = call(&t, "shell", json!({"argv": ["sleep", "5"]}));
    assert_eq!(code, Some(6));
    assert_eq!(v["retryable"], true);
    assert!(v["error"].as_str().unwrap().contains("timed out"));
}

#[test]
fn finish_and_submit_response() {
    let t = sandbox();
    let (code, v) = call(&t, "finish", json!({"summary": "all done", "artifacts": ["artifacts/a.md"]}));
    assert_eq!(code, Some(0));
    assert_eq!(v["output"], "all done");
    let (code, _) = call(&t, "submit_response", json!({"summary": "alias"}));
    assert_eq!(code, Some(0));
}

#[test]
fn long_term_memory_persists_across_runs() {
    let t = sandbox();
    let (code, _) = call(&t, "memory_save", json!({"topic": "projects", "title": "x", "content": "y"}));
    assert_eq!(code, Some(2), "memory tools are off by default");
    t.write("ws/agentloop.yaml", "tools:\n  memory: {enabled: true, dir: ../mem}\n");
    let (code, v) = call(
        &t,
        "memory_save",
        json!({"topic": "projects", "title": "Agentic loop", "content": "Rust CLI with a Frame Plan Act Reflect loop", "keywords": ["rust"]}),
    );
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["metadata"]["id"], "projects/content_001");
    call(&t, "memory_save", json!({"topic": "contacts", "title": "Ada", "content": "Writes compilers"}));
    let topics = t.json("mem/topics.json");
    assert_eq!(topics["topics"].as_array().unwrap().len(), 2);
    assert_eq!(t.json("mem/index_projects.json")["entries"][0]["section_id"], "main");
    let (_, v) = call(&t, "memory_search", json!({"query": "rust loop"}));
    let hits: Value = serde_json::from_str(v["output"].as_str().unwrap()).unwrap();
    assert_eq!(hits[0]["id"], "projects/content_001");
    let (_, v) = call(&t, "memory_read", json!({"topic": "projects", "content_id": "content_001"}));
    assert!(v["output"].as_str().unwrap().contains("Frame Plan Act Reflect"));
    let (code, _) = call(&t, "memory_read", json!({"topic": "../..", "content_id": "x"}));
    assert_eq!(code, Some(6));
    // One section of a stored note: a `## heading` in it, up to the next one.
    let note = "Setup and use.\n## Setup\ncargo build\n## Usage\nagentloop run\n";
    let (_, v) = call(&t, "memory_save", json!({"topic": "howto", "title": "Build", "content": note}));
    let id = v["metadata"]["id"].as_str().unwrap().split_once('/').unwrap().1.to_string();
    let (code, v) = call(&t, "memory_read", json!({"topic": "howto", "content_id": id, "section": "usage"}));
    assert_eq!((code, v["output"].as_str()), (Some(0), Some("## Usage\nagentloop run")), "{v}");
    assert_eq!(v["metadata"]["section"], "Usage");
    let (_, v) = call(&t, "memory_read", json!({"topic": "howto", "content_id": id, "section": "main"}));
    assert_eq!(v["output"], note, "a stored section by its id");
    let (code, v) = call(&t, "memory_read", json!({"topic": "howto", "content_id": id, "section": "install"}));
    assert_eq!(code, Some(6));
    assert!(v["error"].as_str().unwrap().contains("its sections: main, ## Setup, ## Usage"), "{v}");
    let (code, _) = call(&t, "memory_save", json!({"topic": "../escape", "title": "x", "content": "y"}));
    assert_eq!(code, Some(2));
}

#[test]
fn fifos_and_devices_are_refused_not_hung() {
    let t = sandbox();
    if std::process::Command::new("mkfifo").arg(t.path("ws/pipe")).status().map(|s| s.success()).unwrap_or(false) {
        let (code, v) = call(&t, "file_read", json!({"path": "pipe"}));
        assert_eq!(code, Some(6), "{v}");
        assert!(v["error"].as_str().unwrap().contains("not a regular file"));
        std::fs::rename(t.path("ws/pipe"), t.path("ws/artifacts/pipe")).unwrap();
        let (code, _) = call(&t, "file_write", json!({"path": "artifacts/pipe", "content": "x", "mode": "append"}));
        assert_eq!(code, Some(6));
    }
}

#[test]
fn deeply_nested_and_huge_pages_are_converted_not_crashed_on() {
    let t = sandbox();
    let deep = format!(
        "<html><body><article><p>start {}deep text{} end</p></article></body></html>",
        "<b>".repeat(5000),
        "</b>".repeat(5000)
    );
    let mut huge = String::from("<html><body><article>");
    for i in 0..40_000 {
        huge.push_str(&format!("<p>para {i} <script>x()</script> <b>bold</b> &amp; more</p>\n"));
    }
    huge.push_str("</article></body></html>");
    let s = Server::start(vec![Reply::text(200, "text/html", &deep), Reply::text(200, "text/html", &huge)]);
    net_config(&t, "");
    let (code, v) = call(&t, "web_fetch", json!({"url": format!("{}/deep", s.url)}));
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().contains("deep text"), "{v}");
    let (code, v) = call(&t, "web_fetch", json!({"url": format!("{}/huge", s.url), "extract_mode": "text"}));
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().starts_with("para 0"), "{v}");
}

fn running(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
    })
}

#[test]
fn the_shell_cannot_be_talked_around() {
    let t = sandbox();
    crate::shell_sandbox::bwrap_or_none(&t);
    t.write(
        "ws/agentloop.yaml",
        "tools:\n  shell: {enabled: true, allow: [printenv, env, find, xargs, sh, tar], timeout: 1s, patterns: [\"sh -c **\", \"find . -name *\"]}\n",
    );
    // No provider key reaches the child.
    let out = t
        .al(&["tools", "call", "shell", "--args", r#"{"argv": ["printenv"]}"#])
        .env("OPENAI_API_KEY", "sk-leak-me")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!v["output"].as_str().unwrap().contains("sk-leak-me"), "{v}");
    assert!(v["output"].as_str().unwrap().contains("PATH="), "{v}");
    // Allowlisted programs that run other programs are refused unless a pattern names the argv.
    for argv in [
        json!(["env", "sh", "-c", "id"]),
        json!(["find", ".", "-exec", "sleep", "30", ";"]),
        json!(["xargs", "sh"]),
        json!(["tar", "--to-command=sh", "-xf", "x.tar"]),
    ] {
        let (code, v) = call(&t, "shell", json!({"argv": argv}));
        assert_eq!(code, Some(6), "{argv}");
        assert!(v["error"].as_str().unwrap().contains("refused"), "{v}");
    }
    let (code, v) = call(&t, "shell", json!({"argv": ["find", ".", "-name", "notes.txt"]}));
    assert_eq!(code, Some(0), "{v}");
    // The timeout kills the whole process group, grandchildren included.
    let (code, v) = call(&t, "shell", json!({"argv": ["sh", "-c", "sleep 31.7 & sleep 31.7; echo never"]}));
    assert_eq!(code, Some(6), "{v}");
    assert!(v["error"].as_str().unwrap().contains("timed out"));
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!running("sleep 31.7"), "a grandchild outlived the timeout");
}

#[test]
fn credentials_never_follow_a_redirect_to_another_origin() {
    let t = sandbox();
    let other = Server::start(vec![Reply::text(200, "text/plain", "landed")]);
    let to = format!("{}/landing", other.url);
    let first = Server::start(vec![Reply::text(307, "text/plain", "moved").header("location", &to)]);
    net_config(&t, "");
    let (code, v) = call(
        &t,
        "http_call",
        json!({"method": "POST", "url": format!("{}/start", first.url), "headers": {"Authorization": "Bearer model-supplied", "X-Trace": "1"}, "body": "{}"}),
    );
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(first.request(0).header("authorization"), Some("Bearer model-supplied"));
    let landed = other.request(0);
    assert_eq!(landed.method, "POST", "307 keeps the method");
    assert_eq!(landed.header("authorization"), None, "credentials dropped across origins");
    assert_eq!(landed.header("x-trace"), None, "only a short list of safe headers crosses origins");
}
