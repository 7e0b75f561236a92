//! The shell tool's argv checks: which allowlisted argvs could run another program (and so are
//! refused unless a `tools.shell.patterns` entry names them), and how a few programs are run
//! defanged instead (`sed --sandbox`, git without its configurable commands).
//!
//! These checks are the second layer: the OS sandbox (see `bwrap.rs`) is what contains a
//! program that gets past them. They judge the program by the name it is called by and by the
//! file that name resolves to (a link or copy named `ls` that is really `bash` is `bash`).

use camino::{Utf8Path, Utf8PathBuf};

/// Programs that run whatever their arguments or their input name: shells, exec wrappers,
/// interpreters, debuggers, editors and pagers with a `!command`, database shells with
/// `.shell`, and build tools that run a project's own code.
#[rustfmt::skip]
const RUNNERS: &[&str] = &[
    // shells and multi-call binaries
    "sh", "bash", "rbash", "zsh", "dash", "ash", "ksh", "mksh", "pdksh", "yash", "fish", "csh", "tcsh", "rc", "es",
    "elvish", "nu", "xonsh", "busybox", "toybox", "exec",
    // wrappers that exec their arguments
    "env", "xargs", "nohup", "timeout", "time", "nice", "ionice", "stdbuf", "setsid", "chroot", "sudo", "su", "doas",
    "pkexec", "runuser", "setpriv", "prlimit", "capsh", "chpst", "cgexec", "systemd-run", "flatpak-spawn", "firejail",
    "bwrap", "proot", "fakeroot", "fakechroot", "faketime", "unshare", "nsenter", "chrt", "taskset", "numactl",
    "watch", "strace", "ltrace", "valgrind", "perf", "gdb", "lldb", "rlwrap", "unbuffer", "expect", "script", "flock",
    "parallel", "tmux", "screen", "dtach", "catchsegv", "socat", "nc", "ncat", "netcat", "ssh", "scp", "sftp",
    "telnet", "setarch", "linux32", "linux64", "i386", "x86_64", "uname26", "run-parts", "start-stop-daemon",
    "ssh-agent", "dbus-run-session", "dbus-launch", "sg", "newgrp", "xvfb-run", "torsocks", "torify", "proxychains",
    "cpulimit", "trickle", "schedtool", "chronic", "ifne", "pee", "vipe", "entr", "msgfilter", "tcc", "dc",
    "mail", "mailx", "s-nail", "mutt", "ftp", "lftp", "gpg", "sensible-editor", "sensible-pager", "editor", "pager",
    "vimtutor", "gnuplot", "octave", "duckdb", "hg",
    // interpreters
    "python", "pypy", "perl", "ruby", "irb", "node", "nodejs", "deno", "bun", "php", "lua", "luajit", "tclsh", "wish",
    "jimsh", "R", "Rscript", "julia", "guile", "racket", "sbcl", "clisp", "ocaml", "ghci", "runghc", "pwsh", "java",
    "jshell", "groovy", "scala", "kotlin", "dotnet", "mono", "awk", "gawk", "mawk", "nawk",
    // editors, pagers and database shells with a `!command` or `.shell`
    "vi", "vim", "nvim", "view", "vimdiff", "rvim", "ex", "ed", "red", "emacs", "nano", "pico", "joe", "mg", "less",
    "more", "most", "pg", "man", "sqlite", "psql", "mysql", "mariadb",
    // build tools and package managers: they run the project's own scripts
    "make", "gmake", "cmake", "ninja", "meson", "just", "cargo", "npm", "npx", "yarn", "pnpm", "pip", "pipx", "uv",
    "uvx", "poetry", "go", "gradle", "mvn", "ant", "rake", "bundle", "gem", "apt", "apt-get", "aptitude", "dpkg",
];

/// Options that make an otherwise plain program run another one: the programs, the options,
/// and whether the program's one-letter options cluster (`-avze ssh` holds `-e`).
const RUNNER_ARGS: &[(&[&str], &[&str], bool)] = &[
    (&["find"], &["-exec", "-execdir", "-ok", "-okdir"], false),
    (&["tar"], &["--to-command", "--use-compress-program", "-I", "--checkpoint-action", "--info-script", "-F"], true),
    (&["rsync"], &["-e", "--rsh", "--rsync-path"], true),
    (&["zip"], &["-T", "-TT", "--unzip-command"], true),
    (&["sort"], &["--compress-program"], false),
    (&["split"], &["--filter"], false),
    (&["sdiff", "diff3"], &["--diff-program"], false),
    (&["wget"], &["--use-askpass", "-e", "--execute", "--config"], true),
    (&["groff", "troff", "nroff"], &["-U"], true),
    (&["gcc", "g++", "cc", "c++", "clang", "clang++"], &["-wrapper", "-B", "-fplugin", "-specs", "--specs"], false),
];

