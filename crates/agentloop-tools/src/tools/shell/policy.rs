//! The shell tool's program policy: which programs can run code at all — a shell's, an
//! interpreter's, what a compiler, linker or preprocessor loads (`-fplugin`, `--prefix=./`,
//! `-plugin`), a build tool's project scripts, a test runner's tests, a plugin, provider or
//! config file a program is pointed at — and so are refused unless the user names them.
//!
//! A program is judged by what it is, not by how an argv spells its options: the option lists
//! of such programs keep growing (`--for-linker=--plugin=`, `pic -U`, `openssl list
//! -provider`), so the program is refused whole. Its name is normalized first: the file name,
//! without a version (`gcc-12`, `python3.12`), an alternatives suffix (`vim.basic`, `ld.bfd`) or
//! a target triple (`x86_64-linux-gnu-gcc`), and the file it resolves to is judged too (`cc`
//! → `gcc`, `c99` → `c99-gcc`; see `argv::names`).

/// What a program is, when it can run code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Shell,
    Wrapper,
    Interpreter,
    Interactive,
    Compiler,
    Linker,
    Preprocessor,
    BuildTool,
    ProjectCode,
    Loader,
}

impl Kind {
    /// How a refusal says what the program is.
    pub fn says(self) -> &'static str {
        match self {
            Kind::Shell => "a shell",
            Kind::Wrapper => "a program that runs the program its arguments name",
            Kind::Interpreter => "an interpreter",
            Kind::Interactive => "an editor, pager or database shell with a command escape",
            Kind::Compiler => "a compiler (it loads plugins, specs, assemblers and linkers it is pointed at)",
            Kind::Linker => "a linker or archiver (it loads plugins it is pointed at)",
            Kind::Preprocessor => "a preprocessor (it loads plugins or runs commands its input names)",
            Kind::BuildTool => "a build tool or package manager (it runs the project's own scripts)",
            Kind::ProjectCode => "a tool that runs, imports or evaluates the project's own code or config",
            Kind::Loader => "a program that loads the plugins, providers, modules or config files it is given",
        }
    }
}

