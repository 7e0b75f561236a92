//! The source keeps its shape: no function over 80 lines (but the listed ones that predate the
//! rule), no source file over 1,000 lines, no import circle among the modules of a crate, nor
//! among the files of a folder.

/// Functions over 80 lines that predate the rule, by file and name (not line, so an edit above
/// one does not break the list). Each is to be split into functions that do one named thing;
/// the list only shrinks: a function not on it may not pass 80 lines, and one on it that no
/// longer does fails the test until it is taken off. None are left: the crates and the binary
/// all keep to the rule.
const LONG_FUNCTIONS_TO_SPLIT: &[(&str, &str)] = &[];

/// Functions stay readable on one screen: none in the crates or the binary over 80 lines (a
/// function runs from its `fn` line to the first `}` at the same indentation; a module's test
/// module is not held to it), but those [`LONG_FUNCTIONS_TO_SPLIT`] lists, each of which must
/// still be over.
#[test]
fn no_function_over_80_lines() {
    use std::collections::BTreeSet;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long: BTreeSet<(String, String)> = BTreeSet::new();
    let mut new = Vec::new();
    let listed: BTreeSet<(String, String)> =
        LONG_FUNCTIONS_TO_SPLIT.iter().map(|(f, n)| (f.to_string(), n.to_string())).collect();
    let mut functions = 0;
    for f in rust_files(root, &["crates", "src"]) {
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        for (name, line, len) in functions_of(&std::fs::read_to_string(&f).unwrap()) {
            functions += 1;
            if len <= 80 {
                continue;
            }
            let key = (rel.clone(), name.clone());
            if !listed.contains(&key) {
                new.push(format!("{rel}:{line} `{name}` is {len} lines"));
            }
            long.insert(key);
        }
    }
    assert!(functions > 1000, "the functions were found: {functions}");
    assert!(new.is_empty(), "functions over 80 lines (split each into functions that do one named thing): {new:#?}");
    let done: Vec<String> = listed
        .difference(&long)
        .map(|(f, n)| format!("{f} `{n}` is no longer over 80 lines: remove it from LONG_FUNCTIONS_TO_SPLIT"))
        .collect();
    assert!(done.is_empty(), "{done:#?}");
}

/// The functions of a source file outside its test module, as (name, line, length in lines).
/// A test module is a `#[cfg(test)]` `mod` at the top level; the project keeps them last.
fn functions_of(text: &str) -> Vec<(String, usize, usize)> {
    let all: Vec<&str> = text.lines().collect();
    let test_module = (0..all.len()).find(|&i| {
        all[i] == "#[cfg(test)]" && {
            let item = all[i + 1..].iter().find(|l| !l.starts_with("#["));
            item.is_some_and(|l| l.starts_with("mod ") || l.starts_with("pub mod "))
        }
    });
    let lines = &all[..test_module.unwrap_or(all.len())];
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let indent = l.len() - t.len();
        // A declaration (`fn f();`) has no body; a one-line function ends where it starts.
        let Some(name) = fn_name(t).filter(|_| !t.ends_with(';') && !t.ends_with('}')) else {
            continue;
        };
        let close = " ".repeat(indent) + "}";
        let end = lines[i + 1..].iter().position(|x| *x == close || x.starts_with(&(close.clone() + " ")));
        if let Some(n) = end {
            out.push((name.to_string(), i + 1, n + 2));
        }
    }
    out
}

/// The name of the function a line (its indentation trimmed) starts, if it starts one: `fn`
/// after any visibility (`pub`, `pub(crate)`, ...) and qualifiers (`const`, `async`, `unsafe`).
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line;
    if let Some(r) = rest.strip_prefix("pub") {
        rest = match r.strip_prefix('(') {
            Some(inner) => inner.split_once(')')?.1,
            None => r,
        };
        rest = rest.strip_prefix(' ')?;
    }
    for q in ["const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(q).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let n = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
    Some(&rest[..n]).filter(|name| !name.is_empty())
}

