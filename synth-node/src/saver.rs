//! The synth node's saver: a synthesized partition's blob goes to the blobs bucket, its work
//! item to the work queue, and the ledger notes it queued — in that order, each step
//! idempotent, so a redelivered job resumes where it stopped.

use std::time::Instant;

use async_nats::jetstream::message::PublishMessage;
use cuzk_common::lifecycle::blobs::blob_object_name;
use cuzk_common::lifecycle::{machine, Ledger};
use cuzk_common::metrics::metrics;
use cuzk_common::objects::{self, ObjectError};
use cuzk_common::policy::StepError;
use cuzk_common::retry::{retry, RetryPolicy};
use cuzk_common::telemetry;
use cuzk_common::topology::{Topology, SUBJECT_WORK_HIGH, SUBJECT_WORK_NORMAL};
use cuzk_wire::job::{unix_ms, JobStatus, Priority, Stage, WorkItem, WORK_ITEM_VERSION};
use tracing::{info, info_span, warn, Instrument};

use crate::executor::Encoded;
use crate::intake::Admitted;
use crate::room::Room;

pub async fn save(
    ledger: &Ledger,
    job: &Admitted,
    index: usize,
    done: Encoded,
    room: &Room<'_>,
) -> Result<(), StepError> {
    let Encoded {
        blob,
        mut timings,
        public_inputs,
    } = done;
    let job_id = job.key.as_str();
    let object = blob_object_name(job_id, index, job.seq);
    let blob = bytes::Bytes::from(blob);
    let mut refused = false;
    loop {
        let started = Instant::now();
        let span = info_span!(Stage::Upload.name(), cuzk.blob_bytes = blob.len());
        let put = objects::put_through(&room.topology.blob_writers, &object, blob.clone());
        match put.instrument(span).await {
            Ok(()) => {
                let took = started.elapsed();
                metrics().partition_stage(&mut timings, Stage::Upload, &job.labels, took);
                break;
            }
            // Other partitions filled the room this one saw: it waits for the GPUs to take
            // blobs, holding its job (in progress) rather than failing it.
            Err(ObjectError::Full { message, .. }) => {
                if !refused {
                    warn!(%object, %message, "blob buckets full; waiting for room to upload");
                    refused = true;
                }
                metrics().error("synth", "bucket_full", &job.labels);
                room.after_refusal(blob.len() as u64)
                    .instrument(info_span!("blob_room_wait"))
                    .await?;
                if !still_running(ledger, job, index).await? {
                    return Ok(());
                }
            }
            Err(e) => return Err(e.into()),
        }
    }

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
    let work_seq = publish_work(room.topology, &item, job.spec.priority, job.seq).await?;
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

/// Whether partition `index` of `job` is still to be queued: not when its job has ended (a
/// cancelled or finished job's partition stops here), and a job failed by a sibling fails this
/// partition with its reason.
pub async fn still_running(
    ledger: &Ledger,
    job: &Admitted,
    index: usize,
) -> Result<bool, StepError> {
    let Some(record) = ledger.get(&job.key).await? else {
        return Ok(true);
    };
    match record.status {
        JobStatus::Failed => Err(StepError::Fatal(
            record.error.unwrap_or_else(|| "job failed".into()),
        )),
        status if status.is_final() => {
            info!(job_id = %job.key, partition = index, ?status, "job ended; not queueing");
            Ok(false)
        }
        _ => Ok(true),
    }
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
