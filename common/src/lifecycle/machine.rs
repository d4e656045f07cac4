//! The job state machine, as plain functions over a [`JobRecord`]: every change a record may
//! undergo is one named transition that says whether it changed anything. [`super::Ledger`]
//! applies them by compare-and-set; nothing else writes job records.
//!
//! ```text
//!  (none) ──admitted──► synthesizing ──synthesized──► proving ──finish──► done | failed
//!     │                   partitions: pending ─queued─► queued ─proved─► proved      │
//!     │                   synthesizing | proving ──finish (cancel)──► cancelled     │
//!     └──refused (intake failed) ──────────────────────────────────────────────► failed
//!  final, result unpublished ──published──► final, published
//! ```
//!
//! A final record never changes again except to note that its result went out.

use std::time::Duration;

use cuzk_wire::job::{
    JobRecord, JobResult, JobSpec, JobStatus, JobTimings, PartitionRecord, PartitionStatus,
    PartitionTimings, RESULT_VERSION,
};

/// Size of one Groth16 proof (compressed A ‖ B ‖ C).
pub const PROOF_BYTES: usize = 192;

/// What intake learned of a job's circuit.
#[derive(Debug, Clone, Copy)]
pub struct JobShape<'a> {
    pub partitions: usize,
    pub synthetic: bool,
    pub shape_key: &'a str,
}

/// A new record for a job that passed intake.
pub fn admitted(
    spec: &JobSpec,
    shape: JobShape<'_>,
    submission_seq: u64,
    submitted_at_ms: u64,
    delivered: u32,
    now_ms: u64,
) -> JobRecord {
    JobRecord {
        job_id: spec.job_id.clone(),
        circuit: spec.circuit.clone(),
        params: spec.params.clone(),
        status: JobStatus::Synthesizing,
        submission_seq,
        submitted_at_ms,
        synth_started_at_ms: now_ms,
        updated_at_ms: now_ms,
        partitions: vec![PartitionRecord::default(); shape.partitions],
        error: None,
        result: None,
        result_published: false,
        intake_attempts: delivered,
        synthetic: shape.synthetic,
        shape: shape.shape_key.to_owned(),
    }
}

/// A final record for a job that ended before (or without) intake admitting it: a submission
/// that failed at intake, or a job known only by its id. It holds the result, unpublished; the
/// id is used up (see `docs/reliability.md`, "One answer per job id").
pub fn ended(
    result: &JobResult,
    submission_seq: u64,
    submitted_at_ms: u64,
    now_ms: u64,
) -> JobRecord {
    JobRecord {
        job_id: result.job_id.clone(),
        circuit: result.circuit.clone().unwrap_or_default(),
        params: serde_json::Value::Null,
        status: result.status,
        submission_seq,
        submitted_at_ms,
        synth_started_at_ms: now_ms,
        updated_at_ms: now_ms,
        partitions: Vec::new(),
        error: result.error.clone(),
        result: Some(result.clone()),
        result_published: false,
        intake_attempts: 1,
        synthetic: result.synthetic,
        shape: String::new(),
    }
}

/// The job message was delivered again to resume the job.
pub fn resumed(record: &mut JobRecord, delivered: u32) -> bool {
    if record.status.is_final() || record.intake_attempts >= delivered {
        return false;
    }
    record.intake_attempts = delivered;
    true
}

/// Partition `index` was synthesized and its work item published.
pub fn queued(record: &mut JobRecord, index: usize, timings: PartitionTimings) -> bool {
    if record.status.is_final() {
        return false;
    }
    match record.partitions.get_mut(index) {
        Some(partition) if partition.status == PartitionStatus::Pending => {
            partition.status = PartitionStatus::Queued;
            partition.timings = timings;
            true
        }
        _ => false,
    }
}

/// Every partition is queued: the job waits for the GPUs.
pub fn synthesized(record: &mut JobRecord) -> bool {
    let advance = record.status == JobStatus::Synthesizing;
    if advance {
        record.status = JobStatus::Proving;
    }
    advance
}

/// What a GPU worker learned about one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvedPartition {
    /// Hex of the 192-byte proof.
    pub proof: String,
    pub timings: PartitionTimings,
    /// Deliveries of the work item, this one included.
    pub attempts: u32,
    pub prover: String,
    pub verified: bool,
}

/// How a partition proof met the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proved {
    /// Stored now.
    Recorded,
    /// An earlier delivery of the same partition was stored first.
    AlreadyProved,
    /// The job has ended (failed meanwhile, or done by an earlier delivery).
    JobEnded,
    /// The record has no such partition: the item is not this job's.
    NoSuchPartition,
}

/// What the record says about partition `index` before any work on it: the shared check that
/// lets a redelivered work item be acknowledged and skipped.
pub fn partition_state(record: &JobRecord, index: usize) -> Proved {
    if record.status.is_final() {
        return Proved::JobEnded;
    }
    match record.partitions.get(index) {
        None => Proved::NoSuchPartition,
        Some(p) if p.status == PartitionStatus::Proved => Proved::AlreadyProved,
        Some(_) => Proved::Recorded,
    }
}

