//! `cuzk-load`: drives a cuzk cluster with a bounded stream of proving jobs and reports what it
//! did — throughput, latency percentiles, per-stage timings from the results, bytes on the wire,
//! each GPU worker's prover busy fraction and the work queue's depth over time — as a table, CSV
//! files and an SVG plot.
//!
//! - `run`: one load run, against a cluster given by `--nats-url` or one this command starts
//!   (`ProcessCluster`: real `cuzk synth-node` / `cuzk gpu-node` processes on loopback).
//! - `herd`: the thundering-herd comparison — the same job stream through a single-box prover in
//!   this process and through a split cluster on the same cores, side by side.
//! - `scale`: the same job stream against 1, 2, 4… GPU nodes.
//! - `blobs`: witness-blob transfer MB/s, one object per blob beside striped objects in one
//!   bucket and spread over several.
//! - `gateway`: the latency `cuzk gateway` adds per proof over a direct NATS submission.
//! - `soak`: a mixed job stream for a set time while nodes of every role are killed and
//!   restarted; lost, twice-answered, wrong, failed and leaked counts, and nodes' memory.

mod blobs;
mod cluster;
mod gateway;
mod load;
mod report;
mod single_box;
mod soak;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use cuzk_circuits::ShapeCache;
use cuzk_common::config::NatsArgs;
use cuzk_wire::job::{JobInput, JobSpec, Priority, JOB_SPEC_VERSION};

use crate::cluster::{ClusterShape, Target};
use crate::load::{Mode, RunConfig};
use crate::report::Summary;

#[derive(Parser)]
#[command(
    name = "cuzk-load",
    version,
    about = "Load generator and benchmarks for a cuzk proving cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Drive one bounded job stream at a cluster and report throughput, latency, stages, wire
    /// bytes, prover busy fraction and queue depth.
    Run(RunArgs),
    /// The same job stream through a single-box prover (synthesize all partitions, then prove
    /// them one by one) and through a split cluster on the same machine, side by side.
    Herd(HerdArgs),
    /// The same job stream against clusters with different numbers of GPU nodes.
    Scale(ScaleArgs),
    /// A burst of small jobs within one second, then a flood of maximum-size mimc jobs (at the
    /// synth nodes' size cap) and a few over it: every job answered exactly once, over-cap jobs
    /// refused, every synth node under its memory budget, no node exited.
    Flood(FloodArgs),
    /// Witness-blob upload and fetch MB/s through the blob buckets: one object per blob beside
    /// striped objects in one bucket and spread over several.
    Blobs(blobs::BlobArgs),
    /// Submit-acknowledgement and end-to-end latency of the same jobs sent directly through
    /// NATS and through `cuzk gateway` (gRPC), side by side.
    Gateway(gateway::GatewayArgs),
    /// A mixed job stream for a set time while synth nodes, GPU nodes and nats-servers are
    /// killed (SIGKILL) and restarted at random; then lost, answered twice, wrong, failed and
    /// leaked counts, and each node's resident memory after the warm-up and at the end.
    Soak(SoakCommand),
}

// Named apart from `soak::SoakArgs`: clap names each flattened group after its struct, and two
// groups of one name panic at parse time in a debug build.
#[derive(Args)]
struct SoakCommand {
    #[command(flatten)]
    soak: soak::SoakArgs,
    #[command(flatten)]
    launch: LaunchArgs,
}

