//! Logging, tracing and metrics setup shared by every binary (see `docs/observability.md`).
//!
//! - Logs: human-readable, or JSON with `--log-format json` / `LOG_FORMAT=json`; level from
//!   `RUST_LOG` (default `info`). Spans carry `job_id` and `partition`, so every line logged
//!   inside them does too.
//! - Traces: OpenTelemetry over OTLP/HTTP (protobuf), configured by the standard `OTEL_*`
//!   variables. Off unless an endpoint is given (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or [`TelemetryOptions::otlp_endpoint`]): then no
//!   exporter, no propagation, and `tracing` spans cost what they always did.
//! - Metrics: OpenTelemetry instruments ([`crate::metrics`]), exported over OTLP with the same
//!   endpoint rule and/or kept in a Prometheus registry served by [`crate::metrics::serve`].
//! - W3C trace context travels in NATS headers: [`inject`] on every publish, [`set_parent`] on
//!   every consume, so one job is one trace across the nodes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::SystemTime;

use async_nats::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::{SpanKind, Tracer as _, TracerProvider as _};
use opentelemetry::{global, KeyValue};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

/// The instrumentation scope of every span and instrument we create.
pub const SCOPE: &str = "cuzk";

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Text,
    Json,
}

/// Telemetry flags shared by the node commands and `cuzk local`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TelemetryArgs {
    /// Log format (`LOG_FORMAT` is accepted too).
    #[arg(long = "log-format", env = "CUZK_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Serve Prometheus metrics (`/metrics`), `/healthz` and `/readyz` on this address, e.g.
    /// 127.0.0.1:9464 (the conventional Prometheus exporter port). Off unless given.
    #[arg(long = "metrics-addr", env = "CUZK_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Added to the port of --metrics-addr: one setting for every instance of a templated
    /// unit (`cuzk-gpu@N`: 9470 + N, for any N).
    #[arg(
        long = "metrics-port-offset",
        env = "CUZK_METRICS_PORT_OFFSET",
        default_value_t = 0
    )]
    pub metrics_port_offset: u16,
}

impl TelemetryArgs {
    /// The address the metrics and health endpoints listen on, offset applied.
    pub fn metrics_addr(&self) -> Result<Option<SocketAddr>, crate::config::ConfigError> {
        let Some(mut addr) = self.metrics_addr else {
            return Ok(None);
        };
        let port = addr
            .port()
            .checked_add(self.metrics_port_offset)
            .ok_or_else(|| crate::config::ConfigError::Invalid {
                name: "metrics_port_offset",
                message: format!(
                    "{addr} + {} is past the last port",
                    self.metrics_port_offset
                ),
            })?;
        addr.set_port(port);
        Ok(Some(addr))
    }
}

/// What [`init`] sets up.
#[derive(Debug, Clone, Default)]
pub struct TelemetryOptions {
    /// `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
    pub service_name: String,
    /// `None`: `LOG_FORMAT` decides (text unless `json`).
    pub log_format: Option<LogFormat>,
    /// OTLP/HTTP base URL (`/v1/traces`, `/v1/metrics` are appended). `None`: the `OTEL_*`
    /// variables decide, and without an endpoint there nothing is exported.
    pub otlp_endpoint: Option<String>,
    /// Keep a Prometheus registry of the metrics (for [`crate::metrics::serve`]).
    pub prometheus: bool,
}

impl TelemetryOptions {
    pub fn new(service_name: &str, args: &TelemetryArgs) -> TelemetryOptions {
        TelemetryOptions {
            service_name: service_name.to_owned(),
            log_format: args.log_format,
            otlp_endpoint: None,
            prometheus: args.metrics_addr.is_some(),
        }
    }
}

/// The process's telemetry providers; [`Telemetry::shutdown`] flushes them on exit.
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    registry: Option<prometheus::Registry>,
}

static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();
/// Whether spans are exported: lets the hot path skip trace-context work when they are not.
static TRACING: AtomicBool = AtomicBool::new(false);

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

/// Installs logging, tracing and metrics for the process. The providers are global, so the
/// first call wins; later calls (tests, the all-in-one cluster) return the first setup.
pub fn init(options: TelemetryOptions) -> &'static Telemetry {
    TELEMETRY.get_or_init(|| build(options))
}

/// Logging only (plus whatever the `OTEL_*` variables ask for), for callers without options.
pub fn init_logging() {
    init(TelemetryOptions {
        service_name: "cuzk".into(),
        ..Default::default()
    });
}

