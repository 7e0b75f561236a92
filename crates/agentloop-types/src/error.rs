//! The one error type of agentloop and the exit-code table.
//!
//! Every failure a user can see is an [`Error`]: a kind (which fixes the exit code), a message that
//! names the file or field and the action, the foreign error behind it kept as its source (the
//! system's, a parser's, a server's: printed as `Caused by:` lines, never baked into the
//! message), and hints, each the obvious next step (`hint:` lines).
//! The table below is documented in docs/COMMANDS.md and the man page; changing a number is a breaking
//! change for every cron script that reads it.

use std::fmt;

/// Documented process exit codes.
pub mod code {
    /// The command did what it was asked; a run ended `done`.
    pub const OK: u8 = 0;
    /// A runtime failure (I/O, internal error).
    pub const FAILURE: u8 = 1;
    /// Bad flags, bad arguments or bad configuration.
    pub const USAGE: u8 = 2;
    /// The run ended `escalated`: it needs a human.
    pub const ESCALATED: u8 = 3;
    /// The run ended `escalated` because a budget or limit ran out (steps, reframes, time, tokens, cost).
    pub const BUDGET: u8 = 4;
    /// The model provider failed after all retries (HTTP error, bad key, unreachable, script exhausted).
    pub const PROVIDER: u8 = 5;
    /// A tool ran and reported an error (`act`, `tools call`).
    pub const TOOL: u8 = 6;
    /// Another agentloop process holds the workspace lock.
    pub const LOCK_BUSY: u8 = 7;
    /// A workspace file is broken (plan.md Next Action, memory.md, state.json) and needs a fix.
    pub const DATA: u8 = 8;
    /// The run was refused before it started: its smallest course cannot fit `max_tokens` or
    /// `max_cost_usd` (negotiation; `run --force` overrides), or its task conflicts with one of
    /// the agent's `values` (not overridden).
    pub const NEGOTIATION: u8 = 9;
    /// The agent is resting: a rolling usage window (`rest:`) is full; `status` says until when.
    pub const RESTING: u8 = 10;
    /// Nothing was run, it already ran: `run --slot KEY` whose slot has a run that ended, or
    /// `run --goal` repeating the ended run's goal without `--follow-up`.
    pub const SLOT_TAKEN: u8 = 11;
    /// `runs diff --exit-code`: the runs compared differ by at least the threshold's count of
    /// changes (a cron job mails only then); `eval --baseline`: a case's pass rate fell.
    pub const CHANGED: u8 = 12;
    /// `handle` only: a configuration error that a router must never retry (EX_CONFIG).
    pub const HANDLE_CONFIG: u8 = 78;
    /// Ctrl-C (SIGINT): the process ends by the signal, which a shell reports as 128 + 2.
    pub const INTERRUPTED: u8 = 130;

