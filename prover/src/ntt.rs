//! Radix-2 number-theoretic transforms over the BLS12-381 scalar field and the exact H pipeline
//! of bellperson's prover. These are the CPU backend's engine and the reference the GPU kernels
//! are tested against.
//!
//! Internally the forward pass is decimation-in-frequency (natural order in, bit-reversed out)
//! and the backward pass decimation-in-time (bit-reversed in, natural out), so `compute_h` needs
//! a single bit-reversal for seven transforms. Stages whose butterfly blocks fit in cache are run
//! block by block, so each cache-sized block is loaded once for all of its small stages.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::error::BackendError;

/// Blocks of this many elements (128 KiB) run all their remaining stages while in cache.
const CACHE_BLOCK: usize = 1 << 12;
/// Work unit for element-wise parallel loops.
const PAR_CHUNK: usize = 1 << 12;

/// The evaluation domain for `n` constraints: `(m, log2 m)` with `m` the smallest power of two
/// `>= n`. Like bellperson's `EvaluationDomain::from_coeffs`, `log2 m` must stay below `Fr::S`.
pub fn domain_size(n: usize) -> Result<(usize, u32), BackendError> {
    let m = n.max(1).checked_next_power_of_two().ok_or_else(too_large)?;
    let log = m.trailing_zeros();
    if log >= Scalar::S {
        return Err(too_large());
    }
    Ok((m, log))
}

fn too_large() -> BackendError {
    BackendError::Shape(format!(
        "too many constraints: the evaluation domain would exceed 2^{}",
        Scalar::S - 1
    ))
}

/// The primitive `2^log`-th root of unity bellperson uses: `ROOT_OF_UNITY^(2^(S - log))`.
pub fn omega(log: u32) -> Scalar {
    assert!(log <= Scalar::S, "no 2^{log}-th root of unity in Fr");
    let mut w = Scalar::ROOT_OF_UNITY;
    for _ in log..Scalar::S {
        w = w.square();
    }
    w
}

/// `[start * base^0, start * base^1, ..., start * base^(len-1)]`, computed in parallel chunks.
fn powers(start: Scalar, base: Scalar, len: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; len];
    out.par_chunks_mut(PAR_CHUNK)
        .enumerate()
        .for_each(|(i, chunk)| {
            let mut acc = start * base.pow_vartime([(i * PAR_CHUNK) as u64]);
            for v in chunk {
                *v = acc;
                acc *= base;
            }
        });
    out
}

/// Multiplies `values[i]` by `start * base^i`.
fn scale_by_powers(values: &mut [Scalar], start: Scalar, base: Scalar) {
    values
        .par_chunks_mut(PAR_CHUNK)
        .enumerate()
        .for_each(|(i, chunk)| {
            let mut acc = start * base.pow_vartime([(i * PAR_CHUNK) as u64]);
            for v in chunk {
                *v *= acc;
                acc *= base;
            }
        });
}

fn scale_by(values: &mut [Scalar], factors: &[Scalar]) {
    values
        .par_chunks_mut(PAR_CHUNK)
        .zip(factors.par_chunks(PAR_CHUNK))
        .for_each(|(v, f)| v.iter_mut().zip(f).for_each(|(v, f)| *v *= f));
}

fn reverse_bits(i: usize, log: u32) -> usize {
    if log == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - log)
    }
}

fn bit_reverse_permute<T>(values: &mut [T]) {
    let log = values.len().trailing_zeros();
    for i in 0..values.len() {
        let j = reverse_bits(i, log);
        if i < j {
            values.swap(i, j);
        }
    }
}

/// `twiddles[k] = w^k` for `k < m/2`: every butterfly factor of an `m`-point transform with root
/// `w` (stage with half-width `h` uses `w^(j * m/(2h))`).
fn twiddles(w: Scalar, m: usize) -> Vec<Scalar> {
    powers(Scalar::ONE, w, m / 2)
}

/// One decimation-in-frequency stage on one block of width `2 * half`.
#[inline]
fn dif_block(block: &mut [Scalar], half: usize, stride: usize, tw: &[Scalar]) {
    let (lo, hi) = block.split_at_mut(half);
    for (j, (u, v)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let d = *u - *v;
        *u += *v;
        *v = d * tw[j * stride];
    }
}

