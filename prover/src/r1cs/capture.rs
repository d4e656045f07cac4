//! Capturing a shape's matrices by synthesizing one instance of it (a blank circuit works:
//! like bellperson's parameter generator, the capture never asks for a value).

use std::collections::HashMap;

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::{Matrix, ShapeMatrices, COEFF_MINUS_ONE, COEFF_ONE};
use crate::error::BackendError;

/// Aux columns are tagged while inputs may still be allocated, and renumbered after the inputs
/// at the end.
const AUX_TAG: u32 = 1 << 31;

/// A constraint system that records each constraint's non-zero terms.
pub struct MatrixCs {
    inputs: usize,
    aux: usize,
    table: CoeffTable,
    /// A, B, C.
    m: [Matrix; 3],
    /// Set when a matrix outgrows u32 offsets: reported by [`MatrixCs::finish`].
    overflow: bool,
    /// Constraints seen, recorded or not.
    rows: usize,
    /// Set for a [`MatrixCs::continuation`].
    replay: Option<Replay>,
}

/// How far a capture has come: what a block of a circuit adds, or where one starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub inputs: usize,
    pub aux: usize,
    pub rows: usize,
}

impl Counts {
    /// `self` advanced by `n` blocks of `block`.
    pub fn after(self, block: Counts, n: usize) -> Counts {
        Counts {
            inputs: self.inputs + n * block.inputs,
            aux: self.aux + n * block.aux,
            rows: self.rows + n * block.rows,
        }
    }
}

/// A continuation re-runs the circuit's prefix (variables numbered as the first capture numbered
/// them, constraints dropped) and numbers what follows from `at`.
#[derive(Clone, Copy)]
struct Replay {
    prefix: Counts,
    at: Counts,
}

/// The deduplicated coefficient table being built.
struct CoeffTable {
    coeffs: Vec<Scalar>,
    /// Montgomery limbs of each coefficient other than ±1 → table index.
    index: HashMap<[u64; 4], u32>,
}

impl CoeffTable {
    fn intern(&mut self, c: &Scalar) -> u32 {
        if *c == Scalar::ONE {
            return COEFF_ONE;
        }
        if *c == -Scalar::ONE {
            return COEFF_MINUS_ONE;
        }
        let next = self.coeffs.len() as u32;
        *self
            .index
            .entry(blst::blst_fr::from(*c).l)
            .or_insert_with(|| {
                self.coeffs.push(*c);
                next
            })
    }
}

impl Matrix {
    /// Closes the row whose entries were pushed since the last call.
    fn end_row(&mut self) -> bool {
        if self.row_ptr.is_empty() {
            self.row_ptr.push(0);
        }
        match u32::try_from(self.cols.len()) {
            Ok(end) => {
                self.row_ptr.push(end);
                true
            }
            Err(_) => false,
        }
    }
}

impl MatrixCs {
    /// A capture with ONE allocated first, as bellperson does.
    pub fn start() -> MatrixCs {
        let mut cs = MatrixCs::new();
        cs.inputs = 1;
        cs
    }

    /// A capture of one block of a circuit whose first `prefix` (ONE included) another capture
    /// has recorded: the synthesis runs the prefix again, which is only counted, and the block's
    /// variables are numbered from `at`, as if every block before it had been captured here.
    /// Blocks captured this way in parallel and [`append`](Self::append)ed in order give the
    /// matrices one sequential capture gives.
    pub fn continuation(prefix: Counts, at: Counts) -> MatrixCs {
        let mut cs = MatrixCs::start();
        cs.replay = Some(Replay { prefix, at });
        cs
    }

    /// What has been seen: for a continuation, its block alone.
    pub fn counts(&self) -> Counts {
        let seen = Counts {
            inputs: self.inputs,
            aux: self.aux,
            rows: self.rows,
        };
        match self.replay {
            None => seen,
            Some(Replay { prefix, .. }) => Counts {
                inputs: seen.inputs.saturating_sub(prefix.inputs),
                aux: seen.aux.saturating_sub(prefix.aux),
                rows: seen.rows.saturating_sub(prefix.rows),
            },
        }
    }