/// git subcommands that only read. Anything else (an alias, `config`, `submodule foreach`,
/// hooks) is refused unless a pattern names the argv.
const GIT_READ: &[&str] = &[
    "status",
    "log",
    "show",
    "diff",
    "blame",
    "grep",
    "ls-files",
    "ls-tree",
    "rev-parse",
    "rev-list",
    "cat-file",
    "describe",
    "shortlog",
    "version",
];
/// git's options that take their value as the next argument.
const GIT_VALUE_OPTS: &[&str] = &["-C", "--git-dir", "--work-tree", "--namespace"];
/// git's options that make it run a program or read config from elsewhere.
const GIT_EXEC_OPTS: &[&str] = &["-c", "--exec-path", "--upload-pack", "--receive-pack", "--config-env"];
/// Options of the reading subcommands that run a program (an external diff, a pager).
const GIT_SUB_EXEC_OPTS: &[&str] = &["--ext-diff", "-O", "--open-files-in-pager", "--textconv"];

/// What the program's name reduces to: the file name, without a version suffix (`python3.12`).
fn base(prog: &str) -> &str {
    let name = prog.rsplit('/').next().unwrap_or(prog);
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
}

/// A name's stem before a dotted suffix, when it has one: Debian's alternatives end in files
/// such as `vim.basic`, `vim.tiny` or `python3.12-dbg`, which are `vim` and `python`.
fn stem(name: &str) -> Option<String> {
    let (head, _) = name.split_once('.')?;
    let head = head.trim_end_matches(|c: char| c.is_ascii_digit());
    (!head.is_empty() && head != "ld").then(|| head.to_string())
}

