//! Cancelling a job: a request on `cuzk.control.cancel.<tenant>` (`cuzk.control.cancel` for the
//! untenanted path), answered by a synth node that ends the job through the ledger
//! (`synth-node/src/cancel.rs`) — the tenant's own job of that id only. Used by `cuzk cancel`
//! and the gateway's `CancelProof`. Retrying is safe: a repeated request finds the job already
//! cancelled. The ledger deletes the input staged for the job, as it does whenever a job ends.

use std::time::Duration;

use async_nats::Client;
use cuzk_common::retry::{retry, RetryPolicy};
use cuzk_common::topology::cancel_subject;
use cuzk_wire::control::{CancelReply, CancelRequest};

#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    /// No synth node answered (none running, or NATS unreachable) within the retries.
    #[error("no synth node answered the cancel request: {0}")]
    Unavailable(String),
    /// A node answered but could not carry it out (the jobs bucket unreachable, say).
    #[error("cancelling {job_id} failed: {message}")]
    Refused { job_id: String, message: String },
}

/// Asks the cluster to cancel `tenant`'s job `job_id` (untenanted: any job by its key); each
/// attempt waits up to `timeout` for an answer.
pub async fn cancel(
    client: &Client,
    tenant: Option<&str>,
    job_id: &str,
    timeout: Duration,
) -> Result<CancelReply, CancelError> {
    let subject = cancel_subject(tenant);
    let body = serde_json::to_vec(&CancelRequest {
        job_id: job_id.to_owned(),
    })
    .expect("requests serialize");
    let reply = retry("cancel request", RetryPolicy::NETWORK, || async {
        let asked = client.request(subject.clone(), body.clone().into());
        match tokio::time::timeout(timeout, asked).await {
            Ok(Ok(message)) => CancelReply::parse(&message.payload).map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {timeout:?}")),
        }
    })
    .await
    .map_err(CancelError::Unavailable)?;
    if let Some(message) = reply.error {
        return Err(CancelError::Refused {
            job_id: job_id.to_owned(),
            message,
        });
    }
    Ok(reply)
}
