//! Where each part of a partition's aux vector lies. Every gadget allocates a number of
//! variables fixed by the shape (constants fold by position, never by value), so the offsets are
//! known before any value is: the prologue, then per challenge the same run of tasks, each a
//! disjoint slice that one thread fills.

use std::sync::OnceLock;

use blstrs::Scalar;
use ff::{Field, PrimeField};

use super::parts::Shape;
use crate::native::out::Out;
use crate::native::paths::{comm_d_level_vars, insert_vars, sha_pair, tree_level_vars};
use crate::native::poseidon::Poseidon;
use crate::native::sha256::{sha256, Word};

/// A field element's bits (`to_bits_le`).
pub(crate) const FIELD_BITS: usize = Scalar::NUM_BITS as usize;
/// Message words of one label: replica id, layer and node, 37 parents.
pub(crate) const LABEL_WORDS: usize = 8 + 8 + 37 * 8;
/// Parents hashed into a label (`TOTAL_PARENTS`).
pub(crate) const LABEL_PARENTS: usize = 37;

/// A challenge's tasks, in aux order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Task {
    /// The data leaf and its tree D path.
    CommD,
    /// A drg parent's column, column hash and tree C path.
    Drg(usize),
    /// An expander parent's, likewise.
    Exp(usize),
    /// The challenged node's 64 bits.
    Node,
    /// Layer `l`'s parents' bits and its label.
    Label(usize),
    /// The encoded node and its tree R path.
    Replica,
    /// The challenged column's hash and its tree C path.
    Cx,
}

/// Sizes for one shape.
pub(crate) struct Layout {
    pub shape: Shape,
    pub tree_hashers: Vec<&'static Poseidon>,
    pub column_hasher: &'static Poseidon,
    /// H(comm_c, comm_r_last).
    pub pair_hasher: &'static Poseidon,
    pub prologue: usize,
    /// A challenge's tasks with their sizes, in order.
    pub tasks: Vec<(Task, usize)>,
}

/// Variables of a SHA-256 over words with the given constness, counted by running the emitter
/// (constness, not values, decides what it allocates).
fn sha_vars(msg: &[Word]) -> usize {
    let mut out = Out::counting();
    sha256(&mut out, msg);
    out.written()
}

/// A label's SHA-256 (values are irrelevant to the count).
fn label_sha_vars() -> usize {
    static VARS: OnceLock<usize> = OnceLock::new();
    *VARS.get_or_init(|| sha_vars(&super::label_message(&Scalar::ZERO, 0, 1, &[[0; 32]])))
}

/// A tree D level's SHA-256 (two children).
fn pair_sha_vars() -> usize {
    static VARS: OnceLock<usize> = OnceLock::new();
    *VARS.get_or_init(|| {
        let mut out = Out::counting();
        sha_pair(&mut out, &Scalar::ZERO, &Scalar::ZERO);
        // sha_pair also emits both children's bits and the packed digest.
        out.written() - 2 * FIELD_BITS - 1
    })
}

impl Layout {
    /// The layout of `shape`, or `None` if the native generator does not know one of its parts
    /// (an arity or column height without Poseidon constants or an insertion network here, or
    /// a parent count other than the 6 + 8 the labels are built from).
    pub(crate) fn new(shape: &Shape) -> Option<Layout> {
        if shape.drg_parents != 6 || shape.exp_parents != 8 || shape.layers == 0 {
            return None;
        }
        let tree_hashers = shape
            .tree
            .iter()
            .map(|&a| insert_vars(a).and(Poseidon::for_arity(a)))
            .collect::<Option<Vec<_>>>()?;
        let tree_vars: usize = shape
            .tree
            .iter()
            .map(|&a| tree_level_vars(a))
            .sum::<Option<usize>>()?;
        let column_hasher = Poseidon::for_arity(shape.layers)?;
        let column = column_hasher.vars();
        let pair_hasher = Poseidon::for_arity(2)?;

        let mut tasks = vec![(
            Task::CommD,
            1 + shape.comm_d_depth * comm_d_level_vars(pair_sha_vars()),
        )];
        let parent = shape.layers + column + tree_vars;
        tasks.extend((0..shape.drg_parents).map(|i| (Task::Drg(i), parent)));
        tasks.extend((0..shape.exp_parents).map(|i| (Task::Exp(i), parent)));
        tasks.push((Task::Node, 64));
        for layer in 1..=shape.layers {
            let parents = shape.drg_parents + if layer > 1 { shape.exp_parents } else { 0 };
            tasks.push((
                Task::Label(layer),
                parents * FIELD_BITS + label_sha_vars() + 1,
            ));
        }
        tasks.push((Task::Replica, 1 + tree_vars));
        tasks.push((Task::Cx, column + tree_vars));
        Some(Layout {
            shape: shape.clone(),
            tree_hashers,
            column_hasher,
            pair_hasher,
            // replica id and its bits, comm_d, comm_r, comm_r_last, comm_c, H(comm_c, comm_r_last)
            prologue: 1 + FIELD_BITS + 4 + pair_hasher.vars(),
            tasks,
        })
    }
}
