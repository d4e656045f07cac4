//! Inputs for the checks: random scalars and points (fast, seeded per chunk), edge-case point
//! sets, a toy circuit, and timing helpers.

use std::time::Instant;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::prime::{PrimeCurve, PrimeCurveAffine};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

pub fn rng_from(seed: u64, stream: u64) -> ChaCha20Rng {
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

pub fn random_scalars(seed: u64, n: usize) -> Vec<Scalar> {
    seeded_scalars(seed, n, |r| Scalar::random(r))
}

/// Scalars shaped like a PoRep witness (docs/porep.md): 51 % zeros, 47 % ones, 2 % random.
pub fn witness_like_scalars(seed: u64, n: usize) -> Vec<Scalar> {
    seeded_scalars(seed, n, |r| match r.next_u32() % 100 {
        0..51 => Scalar::ZERO,
        51..98 => Scalar::ONE,
        _ => Scalar::random(r),
    })
}

/// `n` scalars drawn by `draw`, in parallel: an RNG of its own per chunk of 2^14, from `seed`.
fn seeded_scalars(
    seed: u64,
    n: usize,
    draw: impl Fn(&mut ChaCha20Rng) -> Scalar + Sync,
) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(1 << 14).enumerate().for_each(|(i, c)| {
        let mut r = rng_from(seed, i as u64);
        c.iter_mut().for_each(|x| *x = draw(&mut r));
    });
    v
}

/// Random points fast: per chunk of 4096, start·G + k·D (one scalar multiplication per chunk,
/// then additions), normalised in one batch per chunk. `stream` keeps G1 and G2 draws apart.
pub fn random_points<G>(seed: u64, stream: u64, n: usize) -> Vec<G::Affine>
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

pub fn random_g1(seed: u64, n: usize) -> Vec<G1Affine> {
    random_points::<G1Projective>(seed, 1 << 40, n)
}

pub fn random_g2(seed: u64, n: usize) -> Vec<G2Affine> {
    random_points::<G2Projective>(seed, 1 << 42, n)
}

/// The first n bases with identity points (every 7th), one point repeated (every 5th: the
/// doubling path inside a bucket) and its negation (every 11th: cancellation).
pub fn edge_points<A: PrimeCurveAffine>(bases: &[A], n: usize) -> Vec<A> {
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

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

pub fn time_ms(reps: usize, mut f: impl FnMut()) -> f64 {
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

/// A toy circuit with `rounds` squarings: several inputs, an aux variable in C only, inputs in B.
#[derive(Clone)]
pub struct Chain {
    pub x: Option<Scalar>,
    pub y: Option<Scalar>,
    pub rounds: usize,
}

impl Chain {
    /// bellperson's random parameters for a chain of `rounds`, the blank chain they were made
    /// from, and a chain of random values.
    pub fn instance(
        rounds: usize,
        r: &mut ChaCha20Rng,
    ) -> (
        std::sync::Arc<bellperson::groth16::Parameters<blstrs::Bls12>>,
        Chain,
        Chain,
    ) {
        let blank = Chain {
            x: None,
            y: None,
            rounds,
        };
        let params = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(
            blank.clone(),
            r,
        )
        .expect("parameters for the toy circuit");
        let circ = Chain {
            x: Some(Scalar::random(&mut *r)),
            y: Some(Scalar::random(&mut *r)),
            rounds,
        };
        (std::sync::Arc::new(params), blank, circ)
    }

    pub fn public_inputs(&self) -> Vec<Scalar> {
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
