//! OpenTelemetry traces (docs/OBSERVABILITY.md): OTLP/HTTP spans that follow the GenAI semantic
//! conventions ([`SEMCONV`]), off unless an endpoint is configured.
//!
//! The tree: one `invoke_agent {agent}` span per process that drives a run, whose children are a
//! `chat {model}` span per model call (made by `model::traced`) and an `execute_tool {tool}` span
//! per action ([`tool`]). The run span joins the caller's trace when `TRACEPARENT` (W3C) is in
//! the environment; its own context is kept in state.json (`trace_parent`) the first time, so a
//! later process on the same run (event mode's next turn, a resumed `run`) joins the same trace
//! as its child.
//!
//! Invariants: nothing here fails or slows a run. Spans are batched in memory and exported by a
//! background thread and as the run's span ends, each export bounded by
//! [`http::TIMEOUT`]; a collector that is down costs at most one warning on stderr. Message
//! content goes on spans only with `otel.capture_content`, redacted like everything else the
//! program writes.

mod http;

use agentloop_config::config::Config;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, ContextGuard, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

/// The version of the OpenTelemetry semantic conventions for generative AI (development status)
/// whose span names and attributes agentloop follows.
pub const SEMCONV: &str = "1.38.0";

/// Where spans go and what they carry, resolved from `otel:` and the standard variables.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The full traces URL (`…/v1/traces`).
    pub url: String,
    pub headers: BTreeMap<String, String>,
    pub capture_content: bool,
    pub service: String,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// The traces URL for a base endpoint, as the OTLP exporter specification builds it.
fn traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    }
}

/// The export the configuration asks for; None when traces are off. The standard variables win
/// over `otel:` (the environment wins over config files): `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
/// the traces URL as is, `OTEL_EXPORTER_OTLP_ENDPOINT` and `otel.endpoint` a base URL;
/// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn traces off. The exporter adds
/// `OTEL_EXPORTER_OTLP_HEADERS` (and `…_TRACES_HEADERS`) to `otel.headers` itself.
pub fn export(cfg: &Config) -> Option<Export> {
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
    {
        return None;
    }
    let url = match (var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), var("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        (Some(url), _) => url,
        (None, Some(base)) => traces_url(&base),
        (None, None) => traces_url(cfg.otel.endpoint.as_deref().map(str::trim).filter(|e| !e.is_empty())?),
    };
    Some(Export {
        url,
        headers: cfg.otel.headers.clone(),
        capture_content: cfg.otel.capture_content,
        service: var("OTEL_SERVICE_NAME").unwrap_or_else(|| "agentloop".into()),
    })
}

/// One process's exporter for a run: made as the run's span starts and carried in that span's
/// context, so the `chat` and `execute_tool` spans made meanwhile on the thread find it (a run
/// started inside another's span shares the outer one's). It is a value, not process state:
/// the run span that made it flushes it as it ends ([`RunSpan`]'s drop).
#[derive(Clone)]
struct Telemetry(std::sync::Arc<Otel>);

struct Otel {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    url: String,
    /// The first export that failed, noted by the exporter's thread ([`Watched`]).
    failed: Failed,
}

type Failed = std::sync::Arc<std::sync::Mutex<Option<String>>>;

/// The exporter of the spans now being made on this thread, if a run span carries one.
fn current() -> Option<Telemetry> {
    Context::map_current(|cx| cx.get::<Telemetry>().cloned())
}

/// Whether this configuration asks for spans: a model built for it is wrapped in `chat` spans,
/// which are made while a run span carries its exporter.
pub fn wanted(cfg: &Config) -> bool {
    export(cfg).is_some()
}

