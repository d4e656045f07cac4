//! The CPU backend: rayon sparse products and NTTs (see [`crate::ntt`]) and blst's
//! multithreaded Pippenger MSMs. Its results are the reference the GPU kernels are checked
//! against.

use std::sync::Arc;

use bellperson::groth16::Parameters;
use blst::{blst_p1_affine, blst_p2_affine, MultiPoint};
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_wire::blob::CompactWitness;
use cuzk_wire::witness::Witness;
use group::Group;
use rayon::prelude::*;

use crate::backend::{Backend, MsmResults};
use crate::error::BackendError;
use crate::key::{KeyInfo, ProvingKey};
pub use crate::ntt::{compute_h, coset_ntt, domain_size, icoset_ntt, intt, ntt, omega};

/// Proves on the CPU. blst reads the affine query vectors in place, so a key is the host
/// proving key with its parameters in memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

/// A proving key with its points parsed.
pub struct CpuKey {
    pub key: Arc<ProvingKey>,
    pub params: Arc<Parameters<Bls12>>,
}

impl Backend for CpuBackend {
    type Key = CpuKey;
    type Witness = Witness;
    type Scalars = Vec<Scalar>;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn load_key(&self, key: Arc<ProvingKey>) -> Result<Self::Key, BackendError> {
        let params = key.srs.parameters()?;
        Ok(CpuKey { key, params })
    }

    fn key_info<'k>(&self, key: &'k Self::Key) -> &'k KeyInfo {
        &key.key.info
    }

    fn upload(&self, _: &Self::Key, witness: &Witness) -> Result<Witness, BackendError> {
        Ok(witness.clone())
    }

    fn upload_compact(&self, _: &Self::Key, w: &CompactWitness) -> Result<Witness, BackendError> {
        Ok(w.expand()?)
    }

    fn evaluate(&self, key: &Self::Key, w: &Witness) -> Result<[Vec<Scalar>; 3], BackendError> {
        Ok(key.key.matrices.evaluate(&|j| w.value(j)))
    }

    fn compute_h(
        &self,
        _: &Self::Key,
        [a, b, c]: [Vec<Scalar>; 3],
    ) -> Result<Vec<Scalar>, BackendError> {
        compute_h(a, b, c)
    }

    fn msms(
        &self,
        key: &Self::Key,
        w: &Witness,
        h: Vec<Scalar>,
    ) -> Result<MsmResults, BackendError> {
        let p = &key.params;
        let b_scalars = gather_bytes(w, &key.key.b_vars);
        Ok(MsmResults {
            h: msm_g1_bytes(&p.h, &scalar_bytes(&h)),
            l: msm_g1_bytes(&p.l, &scalar_bytes(&w.aux)),
            a: msm_g1_bytes(&p.a, &gather_bytes(w, &key.key.a_vars)),
            b_g1: msm_g1_bytes(&p.b_g1, &b_scalars),
            b_g2: msm_g2_bytes(&p.b_g2, &b_scalars),
        })
    }

    fn download(&self, v: &Vec<Scalar>) -> Result<Vec<Scalar>, BackendError> {
        Ok(v.clone())
    }
}

/// The canonical bytes of the witness variables `vars`, in order: an MSM's packed scalars.
fn gather_bytes(w: &Witness, vars: &[u32]) -> Vec<u8> {
    let mut out = vec![0u8; vars.len() * 32];
    out.par_chunks_mut(32 * 1024)
        .zip(vars.par_chunks(1024))
        .for_each(|(out, vars)| {
            for (o, &j) in out.chunks_exact_mut(32).zip(vars) {
                o.copy_from_slice(&w.value(j as usize).to_bytes_le());
            }
        });
    out
}

