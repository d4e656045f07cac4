//! Requests to the cluster that are not jobs, and their replies (JSON, so `nats req` can send
//! them): cancelling a job (`cuzk.control.cancel.<tenant>`, or `cuzk.control.cancel` for the
//! untenanted path), listing a tenant's recent jobs (`cuzk.control.jobs.<tenant>`), loading and
//! evicting a shape's proving key on the GPU nodes (`cuzk.control.srs`).

use serde::{Deserialize, Serialize};

use crate::job::{valid_job_key, JobRecord, JobStatus};

/// Largest control request or reply accepted (they carry an id or two).
pub const MAX_CONTROL_BYTES: usize = 4096;

#[derive(Debug, thiserror::Error)]
#[error("malformed control message: {0}")]
pub struct ControlError(String);

fn parse<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ControlError> {
    if bytes.len() > MAX_CONTROL_BYTES {
        return Err(ControlError(format!(
            "{} bytes, over the limit of {MAX_CONTROL_BYTES}",
            bytes.len()
        )));
    }
    serde_json::from_slice(bytes).map_err(|e| ControlError(e.to_string()))
}

/// `{"job_id": "..."}` on `cuzk.control.cancel.<tenant>`: one of the tenant's job ids. On the
/// untenanted `cuzk.control.cancel` (the admin's) it is a job key
/// ([`crate::job::job_key`]): an untenanted job's id, or `<tenant>.<job_id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    pub job_id: String,
}

impl CancelRequest {
    pub fn parse(bytes: &[u8]) -> Result<CancelRequest, ControlError> {
        let request: CancelRequest = parse(bytes)?;
        if !valid_job_key(&request.job_id) {
            return Err(ControlError(format!(
                "{:?} is not a job id",
                request.job_id
            )));
        }
        Ok(request)
    }
}

/// What a cancel request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelOutcome {
    /// The job was running; it is now cancelled and its one result says so.
    Cancelled,
    /// The job had already ended (`status` says how); nothing changed.
    AlreadyEnded,
    /// No job with this id is known: no record, and no submission of it waits in the jobs
    /// stream (never submitted; `common/src/lifecycle/queued.rs` says how far it looks).
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelReply {
    pub job_id: String,
    pub outcome: CancelOutcome,
    /// The job's status after the request (absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<JobStatus>,
    /// Why the request could not be carried out (the reply's other fields then mean nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CancelReply {
    pub fn parse(bytes: &[u8]) -> Result<CancelReply, ControlError> {
        parse(bytes)
    }
}

/// The most jobs a [`JobsReply`] lists.
pub const MAX_LISTED_JOBS: usize = 200;

/// `{}` on `cuzk.control.jobs.<tenant>`: the tenant's most recently updated jobs (the
/// untenanted `cuzk.control.jobs`, the admin's, lists every job). An empty payload is `{}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsRequest {}

impl JobsRequest {
    pub fn parse(bytes: &[u8]) -> Result<JobsRequest, ControlError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JobsRequest {});
        }
        parse(bytes)
    }
}

/// The answer to a [`JobsRequest`]: records newest first, at most [`MAX_LISTED_JOBS`], each
/// without its result or partition proofs (what a listing shows is the job's state; a record's
/// own read has the rest).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobsReply {
    pub jobs: Vec<JobRecord>,
    /// Why the listing could not be made (the reply's jobs then mean nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl JobsReply {
    /// A reply of any size the server carries (unlike the other control messages).
    pub fn parse(bytes: &[u8]) -> Result<JobsReply, ControlError> {
        serde_json::from_slice(bytes).map_err(|e| ControlError(e.to_string()))
    }
}

/// What to do with a shape's proving key on every GPU node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SrsOp {
    /// Load it (from the parameter cache) into every backend of the node.
    Preload,
    /// Drop it from every backend of the node.
    Evict,
}

/// `{"op": "preload", "circuit": "mimc", "params": {...}}` on `cuzk.control.srs`: the circuit
/// is named as in a job, and its shape is what is loaded or evicted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SrsRequest {
    pub op: SrsOp,
    pub circuit: String,
    #[serde(default)]
    pub params: serde_json::Value,
}

impl SrsRequest {
    pub fn parse(bytes: &[u8]) -> Result<SrsRequest, ControlError> {
        parse(bytes)
    }
}

/// One GPU node's answer to an [`SrsRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SrsReply {
    pub node: String,
    /// The shape key (empty when the circuit could not be resolved).
    pub shape: String,
    /// Preload: the key was resident in every backend already. Evict: it was resident in one.
    pub was_loaded: bool,
    /// Preload: how long loading took on this node.
    pub load_ms: u64,
    /// Evict: the backends' bytes the key held.
    pub freed_bytes: u64,
    /// Why the node could not do it (no parameters for the shape, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SrsReply {
    pub fn parse(bytes: &[u8]) -> Result<SrsReply, ControlError> {
        parse(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_requests_are_checked() {
        let ok = CancelRequest::parse(br#"{"job_id":"j-1"}"#).unwrap();
        assert_eq!(ok.job_id, "j-1");
        // A tenant's job by its key (what the admin's untenanted subject takes).
        let key = CancelRequest::parse(br#"{"job_id":"alice.j-1"}"#).unwrap();
        assert_eq!(key.job_id, "alice.j-1");
        for bad in [
            &br#"{"job_id":"a b"}"#[..],
            br#"{"job_id":"a.b.c"}"#,
            br#"{"job_id":"high.j"}"#,
            br#"{"job_id":"j","x":1}"#,
            b"not json",
            &[b' '; MAX_CONTROL_BYTES + 1],
        ] {
            assert!(CancelRequest::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn replies_round_trip() {
        let reply = CancelReply {
            job_id: "j".into(),
            outcome: CancelOutcome::AlreadyEnded,
            status: Some(JobStatus::Done),
            error: None,
        };
        let json = serde_json::to_vec(&reply).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&json),
            r#"{"job_id":"j","outcome":"already_ended","status":"done"}"#
        );
        assert_eq!(CancelReply::parse(&json).unwrap(), reply);
        let srs = SrsRequest::parse(br#"{"op":"evict","circuit":"mimc","params":{"rounds":4}}"#);
        assert_eq!(srs.unwrap().op, SrsOp::Evict);
        assert!(SrsRequest::parse(br#"{"op":"unload","circuit":"mimc"}"#).is_err());
    }
}
