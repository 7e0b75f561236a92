//! The shell tool's argv checks: which allowlisted argvs could run another program (and so are
//! refused unless a `tools.shell.patterns` entry names them), and how a few programs are run
//! defanged instead (`sed --sandbox`, git without its configurable commands).
//!
//! These checks are the second layer: the OS sandbox (see `bwrap.rs`) is what contains a
//! program that gets past them. They judge the program by the name it is called by and by the
//! file that name resolves to (a link or copy named `ls` that is really `bash` is `bash`).

use camino::{Utf8Path, Utf8PathBuf};

/// Options that make an otherwise plain program run another one: the programs, the options,
/// and whether the program's one-letter options cluster (`-avze ssh` holds `-e`). Programs
/// that can run code whatever their options say (compilers, interpreters, ...) are refused
/// whole by the program policy (`policy.rs`) before these are looked at.
///
/// A `--long` option is matched the way GNU getopt matches it, by any prefix (`--filt=` is
/// `--filter=`), so every abbreviation of these is refused; `@` stands for a response file
/// (`gcc @args` reads more options, `-wrapper` among them, from a file the workspace holds);
/// a flag ending in `,` or `=` matches any argument it begins.
const RUNNER_ARGS: &[(&[&str], &[&str], bool)] = &[
    (&["find"], &["-exec", "-execdir", "-ok", "-okdir"], false),
    (
        &["tar"],
        &[
            "--to-command",
            "--use-compress-program",
            "-I",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
            "-F",
            "--rsh-command",
            "--rmt-command",
        ],
        true,
    ),
    (&["rsync"], &["-e", "--rsh", "--rsync-path"], true),
    (&["zip"], &["-T", "-TT", "--unzip-command"], true),
    (&["sort"], &["--compress-program"], false),
    // `install -s` runs the strip program it is given (`--strip-prog=./x` too).
    (&["install", "ginstall"], &["--strip-program"], false),
    (&["cpio"], &["--rsh-command"], false),
    (&["split"], &["--filter"], false),
    (&["sdiff", "diff3"], &["--diff-program"], false),
    (&["wget"], &["--use-askpass", "-e", "--execute", "--config"], true),
];

/// Whole long options that are a prefix of one in [`RUNNER_ARGS`] and are harmless: getopt
/// takes an exact name before any abbreviation (`tar --checkpoint=10` is not
/// `--checkpoint-action`).
const EXACT_SAFE: &[(&str, &str)] = &[("tar", "--checkpoint")];

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
    let found = if prog.contains('/') { Some(cwd.join(prog)).filter(|c| c.is_file()) } else { lookup(prog) };
    found.and_then(|c| c.canonicalize_utf8().ok())
}

/// Where a bare program name is installed: the first absolute folder of PATH holding it. An
/// empty entry, `.` or any relative folder would be the workspace, whose files are not
/// programs to run (a `rg` there must not stand in for an uninstalled ripgrep).
pub fn lookup(prog: &str) -> Option<Utf8PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':').filter(|d| d.starts_with('/')).map(|d| Utf8Path::new(d).join(prog)).find(|c| c.is_file())
}

