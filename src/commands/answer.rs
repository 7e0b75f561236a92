//! `agentloop answer`: answer an escalated run's open question and go on with it.

use agentloop_engine::settings::Ctx;
use agentloop_types::error::Result;
use clap::Args;

/// Answer the open question of an escalated run, then go on with the same run.
///
/// The answer lands in memory.md (as a fact naming the question), decisions.md and the trace
/// (`run.answered`); the run goes on from Plan, or from Frame when it could not proceed at
/// framing. `agentloop status` shows the question. Same as `agentloop run --answer TEXT`.
/// With --output FILE, what stdout shows of a run that ends done is also written to FILE,
/// atomically, once it ended (as `run --output`).
///
/// Exit codes: as `run` (0 done, 3 escalated, 4 budget, 5 provider); 2 when the run has no
/// open question.
///
/// Examples:
///   agentloop -w ws answer "Use the 2024 figures; the 2025 report is not out yet"
///   echo "Yes, publish it" | agentloop -w ws answer -
///   agentloop -w ~/digest answer "Rust releases" -q --output ~/digest/today.txt
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct AnswerArgs {
    /// The answer, or - to read it from stdin.
    #[arg(value_name = "TEXT|-")]
    pub text: String,
    /// Stream trace entries as JSONL on stdout while the run goes on.
    #[arg(long)]
    pub events: bool,
    /// Also write what stdout shows to FILE, atomically, once the run ended done; any other end
    /// leaves FILE as it was, which a shell redirect would not.
    #[arg(long, value_name = "FILE", conflicts_with = "events")]
    pub output: Option<camino::Utf8PathBuf>,
}

pub fn run(ctx: Ctx, args: AnswerArgs) -> Result<u8> {
    let text = crate::commands::run::read_answer(&args.text)?;
    let req = agentloop_engine::lifecycle::Request::Answer(text);
    match &args.output {
        Some(file) => crate::commands::run::execute_into(&ctx, &req, file),
        None => crate::commands::run::execute(&ctx, &req, args.events),
    }
}
