//! The CPU backend: rayon NTTs (see [`crate::ntt`]) and blst's multithreaded Pippenger MSMs.
//! Its functions double as the reference results for the GPU kernels.

use std::sync::Arc;

use bellperson::groth16::Parameters;
use blst::{blst_p1_affine, blst_p2_affine, MultiPoint};
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_wire::witness::{Assignment, Density};
use ff::Field;
use group::Group;
use rayon::prelude::*;

use crate::backend::{Backend, BackendError, MsmResults};
pub use crate::ntt::{compute_h, coset_ntt, domain_size, icoset_ntt, intt, ntt, omega};

/// Proves on the CPU. The SRS is the parameter set itself: blst reads the affine query vectors
/// in place, so nothing needs preparing.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl Backend for CpuBackend {
    type Srs = Arc<Parameters<Bls12>>;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn load_srs(&self, params: Arc<Parameters<Bls12>>) -> Result<Self::Srs, BackendError> {
        Ok(params)
    }

    fn compute_h(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, BackendError> {
        compute_h(a, b, c)
    }

    fn msms(
        &self,
        srs: &Self::Srs,
        h: &[Scalar],
        assignment: &Assignment,
    ) -> Result<MsmResults, BackendError> {
        check_query_sizes(srs, assignment)?;
        if h.len() != srs.h.len() {
            return Err(BackendError::Shape(format!(
                "{} H coefficients but the parameters have {} H points (different domain size)",
                h.len(),
                srs.h.len()
            )));
        }
        let aux = scalar_bytes(&assignment.aux);
        // A: inputs are fully dense and their bases come first, so inputs followed by the
        // A-dense aux meet `params.a` one to one and a single MSM covers A_in + A_aux.
        let mut a_scalars = assignment.input.clone();
        push_dense(&mut a_scalars, &assignment.aux, &assignment.a_aux_density);
        // B: the B-dense inputs then the B-dense aux meet `b_g1` / `b_g2` one to one.
        let mut b_scalars = Vec::new();
        push_dense(
            &mut b_scalars,
            &assignment.input,
            &assignment.b_input_density,
        );
        push_dense(&mut b_scalars, &assignment.aux, &assignment.b_aux_density);
        let b_scalars = scalar_bytes(&b_scalars);

        Ok(MsmResults {
            h: msm_g1_bytes(&srs.h, &scalar_bytes(h)),
            l: msm_g1_bytes(&srs.l, &aux),
            a: msm_g1_bytes(&srs.a, &scalar_bytes(&a_scalars)),
            b_g1: msm_g1_bytes(&srs.b_g1, &b_scalars),
            b_g2: msm_g2_bytes(&srs.b_g2, &b_scalars),
        })
    }
}

/// Checks that the assignment's inputs, aux and densities fit the query vectors of `params`
/// (bellperson-split §1.3: identity points are filtered out of A and B at setup, so their
/// lengths equal the dense counts). H is checked separately because its length depends on the
/// constraint count, which an assignment whose a/b/c have been moved out no longer carries.
pub fn check_query_sizes(
    params: &Parameters<Bls12>,
    assignment: &Assignment,
) -> Result<(), BackendError> {
    let inputs = assignment.input.len();
    let aux = assignment.aux.len();
    let shape = |msg: String| Err(BackendError::Shape(msg));
    if inputs == 0 {
        return shape("no public inputs (ONE is missing)".into());
    }
    if assignment.b_input_density.len() != inputs {
        return shape(format!(
            "B input density has {} bits for {inputs} inputs",
            assignment.b_input_density.len()
        ));
    }
    if assignment.a_aux_density.len() != aux || assignment.b_aux_density.len() != aux {
        return shape(format!(
            "aux densities have {} (A) and {} (B) bits for {aux} aux variables",
            assignment.a_aux_density.len(),
            assignment.b_aux_density.len()
        ));
    }
    if params.vk.ic.len() != inputs {
        return shape(format!(
            "{} public inputs (with ONE) but the verifying key expects {}",
            inputs,
            params.vk.ic.len()
        ));
    }
    if params.l.len() != aux {
        return shape(format!(
            "{aux} aux variables but the parameters have {} L points",
            params.l.len()
        ));
    }
    let a_len = inputs + assignment.a_aux_density.count_ones();
    if params.a.len() != a_len {
        return shape(format!(
            "the assignment needs {a_len} A points but the parameters have {}",
            params.a.len()
        ));
    }
    let b_len = assignment.b_input_density.count_ones() + assignment.b_aux_density.count_ones();
    if params.b_g1.len() != b_len || params.b_g2.len() != b_len {
        return shape(format!(
            "the assignment needs {b_len} B points but the parameters have {} (G1) and {} (G2)",
            params.b_g1.len(),
            params.b_g2.len()
        ));
    }
    Ok(())
}

