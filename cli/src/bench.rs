//! `cuzk bench`: the same multi-partition jobs (a) through a local cluster on this machine and
//! (b) through bellperson's `create_random_proof_batch` in this process, on the same circuit and
//! cores, printed side by side with the bytes each partition costs on the wire.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use bellperson::groth16::{create_random_proof_batch, Parameters};
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};
use clap::Args;
use cuzk_circuits::{CircuitFamily, MimcFamily, Sha256Family};
use cuzk_cli::{inline_input, submit_and_wait, verify_job_proof, LocalCluster};
use cuzk_common::config::{ConfigFile, GpuArgs, ParamArgs, SynthArgs};
use cuzk_wire::job::{JobResult, JobStatus, PartitionTimings};

use crate::args::{fresh_job_id, JobArgs};

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    job: JobArgs,
    /// Timed jobs per side (after one untimed warm-up job through the cluster).
    #[arg(long, env = "CUZK_BENCH_JOBS", default_value_t = 2)]
    jobs: usize,
    #[command(flatten)]
    synth: SynthArgs,
    #[command(flatten)]
    gpu: GpuArgs,
    #[command(flatten)]
    params: ParamArgs,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn bellperson_batch<C: Circuit<Scalar> + Send>(
    circuits: Vec<C>,
    params: &Parameters<Bls12>,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let proofs = create_random_proof_batch(circuits, params, &mut rand::rngs::OsRng)?;
    let elapsed = started.elapsed();
    anyhow::ensure!(!proofs.is_empty(), "bellperson returned no proofs");
    Ok(elapsed)
}

/// bellperson proves the job's partitions as one batch, synthesis included, like a single box.
fn bellperson_job(
    spec: &cuzk_wire::job::JobSpec,
    params: &Parameters<Bls12>,
) -> anyhow::Result<Duration> {
    let input = inline_input(&spec.input)?;
    match spec.circuit.as_str() {
        "sha256" => {
            let family = Sha256Family::from_params(&spec.params)?;
            let circuits = (0..family.partitions())
                .map(|k| family.circuit(&input, k))
                .collect::<Result<Vec<_>, _>>()?;
            bellperson_batch(circuits, params)
        }
        "mimc" => {
            let family = MimcFamily::from_params(&spec.params)?;
            let circuits = (0..family.partitions())
                .map(|k| family.circuit(&input, k))
                .collect::<Result<Vec<_>, _>>()?;
            bellperson_batch(circuits, params)
        }
        other => anyhow::bail!("no bellperson reference for circuit {other}"),
    }
}

pub async fn run(args: BenchArgs, file: ConfigFile) -> anyhow::Result<()> {
    cuzk_common::telemetry::init_logging();
    let synth = args.synth.merge(file.synth).resolve()?;
    let gpu = args.gpu.merge(file.gpu).resolve()?;
    let template = args.job.spec()?;
    let family = cuzk_circuits::resolve(&template.circuit, &template.params)?;
    let partitions = family.partitions();
    let param_config = args.params.merge(file.params).resolve(true)?;
    let cache = cuzk_cli::shape_cache(&param_config)?;
    // Parameter generation/loading is excluded from both sides.
    let params = cache.proving_key(&*family)?.srs.parameters()?;
    let threads = synth.threads;

    let cluster = LocalCluster::start(synth, gpu, param_config).await?;
    let timeout = Duration::from_secs(3600);
    let mut warm = template.clone();
    warm.job_id = fresh_job_id();
    let warm_result = submit_and_wait(&cluster.client, &warm, timeout).await?;
    anyhow::ensure!(
        warm_result.status == JobStatus::Done,
        "warm-up job failed: {:?}",
        warm_result.error
    );
    let mut cluster_secs = Vec::new();
    let mut results: Vec<JobResult> = Vec::new();
    for _ in 0..args.jobs {
        let mut spec = template.clone();
        spec.job_id = fresh_job_id();
        let started = Instant::now();
        let result = submit_and_wait(&cluster.client, &spec, timeout).await?;
        cluster_secs.push(started.elapsed().as_secs_f64());
        verify_job_proof(&spec, &result, &cache).context("cluster proof")?;
        results.push(result);
    }
    cluster.stop().await?;

    let mut bellperson_secs = Vec::new();
    for _ in 0..args.jobs {
        bellperson_secs.push(bellperson_job(&template, &params)?.as_secs_f64());
    }

    let cluster_median = median(cluster_secs);
    let bellperson_median = median(bellperson_secs);
    let parts: Vec<PartitionTimings> = results
        .iter()
        .flat_map(|r| r.partition_timings.iter().copied())
        .collect();
    let avg = |f: fn(&PartitionTimings) -> f64| {
        parts.iter().map(f).sum::<f64>() / parts.len().max(1) as f64
    };
    let blob = avg(|t| t.blob_bytes as f64);
    let raw = avg(|t| t.raw_bytes as f64);
    let handoff = avg(|t| t.encode_ms + t.upload_ms + t.fetch_ms + t.decode_ms);
    let prove = avg(|t| t.prove_ms);

    println!("\ncircuit {} params {} — {partitions} partitions, {threads} cores, {} timed jobs per side (medians)", template.circuit, template.params, args.jobs);
    println!(
        "{:<44} {:>10} {:>14} {:>8}",
        "prover", "job s", "s/partition", "ratio"
    );
    println!(
        "{:<44} {:>10.2} {:>14.2} {:>8.2}",
        "bellperson create_random_proof_batch",
        bellperson_median,
        bellperson_median / partitions as f64,
        1.0
    );
    println!(
        "{:<44} {:>10.2} {:>14.2} {:>8.2}",
        "cuzk cluster (synth + cpu gpu-node, NATS)",
        cluster_median,
        cluster_median / partitions as f64,
        bellperson_median / cluster_median
    );
    println!("\nper partition: raw {:.2} MiB → blob {:.3} MiB on the wire (codec ratio {:.1}×); handoff (encode+upload+fetch+decode) {:.1} ms = {:.1}% of prove {:.1} ms",
        raw / 1048576.0, blob / 1048576.0, raw / blob.max(1.0), handoff, 100.0 * handoff / prove.max(1e-9), prove);
    Ok(())
}