fn start(cfg: &Config) -> Option<Telemetry> {
    use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
    let e = export(cfg)?;
    // Header values are credentials: never in the trace, the log or an error.
    let env_headers = var("OTEL_EXPORTER_OTLP_TRACES_HEADERS").or_else(|| var("OTEL_EXPORTER_OTLP_HEADERS"));
    for v in e.headers.values().cloned().chain(env_headers.iter().flat_map(|h| header_values(h))) {
        agentloop_io::redact::register(&v);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(http::Ureq::new())
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(e.url.clone())
        .with_headers(e.headers.into_iter().collect::<HashMap<_, _>>())
        .with_timeout(http::TIMEOUT)
        .build();
    let exporter = match exporter {
        Ok(x) => x,
        Err(err) => {
            agentloop_io::output::warning(&format!("OpenTelemetry: spans will not be exported to {}: {err}", e.url));
            return None;
        }
    };
    let batch = BatchConfigBuilder::default().with_max_queue_size(16_384).build();
    let failed = Failed::default();
    let processor = BatchSpanProcessor::builder(Watched(exporter, failed.clone())).with_batch_config(batch).build();
    let resource = opentelemetry_sdk::Resource::builder_empty()
        .with_service_name(e.service)
        .with_attributes([KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))])
        .build();
    let provider = SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build();
    let scope = opentelemetry::InstrumentationScope::builder("agentloop")
        .with_version(env!("CARGO_PKG_VERSION"))
        .with_schema_url(format!("https://opentelemetry.io/schemas/{SEMCONV}"))
        .build();
    let tracer = provider.tracer_with_scope(scope);
    Some(Telemetry(std::sync::Arc::new(Otel { provider, tracer, url: e.url, failed })))
}

/// The OTLP exporter, noting the first failed export (the SDK only logs them, and a collector
/// that is down must be said once, not per batch and not never).
#[derive(Debug)]
struct Watched(opentelemetry_otlp::SpanExporter, Failed);

impl opentelemetry_sdk::trace::SpanExporter for Watched {
    fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> impl std::future::Future<Output = opentelemetry_sdk::error::OTelSdkResult> + Send {
        let sent = self.0.export(batch);
        let failed = self.1.clone();
        async move {
            let r = sent.await;
            if let Err(e) = &r {
                if let Ok(mut first) = failed.lock() {
                    first.get_or_insert_with(|| e.to_string());
                }
            }
            r
        }
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.force_flush()
    }
    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.0.set_resource(resource)
    }
}

/// The values of a `key=value,key=value` header list (URL-encoded values, as the variable is).
fn header_values(list: &str) -> Vec<String> {
    list.split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(_, v)| {
            url::form_urlencoded::parse(format!("v={}", v.trim()).as_bytes()).map(|(_, v)| v.into_owned()).collect()
        })
        .collect()
}

/// Whether this run's spans carry message content: `otel.capture_content` in the run's own
/// configuration (a profile or request may turn it off for its run, never on).
pub fn capture(cfg: &agentloop_config::config::Config) -> bool {
    cfg.otel.capture_content
}

impl Telemetry {
    /// Exports the spans still queued, as the run span that made this exporter ends. Bounded by
    /// the export timeout; a collector that did not take them is one warning per process,
    /// never a failed run.
    fn finish(&self) {
        let o = &self.0;
        let shut =
            o.provider.shutdown_with_timeout(http::TIMEOUT + Duration::from_millis(500)).err().map(|e| e.to_string());
        let failed = o.failed.lock().ok().and_then(|mut f| f.take());
        static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if let Some(why) = failed.or(shut) {
            if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                agentloop_io::output::warning(&format!("OpenTelemetry: spans were not exported to {}: {why}", o.url));
            }
        }
    }
}

/// A span in progress (a no-op without traces on); ended when dropped, if not before.
pub struct Span(Option<opentelemetry_sdk::trace::Span>);

impl Span {
    /// Starts a span named `name` as a child of the current run's span.
    pub fn start(name: String, kind: SpanKind, attributes: Vec<KeyValue>) -> Span {
        Span::start_at(name, kind, attributes, None)
    }

    fn start_at(name: String, kind: SpanKind, attributes: Vec<KeyValue>, at: Option<SystemTime>) -> Span {
        let Some(Telemetry(o)) = current() else { return Span(None) };
        let mut b = o.tracer.span_builder(name).with_kind(kind).with_attributes(attributes);
        if let Some(at) = at {
            b = b.with_start_time(at);
        }
        Span(Some(b.start_with_context(&o.tracer, &Context::current())))
    }

    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    pub fn set(&mut self, kv: KeyValue) {
        if let Some(s) = &mut self.0 {
            s.set_attribute(kv);
        }
    }

