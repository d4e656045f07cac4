//! Groth16 parameters for a shape straight from its constraint matrices — INSECURE, for tests and
//! benchmarks only: whoever runs this knows the toxic waste.
//!
//! bellperson's generator synthesizes the circuit into per-variable lists and evaluates every
//! query point by point: minutes even for the 2 KiB PoRep shape (docs/porep.md, "Parameters").
//! Here the QAP at
//! τ is the transposed product of the matrices with the Lagrange basis at τ (one batch
//! inversion for the basis, [`qap`]), and every query point is a fixed-base multiplication of a
//! generator by a scalar, which a [`FixedBase`] engine does in bulk: [`CpuFixedBase`] with
//! windowed tables, the CUDA backend on the device.
//!
//! The output has bellperson's `.params` layout (VK, then h, l, a, b_g1, b_g2, each a u32
//! big-endian length and uncompressed points), and every section's offset is known once the VK
//! is, so the sections are written where they belong in the order their scalars are ready: the
//! VK (from the inputs' columns alone), H (τ and Z(τ) only) while a thread of its own sums the
//! matrices' columns, then A, B and L as their sums arrive. The disk, the slowest part for a
//! 2^27 shape, starts within seconds and seldom waits. Each query streams one chunk at a time, so
//! the host never holds a whole query's points. A and B keep exactly the variables the shape's
//! matrices make dense in them — what [`crate::ProvingKey`] packs — and a variable of zero
//! weight at τ fails the run instead of drifting from that plan.

mod cpu;
mod qap;

pub use cpu::{g1_to_affine, g2_to_affine, CpuFixedBase};

use std::io::{self, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bellperson::groth16::VerifyingKey;
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve as _};
use rand_core::RngCore;
use rayon::prelude::*;

use crate::error::BackendError;
use crate::ntt::domain_size;
use crate::r1cs::ShapeMatrices;
use crate::write_behind::WriteBehind;

/// Points per engine call and write: bounds the host memory of a streamed query.
const CHUNK: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0}")]
    Backend(#[from] BackendError),
    #[error("writing parameters: {0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Degenerate(String),
}

/// Multiplies the group generators by many scalars.
pub trait FixedBase: Sync {
    /// `[s]G1` for each scalar, affine (the identity for zero).
    fn g1(&self, scalars: &[Scalar]) -> Result<Vec<G1Affine>, BackendError>;
    /// `[s]G2` for each scalar.
    fn g2(&self, scalars: &[Scalar]) -> Result<Vec<G2Affine>, BackendError>;
    /// [`Self::g1`] in bellperson's uncompressed encoding, into `out` (resized): the bytes the
    /// parameter file holds. An engine that encodes on its own side (the device) spares the
    /// writer a pass over every point.
    fn g1_uncompressed(&self, scalars: &[Scalar], out: &mut Vec<u8>) -> Result<(), BackendError> {
        encode_into(&self.g1(scalars)?, G1Affine::to_uncompressed, out);
        Ok(())
    }
    /// [`Self::g2`] encoded as [`Self::g1_uncompressed`].
    fn g2_uncompressed(&self, scalars: &[Scalar], out: &mut Vec<u8>) -> Result<(), BackendError> {
        encode_into(&self.g2(scalars)?, G2Affine::to_uncompressed, out);
        Ok(())
    }
}

/// Where [`generate`] writes: sections land at their offsets, not in file order.
pub trait Output: Write + Seek + Send {}
impl<T: Write + Seek + Send> Output for T {}

/// The secret values a parameter set is made from.
struct Toxic {
    tau: Scalar,
    alpha: Scalar,
    beta: Scalar,
    gamma: Scalar,
    delta: Scalar,
}

impl Toxic {
    fn random(rng: &mut dyn RngCore) -> Toxic {
        let mut nonzero = || loop {
            let s = Scalar::random(&mut *rng);
            if !s.is_zero_vartime() {
                return s;
            }
        };
        Toxic {
            tau: nonzero(),
            alpha: nonzero(),
            beta: nonzero(),
            gamma: nonzero(),
            delta: nonzero(),
        }
    }

