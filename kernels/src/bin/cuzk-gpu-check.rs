//! GPU vs CPU checks on fresh random inputs, then a benchmark table (printed last).
//!
//!   cuzk-gpu-check [--max-log N] [--bench-max-log N] [--no-bench] [--no-check] [--reps N] (--help)
//!                  [--partition-logs 20,22] [--partition-rounds R1,R2] [--g1-logs 24]
//!
//! `--partition-logs`: whole-partition Groth16 proves of a MiMC circuit (cuzk-circuits, 2
//! constraints per round; rounds 2^(L-1) - 16 unless `--partition-rounds` says) with test
//! parameters generated in-process: CPU backend vs CUDA backend on the same r, s (proofs must
//! be byte-identical and verify), H / MSM / total per backend, plus the GPU time split.
//! `--g1-logs`: G1 MSM only (scalars on device), median of `--reps`.
//!
//! Exit status: 0 all checks passed, 1 a check failed, 2 no CUDA device / no kernels.

use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::{generate_random_parameters, prepare_verifying_key};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{
    prime::{PrimeCurve, PrimeCurveAffine},
    Group,
};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use cuzk_prover::backend::Backend;
use cuzk_prover::cpu;

#[cfg(cuzk_fatbin)]
use cuzk_kernels::{CudaBackend, DeviceBases, Gpu, NttKind};

/// GPU vs CPU checks on fresh random inputs, then benchmark tables.
#[derive(clap::Parser)]
#[command(version)]
struct Args {
    /// Largest NTT / G1 MSM checked, log2.
    #[arg(long, env = "CUZK_CHECK_MAX_LOG", default_value_t = 24)]
    max_log: u32,
    /// Largest size benchmarked, log2.
    #[arg(long, env = "CUZK_CHECK_BENCH_MAX_LOG", default_value_t = 26)]
    bench_max_log: u32,
    /// Largest G2 MSM checked and benchmarked, log2.
    #[arg(long, env = "CUZK_CHECK_G2_MAX_LOG", default_value_t = 22)]
    g2_max_log: u32,
    /// Skip the benchmark tables.
    #[arg(long, env = "CUZK_CHECK_NO_BENCH")]
    no_bench: bool,
    /// Skip the GPU-vs-CPU checks.
    #[arg(long, env = "CUZK_CHECK_NO_CHECK")]
    no_check: bool,
    /// Timed repetitions (the median is reported).
    #[arg(long, env = "CUZK_CHECK_REPS", default_value_t = 5)]
    reps: usize,
    /// Whole-partition proves at these log2 sizes (comma-separated).
    #[arg(long, env = "CUZK_CHECK_PARTITION_LOGS", value_delimiter = ',')]
    partition_logs: Vec<u32>,
    /// MiMC rounds per partition size (default 2^(L-1) - 16).
    #[arg(long, env = "CUZK_CHECK_PARTITION_ROUNDS", value_delimiter = ',')]
    partition_rounds: Vec<usize>,
    /// Seconds the whole partition bench may take; a size whose parameter generation is
    /// predicted (from the previous size) to overrun it gets random bases instead.
    #[arg(long, env = "CUZK_CHECK_PARTITION_BUDGET_S", default_value_t = f64::INFINITY)]
    partition_budget_s: f64,
    /// G1 MSM only (scalars on device) at these log2 sizes, median of `--reps`.
    #[arg(long, env = "CUZK_CHECK_G1_LOGS", value_delimiter = ',')]
    g1_logs: Vec<u32>,
}

fn rng_from(seed: u64, stream: u64) -> ChaCha20Rng {
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

fn random_scalars(seed: u64, n: usize) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(1 << 14).enumerate().for_each(|(i, c)| {
        let mut r = rng_from(seed, i as u64);
        c.iter_mut().for_each(|x| *x = Scalar::random(&mut r));
    });
    v
}

/// Random points fast: per chunk of 4096, start·G + k·D (one scalar multiplication per chunk,
/// then additions), normalised in one batch per chunk. `stream` keeps G1 and G2 draws apart.
fn random_points<G>(seed: u64, stream: u64, n: usize) -> Vec<G::Affine>
where
    G: PrimeCurve<Scalar = Scalar> + Send + Sync,
    G::Affine: Send,
{
    let mut r = rng_from(seed, stream);
    let d = G::generator() * Scalar::random(&mut r);
    let mut out = vec![G::Affine::identity(); n];
    out.par_chunks_mut(4096).enumerate().for_each(|(i, c)| {
        let mut r = rng_from(seed, stream + (1 << 40) + i as u64);
        let mut p = G::generator() * Scalar::random(&mut r);
        let mut proj = Vec::with_capacity(c.len());
        for _ in 0..c.len() {
            proj.push(p);
            p += d;
        }
        G::batch_normalize(&proj, c);
    });
    out
}

