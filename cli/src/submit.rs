//! `cuzk submit`'s steps: a large input uploaded to the inputs bucket, the job published with
//! the server's acknowledgement (so a zero exit means the job is stored), the result awaited,
//! and the proof bytes written to a file.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _};
use async_nats::jetstream::message::PublishMessage;
use async_nats::Client;
use base64::Engine;
use cuzk_common::nats::{retry, RetryPolicy};
use cuzk_common::topology::{self, results_subject, INPUTS_BUCKET, SUBJECT_SUBMIT};
use cuzk_wire::job::{JobInput, JobResult, JobSpec, JobStatus, DEFAULT_MAX_INLINE_INPUT};
use futures::StreamExt;

/// The job's input as it travels: inline up to the synth nodes' default inline limit, else as
/// an object in the inputs bucket named after the job (uploaded here).
pub async fn stage_input(
    client: &Client,
    timeout: Duration,
    job_id: &str,
    bytes: &[u8],
) -> anyhow::Result<JobInput> {
    if bytes.len() <= DEFAULT_MAX_INLINE_INPUT {
        return Ok(JobInput::Base64(
            base64::engine::general_purpose::STANDARD.encode(bytes),
        ));
    }
    let js = topology::jetstream_context(client.clone(), timeout);
    let store = js.get_object_store(INPUTS_BUCKET).await.with_context(|| {
        format!("the {INPUTS_BUCKET} bucket (run `cuzk provision`, and check that this user may write it)")
    })?;
    let name = format!("{job_id}.input");
    cuzk_common::objects::put(&store, &name, bytes)
        .await
        .with_context(|| format!("uploading {} bytes to {INPUTS_BUCKET}/{name}", bytes.len()))?;
    Ok(JobInput::Object(name))
}

/// The span of submitting a job, whose context the job message carries (the synth node's
/// `process` span becomes its child).
pub fn send_span(spec: &JobSpec) -> tracing::Span {
    let size = serde_json::to_vec(spec).map_or(0, |body| body.len());
    let span = cuzk_common::telemetry::send_span(SUBJECT_SUBMIT, &spec.job_id, size);
    span.record("cuzk.job_id", spec.job_id.as_str());
    span
}

/// Publishes a job into the jobs stream and waits for the server's acknowledgement, retrying
/// with the job id as message id (a retried publish that was stored after all is dropped as a
/// duplicate). The caller's trace context goes along.
pub async fn publish_acked(
    client: &Client,
    timeout: Duration,
    spec: &JobSpec,
) -> anyhow::Result<()> {
    let js = topology::jetstream_context(client.clone(), timeout);
    let body = bytes::Bytes::from(serde_json::to_vec(spec)?);
    let mut headers = async_nats::HeaderMap::new();
    cuzk_common::telemetry::inject(&tracing::Span::current(), &mut headers);
    retry("publish job", RetryPolicy::NETWORK, || async {
        let publish = PublishMessage::build()
            .headers(headers.clone())
            .payload(body.clone())
            .message_id(spec.job_id.as_str());
        js.send_publish(SUBJECT_SUBMIT, publish)
            .await?
            .await
            .map(|_| ())
            .map_err(async_nats::Error::from)
    })
    .await
    .map_err(|e| anyhow::anyhow!("the server did not acknowledge job {}: {e}", spec.job_id))
}

/// [`publish_acked`], then the job's result (subscribed to before publishing, so it cannot be
/// missed).
pub async fn submit_acked_and_wait(
    client: &Client,
    nats_timeout: Duration,
    spec: &JobSpec,
    wait: Duration,
) -> anyhow::Result<JobResult> {
    let mut results = client.subscribe(results_subject(&spec.job_id)).await?;
    publish_acked(client, nats_timeout, spec).await?;
    let message = tokio::time::timeout(wait, results.next())
        .await
        .with_context(|| format!("no result for job {} within {wait:?}", spec.job_id))?
        .context("results subscription closed")?;
    Ok(serde_json::from_slice(&message.payload)?)
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
