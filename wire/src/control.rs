//! Requests to the cluster that are not jobs, and their replies (JSON, so `nats req` can send
//! them): cancelling a job, loading and evicting a shape's proving key on the GPU nodes.

use serde::{Deserialize, Serialize};

use crate::job::{valid_job_id, JobStatus};

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

/// `{"job_id": "..."}` on `cuzk.control.cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    pub job_id: String,
}

impl CancelRequest {
    pub fn parse(bytes: &[u8]) -> Result<CancelRequest, ControlError> {
        let request: CancelRequest = parse(bytes)?;
        if !valid_job_id(&request.job_id) {
            return Err(ControlError(format!("{:?} is not a job id", request.job_id)));
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
    /// No job with this id is known: never submitted, or not yet taken by a synth node.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_requests_are_checked() {
        let ok = CancelRequest::parse(br#"{"job_id":"j-1"}"#).unwrap();
        assert_eq!(ok.job_id, "j-1");
        for bad in [
            &br#"{"job_id":"a b"}"#[..],
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
    }
}
