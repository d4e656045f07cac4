//! `cuzk-porep`: Filecoin PoRep helpers for the `porep-c2` circuit.
//!
//! * `fixture`: seal a sector with filecoin-proofs (add_piece, PC1, PC2, C1); write its C1
//!   output and a ready-to-publish job.
//! * `params`: INSECURE, test-only Groth16 parameters into the Filecoin parameter cache, from
//!   the shape's constraint matrices (on the GPU when there is one).
//! * `stats`: one partition's shape, synthesis times and witness blob sizes (`--json`).
//! * `post-witness`: a synthetic PoSt partition's witness by the gadgets and natively.
//! * `snap-witness`: a synthetic SnapDeals partition's witness by the gadgets and natively.
//! * `prove`: one partition proved by the CUDA (or CPU) backend, checked against the CPU
//!   backend step by step and by `verify_seal`, then timed.
//! * `bench`: C2 through a local cluster vs filecoin-proofs' `seal_commit_phase2`.
//!
//! A "sector file" (`--sector`) is JSON `{"c1": <C1 output>, "prover_id": [32 bytes],
//! "sector_id": N}`; without one, a sector is sealed on the spot (2 KiB and 8 MiB only).

mod bench;
mod drain;
mod measure;
mod prove;
mod stats;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use base64::Engine as _;
use clap::{Parser, Subcommand, ValueEnum};
use cuzk_circuits::porep::{generate_test_parameters, seal_sector, SealedSector, SectorSize};
use cuzk_circuits::porep_c1::SealProof;
use cuzk_circuits::ShapeCache;
use cuzk_common::config::{GpuArgs, SynthArgs};
use cuzk_wire::job::{JobInput, JobSpec, Priority, JOB_SPEC_VERSION};
use rand::RngCore;

/// The largest input a job carries inline (the default `max_inline_input`); larger C1 outputs
/// go through the object store.
const MAX_INLINE: usize = cuzk_wire::job::DEFAULT_MAX_INLINE_INPUT;

#[derive(Parser)]
#[command(
    name = "cuzk-porep",
    about = "Filecoin PoRep fixtures, test parameters and benchmarks for cuzk"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where fixed-base multiplications and proofs run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// CUDA when a device is present, else the CPU.
    Auto,
    Cpu,
    Cuda,
}

/// A PoSt proof kind, as a flag.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum PostKindArg {
    Window,
    Winning,
}

impl From<PostKindArg> for cuzk_circuits::post::PostKind {
    fn from(k: PostKindArg) -> Self {
        match k {
            PostKindArg::Window => Self::Window,
            PostKindArg::Winning => Self::Winning,
        }
    }
}

/// The proof whose circuit test parameters are made for, as a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ParamsProof {
    /// PoRep Commit-2 (`porep-c2`).
    Porep,
    /// WindowPoSt, the version the network uses.
    WindowPost,
    WinningPost,
    /// SnapDeals' sector update.
    SnapDeals,
}

