//! The documents are the tests: every command line of README.md and docs/*.md that a person
//! would paste into a shell runs here as written, and must exit 0.
//!
//! The lines are those of the ```sh, ```bash and ```console blocks (in a console block, the
//! lines after `$ `); a command continued with `\` or spanning lines (`case … esac`, a
//! here-document) is one command; comment lines are not commands. Each document runs as one shell session, top to
//! bottom (an `export` holds for the lines after it; background jobs are stopped at its end), in
//! a temporary HOME that is also the current folder, with the built binary on PATH as
//! `agentloop`, and with every model provider answered by the fake chat model on 127.0.0.1
//! (tests/it/chat.rs), named by `AGENTLOOP_LLM__BASE_URL`: an API key a line sets is only a
//! string (`OPENAI_API_KEY` is set, as for a user with a provider), and a run costs what its
//! model's price says. A pipeline fails when any part of it fails. README.md starts from an
//! empty HOME, as a newcomer does; each page of docs/ starts where the README's first hour
//! ends, with its workspaces `ws` and `~/digest` each holding a finished run.
//!
//! A line that shows a failure says which, visibly: its comment holds `exit N` (`# exit 11: the
//! slot already ran`), and it must exit N — no other code, 0 included.
//!
//! A line that cannot run here says so in the document, visibly: its comment holds
//! `needs: WHAT` (a real provider, a desktop, a source tree, a Ductile gateway, ...), and it is
//! not run. A whole block is left out the same way by a line `<!-- needs: WHAT -->` right above
//! it. Nothing else is left out: a new line in a document is run without a change here.

use crate::chat::model_server;
use crate::common::*;
use std::path::{Path, PathBuf};

/// One command of a document: where it starts, its text, and what it needs if it cannot run.
#[derive(Debug, Clone)]
struct Cmd {
    doc: String,
    line: usize,
    text: String,
    needs: Option<String>,
    /// The exit code the line's comment says it ends with (`# exit N`), else 0.
    exit: i32,
}

/// Whether a shell text is a complete command (`bash -n`): a `case` line alone is not, nor a
/// here-document's first line (bash accepts it, warning that the document ended early).
fn complete(text: &str) -> bool {
    std::process::Command::new("bash")
        .args(["-n", "-c", text])
        .output()
        .is_ok_and(|o| o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("here-document"))
}

/// What a line's trailing comment (or a block's `<!-- needs: ... -->`) says it needs.
fn needs_of(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let at = l.find("needs:")?;
        l[..at].contains('#').then(|| l[at + 6..].trim().to_string())
    })
}

/// The exit code a command's comment names, else 0: the comment is the mark `# exit N`, alone or
/// followed by `:` and why (`# exit 11: the slot already ran`). A comment that only speaks of
/// exit codes (`# exit 1 when a case falls short`) is no mark.
fn exit_of(text: &str) -> i32 {
    text.lines()
        .find_map(|l| {
            let hash = l.find(" #").map(|i| i + 1).or_else(|| l.starts_with('#').then_some(0))?;
            let mark = l[hash + 1..].trim().strip_prefix("exit ")?;
            let digits: String = mark.chars().take_while(char::is_ascii_digit).collect();
            let rest = &mark[digits.len()..];
            (rest.is_empty() || rest.starts_with(':')).then(|| digits.parse().ok()).flatten()
        })
        .unwrap_or(0)
}

/// The command of a crontab line, as cron runs it: after the five time fields (or an `@daily`
/// nickname), with `\%` as `%` (cron reads a bare `%` as a line break; none is used here).
fn cron_command(line: &str) -> Option<String> {
    let l = line.trim_start();
    let fields = if l.starts_with('@') { 1 } else { 5 };
    let mut rest = l;
    for _ in 0..fields {
        let end = rest.find(char::is_whitespace)?;
        rest = rest[end..].trim_start();
    }
    (!rest.is_empty()).then(|| rest.replace("\\%", "%"))
}

