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
    PartitionTimings, StagedInput, RESULT_VERSION,
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

/// A new record for a job of `tenant` (`None`: the untenanted path) that passed intake.
pub fn admitted(
    spec: &JobSpec,
    tenant: Option<&str>,
    shape: JobShape<'_>,
    submission_seq: u64,
    submitted_at_ms: u64,
    delivered: u32,
    now_ms: u64,
) -> JobRecord {
    JobRecord {
        job_id: spec.job_id.clone(),
        tenant: tenant.map(str::to_owned),
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
        staged_input: spec.input.staged(&spec.job_id, tenant),
    }
}

/// A final record for a job of `tenant` that ended before (or without) intake admitting it: a
/// submission that failed at intake, or a job known only by its id. It holds the result,
/// unpublished; the id is used up (see `docs/reliability.md`, "One answer per job id").
/// `staged_input` is the object its submission named, if known.
pub fn ended(
    result: &JobResult,
    tenant: Option<&str>,
    submission_seq: u64,
    submitted_at_ms: u64,
    now_ms: u64,
    staged_input: Option<StagedInput>,
) -> JobRecord {
    JobRecord {
        job_id: result.job_id.clone(),
        tenant: tenant.map(str::to_owned),
        circuit: result.circuit.clone().unwrap_or_default(),
        params: serde_json::Value::Null,
        status: result.status,
        submission_seq,
        submitted_at_ms,
        synth_started_at_ms: now_ms,
        updated_at_ms: now_ms,
        partitions: Vec::new(),
        error: result.error.clone(),
        result: Some(kept(result)),
        result_published: false,
        intake_attempts: 1,
        synthetic: result.synthetic,
        shape: String::new(),
        staged_input,
    }
}

