//! `cuzk-load gateway`: what `cuzk gateway` adds to a proof's latency. The same jobs, one at a
//! time and alternating, go to one local cluster either directly through NATS (as `cuzk submit
//! --wait` sends them: input staged, job published through JetStream, result awaited on a core
//! subscription) or through the gateway over gRPC (`SubmitProof`, then `AwaitProof`, a tonic
//! client on loopback TCP). It prints submit-acknowledgement and end-to-end latency per path
//! and their difference.
//!
//! The gateway accepts Filecoin proof kinds only, so every job is a 2 KiB PoRep C2 request
//! whose C1 output has one byte of `comm_r` changed: the synth node turns it down at its
//! vanilla-proof check, so each job makes the whole trip (submission, intake, job record,
//! result) in milliseconds, without proving, and the gateway's share is not drowned in it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use cuzk_circuits::porep::{self, SectorSize};
use cuzk_circuits::porep_c1::{self, SealProof};
use cuzk_cli::LocalCluster;
use cuzk_common::config::{GpuArgs, ParamArgs, SynthArgs};
use cuzk_common::topology::{jetstream_context, results_subject};
use cuzk_gateway::proto::proving_engine_client::ProvingEngineClient;
use cuzk_gateway::proto::{AwaitProofRequest, ProofKind, SubmitProofRequest};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

#[derive(Args)]
pub struct GatewayArgs {
    /// Jobs per path.
    #[arg(long, env = "CUZK_LOAD_GATEWAY_JOBS", default_value_t = 50)]
    jobs: usize,
    /// Jobs per path run first and not counted (connections, caches).
    #[arg(long, env = "CUZK_LOAD_GATEWAY_WARMUP", default_value_t = 5)]
    warmup: usize,
}

/// Lotus' number for StackedDrg2KiBV1_1, the proof `SealProof::v1_1` seals with.
const STACKED_DRG_2KIB_V1_1: u64 = 5;
const MINER: u64 = 1000;
const SECTOR: u64 = 1;
const NATS_TIMEOUT: Duration = Duration::from_secs(10);
const JOB_TIMEOUT: Duration = Duration::from_secs(120);

/// One job's latencies: to the server's acknowledgement of the submission, and to its result.
struct Sample {
    ack: Duration,
    end_to_end: Duration,
}

/// A 2 KiB PoRep C2 request, freshly sealed, whose C1 output has one byte of `comm_r`
/// changed: the synth node turns it down at its vanilla-proof check, in milliseconds.
pub fn refused_porep_request() -> anyhow::Result<SubmitProofRequest> {
    let work = tempfile::tempdir()?;
    let sector = porep::seal_sector(
        SealProof::v1_1(SectorSize::S2KiB),
        work.path(),
        SECTOR,
        porep_c1::prover_id(MINER),
        &mut rand::rngs::OsRng,
    )?;
    let mut c1: serde_json::Value = serde_json::from_slice(&sector.c1_json)?;
    let byte = c1["comm_r"][0].as_u64().context("C1 without comm_r")?;
    c1["comm_r"][0] = (byte ^ 1).into();
    Ok(SubmitProofRequest {
        request_id: "bench".into(),
        proof_kind: ProofKind::PorepSealCommit.into(),
        sector_size: SectorSize::S2KiB.bytes(),
        registered_proof: STACKED_DRG_2KIB_V1_1,
        vanilla_proof: serde_json::to_vec(&c1)?.into(),
        sector_number: SECTOR,
        miner_id: MINER,
        ..Default::default()
    })
}

pub async fn run(args: GatewayArgs) -> anyhow::Result<()> {
    let request = refused_porep_request()?;

    cuzk_common::telemetry::init_logging();
    let synth = SynthArgs::default().resolve()?;
    let gpu = GpuArgs {
        backend: Some(cuzk_common::config::BackendKind::Cpu),
        ..Default::default()
    }
    .resolve()?;
    let cluster = LocalCluster::start(synth, gpu, ParamArgs::default().resolve(true)?).await?;
    let shutdown = CancellationToken::new();
    let addr = start_gateway(&cluster.client, &cluster.topology, shutdown.clone()).await?;
    let mut grpc = ProvingEngineClient::connect(format!("http://{addr}")).await?;

    let (mut direct, mut gateway) = (Vec::new(), Vec::new());
    for i in 0..args.warmup + args.jobs {
        // A request id names one job (docs/gateway.md): each job its own.
        let for_path = |path: &str| SubmitProofRequest {
            request_id: format!("bench-{path}-{i}"),
            ..request.clone()
        };
        let d = via_nats(&cluster, for_path("nats")).await?;
        let g = via_gateway(&mut grpc, for_path("gateway")).await?;
        if i >= args.warmup {
            direct.push(d);
            gateway.push(g);
        }
    }
    shutdown.cancel();
    cluster.stop().await?;
    println!("{}", table(&direct, &gateway, args.jobs));
    Ok(())
}

