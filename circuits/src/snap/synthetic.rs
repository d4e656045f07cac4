//! Synthetic SnapDeals partitions: the real shape of a sector size's circuit (its trees, apex
//! leaves and, unless told otherwise, challenges), random contents. For timing the witness
//! paths side by side (`cuzk-porep snap-witness`) and checking them equal on shapes no test
//! can encode a sector for; their witnesses satisfy nothing (but the encoding, which the
//! gadgets assert), so the native generator runs unchecked.

use blstrs::Scalar;
use cuzk_wire::witness::Witness;
use ff::Field;
use filecoin_proofs::MerkleTreeTrait;
use rand::{Rng, SeedableRng};
use storage_proofs_update::constants::{h_default, h_select, TreeRHasher};

use super::native::{self, Challenge, Layout, Partition};
use super::partition::{self, params};
use super::{public_params, shape_key};
use crate::filecoin::{with_tree, SectorSize};
use crate::native::paths::tree_arities;
use crate::{CircuitError, Synthesis, Synthesized};

/// One partition of random contents.
pub struct SyntheticSnap {
    size: SectorSize,
    pub(super) partition: Partition,
}

impl SyntheticSnap {
    /// A partition of `size`'s circuit with `challenges` challenges (default: the circuit's),
    /// drawn from `seed`.
    pub fn new(
        size: SectorSize,
        challenges: Option<usize>,
        seed: u64,
    ) -> Result<Self, CircuitError> {
        let pp = public_params(size);
        let challenges = challenges.unwrap_or(pp.challenge_count).max(1);
        let arities = with_tree!(size, Tree => tree_arities::<Tree>(pp.sector_nodes));
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let k = rng.gen_range(0..pp.partition_count);
        let mut random = |n: usize| (0..n).map(|_| Scalar::random(&mut rng)).collect::<Vec<_>>();
        let path_len = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
        let challenges = (0..challenges)
            .map(|_| {
                let mut path_r = || arities.iter().map(|&a| random(a - 1)).collect::<Vec<_>>();
                let (path_r_old, path_r_new) = (path_r(), path_r());
                let leaves = random(2);
                Challenge {
                    leaf_r_old: leaves[0],
                    leaf_d_new: leaves[1],
                    leaf_r_new: Scalar::ZERO,
                    path_r_old,
                    path_r_new,
                    path_d: random(path_len),
                }
            })
            .collect::<Vec<_>>();
        let heads = random(6);
        let partition = Partition {
            k,
            comm_r_old: heads[0],
            comm_d_new: heads[1],
            comm_r_new: heads[2],
            comm_c: heads[3],
            root_r_old: heads[4],
            root_r_new: heads[5],
            apex_leaves: random(pp.apex_leaf_count),
            partition_path: random(pp.partition_bit_len),
            challenges,
        };
        let mut synthetic = SyntheticSnap { size, partition };
        let encoded = synthetic.layout()?.encoded_leaves(&synthetic.partition);
        for (c, leaf) in synthetic.partition.challenges.iter_mut().zip(encoded) {
            c.leaf_r_new = leaf;
        }
        Ok(synthetic)
    }

    pub fn challenges(&self) -> usize {
        self.partition.challenges.len()
    }

    pub(super) fn layout(&self) -> Result<Layout, CircuitError> {
        let pp = public_params(self.size);
        let p = params(&pp, h_default(pp.sector_nodes))
            .ok_or_else(|| self.err("the circuit has no default h"))?;
        let p = native::Params {
            challenges: self.challenges(),
            ..p
        };
        let arities = with_tree!(self.size, Tree => tree_arities::<Tree>(pp.sector_nodes));
        Layout::new(p, &arities).ok_or_else(|| self.err("no native generator for this shape"))
    }

    /// The witness from the native generator (what a synth node ships).
    pub fn native_witness(&self) -> Result<Witness, CircuitError> {
        native::generate(
            &self.partition,
            &self.layout()?,
            native::Options::unchecked(),
        )
        .map_err(|e| self.err(e))
    }

    /// The witness from the circuit's gadgets (witness-only synthesis).
    pub fn gadget_witness(&self) -> Result<Witness, CircuitError> {
        with_tree!(self.size, Tree => self.gadget::<Tree>())
    }

    fn gadget<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        &self,
    ) -> Result<Witness, CircuitError> {
        let pp = public_params(self.size);
        let select = h_select(pp.sector_nodes, h_default(pp.sector_nodes));
        let circuit = partition::circuit::<Tree>(&self.partition, &pp, select);
        let mode = Synthesis::GadgetWitness { capacity: None };
        match crate::run(shape_key(self.size), 0, mode, circuit)? {
            Synthesized::Witness(w) => Ok(w),
            Synthesized::Recording(_) => Err(self.err("the gadgets returned a recording")),
        }
    }

    fn err(&self, reason: impl std::fmt::Display) -> CircuitError {
        CircuitError::Native {
            shape: shape_key(self.size),
            partition: self.partition.k,
            reason: reason.to_string(),
        }
    }
}
