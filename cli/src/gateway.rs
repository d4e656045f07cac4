//! `cuzk gateway`'s cluster: jobs submitted as `cuzk submit` submits them (the input staged in
//! the inputs bucket when large, the job published with the server's acknowledgement), results
//! read where every client reads them (the results subject, and the job's record; the results
//! stream too on the untenanted path), and the cluster's state as `cuzk status` reads it. A
//! gateway with a tenant (`--nats-tenant`) submits, cancels, reads and lists its own jobs only
//! — what the server lets its user do — and lists them through a synth node
//! (`cuzk.control.jobs.<tenant>`).

use std::time::Duration;

use async_nats::Client;
use bytes::Bytes;
use cuzk_common::topology::{
    job_key, results_subject, Topology, JOBS_STREAM, SUBJECT_SRS, WORK_STREAM,
};
use cuzk_gateway::{Cluster, ClusterError, ClusterView};
use cuzk_wire::control::{CancelReply, SrsReply, SrsRequest};
use cuzk_wire::job::{JobResult, JobSpec, JobStatus};
use futures::StreamExt;
use tracing::Instrument;

pub struct NatsCluster {
    client: Client,
    topology: Topology,
    /// Per NATS request.
    timeout: Duration,
    /// Where inputs too large for a job message are staged.
    inputs_bucket: String,
    /// The tenant it submits as (`None`: the untenanted path).
    tenant: Option<String>,
}

impl NatsCluster {
    /// A cluster client submitting as `tenant` (`None`: the untenanted path), staging large
    /// inputs in `inputs_bucket` (the tenant's own).
    pub fn new(
        client: Client,
        topology: Topology,
        timeout: Duration,
        inputs_bucket: String,
        tenant: Option<String>,
    ) -> NatsCluster {
        NatsCluster {
            client,
            topology,
            timeout,
            inputs_bucket,
            tenant,
        }
    }

    /// The key of this gateway's job `job_id`.
    fn key(&self, job_id: &str) -> String {
        job_key(self.tenant.as_deref(), job_id)
    }

    /// The job's result if it has ended: from its record (a tenant may read its own), and on
    /// the untenanted path from the results stream first (the record keeps the result's timing
    /// sums only).
    async fn stored_result(&self, job_id: &str) -> Result<Option<JobResult>, ClusterError> {
        let ledger = cuzk_common::lifecycle::Ledger::reader(&self.topology);
        let key = self.key(job_id);
        let answer = match self.tenant {
            Some(_) => ledger.recorded_answer(&key).await,
            None => ledger.answer(&key).await,
        };
        answer.map_err(unavailable)
    }
}

/// Sends a proving-key command to every GPU node and gathers their replies until each GPU node
/// with a live heartbeat has answered or `wait` has passed (a node that died meanwhile, or a
/// user not allowed `cuzk.control.srs`, shows as fewer replies).
pub async fn gpu_command(
    client: &Client,
    topology: &Topology,
    request: &SrsRequest,
    wait: Duration,
) -> Result<Vec<SrsReply>, ClusterError> {
    let nodes = cuzk_common::nodes::list(topology)
        .await
        .map_err(unavailable)?;
    let expected = nodes.iter().filter(|n| n.role == "gpu").count();
    if expected == 0 {
        return Ok(Vec::new());
    }
    let inbox = client.new_inbox();
    let mut answers = client.subscribe(inbox.clone()).await.map_err(unavailable)?;
    let body = serde_json::to_vec(request).expect("requests serialize");
    client
        .publish_with_reply(SUBJECT_SRS, inbox, body.into())
        .await
        .map_err(unavailable)?;
    let deadline = tokio::time::Instant::now() + wait;
    let mut replies = Vec::with_capacity(expected);
    while replies.len() < expected {
        match tokio::time::timeout_at(deadline, answers.next()).await {
            Ok(Some(message)) => match SrsReply::parse(&message.payload) {
                Ok(reply) => replies.push(reply),
                Err(e) => tracing::warn!(err = %e, "an unreadable proving-key reply"),
            },
            Ok(None) | Err(_) => break,
        }
    }
    Ok(replies)
}

