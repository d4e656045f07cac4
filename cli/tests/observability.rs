//! Observability end to end: a real OTLP/HTTP receiver on 127.0.0.1 collects the spans of jobs
//! run through the local cluster (one trace per job, every stage, parent links across both
//! nodes, a caller's `traceparent` honoured, OpenTelemetry's messaging conventions on every
//! hop), and the Prometheus endpoint is scraped after a job.
//!
//! The OpenTelemetry providers are global to the process and the cluster's nodes run in it, so
//! both tests share one setup: a receiver, and telemetry initialised with its endpoint.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cuzk_common::telemetry::{self, TelemetryOptions};
use cuzk_wire::job::JobStatus;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;
use serde_json::json;
use support::{cluster, job, submit_raw};

#[derive(Debug, Clone)]
struct RecordedSpan {
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    start: u64,
    end: u64,
    attributes: HashMap<String, String>,
}

#[derive(Default)]
struct Receiver {
    spans: Mutex<Vec<RecordedSpan>>,
}

/// An OTLP/HTTP receiver: keep-alive HTTP/1.1, protobuf bodies with a Content-Length (what the
/// exporter's reqwest client sends). Trace requests are decoded; metric requests acknowledged.
fn start_receiver() -> (String, Arc<Receiver>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let receiver = Arc::new(Receiver::default());
    let shared = receiver.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let receiver = shared.clone();
            std::thread::spawn(move || serve_connection(stream, &receiver));
        }
    });
    (url, receiver)
}

fn serve_connection(stream: TcpStream, receiver: &Receiver) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if request_line.contains("/v1/traces") {
            let request =
                ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP trace request");
            let mut spans = receiver.spans.lock().unwrap();
            for resource in request.resource_spans {
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        let attributes = span
                            .attributes
                            .iter()
                            .map(|kv| {
                                let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                                    Some(Value::StringValue(s)) => s.clone(),
                                    Some(Value::IntValue(i)) => i.to_string(),
                                    Some(Value::BoolValue(b)) => b.to_string(),
                                    Some(Value::DoubleValue(d)) => d.to_string(),
                                    other => format!("{other:?}"),
                                };
                                (kv.key.clone(), value)
                            })
                            .collect();
                        spans.push(RecordedSpan {
                            trace_id: hex::encode(&span.trace_id),
                            span_id: hex::encode(&span.span_id),
                            parent: hex::encode(&span.parent_span_id),
                            name: span.name,
                            start: span.start_time_unix_nano,
                            end: span.end_time_unix_nano,
                            attributes,
                        });
                    }
                }
            }
        }
        let reply =
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn setup() -> &'static Arc<Receiver> {
    static SETUP: OnceLock<Arc<Receiver>> = OnceLock::new();
    SETUP.get_or_init(|| {
        let (url, receiver) = start_receiver();
        telemetry::init(TelemetryOptions {
            service_name: "cuzk-test".into(),
            log_format: None,
            otlp_endpoint: Some(url),
            prometheus: true,
        });
        receiver
    })
}

async fn flush() {
    tokio::task::spawn_blocking(|| telemetry::get().unwrap().flush())
        .await
        .unwrap();
}

/// The synth node's span of a job: OpenTelemetry's messaging `process` span.
const JOB: &str = "process cuzk.jobs.submit";
/// The producer span of a normal-priority work item and the GPU node's consumer span.
const SEND_WORK: &str = "send cuzk.work.normal";
const PROCESS_WORK: &str = "process cuzk.work.normal";

