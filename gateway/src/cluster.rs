//! What the gateway needs from the cluster, as a trait: the NATS implementation lives with the
//! other submission code in `cli/src/gateway.rs`. Nothing here is kept between calls: every
//! answer comes from the cluster, so several gateways can serve the same cluster.

use std::time::Duration;

use bytes::Bytes;
use cuzk_common::nodes::NodeInfo;
use cuzk_wire::control::{CancelReply, SrsReply, SrsRequest};
use cuzk_wire::job::{JobRecord, JobResult, JobSpec, JobStatus};

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// NATS did not answer in time or refused; the caller may try again.
    #[error("the cluster is unavailable: {0}")]
    Unavailable(String),
    /// The request cannot succeed as it is (the job exists already, the input is refused).
    #[error("{0}")]
    Rejected(String),
}

impl cuzk_wire::Retryable for ClusterError {
    fn retryable(&self) -> bool {
        matches!(self, ClusterError::Unavailable(_))
    }
}

/// What `GetStatus` and `GetMetrics` report, read from the cluster at the time of the call.
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    /// The live nodes' heartbeats.
    pub nodes: Vec<NodeInfo>,
    /// Job messages not yet finished by a synth node (waiting, or being synthesized).
    pub jobs_stream_depth: u64,
    /// Partition work items waiting for a GPU worker.
    pub work_stream_depth: u64,
    /// The most recently updated job records.
    pub recent_jobs: Vec<JobRecord>,
}

#[tonic::async_trait]
pub trait Cluster: Send + Sync + 'static {
    /// Stores the job's input (inline, or in the inputs bucket when large) and publishes the
    /// job; returns once the server has acknowledged it.
    async fn submit(&self, spec: JobSpec, input: Bytes) -> Result<(), ClusterError>;

    /// The job's final result, waiting at most `wait` for it; `None` if it has not ended by
    /// then (or was never submitted).
    async fn result(&self, job_id: &str, wait: Duration)
        -> Result<Option<JobResult>, ClusterError>;

    /// How the job stands, from its record or else its stored result; `None` if the cluster
    /// has neither (never submitted, or still waiting for a synth node to take it).
    async fn status(&self, job_id: &str) -> Result<Option<JobStatus>, ClusterError>;

    /// Cancels the job unless it has ended; the reply says which (or that the id is unknown).
    async fn cancel(&self, job_id: &str) -> Result<CancelReply, ClusterError>;

    async fn view(&self) -> Result<ClusterView, ClusterError>;

    /// Sends a proving-key command to every GPU node; the replies of those that answered
    /// within `wait` (it returns as soon as every live GPU node has).
    async fn srs(&self, request: SrsRequest, wait: Duration)
        -> Result<Vec<SrsReply>, ClusterError>;

    /// This process's own metrics (Prometheus text), if it keeps a registry.
    fn process_metrics(&self) -> Option<String>;
}
