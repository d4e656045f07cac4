//! Job records in the jobs KV bucket, each under its job's key (`<tenant>.<job_id>`, or the
//! job id for the untenanted path: `JobRecord::key`), read and written by compare-and-set on
//! the record's revision, so concurrent synth and GPU nodes never lose each other's updates.
//! Private to the lifecycle module: the ledger is the only writer.
//!
//! Nodes read records from the bucket stream's leader. A direct get is answered by any server
//! holding the stream, a restarted one still catching up too, and that one answers with what
//! it held before it went down: no record for a job created meanwhile, or a partition still
//! queued that was proved meanwhile. A GPU node that read so skipped its work item and deleted
//! the blob (a job never answered), or fetched the blob its prover had already deleted (a good
//! job failed "not found"): docs/reliability.md, "Soak". Clients read by direct gets, the only
//! reads a tenant's permissions can confine to its own records.

use async_nats::jetstream::kv::{self, CreateErrorKind, UpdateErrorKind};
use async_nats::jetstream::stream::LastRawMessageErrorKind;
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

/// The jobs bucket, and where its records are read.
#[derive(Clone)]
pub(super) struct Records {
    pub kv: kv::Store,
    /// Read from the stream's leader (nodes) rather than by direct gets (clients).
    pub leader: bool,
}

impl Records {
    /// The record under `key` and its revision, if the job exists.
    pub async fn load(&self, key: &str) -> Result<Option<(JobRecord, u64)>, RecordError> {
        let entry = if self.leader {
            retry("read job record", RetryPolicy::NETWORK, || {
                self.leader_entry(key)
            })
            .await?
        } else {
            retry("read job record", RetryPolicy::NETWORK, || {
                self.kv.entry(key)
            })
            .await
            .map_err(unavailable)?
            .filter(|entry| entry.operation == kv::Operation::Put)
            .map(|entry| (entry.value, entry.revision))
        };
        entry
            .map(|(value, revision)| Ok((parse(key, &value)?, revision)))
            .transpose()
    }

    /// The value and revision of `key`'s latest entry as the leader has it; `None` where there
    /// is none or it is a delete.
    async fn leader_entry(&self, key: &str) -> Result<Option<(Bytes, u64)>, RecordError> {
        let subject = format!("{}{key}", self.kv.prefix);
        match self
            .kv
            .stream
            .get_last_raw_message_by_subject(&subject)
            .await
        {
            Ok(message) => {
                let put = message
                    .headers
                    .get("KV-Operation")
                    .is_none_or(|op| op.as_str() == "PUT")
                    && message.headers.get("Nats-Marker-Reason").is_none();
                Ok(put.then_some((message.payload, message.sequence)))
            }
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }
}

/// Stores a new record under its key; `Ok(false)` if one with this key already exists.
pub(super) async fn create(records: &Records, record: &JobRecord) -> Result<bool, RecordError> {
    let (kv, value, key) = (&records.kv, encode(record), record.key());
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
                if let Some((existing, _)) = records.load(&key).await? {
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
    records: &Records,
    key: &str,
    mut edit: F,
) -> Result<Option<(JobRecord, bool)>, RecordError>
where
    F: FnMut(&mut JobRecord) -> bool,
{
    let mut failures = 0;
    loop {
        let Some((mut record, revision)) = records.load(key).await? else {
            return Ok(None);
        };
        if !edit(&mut record) {
            return Ok(Some((record, false)));
        }
        record.updated_at_ms = unix_ms();
        match records.kv.update(key, encode(&record), revision).await {
            Ok(written) => match stuck(records, key, written, &mut edit).await? {
                Some(latest) => return Ok(Some((latest.unwrap_or(record), true))),
                // Overwritten by a write from the same revision: apply it again.
                None => continue,
            },
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

/// Whether a write to `key` at revision `written` stuck: nats-server before 2.9.21 checks an
/// update's expected revision before the write goes through the stream's consensus, not with
/// it, so in a replicated bucket a second update from the same revision can be accepted too and
/// overwrite the first (a job's two partitions proved at the same instant by two GPU nodes: one
/// proof lost, the job never complete; docs/reliability.md, "Soak"). `Some(None)`: the write is
/// the latest; `Some(Some(record))`: a later record that holds the change (`edit` finds nothing
/// to do there); `None`: the change is gone. `edit` only looks at a copy, and finding nothing
/// to do leaves what the edits here capture as it was.
async fn stuck<F>(
    records: &Records,
    key: &str,
    written: u64,
    edit: &mut F,
) -> Result<Option<Option<JobRecord>>, RecordError>
where
    F: FnMut(&mut JobRecord) -> bool,
{
    match records.load(key).await? {
        Some((latest, revision)) if revision != written => {
            let mut copy = latest.clone();
            Ok((!edit(&mut copy)).then_some(Some(latest)))
        }
        _ => Ok(Some(None)),
    }
}
