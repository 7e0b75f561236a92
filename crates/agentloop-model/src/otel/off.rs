//! OpenTelemetry in a build without the `otel` feature: the same calls, making no spans.
//! `otel.endpoint` is refused when the configuration is resolved; the standard `OTEL_*`
//! variables, which may be set for other programs, get one warning instead.

use agentloop_config::config::Config;
use std::sync::Once;

/// The version of the GenAI semantic conventions a build with traces follows.
pub const SEMCONV: &str = "1.38.0";

static WARNED: Once = Once::new();

/// Never: says once that the environment asks for traces this build cannot send.
pub fn wanted(_cfg: &Config) -> bool {
    let set = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"]
        .into_iter()
        .find(|v| std::env::var(v).is_ok_and(|x| !x.trim().is_empty()));
    if let Some(var) = set {
        WARNED.call_once(|| {
            agentloop_io::output::warning(&format!(
                "{var} is set, but this agentloop was built without the `otel` feature: no spans are exported"
            ))
        });
    }
    false
}

pub fn capture(_cfg: &Config) -> bool {
    false
}

/// The run's span: none.
pub struct RunSpan;

impl RunSpan {
    pub fn start(
        cfg: &Config,
        _model: (&str, Option<String>),
        _run_id: &str,
        _agent: Option<&str>,
        _stored: &mut Option<String>,
    ) -> RunSpan {
        wanted(cfg);
        RunSpan
    }
    pub fn ended(&self, _stop: Result<&str, &agentloop_types::error::Error>) {}
}

/// Callers end the run's span by dropping it, as with traces on.
impl Drop for RunSpan {
    fn drop(&mut self) {}
}

/// `error.type` for an error: its kind, as a build with traces names it.
pub fn error_type(e: &agentloop_types::error::Error) -> String {
    e.kind.as_str().to_string()
}

/// One action as it ran: no span.
pub fn tool(
    _capture: bool,
    _call_id: &str,
    _tool: &str,
    _args: &serde_json::Value,
    _result: (&str, Option<&str>),
    _duration_ms: u64,
) {
}