pub fn proved(record: &mut JobRecord, index: usize, partition: &ProvedPartition) -> Proved {
    match partition_state(record, index) {
        Proved::Recorded => {}
        other => return other,
    }
    let stored = &mut record.partitions[index];
    stored.status = PartitionStatus::Proved;
    stored.proof = Some(partition.proof.clone());
    stored.timings = partition.timings;
    stored.attempts = partition.attempts;
    stored.prover = Some(partition.prover.clone());
    stored.verified = partition.verified;
    Proved::Recorded
}

/// Every partition proved, job not ended: the record is ready to [`assemble`].
pub fn complete(record: &JobRecord) -> bool {
    !record.status.is_final() && record.all_proved()
}

/// Ends the job with `result`. Only the first finish counts.
pub fn finish(record: &mut JobRecord, result: &JobResult) -> bool {
    if record.status.is_final() {
        return false;
    }
    record.status = result.status;
    record.error = result.error.clone();
    record.result = Some(result.clone());
    record.result_published = false;
    true
}

/// The final result went out.
pub fn published(record: &mut JobRecord) -> bool {
    if !record.status.is_final() || record.result_published {
        return false;
    }
    record.result_published = true;
    true
}

/// No update for `no_progress`: the job is stuck (its last message exhausted its deliveries
/// unseen, or its record outlived its messages).
pub fn stale(record: &JobRecord, now_ms: u64, no_progress: Duration) -> bool {
    !record.status.is_final()
        && now_ms.saturating_sub(record.updated_at_ms) >= no_progress.as_millis() as u64
}

