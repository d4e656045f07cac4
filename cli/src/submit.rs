//! Submitting jobs and waiting for their one answer. `cuzk submit` publishes through JetStream,
//! so the server's acknowledgement says the job is stored — or why it was refused (the jobs
//! stream is full, the message too large). Waiting subscribes to `cuzk.results.<job_id>` before
//! publishing and also reads the job's record: a job that has already ended (a resubmission, a
//! client reconnecting) returns its stored result at once.

use std::time::Duration;

use anyhow::Context as _;
use async_nats::jetstream::{self, context::PublishErrorKind};
use async_nats::Client;
use cuzk_common::lifecycle::Ledger;
use cuzk_common::topology::{
    jetstream_context, results_subject, JOBS_BUCKET, SUBJECT_SUBMIT, SUBJECT_SUBMIT_HIGH,
};
use cuzk_wire::job::{JobResult, JobSpec, Priority};
use futures::StreamExt;

/// The subject a job is submitted on: high priority has its own, which only roles allowed to
/// use it may publish.
pub fn submit_subject(spec: &JobSpec) -> &'static str {
    match spec.priority {
        Priority::High => SUBJECT_SUBMIT_HIGH,
        Priority::Normal => SUBJECT_SUBMIT,
    }
}

/// What the server said about a submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// Stored at this sequence of the jobs stream.
    Stored(u64),
    /// The stream holds a submission with this job id from the last two minutes; that one
    /// stands.
    Duplicate,
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The server refused to store the job; its reason.
    #[error("the cluster refused the submission: {0}")]
    Refused(String),
    #[error("submitting failed: {0}")]
    Failed(String),
}

/// Publishes the job through JetStream with the job id as message id.
pub async fn publish_job(js: &jetstream::Context, spec: &JobSpec) -> Result<Accepted, SubmitError> {
    let body = serde_json::to_vec(spec).map_err(|e| SubmitError::Failed(e.to_string()))?;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(async_nats::header::NATS_MESSAGE_ID, spec.job_id.as_str());
    // With tracing on, the job joins the caller's trace.
    cuzk_common::telemetry::inject(&tracing::Span::current(), &mut headers);
    let ack = js
        .publish_with_headers(submit_subject(spec), headers, body.into())
        .await
        .map_err(|e| SubmitError::Failed(e.to_string()))?
        .await;
    match ack {
        Ok(ack) if ack.duplicate => Ok(Accepted::Duplicate),
        Ok(ack) => Ok(Accepted::Stored(ack.sequence)),
        // The server answered with an error: it refused the message.
        Err(e) if e.kind() == PublishErrorKind::Other => Err(SubmitError::Refused(e.to_string())),
        Err(e) if e.kind() == PublishErrorKind::StreamNotFound => Err(SubmitError::Refused(
            format!("{e} (has `cuzk provision` run?)"),
        )),
        // A permission violation shows only as a missing acknowledgement.
        Err(e) if spec.priority == Priority::High => Err(SubmitError::Failed(format!(
            "{e} (only roles allowed high priority may publish on {SUBJECT_SUBMIT_HIGH})"
        ))),
        Err(e) => Err(SubmitError::Failed(e.to_string())),
    }
}

/// Publishes the job with a plain core publish, exactly as `nats pub cuzk.jobs.submit` does.
pub async fn publish_plain(client: &Client, spec: &JobSpec) -> anyhow::Result<()> {
    let mut headers = async_nats::HeaderMap::new();
    cuzk_common::telemetry::inject(&tracing::Span::current(), &mut headers);
    let body = serde_json::to_vec(spec)?.into();
    if headers.is_empty() {
        client.publish(submit_subject(spec), body).await?;
    } else {
        client
            .publish_with_headers(submit_subject(spec), headers, body)
            .await?;
    }
    client.flush().await?;
    Ok(())
}

/// How a job is handed to the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A plain core publish (what `nats pub` does).
    Core,
    /// Through JetStream, refusals reported.
    JetStream,
}

/// Submits `spec` and returns its one answer: the stored result of a job that already ended,
/// otherwise the first result published on its subject.
pub async fn submit_and_wait(
    client: &Client,
    spec: &JobSpec,
    via: Via,
    timeout: Duration,
) -> anyhow::Result<JobResult> {
    let mut results = client.subscribe(results_subject(&spec.job_id)).await?;
    client.flush().await?;
    let js = jetstream_context(client.clone(), Duration::from_secs(10));
    match via {
        Via::Core => publish_plain(client, spec).await?,
        Via::JetStream => {
            publish_job(&js, spec).await?;
        }
    }
    // The record ends before the result is published: if it has not ended now, the result
    // comes on the subscription made above.
    if let Some(result) = stored_result(&js, &spec.job_id).await {
        return Ok(result);
    }
    let message = tokio::time::timeout(timeout, results.next())
        .await
        .with_context(|| format!("no result for job {} within {timeout:?}", spec.job_id))?
        .context("results subscription closed")?;
    Ok(serde_json::from_slice(&message.payload)?)
}

/// The result in the job's record, if the job has ended and this client may read records.
pub async fn stored_result(js: &jetstream::Context, job_id: &str) -> Option<JobResult> {
    let kv = match js.get_key_value(JOBS_BUCKET).await {
        Ok(kv) => kv,
        Err(e) => {
            tracing::debug!(err = %e, "cannot read job records; waiting for the result only");
            return None;
        }
    };
    let record = Ledger::open(js.clone(), kv).get(job_id).await.ok()??;
    record.status.is_final().then_some(record.result).flatten()
}
