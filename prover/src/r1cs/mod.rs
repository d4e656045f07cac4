//! A circuit shape's constraint matrices: A, B and C as sparse rows over the variables
//! (inputs ‖ aux), one row per constraint, the `input_i · 0 = 0` rows bellperson appends
//! included. With them a prover turns a witness into the A/B/C evaluations itself
//! (`a_i = Σ_j A_ij · w_j`), so synth nodes ship the witness alone, and a parameter generator
//! evaluates the QAP at τ without synthesizing anything.
//!
//! Rows are CSR: `row_ptr` (rows + 1 offsets), then per non-zero its column (a variable index)
//! and its coefficient as an index into the shape's coefficient table. The table is deduplicated
//! (most coefficients are ±1 and powers of two) and always starts with 1 and −1, so a kernel can
//! add or subtract those without a multiplication. Zero coefficients are never stored: bellperson
//! skips them when it evaluates, and a variable counts as dense in A or B only through a non-zero
//! coefficient.
//!
//! [`ShapeMatrices::hash`] (blake3 over the canonical byte form, see [`file`]) names a shape's
//! matrices: blobs carry it, and a node refuses a witness synthesized against other matrices.

mod capture;
pub mod file;

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::error::BackendError;

pub use capture::{capture, Counts, MatrixCs};

/// Coefficient table indices that need no multiplication.
pub const COEFF_ONE: u32 = 0;
pub const COEFF_MINUS_ONE: u32 = 1;

/// One sparse matrix in CSR form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Matrix {
    /// `row_ptr[r]..row_ptr[r + 1]` are row `r`'s entries; `rows + 1` offsets.
    pub row_ptr: Vec<u32>,
    /// Variable index (inputs first, then aux) per entry.
    pub cols: Vec<u32>,
    /// Index into [`ShapeMatrices::coeffs`] per entry.
    pub coeffs: Vec<u32>,
}

impl Matrix {
    pub fn rows(&self) -> usize {
        self.row_ptr.len().saturating_sub(1)
    }

    pub fn nnz(&self) -> usize {
        self.cols.len()
    }

    /// Bytes this matrix takes in memory (and on a device).
    pub fn bytes(&self) -> u64 {
        4 * (self.row_ptr.len() + self.cols.len() + self.coeffs.len()) as u64
    }

    fn row(&self, r: usize) -> std::ops::Range<usize> {
        self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize
    }

    /// Marks, per variable, whether it appears in this matrix.
    fn used_columns(&self, vars: usize) -> Vec<bool> {
        let mut used = vec![false; vars];
        for &c in &self.cols {
            used[c as usize] = true;
        }
        used
    }
}

/// The constraint matrices of one circuit shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeMatrices {
    /// Public inputs, ONE included.
    pub inputs: usize,
    pub aux: usize,
    /// Distinct non-zero coefficients; `[1, -1, ...]`.
    pub coeffs: Vec<Scalar>,
    pub a: Matrix,
    pub b: Matrix,
    pub c: Matrix,
    hash: [u8; 32],
}

impl ShapeMatrices {
    /// Checks the structure (every offset, column and coefficient index in range) and computes
    /// the hash. Matrices read from disk or built by hand go through here.
    pub fn new(
        inputs: usize,
        aux: usize,
        coeffs: Vec<Scalar>,
        a: Matrix,
        b: Matrix,
        c: Matrix,
    ) -> Result<Self, BackendError> {
        let bad = |m: String| Err(BackendError::Shape(m));
        if inputs == 0 {
            return bad("no public inputs (ONE is missing)".into());
        }
        if coeffs.len() < 2 || coeffs[0] != Scalar::ONE || coeffs[1] != -Scalar::ONE {
            return bad("the coefficient table must start with 1 and -1".into());
        }
        if coeffs.iter().any(|c| c.is_zero_vartime()) {
            return bad("the coefficient table holds a zero".into());
        }
        let vars = inputs
            .checked_add(aux)
            .filter(|&v| v <= u32::MAX as usize)
            .ok_or_else(|| BackendError::Shape("too many variables for u32 columns".into()))?;
        let rows = a.rows();
        for (name, m) in [("A", &a), ("B", &b), ("C", &c)] {
            if m.rows() != rows || m.row_ptr.first() != Some(&0) {
                return bad(format!(
                    "{name} has {} rows, A has {rows}, or does not start at 0",
                    m.rows()
                ));
            }
            if !m.row_ptr.windows(2).all(|w| w[0] <= w[1])
                || m.row_ptr.last().map(|&e| e as usize) != Some(m.cols.len())
                || m.coeffs.len() != m.cols.len()
            {
                return bad(format!("{name}'s row offsets do not match its entries"));
            }
            if m.cols.par_iter().any(|&c| c as usize >= vars) {
                return bad(format!("{name} has a column past the {vars} variables"));
            }
            if m.coeffs.par_iter().any(|&k| k as usize >= coeffs.len()) {
                return bad(format!("{name} has a coefficient index past the table"));
            }
        }
        if rows < inputs {
            return bad(format!(
                "{rows} constraints cannot hold the {inputs} input rows"
            ));
        }
        let mut m = ShapeMatrices {
            inputs,
            aux,
            coeffs,
            a,
            b,
            c,
            hash: [0; 32],
        };
        m.hash = file::hash(&m);
        Ok(m)
    }

