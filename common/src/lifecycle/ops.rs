//! The ledger's operations as requests to the ledger service ([`super::service`]), for workers
//! whose NATS user may neither write job records, publish results nor delete objects
//! (deploy/nats/accounts.conf). Each operation has a subject of its own
//! (`topology::ledger_op_subject`), so the server's permissions give a role the operations its
//! work needs and no other; the service checks that a request's subject names its operation.
//! Every operation is a compare-and-set transition of the job's record, so one retried after a
//! lost answer finds its work done and changes nothing.

use std::time::Duration;

use async_nats::Client;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{ProvedPartition, RecordError};
use crate::retry::{retry_retryable, RetryPolicy};
use crate::topology::ledger_op_subject;
use cuzk_wire::job::{JobRecord, JobResult, JobSpec, PartitionTimings};

/// The largest request the service reads: a job record (what `end_stale` carries) with every
/// partition's proof and timings is ~18 KB for a 32 GiB PoRep job, its reasons capped
/// (`cuzk_wire::job::MAX_REASON_BYTES`).
pub(super) const MAX_OP_BYTES: usize = 256 << 10;

/// A submission of `tenant` refused at intake with `result`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Refusal {
    pub tenant: Option<String>,
    pub result: JobResult,
    pub seq: u64,
    pub submitted_at_ms: u64,
}

/// One operation of [`super::Ledger`], with its arguments. (Made once a request and serialized
/// at once: its variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub(super) enum Op {
    Admit {
        spec: JobSpec,
        tenant: Option<String>,
        partitions: usize,
        synthetic: bool,
        shape_key: String,
        seq: u64,
        submitted_at_ms: u64,
        delivered: u32,
    },
    Refuse(Refusal),
    RefuseUnrecorded(Refusal),
    Queued {
        key: String,
        index: usize,
        timings: PartitionTimings,
        work_seq: u64,
        attempt: u32,
    },
    Synthesized {
        key: String,
    },
    Proved {
        key: String,
        index: usize,
        partition: ProvedPartition,
    },
    /// The service reads the record itself: a worker's copy is not trusted.
    CatchUp {
        key: String,
    },
    Finish {
        key: String,
        result: JobResult,
    },
    Cancel {
        key: String,
        reason: String,
    },
    EndStale {
        seen: JobRecord,
        no_progress: Duration,
    },
    Fail {
        key: String,
        reason: String,
    },
    /// The service reads the record itself, as for `CatchUp`.
    PublishPending {
        key: String,
        unchanged_for: Duration,
        grace: Duration,
    },
    ReportMalformed {
        tenant: Option<String>,
        seq: u64,
        reason: String,
    },
    DeleteBlob {
        name: String,
    },
}

impl Op {
    /// The operation's name: its subject's last token and its `op` tag.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Op::Admit { .. } => "admit",
            Op::Refuse(_) => "refuse",
            Op::RefuseUnrecorded(_) => "refuse_unrecorded",
            Op::Queued { .. } => "queued",
            Op::Synthesized { .. } => "synthesized",
            Op::Proved { .. } => "proved",
            Op::CatchUp { .. } => "catch_up",
            Op::Finish { .. } => "finish",
            Op::Cancel { .. } => "cancel",
            Op::EndStale { .. } => "end_stale",
            Op::Fail { .. } => "fail",
            Op::PublishPending { .. } => "publish_pending",
            Op::ReportMalformed { .. } => "report_malformed",
            Op::DeleteBlob { .. } => "delete_blob",
        }
    }
}

impl Op {
    /// The key of the job the operation names directly, if it names one.
    pub(super) fn key(&self) -> Option<&str> {
        match self {
            Op::Queued { key, .. }
            | Op::Synthesized { key }
            | Op::Proved { key, .. }
            | Op::CatchUp { key }
            | Op::Finish { key, .. }
            | Op::Cancel { key, .. }
            | Op::Fail { key, .. }
            | Op::PublishPending { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// A worker's way to the ledger service.
#[derive(Clone)]
pub(super) struct Remote {
    pub client: Client,
    /// How long one request waits for its answer.
    pub timeout: Duration,
}

impl Remote {
    /// Asks the service to apply `op` and returns its outcome. A request nobody answers (no
    /// service running, or one busy past the timeout) is retried with the network policy;
    /// the service's refusal is not.
    pub(super) async fn call<T: DeserializeOwned>(&self, op: Op) -> Result<T, RecordError> {
        let (name, subject) = (op.name(), ledger_op_subject(op.name()));
        let body: Bytes = serde_json::to_vec(&op)
            .expect("ledger operations serialize")
            .into();
        retry_retryable("ledger request", RetryPolicy::NETWORK, || async {
            let request = self.client.request(subject.clone(), body.clone());
            let reply = tokio::time::timeout(self.timeout, request)
                .await
                .map_err(|_| {
                    RecordError::Unavailable(format!(
                        "the ledger service did not answer {name} within {:?}",
                        self.timeout
                    ))
                })?
                .map_err(|e| RecordError::Unavailable(format!("ledger service, {name}: {e}")))?;
            serde_json::from_slice::<Result<T, RecordError>>(&reply.payload)
                .map_err(|e| RecordError::Refused(format!("an unreadable answer to {name}: {e}")))?
        })
        .await
    }
}
