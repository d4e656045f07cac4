//! Synthetic C1 outputs: the exact shape of a sector size's Commit-1 output — partitions,
//! challenges per partition, layers, tree arities and depths, parent counts — filled with random
//! field elements. Sealing a 32 GiB sector takes hours; this takes a second, and its partitions
//! synthesize to witnesses of exactly the real circuit's length, so everything downstream of
//! synthesis can be timed at full size. Its vanilla proofs do not verify and its proofs are
//! meaningless: files carry `"cuzk_synthetic": true`, jobs must say `"synthetic": true`, and
//! nodes take them only when started with `--allow-synthetic`.

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::parameters::setup_params;
use filecoin_proofs::{DefaultPieceHasher, MerkleTreeTrait, SealCommitPhase1Output};
use generic_array::typenum::Unsigned;
use rand::{Rng, RngCore};
use storage_proofs_core::merkle::MerkleProof;
use storage_proofs_porep::stacked::{
    ColumnProof, EncodingProof, LabelingProof, Proof, ReplicaColumnProof, TOTAL_PARENTS,
};

use super::params_err;
use crate::filecoin::{with_tree, SectorSize};
use crate::CircuitError;

/// The key marking a synthetic C1 file.
pub const SYNTHETIC_KEY: &str = "cuzk_synthetic";

/// A random value of any hasher's domain: 32 bytes below 2^254, so valid both as a field element
/// and as a Fr32-trimmed SHA-256 digest.
pub(super) fn random_domain<D: Domain>(rng: &mut dyn RngCore) -> D {
    let mut b = [0u8; 32];
    rng.fill_bytes(&mut b);
    b[31] &= 0x3f;
    D::try_from_bytes(&b).expect("a value below 2^254 is in every domain")
}

fn randoms<D: Domain>(rng: &mut dyn RngCore, n: usize) -> Vec<D> {
    (0..n).map(|_| random_domain(rng)).collect()
}

/// An inclusion proof of the right shape for `Tree` over `nodes` leaves, claiming `root`.
fn tree_proof<Tree: MerkleTreeTrait>(
    rng: &mut dyn RngCore,
    nodes: usize,
    root: <Tree::Hasher as Hasher>::Domain,
) -> MerkleProof<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity> {
    let (base, sub, top) = (
        Tree::Arity::to_usize(),
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    );
    let per_base = nodes / sub.max(1) / top.max(1);
    let mut path = Vec::new();
    let mut level = per_base;
    while level > 1 {
        path.push((randoms(rng, base - 1), rng.gen_range(0..base)));
        level /= base;
    }
    for arity in [sub, top].into_iter().filter(|&a| a > 0) {
        path.push((randoms(rng, arity - 1), rng.gen_range(0..arity)));
    }
    MerkleProof::from_parts(random_domain(rng), root, path)
}

/// A C1 output of `size`'s real shape with random contents, as JSON marked synthetic.
pub fn synthetic_c1(size: SectorSize, rng: &mut dyn RngCore) -> Result<Vec<u8>, CircuitError> {
    with_tree!(size, Tree => build::<Tree>(size, rng))
}

/// One partition's vanilla proofs of the real shape, every challenge's proofs sharing the
/// trees' roots as Filecoin's circuit builder checks.
pub(super) fn partition_proofs<Tree: 'static + MerkleTreeTrait>(
    size: SectorSize,
    rng: &mut dyn RngCore,
) -> Result<Vec<Proof<Tree, DefaultPieceHasher>>, CircuitError> {
    Ok(Partitions::<Tree>::new(size, rng)?.next(rng))
}

/// Random partitions of one sector: the same roots in each.
struct Partitions<Tree: MerkleTreeTrait> {
    sp: storage_proofs_porep::stacked::SetupParams,
    comm_r_last: <Tree::Hasher as Hasher>::Domain,
    comm_c: <Tree::Hasher as Hasher>::Domain,
    comm_d_root: <DefaultPieceHasher as Hasher>::Domain,
}

impl<Tree: 'static + MerkleTreeTrait> Partitions<Tree> {
    fn new(size: SectorSize, rng: &mut dyn RngCore) -> Result<Self, CircuitError> {
        Ok(Partitions {
            sp: setup_params(&size.config()).map_err(|e| params_err(size, e))?,
            comm_r_last: random_domain(rng),
            comm_c: random_domain(rng),
            comm_d_root: random_domain(rng),
        })
    }

    fn next(&self, rng: &mut dyn RngCore) -> Vec<Proof<Tree, DefaultPieceHasher>> {
        let sp = &self.sp;
        let nodes = sp.nodes;
        let layers = sp.num_layers;
        let d_depth = nodes.trailing_zeros() as usize;
        // A column of some node (the circuit takes the indices as witnesses, not as constants).
        let column = |rng: &mut dyn RngCore| {
            let index = rng.gen_range(0..nodes as u32);
            ColumnProof::new(
                index,
                randoms(rng, layers),
                tree_proof::<Tree>(rng, nodes, self.comm_c),
            )
        };
        let proof = |rng: &mut dyn RngCore| -> Proof<Tree, DefaultPieceHasher> {
            let node = rng.gen_range(0..nodes as u64);
            let d_path = (0..d_depth)
                .map(|_| (randoms(rng, 1), rng.gen_range(0..2)))
                .collect();
            Proof {
                comm_d_proofs: MerkleProof::from_parts(
                    random_domain(rng),
                    self.comm_d_root,
                    d_path,
                ),
                comm_r_last_proof: tree_proof::<Tree>(rng, nodes, self.comm_r_last),
                replica_column_proofs: ReplicaColumnProof {
                    c_x: column(rng),
                    drg_parents: (0..sp.degree).map(|_| column(rng)).collect(),
                    exp_parents: (0..sp.expansion_degree).map(|_| column(rng)).collect(),
                },
                labeling_proofs: (1..=layers as u32)
                    .map(|layer| LabelingProof::new(layer, node, randoms(rng, TOTAL_PARENTS)))
                    .collect(),
                encoding_proof: EncodingProof::new(
                    layers as u32,
                    node,
                    randoms(rng, TOTAL_PARENTS),
                ),
            }
        };
        (0..sp.challenges.num_challenges_per_partition())
            .map(|_| proof(rng))
            .collect()
    }
}

fn build<Tree: 'static + MerkleTreeTrait>(
    size: SectorSize,
    rng: &mut dyn RngCore,
) -> Result<Vec<u8>, CircuitError> {
    let partitions = Partitions::<Tree>::new(size, rng)?;
    let mut bytes = [0u8; 32];
    let mut commitment = |rng: &mut dyn RngCore| {
        rng.fill_bytes(&mut bytes);
        bytes[31] &= 0x3f;
        bytes
    };
    let c1 = SealCommitPhase1Output::<Tree> {
        vanilla_proofs: (0..size.partitions())
            .map(|_| partitions.next(rng))
            .collect(),
        comm_r: commitment(rng),
        comm_d: commitment(rng),
        replica_id: random_domain(rng),
        seed: commitment(rng),
        ticket: commitment(rng),
    };
    let mut value = serde_json::to_value(&c1).map_err(|e| params_err(size, e))?;
    value[SYNTHETIC_KEY] = serde_json::Value::Bool(true);
    serde_json::to_vec(&value).map_err(|e| params_err(size, e))
}