/// The scan finds functions as rustfmt writes them: any visibility and qualifiers, a signature
/// over several lines; not a declaration, a one-line function, nor one in the test module.
#[test]
fn functions_are_found_with_their_length() {
    let text = "pub(crate) async fn a() {\n    let x = 1;\n}\n\nimpl T {\n    pub const fn b(&self) -> u8 { 1 }\n    \
                unsafe fn c(\n        x: u8,\n    ) {\n    }\n}\nfn d();\n#[cfg(test)]\n#[allow(x)]\nmod tests {\n    \
                fn e() {\n    }\n}\n";
    assert_eq!(functions_of(text), [("a".to_string(), 1, 3), ("c".to_string(), 7, 4)]);
    assert_eq!(fn_name("pub(in crate::x) fn f<T>()"), Some("f"));
    assert_eq!(fn_name("fnord()"), None);
    assert_eq!(fn_name("public fn x()"), None);
}

/// Every `.rs` file under the given folders of `root` (hidden folders aside), in a stable order.
fn rust_files(root: &std::path::Path, dirs: &[&str]) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo: Vec<_> = dirs.iter().map(|d| root.join(d)).collect();
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
                    todo.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Within each crate the top-level modules form no cycle: each `crate::X` a module's files name
/// (doc comments and test modules aside) is an edge, and the graph must be acyclic, so every
/// module can be read and changed from the bottom up. Between the crates Cargo itself refuses
/// an upward edge (docs/ARCHITECTURE.md has the layers).
#[test]
fn no_cycle_among_the_librarys_modules() {
    use std::collections::{BTreeMap, BTreeSet};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut modules = 0;
    for src in crate_sources(root) {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        fn files(p: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            if p.is_dir() {
                for e in std::fs::read_dir(p).unwrap() {
                    files(&e.unwrap().path(), out);
                }
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p.to_path_buf());
            }
        }
        for e in std::fs::read_dir(&src).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            if name == "lib" || name == "bin" {
                continue;
            }
            let mut fs = Vec::new();
            files(&p, &mut fs);
            let deps = graph.entry(name.clone()).or_default();
            for f in fs {
                let text = std::fs::read_to_string(&f).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap();
                for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                    let mut rest = line;
                    while let Some(i) = rest.find("crate::") {
                        rest = &rest[i + 7..];
                        let m: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                        if !m.is_empty() && m != name {
                            deps.insert(m.clone());
                        }
                        if rest.starts_with('{') {
                            let group = &rest[1..rest.find('}').unwrap_or(rest.len())];
                            for part in group.split(',') {
                                let m: String = part
                                    .trim()
                                    .chars()
                                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                                    .collect();
                                if !m.is_empty() && m != name && m != "self" {
                                    deps.insert(m);
                                }
                            }
                        }
                    }
                }
            }
        }
        let known: BTreeSet<String> = graph.keys().cloned().collect();
        // Depth-first search for a back edge; the path to it is the cycle.
        fn visit(
            n: &str,
            g: &BTreeMap<String, BTreeSet<String>>,
            known: &BTreeSet<String>,
            state: &mut BTreeMap<String, u8>,
            path: &mut Vec<String>,
        ) -> Option<Vec<String>> {
            state.insert(n.to_string(), 1);
            path.push(n.to_string());
            for d in g[n].iter().filter(|d| known.contains(*d)) {
                match state.get(d.as_str()).copied().unwrap_or(0) {
                    1 => {
                        let start = path.iter().position(|p| p == d).unwrap();
                        let mut cycle = path[start..].to_vec();
                        cycle.push(d.clone());
                        return Some(cycle);
                    }
                    0 => {
                        if let Some(c) = visit(d, g, known, state, path) {
                            return Some(c);
                        }
                    }
                    _ => {}
                }
            }
            path.pop();
            state.insert(n.to_string(), 2);
            None
        }
        let mut state = BTreeMap::new();
        for n in graph.keys() {
            if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
                if let Some(c) = visit(n, &graph, &known, &mut state, &mut Vec::new()) {
                    panic!("module cycle in {}: {}", src.display(), c.join(" -> "));
                }
            }
        }
        modules += graph.len();
    }
    assert!(modules > 30, "the modules were found: {modules}");
    assert_eq!(crate_sources(root).len(), 8, "the binary and the seven crates under crates/ are read");
}