/// The names an argv's program goes by: as called, and the file it resolves to when that is
/// another name (each also by its stem: `vim.basic` is `vim`). A multi-call binary (busybox)
/// dispatches on the name it is called by, so then the called name is what runs.
pub fn names(prog: &str, cwd: &Utf8Path) -> Vec<String> {
    let mut out = vec![base(prog).to_string()];
    if let Some(real) = resolve(prog, cwd) {
        let b = base(real.as_str()).to_string();
        let multi_call = ["busybox", "toybox"].contains(&b.as_str());
        if !(out.contains(&b) || multi_call && out[0] != b) {
            out.push(b);
        }
    }
    // Names that end in digits are listed whole too (`linux64`, `x86_64`, `i386`).
    let whole = prog.rsplit('/').next().unwrap_or(prog).to_string();
    for s in out.clone().iter().filter_map(|n| stem(n)).chain([whole]) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The real file `prog` runs: a path is taken from `cwd`, a bare name is looked up in PATH.
fn resolve(prog: &str, cwd: &Utf8Path) -> Option<Utf8PathBuf> {
    let candidates: Vec<Utf8PathBuf> = if prog.contains('/') {
        vec![cwd.join(prog)]
    } else {
        let path = std::env::var("PATH").unwrap_or_default();
        path.split(':').filter(|d| !d.is_empty()).map(|d| cwd.join(d).join(prog)).collect()
    };
    candidates.into_iter().find(|c| c.is_file()).and_then(|c| c.canonicalize_utf8().ok())
}

/// Why an argv could run another program, if it could. `names` are the program's names, as
/// `names()` gives them.
pub fn exec_through(argv: &[String], names: &[String]) -> Option<String> {
    let prog = argv.first()?;
    let args = &argv[1..];
    for name in names {
        let n = name.as_str();
        if RUNNERS.contains(&n) || n.starts_with("ld-linux") || n.starts_with("ld-musl") || n == "ld.so" {
            return Some(format!("`{prog}` runs other programs"));
        }
        for (progs, flags, clusters) in RUNNER_ARGS {
            if !progs.contains(&n) {
                continue;
            }
            if let Some(a) = args.iter().find(|a| has_flag(a, flags, *clusters)) {
                return Some(format!("`{prog} {a}` runs another program"));
            }
        }
        if n == "git" {
            if let Some(why) = git(prog, args) {
                return Some(why);
            }
        }
    }
    None
}

/// Whether `a` is one of `flags` (also `--flag=value`, `-Xvalue`, and inside a cluster of
/// one-letter options when the program clusters them).
fn has_flag(a: &str, flags: &[&str], clusters: bool) -> bool {
    flags.iter().any(|f| {
        if a == *f || a.starts_with(&format!("{f}=")) {
            return true;
        }
        let short = f.len() == 2 && !f.starts_with("--");
        if short && a.starts_with(f) && !a.starts_with("--") {
            return true;
        }
        short && clusters && a.starts_with('-') && !a.starts_with("--") && a[1..].contains(&f[1..])
    })
}

/// Why a git argv could run a program: an option that does, or a subcommand that is not one of
/// the reading ones (aliases, `config`, `submodule foreach`, hooks).
fn git(prog: &str, args: &[String]) -> Option<String> {
    if let Some(a) = args[..git_sub(args)]
        .iter()
        .find(|a| GIT_EXEC_OPTS.iter().any(|f| a == f || a.starts_with(&format!("{f}="))) || a.starts_with("-c"))
    {
        return Some(format!("`{prog} {a}` runs a program or reads configuration from elsewhere"));
    }
    let i = git_sub(args);
    let sub = args.get(i)?;
    if !GIT_READ.contains(&sub.as_str()) {
        return Some(format!(
            "`{prog} {sub}` is not one of git's reading subcommands ({}); others can run hooks, aliases or configured commands",
            GIT_READ.join(", ")
        ));
    }
    if let Some(a) = args[i + 1..].iter().find(|a| has_flag(a, GIT_SUB_EXEC_OPTS, false)) {
        return Some(format!("`{prog} {sub} {a}` runs another program"));
    }
    None
}

/// Why git in the repository at `root` (or `-C DIR` below it) could run a program its own
/// configuration names: a filter (`status` runs its clean command), a diff textconv or command
/// (`blame`, `log -p`), a merge driver, or an include that could hide one; or a `.git` file
/// pointing at a repository elsewhere. The environment (`git_env`) cannot switch these off by
/// name, and a workspace from elsewhere chooses them.
pub fn git_repo(root: &Utf8Path, argv: &[String]) -> Option<String> {
    let args = &argv[1..];
    let mut dir = root.to_path_buf();
    let mut i = 0;
    while i < git_sub(args) {
        match args[i].as_str() {
            "-C" => {
                dir = dir.join(args.get(i + 1)?);
                i += 1;
            }
            "--git-dir" | "--work-tree" => return Some(format!("`git {}` names a repository elsewhere", args[i])),
            a if a.starts_with("--git-dir=") || a.starts_with("--work-tree=") => {
                return Some(format!("`git {a}` names a repository elsewhere"))
            }
            _ => {}
        }
        i += 1;
    }
    let dot = dir.join(".git");
    let meta = std::fs::symlink_metadata(&dot).ok()?;
    if !meta.is_dir() {
        return Some(format!("{dot} is not a folder: it points git at a repository elsewhere"));
    }
    let text = crate::fs::read_optional(&dot.join("config")).ok().flatten().unwrap_or_default();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if let Some(head) = line.strip_prefix('[') {
            section = head.split([' ', ']', '"']).next().unwrap_or("").to_ascii_lowercase();
            if section == "filter" || section.starts_with("include") {
                return Some(format!("{dot}/config has a [{section}] section, which can make git run a program"));
            }
            continue;
        }
        let key = line.split(['=', ' ']).next().unwrap_or("").to_ascii_lowercase();
        if matches!((section.as_str(), key.as_str()), ("diff", "textconv" | "command") | ("merge", "driver")) {
            return Some(format!("{dot}/config sets {section}.*.{key}, a program git would run"));
        }
    }
    None
}

/// Where git's subcommand is in its arguments (past the global options and their values);
/// `args.len()` when there is none.
fn git_sub(args: &[String]) -> usize {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if !a.starts_with('-') {
            break;
        }
        i += if GIT_VALUE_OPTS.contains(&a.as_str()) { 2 } else { 1 };
    }
    i.min(args.len())
}

/// The argv actually run when no pattern names it: `sed` gets `--sandbox` (GNU sed then refuses
/// its `e`, `r` and `w` commands and the `s///e` flag), git's diffing subcommands get
/// `--no-ext-diff --no-textconv`.
pub fn defang(argv: &[String], names: &[String]) -> Vec<String> {
    let mut out = argv.to_vec();
    if names.iter().any(|n| n == "sed") && !argv.iter().any(|a| a == "--sandbox") {
        out.insert(1, "--sandbox".into());
    }
    if names.iter().any(|n| n == "git") {
        let i = 1 + git_sub(&argv[1..]);
        if argv.get(i).is_some_and(|s| ["diff", "log", "show"].contains(&s.as_str())) {
            out.splice(i + 1..i + 1, ["--no-ext-diff".to_string(), "--no-textconv".to_string()]);
        }
    }
    out
}