/// An open gateway in this process on a loopback port of its own, over `client`: its address.
pub async fn start_gateway(
    client: &async_nats::Client,
    topology: &cuzk_common::topology::Topology,
    stop: CancellationToken,
) -> anyhow::Result<String> {
    let nats = cuzk_cli::gateway::NatsCluster::new(
        client.clone(),
        topology.clone(),
        NATS_TIMEOUT,
        cuzk_common::topology::INPUTS_BUCKET.into(),
        None,
    );
    let config = cuzk_common::config::GatewayArgs {
        listen: Some(cuzk_gateway::ListenAddr::Tcp("127.0.0.1:0".into())),
        ..Default::default()
    }
    .resolve()?;
    let listen = config.listen.clone();
    let gateway = cuzk_gateway::Gateway::new(Arc::new(nats), config, cuzk_gateway::Access::open());
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let served = cuzk_gateway::serve(&listen, gateway, stop, |addr| {
            let _ = tx.send(addr);
        });
        if let Err(e) = served.await {
            tracing::error!(err = %e, "the gateway stopped");
        }
    });
    Ok(rx.await?)
}

/// As `cuzk submit --wait` does it, with the job the gateway would make of the request.
async fn via_nats(cluster: &LocalCluster, request: SubmitProofRequest) -> anyhow::Result<Sample> {
    let started = Instant::now();
    let (spec, input) = cuzk_gateway::job_for(request, None)?;
    let client = &cluster.client;
    let mut results = client.subscribe(results_subject(&spec.job_id)).await?;
    let bucket = cuzk_common::topology::INPUTS_BUCKET;
    let input =
        cuzk_cli::submit::stage_input(client, NATS_TIMEOUT, bucket, &spec.job_id, &input).await?;
    let spec = cuzk_wire::job::JobSpec { input, ..spec };
    let js = jetstream_context(client.clone(), NATS_TIMEOUT);
    cuzk_cli::submit::publish_job(&js, None, &spec).await?;
    let ack = started.elapsed();
    tokio::time::timeout(JOB_TIMEOUT, results.next())
        .await
        .context("no result in time")?
        .context("the subscription ended")?;
    Ok(Sample {
        ack,
        end_to_end: started.elapsed(),
    })
}

async fn via_gateway(
    grpc: &mut ProvingEngineClient<tonic::transport::Channel>,
    request: SubmitProofRequest,
) -> anyhow::Result<Sample> {
    let started = Instant::now();
    let job_id = grpc.submit_proof(request).await?.into_inner().job_id;
    let ack = started.elapsed();
    let wait = AwaitProofRequest {
        job_id,
        timeout_ms: JOB_TIMEOUT.as_millis() as u64,
    };
    let reply = grpc.await_proof(wait).await?.into_inner();
    anyhow::ensure!(
        !reply.error_message.is_empty(),
        "the job was expected to fail"
    );
    Ok(Sample {
        ack,
        end_to_end: started.elapsed(),
    })
}

/// The `q` quantile (nearest rank) in milliseconds.
fn quantile(samples: &[Sample], q: f64, pick: fn(&Sample) -> Duration) -> f64 {
    let mut ms: Vec<f64> = samples
        .iter()
        .map(|s| pick(s).as_secs_f64() * 1e3)
        .collect();
    ms.sort_by(f64::total_cmp);
    let rank = ((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len());
    ms[rank - 1]
}

fn table(direct: &[Sample], gateway: &[Sample], jobs: usize) -> String {
    let mut out = format!(
        "{jobs} jobs per path, one at a time, alternating (ms)\n\
         | latency | direct NATS median | p90 | gateway median | p90 | gateway − direct, median | p90 |\n\
         |---|---|---|---|---|---|---|\n"
    );
    type Pick = fn(&Sample) -> Duration;
    let rows: [(&str, Pick); 2] = [
        ("submit → acknowledged", |s| s.ack),
        ("submit → result", |s| s.end_to_end),
    ];
    for (name, pick) in rows {
        let (d50, d90) = (quantile(direct, 0.5, pick), quantile(direct, 0.9, pick));
        let (g50, g90) = (quantile(gateway, 0.5, pick), quantile(gateway, 0.9, pick));
        out.push_str(&format!(
            "| {name} | {d50:.2} | {d90:.2} | {g50:.2} | {g90:.2} | {:.2} | {:.2} |\n",
            g50 - d50,
            g90 - d90
        ));
    }
    out
}
