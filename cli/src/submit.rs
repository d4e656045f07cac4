//! `cuzk submit`'s steps: a large input uploaded to the inputs bucket, the job published
//! through JetStream (the server's acknowledgement says the job is stored — or why it was
//! refused: the jobs stream is full, the message too large), its one answer awaited, and the
//! proof bytes written to a file. Waiting subscribes to `cuzk.results.<key>` before
//! publishing and also reads the job's record: a job that has already ended (a resubmission, a
//! client reconnecting) returns its stored result at once.
//!
//! A client submits as a tenant (`--nats-tenant`) or on the untenanted path: the tenant names
//! its submit subject (`cuzk.jobs.submit.<tenant>`), its results subject and its records
//! (`<tenant>.<job_id>`, `cuzk_wire::job::job_key`), which is all the server lets its user
//! use.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _};
use async_nats::jetstream::{self, context::PublishErrorKind, message::PublishMessage};
use async_nats::Client;
use base64::Engine;
use cuzk_common::lifecycle::Ledger;
use cuzk_common::retry::{retry, RetryPolicy};
use cuzk_common::topology::{
    jetstream_context, job_key, results_subject, staged_input_name, INPUTS_BUCKET, JOBS_BUCKET,
};
use cuzk_wire::job::{JobInput, JobResult, JobSpec, JobStatus, Priority, DEFAULT_MAX_INLINE_INPUT};
use futures::StreamExt;

/// The job's input as it travels: inline up to the synth nodes' default inline limit, else as
/// an object named after the job, uploaded here to the inputs bucket `bucket` (the shared one
/// or the submitter's own).
pub async fn stage_input(
    client: &Client,
    timeout: Duration,
    bucket: &str,
    job_id: &str,
    bytes: &[u8],
) -> anyhow::Result<JobInput> {
    if bytes.len() <= DEFAULT_MAX_INLINE_INPUT {
        return Ok(JobInput::Base64(
            base64::engine::general_purpose::STANDARD.encode(bytes),
        ));
    }
    let js = jetstream_context(client.clone(), timeout);
    let store = js.get_object_store(bucket).await.with_context(|| {
        format!("the {bucket} bucket (run `cuzk provision --nats-inputs-bucket {bucket}`, and check that this user may write it)")
    })?;
    let name = staged_input_name(job_id);
    cuzk_common::objects::put(&store, &name, bytes)
        .await
        .with_context(|| format!("uploading {} bytes to {bucket}/{name}", bytes.len()))?;
    Ok(if bucket == INPUTS_BUCKET {
        JobInput::Object(name)
    } else {
        JobInput::ObjectIn {
            bucket: bucket.to_owned(),
            name,
        }
    })
}

/// The span of submitting a job as `tenant`, whose context the job message carries (the synth
/// node's `process` span becomes its child).
pub fn send_span(tenant: Option<&str>, spec: &JobSpec) -> tracing::Span {
    let size = serde_json::to_vec(spec).map_or(0, |body| body.len());
    let key = job_key(tenant, &spec.job_id);
    let span = cuzk_common::telemetry::send_span(&submit_subject(tenant, spec), &key, size);
    span.record("cuzk.job_id", key.as_str());
    span
}