/// One decimation-in-time stage on one block of width `2 * half`.
#[inline]
fn dit_block(block: &mut [Scalar], half: usize, stride: usize, tw: &[Scalar]) {
    let (lo, hi) = block.split_at_mut(half);
    for (j, (u, v)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let t = *v * tw[j * stride];
        *v = *u - t;
        *u += t;
    }
}

/// A stage whose blocks are wider than the cache block: parallel across butterflies.
fn wide_stage(values: &mut [Scalar], half: usize, tw: &[Scalar], dif: bool) {
    let stride = values.len() / (2 * half);
    // Parallel across blocks and, nested, across butterflies of a block: early stages have a
    // single block, late ones many blocks of a few chunks each.
    values.par_chunks_mut(2 * half).for_each(|block| {
        let (lo, hi) = block.split_at_mut(half);
        lo.par_chunks_mut(PAR_CHUNK)
            .zip(hi.par_chunks_mut(PAR_CHUNK))
            .enumerate()
            .for_each(|(c, (lo, hi))| {
                let base = c * PAR_CHUNK;
                for (j, (u, v)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                    let w = tw[(base + j) * stride];
                    if dif {
                        let d = *u - *v;
                        *u += *v;
                        *v = d * w;
                    } else {
                        let t = *v * w;
                        *v = *u - t;
                        *u += t;
                    }
                }
            });
    });
}

/// Natural-order input, bit-reversed output; `tw` from [`twiddles`] for `values.len()`.
fn dif(values: &mut [Scalar], tw: &[Scalar]) {
    let m = values.len();
    let mut half = m / 2;
    while half >= 1 && 2 * half > CACHE_BLOCK {
        wide_stage(values, half, tw, true);
        half /= 2;
    }
    if half == 0 {
        return;
    }
    let block = 2 * half;
    values.par_chunks_mut(block).for_each(|chunk| {
        let mut h = half;
        while h >= 1 {
            let stride = m / (2 * h);
            for sub in chunk.chunks_mut(2 * h) {
                dif_block(sub, h, stride, tw);
            }
            h /= 2;
        }
    });
}

/// Bit-reversed input, natural-order output; `tw` from [`twiddles`] for `values.len()`.
fn dit(values: &mut [Scalar], tw: &[Scalar]) {
    let m = values.len();
    if m < 2 {
        return;
    }
    let block = m.min(CACHE_BLOCK);
    values.par_chunks_mut(block).for_each(|chunk| {
        let mut h = 1;
        while 2 * h <= block {
            let stride = m / (2 * h);
            for sub in chunk.chunks_mut(2 * h) {
                dit_block(sub, h, stride, tw);
            }
            h *= 2;
        }
    });
    let mut half = block;
    while half < m {
        wide_stage(values, half, tw, false);
        half *= 2;
    }
}

fn check_len(values: &[Scalar]) {
    assert!(
        values.len().is_power_of_two(),
        "transform length {} is not a power of two",
        values.len()
    );
}

/// In-place forward transform: `values[i] <- sum_j values[j] * omega^(i*j)`.
/// `values.len()` must be a power of two and `omega` a primitive root of that order.
pub fn ntt(values: &mut [Scalar], omega: Scalar) {
    check_len(values);
    let tw = twiddles(omega, values.len());
    dif(values, &tw);
    bit_reverse_permute(values);
}

/// In-place inverse of [`ntt`], including the factor `m^-1`.
pub fn intt(values: &mut [Scalar], omega: Scalar) {
    check_len(values);
    let m = values.len();
    let tw = twiddles(omega.invert().expect("omega is a root of unity"), m);
    dif(values, &tw);
    bit_reverse_permute(values);
    let m_inv = Scalar::from(m as u64).invert().expect("m < r");
    values
        .par_chunks_mut(PAR_CHUNK)
        .for_each(|c| c.iter_mut().for_each(|v| *v *= m_inv));
}

/// Evaluates the coefficients in `values` on the coset `g * <omega>` with
/// `g = Fr::MULTIPLICATIVE_GENERATOR` (= 7), as bellperson's `coset_fft` does.
pub fn coset_ntt(values: &mut [Scalar], omega: Scalar) {
    scale_by_powers(values, Scalar::ONE, Scalar::MULTIPLICATIVE_GENERATOR);
    ntt(values, omega);
}

