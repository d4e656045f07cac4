//! The node's backends: every visible CUDA device, or the CPU engine. Each gets its proving keys
//! ([`Keys`]), the `--gpu-preload` shapes' keys and witness buffers loaded before any of its
//! workers pulls work, and then its workers.

use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream::consumer::PullConsumer;
use bellperson::groth16::prepare_verifying_key;
use blstrs::Scalar;
use cuzk_circuits::{CircuitFamily, CircuitSpec, ShapeCache};
use cuzk_common::config::{BackendKind, GpuConfig, MsmAccumulation, ParamConfig};
use cuzk_common::policy::StepError as PartitionError;
use cuzk_common::timing::ms;
use cuzk_kernels::Accumulation;
use cuzk_prover::{Backend, CpuBackend};
use cuzk_wire::blob::CompactWitness;
use ff::Field;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::buffers::WitnessBuf;
use crate::control::BackendKeys;
use crate::keys::{Keys, Loaded};
use crate::GpuNode;

/// Compact bytes per aux variable a witness buffer gets at key load: PoRep witnesses take
/// 1.5–1.9 (docs/porep.md). A blob that needs more grows its buffer once, and pins it again.
const COMPACT_BYTES_PER_AUX: usize = 3;

/// The node's shapes: its parameter cache and the parameter files named for shapes.
pub(crate) fn shape_cache(config: &GpuConfig, params: &ParamConfig) -> anyhow::Result<ShapeCache> {
    let dir = match &params.cache {
        Some(dir) => dir.clone(),
        None => ShapeCache::default_dir()?,
    };
    Ok(
        ShapeCache::new(dir, params.allow_test, params.host_cache_bytes)
            .with_parameter_files(config.params_files.iter().cloned().collect()),
    )
}

/// Partitions `workers` on one device have in hand at once: each the one it proves and those it
/// has prefetched.
pub(crate) fn in_hand(workers: usize, prefetch: usize) -> usize {
    workers * (1 + prefetch)
}

/// Whether the node proves on CUDA devices: `auto` falls back to the CPU, saying why.
pub(crate) fn use_cuda(kind: BackendKind) -> bool {
    match kind {
        BackendKind::Cpu => false,
        BackendKind::Cuda => true,
        BackendKind::Auto => match cuzk_kernels::cuda_unavailable_reason() {
            None => true,
            Some(reason) => {
                warn!(%reason, "--gpu-backend auto: proving on the CPU backend");
                false
            }
        },
    }
}

