//! The cluster's metrics (OpenTelemetry instruments) and the HTTP listener that serves them in
//! Prometheus text format next to `/healthz` and `/readyz`.
//!
//! Naming: OpenTelemetry names are dotted with a UCUM unit (`cuzk.stage.duration`, unit `s`);
//! the Prometheus exporter turns them into `cuzk_stage_duration_seconds`, adding the unit and,
//! for counters, `_total`. The full list is in `docs/observability.md`.
//!
//! Instruments are created from the global meter the first time [`metrics`] is called, so
//! [`crate::telemetry::init`] must run before; without a metrics reader they are no-ops.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::global;
use opentelemetry::metrics::{Counter, Gauge, Histogram, UpDownCounter};
/// Re-exported so the nodes can label measurements without depending on `opentelemetry`.
pub use opentelemetry::KeyValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use cuzk_wire::job::{PartitionTimings, Stage};

use crate::telemetry::SCOPE;

/// Stage latency buckets, seconds: a millisecond (small blobs, queue hops) to a quarter hour
/// (a 32 GiB partition's synthesis).
const STAGE_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0,
    100.0, 250.0, 500.0, 1000.0,
];
const RATIO_BUCKETS: &[f64] = &[
    1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0,
];

/// The `circuit` (`sha256`, `porep-c2`) and `shape` (the parameter set, `porep-c2-32GiB`)
/// labels every per-job and per-partition measurement carries.
#[derive(Clone, Debug)]
pub struct JobLabels([KeyValue; 2]);

impl JobLabels {
    pub fn new(circuit: &str, shape: &str) -> JobLabels {
        JobLabels([
            KeyValue::new("circuit", circuit.to_owned()),
            KeyValue::new("shape", shape.to_owned()),
        ])
    }

    /// For a job rejected before its circuit was known.
    pub fn unknown() -> JobLabels {
        JobLabels::new("unknown", "unknown")
    }

    /// These labels and `extra`.
    pub fn with(&self, extra: &[KeyValue]) -> Vec<KeyValue> {
        self.0.iter().chain(extra).cloned().collect()
    }
}

pub struct Metrics {
    /// `cuzk_stage_duration_seconds{stage,circuit,shape}`: one observation per partition
    /// (job-level stages per job).
    pub stage_duration: Histogram<f64>,
    /// `cuzk_partitions_in_flight{role}`: partitions held by this node right now.
    pub partitions_in_flight: UpDownCounter<i64>,
    /// `cuzk_queue_depth{stream}`: messages waiting in a stream, sampled with the heartbeat.
    pub queue_depth: Gauge<u64>,
    /// `cuzk_blob_bytes_total{direction,form,circuit,shape}`: witness blob bytes, `wire`
    /// (compressed) uploaded and downloaded, and `raw` (32 bytes per field element) encoded.
    pub blob_bytes: Counter<u64>,
    /// `cuzk_codec_compression_ratio{circuit,shape}`: raw over wire bytes, one observation per
    /// blob.
    pub codec_ratio: Histogram<f64>,
    /// `cuzk_prover_busy_seconds_total{worker}`: time inside the prover; its rate is the
    /// worker's busy fraction.
    pub prover_busy: Counter<f64>,
    /// `cuzk_errors_total{role,kind,circuit,shape}`: failed attempts (`retry`) and failed jobs
    /// (`fatal`).
    pub errors: Counter<u64>,
    /// `cuzk_jobs_total{status,circuit,shape}`: jobs finished, by the node that reported them.
    pub jobs: Counter<u64>,
    /// `cuzk_refusals_total{tenant,recorded}`: submissions refused at intake, by tenant (`-`
    /// for the untenanted path); `recorded="false"` past the node's refusal limit (answered,
    /// not recorded).
    pub refusals: Counter<u64>,
    /// `cuzk_heartbeat_timestamp_seconds{role}`: when this node last stored its heartbeat
    /// (Unix time); a node that runs but cannot reach NATS shows here as growing staleness.
    pub heartbeat: Gauge<f64>,
    /// `cuzk_build_info{version,profile}`: 1, to tell builds apart in a fleet.
    pub build_info: Gauge<u64>,
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

/// The process's instruments.
pub fn metrics() -> &'static Metrics {
    METRICS.get_or_init(|| {
        let meter = global::meter(SCOPE);
        let metrics = Metrics {
            stage_duration: meter
                .f64_histogram("cuzk.stage.duration")
                .with_unit("s")
                .with_description("Duration of one pipeline stage")
                .with_boundaries(STAGE_BUCKETS.to_vec())
                .build(),
            partitions_in_flight: meter
                .i64_up_down_counter("cuzk.partitions.in_flight")
                .with_description("Partitions held by this node")
                .build(),
            queue_depth: meter
                .u64_gauge("cuzk.queue.depth")
                .with_description("Messages waiting in a stream")
                .build(),
            blob_bytes: meter
                .u64_counter("cuzk.blob")
                .with_unit("By")
                .with_description("Witness blob bytes")
                .build(),
            codec_ratio: meter
                .f64_histogram("cuzk.codec.compression")
                .with_unit("1")
                .with_description("Raw witness bytes over blob bytes")
                .with_boundaries(RATIO_BUCKETS.to_vec())
                .build(),
            prover_busy: meter
                .f64_counter("cuzk.prover.busy")
                .with_unit("s")
                .with_description("Time a proving worker spent proving")
                .build(),
            errors: meter
                .u64_counter("cuzk.errors")
                .with_description("Failed attempts and failed jobs")
                .build(),
            jobs: meter
                .u64_counter("cuzk.jobs")
                .with_description("Jobs finished")
                .build(),
            refusals: meter
                .u64_counter("cuzk.refusals")
                .with_description("Submissions refused at intake, recorded or only answered")
                .build(),
            heartbeat: meter
                .f64_gauge("cuzk.heartbeat.timestamp")
                .with_unit("s")
                .with_description("Unix time of this node's last stored heartbeat")
                .build(),
            build_info: meter
                .u64_gauge("cuzk.build.info")
                .with_description("The build of this process (always 1)")
                .build(),
        };
        metrics.build_info.record(
            1,
            &[
                KeyValue::new("version", env!("CARGO_PKG_VERSION")),
                KeyValue::new(
                    "profile",
                    if cfg!(debug_assertions) {
                        "debug"
                    } else {
                        "release"
                    },
                ),
            ],
        );
        metrics
    })
}

