//! `cuzk-porep bench`: C2 of one sector through a local cluster vs filecoin-proofs'
//! `seal_commit_phase2`, both on all cores.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cuzk_circuits::porep::{parameter_path, seal_commit_phase2, verify_seal};
use cuzk_common::config::{BackendKind, GpuArgs, ParamArgs, SynthArgs};
use cuzk_wire::job::JobStatus;

use cuzk_circuits::porep::SealedSector;

use crate::{job_for, use_cuda, Engine};

pub fn run(sector: &SealedSector, runs: usize, engine: Engine, no_filecoin: bool) -> Result<()> {
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
