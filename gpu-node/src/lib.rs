//! The GPU node: per worker, a fetcher pulls partition work items one at a time and prefetches
//! and decodes the next witness blob while the current partition is proved (the picker; a
//! device's workers fetch one blob at a time, `fetch_turn`, and the node decodes one); the
//! executor proves through a [`Backend`] with the shape's proving key, resident per device and
//! shared by its workers (`executor`); the saver records the proof through the ledger, which
//! assembles and reports the job on the node that completes its set (`saver`). A work item whose
//! partition is already proved, or whose job has ended, is acknowledged and skipped.

mod buffers;
mod control;
mod executor;
mod explain;
mod fetch_turn;
mod keys;
mod saver;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::PullConsumer};
use bellperson::groth16::prepare_verifying_key;
use blstrs::Scalar;
use cuzk_circuits::{CircuitFamily, CircuitSpec, ShapeCache};
use cuzk_common::config::{BackendKind, GpuConfig, ParamConfig};
use cuzk_common::lifecycle::{machine, Ledger, Proved, ProvedPartition};
use cuzk_common::metrics::{metrics, JobLabels, KeyValue};
use cuzk_common::nats::{ms, progress_ticker, pull_one};
use cuzk_common::nodes::{self, Held, NodeInfo, NodeLoad};
use cuzk_common::objects;
use cuzk_common::policy::{Settle, StepError as PartitionError};
use cuzk_common::telemetry;
use cuzk_common::topology::Topology;
use cuzk_prover::{Backend, CpuBackend};
use cuzk_wire::blob::{self, CompactWitness, DecodeLimits};
use cuzk_wire::job::{unix_ms, PartitionTimings, WorkItem};
use ff::Field;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, info_span, warn, Instrument};

use crate::buffers::{Buffers, WitnessBuf};
use crate::fetch_turn::FetchTurn;
use crate::saver::Outcome;

pub use explain::explain_plans;

/// The node's shapes: its parameter cache and the parameter files named for shapes.
fn shape_cache(config: &GpuConfig, params: &ParamConfig) -> anyhow::Result<ShapeCache> {
    let dir = match &params.cache {
        Some(dir) => dir.clone(),
        None => ShapeCache::default_dir()?,
    };
    Ok(
        ShapeCache::new(dir, params.allow_test, params.host_cache_bytes)
            .with_parameter_files(config.params_files.iter().cloned().collect()),
    )
}

/// The `circuit`/`shape` labels of a work item's measurements.
pub(crate) fn labels(item: &WorkItem) -> JobLabels {
    JobLabels::new(&item.circuit, &item.shape_key)
}

/// A work item whose blob is fetched and decoded, ready for the backend.
struct Prepared {
    message: Arc<jetstream::Message>,
    ticker: tokio::task::JoinHandle<()>,
    delivered: i64,
    item: WorkItem,
    witness: WitnessBuf,
    /// The hash of the matrices the witness was synthesized against (from the blob header).
    shape_hash: [u8; 32],
    timings: PartitionTimings,
    /// The partition's span on this node, from taking the item to settling it.
    span: tracing::Span,
    /// Frees the worker's prefetch slot once this item is settled.
    _slot: OwnedSemaphorePermit,
    _held: Held,
}

use keys::{Keys, Loaded};