impl Metrics {
    /// One stage's time in the stage histogram, under the stage's name.
    pub fn stage(&self, stage: Stage, job: &JobLabels, took: Duration) {
        self.stage_duration.record(
            took.as_secs_f64(),
            &job.with(&[KeyValue::new("stage", stage.name())]),
        );
    }

    /// A partition's stage, measured once: into its timings (the record's field) and the
    /// stage histogram.
    pub fn partition_stage(
        &self,
        timings: &mut PartitionTimings,
        stage: Stage,
        job: &JobLabels,
        took: Duration,
    ) {
        timings.set(stage, took);
        self.stage(stage, job, took);
    }

    /// A job finished with `status` (`done`, `failed`).
    pub fn job(&self, status: &'static str, job: &JobLabels) {
        self.jobs
            .add(1, &job.with(&[KeyValue::new("status", status)]));
    }

    /// A submission of `tenant` (`None`: the untenanted path) refused at intake, `recorded` or
    /// answered only.
    pub fn refusal(&self, tenant: Option<&str>, recorded: bool) {
        self.refusals.add(
            1,
            &[
                KeyValue::new("tenant", tenant.unwrap_or("-").to_owned()),
                KeyValue::new("recorded", if recorded { "true" } else { "false" }),
            ],
        );
    }

    pub fn error(&self, role: &'static str, kind: &'static str, job: &JobLabels) {
        self.errors.add(
            1,
            &job.with(&[KeyValue::new("role", role), KeyValue::new("kind", kind)]),
        );
    }
}

/// Counts a partition as held by this node until dropped.
pub struct InFlight {
    role: &'static str,
}

impl InFlight {
    pub fn new(role: &'static str) -> InFlight {
        metrics()
            .partitions_in_flight
            .add(1, &[KeyValue::new("role", role)]);
        InFlight { role }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics()
            .partitions_in_flight
            .add(-1, &[KeyValue::new("role", self.role)]);
    }
}

static READY: AtomicBool = AtomicBool::new(false);

/// `/readyz` answers 200 while set: a node sets it once it is consuming and clears it when it
/// starts shutting down.
pub fn set_ready(ready: bool) {
    READY.store(ready, Ordering::Relaxed);
}

/// Serves `/metrics` (Prometheus text, when a registry was set up), `/healthz` (200 while the
/// process answers) and `/readyz` on `addr`; returns the bound address (port 0 picks one).
pub async fn serve(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(addr = %bound, "metrics and health endpoints listening");
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                // One small request per connection: read the head, answer, close.
                let mut head = Vec::with_capacity(512);
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                    match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await
                    {
                        Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let line = String::from_utf8_lossy(&head);
                let path = line.split_whitespace().nth(1).unwrap_or("/");
                let (status, content_type, body) = respond(path.split('?').next().unwrap_or(path));
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.write_all(&body).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok(bound)
}

/// This process's metrics in the Prometheus text format, when a registry was set up.
fn encode_registry() -> Option<Result<Vec<u8>, prometheus::Error>> {
    use prometheus::Encoder;
    let registry = crate::telemetry::get().and_then(|t| t.registry())?;
    let mut body = Vec::new();
    Some(
        prometheus::TextEncoder::new()
            .encode(&registry.gather(), &mut body)
            .map(|()| body),
    )
}

/// What `/metrics` serves, as text (`None` without a registry or if encoding failed).
pub fn prometheus_text() -> Option<String> {
    let body = encode_registry()?.ok()?;
    Some(String::from_utf8_lossy(&body).into_owned())
}

fn respond(path: &str) -> (&'static str, &'static str, Vec<u8>) {
    const TEXT: &str = "text/plain; charset=utf-8";
    match path {
        "/healthz" => ("200 OK", TEXT, b"ok\n".to_vec()),
        "/readyz" if READY.load(Ordering::Relaxed) => ("200 OK", TEXT, b"ready\n".to_vec()),
        "/readyz" => ("503 Service Unavailable", TEXT, b"not ready\n".to_vec()),
        "/metrics" => match encode_registry() {
            Some(Ok(body)) => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", body),
            Some(Err(e)) => (
                "500 Internal Server Error",
                TEXT,
                format!("{e}\n").into_bytes(),
            ),
            None => ("404 Not Found", TEXT, b"metrics are not enabled\n".to_vec()),
        },
        _ => ("404 Not Found", TEXT, b"not found\n".to_vec()),
    }
}
