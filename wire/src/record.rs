//! The ledger's record of a job (one key of the jobs bucket, rewritten at every step) and the
//! one result published for it on `cuzk.results.<job_id>` (JSON both).

use serde::{Deserialize, Serialize};

use crate::job::{job_key, StagedInput};
use crate::stage::{JobTimings, PartitionTimings};

/// The only result version this build writes.
pub const RESULT_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Synthesizing,
    Proving,
    Done,
    Failed,
    /// Ended on request (`cuzk cancel`, the gateway's `CancelProof`) before it was done.
    Cancelled,
}

impl JobStatus {
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobStatus::Done | JobStatus::Failed | JobStatus::Cancelled
        )
    }

    /// The status as it is written in records and results.
    pub fn name(self) -> &'static str {
        match self {
            JobStatus::Synthesizing => "synthesizing",
            JobStatus::Proving => "proving",
            JobStatus::Done => "done",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PartitionStatus {
    #[default]
    Pending,
    /// Synthesized, blob uploaded and work item published.
    Queued,
    Proved,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PartitionRecord {
    pub status: PartitionStatus,
    /// Hex of the 192-byte partition proof once proved; a final record keeps the job's proof
    /// in its result only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<String>,
    /// A final record keeps only their sums, in its result.
    #[serde(default, skip_serializing_if = "PartitionTimings::is_zero")]
    pub timings: PartitionTimings,
    /// Number of times a GPU worker took this partition (at-least-once delivery shows here).
    #[serde(default)]
    pub attempts: u32,
    /// Which node proved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prover: Option<String>,
    /// Whether that node verified the proof with the shape's verifying key against the public
    /// inputs derived from the job ([`WorkItem::public_inputs`]), not merely the blob's.
    #[serde(default)]
    pub verified: bool,
    /// Stream sequence of the partition's work item once queued: while that message exists
    /// (waiting, or held by a GPU worker) the partition is waiting, not lost. A final record
    /// drops it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub work_seq: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The job's record in the jobs KV bucket (under its [`JobRecord::key`]), updated by
/// compare-and-set only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The id its submitter gave it.
    pub job_id: String,
    /// Who submitted it: the tenant its submit subject named (`cuzk.jobs.submit.<tenant>`),
    /// absent for the untenanted path (`cuzk.jobs.submit`, the admin's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub circuit: String,
    pub params: serde_json::Value,
    pub status: JobStatus,
    /// Stream sequence of the submission that created this record: a redelivery of that same
    /// message resumes the job, any other message with this id is a duplicate submission.
    pub submission_seq: u64,
    pub submitted_at_ms: u64,
    pub synth_started_at_ms: u64,
    pub updated_at_ms: u64,
    pub partitions: Vec<PartitionRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<JobResult>,
    /// Whether the final result went out on `cuzk.results.<job_id>`. The record is made final
    /// first and the result published after, so a crash in between leaves `false` here and
    /// whoever meets the record next publishes it (`common/src/lifecycle`). Records written
    /// before this field existed were published.
    #[serde(default = "published_by_default")]
    pub result_published: bool,
    /// Deliveries of the job message when the record was created or last resumed (a synth node
    /// that died mid-job shows here as 2 or more).
    #[serde(default)]
    pub intake_attempts: u32,
    /// The job proves synthetic input (see [`JobResult::synthetic`]).
    #[serde(default)]
    pub synthetic: bool,
    /// The circuit's shape key (`mimc-r100`), the `shape` label of the job's measurements;
    /// empty for a job refused before its circuit was known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub shape: String,
    /// The object the job's input was staged in: whoever ends the job deletes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged_input: Option<StagedInput>,
}

fn published_by_default() -> bool {
    true
}

impl JobRecord {
    /// The record's key in the jobs bucket: the job's [`job_key`].
    pub fn key(&self) -> String {
        job_key(self.tenant.as_deref(), &self.job_id)
    }

    pub fn all_proved(&self) -> bool {
        self.partitions
            .iter()
            .all(|p| p.status == PartitionStatus::Proved && p.proof.is_some())
    }
}

/// What a client receives on `cuzk.results.<key>` (`cuzk.results.<tenant>.<job_id>` for a
/// tenant's job): `job_id` is the id the submitter gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub version: u32,
    pub job_id: String,
    pub status: JobStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit: Option<String>,
    /// Hex of the final proof: the partition proofs (192 bytes each) concatenated in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<String>,
    pub partitions: u32,
    /// Whether every partition proof was verified against the public inputs derived from the
    /// job (see [`PartitionRecord::verified`]): the proof is of the job's statement.
    #[serde(default)]
    pub verified: bool,
    /// The job proved synthetic input (random data of a real shape, for timings): its proof
    /// proves nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub synthetic: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub timings: JobTimings,
    /// Per partition, as published; a job's final record keeps their sums (`timings.stages`)
    /// only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_timings: Vec<PartitionTimings>,
}

impl JobResult {
    pub fn failed(job_id: &str, error: impl Into<String>) -> JobResult {
        JobResult::ended(job_id, JobStatus::Failed, error)
    }

    /// A job cancelled on request; `reason` says by whom or why.
    pub fn cancelled(job_id: &str, reason: impl Into<String>) -> JobResult {
        JobResult::ended(job_id, JobStatus::Cancelled, reason)
    }

    /// Every failure and cancellation reason passes here, and is capped
    /// ([`MAX_REASON_BYTES`]).
    fn ended(job_id: &str, status: JobStatus, error: impl Into<String>) -> JobResult {
        JobResult {
            version: RESULT_VERSION,
            job_id: job_id.to_owned(),
            status,
            circuit: None,
            proof: None,
            partitions: 0,
            verified: false,
            synthetic: false,
            error: Some(cap_reason(error.into())),
            timings: JobTimings::default(),
            partition_timings: Vec::new(),
        }
    }
}

/// The longest failure or cancellation reason kept, in bytes (before the cut marker). A reason
/// can echo whatever a submission carried, and a job record holds it twice: an unbounded one
/// makes the record too large to store, and the refusal is retried for ever.
pub const MAX_REASON_BYTES: usize = 8 << 10;

/// `reason` cut on a char boundary to at most [`MAX_REASON_BYTES`], with a marker saying how
/// many bytes were cut.
fn cap_reason(mut reason: String) -> String {
    if reason.len() <= MAX_REASON_BYTES {
        return reason;
    }
    let end = (0..=MAX_REASON_BYTES)
        .rev()
        .find(|&i| reason.is_char_boundary(i))
        .unwrap_or(0);
    let cut = reason.len() - end;
    reason.truncate(end);
    reason.push_str(&format!("… [{cut} more bytes cut]"));
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_reasons_are_cut_on_a_char_boundary() {
        let short = JobResult::failed("j", "bad blob");
        assert_eq!(short.error.as_deref(), Some("bad blob"));
        assert_eq!(
            JobResult::failed("j", "x".repeat(MAX_REASON_BYTES)).error,
            Some("x".repeat(MAX_REASON_BYTES))
        );
        // One ASCII byte, then 2-byte chars: the limit falls inside one of them.
        let long = format!("m{}", "é".repeat(300_000));
        for result in [
            JobResult::failed("j", long.clone()),
            JobResult::cancelled("j", long.clone()),
        ] {
            let error = result.error.unwrap();
            let kept = MAX_REASON_BYTES - 1;
            assert_eq!(&error[..kept], &long[..kept]);
            assert_eq!(
                &error[kept..],
                format!("… [{} more bytes cut]", long.len() - kept)
            );
        }
    }
}
