//! The GPU node's saver: a partition's outcome goes to the ledger — a proof is recorded (and the
//! call that completes the set assembles and reports the job), a failure fails the job — then
//! the blob is deleted and the work item settled by the shared failure policy.

use async_nats::jetstream;
use cuzk_common::lifecycle::{Ledger, ProvedPartition};
use cuzk_common::metrics::metrics;
use cuzk_common::policy::{self, Decision, Settle, StepError};
use cuzk_common::topology::MAX_DELIVER;
use cuzk_wire::job::WorkItem;
use tracing::warn;

/// How a work item ended on this worker.
pub enum Outcome {
    Proved(ProvedPartition),
    /// Nothing to prove: the partition was proved by an earlier delivery, or its job ended.
    Skipped,
    Failed(StepError),
}

/// One work item in hand.
pub struct Item<'a> {
    pub message: &'a jetstream::Message,
    pub item: &'a WorkItem,
    pub delivered: i64,
}

pub async fn save(ledger: &Ledger, work: Item<'_>, outcome: Outcome) {
    let item = work.item;
    let labels = crate::worker::labels(item);
    let stored = match outcome {
        Outcome::Proved(proof) => ledger
            .proved(&item.job_id, item.partition as usize, &proof)
            .await
            .map(|_| ())
            .map_err(StepError::from),
        Outcome::Skipped => Ok(()),
        Outcome::Failed(e) => Err(e),
    };
    let settle = match policy::decide(stored, work.delivered, MAX_DELIVER) {
        Decision::Settle(Settle::Ack) => {
            delete_blob(ledger, item).await;
            Settle::Ack
        }
        Decision::Settle(settle) => {
            metrics().error("gpu", "retry", &labels);
            warn!(job_id = %item.job_id, partition = item.partition, "partition attempt failed; will retry");
            settle
        }
        Decision::FailJob(reason) => {
            warn!(job_id = %item.job_id, partition = item.partition, %reason, "job failed");
            metrics().error("gpu", "fatal", &labels);
            let reported = ledger.fail(&item.job_id, reason).await;
            if let Err(e) = &reported {
                warn!(err = %e, "could not report the failure; the item will be retried");
            } else {
                delete_blob(ledger, item).await;
            }
            policy::after_failing(reported.is_ok())
        }
    };
    settle_message(work.message, item, settle).await;
}

async fn delete_blob(ledger: &Ledger, item: &WorkItem) {
    if let Err(e) = ledger.delete_blob(&item.blob_object).await {
        warn!(err = %e, "deleting a blob failed; the bucket's max age reclaims it");
    }
}

/// Acknowledges (confirmed by the server, so a lost ack does not look like a lost partition)
/// or hands the item back.
pub async fn settle_message(message: &jetstream::Message, item: &WorkItem, settle: Settle) {
    let settled = match (settle, settle.ack_kind()) {
        (Settle::Ack, _) => message.double_ack().await,
        (_, Some(kind)) => message.ack_with(kind).await,
        (_, None) => Ok(()),
    };
    if let Err(e) = settled {
        warn!(err = %e, job_id = %item.job_id, partition = item.partition,
            "settling a work item failed; it will be redelivered");
    }
}
