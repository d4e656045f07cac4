//! `cuzk-porep`: Filecoin PoRep helpers for the `porep-c2` circuit.
//!
//! * `fixture`: seal a sector with filecoin-proofs (add_piece, PC1, PC2, C1); write its C1
//!   output and a ready-to-publish job.
//! * `params`: INSECURE, test-only Groth16 parameters into the Filecoin parameter cache.
//! * `stats`: witness value classes and blob sizes of one partition.
//! * `bench`: C2 through a local cluster vs filecoin-proofs' `seal_commit_phase2`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use base64::Engine;
use clap::{Parser, Subcommand};
use cuzk_circuits::porep::{
    generate_test_parameters, parameter_path, seal_commit_phase2, seal_sector, verify_seal,
    SealedSector, SectorSize,
};
use cuzk_circuits::CircuitSpec;
use cuzk_common::config::{BackendKind, GpuArgs, SynthArgs};
use cuzk_wire::blob::{encode_blob_with_stats, BlobHeaderInfo, EncodeOptions};
use cuzk_wire::job::{
    JobInput, JobSpec, JobStatus, Priority, DEFAULT_MAX_INLINE_INPUT as MAX_INLINE,
    JOB_SPEC_VERSION,
};
use rand::RngCore;

#[derive(Parser)]
#[command(
    name = "cuzk-porep",
    about = "Filecoin PoRep fixtures, test parameters and benchmarks for cuzk"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Seal a sector of random data and write c1.json (the C1 output) and job.json (a
    /// `porep-c2` job for it, ready for `nats pub cuzk.jobs.submit "$(cat job.json)"`).
    Fixture {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 1)]
        sector_id: u64,
        /// 64 hex digits; random when omitted.
        #[arg(long)]
        prover_id: Option<String>,
    },
    /// Generate INSECURE, TEST-ONLY Groth16 parameters (bellperson's generator) into the
    /// parameter directory as v28-<cache id>.params/.vk/.meta, marked insecure
    /// (v28-….params.TEST-ONLY-INSECURE). Refuses a production directory (filecoin-proofs'
    /// default, or one holding real parameters) unless --force-insecure.
    Params {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        /// The parameter directory (`cuzk gpu-node --param-cache`); else
        /// $FIL_PROOFS_PARAMETER_CACHE, else ~/.cache/cuzk/params.
        #[arg(long, env = cuzk_circuits::CACHE_ENV)]
        param_cache: Option<PathBuf>,
        /// Write them even into a production directory.
        #[arg(long)]
        force_insecure: bool,
    },
    /// Seal a sector, synthesize partition 0 and print its witness value classes and blob
    /// sizes (raw, after the codec, after zstd).
    Stats {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
    },
    /// C2 of one sector through a local cluster (in-process synth and CPU-backend GPU node on
    /// a private nats-server) vs filecoin-proofs' `seal_commit_phase2`, both on all cores.
    /// Needs the sector size's parameters in the parameter cache.
    Bench {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        /// Timed runs of each, after one untimed warm-up (parameter loading) of each.
        #[arg(long, default_value_t = 2)]
        runs: usize,
        /// As for `params`.
        #[arg(long, env = cuzk_circuits::CACHE_ENV)]
        param_cache: Option<PathBuf>,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let param_dir = match &cli.command {
        Command::Params { param_cache, .. } | Command::Bench { param_cache, .. } => {
            Some(set_param_dir(param_cache.clone())?)
        }
        _ => None,
    };
    cuzk_common::telemetry::init_logging();
    match cli.command {
        Command::Fixture {
            sector_size,
            out,
            sector_id,
            prover_id,
        } => fixture(sector_size, &out, sector_id, prover_id),
        Command::Params {
            sector_size,
            force_insecure,
            ..
        } => {
            let path = generate_test_parameters(sector_size, force_insecure)?;
            println!("{}", path.display());
            Ok(())
        }
        Command::Stats { sector_size } => stats(sector_size),
        Command::Bench {
            sector_size, runs, ..
        } => bench(sector_size, runs, param_dir.expect("resolved for bench")),
    }
}

/// Resolves the parameter directory as `cuzk gpu-node` does and hands it to filecoin-proofs,
/// which reads its settings from the environment once, on first use.
fn set_param_dir(flag: Option<PathBuf>) -> Result<PathBuf> {
    let dir = match flag {
        Some(dir) => dir,
        None => cuzk_circuits::ParamCache::from_env()?.dir().to_owned(),
    };
    // SAFETY: called first thing in main, before any other thread exists.
    unsafe { std::env::set_var(cuzk_circuits::FILECOIN_CACHE_ENV, &dir) };
    Ok(dir)
}

fn seal(size: SectorSize, sector_id: u64, prover_id: [u8; 32]) -> Result<SealedSector> {
    let work = tempfile::tempdir()?;
    let started = Instant::now();
    let sector = seal_sector(
        size,
        work.path(),
        sector_id,
        prover_id,
        &mut rand::rngs::OsRng,
    )?;
    tracing::info!(
        sector_size = size.name(),
        secs = started.elapsed().as_secs_f64(),
        c1_bytes = sector.c1_json.len(),
        "sealed to C1"
    );
    Ok(sector)
}

fn random_prover_id() -> [u8; 32] {
    let mut id = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut id);
    id
}