    /// Every code with its meaning: the man page's EXIT STATUS section is rendered from this
    /// table, and tests hold docs/COMMANDS.md's table and the help footer to it.
    pub const TABLE: &[(u8, &str)] = &[
        (OK, "success; a run ended `done`"),
        (FAILURE, "runtime failure (I/O, internal error); `mcp check`: a server failed; `mcp login`: the sign-in failed; `run --events`: stdout was closed (the run stopped at a commit point; `run` resumes it); `eval`: a case fell short of its pass rate"),
        (USAGE, "usage or configuration error (bad flag, unknown config key, wrong type, no provider configured)"),
        (ESCALATED, "the run ended `escalated`: it needs a human (model asked, cannot proceed, repeated failures or actions, premature done)"),
        (BUDGET, "the run ended `escalated` because a budget or limit ran out (max_steps, max_reframes, timeout, tokens, cost)"),
        (PROVIDER, "the model provider failed after all retries (or the script ran out)"),
        (TOOL, "a tool reported an error (`act`, `tools call`, `mcp call`)"),
        (LOCK_BUSY, "another agentloop process holds the workspace lock"),
        (DATA, "a workspace file is broken (plan.md Next Action, memory.md checkboxes, state.json)"),
        (NEGOTIATION, "the run was refused before it started: its smallest course (Frame, one Plan, one Reflect) cannot fit `max_tokens` / `max_cost_usd` (negotiation; `run --force` overrides), or its task conflicts with one of the agent's `values` (`--force` does not override)"),
        (RESTING, "the agent is resting: a rolling usage window (`rest:`) is full (a run is refused, or a run that filled it stopped at a commit point: stop `resting`, `run --continue` after a rest), or its stress is at `stress.threshold`; `status` says when it may run again"),
        (SLOT_TAKEN, "nothing was run, no model called: a `run --slot KEY` whose slot already has a run that ended (done or not; the same command with `--force` runs the slot again, and stderr names the ways on), or a `run --goal` that repeats the goal of the workspace's ended run without `--follow-up` (its outcome is printed again)"),
        (CHANGED, "`runs diff --exit-code` (or `--threshold N`) only: the runs compared differ by at least N changes (a different ending, facts added or dropped, files under artifacts/ added, removed or changed); `eval --baseline FILE`: a case's pass rate fell below the baseline's"),
        (HANDLE_CONFIG, "`handle` only: configuration error that a router must never retry"),
        (INTERRUPTED, "interrupted by Ctrl-C (SIGTERM: 143, SIGHUP: 129): what was committed is kept, stderr says how to resume (`run` goes on)"),
    ];
}

/// What went wrong, which fixes the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Failure,
    Usage,
    /// Configuration that cannot be used (a file, key or value): exit 2, and 78 in `handle`,
    /// where a router must never retry it.
    Config,
    Escalated,
    Budget,
    Provider,
    Tool,
    LockBusy,
    Data,
    Negotiation,
    Resting,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Failure,
        Kind::Usage,
        Kind::Config,
        Kind::Escalated,
        Kind::Budget,
        Kind::Provider,
        Kind::Tool,
        Kind::LockBusy,
        Kind::Data,
        Kind::Negotiation,
        Kind::Resting,
    ];

    /// The kind in one lowercase word, as an OpenTelemetry span's `error.type` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Failure => "failure",
            Kind::Usage => "usage",
            Kind::Config => "config",
            Kind::Escalated => "escalated",
            Kind::Budget => "budget",
            Kind::Provider => "provider",
            Kind::Tool => "tool",
            Kind::LockBusy => "lockbusy",
            Kind::Data => "data",
            Kind::Negotiation => "negotiation",
            Kind::Resting => "resting",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
    /// The next steps a person may take, one `hint:` line each.
    pub hints: Vec<String>,
    /// What code may act on, so that no caller reads the message to decide.
    pub cause: Option<Cause>,
    /// The foreign error this one wraps (an I/O error, a parser's), kept for
    /// [`std::error::Error::source`].
    pub source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
}

/// A configuration value that cannot be used, at dotted `key`: a key that is none (`unknown`),
/// with `near` the valid key nearest it, or a value of the wrong kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyProblem {
    pub key: String,
    pub unknown: bool,
    pub near: Option<String>,
}

