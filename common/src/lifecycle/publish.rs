//! Publishing results through JetStream (acknowledged, stored in `CUZK_RESULTS`). Only the
//! ledger calls these, after the record says the job ended.

use async_nats::jetstream::Context;
use async_nats::HeaderMap;
use bytes::Bytes;

use super::RecordError;
use crate::nats::{retry, RetryPolicy};
use crate::topology::{results_subject, SUBJECT_RESULTS_MALFORMED};
use cuzk_wire::job::JobResult;

/// The job's result on `cuzk.results.<job_id>`, with the job id as message id: the stream keeps
/// one copy even if a crash makes the ledger publish twice within its dedup window.
pub(super) async fn result(js: &Context, result: &JobResult) -> Result<(), RecordError> {
    let subject = results_subject(&result.job_id);
    send(js, &subject, &result.job_id, result).await
}

/// A submission without a usable job id, on `cuzk.results._malformed`.
pub(super) async fn malformed(js: &Context, seq: u64, reason: &str) -> Result<(), RecordError> {
    let result = JobResult::failed("", format!("job message {seq} rejected: {reason}"));
    send(
        js,
        SUBJECT_RESULTS_MALFORMED,
        &format!("malformed-{seq}"),
        &result,
    )
    .await
}

async fn send(
    js: &Context,
    subject: &str,
    msg_id: &str,
    result: &JobResult,
) -> Result<(), RecordError> {
    let body: Bytes = serde_json::to_vec(result)
        .expect("results serialize")
        .into();
    retry("publish result", RetryPolicy::NETWORK, || async {
        let mut headers = HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, msg_id);
        // Subscribers to results can join the job's trace.
        crate::telemetry::inject(&tracing::Span::current(), &mut headers);
        js.publish_with_headers(subject.to_owned(), headers, body.clone())
            .await?
            .await
            .map(|_| ())
            .map_err(async_nats::Error::from)
    })
    .await
    .map_err(|e| RecordError::Publish {
        job_id: result.job_id.clone(),
        message: e.to_string(),
    })
}
