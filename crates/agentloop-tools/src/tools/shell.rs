//! The shell tool: off by default; runs one allowlisted program as an argv (never through a
//! shell string), in the workspace, inside an OS sandbox, with a timeout and an output cap.
//!
//! It cannot be talked around:
//! - the program runs inside bubblewrap (`tools.shell.sandbox: bwrap`, the default; see
//!   `bwrap.rs`): its own PID namespace and `/proc` (agentloop's environment is not there to
//!   read), no network unless `tools.shell.network`, a read-only filesystem except the folders
//!   file_write may write, agentloop's own files and every git repository in them read-only
//!   (`gitdirs.rs`; without the sandbox an argv naming a `.git` is refused, and repositories
//!   the program creates are removed after it either way), no new privileges. Without a
//!   working bwrap every call is refused, naming the fix, unless the user's config says
//!   `sandbox: none`;
//! - the environment is cleared to `tools.shell.env` (no provider keys reach the child), and no
//!   descriptor agentloop inherited reaches it (all are made close-on-exec first);
//! - a bare program name is found only in PATH's absolute folders, never in the workspace;
//! - programs that run other programs (shells, `env`, `xargs`, interpreters, editors, `sqlite3`,
//!   `find -exec`, `split --filter`, git beyond its reading subcommands, ...; see `argv.rs`) are
//!   refused even when allowlisted unless the whole argv matches a `tools.shell.patterns` entry
//!   (and with `sandbox: none` whatever the patterns say: nothing would contain them);
//!   `sed` runs with `--sandbox`, and git ignores the repository's fsmonitor, hooks and pager;
//! - the child runs in its own process group and the whole group is killed on timeout; inside
//!   the sandbox a child that left the group (`setsid -f`) ends with the sandbox's PID
//!   namespace when the program ends or is killed.

mod argv;
mod bwrap;
mod gitdirs;
mod policy;

pub use argv::{exec_through, matches};

use super::tool::{Call, Tool};
use super::{SideEffect, ToolEnv, ToolResult};
use agentloop_config::config::{Config, ShellSandbox};
use camino::Utf8Path;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// shell: runs one allowed program.
pub struct Shell;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellArgs {
    /// Program and arguments, e.g. ["wc", "-l", "artifacts/a.txt"]
    #[schemars(length(min = 1))]
    argv: Vec<String>,
    /// Text for the program's standard input
    stdin: Option<String>,
}

impl Tool for Shell {
    const NAME: &'static str = "shell";
    const SIDE_EFFECT: SideEffect = SideEffect::Exec;
    type Args = ShellArgs;
    fn description(cfg: &Config, _: &Utf8Path) -> String {
        let allow = &cfg.tools.shell.allow;
        format!(
            "Run one allowed program with arguments (argv, no shell) in the workspace; returns exit code, stdout and stderr. Allowed programs: {}.",
            if allow.is_empty() { "(none)".to_string() } else { allow.join(", ") }
        )
    }
    fn enabled(cfg: &Config) -> bool {
        cfg.tools.shell.enabled
    }
    fn timeout(cfg: &Config) -> Duration {
        cfg.tools.shell.timeout.0
    }
    fn run(call: &Call, args: ShellArgs) -> ToolResult {
        run(call.env, args, call.spec.timeout)
    }
}

fn run(env: &ToolEnv, args: ShellArgs, timeout: Duration) -> ToolResult {
    let cfg = &env.config.tools.shell;
    let Some(program) = args.argv.first().cloned() else {
        return ToolResult::err("argv is empty", false);
    };
    let Vetted { argv, child_env } = match vet(env, &program, args.argv) {
        Ok(v) => v,
        Err(refused) => return refused.into(),
    };
    let (mut cmd, sweep) = match sandboxed(cfg.sandbox, env, &argv) {
        Ok(v) => v,
        Err(refused) => return refused.into(),
    };
    cmd.env_clear().envs(child_env);
    let ran = match run_child(cmd, env, &program, args.stdin.unwrap_or_default(), cfg.max_output as u64, timeout) {
        Ok(ran) => ran,
        Err(failed) => return failed.into(),
    };
    let swept = sweep.as_ref().map(bwrap::Sweep::sweep).unwrap_or_default();
    report(&program, ran, &swept, timeout)
}

