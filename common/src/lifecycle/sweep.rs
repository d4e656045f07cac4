//! Reading many job records at once without a consumer: the jobs bucket keeps one message per
//! job, read here in stream order by direct gets (`cuzk status`'s recent jobs, and the sweeper
//! that ends jobs with no progress). Named consumers only: roles need not create any.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_nats::jetstream::stream::{DirectGetErrorKind, RawMessageErrorKind, Stream};
use async_nats::jetstream::Context;

use super::{machine, Ledger, RecordError, PUBLISH_GRACE};
use crate::topology::{JOBS_BUCKET, JOBS_STREAM, WORK_STREAM};
use cuzk_wire::job::{JobRecord, PartitionStatus};

fn unavailable(e: impl std::fmt::Display) -> RecordError {
    RecordError::Unavailable(e.to_string())
}

async fn jobs_stream(js: &Context) -> Result<Stream, RecordError> {
    js.get_stream(format!("KV_{JOBS_BUCKET}"))
        .await
        .map_err(unavailable)
}

/// One entry of the bucket: a job's latest record, or `None` where it was deleted or is not
/// readable.
struct Entry {
    /// The job's key (the entry's key in the bucket).
    job_id: String,
    record: Option<JobRecord>,
}

/// Reads the bucket's entries from stream sequence `from` on, calling `each` for every one, up
/// to `limit` entries; returns the sequence to continue from.
async fn scan(
    stream: &Stream,
    from: u64,
    limit: u64,
    mut each: impl FnMut(Entry),
) -> Result<u64, RecordError> {
    let prefix = format!("$KV.{JOBS_BUCKET}.");
    let mut next = from.max(1);
    for _ in 0..limit {
        let message = match stream
            .direct_get_next_for_subject(format!("{prefix}>"), Some(next))
            .await
        {
            Ok(message) => message,
            Err(e) if e.kind() == DirectGetErrorKind::NotFound => break,
            Err(e) => return Err(unavailable(e)),
        };
        next = message.sequence + 1;
        let deleted = message
            .headers
            .get("KV-Operation")
            .is_some_and(|op| op.as_str() != "PUT");
        let job_id = message.subject.trim_start_matches(&prefix).to_owned();
        let record = (!deleted)
            .then(|| serde_json::from_slice::<JobRecord>(&message.payload).ok())
            .flatten();
        each(Entry { job_id, record });
    }
    Ok(next)
}

/// The most recently updated job records among the last `scan_limit` writes, newest first.
pub(super) async fn recent(js: &Context, scan_limit: u64) -> Result<Vec<JobRecord>, RecordError> {
    let mut stream = jobs_stream(js).await?;
    let last = stream
        .info()
        .await
        .map_err(unavailable)?
        .state
        .last_sequence;
    let mut jobs: HashMap<String, JobRecord> = HashMap::new();
    let from = last.saturating_sub(scan_limit) + 1;
    scan(&stream, from, scan_limit, |entry| match entry.record {
        Some(record) => {
            jobs.insert(entry.job_id, record);
        }
        None => {
            jobs.remove(&entry.job_id);
        }
    })
    .await?;
    let mut jobs: Vec<JobRecord> = jobs.into_values().collect();
    jobs.sort_by_key(|j| std::cmp::Reverse(j.updated_at_ms));
    Ok(jobs)
}

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Swept {
    /// Jobs ended for lack of progress (their records, as ended).
    pub ended: Vec<JobRecord>,
    /// Complete jobs assembled for a finisher that died before it.
    pub assembled: usize,
    /// Results published for jobs whose finisher did not.
    pub published: usize,
    /// Jobs without progress that still wait in a queue or are held by a node: not ended.
    pub waiting: usize,
    /// Open jobs being watched.
    pub open: usize,
}

/// A job being watched, and when this sweeper last saw its record change (its own clock: the
/// nodes' clocks need not agree).
struct Watched {
    record: JobRecord,
    changed: Instant,
}

