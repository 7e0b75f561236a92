//! The shell tool: off by default; runs one allowlisted program as an argv (never through a
//! shell string), in the workspace, with a timeout (the child is killed) and an output cap.

use super::{ToolEnv, ToolResult};
use serde_json::{json, Value};
use std::io::{Read, Write};
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
    let mut child = match Command::new(program)
        .args(&argv[1..])
        .current_dir(env.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return ToolResult::err(format!("cannot start `{program}`: {e}"), false),
    };
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
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return ToolResult::err(format!("waiting for `{program}` failed: {e}"), true),
        }
    };
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
