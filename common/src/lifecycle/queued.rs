//! A submission still waiting in the jobs stream, found by its job id: a job no synth node has
//! taken yet has no record, only its message. Read with message gets in stream order (the jobs
//! stream is a work queue: it allows no second consumer), at most [`MAX_QUEUED_SCAN`] of them.

use async_nats::jetstream::stream::RawMessageErrorKind;
use async_nats::jetstream::Context;
use serde::Deserialize;

use super::RecordError;
use crate::topology::JOBS_STREAM;
use cuzk_wire::job::{JobInput, StagedInput, JOB_ID_HEADER};

/// Most waiting submissions a cancel request looks through; one further back is `unknown`
/// until a synth node takes it (and then cancellable).
pub const MAX_QUEUED_SCAN: usize = 10_000;

/// A waiting submission: what its final record needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    /// Its stream sequence: the synth node that takes it meets a record of this submission.
    pub seq: u64,
    pub published_ms: u64,
    pub circuit: Option<String>,
    /// The input staged for it, deleted when it ends.
    pub input: Option<StagedInput>,
}

/// The fields of a job message that name it; the rest is skipped unread.
#[derive(Deserialize)]
struct Head {
    job_id: String,
    #[serde(default)]
    circuit: Option<String>,
    /// Read apart from the rest: a malformed input must not hide the job's id.
    #[serde(default)]
    input: serde_json::Value,
}

impl Head {
    fn staged(&self) -> Option<StagedInput> {
        let input: JobInput = serde_json::from_value(self.input.clone()).ok()?;
        input.staged(&self.job_id)
    }
}

fn queued(message: &async_nats::jetstream::message::StreamMessage, head: Head) -> Queued {
    Queued {
        seq: message.sequence,
        published_ms: (message.time.unix_timestamp_nanos() / 1_000_000) as u64,
        input: head.staged(),
        circuit: head.circuit,
    }
}

/// The job id and circuit a job message names: its JSON, else its `Cuzk-Job-Id` header (the id
/// a malformed submission is answered under).
fn named(payload: &[u8], headers: &async_nats::HeaderMap) -> Option<Head> {
    serde_json::from_slice::<Head>(payload).ok().or_else(|| {
        let job_id = headers.get(JOB_ID_HEADER)?.as_str().to_owned();
        Some(Head {
            job_id,
            circuit: None,
            input: serde_json::Value::Null,
        })
    })
}

/// The oldest waiting submission of `job_id`, if one is among the first [`MAX_QUEUED_SCAN`].
pub(super) async fn find(js: &Context, job_id: &str) -> Result<Option<Queued>, RecordError> {
    let unavailable = |e: String| RecordError::Unavailable(format!("reading {JOBS_STREAM}: {e}"));
    let stream = js
        .get_stream_no_info(JOBS_STREAM)
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let mut next = 1;
    for _ in 0..MAX_QUEUED_SCAN {
        let got = stream
            .raw_message_builder()
            .sequence(next)
            .next_by_subject("cuzk.jobs.>")
            .send()
            .await;
        let message = match got {
            Ok(message) => message,
            Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => return Ok(None),
            Err(e) => return Err(unavailable(e.to_string())),
        };
        next = message.sequence + 1;
        match named(&message.payload, &message.headers) {
            Some(head) if head.job_id == job_id => return Ok(Some(queued(&message, head))),
            _ => {}
        }
    }
    Ok(None)
}

/// The submission of `job_id` at stream sequence `seq`, while the jobs stream holds it (until a
/// synth node acknowledges it); `None` if the message there names another job.
pub(super) async fn at(
    js: &Context,
    seq: u64,
    job_id: &str,
) -> Result<Option<Queued>, RecordError> {
    let unavailable = |e: String| RecordError::Unavailable(format!("reading {JOBS_STREAM}: {e}"));
    if seq == 0 {
        return Ok(None);
    }
    let stream = js
        .get_stream_no_info(JOBS_STREAM)
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let message = match stream.get_raw_message(seq).await {
        Ok(message) => message,
        Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => return Ok(None),
        Err(e) => return Err(unavailable(e.to_string())),
    };
    let head = named(&message.payload, &message.headers).filter(|head| head.job_id == job_id);
    Ok(head.map(|head| queued(&message, head)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_messages_are_named_by_their_json_or_header() {
        let mut headers = async_nats::HeaderMap::new();
        let head = named(br#"{"job_id":"a","circuit":"mimc","params":{}}"#, &headers).unwrap();
        assert_eq!(
            (head.job_id.as_str(), head.circuit.as_deref()),
            ("a", Some("mimc"))
        );
        assert!(named(b"not json", &headers).is_none());
        headers.insert(JOB_ID_HEADER, "b");
        let head = named(b"not json", &headers).unwrap();
        assert_eq!((head.job_id.as_str(), head.circuit), ("b", None));
    }
}
