//! `cuzk`: run cluster nodes, submit jobs, inspect them, or run everything locally.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use cuzk_cli::{submit, submit_and_wait, timings_table, verify_job_proof, LocalCluster};
use cuzk_common::config::{ConfigFile, GpuArgs, NatsArgs, ParamArgs, SynthArgs};
use cuzk_common::lifecycle::Ledger;
use cuzk_common::telemetry::{self, TelemetryArgs, TelemetryOptions};
use cuzk_common::topology::{jetstream_context, JOBS_BUCKET};
use cuzk_wire::job::{JobInput, JobSpec, JobStatus, Priority, JOB_SPEC_VERSION};
use tokio_util::sync::CancellationToken;
use tracing::{info, info_span, Instrument};

mod bench;

#[derive(Parser)]
#[command(
    name = "cuzk",
    version,
    about = "Distributed Groth16 proving cluster on NATS JetStream"
)]
struct Cli {
    /// TOML config file with [nats], [synth] and [gpu] tables (flags and env override it).
    #[arg(long, env = "CUZK_CONFIG", global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a private nats-server, a synth node and a GPU node, prove one job, print the
    /// verified proof and its stage timings, and stop.
    Local(LocalArgs),
    /// Submit a job to a running cluster (what `nats pub cuzk.jobs.submit '<json>'` does).
    Submit(SubmitArgs),
    /// Show a job's state, or the cluster: nodes, queues, jobs in flight, recent failures.
    Status(StatusArgs),
    /// Follow a job's progress until it ends.
    Watch(WatchArgs),
    /// Run a synth node.
    SynthNode(SynthNodeArgs),
    /// Run a GPU node (CUDA where available, else the CPU backend).
    GpuNode(GpuNodeArgs),
    /// The same jobs through a local cluster and through bellperson in this process, side by side.
    Bench(bench::BenchArgs),
    /// Create every stream, bucket and consumer (as a user allowed to; worker roles only find
    /// them) and exit.
    Provision(ProvisionArgs),
    /// Start a whole cluster as separate processes on loopback (1 or 3 nats-servers, synth and
    /// GPU nodes) and keep it up until Ctrl-C.
    Launch(LaunchArgs),
}

#[derive(Args)]
struct ProvisionArgs {
    #[command(flatten)]
    nats: NatsArgs,
}

#[derive(Args)]
struct LaunchArgs {
    /// nats-servers: 1, or 3 for a JetStream cluster with R3 streams.
    #[arg(long, default_value_t = 1)]
    servers: usize,
    #[arg(long, default_value_t = 1)]
    synth: usize,
    #[arg(long, default_value_t = 1)]
    gpu: usize,
    /// Threads per node.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[arg(long, default_value_t = 30)]
    ack_wait_secs: u64,
}

