//! The soak's gateway clients. One job in `--gateway-every` goes through a `cuzk gateway` over
//! gRPC, as Curio submits, instead of straight onto NATS: a 2 KiB PoRep request that the synth
//! nodes must turn down at its vanilla-proof check. Each request is sent twice under one request
//! id, as a client retries a call whose answer it lost, and the retry must name the first
//! call's job. Each job is then awaited with `AwaitProof` on a connection of its own (a client
//! of its own), which must answer FAILED. The answers on `cuzk.results.>` are counted with the
//! soak's other jobs.

use std::collections::HashSet;
use std::time::Duration;

use cuzk_common::topology::Topology;
use cuzk_gateway::proto::await_proof_response::Status as AwaitStatus;
use cuzk_gateway::proto::proving_engine_client::ProvingEngineClient;
use cuzk_gateway::proto::{AwaitProofRequest, SubmitProofRequest};
use cuzk_wire::job::JobSpec;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Longest a submission may take (the gateway retries NATS within it).
const SUBMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of a reason a soak report quotes.
const QUOTE: usize = 200;

/// What the gateway's clients saw.
#[derive(Default)]
pub struct GatewayTally {
    /// Requests the gateway accepted (the first call of each).
    pub submitted: usize,
    /// First calls refused or not answered in time (not counted as jobs).
    pub submit_errors: usize,
    /// Retries answered with the first call's job.
    pub retry_same_job: usize,
    /// Retries answered with the request's next attempt (the first had failed).
    pub retry_next_attempt: usize,
    /// Jobs `AwaitProof` answered FAILED.
    pub awaited_failed: usize,
    /// Jobs `AwaitProof` answered otherwise, or not at all.
    pub await_problems: Vec<String>,
    /// The jobs the gateway made: each must be answered failed.
    pub jobs: HashSet<String>,
}

enum Awaited {
    Failed,
    Problem(String),
}

pub struct GatewayClients {
    addr: String,
    template: SubmitProofRequest,
    awaiting: JoinSet<Awaited>,
    tally: GatewayTally,
    stop: CancellationToken,
}

impl GatewayClients {
    /// An open gateway in this process over `client`, and the request its clients send.
    pub async fn start(client: &async_nats::Client, topology: &Topology) -> anyhow::Result<Self> {
        let template = crate::gateway::refused_porep_request()?;
        let stop = CancellationToken::new();
        let addr = crate::gateway::start_gateway(client, topology, stop.clone()).await?;
        Ok(GatewayClients {
            addr: format!("http://{addr}"),
            template,
            awaiting: JoinSet::new(),
            tally: GatewayTally::default(),
            stop,
        })
    }

    /// Sends request `id` twice, then awaits each job it made in the background for up to
    /// `wait`. Returns the jobs the gateway made: none when it refused the first call.
    pub async fn submit(&mut self, id: String, wait: Duration) -> Vec<JobSpec> {
        let request = SubmitProofRequest {
            request_id: id,
            ..self.template.clone()
        };
        let send = |request: SubmitProofRequest| {
            let addr = self.addr.clone();
            async move {
                let call = async {
                    let mut grpc = ProvingEngineClient::connect(addr).await.ok()?;
                    let reply = grpc.submit_proof(request).await.ok()?;
                    Some(reply.into_inner().job_id)
                };
                tokio::time::timeout(SUBMIT_TIMEOUT, call).await.ok()?
            }
        };
        let Some(first) = send(request.clone()).await else {
            self.tally.submit_errors += 1;
            return Vec::new();
        };
        self.tally.submitted += 1;
        let mut made = vec![first.clone()];
        // A retry that is refused (a server restarting) says nothing of the request id. One
        // that names another job is the request's next attempt, which the gateway starts only
        // when it finds the first failed (these fail quickly): a job to answer like any other.
        match send(request.clone()).await {
            Some(again) if again == first => self.tally.retry_same_job += 1,
            Some(again) => {
                self.tally.retry_next_attempt += 1;
                made.push(again);
            }
            None => {}
        }
        let spec = cuzk_gateway::job_for(request, None)
            .ok()
            .map(|(spec, _)| spec);
        let mut specs = Vec::new();
        for job_id in made {
            self.tally.jobs.insert(job_id.clone());
            self.awaiting
                .spawn(await_failed(self.addr.clone(), job_id.clone(), wait));
            if let Some(spec) = &spec {
                specs.push(JobSpec {
                    job_id,
                    ..spec.clone()
                });
            }
        }
        specs
    }

    /// Waits for every `AwaitProof` (each bounded by its wait) and stops the gateway.
    pub async fn finish(mut self) -> GatewayTally {
        while let Some(done) = self.awaiting.join_next().await {
            match done {
                Ok(Awaited::Failed) => self.tally.awaited_failed += 1,
                Ok(Awaited::Problem(why)) => self.tally.await_problems.push(why),
                Err(e) => self
                    .tally
                    .await_problems
                    .push(format!("an AwaitProof task: {e}")),
            }
        }
        self.stop.cancel();
        self.tally
    }
}

/// `AwaitProof` of `job_id` on a connection of its own: FAILED is the answer expected.
async fn await_failed(addr: String, job_id: String, wait: Duration) -> Awaited {
    let ask = AwaitProofRequest {
        job_id: job_id.clone(),
        timeout_ms: wait.as_millis() as u64,
    };
    let call = async {
        let mut grpc = ProvingEngineClient::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        grpc.await_proof(ask)
            .await
            .map(|r| r.into_inner())
            .map_err(|s| s.message().chars().take(QUOTE).collect::<String>())
    };
    match tokio::time::timeout(wait + SUBMIT_TIMEOUT, call).await {
        Ok(Ok(reply)) if reply.status() == AwaitStatus::Failed => Awaited::Failed,
        Ok(Ok(reply)) => Awaited::Problem(format!(
            "{job_id}: AwaitProof answered {:?} ({} proof bytes)",
            reply.status(),
            reply.proof.len()
        )),
        Ok(Err(why)) => Awaited::Problem(format!("{job_id}: AwaitProof: {why}")),
        Err(_) => Awaited::Problem(format!("{job_id}: AwaitProof did not return")),
    }
}
