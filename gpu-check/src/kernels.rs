//! Kernel-level checks against the CPU reference (NTTs, H, G1/G2 MSMs with edge cases) and
//! the kernel benchmark tables.

use std::time::Instant;

use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_kernels::plan::EXPAND_BATCH;
use cuzk_kernels::{Accumulation, CudaBackend, CudaError, DeviceBases, Gpu, NttKind};
use cuzk_prover::cpu;
use cuzk_wire::blob::{
    decode_blob_compact_into, encode_blob, BlobHeaderInfo, CompactWitness, DecodeLimits,
    EncodeOptions,
};
use ff::{Field, PrimeField};
use group::Group;
use rand::RngCore;

use crate::inputs::{
    edge_points, median, random_g1, random_g2, random_scalars, rng_from, time_ms,
    witness_like_scalars,
};
use crate::{Args, Report};

/// A witness uploaded through the staging, read in place from pinned memory, and through the
/// staging again once its pin is gone: each arrives whole.
fn check_uploads(gpu: &Gpu, seed: u64, rep: &mut Report) {
    let input = random_scalars(seed + 31, 3);
    let aux = random_scalars(seed + 32, (1 << 20) + 7);
    let arrives = |what: &str, rep: &mut Report| {
        let got = gpu
            .upload_concat(&[&input, &aux])
            .and_then(|d| gpu.download_scalars(&d, input.len() + aux.len()));
        rep.check(
            &format!("witness upload, {what}"),
            matches!(got, Ok(ref v) if v[..3] == input[..] && v[3..] == aux[..]),
        );
    };
    arrives("through the staging", rep);
    // SAFETY: `aux` is 32-byte field elements without padding, all initialized.
    let bytes = unsafe { std::slice::from_raw_parts(aux.as_ptr().cast::<u8>(), aux.len() * 32) };
    // SAFETY: `aux` outlives the pin and does not move.
    match unsafe { gpu.pin_host(bytes) } {
        Ok(pin) => {
            arrives("read in place from pinned memory", rep);
            drop(pin);
            arrives("through the staging after its pin was dropped", rep);
        }
        Err(e) => rep.check(&format!("page-locking a witness buffer ({e})"), false),
    }
}

/// Every class and byte length of the codec, both signs: 2^k, 2^k ± 1 and their negatives.
fn every_length() -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE, -Scalar::from(2)];
    for k in 1..255u64 {
        let p = Scalar::from(2).pow_vartime([k]);
        v.extend([p, p - Scalar::ONE, p + Scalar::ONE, -p, -(p + Scalar::ONE)]);
    }
    v
}

/// `input ‖ aux` as a GPU node holds it: encoded into a blob in chunks of 2^`chunk_log`, then
/// decompressed.
pub(crate) fn compact(input: &[Scalar], aux: &[Scalar], chunk_log: u32) -> CompactWitness {
    let info = BlobHeaderInfo::new("check", 0, "check", [0; 32]).unwrap();
    let opts = EncodeOptions {
        chunk_elements: 1 << chunk_log,
        ..Default::default()
    };
    let blob = encode_blob(&info, input, aux, &opts);
    let mut w = CompactWitness::default();
    decode_blob_compact_into(&blob, &DecodeLimits::default(), &mut w).unwrap();
    w
}

