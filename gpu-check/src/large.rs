//! The 32 GiB partition's sizes (2^27) without its parameters: the H pipeline and the G1 MSM on
//! device-resident vectors, the MSM at several window widths and in passes. The bases repeat with a period of
//! 2^22, which lets the CPU check the whole MSM exactly: scalars of equal bases are summed first
//! (sum_i s_i P_(i mod p) = sum_j (sum_q s_(j+qp)) P_j), then one 2^22 MSM.

use std::time::Instant;

use blstrs::Scalar;
use cuzk_kernels::{Accumulation, CudaBackend, Gpu};
use cuzk_prover::cpu;
use ff::Field;
use rayon::prelude::*;

use crate::inputs::{median, random_g1, random_scalars, witness_like_scalars};
use crate::{Args, Report};

/// Distinct bases of the large MSMs.
const PERIOD_LOG: u32 = 22;

fn timed(reps: usize, mut f: impl FnMut() -> f64) -> (f64, f64, f64) {
    f(); // warm-up
    let v: Vec<f64> = (0..reps.max(1)).map(|_| f()).collect();
    let (mn, mx) = v
        .iter()
        .fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
    (median(v), mn, mx)
}

fn row(rows: &mut Vec<String>, what: String, (med, mn, mx): (f64, f64, f64)) {
    let line = format!("| {what:<40} | {med:>9.1} | {mn:>9.1} | {mx:>9.1} |");
    println!("{line}");
    rows.push(line);
}

pub fn run(args: &Args, be: &CudaBackend, seed: u64, rep: &mut Report, rows: &mut Vec<String>) {
    let gpu: &Gpu = be.gpu();
    for &log in &args.large_logs {
        let n = 1usize << log;
        let t = Instant::now();
        let vecs: Vec<Vec<Scalar>> = (0..3)
            .map(|k| random_scalars(seed + 9000 + 10 * log as u64 + k, n))
            .collect();
        println!(
            "2^{log}: three random vectors in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        // H on the device (the inputs are uploaded again before each run: H works in place).
        let h = timed(args.reps, || {
            let abc: Vec<_> = vecs
                .iter()
                .map(|v| gpu.upload_scalars(v).unwrap())
                .collect();
            let abc: [_; 3] = abc.try_into().ok().unwrap();
            let t = Instant::now();
            drop(gpu.h_device(abc, log).unwrap());
            t.elapsed().as_secs_f64() * 1e3
        });
        row(rows, format!("H pipeline 2^{log} (device-resident)"), h);

        let period = 1usize << PERIOD_LOG.min(log);
        let t = Instant::now();
        let distinct = random_g1(seed + 9100 + log as u64, period);
        let tiled: Vec<_> = (0..n)
            .into_par_iter()
            .map(|i| distinct[i % period])
            .collect();
        let db = gpu.upload_g1(&tiled).unwrap();
        drop(tiled);
        println!(
            "2^{log}: bases uploaded in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let windows: Vec<Option<u32>> = if args.msm_windows.is_empty() {
            vec![None]
        } else {
            args.msm_windows.iter().map(|&c| Some(c)).collect()
        };
        // Random scalars (H's) at each window width, and a witness's (L's, A's, B's) by size.
        let witness = witness_like_scalars(seed + 9200 + log as u64, n);
        for (kind, s, windows) in [
            ("random", &vecs[0], windows),
            ("witness-like", &witness, vec![None]),
        ] {
            let folded: Vec<Scalar> = (0..period)
                .into_par_iter()
                .map(|j| {
                    (j..n)
                        .step_by(period)
                        .fold(Scalar::ZERO, |acc, i| acc + s[i])
                })
                .collect();
            let want = cpu::msm_g1(&distinct, &folded);
            let ds = gpu.upload_scalars(s).unwrap();
            // Each window's MSM accumulated the default way (batch-affine where the MSM is
            // large enough) and with XYZZ additions, side by side.
            for c in windows {
                gpu.set_msm_window(c).unwrap();
                let name = c.map_or("by size".into(), |c| format!("c = {c}"));
                for (way, label) in [
                    (Accumulation::BySize, "accumulation by size"),
                    (Accumulation::Xyzz, "XYZZ"),
                ] {
                    gpu.set_accumulation(way);
                    let got = gpu.msm_g1_device(&db, &ds, n);
                    rep.check(
                        &format!(
                            "msm_g1 2^{log} {kind} ({name}, {label}) = CPU (bases of period 2^{PERIOD_LOG})"
                        ),
                        matches!(got, Ok(g) if g == want),
                    );
                    let m = timed(args.reps, || {
                        let t = Instant::now();
                        gpu.msm_g1_device(&db, &ds, n).unwrap();
                        t.elapsed().as_secs_f64() * 1e3
                    });
                    row(rows, format!("G1 MSM 2^{log}, {kind}, {name}, {label}"), m);
                }
            }
            gpu.set_msm_window(None).unwrap();
            gpu.set_accumulation(Accumulation::BySize);
            // In eight passes, as a streaming plan runs it (over resident bases here): the
            // passes' buckets shared (the default) with XYZZ additions and accumulated by size
            // (batch-affine where it fits the pass's scratch), each pass reduced alone, and the
            // batch-affine kernel forced (128 chunks a thread, more memory than a plan counts).
            for (shared, way, name) in [
                (true, Accumulation::Xyzz, "shared buckets, XYZZ"),
                (true, Accumulation::BySize, "shared buckets, by size"),
                (false, Accumulation::BySize, "own buckets, by size"),
                (
                    true,
                    Accumulation::Affine(0),
                    "shared buckets, batch-affine forced",
                ),
            ] {
                gpu.set_shared_passes(shared);
                gpu.set_accumulation(way);
                let got = gpu.msm_g1_passes(&db, &ds, n, n / 8);
                rep.check(
                    &format!("msm_g1 2^{log} {kind} in 8 passes, {name} = CPU"),
                    matches!(got, Ok(g) if g == want),
                );
                let m = timed(args.reps, || {
                    let t = Instant::now();
                    gpu.msm_g1_passes(&db, &ds, n, n / 8).unwrap();
                    t.elapsed().as_secs_f64() * 1e3
                });
                row(rows, format!("G1 MSM 2^{log}, {kind}, 8 passes, {name}"), m);
            }
            gpu.set_accumulation(Accumulation::BySize);
            gpu.set_shared_passes(true);
        }
    }
}
