//! Whole partitions: CUDA against the CPU backend through [`Dual`] (every step compared — A·w,
//! B·w, C·w, H, each MSM — and the proofs byte for byte), then timed.
//!
//! - a toy circuit with bellperson's own parameters: the proofs also equal bellperson's
//!   `create_proof_batch` for the same r, s;
//! - MiMC partitions of a 2^L domain with parameters from our generator (`--partition-logs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::{create_proof_batch, prepare_verifying_key};
use blstrs::{Bls12, Scalar};
use cuzk_circuits::{CircuitFamily, MimcFamily};
use cuzk_kernels::CudaBackend;
use cuzk_prover::setup::{self, CpuFixedBase};
use cuzk_prover::{proof_bytes, prove, prove_timed, verify, Backend, CpuBackend, Dual};
use cuzk_prover::{ProveTimings, ProvingKey, ShapeMatrices};
use ff::Field;

use crate::inputs::{median, rng_from, Chain};
use crate::{Args, Report};

/// The toy circuit at two sizes: CPU, CUDA and bellperson agree byte for byte.
pub fn check_toy(be: &Arc<CudaBackend>, seed: u64, rep: &mut Report) {
    for rounds in [1000usize, 70_000] {
        let mut r = rng_from(seed, 900 + rounds as u64);
        let (params, blank, circ) = Chain::instance(rounds, &mut r);
        let inputs = circ.public_inputs();
        let (rr, ss) = (Scalar::random(&mut r), Scalar::random(&mut r));
        let theirs = create_proof_batch(vec![circ.clone()], &*params, vec![rr], vec![ss]).unwrap();
        let matrices = Arc::new(cuzk_prover::r1cs::capture(blank).unwrap());
        let key = Arc::new(ProvingKey::new(params.clone(), matrices).unwrap());
        let w = cuzk_prover::synthesize_witness(circ, None).unwrap();
        let ok = match dual_prove(be, key, &w, rr, ss) {
            Ok(p) => {
                let pvk = prepare_verifying_key(&params.vk);
                proof_bytes(&p) == proof_bytes(&theirs[0])
                    && verify(&pvk, &p, &inputs).unwrap_or(false)
            }
            Err(e) => {
                println!("  {e}");
                false
            }
        };
        rep.check(
            &format!("toy circuit ({rounds} rounds): CPU and CUDA steps equal, proof = bellperson's, verifies"),
            ok,
        );
    }
}

fn dual_prove(
    be: &Arc<CudaBackend>,
    key: Arc<ProvingKey>,
    w: &cuzk_wire::witness::Witness,
    r: Scalar,
    s: Scalar,
) -> Result<bellperson::groth16::Proof<Bls12>, cuzk_prover::BackendError> {
    let dual = Dual {
        reference: CpuBackend,
        candidate: be.clone(),
    };
    let k = dual.load_key(key)?;
    prove(&dual, &k, w, r, s)
}

/// Parameters for `m` from our generator (CPU engine), read back: (key, seconds).
fn generated_key(m: Arc<ShapeMatrices>, seed: u64) -> (Arc<ProvingKey>, f64) {
    let t = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.params");
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        setup::generate(&m, &mut rng_from(seed, 1), &CpuFixedBase::new(), &mut out).unwrap();
    }
    let params = cuzk_prover::params::read_params(&path, false).unwrap();
    let secs = t.elapsed().as_secs_f64();
    (
        Arc::new(ProvingKey::new(Arc::new(params), m).unwrap()),
        secs,
    )
}

/// MiMC partitions of 2^L domains: checked through `Dual`, then each backend timed.
pub fn run_partition_bench(
    args: &Args,
    be: &Arc<CudaBackend>,
    seed: u64,
    rep: &mut Report,
    rows: &mut Vec<String>,
) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (idx, &log) in args.partition_logs.iter().enumerate() {
        let rounds = args
            .partition_rounds
            .get(idx)
            .copied()
            .unwrap_or((1usize << (log - 1)) - 16);
        let fam = MimcFamily::new(rounds, 1).expect("mimc rounds in range");
        let input = b"cuzk-gpu-check partition";
        let t = Instant::now();
        let m = Arc::new(fam.capture_matrices().expect("capture"));
        let capture_s = t.elapsed().as_secs_f64();
        let (key, gen_s) = generated_key(m.clone(), seed + log as u64);
        let t = Instant::now();
        let w = fam
            .witness(input, 0, Some((m.inputs, m.aux)))
            .expect("witness");
        let synth_s = t.elapsed().as_secs_f64();
        let inputs = fam.public_inputs(input, 0).unwrap();
        println!(
            "partition 2^{log}: mimc rounds {rounds}, {} constraints, {} non-zeros, domain 2^{}; matrices captured in {capture_s:.2} s, parameters generated in {gen_s:.1} s, witness in {synth_s:.2} s",
            m.constraints(),
            m.nnz(),
            key.info.log_m
        );
        let mut r = rng_from(seed, 7000 + log as u64);
        let (rr, ss) = (Scalar::random(&mut r), Scalar::random(&mut r));
        let checked = dual_prove(be, key.clone(), &w, rr, ss);
        let pvk = prepare_verifying_key(&key.info.vk);
        rep.check(
            &format!("partition 2^{log} (mimc {rounds} rounds): CPU and CUDA steps equal, proof verifies"),
            matches!(&checked, Ok(p) if verify(&pvk, p, &inputs).unwrap_or(false)),
        );
        if let Err(e) = &checked {
            println!("  {e}");
            continue;
        }

        let cpu_key = CpuBackend.load_key(key.clone()).unwrap();
        let (_, tc) = prove_timed(&CpuBackend, &cpu_key, &w, rr, ss).expect("cpu prove");
        drop(cpu_key);
        let t = Instant::now();
        let gpu_key = be.load_key(key).expect("gpu load_key");
        let load_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut runs: Vec<ProveTimings> = Vec::new();
        for i in 0..=args.reps.max(1) {
            let (_, tg) = prove_timed(be, &gpu_key, &w, rr, ss).expect("gpu prove");
            if i > 0 {
                runs.push(tg);
            }
        }
        let med =
            |f: &dyn Fn(&ProveTimings) -> Duration| median(runs.iter().map(|t| ms(f(t))).collect());
        println!(
            "  gpu: key upload {load_ms:.1} ms; medians of {}",
            runs.len()
        );
        for (what, f) in [
            (
                "h2d",
                &(|t: &ProveTimings| t.h2d) as &dyn Fn(&ProveTimings) -> Duration,
            ),
            ("SpMV", &|t: &ProveTimings| t.spmv),
            ("H", &|t: &ProveTimings| t.h),
            ("MSM", &|t: &ProveTimings| t.msm),
            ("total", &|t: &ProveTimings| t.total),
        ] {
            let (c, g) = (ms(f(&tc)), med(f));
            rows.push(format!(
                "| 2^{log} mimc r={rounds:<8} | {what:<5} | {c:>10.1} | {g:>9.1} | {:>7.1}x |",
                c / g.max(1e-9)
            ));
        }
    }
}
