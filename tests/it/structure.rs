//! The source keeps its shape: no function in the engine over 80 lines, no source file over
//! 1,000 lines, no import circle among the modules of a crate, nor among the files of a folder.

/// Functions in the loop's core and the run lifecycle stay readable on one screen: none over 80 lines (a function runs
/// from its `fn` line to the first `}` at the same indentation).
#[test]
fn no_function_over_80_lines_in_the_core() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<std::path::PathBuf> =
        ["crates/agentloop-core/src/phases", "src/handle", "src/serve", "crates/agentloop-store/src/workspace"]
            .iter()
            .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap().map(|e| e.unwrap().path()))
            .collect();
    // The run lifecycle and the modules it runs through.
    for f in [
        "crates/agentloop-core/src/lifecycle.rs",
        "crates/agentloop-model/src/budget.rs",
        "crates/agentloop-model/src/outcome.rs",
        "crates/agentloop-core/src/trust.rs",
        "crates/agentloop-core/src/settings.rs",
        "src/commands/run.rs",
        "src/commands/answer.rs",
    ] {
        files.push(root.join(f));
    }
    files.push(root.join("crates/agentloop-tools/src/tools/mod.rs"));
    files.push(root.join("crates/agentloop-model/src/model/http.rs"));
    let mut long = Vec::new();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "rs")) {
        let text = std::fs::read_to_string(f).unwrap();
        // A module's unit tests (a story each) are not held to it.
        let code = text.split("\n#[cfg(test)]\n").next().unwrap_or_default();
        let lines: Vec<&str> = code.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            let indent = l.len() - t.len();
            let is_fn = ["fn ", "pub fn ", "pub(crate) fn ", "pub(super) fn "].iter().any(|p| t.starts_with(p));
            if !is_fn || t.ends_with(';') {
                continue;
            }
            let close = " ".repeat(indent) + "}";
            let end = lines[i + 1..]
                .iter()
                .position(|x| *x == close || x.starts_with(&(close.clone() + " ")))
                .map(|n| i + 1 + n);
            if let Some(end) = end {
                if end - i + 1 > 80 {
                    long.push(format!(
                        "{}:{} is {} lines",
                        f.strip_prefix(root).unwrap().display(),
                        i + 1,
                        end - i + 1
                    ));
                }
            }
        }
    }
    assert!(long.is_empty(), "functions over 80 lines: {long:#?}");
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
    assert_eq!(crate_sources(root).len(), 7, "the binary and the six crates under crates/ are read");
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

/// No Rust source file of the project (the crates, the binary, the tests and benches) is over
/// 1,000 lines: a file that grows past it is split by what its parts are about.
#[test]
fn no_source_file_over_1000_lines() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    let mut dirs: Vec<_> = ["src", "crates", "tests", "benches"].iter().map(|d| root.join(d)).collect();
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let n = std::fs::read_to_string(&p).unwrap().lines().count();
                if n > 1000 {
                    long.push(format!("{} has {n} lines", p.strip_prefix(root).unwrap().display()));
                }
            }
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
        "agentloop-base",
        "agentloop-config",
        "agentloop-model",
        "agentloop-store",
        "agentloop-tools",
        "agentloop-core",
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
        }
    }
}
