//! One proving worker: the partitions its picker prepared are proved in turn through the
//! executor, with the shape's proving key, resident per device and shared by the device's
//! workers, and their outcomes go to the saver. On shutdown it finishes the partition it is
//! proving and hands back what it prefetched.

use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream::consumer::PullConsumer;
use blstrs::Scalar;
use cuzk_circuits::CircuitFamily;
use cuzk_common::lifecycle::{machine, Ledger, Proved, ProvedPartition};
use cuzk_common::metrics::{metrics, JobLabels};
use cuzk_common::policy::{Settle, StepError as PartitionError};
use cuzk_prover::Backend;
use cuzk_wire::job::{Stage, WorkItem};
use ff::Field;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, info_span, warn, Instrument};

use crate::buffers::WitnessBuf;
use crate::control::{BackendKeys, OnBackend};
use crate::executor::{self, Verify, VerifyError};
use crate::fetch_turn::FetchTurn;
use crate::keys::Keys;
use crate::picker::{Prepared, Taken};
use crate::saver::Outcome;
use crate::GpuNode;

/// The `circuit`/`shape` labels of a work item's measurements.
pub(crate) fn labels(item: &WorkItem) -> JobLabels {
    JobLabels::new(&item.circuit, &item.shape_key)
}

/// One worker's state, shared by its proving loop and its picker.
pub(crate) struct Worker<B: Backend> {
    pub node: Arc<GpuNode>,
    backend: Arc<B>,
    /// The backend's proving keys, shared by its workers.
    keys: Arc<Keys<B>>,
    /// `{backend}.{index}`: names the worker in logs, the node's load and each proof's prover.
    label: String,
    /// Shared by the device's workers, so they fetch one blob at a time.
    pub fetch_turn: Arc<FetchTurn>,
    /// The high-priority and the normal work queue.
    pub consumers: Arc<[PullConsumer; 2]>,
    pub shutdown: CancellationToken,
}

impl GpuNode {
    /// `count` proving workers on one backend, labelled `{prefix}.{index}`, sharing its proving
    /// keys and their [`FetchTurn`].
    pub(crate) fn spawn_workers<B: Backend>(
        self: &Arc<Self>,
        workers: &mut JoinSet<()>,
        backend: Arc<B>,
        keys: Arc<Keys<B>>,
        (prefix, count): (&str, usize),
        consumers: &Arc<[PullConsumer; 2]>,
        shutdown: &CancellationToken,
    ) -> Arc<dyn BackendKeys> {
        let resident = Arc::new(OnBackend {
            backend: backend.clone(),
            keys: keys.clone(),
        });
        let fetch_turn = Arc::new(FetchTurn::default());
        for w in 0..count {
            let worker = Worker {
                node: self.clone(),
                backend: backend.clone(),
                keys: keys.clone(),
                label: format!("{prefix}.{w}"),
                fetch_turn: fetch_turn.clone(),
                consumers: consumers.clone(),
                shutdown: shutdown.clone(),
            };
            workers.spawn(Arc::new(worker).run());
        }
        resident
    }
}

impl<B: Backend> Worker<B> {
    async fn run(self: Arc<Self>) {
        let slots = Arc::new(Semaphore::new(1 + self.node.config.prefetch));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let fetcher = tokio::spawn(self.clone().fetch_loop(slots, tx));
        while let Some(prepared) = rx.recv().await {
            let prepared: Prepared = prepared;
            if self.shutdown.is_cancelled() {
                prepared.taken.settle(Settle::Nak(None)).await;
                continue;
            }
            let span = prepared.taken.span.clone();
            span.record("cuzk.worker", self.label.as_str());
            self.prove_and_settle(prepared).instrument(span).await;
        }
        let _ = fetcher.await;
        info!(worker = %self.label, "worker stopped");
    }

    async fn prove_and_settle(&self, prepared: Prepared) {
        let Prepared {
            taken,
            witness,
            shape_hash,
        } = prepared;
        let node = &self.node;
        // A prefetched item waited while the one before it was proved: its job may have ended
        // meanwhile (cancelled, failed). Then it is acknowledged and skipped, not proved.
        if !still_to_prove(&node.ledger, &taken.item).await {
            node.buffers.put(witness);
            taken.save(node, Outcome::Skipped).await;
            return;
        }
        let outcome = match self.prove(&taken, witness, shape_hash).await {
            Ok(proof) => Outcome::Proved(proof),
            Err(e) => Outcome::Failed(e),
        };
        taken.save(node, outcome).await;
    }

