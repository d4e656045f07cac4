//! Cancel requests: one synth node of the queue group ends the job through the ledger (record
//! final `cancelled`, then its one result), deletes the blobs its queued partitions left, and
//! replies. Work still in flight learns of it from the record: this node's partitions check it
//! before synthesis, GPU nodes before fetching a blob.
//!
//! A tenant asks on `cuzk.control.cancel.<tenant>`, which the server lets only that tenant's
//! user publish, with one of its job ids: the job cancelled is that id under that tenant
//! (its key), so another tenant's job with the same id is never reached — it answers `unknown`,
//! as an id never submitted does. The untenanted `cuzk.control.cancel` (the admin's) names any
//! job by its key, `<tenant>.<job_id>` for a tenant's.

use cuzk_common::lifecycle::Ledger;
use cuzk_common::nats::serve_requests_on;
use cuzk_common::topology::{control_tenant, Topology, CANCEL_QUEUE, SUBJECT_CANCEL};
use cuzk_wire::control::{CancelOutcome, CancelReply, CancelRequest};
use cuzk_wire::job::{job_key, valid_job_id};
use tokio_util::sync::CancellationToken;

pub async fn serve(topology: Topology, ledger: Ledger, shutdown: CancellationToken) {
    let client = topology.js.client();
    let subjects = [SUBJECT_CANCEL.to_owned(), format!("{SUBJECT_CANCEL}.*")];
    serve_requests_on(
        client,
        &subjects,
        Some(CANCEL_QUEUE),
        shutdown,
        |subject, payload| {
            let ledger = &ledger;
            async move {
                let reply = answer(ledger, &subject, &payload).await;
                serde_json::to_vec(&reply).expect("replies serialize")
            }
        },
    )
    .await
}

/// The key a cancel request on `subject` names, or why it names none.
fn requested_key(subject: &str, request: &CancelRequest) -> Result<String, String> {
    match control_tenant(SUBJECT_CANCEL, subject) {
        // The admin's: any job, by its key.
        Some(None) => Ok(request.job_id.clone()),
        Some(Some(tenant)) if valid_job_id(&request.job_id) => {
            Ok(job_key(Some(tenant), &request.job_id))
        }
        Some(Some(_)) => Err(format!("{:?} is not a job id", request.job_id)),
        None => Err(format!("{subject} is no cancel subject")),
    }
}

async fn answer(ledger: &Ledger, subject: &str, request: &[u8]) -> CancelReply {
    let request = match CancelRequest::parse(request) {
        Ok(request) => request,
        Err(e) => return refused(String::new(), e.to_string()),
    };
    let key = match requested_key(subject, &request) {
        Ok(key) => key,
        Err(e) => return refused(request.job_id, e),
    };
    match ledger.cancel(&key, "cancelled on request").await {
        Ok((outcome, record)) => {
            if let (CancelOutcome::Cancelled, Some(record)) = (outcome, &record) {
                ledger.delete_queued_blobs(record).await;
            }
            CancelReply {
                job_id: request.job_id,
                outcome,
                status: record.map(|r| r.status),
                error: None,
            }
        }
        Err(e) => refused(request.job_id, e.to_string()),
    }
}

fn refused(job_id: String, error: String) -> CancelReply {
    CancelReply {
        job_id,
        outcome: CancelOutcome::Unknown,
        status: None,
        error: Some(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tenant's request names one of its own jobs; the admin's names any job by its key.
    #[test]
    fn a_request_names_a_job_of_its_subjects_tenant() {
        let request = |job_id: &str| CancelRequest {
            job_id: job_id.into(),
        };
        let alice = "cuzk.control.cancel.alice";
        assert_eq!(requested_key(alice, &request("j")).unwrap(), "alice.j");
        assert!(requested_key(alice, &request("bob.j")).is_err());
        assert_eq!(
            requested_key(SUBJECT_CANCEL, &request("bob.j")).unwrap(),
            "bob.j"
        );
        assert_eq!(requested_key(SUBJECT_CANCEL, &request("j")).unwrap(), "j");
        assert!(requested_key("cuzk.control.cancel.a.b", &request("j")).is_err());
    }
}
