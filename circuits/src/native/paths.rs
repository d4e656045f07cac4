//! Merkle inclusion paths as storage-proofs' `PoRCircuit` allocates them. Each level: its index
//! bits (`log2(arity)` of them, lowest first), the siblings, the insertion network that places
//! the current node among them (`gadgets::insertion`), then the level's hash: Poseidon for trees
//! R and C, SHA-256 over the two children's bits for tree D. Paths are read from vanilla proofs
//! here too, in the tree-agnostic form the emitters take.

use blstrs::Scalar;
use ff::PrimeField;
use filecoin_hashers::Domain;
use filecoin_proofs::MerkleTreeTrait;
use generic_array::typenum::Unsigned;
use storage_proofs_core::merkle::{base_path_length, MerkleProofTrait};

use super::out::Out;
use super::poseidon::Poseidon;
use super::sha256::{digest_bytes, field_words, sha256, Word};

/// One level of a path: the siblings in order and the node's position among `siblings + 1`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Level {
    pub siblings: Vec<Scalar>,
    pub index: usize,
}

/// A path's levels, leaf first.
pub(crate) type Path = Vec<Level>;

/// Variables `insert` allocates for an arity.
pub(crate) fn insert_vars(arity: usize) -> Option<usize> {
    match arity {
        2 => Some(2),
        // Two helper bits, then twenty picks.
        8 => Some(2 + INSERT_8.len()),
        _ => None,
    }
}

/// A pick's condition in `insert_8`.
#[derive(Clone, Copy)]
enum Cond {
    B0,
    B1,
    B2,
    /// not b0 and not b1
    Nor,
    /// b0 and b1
    And,
}

/// `insert_8`'s picks in allocation order: `(condition, if true, if false)`, as indices into
/// the registers [node, sibling 0..6, pick 0, pick 1, ...].
const INSERT_8: [(Cond, u8, u8); 20] = [
    (Cond::Nor, 0, 1),
    (Cond::B2, 1, 8),
    (Cond::B0, 0, 1),
    (Cond::B1, 2, 10),
    (Cond::B2, 2, 11),
    (Cond::B0, 3, 0),
    (Cond::B1, 13, 2),
    (Cond::B2, 3, 14),
    (Cond::And, 0, 3),
    (Cond::B2, 4, 16),
    (Cond::Nor, 0, 5),
    (Cond::B2, 18, 4),
    (Cond::B0, 0, 5),
    (Cond::B1, 6, 20),
    (Cond::B2, 21, 5),
    (Cond::B0, 7, 0),
    (Cond::B1, 23, 6),
    (Cond::B2, 24, 6),
    (Cond::And, 0, 7),
    (Cond::B2, 26, 7),
];

/// The registers holding the eight outputs of `insert_8`.
const INSERT_8_OUT: [usize; 8] = [9, 12, 15, 17, 19, 22, 25, 27];

/// Emits `insert`'s variables; returns the node placed at `index` among `siblings`.
pub(crate) fn insert(
    out: &mut Out,
    node: Scalar,
    index: usize,
    siblings: &[Scalar],
) -> Vec<Scalar> {
    let bit = |i: usize| (index >> i) & 1 == 1;
    if siblings.len() == 1 {
        let (p0, p1) = if bit(0) {
            (siblings[0], node)
        } else {
            (node, siblings[0])
        };
        out.push(p0);
        out.push(p1);
        return vec![p0, p1];
    }
    let (b0, b1, b2) = (bit(0), bit(1), bit(2));
    let (nor, and) = (!b0 && !b1, b0 && b1);
    out.bit(nor);
    out.bit(and);
    let mut regs = Vec::with_capacity(8 + INSERT_8.len());
    regs.push(node);
    regs.extend_from_slice(siblings);
    for &(cond, yes, no) in &INSERT_8 {
        let c = match cond {
            Cond::B0 => b0,
            Cond::B1 => b1,
            Cond::B2 => b2,
            Cond::Nor => nor,
            Cond::And => and,
        };
        let v = regs[usize::from(if c { yes } else { no })];
        out.push(v);
        regs.push(v);
    }
    INSERT_8_OUT.iter().map(|&r| regs[r]).collect()
}

/// Variables of one Poseidon-tree level of `arity`, if the native path knows it.
pub(crate) fn tree_level_vars(arity: usize) -> Option<usize> {
    let hash = Poseidon::for_arity(arity)?.vars();
    Some(arity.trailing_zeros() as usize + (arity - 1) + insert_vars(arity)? + hash)
}