    /// Proves the item on the prove pool ([`executor::prove`]) and measures it; the witness
    /// buffer goes back to the node's pool.
    async fn prove(
        &self,
        taken: &Taken,
        witness: WitnessBuf,
        shape_hash: [u8; 32],
    ) -> Result<ProvedPartition, PartitionError> {
        let (node, backend) = (&self.node, &self.backend);
        let item = &taken.item;
        let family = family_of(item)?;
        let synthetic = family.synthetic();
        if synthetic && !node.allow_synthetic {
            return Err(PartitionError::Fatal(
                "synthetic jobs (random data, for timings) are not accepted here: start the nodes with --allow-synthetic".into(),
            ));
        }
        let shape = node
            .load_key(backend, &self.keys, family)
            .instrument(info_span!("load_params"))
            .await?;
        let info = backend.key_info(&shape.key);
        if shape_hash != info.matrices_hash {
            return Err(PartitionError::Fatal(format!(
                "partition {}: the blob was synthesized against constraint matrices {} of {}, but this node's are {} (synth and GPU nodes run different circuit code)",
                item.partition,
                hex::encode(&shape_hash[..8]),
                item.shape_key,
                hex::encode(&info.matrices_hash[..8])
            )));
        }
        let mut rng = rand::rngs::OsRng;
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let started = Instant::now();
        let (backend_ref, shape_ref, pool) =
            (backend.clone(), shape.clone(), node.prove_pool.clone());
        // A synthetic witness satisfies no constraint: its proof cannot verify.
        let verified = node.config.verify && !synthetic;
        let job_inputs = match item.public_inputs {
            _ if !verified => None,
            Some(inputs) => Some(inputs),
            None => {
                let partition = item.partition;
                return Err(VerifyError::NoJobInputs { partition }.into());
            }
        };
        let (partition, job) = (item.partition, labels(item));
        // Spans do not follow work onto other threads: enter `prove` on the pool thread so the
        // prover's stage spans are its children.
        let span = info_span!(Stage::Prove.name());
        let (proved, witness) = tokio::task::spawn_blocking(move || {
            let mut witness = witness;
            witness.repin(&*backend_ref);
            let proved = pool.install(|| {
                span.in_scope(|| {
                    let verify = job_inputs.as_ref().map(|job_inputs| Verify {
                        pvk: &shape_ref.pvk,
                        job_inputs,
                    });
                    let key = &shape_ref.key;
                    executor::prove(
                        &*backend_ref,
                        key,
                        verify,
                        &witness.w,
                        (r, s),
                        partition,
                        &job,
                    )
                })
            });
            (proved, witness)
        })
        .await
        .map_err(|e| PartitionError::Fatal(format!("prover died: {e}")))?;
        node.buffers.put(witness);
        let (proof, prove_timings) = proved?;
        let mut timings = taken.timings;
        let elapsed = started.elapsed();
        node.load.busy(&self.label, elapsed);
        let (m, job) = (metrics(), labels(item));
        m.partition_stage(&mut timings, Stage::Prove, &job, elapsed);
        for (stage, took) in prove_timings.stages() {
            m.partition_stage(&mut timings, stage, &job, took);
        }
        let proof_hex = hex::encode(cuzk_prover::proof_bytes(&proof));
        info!(
            // The device's host-to-device bytes so far: a drain's total over its partitions.
            h2d_total_bytes = backend.h2d_bytes(),
            "partition proved {}",
            timings.log_fields(Stage::ON_GPU_NODE),
        );

        Ok(ProvedPartition {
            proof: proof_hex,
            timings,
            attempts: taken.delivered as u32,
            prover: format!("{}/{}", node.name, self.label),
            verified,
        })
    }
}

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

/// The circuit family a work item names, checked against the item's shape.
fn family_of(item: &WorkItem) -> Result<Arc<dyn CircuitFamily>, PartitionError> {
    let params_value: serde_json::Value = serde_json::from_str(&item.params_json)
        .map_err(|e| PartitionError::Fatal(format!("work item params: {e}")))?;
    let family = cuzk_circuits::resolve(&item.circuit, &params_value)
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
            public_inputs: None,
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
