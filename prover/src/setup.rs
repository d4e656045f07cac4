//! Groth16 parameters for a shape straight from its constraint matrices — INSECURE, for tests and
//! benchmarks only: whoever runs this knows the toxic waste.
//!
//! bellperson's generator synthesizes the circuit into per-variable lists and evaluates every
//! query point by point (99 s for the 2 KiB PoRep shape on 16 cores, 607 s on 2). Here the QAP at
//! τ is the transposed product of the matrices with the Lagrange basis at τ (one batch
//! inversion for the basis), and every query point is a fixed-base multiplication of a generator
//! by a scalar, which a [`FixedBase`] engine does in bulk: the CPU one below with windowed
//! tables, the CUDA backend on the device.
//!
//! The queries are streamed to the output in bellperson's `.params` layout (VK, then h, l, a,
//! b_g1, b_g2, each a u32 big-endian length and uncompressed points), one chunk at a time, so the
//! host never holds a whole query of a 2^27 shape. A and B keep exactly the variables the shape's
//! matrices make dense in them — what [`crate::ProvingKey`] packs — and a variable of zero
//! weight at τ fails the run instead of drifting from that plan.

use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use bellperson::groth16::VerifyingKey;
use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::{prime::PrimeCurveAffine, Curve as _, Group};
use rand_core::RngCore;
use rayon::prelude::*;