/// Follows the jobs bucket and ends jobs without progress: the backstop for everything that can
/// leave a job open (a missed max-deliveries advisory, a record that outlived its messages).
/// Progress is judged, not wall-clock age: a job is ended only when its record has not changed
/// for `no_progress` on this sweeper's own clock *and* no message carries it any more — its
/// submission is gone from the jobs stream and no unproved partition's work item is left in the
/// work stream. A job that waits (for queue room, for a GPU) keeps its messages and is never
/// ended; a complete job whose finisher died is assembled. Reads each record change once: a
/// sweep reads only what changed since the last one, and keeps only open jobs in memory.
pub struct Sweeper {
    ledger: Ledger,
    no_progress: Duration,
    /// How long an ended job's result may stay unpublished, on this sweeper's clock.
    publish_grace: Duration,
    next: u64,
    /// Jobs not ended, and ended jobs whose result is not yet published.
    watched: HashMap<String, Watched>,
}

impl Sweeper {
    pub fn new(ledger: Ledger, no_progress: Duration) -> Sweeper {
        Sweeper {
            ledger,
            no_progress,
            publish_grace: PUBLISH_GRACE,
            next: 1,
            watched: HashMap::new(),
        }
    }

    /// The sweeper with another grace for unpublished results ([`PUBLISH_GRACE`] by default).
    pub fn with_publish_grace(mut self, grace: Duration) -> Sweeper {
        self.publish_grace = grace;
        self
    }

    /// Reads the changes since the last sweep, then settles what has not moved.
    pub async fn sweep(&mut self) -> Result<Swept, RecordError> {
        let stream = jobs_stream(&self.ledger.js).await?;
        let watched = &mut self.watched;
        // Bounded per sweep so a huge backlog is read over several sweeps.
        self.next = scan(&stream, self.next, 100_000, |entry| match entry.record {
            Some(r) if !r.status.is_final() || !r.result_published => {
                let seen = watched.get(&entry.job_id).is_some_and(|w| w.record == r);
                if !seen {
                    let changed = Instant::now();
                    watched.insert(entry.job_id, Watched { record: r, changed });
                }
            }
            _ => {
                watched.remove(&entry.job_id);
            }
        })
        .await?;
        let mut swept = Swept::default();
        let still: Vec<(JobRecord, Duration)> = self
            .watched
            .values()
            .map(|w| (w.record.clone(), w.changed.elapsed()))
            .filter(|(r, unchanged_for)| r.status.is_final() || *unchanged_for >= self.no_progress)
            .collect();
        for (record, unchanged_for) in still {
            if record.status.is_final() {
                let published =
                    self.ledger
                        .publish_pending(&record, unchanged_for, self.publish_grace);
                if published.await? {
                    swept.published += 1;
                    self.watched.remove(&record.key());
                }
            } else if machine::complete(&record) {
                self.ledger.catch_up(&record).await?;
                swept.assembled += 1;
            } else if self.carried(&record).await? {
                swept.waiting += 1;
            } else if let Some(ended) = self.ledger.end_stale(&record, self.no_progress).await? {
                self.watched.remove(&record.key());
                swept.ended.push(ended);
            }
        }
        swept.open = self.watched.len();
        Ok(swept)
    }

    /// Whether a message still carries the job: its submission (taken by no synth node yet, or
    /// held by one) or an unproved partition's work item (queued, or held by a GPU worker).
    async fn carried(&self, record: &JobRecord) -> Result<bool, RecordError> {
        if exists(&self.ledger.js, JOBS_STREAM, record.submission_seq).await? {
            return Ok(true);
        }
        for partition in &record.partitions {
            if partition.status == PartitionStatus::Queued
                && exists(&self.ledger.js, WORK_STREAM, partition.work_seq).await?
            {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Whether `stream` still holds the message at `seq` (0: none was recorded). Both streams are
/// work queues: a message leaves when it is acknowledged or dropped after its last delivery.
async fn exists(js: &Context, stream: &str, seq: u64) -> Result<bool, RecordError> {
    if seq == 0 {
        return Ok(false);
    }
    // No stream info: one message get is the whole check.
    let stream = js.get_stream_no_info(stream).await.map_err(unavailable)?;
    match stream.get_raw_message(seq).await {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => Ok(false),
        Err(e) => Err(unavailable(e)),
    }
}
