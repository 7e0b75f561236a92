//! `agentloop completions SHELL` and `agentloop man`: generated from the CLI definition, so
//! they cannot drift from it (a test checks the committed man page). Neither reads configuration,
//! so a broken agentloop.yaml cannot stop them.

use agentloop_io::output::Printer;
use agentloop_types::error::Result;
use agentloop_types::error::ResultExt;
use clap::{Args, CommandFactory};

/// Print a shell completion script.
///
/// Example: agentloop completions bash > /etc/bash_completion.d/agentloop
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Print the man page (roff) generated from the CLI definition.
///
/// Example: agentloop man > man/agentloop.1
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ManArgs {}

pub fn completions(printer: &Printer, args: CompletionsArgs) -> Result<u8> {
    let mut cmd = super::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "agentloop", &mut buf);
    printer.out(&String::from_utf8_lossy(&buf));
    Ok(0)
}

pub fn render_man() -> Result<String> {
    let cmd = super::Cli::command();
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf).context("cannot render man page")?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let mut text = keep_quick_start_lines(&name_commands(&text));
    // The exit-code section is rendered from the one table in error.rs.
    text.push_str(".SH \"EXIT STATUS\"\n");
    for (n, meaning) in agentloop_types::error::code::TABLE {
        text.push_str(&format!(".TP\n{n}\n{}\n", meaning.replace('`', "").replace('-', "\\-")));
    }
    text.push_str(EXTRA);
    Ok(text)
}

/// clap_mangen names each subcommand as a page of its own (`agentloop-run(1)`), which is not
/// installed: the list names the command (`agentloop run`) and says where its options are.
fn name_commands(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.strip_prefix("agentloop\\-").and_then(|l| l.strip_suffix("(1)")) {
            Some(name) if !name.contains(' ') => out.push_str(&format!("agentloop {name}")),
            _ => out.push_str(line),
        }
        out.push('\n');
        if line == ".SH SUBCOMMANDS" {
            out.push_str("`agentloop COMMAND \\-\\-help` prints a command's own options.\n");
        }
    }
    out
}

/// The quick start is one command per line in `--help`; roff would fill it into one paragraph,
/// so it goes out as no-fill lines.
fn keep_quick_start_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_block = false;
    for line in text.lines() {
        if line.starts_with("Quick start") {
            out.push_str(".nf\n");
            in_block = true;
        } else if in_block && (line.starts_with('.') || line.is_empty()) {
            out.push_str(".fi\n");
            in_block = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    if in_block {
        out.push_str(".fi\n");
    }
    out
}

const EXTRA: &str = r#".SH FILES
.TP
<workspace>/context.md, memory.md, skills.md, plan.md, decisions.md
The paper trail, in markdown, for people and for the model.
.TP
<workspace>/trace.jsonl
Append-only structured log, one JSON object per line.
.TP
<workspace>/state.json, result.json
Machine state of the run; the final outcome.
.TP
<workspace>/agentloop.yaml, $XDG_CONFIG_HOME/agentloop/config.yaml
Configuration layers.
.SH ENVIRONMENT
ANTHROPIC_API_KEY, OPENAI_API_KEY, OLLAMA_HOST select and authenticate providers.
AGENTLOOP_WORKSPACE sets the workspace. AGENTLOOP_* set configuration keys
(AGENTLOOP_MAX_STEPS, AGENTLOOP_LLM__MODEL, ...). NO_COLOR disables colour.
AGENTLOOP_NOW fixes the clock (tests).
"#;

pub fn man(printer: &Printer, _args: ManArgs) -> Result<u8> {
    printer.out(&render_man()?);
    Ok(0)
}
