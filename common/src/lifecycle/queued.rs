//! A submission still waiting in the jobs stream, found by its job's key (the job id under the
//! tenant its subject names, `topology::origin`): a job no synth node has taken yet has no
//! record, only its message. Read with message gets in stream order (the jobs stream is a work
//! queue: it allows no second consumer), each once, into an [`Index`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use async_nats::jetstream::stream::RawMessageErrorKind;
use async_nats::jetstream::Context;
use serde::Deserialize;

use super::RecordError;
use crate::topology::{origin, JOBS_STREAM};
use cuzk_wire::job::{job_key, JobInput, StagedInput, JOB_ID_HEADER};

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
    /// The tenant its subject names (not in the JSON).
    #[serde(skip)]
    tenant: Option<String>,
}

impl Head {
    /// The job's key: its id under its tenant.
    fn key(&self) -> String {
        job_key(self.tenant.as_deref(), &self.job_id)
    }

    fn staged(&self) -> Option<StagedInput> {
        let input: JobInput = serde_json::from_value(self.input.clone()).ok()?;
        input.staged(&self.job_id, self.tenant.as_deref())
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
/// a malformed submission is answered under); its tenant from its subject (none where the
/// subject is no submit subject: intake refuses such a job as untenanted too).
fn named(subject: &str, payload: &[u8], headers: &async_nats::HeaderMap) -> Option<Head> {
    let mut head = serde_json::from_slice::<Head>(payload).ok().or_else(|| {
        let job_id = headers.get(JOB_ID_HEADER)?.as_str().to_owned();
        Some(Head {
            job_id,
            circuit: None,
            input: serde_json::Value::Null,
            tenant: None,
        })
    })?;
    head.tenant = origin(subject).and_then(|o| o.tenant);
    Some(head)
}

/// Waiting submissions by job key. Each message of the jobs stream is read once, the first time a
/// lookup comes after it was stored; a lookup then reads only what was stored since the last one
/// and confirms its hit with one get, so a cancel costs a few round trips however long the
/// queue. Entries of messages that left the stream are dropped as the stream's first sequence
/// passes them.
#[derive(Default)]
pub(super) struct Index {
    by_id: HashMap<String, BTreeSet<u64>>,
    by_seq: BTreeMap<u64, String>,
    /// Every message below this sequence has been read.
    next: u64,
    pruned: Option<Instant>,
}

/// How often an index drops the entries of messages that left the stream.
const PRUNE_EVERY: Duration = Duration::from_secs(10);

impl Index {
    /// The oldest waiting submission of the job with key `key`.
    pub(super) async fn find(
        &mut self,
        js: &Context,
        key: &str,
    ) -> Result<Option<Queued>, RecordError> {
        let unavailable =
            |e: String| RecordError::Unavailable(format!("reading {JOBS_STREAM}: {e}"));
        let stream = js
            .get_stream_no_info(JOBS_STREAM)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if self.pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
            let first = js
                .get_stream(JOBS_STREAM)
                .await
                .map_err(|e| unavailable(e.to_string()))?
                .cached_info()
                .state
                .first_sequence;
            self.forget_below(first);
            self.pruned = Some(Instant::now());
        }
        loop {
            let got = stream
                .raw_message_builder()
                .sequence(self.next.max(1))
                .next_by_subject("cuzk.jobs.>")
                .send()
                .await;
            let message = match got {
                Ok(message) => message,
                Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => break,
                Err(e) => return Err(unavailable(e.to_string())),
            };
            self.next = message.sequence + 1;
            if let Some(head) = named(&message.subject, &message.payload, &message.headers) {
                self.insert(head.key(), message.sequence);
            }
        }
        let seqs: Vec<u64> = self
            .by_id
            .get(key)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        for seq in seqs {
            match at(js, seq, key).await? {
                Some(queued) => return Ok(Some(queued)),
                None => self.remove(seq),
            }
        }
        Ok(None)
    }

    fn insert(&mut self, job_id: String, seq: u64) {
        self.by_id.entry(job_id.clone()).or_default().insert(seq);
        self.by_seq.insert(seq, job_id);
    }

    fn remove(&mut self, seq: u64) {
        if let Some(job_id) = self.by_seq.remove(&seq) {
            if let Some(seqs) = self.by_id.get_mut(&job_id) {
                seqs.remove(&seq);
                if seqs.is_empty() {
                    self.by_id.remove(&job_id);
                }
            }
        }
    }

    fn forget_below(&mut self, first: u64) {
        while let Some((&seq, _)) = self.by_seq.first_key_value() {
            if seq >= first {
                break;
            }
            self.remove(seq);
        }
    }
}

/// The submission of the job with key `key` at stream sequence `seq`, while the jobs stream
/// holds it (until a synth node acknowledges it); `None` if the message there names another
/// job (or another tenant's).
pub(super) async fn at(js: &Context, seq: u64, key: &str) -> Result<Option<Queued>, RecordError> {
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
    let head = named(&message.subject, &message.payload, &message.headers)
        .filter(|head| head.key() == key);
    Ok(head.map(|head| queued(&message, head)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_forgets_what_left_the_stream() {
        let mut index = Index::default();
        for (id, seq) in [("a", 1), ("b", 2), ("a", 3), ("c", 4)] {
            index.insert(id.to_owned(), seq);
        }
        index.remove(1);
        assert_eq!(index.by_id["a"], BTreeSet::from([3]));
        index.forget_below(4);
        assert_eq!(index.by_seq.keys().copied().collect::<Vec<_>>(), [4]);
        assert_eq!(index.by_id.keys().collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn job_messages_are_named_by_their_json_or_header() {
        let mut headers = async_nats::HeaderMap::new();
        let submit = "cuzk.jobs.submit";
        let body = br#"{"job_id":"a","circuit":"mimc","params":{}}"#;
        let head = named(submit, body, &headers).unwrap();
        assert_eq!(
            (head.job_id.as_str(), head.circuit.as_deref()),
            ("a", Some("mimc"))
        );
        assert!(named(submit, b"not json", &headers).is_none());
        headers.insert(JOB_ID_HEADER, "b");
        let head = named(submit, b"not json", &headers).unwrap();
        assert_eq!((head.job_id.as_str(), head.circuit), ("b", None));
        // The key is the id under the tenant the subject names.
        let head = named("cuzk.jobs.submit.alice.high", body, &headers).unwrap();
        assert_eq!(head.key(), "alice.a");
        assert_eq!(
            named("cuzk.jobs.submit.alice", b"x", &headers)
                .unwrap()
                .key(),
            "alice.b"
        );
    }

    /// A waiting submission's staged input is the object named for it in its tenant's own
    /// bucket only: one in another tenant's is not its to delete.
    #[test]
    fn a_waiting_submissions_staged_input_is_its_tenants() {
        let headers = async_nats::HeaderMap::new();
        let body = br#"{"job_id":"j","circuit":"mimc","input":{"object_in":{"bucket":"cuzk-inputs-bob","name":"j.input"}}}"#;
        let own = named("cuzk.jobs.submit.bob", body, &headers).unwrap();
        assert_eq!(own.staged().unwrap().bucket, "cuzk-inputs-bob");
        let other = named("cuzk.jobs.submit.alice", body, &headers).unwrap();
        assert_eq!(other.staged(), None);
    }
}
