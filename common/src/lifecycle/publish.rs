//! Publishing results through JetStream (acknowledged, stored in `CUZK_RESULTS`, which
//! republishes each stored result to `cuzk.results.<key>` for clients: `<tenant>.<job_id>` for
//! a tenant's job, under the prefix only that tenant may subscribe to). Only the ledger calls
//! these, after the record says the job ended.

use async_nats::jetstream::stream::LastRawMessageErrorKind;
use async_nats::jetstream::Context;
use async_nats::HeaderMap;
use bytes::Bytes;

use super::RecordError;
use crate::retry::{retry, RetryPolicy};
use crate::topology::{ledger_results_subject, malformed_key, RESULTS_STREAM};
use cuzk_wire::job::JobResult;

/// The result of the job with key `key`, with the key as message id: a second publication
/// within the stream's dedup window (a retry after a lost ack, a crash between publishing and
/// noting it) is neither stored nor republished, so clients hear one answer.
pub(super) async fn result(js: &Context, key: &str, result: &JobResult) -> Result<(), RecordError> {
    let subject = ledger_results_subject(key);
    send(js, &subject, key, result).await
}

/// A submission of `tenant` without a usable job id, reaching clients on
/// `cuzk.results._malformed` (`cuzk.results.<tenant>._malformed`).
pub(super) async fn malformed(
    js: &Context,
    tenant: Option<&str>,
    seq: u64,
    reason: &str,
) -> Result<(), RecordError> {
    let result = JobResult::failed("", format!("job message {seq} rejected: {reason}"));
    let subject = ledger_results_subject(&malformed_key(tenant));
    send(js, &subject, &format!("malformed-{seq}"), &result).await
}

/// The result of the job with key `key` as the results stream holds it, if it still does.
pub(super) async fn stored(js: &Context, key: &str) -> Result<Option<JobResult>, RecordError> {
    let unavailable =
        |e: String| RecordError::Unavailable(format!("reading {RESULTS_STREAM}: {e}"));
    let stream = js
        .get_stream_no_info(RESULTS_STREAM)
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    match stream
        .get_last_raw_message_by_subject(&ledger_results_subject(key))
        .await
    {
        Ok(message) => serde_json::from_slice(&message.payload)
            .map(Some)
            .map_err(|e| RecordError::Corrupt {
                job_id: key.to_owned(),
                message: format!("its result in {RESULTS_STREAM}: {e}"),
            }),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(unavailable(e.to_string())),
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;
    use crate::local_nats::NatsServer;
    use crate::topology::{provision, results_subject, Limits};

    /// A result published twice (what a retry after a lost ack does) reaches a client's plain
    /// core subscription once, and the stream stores it once.
    #[tokio::test]
    async fn a_republished_result_reaches_clients_once() {
        let server = NatsServer::start().unwrap();
        let client = async_nats::connect(server.url()).await.unwrap();
        let js = async_nats::jetstream::new(client.clone());
        provision(&js, 1, Duration::from_secs(30), Limits::local())
            .await
            .unwrap();
        let mut heard = client.subscribe(results_subject("j1")).await.unwrap();
        client.flush().await.unwrap();

        let done = JobResult::failed("j1", "a reason");
        result(&js, "j1", &done).await.unwrap();
        result(&js, "j1", &done).await.unwrap();

        let first = tokio::time::timeout(Duration::from_secs(5), heard.next())
            .await
            .expect("the result reaches the subscriber")
            .unwrap();
        let got: JobResult = serde_json::from_slice(&first.payload).unwrap();
        assert_eq!(got.error.as_deref(), Some("a reason"));
        let second = tokio::time::timeout(Duration::from_secs(1), heard.next()).await;
        assert!(second.is_err(), "a second copy reached the subscriber");

        let stream = js.get_stream(RESULTS_STREAM).await.unwrap();
        let stored = stream
            .get_last_raw_message_by_subject(&ledger_results_subject("j1"))
            .await
            .unwrap();
        assert_eq!(stored.sequence, 1, "stored once");
    }
}
