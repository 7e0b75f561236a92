//! The shell tool's OS sandbox (bubblewrap): the child cannot read agentloop's environment,
//! reach the network, write outside the write folders or the paper trail, or outlive the call;
//! without a working bwrap the tool refuses unless the user's own config says `sandbox: none`.
//! A secret rendered by a dump program is redacted wherever it would be recorded.
//!
//! Tests that need bwrap skip, saying so on stderr, where it cannot create a sandbox.

use crate::common::T;
use serde_json::{json, Value};
use std::time::Duration;

const KEY: &str = "sk-test-9f8e7d6c5b4a39281706";
const MARKER: &str = "agentloop-parent-marker-4242";

/// Whether bwrap can create the sandbox here (it cannot without user namespaces, say).
fn bwrap_works() -> bool {
    let ok = std::process::Command::new("bwrap")
        .args(["--die-with-parent", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/"])
        .args(["--dev", "/dev", "--proc", "/proc", "--", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        crate::common::missing("bubblewrap (bwrap) cannot create a sandbox on this machine");
    }
    ok
}

/// For tests of other things that use the shell tool: where bwrap cannot create a sandbox, the
/// user's own config turns it off, so they still run (unsandboxed) there.
pub fn bwrap_or_none(t: &T) {
    if !bwrap_works() {
        t.write("xdg/agentloop/config.yaml", "sandbox: none\n");
    }
}

fn call(t: &T, args: Value) -> (Option<i32>, Value) {
    let out = t
        .al(&["tools", "call", "shell", "--args", &args.to_string()])
        .env("OPENAI_API_KEY", KEY)
        .env("PARENT_MARKER", MARKER)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| json!({"stderr": String::from_utf8_lossy(&out.stderr).into_owned()}));
    (out.status.code(), v)
}

fn shell(t: &T, extra: &str) {
    t.write(
        "ws/agentloop.yaml",
        &format!(
            "tools:\n  shell: {{enabled: true, allow: [cat, sh, bash, od, echo, setsid], timeout: 3s, patterns: [\"sh -c **\", \"bash -c **\"]{extra}}}\n"
        ),
    );
}

/// Every rendering of `KEY` a dump or an encoder could produce, to look for in recorded files.
fn renderings() -> Vec<String> {
    let hex: String = KEY.bytes().map(|b| format!("{b:02x}")).collect();
    let spaced_chars = KEY.chars().map(String::from).collect::<Vec<_>>().join("   ");
    vec![
        KEY.to_string(),
        hex.clone(),
        hex.to_uppercase(),
        spaced_chars,
        "9   f   8   e".into(),
        "39 66 38 65".into(),
        "3966 3865".into(),
        "sk-test-9f8e7d6c".into(),
    ]
}

fn running(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
        })
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}

/// Ends what a failing test left running (only the processes named by this test's marker).
fn end(pids: &[i32]) {
    for p in pids {
        let _ = std::process::Command::new("kill").args(["-9", &p.to_string()]).status();
    }
}

#[test]
fn the_child_cannot_read_agentloops_environment() {
    if !bwrap_works() {
        return;
    }
    let t = T::new();
    shell(&t, "");
    let (code, v) =
        call(&t, json!({"argv": ["sh", "-c", "cat /proc/1/environ /proc/[0-9]*/environ; echo; echo done"]}));
    assert_eq!(code, Some(0), "{v}");
    let out = v["output"].as_str().unwrap();
    assert!(out.contains("PATH=") && out.contains("done"), "{out}");
    assert!(!out.contains(MARKER), "agentloop's environment was readable: {out}");
    assert!(!out.contains("OPENAI_API_KEY") && !out.contains("REDACTED"), "{out}");
    for f in ["1", "self"] {
        let (_, v) = call(&t, json!({"argv": ["cat", format!("/proc/{f}/environ")]}));
        assert!(!v.to_string().contains(MARKER), "{v}");
    }
}

#[test]
fn the_network_is_off_unless_the_config_allows_it() {
    if !bwrap_works() {
        return;
    }
    let t = T::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = json!({"argv": ["bash", "-c", format!("echo hi > /dev/tcp/127.0.0.1/{port} && echo connected")]});
    shell(&t, "");
    let (code, v) = call(&t, connect.clone());
    assert_eq!(code, Some(6), "{v}");
    assert!(!v["output"].as_str().unwrap_or("").contains("connected"), "{v}");
    assert!(listener.accept().is_err(), "the sandboxed program reached 127.0.0.1:{port}");
    // Nor the system's daemons through their sockets under /run.
    let (code, v) = call(&t, json!({"argv": ["sh", "-c", "ls -A /run | wc -l"]}));
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().contains("stdout ---\n0\n"), "{v}");
    shell(&t, ", network: true");
    let (code, v) = call(&t, connect);
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().contains("connected"), "{v}");
}

#[test]
fn writes_go_only_to_the_write_folders() {
    if !bwrap_works() {
        return;
    }
    let t = T::new();
    t.write("ws/notes.txt", "mine\n");
    t.write(
        "ws/agentloop.yaml",
        "tools:\n  write_paths: [artifacts]\n  shell: {enabled: true, allow: [sh], patterns: [\"sh -c **\"]}\n",
    );
    let (code, v) = call(
        &t,
        json!({"argv": ["sh", "-c", "echo ok > artifacts/out.txt; echo x > notes.txt; echo y > new.txt; echo z > ../outside.txt; echo w > $HOME/home.txt; true"]}),
    );
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().contains("Read-only file system"), "{v}");
    assert_eq!(t.read("ws/artifacts/out.txt"), "ok\n");
    assert_eq!(t.read("ws/notes.txt"), "mine\n");
    assert!(!t.exists("ws/new.txt") && !t.exists("outside.txt") && !t.exists("home/home.txt"));
}

