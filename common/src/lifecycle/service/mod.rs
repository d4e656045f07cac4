//! The ledger service (`cuzk ledger`): where a cluster's workers may neither write job
//! records, publish results nor delete objects (deploy/nats/accounts.conf), the one process
//! that does, applying the ledger's operations ([`super::ops`]) for the workers that ask. What a
//! worker can do is bounded twice: its user may publish only its role's operations' subjects,
//! and the service applies only the state machine's transitions. A result a worker hands in
//! may fail or cancel a job, never complete it (a job is done only when assembled from its
//! recorded proofs), and a blob is deleted only once its job no longer needs it. The service
//! also reclaims the chunks no object names (`objects::janitor`), which workers then may not.
//! Several services share the requests (a queue group); every operation is a compare-and-set
//! transition, so they need no coordination.

use std::sync::Arc;

use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::ops::{Op, Refusal, MAX_OP_BYTES};
use super::{blobs, JobShape, Ledger, RecordError};
use crate::topology::{Topology, LEDGER_QUEUE, SUBJECT_LEDGER_OPS};
use cuzk_wire::job::{split_job_key, valid_job_key, JobResult, JobStatus, MAX_REASON_BYTES};

/// Operations applied at once; more wait in the subscription (bounded by the client's pending
/// limits), so a burst cannot spawn without bound.
const MAX_IN_FLIGHT: usize = 256;

/// Answers ledger operations until `shutdown`, then lets those under way finish, and reclaims
/// orphaned chunks meanwhile.
pub async fn serve(
    topology: Topology,
    shutdown: CancellationToken,
) -> Result<(), async_nats::Error> {
    let ledger = Ledger::direct(&topology);
    let client = topology.js.client();
    let mut requests = client
        .queue_subscribe(format!("{SUBJECT_LEDGER_OPS}.*"), LEDGER_QUEUE.into())
        .await?;
    let janitor = tokio::spawn(crate::objects::janitor::run(
        topology.js.clone(),
        topology.blobs.count(),
        shutdown.clone(),
    ));
    tracing::info!("ledger service started");
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut tasks = JoinSet::new();
    loop {
        let request = tokio::select! {
            _ = shutdown.cancelled() => break,
            request = requests.next() => match request {
                Some(request) => request,
                None => break,
            },
        };
        while tasks.try_join_next().is_some() {}
        let Some(reply_to) = request.reply.clone() else {
            tracing::warn!(subject = %request.subject, "a ledger request without a reply subject; ignored");
            continue;
        };
        let permit = in_flight.clone().acquire_owned().await?;
        let (ledger, client) = (ledger.clone(), client.clone());
        tasks.spawn(async move {
            let answer = answer(&ledger, &request.subject, &request.payload).await;
            if let Err(e) = &answer {
                tracing::warn!(subject = %request.subject, err = %e, "ledger operation not applied");
            }
            let body = serde_json::to_vec(&answer).expect("answers serialize");
            if let Err(e) = client.publish(reply_to, body.into()).await {
                tracing::warn!(err = %e, "answering a ledger request failed; the worker asks again");
            }
            drop(permit);
        });
    }
    // Those under way finish: a worker's retry would only redo them.
    while tasks.join_next().await.is_some() {}
    janitor.await?;
    Ok(())
}

fn refused(why: String) -> RecordError {
    RecordError::Refused(why)
}

/// What the service answers a request on `subject`: the operation's outcome, or why it was not
/// applied. Nothing of the request is echoed unbounded.
pub(super) async fn answer(
    ledger: &Ledger,
    subject: &str,
    payload: &[u8],
) -> Result<Value, RecordError> {
    if payload.len() > MAX_OP_BYTES {
        return Err(refused(format!(
            "a request of {} bytes; the most is {MAX_OP_BYTES}",
            payload.len()
        )));
    }
    let op: Op = serde_json::from_slice(payload).map_err(|e| {
        let why: String = e.to_string().chars().take(200).collect();
        refused(format!("not a ledger operation: {why}"))
    })?;
    let asked = subject.strip_prefix(SUBJECT_LEDGER_OPS).unwrap_or_default();
    if asked.strip_prefix('.') != Some(op.name()) {
        return Err(refused(format!(
            "{} asked on another operation's subject",
            op.name()
        )));
    }
    if let Some(key) = op.key().filter(|key| !valid_job_key(key)) {
        let key: String = key.chars().take(200).collect();
        return Err(refused(format!("{key:?} is not a job key")));
    }
    apply(ledger, op).await
}

