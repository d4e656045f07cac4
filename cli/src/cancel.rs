//! Cancelling a job: a request on `cuzk.control.cancel`, answered by a synth node that ends the
//! job through the ledger (`synth-node/src/cancel.rs`). Used by `cuzk cancel` and the gateway's
//! `CancelProof`. Retrying is safe: a repeated request finds the job already cancelled. The
//! input a client staged for the job in the inputs bucket is deleted here, by the client side:
//! the roles that stage inputs may delete them, synth nodes may only read them.

use std::time::Duration;

use async_nats::Client;
use cuzk_common::nats::{retry, RetryPolicy};
use cuzk_common::topology::{jetstream_context, staged_input_name, SUBJECT_CANCEL};
use cuzk_wire::control::{CancelOutcome, CancelReply, CancelRequest};

#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    /// No synth node answered (none running, or NATS unreachable) within the retries.
    #[error("no synth node answered the cancel request: {0}")]
    Unavailable(String),
    /// A node answered but could not carry it out (the jobs bucket unreachable, say).
    #[error("cancelling {job_id} failed: {message}")]
    Refused { job_id: String, message: String },
}

/// Asks the cluster to cancel `job_id`; each attempt waits up to `timeout` for an answer. A
/// job it cancels loses the input this client staged for it in `inputs_bucket`.
pub async fn cancel(
    client: &Client,
    job_id: &str,
    timeout: Duration,
    inputs_bucket: &str,
) -> Result<CancelReply, CancelError> {
    let body = serde_json::to_vec(&CancelRequest {
        job_id: job_id.to_owned(),
    })
    .expect("requests serialize");
    let reply = retry("cancel request", RetryPolicy::NETWORK, || async {
        let asked = client.request(SUBJECT_CANCEL, body.clone().into());
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
    if reply.outcome == CancelOutcome::Cancelled {
        delete_staged_input(client, job_id, timeout, inputs_bucket).await;
    }
    Ok(reply)
}

/// Deletes the job's staged input, if it has one. The job is cancelled either way: a failure
/// is logged, and the bucket's age limit removes the object later.
async fn delete_staged_input(client: &Client, job_id: &str, timeout: Duration, bucket: &str) {
    let name = staged_input_name(job_id);
    let js = jetstream_context(client.clone(), timeout);
    let deleted = match js.get_object_store(bucket).await {
        Ok(store) => cuzk_common::objects::delete(&store, &name)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match deleted {
        Ok(()) => tracing::debug!(job_id, object = %name, "staged input deleted"),
        Err(e) => {
            tracing::warn!(job_id, object = %name, err = %e, "cannot delete the cancelled job's staged input")
        }
    }
}