#[derive(Subcommand)]
enum Command {
    /// Seal a sector of random data and write c1.json (the C1 output), sector.json (the sector
    /// file `--sector` takes) and job.json (a `porep-c2` job for it, ready for
    /// `nats pub cuzk.jobs.submit "$(cat job.json)"`).
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
    /// Generate INSECURE, TEST-ONLY Groth16 parameters from the shape's constraint matrices into
    /// the parameter directory as v28-<cache id>.params/.vk/.meta, marked insecure
    /// (v28-….params.TEST-ONLY-INSECURE). Refuses a production directory (filecoin-proofs'
    /// default, or one holding real parameters) unless --force-insecure.
    Params {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        /// The circuit: PoRep's, or a PoSt's or SnapDeals' (under its published file name).
        #[arg(long, value_enum, default_value_t = ParamsProof::Porep)]
        proof: ParamsProof,
        /// The parameter directory (`cuzk gpu-node --param-cache`); else
        /// $FIL_PROOFS_PARAMETER_CACHE, else ~/.cache/cuzk/params.
        #[arg(long, env = cuzk_circuits::CACHE_ENV)]
        param_cache: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Engine::Auto)]
        engine: Engine,
        /// Write them even into a production directory.
        #[arg(long)]
        force_insecure: bool,
    },
    /// One partition: constraints, matrix size, full vs witness-only synthesis time (gadgets,
    /// and the native generator on every core and on one), witness blob sizes and decode time.
    Stats {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        /// A sector file (see the tool's help); default: seal a fresh sector.
        #[arg(long)]
        sector: Option<PathBuf>,
        /// Print one JSON object instead of tables.
        #[arg(long)]
        json: bool,
        /// Only the witness paths (gadgets, native; wall and CPU time, checked equal) as one
        /// JSON object: no matrices, full synthesis or blob, for shapes too large for them.
        #[arg(long)]
        witness_only: bool,
    },
    /// A synthetic PoSt partition (the proof's real shape, random contents): its witness by
    /// the gadgets and by the native generator, wall and CPU time, checked equal.
    PostWitness {
        #[arg(long, value_enum)]
        kind: PostKindArg,
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        /// Sectors in the partition (default: the proof's, e.g. 2349 for 32 GiB WindowPoSt).
        #[arg(long)]
        sectors: Option<usize>,
    },
    /// A synthetic SnapDeals partition (the sector size's real circuit, random contents): its
    /// witness by the gadgets and by the native generator, wall and CPU time, checked equal.
    SnapWitness {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        /// Challenges in the partition (default: the circuit's, 86 from 512 MiB up).
        #[arg(long)]
        challenges: Option<usize>,
    },
    /// Prove partition 0 of a sector: once through CPU and CUDA side by side (every step
    /// compared), then `--runs` timed proofs on `--engine`, each checked with `verify_seal`.
    /// Needs the sector size's parameters in the parameter cache.
    Prove {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        #[arg(long)]
        sector: Option<PathBuf>,
        #[arg(long, default_value_t = 10)]
        runs: usize,
        #[arg(long, value_enum, default_value_t = Engine::Auto)]
        engine: Engine,
        /// As for `params`.
        #[arg(long, env = cuzk_circuits::CACHE_ENV)]
        param_cache: Option<PathBuf>,
        /// Print one JSON object after the table.
        #[arg(long)]
        json: bool,
        /// The CUDA backend's device memory budget (bytes, or with a unit: `800MiB`): below
        /// the key's size part of it streams from host memory; the proof is then also checked
        /// against the resident plan's, byte for byte, for the same r, s.
        #[arg(long, value_parser = cuzk_common::config::parse_bytes)]
        gpu_memory_budget: Option<u64>,
        /// Every G1 MSM of the CUDA backend accumulated batch-affine, at sizes where it would
        /// take XYZZ: a real proof through that kernel, compared and checked as above.
        #[arg(long)]
        force_affine: bool,
    },
    /// Write a synthetic C1 (the real shape of a sector size, random contents; for timings, its
    /// proofs prove nothing) as a sector file.
    SyntheticC1 {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        #[arg(long)]
        out: PathBuf,
    },
    /// A sector's partitions synthesized into the work queue first, then drained by a GPU node
    /// with the key preloaded (separate processes; the `cuzk` binary must sit beside this one):
    /// the per-partition stage table, sector wall time, GPU busy, memory peaks.
    Drain {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        #[arg(long)]
        sector: Option<PathBuf>,
        /// Partitions the synth node holds at once (each holds its whole witness).
        #[arg(long, default_value_t = 4)]
        synth_partitions_in_flight: usize,
        /// Extra `cuzk gpu-node` arguments, e.g. `--gpu-backend=cuda`.
        #[arg(long, allow_hyphen_values = true, value_delimiter = ' ')]
        gpu_args: Vec<String>,
        /// Write the figures as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        #[arg(long, default_value_t = 1800)]
        timeout_secs: u64,
    },
    /// C2 of one sector through a local cluster (in-process synth and GPU node on a private
    /// nats-server) vs filecoin-proofs' `seal_commit_phase2`, both on all cores; with
    /// `--throughput N`, N sectors at once through the one host: jobs per second, seconds per
    /// sector in steady state, synthesis core-seconds per partition, GPU busy, peak RSS. Needs
    /// the sector size's parameters in the parameter cache; a synthetic C1 serves for timings.
    Bench {
        #[arg(long, value_parser = clap::value_parser!(SectorSize))]
        sector_size: SectorSize,
        #[arg(long)]
        sector: Option<PathBuf>,
        /// Timed runs of each, after one untimed warm-up (parameter loading) of each; 0: the
        /// warm-up alone (then `--throughput`).
        #[arg(long, default_value_t = 2)]
        runs: usize,
        /// As for `params`.
        #[arg(long, env = cuzk_circuits::CACHE_ENV)]
        param_cache: Option<PathBuf>,
        /// The GPU node's backend.
        #[arg(long, value_enum, default_value_t = Engine::Cpu)]
        engine: Engine,
        /// Skip filecoin-proofs' own C2 (minutes per run on a CPU).
        #[arg(long)]
        no_filecoin: bool,
        /// Then submit this many jobs at once and report jobs per second.
        #[arg(long, default_value_t = 0)]
        throughput: usize,
        /// The synth node's settings (threads default to all cores; on one host its memory
        /// budget shares the memory with the GPU node's key).
        #[command(flatten)]
        synth: Box<SynthArgs>,
        /// The GPU node's settings (the backend follows `--engine` unless given).
        #[command(flatten)]
        gpu: Box<GpuArgs>,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Command::Params { param_cache, .. }
        | Command::Bench { param_cache, .. }
        | Command::Prove { param_cache, .. } => set_param_dir(param_cache.clone())?,
        _ => {}
    }
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
            proof,
            engine,
            force_insecure,
            ..
        } => params(proof, sector_size, engine, force_insecure),
        Command::Stats {
            sector_size,
            sector,
            json,
            witness_only,
        } => stats::run(
            &load_or_seal(sector_size, sector.as_deref())?,
            json,
            witness_only,
        ),
        Command::PostWitness {
            kind,
            sector_size,
            sectors,
        } => stats::post_witness(kind.into(), sector_size, sectors),
        Command::SnapWitness {
            sector_size,
            challenges,
        } => stats::snap_witness(sector_size, challenges),
        Command::Prove {
            sector_size,
            sector,
            runs,
            engine,
            json,
            gpu_memory_budget,
            force_affine,
            ..
        } => prove::run(
            &load_or_seal(sector_size, sector.as_deref())?,
            prove::Options {
                runs,
                engine,
                json,
                budget: gpu_memory_budget,
                force_affine,
            },
        ),
        Command::Bench {
            sector_size,
            sector,
            runs,
            engine,
            no_filecoin,
            throughput,
            synth,
            gpu,
            ..
        } => bench::run(
            &load_or_seal(sector_size, sector.as_deref())?,
            bench::Options {
                runs,
                engine,
                no_filecoin,
                throughput,
                synth,
                gpu,
            },
        ),
        Command::SyntheticC1 { sector_size, out } => {
            let c1 = cuzk_circuits::porep::synthetic_c1(sector_size, &mut rand::rngs::OsRng)?;
            write_sector_file(&out, &c1, random_prover_id(), 1)?;
            println!("{}", out.display());
            Ok(())
        }
        Command::Drain {
            sector_size,
            sector,
            synth_partitions_in_flight,
            gpu_args,
            json,
            timeout_secs,
        } => drain::run(
            &load_or_seal(sector_size, sector.as_deref())?,
            drain::Options {
                synth_in_flight: synth_partitions_in_flight,
                gpu_args,
                json,
                timeout: std::time::Duration::from_secs(timeout_secs),
            },
        ),
    }
}