fn value(outcome: impl Serialize) -> Value {
    serde_json::to_value(outcome).expect("ledger outcomes serialize")
}

/// A worker's result of job `job_id` may end it as failed or cancelled, with a bounded reason,
/// and nothing else: a done result comes only from the job's recorded proofs.
fn an_ending(job_id: &str, result: &JobResult) -> Result<(), RecordError> {
    let reason = result.error.as_deref().unwrap_or_default();
    if result.job_id != job_id {
        return Err(refused("a result of another job".into()));
    }
    if !matches!(result.status, JobStatus::Failed | JobStatus::Cancelled) || result.proof.is_some()
    {
        return Err(refused(format!(
            "a worker ends a job as failed or cancelled, not {}",
            result.status.name()
        )));
    }
    // The cut marker `JobResult::failed` adds to a reason cut to the most.
    if reason.len() > MAX_REASON_BYTES + 64 {
        return Err(refused(format!("a reason of {} bytes", reason.len())));
    }
    Ok(())
}

impl Refusal {
    /// The ledger's arguments, once the result is one a worker may hand in.
    fn parts(&self) -> Result<(Option<&str>, &JobResult, u64, u64), RecordError> {
        an_ending(&self.result.job_id, &self.result)?;
        let tenant = self.tenant.as_deref();
        Ok((tenant, &self.result, self.seq, self.submitted_at_ms))
    }
}

async fn apply(ledger: &Ledger, op: Op) -> Result<Value, RecordError> {
    Ok(match op {
        Op::Admit {
            spec,
            tenant,
            partitions,
            synthetic,
            shape_key,
            seq,
            submitted_at_ms,
            delivered,
        } => {
            let shape = JobShape {
                partitions,
                synthetic,
                shape_key: &shape_key,
            };
            let tenant = tenant.as_deref();
            value(
                ledger
                    .admit(&spec, tenant, shape, seq, submitted_at_ms, delivered)
                    .await?,
            )
        }
        Op::Refuse(refusal) => {
            let (tenant, result, seq, at) = refusal.parts()?;
            value(ledger.refuse(tenant, result, seq, at).await?)
        }
        Op::RefuseUnrecorded(refusal) => {
            let (tenant, result, seq, at) = refusal.parts()?;
            value(ledger.refuse_unrecorded(tenant, result, seq, at).await?)
        }
        Op::Queued {
            key,
            index,
            timings,
            work_seq,
            attempt,
        } => value(
            ledger
                .queued(&key, index, timings, work_seq, attempt)
                .await?,
        ),
        Op::Synthesized { key } => value(ledger.synthesized(&key).await?),
        Op::Proved {
            key,
            index,
            partition,
        } => value(ledger.proved(&key, index, &partition).await?),
        Op::CatchUp { key } => {
            if let Some(record) = ledger.get(&key).await? {
                ledger.catch_up(&record).await?;
            }
            value(())
        }
        Op::Finish { key, result } => {
            an_ending(split_job_key(&key).1, &result)?;
            value(ledger.finish(&key, &result).await?)
        }
        Op::Cancel { key, reason } => {
            let result = JobResult::cancelled(split_job_key(&key).1, reason);
            let reason = result.error.as_deref().unwrap_or_default();
            value(ledger.cancel(&key, reason).await?)
        }
        Op::EndStale { seen, no_progress } => value(ledger.end_stale(&seen, no_progress).await?),
        Op::Fail { key, reason } => value(ledger.fail(&key, reason).await?),
        Op::PublishPending {
            key,
            unchanged_for,
            grace,
        } => match ledger.get(&key).await? {
            Some(record) => value(
                ledger
                    .publish_pending(&record, unchanged_for, grace)
                    .await?,
            ),
            None => value(false),
        },
        Op::ReportMalformed {
            tenant,
            seq,
            reason,
        } => {
            let reason = JobResult::failed("", reason).error.unwrap_or_default();
            value(
                ledger
                    .report_malformed(tenant.as_deref(), seq, &reason)
                    .await?,
            )
        }
        Op::DeleteBlob { name } => {
            let Some((key, seq, partition)) = blobs::parse_blob_name(&name) else {
                return Err(refused("not a blob's name".into()));
            };
            let record = ledger.get(key).await?;
            if !blobs::spent(record.as_ref(), seq, partition) {
                return Err(refused(format!(
                    "partition {partition} of {key} still needs its blob"
                )));
            }
            value(ledger.delete_blob(&name).await?)
        }
    })
}

#[cfg(test)]
mod tests;
