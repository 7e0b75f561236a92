//! The shell tool: off by default; runs one allowlisted program as an argv (never through a
//! shell string), in the workspace, with a timeout and an output cap.
//!
//! It cannot be talked around: the environment is cleared to `tools.shell.env` (no provider
//! keys reach the child); programs that run other programs (shells, `env`, `xargs`, `nohup`,
//! interpreters, `find -exec`, `tar --to-command`, ...) are refused even when allowlisted unless
//! the whole argv matches a `tools.shell.patterns` entry; the child runs in its own process group
//! and the whole group is killed on timeout, so grandchildren cannot outlive it.

use super::{ToolEnv, ToolResult};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn run(env: &ToolEnv, args: &Value, timeout: Duration) -> ToolResult {
    let cfg = &env.config.tools.shell;
    let argv: Vec<String> = args["argv"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default();
    let Some(program) = argv.first() else {
        return ToolResult::err("argv is empty", false);
    };
    if !cfg.allow.iter().any(|a| a == program) {
        return ToolResult::err(
            format!("program `{program}` is not in tools.shell.allow ({})", cfg.allow.join(", ")),
            false,
        );
    }
    if let Some(why) = exec_through(&argv) {
        if !cfg.patterns.iter().any(|p| matches(p, &argv)) {
            return ToolResult::err(
                format!("refused: {why}; allow this exact command with a tools.shell.patterns entry"),
                false,
            );
        }
    }
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..]).env_clear();
    for k in &cfg.env {
        if let Ok(v) = std::env::var(k) {
            cmd.env(k, v);
        }
    }
    let mut child = match cmd
        .process_group(0)
        .current_dir(env.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return ToolResult::err(format!("cannot start `{program}`: {e}"), false),
    };
    // Ctrl-C reaches only agentloop's own group: the watcher ends this one too.
    let group = child.id();
    crate::interrupt::register(group);
    let stdin_text = args.get("stdin").and_then(Value::as_str).unwrap_or("").to_string();
    let mut stdin = child.stdin.take();
    let feeder = std::thread::spawn(move || {
        if let Some(s) = stdin.as_mut() {
            let _ = s.write_all(stdin_text.as_bytes());
        }
    });
    let cap = cfg.max_output as u64;
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let out_t = std::thread::spawn(move || read_capped(out.as_mut(), cap));
    let err_t = std::thread::spawn(move || read_capped(err.as_mut(), cap));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() >= timeout => {
                // The whole group: a grandchild (`find -exec sleep`) must not outlive the call.
                let pgid = rustix::process::Pid::from_child(&child);
                let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return ToolResult::err(format!("waiting for `{program}` failed: {e}"), true),
        }
    };
    crate::interrupt::unregister(group);
    let _ = feeder.join();
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    let Some(status) = status else {
        return ToolResult::err(format!("`{program}` timed out after {}s and was killed", timeout.as_secs()), true);
    };
    let code = status.code().unwrap_or(-1);
    let text = format!("exit code: {code}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
    let mut r = if status.success() {
        ToolResult::ok(text, json!({"exit_code": code}))
    } else {
        ToolResult::err(format!("`{program}` exited with code {code}"), false)
    };
    if !status.success() {
        r.output = format!("exit code: {code}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
        r.metadata = json!({"exit_code": code});
    }
    r
}

fn read_capped<R: Read>(r: Option<&mut R>, cap: u64) -> String {
    let Some(r) = r else { return String::new() };
    let mut buf = Vec::new();
    let _ = r.take(cap).read_to_end(&mut buf);
    // Drain the rest so the child never blocks on a full pipe.
    let _ = std::io::copy(r, &mut std::io::sink());
    String::from_utf8_lossy(&buf).into_owned()
}

/// Programs that run whatever their arguments name.
const RUNNERS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "busybox", "env", "xargs", "nohup", "timeout", "nice",
    "ionice", "stdbuf", "setsid", "chroot", "sudo", "su", "doas", "watch", "strace", "ltrace", "time", "exec",
    "python", "python3", "perl", "ruby", "node", "php", "lua", "awk", "gawk", "mawk", "nawk", "ssh", "script", "flock",
    "parallel", "unshare", "nsenter", "chrt", "taskset",
];

/// Arguments that make an otherwise plain program run another one.
const RUNNER_ARGS: &[(&str, &[&str])] = &[
    ("find", &["-exec", "-execdir", "-ok", "-okdir"]),
    ("tar", &["--to-command", "--use-compress-program", "-I", "--checkpoint-action", "--info-script", "-F"]),
    ("rsync", &["-e", "--rsh", "--rsync-path"]),
    ("git", &["-c", "--exec-path", "--upload-pack", "--receive-pack", "--config-env"]),
    ("zip", &["-T", "-TT", "--unzip-command"]),
    ("make", &[]),
];

/// Why an argv could run another program, if it could.
pub fn exec_through(argv: &[String]) -> Option<String> {
    let prog = argv.first()?;
    let base = prog.rsplit('/').next().unwrap_or(prog);
    let base = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if RUNNERS.contains(&base) || RUNNERS.contains(&prog.as_str()) {
        return Some(format!("`{prog}` runs other programs"));
    }
    for (p, flags) in RUNNER_ARGS {
        if base == *p {
            if flags.is_empty() {
                return Some(format!("`{prog}` runs the commands of its input"));
            }
            if let Some(a) = argv[1..].iter().find(|a| flags.iter().any(|f| a == f || a.starts_with(&format!("{f}="))))
            {
                return Some(format!("`{prog} {a}` runs another program"));
            }
        }
    }
    None
}

/// Whether `argv` matches a pattern: words by spaces, `*` one argument, a final `**` the rest.
pub fn matches(pattern: &str, argv: &[String]) -> bool {
    let words: Vec<&str> = pattern.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        if *w == "**" && i + 1 == words.len() {
            return argv.len() >= i;
        }
        match argv.get(i) {
            Some(a) if *w == "*" || w == a => {}
            _ => return false,
        }
    }
    argv.len() == words.len()
}