/// Why a call ends before the program ran to its end: the error the model reads, and whether
/// trying again may help (never after a refusal).
struct Stop {
    error: String,
    retryable: bool,
}

impl Stop {
    /// An error that trying the same call again would meet again.
    fn error(error: impl Into<String>) -> Stop {
        Stop { error: error.into(), retryable: false }
    }
}

impl From<Stop> for ToolResult {
    fn from(s: Stop) -> ToolResult {
        ToolResult::err(s.error, s.retryable)
    }
}

/// What may run: the argv, its program replaced by the file it runs, and the child's
/// environment.
struct Vetted {
    argv: Vec<String>,
    child_env: Vec<(String, String)>,
}

/// What may run, or the refusal. `program` is `argv[0]` as the call named it.
fn vet(env: &ToolEnv, program: &str, argv: Vec<String>) -> Result<Vetted, Stop> {
    let cfg = &env.config.tools.shell;
    if !cfg.allow.iter().any(|a| a == program) {
        return Err(Stop::error(format!("program `{program}` is not in tools.shell.allow ({})", cfg.allow.join(", "))));
    }
    // A bare name runs what an absolute folder of PATH holds, never a file of that name in the
    // workspace (an empty entry, `.` or a relative folder); a path (`./tool`) is allowlisted as one.
    let exe =
        if program.contains('/') { Some(program.to_string()) } else { argv::lookup(program).map(|p| p.into_string()) };
    let names = argv::names(program, &crate::tools::sandbox::absolute(env.root));
    let is_git = names.iter().any(|n| n == "git");
    let mut child_env: Vec<(String, String)> =
        cfg.env.iter().filter_map(|k| std::env::var(k).ok().map(|v| (k.clone(), v))).collect();
    if is_git {
        child_env.extend(argv::git_env());
    }
    let git = exe.as_deref().filter(|_| is_git);
    let mut argv = permitted(env, program, argv, &names, git, &child_env)?;
    let Some(exe) = exe else {
        return Err(Stop::error(format!(
            "`{program}` is not installed: no absolute folder of PATH holds it (empty, `.` and relative PATH entries are not searched); install it or remove it from tools.shell.allow"
        )));
    };
    argv[0] = exe;
    Ok(Vetted { argv, child_env })
}

/// The argv as it may run, or the refusal: an argv matching a `tools.shell.patterns` entry runs
/// as written (inside the OS sandbox); otherwise a code runner, a program made to run another
/// and git in a repository not to be trusted are refused, and anything else runs defanged.
/// `git` is the git executable when the program is git.
fn permitted(
    env: &ToolEnv,
    program: &str,
    argv: Vec<String>,
    names: &[String],
    git: Option<&str>,
    child_env: &[(String, String)],
) -> Result<Vec<String>, Stop> {
    let cfg = &env.config.tools.shell;
    // Without the OS sandbox nothing contains a program that runs another: no pattern allows one.
    let unsandboxed = matches!(cfg.sandbox, ShellSandbox::None);
    let patterned = cfg.patterns.iter().any(|p| matches(p, &argv));
    let fix = if unsandboxed {
        "without the OS sandbox (`sandbox: none`) no tools.shell.patterns entry can allow it; install bubblewrap to allow it by a pattern"
    } else {
        "allow this exact command with a tools.shell.patterns entry"
    };
    // Programs that can run code the workspace holds are refused whole, however their
    // options are spelled, unless the user names them (and the OS sandbox contains them).
    let runner = policy::judge(names).filter(|_| unsandboxed || !cfg.code_runners.iter().any(|c| c == program));
    if patterned && !unsandboxed {
        return Ok(argv);
    }
    if let Some((key, kind)) = runner {
        return Err(code_runner_refusal(program, &key, kind, unsandboxed));
    }
    if let Some(why) = exec_through(&argv, names) {
        return Err(Stop::error(format!("refused: {why}; {fix}")));
    }
    if let Some(why) = git.and_then(|git| argv::git_repo(Utf8Path::new(git), env.root, &argv, child_env)) {
        return Err(Stop::error(format!("refused: {why}; {fix} if you trust that repository")));
    }
    Ok(if patterned { argv } else { argv::defang(&argv, names) })
}