/// What to submit and how hard.
#[derive(Args, Clone)]
struct WorkloadArgs {
    /// Circuit of every job (sha256, mimc).
    #[arg(long, env = "CUZK_LOAD_CIRCUIT", default_value = "sha256")]
    circuit: String,
    /// Circuit parameters as JSON (partitions included).
    #[arg(
        long,
        env = "CUZK_LOAD_PARAMS",
        default_value = r#"{"blocks":1,"partitions":4}"#
    )]
    params: String,
    /// Job input as text.
    #[arg(long, env = "CUZK_LOAD_INPUT", default_value = "cuzk load test")]
    input: String,
    #[arg(long, env = "CUZK_LOAD_PRIORITY", value_parser = ["normal", "high"], default_value = "normal")]
    priority: String,
    /// Timed jobs to submit (the run ends when all have results, or at the time bounds).
    #[arg(long, env = "CUZK_LOAD_JOBS", default_value_t = 8)]
    jobs: usize,
    /// Open loop: submit at this many jobs per second whatever the cluster does.
    #[arg(long, env = "CUZK_LOAD_RATE", conflicts_with = "concurrency")]
    rate: Option<f64>,
    /// Closed loop: keep this many jobs in flight (the default, with 2).
    #[arg(long, env = "CUZK_LOAD_CONCURRENCY")]
    concurrency: Option<usize>,
    /// Stop submitting after this many seconds.
    #[arg(long, env = "CUZK_LOAD_DURATION_SECS", default_value_t = 120)]
    duration_secs: u64,
    /// Hard bound on a run: results still missing after this many seconds count as lost.
    #[arg(
        long = "timeout-secs",
        env = "CUZK_LOAD_TIMEOUT_SECS",
        default_value_t = 170
    )]
    run_timeout_secs: u64,
    /// Untimed jobs run one at a time first (parameter loading, connection set-up).
    #[arg(long, env = "CUZK_LOAD_WARMUP", default_value_t = 1)]
    warmup: usize,
    /// Sampling period of queue depth and prover busy counters, milliseconds.
    #[arg(long, env = "CUZK_LOAD_SAMPLE_MS", default_value_t = 500)]
    sample_ms: u64,
    /// Trailing window over which the plot's rates are computed, seconds.
    #[arg(long, env = "CUZK_LOAD_WINDOW_SECS", default_value_t = 5.0)]
    window_secs: f64,
    /// Also check every proof against the verifying key here (the cluster already verifies).
    #[arg(long, env = "CUZK_LOAD_VERIFY")]
    verify: bool,
    /// Where tables, CSV files and plots go.
    #[arg(long, env = "CUZK_LOAD_OUT", default_value = "cuzk-load-out")]
    out: PathBuf,
}

impl WorkloadArgs {
    fn template(&self) -> anyhow::Result<JobSpec> {
        Ok(JobSpec {
            version: JOB_SPEC_VERSION,
            job_id: String::new(),
            circuit: self.circuit.clone(),
            params: serde_json::from_str(&self.params).context("--params is not valid JSON")?,
            input: JobInput::Utf8(self.input.clone()),
            priority: if self.priority == "high" {
                Priority::High
            } else {
                Priority::Normal
            },
        })
    }

    fn mode(&self) -> Mode {
        match (self.rate, self.concurrency) {
            (Some(rate), _) => Mode::Open { rate },
            (None, concurrency) => Mode::Closed {
                concurrency: concurrency.unwrap_or(2),
            },
        }
    }

    fn config(&self, mode: Mode) -> anyhow::Result<RunConfig> {
        anyhow::ensure!(self.jobs > 0, "--jobs must be positive");
        if let Mode::Open { rate } = mode {
            anyhow::ensure!(rate > 0.0 && rate.is_finite(), "--rate must be positive");
        }
        Ok(RunConfig {
            template: self.template()?,
            jobs: self.jobs,
            mode,
            submit_for: Duration::from_secs(self.duration_secs),
            timeout: Duration::from_secs(self.run_timeout_secs),
            warmup: self.warmup,
            sample: Duration::from_millis(self.sample_ms.max(50)),
            verify: self.verify,
        })
    }

    /// Parameters are generated (test-only) before any clock starts, once for every process.
    fn prepare_params(&self) -> anyhow::Result<ShapeCache> {
        let template = self.template()?;
        let family = cuzk_circuits::resolve(&template.circuit, &template.params)?;
        let cache = ShapeCache::open_default(true)?;
        cache.proving_key(&*family)?;
        Ok(cache)
    }
}