/// The spans of the trace whose job span carries `job_id`, once `done` says they are all in.
async fn job_trace(
    receiver: &Receiver,
    job_id: &str,
    done: impl Fn(&[RecordedSpan]) -> bool,
) -> Vec<RecordedSpan> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        flush().await;
        {
            let spans = receiver.spans.lock().unwrap();
            let trace_id = spans
                .iter()
                .find(|s| {
                    s.name == JOB
                        && s.attributes.get("cuzk.job_id").map(String::as_str) == Some(job_id)
                })
                .map(|s| s.trace_id.clone());
            if let Some(trace_id) = trace_id {
                let trace: Vec<RecordedSpan> = spans
                    .iter()
                    .filter(|s| s.trace_id == trace_id)
                    .cloned()
                    .collect();
                if done(&trace) {
                    return trace;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "the spans of job {job_id} did not all arrive"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn named<'a>(spans: &'a [RecordedSpan], name: &str) -> Vec<&'a RecordedSpan> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn children<'a>(spans: &'a [RecordedSpan], parent: &RecordedSpan) -> Vec<&'a RecordedSpan> {
    spans
        .iter()
        .filter(|s| s.parent == parent.span_id)
        .collect()
}

fn child_names(spans: &[RecordedSpan], parent: &RecordedSpan) -> Vec<String> {
    let mut names: Vec<String> = children(spans, parent)
        .iter()
        .map(|s| s.name.clone())
        .collect();
    names.sort();
    names
}

fn print_tree(spans: &[RecordedSpan], span: &RecordedSpan, depth: usize, origin: u64) {
    let mut attributes: Vec<String> = ["cuzk.job_id", "cuzk.partition", "cuzk.worker"]
        .iter()
        .filter_map(|k| span.attributes.get(*k).map(|v| format!("{k}={v}")))
        .collect();
    attributes.sort();
    eprintln!(
        "{:indent$}{} [{:.1} ms +{:.1} ms] {}",
        "",
        span.name,
        (span.end - span.start) as f64 / 1e6,
        span.start.saturating_sub(origin) as f64 / 1e6,
        attributes.join(" "),
        indent = depth * 2
    );
    let mut kids = children(spans, span);
    kids.sort_by_key(|s| s.start);
    for kid in kids {
        print_tree(spans, kid, depth + 1, origin);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_job_is_one_trace_across_both_nodes() {
    let receiver = setup();
    let cluster = cluster().await;

    // A caller with its own trace: its `traceparent` header must make the job part of it.
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        "traceparent",
        format!("00-{caller_trace}-{caller_span}-01").as_str(),
    );
    let spec = job(
        "traced",
        "mimc",
        json!({"rounds": 200, "partitions": 2}),
        "trace me",
    );
    let body = serde_json::to_vec(&spec).unwrap();
    let result = submit_raw(&cluster.client, &body, Some(headers), "cuzk.results.traced").await;
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);

    let complete = |spans: &[RecordedSpan]| {
        named(spans, PROCESS_WORK).len() == 2
            && named(spans, "assemble").len() == 1
            && named(spans, JOB).len() == 1
    };
    let spans = job_trace(receiver, "traced", complete).await;
    let root = named(&spans, JOB)[0];
    print_tree(&spans, root, 0, root.start);

    // One trace, the caller's, with every span's parent inside it (the root's is the caller's).
    assert_eq!(root.trace_id, caller_trace);
    assert_eq!(root.parent, caller_span);
    let ids: Vec<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    for span in &spans {
        assert!(span.end >= span.start, "{span:?}");
        if span.span_id != root.span_id {
            assert!(
                ids.contains(&span.parent.as_str()),
                "{} has a parent outside the trace",
                span.name
            );
        }
    }

    // Messaging conventions on both hops: `send`/`process` names and kinds, `messaging.*`
    // attributes, cuzk's own attributes namespaced `cuzk.*`.
    let attr =
        |span: &RecordedSpan, key: &str| span.attributes.get(key).cloned().unwrap_or_default();
    for (span, operation, destination) in [
        (root, "process", "cuzk.jobs.submit"),
        (named(&spans, SEND_WORK)[0], "send", "cuzk.work.normal"),
        (
            named(&spans, PROCESS_WORK)[0],
            "process",
            "cuzk.work.normal",
        ),
    ] {
        assert_eq!(attr(span, "messaging.system"), "nats", "{span:?}");
        assert_eq!(
            attr(span, "messaging.operation.type"),
            operation,
            "{span:?}"
        );
        assert_eq!(
            attr(span, "messaging.destination.name"),
            destination,
            "{span:?}"
        );
        // tracing-opentelemetry's own timings aside, every attribute is namespaced.
        let bare = |k: &&String| {
            !k.contains('.') && !["busy_ns", "idle_ns", "target"].contains(&k.as_str())
        };
        assert!(
            !span.attributes.keys().any(|k| bare(&k)),
            "un-namespaced attribute: {span:?}"
        );
    }
    assert_eq!(attr(root, "messaging.consumer.group.name"), "synth");
    assert_eq!(attr(root, "cuzk.job_id"), "traced");
    assert_eq!(
        attr(
            named(&spans, PROCESS_WORK)[0],
            "messaging.consumer.group.name"
        ),
        "gpu-normal"
    );

    // Synth node: the job's queue wait, then a span per partition with its stages.
    assert_eq!(
        child_names(&spans, root),
        ["job_queue", "partition", "partition"]
    );
    let mut proved = 0;
    for partition in children(&spans, root)
        .into_iter()
        .filter(|s| s.name == "partition")
    {
        assert_eq!(
            child_names(&spans, partition),
            [
                "encode",
                "public_inputs",
                "queue_room_wait",
                SEND_WORK,
                "shape",
                "synth",
                "upload"
            ],
            "synth partition {:?}",
            partition.attributes.get("cuzk.partition")
        );
        // GPU node, across the work queue: a child of the synth node's send.
        let publish = children(&spans, partition)
            .into_iter()
            .find(|s| s.name == SEND_WORK)
            .unwrap();
        let gpu = children(&spans, publish);
        assert_eq!(gpu.len(), 1, "one GPU span per published partition");
        let gpu = gpu[0];
        assert_eq!(gpu.name, PROCESS_WORK);
        assert_eq!(
            gpu.attributes.get("cuzk.partition"),
            partition.attributes.get("cuzk.partition")
        );
        let names = child_names(&spans, gpu);
        for stage in ["queue_wait", "fetch", "decode", "load_params", "prove"] {
            assert!(
                names.iter().any(|n| n == stage),
                "GPU partition span lacks {stage}: {names:?}"
            );
        }
        let prove = children(&spans, gpu)
            .into_iter()
            .find(|s| s.name == "prove")
            .unwrap();
        assert_eq!(
            child_names(&spans, prove),
            ["h", "h2d", "msm", "spmv", "turn"]
        );
        proved += names.iter().filter(|n| *n == "assemble").count();
    }
    assert_eq!(
        proved, 1,
        "exactly one GPU partition span assembles the job"
    );

    // Without a caller's context the job starts its own trace.
    let spec = job(
        "untraced",
        "mimc",
        json!({"rounds": 50, "partitions": 1}),
        "root",
    );
    let body = serde_json::to_vec(&spec).unwrap();
    let result = submit_raw(&cluster.client, &body, None, "cuzk.results.untraced").await;
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    let spans = job_trace(receiver, "untraced", |s| named(s, PROCESS_WORK).len() == 1).await;
    let root = named(&spans, JOB)[0];
    assert!(
        root.parent.is_empty(),
        "a job without traceparent is a root span"
    );
    assert_ne!(root.trace_id, caller_trace);
    assert_eq!(named(&spans, "assemble").len(), 1);
    cluster.stop().await.unwrap();
}

fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_endpoint_shows_stage_histograms_after_a_job() {
    setup();
    let addr = cuzk_common::metrics::serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let cluster = cluster().await;
    let spec = job(
        "scraped",
        "mimc",
        json!({"rounds": 100, "partitions": 2}),
        "metrics",
    );
    let body = serde_json::to_vec(&spec).unwrap();
    let result = submit_raw(&cluster.client, &body, None, "cuzk.results.scraped").await;
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);

    let stages = [
        "job_queue",
        "synth",
        "encode",
        "upload",
        "queue_wait",
        "fetch",
        "decode",
        "h2d",
        "turn",
        "spmv",
        "h",
        "msm",
        "prove",
        "assemble",
        "job_total",
    ];
    // Every per-job and per-partition series names its circuit and shape.
    let job_labels = ["circuit=\"mimc\"", "shape=\"mimc-r100\""];
    let line = |metrics: &str, name: &str, labels: &[&str]| {
        metrics
            .lines()
            .find(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with(['{', ' ']))
                    && labels.iter().all(|label| l.contains(label))
            })
            .map(str::to_owned)
    };
    let count_line = |metrics: &str, stage: &str| {
        let stage = format!("stage=\"{stage}\"");
        line(
            metrics,
            "cuzk_stage_duration_seconds_count",
            &[job_labels[0], job_labels[1], &stage],
        )
    };
    // The result is published before the reporting node records its last stages: poll briefly.
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let (status, metrics) = tokio::task::spawn_blocking(move || http_get(addr, "/metrics"))
            .await
            .unwrap();
        assert_eq!(status, 200);
        if stages.iter().all(|s| count_line(&metrics, s).is_some()) || Instant::now() > deadline {
            break metrics;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!("{metrics}");
    for stage in stages {
        let count =
            count_line(&metrics, stage).unwrap_or_else(|| panic!("no histogram for stage {stage}"));
        let n: f64 = count.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(n >= 1.0, "{count}");
    }
    for (name, labels) in [
        (
            "cuzk_blob_bytes_total",
            &["direction=\"up\"", "form=\"wire\""][..],
        ),
        (
            "cuzk_blob_bytes_total",
            &["direction=\"up\"", "form=\"raw\""],
        ),
        (
            "cuzk_blob_bytes_total",
            &["direction=\"down\"", "form=\"wire\""],
        ),
        ("cuzk_codec_compression_ratio_count", &[]),
        ("cuzk_jobs_total", &["status=\"done\""]),
    ] {
        let labels: Vec<&str> = labels.iter().chain(&job_labels).copied().collect();
        assert!(
            line(&metrics, name, &labels).is_some(),
            "no {name} {labels:?}"
        );
    }
    let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
    for (name, labels) in [
        ("cuzk_prover_busy_seconds_total", &["worker=\"cpu.0\""][..]),
        ("cuzk_partitions_in_flight", &["role=\"gpu\""]),
        ("cuzk_build_info", &[version.as_str()]),
        ("cuzk_heartbeat_timestamp_seconds", &["role=\"synth\""]),
        ("cuzk_heartbeat_timestamp_seconds", &["role=\"gpu\""]),
    ] {
        assert!(
            line(&metrics, name, labels).is_some(),
            "no {name} {labels:?}"
        );
    }

    let health = tokio::task::spawn_blocking(move || {
        (http_get(addr, "/healthz").0, http_get(addr, "/readyz").0)
    })
    .await
    .unwrap();
    assert_eq!(health, (200, 200));

    // The nodes' heartbeats are in the nodes bucket, and `cuzk status` shows them.
    let status = cuzk_cli::status::cluster_status(&cluster.topology)
        .await
        .unwrap();
    eprintln!("{status}");
    assert!(
        status.contains("synth") && status.contains("gpu "),
        "{status}"
    );
    assert!(status.contains("CUZK_WORK: 0 waiting"), "{status}");
    cluster.stop().await.unwrap();
}