/// Canonical little-endian 32-byte encodings, the scalar format blst's Pippenger reads.
fn scalar_bytes(scalars: &[Scalar]) -> Vec<u8> {
    let mut out = vec![0u8; scalars.len() * 32];
    out.par_chunks_mut(32 * 1024)
        .zip(scalars.par_chunks(1024))
        .for_each(|(out, s)| {
            for (o, s) in out.chunks_exact_mut(32).zip(s) {
                o.copy_from_slice(&s.to_bytes_le());
            }
        });
    out
}

/// Views blstrs affine points as blst's, without copying the (possibly huge) SRS vectors.
/// blstrs declares `G1Affine`/`G2Affine` `#[repr(transparent)]` over the blst types and exposes
/// that inner value through `AsRef`; the assertions confirm the layout before the cast.
fn as_blst<T: AsRef<U>, U>(points: &[T]) -> &[U] {
    assert_eq!(size_of::<T>(), size_of::<U>());
    assert_eq!(align_of::<T>(), align_of::<U>());
    if let Some(first) = points.first() {
        assert_eq!(
            first.as_ref() as *const U as *const u8,
            first as *const T as *const u8
        );
    }
    // SAFETY: `T` is a transparent wrapper of `U` (same size and alignment, inner value at
    // offset zero as checked above), so a slice of `T` is a valid slice of `U`.
    unsafe { std::slice::from_raw_parts(points.as_ptr().cast::<U>(), points.len()) }
}

fn msm_g1_bytes(bases: &[G1Affine], scalars: &[u8]) -> G1Projective {
    debug_assert_eq!(bases.len() * 32, scalars.len());
    let mut out = G1Projective::identity();
    // blst indexes the first point unconditionally, so an empty MSM is handled here.
    if !bases.is_empty() {
        *out.as_mut() = as_blst::<G1Affine, blst_p1_affine>(bases).mult(scalars, 255);
    }
    out
}

fn msm_g2_bytes(bases: &[G2Affine], scalars: &[u8]) -> G2Projective {
    debug_assert_eq!(bases.len() * 32, scalars.len());
    let mut out = G2Projective::identity();
    if !bases.is_empty() {
        *out.as_mut() = as_blst::<G2Affine, blst_p2_affine>(bases).mult(scalars, 255);
    }
    out
}

/// `sum scalars[i] * bases[i]` (blst Pippenger, multithreaded); the identity when empty.
/// Panics if the lengths differ.
pub fn msm_g1(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
    assert_eq!(
        bases.len(),
        scalars.len(),
        "MSM bases and scalars differ in length"
    );
    msm_g1_bytes(bases, &scalar_bytes(scalars))
}

/// `sum scalars[i] * bases[i]` over G2; the identity when empty. Panics if the lengths differ.
pub fn msm_g2(bases: &[G2Affine], scalars: &[Scalar]) -> G2Projective {
    assert_eq!(
        bases.len(),
        scalars.len(),
        "MSM bases and scalars differ in length"
    );
    msm_g2_bytes(bases, &scalar_bytes(scalars))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use group::{prime::PrimeCurveAffine, Curve};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn msm_matches_naive_including_identity_and_small_sizes() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        for n in [0usize, 1, 2, 5, 31, 40, 300] {
            let mut g1: Vec<G1Affine> = (0..n)
                .map(|_| G1Projective::random(&mut rng).to_affine())
                .collect();
            let g2: Vec<G2Affine> = (0..n)
                .map(|_| G2Projective::random(&mut rng).to_affine())
                .collect();
            if n > 3 {
                g1[2] = G1Affine::identity();
            }
            let mut s: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            if n > 4 {
                s[0] = Scalar::ZERO;
                s[1] = Scalar::ONE;
                s[3] = -Scalar::ONE;
            }
            let naive1: G1Projective = g1.iter().zip(&s).map(|(p, s)| p.to_curve() * s).sum();
            let naive2: G2Projective = g2.iter().zip(&s).map(|(p, s)| p.to_curve() * s).sum();
            assert_eq!(msm_g1(&g1, &s), naive1, "G1 n={n}");
            assert_eq!(msm_g2(&g2, &s), naive2, "G2 n={n}");
        }
    }
}
