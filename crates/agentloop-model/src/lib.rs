//! agentloop-model: one model call and what it costs — the provider clients (OpenAI-compatible,
//! Anthropic, scripted) with streaming and retries, pricing, the budget, a run's outcome, the
//! tool specs a model is shown, OpenTelemetry spans, and the run's stderr and log output.
//! Above agentloop-config, below the engine: it knows nothing of workspaces, tools' code or
//! phases (docs/ARCHITECTURE.md).

pub mod budget;
pub mod log;
pub mod model;
#[cfg(feature = "otel")]
pub mod otel;
/// Without the `otel` feature: no spans; `otel.endpoint` is refused (config::merge).
#[cfg(not(feature = "otel"))]
#[path = "otel/off.rs"]
pub mod otel;
pub mod outcome;
pub mod output;
pub mod tool_spec;
