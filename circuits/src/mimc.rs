//! `mimc`: the classic MiMC-x³ Feistel chain (as in bellman's MiMC demo). Each round costs two
//! constraints, `t = (xl + c)²` and `t·(xl + c) = xl' − xr`; the final `xl` is the public input.
//! Full-field witnesses and tiny shapes make it the fast test circuit.

use std::sync::{Arc, OnceLock};

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use cuzk_prover::ShapeMatrices;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::Deserialize;

use crate::MAX_PARTITIONS;
use crate::{
    check_range, check_request, parse_params, partition_seed, CircuitError, CircuitFamily,
    Synthesis, Synthesized,
};

const NAME: &str = "mimc";
const MAX_ROUNDS: usize = 1 << 22;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    rounds: usize,
    partitions: usize,
}

#[derive(Debug)]
pub struct MimcFamily {
    rounds: usize,
    partitions: usize,
    /// Derived on first use: 2^22 rounds take a noticeable moment and 128 MiB.
    constants: OnceLock<Arc<Vec<Scalar>>>,
}

impl MimcFamily {
    pub fn new(rounds: usize, partitions: usize) -> Result<Self, CircuitError> {
        check_range(NAME, "rounds", rounds, MAX_ROUNDS)?;
        check_range(NAME, "partitions", partitions, MAX_PARTITIONS)?;
        Ok(Self {
            rounds,
            partitions,
            constants: OnceLock::new(),
        })
    }

    pub fn from_params(params: &serde_json::Value) -> Result<Self, CircuitError> {
        let p: Params = parse_params(NAME, params)?;
        Self::new(p.rounds, p.partitions)
    }

    /// Round constants from a fixed ChaCha20 stream, so every node agrees on them (and a
    /// shorter chain's constants are a prefix of a longer one's).
    fn constants(&self) -> Arc<Vec<Scalar>> {
        self.constants
            .get_or_init(|| {
                let mut rng =
                    ChaCha20Rng::from_seed(partition_seed("cuzk/mimc/constants/v1", &[], 0));
                Arc::new((0..self.rounds).map(|_| Scalar::random(&mut rng)).collect())
            })
            .clone()
    }

    /// The bellperson circuit of partition `index` (also usable with bellperson's own prover).
    pub fn circuit(&self, input: &[u8], index: usize) -> Result<MimcCircuit, CircuitError> {
        check_request(NAME, self.partitions, input, index)?;
        let mut rng = ChaCha20Rng::from_seed(partition_seed("cuzk/mimc/witness/v1", input, index));
        let xl = Scalar::random(&mut rng);
        let xr = Scalar::random(&mut rng);
        Ok(MimcCircuit {
            xl,
            xr,
            constants: self.constants(),
        })
    }
}

impl CircuitFamily for MimcFamily {
    fn name(&self) -> &'static str {
        NAME
    }

    fn shape_key(&self) -> String {
        format!("mimc-r{}", self.rounds)
    }

    fn partitions(&self) -> usize {
        self.partitions
    }

    /// Two constraints and two variables per round, plus the inputs' constraints (ONE and the
    /// output) and the chain's starting pair.
    fn partition_shape(&self) -> crate::PartitionShape {
        let rounds = self.rounds as u64;
        crate::PartitionShape {
            constraints: 2 * rounds + 2,
            variables: 2 * rounds + 3,
        }
    }

    fn synthesize(
        &self,
        input: &[u8],
        index: usize,
        mode: Synthesis,
    ) -> Result<Synthesized, CircuitError> {
        crate::run(self.shape_key(), index, mode, self.circuit(input, index)?)
    }

    fn capture_matrices(&self) -> Result<ShapeMatrices, CircuitError> {
        crate::capture(self.shape_key(), self.circuit(&[], 0)?)
    }

    fn public_inputs(&self, input: &[u8], index: usize) -> Result<Vec<Scalar>, CircuitError> {
        Ok(vec![self.circuit(input, index)?.output()])
    }
}

/// One MiMC chain from `(xl, xr)` with one round per constant.
#[derive(Clone, Debug)]
pub struct MimcCircuit {
    pub xl: Scalar,
    pub xr: Scalar,
    pub constants: Arc<Vec<Scalar>>,
}

impl MimcCircuit {
    /// The chain's output computed natively: the circuit's only public input.
    pub fn output(&self) -> Scalar {
        let (mut xl, mut xr) = (self.xl, self.xr);
        for c in self.constants.iter() {
            let t = xl + c;
            (xl, xr) = (t.square() * t + xr, xl);
        }
        xl
    }
}

impl Circuit<Scalar> for MimcCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let (mut xl_val, mut xr_val) = (self.xl, self.xr);
        let mut xl = cs.alloc(|| "xl", || Ok(xl_val))?;
        let mut xr = cs.alloc(|| "xr", || Ok(xr_val))?;
        let last = self.constants.len().saturating_sub(1);
        for (i, &c) in self.constants.iter().enumerate() {
            let t_val = xl_val + c;
            let sq_val = t_val.square();
            let sq = cs.alloc(|| format!("sq {i}"), || Ok(sq_val))?;
            cs.enforce(
                || format!("square {i}"),
                |lc| lc + xl + (c, CS::one()),
                |lc| lc + xl + (c, CS::one()),
                |lc| lc + sq,
            );
            let next_val = sq_val * t_val + xr_val;
            let next = if i == last {
                cs.alloc_input(|| "output", || Ok(next_val))?
            } else {
                cs.alloc(|| format!("xl {i}"), || Ok(next_val))?
            };
            cs.enforce(
                || format!("cube {i}"),
                |lc| lc + sq,
                |lc| lc + xl + (c, CS::one()),
                |lc| lc + next - xr,
            );
            (xl, xr, xl_val, xr_val) = (next, xl, next_val, xl_val);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn witnesses_are_deterministic_satisfied_and_differ() {
        let f = MimcFamily::new(300, 2).unwrap();
        let a0 = f.recording(b"in", 0).unwrap();
        assert_eq!(a0, f.recording(b"in", 0).unwrap());
        let w0 = f.witness(b"in", 0, None).unwrap();
        assert_eq!((&w0.input, &w0.aux), (&a0.input, &a0.aux));
        let a1 = f.witness(b"in", 1, None).unwrap();
        assert_ne!(w0.aux, a1.aux);
        // Two constraints per round plus one per input (ONE and the output).
        assert_eq!(a0.num_constraints(), 2 * 300 + 2);
        assert_eq!(a0.aux.len(), 2 + 2 * 300 - 1);
        assert_eq!(&a0.input[1..], &f.public_inputs(b"in", 0).unwrap()[..]);
        for i in 0..a0.num_constraints() {
            assert_eq!(a0.a[i] * a0.b[i], a0.c[i], "constraint {i} unsatisfied");
        }
    }

    #[test]
    fn proofs_match_bellperson_byte_for_byte() {
        let f = MimcFamily::new(100, 2).unwrap();
        let blank = MimcCircuit {
            xl: Scalar::ZERO,
            xr: Scalar::ZERO,
            constants: f.constants(),
        };
        let circuits: Vec<_> = (0..2).map(|k| f.circuit(b"x", k).unwrap()).collect();
        crate::testing::assert_matches_bellperson(&f, blank, circuits, b"x");
    }
}