    /// Marks the span failed: `error.type` and the status (the description redacted).
    pub fn fail(&mut self, error_type: &str, description: &str) {
        if let Some(s) = &mut self.0 {
            s.set_attribute(KeyValue::new("error.type", error_type.to_string()));
            s.set_status(Status::error(agentloop_io::redact::redact(description)));
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(s) = &mut self.0 {
            s.end();
        }
    }
}

/// Text for a span attribute when content is captured: redacted like everything written.
pub fn content(text: &str) -> opentelemetry::Value {
    agentloop_io::redact::redact(text).into()
}

/// Longest `TRACEPARENT` taken: version 00 is 55 characters, and a later version may add
/// fields, but not kilobytes of them.
const MAX_TRACEPARENT: usize = 512;

/// The W3C trace context of the caller (`TRACEPARENT`, `TRACESTATE`), if it is one. One that is
/// not is one warning per process, whether traces are exported or not (the environment is
/// checked the same either way), showing at most its first 80 characters, on one line.
fn caller() -> Option<Context> {
    let parent = var("TRACEPARENT")?;
    let cx = (parent.len() <= MAX_TRACEPARENT).then(|| extract(&parent, var("TRACESTATE"))).flatten();
    // Once per process: `serve` and `worker` start a span for every run they drive.
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if cx.is_none() && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        let shown: String = parent.chars().take(80).collect();
        let more = if shown.len() < parent.len() { format!("… ({} bytes)", parent.len()) } else { String::new() };
        agentloop_io::output::warning(&format!(
            "TRACEPARENT `{}{more}` is not a W3C traceparent (00-<trace id>-<span id>-<flags>, at most {MAX_TRACEPARENT} bytes); the run does not join it",
            agentloop_io::output::one_line(&shown)
        ));
    }
    cx
}

