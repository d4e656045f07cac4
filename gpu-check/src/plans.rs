//! The memory plans against each other and against the CPU: the same partition proved under a
//! resident plan and under plans that stream the key from host memory (forced, and chosen by a
//! budget below the key's size), with the same r, s. Each streaming plan runs side by side
//! with the CPU backend (`Dual`: A·w, B·w, C·w, H and every MSM compared) and its proof must
//! equal the resident plan's byte for byte.
//!
//! - the toy circuit (bellperson's parameters) in MSM passes of 2^10 points, also with every G1
//!   MSM accumulated batch-affine (by size they are XYZZ at these sizes);
//! - a MiMC partition of a 2^L domain (`--plan-log`, ≥ 22 on the device) with parameters
//!   generated on the GPU: streaming everything in passes of 2^18 (also batch-affine), then a
//!   budget between the lean minimum and the key's size, where the planner keeps part of the
//!   key resident, and the least budget that keeps H resident while L, A or B stream;
//! - three MiMC partitions of other inputs proved at once, streaming everything, their L, A
//!   and B MSMs in one batch, and again on a resident plan with two lanes (two partitions'
//!   steps at once on their own streams): each proof equal to its own under the resident plan.

use std::sync::Arc;

use bellperson::groth16::prepare_verifying_key;
use blstrs::{Bls12, Scalar};
use cuzk_circuits::{CircuitFamily, MimcFamily};
use cuzk_kernels::plan::{self, gib, PlanLimits, PlanShape};
use cuzk_kernels::{Accumulation, CudaBackend};
use cuzk_prover::{proof_bytes, prove, verify, Backend, CpuBackend, Dual, ProvingKey};
use cuzk_wire::blob::CompactWitness;
use cuzk_wire::witness::Witness;
use ff::Field;

use crate::inputs::{rng_from, Chain};
use crate::Report;

/// A backend on device 0 with `budget` (None: the device's) and `limits`.
fn backend(budget: Option<u64>, limits: PlanLimits) -> Arc<CudaBackend> {
    workers_backend(budget, limits, (1, 1))
}

/// The same, for `workers` proving at once on up to `lanes`.
fn workers_backend(
    budget: Option<u64>,
    limits: PlanLimits,
    (workers, lanes): (usize, usize),
) -> Arc<CudaBackend> {
    Arc::new(
        CudaBackend::new(0, budget, workers)
            .and_then(|b| b.with_lanes(lanes))
            .expect("open CUDA device 0")
            .with_plan_limits(limits),
    )
}

/// How partitions proved at once share the device.
#[derive(Clone, Copy)]
enum AtOnce {
    /// A plan that streams the whole key in passes of 2^`log`, their L, A and B MSMs batched,
    /// each witness made a window at a time from its scalars or, `compact`, from its blob's
    /// compact form in chunks of 2^12 (as a GPU node holds it).
    Batched { log: u32, compact: bool },
    /// The resident plan, each partition's steps on a lane of its own.
    Lanes,
}

/// The proof bytes of `be`, and its plan's summary and device peak; with `dual`, every step
/// checked against the CPU backend on the way.
fn proof_under(
    be: &Arc<CudaBackend>,
    key: &Arc<ProvingKey>,
    w: &Witness,
    (r, s): (Scalar, Scalar),
    dual: bool,
) -> Result<([u8; 192], String, u64), String> {
    let loaded = be.load_key(key.clone()).map_err(|e| e.to_string())?;
    let summary = loaded.plan().summary();
    let proof = if dual {
        drop(loaded);
        let d = Dual {
            reference: CpuBackend,
            candidate: be.clone(),
        };
        let k = d.load_key(key.clone()).map_err(|e| e.to_string())?;
        prove(&d, &k, w, r, s).map_err(|e| e.to_string())?
    } else {
        prove(&**be, &loaded, w, r, s).map_err(|e| e.to_string())?
    };
    Ok((proof_bytes(&proof), summary, be.gpu().memory().peak()))
}