/// Why an argv of a program the policy lets run could run another program through its options,
/// if it could (`find -exec`, `tar --to-command`, git's configurable commands). `names` are the
/// program's names, as `names()` gives them.
pub fn exec_through(argv: &[String], names: &[String]) -> Option<String> {
    let prog = argv.first()?;
    let args = &argv[1..];
    for name in names {
        let n = name.as_str();
        for (progs, flags, clusters) in RUNNER_ARGS {
            if !progs.contains(&n) {
                continue;
            }
            let safe = |a: &str| EXACT_SAFE.iter().any(|(p, o)| *p == n && a.split('=').next() == Some(*o));
            if let Some(a) = args.iter().find(|a| !safe(a) && has_flag(a, flags, *clusters)) {
                return Some(format!("`{prog} {a}` runs another program"));
            }
            // tar's first argument may be its one-letter options without a dash (`tar xIf sh a`).
            if n == "tar" {
                if let Some(a) = args.first().filter(|a| !a.starts_with('-')) {
                    if has_flag(&format!("-{a}"), flags, true) {
                        return Some(format!("`{prog} {a}` runs another program"));
                    }
                }
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

/// Whether `a` is one of `flags` (also `--flag=value`, any prefix of a `--flag` as getopt takes
/// it, `-Xvalue`, and inside a cluster of one-letter options when the program clusters them).
fn has_flag(a: &str, flags: &[&str], clusters: bool) -> bool {
    flags.iter().any(|f| {
        if a == *f || a.starts_with(&format!("{f}=")) {
            return true;
        }
        if *f == "@" || f.ends_with([',', '=']) {
            return a.starts_with(f);
        }
        if let (Some(long), Some(name)) = (f.strip_prefix("--"), a.strip_prefix("--")) {
            let name = name.split('=').next().unwrap_or(name);
            return !name.is_empty() && long.starts_with(name);
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

/// Why git, run as `argv` in `root` with the environment `env`, could run a program the
/// repository's configuration names: a filter (`status` runs its clean command), a diff textconv
/// or command (`blame`, `log -p`), a merge driver, a signature program (`log --show-signature`),
/// and the like; or `--git-dir`/`--work-tree` naming a repository elsewhere. git itself says
/// which configuration it will use (`git config --list --show-scope`, with the same `-C`
/// folders, from the same folder, in the same environment: the repository found above a folder
/// without `.git`, a `.git` file's target, included files, any spelling of a section), and
/// every key the repository sets (scopes `local` and `worktree`) is judged; your own
/// `~/.gitconfig` is yours. The environment (`git_env`) cannot switch these off by name: the
/// repository chooses the names.
pub fn git_repo(git: &Utf8Path, root: &Utf8Path, argv: &[String], env: &[(String, String)]) -> Option<String> {
    let args = &argv[1..];
    // The global options (`-C`, `--bare`, ...) decide which repository git finds: the listing
    // gets them all (`-c` and `--exec-path` were refused before).
    let global = &args[..git_sub(args)];
    for a in global {
        if ["--git-dir", "--work-tree"].iter().any(|o| a == o || a.starts_with(&format!("{o}="))) {
            return Some(format!("`git {a}` names a repository elsewhere"));
        }
    }
    let out = std::process::Command::new(git)
        .args(global)
        .args(["config", "--list", "--show-scope", "-z"])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o.stdout,
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr);
            return Some(format!(
                "git cannot read the repository's configuration ({})",
                why.lines().next().unwrap_or("no message").trim()
            ));
        }
        Err(e) => return Some(format!("cannot ask {git} for the repository's configuration: {e}")),
    };
    // `-z`: scope NUL key NEWLINE value NUL, one setting after another.
    let fields: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    for pair in fields.chunks(2) {
        let [scope, setting] = pair else { continue };
        if !matches!(*scope, b"local" | b"worktree") {
            continue;
        }
        let setting = String::from_utf8_lossy(setting);
        let key = setting.split('\n').next().unwrap_or("");
        if runs_a_program(key) {
            return Some(format!("the repository's configuration sets `{key}`, a program git would run"));
        }
    }
    nested(git, root, global, env)
}

/// [`git_repo`] for the repositories git may enter besides the one it finds, which
/// `git config --list` never reads: submodules (`.git/modules/**/config`, a checkout's own
/// `.git`), worktrees (`config.worktree`) and any repository deeper in the work tree. Each
/// file is listed by git (`--file`, includes followed) and judged as the top one is.
fn nested(git: &Utf8Path, root: &Utf8Path, global: &[String], env: &[(String, String)]) -> Option<String> {
    let ask = |args: &[&str]| {
        std::process::Command::new(git)
            .args(global)
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(root)
            .stdin(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim_end_matches('\n').to_string())
    };
    let common = ask(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
    let top = ask(&["rev-parse", "--show-toplevel"]).filter(|t| !t.is_empty());
    let files = match super::gitdirs::nested_configs(top.as_deref().map(Utf8Path::new), Utf8Path::new(&common)) {
        Ok(f) => f,
        Err(e) => return Some(e),
    };
    for file in files {
        let Some(list) = ask(&["config", "--file", file.as_str(), "--includes", "--list", "-z"]) else {
            return Some(format!("git cannot read the configuration {file}"));
        };
        // `-z` without scopes: key NEWLINE value NUL.
        for setting in list.split('\0') {
            let key = setting.split('\n').next().unwrap_or("");
            if runs_a_program(key) {
                // Named from the workspace: a prompt shows no machine path.
                let real = crate::tools::sandbox::absolute(root).canonicalize_utf8().unwrap_or(root.to_path_buf());
                let shown = file.strip_prefix(&real).map_or(file.to_string(), |r| r.to_string());
                return Some(format!(
                    "the configuration of a repository git would enter ({shown}) sets `{key}`, a program git would run"
                ));
            }
        }
    }
    None
}

/// Whether a git configuration key (as `git config --list` spells it: section and name in
/// lower case, the subsection as written) names a program git may run.
fn runs_a_program(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let (section, rest) = lower.split_once('.').unwrap_or((&lower, ""));
    let name = rest.rsplit('.').next().unwrap_or(rest);
    match section {
        "filter" | "pager" | "credential" => true,
        "diff" => matches!(name, "textconv" | "command" | "external"),
        "merge" => name == "driver",
        "gpg" => name == "program",
        "core" => matches!(name, "pager" | "sshcommand" | "askpass" | "gitproxy" | "editor" | "alternaterefscommand"),
        "remote" => matches!(name, "uploadpack" | "receivepack"),
        "uploadpack" => name == "packobjectshook",
        "interactive" => name == "difffilter",
        "sequence" => name == "editor",
        _ => false,
    }
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
        ("log.showSignature", "false"),
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
        let names = [base(&argv[0]).to_string(), whole];
        super::super::policy::judge(&names).map(|(k, _)| k).or_else(|| exec_through(&argv, &names))
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
            &["install", "-s", "--strip-program=./evil.sh", "x.c", "y"],
            &["install", "-s", "--strip-prog=./evil.sh", "x.c", "y"],
            &["install", "-s", "--strip-program", "./evil.sh", "x.c", "y"],
            &["cpio", "--rsh-command=./x", "-o"],
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
            &["split", "--filt=sh", "f"],
            &["split", "--f", "sh", "f"],
            &["sort", "--compress-prog=sh", "f"],
            &["sdiff", "--diff-pro=sh", "a", "b"],
            &["wget", "--use-ask=/bin/sh", "x"],
            &["zip", "--unzip-comm=sh", "x.zip", "f"],
            &["tar", "--to-comm=sh", "-xf", "x.tar"],
            &["tar", "--checkpoint-act=exec=sh", "-cf", "x.tar", "f"],
            &["tar", "--use-compress=sh", "-cf", "x.tar", "f"],
            &["tar", "--new-volume-script=sh", "-cf", "x.tar", "f"],
            &["tar", "cIf", "sh", "x.tar", "f"],
            &["gcc", "@args", "f.c"],
            &["gcc", "-Wl,-plugin,x.so", "f.c"],
            &["gcc", "-O2", "-c", "f.c"],
            &["gcc-12", "--prefix=./", "f.c"],
            &["x86_64-linux-gnu-gcc", "--for-linker=--plugin=x.so", "f.c"],
            &["c99", "f.c"],
            &["ld", "-plugin", "x.so"],
            &["cpp", "-fplugin=./x.so"],
            &["pic", "-U", "x.pic"],
            &["prove", "t/"],
            &["openssl", "req", "-config", "x.cnf"],
            &["openssl", "list", "-provider", "x"],
            &["ssh-keygen", "-D", "./x.so"],
            &["pydoc3", "mod"],
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
            &["tar", "--checkpoint=10", "-cf", "x.tar", "f"],
            &["tar", "cf", "x.tar", "f"],
            &["wget", "--user=x", "http://h/"],
            &["sort", "--check", "f"],
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
        assert!(super::super::policy::judge(&n).is_some());
        agentloop_io::fs::write_atomic(&d.join("vim.basic"), b"").unwrap();
        std::os::unix::fs::symlink(d.join("vim.basic"), d.join("notes")).unwrap();
        let n = names("./notes", d);
        assert!(n.iter().any(|n| n == "vim"), "{n:?}");
        assert!(super::super::policy::judge(&n).is_some());
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