    /// `(β·u + α·v + w)·d`: a variable's IC (d = 1/γ) or L (d = 1/δ) exponent from its column
    /// sums in A, B and C.
    fn ext(&self, [u, v, w]: [Scalar; 3], d: Scalar) -> Scalar {
        (self.beta * u + self.alpha * v + w) * d
    }
}

/// Sizes of what [`generate`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    pub g1_points: u64,
    pub g2_points: u64,
    pub bytes: u64,
}

/// Writes random parameters for `m`'s shape to `out` in bellperson's layout and returns the
/// verifying key. A writer thread drains the queries to `out` while the next chunk is computed,
/// and another thread sums the matrices' columns meanwhile, so the disk, the engine and the
/// cores overlap.
pub fn generate(
    m: &ShapeMatrices,
    rng: &mut dyn RngCore,
    engine: &dyn FixedBase,
    out: &mut dyn Output,
) -> Result<(VerifyingKey<Bls12>, Written), SetupError> {
    let t = Toxic::random(rng);
    let (size, log) = domain_size(m.constraints())?;
    let z = t.tau.pow_vartime([size as u64]) - Scalar::ONE;
    if z.is_zero_vartime() {
        return Err(SetupError::Degenerate(
            "tau landed in the evaluation domain".into(),
        ));
    }
    let mut phases = Phases::default();
    let (lagrange, inputs) = timed(&mut phases.basis, || {
        let lagrange = qap::lagrange_at(t.tau, z, size, log);
        let inputs = [&m.a, &m.b, &m.c]
            .map(|matrix| qap::column_sums(matrix, 0..m.inputs, &m.coeffs, &lagrange));
        (lagrange, inputs)
    });
    let lagrange = &lagrange;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<(u64, Vec<u8>)>(WRITE_AHEAD);
        // Written buffers come back to be filled again: a 2^27 query is ~13 GB of points, and
        // fresh buffers cost a page fault per 4 KiB.
        let (spare_tx, spare_rx) = mpsc::channel::<Vec<u8>>();
        let writer = scope.spawn(move || -> io::Result<(u64, Duration)> {
            let (mut bytes, mut busy, mut pos) = (0, Duration::ZERO, None);
            for (at, buf) in rx {
                let started = Instant::now();
                if pos != Some(at) {
                    out.seek(SeekFrom::Start(at))?;
                }
                out.write_all(&buf)?;
                busy += started.elapsed();
                bytes += buf.len() as u64;
                pos = Some(at + buf.len() as u64);
                let _ = spare_tx.send(buf);
            }
            let started = Instant::now();
            out.flush()?;
            Ok((bytes, busy + started.elapsed()))
        });
        // The column sums in A, B, C order, on a pool of their own: on the global one they
        // would starve the writing path's small jobs (rayon runs a pool's queued work first).
        let (sums_tx, sums) = mpsc::channel::<Vec<Scalar>>();
        let summer = scope.spawn(move || -> Result<Duration, SetupError> {
            let pool = rayon::ThreadPoolBuilder::new()
                .thread_name(|i| format!("column-sums-{i}"))
                .build()
                .map_err(|e| SetupError::Io(io::Error::other(e)))?;
            let started = Instant::now();
            for matrix in [&m.a, &m.b, &m.c] {
                let s = pool
                    .install(|| qap::column_sums(matrix, 0..m.variables(), &m.coeffs, lagrange));
                if sums_tx.send(s).is_err() {
                    break;
                }
            }
            Ok(started.elapsed())
        });
        let mut sink = Sink {
            tx,
            spare: spare_rx,
            sums,
            phases: &mut phases,
        };
        let made = queries(m, &t, z, size, inputs, engine, &mut sink);
        drop(sink);
        // The helpers' own errors explain a closed channel better than the call that hit it.
        let summed = summer
            .join()
            .map_err(|_| SetupError::Io(io::Error::other("the column sums thread panicked")))??;
        let (bytes, write) = writer.join().map_err(|_| {
            SetupError::Io(io::Error::other("the parameter writer thread panicked"))
        })??;
        let (vk, mut written) = made?;
        written.bytes = bytes;
        tracing::info!(
            basis_s = phases.basis.as_secs_f64(),
            sums_s = summed.as_secs_f64(),
            sums_wait_s = phases.sums_wait.as_secs_f64(),
            engine_s = phases.engine.as_secs_f64(),
            scalars_s = phases.scalars.as_secs_f64(),
            write_s = write.as_secs_f64(),
            bytes,
            "parameter generation phases"
        );
        Ok((vk, written))
    })
}