fn job_for(sector: &SealedSector, job_id: &str) -> JobSpec {
    let input = if sector.c1_json.len() <= MAX_INLINE {
        JobInput::Base64(base64::engine::general_purpose::STANDARD.encode(&sector.c1_json))
    } else {
        JobInput::Object(format!("{job_id}.c1.json"))
    };
    JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: job_id.into(),
        circuit: "porep-c2".into(),
        params: sector.job_params(),
        input,
        priority: Priority::Normal,
    }
}

fn fixture(size: SectorSize, out: &Path, sector_id: u64, prover_id: Option<String>) -> Result<()> {
    let prover_id = match prover_id {
        Some(hex_id) => hex::decode(&hex_id)?
            .try_into()
            .map_err(|_| anyhow::anyhow!("--prover-id must be 32 bytes"))?,
        None => random_prover_id(),
    };
    let sector = seal(size, sector_id, prover_id)?;
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("c1.json"), &sector.c1_json)?;
    let job = job_for(&sector, &format!("porep-{}-{sector_id}", size.name()));
    std::fs::write(out.join("job.json"), serde_json::to_vec(&job)?)?;
    if let JobInput::Object(name) = &job.input {
        println!("C1 is over {MAX_INLINE} bytes: upload c1.json as object {name} in the cuzk-inputs bucket before submitting");
    }
    println!("{}", out.join("job.json").display());
    Ok(())
}

fn stats(size: SectorSize) -> Result<()> {
    let sector = seal(size, 1, random_prover_id())?;
    let family = cuzk_circuits::resolve(&CircuitSpec {
        name: "porep-c2".into(),
        params: sector.job_params(),
    })?;
    let started = Instant::now();
    let assignment = family.synthesize_partition(&sector.c1_json, 0)?;
    let synth = started.elapsed();
    let header = BlobHeaderInfo::new("stats", 0, family.shape_key())?;
    let started = Instant::now();
    let (_, stats) = encode_blob_with_stats(&header, &assignment, &EncodeOptions::default());
    println!(
        "{} partition 0: {} constraints, {} aux, synth {:.2} s, encode {:.2} s",
        size.name(),
        assignment.num_constraints(),
        assignment.aux.len(),
        synth.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    println!("| vector | elements | 0 | 1 | small | −small | full | raw MB | codec MB | zstd MB |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mb = |b: u64| b as f64 / 1e6;
    for v in &stats.vectors {
        let classes = match &v.classes {
            Some(c) => {
                let pct = |n: u64| format!("{:.1} %", 100.0 * n as f64 / c.total().max(1) as f64);
                format!(
                    "{} | {} | {} | {} | {}",
                    pct(c.zero),
                    pct(c.one),
                    pct(c.small),
                    pct(c.neg_small),
                    pct(c.full)
                )
            }
            None => "– | – | – | – | –".into(),
        };
        println!(
            "| {:?} | {} | {classes} | {:.2} | {:.2} | {:.2} |",
            v.kind,
            v.elements,
            mb(v.raw_bytes),
            mb(v.encoded_bytes),
            mb(v.compressed_bytes)
        );
    }
    println!(
        "| blob | | | | | | | {:.2} | {:.2} | {:.2} (×{:.1}) |",
        mb(stats.raw_bytes),
        mb(stats.encoded_bytes),
        mb(stats.compressed_bytes),
        stats.ratio()
    );
    Ok(())
}

fn bench(size: SectorSize, runs: usize, param_dir: PathBuf) -> Result<()> {
    let params = parameter_path(size)?;
    if !params.exists() {
        bail!(
            "no parameters at {}; run `cuzk-porep params --sector-size {}` first",
            params.display(),
            size.name()
        );
    }
    if size.bytes() > 8 << 20 {
        bail!("bench seals the sector first; only 2KiB and 8MiB are practical here");
    }
    let sector = seal(size, 1, random_prover_id())?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    let runtime = tokio::runtime::Runtime::new()?;
    let cluster_ms = runtime.block_on(async {
        let synth = SynthArgs {
            threads: Some(cores),
            ..Default::default()
        }
        .resolve()?;
        let gpu = GpuArgs {
            backend: Some(BackendKind::Cpu),
            cpu_threads: Some(cores),
            param_cache: Some(param_dir),
            ..Default::default()
        }
        .resolve()?;
        let cluster = cuzk_cli::LocalCluster::start(synth, gpu).await?;
        let mut times = Vec::new();
        for run in 0..=runs {
            let job = job_for(&sector, &format!("bench-{run}"));
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
            if !verify_seal(&sector, &proof)? {
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
    for run in 0..=runs {
        let started = Instant::now();
        let proof = seal_commit_phase2(&sector)?;
        let wall = started.elapsed().as_secs_f64() * 1e3;
        if !verify_seal(&sector, &proof)? {
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
    println!(
        "\n| {} C2, {cores} cores, mean of {runs} | wall s |",
        size.name()
    );
    println!("|---|---|");
    println!(
        "| cuzk local cluster (synth + CPU-backend GPU node, NATS) | {:.1} |",
        cluster / 1e3
    );
    println!(
        "| filecoin-proofs `seal_commit_phase2` (bellperson CPU) | {:.1} |",
        fil / 1e3
    );
    println!("| ratio cluster / filecoin | {:.2} |", cluster / fil);
    Ok(())
}
