//! Fixed-base multiplication on the CPU: the engine of machines without a GPU.

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::PrimeField;
use group::{prime::PrimeCurveAffine, Group};
use rayon::prelude::*;

use super::FixedBase;
use crate::error::BackendError;

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
    use ff::Field;
    use group::Curve as _;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

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
}
