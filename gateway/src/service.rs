//! `cuzk.v1.ProvingEngine` over a [`Cluster`]: each call is checked ([`crate::request`]),
//! passed to the cluster, and its answer shaped into Curio's reply ([`crate::reply`]).
//! Calls the cluster cannot back with real behaviour answer `UNIMPLEMENTED` saying what is
//! missing, never a made-up success. `PreloadSRS`/`EvictSRS` go to every GPU node (`srs`).

use std::sync::Arc;
use std::time::Duration;

use cuzk_common::config::GatewayConfig;
use cuzk_wire::job::{unix_ms, valid_job_id};
use tonic::{Request, Response, Status};

use crate::cluster::{Cluster, ClusterError};
use crate::proto::proving_engine_server::ProvingEngine;
use crate::proto::*;
use crate::{reply, request, srs};
use cuzk_wire::control::{SrsOp, SrsReply, SrsRequest};

pub struct Gateway {
    cluster: Arc<dyn Cluster>,
    /// How long the gateway waits for things on the caller's behalf, and its message limit
    /// (`[gateway]` in the config, common/src/config.rs).
    config: GatewayConfig,
    started_ms: u64,
}

impl Gateway {
    pub fn new(cluster: Arc<dyn Cluster>, config: GatewayConfig) -> Gateway {
        Gateway {
            cluster,
            config,
            started_ms: unix_ms(),
        }
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    async fn submit(&self, request: SubmitProofRequest) -> Result<String, Status> {
        let (spec, input) = request::job_for(request)?;
        let job_id = spec.job_id.clone();
        tracing::info!(%job_id, circuit = %spec.circuit, params = %spec.params, input_bytes = input.len(), "submitting");
        self.cluster
            .submit(spec, input)
            .await
            .map_err(cluster_status)?;
        Ok(job_id)
    }

    async fn wait(&self, job_id: &str, wait: Duration) -> Result<AwaitProofResponse, Status> {
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

    async fn srs(&self, op: SrsOp, circuit_id: &str) -> Result<Vec<SrsReply>, Status> {
        let (circuit, params) = srs::circuit_for(circuit_id)?;
        let request = SrsRequest {
            op,
            circuit,
            params,
        };
        tracing::info!(?op, circuit_id, "proving-key command");
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

#[tonic::async_trait]
impl ProvingEngine for Gateway {
    async fn submit_proof(
        &self,
        request: Request<SubmitProofRequest>,
    ) -> Result<Response<SubmitProofResponse>, Status> {
        let job_id = self.submit(request.into_inner()).await?;
        Ok(Response::new(SubmitProofResponse {
            job_id,
            ..Default::default()
        }))
    }

    async fn await_proof(
        &self,
        request: Request<AwaitProofRequest>,
    ) -> Result<Response<AwaitProofResponse>, Status> {
        let AwaitProofRequest { job_id, timeout_ms } = request.into_inner();
        if !valid_job_id(&job_id) {
            return Err(Status::invalid_argument(format!(
                "{job_id:?} is not a job id"
            )));
        }
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
        let submit = request
            .into_inner()
            .submit
            .ok_or_else(|| Status::invalid_argument("ProveRequest.submit is required"))?;
        let job_id = self.submit(submit).await?;
        let result = self.wait(&job_id, self.config.max_wait).await?;
        Ok(Response::new(ProveResponse {
            result: Some(result),
        }))
    }

    async fn cancel_proof(
        &self,
        request: Request<CancelProofRequest>,
    ) -> Result<Response<CancelProofResponse>, Status> {
        let job_id = request.into_inner().job_id;
        if !valid_job_id(&job_id) {
            return Err(Status::invalid_argument(format!(
                "{job_id:?} is not a job id"
            )));
        }
        let reply = self.cluster.cancel(&job_id).await.map_err(cluster_status)?;
        reply::cancel_response(&reply)
    }

    async fn get_status(
        &self,
        _: Request<GetStatusRequest>,
    ) -> Result<Response<GetStatusResponse>, Status> {
        let view = self.view().await?;
        Ok(Response::new(reply::status_response(
            &view,
            reply::seconds_since(self.started_ms),
        )))
    }

    async fn get_metrics(
        &self,
        _: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
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
        let replies = self
            .srs(SrsOp::Preload, &request.into_inner().circuit_id)
            .await?;
        srs::preload_response(&replies).map(Response::new)
    }

    async fn evict_srs(
        &self,
        request: Request<EvictSrsRequest>,
    ) -> Result<Response<EvictSrsResponse>, Status> {
        let replies = self
            .srs(SrsOp::Evict, &request.into_inner().circuit_id)
            .await?;
        srs::evict_response(&replies).map(Response::new)
    }
}