/// No import circle among the sibling files of any folder of any crate: `a.rs` (or anything under
/// `a/`) naming its sibling `b` through `use` or a written-out `crate::`/`super::`/`self::` path is
/// an edge a -> b, and the edges among each folder's children must not close a ring. A `mod.rs`
/// using its children, and children using their parent's items, are not sibling edges. A file
/// the others share (`tools/tool.rs`, `tools/fetch.rs`, `model/stream.rs`, `serve/http.rs`)
/// names none of them.
#[test]
fn no_import_circle_among_sibling_files() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // The scan finds a ring written both ways it is written here (a `use` group, a path in place).
    let fake = tempfile::tempdir().unwrap();
    let dir = fake.path().join("src/a");
    std::fs::create_dir_all(dir.join("y")).unwrap();
    std::fs::write(dir.join("mod.rs"), "mod x;\nmod y;\n").unwrap();
    std::fs::write(dir.join("x.rs"), "use super::{y::{self, Thing}, Other};\n").unwrap();
    std::fs::write(dir.join("y/mod.rs"), "mod inner;\n").unwrap();
    std::fs::write(dir.join("y/inner.rs"), "// crate::a::z::f() is a comment\nfn f() { crate::a::x::g() }\n").unwrap();
    assert_eq!(sibling_cycles(fake.path()), ["src/a/{x.rs, y.rs}"]);
    std::fs::write(dir.join("y/inner.rs"), "#[cfg(test)]\nmod tests {\n    use crate::a::x;\n}\n").unwrap();
    assert!(sibling_cycles(fake.path()).is_empty(), "a test module's imports are not edges");
    let circles = sibling_cycles(root);
    assert!(
        circles.is_empty(),
        "import circles among sibling files (move what they share into the file the others use): {circles:#?}"
    );
}