/// Whether `engine` means CUDA here (`Auto`: when a device is present).
pub fn use_cuda(engine: Engine) -> Result<bool> {
    Ok(match engine {
        Engine::Cpu => false,
        Engine::Auto => cuzk_kernels::cuda_available(),
        Engine::Cuda => {
            if let Some(reason) = cuzk_kernels::cuda_unavailable_reason() {
                anyhow::bail!("--engine cuda: {reason}");
            }
            true
        }
    })
}

fn params(proof: ParamsProof, size: SectorSize, engine: Engine, force: bool) -> Result<()> {
    use cuzk_circuits::post::{PostKind, PostProof};
    let started = Instant::now();
    // The matrices land in the node's shape cache too, so its GPU nodes need not capture them.
    let shapes = cuzk_circuits::ShapeCache::open_default(false)?;
    let post = |kind: PostKind, engine: &dyn cuzk_prover::setup::FixedBase| {
        let proof = PostProof::current(kind, size);
        cuzk_circuits::post::generate_test_parameters(proof, &shapes, engine, force)
    };
    let generate = |engine: &dyn cuzk_prover::setup::FixedBase| match proof {
        ParamsProof::Porep => generate_test_parameters(size, &shapes, engine, force),
        ParamsProof::WindowPost => post(PostKind::Window, engine),
        ParamsProof::WinningPost => post(PostKind::Winning, engine),
        ParamsProof::SnapDeals => {
            cuzk_circuits::snap::generate_test_parameters(size, &shapes, engine, force)
        }
    };
    let path = if use_cuda(engine)? {
        generate(&cuzk_kernels::CudaBackend::new(0, None, 1)?)?
    } else {
        generate(&cuzk_prover::setup::CpuFixedBase::new())?
    };
    tracing::info!(secs = started.elapsed().as_secs_f64(), "parameters ready");
    println!("{}", path.display());
    Ok(())
}

