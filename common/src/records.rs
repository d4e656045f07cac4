//! Job records in the jobs KV bucket. Every change is a compare-and-set on the record's
//! revision, so concurrent synth and GPU nodes never lose each other's updates, and the final
//! result is reported once.

use async_nats::jetstream::kv::{self, CreateErrorKind, UpdateErrorKind};
use async_nats::HeaderMap;
use bytes::Bytes;

use crate::nats::{retry, RetryPolicy};
use crate::topology::{results_subject, Topology};
use cuzk_wire::job::{unix_ms, JobRecord, JobResult};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// NATS did not answer in time or refused the operation; the step can be retried.
    #[error("jobs bucket unavailable: {0}")]
    Unavailable(String),
    /// The stored record is not ours to read; nothing will fix it but a person.
    #[error("job record {job_id} is unreadable: {message}")]
    Corrupt { job_id: String, message: String },
}

impl cuzk_wire::Retryable for RecordError {
    fn retryable(&self) -> bool {
        matches!(self, RecordError::Unavailable(_))
    }
}

fn unavailable(e: impl std::fmt::Display) -> RecordError {
    RecordError::Unavailable(e.to_string())
}

fn parse(job_id: &str, value: &[u8]) -> Result<JobRecord, RecordError> {
    serde_json::from_slice(value).map_err(|e| RecordError::Corrupt {
        job_id: job_id.to_owned(),
        message: e.to_string(),
    })
}

fn encode(record: &JobRecord) -> Bytes {
    serde_json::to_vec(record)
        .expect("job records serialize")
        .into()
}

/// The record and its revision, if the job exists.
pub async fn load(kv: &kv::Store, job_id: &str) -> Result<Option<(JobRecord, u64)>, RecordError> {
    let entry = retry("read job record", RetryPolicy::NETWORK, || kv.entry(job_id))
        .await
        .map_err(unavailable)?;
    match entry {
        Some(entry) if entry.operation == kv::Operation::Put => {
            Ok(Some((parse(job_id, &entry.value)?, entry.revision)))
        }
        _ => Ok(None),
    }
}

/// Stores a new record; `Ok(false)` if one with this id already exists.
pub async fn create(kv: &kv::Store, record: &JobRecord) -> Result<bool, RecordError> {
    let value = encode(record);
    let mut attempt = 0;
    loop {
        match kv.create(&record.job_id, value.clone()).await {
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == CreateErrorKind::AlreadyExists => return Ok(false),
            Err(e) if attempt + 1 >= RetryPolicy::NETWORK.attempts => return Err(unavailable(e)),
            Err(e) => {
                // A create that timed out may have landed; the next try then sees AlreadyExists,
                // so look before trying again.
                tracing::warn!(err = %e, job_id = %record.job_id, "creating job record failed; retrying");
                tokio::time::sleep(RetryPolicy::NETWORK.jittered(attempt)).await;
                if let Some((existing, _)) = load(kv, &record.job_id).await? {
                    return Ok(existing.submission_seq == record.submission_seq);
                }
                attempt += 1;
            }
        }
    }
}

/// Applies `edit` to the current record until the compare-and-set succeeds. `edit` returns
/// whether it changed the record (no write otherwise). Returns the record as stored, or `None`
/// if the job has no record.
pub async fn update<F>(
    kv: &kv::Store,
    job_id: &str,
    mut edit: F,
) -> Result<Option<JobRecord>, RecordError>
where
    F: FnMut(&mut JobRecord) -> bool,
{
    let mut failures = 0;
    loop {
        let Some((mut record, revision)) = load(kv, job_id).await? else {
            return Ok(None);
        };
        if !edit(&mut record) {
            return Ok(Some(record));
        }
        record.updated_at_ms = unix_ms();
        match kv.update(job_id, encode(&record), revision).await {
            Ok(_) => return Ok(Some(record)),
            // Someone else changed it first: read again and re-apply.
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => continue,
            Err(e) if failures + 1 >= RetryPolicy::NETWORK.attempts => return Err(unavailable(e)),
            Err(e) => {
                tracing::warn!(err = %e, job_id, "updating job record failed; retrying");
                tokio::time::sleep(RetryPolicy::NETWORK.jittered(failures)).await;
                failures += 1;
            }
        }
    }
}

/// Publishes a job's final result and marks the record final. The result carries the job id
/// as its message id, so a second report (a redelivered partition, a crash between the two
/// steps) within the dedup window is dropped by the server; the record keeps the first outcome.
pub async fn report_result(topology: &Topology, result: &JobResult) -> Result<(), RecordError> {
    publish_result(
        topology,
        &results_subject(&result.job_id),
        &result.job_id,
        result,
    )
    .await?;
    update(&topology.jobs_kv, &result.job_id, |record| {
        if record.status.is_final() {
            return false;
        }
        record.status = result.status;
        record.error = result.error.clone();
        record.result = Some(result.clone());
        true
    })
    .await?;
    Ok(())
}

/// Publishes on a results subject through JetStream (acknowledged, deduplicated by `msg_id`).
pub async fn publish_result(
    topology: &Topology,
    subject: &str,
    msg_id: &str,
    result: &JobResult,
) -> Result<(), RecordError> {
    let body: Bytes = serde_json::to_vec(result)
        .expect("results serialize")
        .into();
    retry("publish result", RetryPolicy::NETWORK, || async {
        let mut headers = HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, msg_id);
        // Subscribers to results can join the job's trace.
        crate::telemetry::inject(&tracing::Span::current(), &mut headers);
        topology
            .js
            .publish_with_headers(subject.to_owned(), headers, body.clone())
            .await?
            .await
            .map(|_| ())
            .map_err(async_nats::Error::from)
    })
    .await
    .map_err(unavailable)
}