/// The setup made by [`init`], if any.
pub fn get() -> Option<&'static Telemetry> {
    TELEMETRY.get()
}

fn build(options: TelemetryOptions) -> Telemetry {
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    let explicit = options
        .otlp_endpoint
        .as_deref()
        .map(|e| e.trim_end_matches('/').to_owned());
    let traces_on = !disabled
        && (explicit.is_some()
            || env_set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || env_set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"));
    let otlp_metrics_on = !disabled
        && (explicit.is_some()
            || env_set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || env_set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"));
    // OTEL_SERVICE_NAME (read by the default detectors) wins over our default name.
    let mut resource = Resource::builder();
    if !env_set("OTEL_SERVICE_NAME") {
        resource = resource.with_service_name(options.service_name.clone());
    }
    let resource = resource
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();

    let mut problems = Vec::new();
    let tracer = traces_on
        .then(|| {
            let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
            if let Some(base) = &explicit {
                use opentelemetry_otlp::WithExportConfig;
                builder = builder.with_endpoint(format!("{base}/v1/traces"));
            }
            match builder.build() {
                Ok(exporter) => Some(
                    // The sampler comes from OTEL_TRACES_SAMPLER(_ARG) through the default config.
                    SdkTracerProvider::builder()
                        .with_batch_exporter(exporter)
                        .with_resource(resource.clone())
                        .build(),
                ),
                Err(e) => {
                    problems.push(format!("OTLP trace exporter: {e}"));
                    None
                }
            }
        })
        .flatten();

    let registry = options.prometheus.then(prometheus::Registry::new);
    let mut meter_builder = SdkMeterProvider::builder().with_resource(resource);
    let mut readers = 0;
    if let Some(registry) = &registry {
        match opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .without_target_info()
            .scope_info_enabled(false)
            .build()
        {
            Ok(reader) => {
                meter_builder = meter_builder.with_reader(reader);
                readers += 1;
            }
            Err(e) => problems.push(format!("Prometheus exporter: {e}")),
        }
    }
    if otlp_metrics_on {
        let mut builder = opentelemetry_otlp::MetricExporter::builder().with_http();
        if let Some(base) = &explicit {
            use opentelemetry_otlp::WithExportConfig;
            builder = builder.with_endpoint(format!("{base}/v1/metrics"));
        }
        match builder.build() {
            Ok(exporter) => {
                meter_builder = meter_builder.with_periodic_exporter(exporter);
                readers += 1;
            }
            Err(e) => problems.push(format!("OTLP metric exporter: {e}")),
        }
    }
    // Without a reader the global meter stays the no-op one: instruments cost nothing.
    let meter = (readers > 0).then(|| meter_builder.build());
    if let Some(meter) = &meter {
        global::set_meter_provider(meter.clone());
    }
    if let Some(tracer) = &tracer {
        global::set_text_map_propagator(TraceContextPropagator::new());
        global::set_tracer_provider(tracer.clone());
        TRACING.store(true, Ordering::Relaxed);
    }

    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let format = options.log_format.unwrap_or_else(|| {
        if std::env::var("LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json")) {
            LogFormat::Json
        } else {
            LogFormat::Text
        }
    });
    let logs = match format {
        LogFormat::Json => fmt::layer().json().with_writer(std::io::stderr).boxed(),
        LogFormat::Text => fmt::layer().compact().with_writer(std::io::stderr).boxed(),
    };
    let otel = tracer
        .as_ref()
        .map(|t| tracing_opentelemetry::layer().with_tracer(t.tracer(SCOPE)));
    // A subscriber installed earlier (a test harness) stays; ours is then not used.
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(logs)
        .with(otel)
        .try_init();
    for problem in problems {
        tracing::warn!("{problem}; continuing without it");
    }
    Telemetry {
        tracer,
        meter,
        registry,
    }
}

impl Telemetry {
    /// The Prometheus registry, when [`TelemetryOptions::prometheus`] asked for one.
    pub fn registry(&self) -> Option<&prometheus::Registry> {
        self.registry.as_ref()
    }

    /// Exports whatever spans and metrics are buffered (blocking: call from a blocking context
    /// or accept a short stall).
    pub fn flush(&self) {
        if let Some(tracer) = &self.tracer {
            let _ = tracer.force_flush();
        }
        if let Some(meter) = &self.meter {
            let _ = meter.force_flush();
        }
    }

    /// Flushes and stops the exporters; call once on exit.
    pub fn shutdown(&self) {
        if let Some(tracer) = &self.tracer {
            if let Err(e) = tracer.shutdown() {
                eprintln!("cuzk: flushing traces failed: {e}");
            }
        }
        if let Some(meter) = &self.meter {
            if let Err(e) = meter.shutdown() {
                eprintln!("cuzk: flushing metrics failed: {e}");
            }
        }
    }
}

/// Flushes and stops the process's exporters, if [`init`] ran.
pub fn shutdown() {
    if let Some(telemetry) = get() {
        telemetry.shutdown();
    }
}

/// Whether spans are being exported.
pub fn tracing_enabled() -> bool {
    TRACING.load(Ordering::Relaxed)
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key, value.as_str());
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| k.as_ref()).collect()
    }
}