/// Why the sweeper ended a stale job, with where it stood.
pub fn stale_reason(record: &JobRecord, no_progress: Duration) -> String {
    let n = record.partitions.len();
    let count = |s: PartitionStatus| record.partitions.iter().filter(|p| p.status >= s).count();
    format!(
        "no progress for {} s ({:?}: {}/{n} partitions synthesized, {}/{n} proved): a message of \
         this job exhausted its deliveries unnoticed, or every node holding it stopped",
        no_progress.as_secs(),
        record.status,
        count(PartitionStatus::Queued),
        count(PartitionStatus::Proved),
    )
    .to_lowercase()
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AssembleError {
    #[error("job {0} is not complete")]
    Incomplete(String),
    #[error("partition {0}'s stored proof is malformed")]
    Malformed(usize),
}

/// The job's result from its complete record: the partition proofs concatenated in order,
/// per-partition timings and their sums.
pub fn assemble(record: &JobRecord, now_ms: u64) -> Result<JobResult, AssembleError> {
    if !record.all_proved() {
        return Err(AssembleError::Incomplete(record.job_id.clone()));
    }
    let mut proof = String::with_capacity(record.partitions.len() * PROOF_BYTES * 2);
    for (index, partition) in record.partitions.iter().enumerate() {
        let hex = partition.proof.as_deref().unwrap_or_default();
        let valid = hex.len() == PROOF_BYTES * 2 && hex.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid {
            return Err(AssembleError::Malformed(index));
        }
        proof.push_str(&hex.to_ascii_lowercase());
    }
    let partition_timings: Vec<PartitionTimings> =
        record.partitions.iter().map(|p| p.timings).collect();
    Ok(JobResult {
        version: RESULT_VERSION,
        job_id: record.job_id.clone(),
        status: JobStatus::Done,
        circuit: Some(record.circuit.clone()),
        proof: Some(proof),
        partitions: record.partitions.len() as u32,
        verified: record.partitions.iter().all(|p| p.verified),
        synthetic: record.synthetic,
        error: None,
        timings: JobTimings {
            total_ms: now_ms.saturating_sub(record.submitted_at_ms) as f64,
            job_queue_ms: record
                .synth_started_at_ms
                .saturating_sub(record.submitted_at_ms) as f64,
            stages: partition_timings.iter().copied().sum(),
            assemble_ms: 0.0,
        },
        partition_timings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(partitions: usize) -> JobShape<'static> {
        JobShape {
            partitions,
            synthetic: false,
            shape_key: "mimc-r4",
        }
    }
    use cuzk_wire::job::{JobInput, Priority, JOB_SPEC_VERSION};

    fn spec() -> JobSpec {
        JobSpec {
            version: JOB_SPEC_VERSION,
            job_id: "j".into(),
            circuit: "mimc".into(),
            params: serde_json::json!({"rounds": 4, "partitions": 2}),
            input: JobInput::None,
            priority: Priority::Normal,
        }
    }

    fn proof(byte: u8) -> ProvedPartition {
        ProvedPartition {
            proof: hex::encode([byte; PROOF_BYTES]),
            timings: PartitionTimings {
                prove_ms: 2.0,
                ..Default::default()
            },
            attempts: 1,
            prover: "gpu/0".into(),
            verified: true,
        }
    }

    #[test]
    fn a_job_runs_through_every_state_once() {
        let mut r = admitted(&spec(), shape(2), 7, 100, 1, 150);
        assert_eq!((r.status, r.partitions.len()), (JobStatus::Synthesizing, 2));
        assert!(queued(&mut r, 0, PartitionTimings::default()));
        assert!(
            !queued(&mut r, 0, PartitionTimings::default()),
            "queued twice"
        );
        assert!(queued(&mut r, 1, PartitionTimings::default()));
        assert!(
            !queued(&mut r, 2, PartitionTimings::default()),
            "no such partition"
        );
        assert!(synthesized(&mut r));
        assert!(!synthesized(&mut r));
        assert_eq!(proved(&mut r, 1, &proof(2)), Proved::Recorded);
        assert_eq!(proved(&mut r, 1, &proof(3)), Proved::AlreadyProved);
        assert_eq!(r.partitions[1].proof, Some(hex::encode([2; PROOF_BYTES])));
        assert!(!complete(&r));
        assert_eq!(assemble(&r, 0), Err(AssembleError::Incomplete("j".into())));
        assert_eq!(proved(&mut r, 0, &proof(1)), Proved::Recorded);
        assert!(complete(&r));
        let result = assemble(&r, 1100).unwrap();
        assert_eq!(result.proof.as_deref().unwrap().len(), 2 * PROOF_BYTES * 2);
        assert!(result.proof.as_deref().unwrap().starts_with("0101"));
        assert_eq!(result.timings.total_ms, 1000.0);
        assert_eq!(result.timings.job_queue_ms, 50.0);
        assert_eq!(result.timings.stages.prove_ms, 4.0);
        assert!(result.verified);

        assert!(finish(&mut r, &result));
        assert!(!r.result_published);
        assert!(
            !finish(&mut r, &JobResult::failed("j", "late")),
            "finished twice"
        );
        assert_eq!(r.status, JobStatus::Done);
        assert_eq!(proved(&mut r, 0, &proof(9)), Proved::JobEnded);
        assert!(published(&mut r));
        assert!(!published(&mut r));
        assert!(
            !stale(&r, u64::MAX, Duration::ZERO),
            "a final job is never stale"
        );
    }

    #[test]
    fn a_failed_job_keeps_its_first_failure() {
        let mut r = admitted(&spec(), shape(2), 7, 100, 1, 150);
        assert!(finish(&mut r, &JobResult::failed("j", "first")));
        assert!(!finish(&mut r, &JobResult::failed("j", "second")));
        assert_eq!(r.error.as_deref(), Some("first"));
        assert!(!queued(&mut r, 0, PartitionTimings::default()));
        assert!(!resumed(&mut r, 3));
    }

    #[test]
    fn a_cancelled_job_ignores_late_proofs() {
        let mut r = admitted(&spec(), shape(2), 7, 100, 1, 150);
        assert!(queued(&mut r, 0, PartitionTimings::default()));
        assert!(finish(&mut r, &JobResult::cancelled("j", "by request")));
        assert_eq!(r.status, JobStatus::Cancelled);
        assert_eq!(partition_state(&r, 1), Proved::JobEnded);
        assert_eq!(proved(&mut r, 0, &proof(1)), Proved::JobEnded);
        assert_eq!(r.partitions[0].status, PartitionStatus::Queued);
        assert!(!queued(&mut r, 1, PartitionTimings::default()));
        assert!(!synthesized(&mut r));
        assert!(!complete(&r));
        assert!(!finish(&mut r, &JobResult::failed("j", "late")));
        assert_eq!(r.error.as_deref(), Some("by request"));
    }

    #[test]
    fn refused_jobs_are_final_and_unpublished() {
        let r = ended(&JobResult::failed("x", "unknown circuit"), 4, 10, 20);
        assert_eq!(r.status, JobStatus::Failed);
        assert!(!r.result_published);
        assert_eq!(r.result.unwrap().error.as_deref(), Some("unknown circuit"));
    }

    #[test]
    fn malformed_proofs_are_not_assembled() {
        let mut r = admitted(&spec(), shape(1), 7, 100, 1, 150);
        let mut bad = proof(1);
        bad.proof.pop();
        assert_eq!(proved(&mut r, 0, &bad), Proved::Recorded);
        assert_eq!(assemble(&r, 0), Err(AssembleError::Malformed(0)));
    }

    #[test]
    fn staleness_counts_from_the_last_update() {
        let mut r = admitted(&spec(), shape(1), 7, 100, 1, 1_000);
        assert!(!stale(&r, 1_999, Duration::from_secs(1)));
        assert!(stale(&r, 2_000, Duration::from_secs(1)));
        assert!(resumed(&mut r, 2));
        assert!(!resumed(&mut r, 2));
        assert_eq!(r.intake_attempts, 2);
    }
}
