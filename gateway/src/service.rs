//! `cuzk.v1.ProvingEngine` over a [`Cluster`]: each call's caller is known and allowed
//! ([`crate::auth`]), the call checked ([`crate::request`]), passed to the cluster, and its
//! answer shaped into Curio's reply ([`crate::reply`]). Calls the cluster cannot back with
//! real behaviour answer `UNIMPLEMENTED` saying what is missing, never a made-up success.
//! `PreloadSRS`/`EvictSRS` go to every GPU node (`srs`).

use std::sync::Arc;
use std::time::Duration;

use cuzk_common::config::GatewayConfig;
use cuzk_wire::job::{unix_ms, valid_job_id, JobSpec, JobStatus, Priority};
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status};

use crate::auth::{Access, Caller, Power};
use crate::cluster::{Cluster, ClusterError};
use crate::proto::proving_engine_server::ProvingEngine;
use crate::proto::*;
use crate::request::{attempt_id, owned_by, MAX_ATTEMPTS};
use crate::{reply, request, srs};
use cuzk_wire::control::{SrsOp, SrsReply, SrsRequest};
use cuzk_wire::excerpt;

pub struct Gateway {
    cluster: Arc<dyn Cluster>,
    /// How long the gateway waits for things on the caller's behalf, and its limits
    /// (`[gateway]` in the config, common/src/config/gateway.rs).
    config: GatewayConfig,
    access: Access,
    /// Calls waiting for a job's result, each on a NATS subscription of its own.
    awaits: Arc<Semaphore>,
    started_ms: u64,
}

impl Gateway {
    pub fn new(cluster: Arc<dyn Cluster>, config: GatewayConfig, access: Access) -> Gateway {
        Gateway {
            cluster,
            awaits: Arc::new(Semaphore::new(config.max_awaits)),
            config,
            access,
            started_ms: unix_ms(),
        }
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    pub fn access(&self) -> &Access {
        &self.access
    }

    /// Submits `request` for `caller`; returns its job's id. A request id seen before names
    /// the job it started, unless that one failed or was cancelled: then the next attempt's.
    async fn submit(&self, caller: &Caller, request: SubmitProofRequest) -> Result<String, Status> {
        caller.require(Power::Submit, "submit proofs")?;
        let idempotent = !request.request_id.is_empty();
        let (spec, input) = request::job_for(request, caller.name())?;
        if spec.priority == Priority::High {
            caller.require(
                Power::HighPriority,
                "submit at high priority (HIGH, CRITICAL, or PoSt's default)",
            )?;
        }
        let attempts = if idempotent { MAX_ATTEMPTS } else { 1 };
        for attempt in 0..attempts {
            let job_id = attempt_id(&spec.job_id, attempt);
            let status = match idempotent {
                true => self.cluster.status(&job_id).await.map_err(cluster_status)?,
                false => None,
            };
            match status {
                Some(JobStatus::Failed | JobStatus::Cancelled) => continue,
                Some(status) => {
                    tracing::info!(%job_id, status = status.name(), "request id seen before: its job stands");
                    return Ok(job_id);
                }
                None => {}
            }
            let spec = JobSpec {
                job_id: job_id.clone(),
                ..spec
            };
            tracing::info!(%job_id, client = caller.name(), circuit = %spec.circuit, params = %spec.params, input_bytes = input.len(), "submitting");
            self.cluster
                .submit(spec, input)
                .await
                .map_err(cluster_status)?;
            return Ok(job_id);
        }
        Err(Status::failed_precondition(format!(
            "this request id's {MAX_ATTEMPTS} jobs all failed or were cancelled; send it under a new request_id"
        )))
    }

    async fn wait(&self, job_id: &str, wait: Duration) -> Result<AwaitProofResponse, Status> {
        let _waiting = self.awaits.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "{} calls are waiting for results, this gateway's limit; try again later",
                self.config.max_awaits
            ))
        })?;
        let result = self
            .cluster
            .result(job_id, wait)
            .await
            .map_err(cluster_status)?;
        Ok(match result {
            Some(result) => reply::await_response(&result),
            None => reply::timed_out(job_id),
        })
    }

    async fn view(&self) -> Result<crate::ClusterView, Status> {
        tokio::time::timeout(self.config.status_timeout, self.cluster.view())
            .await
            .map_err(|_| {
                Status::unavailable(format!(
                    "the cluster did not answer within {:?}",
                    self.config.status_timeout
                ))
            })?
            .map_err(cluster_status)
    }

    async fn srs(
        &self,
        caller: &Caller,
        op: SrsOp,
        circuit_id: &str,
    ) -> Result<Vec<SrsReply>, Status> {
        caller.require(Power::SrsAdmin, "load or drop proving keys")?;
        let (circuit, params) = srs::circuit_for(circuit_id)?;
        let request = SrsRequest {
            op,
            circuit,
            params,
        };
        tracing::info!(
            ?op,
            circuit_id,
            client = caller.name(),
            "proving-key command"
        );
        self.cluster
            .srs(request, self.config.srs_timeout)
            .await
            .map_err(cluster_status)
    }
}