pub struct GpuNode {
    topology: Topology,
    ledger: Ledger,
    config: GpuConfig,
    name: String,
    /// Blobs as read and compact witnesses, in buffers reused so each partition's fetch and
    /// decode write into memory that is already mapped.
    blobs: Buffers<Vec<u8>>,
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
        let shapes = shape_cache(&config, params)?;
        // One buffer per partition a worker can hold (proving plus prefetched), per device.
        let devices = cuzk_kernels::device_count().max(1);
        let workers = config.workers(true).max(config.workers(false));
        let held = devices * held_by(workers, config.prefetch);
        let (blobs, buffers) = (Buffers::new(held), Arc::new(Buffers::new(held)));
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
        let mut residents: Vec<Arc<dyn control::Resident>> = Vec::new();
        let use_cuda = match self.config.backend {
            BackendKind::Cpu => false,
            BackendKind::Cuda => true,
            BackendKind::Auto => match cuzk_kernels::cuda_unavailable_reason() {
                None => true,
                Some(reason) => {
                    warn!(%reason, "--gpu-backend auto: proving on the CPU backend");
                    false
                }
            },
        };
        if use_cuda {
            let devices = cuzk_kernels::device_count();
            if devices == 0 {
                anyhow::bail!("--gpu-backend cuda: no CUDA device is visible (check the driver and CUDA_VISIBLE_DEVICES)");
            }
            let mut ready = Vec::new();
            for device in 0..devices {
                let backend = Arc::new(cuzk_kernels::CudaBackend::new(
                    device,
                    self.config.memory_budget,
                    self.config.workers(true),
                )?);
                let keys = Arc::new(Keys::new(backend.key_budget()));
                ready.push((device, backend, keys));
            }
            // No worker pulls work before every device has its keys: the node is started on
            // all of them or on none. One device at a time, so a parsed SRS is built once.
            for (i, (_, backend, keys)) in ready.iter().enumerate() {
                let held = held_by(self.config.workers(true), self.config.prefetch) * (i + 1);
                self.preload(backend, keys, held).await?;
            }
            for (device, backend, keys) in ready {
                residents.push(Arc::new(control::OnBackend {
                    backend: backend.clone(),
                    keys: keys.clone(),
                }));
                self.spawn_workers(
                    &mut workers,
                    backend,
                    keys,
                    (&format!("cuda{device}"), self.config.workers(true)),
                    &consumers,
                    &shutdown,
                );
            }
        } else {
            let (backend, keys) = (
                Arc::new(CpuBackend),
                Arc::new(Keys::new(self.host_key_bytes)),
            );
            let held = held_by(self.config.workers(false), self.config.prefetch);
            self.preload(&backend, &keys, held).await?;
            residents.push(Arc::new(control::OnBackend {
                backend: backend.clone(),
                keys: keys.clone(),
            }));
            self.spawn_workers(
                &mut workers,
                backend,
                keys,
                ("cpu", self.config.workers(false)),
                &consumers,
                &shutdown,
            );
        }
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