#[test]
fn the_paper_trail_is_read_only_to_the_shell() {
    if !bwrap_works() {
        return;
    }
    let t = T::new();
    t.write("ws/transcript.md", "# Transcript\n");
    t.write("ws/.git/config", "[core]\n");
    shell(&t, "");
    let (code, v) = call(
        &t,
        json!({"argv": ["sh", "-c", "echo evil > transcript.md; echo evil >> transcript.md; rm -f transcript.md; mv agentloop.yaml x.yaml; echo '[core] fsmonitor = id' >> .git/config; echo '{}' > state.json; mkdir templates; echo x > .agentloop.journal.json; echo fine > artifacts.txt; true"]}),
    );
    assert_eq!(code, Some(0), "{v}");
    let out = v["output"].as_str().unwrap();
    assert!(out.contains("removed") && out.contains("state.json"), "{out}");
    assert_eq!(t.read("ws/transcript.md"), "# Transcript\n");
    assert_eq!(t.read("ws/.git/config"), "[core]\n");
    assert!(t.exists("ws/agentloop.yaml") && !t.exists("ws/x.yaml"));
    for made in ["state.json", "templates", ".agentloop.journal.json"] {
        assert!(!t.exists(&format!("ws/{made}")), "{made} was left in the workspace");
    }
    assert_eq!(t.read("ws/artifacts.txt"), "fine\n", "other files stay writable");
}

#[test]
fn a_child_that_leaves_the_group_ends_with_the_call() {
    if !bwrap_works() {
        return;
    }
    let t = T::new();
    shell(&t, "");
    let (code, v) =
        call(&t, json!({"argv": ["sh", "-c", "setsid -f sleep 1234.5 </dev/null >/dev/null 2>&1; echo started"]}));
    assert_eq!(code, Some(0), "{v}");
    std::thread::sleep(Duration::from_millis(300));
    let left = running("sleep 1234.5");
    end(&left);
    assert!(left.is_empty(), "a setsid child outlived the call");
    // And on timeout.
    let (code, v) =
        call(&t, json!({"argv": ["sh", "-c", "setsid -f sleep 1234.6 </dev/null >/dev/null 2>&1; sleep 30"]}));
    assert_eq!(code, Some(6), "{v}");
    assert!(v["error"].as_str().unwrap().contains("timed out"), "{v}");
    std::thread::sleep(Duration::from_millis(300));
    let left = running("sleep 1234.6");
    end(&left);
    assert!(left.is_empty(), "a setsid child outlived the timeout");
}

#[test]
fn programs_that_run_programs_are_refused_even_when_allowlisted() {
    let t = T::new();
    bwrap_or_none(&t);
    t.write("ws/notes.txt", "line\n");
    std::os::unix::fs::symlink("/bin/sh", t.path("ws/lister")).unwrap();
    // Debian's alternatives end in dotted names (`editor` is `vim.basic`): judged by the stem.
    t.write("ws/vim.basic", "");
    std::os::unix::fs::symlink("vim.basic", t.path("ws/notes")).unwrap();
    t.write(
        "ws/agentloop.yaml",
        "tools:\n  shell: {enabled: true, allow: [sed, git, sqlite3, split, sort, gdb, vim, ed, tclsh, prlimit, setpriv, runuser, nodejs, node, ./lister, /usr/bin/../bin/perl, busybox, less, man, cargo, setarch, linux64, run-parts, ssh-agent, dc, msgfilter, apt-get, wget, ./notes]}\n",
    );
    for argv in [
        json!(["sqlite3", "x.db", ".shell id"]),
        json!(["split", "--filter=id", "notes.txt"]),
        json!(["sort", "--compress-program=id", "notes.txt"]),
        json!(["git", "-c", "core.pager=id", "log"]),
        json!(["git", "submodule", "foreach", "id"]),
        json!(["git", "config", "core.fsmonitor", "id"]),
        json!(["git", "st"]),
        json!(["gdb", "-batch", "-ex", "shell id"]),
        json!(["vim", "-c", ":!id"]),
        json!(["ed", "notes.txt"]),
        json!(["tclsh"]),
        json!(["prlimit", "id"]),
        json!(["setpriv", "id"]),
        json!(["runuser", "-u", "root", "id"]),
        json!(["nodejs", "-e", "1"]),
        json!(["node", "-e", "1"]),
        json!(["./lister", "-c", "id"]),
        json!(["/usr/bin/../bin/perl", "-e", "1"]),
        json!(["busybox", "sh"]),
        json!(["less", "notes.txt"]),
        json!(["man", "-P", "id", "ls"]),
        json!(["cargo", "run"]),
        json!(["setarch", "x86_64", "sh", "-c", "id"]),
        json!(["linux64", "sh"]),
        json!(["run-parts", "."]),
        json!(["ssh-agent", "sh", "-c", "id"]),
        json!(["dc", "-e", "!id"]),
        json!(["msgfilter", "-i", "x.po", "sh", "-c", "id"]),
        json!(["apt-get", "-o", "APT::Update::Pre-Invoke::=id", "update"]),
        json!(["wget", "-e", "use_askpass=/bin/sh", "http://127.0.0.1:9/"]),
        json!(["./notes", "-c", ":!id"]),
    ] {
        let (code, v) = call(&t, json!({"argv": argv}));
        assert_eq!(code, Some(6), "{argv}: {v}");
        assert!(v["error"].as_str().unwrap_or("").contains("refused"), "{argv}: {v}");
    }
    // sed runs, but with --sandbox: its `e` command and `s///e` flag are refused by sed itself.
    let (code, v) = call(&t, json!({"argv": ["sed", "-n", "1p", "notes.txt"]}));
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().contains("line"), "{v}");
    for script in ["1e id", "s/line/id/e"] {
        let (code, v) = call(&t, json!({"argv": ["sed", script, "notes.txt"]}));
        assert_eq!(code, Some(6), "{v}");
        assert!(!v.to_string().contains("uid="), "{v}");
    }
}