/// Proves `w` under the resident plan, then under each of `plans`; checks each against it.
fn check_plans(
    what: &str,
    key: &Arc<ProvingKey>,
    w: &Witness,
    inputs: &[Scalar],
    plans: &[(Option<u64>, PlanLimits, bool, Accumulation)],
    seed: u64,
    rep: &mut Report,
) {
    let mut r = rng_from(seed, 4242);
    let rs = (Scalar::random(&mut r), Scalar::random(&mut r));
    let pvk = prepare_verifying_key(&key.info.vk);
    let resident = proof_under(&backend(None, PlanLimits::default()), key, w, rs, false);
    let Ok((want, summary, _)) = resident else {
        rep.check(
            &format!("{what}: resident plan proves ({resident:?})"),
            false,
        );
        return;
    };
    println!("  {what}: resident plan: {summary}");
    let shape = PlanShape::of(key);
    for &(budget, limits, dual, way) in plans {
        let be = backend(budget, limits);
        be.set_accumulation(way);
        let got = proof_under(&be, key, w, rs, dual);
        let ok = match &got {
            Ok((bytes, summary, peak)) => {
                println!(
                    "  {what}: {summary}; device peak {:.3} GiB (budget {})",
                    gib(*peak),
                    budget.map_or("the device's".into(), |b| format!("{:.3} GiB", gib(b)))
                );
                let proof = bellperson::groth16::Proof::<Bls12>::read(&bytes[..]);
                *bytes == want
                    && budget.is_none_or(|b| *peak <= b)
                    && proof.is_ok_and(|p| verify(&pvk, &p, inputs).unwrap_or(false))
            }
            Err(e) => {
                println!("  {what}: {e}");
                false
            }
        };
        let streamed = budget.map_or(String::new(), |b| format!(" at {:.3} GiB", gib(b)));
        rep.check(
            &format!(
                "{what}: streaming plan{streamed} ({}{}{}): proof = the resident plan's, verifies, peak within the budget",
                limits.max_chunk.map_or("the budget's passes".into(), |c| format!(
                    "passes ≤ 2^{:.0}",
                    (c as f64).log2()
                )),
                if dual { ", every step = CPU's" } else { "" },
                match way {
                    Accumulation::Affine(_) => ", every G1 MSM batch-affine",
                    _ => "",
                }
            ),
            ok,
        );
    }
    // The plans the budget runs chose, for the record.
    let key_gib = gib(shape.key_bytes());
    println!("  {what}: key {key_gib:.3} GiB");
}