/// The module path each `crate::`, `super::` or `self::` path in `code` names, read from `use`
/// trees (groups expanded) and from paths written out in place, as seen from module `at`.
fn named_paths(code: &str, at: &[String]) -> Vec<Vec<String>> {
    fn ident(s: &str) -> (&str, &str) {
        let n = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
        (&s[..n], &s[n..])
    }
    // Reads `a::b::{c, d::e}` from the start of `s` onto `prefix`, pushing every full path.
    fn tree(s: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
        let mut path = prefix;
        let mut i = 0;
        loop {
            let rest = s[i..].trim_start();
            i = s.len() - rest.len();
            if let Some(group) = rest.strip_prefix('{') {
                let mut j = s.len() - group.len();
                loop {
                    let r = s[j..].trim_start();
                    j = s.len() - r.len();
                    if r.starts_with('}') || r.is_empty() {
                        return j + 1;
                    }
                    j += tree(&s[j..], path.clone(), out);
                    let r = s[j..].trim_start();
                    j = s.len() - r.len();
                    if r.starts_with(',') {
                        j += 1;
                    }
                }
            }
            let (name, after) = ident(rest);
            if name.is_empty() {
                out.push(path);
                return i;
            }
            i += name.len();
            if name != "self" || path.is_empty() {
                path.push(name.to_string());
            }
            match after.strip_prefix("::") {
                Some(_) => i += 2,
                None => {
                    out.push(path);
                    return i;
                }
            }
        }
    }
    let mut raw = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let starts = ["crate::", "super::", "self::"].iter().any(|p| rest.starts_with(p));
        let boundary =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        if starts && boundary {
            let used = tree(rest, Vec::new(), &mut raw);
            i += used.max(1);
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    raw.into_iter()
        .filter_map(|p| {
            let mut abs: Vec<String> = at.to_vec();
            let mut parts = p.into_iter().peekable();
            match parts.peek().map(String::as_str) {
                Some("crate") => abs.clear(),
                Some("self") => {}
                Some("super") => {}
                _ => return None,
            }
            for part in parts {
                match part.as_str() {
                    "crate" | "self" => {}
                    "super" => {
                        abs.pop()?;
                    }
                    _ => abs.push(part),
                }
            }
            Some(abs)
        })
        .collect()
}

/// The code of a source file that builds outside tests: comment lines, test modules and
/// test-only `use` lines left out.
fn built_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        if t.starts_with("#[cfg(test)]") {
            match lines.next().map(str::trim_start) {
                // A test module runs to the end of the file, where this project keeps them.
                Some(next) if next.starts_with("mod ") || next.starts_with("pub mod ") => break,
                _ => continue,
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The `src` folder of every crate of the workspace: the binary's and each of `crates/*`.
fn crate_sources(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let crates = std::fs::read_dir(root.join("crates")).into_iter().flatten();
    let mut all: Vec<_> = crates.map(|e| e.unwrap().path().join("src")).collect();
    all.sort();
    all.insert(0, root.join("src"));
    all
}

/// The import circles among the sibling modules of each folder of each crate, by file: `a.rs`
/// (or anything under `a/`) naming `b` through `use` or a written-out path is an edge a -> b.
fn sibling_cycles(root: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for src in crate_sources(root) {
        if !src.is_dir() {
            continue;
        }
        let mut files: Vec<std::path::PathBuf> = Vec::new();
        let mut dirs = vec![src.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    if p != src.join("bin") {
                        dirs.push(p);
                    }
                } else if p.extension().is_some_and(|x| x == "rs") {
                    files.push(p);
                }
            }
        }
        // Each file's module path: lib.rs is the root, a/mod.rs and a.rs are `a`.
        let module = |p: &std::path::PathBuf| -> Vec<String> {
            let rel = p.strip_prefix(&src).unwrap().with_extension("");
            let mut m: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            if m.last().is_some_and(|l| l == "mod" || l == "lib") {
                m.pop();
            }
            m
        };
        let modules: std::collections::BTreeSet<Vec<String>> = files.iter().map(module).collect();
        // folder -> (child -> children it names)
        let mut graphs: std::collections::BTreeMap<
            Vec<String>,
            std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        > = std::collections::BTreeMap::new();
        for f in &files {
            let at = module(f);
            let code = built_code(&std::fs::read_to_string(f).unwrap());
            for target in named_paths(&code, &at) {
                let common = at.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if common >= at.len() || common >= target.len() {
                    continue;
                }
                let folder = at[..common].to_vec();
                let mut to = folder.clone();
                to.push(target[common].clone());
                if modules.contains(&to) {
                    graphs
                        .entry(folder)
                        .or_default()
                        .entry(at[common].clone())
                        .or_default()
                        .insert(target[common].clone());
                }
            }
        }
        for (folder, g) in &graphs {
            // Two children are in one circle when each reaches the other.
            let reach = |from: &str| -> std::collections::BTreeSet<String> {
                let mut seen = std::collections::BTreeSet::new();
                let mut todo = vec![from.to_string()];
                while let Some(n) = todo.pop() {
                    for d in g.get(&n).into_iter().flatten() {
                        if seen.insert(d.clone()) {
                            todo.push(d.clone());
                        }
                    }
                }
                seen
            };
            let mut done = std::collections::BTreeSet::new();
            for n in g.keys() {
                if done.contains(n) {
                    continue;
                }
                let circle: std::collections::BTreeSet<String> =
                    reach(n).into_iter().filter(|m| reach(m).contains(n)).collect();
                if circle.len() > 1 {
                    done.extend(circle.iter().cloned());
                    let dir = src.join(folder.iter().collect::<std::path::PathBuf>());
                    let dir = dir.strip_prefix(root).unwrap().display().to_string();
                    let names: Vec<String> = circle.iter().map(|c| format!("{c}.rs")).collect();
                    found.push(format!("{dir}/{{{}}}", names.join(", ")));
                }
            }
        }
    }
    found
}

/// No Rust source file of the project is over 1,000 lines: every `.rs` file of the repository
/// (the crates, the binary, the tests and benches, and any example or build script to come),
/// wherever it sits. The build output, hidden folders and what `.gitignore` leaves out at the
/// top (a demo workspace) are not the project's. A file that grows past it is split by what
/// its parts are about.
#[test]
fn no_source_file_over_1000_lines() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let gitignore = std::fs::read_to_string(root.join(".gitignore")).unwrap_or_default();
    let ignored: Vec<&str> =
        gitignore.lines().filter_map(|l| l.trim().strip_prefix('/')).map(|l| l.trim_end_matches('/')).collect();
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    for e in std::fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() && name != "target" && !name.starts_with('.') && !ignored.contains(&name.as_str()) {
            dirs.push(name);
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
    let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
    files.extend(rust_files(root, &dirs));
    assert!(files.contains(&root.join("tests/it/structure.rs")), "the tests are read");
    assert!(files.len() > 200, "the files were found: {}", files.len());
    let mut long = Vec::new();
    for p in files {
        let n = std::fs::read_to_string(&p).unwrap().lines().count();
        if n > 1000 {
            long.push(format!("{} has {n} lines", p.strip_prefix(root).unwrap().display()));
        }
    }
    assert!(long.is_empty(), "split these files: {long:#?}");
}

/// The workspace is the layers, bottom to top, as Cargo itself sees them (`cargo metadata`):
/// each crate names only crates below it, and only the binary names clap, the HTTP server or
/// Redis.
#[test]
fn the_workspace_is_the_layers_and_only_the_binary_has_the_cli_and_servers() {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--offline", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let layers = [
        "agentloop-types",
        "agentloop-io",
        "agentloop-config",
        "agentloop-model",
        "agentloop-workspace",
        "agentloop-tools",
        "agentloop-engine",
        "agentloop",
    ];
    let packages = meta["packages"].as_array().unwrap();
    assert_eq!(packages.len(), layers.len(), "one package per layer");
    for p in packages {
        let name = p["name"].as_str().unwrap();
        let at = layers.iter().position(|l| *l == name).unwrap_or_else(|| panic!("{name} is no layer"));
        let normal = p["dependencies"].as_array().unwrap().iter().filter(|d| d["kind"].is_null());
        for d in normal {
            let dep = d["name"].as_str().unwrap();
            if let Some(below) = layers.iter().position(|l| *l == dep) {
                assert!(below < at, "{name} names {dep}, which is not below it");
            }
            if name != "agentloop" {
                let cli_or_server = ["clap", "clap_complete", "clap_mangen", "tiny_http", "redis"];
                assert!(!cli_or_server.contains(&dep), "{name} names {dep}: only the binary may");
            }
            // Beside each other, not above: a workspace's files are read and written without
            // knowing how a model is called.
            assert!(
                !(name == "agentloop-workspace" && dep == "agentloop-model"),
                "agentloop-workspace names agentloop-model: what it records of a call is agentloop-types'"
            );
        }
    }
}