#[test]
fn without_bwrap_the_shell_refuses_unless_the_user_says_none() {
    let t = T::new();
    // A PATH with the program and no bwrap.
    let bin = t.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink("/bin/echo", bin.join("echo")).unwrap();
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [echo]}\n");
    let run = || {
        let out = t
            .al(&["tools", "call", "shell", "--args", r#"{"argv": ["echo", "hi"]}"#])
            .env("PATH", &bin)
            .output()
            .unwrap();
        (out.status.code(), serde_json::from_slice::<Value>(&out.stdout).unwrap_or_default())
    };
    let (code, v) = run();
    assert_eq!(code, Some(6), "{v}");
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("bubblewrap") && e.contains("sandbox: none") && e.contains("config.yaml"), "{e}");
    t.write("xdg/agentloop/config.yaml", "sandbox: none\n");
    let (code, v) = run();
    assert_eq!(code, Some(0), "{v}");
    assert!(v["output"].as_str().unwrap().contains("hi"), "{v}");
    // The top-level key is tools.shell.sandbox; both at once is an error naming both.
    t.write("xdg/agentloop/config.yaml", "sandbox: none\ntools:\n  shell: {sandbox: bwrap}\n");
    let out = t.al(&["config", "show"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a configuration error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("both `sandbox` and `tools.shell.sandbox`"), "{err}");
}

#[test]
fn a_key_in_a_dump_is_redacted_everywhere() {
    let t = T::new();
    t.write("ws/key.txt", &format!("{KEY}\n"));
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [od, xxd, hexdump]}\n");
    if !bwrap_works() {
        t.write("xdg/agentloop/config.yaml", "sandbox: none\n");
    }
    let mut plans = String::new();
    let mut reflects = String::new();
    let mut steps = 0;
    let dumps = [
        &["od", "-c", "key.txt"][..],
        &["od", "-An", "-tx1", "key.txt"],
        &["xxd", "key.txt"],
        &["xxd", "-p", "key.txt"],
        &["hexdump", "-C", "key.txt"],
    ];
    let installed: Vec<_> = dumps
        .iter()
        .filter(|a| {
            let ok = std::process::Command::new(a[0]).arg("--version").output().is_ok();
            if !ok {
                eprintln!("skipped: {} is not installed", a[0]);
            }
            ok
        })
        .collect();
    for argv in &installed {
        plans.push_str(&format!(
            "  - answer: {{next_action: {{tool: shell, args: {{argv: {}}}}}, expected_outcome: x, rationale: y}}\n",
            json!(argv)
        ));
        steps += 1;
        let decision = if steps == installed.len() { "escalate" } else { "continue" };
        reflects.push_str(&format!("  - answer: {{decision: {decision}, reason: step {steps}}}\n"));
    }
    t.write(
        "script.yaml",
        &format!(
            "frame:\n  - answer: {{goal: g, definition_of_done: [a, b, c], can_proceed: true}}\nplan:\n{plans}reflect:\n{reflects}"
        ),
    );
    let out = t
        .al(&["--script", "script.yaml", "run", "--goal", "g"])
        .env("OPENAI_API_KEY", KEY)
        .env("AGENTLOOP_MAX_REPEATS", "0")
        .output()
        .unwrap();
    let transcript = t.read("ws/transcript.md");
    assert!(transcript.contains("REDACTED"), "{}\n{transcript}", String::from_utf8_lossy(&out.stderr));
    for entry in walkdir(&t.path("ws")) {
        let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        if entry.ends_with("key.txt") {
            continue;
        }
        for r in renderings() {
            assert!(!text.contains(&r), "{} holds the key as `{r}`", entry.display());
        }
    }
}

/// A key at an offset no encoder aligns to, encoded (wrapped base64, base32), dumped by words
/// or in octal and decimal, cut into pieces, and one agentloop was never given (in a `.env` the
/// shell can read): none reaches the transcript, the trace or any other recorded file.
#[test]
fn an_encoded_or_split_key_is_redacted_from_the_transcript() {
    let t = T::new();
    t.write("ws/key.txt", &format!("xy{KEY}\n"));
    t.write("ws/.env", "export SOME_SERVICE_TOKEN=unknown-secret-value-777\n");
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [base64, basenc, od, fold, cat]}\n");
    bwrap_or_none(&t);
    let calls: Vec<Vec<&str>> = vec![
        vec!["base64", "-w", "20", "key.txt"],
        vec!["base64", "-w", "40", "key.txt"],
        vec!["basenc", "--base32", "key.txt"],
        vec!["od", "-tx2", "key.txt"],
        vec!["od", "-An", "-tx4", "key.txt"],
        vec!["od", "-to1", "key.txt"],
        vec!["od", "-tu1", "key.txt"],
        vec!["fold", "-w2", "key.txt"],
        vec!["cat", ".env"],
    ];
    let (mut plans, mut reflects) = (String::new(), String::new());
    for (i, argv) in calls.iter().enumerate() {
        plans.push_str(&format!(
            "  - answer: {{next_action: {{tool: shell, args: {{argv: {}}}}}, expected_outcome: x, rationale: y}}\n",
            json!(argv)
        ));
        let decision = if i + 1 == calls.len() { "escalate" } else { "continue" };
        reflects.push_str(&format!("  - answer: {{decision: {decision}, reason: step {i}}}\n"));
    }
    t.write(
        "script.yaml",
        &format!(
            "frame:\n  - answer: {{goal: g, definition_of_done: [a, b, c], can_proceed: true}}\nplan:\n{plans}reflect:\n{reflects}"
        ),
    );
    let out = t
        .al(&["--script", "script.yaml", "run", "--goal", "g"])
        .env("OPENAI_API_KEY", KEY)
        .env("AGENTLOOP_MAX_REPEATS", "0")
        .output()
        .unwrap();
    let transcript = t.read("ws/transcript.md");
    assert!(transcript.contains("REDACTED"), "{}\n{transcript}", String::from_utf8_lossy(&out.stderr));
    assert!(transcript.contains("SOME_SERVICE_TOKEN="), "the name stays: {transcript}");
    // What each program prints, run here on the same file: no line of it that spells part of
    // the key may be recorded.
    let printed: Vec<String> = calls
        .iter()
        .filter_map(|argv| std::process::Command::new(argv[0]).args(&argv[1..]).current_dir(t.path("ws")).output().ok())
        .flat_map(|o| String::from_utf8_lossy(&o.stdout).lines().map(|l| l.trim().to_string()).collect::<Vec<_>>())
        .filter(|l| l.len() >= 12 && !l.contains("SOME_SERVICE_TOKEN"))
        .collect();
    assert!(printed.len() > 10, "the programs ran here: {printed:?}");
    for entry in walkdir(&t.path("ws")) {
        if entry.ends_with("key.txt") || entry.ends_with(".env") {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        let compact: String = text.split_whitespace().collect();
        assert!(!compact.contains("9f8e7d6c5b4a39281706"), "{} holds the key", entry.display());
        assert!(!text.contains("unknown-secret-value-777"), "{} holds the .env secret", entry.display());
        for line in &printed {
            assert!(!text.contains(line.as_str()), "{} holds `{line}`", entry.display());
        }
    }
}

fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A repository handed over with the workspace chooses programs git would run (a clean filter
/// for `status`, a textconv for `blame`): git there is refused unless a pattern trusts it.
#[test]
fn git_does_not_run_the_programs_a_workspaces_repository_names() {
    let t = T::new();
    bwrap_or_none(&t);
    t.write("ws/f.txt", "hi\n");
    t.write("ws/.gitattributes", "* filter=x\n* diff=y\n");
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git").current_dir(t.path("ws")).args(args).status().unwrap().success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["config", "filter.x.clean", "sh -c 'id > PWNED-git; cat'"]);
    git(&["config", "diff.y.textconv", "sh -c 'id > PWNED-tc; cat'"]);
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [git]}\n");
    for argv in [json!(["git", "status"]), json!(["git", "blame", "f.txt"]), json!(["git", "-C", ".", "log"])] {
        let (code, v) = call(&t, json!({"argv": argv}));
        assert_eq!(code, Some(6), "{argv}: {v}");
        let text = v.to_string();
        assert!(text.contains("git would run") || text.contains("can make git run a program"), "{argv}: {v}");
    }
    assert!(!t.exists("ws/PWNED-git") && !t.exists("ws/PWNED-tc"), "git ran the repository's program");
    // A repository without such settings is read as before.
    std::fs::remove_dir_all(t.path("ws/.git")).unwrap();
    git(&["init", "-q"]);
    let (code, v) = call(&t, json!({"argv": ["git", "status", "--short"]}));
    assert_eq!(code, Some(0), "{v}");
}

/// git reads the configuration of the repository it finds, wherever that is and however it is
/// spelled: a folder without `.git` uses its parent's, `[filter.x]` is `[filter "x"]`, a
/// signature program runs on `log --show-signature`. Each is refused, and nothing runs.
#[test]
fn git_judges_the_configuration_git_will_actually_read() {
    let t = T::new();
    bwrap_or_none(&t);
    t.write("ws/f.txt", "hi\n");
    t.write("ws/sub/g.txt", "hi\n");
    t.write("ws/.gitattributes", "* filter=x diff=y\n");
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git").current_dir(t.path("ws")).args(args).status().unwrap().success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "x"]);
    let base = t.read("ws/.git/config");
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [git]}\n");
    for (config, argv, key) in [
        ("[filter.x]\n\tclean = sh -c 'id > PWNED-f; cat'\n", json!(["git", "-C", "sub", "status"]), "filter.x.clean"),
        ("[filter \"x\"]\n\tclean = sh -c 'id > PWNED-f; cat'\n", json!(["git", "status"]), "filter.x.clean"),
        (
            "[diff.y]\n\ttextconv = sh -c 'id > PWNED-d; cat'\n",
            json!(["git", "-C", "sub", "blame", "g.txt"]),
            "diff.y.textconv",
        ),
        ("[gpg]\n\tprogram = ./PWNED-gpg\n", json!(["git", "log", "--show-signature"]), "gpg.program"),
        (
            "[log]\n\tshowSignature = true\n[gpg \"ssh\"]\n\tprogram = ./PWNED-gpg\n",
            json!(["git", "-C", "sub", "log"]),
            "gpg.ssh.program",
        ),
    ] {
        t.write("ws/.git/config", &format!("{base}{config}"));
        let (code, v) = call(&t, json!({"argv": argv}));
        assert_eq!(code, Some(6), "{argv} with {config}: {v}");
        let e = v["error"].as_str().unwrap_or("");
        assert!(e.contains("refused") && e.contains(key) && e.contains("git would run"), "{argv}: {v}");
    }
    assert!(!t.exists("ws/PWNED-f") && !t.exists("ws/PWNED-d") && !t.exists("ws/sub/PWNED-f"), "git ran a program");
    // A repository that names no program is read as before, from a folder below it too.
    t.write("ws/.git/config", &base);
    let (code, v) = call(&t, json!({"argv": ["git", "-C", "sub", "log", "--oneline"]}));
    assert_eq!(code, Some(0), "{v}");
}

/// GNU programs take any unambiguous prefix of a long option (`--filt=` is `--filter=`), gcc
/// reads more options from an `@file`, tar reads its first argument as options without a dash,
/// and pydoc imports the module it documents: each is refused, and nothing runs.
#[test]
fn abbreviated_options_response_files_and_importers_are_refused() {
    let t = T::new();
    bwrap_or_none(&t);
    t.write("ws/notes.txt", "line\n");
    t.write("ws/other.txt", "line\n");
    t.write("ws/args.txt", "-wrapper /bin/sh,-c,touch${IFS}PWNED-gcc\n");
    t.write("ws/evil.py", "open('PWNED-py', 'w').write('x')\n");
    t.write(
        "ws/agentloop.yaml",
        "tools:\n  shell: {enabled: true, allow: [split, sort, sdiff, wget, zip, tar, gcc, pydoc3, install, crontab]}\n",
    );
    t.write("ws/evil.sh", "#!/bin/sh\ntouch PWNED-install\n");
    for argv in [
        json!(["split", "--filt=touch PWNED-split", "notes.txt"]),
        json!(["split", "--f", "touch PWNED-split", "notes.txt"]),
        json!(["sort", "--compress-prog=touch", "notes.txt"]),
        json!(["sdiff", "--diff-pro=touch", "notes.txt", "other.txt"]),
        json!(["wget", "--use-ask=/bin/sh", "http://127.0.0.1:9/"]),
        json!(["zip", "--unzip-comm=touch", "x.zip", "notes.txt"]),
        json!(["tar", "--to-comm=touch PWNED-tar", "-xf", "x.tar"]),
        json!(["tar", "--checkpoint=1", "--checkpoint-act=exec=touch PWNED-tar", "-cf", "x.tar", "notes.txt"]),
        json!(["tar", "--use-compress=touch", "-cf", "x.tar", "notes.txt"]),
        json!(["tar", "--new-volume-script=touch", "-cf", "x.tar", "notes.txt"]),
        json!(["tar", "cIf", "touch", "x.tar", "notes.txt"]),
        json!(["gcc", "@args.txt", "-E", "-x", "c", "/dev/null"]),
        json!(["pydoc3", "evil"]),
        json!(["install", "-s", "--strip-program=./evil.sh", "notes.txt", "copy"]),
        json!(["install", "-s", "--strip-prog=./evil.sh", "notes.txt", "copy"]),
        json!(["crontab", "notes.txt"]),
    ] {
        let (code, v) = call(&t, json!({"argv": argv}));
        assert_eq!(code, Some(6), "{argv}: {v}");
        assert!(v["error"].as_str().unwrap_or("").contains("refused"), "{argv}: {v}");
    }
    for made in ["PWNED-split", "PWNED-tar", "PWNED-gcc", "PWNED-py", "PWNED-install", "touch"] {
        assert!(!t.exists(&format!("ws/{made}")), "{made}: a program ran");
    }
    // The whole names still run: `--checkpoint` is tar's own option, not an abbreviation.
    let (code, v) = call(&t, json!({"argv": ["tar", "--checkpoint=1", "-cf", "x.tar", "notes.txt"]}));
    assert_eq!(code, Some(0), "{v}");
    let (code, v) = call(&t, json!({"argv": ["sort", "-u", "notes.txt"]}));
    assert_eq!(code, Some(0), "{v}");
}

