//! Node heartbeats in the `cuzk-nodes` KV bucket: every node re-puts its entry every
//! [`HEARTBEAT_INTERVAL`]; the bucket's max age drops the entries of nodes that stopped
//! answering. `cuzk status` reads them. The same loop samples the queue depths for the metrics.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::metrics::metrics;
use crate::topology::{Topology, JOBS_STREAM, NODES_BUCKET, WORK_STREAM};
use cuzk_wire::job::unix_ms;

pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// One node's heartbeat entry (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The entry's key: the node's name plus an instance suffix (names need not be unique).
    pub node: String,
    /// `synth` or `gpu`.
    pub role: String,
    pub version: String,
    /// GPU nodes: `cuda` or `cpu`; synth nodes: `cpu`.
    pub backend: String,
    /// CUDA devices used (0 on the CPU backend and on synth nodes).
    pub devices: u32,
    /// Proving workers (GPU nodes) or synthesis threads (synth nodes).
    pub workers: u32,
    pub partitions_in_flight: u64,
    /// Share of the last heartbeat interval the node's workers spent proving, 0..=1 (GPU nodes).
    pub busy_fraction: f64,
    pub started_at_ms: u64,
    pub updated_at_ms: u64,
}

impl NodeInfo {
    /// A node's first heartbeat: its identity and size, no load yet. The crates of the workspace
    /// share one version, so this crate's is the node's.
    pub fn starting(name: &str, role: &str, backend: &str, devices: u32, workers: u32) -> Self {
        let now = unix_ms();
        NodeInfo {
            node: instance_key(name),
            role: role.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            backend: backend.into(),
            devices,
            workers,
            partitions_in_flight: 0,
            busy_fraction: 0.0,
            started_at_ms: now,
            updated_at_ms: now,
        }
    }
}

/// Live load counters a node updates while working; the heartbeat reports them.
#[derive(Debug, Default)]
pub struct NodeLoad {
    in_flight: AtomicI64,
    busy_ns: AtomicU64,
}

/// Counts one partition as held by the node (here and in `cuzk_partitions_in_flight`) until
/// dropped.
pub struct Held {
    load: Arc<NodeLoad>,
    _metric: crate::metrics::InFlight,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.load.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl NodeLoad {
    pub fn hold(self: &Arc<Self>, role: &'static str) -> Held {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Held {
            load: self.clone(),
            _metric: crate::metrics::InFlight::new(role),
        }
    }

    /// Adds a worker's proving time (also to `cuzk_prover_busy_seconds_total{worker}`).
    pub fn busy(&self, worker: &str, duration: Duration) {
        self.busy_ns
            .fetch_add(duration.as_nanos() as u64, Ordering::Relaxed);
        metrics().prover_busy.add(
            duration.as_secs_f64(),
            &[KeyValue::new("worker", worker.to_owned())],
        );
    }
}

/// A key unique to this process: names are operator-chosen and may repeat across hosts.
pub fn instance_key(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{name}-{:08x}", nanos ^ std::process::id().rotate_left(16))
}

/// Puts `info` every [`HEARTBEAT_INTERVAL`] with the current load, and samples the queue depths,
/// until `shutdown`; then deletes the entry so the node disappears from `cuzk status` at once.
pub async fn heartbeat(
    topology: Topology,
    mut info: NodeInfo,
    load: Arc<NodeLoad>,
    shutdown: CancellationToken,
) {
    let mut last = (Instant::now(), load.busy_ns.load(Ordering::Relaxed));
    let mut interval = tokio::time::interval(HEARTBEAT_INTERVAL);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = interval.tick() => {}
        }
        let busy_ns = load.busy_ns.load(Ordering::Relaxed);
        let elapsed = last.0.elapsed().as_nanos().max(1) as f64;
        info.busy_fraction =
            ((busy_ns - last.1) as f64 / elapsed / info.workers.max(1) as f64).min(1.0);
        last = (Instant::now(), busy_ns);
        info.partitions_in_flight = load.in_flight.load(Ordering::Relaxed).max(0) as u64;
        info.updated_at_ms = unix_ms();
        let body = serde_json::to_vec(&info).expect("heartbeats serialize");
        match topology.nodes_kv.put(&info.node, body.into()).await {
            Ok(_) => metrics().heartbeat.record(
                info.updated_at_ms as f64 / 1e3,
                &[KeyValue::new("role", info.role.clone())],
            ),
            Err(e) => tracing::debug!(err = %e, "heartbeat failed"),
        }
        for stream in [JOBS_STREAM, WORK_STREAM] {
            if let Ok(depth) = topology.stream_depth(stream).await {
                metrics()
                    .queue_depth
                    .record(depth, &[KeyValue::new("stream", stream)]);
            }
        }
    }
    let _ = topology.nodes_kv.delete(&info.node).await;
}

/// Most heartbeat entries [`list`] reads: far more nodes than a cluster has.
const MAX_LISTED_NODES: usize = 10_000;

/// The live nodes' heartbeats, read in stream order by direct gets: no consumer, so roles that
/// may not create one (the gateway) can list them too.
pub async fn list(topology: &Topology) -> Result<Vec<NodeInfo>, async_nats::Error> {
    use async_nats::jetstream::stream::DirectGetErrorKind;
    let stream = topology
        .js
        .get_stream_no_info(format!("KV_{NODES_BUCKET}"))
        .await?;
    let subjects = format!("$KV.{NODES_BUCKET}.>");
    let mut nodes = Vec::new();
    let mut next = 1;
    for _ in 0..MAX_LISTED_NODES {
        let message = match stream
            .direct_get_next_for_subject(subjects.as_str(), Some(next))
            .await
        {
            Ok(message) => message,
            Err(e) if e.kind() == DirectGetErrorKind::NotFound => break,
            Err(e) => return Err(e.into()),
        };
        next = message.sequence + 1;
        // A node that stopped deletes its entry (a delete marker stays until it ages out).
        let deleted = message
            .headers
            .get("KV-Operation")
            .is_some_and(|op| op.as_str() != "PUT");
        if let (false, Ok(info)) = (
            deleted,
            serde_json::from_slice::<NodeInfo>(&message.payload),
        ) {
            nodes.push(info);
        }
    }
    nodes.sort_by(|a, b| (&a.role, &a.node).cmp(&(&b.role, &b.node)));
    Ok(nodes)
}