/// [`generate`] into a new file at `path`, synced; also returns how long that final sync took:
/// what the disk still owed when generation ended.
pub fn generate_file(
    m: &ShapeMatrices,
    rng: &mut dyn RngCore,
    engine: &dyn FixedBase,
    path: &Path,
) -> Result<(VerifyingKey<Bls12>, Written, Duration), SetupError> {
    let file = WriteBehind::new(std::fs::File::create(path)?)?;
    let mut out = io::BufWriter::with_capacity(1 << 22, file);
    let (vk, written) = generate(m, rng, engine, &mut out)?;
    let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    let syncing = Instant::now();
    file.finish()?;
    Ok((vk, written, syncing.elapsed()))
}

/// Chunks queued for the writer thread: two keep the disk busy while the next one is made.
const WRITE_AHEAD: usize = 2;

/// Where the time went: the QAP at τ the VK needs before anything is written (`basis`), then
/// the engine and the next chunk's scalars, which overlap, and the waits for column sums; the
/// writer's and the sums' time is measured on their own threads.
#[derive(Default)]
struct Phases {
    basis: Duration,
    scalars: Duration,
    engine: Duration,
    sums_wait: Duration,
}

struct Sink<'a> {
    tx: mpsc::SyncSender<(u64, Vec<u8>)>,
    spare: mpsc::Receiver<Vec<u8>>,
    /// The column sums of A, B and C, in that order.
    sums: mpsc::Receiver<Vec<Scalar>>,
    phases: &'a mut Phases,
}

impl Sink<'_> {
    /// Queues `buf` to be written at offset `at`.
    fn send(&self, at: u64, buf: Vec<u8>) -> Result<(), SetupError> {
        self.tx
            .send((at, buf))
            .map_err(|_| SetupError::Io(io::Error::other("the parameter writer stopped")))
    }

    /// A written buffer to fill again, or a new one.
    fn buffer(&self) -> Vec<u8> {
        self.spare.try_recv().unwrap_or_default()
    }

    /// The next matrix's column sums, waiting for them.
    fn column_sums(&mut self) -> Result<Vec<Scalar>, SetupError> {
        let sums = &self.sums;
        timed(&mut self.phases.sums_wait, || sums.recv())
            .map_err(|_| SetupError::Io(io::Error::other("the column sums thread stopped")))
    }
}

fn timed<T>(phase: &mut Duration, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    *phase += started.elapsed();
    out
}

/// Where each section of the file starts (the VK at 0).
struct Layout {
    h: u64,
    l: u64,
    a: u64,
    b_g1: u64,
    b_g2: u64,
}

impl Layout {
    fn new(vk_bytes: usize, h: usize, l: usize, a: usize, b: usize) -> Layout {
        // A section: its u32 length, then its points.
        let after = |at: u64, n: usize, curve: Curve| at + 4 + n as u64 * curve.point_bytes();
        let h_at = vk_bytes as u64;
        let l_at = after(h_at, h, Curve::G1);
        let a_at = after(l_at, l, Curve::G1);
        let b_g1 = after(a_at, a, Curve::G1);
        Layout {
            h: h_at,
            l: l_at,
            a: a_at,
            b_g1,
            b_g2: after(b_g1, b, Curve::G1),
        }
    }
}