/// The shell commands of a markdown text.
fn commands(doc: &str, text: &str) -> Vec<Cmd> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        let Some(info) = fence.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let info = info.trim().to_string();
        let block_needs = (i > 0)
            .then(|| lines[i - 1].trim())
            .and_then(|l| l.strip_prefix("<!-- needs:"))
            .map(|l| l.trim_end_matches("-->").trim().to_string());
        let end = (i + 1..lines.len()).find(|&j| lines[j].trim_start().starts_with("```")).unwrap_or(lines.len());
        if info == "crontab" {
            for (j, l) in lines.iter().enumerate().take(end).skip(i + 1) {
                if l.trim().is_empty() || l.trim_start().starts_with('#') {
                    continue;
                }
                let Some(cmd) = cron_command(l) else { continue };
                let needs = block_needs.clone().or_else(|| needs_of(&cmd));
                let exit = exit_of(&cmd);
                out.push(Cmd { doc: doc.to_string(), line: j + 1, text: cmd, needs, exit });
            }
        }
        if ["sh", "bash", "console"].contains(&info.as_str()) {
            let mut j = i + 1;
            while j < end {
                let mut raw = lines[j];
                if info == "console" {
                    match raw.strip_prefix("$ ") {
                        Some(c) => raw = c,
                        None => {
                            j += 1;
                            continue;
                        }
                    }
                }
                if raw.trim().is_empty() || raw.trim_start().starts_with('#') {
                    j += 1;
                    continue;
                }
                let start = j;
                let mut cmd = raw.to_string();
                while (cmd.ends_with('\\') || !complete(&cmd)) && j + 1 < end {
                    j += 1;
                    cmd.push('\n');
                    cmd.push_str(lines[j]);
                }
                let needs = block_needs.clone().or_else(|| needs_of(&cmd));
                let exit = exit_of(&cmd);
                out.push(Cmd { doc: doc.to_string(), line: start + 1, text: cmd, needs, exit });
                j += 1;
            }
        }
        i = end + 1;
    }
    out
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn documents() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| format!("docs/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|n| n.ends_with(".md"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".into());
    docs
}

/// What a page of docs/ may take as done: the README's first hour, whose workspaces (`ws` and
/// `~/digest`, each with a finished run) the pages speak of.
const FIRST_HOUR: &str = r#"agentloop -w ws run --goal "Critique https://example.com/essay in two paragraphs" -q >/dev/null
agentloop -w ~/digest run --goal "Digest of https://example.com/feed: 5 items, one line each" -q >/dev/null
"#;

/// Runs a document's commands as one shell session after `setup`: (exit code of each, the
/// output of each).
fn run_session(t: &T, model: &str, setup: &str, cmds: &[Cmd]) -> Vec<(Option<i32>, String)> {
    let bin = t.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("agentloop");
    if !link.exists() {
        std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin("agentloop"), &link).unwrap();
    }
    let out = t.path("out");
    std::fs::create_dir_all(&out).unwrap();
    // Each command sees the exit code of the one before it (`case $? in` after a run), reads
    // no stdin of the test's, and writes its own output file.
    // A pipeline fails when any part does (`agentloop ... | jq` is not judged by jq alone).
    let mut script = format!("set -o pipefail\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\ncd ~\n{setup}__rc=0\n");
    for (i, c) in cmds.iter().enumerate() {
        script.push_str(&format!(
            "(exit $__rc)\n{{ {}\n}} </dev/null >{dir}/{i}.out 2>&1\n__rc=$?\necho \"$__rc\" >{dir}/{i}.rc\n",
            c.text,
            dir = out.display()
        ));
    }
    std::fs::write(t.path("session.sh"), &script).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let status = std::process::Command::new("timeout")
        .args(["300", "bash", "session.sh"])
        .env_clear()
        .env("PATH", path)
        .env("HOME", t.path("home"))
        // A user who has a provider: any key will do, the fake model answers every one.
        .env("OPENAI_API_KEY", "sk-docs-test")
        .env("AGENTLOOP_LLM__BASE_URL", model)
        .env("AGENTLOOP_LLM__BACKOFF_MS", "10")
        .current_dir(t.root())
        .status()
        .unwrap();
    // A session that timed out shows as the first command with no exit code.
    let _ = status;
    (0..cmds.len())
        .map(|i| {
            let rc = std::fs::read_to_string(out.join(format!("{i}.rc"))).ok().and_then(|s| s.trim().parse().ok());
            (rc, std::fs::read_to_string(out.join(format!("{i}.out"))).unwrap_or_default())
        })
        .collect()
}

