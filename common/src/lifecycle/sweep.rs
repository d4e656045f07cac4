//! Reading many job records at once without a consumer: the jobs bucket keeps one message per
//! job, read here in stream order by direct gets (`cuzk status`'s recent jobs, and the sweeper
//! that ends jobs with no progress). Named consumers only: roles need not create any.

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::stream::{DirectGetErrorKind, Stream};
use async_nats::jetstream::Context;

use super::{machine, Ledger, RecordError};
use crate::topology::JOBS_BUCKET;
use cuzk_wire::job::{unix_ms, JobRecord};

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
    /// Results published for jobs whose finisher did not.
    pub published: usize,
    /// Open jobs being watched.
    pub open: usize,
}

/// Follows the jobs bucket and ends jobs with no progress for `no_progress`: the backstop for
/// everything that can leave a job open (a missed max-deliveries advisory, a record that
/// outlived its messages). Reads each record change once: a sweep reads only what changed
/// since the last one, and keeps only open jobs in memory.
pub struct Sweeper {
    ledger: Ledger,
    no_progress: Duration,
    next: u64,
    /// Jobs not ended, and ended jobs whose result is not yet published.
    watched: HashMap<String, JobRecord>,
}

impl Sweeper {
    pub fn new(ledger: Ledger, no_progress: Duration) -> Sweeper {
        Sweeper {
            ledger,
            no_progress,
            next: 1,
            watched: HashMap::new(),
        }
    }

    /// Reads the changes since the last sweep, then ends what is stale.
    pub async fn sweep(&mut self) -> Result<Swept, RecordError> {
        let stream = jobs_stream(&self.ledger.js).await?;
        let watched = &mut self.watched;
        // Bounded per sweep so a huge backlog is read over several sweeps.
        self.next = scan(&stream, self.next, 100_000, |entry| match entry.record {
            Some(r) if !r.status.is_final() || !r.result_published => {
                watched.insert(entry.job_id, r);
            }
            _ => {
                watched.remove(&entry.job_id);
            }
        })
        .await?;
        let now = unix_ms();
        let mut swept = Swept::default();
        let candidates: Vec<JobRecord> = self.watched.values().cloned().collect();
        for record in candidates {
            if record.status.is_final() {
                if self.ledger.publish_pending(&record).await? {
                    swept.published += 1;
                    self.watched.remove(&record.job_id);
                }
            } else if machine::stale(&record, now, self.no_progress) {
                if let Some(ended) = self
                    .ledger
                    .end_stale(&record.job_id, self.no_progress)
                    .await?
                {
                    self.watched.remove(&record.job_id);
                    swept.ended.push(ended);
                }
            }
        }
        swept.open = self.watched.len();
        Ok(swept)
    }
}
