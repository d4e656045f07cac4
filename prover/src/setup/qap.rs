//! The QAP at τ: the Lagrange basis at τ and the matrices' columns weighted by it.

use std::ops::Range;

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::ntt::omega;
use crate::r1cs::Matrix;

/// `L_i(τ) = (τ^m − 1)/m · ω^i / (τ − ω^i)` for the domain of size `m`: what bellperson gets by
/// an inverse FFT of τ's powers, with one batch inversion instead.
pub(super) fn lagrange_at(tau: Scalar, z: Scalar, m: usize, log: u32) -> Vec<Scalar> {
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

/// One matrix entry, partitioned by column block; `col` counts from the first column summed.
#[derive(Clone, Copy, Default)]
struct Entry {
    row: u32,
    col: u32,
    coeff: u32,
}

/// `Σ_i M_ij · L_i` for every variable `j` in `cols`: the columns of `matrix` weighted by
/// `lagrange` (a few columns, the inputs', cost one read of the matrix). The
/// entries are partitioned by column block (each task of rows writes its own region, in row
/// order), then each block sums into its own cache-resident accumulators. A per-column counting
/// sort did the same with three random accesses per entry, most of the 32 GiB shape's scalars
/// time (docs/gpu-runs.md, "Parameters in 70 s").
pub(super) fn column_sums(
    matrix: &Matrix,
    cols: Range<usize>,
    coeffs: &[Scalar],
    lagrange: &[Scalar],
) -> Vec<Scalar> {
    let blocks = cols.len().div_ceil(1 << COLUMN_BLOCK_BITS).max(1);
    // A summed column, counted from the first.
    let summed = |c: u32| {
        (c as usize)
            .checked_sub(cols.start)
            .filter(|&c| c < cols.len())
    };
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
            for c in matrix.cols[a..b].iter().filter_map(|&c| summed(c)) {
                start[(c >> COLUMN_BLOCK_BITS) + 1] += 1;
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
    let mut entries = vec![Entry::default(); base];
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
                let Some(col) = summed(matrix.cols[k]) else {
                    continue;
                };
                let at = &mut cursor[col >> COLUMN_BLOCK_BITS];
                region[*at] = Entry {
                    row: row as u32,
                    col: col as u32,
                    coeff: matrix.coeffs[k],
                };
                *at += 1;
            }
        }
    });
    let mut out = vec![Scalar::ZERO; cols.len()];
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;
    use rand_core::RngCore;

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
        // All columns, the inputs' few, a range across blocks, none.
        for cols in [0..vars, 0..5, 70_000..(2 << COLUMN_BLOCK_BITS) + 9, 3..3] {
            let got = column_sums(&matrix, cols.clone(), &coeffs, &lagrange);
            assert!(got == want[cols.clone()], "columns {cols:?}");
        }
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
}