/// The `porep-c2` job parameters of a sector, marked synthetic when its C1 is.
pub fn job_params(sector: &SealedSector) -> serde_json::Value {
    let mut params = sector.job_params();
    let synthetic = serde_json::from_slice::<serde_json::Value>(&sector.c1_json)
        .is_ok_and(|c1| c1.get(cuzk_circuits::porep::SYNTHETIC_KEY) == Some(&true.into()));
    if synthetic {
        params["synthetic"] = true.into();
    }
    params
}

/// A sector file, or a freshly sealed sector of `size`.
fn load_or_seal(size: SectorSize, file: Option<&Path>) -> Result<SealedSector> {
    let Some(path) = file else {
        return seal(size, 1, random_prover_id());
    };
    #[derive(serde::Deserialize)]
    struct SectorFile {
        c1: serde_json::Value,
        prover_id: [u8; 32],
        sector_id: u64,
    }
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let f: SectorFile = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not a sector file", path.display()))?;
    Ok(SealedSector {
        size,
        proof: SealProof::v1_1(size),
        sector_id: f.sector_id,
        prover_id: f.prover_id,
        c1_json: serde_json::to_vec(&f.c1)?,
    })
}

/// Resolves the parameter directory as the nodes do and hands it to filecoin-proofs (which
/// reads its settings from the environment once, on first use) and to the shape cache.
fn set_param_dir(flag: Option<PathBuf>) -> Result<()> {
    let dir = match flag {
        Some(dir) => dir,
        None => ShapeCache::default_dir()?,
    };
    // SAFETY: called first thing in main, before any other thread exists.
    unsafe {
        std::env::set_var(cuzk_circuits::FILECOIN_CACHE_ENV, &dir);
        std::env::set_var(cuzk_circuits::CACHE_ENV, &dir);
    }
    Ok(())
}

pub fn seal(size: SectorSize, sector_id: u64, prover_id: [u8; 32]) -> Result<SealedSector> {
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

pub fn random_prover_id() -> [u8; 32] {
    let mut id = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut id);
    id
}

/// The middle of the values (the upper one of an even count); NaN for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

pub fn job_for(sector: &SealedSector, job_id: &str) -> JobSpec {
    let input = if sector.c1_json.len() <= MAX_INLINE {
        JobInput::Base64(base64::engine::general_purpose::STANDARD.encode(&sector.c1_json))
    } else {
        JobInput::Object(format!("{job_id}.c1.json"))
    };
    JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: job_id.into(),
        circuit: "porep-c2".into(),
        params: job_params(sector),
        input,
        priority: Priority::Normal,
    }
}

/// A sector file, as `--sector` takes it (`load_or_seal`): a C1 output with the ids it was
/// sealed for.
fn write_sector_file(
    path: &Path,
    c1_json: &[u8],
    prover_id: [u8; 32],
    sector_id: u64,
) -> Result<()> {
    let c1: serde_json::Value = serde_json::from_slice(c1_json)?;
    let file = serde_json::json!({"c1": c1, "prover_id": prover_id, "sector_id": sector_id});
    std::fs::write(path, serde_json::to_vec(&file)?)?;
    Ok(())
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
    write_sector_file(
        &out.join("sector.json"),
        &sector.c1_json,
        sector.prover_id,
        sector.sector_id,
    )?;
    let job = job_for(&sector, &format!("porep-{}-{sector_id}", size.name()));
    std::fs::write(out.join("job.json"), serde_json::to_vec(&job)?)?;
    if let JobInput::Object(name) = &job.input {
        println!("C1 is over {MAX_INLINE} bytes: upload c1.json as object {name} in the cuzk-inputs bucket before submitting");
    }
    println!("{}", out.join("job.json").display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// clap checks a command line's definition only in debug builds, as it parses.
    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// `bench` takes both nodes' settings under their own flags.
    #[test]
    fn bench_passes_each_nodes_settings_on() {
        let argv = [
            "cuzk-porep",
            "bench",
            "--sector-size",
            "2KiB",
            "--gpu-workers",
            "3",
            "--synth-memory-budget",
            "1GiB",
        ];
        let Command::Bench { synth, gpu, .. } = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not the bench command");
        };
        assert_eq!(gpu.workers, Some(3));
        assert_eq!(synth.memory_budget.map(|b| b.0), Some(1 << 30));
        assert_eq!(gpu.memory_budget, None);
    }
}
