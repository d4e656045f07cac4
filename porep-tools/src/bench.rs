//! `cuzk-porep bench`: C2 of one sector through a local cluster vs filecoin-proofs'
//! `seal_commit_phase2`, both on all cores.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cuzk_circuits::porep::{parameter_path, seal_commit_phase2, verify_seal};
use cuzk_common::config::{BackendKind, GpuArgs, ParamArgs, SynthArgs};
use cuzk_wire::job::JobStatus;

use cuzk_circuits::porep::SealedSector;

use crate::{job_for, use_cuda, Engine};

pub struct Options {
    pub runs: usize,
    pub engine: Engine,
    pub no_filecoin: bool,
    /// Jobs submitted at once after the timed runs: the cluster's throughput.
    pub throughput: usize,
    pub synth_jobs_in_flight: Option<usize>,
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
        let synth = SynthArgs {
            threads: Some(cores),
            jobs_in_flight: o.synth_jobs_in_flight,
            ..Default::default()
        }
        .resolve()?;
        let gpu = GpuArgs {
            backend: Some(if use_cuda(engine)? {
                BackendKind::Cuda
            } else {
                BackendKind::Cpu
            }),
            cpu_threads: Some(cores),
            ..Default::default()
        }
        .resolve()?;
        let params = ParamArgs::default().resolve(false);
        let cluster = cuzk_cli::LocalCluster::start(synth, gpu, params).await?;
        let mut times = Vec::new();
        for run in 0..=runs {
            let job = job_for(sector, &format!("bench-{run}"));
            let started = Instant::now();
            let result =
                cuzk_cli::submit_and_wait(&cluster.client, &job, Duration::from_secs(1800)).await?;
            let wall = started.elapsed().as_secs_f64() * 1e3;
            if result.status != JobStatus::Done {
                bail!(
                    "cluster run {run} failed: {}",
                    result.error.unwrap_or_default()
                );
            }
            let proof = hex::decode(result.proof.as_deref().context("no proof")?)?;
            if !verify_seal(sector, &proof)? {
                bail!("cluster run {run}: verify_seal rejected the proof");
            }
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
            throughput(&cluster.client, sector, o.throughput).await?;
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

/// `n` jobs of the sector submitted at once; every proof checked with `verify_seal`.
async fn throughput(client: &async_nats::Client, sector: &SealedSector, n: usize) -> Result<()> {
    use futures::StreamExt;
    let tag = rand::random::<u32>();
    let jobs: Vec<_> = (0..n)
        .map(|i| job_for(sector, &format!("tp-{tag}-{i}")))
        .collect();
    let mut subs = Vec::with_capacity(n);
    for job in &jobs {
        subs.push(
            client
                .subscribe(cuzk_common::topology::results_subject(&job.job_id))
                .await?,
        );
    }
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
    for (job, mut sub) in jobs.iter().zip(subs) {
        let message = tokio::time::timeout(Duration::from_secs(1800), sub.next())
            .await
            .context("throughput job timed out")?
            .context("results subscription closed")?;
        let result: cuzk_wire::job::JobResult = serde_json::from_slice(&message.payload)?;
        if result.status != JobStatus::Done {
            bail!(
                "{} failed: {}",
                job.job_id,
                result.error.unwrap_or_default()
            );
        }
        let proof = hex::decode(result.proof.as_deref().context("no proof")?)?;
        if !verify_seal(sector, &proof)? {
            bail!("{}: verify_seal rejected the proof", job.job_id);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "throughput: {n} jobs submitted at once, all proved and accepted by verify_seal in {secs:.2} s = {:.2} jobs/s",
        n as f64 / secs
    );
    println!(
        "{}",
        serde_json::json!({"throughput_jobs": n, "throughput_s": secs, "jobs_per_s": n as f64 / secs})
    );
    Ok(())
}