#[derive(Args, Clone)]
pub struct JobArgs {
    /// Circuit name (sha256, mimc).
    #[arg(long, default_value = "sha256")]
    circuit: String,
    /// Circuit parameters as JSON.
    #[arg(long, default_value = r#"{"blocks":2,"partitions":2}"#)]
    params: String,
    /// Job input as text.
    #[arg(long, default_value = "cuzk demo input")]
    input: String,
    /// Job id (default: a fresh one).
    #[arg(long)]
    job_id: Option<String>,
    #[arg(long, value_enum, default_value = "normal")]
    priority: PriorityArg,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PriorityArg {
    High,
    Normal,
}

impl JobArgs {
    pub fn spec(&self) -> anyhow::Result<JobSpec> {
        let params = serde_json::from_str(&self.params).context("--params is not valid JSON")?;
        let job_id = self.job_id.clone().unwrap_or_else(fresh_job_id);
        Ok(JobSpec {
            version: JOB_SPEC_VERSION,
            job_id,
            circuit: self.circuit.clone(),
            params,
            input: JobInput::Utf8(self.input.clone()),
            priority: match self.priority {
                PriorityArg::High => Priority::High,
                PriorityArg::Normal => Priority::Normal,
            },
        })
    }
}

pub fn fresh_job_id() -> String {
    format!("job-{:016x}", rand::random::<u64>())
}

#[derive(Args)]
struct LocalArgs {
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    synth: SynthArgs,
    #[command(flatten)]
    gpu: GpuArgs,
    #[command(flatten)]
    params: ParamArgs,
    #[command(flatten)]
    telemetry: TelemetryArgs,
    /// Give up on the job after this long.
    #[arg(long, default_value_t = 1800)]
    timeout_secs: u64,
}

#[derive(Args)]
struct SubmitArgs {
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    job: JobArgs,
    /// Wait for the result and print it.
    #[arg(long)]
    wait: bool,
    /// With --wait: give up after this long. (Not `timeout_secs`: that id is --nats-timeout-secs.)
    #[arg(long = "timeout-secs", default_value_t = 1800)]
    wait_secs: u64,
}

#[derive(Args)]
struct StatusArgs {
    #[command(flatten)]
    nats: NatsArgs,
    /// A job id; without one, the cluster.
    job_id: Option<String>,
}

#[derive(Args)]
struct WatchArgs {
    #[command(flatten)]
    nats: NatsArgs,
    job_id: String,
    /// Give up after this long.
    #[arg(long = "timeout-secs", default_value_t = 1800)]
    wait_secs: u64,
}

#[derive(Args)]
struct SynthNodeArgs {
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    synth: SynthArgs,
    #[command(flatten)]
    params: ParamArgs,
    #[command(flatten)]
    telemetry: TelemetryArgs,
    /// Validate the configuration, print it and exit.
    #[arg(long)]
    check_config: bool,
}

#[derive(Args)]
struct GpuNodeArgs {
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    gpu: GpuArgs,
    #[command(flatten)]
    params: ParamArgs,
    #[command(flatten)]
    telemetry: TelemetryArgs,
    /// Validate the configuration, print it and exit.
    #[arg(long)]
    check_config: bool,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let outcome = runtime.block_on(run(cli));
    // Export the spans and metrics still buffered.
    telemetry::shutdown();
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The reason must reach stderr whatever the log configuration.
            eprintln!("cuzk: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let file = ConfigFile::load_optional(cli.config.as_deref())?;
    match cli.command {
        Command::Local(args) => local(args, file).await,
        Command::Submit(args) => submit(args, file).await,
        Command::Status(args) => status(args, file).await,
        Command::Provision(args) => {
            let nats = args.nats.merge(file.nats).resolve("cuzk-admin")?;
            cuzk_cli::provision_all(&nats).await?;
            println!("streams, buckets and consumers are in place");
            Ok(())
        }
        Command::Watch(args) => watch(args, file).await,
        Command::SynthNode(args) => {
            let nats = args.nats.merge(file.nats).resolve("cuzk-synth")?;
            let synth = args.synth.merge(file.synth).resolve()?;
            let params = args.params.merge(file.params).resolve(false);
            if args.check_config {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &serde_json::json!({ "nats": nats, "synth": synth, "params": params })
                    )?
                );
                return Ok(());
            }
            init_telemetry("cuzk-synth", &args.telemetry).await?;
            let (_client, topology) = cuzk_cli::connect(&nats).await?;
            let drain = synth.drain_timeout;
            let node = Arc::new(cuzk_synth_node::SynthNode::new(
                topology,
                synth,
                &params,
                nats.name.clone(),
            )?);
            run_until_drained(|token| node.run(token), drain).await
        }
        Command::GpuNode(args) => {
            let nats = args.nats.merge(file.nats).resolve("cuzk-gpu")?;
            let gpu = args.gpu.merge(file.gpu).resolve()?;
            let params = args.params.merge(file.params).resolve(false);
            if args.check_config {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &serde_json::json!({ "nats": nats, "gpu": gpu, "params": params })
                    )?
                );
                return Ok(());
            }
            init_telemetry("cuzk-gpu", &args.telemetry).await?;
            let (_client, topology) = cuzk_cli::connect(&nats).await?;
            let drain = gpu.drain_timeout;
            let node = Arc::new(cuzk_gpu_node::GpuNode::new(
                topology,
                gpu,
                &params,
                nats.name.clone(),
            )?);
            run_until_drained(|token| node.run(token), drain).await
        }
        Command::Bench(args) => bench::run(args, file).await,
        Command::Launch(args) => {
            let spec = cuzk_cli::launcher::LaunchSpec {
                servers: args.servers,
                synth_nodes: args.synth,
                gpu_nodes: args.gpu,
                threads: args.threads,
                ack_wait_secs: args.ack_wait_secs,
                ..Default::default()
            };
            let cluster =
                cuzk_cli::launcher::ProcessCluster::start(spec, &std::env::current_exe()?)?;
            println!("NATS: {}", cluster.urls());
            println!("logs: {}", cluster.dir.path().display());
            println!(
                "submit with: cuzk submit --nats-url {} --wait",
                cluster.urls()
            );
            tokio::signal::ctrl_c().await?;
            drop(cluster);
            Ok(())
        }
    }
}

