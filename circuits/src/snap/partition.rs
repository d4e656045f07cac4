//! A SnapDeals partition in the native generator's form: read from a vanilla `PartitionProof` as
//! `EmptySectorUpdateCompound::circuit` reads it, and back as the gadgets' circuit (what the
//! synthetic partitions and the tests synthesize through the gadgets).

use std::marker::PhantomData;

use blstrs::Scalar;
use filecoin_proofs::MerkleTreeTrait;
use storage_proofs_core::merkle::MerkleProofTrait;
use storage_proofs_update::circuit::{ChallengeProof, PrivateInputs, PublicInputs};
use storage_proofs_update::constants::{hs, TreeRHasher};
use storage_proofs_update::{PartitionProof, PublicParams};

use super::native::{Challenge, Layout, NativeError, Params, Partition};
use super::Circuit;
use crate::native::paths::{fr, path, tree_arities, Path};

/// The generator's parameters of `pp`'s circuit selecting `h` high bits, or `None` for an `h`
/// the circuit does not offer.
pub(crate) fn params(pp: &PublicParams, h: usize) -> Option<Params> {
    let hs = hs(pp.sector_nodes);
    Some(Params {
        challenges: pp.challenge_count,
        challenge_bits: pp.challenge_bit_len,
        partition_bits: pp.partition_bit_len,
        apex_bits: pp.apex_leaf_bit_len,
        hs,
        h_index: hs.iter().position(|&x| x == h)?,
    })
}

/// The layout of `pp`'s circuit over `Tree`, or `None` for a shape the generator does not know.
pub(crate) fn layout<Tree: MerkleTreeTrait>(pp: &PublicParams, h: usize) -> Option<Layout> {
    Layout::new(params(pp, h)?, &tree_arities::<Tree>(pp.sector_nodes))
}

/// The public values of a partition: `k` and the three commitments.
pub(crate) struct Public {
    pub k: usize,
    pub comm_r_old: Scalar,
    pub comm_d_new: Scalar,
    pub comm_r_new: Scalar,
}

fn siblings(path: Path) -> Vec<Vec<Scalar>> {
    path.into_iter().map(|l| l.siblings).collect()
}

/// Partition `public.k` from its vanilla proof: the roots are challenge 0's, the partition
/// path the top of challenge 0's tree D path, which every challenge's must end in (the
/// circuit asserts it).
pub(crate) fn read<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    public: &Public,
    proof: &PartitionProof<Tree>,
    pp: &PublicParams,
) -> Result<Partition, NativeError> {
    let shape = NativeError::Shape;
    let r_arities = tree_arities::<Tree>(pp.sector_nodes);
    let d_arities = vec![2; pp.challenge_bit_len];
    let below_partition = pp.challenge_bit_len - pp.partition_bit_len;
    let first = proof
        .challenge_proofs
        .first()
        .ok_or_else(|| shape("the partition proof has no challenges".into()))?;
    let mut partition_path = Vec::new();
    let challenges = proof
        .challenge_proofs
        .iter()
        .enumerate()
        .map(|(c, cp)| {
            let what = |tree: &str| format!("challenge {c}'s tree {tree} path");
            let mut path_d =
                siblings(path(&cp.proof_d_new, &d_arities, &what("D")).map_err(shape)?)
                    .into_iter()
                    .map(|s| s[0])
                    .collect::<Vec<_>>();
            let top = path_d.split_off(below_partition);
            if c == 0 {
                partition_path = top;
            } else if top != partition_path {
                return Err(NativeError::PartitionPath { challenge: c });
            }
            path_d.truncate(below_partition - pp.apex_leaf_bit_len);
            Ok(Challenge {
                leaf_r_old: fr(&cp.proof_r_old.leaf()).map_err(shape)?,
                leaf_d_new: fr(&cp.proof_d_new.leaf()).map_err(shape)?,
                leaf_r_new: fr(&cp.proof_r_new.leaf()).map_err(shape)?,
                path_r_old: siblings(
                    path(&cp.proof_r_old, &r_arities, &what("R old")).map_err(shape)?,
                ),
                path_r_new: siblings(
                    path(&cp.proof_r_new, &r_arities, &what("R new")).map_err(shape)?,
                ),
                path_d,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Partition {
        k: public.k,
        comm_r_old: public.comm_r_old,
        comm_d_new: public.comm_d_new,
        comm_r_new: public.comm_r_new,
        comm_c: fr(&proof.comm_c).map_err(shape)?,
        root_r_old: fr(&first.proof_r_old.root()).map_err(shape)?,
        root_r_new: fr(&first.proof_r_new.root()).map_err(shape)?,
        apex_leaves: proof
            .apex_leafs
            .iter()
            .map(fr)
            .collect::<Result<_, _>>()
            .map_err(shape)?,
        partition_path,
        challenges,
    })
}

/// `p` as the gadgets' circuit of `pp` (whose challenge count `p` has) selecting `h_select`.
pub(crate) fn circuit<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    p: &Partition,
    pp: &PublicParams,
    h_select: u64,
) -> Circuit<Tree> {
    let some = |v: &[Scalar]| v.iter().copied().map(Some).collect::<Vec<_>>();
    let levels = |path: &[Vec<Scalar>]| path.iter().map(|l| some(l)).collect::<Vec<_>>();
    let challenge_proofs = p
        .challenges
        .iter()
        .map(|c| ChallengeProof {
            leaf_r_old: Some(c.leaf_r_old),
            path_r_old: levels(&c.path_r_old),
            leaf_d_new: Some(c.leaf_d_new),
            // The levels up to the apex leaves are read by the circuit; the apex tree's own
            // levels, which it computes, are never read.
            path_d_new: c
                .path_d
                .iter()
                .chain(&vec![Scalar::from(0u64); pp.apex_leaf_bit_len])
                .chain(&p.partition_path)
                .map(|s| vec![Some(*s)])
                .collect(),
            leaf_r_new: Some(c.leaf_r_new),
            path_r_new: levels(&c.path_r_new),
            _tree_r: PhantomData,
        })
        .collect();
    let k_and_h_select = p.k as u64 | (h_select << pp.partition_bit_len);
    Circuit::<Tree> {
        pub_params: PublicParams {
            challenge_count: p.challenges.len(),
            ..pp.clone()
        },
        pub_inputs: PublicInputs {
            k_and_h_select: Some(Scalar::from(k_and_h_select)),
            comm_r_old: Some(p.comm_r_old),
            comm_d_new: Some(p.comm_d_new),
            comm_r_new: Some(p.comm_r_new),
        },
        priv_inputs: PrivateInputs {
            comm_c: Some(p.comm_c),
            root_r_old: Some(p.root_r_old),
            root_r_new: Some(p.root_r_new),
            apex_leafs: some(&p.apex_leaves),
            challenge_proofs,
        },
    }
}
