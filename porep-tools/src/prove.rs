//! `cuzk-porep prove`: one real PoRep partition through the backends, without the cluster
//! around them — what the GPU node's prove step costs.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use blstrs::Scalar;
use cuzk_circuits::porep::{verify_seal, SealedSector};
use cuzk_circuits::ShapeCache;
use cuzk_prover::{proof_bytes, prove, prove_timed, Backend, CpuBackend, Dual, ProveTimings};
use cuzk_wire::job::Stage;
use ff::Field;
use serde_json::json;

use crate::{median, use_cuda, Engine};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub struct Options {
    pub runs: usize,
    pub engine: Engine,
    pub json: bool,
    /// The CUDA backend's device memory budget (default: the device's).
    pub budget: Option<u64>,
    /// Every G1 MSM batch-affine (the kernel instance of the most chunks a thread).
    pub force_affine: bool,
}

pub fn run(sector: &SealedSector, opts: Options) -> Result<()> {
    let Options {
        runs,
        engine,
        json: as_json,
        budget,
        force_affine,
    } = opts;
    let family = cuzk_circuits::resolve("porep-c2", &crate::job_params(sector))?;
    ensure!(
        family.partitions() == 1,
        "prove times single-partition sectors (2KiB, 8MiB, 512MiB)"
    );
    // Test parameters allowed: what `params` writes is marked insecure, and a real file is still
    // checked against its digest.
    let cache = ShapeCache::open_default(true)?;
    let t = Instant::now();
    let key = cache.proving_key(&*family)?;
    let key_ms = ms(t.elapsed());
    let t = Instant::now();
    let w = family.witness(&sector.c1_json, 0, Some((key.info.inputs, key.info.aux)))?;
    let witness_ms = ms(t.elapsed());
    let mut rng = rand::rngs::OsRng;
    let check = |proof: &bellperson::groth16::Proof<blstrs::Bls12>, what: &str| -> Result<()> {
        ensure!(
            verify_seal(sector, &proof_bytes(proof))?,
            "{what}: verify_seal rejected the proof"
        );
        Ok(())
    };

    let cuda = use_cuda(engine)?;
    let (name, runs_t, load_ms) = if cuda {
        let gpu = std::sync::Arc::new(cuzk_kernels::CudaBackend::new(0, budget, 1)?);
        if force_affine {
            gpu.set_accumulation(cuzk_kernels::Accumulation::Affine(0));
        }
        // Once side by side: every step of the CUDA backend against the CPU backend.
        let dual = Dual {
            reference: CpuBackend,
            candidate: gpu.clone(),
        };
        let t = Instant::now();
        let dk = dual.load_key(key.clone())?;
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        check(&prove(&dual, &dk, &w, r, s)?, "CPU and CUDA side by side")?;
        println!(
            "CPU and CUDA backends agree on A·w, B·w, C·w, H and every MSM ({:.1} s); verify_seal accepts the proof",
            t.elapsed().as_secs_f64()
        );
        drop(dk);
        if budget.is_some() {
            same_as_resident(&gpu, &key, &w, &check)?;
        }
        time_runs(&*gpu, key, &w, runs, &check)?
    } else {
        time_runs(&CpuBackend, key, &w, runs, &check)?
    };
    let med = |f: fn(&ProveTimings) -> Duration| median(runs_t.iter().map(|t| ms(f(t))).collect());
    let min_total = runs_t
        .iter()
        .map(|t| ms(t.total))
        .fold(f64::INFINITY, f64::min);
    // Each stage inside the proof, then the whole proof, by the stages' own labels and fields.
    let row: Vec<(Stage, f64)> = ProveTimings::default()
        .stages()
        .iter()
        .enumerate()
        .map(|(i, (stage, _))| {
            let v = median(runs_t.iter().map(|t| ms(t.stages()[i].1)).collect());
            (*stage, v)
        })
        .chain([(Stage::Prove, med(|t| t.total))])
        .collect();
    println!(
        "\n{} partition 0 on {name}: key {key_ms:.0} ms to host, {load_ms:.0} ms into the backend; witness {witness_ms:.0} ms; {} timed proofs, each checked by verify_seal",
        sector.size.name(),
        runs_t.len()
    );
    println!("| stage | median ms |");
    println!("|---|---|");
    for (stage, v) in &row {
        println!("| {} | {v:.1} |", stage.label());
    }
    println!("| total (min) | {min_total:.1} |");
    if as_json {
        let mut j = json!({
            "sector_size": sector.size.name(),
            "backend": name,
            "runs": runs_t.len(),
            "prove_min_ms": min_total,
            "witness_synth_ms": witness_ms,
        });
        for (stage, v) in &row {
            j[stage.field()] = json!(v);
        }
        println!("{j}");
    }
    Ok(())
}

/// The budget's plan and the resident one prove the same bytes for the same r, s.
fn same_as_resident(
    gpu: &cuzk_kernels::CudaBackend,
    key: &std::sync::Arc<cuzk_prover::ProvingKey>,
    w: &cuzk_wire::witness::Witness,
    check: &Checker<'_>,
) -> Result<()> {
    let mut rng = rand::rngs::OsRng;
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    // The budget's key is let go before the resident one loads beside it.
    let (plan, ours) = {
        let planned = gpu.load_key(key.clone())?;
        (gpu.plan_summary(&planned), prove(gpu, &planned, w, r, s)?)
    };
    let resident = cuzk_kernels::CudaBackend::new(0, None, 1)?;
    let rk = resident.load_key(key.clone())?;
    let theirs = prove(&resident, &rk, w, r, s)?;
    check(&ours, "the budget's plan")?;
    ensure!(
        proof_bytes(&ours) == proof_bytes(&theirs),
        "the budget's plan ({plan}) and the resident plan prove different bytes for the same r, s"
    );
    println!(
        "the budget's plan ({plan}; device peak {:.3} GiB of {:.3}) proves the resident plan's bytes for the same r, s",
        gpu.device_peak() as f64 / (1u64 << 30) as f64,
        gpu.key_budget() as f64 / (1u64 << 30) as f64
    );
    Ok(())
}

type Checker<'a> = dyn Fn(&bellperson::groth16::Proof<blstrs::Bls12>, &str) -> Result<()> + 'a;

/// One warm-up, then `runs` timed proofs of `w` on `backend`, each checked.
fn time_runs<B: Backend>(
    backend: &B,
    key: std::sync::Arc<cuzk_prover::ProvingKey>,
    w: &cuzk_wire::witness::Witness,
    runs: usize,
    check: &Checker<'_>,
) -> Result<(&'static str, Vec<ProveTimings>, f64)> {
    let t = Instant::now();
    let k = backend.load_key(key)?;
    let load_ms = ms(t.elapsed());
    let mut rng = rand::rngs::OsRng;
    let mut out = Vec::with_capacity(runs);
    for i in 0..=runs {
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let (proof, t) = prove_timed(backend, &k, w, r, s)?;
        check(&proof, &format!("run {i}"))?;
        if i > 0 {
            out.push(t);
        }
    }
    Ok((backend.name(), out, load_ms))
}
