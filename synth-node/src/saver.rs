//! The synth node's saver: a synthesized partition's blob goes to the blobs bucket, its work
//! item to the work queue, and the ledger notes it queued — in that order, each step
//! idempotent, so a redelivered job resumes where it stopped.

use std::time::Instant;

use async_nats::jetstream::message::PublishMessage;
use cuzk_common::lifecycle::{machine, Ledger};
use cuzk_common::metrics::metrics;
use cuzk_common::objects;
use cuzk_common::policy::StepError;
use cuzk_common::retry::{retry, RetryPolicy};
use cuzk_common::telemetry;
use cuzk_common::topology::{Topology, SUBJECT_WORK_HIGH, SUBJECT_WORK_NORMAL};
use cuzk_wire::job::{
    unix_ms, JobRecord, PartitionStatus, Priority, Stage, WorkItem, WORK_ITEM_VERSION,
};
use tracing::{info, info_span, warn, Instrument};

use crate::executor::Encoded;
use crate::intake::Admitted;

/// Blob names start with the job's key and carry the submission sequence so a resubmitted job
/// id never meets stale blobs.
pub fn blob_object_name(key: &str, partition: usize, seq: u64) -> String {
    format!("{key}/{seq}/{partition}")
}

/// Deletes the blobs of an ended job's partitions that were queued and not proved (proved
/// ones were deleted by their GPU node).
pub async fn delete_queued_blobs(topology: &Topology, record: &JobRecord) {
    for (index, partition) in record.partitions.iter().enumerate() {
        if partition.status == PartitionStatus::Queued {
            let blob = blob_object_name(&record.key(), index, record.submission_seq);
            if let Err(e) = objects::delete(&topology.blobs, &blob).await {
                warn!(err = %e, %blob, "deleting an ended job's blob failed; the bucket's max age reclaims it");
            }
        }
    }
}

pub async fn save(
    topology: &Topology,
    ledger: &Ledger,
    job: &Admitted,
    index: usize,
    done: Encoded,
) -> Result<(), StepError> {
    let Encoded {
        blob,
        mut timings,
        public_inputs,
    } = done;
    let job_id = job.key.as_str();
    let started = Instant::now();
    let object = blob_object_name(job_id, index, job.seq);
    let span = info_span!(Stage::Upload.name(), cuzk.blob_bytes = blob.len());
    objects::put_through(&topology.blob_writers, &object, blob.into())
        .instrument(span)
        .await?;
    metrics().partition_stage(&mut timings, Stage::Upload, &job.labels, started.elapsed());

    let item = WorkItem {
        version: WORK_ITEM_VERSION,
        job_id: job_id.to_owned(),
        partition: index as u32,
        partitions: job.circuit.partitions() as u32,
        circuit: job.spec.circuit.clone(),
        params_json: job.spec.params.to_string(),
        shape_key: job.circuit.shape_key(),
        blob_object: object,
        public_inputs,
        published_at_ms: unix_ms(),
        timings,
    };
    let work_seq = publish_work(topology, &item, job.spec.priority, job.seq).await?;
    let stored = ledger
        .queued(job_id, index, timings, work_seq, job.attempt)
        .await?;
    if let Some(holder) = stored.filter(|r| machine::superseded(r, job.attempt)) {
        return Err(StepError::Superseded(format!(
            "delivery {} of job {job_id}'s message holds it now (this node's was {})",
            holder.intake_attempts, job.attempt
        )));
    }
    info!(
        synth_ms = timings.synth_ms,
        encode_ms = timings.encode_ms,
        upload_ms = timings.upload_ms,
        blob_bytes = timings.blob_bytes,
        raw_bytes = timings.raw_bytes,
        "partition queued"
    );
    Ok(())
}

/// Publishes the partition's work item; its stream sequence (the first publication's, for a
/// republish the stream deduplicated).
async fn publish_work(
    topology: &Topology,
    item: &WorkItem,
    priority: Priority,
    seq: u64,
) -> Result<u64, StepError> {
    let subject = match priority {
        Priority::High => SUBJECT_WORK_HIGH,
        Priority::Normal => SUBJECT_WORK_NORMAL,
    };
    let payload = bytes::Bytes::from(item.encode());
    // The message id makes a republish after a timeout or a resumed job a no-op.
    let msg_id = format!("{}.{}.{seq}", item.job_id, item.partition);
    // The GPU node's spans for this partition become children of this one.
    let span = telemetry::send_span(subject, &msg_id, payload.len());
    let mut headers = async_nats::HeaderMap::new();
    telemetry::inject(&span, &mut headers);
    retry("publish work item", RetryPolicy::NETWORK, || async {
        let publish = PublishMessage::build()
            .headers(headers.clone())
            .payload(payload.clone())
            .message_id(msg_id.as_str());
        topology
            .js
            .send_publish(subject, publish)
            .await?
            .await
            .map(|ack| ack.sequence)
            .map_err(async_nats::Error::from)
    })
    .instrument(span)
    .await
    .map_err(|e| StepError::Retry(format!("publishing work item: {e}")))
}
