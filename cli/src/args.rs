//! The `cuzk` command line: its subcommands and their arguments (flags with env twins; the
//! shared settings flattened in from `cuzk_common::config`).

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use cuzk_common::config::{GpuArgs, NatsArgs, ParamArgs, SynthArgs};
use cuzk_common::telemetry::TelemetryArgs;
use cuzk_wire::job::{JobInput, JobSpec, Priority, JOB_SPEC_VERSION};

use crate::bench;

#[derive(Parser)]
#[command(
    name = "cuzk",
    version,
    about = "Distributed Groth16 proving cluster on NATS JetStream"
)]
pub(crate) struct Cli {
    /// TOML config file with [nats], [synth], [gpu], [params] and [gateway] tables (flags and
    /// env override it).
    #[arg(long, env = "CUZK_CONFIG", global = true)]
    pub(crate) config: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Start a private nats-server, a synth node and a GPU node, prove one job, print the
    /// verified proof and its stage timings, and stop.
    Local(LocalArgs),
    /// Submit a job to a running cluster (what `nats pub cuzk.jobs.submit '<json>'` does).
    Submit(SubmitArgs),
    /// Show a job's state, or the cluster: nodes, queues, jobs in flight, recent failures.
    Status(StatusArgs),
    /// Follow a job's progress until it ends.
    Watch(WatchArgs),
    /// Cancel a job: partitions not yet proved are dropped, its blobs deleted, and its one
    /// result says `cancelled`. A job that has ended stays as it ended.
    Cancel(CancelArgs),
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
    /// Serve Curio's proving API (gRPC `cuzk.v1.ProvingEngine`) in front of the cluster: point
    /// Curio's `[Cuzk] Address` here (docs/gateway.md).
    Gateway(GatewayCommandArgs),
    /// Run the ledger service: the one writer of job records, publisher of results and deleter
    /// of objects for workers started with `--nats-ledger-service`, whose users may do none of
    /// it (deploy/nats/accounts.conf).
    Ledger(LedgerCommandArgs),
}

#[derive(Args)]
pub(crate) struct LedgerCommandArgs {
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
    #[command(flatten)]
    pub(crate) telemetry: TelemetryArgs,
    /// Validate the configuration, print it and exit.
    #[arg(long, env = "CUZK_CHECK_CONFIG")]
    pub(crate) check_config: bool,
}

#[derive(Args)]
pub(crate) struct GatewayCommandArgs {
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
    #[command(flatten)]
    pub(crate) telemetry: TelemetryArgs,
    #[command(flatten)]
    pub(crate) gateway: cuzk_common::config::GatewayArgs,
    /// Print the served services, their methods and messages with field numbers, and exit.
    #[arg(long, env = "CUZK_GATEWAY_DESCRIBE")]
    pub(crate) describe: bool,
    /// Validate the configuration, print it and exit.
    #[arg(long, env = "CUZK_CHECK_CONFIG")]
    pub(crate) check_config: bool,
}

#[derive(Args)]
pub(crate) struct ProvisionArgs {
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
}

#[derive(Args)]
pub(crate) struct LaunchArgs {
    /// nats-servers: 1, or 3 for a JetStream cluster with R3 streams.
    #[arg(long, env = "CUZK_LAUNCH_SERVERS", default_value_t = 1)]
    pub(crate) servers: usize,
    /// Synth node processes.
    #[arg(long, env = "CUZK_LAUNCH_SYNTH", default_value_t = 1)]
    pub(crate) synth: usize,
    /// GPU node processes.
    #[arg(long, env = "CUZK_LAUNCH_GPU", default_value_t = 1)]
    pub(crate) gpu: usize,
    /// Ledger service processes; with any, the nodes go through them (`--nats-ledger-service`).
    #[arg(long, env = "CUZK_LAUNCH_LEDGER", default_value_t = 0)]
    pub(crate) ledger: usize,
    /// Threads per node.
    #[arg(long, env = "CUZK_LAUNCH_THREADS", default_value_t = 1)]
    pub(crate) threads: usize,
    /// The consumers' ack wait, seconds.
    #[arg(long, env = "CUZK_LAUNCH_ACK_WAIT_SECS", default_value_t = 30)]
    pub(crate) ack_wait_secs: u64,
}

#[derive(Args, Clone)]
pub(crate) struct JobArgs {
    /// Circuit name (sha256, mimc, porep-c2).
    #[arg(long, env = "CUZK_JOB_CIRCUIT", default_value = "sha256")]
    pub(crate) circuit: String,
    /// Circuit parameters as JSON.
    #[arg(
        long,
        env = "CUZK_JOB_PARAMS",
        default_value = r#"{"blocks":2,"partitions":2}"#
    )]
    pub(crate) params: String,
    /// Job input as text.
    #[arg(long, env = "CUZK_JOB_INPUT", default_value = "cuzk demo input")]
    pub(crate) input: String,
    /// Job id (default: a fresh one).
    #[arg(long, env = "CUZK_JOB_ID")]
    pub(crate) job_id: Option<String>,
    /// GPU workers take high-priority partitions first.
    #[arg(long, env = "CUZK_JOB_PRIORITY", value_enum, default_value = "normal")]
    pub(crate) priority: PriorityArg,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum PriorityArg {
    High,
    Normal,
}

impl JobArgs {
    pub(crate) fn priority(&self) -> Priority {
        match self.priority {
            PriorityArg::High => Priority::High,
            PriorityArg::Normal => Priority::Normal,
        }
    }