/// The cluster this command starts when no `--nats-url` is given.
#[derive(Args, Clone)]
struct LaunchArgs {
    /// nats-servers: 1, or 3 (a JetStream cluster, R3 streams).
    #[arg(long, env = "CUZK_LOAD_SERVERS", default_value_t = 1)]
    servers: usize,
    /// Synth node processes.
    #[arg(long, env = "CUZK_LOAD_SYNTH", default_value_t = 1)]
    synth: usize,
    /// GPU node processes.
    #[arg(long, env = "CUZK_LOAD_GPU", default_value_t = 1)]
    gpu: usize,
    /// Ledger service processes; with any, the nodes go through them (`--nats-ledger-service`).
    #[arg(long, env = "CUZK_LOAD_LEDGER", default_value_t = 0)]
    ledger: usize,
    /// Threads per node (synthesis pool, host proving pool); default: all cores.
    #[arg(long, env = "CUZK_LOAD_THREADS")]
    threads: Option<usize>,
    /// Proving workers per GPU node.
    #[arg(long, env = "CUZK_LOAD_GPU_WORKERS", default_value_t = 1)]
    gpu_workers: usize,
    /// Backend of the GPU nodes (cpu, cuda, auto).
    #[arg(long, env = "CUZK_LOAD_GPU_BACKEND", default_value = "cpu")]
    gpu_backend: String,
    /// Extra argument for every synth node (repeat; e.g. `--synth-arg=--synth-jobs-in-flight=4`).
    #[arg(long = "synth-arg", allow_hyphen_values = true)]
    synth_args: Vec<String>,
    /// Extra argument for every GPU node (repeat).
    #[arg(long = "gpu-arg", allow_hyphen_values = true)]
    gpu_args: Vec<String>,
    /// The `cuzk` binary the nodes run; default: the one next to this binary.
    #[arg(long, env = "CUZK_LOAD_CUZK_BIN")]
    cuzk_bin: Option<PathBuf>,
}

impl LaunchArgs {
    fn shape(&self, gpu: usize) -> anyhow::Result<ClusterShape> {
        let cuzk = match &self.cuzk_bin {
            Some(path) => path.clone(),
            None => std::env::current_exe()?.with_file_name("cuzk"),
        };
        anyhow::ensure!(
            cuzk.is_file(),
            "no cuzk binary at {} (build it: cargo build --release -p cuzk-cli, or pass --cuzk-bin)",
            cuzk.display()
        );
        Ok(ClusterShape {
            servers: self.servers,
            synth: self.synth,
            gpu,
            ledger: self.ledger,
            threads: self.threads.unwrap_or_else(cores),
            gpu_workers: self.gpu_workers,
            gpu_backend: self.gpu_backend.clone(),
            synth_args: self.synth_args.clone(),
            gpu_args: self.gpu_args.clone(),
            cuzk,
        })
    }
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    launch: LaunchArgs,
    /// An existing cluster to drive (given `--nats-url`, nothing is started).
    #[command(flatten)]
    nats: NatsArgs,
    /// `HOST:PORT` of a GPU node's `--metrics-addr` to scrape for prover busy time (repeat;
    /// only with `--nats-url`: started clusters are scraped automatically).
    #[arg(
        long = "metrics-endpoint",
        env = "CUZK_LOAD_METRICS_ENDPOINTS",
        value_delimiter = ','
    )]
    metrics_endpoints: Vec<String>,
    /// Name of this run in file names and tables.
    #[arg(long, env = "CUZK_LOAD_LABEL", default_value = "run")]
    label: String,
}

#[derive(Args)]
struct HerdArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    launch: LaunchArgs,
}

#[derive(Args)]
struct ScaleArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    launch: LaunchArgs,
    /// GPU node counts to run, in order.
    #[arg(
        long,
        env = "CUZK_LOAD_GPU_COUNTS",
        value_delimiter = ',',
        default_value = "1,2,4"
    )]
    gpu_counts: Vec<usize>,
}

