//! agentloop-model: one model call and what it costs — the provider clients (OpenAI-compatible,
//! Anthropic, scripted) with streaming and retries, pricing, and OpenTelemetry spans.
//! Above agentloop-config, below the engine: it knows nothing of workspaces, tools' code or
//! phases (docs/ARCHITECTURE.md).

pub mod model;
#[cfg(feature = "otel")]
pub mod otel;
/// Without the `otel` feature: no spans; `otel.endpoint` is refused (config::merge).
#[cfg(not(feature = "otel"))]
#[path = "otel/off.rs"]
pub mod otel;
