//! The job lifecycle: the [`Ledger`] is the only writer of job records (the `cuzk-jobs` KV
//! bucket) and the only publisher of results. It applies the transitions of [`machine`] by
//! compare-and-set and reports every job once: the record is made final first, then the result
//! is published on `cuzk.results.<key>`, then the record notes the publication. Whoever
//! meets a final record whose result is unpublished (a redelivered message, the sweeper)
//! publishes it after a grace period, so a crash between the two steps loses nothing.
//!
//! Where workers may not write records, publish results or delete objects (the shipped NATS
//! users), their ledgers ask the ledger service ([`service`], `cuzk ledger`) to apply each
//! change ([`ops`]); reads stay with the worker. The service runs the same ledger.
//!
//! A job is addressed by its key (`cuzk_wire::job::job_key`): its id under the tenant that
//! submitted it (`<tenant>.<job_id>`), or its id alone on the untenanted path. The key is its
//! record's key in the bucket and its results subject's tail, so each tenant's records and
//! results lie under a prefix of its own, which the server's permissions pin to it; a tenant's
//! request names a job id only, and the key made of it and the tenant the request's subject
//! names never reaches another tenant's job. A stored record whose key does not name it is
//! refused as corrupt (`store`).

pub mod blobs;
mod inputs;
pub mod machine;
mod ops;
mod publish;
pub mod queued;
pub mod service;
mod store;
pub mod sweep;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{kv, Context};

pub use machine::{JobShape, Proved, ProvedPartition};

use crate::metrics::{metrics, JobLabels};
use crate::objects::Shards;
use crate::topology::Topology;
use cuzk_wire::control::CancelOutcome;
use cuzk_wire::job::{
    job_key, split_job_key, unix_ms, JobRecord, JobResult, JobSpec, PartitionTimings, Stage,
};
use ops::{Op, Remote};

/// How long a final record may wait for its finisher to publish the result before someone else
/// does: longer than the finisher's three steps (publish, release the staged input, note it
/// published) each through its whole retry policy at the default 10 s timeout, so the finisher
/// is gone, not slow. A finisher on an overloaded server that is overtaken publishes a second
/// time, and the copy from the record differs from its own (no per-partition timings).
pub const PUBLISH_GRACE: Duration = Duration::from_secs(300);

/// How long a worker waits for the ledger service to apply one operation: a few record round
/// trips and a publish, each retried by the service through a leader election; one not
/// answered by then is asked again and finds its work done.
const OP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum RecordError {
    /// NATS did not answer in time or refused the operation; the step can be retried.
    #[error("jobs bucket unavailable: {0}")]
    Unavailable(String),
    /// The stored record is not ours to read; nothing will fix it but a person.
    #[error("job record {job_id} is unreadable: {message}")]
    Corrupt { job_id: String, message: String },
    /// Publishing the result failed; the step can be retried.
    #[error("publishing the result of {job_id} failed: {message}")]
    Publish { job_id: String, message: String },
    /// The ledger service would not apply the operation (`service`): not the state machine's
    /// to make, or not a request it understands. Asking again changes nothing.
    #[error("the ledger service refused: {0}")]
    Refused(String),
}

impl cuzk_wire::Retryable for RecordError {
    fn retryable(&self) -> bool {
        !matches!(self, RecordError::Corrupt { .. } | RecordError::Refused(_))
    }
}

/// What intake learned from the record of a submitted job.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum Admission {
    /// The first delivery of this submission: the record was created.
    New(JobRecord),
    /// A redelivery of the submission that created the record: resume its pending partitions.
    Resume(JobRecord),
    /// This submission created the record and the job has ended (its result is published, or
    /// will be by whoever finds it unpublished).
    Ended(JobRecord),
    /// Another submission holds this job id; its outcome stands.
    Duplicate(JobRecord),
}

/// How [`Ledger::finish`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Finish {
    /// This call ended the job and published its result.
    Published,
    /// The job had already ended; nothing was published.
    AlreadyEnded,
}