#[derive(Args)]
struct FloodArgs {
    #[command(flatten)]
    launch: LaunchArgs,
    /// Small jobs submitted in the burst.
    #[arg(long, default_value_t = 1000)]
    small_jobs: usize,
    /// Seconds the burst is spread over.
    #[arg(long, default_value_t = 1.0)]
    burst_secs: f64,
    /// MiMC rounds of each small job (one partition).
    #[arg(long, default_value_t = 16)]
    small_rounds: u32,
    /// Maximum-size jobs: MiMC rounds per partition, partitions; the size cap is set to them.
    #[arg(long, default_value_t = 1 << 18)]
    big_rounds: u32,
    #[arg(long, default_value_t = 4)]
    big_partitions: u32,
    #[arg(long, default_value_t = 8)]
    big_jobs: usize,
    /// Jobs one round over the cap, each to be refused.
    #[arg(long, default_value_t = 2)]
    over_cap_jobs: usize,
    /// Each synth node's memory budget, bytes.
    #[arg(long, default_value_t = 1 << 30)]
    synth_memory_budget: u64,
    #[arg(long = "timeout-secs", default_value_t = 1800)]
    timeout_secs: u64,
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // A signal drops the command, and with it any cluster it started (its processes stop).
        let stop = cuzk_cli::launcher::stop_signal()?;
        tokio::select! {
            done = command(cli.command) => done,
            signal = stop => {
                anyhow::bail!("stopped by {signal}")
            }
        }
    })
}

async fn command(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Run(args) => run(args).await,
        Command::Herd(args) => herd(args).await,
        Command::Scale(args) => scale(args).await,
        Command::Flood(args) => flood(args).await,
        Command::Blobs(args) => blobs::run(args).await,
        Command::Gateway(args) => gateway::run(args).await,
        Command::Soak(args) => {
            let shape = args.launch.shape(args.launch.gpu)?;
            soak::soak(args.soak, shape).await
        }
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let w = &args.workload;
    let config = w.config(w.mode())?;
    let target = if args.nats.urls.is_some() {
        Target::connect(args.nats.clone(), &args.metrics_endpoints).await?
    } else {
        w.prepare_params()?;
        Target::launch(args.launch.shape(args.launch.gpu)?).await?
    };
    let cache = if w.verify {
        Some(ShapeCache::open_default(true)?)
    } else {
        None
    };
    let data = load::drive(&target, &config, cache.as_ref(), &args.label).await?;
    target.stop();
    let summary = Summary::of(&data);
    print!("{}", report::table(&data, &summary));
    write_outputs(&w.out, &data, &summary, w.window_secs)?;
    Ok(())
}

async fn herd(args: HerdArgs) -> anyhow::Result<()> {
    let w = &args.workload;
    // The same stream on both sides: every job submitted at once, a backlog to work through.
    let config = w.config(Mode::Closed {
        concurrency: w.jobs,
    })?;
    let cache = w.prepare_params()?;
    let shape = args.launch.shape(args.launch.gpu)?;

    eprintln!(
        "single box: {} jobs, synthesis on {} rayon threads, then proving one partition at a time",
        w.jobs,
        cores()
    );
    let single = single_box::run(&config, &cache, w.sample_ms)?;
    let single_summary = Summary::of(&single);
    print!("{}", report::table(&single, &single_summary));

    eprintln!("split cluster: {}", shape.describe());
    let target = Target::launch(shape).await?;
    let split = load::drive(&target, &config, w.verify.then_some(&cache), "split").await?;
    target.stop();
    let split_summary = Summary::of(&split);
    print!("{}", report::table(&split, &split_summary));

    println!(
        "\n{}",
        report::comparison(&[(&single, &single_summary), (&split, &split_summary)])
    );
    write_outputs(&w.out, &single, &single_summary, w.window_secs)?;
    write_outputs(&w.out, &split, &split_summary, w.window_secs)?;
    report::write_summary_csv(
        &w.out.join("herd.csv"),
        &[(&single, &single_summary), (&split, &split_summary)],
    )?;
    Ok(())
}

async fn scale(args: ScaleArgs) -> anyhow::Result<()> {
    let w = &args.workload;
    let config = w.config(w.mode())?;
    w.prepare_params()?;
    let mut runs = Vec::new();
    for &gpu in &args.gpu_counts {
        let shape = args.launch.shape(gpu)?;
        eprintln!("scale: {}", shape.describe());
        let target = Target::launch(shape).await?;
        let data = load::drive(&target, &config, None, &format!("gpu{gpu}")).await?;
        target.stop();
        let summary = Summary::of(&data);
        print!("{}", report::table(&data, &summary));
        write_outputs(&w.out, &data, &summary, w.window_secs)?;
        runs.push((data, summary));
    }
    let refs: Vec<_> = runs.iter().map(|(d, s)| (d, s)).collect();
    println!("\n{}", report::comparison(&refs));
    report::write_summary_csv(&w.out.join("scale.csv"), &refs)?;
    Ok(())
}