/// The verifying key and every query into `sink`, each section at its offset, in the order
/// their scalars are ready: VK, H, A, B, L. `inputs` are the inputs' column sums in A, B, C.
fn queries(
    m: &ShapeMatrices,
    t: &Toxic,
    z: Scalar,
    size: usize,
    inputs: [Vec<Scalar>; 3],
    engine: &dyn FixedBase,
    sink: &mut Sink<'_>,
) -> Result<(VerifyingKey<Bls12>, Written), SetupError> {
    let inv = |s: Scalar| s.invert().expect("nonzero by construction");
    let (gamma_inv, delta_inv) = (inv(t.gamma), inv(t.delta));
    let [u, v, w] = &inputs;
    let ic_scalars: Vec<Scalar> = (0..m.inputs)
        .map(|j| t.ext([u[j], v[j], w[j]], gamma_inv))
        .collect();
    let g1 = G1Affine::generator();
    let g2 = G2Affine::generator();
    let vk = VerifyingKey::<Bls12> {
        alpha_g1: (g1 * t.alpha).to_affine(),
        beta_g1: (g1 * t.beta).to_affine(),
        beta_g2: (g2 * t.beta).to_affine(),
        gamma_g2: (g2 * t.gamma).to_affine(),
        delta_g1: (g1 * t.delta).to_affine(),
        delta_g2: (g2 * t.delta).to_affine(),
        ic: engine.g1(&ic_scalars)?,
    };
    let mut head = Vec::new();
    vk.write(&mut head)?;
    let (a_vars, b_vars) = (m.a_query_vars(), m.b_query_vars());
    let at = Layout::new(head.len(), size - 1, m.aux, a_vars.len(), b_vars.len());
    sink.send(0, head)?;
    let mut written = Written {
        g1_points: vk.ic.len() as u64,
        g2_points: 0,
        bytes: 0,
    };

    // H: τ^i · Z(τ) / δ for i < m - 1.
    let h_coeff = z * delta_inv;
    let h = |i: usize| t.tau.pow_vartime([i as u64]) * h_coeff;
    written.g1_points += write_query(sink, at.h, size - 1, engine, Curve::G1, &|range| {
        let first = h(range.start);
        let mut acc = first;
        range
            .map(|_| {
                let s = acc;
                acc *= t.tau;
                s
            })
            .collect()
    })?;
    let u = sink.column_sums()?;
    let a = dense_query("A", &u, &a_vars)?;
    written.g1_points += write_query(sink, at.a, a.len(), engine, Curve::G1, &|r| a[r].to_vec())?;
    drop(a);
    let v = sink.column_sums()?;
    let b = dense_query("B", &v, &b_vars)?;
    written.g1_points += write_query(sink, at.b_g1, b.len(), engine, Curve::G1, &|r| {
        b[r].to_vec()
    })?;
    written.g2_points += write_query(sink, at.b_g2, b.len(), engine, Curve::G2, &|r| {
        b[r].to_vec()
    })?;
    drop(b);
    let w = sink.column_sums()?;
    // L: every aux variable; zero weight means an unconstrained variable, which bellperson's
    // generator refuses too.
    let l: Vec<Scalar> = timed(&mut sink.phases.scalars, || {
        (m.inputs..m.variables())
            .into_par_iter()
            .map(|j| t.ext([u[j], v[j], w[j]], delta_inv))
            .collect()
    });
    if let Some(j) = l.iter().position(|s| s.is_zero_vartime()) {
        return Err(SetupError::Degenerate(format!(
            "aux variable {j} is unconstrained (zero weight in L)"
        )));
    }
    written.g1_points += write_query(sink, at.l, l.len(), engine, Curve::G1, &|r| l[r].to_vec())?;
    Ok((vk, written))
}

/// The weights of the variables `vars` of a dense query; one of zero weight at τ would drift
/// from the proving key's plan.
fn dense_query(name: &str, weights: &[Scalar], vars: &[u32]) -> Result<Vec<Scalar>, SetupError> {
    let scalars: Vec<Scalar> = vars.par_iter().map(|&j| weights[j as usize]).collect();
    match scalars.iter().position(|s| s.is_zero_vartime()) {
        Some(k) => Err(SetupError::Degenerate(format!(
            "variable {} appears in {name} but weighs zero at tau",
            vars[k]
        ))),
        None => Ok(scalars),
    }
}

#[derive(Clone, Copy)]
enum Curve {
    G1,
    G2,
}

impl Curve {
    /// A point in bellperson's uncompressed encoding.
    fn point_bytes(self) -> u64 {
        match self {
            Curve::G1 => 96,
            Curve::G2 => 192,
        }
    }
}