    /// Appends a continuation that starts where this capture ends.
    pub fn append(&mut self, block: MatrixCs) -> Result<(), BackendError> {
        let Some(Replay { prefix, at }) = block.replay else {
            return Err(BackendError::Shape(
                "only a continuation can be appended".into(),
            ));
        };
        if at != self.counts() || block.inputs < prefix.inputs || block.aux < prefix.aux {
            return Err(BackendError::Shape(format!(
                "a block captured at {at:?} cannot follow a capture at {:?}",
                self.counts()
            )));
        }
        let added = block.counts();
        // The block's coefficients in its own first-use order are exactly the ones a sequential
        // capture would meet next, in that order: interning its table first gives the same ids.
        let remap: Vec<u32> = block
            .table
            .coeffs
            .iter()
            .map(|c| self.table.intern(c))
            .collect();
        for (mine, theirs) in self.m.iter_mut().zip(&block.m) {
            if mine.row_ptr.is_empty() {
                mine.row_ptr.push(0);
            }
            let base = mine.cols.len() as u64;
            let Some(&last) = theirs.row_ptr.last() else {
                continue;
            };
            if base + u64::from(last) > u64::from(u32::MAX) {
                self.overflow = true;
                continue;
            }
            mine.row_ptr
                .extend(theirs.row_ptr[1..].iter().map(|&p| base as u32 + p));
            mine.cols.extend_from_slice(&theirs.cols);
            mine.coeffs
                .extend(theirs.coeffs.iter().map(|&c| remap[c as usize]));
        }
        self.inputs += added.inputs;
        self.aux += added.aux;
        self.rows += added.rows;
        Ok(())
    }

    /// The index of the next variable of a kind, `seen` of them allocated here so far.
    fn number(&self, seen: usize, of: fn(&Counts) -> usize) -> usize {
        match self.replay {
            Some(Replay { prefix, at }) if seen >= of(&prefix) => of(&at) + (seen - of(&prefix)),
            _ => seen,
        }
    }

    fn push_row(&mut self, which: usize, lc: &LinearCombination<Scalar>) {
        let (table, m) = (&mut self.table, &mut self.m[which]);
        for (&i, c) in lc.iter_inputs() {
            if !c.is_zero_vartime() {
                m.cols.push(i as u32);
                m.coeffs.push(table.intern(c));
            }
        }
        for (&j, c) in lc.iter_aux() {
            if !c.is_zero_vartime() {
                m.cols.push(j as u32 | AUX_TAG);
                m.coeffs.push(table.intern(c));
            }
        }
        self.overflow |= !m.end_row();
    }

    /// Appends the `input_i · 0 = 0` rows and builds the checked matrices.
    pub fn finish(mut self) -> Result<ShapeMatrices, BackendError> {
        for i in 0..self.inputs as u32 {
            let [a, b, c] = &mut self.m;
            a.cols.push(i);
            a.coeffs.push(COEFF_ONE);
            self.overflow |= !(a.end_row() & b.end_row() & c.end_row());
        }
        if self.overflow {
            return Err(BackendError::Shape(format!(
                "a matrix has more than {} non-zero entries",
                u32::MAX
            )));
        }
        if self.aux >= AUX_TAG as usize || self.inputs >= AUX_TAG as usize {
            return Err(BackendError::Shape(format!(
                "{} inputs and {} aux variables exceed 2^31",
                self.inputs, self.aux
            )));
        }
        let inputs = self.inputs as u32;
        for m in &mut self.m {
            m.cols.par_iter_mut().for_each(|c| {
                if *c & AUX_TAG != 0 {
                    *c = (*c & !AUX_TAG) + inputs;
                }
            });
        }
        let [a, b, c] = self.m;
        ShapeMatrices::new(self.inputs, self.aux, self.table.coeffs, a, b, c)
    }
}

impl ConstraintSystem<Scalar> for MatrixCs {
    type Root = Self;

    fn new() -> Self {
        MatrixCs {
            inputs: 0,
            aux: 0,
            table: CoeffTable {
                coeffs: vec![Scalar::ONE, -Scalar::ONE],
                index: HashMap::new(),
            },
            m: Default::default(),
            overflow: false,
            rows: 0,
            replay: None,
        }
    }

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let index = self.number(self.aux, |c| c.aux);
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(index)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let index = self.number(self.inputs, |c| c.inputs);
        self.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(index)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.rows += 1;
        if self.replay.is_some_and(|r| self.rows <= r.prefix.rows) {
            return;
        }
        self.push_row(0, &a(LinearCombination::zero()));
        self.push_row(1, &b(LinearCombination::zero()));
        self.push_row(2, &c(LinearCombination::zero()));
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// The matrices of `circuit`'s shape, with ONE allocated first as bellperson does.
pub fn capture<C: Circuit<Scalar>>(circuit: C) -> Result<ShapeMatrices, BackendError> {
    let mut cs = MatrixCs::start();
    let synth = |e: SynthesisError| BackendError::Shape(format!("synthesizing the shape: {e}"));
    circuit.synthesize(&mut cs).map_err(synth)?;
    cs.finish()
}