/// The refusal of a program that can run code the workspace holds, saying how the user (never
/// the workspace) may allow it.
fn code_runner_refusal(program: &str, key: &str, kind: policy::Kind, unsandboxed: bool) -> Stop {
    let named = if key == base_name(program) { String::new() } else { format!(" ({key})") };
    let allow = if unsandboxed {
        "without the OS sandbox (`sandbox: none`) neither tools.shell.code_runners nor tools.shell.patterns can allow it; install bubblewrap to allow it".to_string()
    } else {
        format!(
            "to allow it, list `{program}` in tools.shell.code_runners in your own config (~/.config/agentloop/config.yaml), or this exact command in tools.shell.patterns"
        )
    };
    Stop::error(format!(
        "refused: `{program}`{named} is {}, so it can run code the workspace holds; {allow}",
        kind.says()
    ))
}

/// The command that runs `argv` under `sandbox`, and the sweep that removes what the program
/// may not create; or the refusal.
fn sandboxed(sandbox: ShellSandbox, env: &ToolEnv, argv: &[String]) -> Result<(Command, Option<bwrap::Sweep>), Stop> {
    match sandbox {
        ShellSandbox::Bwrap => match bwrap::available().and_then(|bw| bwrap::command(&bw, env, argv)) {
            Ok((cmd, sweep)) => Ok((cmd, Some(sweep))),
            Err(e) => Err(Stop::error(e.detail())),
        },
        ShellSandbox::None => {
            // Nothing makes a repository read-only: an argv that names one is refused (what
            // the program creates is still removed after it).
            if let Some(a) = argv[1..].iter().find(|a| gitdirs::names_git(a)) {
                return Err(Stop::error(format!(
                    "refused: `{a}` names a git repository's files, which without the OS sandbox (`sandbox: none`) nothing keeps read-only (git runs what they name); install bubblewrap to let the program read them"
                )));
            }
            let sweep = bwrap::Sweep::unsandboxed(env).map_err(|e| Stop::error(e.detail()))?;
            let mut cmd = Command::new(&argv[0]);
            cmd.args(&argv[1..]);
            Ok((cmd, Some(sweep)))
        }
    }
}

/// What a program left: its exit status (None when the timeout killed it) and its output,
/// each stream capped.
struct Ran {
    status: Option<std::process::ExitStatus>,
    stdout: String,
    stderr: String,
}