/// A fact about an error that code branches on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// A configuration value that cannot be used (boxed: an error stays small to return).
    ConfigKey(Box<KeyProblem>),
    /// A symbolic link stands where agentloop writes or reads its own files.
    Link,
    /// A server agentloop fetched from could not be reached, answered an error or sent what
    /// cannot be used.
    Upstream,
    /// A model provider's last answer was this HTTP status (a refusal not sent again, or the
    /// last of the retried ones): 404 is a model the provider does not have.
    Status(u16),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), hints: Vec::new(), cause: None, source: None }
    }
    pub fn failure(message: impl Into<String>) -> Self {
        Self::new(Kind::Failure, message)
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Kind::Usage, message)
    }
    /// A configuration error: names the file or key and the fix.
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(Kind::Config, message)
    }
    /// `what` (a subcommand, a flag, a configuration key) needs cargo feature `feature`, which
    /// this build left out (docs/ARCHITECTURE.md, "Cargo features"): a usage error, or a
    /// configuration error with `config`, naming the feature and how to get it.
    pub fn not_built(feature: &str, what: &str, config: bool) -> Self {
        let kind = if config { Kind::Config } else { Kind::Usage };
        Self::new(kind, format!("{what} needs the `{feature}` feature, which this agentloop was built without"))
            .with_hint(format!(
                "use a build with it: `cargo install --locked --path . --features {feature}` (a default build has every feature); `agentloop --version` lists a build's features"
            ))
    }
    pub fn data(message: impl Into<String>) -> Self {
        Self::new(Kind::Data, message)
    }
    pub fn provider(message: impl Into<String>) -> Self {
        Self::new(Kind::Provider, message)
    }
    pub fn tool(message: impl Into<String>) -> Self {
        Self::new(Kind::Tool, message)
    }
    /// An I/O error on a path: "cannot ACTION PATH", the system's error kept as the source
    /// (its text follows the message in [`Error`]'s `Display`, and prints as `Caused by:`).
    pub fn io(action: &str, path: impl fmt::Display, err: std::io::Error) -> Self {
        Self::failure(format!("cannot {action} {path}")).with_source(err)
    }
    /// Adds a next step (one more `hint:` line).
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }
    /// The first hint, if any.
    pub fn hint(&self) -> Option<&str> {
        self.hints.first().map(String::as_str)
    }
    pub fn with_cause(mut self, cause: Cause) -> Self {
        self.cause = Some(cause);
        self
    }
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(std::sync::Arc::new(source));
        self
    }
    /// [`Error::with_source`] for a source the message already says in its own words: kept for
    /// code to inspect, left out of [`Error::causes`] (and so never printed twice).
    pub fn with_told_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(std::sync::Arc::new(Told(Box::new(source))));
        self
    }
    /// [`Error::with_source`] for an error already boxed (a library's `Box<dyn Error>`).
    pub fn with_boxed_source(mut self, source: Box<dyn std::error::Error + Send + Sync>) -> Self {
        self.source = Some(std::sync::Arc::from(source));
        self
    }
    /// This error as the cause of a new one: `message` says what was being done (the file, the
    /// key); the kind, the cause and the hints are kept, and `self` becomes the source.
    pub fn context(self, message: impl Into<String>) -> Self {
        Error {
            kind: self.kind,
            message: message.into(),
            hints: self.hints.clone(),
            cause: self.cause.clone(),
            source: Some(std::sync::Arc::new(self)),
        }
    }
    /// The message, then each of [`Error::causes`] after `: `, on one line: the text a warning, a
    /// log line or an answer to another program carries (the printer puts the causes on lines of
    /// their own).
    pub fn detail(&self) -> String {
        let mut out = self.message.clone();
        for cause in self.causes() {
            out.push_str(": ");
            out.push_str(&cause);
        }
        out
    }
    /// The text of each error behind this one, outermost first: an agentloop error by its
    /// message, a foreign one by its `Display`. A cause whose text is already said (by the
    /// message or an earlier cause) or is empty is left out, so nothing is said twice.
    pub fn causes(&self) -> Vec<String> {
        let mut said = self.message.clone();
        let mut out = Vec::new();
        let mut next = std::error::Error::source(self);
        while let Some(e) = next {
            let text = match (e.downcast_ref::<Error>(), e.is::<Told>()) {
                (Some(ours), _) => ours.message.clone(),
                (None, true) => String::new(),
                (None, false) => e.to_string(),
            };
            let text = text.trim();
            if !text.is_empty() && !said.contains(text) {
                said.push('\n');
                said.push_str(text);
                out.push(text.to_string());
            }
            next = e.source();
        }
        out
    }
    pub fn exit_code(&self) -> u8 {
        match self.kind {
            Kind::Failure => code::FAILURE,
            Kind::Usage | Kind::Config => code::USAGE,
            Kind::Escalated => code::ESCALATED,
            Kind::Budget => code::BUDGET,
            Kind::Provider => code::PROVIDER,
            Kind::Tool => code::TOOL,
            Kind::LockBusy => code::LOCK_BUSY,
            Kind::Data => code::DATA,
            Kind::Negotiation => code::NEGOTIATION,
            Kind::Resting => code::RESTING,
        }
    }
}