#[test]
fn the_extractor_joins_continued_lines_and_reads_needs_marks() {
    let md = "```sh\nagentloop a \\\n  --b   # note\ncase $? in\n  0) echo ok ;;\nesac\n# a comment\nmake x   # builds; needs: the source tree\n```\n\
              ```console\n$ agentloop c\noutput\n```\n<!-- needs: a gateway -->\n```sh\nductile x\n```\n```yaml\na: b\n```\n";
    let c = commands("X.md", md);
    let texts: Vec<&str> = c.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "agentloop a \\\n  --b   # note",
            "case $? in\n  0) echo ok ;;\nesac",
            "make x   # builds; needs: the source tree",
            "agentloop c",
            "ductile x"
        ]
    );
    assert_eq!(c.iter().map(|c| c.line).collect::<Vec<_>>(), [2, 4, 8, 11, 16]);
    let needs: Vec<Option<&str>> = c.iter().map(|c| c.needs.as_deref()).collect();
    assert_eq!(needs, [None, None, Some("the source tree"), None, Some("a gateway")]);
    assert!(c.iter().all(|c| c.exit == 0));
    let c = commands(
        "X.md",
        "```sh\nagentloop -w ws run --slot x   # exit 11: it already ran\necho \"exit $?\" || echo exit 3\n```\n",
    );
    assert_eq!(c.iter().map(|c| c.exit).collect::<Vec<_>>(), [11, 0]);
    let c = commands(
        "X.md",
        "```sh\nagentloop eval s.yaml   # exit 1 when a case falls short\nagentloop x  # exit 4\n```\n",
    );
    assert_eq!(c.iter().map(|c| c.exit).collect::<Vec<_>>(), [0, 4]);
    // A crontab line is run as cron runs it: its command, `\%` read as `%`.
    let c = commands(
        "X.md",
        "```crontab\n# crontab -e\n0 7 * * *  agentloop run --slot \"$(date +\\%F)\" -q\n@daily  echo hi\n```\n",
    );
    let texts: Vec<&str> = c.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["agentloop run --slot \"$(date +%F)\" -q", "echo hi"]);
    assert_eq!(c.iter().map(|c| c.line).collect::<Vec<_>>(), [3, 4]);
    // A here-document is one command with its text.
    let c = commands("X.md", "```sh\ncat > s.yaml <<'EOF'\n# a: comment\nname: x\nEOF\nagentloop eval s.yaml\n```\n");
    let texts: Vec<&str> = c.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["cat > s.yaml <<'EOF'\n# a: comment\nname: x\nEOF", "agentloop eval s.yaml"]);
}

#[test]
fn every_documented_command_runs_as_written() {
    let model = model_server();
    let mut failures = Vec::new();
    let mut ran = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(repo().join(&doc)).unwrap();
        let cmds: Vec<Cmd> = commands(&doc, &text).into_iter().filter(|c| c.needs.is_none()).collect();
        if cmds.is_empty() {
            continue;
        }
        let t = T::new();
        let setup = if doc == "README.md" { "" } else { FIRST_HOUR };
        for (c, (rc, output)) in cmds.iter().zip(run_session(&t, &model.url, setup, &cmds)) {
            ran += 1;
            if rc != Some(c.exit) {
                let tail: String = output
                    .lines()
                    .rev()
                    .take(8)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n    ");
                failures.push(format!(
                    "{}:{}: exit {rc:?} (the document says {}): {}\n    {tail}",
                    c.doc, c.line, c.exit, c.text
                ));
            }
        }
    }
    assert!(ran > 20, "only {ran} documented commands ran");
    assert!(
        failures.is_empty(),
        "{} documented commands fail as written (mark one that cannot run offline with `# needs: WHAT`):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