#[derive(Clone)]
pub struct Ledger {
    records: store::Records,
    js: Context,
    /// Waiting submissions by job id, for cancels of jobs no synth node has taken.
    queued: Arc<tokio::sync::Mutex<queued::Index>>,
    /// Where changes go when the ledger service makes them (`Topology::ledger_service`):
    /// every operation that writes is asked of it, reads stay here.
    remote: Option<Remote>,
    /// The blob buckets, where this ledger deletes blobs itself.
    blobs: Option<Shards>,
}

impl Ledger {
    /// A node's ledger: records are read from the bucket stream's leader (`store`); changes go
    /// through the ledger service where the topology says so.
    pub fn new(topology: &Topology) -> Ledger {
        let mut ledger = Ledger::direct(topology);
        if topology.ledger_service {
            ledger.remote = Some(Remote {
                client: topology.js.client(),
                timeout: OP_TIMEOUT,
            });
        }
        ledger
    }

    /// A ledger that makes every change itself: the ledger service's, or a node's on a server
    /// that lets it.
    pub fn direct(topology: &Topology) -> Ledger {
        let mut ledger = Ledger::on(topology.js.clone(), topology.jobs_kv.clone(), true);
        ledger.blobs = Some(topology.blobs.clone());
        ledger
    }

    /// A client's ledger on a bucket opened by hand: records are read by direct gets, which a
    /// tenant's permissions confine to its own (a server restarted a moment ago may answer with
    /// an older record; a client asks again).
    pub fn open(js: Context, jobs_kv: kv::Store) -> Ledger {
        Ledger::on(js, jobs_kv, false)
    }

    /// [`Ledger::open`] on a topology's bucket.
    pub fn reader(topology: &Topology) -> Ledger {
        Ledger::open(topology.js.clone(), topology.jobs_kv.clone())
    }

    fn on(js: Context, kv: kv::Store, leader: bool) -> Ledger {
        Ledger {
            records: store::Records { kv, leader },
            js,
            queued: Arc::default(),
            remote: None,
            blobs: None,
        }
    }

    /// The record of the job with key `key`, if it has one.
    pub async fn get(&self, key: &str) -> Result<Option<JobRecord>, RecordError> {
        Ok(self.records.load(key).await?.map(|(r, _)| r))
    }

