//! The GPU node, per worker a picker, an executor and a saver. The picker (`picker`) pulls
//! partition work items one at a time and prefetches and decodes the next witness blob while the
//! current partition is proved (a device's workers fetch one blob at a time, `fetch_turn`, and
//! the node decodes one). The executor (`executor`, driven by `worker`) proves through a
//! [`Backend`](cuzk_prover::Backend) with the shape's proving key, resident per device and shared
//! by its workers (`backend`, `keys`). The saver (`saver`) records the proof through the ledger,
//! which assembles and reports the job on the node that completes its set. A work item whose
//! partition is already proved, or whose job has ended, is acknowledged and skipped.

mod backend;
mod buffers;
mod control;
mod executor;
mod explain;
mod fetch_turn;
mod keys;
mod picker;
mod saver;
mod worker;

use std::sync::Arc;

use cuzk_circuits::ShapeCache;
use cuzk_common::config::{GpuConfig, ParamConfig};
use cuzk_common::lifecycle::Ledger;
use cuzk_common::nodes::{self, NodeInfo, NodeLoad};
use cuzk_common::topology::Topology;
use cuzk_wire::blob::DecodeLimits;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::buffers::{Buffers, WitnessBuf};

pub use explain::explain_plans;

/// A GPU node: its backends' workers and what they share.
pub struct GpuNode {
    topology: Topology,
    ledger: Ledger,
    config: GpuConfig,
    name: String,
    /// Blobs as read, in buffers reused so each partition's fetch writes into memory that is
    /// already mapped.
    blobs: Buffers<Vec<u8>>,
    /// Compact witnesses, in buffers reused so each partition's decode writes into memory that
    /// is already mapped (and pinned, where the backend pins).
    buffers: Arc<Buffers<WitnessBuf>>,
    /// Blobs are decoded on half the node's threads: a fetch shares the cores with the other
    /// partitions' decodes, which have a whole prove to finish in, and decodes on all of them
    /// starved it. Giving the decode the device waits for every core gained little, and the
    /// decode after it, on every core too, once left the device idle for over a second
    /// (docs/gpu-runs.md, "H with six transforms; blobs read into reused buffers" and "One blob
    /// fetch at a time per device").
    decode: Arc<rayon::ThreadPool>,
    /// Host-side proving work (the whole proof on the CPU backend).
    prove_pool: Arc<rayon::ThreadPool>,
    /// One decode at a time: two at once (the workers' first partitions) each took twice as
    /// long, the one the device waited for included (docs/gpu-runs.md, "Witness buffers pinned;
    /// one decode at a time").
    decode_turn: Arc<std::sync::Mutex<()>>,
    shapes: Arc<ShapeCache>,
    /// Host memory for proving keys (the CPU backend's device is the host).
    host_key_bytes: u64,
    allow_synthetic: bool,
    limits: DecodeLimits,
    load: Arc<NodeLoad>,
}

impl GpuNode {
    pub fn new(
        topology: Topology,
        config: GpuConfig,
        params: &ParamConfig,
        name: String,
    ) -> anyhow::Result<GpuNode> {
        let shapes = backend::shape_cache(&config, params)?;
        // One buffer per partition a worker can have in hand (proving plus prefetched), per
        // device.
        let devices = cuzk_kernels::device_count().max(1);
        let workers = config.workers(true).max(config.workers(false));
        let in_hand = devices * backend::in_hand(workers, config.prefetch);
        let (blobs, buffers) = (Buffers::new(in_hand), Arc::new(Buffers::new(in_hand)));
        let pool = |name: &'static str, threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads.max(1))
                .thread_name(move |i| format!("{name}-{i}"))
                .build()
                .map(Arc::new)
        };
        let decode = pool("decode", config.cpu_threads / 2)?;
        let prove_pool = pool("prove", config.cpu_threads)?;
        Ok(GpuNode {
            ledger: Ledger::new(&topology),
            topology,
            config,
            name,
            blobs,
            buffers,
            decode,
            prove_pool,
            decode_turn: Arc::default(),
            shapes: Arc::new(shapes),
            host_key_bytes: params.host_cache_bytes,
            allow_synthetic: params.allow_synthetic,
            limits: DecodeLimits::default(),
            load: Arc::default(),
        })
    }

    /// Starts the workers and runs until `shutdown`; each worker then finishes the partition it
    /// is proving and hands back what it prefetched.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        let consumers = Arc::new(self.topology.gpu_consumers().await?);
        let mut workers = JoinSet::new();
        let use_cuda = backend::use_cuda(self.config.backend);
        let residents = if use_cuda {
            self.start_cuda(&mut workers, &consumers, &shutdown).await?
        } else {
            self.start_cpu(&mut workers, &consumers, &shutdown).await?
        };
        let devices = if use_cuda {
            cuzk_kernels::device_count() as u32
        } else {
            0
        };
        let heartbeat = NodeInfo::starting(
            &self.name,
            "gpu",
            if use_cuda { "cuda" } else { "cpu" },
            devices,
            workers.len() as u32,
        );
        let heartbeat = tokio::spawn(nodes::heartbeat(
            self.topology.clone(),
            heartbeat,
            self.load.clone(),
            shutdown.clone(),
        ));
        let control = tokio::spawn(control::serve(self.clone(), residents, shutdown.clone()));
        cuzk_common::metrics::set_ready(true);
        info!(node = %self.name, backend = if use_cuda { "cuda" } else { "cpu" }, workers = workers.len(),
            config = ?self.config, "gpu node started");
        while let Some(done) = workers.join_next().await {
            done?;
        }
        cuzk_common::metrics::set_ready(false);
        let _ = heartbeat.await;
        let _ = control.await;
        Ok(())
    }
}
