//! Witness-only synthesis: what a synth node runs. It allocates and records the assignment and
//! does no work in `enforce` — the linear combinations are never even built — because the GPU
//! node derives the A/B/C evaluations from the shape's constraint matrices.
//!
//! It does not claim `is_witness_generator`: gadgets such as neptune's Poseidon then take a
//! different allocation path, and the aux order must stay exactly the one the matrices (captured
//! with an ordinary constraint system) were recorded in.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use cuzk_wire::witness::Witness;
use ff::Field;

/// Records inputs and aux; ignores constraints.
#[derive(Debug, Default)]
pub struct WitnessCs {
    w: Witness,
}

impl WitnessCs {
    /// Room for a shape's known variable counts, so a 130 M-variable witness is not regrown.
    pub fn with_capacity(inputs: usize, aux: usize) -> Self {
        WitnessCs {
            w: Witness {
                input: Vec::with_capacity(inputs),
                aux: Vec::with_capacity(aux),
            },
        }
    }

    pub fn finish(self) -> Witness {
        self.w
    }
}

impl ConstraintSystem<Scalar> for WitnessCs {
    type Root = Self;

    fn new() -> Self {
        Self::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.w.aux.push(f()?);
        Ok(Variable::new_unchecked(Index::Aux(self.w.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.w.input.push(f()?);
        Ok(Variable::new_unchecked(Index::Input(
            self.w.input.len() - 1,
        )))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
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

/// Synthesizes `circuit`'s witness, ONE first, as bellperson's prover orders it. `capacity`
/// (inputs, aux) pre-sizes the vectors when the shape is known.
pub fn synthesize_witness<C: Circuit<Scalar>>(
    circuit: C,
    capacity: Option<(usize, usize)>,
) -> Result<Witness, SynthesisError> {
    let mut cs = capacity.map_or_else(WitnessCs::default, |(i, a)| WitnessCs::with_capacity(i, a));
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    Ok(cs.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::{synthesize, tests::ToyCircuit};

    #[test]
    fn same_assignment_as_the_recorder() {
        let toy = || ToyCircuit {
            x: Scalar::from(4u64),
            y: Scalar::from(9u64),
            rounds: 5,
        };
        let w = synthesize_witness(toy(), None).unwrap();
        let asg = synthesize(toy()).unwrap();
        assert_eq!((w.input, w.aux), (asg.input, asg.aux));
        assert_eq!(
            synthesize_witness(toy(), Some((3, 7))).unwrap(),
            synthesize_witness(toy(), None).unwrap()
        );
    }
}