/// Runs a node until SIGINT/SIGTERM, then gives it `drain` to finish in-flight work; what is
/// still unfinished after that is redelivered to another node once its ack wait passes.
async fn run_until_drained<F, Fut>(node: F, drain: Duration) -> anyhow::Result<()>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let token = shutdown_on_signal();
    let deadline = async {
        token.cancelled().await;
        tokio::time::sleep(drain).await;
    };
    tokio::select! {
        result = node(token.clone()) => result,
        _ = deadline => {
            tracing::warn!(?drain, "drain timeout passed; exiting with work in flight");
            Ok(())
        }
    }
}

/// Cancelled on SIGINT or SIGTERM: nodes stop pulling and hand back in-flight work.
fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        info!("shutdown requested");
        trigger.cancel();
    });
    token
}

/// Logging, tracing and metrics for a command (flushed by `main` on exit), and the metrics and
/// health endpoints if asked for.
async fn init_telemetry(service: &str, args: &TelemetryArgs) -> anyhow::Result<()> {
    telemetry::init(TelemetryOptions::new(service, args));
    if let Some(addr) = args.metrics_addr {
        cuzk_common::metrics::serve(addr)
            .await
            .with_context(|| format!("--metrics-addr {addr}"))?;
    }
    Ok(())
}

async fn local(args: LocalArgs, file: ConfigFile) -> anyhow::Result<()> {
    init_telemetry("cuzk-local", &args.telemetry).await?;
    let synth = args.synth.merge(file.synth).resolve()?;
    let gpu = args.gpu.merge(file.gpu).resolve()?;
    let params = args.params.merge(file.params).resolve(true);
    let spec = args.job.spec()?;
    let cache = cuzk_cli::shape_cache(&params)?;
    let cluster = LocalCluster::start(synth, gpu, params).await?;
    info!(url = %cluster.url(), job_id = %spec.job_id, circuit = %spec.circuit, params = %spec.params, "local cluster up; submitting");
    let outcome = submit_and_wait(
        &cluster.client,
        &spec,
        Duration::from_secs(args.timeout_secs),
    )
    .instrument(info_span!("submit", job_id = %spec.job_id, otel.kind = "producer"))
    .await;
    cluster.stop().await?;
    let result = outcome?;
    println!("job {}: {:?}", result.job_id, result.status);
    if result.status != JobStatus::Done {
        anyhow::bail!("job failed: {}", result.error.unwrap_or_default());
    }
    verify_job_proof(&spec, &result, &cache)?;
    println!("proof ({} partitions × 192 bytes, verified by the GPU node: {}, re-verified here with bellperson::verify_proof: true):",
        result.partitions, result.verified);
    println!("{}", result.proof.as_deref().unwrap_or_default());
    println!("\nstage timings (ms):\n{}", timings_table(&result));
    Ok(())
}