fn cluster_status(e: ClusterError) -> Status {
    match e {
        ClusterError::Unavailable(_) => Status::unavailable(e.to_string()),
        ClusterError::Rejected(_) => Status::failed_precondition(e.to_string()),
    }
}

/// `INVALID_ARGUMENT` unless `job_id` is one by the cluster's rules; echoes a prefix only.
fn check_job_id(job_id: &str) -> Result<(), Status> {
    match valid_job_id(job_id) {
        true => Ok(()),
        false => Err(Status::invalid_argument(format!(
            "{} is not a job id",
            excerpt(job_id)
        ))),
    }
}

#[tonic::async_trait]
impl ProvingEngine for Gateway {
    async fn submit_proof(
        &self,
        request: Request<SubmitProofRequest>,
    ) -> Result<Response<SubmitProofResponse>, Status> {
        let caller = self.access.caller(&request)?;
        let job_id = self.submit(&caller, request.into_inner()).await?;
        Ok(Response::new(SubmitProofResponse {
            job_id,
            ..Default::default()
        }))
    }

    async fn await_proof(
        &self,
        request: Request<AwaitProofRequest>,
    ) -> Result<Response<AwaitProofResponse>, Status> {
        self.access.caller(&request)?;
        let AwaitProofRequest { job_id, timeout_ms } = request.into_inner();
        check_job_id(&job_id)?;
        let wait = match timeout_ms {
            0 => self.config.max_wait,
            ms => Duration::from_millis(ms).min(self.config.max_wait),
        };
        Ok(Response::new(self.wait(&job_id, wait).await?))
    }

    async fn prove(
        &self,
        request: Request<ProveRequest>,
    ) -> Result<Response<ProveResponse>, Status> {
        let caller = self.access.caller(&request)?;
        let submit = request
            .into_inner()
            .submit
            .ok_or_else(|| Status::invalid_argument("ProveRequest.submit is required"))?;
        let job_id = self.submit(&caller, submit).await?;
        let result = self.wait(&job_id, self.config.max_wait).await?;
        Ok(Response::new(ProveResponse {
            result: Some(result),
        }))
    }

    async fn cancel_proof(
        &self,
        request: Request<CancelProofRequest>,
    ) -> Result<Response<CancelProofResponse>, Status> {
        let caller = self.access.caller(&request)?;
        let job_id = request.into_inner().job_id;
        check_job_id(&job_id)?;
        let own = caller.name().is_some_and(|name| owned_by(&job_id, name));
        if !own {
            caller.require(Power::CancelAny, "cancel jobs other clients submitted")?;
        }
        let reply = self.cluster.cancel(&job_id).await.map_err(cluster_status)?;
        reply::cancel_response(&reply)
    }

    async fn get_status(
        &self,
        request: Request<GetStatusRequest>,
    ) -> Result<Response<GetStatusResponse>, Status> {
        self.access.caller(&request)?;
        let view = self.view().await?;
        Ok(Response::new(reply::status_response(
            &view,
            reply::seconds_since(self.started_ms),
        )))
    }

    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        self.access.caller(&request)?;
        let view = self.view().await?;
        let mut prometheus_text = reply::cluster_metrics(&view)
            .map_err(|e| Status::internal(format!("encoding metrics: {e}")))?;
        if let Some(own) = self.cluster.process_metrics() {
            prometheus_text.push_str(&own);
        }
        Ok(Response::new(GetMetricsResponse { prometheus_text }))
    }

    async fn preload_srs(
        &self,
        request: Request<PreloadSrsRequest>,
    ) -> Result<Response<PreloadSrsResponse>, Status> {
        let caller = self.access.caller(&request)?;
        let replies = self
            .srs(&caller, SrsOp::Preload, &request.into_inner().circuit_id)
            .await?;
        srs::preload_response(&replies).map(Response::new)
    }

    async fn evict_srs(
        &self,
        request: Request<EvictSrsRequest>,
    ) -> Result<Response<EvictSrsResponse>, Status> {
        let caller = self.access.caller(&request)?;
        let replies = self
            .srs(&caller, SrsOp::Evict, &request.into_inner().circuit_id)
            .await?;
        srs::evict_response(&replies).map(Response::new)
    }
}
