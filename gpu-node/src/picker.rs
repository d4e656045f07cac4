//! The picker: a worker's fetcher pulls work items while the worker has a free prefetch slot,
//! and fetches and decodes the next witness blob while the worker proves the one before it. A
//! device's workers fetch one blob at a time ([`FetchTurn`](crate::fetch_turn::FetchTurn)) and
//! the node decodes one at a time. An item with nothing to prove, or that cannot be proved, is
//! settled here.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, consumer::PullConsumer};
use cuzk_common::lifecycle::{machine, Proved};
use cuzk_common::metrics::{metrics, KeyValue};
use cuzk_common::nats::{progress_ticker, pull_one};
use cuzk_common::nodes::Held;
use cuzk_common::objects;
use cuzk_common::policy::{Settle, StepError as PartitionError};
use cuzk_common::telemetry;
use cuzk_prover::Backend;
use cuzk_wire::blob;
use cuzk_wire::job::{PartitionTimings, Stage, WorkItem};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tracing::{info, info_span, warn, Instrument};

use crate::buffers::WitnessBuf;
use crate::saver::{self, Outcome};
use crate::worker::{labels, Worker};
use crate::GpuNode;

/// How long a fetch waits for its device's fetch turn
/// ([`FetchTurn`](crate::fetch_turn::FetchTurn)): well beyond what a 0.3 GB blob takes at 1 GB/s.
const FETCH_TURN_WAIT: Duration = Duration::from_secs(1);

/// A work item taken from the queue, kept until it is settled.
pub(crate) struct Taken {
    pub message: Arc<jetstream::Message>,
    /// Tells the server the item is in progress until it is settled.
    pub ticker: tokio::task::JoinHandle<()>,
    pub delivered: i64,
    pub item: WorkItem,
    pub timings: PartitionTimings,
    /// The partition's span on this node, from taking the item to settling it.
    pub span: tracing::Span,
    /// Frees the worker's prefetch slot once this item is settled.
    _slot: OwnedSemaphorePermit,
    /// Counts the item in the node's reported load until it is settled.
    _load: Held,
}

impl Taken {
    /// Records the outcome and settles the item ([`saver::save`]).
    pub async fn save(&self, node: &GpuNode, outcome: Outcome) {
        self.ticker.abort();
        let work = saver::Item {
            message: &self.message,
            item: &self.item,
            delivered: self.delivered,
        };
        saver::save(&node.ledger, work, outcome).await;
    }

    /// Settles the item without recording anything.
    pub async fn settle(&self, settle: Settle) {
        self.ticker.abort();
        saver::settle_message(&self.message, &self.item, settle).await;
    }
}

/// A work item whose blob is fetched and decoded, ready for the backend.
pub(crate) struct Prepared {
    pub taken: Taken,
    pub witness: WitnessBuf,
    /// The hash of the matrices the witness was synthesized against (from the blob header).
    pub shape_hash: [u8; 32],
}

impl<B: Backend> Worker<B> {
    /// Pulls work items while the worker has a free slot, fetching and decoding each one.
    pub(crate) async fn fetch_loop(
        self: Arc<Self>,
        slots: Arc<Semaphore>,
        tx: mpsc::UnboundedSender<Prepared>,
    ) {
        loop {
            let slot = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                slot = slots.clone().acquire_owned() => slot.expect("semaphore open"),
            };
            let message = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                message = next_work(&self.consumers) => message,
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
            if let Some(prepared) = self.prepare(message, slot).await {
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
            self.node.topology.progress_interval(),
        ));
        // A child of the synth node's `send` span through the work item's `traceparent`.
        let span = telemetry::process_span(&message);
        span.record("cuzk.job_id", item.job_id.as_str());
        span.record("cuzk.partition", item.partition);
        telemetry::set_parent(&span, message.headers.as_ref());
        // One measurement for the span, the histogram and the record: from the synth node's
        // publication of the work item to now.
        let published = UNIX_EPOCH + Duration::from_millis(item.published_at_ms);
        let now = SystemTime::now();
        telemetry::record_wait(&span, Stage::QueueWait.name(), published, now);
        let load = self.node.load.hold("gpu");
        let mut timings = item.timings;
        let wait = now.duration_since(published).unwrap_or_default();
        metrics().partition_stage(&mut timings, Stage::QueueWait, &labels(&item), wait);
        let fetched = self
            .fetch_witness(&item, &mut timings)
            .instrument(span.clone())
            .await;
        let taken = Taken {
            message,
            ticker,
            delivered,
            item,
            timings,
            span: span.clone(),
            _slot: slot,
            _load: load,
        };
        async move {
            match fetched {
                Ok(Some((witness, shape_hash))) => Some(Prepared {
                    taken,
                    witness,
                    shape_hash,
                }),
                Ok(None) => {
                    taken.save(&self.node, Outcome::Skipped).await;
                    None
                }
                Err(e) => {
                    taken.save(&self.node, Outcome::Failed(e)).await;
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
        timings: &mut PartitionTimings,
    ) -> Result<Option<(WitnessBuf, [u8; 32])>, PartitionError> {
        let node = &self.node;
        // A redelivered item of a proved partition (lost ack, server restart, leader change)
        // finds its blob deleted: skip it, and finish what a crash may have left of its job.
        let Some(record) = node.ledger.get(&item.job_id).await? else {
            warn!(job_id = %item.job_id, "work item of a job without a record; skipping");
            return Ok(None);
        };
        match machine::partition_state(&record, item.partition as usize) {
            Proved::Recorded => {}
            state => {
                info!(job_id = %item.job_id, partition = item.partition, ?state, "nothing to prove; skipping");
                node.ledger.catch_up(&record).await?;
                return Ok(None);
            }
        }
        let turn = self.fetch_turn.take(FETCH_TURN_WAIT).await;
        let started = Instant::now();
        let mut bytes = node.blobs.take();
        let read = objects::read_bounded_into(
            &node.topology.blobs,
            &node.topology.blob_readers,
            &item.blob_object,
            node.limits.max_blob_bytes,
            &mut bytes,
        )
        .instrument(info_span!(Stage::Fetch.name()))
        .await;
        drop(turn);
        if let Err(e) = read {
            node.blobs.put(bytes);
            return Err(e.into());
        }
        let job = labels(item);
        metrics().partition_stage(timings, Stage::Fetch, &job, started.elapsed());
        metrics().blob_bytes.add(
            bytes.len() as u64,
            &job.with(&[
                KeyValue::new("direction", "down"),
                KeyValue::new("form", "wire"),
            ]),
        );
        let started = Instant::now();
        let (limits, decode, turn) = (node.limits, node.decode.clone(), node.decode_turn.clone());
        let mut witness = node.buffers.take();
        if let Ok(header) = blob::peek_header(&bytes, &limits) {
            witness.make_room(header.encoded_len as usize);
        }
        let decoded = tokio::task::spawn_blocking(move || {
            let _turn = turn.lock().unwrap_or_else(|e| e.into_inner());
            let header =
                decode.install(|| blob::decode_blob_compact_into(&bytes, &limits, &mut witness.w));
            (header, witness, bytes)
        })
        .instrument(info_span!(Stage::Decode.name()))
        .await
        .map_err(|e| PartitionError::Fatal(format!("decoder died: {e}")))?;
        let (header, witness, bytes) = decoded;
        node.blobs.put(bytes);
        let header = header
            .map_err(|e| PartitionError::Fatal(format!("partition {}: {e}", item.partition)))?;
        metrics().partition_stage(timings, Stage::Decode, &job, started.elapsed());
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
