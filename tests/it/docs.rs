//! The user's documents hold together: the README opens with a short first hour that starts with
//! `make demo` and `make test`, its command table and the reference page's name every subcommand,
//! every relative link in README.md and docs/*.md reaches an existing file (and heading), and the
//! user-facing pages speak of agentloop, not of the seed documents' numbers (docs/SEEDS.md maps
//! those).

use crate::common::*;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// README.md and every markdown file in docs/, as paths relative to the repository.
fn documents() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".to_string());
    docs
}

/// The lines of a markdown text outside fenced code blocks, with inline code spans emptied.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut out = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                out.push_str(part);
            }
        }
        lines.push(out);
    }
    lines
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// The targets of the markdown links and images in a text (outside code).
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_documents_reaches_a_file_and_heading() {
    let mut checked = 0;
    for doc in documents() {
        let text = read(&doc);
        let dir = root().join(&doc).parent().unwrap().to_path_buf();
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').map_or((target.as_str(), None), |(p, a)| (p, Some(a)));
            let file = if path.is_empty() { root().join(&doc) } else { dir.join(path) };
            assert!(file.exists(), "{doc}: the link `{target}` points at {}, which does not exist", file.display());
            if let Some(anchor) = anchor {
                let heads = anchors(&std::fs::read_to_string(&file).unwrap());
                assert!(heads.iter().any(|h| h == anchor), "{doc}: the link `{target}` names no heading of {path}");
            }
            checked += 1;
        }
    }
    assert!(checked > 30, "only {checked} links found: is the link reader broken?");
}

#[test]
fn the_link_reader_sees_links_and_broken_ones() {
    let text = "See [a](x.md#b) and `[not](code.md)`, ![pic](p.png).\n```\n[no](fence.md)\n```\n";
    assert_eq!(links(text), ["x.md#b", "p.png"]);
    assert_eq!(slug(" HTTP API (`agentloop serve`)"), "http-api-agentloop-serve");
    assert_eq!(slug(" Runs, follow-ups and answers"), "runs-follow-ups-and-answers");
}

#[test]
fn the_readme_opens_with_a_short_first_hour() {
    let readme = read("README.md");
    let start = readme.find("\n## The first hour\n").expect("a first-hour section");
    let first = readme[..start].lines().filter(|l| l.starts_with("## ")).count();
    assert_eq!(first, 0, "the first hour is the README's first section");
    let body = &readme[start + 1..];
    let body = &body[..body[3..].find("\n## ").map_or(body.len(), |i| i + 4)];
    assert!(body.lines().count() <= 85, "the first hour has {} lines; keep it to about 80", body.lines().count());
    let demo = body.find("make demo").expect("`make demo` in the first hour");
    let test = body.find("make test").expect("`make test` in the first hour");
    let install = body.find("make install").expect("install in the first hour");
    assert!(demo < install && test < install, "`make demo` and `make test` come first");
    for step in ["agentloop demo", "report.html", "ANTHROPIC_API_KEY", "crontab", "Today's digest", "docs/"] {
        assert!(body.contains(step), "the first hour misses `{step}`");
    }
}

#[test]
fn the_command_tables_name_every_subcommand() {
    let t = T::new();
    let help = stdout(&t.cmd().arg("--help").output().unwrap());
    let commands: Vec<&str> = help[help.find("Commands:\n").unwrap()..]
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("    "))
        .map(|l| l.split_whitespace().next().unwrap())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() > 20, "{commands:?}");
    for doc in ["README.md", "docs/COMMANDS.md"] {
        let text = read(doc);
        let table = &text[text.find("## Commands").unwrap_or_else(|| panic!("{doc}: a Commands section"))..];
        let cells: Vec<&str> = table
            .lines()
            .skip_while(|l| !l.starts_with("|---"))
            .skip(1)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_start_matches('|').split(" | ").next().unwrap())
            .collect();
        for c in &commands {
            assert!(
                cells.iter().any(|cell| cell.contains(&format!("`{c}`")) || cell.contains(&format!("`{c} "))),
                "{doc}'s command table misses `{c}`"
            );
        }
    }
}

#[test]
fn user_facing_pages_cite_no_seed_numbers() {
    for doc in documents() {
        if doc == "docs/SEEDS.md" || doc == "docs/ARCHITECTURE.md" {
            continue;
        }
        for (n, line) in read(&doc).lines().enumerate() {
            let lower = line.to_lowercase();
            for word in ["seed 00", "seed rfc", "seed's"] {
                assert!(!lower.contains(word), "{doc}:{}: `{word}` belongs in docs/SEEDS.md: {line}", n + 1);
            }
        }
    }
}