/// A tree R or C path from `leaf`, one hasher per level (the path's shape was checked against
/// it); returns the root it computes.
pub(crate) fn tree_path(
    out: &mut Out,
    leaf: Scalar,
    path: &[Level],
    hashers: &[&Poseidon],
) -> Scalar {
    let mut cur = leaf;
    for (level, hasher) in path.iter().zip(hashers) {
        let arity = hasher.arity();
        for i in 0..arity.trailing_zeros() {
            out.bit((level.index >> i) & 1 == 1);
        }
        for s in &level.siblings {
            out.push(*s);
        }
        let children = insert(out, cur, level.index, &level.siblings);
        cur = hasher.hash(out, &children);
    }
    cur
}

/// 32 bytes as the circuits pack a digest: each byte's bits lowest first
/// (`reverse_bit_numbering`), the first 254 bits (`pack_bits`) — the little-endian number with
/// the top two bits cleared.
pub(crate) fn le_254(mut bytes: [u8; 32]) -> Scalar {
    bytes[31] &= 0x3f;
    let half = |b: &[u8]| {
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Scalar::from_u128(u128::from_le_bytes(a))
    };
    let two_64 = Scalar::from_u128(1 << 64);
    half(&bytes[..16]) + half(&bytes[16..]) * two_64 * two_64
}

/// A SHA-256 digest packed as a field element.
pub(crate) fn packed(digest: &[Word; 8]) -> Scalar {
    le_254(digest_bytes(digest))
}

/// Variables of one tree D level, given the SHA-256 of two children.
pub(crate) fn comm_d_level_vars(sha_vars: usize) -> usize {
    // index bit, sibling, two picks, both children's bits, the hash, its packing
    1 + 1 + 2 + 2 * Scalar::NUM_BITS as usize + sha_vars + 1
}

/// SHA-256 of two nodes, as `Sha256Function::hash_multi_leaf_circuit` allocates it: both nodes'
/// bits, the hash, the packed digest.
pub(crate) fn sha_pair(out: &mut Out, left: &Scalar, right: &Scalar) -> Scalar {
    out.field_bits(left);
    out.field_bits(right);
    let (l, r) = (left.to_repr(), right.to_repr());
    let mut msg = [Word::constant(0); 16];
    msg[..8].copy_from_slice(&field_words(&l));
    msg[8..].copy_from_slice(&field_words(&r));
    let node = packed(&sha256(out, &msg));
    out.push(node);
    node
}

/// The tree D path from `leaf`; returns the root it computes.
pub(crate) fn comm_d_path(out: &mut Out, leaf: Scalar, path: &[Level]) -> Scalar {
    let mut cur = leaf;
    for level in path {
        out.bit(level.index & 1 == 1);
        for s in &level.siblings {
            out.push(*s);
        }
        let children = insert(out, cur, level.index, &level.siblings);
        cur = sha_pair(out, &children[0], &children[1]);
    }
    cur
}

/// The arity of each level of a `Tree` path over `nodes` leaves, leaf first: the base levels,
/// then the sub and top tree's one level each where the tree has them.
pub(crate) fn tree_arities<Tree: MerkleTreeTrait>(nodes: usize) -> Vec<usize> {
    let (base, sub, top) = (
        Tree::Arity::to_usize(),
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    );
    let base_len = base_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(nodes);
    let mut tree = vec![base; base_len];
    tree.extend([sub, top].into_iter().filter(|&a| a > 0));
    tree
}

/// A node as the field element the circuits allocate for it.
pub(crate) fn fr<D: Domain>(d: &D) -> Result<Scalar, String> {
    let bytes: [u8; 32] = d
        .as_ref()
        .try_into()
        .map_err(|_| "a node is not 32 bytes".to_string())?;
    Scalar::from_repr_vartime(bytes).ok_or_else(|| "a node is not a field element".to_string())
}

/// `proof`'s path, checked against `arities` (one per level).
pub(crate) fn path<P: MerkleProofTrait>(
    proof: &P,
    arities: &[usize],
    what: &str,
) -> Result<Path, String> {
    let raw = proof.path();
    if raw.len() != arities.len() {
        return Err(format!(
            "{what} has {} levels, the sector size {}",
            raw.len(),
            arities.len()
        ));
    }
    raw.iter()
        .zip(arities)
        .map(|((hashes, index), &arity)| {
            if hashes.len() + 1 != arity {
                return Err(format!("{what} has a level of arity {}", hashes.len() + 1));
            }
            Ok(Level {
                siblings: hashes.iter().map(fr).collect::<Result<_, _>>()?,
                index: *index,
            })
        })
        .collect()
}

/// The packed path bits a `PoRCircuit` makes public: each level's index bits, leaf first.
pub(crate) fn path_input(path: &Path) -> Scalar {
    let (mut value, mut shift) = (0u128, 0);
    for level in path {
        let bits = (level.siblings.len() + 1).trailing_zeros();
        let mask = (1usize << bits) - 1;
        value |= ((level.index & mask) as u128) << shift;
        shift += bits;
    }
    Scalar::from_u128(value)
}
