//! Capturing a shape's matrices by synthesizing one instance of it (a blank circuit works:
//! like bellperson's parameter generator, the capture never asks for a value).

use std::collections::HashMap;

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::{Matrix, ShapeMatrices, COEFF_MINUS_ONE, COEFF_ONE};
use crate::backend::BackendError;

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
        }
    }

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
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
    let mut cs = MatrixCs::new();
    let synth = |e: SynthesisError| BackendError::Shape(format!("synthesizing the shape: {e}"));
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))
        .map_err(synth)?;
    circuit.synthesize(&mut cs).map_err(synth)?;
    cs.finish()
}