/// What a final record keeps of its result: all but the per-partition timings, whose sums it
/// carries. A record is kept for the retention period, so every byte of it counts
/// (docs/reliability.md, "How long records last").
fn kept(result: &JobResult) -> JobResult {
    JobResult {
        partition_timings: Vec::new(),
        ..result.clone()
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

/// Partition `index` was synthesized and its work item published, by the holder of delivery
/// `attempt` of the job's message: refused once a later delivery has resumed the job (the
/// record is that holder's).
pub fn queued(
    record: &mut JobRecord,
    index: usize,
    timings: PartitionTimings,
    work_seq: u64,
    attempt: u32,
) -> bool {
    if record.status.is_final() || superseded(record, attempt) {
        return false;
    }
    match record.partitions.get_mut(index) {
        Some(partition) if partition.status == PartitionStatus::Pending => {
            partition.status = PartitionStatus::Queued;
            partition.timings = timings;
            partition.work_seq = work_seq;
            true
        }
        _ => false,
    }
}

/// Whether a later delivery than `attempt` of the job's message has resumed the job.
pub fn superseded(record: &JobRecord, attempt: u32) -> bool {
    record.intake_attempts > attempt
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// Ends the job with `result`. Only the first finish counts. The partitions keep what `cuzk
/// status` shows; their proofs and timings live on in the result (the proof once, the timings
/// summed).
pub fn finish(record: &mut JobRecord, result: &JobResult) -> bool {
    if record.status.is_final() {
        return false;
    }
    record.status = result.status;
    record.error = result.error.clone();
    record.result = Some(kept(result));
    record.result_published = false;
    for partition in &mut record.partitions {
        partition.proof = None;
        partition.timings = PartitionTimings::default();
        partition.work_seq = 0;
    }
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

/// Why the sweeper ended a stale job, with where it stood.
pub fn stale_reason(record: &JobRecord, no_progress: Duration) -> String {
    let n = record.partitions.len();
    let count = |s: PartitionStatus| record.partitions.iter().filter(|p| p.status >= s).count();
    format!(
        "no progress for {} s ({:?}: {}/{n} partitions synthesized, {}/{n} proved) and no \
         message of it left in the queues: one exhausted its deliveries unnoticed, or was lost",
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

/// The records the lifecycle's tests build on: a mimc job `j` and its partitions' proofs.
#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::lifecycle) fn shape(partitions: usize) -> JobShape<'static> {
        JobShape {
            partitions,
            synthetic: false,
            shape_key: "mimc-r4",
        }
    }
    use cuzk_wire::job::{JobInput, Priority, JOB_SPEC_VERSION};

    pub(in crate::lifecycle) fn spec() -> JobSpec {
        JobSpec {
            version: JOB_SPEC_VERSION,
            job_id: "j".into(),
            circuit: "mimc".into(),
            params: serde_json::json!({"rounds": 4, "partitions": 2}),
            input: JobInput::None,
            priority: Priority::Normal,
        }
    }

    pub(in crate::lifecycle) fn proof(byte: u8) -> ProvedPartition {
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
        let mut r = admitted(&spec(), None, shape(2), 7, 100, 1, 150);
        assert_eq!((r.status, r.partitions.len()), (JobStatus::Synthesizing, 2));
        assert!(queued(&mut r, 0, PartitionTimings::default(), 40, 1));
        assert!(
            !queued(&mut r, 0, PartitionTimings::default(), 40, 1),
            "queued twice"
        );
        assert!(queued(&mut r, 1, PartitionTimings::default(), 41, 1));
        assert!(
            !queued(&mut r, 2, PartitionTimings::default(), 42, 1),
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
    }

    #[test]
    fn a_failed_job_keeps_its_first_failure() {
        let mut r = admitted(&spec(), None, shape(2), 7, 100, 1, 150);
        assert!(finish(&mut r, &JobResult::failed("j", "first")));
        assert!(!finish(&mut r, &JobResult::failed("j", "second")));
        assert_eq!(r.error.as_deref(), Some("first"));
        assert!(!queued(&mut r, 0, PartitionTimings::default(), 40, 1));
        assert!(!resumed(&mut r, 3));
    }

    #[test]
    fn a_cancelled_job_ignores_late_proofs() {
        let mut r = admitted(&spec(), None, shape(2), 7, 100, 1, 150);
        assert!(queued(&mut r, 0, PartitionTimings::default(), 40, 1));
        assert!(finish(&mut r, &JobResult::cancelled("j", "by request")));
        assert_eq!(r.status, JobStatus::Cancelled);
        assert_eq!(partition_state(&r, 1), Proved::JobEnded);
        assert_eq!(proved(&mut r, 0, &proof(1)), Proved::JobEnded);
        assert_eq!(r.partitions[0].status, PartitionStatus::Queued);
        assert!(!queued(&mut r, 1, PartitionTimings::default(), 41, 1));
        assert!(!synthesized(&mut r));
        assert!(!complete(&r));
        assert!(!finish(&mut r, &JobResult::failed("j", "late")));
        assert_eq!(r.error.as_deref(), Some("by request"));
    }

    #[test]
    fn refused_jobs_are_final_and_unpublished() {
        let r = ended(
            &JobResult::failed("x", "unknown circuit"),
            None,
            4,
            10,
            20,
            None,
        );
        assert_eq!(r.status, JobStatus::Failed);
        assert!(!r.result_published);
        assert_eq!(r.result.unwrap().error.as_deref(), Some("unknown circuit"));
    }

    #[test]
    fn malformed_proofs_are_not_assembled() {
        let mut r = admitted(&spec(), None, shape(1), 7, 100, 1, 150);
        let mut bad = proof(1);
        bad.proof.pop();
        assert_eq!(proved(&mut r, 0, &bad), Proved::Recorded);
        assert_eq!(assemble(&r, 0), Err(AssembleError::Malformed(0)));
    }

    /// A milliseconds figure as the nodes measure them: a `Duration` in f64.
    fn measured(nanos: u64) -> f64 {
        Duration::from_nanos(nanos).as_secs_f64() * 1e3
    }

    /// A 10-partition 32 GiB PoRep job's final record, with what the nodes really write: an
    /// input staged for it, measured timings, 192-byte proofs, verified, published. Returns the
    /// record and the result that was published.
    fn porep_32gib_final() -> (JobRecord, JobResult) {
        let job_id = "f01234567-s000123456-7f3c9a2e";
        let spec = JobSpec {
            version: JOB_SPEC_VERSION,
            job_id: job_id.into(),
            circuit: "porep-c2".into(),
            params: serde_json::json!({"sector_size": "32GiB", "sector_id": 123_456, "miner": "f01234567"}),
            input: JobInput::ObjectIn {
                bucket: "cuzk-inputs-submitter".into(),
                name: cuzk_wire::job::staged_input_name(job_id),
            },
            priority: Priority::Normal,
        };
        let shape = JobShape {
            partitions: 10,
            synthetic: false,
            shape_key: "porep-c2-32GiB",
        };
        let t0 = 1_764_800_000_000;
        let mut r = admitted(
            &spec,
            Some("submitter"),
            shape,
            4_123_456,
            t0,
            1,
            t0 + 1_234,
        );
        for k in 0..10u64 {
            let synth = PartitionTimings {
                synth_ms: measured(25_123_456_789 + k * 7_654_321),
                encode_ms: measured(3_210_987_654 + k * 1_234_567),
                upload_ms: measured(1_987_654_321 + k * 2_345_678),
                blob_bytes: 1_987_654_321 + k * 12_345,
                raw_bytes: 16_912_345_678 + k * 67_890,
                ..Default::default()
            };
            assert!(queued(&mut r, k as usize, synth, 100 + k, 1));
        }
        assert!(synthesized(&mut r));
        for k in 0..10u64 {
            let mut timings = r.partitions[k as usize].timings;
            timings.queue_wait_ms = measured(45_678_901_234 + k * 3_456_789);
            timings.fetch_ms = measured(2_345_678_901 + k * 4_567_890);
            timings.decode_ms = measured(1_456_789_012 + k * 5_678_901);
            timings.h2d_ms = measured(512_345_678 + k * 678_901);
            timings.turn_ms = measured(234_567_890 + k * 789_012);
            timings.spmv_ms = measured(345_678_901 + k * 890_123);
            timings.h_ms = measured(456_789_012 + k * 901_234);
            timings.msm_ms = measured(1_234_567_890 + k * 123_456);
            timings.prove_ms = measured(2_987_654_321 + k * 234_567);
            let partition = ProvedPartition {
                proof: hex::encode([0xa0 + k as u8; PROOF_BYTES]),
                timings,
                attempts: 1,
                prover: format!("gpu-host-017/{}", k % 8),
                verified: true,
            };
            assert_eq!(proved(&mut r, k as usize, &partition), Proved::Recorded);
        }
        let mut result = assemble(&r, t0 + 987_654).unwrap();
        result.timings.assemble_ms = measured(3_456_789);
        assert!(finish(&mut r, &result));
        assert!(published(&mut r));
        r.updated_at_ms = t0 + 987_700;
        (r, result)
    }

    /// A final record keeps the proof once, in its result, and the timings as sums: what `cuzk
    /// status`, `cuzk watch` and the gateway read stays, the per-partition copies go. The
    /// record's size is the unit the records bucket is sized in (`topology::RECORD_BYTES`,
    /// which adds the stream's own bytes per message; docs/reliability.md).
    #[test]
    fn a_final_record_keeps_one_proof_and_summed_timings() {
        let (r, published) = porep_32gib_final();
        let bytes = serde_json::to_vec(&r).unwrap().len();
        println!("final record of a 10-partition 32 GiB PoRep job: {bytes} bytes");
        assert!(bytes <= 6_000, "{bytes} bytes");
        let kept = r.result.as_ref().unwrap();
        assert_eq!(kept.proof, published.proof);
        assert_eq!(kept.proof.as_ref().unwrap().len(), 10 * PROOF_BYTES * 2);
        assert_eq!(kept.timings, published.timings);
        assert_eq!(
            published.partition_timings.len(),
            10,
            "clients get them all"
        );
        assert!(kept.partition_timings.is_empty());
        assert!(r
            .partitions
            .iter()
            .all(|p| p.proof.is_none() && p.timings.is_zero()));
        let shown: Vec<_> = r
            .partitions
            .iter()
            .map(|p| (p.status, p.attempts))
            .collect();
        assert_eq!(shown, vec![(PartitionStatus::Proved, 1); 10]);
        assert!(r
            .partitions
            .iter()
            .all(|p| p.verified && p.prover.is_some()));
        assert!(r.staged_input.is_some());
    }

    /// A tenant's record names its tenant and is kept under the tenant's key; a record stored
    /// before tenants existed reads as untenanted.
    #[test]
    fn a_tenants_record_is_keyed_under_its_tenant() {
        let r = admitted(&spec(), Some("alice"), shape(1), 7, 100, 1, 150);
        assert_eq!(
            (r.tenant.as_deref(), r.key().as_str()),
            (Some("alice"), "alice.j")
        );
        let refused = ended(&JobResult::failed("j", "bad"), Some("bob"), 4, 10, 20, None);
        assert_eq!(refused.key(), "bob.j");
        let mut json =
            serde_json::to_value(admitted(&spec(), None, shape(1), 7, 100, 1, 150)).unwrap();
        assert!(json.get("tenant").is_none(), "{json}");
        json["tenant"] = serde_json::Value::Null;
        let old: JobRecord = serde_json::from_value(json).unwrap();
        assert_eq!((old.key(), old.tenant), ("j".to_owned(), None));
    }

    #[test]
    fn a_resumed_job_counts_its_intake_attempts() {
        let mut r = admitted(&spec(), None, shape(1), 7, 100, 1, 1_000);
        assert!(resumed(&mut r, 2));
        assert!(!resumed(&mut r, 2));
        assert_eq!(r.intake_attempts, 2);
    }
}