/// Appends the values whose density bit is set, in order (filtered scalars meet consecutive
/// bases, because the SRS stores A and B without their identity points). Shared with the GPU
/// backend, which packs the same vectors for upload. Parallel: a PoRep-sized partition filters
/// hundreds of MB, which one core copies slower than the GPU proves.
pub fn push_dense(out: &mut Vec<Scalar>, values: &[Scalar], density: &Density) {
    const WORDS_PER_TASK: usize = 1 << 12;
    let words = density.words();
    let counts: Vec<usize> = words
        .par_chunks(WORDS_PER_TASK)
        .map(|c| c.iter().map(|w| w.count_ones() as usize).sum())
        .collect();
    let start = out.len();
    out.par_extend(
        (0..counts.iter().sum::<usize>())
            .into_par_iter()
            .map(|_| Scalar::ZERO),
    );
    let mut rest = &mut out[start..];
    let mut slices = Vec::with_capacity(counts.len());
    for &n in &counts {
        let (head, tail) = rest.split_at_mut(n);
        slices.push(head);
        rest = tail;
    }
    slices
        .into_par_iter()
        .zip(words.par_chunks(WORDS_PER_TASK))
        .enumerate()
        .for_each(|(task, (dst, chunk))| {
            let mut next = dst.iter_mut();
            for (w, &word) in chunk.iter().enumerate() {
                let base = (task * WORDS_PER_TASK + w) * 64;
                let mut bits = word;
                while bits != 0 {
                    *next.next().expect("slice sized by popcount") =
                        values[base + bits.trailing_zeros() as usize];
                    bits &= bits - 1;
                }
            }
        });
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
    use rand::{RngCore, SeedableRng};
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

    #[test]
    fn push_dense_follows_bits() {
        let values: Vec<Scalar> = (0..130u64).map(Scalar::from).collect();
        let mut d = Density::zeros(130);
        for i in [0, 5, 63, 64, 127, 129] {
            d.set(i);
        }
        let mut out = vec![Scalar::from(1000u64)];
        push_dense(&mut out, &values, &d);
        let expect: Vec<Scalar> = [1000u64, 0, 5, 63, 64, 127, 129]
            .into_iter()
            .map(Scalar::from)
            .collect();
        assert_eq!(out, expect);
    }

    #[test]
    fn push_dense_matches_a_serial_filter_across_tasks() {
        let mut rng = ChaCha20Rng::seed_from_u64(0x5eed);
        let n = 64 * 4096 * 3 + 77;
        let values: Vec<Scalar> = (0..n as u64).map(Scalar::from).collect();
        for density_pct in [0u32, 3, 50, 100] {
            let mut d = Density::zeros(n);
            let mut expect = vec![Scalar::from(7u64)];
            for (i, v) in values.iter().enumerate() {
                if rng.next_u32() % 100 < density_pct {
                    d.set(i);
                    expect.push(*v);
                }
            }
            let mut out = vec![Scalar::from(7u64)];
            push_dense(&mut out, &values, &d);
            assert_eq!(out, expect, "density {density_pct} %");
        }
    }
}