/// Writes `span`'s W3C trace context (`traceparent`, `tracestate`) into outgoing headers.
pub fn inject(span: &tracing::Span, headers: &mut HeaderMap) {
    if tracing_enabled() {
        let cx = span.context();
        global::get_text_map_propagator(|p| p.inject_context(&cx, &mut HeaderInjector(headers)));
    }
}

/// Makes `span` a child of the trace context carried by an incoming message; without one the
/// span stays a root (or a child of whatever span it was created in). Call before the span is
/// first entered.
pub fn set_parent(span: &tracing::Span, headers: Option<&HeaderMap>) {
    if !tracing_enabled() {
        return;
    }
    let Some(headers) = headers else { return };
    let parent = global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(headers)));
    use opentelemetry::trace::TraceContextExt;
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// OpenTelemetry's messaging `send` span for a publish to `subject`; [`inject`] it into the
/// message's headers so the consumer's [`process_span`] becomes its child. `cuzk.job_id` may be
/// recorded on it.
pub fn send_span(subject: &str, message_id: &str, body_size: usize) -> tracing::Span {
    tracing::info_span!(
        "send",
        otel.name = %format!("send {subject}"),
        otel.kind = "producer",
        messaging.system = "nats",
        messaging.operation.type = "send",
        messaging.operation.name = "send",
        messaging.destination.name = subject,
        messaging.message.id = message_id,
        messaging.message.body.size = body_size,
        cuzk.job_id = tracing::field::Empty,
    )
}

/// OpenTelemetry's messaging `process` span for a JetStream message taken from a durable
/// consumer (its group); cuzk's own attributes are namespaced: `cuzk.stream_seq`,
/// `cuzk.delivered` (JetStream's delivery count), and `cuzk.job_id`, `cuzk.partition`,
/// `cuzk.worker` for the node to record. Call [`set_parent`] on it before it is entered.
pub fn process_span(message: &async_nats::jetstream::Message) -> tracing::Span {
    let info = message.info().ok();
    tracing::info_span!(
        "process",
        otel.name = %format!("process {}", message.subject),
        otel.kind = "consumer",
        messaging.system = "nats",
        messaging.operation.type = "process",
        messaging.operation.name = "process",
        messaging.destination.name = %message.subject,
        messaging.consumer.group.name = info.as_ref().map(|i| i.consumer),
        messaging.message.body.size = message.payload.len(),
        cuzk.stream_seq = info.as_ref().map(|i| i.stream_sequence),
        cuzk.delivered = info.as_ref().map(|i| i.delivered),
        cuzk.job_id = tracing::field::Empty,
        cuzk.partition = tracing::field::Empty,
        cuzk.worker = tracing::field::Empty,
    )
}

/// Records a finished interval that no code was running for — a message waiting in a queue —
/// as a span under `parent`, from the message's publication to its consumption.
pub fn record_wait(parent: &tracing::Span, name: &'static str, start: SystemTime, end: SystemTime) {
    if !tracing_enabled() || end < start {
        return;
    }
    use opentelemetry::trace::Span as _;
    let tracer = global::tracer(SCOPE);
    let mut span = tracer
        .span_builder(name)
        .with_kind(SpanKind::Internal)
        .with_start_time(start)
        .start_with_context(&tracer, &parent.context());
    span.end_with_timestamp(end);
}

/// When JetStream stored `message` (the server's clock): the start of its queue wait.
pub fn published_at(message: &async_nats::jetstream::Message) -> Option<SystemTime> {
    let nanos = message.info().ok()?.published.unix_timestamp_nanos();
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_nanos(u64::try_from(nanos).ok()?))
}