    /// Loads the `--gpu-preload` shapes' keys into a backend before its workers pull work, so
    /// the first partitions do not wait for them; and compact-witness buffers of the largest
    /// preloaded shape, faulted in and pinned by the backend, until the node holds `held`
    /// (what this backend's workers and those preloaded before it can hold at once, so the
    /// node's peak is what draining a full queue reaches anyway). A partition decoded into
    /// fresh memory pays its page faults while the device waits for it; with one buffer per
    /// worker, the second worker's first partition still found none (its prefetch had taken it)
    /// and decoded several times slower (docs/gpu-runs.md, "H with six transforms; blobs read
    /// into reused buffers").
    async fn preload<B: Backend>(
        &self,
        backend: &Arc<B>,
        keys: &Keys<B>,
        held: usize,
    ) -> anyhow::Result<()> {
        let mut largest = (0, 0);
        for spec in &self.config.preload {
            let spec: CircuitSpec = serde_json::from_value(spec.clone())?;
            let family = cuzk_circuits::resolve(&spec)?;
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
            let (buffers, backend) = (self.buffers.clone(), backend.clone());
            tokio::task::spawn_blocking(move || {
                buffers.fill(held, || {
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

    /// `count` proving workers on one backend, labelled `{prefix}.{index}`, sharing its proving
    /// keys and their [`FetchTurn`].
    fn spawn_workers<B: Backend>(
        self: &Arc<Self>,
        workers: &mut JoinSet<()>,
        backend: Arc<B>,
        keys: Arc<Keys<B>>,
        (prefix, count): (&str, usize),
        consumers: &Arc<[PullConsumer; 2]>,
        shutdown: &CancellationToken,
    ) {
        let fetch_turn = Arc::new(FetchTurn::default());
        for w in 0..count {
            workers.spawn(self.clone().worker(
                backend.clone(),
                keys.clone(),
                fetch_turn.clone(),
                format!("{prefix}.{w}"),
                consumers.clone(),
                shutdown.clone(),
            ));
        }
    }

    async fn worker<B: Backend>(
        self: Arc<Self>,
        backend: Arc<B>,
        keys: Arc<Keys<B>>,
        fetch_turn: Arc<FetchTurn>,
        label: String,
        consumers: Arc<[PullConsumer; 2]>,
        shutdown: CancellationToken,
    ) {
        let slots = Arc::new(Semaphore::new(1 + self.config.prefetch));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let fetcher = tokio::spawn(self.clone().fetch_loop(
            consumers,
            fetch_turn,
            slots,
            tx,
            shutdown.clone(),
        ));
        while let Some(prepared) = rx.recv().await {
            let prepared: Prepared = prepared;
            if shutdown.is_cancelled() {
                self.settle(&prepared, Settle::Nak(None)).await;
                continue;
            }
            let span = prepared.span.clone();
            span.record("cuzk.worker", label.as_str());
            self.prove_and_settle(&backend, &keys, &label, prepared)
                .instrument(span)
                .await;
        }
        let _ = fetcher.await;
        info!(worker = %label, "worker stopped");
    }

    /// Pulls work items while the worker has a free slot, fetching and decoding each one.
    async fn fetch_loop(
        self: Arc<Self>,
        consumers: Arc<[PullConsumer; 2]>,
        fetch_turn: Arc<FetchTurn>,
        slots: Arc<Semaphore>,
        tx: mpsc::UnboundedSender<Prepared>,
        shutdown: CancellationToken,
    ) {
        loop {
            let slot = tokio::select! {
                _ = shutdown.cancelled() => return,
                slot = slots.clone().acquire_owned() => slot.expect("semaphore open"),
            };
            let message = tokio::select! {
                _ = shutdown.cancelled() => return,
                message = next_work(&consumers) => message,
            };
            let message = match message {
                Ok(Some(message)) => message,
                Ok(None) => continue,
                Err(e) => {
                    warn!(err = %e, "pulling work failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if let Some(prepared) = self.prepare(message, &fetch_turn, slot).await {
                if tx.send(prepared).is_err() {
                    return;
                }
            }
        }
    }

    /// Fetches and decodes a work item's blob. Items that need no proving (their job already
    /// ended) or cannot be proved are settled here and yield `None`.
    async fn prepare(
        &self,
        message: jetstream::Message,
        fetch_turn: &FetchTurn,
        slot: OwnedSemaphorePermit,
    ) -> Option<Prepared> {
        let delivered = message.info().map(|i| i.delivered).unwrap_or(1);
        let item = match WorkItem::decode(&message.payload) {
            Ok(item) => item,
            Err(e) => {
                warn!(err = %e, "dropping an unreadable work item");
                let _ = message.ack_with(jetstream::AckKind::Term).await;
                return None;
            }
        };
        let message = Arc::new(message);
        let ticker = tokio::spawn(progress_ticker(
            message.clone(),
            self.topology.progress_interval(),
        ));
        // A child of the synth node's `send` span through the work item's `traceparent`.
        let span = telemetry::process_span(&message);
        span.record("cuzk.job_id", item.job_id.as_str());
        span.record("cuzk.partition", item.partition);
        telemetry::set_parent(&span, message.headers.as_ref());
        if let Some(published) = telemetry::published_at(&message) {
            telemetry::record_wait(
                &span,
                "work.queue_wait",
                published,
                std::time::SystemTime::now(),
            );
        }
        let held = self.load.hold("gpu");
        let mut timings = item.timings;
        timings.queue_wait_ms = unix_ms().saturating_sub(item.published_at_ms) as f64;
        metrics().stage_ms("work_queue", &labels(&item), timings.queue_wait_ms);
        let fetched = self
            .fetch_witness(&item, fetch_turn, &mut timings)
            .instrument(span.clone())
            .await;
        let mut prepared = Prepared {
            message,
            ticker,
            delivered,
            item,
            witness: WitnessBuf::default(),
            shape_hash: [0; 32],
            timings,
            span: span.clone(),
            _slot: slot,
            _held: held,
        };
        async move {
            match fetched {
                Ok(Some((witness, shape_hash))) => {
                    prepared.witness = witness;
                    prepared.shape_hash = shape_hash;
                    Some(prepared)
                }
                Ok(None) => {
                    self.save(&prepared, Outcome::Skipped).await;
                    None
                }
                Err(e) => {
                    self.save(&prepared, Outcome::Failed(e)).await;
                    None
                }
            }
        }
        .instrument(span)
        .await
    }

    /// The item's witness and the matrices hash it was synthesized against; `None` when there
    /// is nothing to prove (its partition is proved or its job ended).
    async fn fetch_witness(
        &self,
        item: &WorkItem,
        fetch_turn: &FetchTurn,
        timings: &mut PartitionTimings,
    ) -> Result<Option<(WitnessBuf, [u8; 32])>, PartitionError> {
        // A redelivered item of a proved partition (lost ack, server restart, leader change)
        // finds its blob deleted: skip it, and finish what a crash may have left of its job.
        let Some(record) = self.ledger.get(&item.job_id).await? else {
            warn!(job_id = %item.job_id, "work item of a job without a record; skipping");
            return Ok(None);
        };
        match machine::partition_state(&record, item.partition as usize) {
            Proved::Recorded => {}
            state => {
                info!(job_id = %item.job_id, partition = item.partition, ?state, "nothing to prove; skipping");
                self.ledger.catch_up(&record).await?;
                return Ok(None);
            }
        }
        let turn = fetch_turn.take(FETCH_TURN_WAIT).await;
        let started = Instant::now();
        let mut bytes = self.blobs.take();
        let read = objects::read_bounded_into(
            &self.topology.blobs,
            &self.topology.blob_readers,
            &item.blob_object,
            self.limits.max_blob_bytes,
            &mut bytes,
        )
        .instrument(info_span!("fetch"))
        .await;
        drop(turn);
        if let Err(e) = read {
            self.blobs.put(bytes);
            return Err(e.into());
        }
        let job = labels(item);
        metrics().stage("fetch", &job, started.elapsed());
        metrics().blob_bytes.add(
            bytes.len() as u64,
            &job.with(&[
                KeyValue::new("direction", "down"),
                KeyValue::new("form", "wire"),
            ]),
        );
        timings.fetch_ms = ms(started.elapsed());
        let started = Instant::now();
        let (limits, decode, turn) = (self.limits, self.decode.clone(), self.decode_turn.clone());
        let mut witness = self.buffers.take();
        if let Ok(header) = blob::peek_header(&bytes, &limits) {
            witness.make_room(header.encoded_len as usize);
        }
        let decoded = tokio::task::spawn_blocking(move || {
            let _turn = turn.lock().unwrap_or_else(|e| e.into_inner());
            let header =
                decode.install(|| blob::decode_blob_compact_into(&bytes, &limits, &mut witness.w));
            (header, witness, bytes)
        })
        .instrument(info_span!("decode"))
        .await
        .map_err(|e| PartitionError::Fatal(format!("decoder died: {e}")))?;
        let (header, witness, bytes) = decoded;
        self.blobs.put(bytes);
        let header = header
            .map_err(|e| PartitionError::Fatal(format!("partition {}: {e}", item.partition)))?;
        metrics().stage("decode", &job, started.elapsed());
        timings.decode_ms = ms(started.elapsed());
        if header.job_id != item.job_id
            || header.partition != item.partition
            || header.shape_key != item.shape_key
        {
            return Err(PartitionError::Fatal(format!(
                "partition {}: blob {} belongs to {}/{} ({}), not this work item",
                item.partition, item.blob_object, header.job_id, header.partition, header.shape_key
            )));
        }
        Ok(Some((witness, header.shape_hash)))
    }

    async fn prove_and_settle<B: Backend>(
        &self,
        backend: &Arc<B>,
        keys: &Keys<B>,
        label: &str,
        mut prepared: Prepared,
    ) {
        let witness = std::mem::take(&mut prepared.witness);
        // A prefetched item waited while the one before it was proved: its job may have ended
        // meanwhile (cancelled, failed). Then it is acknowledged and skipped, not proved.
        if !still_to_prove(&self.ledger, &prepared.item).await {
            self.buffers.put(witness);
            self.save(&prepared, Outcome::Skipped).await;
            return;
        }
        let outcome = match self.prove(backend, keys, label, &prepared, witness).await {
            Ok(proof) => Outcome::Proved(proof),
            Err(e) => Outcome::Failed(e),
        };
        self.save(&prepared, outcome).await;
    }

    async fn save(&self, prepared: &Prepared, outcome: Outcome) {
        prepared.ticker.abort();
        let held = saver::Item {
            message: &prepared.message,
            item: &prepared.item,
            delivered: prepared.delivered,
        };
        saver::save(&self.topology, &self.ledger, held, outcome).await;
    }

    async fn settle(&self, prepared: &Prepared, settle: Settle) {
        prepared.ticker.abort();
        saver::settle_message(&prepared.message, &prepared.item, settle).await;
    }

    async fn prove<B: Backend>(
        &self,
        backend: &Arc<B>,
        keys: &Keys<B>,
        label: &str,
        prepared: &Prepared,
        witness: WitnessBuf,
    ) -> Result<ProvedPartition, PartitionError> {
        let item = &prepared.item;
        let family = family_of(item)?;
        let synthetic = family.synthetic();
        if synthetic && !self.allow_synthetic {
            return Err(PartitionError::Fatal(
                "synthetic jobs (random data, for timings) are not accepted here: start the nodes with --allow-synthetic".into(),
            ));
        }
        let shape = self
            .load_key(backend, keys, family)
            .instrument(info_span!("load_params"))
            .await?;
        let info = backend.key_info(&shape.key);
        if prepared.shape_hash != info.matrices_hash {
            return Err(PartitionError::Fatal(format!(
                "partition {}: the blob was synthesized against constraint matrices {} of {}, but this node's are {} (synth and GPU nodes run different circuit code)",
                item.partition,
                hex::encode(&prepared.shape_hash[..8]),
                item.shape_key,
                hex::encode(&info.matrices_hash[..8])
            )));
        }
        let mut rng = rand::rngs::OsRng;
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let started = Instant::now();
        let (backend_ref, shape_ref, pool) =
            (backend.clone(), shape.clone(), self.prove_pool.clone());
        // A synthetic witness satisfies no constraint: its proof cannot verify.
        let verified = self.config.verify && !synthetic;
        let (partition, job) = (item.partition, labels(item));
        // Spans do not follow work onto other threads: enter `prove` on the pool thread so the
        // prover's stage spans are its children.
        let span = info_span!("prove");
        let (proved, witness) = tokio::task::spawn_blocking(move || {
            let mut witness = witness;
            witness.repin(&*backend_ref);
            let proved = pool.install(|| {
                span.in_scope(|| {
                    let pvk = verified.then_some(&shape_ref.pvk);
                    let key = &shape_ref.key;
                    executor::prove(&*backend_ref, key, pvk, &witness.w, (r, s), partition, &job)
                })
            });
            (proved, witness)
        })
        .await
        .map_err(|e| PartitionError::Fatal(format!("prover died: {e}")))?;
        self.buffers.put(witness);
        let (proof, prove_timings) = proved?;
        let mut timings = prepared.timings;
        let elapsed = started.elapsed();
        self.load.busy(label, elapsed);
        let (m, job) = (metrics(), labels(item));
        m.stage("prove", &job, elapsed);
        m.stage("h2d", &job, prove_timings.upload);
        m.stage("turn", &job, prove_timings.turn);
        m.stage("spmv", &job, prove_timings.evaluate);
        m.stage("h", &job, prove_timings.h);
        m.stage("msm", &job, prove_timings.msm);
        timings.prove_ms = ms(elapsed);
        timings.h2d_ms = ms(prove_timings.upload);
        timings.turn_ms = ms(prove_timings.turn);
        timings.spmv_ms = ms(prove_timings.evaluate);
        timings.h_ms = ms(prove_timings.h);
        timings.msm_ms = ms(prove_timings.msm);
        let proof_hex = hex::encode(cuzk_prover::proof_bytes(&proof));
        info!(
            h2d_ms = timings.h2d_ms,
            turn_ms = timings.turn_ms,
            spmv_ms = timings.spmv_ms,
            h_ms = timings.h_ms,
            msm_ms = timings.msm_ms,
            prove_ms = timings.prove_ms,
            queue_wait_ms = timings.queue_wait_ms,
            fetch_ms = timings.fetch_ms,
            decode_ms = timings.decode_ms,
            // The device's host-to-device bytes so far: a drain's total over its partitions.
            h2d_total_bytes = backend.h2d_bytes(),
            "partition proved"
        );

        Ok(ProvedPartition {
            proof: proof_hex,
            timings,
            attempts: prepared.delivered as u32,
            prover: format!("{}/{label}", self.name),
            verified,
        })
    }

    /// The proving key of a circuit shape, loaded into the backend once per device.
    async fn load_key<B: Backend>(
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

/// The circuit family a work item names, checked against the item's shape.
/// Whether the item's partition still waits for its proof. A record that cannot be read does
/// not stop the proof: one that lands on an ended job changes nothing.
async fn still_to_prove(ledger: &Ledger, item: &WorkItem) -> bool {
    match ledger.get(&item.job_id).await {
        Ok(Some(record)) => {
            let state = machine::partition_state(&record, item.partition as usize);
            if state != Proved::Recorded {
                info!(job_id = %item.job_id, partition = item.partition, ?state, "prefetched, but nothing to prove now; skipping");
            }
            state == Proved::Recorded
        }
        Ok(None) => false,
        Err(e) => {
            warn!(job_id = %item.job_id, err = %e, "cannot read the job record before proving; proving");
            true
        }
    }
}

/// Compact bytes per aux variable a witness buffer gets at key load: PoRep witnesses take
/// 1.5–1.9 (docs/porep.md). A blob that needs more grows its buffer once, and pins it again.
const COMPACT_BYTES_PER_AUX: usize = 3;

/// How long a fetch waits for its device's fetch turn ([`FetchTurn`]): well beyond what
/// a 0.3 GB blob takes at 1 GB/s.
const FETCH_TURN_WAIT: Duration = Duration::from_secs(1);

/// Partitions `workers` on one device hold at once: each the one it proves and those it has
/// prefetched.
fn held_by(workers: usize, prefetch: usize) -> usize {
    workers * (1 + prefetch)
}

fn family_of(item: &WorkItem) -> Result<Arc<dyn CircuitFamily>, PartitionError> {
    let params_value: serde_json::Value = serde_json::from_str(&item.params_json)
        .map_err(|e| PartitionError::Fatal(format!("work item params: {e}")))?;
    let family = cuzk_circuits::resolve(&CircuitSpec {
        name: item.circuit.clone(),
        params: params_value,
    })
    .map_err(|e| PartitionError::Fatal(e.to_string()))?;
    if family.shape_key() != item.shape_key {
        return Err(PartitionError::Fatal(format!(
            "work item shape {} does not match circuit shape {}",
            item.shape_key,
            family.shape_key()
        )));
    }
    Ok(family)
}

/// High-priority work first; otherwise wait briefly on the normal queue.
async fn next_work(
    consumers: &[PullConsumer; 2],
) -> Result<Option<jetstream::Message>, async_nats::Error> {
    let [high, normal] = consumers;
    if let Some(message) = pull_one(high, Duration::ZERO).await? {
        return Ok(Some(message));
    }
    pull_one(normal, Duration::from_secs(2)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_common::local_nats::NatsServer;
    use cuzk_common::topology::{provision, Limits, DEFAULT_ACK_WAIT};

    fn item(job_id: &str, partition: u32) -> WorkItem {
        WorkItem {
            version: 1,
            job_id: job_id.into(),
            partition,
            partitions: 2,
            circuit: "mimc".into(),
            params_json: "{}".into(),
            shape_key: "mimc-r64".into(),
            blob_object: format!("{job_id}/0/{partition}"),
            published_at_ms: 0,
            timings: Default::default(),
        }
    }

    /// What a worker checks just before proving an item it prefetched: a partition still
    /// queued is proved; one of a job that has ended since (cancelled), one already proved, or
    /// one of a job without a record is skipped.
    #[tokio::test]
    async fn a_prefetched_item_of_an_ended_job_is_not_proved() {
        let server = NatsServer::start().unwrap();
        let client = async_nats::connect(server.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let topology = provision(&js, 1, DEFAULT_ACK_WAIT, Limits::local())
            .await
            .unwrap();
        let ledger = Ledger::new(&topology);
        let record = serde_json::json!({
            "job_id": "pre", "circuit": "mimc", "params": {}, "status": "proving",
            "submission_seq": 1, "submitted_at_ms": 0, "synth_started_at_ms": 0,
            "updated_at_ms": 0,
            "partitions": [
                {"status": "proved", "proof": "ab".repeat(192), "attempts": 1, "prover": "gpu/0", "verified": true},
                {"status": "queued"},
            ],
        });
        let body = serde_json::to_vec(&record).unwrap();
        topology.jobs_kv.create("pre", body.into()).await.unwrap();
        assert!(still_to_prove(&ledger, &item("pre", 1)).await);
        assert!(!still_to_prove(&ledger, &item("pre", 0)).await);
        assert!(!still_to_prove(&ledger, &item("no-record", 0)).await);
        ledger.cancel("pre", "cancelled on request").await.unwrap();
        assert!(!still_to_prove(&ledger, &item("pre", 1)).await);
    }
}