/// `partitions` (witness, public inputs) proved at once by as many threads, as `how` says:
/// each proof equal to its own under the resident plan and verified, and the batch formed or
/// the lanes planned.
fn check_at_once(
    what: &str,
    key: &Arc<ProvingKey>,
    partitions: &[(Witness, Vec<Scalar>)],
    how: AtOnce,
    seed: u64,
    rep: &mut Report,
) {
    let mut r = rng_from(seed, 4343);
    let rs = (Scalar::random(&mut r), Scalar::random(&mut r));
    let pvk = prepare_verifying_key(&key.info.vk);
    let resident = backend(None, PlanLimits::default());
    let loaded = resident.load_key(key.clone()).expect("resident plan loads");
    let want: Vec<[u8; 192]> = partitions
        .iter()
        .map(|(w, _)| {
            proof_bytes(&prove(&*resident, &loaded, w, rs.0, rs.1).expect("resident proof"))
        })
        .collect();
    drop((loaded, resident));
    let n = partitions.len();
    let (limits, lanes, way) = match how {
        AtOnce::Batched { log, compact } => {
            let limits = PlanLimits {
                max_chunk: Some(1 << log),
                stream_all: true,
            };
            let way = match compact {
                true => "L, A and B batched, compact witnesses",
                false => "L, A and B batched",
            };
            (limits, 1, way)
        }
        AtOnce::Lanes => (PlanLimits::default(), 2, "on two lanes"),
    };
    let compact: Vec<CompactWitness> = match how {
        AtOnce::Batched { compact: true, .. } => partitions
            .iter()
            .map(|(w, _)| crate::kernels::compact(&w.input, &w.aux, 12))
            .collect(),
        _ => Vec::new(),
    };
    let be = workers_backend(None, limits, (n, lanes));
    let loaded = match be.load_key(key.clone()) {
        Ok(k) => k,
        Err(e) => return rep.check(&format!("{what}: plan {way} loads ({e})"), false),
    };
    println!("  {what}: {}", loaded.plan().summary());
    let got: Vec<Result<[u8; 192], String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = partitions
            .iter()
            .enumerate()
            .map(|(i, (w, _))| {
                let (be, loaded, compact) = (&be, &loaded, compact.get(i));
                scope.spawn(move || {
                    match compact {
                        Some(c) => prove(&**be, loaded, c, rs.0, rs.1),
                        None => prove(&**be, loaded, w, rs.0, rs.1),
                    }
                    .map(|p| proof_bytes(&p))
                    .map_err(|e| e.to_string())
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("prover thread"))
            .collect()
    });
    let (batches, served) = be.batches();
    println!("  {what}: {n} partitions at once: {batches} batch(es) served {served}");
    for (i, ((got, want), (_, inputs))) in got.iter().zip(&want).zip(partitions).enumerate() {
        let ok = got.as_ref().is_ok_and(|bytes| {
            bytes == want
                && bellperson::groth16::Proof::<Bls12>::read(&bytes[..])
                    .is_ok_and(|p| verify(&pvk, &p, inputs).unwrap_or(false))
        });
        if let Err(e) = got {
            println!("  {what}: partition {i}: {e}");
        }
        rep.check(
            &format!("{what}: partition {i} of {n} proved at once, {way}: proof = the resident plan's, verifies"),
            ok,
        );
    }
    match how {
        AtOnce::Batched { .. } => rep.check(
            &format!(
                "{what}: the partitions met in fewer batches than partitions ({batches} for {served})"
            ),
            served == n as u64 && batches < served,
        ),
        AtOnce::Lanes => rep.check(
            &format!("{what}: the resident plan proves two partitions at once"),
            loaded.plan().lanes == 2,
        ),
    }
}

pub fn run(plan_log: u32, seed: u64, rep: &mut Report) {
    // The toy circuit: every part streamed, passes of 2^10 points.
    let mut r = rng_from(seed, 31);
    let rounds = 70_000;
    let (params, blank, circ) = Chain::instance(rounds, &mut r);
    let inputs = circ.public_inputs();
    let matrices = Arc::new(cuzk_prover::r1cs::capture(blank).unwrap());
    let key = Arc::new(ProvingKey::new(params, matrices).unwrap());
    let w = cuzk_prover::synthesize_witness(circ, None).unwrap();
    let forced = |log: u32| PlanLimits {
        max_chunk: Some(1 << log),
        stream_all: true,
    };
    check_plans(
        "toy circuit (70000 rounds)",
        &key,
        &w,
        &inputs,
        &[
            (None, forced(10), true, Accumulation::BySize),
            (None, forced(10), false, Accumulation::Affine(0)),
        ],
        seed,
        rep,
    );
    if plan_log == 0 {
        return;
    }

    // A MiMC partition of 2^plan_log, parameters from the GPU's generator.
    let rounds = (1usize << (plan_log - 1)) - 16;
    let fam = MimcFamily::new(rounds, 1).expect("mimc rounds in range");
    let m = Arc::new(fam.capture_matrices().expect("capture"));
    let gen = backend(None, PlanLimits::default());
    let mut out = std::io::Cursor::new(Vec::new());
    let mut rng = rng_from(seed, 77);
    cuzk_prover::setup::generate(&m, &mut rng, &*gen, &mut out).expect("parameters");
    drop(gen);
    let params = bellperson::groth16::Parameters::<Bls12>::read(&out.into_inner()[..], false)
        .expect("read back");
    let key = Arc::new(ProvingKey::new(Arc::new(params), m.clone()).unwrap());
    let input = b"cuzk-gpu-check plans";
    let w = fam
        .witness(input, 0, Some((m.inputs, m.aux)))
        .expect("witness");
    let inputs = fam.public_inputs(input, 0).unwrap();
    let shape = PlanShape::of(&key);
    let min = plan::minimum(&shape, PlanLimits::default());
    // Halfway between the lean minimum and the whole key: part resident, part streamed.
    let mid = min + (shape.key_bytes().saturating_sub(min)) / 2;
    // The least budget, in steps of a 64th of the key, whose plan keeps H resident while L, A
    // or B stream (the order that makes H resident right after the matrices).
    let step = (shape.key_bytes() / 64).max(1);
    let h_kept = (0..64).map(|k| min + k * step).find(|&b| {
        plan::choose(&shape, b, 1, 1, PlanLimits::default())
            .is_ok_and(|p| p.srs[0] == plan::Placement::Resident && p.streams_witness_sections())
    });
    rep.check(
        &format!("mimc 2^{plan_log}: a budget keeps H resident while L, A or B stream"),
        h_kept.is_some(),
    );
    check_plans(
        &format!("mimc 2^{plan_log}"),
        &key,
        &w,
        &inputs,
        &[
            (None, forced(18), true, Accumulation::BySize),
            (None, forced(18), false, Accumulation::Affine(0)),
            (
                Some(mid),
                PlanLimits::default(),
                false,
                Accumulation::BySize,
            ),
            (
                Some(min),
                PlanLimits::default(),
                false,
                Accumulation::BySize,
            ),
        ]
        .into_iter()
        .chain(h_kept.map(|b| (Some(b), PlanLimits::default(), true, Accumulation::BySize)))
        .collect::<Vec<_>>(),
        seed,
        rep,
    );
    let partitions: Vec<(Witness, Vec<Scalar>)> = (0..3u8)
        .map(|i| {
            let input = [b"cuzk-gpu-check batch ".as_slice(), &[b'0' + i]].concat();
            let w = fam
                .witness(&input, 0, Some((m.inputs, m.aux)))
                .expect("witness");
            (w, fam.public_inputs(&input, 0).unwrap())
        })
        .collect();
    for how in [
        AtOnce::Batched {
            log: 18,
            compact: false,
        },
        AtOnce::Batched {
            log: 18,
            compact: true,
        },
        AtOnce::Lanes,
    ] {
        check_at_once(
            &format!("mimc 2^{plan_log}"),
            &key,
            &partitions,
            how,
            seed,
            rep,
        );
    }
}