fn extract(traceparent: &str, tracestate: Option<String>) -> Option<Context> {
    let mut carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    if let Some(s) = tracestate {
        carrier.insert("tracestate".into(), s);
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// `traceparent` with its flags set to sampled.
fn sampled(traceparent: &str) -> String {
    match traceparent.rsplit_once('-') {
        Some((head, _)) => format!("{head}-01"),
        None => traceparent.to_string(),
    }
}

fn traceparent(cx: &Context) -> Option<String> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    carrier.remove("traceparent")
}

/// The run's `invoke_agent` span, current on this thread while it lives: model calls and actions
/// made meanwhile are its children.
pub struct RunSpan {
    // Field order is drop order: the span ends (in `drop`) before the context is detached, and
    // the exporter this span made (if it made one) is flushed last.
    cx: Option<Context>,
    _attached: Option<ContextGuard>,
    made: Option<Telemetry>,
}

impl RunSpan {
    /// Starts the span for run `run_id` driven as `agent`: a child of the caller's `TRACEPARENT`,
    /// else of the run's earlier process (`stored`), else a new trace. `stored` is set to this
    /// span the first time, for the run's later processes.
    /// `provider` and `model` are what the run's model calls go to (`model::traced::run_span`
    /// works them out from the configuration, so this module needs no model client).
    pub fn start(
        cfg: &Config,
        (provider, model): (&str, Option<String>),
        run_id: &str,
        agent: Option<&str>,
        stored: &mut Option<String>,
    ) -> RunSpan {
        let caller = caller();
        let (telemetry, made) = match current() {
            Some(t) => (t, None),
            None => match start(cfg) {
                Some(t) => (t.clone(), Some(t)),
                None => return RunSpan { cx: None, _attached: None, made: None },
            },
        };
        let o = &telemetry.0;
        // The stored context is a workspace file's: it links the run's processes, and its
        // flags are ignored (a copied state.json must not turn this run's spans off).
        let parent = caller.or_else(|| stored.as_deref().and_then(|s| extract(&sampled(s), None))).unwrap_or_default();
        let agent = agent.unwrap_or("agentloop");
        // Required on the span: the provider the run's model calls go to (as `chat` spans name
        // it); the model it asks for is conditionally required, when known.
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("gen_ai.provider.name", provider.to_string()),
            KeyValue::new("gen_ai.agent.name", agent.to_string()),
            KeyValue::new("gen_ai.conversation.id", run_id.to_string()),
        ];
        if let Some(m) = model {
            attributes.push(KeyValue::new("gen_ai.request.model", m));
        }
        let span = o
            .tracer
            .span_builder(format!("invoke_agent {agent}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(&o.tracer, &parent);
        let cx = parent.with_span(span).with_value(telemetry);
        if stored.is_none() {
            *stored = traceparent(&cx);
        }
        RunSpan { _attached: Some(cx.clone().attach()), cx: Some(cx), made }
    }

    /// Records how this process's part of the run ended: the stop (`done`, `escalated`, …), or
    /// the error that ended it. A run stopped by its provider failing (exit 5) ended in an
    /// error, as a command that failed did: `error.type` and an error status. A run that needs
    /// a person or ran out of a limit ended as designed, so its status stays unset.
    pub fn ended(&self, stop: Result<&str, &agentloop_types::error::Error>) {
        let Some(cx) = &self.cx else { return };
        let span = cx.span();
        match stop {
            Ok(stop) => {
                span.set_attribute(KeyValue::new("agentloop.run.stop", stop.to_string()));
                if stop == agentloop_types::outcome::StopKind::Provider.as_str() {
                    span.set_attribute(KeyValue::new("error.type", stop.to_string()));
                    span.set_status(Status::error("the model provider failed after all retries"));
                }
            }
            Err(e) => {
                span.set_attribute(KeyValue::new("error.type", error_type(e)));
                span.set_status(Status::error(agentloop_io::redact::redact(&e.detail())));
            }
        }
    }
}

impl Drop for RunSpan {
    fn drop(&mut self) {
        if let Some(cx) = self.cx.take() {
            cx.span().end();
        }
        self._attached.take();
        if let Some(t) = self.made.take() {
            t.finish();
        }
    }
}

/// `error.type` for an error: its kind (`provider`, `budget`, `tool`, …).
pub fn error_type(e: &agentloop_types::error::Error) -> String {
    e.kind.as_str().to_string()
}

/// One action as it ran: an `execute_tool {tool}` span ending now, begun `duration_ms` ago.
/// `call_id` names the call (`<run id>:step:<n>`); `error` is the failed status, if it failed.
pub fn tool(
    capture: bool,
    call_id: &str,
    tool: &str,
    args: &serde_json::Value,
    result: (&str, Option<&str>),
    duration_ms: u64,
) {
    if current().is_none() {
        return;
    }
    let began = SystemTime::now().checked_sub(Duration::from_millis(duration_ms));
    let mut span = Span::start_at(
        format!("execute_tool {tool}"),
        SpanKind::Internal,
        vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool.to_string()),
            KeyValue::new("gen_ai.tool.call.id", call_id.to_string()),
            KeyValue::new("gen_ai.tool.type", "function"),
        ],
        began,
    );
    let (output, error) = result;
    if capture {
        span.set(KeyValue::new("gen_ai.tool.call.arguments", content(&args.to_string())));
        span.set(KeyValue::new("gen_ai.tool.call.result", content(output)));
    }
    if let Some(status) = error {
        span.fail(status, &format!("tool `{tool}` failed"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_endpoint_gets_the_traces_path_once() {
        assert_eq!(traces_url("http://h:4318"), "http://h:4318/v1/traces");
        assert_eq!(traces_url("http://h:4318/"), "http://h:4318/v1/traces");
        assert_eq!(traces_url("http://h:4318/v1/traces"), "http://h:4318/v1/traces");
    }

    #[test]
    fn a_stored_traceparent_is_always_sampled() {
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
        assert_eq!(sampled(tp), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        assert!(extract(&sampled(tp), None).unwrap().span().span_context().is_sampled());
    }

    #[test]
    fn a_traceparent_round_trips_and_a_bad_one_is_none() {
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let cx = extract(tp, None).expect("valid");
        assert_eq!(traceparent(&cx).as_deref(), Some(tp));
        assert!(extract("00-zz-b7ad6b7169203331-01", None).is_none());
        assert!(extract("00-00000000000000000000000000000000-b7ad6b7169203331-01", None).is_none());
    }

    #[test]
    fn header_values_are_url_decoded() {
        assert_eq!(header_values("api-key=a%20b, x=y"), vec!["a b".to_string(), "y".to_string()]);
    }
}
