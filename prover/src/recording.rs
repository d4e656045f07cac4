//! The reference synthesis: a `ConstraintSystem` that records exactly what bellperson's private
//! `ProvingAssignment` records — assignment, A/B/C evaluations and densities. Nodes do not use
//! it (synth nodes record the witness alone, GPU nodes evaluate through the constraint matrices);
//! tests check those paths against it, and `cuzk-porep stats` times it as the baseline.
//!
//! Mirrored behaviour, all of which the byte-identity tests depend on:
//! - input 0 is the constant ONE (allocated by [`synthesize`], not by [`RecordingCs::new`]);
//! - `alloc` adds a clear bit to `a_aux_density` and `b_aux_density`; `alloc_input` adds one to
//!   `b_input_density` only (inputs are always dense in A);
//! - `enforce` evaluates A, B and C, skipping zero coefficients; a non-zero coefficient marks the
//!   variable dense in A (aux only) or B (inputs and aux); C tracks no density;
//! - after synthesis one constraint `input_i * 0 = 0` is appended per input.
//!
//! The recorder does not claim `is_witness_generator`: gadgets such as neptune's Poseidon then
//! skip emitting constraints, and A, B, C would be missing.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

/// A growable bit vector recording, per variable, whether it appears in a linear combination.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    words: Vec<u64>,
    len: usize,
}

impl Density {
    pub fn new() -> Self {
        Self::default()
    }

    /// All `len` bits cleared.
    pub fn zeros(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    pub fn from_words(words: Vec<u64>, len: usize) -> Option<Self> {
        if words.len() != len.div_ceil(64) {
            return None;
        }
        let tail_bits = len % 64;
        if tail_bits != 0 && words.last().is_some_and(|w| w >> tail_bits != 0) {
            return None;
        }
        Some(Self { words, len })
    }

    pub fn words(&self) -> &[u64] {
        &self.words
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, bit: bool) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        if bit {
            self.words[self.len / 64] |= 1 << (self.len % 64);
        }
        self.len += 1;
    }

    pub fn set(&mut self, index: usize) {
        assert!(
            index < self.len,
            "density index {index} out of range {}",
            self.len
        );
        self.words[index / 64] |= 1 << (index % 64);
    }

    pub fn get(&self, index: usize) -> bool {
        index < self.len && self.words[index / 64] >> (index % 64) & 1 == 1
    }

    pub fn count_ones(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.len).map(|i| self.get(i))
    }
}

/// One circuit's recorded assignment and constraint evaluations, mirroring bellperson's
/// `ProvingAssignment` after synthesis (including the trailing `input_i * 0 = 0` constraints).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assignment {
    /// Public inputs; index 0 is the constant ONE.
    pub input: Vec<Scalar>,
    pub aux: Vec<Scalar>,
    /// Per-constraint evaluations of the A, B and C linear combinations.
    pub a: Vec<Scalar>,
    pub b: Vec<Scalar>,
    pub c: Vec<Scalar>,
    pub a_aux_density: Density,
    pub b_input_density: Density,
    pub b_aux_density: Density,
}

impl Assignment {
    pub fn num_constraints(&self) -> usize {
        self.a.len()
    }

    /// Checks the internal shape invariants; a decoded blob must pass this before proving.
    pub fn check_shape(&self) -> Result<(), String> {
        let n = self.a.len();
        if self.b.len() != n || self.c.len() != n {
            return Err(format!(
                "constraint vectors differ in length: a={} b={} c={}",
                n,
                self.b.len(),
                self.c.len()
            ));
        }
        if self.input.is_empty() {
            return Err("no public inputs (ONE is missing)".into());
        }
        if n < self.input.len() {
            return Err("fewer constraints than inputs".into());
        }
        if self.a_aux_density.len() != self.aux.len() || self.b_aux_density.len() != self.aux.len()
        {
            return Err("aux density length differs from aux count".into());
        }
        if self.b_input_density.len() != self.input.len() {
            return Err("input density length differs from input count".into());
        }
        Ok(())
    }
}

/// A constraint system that records assignments, constraint evaluations and densities.
#[derive(Debug, Default)]
pub struct RecordingCs {
    input: Vec<Scalar>,
    aux: Vec<Scalar>,
    a: Vec<Scalar>,
    b: Vec<Scalar>,
    c: Vec<Scalar>,
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
}

/// Which densities an evaluated linear combination marks.
#[derive(Clone, Copy)]
enum Track {
    /// A: aux variables only (inputs are dense in A by construction).
    A,
    /// B: inputs and aux.
    B,
    /// C: nothing.
    None,
}

impl RecordingCs {
    /// Appends the `input_i * 0 = 0` constraints and hands out the recorded assignment.
    pub fn finish(mut self) -> Assignment {
        let inputs = self.input.len();
        self.a.reserve(inputs);
        self.b.reserve(inputs);
        self.c.reserve(inputs);
        // The A evaluation of `input_i * 0 = 0` is the input value itself; marking no density
        // mirrors bellperson, whose A tracker ignores inputs and whose B/C sides are empty.
        self.a.extend_from_slice(&self.input);
        self.b.resize(self.b.len() + inputs, Scalar::ZERO);
        self.c.resize(self.c.len() + inputs, Scalar::ZERO);
        Assignment {
            input: self.input,
            aux: self.aux,
            a: self.a,
            b: self.b,
            c: self.c,
            a_aux_density: self.a_aux_density,
            b_input_density: self.b_input_density,
            b_aux_density: self.b_aux_density,
        }
    }