use crate::backend::BackendError;
use crate::ntt::{domain_size, omega};
use crate::r1cs::{Matrix, ShapeMatrices};
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
/// so a slow disk and the engine overlap.
pub fn generate(
    m: &ShapeMatrices,
    rng: &mut dyn RngCore,
    engine: &dyn FixedBase,
    out: &mut (dyn Write + Send),
) -> Result<(VerifyingKey<Bls12>, Written), SetupError> {
    let t = Toxic::random(rng);
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(WRITE_AHEAD);
        // Written buffers come back to be filled again: a 2^27 query is ~13 GB of points, and
        // fresh buffers cost a page fault per 4 KiB.
        let (spare_tx, spare_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let writer = scope.spawn(move || -> io::Result<(u64, Duration)> {
            let (mut bytes, mut busy) = (0, Duration::ZERO);
            for buf in rx {
                let started = Instant::now();
                out.write_all(&buf)?;
                busy += started.elapsed();
                bytes += buf.len() as u64;
                let _ = spare_tx.send(buf);
            }
            let started = Instant::now();
            out.flush()?;
            Ok((bytes, busy + started.elapsed()))
        });
        let mut phases = Phases::default();
        let mut sink = Sink {
            tx,
            spare: spare_rx,
            phases: &mut phases,
        };
        let made = queries(m, &t, engine, &mut sink);
        drop(sink);
        // The writer's own error explains a closed channel better than the send that hit it.
        let (bytes, write) = writer.join().map_err(|_| {
            SetupError::Io(io::Error::other("the parameter writer thread panicked"))
        })??;
        let (vk, mut written) = made?;
        written.bytes = bytes;
        tracing::info!(
            basis_s = phases.basis.as_secs_f64(),
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

/// Where the time went: the QAP at τ before anything is written (`basis`), then the engine and
/// the next chunk's scalars, which overlap; the writer's time is measured on its own thread.
#[derive(Default)]
struct Phases {
    basis: Duration,
    scalars: Duration,
    engine: Duration,
}

struct Sink<'a> {
    tx: std::sync::mpsc::SyncSender<Vec<u8>>,
    spare: std::sync::mpsc::Receiver<Vec<u8>>,
    phases: &'a mut Phases,
}

impl Sink<'_> {
    fn send(&self, buf: Vec<u8>) -> Result<(), SetupError> {
        self.tx
            .send(buf)
            .map_err(|_| SetupError::Io(io::Error::other("the parameter writer stopped")))
    }

    /// A written buffer to fill again, or a new one.
    fn buffer(&self) -> Vec<u8> {
        self.spare.try_recv().unwrap_or_default()
    }
}

fn timed<T>(phase: &mut Duration, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    *phase += started.elapsed();
    out
}

/// The verifying key and every query, in file order, into `sink`.
fn queries(
    m: &ShapeMatrices,
    t: &Toxic,
    engine: &dyn FixedBase,
    sink: &mut Sink<'_>,
) -> Result<(VerifyingKey<Bls12>, Written), SetupError> {
    let (size, log) = domain_size(m.constraints())?;
    let z = t.tau.pow_vartime([size as u64]) - Scalar::ONE;
    if z.is_zero_vartime() {
        return Err(SetupError::Degenerate(
            "tau landed in the evaluation domain".into(),
        ));
    }
    let [u, v, w] = timed(&mut sink.phases.basis, || {
        let lagrange = lagrange_at(t.tau, z, size, log);
        [&m.a, &m.b, &m.c].map(|matrix| column_sums(matrix, m.variables(), &m.coeffs, &lagrange))
    });

    let inv = |s: Scalar| s.invert().expect("nonzero by construction");
    let (gamma_inv, delta_inv) = (inv(t.gamma), inv(t.delta));
    // (β·u_j + α·v_j + w_j) / γ for inputs (IC), / δ for aux (L).
    let ext = |j: usize, d: Scalar| (t.beta * u[j] + t.alpha * v[j] + w[j]) * d;
    let ic_scalars: Vec<Scalar> = (0..m.inputs).map(|j| ext(j, gamma_inv)).collect();
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
    sink.send(head)?;
    let mut written = Written {
        g1_points: vk.ic.len() as u64,
        g2_points: 0,
        bytes: 0,
    };

    // H: τ^i · Z(τ) / δ for i < m - 1.
    let h_coeff = z * delta_inv;
    let h = |i: usize| t.tau.pow_vartime([i as u64]) * h_coeff;
    written.g1_points += write_query(sink, size - 1, engine, Curve::G1, &|range| {
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
    // L: every aux variable; zero weight means an unconstrained variable, which bellperson's
    // generator refuses too.
    let l: Vec<Scalar> = timed(&mut sink.phases.scalars, || {
        (m.inputs..m.variables())
            .into_par_iter()
            .map(|j| ext(j, delta_inv))
            .collect()
    });
    if let Some(j) = l.iter().position(|s| s.is_zero_vartime()) {
        return Err(SetupError::Degenerate(format!(
            "aux variable {j} is unconstrained (zero weight in L)"
        )));
    }
    written.g1_points += write_query(sink, l.len(), engine, Curve::G1, &|r| l[r].to_vec())?;
    drop(l);
    for (name, weights, vars, curves) in [
        ("A", &u, m.a_query_vars(), &[Curve::G1][..]),
        ("B", &v, m.b_query_vars(), &[Curve::G1, Curve::G2][..]),
    ] {
        let scalars: Vec<Scalar> = vars.par_iter().map(|&j| weights[j as usize]).collect();
        if let Some(k) = scalars.iter().position(|s| s.is_zero_vartime()) {
            return Err(SetupError::Degenerate(format!(
                "variable {} appears in {name} but weighs zero at tau",
                vars[k]
            )));
        }
        for &curve in curves {
            let n = write_query(sink, scalars.len(), engine, curve, &|r| scalars[r].to_vec())?;
            match curve {
                Curve::G1 => written.g1_points += n,
                Curve::G2 => written.g2_points += n,
            }
        }
    }
    Ok((vk, written))
}

#[derive(Clone, Copy)]
enum Curve {
    G1,
    G2,
}

/// Sends one query of `n` points, `scalars(range)` giving the exponents of each chunk.
fn write_query(
    sink: &mut Sink<'_>,
    n: usize,
    engine: &dyn FixedBase,
    curve: Curve,
    scalars: &(dyn Fn(std::ops::Range<usize>) -> Vec<Scalar> + Sync),
) -> Result<u64, SetupError> {
    let len = u32::try_from(n)
        .map_err(|_| SetupError::Degenerate(format!("a query of {n} points exceeds u32")))?;
    sink.send(len.to_be_bytes().to_vec())?;
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
        sink.send(buf)?;
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

/// `L_i(τ) = (τ^m − 1)/m · ω^i / (τ − ω^i)` for the domain of size `m`: what bellperson gets by
/// an inverse FFT of τ's powers, with one batch inversion instead.
fn lagrange_at(tau: Scalar, z: Scalar, m: usize, log: u32) -> Vec<Scalar> {
    const PAR: usize = 1 << 14;
    let w = omega(log);
    let scale = z * Scalar::from(m as u64).invert().expect("m < r");
    let mut out = vec![Scalar::ZERO; m];
    out.par_chunks_mut(PAR).enumerate().for_each(|(c, chunk)| {
        let mut wi = w.pow_vartime([(c * PAR) as u64]);
        // Denominators, then their batch inverse (Montgomery's trick), then the numerators.
        let mut powers = Vec::with_capacity(chunk.len());
        for d in chunk.iter_mut() {
            powers.push(wi);
            *d = tau - wi;
            wi *= w;
        }
        let mut prefix = Vec::with_capacity(chunk.len());
        let mut acc = Scalar::ONE;
        for d in chunk.iter() {
            prefix.push(acc);
            acc *= d;
        }
        let mut inv = acc.invert().expect("tau is outside the domain");
        for i in (0..chunk.len()).rev() {
            let d_inv = inv * prefix[i];
            inv *= chunk[i];
            chunk[i] = scale * powers[i] * d_inv;
        }
    });
    out
}

/// Columns per block of [`column_sums`]: a block's sums (2 MiB) stay in cache.
const COLUMN_BLOCK_BITS: u32 = 16;
/// Rows per task of [`column_sums`]' partitioning.
const ROW_TASK: usize = 1 << 16;

/// One matrix entry, partitioned by column block.
#[derive(Clone, Copy, Default)]
struct Entry {
    row: u32,
    col: u32,
    coeff: u32,
}

/// `Σ_i M_ij · L_i` for every variable `j`: the columns of `matrix` weighted by `lagrange`. The
/// entries are partitioned by column block (each task of rows writes its own region, in row
/// order), then each block sums into its own cache-resident accumulators. A per-column counting
/// sort did the same with three random accesses per entry: most of the 32 GiB shape's 34 s of
/// scalars (docs/gpu-runs.md).
fn column_sums(
    matrix: &Matrix,
    vars: usize,
    coeffs: &[Scalar],
    lagrange: &[Scalar],
) -> Vec<Scalar> {
    let blocks = vars.div_ceil(1 << COLUMN_BLOCK_BITS).max(1);
    let rows = matrix.rows();
    let task_rows = |t: usize| t * ROW_TASK..((t + 1) * ROW_TASK).min(rows);
    // Per task of rows: where each column block's entries start in `entries`, the tasks' regions
    // one after another (`start[blocks]` is where the next task's begins).
    let mut starts: Vec<Vec<usize>> = (0..rows.div_ceil(ROW_TASK))
        .into_par_iter()
        .map(|t| {
            let r = task_rows(t);
            let (a, b) = (
                matrix.row_ptr[r.start] as usize,
                matrix.row_ptr[r.end] as usize,
            );
            let mut start = vec![0usize; blocks + 1];
            for &c in &matrix.cols[a..b] {
                start[(c >> COLUMN_BLOCK_BITS) as usize + 1] += 1;
            }
            for b in 0..blocks {
                start[b + 1] += start[b];
            }
            start
        })
        .collect();
    let mut base = 0;
    for start in &mut starts {
        start.iter_mut().for_each(|s| *s += base);
        base = start[blocks];
    }
    let mut entries = vec![Entry::default(); matrix.nnz()];
    let mut regions = Vec::with_capacity(starts.len());
    let mut rest = entries.as_mut_slice();
    for start in &starts {
        let (region, tail) = rest.split_at_mut(start[blocks] - start[0]);
        regions.push(region);
        rest = tail;
    }
    regions.into_par_iter().enumerate().for_each(|(t, region)| {
        let start = &starts[t];
        let mut cursor: Vec<usize> = start.iter().map(|s| s - start[0]).collect();
        for row in task_rows(t) {
            let (a, b) = (
                matrix.row_ptr[row] as usize,
                matrix.row_ptr[row + 1] as usize,
            );
            for k in a..b {
                let col = matrix.cols[k];
                let at = &mut cursor[(col >> COLUMN_BLOCK_BITS) as usize];
                region[*at] = Entry {
                    row: row as u32,
                    col,
                    coeff: matrix.coeffs[k],
                };
                *at += 1;
            }
        }
    });
    let mut out = vec![Scalar::ZERO; vars];
    out.par_chunks_mut(1 << COLUMN_BLOCK_BITS)
        .enumerate()
        .for_each(|(b, sums)| {
            let first = b << COLUMN_BLOCK_BITS;
            for start in &starts {
                for e in &entries[start[b]..start[b + 1]] {
                    sums[e.col as usize - first] +=
                        lagrange[e.row as usize] * coeffs[e.coeff as usize];
                }
            }
        });
    out
}

/// Window width of the CPU tables: 26 windows of 1024 points (2.5 MB in G1, 5 MB in G2).
const WINDOW: usize = 10;

/// Fixed-base multiplication on the CPU with one precomputed table per window of the scalar.
pub struct CpuFixedBase {
    g1: Vec<G1Affine>,
    g2: Vec<G2Affine>,
}

fn windows() -> usize {
    (Scalar::NUM_BITS as usize).div_ceil(WINDOW)
}

/// `table[w · 2^WINDOW + d] = d · 2^(WINDOW·w) · base`.
fn table<G: Group + group::Curve + Send + Sync>(
    base: G,
    to_affine: fn(&[G]) -> Vec<G::AffineRepr>,
) -> Vec<G::AffineRepr>
where
    G::AffineRepr: Send,
{
    let mut rows = Vec::with_capacity(windows() << WINDOW);
    let mut b = base;
    for _ in 0..windows() {
        let mut acc = G::identity();
        for _ in 0..1 << WINDOW {
            rows.push(acc);
            acc += b;
        }
        b = acc;
    }
    to_affine(&rows)
}

fn digit(repr: &[u8; 32], w: usize) -> usize {
    let bit = w * WINDOW;
    let mut v = 0usize;
    for k in 0..WINDOW {
        let b = bit + k;
        if b < 256 {
            v |= ((repr[b / 8] >> (b % 8)) as usize & 1) << k;
        }
    }
    v
}

/// Batch conversion to affine (one inversion for all), through blst.
pub fn g1_to_affine(points: &[G1Projective]) -> Vec<G1Affine> {
    let mut out = vec![G1Affine::identity(); points.len()];
    if !points.is_empty() {
        let ptrs = [points.as_ptr().cast::<blst_p1>(), std::ptr::null()];
        // SAFETY: blstrs' point types are `repr(transparent)` over blst's; `ptrs[1]` null tells
        // blst the points are one contiguous array of `points.len()`.
        unsafe {
            blst::blst_p1s_to_affine(
                out.as_mut_ptr().cast::<blst_p1_affine>(),
                ptrs.as_ptr(),
                points.len(),
            )
        };
    }
    out
}

pub fn g2_to_affine(points: &[G2Projective]) -> Vec<G2Affine> {
    let mut out = vec![G2Affine::identity(); points.len()];
    if !points.is_empty() {
        let ptrs = [points.as_ptr().cast::<blst_p2>(), std::ptr::null()];
        // SAFETY: as in `g1_to_affine`.
        unsafe {
            blst::blst_p2s_to_affine(
                out.as_mut_ptr().cast::<blst_p2_affine>(),
                ptrs.as_ptr(),
                points.len(),
            )
        };
    }
    out
}

impl CpuFixedBase {
    pub fn new() -> Self {
        CpuFixedBase {
            g1: table(G1Projective::generator(), g1_to_affine),
            g2: table(G2Projective::generator(), g2_to_affine),
        }
    }
}

impl Default for CpuFixedBase {
    fn default() -> Self {
        Self::new()
    }
}

fn mul_many<P: Group + Send, A: Send + Sync>(
    table: &[A],
    scalars: &[Scalar],
    add: fn(&mut P, &A),
    to_affine: fn(&[P]) -> Vec<A>,
) -> Vec<A> {
    scalars
        .par_chunks(1 << 12)
        .flat_map_iter(|chunk| {
            let proj: Vec<P> = chunk
                .iter()
                .map(|s| {
                    let repr = s.to_repr();
                    let mut acc = P::identity();
                    for w in 0..windows() {
                        let d = digit(&repr, w);
                        if d != 0 {
                            add(&mut acc, &table[(w << WINDOW) + d]);
                        }
                    }
                    acc
                })
                .collect();
            to_affine(&proj)
        })
        .collect()
}

impl FixedBase for CpuFixedBase {
    fn g1(&self, scalars: &[Scalar]) -> Result<Vec<G1Affine>, BackendError> {
        Ok(mul_many(&self.g1, scalars, |p, a| *p += a, g1_to_affine))
    }

    fn g2(&self, scalars: &[Scalar]) -> Result<Vec<G2Affine>, BackendError> {
        Ok(mul_many(&self.g2, scalars, |p, a| *p += a, g2_to_affine))
    }
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
    fn fixed_base_matches_scalar_multiplication() {
        let e = CpuFixedBase::new();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let mut s: Vec<Scalar> = (0..50).map(|_| Scalar::random(&mut rng)).collect();
        s.extend([
            Scalar::ZERO,
            Scalar::ONE,
            -Scalar::ONE,
            Scalar::from(1u64 << 40),
        ]);
        let g1 = e.g1(&s).unwrap();
        let g2 = e.g2(&s).unwrap();
        for (i, s) in s.iter().enumerate() {
            assert_eq!(g1[i], (G1Affine::generator() * s).to_affine(), "G1 {i}");
            assert_eq!(g2[i], (G2Affine::generator() * s).to_affine(), "G2 {i}");
        }
    }

    #[test]
    fn column_sums_match_the_dense_product() {
        // Several column blocks and row tasks, entries anywhere.
        let (rows, vars) = (ROW_TASK + 1000, (3 << COLUMN_BLOCK_BITS) + 5);
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let coeffs: Vec<Scalar> = (0..4).map(|_| Scalar::random(&mut rng)).collect();
        let lagrange: Vec<Scalar> = (0..rows).map(|_| Scalar::random(&mut rng)).collect();
        let mut matrix = Matrix {
            row_ptr: vec![0],
            cols: Vec::new(),
            coeffs: Vec::new(),
        };
        for _ in 0..rows {
            for _ in 0..rng.next_u32() % 4 {
                matrix.cols.push(rng.next_u32() % vars as u32);
                matrix.coeffs.push(rng.next_u32() % 4);
            }
            matrix.row_ptr.push(matrix.cols.len() as u32);
        }
        let mut want = vec![Scalar::ZERO; vars];
        for (r, l) in lagrange.iter().enumerate() {
            for k in matrix.row_ptr[r] as usize..matrix.row_ptr[r + 1] as usize {
                want[matrix.cols[k] as usize] += l * coeffs[matrix.coeffs[k] as usize];
            }
        }
        assert!(column_sums(&matrix, vars, &coeffs, &lagrange) == want);
    }

    #[test]
    fn lagrange_basis_interpolates() {
        // Σ_i L_i(τ)·f(ω^i) = f(τ) for f of degree < m; f(x) = x^3 + 5 here.
        let (m, log) = (16usize, 4);
        let tau = Scalar::from(123456789u64);
        let z = tau.pow_vartime([m as u64]) - Scalar::ONE;
        let l = lagrange_at(tau, z, m, log);
        let w = omega(log);
        let f = |x: Scalar| x * x * x + Scalar::from(5u64);
        let sum: Scalar = (0..m).map(|i| l[i] * f(w.pow_vartime([i as u64]))).sum();
        assert_eq!(sum, f(tau));
    }

    #[test]
    fn generated_parameters_prove_and_verify() {
        let circuit = |x: u64| ToyCircuit {
            x: Scalar::from(x),
            y: Scalar::from(3u64),
            rounds: 30,
        };
        let m = Arc::new(capture(circuit(0)).unwrap());
        let mut file = Vec::new();
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let (vk, written) = generate(&m, &mut rng, &CpuFixedBase::new(), &mut file).unwrap();
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
