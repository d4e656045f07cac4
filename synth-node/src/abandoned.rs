//! Jobs and partitions that exhausted their deliveries: every worker that took them stopped
//! before finishing (killed, crashed, out of memory). The server then stops redelivering and
//! only announces it with an advisory; without this watcher such a job would hang forever.
//! One synth node (a queue group) fails the job with the reason and removes the message.

use std::time::Duration;

use async_nats::jetstream::stream::{LastRawMessageErrorKind, Stream};
use cuzk_common::lifecycle::Ledger;
use cuzk_common::topology::{origin, Topology, ADVISORY_MAX_DELIVERIES, JOBS_STREAM, WORK_STREAM};
use cuzk_wire::job::{split_job_key, unix_ms, JobResult, JobSpec, WorkItem};
use futures::StreamExt;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

#[derive(Debug, Deserialize)]
struct MaxDeliveries {
    stream: String,
    stream_seq: u64,
    deliveries: u64,
}

pub async fn watch(topology: Topology, ledger: Ledger, shutdown: CancellationToken) {
    let client = topology.js.client();
    let subject = format!("{ADVISORY_MAX_DELIVERIES}.>");
    let mut advisories = match client.queue_subscribe(subject, "cuzk-synth".into()).await {
        Ok(subscriber) => subscriber,
        Err(e) => {
            warn!(err = %e, "cannot watch for abandoned work; such jobs would wait for a person");
            return;
        }
    };
    loop {
        let message = tokio::select! {
            _ = shutdown.cancelled() => return,
            message = advisories.next() => match message {
                Some(message) => message,
                None => return,
            },
        };
        tracing::debug!(subject = %message.subject, "max-deliveries advisory");
        let Ok(advisory) = serde_json::from_slice::<MaxDeliveries>(&message.payload) else {
            warn!("unreadable max-deliveries advisory");
            continue;
        };
        if let Err(e) = settle(&topology, &ledger, &advisory).await {
            warn!(err = %e, ?advisory, "could not fail an abandoned job");
        }
    }
}

async fn settle(
    topology: &Topology,
    ledger: &Ledger,
    advisory: &MaxDeliveries,
) -> Result<(), async_nats::Error> {
    let stream = topology.js.get_stream(&advisory.stream).await?;
    let Some((subject, payload)) = message_payload(&stream, advisory.stream_seq).await? else {
        // Acknowledged after all (a slow worker finished): nothing was lost.
        return Ok(());
    };
    let reason = |what: String| {
        format!(
            "{what} was abandoned after {} deliveries: every worker that took it stopped before finishing (killed, crashed or out of memory)",
            advisory.deliveries
        )
    };
    // A job message names its job by its id under the tenant its subject names; a work item
    // by its key.
    let (key, reason, blob) = match advisory.stream.as_str() {
        JOBS_STREAM => {
            let tenant = origin(&subject).and_then(|o| o.tenant);
            let key = |id: &str| cuzk_wire::job::job_key(tenant.as_deref(), id);
            match JobSpec::parse(&payload) {
                Ok(spec) => (key(&spec.job_id), reason("the job".into()), None),
                Err((Some(id), _)) => (key(&id), reason("the job".into()), None),
                Err((None, _)) => (String::new(), String::new(), None),
            }
        }
        WORK_STREAM => match WorkItem::decode(&payload) {
            Ok(item) => (
                item.job_id,
                reason(format!("partition {}", item.partition)),
                Some(item.blob_object),
            ),
            Err(_) => (String::new(), String::new(), None),
        },
        _ => return Ok(()),
    };
    if !key.is_empty() {
        warn!(job = %key, %reason, "failing abandoned job");
        let (tenant, job_id) = split_job_key(&key);
        let failed = JobResult::failed(job_id, reason);
        if advisory.stream == JOBS_STREAM {
            // The submission itself: another submission holding the id is left alone.
            ledger
                .refuse(tenant, &failed, advisory.stream_seq, unix_ms())
                .await?;
        } else {
            ledger.finish(&key, &failed).await?;
        }
    }
    if let Some(blob) = blob {
        ledger.delete_blob(&blob).await?;
    }
    stream.delete_message(advisory.stream_seq).await?;
    info!(stream = %advisory.stream, seq = advisory.stream_seq, "removed abandoned message");
    Ok(())
}

/// The subject and payload of the message at `seq`, if the stream still holds it.
async fn message_payload(
    stream: &Stream,
    seq: u64,
) -> Result<Option<(String, bytes::Bytes)>, async_nats::Error> {
    let mut last_error = None;
    for _ in 0..3 {
        match stream.get_raw_message(seq).await {
            Ok(message) => return Ok(Some((message.subject.to_string(), message.payload))),
            // The server answers "no message found" once the message was acknowledged.
            Err(e)
                if matches!(
                    e.kind(),
                    LastRawMessageErrorKind::NoMessageFound | LastRawMessageErrorKind::JetStream(_)
                ) =>
            {
                return Ok(None)
            }
            Err(e) => last_error = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(last_error
        .map(Into::into)
        .unwrap_or_else(|| "message lookup failed".into()))
}