async fn flood(args: FloodArgs) -> anyhow::Result<()> {
    let mimc = |rounds: u32, partitions: u32| JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: String::new(),
        circuit: "mimc".into(),
        params: serde_json::json!({"rounds": rounds, "partitions": partitions}),
        input: JobInput::Utf8("flood".into()),
        priority: Priority::Normal,
    };
    let spec = cuzk_cli::flood::FloodSpec {
        small: mimc(args.small_rounds, 1),
        small_jobs: args.small_jobs,
        burst: Duration::from_secs_f64(args.burst_secs),
        big: mimc(args.big_rounds, args.big_partitions),
        big_jobs: args.big_jobs,
        over_cap: mimc(args.big_rounds + 1, args.big_partitions),
        over_cap_jobs: args.over_cap_jobs,
        timeout: Duration::from_secs(args.timeout_secs),
    };
    let cache = ShapeCache::open_default(true)?;
    let mut cap = 0;
    for job in [&spec.small, &spec.big] {
        let family = cuzk_circuits::resolve(&job.circuit, &job.params)?;
        eprintln!(
            "parameters for {} (generated once, before the clock)",
            family.shape_key()
        );
        cache.proving_key(&*family)?;
        cap = family.partition_shape().constraints * family.partitions() as u64;
    }
    let shape = args.launch.shape(args.launch.gpu)?;
    let launch = cuzk_cli::launcher::LaunchSpec {
        servers: shape.servers,
        synth_nodes: shape.synth,
        gpu_nodes: shape.gpu,
        threads: shape.threads,
        synth_args: [
            shape.synth_args.clone(),
            vec![
                "--synth-memory-budget".into(),
                args.synth_memory_budget.to_string(),
                "--synth-max-job-constraints".into(),
                cap.to_string(),
            ],
        ]
        .concat(),
        gpu_args: [
            shape.gpu_args.clone(),
            vec!["--gpu-backend".into(), shape.gpu_backend.clone()],
        ]
        .concat(),
        ..Default::default()
    };
    eprintln!(
        "flood: {} small jobs in {} s, {} jobs at the cap of {cap} constraints, {} over it; {}",
        spec.small_jobs,
        args.burst_secs,
        spec.big_jobs,
        spec.over_cap_jobs,
        shape.describe()
    );
    let mut cluster = cuzk_cli::launcher::ProcessCluster::start(launch, &shape.cuzk)?;
    let nats = NatsArgs {
        urls: Some(cluster.servers.iter().map(|s| s.url()).collect()),
        limits: Some(cuzk_common::config::LimitsProfile::Local),
        replicas: Some(cluster.replicas()),
        ..Default::default()
    };
    let (client, _topology) = cuzk_cli::connect(&nats.resolve("cuzk-load")?).await?;
    let report = cuzk_cli::flood::run(&mut cluster, &client, &spec).await?;
    print!("{}", report.table(args.synth_memory_budget));
    anyhow::ensure!(
        report.passed(args.synth_memory_budget),
        "the flood lost, duplicated or misanswered jobs, a node exited or went over its budget\n{}",
        cluster.log_tails(3000)
    );
    Ok(())
}

fn write_outputs(
    out: &Path,
    data: &load::RunData,
    summary: &Summary,
    window_secs: f64,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let jobs = out.join(format!("{}-jobs.csv", data.label));
    let series = out.join(format!("{}-series.csv", data.label));
    let plot = out.join(format!("{}.svg", data.label));
    report::write_jobs_csv(&jobs, data)?;
    let points = report::series(data, window_secs);
    report::write_series_csv(&series, data, &points)?;
    std::fs::write(&plot, report::svg(data, summary, &points))?;
    eprintln!(
        "wrote {}, {}, {}",
        jobs.display(),
        series.display(),
        plot.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    /// clap checks a command line's definition only in debug builds, as it parses: two argument
    /// groups of one name made `cuzk-load soak` panic there.
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