/// Each crate is used by its own name: no crate (nor the binary) re-exports another crate whole
/// (`pub use agentloop_x::*`) or its modules (`pub use agentloop_x::config`, `pub use
/// agentloop_x::{a, b}`), so `agentloop_config::config` is where it says and a reader (or a tool
/// that walks imports) never follows a path through a facade. A type a module's interface hands
/// out may be named there (`pub use agentloop_types::outcome::StopKind`).
#[test]
fn no_crate_re_exports_another() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut facades = Vec::new();
    for f in rust_files(root, &["src", "crates"]) {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let l = line.trim_start();
            let Some(path) = l.strip_prefix("pub use ").or_else(|| l.strip_prefix("pub(crate) use ")) else {
                continue;
            };
            let Some(rest) = path.strip_prefix("agentloop_").and_then(|r| r.split_once("::")).map(|(_, r)| r) else {
                continue;
            };
            // What follows the crate's name: `*`, a `{` group of modules, or one module.
            let whole_or_module = rest.starts_with('*') || rest.starts_with('{') || !rest.contains("::");
            if whole_or_module {
                facades.push(format!("{}:{}: {l}", f.strip_prefix(root).unwrap().display(), i + 1));
            }
        }
    }
    assert!(facades.is_empty(), "use these by their own crate's name instead: {facades:#?}");
}