/// Runs the command in the workspace in its own process group, fed `stdin`, until it ends or
/// `timeout` passes; then the whole group is killed.
fn run_child(
    mut cmd: Command,
    env: &ToolEnv,
    program: &str,
    stdin: String,
    cap: u64,
    timeout: Duration,
) -> Result<Ran, Stop> {
    // Descriptors agentloop inherited without close-on-exec (a caller's `9>>file`) would pass
    // through bwrap into the program; agentloop's own are opened close-on-exec already.
    close_fds::set_fds_cloexec_threadsafe(3, &[]);
    let mut child = match cmd
        .process_group(0)
        .current_dir(env.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Err(Stop::error(format!("cannot start `{program}`: {e}"))),
    };
    // Ctrl-C reaches only agentloop's own group: the watcher ends this one too.
    let group = child.id();
    crate::interrupt::register(group);
    let mut pipe = child.stdin.take();
    std::thread::spawn(move || {
        if let Some(s) = pipe.as_mut() {
            let _ = s.write_all(stdin.as_bytes());
        }
    });
    let (out_tx, out_rx) = mpsc::channel();
    let (err_tx, err_rx) = mpsc::channel();
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    std::thread::spawn(move || out_tx.send(read_capped(out.as_mut(), cap)));
    std::thread::spawn(move || err_tx.send(read_capped(err.as_mut(), cap)));
    let start = Instant::now();
    let status = match wait_or_kill(&mut child, start, timeout) {
        Ok(status) => status,
        Err(e) => {
            crate::interrupt::unregister(group);
            return Err(Stop { error: format!("waiting for `{program}` failed: {e}"), retryable: true });
        }
    };
    // Whatever the program left running in its group (`cmd &`) ends with it.
    let _ =
        rustix::process::kill_process_group(rustix::process::Pid::from_child(&child), rustix::process::Signal::KILL);
    crate::interrupt::unregister(group);
    // Without the sandbox a child that left the group can hold the pipes open: the output is
    // awaited no longer than the timeout allows.
    let left = timeout.saturating_sub(start.elapsed()).max(Duration::from_millis(200));
    let stdout = out_rx.recv_timeout(left).unwrap_or_default();
    let stderr = err_rx
        .recv_timeout(Duration::from_millis(200).max(timeout.saturating_sub(start.elapsed())))
        .unwrap_or_default();
    Ok(Ran { status, stdout, stderr })
}

/// The child's exit status, or None once `timeout` from `start` has passed and the child was
/// killed; killed too when waiting fails.
fn wait_or_kill(
    child: &mut std::process::Child,
    start: Instant,
    timeout: Duration,
) -> std::io::Result<Option<std::process::ExitStatus>> {
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Ok(Some(s)),
            Ok(None) if start.elapsed() >= timeout => {
                kill_group(child);
                return Ok(None);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                kill_group(child);
                return Err(e);
            }
        }
    }
}

/// Kills the child's whole group: a grandchild (`find -exec sleep`) must not outlive the call.
/// Killing bwrap ends the sandbox's PID namespace, and so whatever left the group inside it.
fn kill_group(child: &mut std::process::Child) {
    let pgid = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    let _ = child.kill();
    let _ = child.wait();
}

/// The result the model reads: the exit code and both streams, and what agentloop removed
/// after the program; a non-zero exit is an error carrying the same text.
fn report(program: &str, ran: Ran, swept: &[String], timeout: Duration) -> ToolResult {
    let Some(status) = ran.status else {
        return ToolResult::err(format!("`{program}` timed out after {}s and was killed", timeout.as_secs()), true);
    };
    let code = status.code().unwrap_or(-1);
    let mut text = format!("exit code: {code}\n--- stdout ---\n{}\n--- stderr ---\n{}", ran.stdout, ran.stderr);
    if !swept.is_empty() {
        text.push_str(&format!(
            "\n--- agentloop ---\nremoved {}: agentloop's own files and git repositories are not a program's to create",
            swept.join(", ")
        ));
    }
    if status.success() {
        ToolResult::ok(text, json!({"exit_code": code}))
    } else {
        let mut r = ToolResult::err(format!("`{program}` exited with code {code}"), false);
        r.output = text;
        r.metadata = json!({"exit_code": code});
        r
    }
}

/// A program's file name, as a refusal names it.
fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

fn read_capped<R: Read>(r: Option<&mut R>, cap: u64) -> String {
    let Some(r) = r else { return String::new() };
    let mut buf = Vec::new();
    let _ = r.take(cap).read_to_end(&mut buf);
    // Drain the rest so the child never blocks on a full pipe.
    let _ = std::io::copy(r, &mut std::io::sink());
    String::from_utf8_lossy(&buf).into_owned()
}