#[rustfmt::skip]
const TABLE: &[(Kind, &[&str])] = &[
    (Kind::Shell, &[
        "sh", "bash", "rbash", "zsh", "dash", "ash", "ksh", "mksh", "pdksh", "yash", "fish", "csh", "tcsh", "rc", "es",
        "elvish", "nu", "xonsh", "busybox", "toybox", "exec", "osh", "oil", "ysh",
    ]),
    (Kind::Wrapper, &[
        "env", "xargs", "nohup", "timeout", "time", "nice", "ionice", "stdbuf", "setsid", "chroot", "sudo", "su", "doas",
        "pkexec", "runuser", "setpriv", "prlimit", "capsh", "chpst", "cgexec", "systemd-run", "flatpak-spawn", "firejail",
        "bwrap", "proot", "fakeroot", "fakechroot", "faketime", "unshare", "nsenter", "chrt", "taskset", "numactl",
        "watch", "strace", "ltrace", "valgrind", "perf", "gdb", "lldb", "rlwrap", "unbuffer", "expect", "script", "flock",
        "parallel", "tmux", "screen", "dtach", "catchsegv", "socat", "nc", "ncat", "netcat", "ssh", "scp", "sftp",
        "telnet", "setarch", "linux32", "linux64", "i386", "x86_64", "uname26", "run-parts", "start-stop-daemon",
        "ssh-agent", "dbus-run-session", "dbus-launch", "sg", "newgrp", "xvfb-run", "torsocks", "torify", "proxychains",
        "cpulimit", "trickle", "schedtool", "chronic", "ifne", "pee", "vipe", "entr", "msgfilter", "mail", "mailx",
        "s-nail", "mutt", "ftp", "lftp", "sensible-editor", "sensible-pager", "sensible-browser", "editor", "pager",
        "xdg-open", "gio", "run-mailcap", "see", "qemu", "wine", "box64", "wasmtime", "wasmer", "ld.so",
        // They run a command later, outside the call: `crontab FILE`, `at`, `batch`.
        "crontab", "at", "batch",
    ]),
    (Kind::Interpreter, &[
        "python", "pypy", "perl", "ruby", "irb", "node", "nodejs", "deno", "bun", "php", "php-cgi", "lua", "luajit",
        "tclsh", "wish", "jimsh", "R", "Rscript", "julia", "guile", "racket", "sbcl", "clisp", "ocaml", "ghci", "runghc",
        "pwsh", "java", "jshell", "groovy", "scala", "kotlin", "dotnet", "mono", "awk", "gawk", "mawk", "nawk", "dc",
        "tcc", "gnuplot", "octave", "duckdb", "hg", "gpg", "vimtutor", "raku", "rakudo", "clojure", "clj", "bb",
        "elixir", "iex", "erl", "escript", "swift", "dart", "qjs", "rhino", "jjs", "gs", "tex", "latex", "pdflatex",
        "xelatex", "lualatex", "luatex", "pdftex", "xetex", "context", "latexmk", "pandoc",
    ]),
    (Kind::Interactive, &[
        "vi", "vim", "nvim", "view", "vimdiff", "rvim", "ex", "ed", "red", "emacs", "nano", "pico", "joe", "mg", "less",
        "more", "most", "pg", "man", "sqlite", "psql", "mysql", "mariadb", "zless", "zmore",
    ]),
    (Kind::Compiler, &[
        "gcc", "g++", "cc", "c++", "c89", "c99", "c11", "c17", "c23", "clang", "clang++", "icc", "icx", "icpx", "gfortran",
        "f77", "f95", "gccgo", "gdc", "gnat", "gnatmake", "rustc", "rustdoc", "javac", "kotlinc", "scalac", "ghc",
        "ocamlc", "ocamlopt", "ocamlfind", "nvcc", "emcc", "em++", "swiftc", "valac", "fpc", "ldc", "dmd", "cython",
        "nim", "crystal", "cc1", "cc1plus", "collect2", "lto-wrapper", "lto1",
    ]),
    (Kind::Linker, &["ld", "lld", "gold", "mold", "ar", "nm", "ranlib", "dlltool", "windres"]),
    (Kind::Preprocessor, &["cpp", "m4", "pic", "gpic", "grap", "dpic", "groff", "troff", "gtroff", "nroff"]),
    (Kind::BuildTool, &[
        "make", "gmake", "bmake", "pmake", "remake", "cmake", "ninja", "meson", "just", "cargo", "npm", "npx", "yarn",
        "pnpm", "pip", "pipx", "uv", "uvx", "poetry", "go", "gradle", "gradlew", "mvn", "mvnw", "ant", "rake", "bundle",
        "gem", "apt", "apt-get", "aptitude", "dpkg", "bazel", "bazelisk", "scons", "waf", "ctest", "zig", "dune",
        "cabal", "stack", "sbt", "lein", "mix", "composer", "autoconf", "autoreconf", "automake", "configure", "qmake",
        "xmake", "premake", "buck", "buck2", "pants", "tup", "redo", "bitbake", "nix", "nix-build", "nix-shell", "guix",
        "gn", "rebar3", "dub", "nimble", "opam", "luarocks", "conan", "vcpkg", "xcodebuild", "pod",
    ]),
    (Kind::ProjectCode, &[
        "pydoc", "pytest", "ipython", "jupyter", "tox", "nox", "sphinx-build", "pre-commit", "mypy", "pylint", "eslint",
        "prettier", "jest", "vitest", "mocha", "webpack", "vite", "rollup", "babel", "ts-node", "tsx", "gulp", "grunt",
        "rspec", "rails", "phpunit", "prove", "perldoc", "cpan", "cpanm", "coverage", "flake8", "rubocop", "jekyll",
        "asciidoctor", "mkdocs", "doxygen", "golangci-lint", "bats", "phpstan",
    ]),
    (Kind::Loader, &[
        "openssl", "ssh-keygen", "ssh-add", "pkcs11-tool", "p11tool", "certtool", "modutil", "keytool", "gpgsm",
        "gpg-agent", "gpgconf", "magick", "convert", "mogrify", "identify", "montage", "composite",
    ]),
];