fn random_g1(seed: u64, n: usize) -> Vec<G1Affine> {
    random_points::<G1Projective>(seed, 1 << 40, n)
}

fn random_g2(seed: u64, n: usize) -> Vec<G2Affine> {
    random_points::<G2Projective>(seed, 1 << 42, n)
}

/// The first n bases with identity points (every 7th), one point repeated (every 5th: the
/// doubling path inside a bucket) and its negation (every 11th: cancellation).
fn edge_points<A: PrimeCurveAffine>(bases: &[A], n: usize) -> Vec<A> {
    let mut eb = bases[..n].to_vec();
    for i in (0..n).step_by(7) {
        eb[i] = A::identity();
    }
    for i in (1..n).step_by(5) {
        eb[i] = eb[1];
    }
    for i in (2..n).step_by(11) {
        eb[i] = -eb[3];
    }
    eb
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm-up
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

struct Report {
    fails: usize,
    checks: usize,
}

impl Report {
    fn check(&mut self, name: &str, ok: bool) {
        self.checks += 1;
        if !ok {
            self.fails += 1;
        }
        println!("{} {name}", if ok { "PASS" } else { "FAIL" });
    }
}

/// A toy circuit with `rounds` squarings: several inputs, an aux variable in C only, inputs in B.
#[derive(Clone)]
struct Chain {
    x: Option<Scalar>,
    y: Option<Scalar>,
    rounds: usize,
}

impl Chain {
    fn public_inputs(&self) -> Vec<Scalar> {
        let (mut x, y) = (self.x.unwrap(), self.y.unwrap());
        for _ in 0..self.rounds {
            x = x * x + y;
        }
        vec![y, x]
    }
}

impl Circuit<Scalar> for Chain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let y_val = self.y;
        let y_in = cs.alloc_input(|| "y", || y_val.ok_or(SynthesisError::AssignmentMissing))?;
        let mut x_val = self.x;
        let mut x = cs.alloc(|| "x", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        let sq = cs.alloc(
            || "x2",
            || {
                x_val
                    .map(|v| v * v)
                    .ok_or(SynthesisError::AssignmentMissing)
            },
        )?;
        cs.enforce(|| "sq", |lc| lc + x, |lc| lc + x, |lc| lc + sq);
        for i in 0..self.rounds {
            let nv = x_val.zip(y_val).map(|(x, y)| x * x + y);
            let next = cs.alloc(
                || format!("x{i}"),
                || nv.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(
                || format!("r{i}"),
                |lc| lc + x,
                |lc| lc + x,
                |lc| lc + next - y_in,
            );
            x = next;
            x_val = nv;
        }
        let out = cs.alloc_input(|| "out", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(
            || "out",
            |lc| lc + x,
            |lc| lc + CS::one() + y_in - y_in,
            |lc| lc + out,
        );
        Ok(())
    }
}

#[cfg(cuzk_fatbin)]
fn run_checks(args: &Args, be: &CudaBackend, seed: u64, rep: &mut Report) {
    let gpu = be.gpu();
    let kinds = [
        (
            NttKind::Forward,
            "ntt",
            cpu::ntt as fn(&mut [Scalar], Scalar),
        ),
        (NttKind::Inverse, "intt", cpu::intt),
        (NttKind::Coset, "coset_ntt", cpu::coset_ntt),
        (NttKind::InverseCoset, "icoset_ntt", cpu::icoset_ntt),
    ];
    for log in [1u32, 2, 5, 10, 11, 13, 16, 17, 20, 22, 24]
        .into_iter()
        .filter(|&l| l <= args.max_log)
    {
        let v = random_scalars(seed ^ log as u64, 1 << log);
        for (k, name, f) in kinds {
            let mut c = v.clone();
            f(&mut c, cpu::omega(log));
            let mut g = v.clone();
            let ok = gpu.transform(&mut g, k).map(|_| g == c);
            rep.check(&format!("{name} 2^{log}"), matches!(ok, Ok(true)));
        }
    }
    for n in [
        1usize,
        3,
        1000,
        4097,
        (1 << 16) + 5,
        (1 << 20) - 3,
        (1 << 22) + 1,
        1 << 24,
    ] {
        if n > 1 << args.max_log {
            continue;
        }
        let a = random_scalars(seed + 11, n);
        let b = random_scalars(seed + 12, n);
        let c = random_scalars(seed + 13, n);
        let want = cpu::compute_h(a.clone(), b.clone(), c.clone()).unwrap();
        let got = gpu.compute_h(&a, &b, &c);
        rep.check(
            &format!("compute_h n={n}"),
            matches!(got, Ok(ref h) if *h == want),
        );
    }

    // ---- MSM G1
    let max_g1 = 1usize << args.max_log;
    let bases1 = random_g1(seed + 21, max_g1);
    let d1 = gpu.upload_g1(&bases1).expect("upload G1 bases");
    let g1_case =
        |rep: &mut Report, name: &str, bases: &[G1Affine], d: &DeviceBases, s: &[Scalar]| {
            let want = cpu::msm_g1(&bases[..s.len()], s);
            let got = gpu.msm_g1(d, s);
            rep.check(&format!("msm_g1 {name}"), matches!(got, Ok(g) if g == want));
        };
    for log in [0u32, 1, 4, 10, 12, 16, 18, 20, 22, 24]
        .into_iter()
        .filter(|&l| l <= args.max_log)
    {
        let s = random_scalars(seed + 100 + log as u64, 1 << log);
        g1_case(rep, &format!("2^{log}"), &bases1, &d1, &s);
    }
    for n in [1000usize, 12345, 100_003] {
        let s = random_scalars(seed + 200 + n as u64, n);
        g1_case(rep, &format!("n={n}"), &bases1, &d1, &s);
    }
    // edge cases on 2^14 points
    let n = 1 << 14;
    let mut r = rng_from(seed, 77);
    let rnd = random_scalars(seed + 300, n);
    let zero = vec![Scalar::ZERO; n];
    g1_case(rep, "all-zero scalars", &bases1, &d1, &zero);
    let mut sparse = zero.clone();
    for _ in 0..50 {
        sparse[(r.next_u32() as usize) % n] = Scalar::random(&mut r);
    }
    g1_case(rep, "mostly-zero scalars", &bases1, &d1, &sparse);
    g1_case(rep, "all r-1", &bases1, &d1, &vec![-Scalar::ONE; n]);
    g1_case(
        rep,
        "all one (one bucket)",
        &bases1,
        &d1,
        &vec![Scalar::ONE; n],
    );
    let small: Vec<Scalar> = (0..n)
        .map(|_| Scalar::from(r.next_u32() as u64 % 3))
        .collect();
    g1_case(rep, "bits and twos", &bases1, &d1, &small);
    let eb = edge_points(&bases1, n);
    let de = gpu.upload_g1(&eb).unwrap();
    g1_case(
        rep,
        "identity/repeated/negated points, random scalars",
        &eb,
        &de,
        &rnd,
    );
    g1_case(
        rep,
        "identity/repeated/negated points, scalar one",
        &eb,
        &de,
        &vec![Scalar::ONE; n],
    );
    let mut mix = rnd.clone();
    for (i, m) in mix.iter_mut().enumerate() {
        if i % 3 == 0 {
            *m = -Scalar::ONE;
        }
        if i % 4 == 0 {
            *m = Scalar::ZERO;
        }
    }
    g1_case(
        rep,
        "identity/repeated/negated points, mixed scalars",
        &eb,
        &de,
        &mix,
    );
    let empty = gpu.msm_g1(&d1, &[]);
    rep.check(
        "msm_g1 empty = identity",
        matches!(empty, Ok(g) if bool::from(g.is_identity())),
    );
    drop(d1);
    drop(bases1);

    // ---- MSM G2
    let max_g2 = 1usize << args.g2_max_log.min(args.max_log);
    let bases2 = random_g2(seed + 31, max_g2.max(1 << 14));
    let d2 = gpu.upload_g2(&bases2).expect("upload G2 bases");
    let g2_case =
        |rep: &mut Report, name: &str, bases: &[G2Affine], d: &DeviceBases, s: &[Scalar]| {
            let want = cpu::msm_g2(&bases[..s.len()], s);
            let got = gpu.msm_g2(d, s);
            rep.check(&format!("msm_g2 {name}"), matches!(got, Ok(g) if g == want));
        };
    for log in [0u32, 4, 10, 12, 16, 20, 22]
        .into_iter()
        .filter(|&l| l <= args.g2_max_log.min(args.max_log))
    {
        let s = random_scalars(seed + 400 + log as u64, 1 << log);
        g2_case(rep, &format!("2^{log}"), &bases2, &d2, &s);
    }
    g2_case(
        rep,
        "n=12345",
        &bases2,
        &d2,
        &random_scalars(seed + 500, 12345),
    );
    g2_case(rep, "all r-1", &bases2, &d2, &vec![-Scalar::ONE; n]);
    g2_case(rep, "all one", &bases2, &d2, &vec![Scalar::ONE; n]);
    g2_case(rep, "mostly-zero", &bases2, &d2, &sparse);
    let eb2 = edge_points(&bases2, n);
    let de2 = gpu.upload_g2(&eb2).unwrap();
    g2_case(
        rep,
        "identity/repeated/negated points, mixed scalars",
        &eb2,
        &de2,
        &mix,
    );
    drop((d2, de2, bases2));

    // ---- whole proof, CPU vs GPU backend, same r and s
    for rounds in [1000usize, 70_000] {
        let mut r = rng_from(seed, 900 + rounds as u64);
        let params = generate_random_parameters::<Bls12, _, _>(
            Chain {
                x: None,
                y: None,
                rounds,
            },
            &mut r,
        )
        .unwrap();
        let params = Arc::new(params);
        let circ = Chain {
            x: Some(Scalar::random(&mut r)),
            y: Some(Scalar::random(&mut r)),
            rounds,
        };
        let inputs = circ.public_inputs();
        let asg = cuzk_prover::synthesize(circ).unwrap();
        let (rr, ss) = (Scalar::random(&mut r), Scalar::random(&mut r));
        let cpu_be = cuzk_prover::CpuBackend;
        let cpu_srs = cpu_be.load_srs(params.clone()).unwrap();
        let p_cpu = cuzk_prover::prove(&cpu_be, &cpu_srs, &params.vk, asg.clone(), rr, ss).unwrap();
        let gpu_srs = be.load_srs(params.clone()).unwrap();
        let p_gpu = cuzk_prover::prove(be, &gpu_srs, &params.vk, asg, rr, ss);
        let ok = match p_gpu {
            Ok(p) => {
                let pvk = prepare_verifying_key(&params.vk);
                cuzk_prover::proof_bytes(&p) == cuzk_prover::proof_bytes(&p_cpu)
                    && cuzk_prover::verify(&pvk, &p, &inputs).unwrap_or(false)
            }
            Err(e) => {
                println!("  gpu prove error: {e}");
                false
            }
        };
        rep.check(
            &format!("groth16 proof byte-identical + verifies ({rounds} rounds)"),
            ok,
        );
    }
}

#[cfg(cuzk_fatbin)]
fn run_bench(args: &Args, be: &CudaBackend, seed: u64, rows: &mut Vec<String>) {
    let gpu: &Gpu = be.gpu();
    let reps = args.reps;
    let row = |rows: &mut Vec<String>, what: String, gpu_ms: f64, cpu_ms: Option<f64>| {
        let (c, ratio) = match cpu_ms {
            Some(c) => (format!("{c:.1}"), format!("{:.1}x", c / gpu_ms)),
            None => ("-".into(), "-".into()),
        };
        let line = format!("| {what:<38} | {gpu_ms:>10.2} | {c:>10} | {ratio:>7} |");
        println!("{line}");
        rows.push(line);
    };
    let cpu_reps = |log: u32| if log <= 20 { 3 } else { 1 };
    // NTT on device-resident data
    for log in [20u32, 22, 24, 26]
        .into_iter()
        .filter(|&l| l <= args.bench_max_log)
    {
        let v = random_scalars(seed + 1000 + log as u64, 1 << log);
        let d = gpu.upload(cuzk_kernels_bytes(&v)).unwrap();
        let g = time_ms(reps, || {
            gpu.transform_device(&d, log, NttKind::Forward).unwrap()
        });
        let c = (log <= 24).then(|| {
            time_ms(cpu_reps(log), || {
                let mut w = v.clone();
                cpu::ntt(&mut w, cpu::omega(log));
            })
        });
        row(rows, format!("NTT 2^{log} (device-resident)"), g, c);
    }
    // H pipeline host -> host
    for log in [22u32, 24].into_iter().filter(|&l| l <= args.bench_max_log) {
        let n = 1usize << log;
        let (a, b, c) = (
            random_scalars(seed + 1, n),
            random_scalars(seed + 2, n),
            random_scalars(seed + 3, n),
        );
        let g = time_ms(reps, || {
            gpu.compute_h(&a, &b, &c).unwrap();
        });
        let cm = time_ms(1, || {
            cpu::compute_h(a.clone(), b.clone(), c.clone()).unwrap();
        });
        row(
            rows,
            format!("H pipeline 2^{log} (host->host)"),
            g,
            Some(cm),
        );
    }
    // G1 MSM
    let maxn = 1usize << args.bench_max_log;
    let t = Instant::now();
    let bases = random_g1(seed + 2000, maxn);
    println!(
        "generated 2^{} G1 bases in {:.1} s",
        args.bench_max_log,
        t.elapsed().as_secs_f64()
    );
    let db = gpu.upload_g1(&bases).unwrap();
    for log in [20u32, 22, 24, 26]
        .into_iter()
        .filter(|&l| l <= args.bench_max_log)
    {
        let n = 1usize << log;
        let s = random_scalars(seed + 3000 + log as u64, n);
        let ds = gpu.upload_scalars(&s).unwrap();
        let g = time_ms(reps, || {
            gpu.msm_g1_device(&db, &ds, n).unwrap();
        });
        let gh = time_ms(reps, || {
            gpu.msm_g1(&db, &s).unwrap();
        });
        let c = (log <= 24).then(|| {
            time_ms(cpu_reps(log), || {
                cpu::msm_g1(&bases[..n], &s);
            })
        });
        row(rows, format!("G1 MSM 2^{log} (scalars on device)"), g, c);
        row(rows, format!("G1 MSM 2^{log} (scalars from host)"), gh, c);
    }
    drop(db);
    drop(bases);
    let g2max = args.bench_max_log.min(24);
    let bases = random_g2(seed + 4000, 1 << g2max);
    let db = gpu.upload_g2(&bases).unwrap();
    for log in [20u32, 22, 24].into_iter().filter(|&l| l <= g2max) {
        let n = 1usize << log;
        let s = random_scalars(seed + 5000 + log as u64, n);
        let ds = gpu.upload_scalars(&s).unwrap();
        let g = time_ms(reps, || {
            gpu.msm_g2_device(&db, &ds, n).unwrap();
        });
        let c = (log <= 22).then(|| {
            time_ms(1, || {
                cpu::msm_g2(&bases[..n], &s);
            })
        });
        row(rows, format!("G2 MSM 2^{log} (scalars on device)"), g, c);
    }
}

/// Whole-partition proves of a MiMC circuit (2^L-domain), CPU backend vs CUDA backend.
#[cfg(cuzk_fatbin)]
fn run_partition_bench(
    args: &Args,
    be: &CudaBackend,
    seed: u64,
    rep: &mut Report,
    rows: &mut Vec<String>,
) {
    use cuzk_circuits::{CircuitFamily, MimcFamily};
    let gpu: &Gpu = be.gpu();
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let bench_start = Instant::now();
    let mut last_gen: Option<(u32, f64)> = None;
    for (idx, &log) in args.partition_logs.iter().enumerate() {
        let rounds = args
            .partition_rounds
            .get(idx)
            .copied()
            .unwrap_or((1usize << (log - 1)) - 16);
        let fam = MimcFamily::new(rounds, 1).expect("mimc rounds in range");
        let mut r = rng_from(seed, 7000 + log as u64);
        let input = b"cuzk-gpu-check partition";
        let t = Instant::now();
        let asg = fam.synthesize_partition(input, 0).expect("synthesize");
        let synth_s = t.elapsed().as_secs_f64();
        let inputs = fam.public_inputs(input, 0).unwrap();
        let left = args.partition_budget_s - bench_start.elapsed().as_secs_f64();
        let predicted = last_gen.map(|(l, s): (u32, f64)| s * 2f64.powi((log - l) as i32) * 1.15);
        let real = predicted.is_none_or(|p| p < 0.6 * left);
        let t = Instant::now();
        let params = Arc::new(if real {
            fam.generate_test_params(&mut r).expect("generate params")
        } else {
            let h_len = gpu.compute_h(&asg.a, &asg.b, &asg.c).unwrap().len();
            random_params(&asg, h_len, seed + 7100 + log as u64)
        });
        let gen_s = t.elapsed().as_secs_f64();
        if real {
            last_gen = Some((log, gen_s));
        }
        let domain = (params.h.len() + 1).next_power_of_two();
        println!(
            "partition 2^{log}: mimc rounds {rounds}, {} constraints, domain {domain} (2^{}), {} aux; synthesized in {synth_s:.2} s; {}",
            asg.num_constraints(),
            domain.trailing_zeros(),
            asg.aux.len(),
            if real {
                format!("test params (bellperson generate_random_parameters) generated in {gen_s:.1} s")
            } else {
                format!(
                    "RANDOM BASES, not an SRS (generation predicted {:.0} s, {left:.0} s of budget left): proofs compared byte for byte, not verified; built in {gen_s:.1} s",
                    predicted.unwrap_or(0.0)
                )
            }
        );
        let (rr, ss) = (Scalar::random(&mut r), Scalar::random(&mut r));

        // CPU backend: one prove (seconds long).
        let cpu_be = cuzk_prover::CpuBackend;
        let cpu_srs = cpu_be.load_srs(params.clone()).unwrap();
        let (p_cpu, tc) =
            cuzk_prover::prove_timed(&cpu_be, &cpu_srs, &params.vk, asg.clone(), rr, ss)
                .expect("cpu prove");
        println!(
            "  cpu: H {:.1} ms, MSM {:.1} ms, total {:.1} ms",
            ms(tc.h),
            ms(tc.msm),
            ms(tc.total)
        );

        // CUDA backend: SRS upload once, a warm-up prove, then the median of `reps`.
        let t = Instant::now();
        let gpu_srs = be.load_srs(params.clone()).expect("gpu load_srs");
        let load_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut runs = Vec::new();
        let mut p_gpu = None;
        for i in 0..=args.reps.max(1) {
            match cuzk_prover::prove_timed(be, &gpu_srs, &params.vk, asg.clone(), rr, ss) {
                Ok((p, tg)) => {
                    if i > 0 {
                        runs.push(tg);
                    }
                    p_gpu = Some(p);
                }
                Err(e) => {
                    println!("  gpu prove error: {e}");
                    break;
                }
            }
        }
        let ok = match &p_gpu {
            Some(p) => {
                let pvk = prepare_verifying_key(&params.vk);
                cuzk_prover::proof_bytes(p) == cuzk_prover::proof_bytes(&p_cpu)
                    && (!real || cuzk_prover::verify(&pvk, p, &inputs).unwrap_or(false))
            }
            None => false,
        };
        let what = if real {
            "byte-identical + verify"
        } else {
            "byte-identical (random bases)"
        };
        rep.check(
            &format!("partition 2^{log} (mimc {rounds} rounds): CPU and CUDA proofs {what}"),
            ok,
        );
        if runs.is_empty() {
            continue;
        }
        let med =
            |f: &dyn Fn(&cuzk_prover::ProveTimings) -> f64| median(runs.iter().map(f).collect());
        let (gh, gm, gt) = (
            med(&|t| ms(t.h)),
            med(&|t| ms(t.msm)),
            med(&|t| ms(t.total)),
        );
        println!("  gpu: SRS upload {load_ms:.1} ms; H {gh:.1} ms, MSM {gm:.1} ms, total {gt:.1} ms (median of {})", runs.len());
        for (what, c, g) in [
            ("H", ms(tc.h), gh),
            ("MSM", ms(tc.msm), gm),
            ("total", ms(tc.total), gt),
        ] {
            let line = format!(
                "| 2^{log} mimc r={rounds:<8}{} | {what:<5} | {c:>10.1} | {g:>9.1} | {:>7.1}x |",
                if real { " SRS " } else { " rand" },
                c / g
            );
            rows.push(line);
        }

        // Where the GPU time goes: the backend's steps run one by one (each returns to the host).
        let mut a_s = asg.input.clone();
        cuzk_kernels::push_dense(&mut a_s, &asg.aux, &asg.a_aux_density);
        let mut b_s = Vec::new();
        cuzk_kernels::push_dense(&mut b_s, &asg.input, &asg.b_input_density);
        cuzk_kernels::push_dense(&mut b_s, &asg.aux, &asg.b_aux_density);
        let h = gpu.compute_h(&asg.a, &asg.b, &asg.c).unwrap();
        let reps = args.reps.max(1);
        let t_h = time_ms(reps, || {
            gpu.compute_h(&asg.a, &asg.b, &asg.c).unwrap();
        });
        let dv = gpu.upload_scalars(&asg.a).unwrap();
        let t_ntt = time_ms(reps, || {
            gpu.transform_device(&dv, domain.trailing_zeros(), NttKind::Forward)
                .unwrap();
            gpu.synchronize().unwrap();
        });
        drop(dv);
        let t_up = time_ms(reps, || {
            drop(gpu.upload_many(&[&h, &asg.aux, &a_s, &b_s]).unwrap());
        });
        let d = gpu.upload_many(&[&h, &asg.aux, &a_s, &b_s]).unwrap();
        let t_mh = time_ms(reps, || {
            gpu.msm_g1_device(&gpu_srs.h, &d[0], h.len()).unwrap();
        });
        let t_ml = time_ms(reps, || {
            gpu.msm_g1_device(&gpu_srs.l, &d[1], asg.aux.len()).unwrap();
        });
        let t_ma = time_ms(reps, || {
            gpu.msm_g1_device(&gpu_srs.a, &d[2], a_s.len()).unwrap();
        });
        let t_mb1 = time_ms(reps, || {
            gpu.msm_g1_device(&gpu_srs.b_g1, &d[3], b_s.len()).unwrap();
        });
        let t_mb2 = time_ms(reps, || {
            gpu.msm_g2_device(&gpu_srs.b_g2, &d[3], b_s.len()).unwrap();
        });
        drop(d);
        let line = format!(
            "  gpu split 2^{log}: H host->host {t_h:.1} ms (7 NTTs on device ~ {:.1} ms, rest transfers/host); \
             MSM: upload 4 vectors ({:.0} MiB) {t_up:.1} ms, G1 H({}) {t_mh:.1}, G1 L({}) {t_ml:.1}, G1 A({}) {t_ma:.1}, G1 B({}) {t_mb1:.1}, G2 B {t_mb2:.1} ms",
            7.0 * t_ntt,
            ((h.len() + asg.aux.len() + a_s.len() + b_s.len()) * 32) as f64 / (1 << 20) as f64,
            h.len(),
            asg.aux.len(),
            a_s.len(),
            b_s.len()
        );
        println!("{line}");
        rows.push(format!("#{line}"));
        drop(gpu_srs);
    }
}

/// Parameters of the right shape for `asg` with random bases: the MSMs cost what a real SRS
/// costs, proofs from two backends can be compared byte for byte, but they do not verify.
#[cfg(cuzk_fatbin)]
fn random_params(
    asg: &cuzk_wire::witness::Assignment,
    h_len: usize,
    seed: u64,
) -> bellperson::groth16::Parameters<Bls12> {
    let inputs = asg.input.len();
    let a_len = inputs + asg.a_aux_density.count_ones();
    let b_len = asg.b_input_density.count_ones() + asg.b_aux_density.count_ones();
    let g1 = random_g1(seed, 3 + inputs + h_len + asg.aux.len() + a_len + b_len);
    let g2 = random_g2(seed + 1, 3 + b_len);
    let mut it = g1.into_iter();
    let mut take = |n: usize| -> Vec<G1Affine> { it.by_ref().take(n).collect() };
    let k = take(3);
    let ic = take(inputs);
    let h = take(h_len);
    let l = take(asg.aux.len());
    let a = take(a_len);
    let b_g1 = take(b_len);
    bellperson::groth16::Parameters {
        vk: bellperson::groth16::VerifyingKey {
            alpha_g1: k[0],
            beta_g1: k[1],
            beta_g2: g2[0],
            gamma_g2: g2[1],
            delta_g1: k[2],
            delta_g2: g2[2],
            ic,
        },
        h: Arc::new(h),
        l: Arc::new(l),
        a: Arc::new(a),
        b_g1: Arc::new(b_g1),
        b_g2: Arc::new(g2[3..].to_vec()),
    }
}

/// G1 MSM only, scalars resident on the device.
#[cfg(cuzk_fatbin)]
fn run_g1_bench(
    args: &Args,
    be: &CudaBackend,
    seed: u64,
    rep: &mut Report,
    rows: &mut Vec<String>,
) {
    let gpu: &Gpu = be.gpu();
    let Some(&maxlog) = args.g1_logs.iter().max() else {
        return;
    };
    let t = Instant::now();
    let bases = random_g1(seed + 8000, 1 << maxlog);
    println!(
        "generated 2^{maxlog} G1 bases in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let db = gpu.upload_g1(&bases).unwrap();
    for &log in &args.g1_logs {
        let n = 1usize << log;
        let s = random_scalars(seed + 8100 + log as u64, n);
        let ds = gpu.upload_scalars(&s).unwrap();
        // one exact check against the CPU at this size before timing
        let got = gpu.msm_g1_device(&db, &ds, n).unwrap();
        rep.check(
            &format!("msm_g1 2^{log} (bench inputs) = CPU"),
            got == cpu::msm_g1(&bases[..n], &s),
        );
        let all: Vec<f64> = {
            let mut v = Vec::new();
            for _ in 0..args.reps.max(1) {
                let t = Instant::now();
                gpu.msm_g1_device(&db, &ds, n).unwrap();
                v.push(t.elapsed().as_secs_f64() * 1e3);
            }
            v
        };
        let (mn, mx) = all
            .iter()
            .fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
        let line = format!("| G1 MSM 2^{log} (scalars on device)      | median {:>8.2} ms | min {mn:.2} max {mx:.2} (n={}) |", median(all.clone()), all.len());
        println!("{line}");
        rows.push(line);
    }
}

#[cfg(cuzk_fatbin)]
fn cuzk_kernels_bytes(v: &[Scalar]) -> &[u8] {
    // SAFETY: Scalar is a transparent wrapper of four u64 limbs.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    if !cuzk_kernels::cuda_available() {
        eprintln!(
            "no CUDA device available (kernels built: {}); GPU checks skipped",
            cuzk_kernels::KERNELS_BUILT
        );
        std::process::exit(2);
    }
    #[cfg(cuzk_fatbin)]
    {
        let seed = rand::rngs::OsRng.next_u64();
        let be = CudaBackend::new(0, None).expect("open CUDA device 0");
        let (free, total) = be.gpu().mem_info().unwrap();
        println!(
            "device: {} ({:.1} GiB, {:.1} GiB free), {} CPU threads, seed {seed:#x}",
            be.device_name(),
            total as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64,
            rayon::current_num_threads()
        );
        let mut rep = Report {
            fails: 0,
            checks: 0,
        };
        if !args.no_check {
            let t = Instant::now();
            run_checks(&args, &be, seed, &mut rep);
            println!(
                "checks: {} run, {} failed ({:.1} s)",
                rep.checks,
                rep.fails,
                t.elapsed().as_secs_f64()
            );
        }
        let mut rows = Vec::new();
        if !args.no_bench {
            run_bench(&args, &be, seed, &mut rows);
        }
        let mut prows = Vec::new();
        if !args.partition_logs.is_empty() {
            run_partition_bench(&args, &be, seed, &mut rep, &mut prows);
        }
        let mut grows = Vec::new();
        if !args.g1_logs.is_empty() {
            run_g1_bench(&args, &be, seed, &mut rep, &mut grows);
        }
        if !rows.is_empty() {
            println!(
                "\nbenchmark on {} (median of {} after a warm-up; CPU: rayon, {} threads)",
                be.device_name(),
                args.reps,
                rayon::current_num_threads()
            );
            println!(
                "| {:<38} | {:>10} | {:>10} | {:>7} |",
                "what", "GPU ms", "CPU ms", "CPU/GPU"
            );
            println!("|{:-<40}|{:->12}|{:->12}|{:->9}|", "", "", "", "");
            for r in &rows {
                println!("{r}");
            }
        }
        if !prows.is_empty() {
            println!("\nwhole-partition prove on {} (CUDA: median of {} after a warm-up; CPU backend: one run, {} threads)", be.device_name(), args.reps.max(1), rayon::current_num_threads());
            println!(
                "| {:<32} | {:<5} | {:>10} | {:>9} | {:>8} |",
                "partition", "stage", "CPU ms", "GPU ms", "CPU/GPU"
            );
            println!(
                "|{:-<34}|{:-<7}|{:->12}|{:->11}|{:->10}|",
                "", "", "", "", ""
            );
            for r in prows.iter().filter(|r| !r.starts_with('#')) {
                println!("{r}");
            }
            for r in prows.iter().filter(|r| r.starts_with('#')) {
                println!("{}", &r[1..]);
            }
        }
        for r in &grows {
            println!("{r}");
        }
        if rep.checks > 0 {
            println!("checks: {} run, {} failed", rep.checks, rep.fails);
        }
        std::process::exit(if rep.fails > 0 { 1 } else { 0 });
    }
}
