//! Synthetic PoSt partitions: the real shape of a proof's circuit (its tree, challenges and,
//! unless told otherwise, sectors), random contents. For timing the witness paths side by side
//! (`cuzk-porep post-witness`) on shapes no test can seal, a 32 GiB WindowPoSt partition above
//! all; their witnesses satisfy nothing, so the native generator runs unchecked.

use blstrs::Scalar;
use cuzk_wire::witness::Witness;
use ff::Field;
use filecoin_proofs::MerkleTreeTrait;
use rand::{Rng, SeedableRng};
use storage_proofs_core::gadgets::por::AuthPath;
use storage_proofs_core::util::NODE_SIZE;
use storage_proofs_post::fallback::{FallbackPoStCircuit, Sector as CircuitSector};

use super::native::{self, Leaf, Sector};
use super::{public_params, shape_key, PostProof};
use crate::filecoin::with_tree;
use crate::native::paths::{tree_arities, Level};
use crate::{CircuitError, Synthesis, Synthesized};

/// One partition of random contents.
pub struct SyntheticPost {
    proof: PostProof,
    arities: Vec<usize>,
    pub(super) sectors: Vec<Sector>,
}

impl SyntheticPost {
    /// A partition of `proof`'s shape with `sectors` sectors (default: the circuit's), drawn
    /// from `seed`.
    pub fn new(proof: PostProof, sectors: Option<usize>, seed: u64) -> Result<Self, CircuitError> {
        let (count, challenges, arities) = with_tree!(proof.size, Tree => {
            let pp = public_params::<Tree>(proof)?;
            let arities = tree_arities::<Tree>(pp.sector_size as usize / NODE_SIZE);
            (pp.sector_count, pp.challenge_count, arities)
        });
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let sectors = (0..sectors.unwrap_or(count).max(1))
            .map(|_| random_sector(&mut rng, challenges, &arities))
            .collect();
        Ok(SyntheticPost {
            proof,
            arities,
            sectors,
        })
    }

    pub fn sectors(&self) -> usize {
        self.sectors.len()
    }

    pub(super) fn layout(&self) -> Result<native::Layout, CircuitError> {
        let challenges = self.sectors[0].leaves.len();
        native::Layout::new(self.sectors.len(), challenges, &self.arities)
            .ok_or_else(|| self.err("no native generator for this tree shape"))
    }

    /// The witness from the native generator (what a synth node ships).
    pub fn native_witness(&self) -> Result<Witness, CircuitError> {
        let layout = self.layout()?;
        native::generate(&self.sectors, &layout, native::Options::unchecked())
            .map_err(|e| self.err(e))
    }

    /// The witness from the circuit's gadgets (witness-only synthesis).
    pub fn gadget_witness(&self) -> Result<Witness, CircuitError> {
        with_tree!(self.proof.size, Tree => self.gadget::<Tree>())
    }

    fn gadget<Tree: 'static + MerkleTreeTrait>(&self) -> Result<Witness, CircuitError> {
        let circuit = FallbackPoStCircuit::<Tree> {
            prover_id: Some(Scalar::ZERO),
            sectors: self.sectors.iter().map(circuit_sector::<Tree>).collect(),
        };
        let mode = Synthesis::GadgetWitness { capacity: None };
        match crate::run(shape_key(self.proof), 0, mode, circuit)? {
            Synthesized::Witness(w) => Ok(w),
            Synthesized::Recording(_) => Err(self.err("the gadgets returned a recording")),
        }
    }

    fn err(&self, reason: impl std::fmt::Display) -> CircuitError {
        CircuitError::Native {
            shape: shape_key(self.proof),
            partition: 0,
            reason: reason.to_string(),
        }
    }
}

fn random_sector(rng: &mut impl Rng, challenges: usize, arities: &[usize]) -> Sector {
    let mut leaf = || Leaf {
        value: Scalar::random(&mut *rng),
        path: arities
            .iter()
            .map(|&a| Level {
                siblings: (1..a).map(|_| Scalar::random(&mut *rng)).collect(),
                index: rng.gen_range(0..a),
            })
            .collect(),
    };
    let leaves = (0..challenges).map(|_| leaf()).collect();
    Sector {
        comm_r: Scalar::random(&mut *rng),
        comm_c: Scalar::random(&mut *rng),
        comm_r_last: Scalar::random(&mut *rng),
        leaves,
    }
}

/// `sector` as the circuit's sector, the form `Sector::circuit` builds from a vanilla proof.
pub(super) fn circuit_sector<Tree: MerkleTreeTrait>(sector: &Sector) -> CircuitSector<Tree> {
    let path = |leaf: &Leaf| {
        let levels: Vec<(Vec<Option<Scalar>>, Option<usize>)> = leaf
            .path
            .iter()
            .map(|l| {
                (
                    l.siblings.iter().copied().map(Some).collect(),
                    Some(l.index),
                )
            })
            .collect();
        AuthPath::from(levels)
    };
    CircuitSector {
        comm_r: Some(sector.comm_r),
        comm_c: Some(sector.comm_c),
        comm_r_last: Some(sector.comm_r_last),
        leafs: sector.leaves.iter().map(|l| Some(l.value)).collect(),
        paths: sector.leaves.iter().map(path).collect(),
        id: Some(Scalar::ZERO),
    }
}
