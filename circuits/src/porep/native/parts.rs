//! What the native generator reads from a partition's vanilla proofs, in the tree-agnostic form
//! it works on, and the shape a sector size's circuit has. Every value is taken exactly where
//! `StackedCompound::circuit` takes it (the circuit's `Proof::from(vanilla)`), and the proofs'
//! shape is checked against the sector size's, so layout offsets computed from the shape hold.
//!
//! Column and labeling proofs keep their fields crate-private; they are read through serde
//! (bincode, field order as declared in storage-proofs-porep 19.1).

use blstrs::Scalar;
use filecoin_hashers::Hasher;
use filecoin_proofs::{DefaultPieceHasher, MerkleTreeTrait, PoRepConfig};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use storage_proofs_core::merkle::MerkleProofTrait;
use storage_proofs_porep::stacked::Proof;

use crate::native::paths::{fr, path, tree_arities, Path};

/// A sector size's circuit shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub challenges: usize,
    pub layers: usize,
    pub drg_parents: usize,
    pub exp_parents: usize,
    /// Levels of the tree D path (binary).
    pub comm_d_depth: usize,
    /// Arity of each tree R / tree C path level, leaf first.
    pub tree: Vec<usize>,
}

impl Shape {
    pub(crate) fn of<Tree: MerkleTreeTrait>(config: &PoRepConfig) -> anyhow::Result<Shape> {
        let sp = filecoin_proofs::parameters::setup_params(config)?;
        let tree = tree_arities::<Tree>(sp.nodes);
        Ok(Shape {
            challenges: sp.challenges.num_challenges_per_partition(),
            layers: sp.num_layers,
            drg_parents: sp.degree,
            exp_parents: sp.expansion_degree,
            comm_d_depth: sp.nodes.trailing_zeros() as usize,
            tree,
        })
    }
}

/// A column of a node (one row per layer) and its tree C path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Column {
    pub rows: Vec<Scalar>,
    pub path: Path,
}

/// One challenge's witness data.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Challenge {
    pub node: u64,
    pub data_leaf: Scalar,
    pub comm_d_path: Path,
    pub drg: Vec<Column>,
    pub exp: Vec<Column>,
    /// Tree R's leaf, which the encoded node must equal.
    pub replica_leaf: Scalar,
    pub comm_r_last_path: Path,
    /// The challenged node's column: its rows are the labels the circuit recomputes.
    pub c_x: Column,
}

/// One partition's witness data.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Partition {
    pub replica_id: Scalar,
    pub comm_d: Scalar,
    pub comm_r: Scalar,
    pub comm_r_last: Scalar,
    pub comm_c: Scalar,
    pub challenges: Vec<Challenge>,
}

#[derive(Deserialize)]
struct ColumnFields<D> {
    _index: u32,
    rows: Vec<D>,
}

#[derive(Deserialize)]
struct ColumnProofFields<D, P> {
    column: ColumnFields<D>,
    inclusion_proof: P,
}

#[derive(Deserialize)]
struct LabelingFields<D> {
    _parents: Vec<D>,
    _layer_index: u32,
    node: u64,
}

/// `value` re-read as `T` through bincode.
fn transcode<T: DeserializeOwned>(value: &impl Serialize, what: &str) -> Result<T, String> {
    let bytes = bincode::serialize(value).map_err(|e| format!("cannot encode {what}: {e}"))?;
    bincode::deserialize(&bytes).map_err(|e| format!("cannot read {what}: {e}"))
}

type TreeProof<Tree> = storage_proofs_core::merkle::MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;
type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
type Vanilla<Tree> = Proof<Tree, DefaultPieceHasher>;

fn column<Tree: MerkleTreeTrait>(
    proof: &storage_proofs_porep::stacked::ColumnProof<TreeProof<Tree>>,
    shape: &Shape,
    what: &str,
) -> Result<Column, String> {
    let fields: ColumnProofFields<TreeDomain<Tree>, TreeProof<Tree>> = transcode(proof, what)?;
    if fields.column.rows.len() != shape.layers {
        return Err(format!(
            "{what} has {} rows, the sector size {} layers",
            fields.column.rows.len(),
            shape.layers
        ));
    }
    Ok(Column {
        rows: fields
            .column
            .rows
            .iter()
            .map(fr)
            .collect::<Result<_, _>>()?,
        path: path(&fields.inclusion_proof, &shape.tree, what)?,
    })
}

fn challenge<Tree: MerkleTreeTrait>(p: &Vanilla<Tree>, shape: &Shape) -> Result<Challenge, String> {
    let columns = |proofs: &[storage_proofs_porep::stacked::ColumnProof<TreeProof<Tree>>],
                   count: usize,
                   kind: &str| {
        if proofs.len() != count {
            return Err(format!("{} {kind} parents, expected {count}", proofs.len()));
        }
        proofs
            .iter()
            .enumerate()
            .map(|(i, c)| column::<Tree>(c, shape, &format!("{kind} parent {i}'s column")))
            .collect::<Result<Vec<_>, _>>()
    };
    let cols = &p.replica_column_proofs;
    let first = p
        .labeling_proofs
        .first()
        .ok_or_else(|| "a challenge has no labeling proof".to_string())?;
    let labeling: LabelingFields<TreeDomain<Tree>> = transcode(first, "a labeling proof")?;
    Ok(Challenge {
        node: labeling.node,
        data_leaf: fr(&p.comm_d_proofs.leaf())?,
        comm_d_path: path(
            &p.comm_d_proofs,
            &vec![2; shape.comm_d_depth],
            "the tree D path",
        )?,
        drg: columns(&cols.drg_parents, shape.drg_parents, "drg")?,
        exp: columns(&cols.exp_parents, shape.exp_parents, "expander")?,
        replica_leaf: fr(&p.comm_r_last_proof.leaf())?,
        comm_r_last_path: path(&p.comm_r_last_proof, &shape.tree, "the tree R path")?,
        c_x: column::<Tree>(&cols.c_x, shape, "the challenged column")?,
    })
}

/// Partition data from its vanilla proofs and the public inputs, as `StackedCompound::circuit`
/// takes them (comm_r_last and comm_c from the first challenge, the same in all).
pub(crate) fn partition<Tree: MerkleTreeTrait>(
    proofs: &[Vanilla<Tree>],
    replica_id: &TreeDomain<Tree>,
    comm_d: &<DefaultPieceHasher as Hasher>::Domain,
    comm_r: &TreeDomain<Tree>,
    shape: &Shape,
) -> Result<Partition, String> {
    let first = proofs
        .first()
        .ok_or_else(|| "the partition has no vanilla proofs".to_string())?;
    if proofs.len() != shape.challenges {
        return Err(format!(
            "{} challenges, the sector size has {}",
            proofs.len(),
            shape.challenges
        ));
    }
    let (comm_r_last, comm_c) = (first.comm_r_last(), first.comm_c());
    if proofs.iter().any(|p| p.comm_r_last() != comm_r_last) {
        return Err("inconsistent comm_r_lasts".into());
    }
    if proofs.iter().any(|p| p.comm_c() != comm_c) {
        return Err("inconsistent comm_cs".into());
    }
    Ok(Partition {
        replica_id: fr(replica_id)?,
        comm_d: fr(comm_d)?,
        comm_r: fr(comm_r)?,
        comm_r_last: fr(&comm_r_last)?,
        comm_c: fr(&comm_c)?,
        challenges: proofs
            .iter()
            .enumerate()
            .map(|(i, p)| challenge(p, shape).map_err(|e| format!("challenge {i}: {e}")))
            .collect::<Result<_, _>>()?,
    })
}
