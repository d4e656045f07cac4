//! Cancel requests (`cuzk.control.cancel`): one synth node of the queue group ends the job
//! through the ledger (record final `cancelled`, then its one result), deletes the blobs its
//! queued partitions left, and replies. Work still in flight learns of it from the record:
//! this node's partitions check it before synthesis, GPU nodes before fetching a blob.

use cuzk_common::lifecycle::Ledger;
use cuzk_common::nats::serve_requests;
use cuzk_common::topology::{Topology, CANCEL_QUEUE, SUBJECT_CANCEL};
use cuzk_wire::control::{CancelOutcome, CancelReply, CancelRequest};
use tokio_util::sync::CancellationToken;

use crate::saver::delete_queued_blobs;

pub async fn serve(topology: Topology, ledger: Ledger, shutdown: CancellationToken) {
    let client = topology.js.client();
    serve_requests(
        client,
        SUBJECT_CANCEL,
        Some(CANCEL_QUEUE),
        shutdown,
        |payload| {
            let (topology, ledger) = (&topology, &ledger);
            async move {
                let reply = answer(topology, ledger, &payload).await;
                serde_json::to_vec(&reply).expect("replies serialize")
            }
        },
    )
    .await
}

async fn answer(topology: &Topology, ledger: &Ledger, request: &[u8]) -> CancelReply {
    let job_id = match CancelRequest::parse(request) {
        Ok(request) => request.job_id,
        Err(e) => return refused(String::new(), e.to_string()),
    };
    match ledger.cancel(&job_id, "cancelled on request").await {
        Ok((outcome, record)) => {
            if let (CancelOutcome::Cancelled, Some(record)) = (outcome, &record) {
                delete_queued_blobs(topology, record).await;
            }
            CancelReply {
                job_id,
                outcome,
                status: record.map(|r| r.status),
                error: None,
            }
        }
        Err(e) => refused(job_id, e.to_string()),
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