    pub(crate) fn spec(&self) -> anyhow::Result<JobSpec> {
        let params = serde_json::from_str(&self.params).context("--params is not valid JSON")?;
        let job_id = self.job_id.clone().unwrap_or_else(fresh_job_id);
        Ok(JobSpec {
            version: JOB_SPEC_VERSION,
            job_id,
            circuit: self.circuit.clone(),
            params,
            input: JobInput::Utf8(self.input.clone()),
            priority: self.priority(),
        })
    }
}

pub(crate) fn fresh_job_id() -> String {
    format!("job-{:016x}", rand::random::<u64>())
}

#[derive(Args)]
pub(crate) struct LocalArgs {
    #[command(flatten)]
    pub(crate) job: JobArgs,
    #[command(flatten)]
    pub(crate) synth: SynthArgs,
    #[command(flatten)]
    pub(crate) gpu: GpuArgs,
    #[command(flatten)]
    pub(crate) params: ParamArgs,
    #[command(flatten)]
    pub(crate) telemetry: TelemetryArgs,
    /// Give up on the job after this long.
    #[arg(long, env = "CUZK_LOCAL_TIMEOUT_SECS", default_value_t = 1800)]
    pub(crate) timeout_secs: u64,
}

#[derive(Args)]
pub(crate) struct SubmitArgs {
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
    #[command(flatten)]
    pub(crate) job: JobArgs,
    /// Prove this PoRep C1 output (a lotus/Curio C1 file, filecoin-proofs-api or
    /// filecoin-proofs JSON, detected): a `porep-c2` job that replaces --circuit, --params and
    /// --input, and waits for its result.
    #[arg(
        long,
        env = "CUZK_SUBMIT_C1",
        requires = "miner",
        conflicts_with_all = ["circuit", "params", "input"]
    )]
    pub(crate) c1: Option<PathBuf>,
    /// With --c1: the sector number (default: the lotus file's SectorNum).
    #[arg(long, env = "CUZK_SUBMIT_SECTOR", requires = "c1")]
    pub(crate) sector: Option<u64>,
    /// With --c1: the miner, as f0…/t0… or its actor id (the prover id is derived from it).
    #[arg(long, env = "CUZK_SUBMIT_MINER", requires = "c1")]
    pub(crate) miner: Option<String>,
    /// With --c1 in filecoin-proofs' own form (the other forms name it): the sector size.
    #[arg(long, env = "CUZK_SUBMIT_SECTOR_SIZE", requires = "c1")]
    pub(crate) sector_size: Option<String>,
    /// With --c1 in filecoin-proofs' own form (the other forms name it): filecoin-proofs-api's
    /// proof name, e.g. StackedDrg32GiBV1_1_Feat_SyntheticPoRep [default: StackedDrg<size>V1_1].
    #[arg(long, env = "CUZK_SUBMIT_SEAL_PROOF", requires = "c1")]
    pub(crate) seal_proof: Option<String>,
    /// Write the proof bytes (the partition proofs concatenated; for PoRep exactly what
    /// `seal_commit_phase2` returns) to this file. Implies --wait.
    #[arg(long, env = "CUZK_SUBMIT_OUT")]
    pub(crate) out: Option<PathBuf>,
    /// Wait for the result and print it.
    #[arg(long, env = "CUZK_SUBMIT_WAIT")]
    pub(crate) wait: bool,
    /// With --wait: give up after this long. (Not `timeout`: that id is --nats-timeout.)
    #[arg(
        long = "timeout-secs",
        env = "CUZK_SUBMIT_TIMEOUT_SECS",
        default_value_t = 1800
    )]
    pub(crate) wait_secs: u64,
}

#[derive(Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
    /// A job id (one of `--nats-tenant`'s; without a tenant, `<tenant>.<job_id>` names a
    /// tenant's job); without one, the cluster.
    pub(crate) job_id: Option<String>,
}

#[derive(Args)]
pub(crate) struct WatchArgs {
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
    /// A job id (one of `--nats-tenant`'s; without a tenant, `<tenant>.<job_id>` names a
    /// tenant's job).
    pub(crate) job_id: String,
    /// Give up after this long.
    #[arg(
        long = "timeout-secs",
        env = "CUZK_WATCH_TIMEOUT_SECS",
        default_value_t = 1800
    )]
    pub(crate) wait_secs: u64,
}

#[derive(Args)]
pub(crate) struct CancelArgs {
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
    /// A job id (one of `--nats-tenant`'s; without a tenant, `<tenant>.<job_id>` names a
    /// tenant's job).
    pub(crate) job_id: String,
}

/// What every node takes besides its role's settings.
#[derive(Args)]
pub(crate) struct NodeArgs {
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
    #[command(flatten)]
    pub(crate) params: ParamArgs,
    #[command(flatten)]
    pub(crate) telemetry: TelemetryArgs,
    /// Validate the configuration, print it and exit.
    #[arg(long, env = "CUZK_CHECK_CONFIG")]
    pub(crate) check_config: bool,
}

#[derive(Args)]
pub(crate) struct SynthNodeArgs {
    #[command(flatten)]
    pub(crate) node: NodeArgs,
    #[command(flatten)]
    pub(crate) synth: SynthArgs,
}

#[derive(Args)]
pub(crate) struct GpuNodeArgs {
    #[command(flatten)]
    pub(crate) node: NodeArgs,
    #[command(flatten)]
    pub(crate) gpu: GpuArgs,
    /// Print the device memory plan of each --gpu-preload shape within --gpu-memory-budget
    /// (what stays on the device, what streams from host memory) and exit; exits 1 when the
    /// budget cannot hold a shape. Needs no GPU when the budget is given.
    #[arg(long, env = "CUZK_EXPLAIN_PLAN")]
    pub(crate) explain_plan: bool,
}