/// Inverse of [`coset_ntt`]: interpolates values on `g * <omega>` back to coefficients.
pub fn icoset_ntt(values: &mut [Scalar], omega: Scalar) {
    intt(values, omega);
    let g_inv = Scalar::MULTIPLICATIVE_GENERATOR.invert().expect("g != 0");
    scale_by_powers(values, Scalar::ONE, g_inv);
}

/// The coefficients of H from the constraint evaluations `a`, `b`, `c` (all of length `n`):
/// pad to `m = 2^k >= n`; bellperson's `execute_fft` takes all three through iNTT and coset NTT,
/// forms `a*b - c`, multiplies by `(g^m - 1)^-1` and applies the inverse coset NTT. That last
/// transform is linear and undoes C's coset NTT exactly (C has fewer than `m` coefficients), so
/// here C is only interpolated and subtracted after it: one transform of the seven fewer, the
/// same coefficients for any input. Returns `m - 1` of them (the dropped top one is zero for a
/// satisfied circuit), bit-identical to bellperson's.
pub fn compute_h(
    mut a: Vec<Scalar>,
    mut b: Vec<Scalar>,
    mut c: Vec<Scalar>,
) -> Result<Vec<Scalar>, BackendError> {
    let n = a.len();
    if b.len() != n || c.len() != n {
        return Err(BackendError::Shape(format!(
            "constraint vectors differ in length: a={} b={} c={}",
            n,
            b.len(),
            c.len()
        )));
    }
    let (m, log) = domain_size(n)?;
    let w = omega(log);
    let w_inv = w.invert().expect("omega is a root of unity");
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    let g_inv = g.invert().expect("g != 0");
    let m_inv = Scalar::from(m as u64).invert().expect("m < r");
    let z_inv = (g.pow_vartime([m as u64]) - Scalar::ONE)
        .invert()
        .expect("g^m != 1 because g generates the whole multiplicative group");

    let tw_inv = twiddles(w_inv, m);
    // After the first (inverse, DIF) pass coefficient i sits at position bitrev(i); it needs
    // m^-1 (the inverse transform's factor) times g^i (the coset shift). The final pass needs
    // (g^m - 1)^-1 (division by Z on the coset, folded in since it is a constant) times m^-1
    // times g^-i. Both tables are built in natural order and permuted once.
    let mut to_coset = powers(m_inv, g, m);
    bit_reverse_permute(&mut to_coset);
    let mut from_coset = powers(m_inv * z_inv, g_inv, m);
    bit_reverse_permute(&mut from_coset);

    c.resize(m, Scalar::ZERO);
    dif(&mut c, &tw_inv);
    for v in [&mut a, &mut b] {
        v.resize(m, Scalar::ZERO);
        dif(v, &tw_inv);
        scale_by(v, &to_coset);
    }
    drop(to_coset);
    let tw = twiddles(w, m);
    for v in [&mut a, &mut b] {
        dit(v, &tw);
    }
    drop(tw);

    a.par_chunks_mut(PAR_CHUNK)
        .zip(b.par_chunks(PAR_CHUNK))
        .for_each(|(a, b)| a.iter_mut().zip(b).for_each(|(a, b)| *a *= b));
    drop(b);

    dif(&mut a, &tw_inv);
    scale_by(&mut a, &from_coset);
    // Both in bit-reversed order; C still lacks m^-1 and the division by Z, which A has.
    let k = m_inv * z_inv;
    a.par_chunks_mut(PAR_CHUNK)
        .zip(c.par_chunks(PAR_CHUNK))
        .for_each(|(a, c)| a.iter_mut().zip(c).for_each(|(a, c)| *a -= *c * k));
    drop(c);
    bit_reverse_permute(&mut a);
    a.truncate(m - 1);
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::domain::EvaluationDomain;
    use ec_gpu_gen::threadpool::Worker;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn random_vec(rng: &mut ChaCha20Rng, n: usize) -> Vec<Scalar> {
        (0..n).map(|_| Scalar::random(&mut *rng)).collect()
    }

    fn naive_dft(values: &[Scalar], w: Scalar) -> Vec<Scalar> {
        let m = values.len();
        (0..m)
            .map(|i| {
                let wi = w.pow_vartime([i as u64]);
                let mut acc = Scalar::ZERO;
                let mut x = Scalar::ONE;
                for v in values {
                    acc += *v * x;
                    x *= wi;
                }
                acc
            })
            .collect()
    }

    #[test]
    fn ntt_matches_naive_and_inverts() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        // Sizes below, at and above CACHE_BLOCK exercise both stage strategies.
        for log in [0u32, 1, 2, 5, 9, 12, 14] {
            let m = 1usize << log;
            let w = omega(log);
            let orig = random_vec(&mut rng, m);
            let mut v = orig.clone();
            ntt(&mut v, w);
            if log <= 9 {
                assert_eq!(v, naive_dft(&orig, w), "ntt != naive dft at m={m}");
            }
            intt(&mut v, w);
            assert_eq!(v, orig, "intt(ntt(x)) != x at m={m}");
            coset_ntt(&mut v, w);
            icoset_ntt(&mut v, w);
            assert_eq!(v, orig, "icoset(coset(x)) != x at m={m}");
            // dit on bit-reversed input is the natural-order transform too.
            let mut v = orig.clone();
            bit_reverse_permute(&mut v);
            dit(&mut v, &twiddles(w, m));
            let mut expect = orig.clone();
            ntt(&mut expect, w);
            assert_eq!(v, expect, "dit != ntt at m={m}");
        }
    }

    fn bellperson_h(a: Vec<Scalar>, b: Vec<Scalar>, c: Vec<Scalar>) -> Vec<Scalar> {
        let worker = Worker::new();
        let mut a = EvaluationDomain::from_coeffs(a).unwrap();
        let mut b = EvaluationDomain::from_coeffs(b).unwrap();
        let mut c = EvaluationDomain::from_coeffs(c).unwrap();
        EvaluationDomain::ifft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut None).unwrap();
        EvaluationDomain::coset_fft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut None)
            .unwrap();
        a.mul_assign(&worker, &b);
        a.sub_assign(&worker, &c);
        a.divide_by_z_on_coset(&worker);
        a.icoset_fft(&worker, &mut None).unwrap();
        let mut h = a.into_coeffs();
        h.truncate(h.len() - 1);
        h
    }

    #[test]
    fn compute_h_matches_bellperson_domain() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        for n in [1usize, 2, 3, 100, 1000, 5000, 9000] {
            let a = random_vec(&mut rng, n);
            let b = random_vec(&mut rng, n);
            let c = random_vec(&mut rng, n);
            let ours = compute_h(a.clone(), b.clone(), c.clone()).unwrap();
            let theirs = bellperson_h(a, b, c);
            assert_eq!(ours.len(), n.next_power_of_two() - 1);
            assert_eq!(
                ours, theirs,
                "compute_h differs from EvaluationDomain at n={n}"
            );
        }
    }

    #[test]
    fn satisfied_constraints_drop_a_zero_coefficient() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let n = 777;
        let a = random_vec(&mut rng, n);
        let b = random_vec(&mut rng, n);
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(a, b)| *a * b).collect();
        let mut padded = [a.clone(), b.clone(), c.clone()];
        let h = compute_h(a, b, c).unwrap();
        // Recompute the full pipeline with public helpers to see the top coefficient.
        let (m, log) = domain_size(n).unwrap();
        let w = omega(log);
        for v in padded.iter_mut() {
            v.resize(m, Scalar::ZERO);
            intt(v, w);
            coset_ntt(v, w);
        }
        let z_inv = (Scalar::MULTIPLICATIVE_GENERATOR.pow_vartime([m as u64]) - Scalar::ONE)
            .invert()
            .unwrap();
        let [pa, pb, pc] = padded;
        let mut full: Vec<Scalar> = pa
            .iter()
            .zip(&pb)
            .zip(&pc)
            .map(|((a, b), c)| (*a * b - c) * z_inv)
            .collect();
        icoset_ntt(&mut full, w);
        assert_eq!(
            full[m - 1],
            Scalar::ZERO,
            "top coefficient of H must vanish"
        );
        assert_eq!(&full[..m - 1], &h[..]);
    }

    #[test]
    fn compute_h_rejects_bad_shapes() {
        let v = vec![Scalar::ONE; 4];
        assert!(matches!(
            compute_h(v.clone(), v.clone(), vec![Scalar::ONE; 3]),
            Err(BackendError::Shape(_))
        ));
        assert!(domain_size(1 << 31).is_ok());
        assert!(matches!(
            domain_size((1 << 31) + 1),
            Err(BackendError::Shape(_))
        ));
    }
}