/// Configuration git reads from its environment ahead of the repository's own: a workspace's
/// `.git/config` cannot name an fsmonitor, hooks, a pager or an ssh command to run.
pub fn git_env() -> Vec<(String, String)> {
    let pairs = [
        ("core.fsmonitor", "false"),
        ("core.hooksPath", "/dev/null"),
        ("core.pager", "cat"),
        ("core.sshCommand", "false"),
        ("core.editor", "false"),
        ("credential.helper", ""),
        ("protocol.allow", "never"),
    ];
    let mut env = vec![("GIT_CONFIG_COUNT".to_string(), pairs.len().to_string())];
    for (i, (k, v)) in pairs.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}"), k.to_string()));
        env.push((format!("GIT_CONFIG_VALUE_{i}"), v.to_string()));
    }
    env.push(("GIT_CONFIG_NOSYSTEM".into(), "1".into()));
    env.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
    env
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

#[cfg(test)]
mod tests {
    use super::*;

    fn why(argv: &[&str]) -> Option<String> {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let whole = argv[0].rsplit('/').next().unwrap().to_string();
        exec_through(&argv, &[base(&argv[0]).to_string(), whole])
    }

    #[test]
    fn programs_that_run_programs_are_named() {
        for argv in [
            &["sqlite3", "db"][..],
            &["gdb", "-batch"],
            &["vim", "-c", ":!id"],
            &["ed"],
            &["tclsh8.6"],
            &["prlimit", "id"],
            &["setpriv", "id"],
            &["runuser", "-u", "x", "id"],
            &["nodejs", "-e", "1"],
            &["/usr/bin/../bin/python3.12", "-c", "1"],
            &["lua5.4"],
            &["/lib64/ld-linux-x86-64.so.2", "/bin/sh"],
            &["split", "--filter=sh", "f"],
            &["sort", "--compress-program=sh", "f"],
            &["rsync", "-avze", "ssh", "a", "b"],
            &["tar", "-xIsh", "-f", "x.tar"],
            &["git", "-c", "core.pager=sh", "log"],
            &["git", "-ccore.fsmonitor=x", "status"],
            &["git", "submodule", "foreach", "id"],
            &["git", "config", "alias.x", "!id"],
            &["git", "x"],
            &["git", "grep", "-O", "x"],
            &["git", "diff", "--ext-diff"],
            &["make"],
            &["cargo", "run"],
            &["setarch", "x86_64", "bash"],
            &["linux64", "sh"],
            &["run-parts", "."],
            &["ssh-agent", "sh"],
            &["dc", "-e", "!id"],
            &["msgfilter", "-i", "x.po", "sh"],
            &["apt-get", "-o", "APT::Update::Pre-Invoke::=id", "update"],
            &["wget", "-e", "use_askpass=/bin/sh", "x"],
            &["wget", "-qe", "use_askpass=/bin/sh", "x"],
            &["groff", "-U", "x.ms"],
        ] {
            assert!(why(argv).is_some(), "{argv:?} should be refused");
        }
        for argv in [
            &["ls", "-la"][..],
            &["cat", "f"],
            &["git", "status"],
            &["git", "-C", "sub", "log", "--oneline"],
            &["sed", "-n", "1p", "f"],
            &["sort", "-u", "f"],
            &["rsync", "-av", "a", "b"],
            &["grep", "-e", "x", "f"],
            &["od", "-c", "f"],
        ] {
            assert_eq!(why(argv), None, "{argv:?} should run");
        }
    }

    #[test]
    fn a_link_is_judged_by_what_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(dir.path()).unwrap();
        std::os::unix::fs::symlink("/bin/sh", d.join("lister")).unwrap();
        let n = names("./lister", d);
        assert!(n.iter().any(|n| n == "sh" || n == "dash" || n == "bash"), "{n:?}");
        assert!(exec_through(&["./lister".into()], &n).is_some());
        crate::fs::write_atomic(&d.join("vim.basic"), b"").unwrap();
        std::os::unix::fs::symlink(d.join("vim.basic"), d.join("notes")).unwrap();
        let n = names("./notes", d);
        assert!(n.iter().any(|n| n == "vim"), "{n:?}");
        assert!(exec_through(&["./notes".into()], &n).is_some());
        assert_eq!(names("./ld.so", d), ["ld.so"]);
        assert!(names("linux64", d).iter().any(|n| n == "linux64"));
    }

    #[test]
    fn sed_and_git_are_defanged() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(defang(&v(&["sed", "-n", "1p"]), &v(&["sed"])), v(&["sed", "--sandbox", "-n", "1p"]));
        assert_eq!(
            defang(&v(&["git", "--no-pager", "diff", "x"]), &v(&["git"])),
            v(&["git", "--no-pager", "diff", "--no-ext-diff", "--no-textconv", "x"])
        );
        assert_eq!(defang(&v(&["git", "status"]), &v(&["git"])), v(&["git", "status"]));
    }
}
