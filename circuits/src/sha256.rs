//! `sha256`: each partition proves knowledge of a `blocks*64 - 9` byte preimage (exactly
//! `blocks` compressions after padding) of a public digest, using bellperson's own gadgets.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::{multipack, sha256::sha256};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use cuzk_prover::ShapeMatrices;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::MAX_PARTITIONS;
use crate::{
    check_range, check_request, parse_params, partition_seed, CircuitError, CircuitFamily,
    Synthesis, Synthesized,
};

const NAME: &str = "sha256";
const MAX_BLOCKS: usize = 64;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    blocks: usize,
    partitions: usize,
}

/// (constraints, variables) per block, and what the first block saves (it compresses from
/// the constant IV), measured by synthesis.
const SHAPE_PER_BLOCK: (u64, u64) = (26_704, 26_678);
const SHAPE_FIRST_BLOCK_SAVES: (u64, u64) = (670, 672);

#[derive(Clone, Debug)]
pub struct Sha256Family {
    blocks: usize,
    partitions: usize,
}

impl Sha256Family {
    pub fn new(blocks: usize, partitions: usize) -> Result<Self, CircuitError> {
        check_range(NAME, "blocks", blocks, MAX_BLOCKS)?;
        check_range(NAME, "partitions", partitions, MAX_PARTITIONS)?;
        Ok(Self { blocks, partitions })
    }

    pub fn from_params(params: &serde_json::Value) -> Result<Self, CircuitError> {
        let p: Params = parse_params(NAME, params)?;
        Self::new(p.blocks, p.partitions)
    }

    /// Bytes per preimage: padding (0x80 and the 8-byte length) completes the last block.
    pub fn preimage_len(&self) -> usize {
        self.blocks * 64 - 9
    }

    /// The preimage of partition `index`: SHA-256 in counter mode over a seed bound to the job
    /// input and `index`.
    pub fn preimage(&self, input: &[u8], index: usize) -> Result<Vec<u8>, CircuitError> {
        check_request(NAME, self.partitions, input, index)?;
        let seed = partition_seed("cuzk/sha256/preimage/v1", input, index);
        let mut out = Vec::with_capacity(self.preimage_len() + 32);
        let mut counter = 0u64;
        while out.len() < self.preimage_len() {
            let mut h = Sha256::new();
            h.update(seed);
            h.update(counter.to_le_bytes());
            out.extend_from_slice(&h.finalize());
            counter += 1;
        }
        out.truncate(self.preimage_len());
        Ok(out)
    }

    /// The bellperson circuit of partition `index` (also usable with bellperson's own prover).
    fn blank(&self) -> Sha256Circuit {
        Sha256Circuit {
            preimage: vec![0; self.preimage_len()],
        }
    }

    pub fn circuit(&self, input: &[u8], index: usize) -> Result<Sha256Circuit, CircuitError> {
        Ok(Sha256Circuit {
            preimage: self.preimage(input, index)?,
        })
    }
}

impl CircuitFamily for Sha256Family {
    fn name(&self) -> &'static str {
        NAME
    }

    fn shape_key(&self) -> String {
        format!("sha256-b{}", self.blocks)
    }

    fn partitions(&self) -> usize {
        self.partitions
    }

    /// Checked against synthesis in the tests of `lib.rs`.
    fn partition_shape(&self) -> crate::PartitionShape {
        let blocks = self.blocks as u64;
        crate::PartitionShape {
            constraints: SHAPE_PER_BLOCK.0 * blocks - SHAPE_FIRST_BLOCK_SAVES.0,
            variables: SHAPE_PER_BLOCK.1 * blocks - SHAPE_FIRST_BLOCK_SAVES.1,
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

    /// The values never matter to the capture; any preimage of the right length will do.
    fn capture_matrices(&self) -> Result<ShapeMatrices, CircuitError> {
        crate::capture(self.shape_key(), self.blank())
    }

    fn public_inputs(&self, input: &[u8], index: usize) -> Result<Vec<Scalar>, CircuitError> {
        let digest = Sha256::digest(self.preimage(input, index)?);
        Ok(multipack::compute_multipacking(&multipack::bytes_to_bits(
            &digest,
        )))
    }
}

/// Knowledge of `preimage` with `SHA-256(preimage)` as the public input (multipacked into two
/// field elements).
#[derive(Clone, Debug)]
pub struct Sha256Circuit {
    pub preimage: Vec<u8>,
}

impl Circuit<Scalar> for Sha256Circuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut bits = Vec::with_capacity(self.preimage.len() * 8);
        for (i, byte) in self.preimage.iter().enumerate() {
            // Most significant bit first: the bit order the sha256 gadget consumes.
            for j in (0..8).rev() {
                let bit = AllocatedBit::alloc(
                    cs.namespace(|| format!("preimage bit {}", i * 8 + 7 - j)),
                    Some((byte >> j) & 1 == 1),
                )?;
                bits.push(Boolean::from(bit));
            }
        }
        let digest = sha256(cs.namespace(|| "sha256"), &bits)?;
        multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_deterministic_and_differ() {
        let f = Sha256Family::new(2, 3).unwrap();
        assert_eq!(f.preimage_len(), 119);
        let p0 = f.preimage(b"job", 0).unwrap();
        assert_eq!(p0.len(), 119);
        assert_eq!(p0, f.preimage(b"job", 0).unwrap());
        assert_ne!(p0, f.preimage(b"job", 1).unwrap());
        assert_ne!(p0, f.preimage(b"job2", 0).unwrap());

        let a0 = f.recording(b"job", 0).unwrap();
        let a1 = f.recording(b"job", 1).unwrap();
        assert_eq!(a0, f.recording(b"job", 0).unwrap());
        assert_ne!(a0.aux, a1.aux);
        assert_eq!(a0.num_constraints(), a1.num_constraints());
        assert_eq!(a0.a_aux_density, a1.a_aux_density);
        let w0 = f.witness(b"job", 0, None).unwrap();
        assert_eq!((&w0.input, &w0.aux), (&a0.input, &a0.aux));
        // Public inputs computed natively equal the ones synthesis allocated.
        assert_eq!(&a0.input[1..], &f.public_inputs(b"job", 0).unwrap()[..]);
        assert_eq!(&a1.input[1..], &f.public_inputs(b"job", 1).unwrap()[..]);
        assert_eq!(a0.input.len(), 3);
        for i in 0..a0.num_constraints() {
            assert_eq!(a0.a[i] * a0.b[i], a0.c[i], "constraint {i} unsatisfied");
        }
    }

    #[test]
    fn proofs_match_bellperson_byte_for_byte() {
        let family = Sha256Family::new(1, 2).unwrap();
        let input = b"byte identity";
        let circuits: Vec<_> = (0..2).map(|k| family.circuit(input, k).unwrap()).collect();
        crate::testing::assert_matches_bellperson(&family, family.blank(), circuits, input);
    }
}
