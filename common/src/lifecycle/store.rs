//! Job records in the jobs KV bucket, each under its job's key (`<tenant>.<job_id>`, or the
//! job id for the untenanted path: `JobRecord::key`), read and written by compare-and-set on
//! the record's revision, so concurrent synth and GPU nodes never lose each other's updates.
//! Private to the lifecycle module: the ledger is the only writer.

use async_nats::jetstream::kv::{self, CreateErrorKind, UpdateErrorKind};
use bytes::Bytes;

use super::RecordError;
use crate::retry::{retry, RetryPolicy};
use cuzk_wire::job::{unix_ms, JobRecord};

fn unavailable(e: impl std::fmt::Display) -> RecordError {
    RecordError::Unavailable(e.to_string())
}

/// The record stored under `key`; one that names another key is not this job's.
fn parse(key: &str, value: &[u8]) -> Result<JobRecord, RecordError> {
    let corrupt = |message: String| RecordError::Corrupt {
        job_id: key.to_owned(),
        message,
    };
    let record: JobRecord = serde_json::from_slice(value).map_err(|e| corrupt(e.to_string()))?;
    if record.key() != key {
        return Err(corrupt(format!("it is the record of {}", record.key())));
    }
    Ok(record)
}

fn encode(record: &JobRecord) -> Bytes {
    serde_json::to_vec(record)
        .expect("job records serialize")
        .into()
}

/// The record under `key` and its revision, if the job exists.
pub(super) async fn load(
    kv: &kv::Store,
    key: &str,
) -> Result<Option<(JobRecord, u64)>, RecordError> {
    let entry = retry("read job record", RetryPolicy::NETWORK, || kv.entry(key))
        .await
        .map_err(unavailable)?;
    match entry {
        Some(entry) if entry.operation == kv::Operation::Put => {
            Ok(Some((parse(key, &entry.value)?, entry.revision)))
        }
        _ => Ok(None),
    }
}

/// Stores a new record under its key; `Ok(false)` if one with this key already exists.
pub(super) async fn create(kv: &kv::Store, record: &JobRecord) -> Result<bool, RecordError> {
    let value = encode(record);
    let key = record.key();
    let mut attempt = 0;
    loop {
        match kv.create(&key, value.clone()).await {
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == CreateErrorKind::AlreadyExists => return Ok(false),
            Err(e) if attempt + 1 >= RetryPolicy::NETWORK.attempts => return Err(unavailable(e)),
            Err(e) => {
                // A create that timed out may have landed; the next try then sees AlreadyExists,
                // so look before trying again.
                tracing::warn!(err = %e, job = %key, "creating job record failed; retrying");
                tokio::time::sleep(RetryPolicy::NETWORK.jittered(attempt)).await;
                if let Some((existing, _)) = load(kv, &key).await? {
                    return Ok(existing.submission_seq == record.submission_seq
                        && existing.status == record.status);
                }
                attempt += 1;
            }
        }
    }
}

/// Applies `edit` to the record under `key` until the compare-and-set succeeds. `edit` returns
/// whether it changed the record (no write otherwise). Returns the record as stored and whether
/// this call changed it, or `None` if the job has no record.
pub(super) async fn update<F>(
    kv: &kv::Store,
    key: &str,
    mut edit: F,
) -> Result<Option<(JobRecord, bool)>, RecordError>
where
    F: FnMut(&mut JobRecord) -> bool,
{
    let mut failures = 0;
    loop {
        let Some((mut record, revision)) = load(kv, key).await? else {
            return Ok(None);
        };
        if !edit(&mut record) {
            return Ok(Some((record, false)));
        }
        record.updated_at_ms = unix_ms();
        match kv.update(key, encode(&record), revision).await {
            Ok(_) => return Ok(Some((record, true))),
            // Someone else changed it first: read again and re-apply.
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => continue,
            Err(e) if failures + 1 >= RetryPolicy::NETWORK.attempts => return Err(unavailable(e)),
            Err(e) => {
                tracing::warn!(err = %e, job = key, "updating job record failed; retrying");
                tokio::time::sleep(RetryPolicy::NETWORK.jittered(failures)).await;
                failures += 1;
            }
        }
    }
}