    /// Records a submission of `tenant` (`None`: the untenanted path) that passed intake, or
    /// says who else holds its id.
    pub async fn admit(
        &self,
        spec: &JobSpec,
        tenant: Option<&str>,
        shape: JobShape<'_>,
        seq: u64,
        submitted_at_ms: u64,
        delivered: u32,
    ) -> Result<Admission, RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::Admit {
                    spec: spec.clone(),
                    tenant: tenant.map(str::to_owned),
                    partitions: shape.partitions,
                    synthetic: shape.synthetic,
                    shape_key: shape.shape_key.to_owned(),
                    seq,
                    submitted_at_ms,
                    delivered,
                })
                .await;
        }
        let record = machine::admitted(
            spec,
            tenant,
            shape,
            seq,
            submitted_at_ms,
            delivered,
            unix_ms(),
        );
        let key = record.key();
        loop {
            if store::create(&self.records, &record).await? {
                return Ok(Admission::New(record));
            }
            let Some((existing, _)) = self.records.load(&key).await? else {
                continue; // expired between the two calls: create again
            };
            if existing.submission_seq != seq {
                return Ok(Admission::Duplicate(existing));
            }
            if existing.status.is_final() {
                return Ok(Admission::Ended(existing));
            }
            let updated =
                store::update(&self.records, &key, |r| machine::resumed(r, delivered)).await?;
            return Ok(match updated {
                Some((r, _)) if r.status.is_final() => Admission::Ended(r),
                Some((r, _)) => Admission::Resume(r),
                None => continue,
            });
        }
    }

    /// Ends a submission of `tenant` that failed at intake with `result` (a failure), unless
    /// another submission holds the id. The failed record uses the id up: a later submission
    /// with it is a duplicate and gets this result (`docs/reliability.md`).
    pub async fn refuse(
        &self,
        tenant: Option<&str>,
        result: &JobResult,
        seq: u64,
        submitted_at_ms: u64,
    ) -> Result<Admission, RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::Refuse(ops::Refusal {
                    tenant: tenant.map(str::to_owned),
                    result: result.clone(),
                    seq,
                    submitted_at_ms,
                }))
                .await;
        }
        let key = job_key(tenant, &result.job_id);
        let submission = queued::at(&self.js, seq, &key).await?;
        let staged = submission.and_then(|q| q.input);
        let record = machine::ended(result, tenant, seq, submitted_at_ms, unix_ms(), staged);
        if store::create(&self.records, &record).await? {
            self.report(result, &record).await?;
            return Ok(Admission::Ended(record));
        }
        match self.get(&key).await? {
            Some(existing) if existing.submission_seq != seq => Ok(Admission::Duplicate(existing)),
            // Our own earlier attempt (resumed, or refused before a crash): end it if it runs.
            Some(_) | None => {
                self.finish(&key, result).await?;
                let record = self.get(&key).await?.unwrap_or(record);
                Ok(Admission::Ended(record))
            }
        }
    }

    /// Answers a submission of `tenant` that failed at intake with `result` without recording
    /// it: its result is published (and the input staged for it deleted) but no record holds
    /// the id, so a flood of bad submissions cannot fill the records bucket (the synth node's
    /// refusal limit, `--synth-max-refusals-per-minute`). A job that has a record already — a
    /// duplicate, or this submission's own job, resumed — is left to [`Ledger::refuse`], which
    /// writes nothing new: its answer is `Some`. `None`: answered, unrecorded.
    pub async fn refuse_unrecorded(
        &self,
        tenant: Option<&str>,
        result: &JobResult,
        seq: u64,
        submitted_at_ms: u64,
    ) -> Result<Option<Admission>, RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::RefuseUnrecorded(ops::Refusal {
                    tenant: tenant.map(str::to_owned),
                    result: result.clone(),
                    seq,
                    submitted_at_ms,
                }))
                .await;
        }
        let key = job_key(tenant, &result.job_id);
        if self.get(&key).await?.is_some() {
            return Ok(Some(
                self.refuse(tenant, result, seq, submitted_at_ms).await?,
            ));
        }
        let staged = queued::at(&self.js, seq, &key).await?.and_then(|q| q.input);
        publish::result(&self.js, &key, result).await?;
        if let Some(staged) = &staged {
            inputs::release(&self.js, &key, staged).await;
        }
        Ok(None)
    }

    /// Partition `index` of the job with key `key` is synthesized and its work item published
    /// by the holder of delivery `attempt` of the job's message (not recorded once a later
    /// delivery holds the job: [`machine::superseded`] on the returned record). Returns the
    /// record (`None` if the job has none).
    pub async fn queued(
        &self,
        key: &str,
        index: usize,
        timings: PartitionTimings,
        work_seq: u64,
        attempt: u32,
    ) -> Result<Option<JobRecord>, RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::Queued {
                    key: key.to_owned(),
                    index,
                    timings,
                    work_seq,
                    attempt,
                })
                .await;
        }
        let updated = store::update(&self.records, key, |r| {
            machine::queued(r, index, timings, work_seq, attempt)
        });
        Ok(updated.await?.map(|(r, _)| r))
    }

    /// Every partition of the job with key `key` is queued.
    pub async fn synthesized(&self, key: &str) -> Result<(), RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::Synthesized {
                    key: key.to_owned(),
                })
                .await;
        }
        store::update(&self.records, key, machine::synthesized).await?;
        Ok(())
    }

    /// Stores a partition proof of the job with key `key` (a work item's `job_id`); the call
    /// that stores the last one assembles the job and reports it. Returns how the proof met the
    /// record (`NoSuchPartition` also when the job has no record).
    pub async fn proved(
        &self,
        key: &str,
        index: usize,
        partition: &ProvedPartition,
    ) -> Result<Proved, RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::Proved {
                    key: key.to_owned(),
                    index,
                    partition: partition.clone(),
                })
                .await;
        }
        let mut outcome = Proved::NoSuchPartition;
        let updated = store::update(&self.records, key, |r| {
            outcome = machine::proved(r, index, partition);
            outcome == Proved::Recorded
        })
        .await?;
        let Some((record, _)) = updated else {
            return Ok(Proved::NoSuchPartition);
        };
        // Already proved and complete: whoever stored the last proof died before finishing.
        let stored = matches!(outcome, Proved::Recorded | Proved::AlreadyProved);
        if stored && machine::complete(&record) {
            use tracing::Instrument;
            self.assemble(&record)
                .instrument(tracing::info_span!("assemble"))
                .await?;
        }
        Ok(outcome)
    }

    /// Finishes what a crash left of a job whose partitions are all proved: a record not yet
    /// ended is assembled. (An ended job's unpublished result is the sweeper's: it times the
    /// grace on its own clock.)
    pub async fn catch_up(&self, record: &JobRecord) -> Result<(), RecordError> {
        if let Some(remote) = &self.remote {
            return remote.call(Op::CatchUp { key: record.key() }).await;
        }
        if machine::complete(record) {
            self.assemble(record).await?;
        }
        Ok(())
    }

    async fn assemble(&self, record: &JobRecord) -> Result<(), RecordError> {
        let started = std::time::Instant::now();
        let result = match machine::assemble(record, unix_ms()) {
            Ok(mut result) => {
                result.timings.assemble_ms = crate::timing::ms(started.elapsed());
                result
            }
            Err(e) => JobResult::failed(&record.job_id, e.to_string()),
        };
        if self.finish(&record.key(), &result).await? == Finish::Published {
            let labels = labels(record);
            metrics().stage(Stage::Assemble, &labels, started.elapsed());
            metrics().stage(
                Stage::Total,
                &labels,
                Duration::from_secs_f64(result.timings.total_ms / 1e3),
            );
            tracing::info!(job_id = %result.job_id, status = ?result.status,
                partitions = result.partitions, total_ms = result.timings.total_ms, "job ended");
        }
        Ok(())
    }

    /// Ends the job with key `key` with `result` (whose `job_id` is the key's job id) — the
    /// record first, then the result — unless it has already ended. A job without a record gets
    /// a final one.
    pub async fn finish(&self, key: &str, result: &JobResult) -> Result<Finish, RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::Finish {
                    key: key.to_owned(),
                    result: result.clone(),
                })
                .await;
        }
        let (tenant, job_id) = split_job_key(key);
        debug_assert_eq!(job_id, result.job_id, "a result of another job");
        let (record, ended) =
            match store::update(&self.records, key, |r| machine::finish(r, result)).await? {
                Some(updated) => updated,
                None => {
                    let now = unix_ms();
                    let record = machine::ended(result, tenant, 0, now, now, None);
                    let created = store::create(&self.records, &record).await?;
                    (record, created)
                }
            };
        if !ended {
            return Ok(Finish::AlreadyEnded);
        }
        self.report(result, &record).await?;
        Ok(Finish::Published)
    }

    /// Cancels the job with key `key` unless it has ended: the record becomes final
    /// `cancelled` first, then the one result says so. Returns what happened and the record as
    /// it stands. Partitions already queued or being proved meet the final record and are
    /// skipped; a proof that lands later changes nothing (`machine::proved`). A job no synth
    /// node has taken yet (its message waits in the jobs stream, it has no record) gets a final
    /// record for that submission, created by compare-and-set: the synth node that takes the
    /// message meets it and skips the job. A key with neither a record nor a waiting message
    /// is `Unknown`: a tenant's request is made into a key under its own tenant, so another
    /// tenant's job with the same id is `Unknown` to it, as if it did not exist.
    pub async fn cancel(
        &self,
        key: &str,
        reason: &str,
    ) -> Result<(CancelOutcome, Option<JobRecord>), RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::Cancel {
                    key: key.to_owned(),
                    reason: reason.to_owned(),
                })
                .await;
        }
        let (tenant, job_id) = split_job_key(key);
        // A record created between the two steps is cancelled on the next round.
        for _ in 0..3 {
            let mut result = JobResult::cancelled(job_id, reason);
            let updated = store::update(&self.records, key, |r| {
                result.circuit = Some(r.circuit.clone());
                result.partitions = r.partitions.len() as u32;
                result.synthetic = r.synthetic;
                machine::finish(r, &result)
            })
            .await?;
            match updated {
                Some((record, true)) => {
                    tracing::info!(job = key, reason, "job cancelled");
                    self.report(&result, &record).await?;
                    return Ok((CancelOutcome::Cancelled, Some(record)));
                }
                Some((record, false)) => return Ok((CancelOutcome::AlreadyEnded, Some(record))),
                None => {}
            }
            let found = self.queued.lock().await.find(&self.js, key).await?;
            let Some(queued) = found else {
                return Ok((CancelOutcome::Unknown, None));
            };
            result.circuit = queued.circuit;
            let (seq, at) = (queued.seq, queued.published_ms);
            let record = machine::ended(&result, tenant, seq, at, unix_ms(), queued.input);
            if store::create(&self.records, &record).await? {
                tracing::info!(job = key, reason, seq, "queued job cancelled");
                self.report(&result, &record).await?;
                return Ok((CancelOutcome::Cancelled, Some(record)));
            }
        }
        Err(RecordError::Unavailable(format!(
            "the record of {key} kept changing while it was being cancelled"
        )))
    }

    /// Fails the job for lack of progress if its record is still `seen` (compare-and-set: a
    /// change since means progress). Returns the record as ended.
    pub async fn end_stale(
        &self,
        seen: &JobRecord,
        no_progress: Duration,
    ) -> Result<Option<JobRecord>, RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::EndStale {
                    seen: seen.clone(),
                    no_progress,
                })
                .await;
        }
        let (key, job_id) = (seen.key(), seen.job_id.as_str());
        let mut failure = None;
        let updated = store::update(&self.records, &key, |r| {
            if r != seen || r.status.is_final() {
                return false;
            }
            let result = JobResult::failed(job_id, machine::stale_reason(r, no_progress));
            let ended = machine::finish(r, &result);
            failure = Some(result);
            ended
        })
        .await?;
        match (updated, failure) {
            (Some((record, true)), Some(result)) => {
                tracing::warn!(
                    job = key,
                    error = result.error.as_deref().unwrap_or_default(),
                    "ending a stuck job"
                );
                self.report(&result, &record).await?;
                Ok(Some(record))
            }
            _ => Ok(None),
        }
    }

    /// Counts and publishes a result whose record this process just made final.
    async fn report(&self, result: &JobResult, record: &JobRecord) -> Result<(), RecordError> {
        metrics().job(result.status.name(), &labels(record));
        self.publish(record, result).await
    }

    /// Fails the job with key `key` (a work item's `job_id`) with `reason` unless it has
    /// already ended.
    pub async fn fail(&self, key: &str, reason: impl Into<String>) -> Result<Finish, RecordError> {
        let reason = reason.into();
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::Fail {
                    key: key.to_owned(),
                    reason,
                })
                .await;
        }
        let (_, job_id) = split_job_key(key);
        self.finish(key, &JobResult::failed(job_id, reason)).await
    }

    /// Publishes the result of an ended job whose finisher did not get to it (it crashed
    /// between the two steps): `unchanged_for` is how long the caller has seen the record as it
    /// is, on its own clock (another node's `updated_at_ms` is not comparable with it), and
    /// must be at least `grace`. A result the results stream holds already (its finisher
    /// published it, then died or lost its server before noting it) is noted, not published
    /// again. Returns whether it published or noted.
    pub async fn publish_pending(
        &self,
        record: &JobRecord,
        unchanged_for: Duration,
        grace: Duration,
    ) -> Result<bool, RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::PublishPending {
                    key: record.key(),
                    unchanged_for,
                    grace,
                })
                .await;
        }
        let overdue = unchanged_for >= grace;
        let Some(result) = record.result.as_ref() else {
            return Ok(false);
        };
        if !record.status.is_final() || record.result_published || !overdue {
            return Ok(false);
        }
        let key = record.key();
        if publish::stored(&self.js, &key).await?.is_some() {
            tracing::info!(job = %key, "noting a result its finisher published and did not note");
        } else {
            tracing::warn!(job = %key, "publishing a result its finisher did not");
            publish::result(&self.js, &key, result).await?;
        }
        self.release_and_note(record).await?;
        Ok(true)
    }

    /// Publishes, deletes the staged input, then notes both in the record: a crash before the
    /// note repeats the two steps (the stream drops the second result, the input is gone).
    async fn publish(&self, record: &JobRecord, result: &JobResult) -> Result<(), RecordError> {
        publish::result(&self.js, &record.key(), result).await?;
        self.release_and_note(record).await
    }

    /// The steps after a result is published: its staged input deleted, the record noted.
    async fn release_and_note(&self, record: &JobRecord) -> Result<(), RecordError> {
        let key = record.key();
        if let Some(staged) = &record.staged_input {
            inputs::release(&self.js, &key, staged).await;
        }
        store::update(&self.records, &key, machine::published).await?;
        Ok(())
    }

    /// Reports a submission of `tenant` that carried no usable job id on
    /// `cuzk.results._malformed` (`cuzk.results.<tenant>._malformed`).
    pub async fn report_malformed(
        &self,
        tenant: Option<&str>,
        seq: u64,
        reason: &str,
    ) -> Result<(), RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::ReportMalformed {
                    tenant: tenant.map(str::to_owned),
                    seq,
                    reason: reason.to_owned(),
                })
                .await;
        }
        publish::malformed(&self.js, tenant, seq, reason).await
    }

    /// The answer of the job with key `key` as stored: its result in the results stream, else
    /// the result in its final record (the stream drops its oldest results when full, the
    /// record is kept for the retention period). `None` while the job has not ended, or is
    /// unknown. (The results stream's message gets cannot be limited to a tenant's subjects: a
    /// tenant reads its record alone, [`Ledger::recorded_answer`].)
    pub async fn answer(&self, key: &str) -> Result<Option<JobResult>, RecordError> {
        if let Some(result) = publish::stored(&self.js, key).await? {
            return Ok(Some(result));
        }
        self.recorded_answer(key).await
    }

    /// The result in the final record of the job with key `key`: what a tenant, which may read
    /// its own records only, reads of an ended job. `None` while the job has not ended, or is
    /// unknown.
    pub async fn recorded_answer(&self, key: &str) -> Result<Option<JobResult>, RecordError> {
        let record = self.get(key).await?;
        Ok(record
            .filter(|r| r.status.is_final())
            .and_then(|r| r.result))
    }

    /// The most recently updated job records, newest first: what `cuzk status` lists.
    pub async fn recent(&self, scan: u64) -> Result<Vec<JobRecord>, RecordError> {
        sweep::recent(&self.js, scan).await
    }

    /// The most recently updated records of `tenant`'s jobs (`None`: every job), newest first,
    /// at most `limit`, each without its result or partition proofs: what a listing request
    /// answers (`cuzk.control.jobs.<tenant>`, served by synth nodes, which may read every
    /// record: a tenant cannot read the bucket in stream order limited to its own keys).
    pub async fn listing(
        &self,
        tenant: Option<&str>,
        scan: u64,
        limit: usize,
    ) -> Result<Vec<JobRecord>, RecordError> {
        let mut jobs = self.recent(scan).await?;
        if let Some(tenant) = tenant {
            jobs.retain(|r| r.tenant.as_deref() == Some(tenant));
        }
        jobs.truncate(limit);
        for job in &mut jobs {
            job.result = None;
            for partition in &mut job.partitions {
                partition.proof = None;
            }
        }
        Ok(jobs)
    }
}

/// The `circuit` and `shape` labels of a job's measurements, from its record.
fn labels(record: &JobRecord) -> JobLabels {
    let known = |label: &str| {
        if label.is_empty() {
            "unknown".to_owned()
        } else {
            label.to_owned()
        }
    };
    JobLabels::new(&known(&record.circuit), &known(&record.shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_NATS_TIMEOUT;
    use crate::retry::RetryPolicy;

    /// A finisher that is slow, not gone — each of its three steps retried to the end at the
    /// default timeout — is not overtaken by a sweeper, which would publish the result a second
    /// time (at the earlier 30 s it could be).
    #[test]
    fn a_slow_finisher_is_not_taken_for_a_dead_one() {
        let step = RetryPolicy::NETWORK.worst_case(DEFAULT_NATS_TIMEOUT);
        assert!(
            PUBLISH_GRACE > step * 3,
            "{PUBLISH_GRACE:?} against {step:?} a step"
        );
    }
}
