//! The source keeps its shape: no function in the engine over 80 lines, no source file over
//! 1,000 lines, and no import circle among the modules of a crate.

/// Functions in the loop's core and the run lifecycle stay readable on one screen: none over 80 lines (a function runs
/// from its `fn` line to the first `}` at the same indentation).
#[test]
fn no_function_over_80_lines_in_the_core() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<std::path::PathBuf> =
        ["crates/agentloop-core/src/phases", "src/handle", "src/serve", "crates/agentloop-core/src/workspace"]
            .iter()
            .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap().map(|e| e.unwrap().path()))
            .collect();
    // The run lifecycle and the modules it runs through.
    for f in [
        "crates/agentloop-core/src/lifecycle.rs",
        "crates/agentloop-core/src/budget.rs",
        "crates/agentloop-core/src/outcome.rs",
        "crates/agentloop-core/src/trust.rs",
        "crates/agentloop-core/src/settings.rs",
        "src/commands/run.rs",
        "src/commands/answer.rs",
    ] {
        files.push(root.join(f));
    }
    files.push(root.join("crates/agentloop-core/src/tools/mod.rs"));
    files.push(root.join("crates/agentloop-core/src/model/http.rs"));
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
    for src in ["src", "crates/agentloop-base/src", "crates/agentloop-core/src"].map(|c| root.join(c)) {
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
