//! The shell tool's OS sandbox: bubblewrap (`bwrap`) around the program.
//!
//! Inside: a fresh PID namespace with its own `/proc` (agentloop's process and its environment
//! are not there to read), no network unless `tools.shell.network` (nor the daemons' sockets
//! under `/run`, nor a listening unix socket anywhere else it can see), the whole filesystem
//! read-only except the folders file_write may write (and a private `/tmp`), agentloop's own
//! files at the workspace's top level (the paper trail, its config, `.agentloop*`, `runs/`,
//! `.git`) and every git repository at any depth of the write folders (see `gitdirs.rs`)
//! read-only even there, agentloop's stores of tokens (`serve-token`, `mcp-auth/`) empty, no
//! capabilities and no new privileges (bwrap sets `PR_SET_NO_NEW_PRIVS`), a session of its own
//! (no terminal to inject into).
//!
//! Ending: bwrap's first process is PID 1 of the namespace; when it ends, the kernel ends every
//! other process there, so a child that left the process group (`setsid -f`) goes too. With
//! `--die-with-parent` that PID 1 also ends when bwrap is killed (timeout, Ctrl-C).
//!
//! Whether bwrap works is probed once per process: it can be missing, or unable to create
//! namespaces (a container without user namespaces).

use super::gitdirs;
use crate::tools::sandbox::{Access, Sandbox};
use crate::tools::ToolEnv;
use agentloop_types::error::Error;
use camino::{Utf8Path, Utf8PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Flags every sandbox gets (the probe uses them too, so a working probe means they work).
const BASE: &[&str] = &[
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
];

/// Top-level names in the workspace that belong to agentloop or decide what it does next —
/// the file tools' paper trail and config, and these — read-only inside the sandbox when they
/// exist, removed after the call when the program created them.
const OWN: &[&str] = &[
    ".git",
    ".agentloop",
    ".agentloop.lock",
    ".agentloop.journal.json",
    ".agentloop.archive.json",
    ".agentloop.spare",
];

/// A working bwrap: its path and whether `--cap-drop ALL` is accepted.
#[derive(Clone)]
pub struct Bwrap {
    path: Utf8PathBuf,
    cap_drop: bool,
}

/// A working bwrap, or why there is none (with the fix). Probed once per process.
pub fn available() -> Result<Bwrap, Error> {
    static PROBE: OnceLock<Result<Bwrap, Error>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

fn probe() -> Result<Bwrap, Error> {
    let fix = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or, to run the shell tool \
               without an OS sandbox, set `sandbox: none` in your own config (~/.config/agentloop/config.yaml)";
    let Some(path) = find() else {
        return Err(Error::tool(format!(
            "the shell tool runs programs inside bubblewrap (bwrap), which is not installed; {fix}"
        )));
    };
    let run = |cap_drop: bool| {
        let mut c = Command::new(&path);
        c.args(BASE).arg("--unshare-net");
        if cap_drop {
            c.args(["--cap-drop", "ALL"]);
        }
        c.args(["--", "true"]).env_clear().stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        c.output()
    };
    match run(true) {
        Ok(o) if o.status.success() => Ok(Bwrap { path, cap_drop: true }),
        _ => match run(false) {
            Ok(o) if o.status.success() => Ok(Bwrap { path, cap_drop: false }),
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr);
                let why = why.lines().next().unwrap_or("no message").trim();
                Err(Error::tool(format!("the shell tool's sandbox cannot start: {path} fails here ({why}; user namespaces may be off); {fix}")))
            }
            Err(e) => Err(Error::tool(format!("the shell tool's sandbox cannot start: {path}: {e}; {fix}"))),
        },
    }
}

/// bwrap as PATH finds it (absolute folders only: a relative one would be the workspace's).
fn find() -> Option<Utf8PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':').filter(|d| d.starts_with('/')).map(|d| Utf8Path::new(d).join("bwrap")).find(|p| p.is_file())
}

/// The workspace's own names that did not exist before the program ran, and the git
/// repositories that did (to remove what the program creates).
pub struct Sweep {
    missing: Vec<Utf8PathBuf>,
    ws: Utf8PathBuf,
    roots: Vec<Utf8PathBuf>,
    git: gitdirs::Found,
}