/// Without the OS sandbox nothing contains what a program runs, so no pattern can allow a
/// program that runs programs.
#[test]
fn without_the_os_sandbox_no_pattern_allows_a_program_that_runs_programs() {
    let t = T::new();
    t.write("xdg/agentloop/config.yaml", "sandbox: none\n");
    t.write("ws/notes.txt", "line\n");
    t.write(
        "ws/agentloop.yaml",
        "tools:\n  shell: {enabled: true, allow: [split, git], patterns: [\"split **\", \"git **\"]}\n",
    );
    let (code, v) = call(&t, json!({"argv": ["split", "--filter=touch PWNED-split", "notes.txt"]}));
    assert_eq!(code, Some(6), "{v}");
    let e = v["error"].as_str().unwrap_or("");
    assert!(e.contains("refused") && e.contains("sandbox: none"), "{v}");
    assert!(!t.exists("ws/PWNED-split"), "split ran its filter on the host");
    let (code, v) = call(&t, json!({"argv": ["git", "-c", "core.pager=touch PWNED-git", "log"]}));
    assert_eq!(code, Some(6), "{v}");
    assert!(!t.exists("ws/PWNED-git"));
}

/// A descriptor agentloop's caller left open (`9>>outside.txt`) does not reach the program.
#[test]
fn descriptors_agentloop_inherits_do_not_reach_the_program() {
    let t = T::new();
    bwrap_or_none(&t);
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [tee]}\n");
    let args = json!({"argv": ["tee", "-a", "/dev/fd/9"], "stdin": "through the inherited descriptor\n"});
    let out = std::process::Command::new("bash")
        .args(["-c", "exec 9>>outside.txt; exec \"$@\"", "bash", env!("CARGO_BIN_EXE_agentloop")])
        .args(["-w", "ws", "tools", "call", "shell", "--args", &args.to_string()])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("XDG_CACHE_HOME", t.path("cache"))
        .env("AGENTLOOP_TRUST_ALL", "1")
        .current_dir(t.root())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert!(v.get("output").is_some() || v.get("error").is_some(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(t.read("outside.txt"), "", "the program wrote through agentloop's descriptor 9: {v}");
}

/// `network: false` also keeps a listening unix socket the sandbox can see (here in a read
/// folder outside the workspace, as `~/.docker/run/docker.sock` would be) out of reach.
#[test]
fn a_unix_socket_the_sandbox_can_see_is_unreachable_without_the_network() {
    if !bwrap_works() {
        return;
    }
    let t = T::new();
    std::fs::create_dir_all(t.path("data")).unwrap();
    let sock = t.path("data/d.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let config = |network: bool| {
        t.write(
            "ws/agentloop.yaml",
            &format!(
                "tools:\n  read_paths: [../data]\n  shell: {{enabled: true, allow: [curl, cat], timeout: 5s, network: {network}}}\n"
            ),
        );
    };
    let curl = json!({"argv": ["curl", "-sS", "-m", "1", "--unix-socket", sock.to_str().unwrap(), "http://x/"]});
    config(false);
    // The folder itself is visible; only the socket is masked.
    t.write("data/seen.txt", "seen\n");
    let (_, v) = call(&t, json!({"argv": ["cat", t.path("data/seen.txt").to_str().unwrap()]}));
    assert!(v["output"].as_str().unwrap_or("").contains("seen"), "{v}");
    let (code, v) = call(&t, curl.clone());
    assert_eq!(code, Some(6), "{v}");
    assert!(listener.accept().is_err(), "the sandboxed program reached the socket: {v}");
    config(true);
    let _ = call(&t, curl);
    assert!(listener.accept().is_ok(), "with network: true the socket is reachable");
}

/// A PATH holding `.` or an empty entry does not make a workspace file stand in for an
/// allowlisted program that is not installed.
#[test]
fn a_workspace_file_does_not_stand_in_for_an_uninstalled_program() {
    let t = T::new();
    bwrap_or_none(&t);
    t.write("ws/frobnicate-tool", "#!/bin/sh\necho ran > PWNED-path\n");
    std::fs::set_permissions(t.path("ws/frobnicate-tool"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [frobnicate-tool]}\n");
    let host = std::env::var("PATH").unwrap_or_default();
    for path in [format!("{host}:."), format!(":{host}"), format!("{host}:./")] {
        let out = t
            .al(&["tools", "call", "shell", "--args", r#"{"argv": ["frobnicate-tool"]}"#])
            .env("PATH", &path)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(out.status.code(), Some(6), "{path}: {v}");
        assert!(v["error"].as_str().unwrap_or("").contains("not installed"), "{v}");
        assert!(!t.exists("ws/PWNED-path"), "PATH {path} ran the workspace's file");
    }
}

/// A repository below the top (a nested clone, a submodule whose `.git` file leads elsewhere in
/// the workspace, a bare one) is as read-only to the program as the top `.git`: `sed -i`,
/// `tee` and `cp` cannot give its config an `fsmonitor` the user's next `git status` would run,
/// and a `.git` the program makes is removed after it. Without the sandbox an argv that names a
/// `.git` is refused.
#[test]
fn git_repositories_at_every_depth_are_read_only_to_the_shell() {
    let t = T::new();
    let git = |dir: &str, args: &[&str]| {
        std::fs::create_dir_all(t.path(dir)).unwrap();
        let ok = std::process::Command::new("git").current_dir(t.path(dir)).args(args).status().unwrap().success();
        assert!(ok, "git {args:?}");
    };
    git("ws/sub", &["init", "-q"]);
    git("ws/deep/er/repo", &["init", "-q"]);
    git("ws/mirror.git", &["init", "-q", "--bare"]);
    // A submodule's checkout: its `.git` is a file naming a folder elsewhere in the workspace.
    git("ws/modules/sm", &["init", "-q", "--bare"]);
    t.write("ws/sm/.git", "gitdir: ../modules/sm\n");
    t.write("ws/evil.cfg", "[core]\n\tfsmonitor = touch PWNED\n");
    let configs = ["ws/sub/.git/config", "ws/deep/er/repo/.git/config", "ws/mirror.git/config", "ws/modules/sm/config"];
    let before: Vec<String> = configs.iter().map(|c| t.read(c)).collect();
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [sed, tee, cp, mkdir], timeout: 5s}\n");
    if bwrap_works() {
        for target in
            ["sub/.git/config", "deep/er/repo/.git/config", "mirror.git/config", "sm/.git/../modules/sm/config"]
        {
            for argv in [
                json!(["sed", "-i", "s/bare = false/fsmonitor = touch PWNED/", target]),
                json!(["tee", "-a", target]),
                json!(["cp", "evil.cfg", target]),
            ] {
                let (_, v) = call(&t, json!({"argv": argv, "stdin": "[core]\n\tfsmonitor = touch PWNED\n"}));
                let _ = v;
            }
        }
        for (c, b) in configs.iter().zip(&before) {
            assert_eq!(&t.read(c), b, "{c} was written from the sandbox");
        }
        // A repository the program makes is gone after the call.
        let (code, v) = call(&t, json!({"argv": ["mkdir", "-p", "new/.git/hooks"]}));
        assert_eq!(code, Some(0), "{v}");
        assert!(v["output"].as_str().unwrap().contains("new/.git"), "{v}");
        assert!(!t.exists("ws/new/.git") && t.exists("ws/new"), "{v}");
        // Other files stay writable.
        let (code, v) = call(&t, json!({"argv": ["cp", "evil.cfg", "sub/copy.cfg"]}));
        assert_eq!(code, Some(0), "{v}");
        moved_repositories_are_kept(&t, &git);
    }
    without_the_sandbox_no_argv_names_a_git(&t, &configs, &before);
}

/// A repository the program moves whole is the user's, kept at its new place with its history
/// (never taken for one the program made); a copy of one is a new one, removed.
fn moved_repositories_are_kept(t: &T, git: &dyn Fn(&str, &[&str])) {
    git("ws/proj", &["init", "-q"]);
    git("ws/proj", &["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "important"]);
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [mv, cp], timeout: 5s}\n");
    let (code, v) = call(t, json!({"argv": ["mv", "proj", "proj2"]}));
    assert_eq!(code, Some(0), "{v}");
    assert!(!v["output"].as_str().unwrap().contains("removed"), "{v}");
    let log = std::process::Command::new("git").args(["log", "--format=%s"]).current_dir(t.path("ws/proj2")).output();
    assert_eq!(String::from_utf8_lossy(&log.unwrap().stdout).trim(), "important");
    let (code, v) = call(t, json!({"argv": ["cp", "-r", "proj2", "proj3"]}));
    assert_eq!(code, Some(0), "{v}");
    assert!(!t.exists("ws/proj3/.git") && t.exists("ws/proj2/.git"), "{v}");
}

/// Without the OS sandbox an argv that names a `.git` is refused, and a repository a program
/// unpacks (its argv names none) is removed after the call.
fn without_the_sandbox_no_argv_names_a_git(t: &T, configs: &[&str], before: &[String]) {
    // Without the OS sandbox: an argv that names a `.git` is refused, whatever the spelling.
    t.write("xdg/agentloop/config.yaml", "sandbox: none\n");
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [sed, tee, cp, mkdir], timeout: 5s}\n");
    for argv in [
        json!(["tee", "-a", "sub/.git/config"]),
        json!(["cp", "evil.cfg", "./deep/er/repo/.git/config"]),
        json!(["sed", "-i", "s/x/y/", "sub/.GIT/config"]),
    ] {
        let (code, v) = call(t, json!({"argv": argv, "stdin": "[core]\n\tfsmonitor = touch PWNED\n"}));
        assert_eq!(code, Some(6), "{argv}: {v}");
        assert!(v["error"].as_str().unwrap_or("").contains("sandbox: none"), "{argv}: {v}");
    }
    for (c, b) in configs.iter().zip(before) {
        assert_eq!(&t.read(c), b, "{c} was written without the sandbox");
    }
    // A repository it unpacks (the argv names none) is removed after the call.
    t.write("pack/other/.git/config", "[core]\n\tfsmonitor = touch PWNED\n");
    let ok =
        std::process::Command::new("tar").args(["-cf", "../ws/repo.tar", "other"]).current_dir(t.path("pack")).status();
    assert!(ok.unwrap().success());
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [tar], timeout: 5s}\n");
    let (code, v) = call(t, json!({"argv": ["tar", "-xf", "repo.tar"]}));
    assert_eq!(code, Some(0), "{v}");
    assert!(!t.exists("ws/other/.git") && t.exists("ws/other"), "{v}");
}

/// `git status` in a superproject recurses into its submodules and runs their filters with
/// their own configuration (`.git/modules/sm/config`), which `git config --list` never shows:
/// it is judged like the top one, as are a worktree's `config.worktree` and a repository deeper
/// in the work tree, and nothing runs.
#[test]
fn git_judges_the_configuration_of_submodules_and_worktrees() {
    let t = T::new();
    bwrap_or_none(&t);
    let git = |dir: &str, args: &[&str]| {
        std::fs::create_dir_all(t.path(dir)).unwrap();
        let ok = std::process::Command::new("git")
            .current_dir(t.path(dir))
            .args(["-c", "user.name=a", "-c", "user.email=a@b", "-c", "protocol.file.allow=always"])
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    t.write("up/f.txt", "hi\n");
    t.write("up/.gitattributes", "* filter=x\n");
    git("up", &["init", "-q"]);
    git("up", &["add", "."]);
    git("up", &["commit", "-q", "-m", "x"]);
    git("ws", &["init", "-q"]);
    git("ws", &["submodule", "add", "-q", t.path("up").to_str().unwrap(), "sm"]);
    git("ws", &["commit", "-q", "-m", "sm"]);
    t.write("ws/agentloop.yaml", "tools:\n  shell: {enabled: true, allow: [git]}\n");
    let (code, v) = call(&t, json!({"argv": ["git", "status", "--short"]}));
    assert_eq!(code, Some(0), "a clean superproject is read as before: {v}");
    // The submodule's own config names a clean filter; its file is changed so status runs it.
    let sm_config = t.read("ws/.git/modules/sm/config");
    t.write("ws/.git/modules/sm/config", &format!("{sm_config}[filter \"x\"]\n\tclean = sh -c 'id > PWNED-sm; cat'\n"));
    t.write("ws/sm/f.txt", "changed\n");
    for argv in [json!(["git", "status"]), json!(["git", "-C", "sm", "status"]), json!(["git", "diff"])] {
        let (code, v) = call(&t, json!({"argv": argv}));
        assert_eq!(code, Some(6), "{argv}: {v}");
        let e = v["error"].as_str().unwrap_or("");
        assert!(e.contains("refused") && e.contains("filter.x.clean") && e.contains("git would run"), "{argv}: {v}");
        assert!(!e.contains(t.root().to_str().unwrap()), "a machine path in {e}");
    }
    assert!(!t.exists("ws/sm/PWNED-sm") && !t.exists("ws/PWNED-sm"), "git ran the submodule's filter");
    t.write("ws/.git/modules/sm/config", &sm_config);
    // A worktree's own configuration.
    t.write("ws/.git/worktrees/w/config.worktree", "[core]\n\tpager = id\n");
    let (code, v) = call(&t, json!({"argv": ["git", "status"]}));
    assert_eq!(code, Some(6), "{v}");
    assert!(v["error"].as_str().unwrap_or("").contains("core.pager"), "{v}");
}

/// Programs that can run code the workspace holds — compilers under any name (`gcc-12`, `c99`,
/// `x86_64-linux-gnu-gcc`), linkers, preprocessors, test runners, loaders of plugins and
/// providers — are refused whole, however their options are spelled, naming the program and
/// the key that allows it: `tools.shell.code_runners` in the user's own config, and only with
/// the OS sandbox. Nothing they would load runs.
#[test]
fn programs_that_can_run_the_workspaces_code_are_refused_whole() {
    let t = T::new();
    bwrap_or_none(&t);
    t.write("ws/f.c", "int main(void) { return 0; }\n");
    t.write("ws/t/x.t", "open my $f, '>', 'PWNED-prove'; print \"ok 1\\n1..1\\n\";\n");
    t.write("ws/x.pic", ".PS\nsh \"touch PWNED-pic\"\n.PE\n");
    t.write("ws/x.cnf", "openssl_conf = x\n[x]\nproviders = p\n[p]\nx = y\n");
    let progs = "[gcc, gcc-12, x86_64-linux-gnu-gcc, c99, c89, ld, cpp, pic, prove, openssl, ssh-keygen]";
    t.write("ws/agentloop.yaml", &format!("tools:\n  shell: {{enabled: true, allow: {progs}, timeout: 5s}}\n"));
    for argv in [
        json!(["gcc", "--prefix=./", "f.c"]),
        json!(["gcc", "--for-linker=--plugin=./x.so", "f.c"]),
        json!(["gcc", "-O2", "-c", "f.c"]),
        json!(["gcc-12", "-c", "f.c"]),
        json!(["x86_64-linux-gnu-gcc", "-c", "f.c"]),
        json!(["c99", "-c", "f.c"]),
        json!(["c89", "-c", "f.c"]),
        json!(["ld", "-plugin", "./x.so"]),
        json!(["cpp", "-fplugin=./x.so", "f.c"]),
        json!(["pic", "-U", "x.pic"]),
        json!(["prove", "t/"]),
        json!(["openssl", "req", "-config", "x.cnf"]),
        json!(["openssl", "list", "-provider", "./x"]),
        json!(["ssh-keygen", "-D", "./x.so"]),
    ] {
        let (code, v) = call(&t, json!({"argv": argv}));
        assert_eq!(code, Some(6), "{argv}: {v}");
        let e = v["error"].as_str().unwrap_or("");
        let prog = argv[0].as_str().unwrap();
        assert!(e.starts_with(&format!("refused: `{prog}`")) && e.contains("tools.shell.code_runners"), "{argv}: {e}");
    }
    assert!(!t.exists("ws/PWNED-prove") && !t.exists("ws/PWNED-pic"), "a refused program ran");
    // The user's own config allows one program by name; the others stay refused.
    t.write("xdg/agentloop/config.yaml", "tools:\n  shell: {code_runners: [gcc]}\n");
    if bwrap_works() {
        let (code, v) = call(&t, json!({"argv": ["gcc", "-c", "f.c", "-o", "f.o"]}));
        assert_eq!(code, Some(0), "{v}");
        let (code, v) = call(&t, json!({"argv": ["gcc-12", "-c", "f.c"]}));
        assert_eq!(code, Some(6), "{v}");
    }
    // Without the OS sandbox nothing allows them.
    t.write("xdg/agentloop/config.yaml", "sandbox: none\ntools:\n  shell: {code_runners: [gcc, prove]}\n");
    for argv in [json!(["gcc", "-c", "f.c"]), json!(["prove", "t/"])] {
        let (code, v) = call(&t, json!({"argv": argv}));
        assert_eq!(code, Some(6), "{argv}: {v}");
        assert!(v["error"].as_str().unwrap_or("").contains("sandbox: none"), "{v}");
    }
    assert!(!t.exists("ws/PWNED-prove"), "prove ran on the host");
    // A workspace nobody trusted cannot name one the user did not.
    t.write("xdg/agentloop/config.yaml", "tools:\n  shell: {enabled: true, allow: [gcc], code_runners: []}\n");
    t.write("ws/agentloop.yaml", "tools:\n  shell: {code_runners: [gcc]}\n");
    let out = t
        .untrusted()
        .args(["-w", "ws", "tools", "call", "shell", "--args", r#"{"argv": ["gcc", "f.c"]}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", crate::common::stderr(&out));
    assert!(crate::common::stderr(&out).contains("`tools.shell.code_runners`"), "{}", crate::common::stderr(&out));
}

/// A `.env` holding a key agentloop knows, dumped by xxd with any grouping or width (`-g0`,
/// `-c4`, `-c2`: the text column then looks like hex), in binary (`-b`), converted to UTF-16
/// (`iconv`), or base64-encoded twice: no line of it that spells part of the key is recorded,
/// in hex, bits or text, anywhere in the workspace; nor of a key agentloop was never given,
/// assigned in the same file, in the dumps.
#[test]
fn a_key_in_any_dump_width_utf16_or_nested_base64_is_redacted() {
    let t = T::new();
    t.write("ws/key.env", &format!("OPENAI_API_KEY={KEY}\n"));
    t.write(
        "ws/.env",
        &format!("# service\nOPENAI_API_KEY={KEY}\nSOME_SERVICE_TOKEN=unknown-secret-value-777\nDEBUG=1\n"),
    );
    t.write(
        "ws/agentloop.yaml",
        "tools:\n  shell: {enabled: true, allow: [xxd, iconv, sh], patterns: [\"sh -c **\"]}\n",
    );
    let sandboxed = bwrap_works();
    if !sandboxed {
        t.write("xdg/agentloop/config.yaml", "sandbox: none\n");
    }
    let mut calls: Vec<Vec<&str>> = vec![
        vec!["xxd", "-g0", ".env"],
        vec!["xxd", "-c4", ".env"],
        vec!["xxd", "-c2", ".env"],
        vec!["xxd", "-b", ".env"],
        vec!["iconv", "-f", "UTF-8", "-t", "UTF-16LE", ".env"],
        vec!["iconv", "-f", "UTF-8", "-t", "UTF-16", ".env"],
    ];
    if sandboxed {
        calls.push(vec!["sh", "-c", "base64 key.env | base64"]);
        calls.push(vec!["sh", "-c", "iconv -t UTF-16LE .env | xxd -c4"]);
    }
    let (mut plans, mut reflects) = (String::new(), String::new());
    for (i, argv) in calls.iter().enumerate() {
        plans.push_str(&format!(
            "  - answer: {{next_action: {{tool: shell, args: {{argv: {}}}}}, expected_outcome: x, rationale: y}}\n",
            json!(argv)
        ));
        let decision = if i + 1 == calls.len() { "escalate" } else { "continue" };
        reflects.push_str(&format!("  - answer: {{decision: {decision}, reason: step {i}}}\n"));
    }
    t.write(
        "script.yaml",
        &format!(
            "frame:\n  - answer: {{goal: g, definition_of_done: [a, b, c], can_proceed: true}}\nplan:\n{plans}reflect:\n{reflects}"
        ),
    );
    let out = t
        .al(&["--script", "script.yaml", "run", "--goal", "g"])
        .env("OPENAI_API_KEY", KEY)
        .env("AGENTLOOP_MAX_REPEATS", "0")
        .output()
        .unwrap();
    let transcript = t.read("ws/transcript.md");
    assert!(transcript.contains("REDACTED"), "{}\n{transcript}", String::from_utf8_lossy(&out.stderr));
    // What each program prints, run here: no line of it that spells part of the key (four of
    // its characters, three of its bytes in hex or bits; any line of the twice-encoded
    // base64) is recorded.
    // The unknown key (never given to agentloop) is masked as an assignment in the dumps too.
    let spells_key = |line: &str| {
        let plain: String = line.split_whitespace().collect::<String>().replace(['\0', '.', '|'], "").to_lowercase();
        [&KEY.as_bytes()[8..], b"unknown-secret-value-777"].iter().any(|part| {
            part.windows(4).any(|w| plain.contains(std::str::from_utf8(w).unwrap()))
                || part.windows(3).any(|w| plain.contains(&w.iter().map(|b| format!("{b:02x}")).collect::<String>()))
                || part.windows(3).any(|w| plain.contains(&w.iter().map(|b| format!("{b:08b}")).collect::<String>()))
        })
    };
    let printed: Vec<String> = calls
        .iter()
        .filter_map(|argv| {
            let o = std::process::Command::new(argv[0]).args(&argv[1..]).current_dir(t.path("ws")).output().ok()?;
            Some((argv.contains(&"base64 key.env | base64"), o))
        })
        .flat_map(|(nested, o)| {
            let lines: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(|l| l.trim().to_string()).collect();
            lines.into_iter().filter(move |l| if nested { l.len() >= 16 } else { spells_key(l) })
        })
        .collect();
    assert!(printed.len() > 10, "the programs ran here: {printed:?}");
    let core_hex: String = "9f8e7d6c5b4a".bytes().map(|b| format!("{b:02x}")).collect();
    for entry in walkdir(&t.path("ws")) {
        if entry.ends_with(".env") || entry.ends_with("key.env") {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        let compact: String = text.split_whitespace().collect::<String>().replace(['\0', '.', '|'], "");
        assert!(!compact.contains("9f8e7d6c5b4a"), "{} holds the key", entry.display());
        assert!(!compact.to_lowercase().contains(&core_hex), "{} holds the key in hex", entry.display());
        for line in &printed {
            assert!(!text.contains(line.as_str()), "{} holds `{line}`", entry.display());
        }
    }
}