fn unavailable(e: impl std::fmt::Display) -> ClusterError {
    ClusterError::Unavailable(format!("{e:#}"))
}

fn parse(payload: &[u8]) -> Result<JobResult, ClusterError> {
    serde_json::from_slice(payload).map_err(|e| {
        ClusterError::Unavailable(format!("a result on the results stream is unreadable: {e}"))
    })
}

#[tonic::async_trait]
impl Cluster for NatsCluster {
    async fn submit(&self, spec: JobSpec, input: Bytes) -> Result<(), ClusterError> {
        let (client, bucket) = (&self.client, &self.inputs_bucket);
        let staged = crate::submit::stage_input(client, self.timeout, bucket, &spec.job_id, &input)
            .await
            .map_err(unavailable)?;
        drop(input);
        let spec = JobSpec {
            input: staged,
            ..spec
        };
        let tenant = self.tenant.as_deref();
        let span = crate::submit::send_span(tenant, &spec);
        let js = cuzk_common::topology::jetstream_context(self.client.clone(), self.timeout);
        crate::submit::publish_job(&js, tenant, &spec)
            .instrument(span)
            .await
            .map(|_| ())
            .map_err(unavailable)
    }

    async fn result(
        &self,
        job_id: &str,
        wait: Duration,
    ) -> Result<Option<JobResult>, ClusterError> {
        // Subscribed before looking, so a result published in between is not missed.
        let mut live = self
            .client
            .subscribe(results_subject(&self.key(job_id)))
            .await
            .map_err(unavailable)?;
        crate::submit::await_result(&mut live, wait, || self.stored_result(job_id), parse).await
    }

    async fn status(&self, job_id: &str) -> Result<Option<JobStatus>, ClusterError> {
        let ledger = cuzk_common::lifecycle::Ledger::reader(&self.topology);
        if let Some(record) = ledger.get(&self.key(job_id)).await.map_err(unavailable)? {
            return Ok(Some(record.status));
        }
        // A job refused before it had a record has only its result.
        Ok(self.stored_result(job_id).await?.map(|r| r.status))
    }

    async fn cancel(&self, job_id: &str) -> Result<CancelReply, ClusterError> {
        crate::cancel::cancel(&self.client, self.tenant.as_deref(), job_id, self.timeout)
            .await
            .map_err(unavailable)
    }

    async fn view(&self) -> Result<ClusterView, ClusterError> {
        let topology = &self.topology;
        Ok(ClusterView {
            nodes: cuzk_common::nodes::list(topology)
                .await
                .map_err(unavailable)?,
            jobs_stream_depth: topology
                .stream_depth(JOBS_STREAM)
                .await
                .map_err(unavailable)?,
            work_stream_depth: topology
                .stream_depth(WORK_STREAM)
                .await
                .map_err(unavailable)?,
            recent_jobs: match &self.tenant {
                // Its own jobs, listed by a synth node: the bucket cannot be scanned by prefix.
                Some(tenant) => crate::status::listing(&self.client, Some(tenant), self.timeout)
                    .await
                    .map_err(unavailable)?,
                None => cuzk_common::lifecycle::Ledger::reader(topology)
                    .recent(crate::status::STATUS_SCAN)
                    .await
                    .map_err(unavailable)?,
            },
        })
    }

    async fn srs(
        &self,
        request: SrsRequest,
        wait: Duration,
    ) -> Result<Vec<SrsReply>, ClusterError> {
        gpu_command(&self.client, &self.topology, &request, wait).await
    }

    fn process_metrics(&self) -> Option<String> {
        cuzk_common::metrics::prometheus_text()
    }
}