impl Sweep {
    /// Without the OS sandbox: nothing is made read-only, but the repositories the program
    /// creates in the write folders are still removed after it.
    pub fn unsandboxed(env: &ToolEnv) -> Result<Sweep, Error> {
        let (ws, roots) = write_roots(env)?;
        let git = gitdirs::scan(&roots).map_err(|e| Error::tool(format!("refused: {e}")))?;
        Ok(Sweep { missing: vec![], ws, roots, git })
    }

    /// After the program ended: removes agentloop's names the program created in the workspace
    /// (a `state.json`, `.agentloop.journal.json` or `agentloop.yaml` of its own) and the git
    /// repositories it created at any depth of the write folders, and says which.
    pub fn sweep(&self) -> Vec<String> {
        let mut removed = gitdirs::sweep_new(&self.git, &self.roots, &self.ws);
        for p in &self.missing {
            let Ok(m) = std::fs::symlink_metadata(p) else { continue };
            let gone = if m.is_dir() { std::fs::remove_dir_all(p) } else { std::fs::remove_file(p) };
            if gone.is_ok() {
                removed.push(p.file_name().unwrap_or_default().to_string());
            }
        }
        removed
    }
}

/// Builds the bwrap command for `argv`, and what to sweep after it.
pub fn command(bw: &Bwrap, env: &ToolEnv, argv: &[String]) -> Result<(Command, Sweep), Error> {
    let cfg = &env.config.tools;
    let (ws, writable) = write_roots(env)?;
    let git = gitdirs::scan(&writable).map_err(|e| Error::tool(format!("refused: {e}")))?;
    let roots = writable.clone();
    let mounts = mounts(&cfg.read_paths, &ws, writable);
    let mut cmd = Command::new(&bw.path);
    cmd.args(BASE);
    if !cfg.shell.network {
        cmd.arg("--unshare-net");
        // Sockets of the system's daemons (docker, dbus, the user's session) live under /run:
        // a network namespace does not cover sockets that are files.
        if Utf8Path::new("/run").is_dir() {
            cmd.args(["--tmpfs", "/run"]);
        }
    }
    if bw.cap_drop {
        cmd.args(["--cap-drop", "ALL"]);
    }
    for (p, rw) in &mounts {
        cmd.args([if *rw { "--bind" } else { "--ro-bind" }, p.as_str(), p.as_str()]);
    }
    let missing = bind_own_read_only(&mut cmd, &ws, own_names(env, &ws));
    // Every git repository the program could write, at any depth: read-only.
    for p in &git.protect {
        cmd.args(["--ro-bind", p.as_str(), p.as_str()]);
    }
    hide_token_stores(&mut cmd, &mounts);
    if !cfg.shell.network {
        // Last, so no folder bound after it uncovers one.
        for socket in sockets(&mounts) {
            cmd.args(["--ro-bind", "/dev/null"]).arg(socket);
        }
    }
    cmd.args(["--chdir", ws.as_str(), "--"]).args(argv);
    Ok((cmd, Sweep { missing, ws, roots, git }))
}

/// The folders bound, each with whether it is writable: read-only first (the workspace and the
/// read folders, which may lie under the private /tmp), then the write folders, parents before
/// children so none hides another.
fn mounts(read_paths: &[Utf8PathBuf], ws: &Utf8Path, writable: Vec<Utf8PathBuf>) -> Vec<(Utf8PathBuf, bool)> {
    let mut mounts: Vec<(Utf8PathBuf, bool)> = vec![(ws.to_path_buf(), false)];
    for p in read_paths {
        if let Ok(real) = crate::tools::sandbox::normalize(&ws.join(p)).canonicalize_utf8() {
            if !writable.iter().any(|w| real.starts_with(w)) {
                mounts.push((real, false));
            }
        }
    }
    mounts.extend(writable.into_iter().map(|w| (w, true)));
    mounts.sort_by_key(|(p, rw)| (p.components().count(), *rw));
    mounts
}