async fn submit(args: SubmitArgs, file: ConfigFile) -> anyhow::Result<()> {
    let nats = args.nats.merge(file.nats).resolve("cuzk-submit")?;
    let spec = args.job.spec()?;
    // Only what OTEL_* asks for: with an endpoint the job's trace starts here.
    telemetry::init(TelemetryOptions {
        service_name: "cuzk-submit".into(),
        ..Default::default()
    });
    let client = cuzk_common::nats::connect(&nats).await?;
    let js = jetstream_context(client.clone(), nats.timeout);
    if !args.wait {
        match submit::publish_job(&js, &spec).await? {
            submit::Accepted::Stored(_) => println!("{}", spec.job_id),
            submit::Accepted::Duplicate => println!(
                "{} (a duplicate of a submission from the last minutes; the original stands)",
                spec.job_id
            ),
        }
        return Ok(());
    }
    // Progress from the job's record, where this user may read the jobs bucket.
    let progress = match js.get_key_value(JOBS_BUCKET).await {
        Ok(kv) => {
            let (ledger, job_id) = (Ledger::open(js.clone(), kv), spec.job_id.clone());
            Some(tokio::spawn(async move {
                cuzk_cli::status::follow(&ledger, &job_id).await
            }))
        }
        Err(e) => {
            eprintln!("(no progress: cannot read the jobs bucket: {e})");
            None
        }
    };
    let timeout = Duration::from_secs(args.wait_secs);
    let result = submit::submit_and_wait(&client, &spec, submit::Via::JetStream, timeout)
        .instrument(info_span!("submit", job_id = %spec.job_id, otel.kind = "producer"))
        .await;
    if let Some(progress) = progress {
        // The record is final before the result is published: this ends at once.
        let _ = tokio::time::timeout(Duration::from_secs(2), progress).await;
    }
    let result = result?;
    println!("{}", serde_json::to_string_pretty(&result)?);
    if result.status == JobStatus::Done {
        eprintln!("{}", timings_table(&result));
        Ok(())
    } else {
        anyhow::bail!("job failed: {}", result.error.unwrap_or_default())
    }
}

async fn status(args: StatusArgs, file: ConfigFile) -> anyhow::Result<()> {
    let nats = args.nats.merge(file.nats).resolve("cuzk-status")?;
    let (_client, topology) = cuzk_cli::connect(&nats).await?;
    match args.job_id {
        Some(job_id) => {
            let record = Ledger::new(&topology)
                .get(&job_id)
                .await?
                .with_context(|| format!("no job {job_id}"))?;
            println!(
                "job {} ({}): {:?}",
                record.job_id, record.circuit, record.status
            );
            if let Some(error) = &record.error {
                println!("error: {error}");
            }
            for (index, partition) in record.partitions.iter().enumerate() {
                println!(
                    "  partition {index}: {:?} attempts={} prover={}",
                    partition.status,
                    partition.attempts,
                    partition.prover.as_deref().unwrap_or("-")
                );
            }
        }
        None => println!("{}", cuzk_cli::status::cluster_status(&topology).await?),
    }
    Ok(())
}

async fn watch(args: WatchArgs, file: ConfigFile) -> anyhow::Result<()> {
    let nats = args.nats.merge(file.nats).resolve("cuzk-watch")?;
    let client = cuzk_common::nats::connect(&nats).await?;
    let js = jetstream_context(client, nats.timeout);
    let ledger = Ledger::open(js.clone(), js.get_key_value(JOBS_BUCKET).await?);
    let timeout = Duration::from_secs(args.wait_secs);
    let record = tokio::time::timeout(timeout, cuzk_cli::status::follow(&ledger, &args.job_id))
        .await
        .with_context(|| format!("job {} did not end within {timeout:?}", args.job_id))??;
    match record.result {
        Some(result) if result.status == JobStatus::Done => {
            println!(
                "job {}: done, {} partitions, verified: {}",
                result.job_id, result.partitions, result.verified
            );
            println!("{}", timings_table(&result));
            Ok(())
        }
        _ => anyhow::bail!(
            "job {} failed: {}",
            record.job_id,
            record.error.unwrap_or_default()
        ),
    }
}