/// The subject `tenant` submits a job on: its own, with high priority's apart, which only roles
/// allowed to use it may publish.
pub fn submit_subject(tenant: Option<&str>, spec: &JobSpec) -> String {
    cuzk_common::topology::submit_subject(tenant, spec.priority)
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

/// Publishes the job as `tenant` through JetStream with its key as message id (the jobs
/// stream's dedup window is the whole stream's: a tenant's `j1` must not pass for another's),
/// retrying what the network lost (a retried publish that was stored after all comes back as a
/// duplicate) but not what the server refused.
pub async fn publish_job(
    js: &jetstream::Context,
    tenant: Option<&str>,
    spec: &JobSpec,
) -> Result<Accepted, SubmitError> {
    let body = bytes::Bytes::from(
        serde_json::to_vec(spec).map_err(|e| SubmitError::Failed(e.to_string()))?,
    );
    let (subject, key) = (submit_subject(tenant, spec), job_key(tenant, &spec.job_id));
    let mut headers = async_nats::HeaderMap::new();
    // With tracing on, the job joins the caller's trace.
    cuzk_common::telemetry::inject(&tracing::Span::current(), &mut headers);
    // A refusal is final: it leaves the retry loop as a success carrying the error.
    let settled = retry("publish job", RetryPolicy::NETWORK, || async {
        let publish = PublishMessage::build()
            .headers(headers.clone())
            .payload(body.clone())
            .message_id(key.as_str());
        let ack = js
            .send_publish(subject.clone(), publish)
            .await
            .map_err(|e| SubmitError::Failed(e.to_string()))?
            .await;
        match ack {
            Ok(ack) if ack.duplicate => Ok(Ok(Accepted::Duplicate)),
            Ok(ack) => Ok(Ok(Accepted::Stored(ack.sequence))),
            // The server answered with an error: it refused the message.
            Err(e) if e.kind() == PublishErrorKind::Other => {
                Ok(Err(SubmitError::Refused(e.to_string())))
            }
            Err(e) if e.kind() == PublishErrorKind::StreamNotFound => Ok(Err(
                SubmitError::Refused(format!("{e} (has `cuzk provision` run?)")),
            )),
            // A permission violation shows only as a missing acknowledgement.
            Err(e) if spec.priority == Priority::High => Err(SubmitError::Failed(format!(
                "{e} (only roles allowed high priority may publish on {subject})"
            ))),
            Err(e) => Err(SubmitError::Failed(format!(
                "{e} (this went to {subject}; a user may publish on its own tenant's subjects \
                 only: check --nats-tenant)"
            ))),
        }
    })
    .await?;
    settled
}

/// Publishes the job as `tenant` with a plain core publish, exactly as `nats pub
/// cuzk.jobs.submit[.<tenant>]` does.
pub async fn publish_plain(
    client: &Client,
    tenant: Option<&str>,
    spec: &JobSpec,
) -> anyhow::Result<()> {
    let mut headers = async_nats::HeaderMap::new();
    cuzk_common::telemetry::inject(&tracing::Span::current(), &mut headers);
    let body = serde_json::to_vec(spec)?.into();
    let subject = submit_subject(tenant, spec);
    if headers.is_empty() {
        client.publish(subject, body).await?;
    } else {
        client.publish_with_headers(subject, headers, body).await?;
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

/// Submits `spec` as `tenant` and returns its one answer: the stored result of a job that
/// already ended, otherwise the first result published on its subject.
pub async fn submit_and_wait(
    client: &Client,
    tenant: Option<&str>,
    spec: &JobSpec,
    via: Via,
    timeout: Duration,
) -> anyhow::Result<JobResult> {
    let key = job_key(tenant, &spec.job_id);
    let mut results = client.subscribe(results_subject(&key)).await?;
    client.flush().await?;
    let js = jetstream_context(client.clone(), Duration::from_secs(10));
    match via {
        Via::Core => publish_plain(client, tenant, spec).await?,
        Via::JetStream => {
            publish_job(&js, tenant, spec).await?;
        }
    }
    let stored = || async { anyhow::Ok(stored_result(&js, &key).await) };
    let parse = |payload: &[u8]| Ok(serde_json::from_slice(payload)?);
    await_result(&mut results, timeout, stored, parse)
        .await?
        .with_context(|| format!("no result for job {} within {timeout:?}", spec.job_id))
}

/// How often a waiting client looks for a stored result it has not heard.
const RESULT_RECHECK: Duration = Duration::from_secs(5);

/// A job's one answer: what `stored` finds (the record ends before the result is published, so
/// one that has not ended now answers on `live`, subscribed before this call), else the first
/// message on `live`. `stored` is asked again every [`RESULT_RECHECK`]: the results stream
/// republishes to clients at most once, and a stream leader that dies between storing and
/// republishing leaves the answer only in the stream and the record. A lookup that fails (a
/// server restarting, a read timed out) is tried again at the next recheck while `live` is
/// heard meanwhile. Once `wait` passed: `None`, or the last lookup's error if it failed.
pub async fn await_result<E, Fut>(
    live: &mut async_nats::Subscriber,
    wait: Duration,
    mut stored: impl FnMut() -> Fut,
    parse: impl Fn(&[u8]) -> Result<JobResult, E>,
) -> Result<Option<JobResult>, E>
where
    Fut: std::future::Future<Output = Result<Option<JobResult>, E>>,
{
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let failed = match stored().await {
            Ok(Some(result)) => return Ok(Some(result)),
            Ok(None) => None,
            Err(e) => Some(e),
        };
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return failed.map_or(Ok(None), Err);
        }
        let recheck = deadline.min(now + RESULT_RECHECK);
        match tokio::time::timeout_at(recheck, live.next()).await {
            Ok(Some(message)) => return parse(&message.payload).map(Some),
            // A closed subscription hears nothing more; the stored result may still come.
            Ok(None) => tokio::time::sleep_until(recheck).await,
            Err(_) => {}
        }
    }
}

/// The result in the record of the job with key `key`, if the job has ended and this client
/// may read the record (a tenant its own).
pub async fn stored_result(js: &jetstream::Context, key: &str) -> Option<JobResult> {
    let kv = match js.get_key_value(JOBS_BUCKET).await {
        Ok(kv) => kv,
        Err(e) => {
            tracing::debug!(err = %e, "cannot read job records; waiting for the result only");
            return None;
        }
    };
    let ledger = Ledger::open(js.clone(), kv);
    ledger.recorded_answer(key).await.ok()?
}

/// Writes a finished job's proof bytes (its partition proofs concatenated, exactly what
/// `seal_commit_phase2` returns for PoRep) to `out`, atomically.
pub fn write_proof(result: &JobResult, out: &Path) -> anyhow::Result<()> {
    if result.status != JobStatus::Done {
        bail!("job {} has no proof: it failed", result.job_id);
    }
    let proof = hex::decode(
        result
            .proof
            .as_deref()
            .context("the result carries no proof")?,
    )
    .context("the result's proof is not hex")?;
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty());
    let mut tmp = tempfile::NamedTempFile::new_in(dir.unwrap_or(Path::new(".")))
        .with_context(|| format!("writing {}", out.display()))?;
    std::io::Write::write_all(&mut tmp, &proof)?;
    tmp.persist(out)
        .with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_common::local_nats::NatsServer;

    fn answer(job_id: &str) -> JobResult {
        JobResult {
            version: 1,
            job_id: job_id.into(),
            status: JobStatus::Failed,
            circuit: None,
            proof: None,
            partitions: 1,
            verified: false,
            synthetic: false,
            error: Some("refused".into()),
            timings: Default::default(),
            partition_timings: Vec::new(),
        }
    }

    /// A record lookup that fails (a server restarting under the gateway's AwaitProof) does not
    /// end the wait: the answer published meanwhile is still heard. A lookup that fails until
    /// the end is what the wait returns.
    #[tokio::test]
    async fn a_failed_lookup_does_not_end_the_wait() {
        let server = NatsServer::start().unwrap();
        let client = async_nats::connect(server.url()).await.unwrap();
        let mut live = client.subscribe("answers").await.unwrap();
        client.flush().await.unwrap();
        let publisher = client.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let body = serde_json::to_vec(&answer("j1")).unwrap();
            publisher.publish("answers", body.into()).await.unwrap();
        });
        let failing = || async { Err::<Option<JobResult>, String>("timed out".into()) };
        let parse = |b: &[u8]| serde_json::from_slice::<JobResult>(b).map_err(|e| e.to_string());
        let got = await_result(&mut live, Duration::from_secs(10), failing, parse).await;
        assert_eq!(got.unwrap().map(|r| r.job_id), Some("j1".to_owned()));

        let silent = await_result(&mut live, Duration::from_millis(300), failing, parse).await;
        assert_eq!(silent.unwrap_err(), "timed out");
    }
}