impl GpuNode {
    /// Readies every CUDA device and starts its workers into `workers`; each device's keys, for
    /// the proving-key commands.
    pub(crate) async fn start_cuda(
        self: &Arc<Self>,
        workers: &mut JoinSet<()>,
        consumers: &Arc<[PullConsumer; 2]>,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<Vec<Arc<dyn BackendKeys>>> {
        let devices = cuzk_kernels::device_count();
        if devices == 0 {
            anyhow::bail!("--gpu-backend cuda: no CUDA device is visible (check the driver and CUDA_VISIBLE_DEVICES)");
        }
        let mut ready = Vec::new();
        for device in 0..devices {
            let backend = Arc::new(
                cuzk_kernels::CudaBackend::new(
                    device,
                    self.config.memory_budget,
                    self.config.workers(true),
                )?
                .with_lanes(self.config.lanes)?,
            );
            backend.set_accumulation(match self.config.msm_accumulation {
                MsmAccumulation::BySize => Accumulation::BySize,
                MsmAccumulation::Xyzz => Accumulation::Xyzz,
            });
            let keys = Arc::new(Keys::new(backend.key_budget()));
            ready.push((device, backend, keys));
        }
        // No worker pulls work before every device has its keys: the node is started on all of
        // them or on none. One device at a time, so a parsed SRS is built once.
        for (i, (_, backend, keys)) in ready.iter().enumerate() {
            let buffers = in_hand(self.config.workers(true), self.config.prefetch) * (i + 1);
            self.preload(backend, keys, buffers).await?;
        }
        let mut residents: Vec<Arc<dyn BackendKeys>> = Vec::new();
        for (device, backend, keys) in ready {
            residents.push(self.spawn_workers(
                workers,
                backend,
                keys,
                (&format!("cuda{device}"), self.config.workers(true)),
                consumers,
                shutdown,
            ));
        }
        Ok(residents)
    }

    /// Readies the CPU engine and starts its workers into `workers`; its keys, for the
    /// proving-key commands.
    pub(crate) async fn start_cpu(
        self: &Arc<Self>,
        workers: &mut JoinSet<()>,
        consumers: &Arc<[PullConsumer; 2]>,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<Vec<Arc<dyn BackendKeys>>> {
        let (backend, keys) = (
            Arc::new(CpuBackend),
            Arc::new(Keys::new(self.host_key_bytes)),
        );
        let buffers = in_hand(self.config.workers(false), self.config.prefetch);
        self.preload(&backend, &keys, buffers).await?;
        Ok(vec![self.spawn_workers(
            workers,
            backend,
            keys,
            ("cpu", self.config.workers(false)),
            consumers,
            shutdown,
        )])
    }

    /// Loads the `--gpu-preload` shapes' keys into a backend before its workers pull work, so
    /// the first partitions do not wait for them; and compact-witness buffers of the largest
    /// preloaded shape, faulted in and pinned by the backend, until the node has `buffers`
    /// (what this backend's workers and those preloaded before it have in hand at once, so the
    /// node's peak is what draining a full queue reaches anyway). A partition decoded into
    /// fresh memory pays its page faults while the device waits for it; with one buffer per
    /// worker, the second worker's first partition still found none (its prefetch had taken it)
    /// and decoded several times slower (docs/gpu-runs.md, "H with six transforms; blobs read
    /// into reused buffers").
    async fn preload<B: Backend>(
        &self,
        backend: &Arc<B>,
        keys: &Keys<B>,
        buffers: usize,
    ) -> anyhow::Result<()> {
        let mut largest = (0, 0);
        for spec in &self.config.preload {
            let spec: CircuitSpec = serde_json::from_value(spec.clone())?;
            let family = spec.family()?;
            let started = Instant::now();
            let loaded = self
                .load_key(backend, keys, family.clone())
                .await
                .map_err(|e| anyhow::anyhow!("preloading {}: {e}", family.shape_key()))?;
            let info = backend.key_info(&loaded.key);
            largest = largest.max((info.aux, info.inputs));
            info!(shape = %family.shape_key(), load_ms = ms(started.elapsed()), backend = backend.name(),
                h2d_total_bytes = backend.h2d_bytes(), "proving key preloaded");
        }
        if largest.0 > 0 {
            let (aux, inputs) = largest;
            let (pool, backend) = (self.buffers.clone(), backend.clone());
            tokio::task::spawn_blocking(move || {
                pool.fill(buffers, || {
                    let mut w = CompactWitness {
                        input: vec![Scalar::ZERO; inputs],
                        ..CompactWitness::default()
                    };
                    w.aux.reserve(aux * COMPACT_BYTES_PER_AUX);
                    WitnessBuf::pinned(&*backend, w)
                })
            })
            .await?;
        }
        Ok(())
    }

    /// The proving key of a circuit shape, loaded into the backend once per device.
    pub(crate) async fn load_key<B: Backend>(
        &self,
        backend: &Arc<B>,
        keys: &Keys<B>,
        family: Arc<dyn CircuitFamily>,
    ) -> Result<Arc<Loaded<B>>, PartitionError> {
        let shape_key = family.shape_key();
        let (shapes, backend, sizer) = (self.shapes.clone(), backend.clone(), backend.clone());
        let started = Instant::now();
        let named = shape_key.clone();
        let prepare = async move {
            let pk = tokio::task::spawn_blocking(move || shapes.proving_key(&*family))
                .await
                .map_err(|e| PartitionError::Fatal(format!("parameter loading died: {e}")))?
                .map_err(|e| PartitionError::Fatal(format!("no proving key for {named}: {e}")))?;
            let bytes = sizer.memory_for(&pk);
            Ok((pk, bytes))
        };
        let load = |pk: Arc<cuzk_prover::ProvingKey>| async move {
            let (pvk, bytes) = (prepare_verifying_key(&pk.info.vk), backend.memory_for(&pk));
            let key = tokio::task::spawn_blocking(move || backend.load_key(pk))
                .await
                .map_err(|e| PartitionError::Fatal(format!("key loading died: {e}")))??;
            info!(load_ms = ms(started.elapsed()), bytes, "proving key loaded");
            Ok(Loaded { key, pvk, bytes })
        };
        keys.get_or_load(&shape_key, prepare, load).await
    }
}