    /// Evaluates `lc` against the current assignment without allocating.
    #[inline]
    fn eval(&mut self, lc: &LinearCombination<Scalar>, track: Track) -> Scalar {
        let mut acc = Scalar::ZERO;
        for (&index, coeff) in lc.iter_inputs() {
            if coeff.is_zero_vartime() {
                continue;
            }
            acc += scaled(self.input[index], coeff);
            if let Track::B = track {
                self.b_input_density.set(index);
            }
        }
        for (&index, coeff) in lc.iter_aux() {
            if coeff.is_zero_vartime() {
                continue;
            }
            acc += scaled(self.aux[index], coeff);
            match track {
                Track::A => self.a_aux_density.set(index),
                Track::B => self.b_aux_density.set(index),
                Track::None => {}
            }
        }
        acc
    }
}

/// `value * coeff`, skipping the multiplication for the very common coefficient one.
#[inline(always)]
fn scaled(value: Scalar, coeff: &Scalar) -> Scalar {
    if *coeff == Scalar::ONE {
        value
    } else {
        value * coeff
    }
}

impl ConstraintSystem<Scalar> for RecordingCs {
    type Root = Self;

    /// An empty recorder. [`synthesize`] allocates the ONE input before running a circuit;
    /// callers driving the recorder by hand must do the same.
    fn new() -> Self {
        Self::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        self.a_aux_density.push(false);
        self.b_aux_density.push(false);
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        self.b_input_density.push(false);
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        let a = self.eval(&a, Track::A);
        let b = self.eval(&b, Track::B);
        let c = self.eval(&c, Track::None);
        self.a.push(a);
        self.b.push(b);
        self.c.push(c);
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

/// Synthesizes `circuit` the way bellperson's prover does and returns the recorded assignment.
pub fn synthesize<C: Circuit<Scalar>>(circuit: C) -> Result<Assignment, SynthesisError> {
    let mut cs = RecordingCs::new();
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    Ok(cs.finish())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small circuit exercising what the recorder must get right: several inputs, zero
    /// coefficients, repeated (merged) variables, `x - x`, an aux variable dense in neither A
    /// nor B, and inputs in B.
    #[derive(Clone)]
    pub(crate) struct ToyCircuit {
        pub x: Scalar,
        pub y: Scalar,
        pub rounds: usize,
    }

    impl ToyCircuit {
        /// The public inputs (without ONE) the circuit exposes for its witness.
        pub(crate) fn public_inputs(&self) -> Vec<Scalar> {
            let mut x = self.x;
            for _ in 0..self.rounds {
                x = x * x + self.y;
            }
            vec![self.y, x]
        }
    }

    impl Circuit<Scalar> for ToyCircuit {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let y_in = cs.alloc_input(|| "y", || Ok(self.y))?;
            let mut x_val = self.x;
            let mut x = cs.alloc(|| "x", || Ok(x_val))?;
            // Appears in C only: its density bits stay clear.
            let sq = cs.alloc(|| "x^2", || Ok(x_val * x_val))?;
            cs.enforce(|| "square", |lc| lc + x, |lc| lc + x, |lc| lc + sq);
            let two = Scalar::from(2u64);
            for i in 0..self.rounds {
                let next_val = x_val * x_val + self.y;
                let next = cs.alloc(|| format!("x{i}"), || Ok(next_val))?;
                // (x + x - x + 0*y) * (2x - x) = next - y; repeated variables merge, and the
                // explicit zero coefficient must be skipped.
                cs.enforce(
                    || format!("round {i}"),
                    |lc| lc + x + x - x + (Scalar::ZERO, y_in),
                    |lc| lc + (two, x) - x,
                    |lc| lc + next - y_in,
                );
                x = next;
                x_val = next_val;
            }
            let out = cs.alloc_input(|| "out", || Ok(x_val))?;
            // An input in B, and an A side that cancels to an empty combination.
            cs.enforce(
                || "out",
                |lc| lc + x,
                |lc| lc + CS::one() + y_in - y_in,
                |lc| lc + out,
            );
            cs.enforce(|| "cancel", |lc| lc + x - x, |lc| lc + out, |lc| lc);
            Ok(())
        }
    }

    #[test]
    fn records_like_proving_assignment() {
        let circuit = ToyCircuit {
            x: Scalar::from(3u64),
            y: Scalar::from(5u64),
            rounds: 4,
        };
        let expected_inputs = circuit.public_inputs();
        let asg = synthesize(circuit).unwrap();
        asg.check_shape().unwrap();

        assert_eq!(asg.input[0], Scalar::ONE);
        assert_eq!(&asg.input[1..], &expected_inputs[..]);
        // 4 rounds + 3 extra constraints + one per input.
        assert_eq!(asg.num_constraints(), 4 + 3 + 3);
        for i in 0..asg.num_constraints() {
            assert_eq!(asg.a[i] * asg.b[i], asg.c[i], "constraint {i} unsatisfied");
        }
        let tail = asg.num_constraints() - asg.input.len();
        assert_eq!(&asg.a[tail..], &asg.input[..]);
        assert!(asg.b[tail..]
            .iter()
            .chain(&asg.c[tail..])
            .all(|v| v.is_zero_vartime()));

        // aux: x, x^2, x0..x3. x_i appear in A and B; the last appears in A only (the
        // "cancel" constraint's A side is empty, "out" uses it in A).
        assert_eq!(asg.aux.len(), 6);
        let a: Vec<bool> = asg.a_aux_density.iter().collect();
        let b: Vec<bool> = asg.b_aux_density.iter().collect();
        assert_eq!(a, [true, false, true, true, true, true]);
        assert_eq!(b, [true, false, true, true, true, false]);
        // ONE appears in B ("out"); y only with cancelling coefficients; out in B ("cancel").
        let b_in: Vec<bool> = asg.b_input_density.iter().collect();
        assert_eq!(b_in, [true, false, true]);
    }
}