    /// Constraints, the appended input rows included.
    pub fn constraints(&self) -> usize {
        self.a.rows()
    }

    pub fn variables(&self) -> usize {
        self.inputs + self.aux
    }

    pub fn nnz(&self) -> usize {
        self.a.nnz() + self.b.nnz() + self.c.nnz()
    }

    /// Bytes of the three matrices and the coefficient table in memory.
    pub fn bytes(&self) -> u64 {
        self.a.bytes() + self.b.bytes() + self.c.bytes() + 32 * self.coeffs.len() as u64
    }

    /// blake3 of the canonical byte form: the identity blobs carry.
    pub fn hash(&self) -> [u8; 32] {
        self.hash
    }

    pub fn hash_hex(&self) -> String {
        self.hash.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The variables whose scalars the A query meets, in base order: every input (bellperson's
    /// generator makes inputs dense in A through the input rows), then each aux variable that
    /// appears in A with a non-zero coefficient.
    pub fn a_query_vars(&self) -> Vec<u32> {
        let used = self.a.used_columns(self.variables());
        (0..self.inputs as u32)
            .chain(
                (self.inputs..self.variables())
                    .filter(|&j| used[j])
                    .map(|j| j as u32),
            )
            .collect()
    }

    /// The variables whose scalars the B queries (G1 and G2) meet: inputs then aux variables
    /// that appear in B.
    pub fn b_query_vars(&self) -> Vec<u32> {
        let used = self.b.used_columns(self.variables());
        (0..self.variables() as u32)
            .filter(|&j| used[j as usize])
            .collect()
    }

    /// `(A·w, B·w, C·w)` for a witness of (inputs ‖ aux); rows in parallel. The CPU engine's
    /// evaluation and the reference the GPU kernel is checked against.
    pub fn evaluate<W: Fn(usize) -> Scalar + Sync>(&self, w: &W) -> [Vec<Scalar>; 3] {
        [&self.a, &self.b, &self.c].map(|m| self.spmv(m, w))
    }

    fn spmv<W: Fn(usize) -> Scalar + Sync>(&self, m: &Matrix, w: &W) -> Vec<Scalar> {
        (0..m.rows())
            .into_par_iter()
            .with_min_len(1 << 12)
            .map(|r| {
                let mut acc = Scalar::ZERO;
                for k in m.row(r) {
                    let v = w(m.cols[k] as usize);
                    match m.coeffs[k] {
                        COEFF_ONE => acc += v,
                        COEFF_MINUS_ONE => acc -= v,
                        i => acc += v * self.coeffs[i as usize],
                    }
                }
                acc
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::{synthesize, tests::ToyCircuit};

    fn toy() -> ToyCircuit {
        ToyCircuit {
            x: Scalar::from(3u64),
            y: Scalar::from(5u64),
            rounds: 6,
        }
    }

    #[test]
    fn evaluations_and_densities_match_the_recorder() {
        let m = capture(toy()).unwrap();
        let asg = synthesize(toy()).unwrap();
        assert_eq!((m.inputs, m.aux), (asg.input.len(), asg.aux.len()));
        assert_eq!(m.constraints(), asg.num_constraints());
        let w = |j: usize| {
            if j < asg.input.len() {
                asg.input[j]
            } else {
                asg.aux[j - asg.input.len()]
            }
        };
        let [a, b, c] = m.evaluate(&w);
        assert_eq!((a, b, c), (asg.a.clone(), asg.b.clone(), asg.c.clone()));

        let a_vars: Vec<u32> = (0..asg.input.len() as u32)
            .chain(
                asg.a_aux_density
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| *d)
                    .map(|(j, _)| (asg.input.len() + j) as u32),
            )
            .collect();
        assert_eq!(m.a_query_vars(), a_vars);
        let b_vars: Vec<u32> = asg
            .b_input_density
            .iter()
            .chain(asg.b_aux_density.iter())
            .enumerate()
            .filter(|(_, d)| *d)
            .map(|(j, _)| j as u32)
            .collect();
        assert_eq!(m.b_query_vars(), b_vars);
    }

    #[test]
    fn rejects_malformed_structure() {
        let m = capture(toy()).unwrap();
        let rebuild = |f: &dyn Fn(&mut ShapeMatrices)| {
            let mut bad = m.clone();
            f(&mut bad);
            ShapeMatrices::new(bad.inputs, bad.aux, bad.coeffs, bad.a, bad.b, bad.c)
        };
        assert!(rebuild(&|_| {}).is_ok());
        assert_eq!(rebuild(&|_| {}).unwrap().hash(), m.hash());
        type Damage<'a> = &'a dyn Fn(&mut ShapeMatrices);
        let cases: [(&str, Damage); 6] = [
            ("column", &|b| b.b.cols[0] = (b.inputs + b.aux) as u32),
            ("coefficient index", &|b| {
                b.c.coeffs[0] = b.coeffs.len() as u32
            }),
            ("offsets", &|b| *b.a.row_ptr.last_mut().unwrap() += 1),
            ("rows", &|b| {
                b.c.row_ptr.pop();
            }),
            ("table", &|b| b.coeffs.swap(0, 1)),
            ("zero", &|b| b.coeffs.push(Scalar::ZERO)),
        ];
        for (what, f) in cases {
            assert!(
                matches!(rebuild(f), Err(BackendError::Shape(_))),
                "{what} accepted"
            );
        }
    }
}