/// A compact witness expanded on the device equals what was encoded (the host's expansion):
/// every codec class and length, witness-like values, two chunk sizes, in one batch and in
/// many, through the staging and read in place from pinned memory. One whose chunks hold a
/// value >= r, a bad tag or short values is refused at the lowest such chunk, which the host's
/// decoder refuses too.
fn check_compact_uploads(gpu: &Gpu, seed: u64, rep: &mut Report) {
    let input = random_scalars(seed + 33, 5);
    let mut aux = every_length();
    aux.extend(witness_like_scalars(seed + 34, (1 << 20) + 11));
    let want: Vec<Scalar> = input.iter().chain(&aux).copied().collect();
    let arrives = |w: &CompactWitness, batch: u64| {
        gpu.upload_compact_batched(&w.input, &w.aux, batch)
            .and_then(|d| gpu.download_scalars(&d, want.len()))
            .is_ok_and(|got| got == want)
    };
    for chunk_log in [12, 16] {
        let w = compact(&input, &aux, chunk_log);
        for (what, batch) in [("one batch", EXPAND_BATCH), ("batches of 256 KiB", 1 << 18)] {
            rep.check(
                &format!("compact witness expanded, chunks of 2^{chunk_log}, {what}"),
                arrives(&w, batch),
            );
        }
    }
    // Windows of a compact witness, as a batch makes them a pass at a time: inside the
    // inputs, across their end, from mid-chunk across chunks, to the end; the chunks staged a
    // few at a time, all at once, and kept on the device.
    let n = want.len();
    let ranges = [0..3, 2..105, 5 + 4095..5 + 4097 + 70_000, n - 10..n, 7..n];
    for chunk_log in [12, 16] {
        let w = compact(&input, &aux, chunk_log);
        let largest = (0..w.aux.chunks())
            .map(|i| w.aux.starts()[i + 1] - w.aux.starts()[i])
            .max()
            .unwrap_or(0);
        let ways = [
            ("a chunk staged", largest, false),
            ("all staged", EXPAND_BATCH, false),
            ("on the device", 0, true),
        ];
        for (what, staged, on_device) in ways {
            let made = gpu
                .compact_source(&w.input, &w.aux, on_device)
                .and_then(|src| {
                    let mut bufs = gpu.window_bufs(n, staged as usize)?;
                    let mut all = true;
                    for r in &ranges {
                        gpu.make_window(&src, r.clone(), &mut bufs)?;
                        all &= gpu.download_scalars(bufs.window(), r.len())?[..] == want[r.clone()];
                    }
                    Ok(all)
                });
            rep.check(
                &format!("compact witness made in windows, chunks of 2^{chunk_log}, {what}"),
                made.is_ok_and(|all| all),
            );
        }
    }
    let mut w = compact(&input, &aux, 16);
    // SAFETY: `w` outlives the pin and its memory does not move while it lives.
    match unsafe { gpu.pin_host(w.aux.memory()) } {
        Ok(pin) => {
            rep.check(
                "compact witness expanded, read in place from pinned memory",
                arrives(&w, EXPAND_BATCH),
            );
            drop(pin);
        }
        Err(e) => rep.check(&format!("page-locking a compact witness ({e})"), false),
    }
    // Forged chunks: r in place of a 32-byte value in chunk 9 (its first such value), a tag
    // the codec lacks in chunk 7, a zero's tag claiming one value byte in chunk 12.
    forge(&mut w, 9, |raw, n| {
        let mut value = n;
        for &tag in &raw[..n] {
            if tag == 34 {
                raw[value..value + 32].copy_from_slice(&r_bytes());
                return;
            }
            value += match tag {
                3..=34 => tag as usize - 2,
                35..=66 => tag as usize - 34,
                _ => 0,
            };
        }
        panic!("chunk 9 holds no 32-byte value");
    });
    let refused = |w: &CompactWitness| match gpu.upload_compact(&w.input, &w.aux) {
        Err(CudaError::RefusedChunk(c)) => Some(c),
        _ => None,
    };
    let host_refuses = |w: &CompactWitness, c: usize| {
        (0..c).all(|i| w.aux.check_chunk(i).is_ok()) && w.aux.check_chunk(c).is_err()
    };
    let mut expect = |what: &str, w: &CompactWitness, chunk: usize| {
        rep.check(
            &format!("compact witness with {what} refused at chunk {chunk}, as on the host"),
            refused(w) == Some(chunk) && host_refuses(w, chunk),
        );
    };
    expect("r as a value", &w, 9);
    forge(&mut w, 7, |raw, _| raw[100] = 200);
    expect("a bad tag", &w, 7);
    forge(&mut w, 3, |raw, n| {
        let zero = raw[..n].iter().position(|&t| t == 0).expect("a zero");
        raw[zero] = 3;
    });
    expect("one value byte too few", &w, 3);
}

/// Alters chunk `chunk` of `w`'s aux: `alter` gets its bytes onwards and its element count.
fn forge(w: &mut CompactWitness, chunk: usize, alter: impl FnOnce(&mut [u8], usize)) {
    let n = w.aux.chunk(chunk).0.len();
    let at = w.aux.starts()[chunk] as usize;
    alter(&mut w.aux.bytes_mut()[at..], n);
}