/// The keys a program name is looked up by: the file name; without what follows its first dot
/// (`vim.basic`, `ld.bfd`); without a trailing version (`python3.12`, `gcc-12`, `c99` is also
/// tried whole); and every hyphenated tail of each (`x86_64-linux-gnu-gcc` → `gcc`,
/// `llvm-ar` → `ar`, `clang-cpp` → `cpp`).
pub fn keys(name: &str) -> Vec<String> {
    let file = name.rsplit('/').next().unwrap_or(name);
    let mut out: Vec<String> = Vec::new();
    let push = |s: &str, out: &mut Vec<String>| {
        if !s.is_empty() && !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    };
    let mut heads = vec![file.to_string()];
    if let Some((head, _)) = file.split_once('.') {
        heads.push(head.to_string());
    }
    for h in heads {
        for v in [h.clone(), unversioned(&h)] {
            push(&v, &mut out);
            let parts: Vec<&str> = v.split('-').collect();
            for i in 1..parts.len() {
                let tail = parts[i..].join("-");
                push(&tail, &mut out);
                push(&unversioned(&tail), &mut out);
            }
        }
    }
    out
}

/// `name` without a trailing version: digits and dots (`python3.12`), after a hyphen too
/// (`gcc-12`, `clang++-15`).
fn unversioned(name: &str) -> String {
    let t = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    t.strip_suffix('-').unwrap_or(t).to_string()
}

/// What the program that goes by `names` is, when it can run code: the key it matched and its
/// kind. The dynamic loader (`ld-linux-x86-64.so.2`, `ld-musl-*`) runs any program.
pub fn judge(names: &[String]) -> Option<(String, Kind)> {
    for name in names {
        let file = name.rsplit('/').next().unwrap_or(name);
        if file.starts_with("ld-linux") || file.starts_with("ld-musl") {
            return Some((file.to_string(), Kind::Wrapper));
        }
        for key in keys(name) {
            if let Some((kind, _)) = TABLE.iter().find(|(_, progs)| progs.contains(&key.as_str())) {
                return Some((key, *kind));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(name: &str) -> Option<Kind> {
        judge(&[name.to_string()]).map(|(_, k)| k)
    }

    #[test]
    fn names_are_normalized_before_they_are_judged() {
        for (name, want) in [
            ("gcc-12", Kind::Compiler),
            ("x86_64-linux-gnu-gcc", Kind::Compiler),
            ("x86_64-linux-gnu-gcc-12", Kind::Compiler),
            ("arm-none-eabi-g++", Kind::Compiler),
            ("c99", Kind::Compiler),
            ("c89", Kind::Compiler),
            ("c99-gcc", Kind::Compiler),
            ("/usr/bin/clang++-15", Kind::Compiler),
            ("ld", Kind::Linker),
            ("ld.bfd", Kind::Linker),
            ("x86_64-linux-gnu-ld.gold", Kind::Linker),
            ("llvm-ar", Kind::Linker),
            ("cpp-12", Kind::Preprocessor),
            ("clang-cpp", Kind::Preprocessor),
            ("pic", Kind::Preprocessor),
            ("prove", Kind::ProjectCode),
            ("openssl", Kind::Loader),
            ("ssh-keygen", Kind::Loader),
            ("python3.12", Kind::Interpreter),
            ("vim.basic", Kind::Interactive),
            ("ts-node", Kind::ProjectCode),
            ("/lib64/ld-linux-x86-64.so.2", Kind::Wrapper),
        ] {
            assert_eq!(kind(name), Some(want), "{name}");
        }
        for name in
            ["ls", "cat", "sed", "git", "tar", "od", "xxd", "wc", "sort", "python3-config", "c++filt", "apt-cache"]
        {
            assert_eq!(kind(name), None, "{name}");
        }
    }
}