/// [`Error::detail`]: the message and the causes on one line, so that text made from an error
/// (`to_string()`, a tool result, a log line) loses nothing. The printer reads the parts instead.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail())
    }
}

/// A source the message already says in its own words (a tool's "no such file or folder" for
/// the system's `ENOENT`): kept in the chain for code to inspect, never printed again.
#[derive(Debug)]
struct Told(Box<dyn std::error::Error + Send + Sync>);

impl fmt::Display for Told {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Told {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Wrapping a failure with what was being done, the failure kept as the source.
///
/// `read(path).context(format!("reading {path}"))?`: an agentloop [`Error`] keeps its kind, cause
/// and hints; a foreign error (I/O, a parser's) becomes a [`Kind::Failure`], or the kind given
/// to [`ResultExt::context_as`].
pub trait ResultExt<T> {
    fn context(self, message: impl Into<String>) -> Result<T>;
    fn context_as(self, kind: Kind, message: impl Into<String>) -> Result<T>;
    /// [`ResultExt::context`] with the message made only on failure.
    fn with_context(self, message: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> ResultExt<T> for std::result::Result<T, E> {
    fn context(self, message: impl Into<String>) -> Result<T> {
        self.map_err(|e| wrap(e, None, message.into()))
    }
    fn context_as(self, kind: Kind, message: impl Into<String>) -> Result<T> {
        self.map_err(|e| wrap(e, Some(kind), message.into()))
    }
    fn with_context(self, message: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| wrap(e, None, message()))
    }
}

fn wrap<E: std::error::Error + Send + Sync + 'static>(e: E, kind: Option<Kind>, message: String) -> Error {
    let any: Box<dyn std::any::Any> = Box::new(e);
    match any.downcast::<Error>() {
        Ok(ours) => {
            let kind = kind.unwrap_or(ours.kind);
            Error { kind, ..ours.context(message) }
        }
        Err(any) => match any.downcast::<E>() {
            Ok(foreign) => Error::new(kind.unwrap_or(Kind::Failure), message).with_source(*foreign),
            // Unreachable: the box holds an `E`.
            Err(_) => Error::new(kind.unwrap_or(Kind::Failure), message),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_follow_the_chain_and_skip_what_is_said() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let e = Error::io("read", "a.yaml", io).with_hint("create it");
        let e = Err::<(), _>(e).context("loading the configuration").unwrap_err();
        assert_eq!(e.kind, Kind::Failure);
        assert_eq!(e.causes(), ["cannot read a.yaml", "No such file or directory"]);
        assert_eq!(e.to_string(), e.detail());
        assert_eq!(e.detail(), "loading the configuration: cannot read a.yaml: No such file or directory");
        assert_eq!(e.hints, ["create it"]);
        let said = Error::usage("bad: No such file or directory")
            .with_source(std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"));
        assert!(said.causes().is_empty());
        let told = Error::tool("a.md: no such file or folder")
            .with_told_source(std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"));
        assert!(told.causes().is_empty() && std::error::Error::source(&told).is_some());
        assert_eq!(said.detail(), "bad: No such file or directory");
    }

    #[test]
    fn a_foreign_error_takes_the_kind_given() {
        let bad = "x".parse::<u32>().context_as(Kind::Usage, "--n `x`").unwrap_err();
        assert_eq!((bad.kind, bad.exit_code()), (Kind::Usage, code::USAGE));
        assert_eq!(bad.causes(), ["invalid digit found in string"]);
        assert!(std::error::Error::source(&bad).is_some());
    }

    /// The words spans have always carried: the variant's name in lowercase.
    #[test]
    fn a_kind_is_named_by_its_variant_in_lowercase() {
        for k in Kind::ALL {
            assert_eq!(k.as_str(), format!("{k:?}").to_ascii_lowercase());
        }
    }
}