/// r's canonical little-endian bytes: the smallest value that is not a field element.
fn r_bytes() -> [u8; 32] {
    let mut r = (-Scalar::ONE).to_repr();
    r[0] += 1;
    r
}

/// The G1 checks' accumulations: by size (XYZZ at these sizes) and each batch-affine kernel
/// instance forced (128 and 64 chunks a thread), with the label each check's name takes.
const G1_WAYS: [(Accumulation, &str); 3] = [
    (Accumulation::BySize, ""),
    (Accumulation::Affine(0), ", affine"),
    (Accumulation::Affine(1), ", affine 64"),
];

pub fn run_checks(args: &Args, be: &CudaBackend, seed: u64, rep: &mut Report) {
    let gpu = be.gpu();
    check_uploads(gpu, seed, rep);
    check_compact_uploads(gpu, seed, rep);
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
    let bases1 = random_g1(seed + 21, max_g1.max(1 << 14));
    let d1 = gpu.upload_g1(&bases1).expect("upload G1 bases");
    // Each G1 case both ways (G1_WAYS).
    let g1_case =
        |rep: &mut Report, name: &str, bases: &[G1Affine], d: &DeviceBases, s: &[Scalar]| {
            let want = cpu::msm_g1(&bases[..s.len()], s);
            for (way, label) in G1_WAYS {
                gpu.set_accumulation(way);
                let got = gpu.msm_g1(d, s);
                rep.check(
                    &format!("msm_g1 {name}{label}"),
                    matches!(got, Ok(g) if g == want),
                );
            }
            gpu.set_accumulation(Accumulation::BySize);
        };
    for log in [0u32, 1, 4, 10, 12, 16, 18, 20, 22, 24]
        .into_iter()
        .filter(|&l| l <= args.max_log)
    {
        let s = random_scalars(seed + 100 + log as u64, 1 << log);
        g1_case(rep, &format!("2^{log}"), &bases1, &d1, &s);
    }
    for n in [1000usize, 12345, 100_003]
        .into_iter()
        .filter(|&n| n <= max_g1)
    {
        let s = random_scalars(seed + 200 + n as u64, n);
        g1_case(rep, &format!("n={n}"), &bases1, &d1, &s);
    }
    // Zeros and ones split off before the digits: mostly bits, with a few dense scalars.
    for log in [12u32, 20, 22].into_iter().filter(|&l| l <= args.max_log) {
        let s = witness_like_scalars(seed + 250 + log as u64, 1 << log);
        g1_case(rep, &format!("witness-like 2^{log}"), &bases1, &d1, &s);
    }
    // A batch in passes, as a streaming plan runs L, A and B: witness-like sets, whose
    // passes are reduced on a second stream while the next accumulates, beside a dense one,
    // which waits for the reduction in flight.
    if args.max_log > 20 {
        let n = (1 << 20) + 7;
        let sets = [
            witness_like_scalars(seed + 260, n),
            random_scalars(seed + 261, n),
            witness_like_scalars(seed + 262, n),
        ];
        let on_device: Vec<_> = sets
            .iter()
            .map(|s| gpu.upload_scalars(s).unwrap())
            .collect();
        let refs: Vec<_> = on_device.iter().collect();
        let want: Vec<_> = sets.iter().map(|s| cpu::msm_g1(&bases1[..n], s)).collect();
        for (way, label) in G1_WAYS {
            gpu.set_accumulation(way);
            let got = gpu.msm_g1_batch_passes(&d1, &refs, n, 1 << 18);
            for (i, want) in want.iter().enumerate() {
                rep.check(
                    &format!(
                        "msm_g1 batch of 3 in 5 passes{label}, set {i} (witness-like, random, witness-like)"
                    ),
                    matches!(&got, Ok(g) if g[i] == *want),
                );
            }
        }
        gpu.set_accumulation(Accumulation::BySize);
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
    for log in [12u32, 20]
        .into_iter()
        .filter(|&l| l <= args.g2_max_log.min(args.max_log))
    {
        let s = witness_like_scalars(seed + 550 + log as u64, 1 << log);
        g2_case(rep, &format!("witness-like 2^{log}"), &bases2, &d2, &s);
    }
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

    // ---- fixed-base multiplication (parameter generation), against the CPU tables
    let fb = cuzk_prover::setup::CpuFixedBase::new();
    for n in [1usize, 1000, (1 << 22) + 3] {
        if n > 1 << args.max_log {
            continue;
        }
        let mut s = random_scalars(seed + 600 + n as u64, n);
        for (i, v) in [
            Scalar::ZERO,
            Scalar::ONE,
            -Scalar::ONE,
            Scalar::from(1u64 << 63),
        ]
        .into_iter()
        .enumerate()
        {
            if i < n {
                s[i] = v;
            }
        }
        use cuzk_prover::setup::FixedBase;
        let g1 = be.g1(&s);
        rep.check(
            &format!("fixed-base G1 n={n}"),
            matches!(g1, Ok(ref p) if *p == fb.g1(&s).unwrap()),
        );
        let m = n.min(1 << 20);
        let g2 = be.g2(&s[..m]);
        rep.check(
            &format!("fixed-base G2 n={m}"),
            matches!(g2, Ok(ref p) if *p == fb.g2(&s[..m]).unwrap()),
        );
        // The parameter writer's bytes, encoded on the device, against blst's encoding (the
        // engine's default); the zero scalar makes an identity.
        let (mut dev, mut host) = (vec![7u8; 5], Vec::new());
        let ok = be.g1_uncompressed(&s, &mut dev).is_ok();
        fb.g1_uncompressed(&s, &mut host).unwrap();
        rep.check(&format!("fixed-base G1 encoded n={n}"), ok && dev == host);
        let ok = be.g2_uncompressed(&s[..m], &mut dev).is_ok();
        fb.g2_uncompressed(&s[..m], &mut host).unwrap();
        rep.check(&format!("fixed-base G2 encoded n={m}"), ok && dev == host);
    }
}

pub fn run_bench(args: &Args, be: &CudaBackend, seed: u64, rows: &mut Vec<String>) {
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
        let d = gpu.upload_scalars(&v).unwrap();
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
    // A witness-like witness to the device in its compact form, expanded there (GPU), against
    // its expansion on the host alone (CPU), which the scalars' copy would then follow.
    for log in [24u32].into_iter().filter(|&l| l <= args.bench_max_log) {
        let w = compact(
            &[Scalar::ONE],
            &witness_like_scalars(seed + 1100, 1 << log),
            16,
        );
        let g = time_ms(reps, || {
            gpu.upload_compact(&w.input, &w.aux).unwrap();
        });
        let c = time_ms(1, || {
            w.expand().unwrap();
        });
        let mb = w.aux.bytes().len() as f64 / 1e6;
        row(
            rows,
            format!("witness 2^{log} compact up ({mb:.0} MB)"),
            g,
            Some(c),
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
    // Fixed-base multiplication (parameter generation)
    use cuzk_prover::setup::FixedBase;
    let fb = cuzk_prover::setup::CpuFixedBase::new();
    for log in [20u32, 22].into_iter().filter(|&l| l <= args.bench_max_log) {
        let s = random_scalars(seed + 6000 + log as u64, 1 << log);
        let g = time_ms(reps.min(3), || {
            be.g1(&s).unwrap();
        });
        let c = (log <= 20).then(|| {
            time_ms(1, || {
                fb.g1(&s).unwrap();
            })
        });
        row(rows, format!("fixed-base G1 2^{log} (host->host)"), g, c);
        let mut out = Vec::new();
        let g = time_ms(reps.min(3), || {
            be.g1_uncompressed(&s, &mut out).unwrap();
        });
        let c = (log <= 20).then(|| {
            time_ms(1, || {
                fb.g1_uncompressed(&s, &mut out).unwrap();
            })
        });
        row(
            rows,
            format!("fixed-base G1 2^{log} encoded, buffer reused"),
            g,
            c,
        );
    }
    let s = random_scalars(seed + 6100, 1 << 20);
    let g = time_ms(reps.min(3), || {
        be.g2(&s).unwrap();
    });
    let c = time_ms(1, || {
        fb.g2(&s).unwrap();
    });
    row(rows, "fixed-base G2 2^20 (host->host)".into(), g, Some(c));
}

/// G1 MSM only, scalars resident on the device.
pub fn run_g1_bench(
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
