//! Cancel requests (`cuzk.control.cancel`): one synth node of the queue group ends the job
//! through the ledger (record final `cancelled`, then its one result), deletes the blobs its
//! queued partitions left, and replies. Work still in flight learns of it from the record:
//! this node's partitions check it before synthesis, GPU nodes before fetching a blob.

use async_nats::Message;
use cuzk_common::lifecycle::Ledger;
use cuzk_common::topology::{Topology, CANCEL_QUEUE, SUBJECT_CANCEL};
use cuzk_wire::control::{CancelOutcome, CancelReply, CancelRequest};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::saver::delete_queued_blobs;

pub async fn serve(topology: Topology, ledger: Ledger, shutdown: CancellationToken) {
    let client = topology.js.client();
    let subject = SUBJECT_CANCEL.to_owned();
    let mut requests = match client.queue_subscribe(subject, CANCEL_QUEUE.into()).await {
        Ok(subscriber) => subscriber,
        Err(e) => {
            warn!(err = %e, "cannot serve cancel requests");
            return;
        }
    };
    loop {
        let request = tokio::select! {
            _ = shutdown.cancelled() => return,
            request = requests.next() => match request {
                Some(request) => request,
                None => return,
            },
        };
        let Some(reply_to) = request.reply.clone() else {
            warn!("a cancel request without a reply subject; ignored");
            continue;
        };
        let reply = answer(&topology, &ledger, &request).await;
        let body = serde_json::to_vec(&reply).expect("replies serialize");
        // A lost reply is the requester's timeout; its retry finds the job already cancelled.
        if let Err(e) = client.publish(reply_to, body.into()).await {
            warn!(err = %e, job_id = %reply.job_id, "replying to a cancel request failed");
        }
    }
}

async fn answer(topology: &Topology, ledger: &Ledger, request: &Message) -> CancelReply {
    let job_id = match CancelRequest::parse(&request.payload) {
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
