//! `cuzk-porep bench`: C2 of one sector through a local cluster vs filecoin-proofs'
//! `seal_commit_phase2`, both on all cores.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cuzk_circuits::porep::{parameter_path, seal_commit_phase2, verify_seal};
use cuzk_common::config::{BackendKind, GpuArgs, ParamArgs, SynthArgs};
use cuzk_wire::job::{JobInput, JobSpec, JobStatus};

use cuzk_circuits::porep::SealedSector;

use crate::measure::{thread_cpu_seconds, GpuSampler, Rss};
use crate::{job_for, use_cuda, Engine};

/// The synth node's pool threads' names start so (`cuzk_synth_node::SynthNode::new`).
const SYNTH_THREADS: &str = "synth-";

pub struct Options {
    pub runs: usize,
    pub engine: Engine,
    pub no_filecoin: bool,
    /// Jobs submitted at once after the timed runs: the cluster's throughput.
    pub throughput: usize,
    /// The synth node's settings; its threads default to all cores.
    pub synth: Box<SynthArgs>,
    /// The GPU node's settings; its backend defaults to the engine's, its CPU threads to all
    /// cores.
    pub gpu: Box<GpuArgs>,
}

pub fn run(sector: &SealedSector, o: Options) -> Result<()> {
    let Options {
        runs,
        engine,
        no_filecoin,
        ..
    } = o;
    let size = sector.size;
    let params = parameter_path(size)?;
    if !params.exists() {
        bail!(
            "no parameters at {}; run `cuzk-porep params --sector-size {}` first",
            params.display(),
            size.name()
        );
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    let runtime = tokio::runtime::Runtime::new()?;
    let cluster_ms = runtime.block_on(async {
        let mut synth = o.synth;
        synth.threads.get_or_insert(cores);
        let synth = synth.resolve()?;
        let mut gpu = o.gpu;
        if gpu.backend.is_none() {
            gpu.backend = Some(if use_cuda(engine)? {
                BackendKind::Cuda
            } else {
                BackendKind::Cpu
            });
        }
        gpu.cpu_threads.get_or_insert(cores);
        let gpu = gpu.resolve()?;
        // A C1 too large to ride in a job is staged once (below); every job names that object.
        let template = job_for(sector, &format!("bench-{}", rand::random::<u32>()));
        let synthetic = template.params["synthetic"] == true;
        // As `prove`: the parameters `params` writes are marked insecure.
        let params = ParamArgs {
            allow_synthetic: Some(synthetic),
            ..Default::default()
        }
        .resolve(true)?;
        let limits = cuzk_cli::roomy_local_limits()?;
        println!(
            "blobs bucket {:.1} GiB (from the free space of {})",
            limits.blobs_max_bytes as f64 / (1u64 << 30) as f64,
            std::env::temp_dir().display()
        );
        let cluster = cuzk_cli::LocalCluster::start_with_limits(synth, gpu, params, limits).await?;
        if let JobInput::Object(name) = &template.input {
            cuzk_common::objects::put(&cluster.topology.inputs, name, &sector.c1_json).await?;
        }
        let job = |id: &str| JobSpec {
            job_id: id.into(),
            ..template.clone()
        };
        let mut times = Vec::new();
        for run in 0..=runs {
            let job = job(&format!("bench-{run}"));
            let started = Instant::now();
            let result =
                cuzk_cli::submit_and_wait(&cluster.client, &job, Duration::from_secs(1800)).await?;
            let wall = started.elapsed().as_secs_f64() * 1e3;
            check_proof(sector, &result, &format!("cluster run {run}"))?;
            println!(
                "cluster run {run}{}: {wall:.0} ms",
                if run == 0 { " (warm-up)" } else { "" }
            );
            print!("{}", cuzk_cli::timings_table(&result));
            if run > 0 {
                times.push(wall);
            }
        }
        if o.throughput > 0 {
            throughput(&cluster.client, sector, synthetic, o.throughput, job).await?;
        }
        cluster.stop().await?;
        anyhow::Ok(times)
    })?;

    let mut fil_ms = Vec::new();
    for run in (0..=runs).filter(|_| !no_filecoin) {
        let started = Instant::now();
        let proof = seal_commit_phase2(sector)?;
        let wall = started.elapsed().as_secs_f64() * 1e3;
        if !verify_seal(sector, &proof)? {
            bail!("seal_commit_phase2 run {run}: verify_seal rejected the proof");
        }
        println!(
            "seal_commit_phase2 run {run}{}: {wall:.0} ms",
            if run == 0 { " (warm-up)" } else { "" }
        );
        if run > 0 {
            fil_ms.push(wall);
        }
    }

    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (cluster, fil) = (mean(&cluster_ms), mean(&fil_ms));
    if runs == 0 {
        return Ok(());
    }
    if no_filecoin {
        println!("\n| {} C2, {cores} cores, mean of {runs} | wall s |\n|---|---|\n| cuzk local cluster | {:.2} |", size.name(), cluster / 1e3);
        return Ok(());
    }
    println!(
        "\n| {} C2, {cores} cores, mean of {runs} | wall s |",
        size.name()
    );
    println!("|---|---|");
    println!(
        "| cuzk local cluster (synth node + GPU node, NATS) | {:.1} |",
        cluster / 1e3
    );
    println!(
        "| filecoin-proofs `seal_commit_phase2` (bellperson CPU) | {:.1} |",
        fil / 1e3
    );
    println!("| ratio cluster / filecoin | {:.2} |", cluster / fil);
    Ok(())
}

/// A proof of a sealed sector must pass `verify_seal`; a synthetic C1's proves nothing, so
/// only its presence is checked.
fn check_proof(
    sector: &SealedSector,
    result: &cuzk_wire::job::JobResult,
    what: &str,
) -> Result<()> {
    if result.status != JobStatus::Done {
        bail!(
            "{what} failed: {}",
            result.error.clone().unwrap_or_default()
        );
    }
    let proof = hex::decode(result.proof.as_deref().context("no proof")?)?;
    if !result.synthetic && !verify_seal(sector, &proof)? {
        bail!("{what}: verify_seal rejected the proof");
    }
    Ok(())
}

/// `n` jobs of the sector submitted at once, every proof checked: jobs per second, and what a
/// host running both nodes spends per sector, synthesis CPU per partition (the synth node's
/// pool threads), GPU busy and the process's peak RSS.
async fn throughput(
    client: &async_nats::Client,
    sector: &SealedSector,
    synthetic: bool,
    n: usize,
    job: impl Fn(&str) -> JobSpec,
) -> Result<()> {
    use futures::StreamExt;
    let tag = rand::random::<u32>();
    let jobs: Vec<_> = (0..n).map(|i| job(&format!("tp-{tag}-{i}"))).collect();
    let mut subs = Vec::with_capacity(n);
    for job in &jobs {
        subs.push(
            client
                .subscribe(cuzk_common::topology::results_subject(&job.job_id))
                .await?,
        );
    }
    let sampler = GpuSampler::start();
    let synth_cpu = thread_cpu_seconds(SYNTH_THREADS);
    let started = Instant::now();
    for job in &jobs {
        client
            .publish(
                cuzk_common::topology::SUBJECT_SUBMIT,
                serde_json::to_vec(job)?.into(),
            )
            .await?;
    }
    client.flush().await?;
    let mut results = futures::stream::select_all(subs);
    let mut done = Vec::with_capacity(n);
    while done.len() < n {
        let message = tokio::time::timeout(Duration::from_secs(1800), results.next())
            .await
            .context("throughput job timed out")?
            .context("results subscription closed")?;
        let at = started.elapsed().as_secs_f64();
        let result: cuzk_wire::job::JobResult = serde_json::from_slice(&message.payload)?;
        check_proof(sector, &result, &result.job_id)?;
        done.push(at);
    }
    let secs = started.elapsed().as_secs_f64();
    let synth_core_s =
        (thread_cpu_seconds(SYNTH_THREADS) - synth_cpu) / (n * sector.size.partitions()) as f64;
    let (mem_peak_mib, gpu_busy) = sampler.map_or((f64::NAN, f64::NAN), |s| s.stop(started));
    let rss_gib = Rss::of(std::process::id()).map_or(f64::NAN, |r| r.peak);
    // Sectors in flight together interleave their partitions, so gaps between completions say
    // little; the batch's wall per sector is what a host sustains, its pipeline filled once.
    let sector_s = secs / n as f64;
    // From the first completion on: the rate once the pipeline is full, without its filling.
    let steady = (n > 1).then(|| (n - 1) as f64 / (done[n - 1] - done[0]).max(f64::EPSILON));
    let at: Vec<String> = done.iter().map(|t| format!("{t:.1}")).collect();
    println!(
        "throughput: {n} jobs submitted at once, all proved{} in {secs:.2} s = {:.2} jobs/s; done at {} s",
        if synthetic { "" } else { " and accepted by verify_seal" },
        n as f64 / secs,
        at.join(", ")
    );
    println!(
        "| {} on one host, {n} at once | value |\n|---|---|",
        sector.size.name()
    );
    println!("| per sector s (batch wall / sectors, the pipeline filled once) | {sector_s:.2} |");
    if let Some(steady) = steady {
        println!("| jobs per second from the first completion on | {steady:.2} |");
    }
    println!("| synthesis core-seconds per partition (synth node pool) | {synth_core_s:.2} |");
    println!("| GPU busy % | {gpu_busy:.0} |");
    println!("| device memory peak GiB | {:.1} |", mem_peak_mib / 1024.0);
    println!("| host RSS peak GiB (both nodes) | {rss_gib:.1} |");
    println!(
        "{}",
        serde_json::json!({
            "throughput_jobs": n,
            "throughput_s": secs,
            "jobs_per_s": n as f64 / secs,
            "steady_jobs_per_s": steady,
            "completions_s": done,
            "sector_s": sector_s,
            "synth_core_s_per_partition": synth_core_s,
            "gpu_busy_pct": gpu_busy,
            "device_mem_peak_gib": mem_peak_mib / 1024.0,
            "host_rss_gib": rss_gib,
        })
    );
    Ok(())
}