/// Sends one query of `n` points at offset `at`, `scalars(range)` giving the exponents of each
/// chunk.
fn write_query(
    sink: &mut Sink<'_>,
    at: u64,
    n: usize,
    engine: &dyn FixedBase,
    curve: Curve,
    scalars: &(dyn Fn(std::ops::Range<usize>) -> Vec<Scalar> + Sync),
) -> Result<u64, SetupError> {
    let len = u32::try_from(n)
        .map_err(|_| SetupError::Degenerate(format!("a query of {n} points exceeds u32")))?;
    sink.send(at, len.to_be_bytes().to_vec())?;
    // Chunks of the scalar range run in parallel when the closure is sequential (H).
    let make = |range: std::ops::Range<usize>| -> (Vec<Scalar>, Duration) {
        let started = Instant::now();
        let s = range
            .clone()
            .step_by(CHUNK / 16)
            .collect::<Vec<_>>()
            .into_par_iter()
            .flat_map_iter(|a| scalars(a..(a + CHUNK / 16).min(range.end)))
            .collect();
        (s, started.elapsed())
    };
    let chunk = |start: usize| start..(start + CHUNK).min(n);
    let mut next = (n > 0).then(|| make(chunk(0)));
    let mut start = 0;
    while let Some((s, took)) = next.take() {
        sink.phases.scalars += took;
        let end = start + s.len();
        // The device works on this chunk while the cores make the next one's scalars.
        let mut buf = sink.buffer();
        let (points, following) = rayon::join(
            || {
                let started = Instant::now();
                let points = match curve {
                    Curve::G1 => engine.g1_uncompressed(&s, &mut buf),
                    Curve::G2 => engine.g2_uncompressed(&s, &mut buf),
                };
                (points, started.elapsed())
            },
            || (end < n).then(|| make(chunk(end))),
        );
        sink.phases.engine += points.1;
        points.0?;
        sink.send(at + 4 + start as u64 * curve.point_bytes(), buf)?;
        next = following;
        start = end;
    }
    Ok(n as u64)
}

/// The points in bellperson's uncompressed encoding, back to back, into `out` (resized).
fn encode_into<P: Sync, const N: usize>(
    points: &[P],
    encode: fn(&P) -> [u8; N],
    out: &mut Vec<u8>,
) {
    out.resize(points.len() * N, 0);
    out.par_chunks_mut(N)
        .zip(points.par_iter())
        .for_each(|(o, p)| o.copy_from_slice(&encode(p)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::ProvingKey;
    use crate::r1cs::capture;
    use crate::recording::tests::ToyCircuit;
    use crate::{prove, verify, Backend, CpuBackend};
    use bellperson::groth16::{prepare_verifying_key, Parameters};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;
    use std::sync::Arc;

    #[test]
    fn generated_parameters_prove_and_verify() {
        let circuit = |x: u64| ToyCircuit {
            x: Scalar::from(x),
            y: Scalar::from(3u64),
            rounds: 30,
        };
        let m = Arc::new(capture(circuit(0)).unwrap());
        let mut file = io::Cursor::new(Vec::new());
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let (vk, written) = generate(&m, &mut rng, &CpuFixedBase::new(), &mut file).unwrap();
        let file = file.into_inner();
        assert_eq!(written.bytes, file.len() as u64);
        let params = Parameters::<Bls12>::read(&file[..], true).unwrap();
        assert!(params.vk == vk);
        let key = Arc::new(ProvingKey::new(Arc::new(params), m).unwrap());
        let pvk = prepare_verifying_key(&vk);
        let backend = CpuBackend;
        let key = backend.load_key(key).unwrap();
        for x in [1u64, 7] {
            let c = circuit(x);
            let inputs = c.public_inputs();
            let w = crate::synthesize_witness(c, None).unwrap();
            let proof = prove(&backend, &key, &w, Scalar::from(5u64), Scalar::from(9u64)).unwrap();
            assert!(verify(&pvk, &proof, &inputs).unwrap());
            // The same proof does not verify for other public inputs.
            let mut wrong = inputs.clone();
            wrong[1] += Scalar::ONE;
            assert!(!verify(&pvk, &proof, &wrong).unwrap());
        }
    }
}