/// Every `static` outside tests is listed here with what it is and why it is one: process state
/// is passed as a value unless the process itself is what it describes. A new static fails this
/// test until it is listed (or, better, passed as a value instead).
const STATICS: &[(&str, &str, &str)] = &[
    // The process's own state: what a signal, a file descriptor or a secret is to the process.
    ("interrupt.rs", "WATCH", "state: a signal is delivered to the process; what it acts on is the process's"),
    (
        "streams.rs",
        "STREAMS",
        "state: stdout, stderr and the diagnostics log are the process's; every printer shares them",
    ),
    ("redact.rs", "SECRETS", "state: a secret registered anywhere must be hidden everywhere from then on"),
    // Rust's allocator hook and its per-thread budget.
    ("lib.rs", "ALLOCATOR", "Rust's global allocator: a zero-sized type, its state per thread"),
    ("alloc.rs", "LEFT", "per thread: the bytes a template render may still hold"),
    ("alloc.rs", "OVER", "per thread: where a render over its budget is flagged"),
    ("alloc.rs", "UNTIL", "per thread: a render's deadline"),
    ("http.rs", "TIMEOUTS", "per thread: the read timeouts of this thread's model calls"),
    ("auth.rs", "WAITED", "per thread: time spent waiting for a person in one operation"),
    // Counters and caches of what cannot change while the process runs.
    ("clock.rs", "SEQ", "counter: orders entries written in the same clock tick"),
    ("http.rs", "EXCHANGE_NS", "counter: time spent on the wire, which `make bench` subtracts"),
    ("journal.rs", "BOOT", "cache: the machine's boot id, read once"),
    ("bwrap.rs", "PROBE", "cache: whether bwrap works here, probed once"),
    ("redact.rs", "RE", "cache: a compiled pattern"),
    ("mod.rs", "VALIDATORS", "cache: compiled JSON Schema validators, at most 32"),
    ("contract.rs", "KEPT", "cache: the answer schemas, generated once per type"),
    ("longterm.rs", "INDEX_CACHE", "cache: the long-term memory index, dropped when the store changes"),
    // Warnings said once per process.
    ("allowed.rs", "SAID", "once: a warning said once per process"),
    ("rest_window.rs", "SAID", "once: a warning said once per process"),
    ("otel/mod.rs", "SAID", "once: a warning said once per process"),
    ("otel/mod.rs", "SAID", "once: a collector that did not take spans, said once per process"),
    ("otel/off.rs", "WARNED", "once: a warning said once per process"),
];

#[test]
fn every_static_is_listed_with_its_reason() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for f in rust_files(root, &["src", "crates"]) {
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let path = f.strip_prefix(root).unwrap().to_string_lossy().to_string();
        for line in code.lines() {
            let l = line.trim_start();
            let l = l.strip_prefix("pub(crate) ").or_else(|| l.strip_prefix("pub ")).unwrap_or(l);
            if let Some(rest) = l.strip_prefix("static ") {
                let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                found.push((path.clone(), name));
            }
        }
    }
    let unlisted: Vec<_> = found
        .iter()
        .filter(|(path, name)| !STATICS.iter().any(|(file, n, _)| n == name && path.ends_with(file)))
        .collect();
    assert!(unlisted.is_empty(), "pass these as values, or list each with its reason: {unlisted:#?}");
    let stale: Vec<_> = STATICS
        .iter()
        .filter(|(file, n, _)| !found.iter().any(|(path, name)| name == n && path.ends_with(file)))
        .collect();
    assert!(stale.is_empty(), "these are gone: take them off the list: {stale:#?}");
    let state = STATICS.iter().filter(|(_, _, why)| why.starts_with("state:")).count();
    assert!(state <= 3, "process state grew: {state} statics hold it");
}