/// agentloop's own names at the workspace's top: the paper trail, the config files and
/// folders, the handle's runs folder, and every `.agentloop*` there is.
fn own_names(env: &ToolEnv, ws: &Utf8Path) -> Vec<String> {
    use crate::tools::sandbox::{CONFIG_DIRS, CONFIG_FILES, PAPER_TRAIL};
    let mut own: Vec<String> =
        PAPER_TRAIL.iter().chain(CONFIG_FILES).chain(CONFIG_DIRS).chain(OWN).map(|s| s.to_string()).collect();
    if !env.config.handle.runs_dir.is_empty() {
        own.push(env.config.handle.runs_dir.clone());
    }
    if let Ok(rd) = std::fs::read_dir(ws) {
        let found: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with(".agentloop") && !own.contains(n))
            .collect();
        own.extend(found);
    }
    own
}

/// Binds each of the workspace's `own` names that exists read-only over itself; the ones that
/// do not exist yet, to be swept after the program if it creates them.
fn bind_own_read_only(cmd: &mut Command, ws: &Utf8Path, own: Vec<String>) -> Vec<Utf8PathBuf> {
    let mut missing = Vec::new();
    for name in own {
        let p = ws.join(&name);
        match std::fs::symlink_metadata(&p) {
            // A link is left alone: binding it would bind whatever it points at.
            Ok(m) if m.file_type().is_symlink() => {}
            Ok(_) => {
                cmd.args(["--ro-bind", p.as_str(), p.as_str()]);
            }
            Err(_) => missing.push(p),
        }
    }
    missing
}

/// agentloop's stores of tokens (serve's, MCP sign-ins) are empty inside, after every bind so
/// none uncovers them; one under the private /tmp is not there anyway unless bound.
fn hide_token_stores(cmd: &mut Command, mounts: &[(Utf8PathBuf, bool)]) {
    for store in &crate::held_secrets::Stores::load().paths {
        if store.starts_with("/tmp") && !mounts.iter().any(|(m, _)| store.starts_with(m)) {
            continue;
        }
        if store.is_dir() {
            cmd.args(["--tmpfs", store.as_str()]);
        } else {
            cmd.args(["--ro-bind", "/dev/null", store.as_str()]);
        }
    }
}

/// The workspace's real path and the real paths of the folders the program may write.
fn write_roots(env: &ToolEnv) -> Result<(Utf8PathBuf, Vec<Utf8PathBuf>), Error> {
    let ws = crate::tools::sandbox::absolute(env.root)
        .canonicalize_utf8()
        .map_err(|e| Error::tool(format!("cannot open the workspace {}: {e}", env.root)).with_source(e))?;
    let writable = Sandbox::open(env, Access::Write)?.roots.iter().map(|r| r.real.clone()).collect();
    Ok((ws, writable))
}

/// The unix sockets the sandbox could reach by path (a docker or gpg-agent socket under your
/// home, in a read folder): a network namespace covers abstract sockets, not sockets that are
/// files. They are the ones bound in agentloop's network namespace, as the kernel lists them
/// (`/proc/net/unix`), at their real locations, less those under `/run` and the private `/tmp`
/// (hidden anyway). Each gets `/dev/null` bound over it, so a connect is refused.
fn sockets(mounts: &[(Utf8PathBuf, bool)]) -> Vec<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileTypeExt;
    use std::path::Path;
    let table =
        agentloop_io::fs::read_bytes_optional(Utf8Path::new("/proc/net/unix")).ok().flatten().unwrap_or_default();
    let mut found = Vec::new();
    // Each line: slot, refcount, protocol, flags, type, state, inode, then the path it was bound
    // to, if any (`@` for an abstract name, relative as the binder spelled it). Only the path
    // holds a `/`; it is bytes, not always UTF-8.
    for line in table.split(|b| *b == b'\n').skip(1) {
        let Some(at) = line.windows(2).position(|w| w == b" /") else { continue };
        let path = Path::new(std::ffi::OsStr::from_bytes(&line[at + 1..]));
        let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { continue };
        let Ok(real) = parent.canonicalize().map(|p| p.join(name)) else { continue };
        let hidden = ["/run", "/proc", "/dev"].iter().any(|h| real.starts_with(h))
            || real.starts_with("/tmp") && !mounts.iter().any(|(m, _)| real.starts_with(m));
        if is_socket && !hidden && !found.contains(&real) {
            found.push(real);
        }
    }
    found
}
