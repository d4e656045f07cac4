//! The PoRep C2 witness computed natively: every variable `StackedCircuit::synthesize` allocates,
//! in bellperson's order, written straight into one pre-sized aux vector, element for element
//! the witness-only synthesis of the gadget circuit (`circuit_tests.rs` checks that).
//!
//! The aux vector is the prologue (replica id and its bits, the commitments, H(comm_c,
//! comm_r_last)), then per challenge the tasks of [`layout::Task`]; each task fills its own
//! slice on some rayon thread. SHA-256, Poseidon and Merkle paths are emitted by the shared emitters
//! (`native/`).
//!
//! A satisfied circuit is the only thing worth shipping, so while it computes, the generator
//! checks what the circuit's constraints would: every path hashes to its root, each label
//! matches the challenged column, the encoded node is tree R's leaf, comm_r = H(comm_c,
//! comm_r_last). A synthetic C1 (random data, for timings) skips the checks, as its gadget
//! witness is unsatisfied too.

#[cfg(test)]
mod circuit_tests;
mod layout;
pub(crate) mod parts;

use blstrs::Scalar;
use cuzk_wire::witness::Witness;
use ff::{Field, PrimeField};
use sha2::{Digest, Sha256};

use crate::native::out::{self, Out};
use crate::native::paths::{comm_d_path, le_254, packed, path_input, tree_path};
use crate::native::sha256::{field_words, sha256, Word};
pub(crate) use layout::Layout;
use layout::{Task, LABEL_PARENTS, LABEL_WORDS};
use parts::{Challenge, Column, Partition};

/// Where a path failed to reach its root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tree {
    D,
    DrgColumn(usize),
    ExpColumn(usize),
    R,
    ChallengedColumn,
}

impl std::fmt::Display for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tree::D => write!(f, "tree D path of the data leaf"),
            Tree::DrgColumn(i) => write!(f, "tree C path of drg parent {i}'s column"),
            Tree::ExpColumn(i) => write!(f, "tree C path of expander parent {i}'s column"),
            Tree::R => write!(f, "tree R path of the encoded node"),
            Tree::ChallengedColumn => write!(f, "tree C path of the challenged column"),
        }
    }
}

/// Why the native generator refused a partition.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NativeError {
    #[error("comm_r is not H(comm_c, comm_r_last)")]
    CommR,
    #[error("challenge {challenge}: the {tree} does not hash to its root")]
    Path { challenge: usize, tree: Tree },
    #[error("challenge {challenge}: the layer {layer} label does not match the challenged column")]
    Label { challenge: usize, layer: usize },
    #[error("challenge {challenge}: the encoded node is not tree R's leaf (encoding mismatch)")]
    Encoding { challenge: usize },
    /// A bug, never input: a task wrote another number of variables than its slot holds.
    #[error("native witness layout error: {task} wrote {written} variables into {slot}")]
    Layout {
        task: String,
        written: usize,
        slot: usize,
    },
}

/// How to generate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    /// Check what the constraints would (off only for synthetic C1s).
    pub checked: bool,
    /// Test-only perturbation: flip the first carry bit of the label of (challenge, layer).
    #[cfg(test)]
    pub flip_carry: Option<(usize, usize)>,
}

impl Options {
    pub(crate) fn new(checked: bool) -> Self {
        Options {
            checked,
            #[cfg(test)]
            flip_carry: None,
        }
    }
}

/// The message `create_label` hashes: replica id, layer, node, zero padding, then the 37
/// parents (`parents` repeated in order, as the circuit expands 6 or 14 of them).
fn label_message(replica_id: &Scalar, node: u64, layer: u32, parents: &[[u8; 32]]) -> Vec<Word> {
    let mut msg = Vec::with_capacity(LABEL_WORDS);
    msg.extend_from_slice(&field_words(&replica_id.to_repr()));
    msg.push(Word::constant(layer));
    msg.push(Word::mixed((node >> 32) as u32, 0));
    msg.push(Word::mixed(node as u32, 0));
    msg.extend([Word::constant(0); 5]);
    for i in 0..LABEL_PARENTS {
        msg.extend_from_slice(&field_words(&parents[i % parents.len()]));
    }
    msg
}

/// A label computed with plain SHA-256 (for the tasks that use labels without emitting them).
fn label_value(replica_id: &Scalar, node: u64, layer: u32, parents: &[[u8; 32]]) -> Scalar {
    let mut h = Sha256::new();
    h.update(replica_id.to_repr());
    h.update(layer.to_be_bytes());
    h.update(node.to_be_bytes());
    h.update([0u8; 20]);
    for i in 0..LABEL_PARENTS {
        h.update(parents[i % parents.len()]);
    }
    le_254(h.finalize().into())
}

/// The reprs of the parents layer `layer` hashes: the drg parents' rows of that layer, then
/// (above layer 1) the expander parents' rows of the layer below.
fn label_parents(ch: &Challenge, layer: usize) -> Vec<[u8; 32]> {
    let drg = ch.drg.iter().map(|c| c.rows[layer - 1]);
    let exp = ch
        .exp
        .iter()
        .filter(|_| layer > 1)
        .map(|c| c.rows[layer - 2]);
    drg.chain(exp).map(|v| v.to_repr()).collect()
}

/// The public inputs, ONE first, in the order the circuit allocates them.
fn inputs(p: &Partition) -> Vec<Scalar> {
    let mut v = vec![Scalar::ONE, p.replica_id, p.comm_d, p.comm_r];
    for ch in &p.challenges {
        v.push(path_input(&ch.comm_d_path));
        v.extend(ch.drg.iter().chain(&ch.exp).map(|c| path_input(&c.path)));
        v.push(Scalar::from(ch.node));
        v.push(path_input(&ch.comm_r_last_path));
        v.push(path_input(&ch.c_x.path));
    }
    v
}

/// Fails with `err` when a check is on and `ok` is false.
fn check(opts: &Options, ok: bool, err: NativeError) -> Result<(), NativeError> {
    if opts.checked && !ok {
        return Err(err);
    }
    Ok(())
}

struct Generator<'a> {
    p: &'a Partition,
    layout: &'a Layout,
    opts: Options,
}

impl Generator<'_> {
    fn prologue(&self, out: &mut Out) -> Result<(), NativeError> {
        let p = self.p;
        out.push(p.replica_id);
        out.field_bits(&p.replica_id);
        for v in [p.comm_d, p.comm_r, p.comm_r_last, p.comm_c] {
            out.push(v);
        }
        let comm_r = self
            .layout
            .pair_hasher
            .hash(out, &[p.comm_c, p.comm_r_last]);
        check(&self.opts, comm_r == p.comm_r, NativeError::CommR)
    }

    fn column(&self, out: &mut Out, col: &Column, i: usize, tree: Tree) -> Result<(), NativeError> {
        for row in &col.rows {
            out.push(*row);
        }
        let hash = self.layout.column_hasher.hash(out, &col.rows);
        let root = tree_path(out, hash, &col.path, &self.layout.tree_hashers);
        check(
            &self.opts,
            root == self.p.comm_c,
            NativeError::Path { challenge: i, tree },
        )
    }

    fn label(
        &self,
        out: &mut Out,
        ch: &Challenge,
        i: usize,
        layer: usize,
    ) -> Result<(), NativeError> {
        let parents = label_parents(ch, layer);
        for repr in &parents {
            out.repr_bits(repr);
        }
        #[cfg(test)]
        {
            out.flip_carry = self.opts.flip_carry == Some((i, layer));
        }
        let msg = label_message(&self.p.replica_id, ch.node, layer as u32, &parents);
        let label = packed(&sha256(out, &msg));
        out.push(label);
        let ok = ch.c_x.rows.get(layer - 1) == Some(&label);
        check(
            &self.opts,
            ok,
            NativeError::Label {
                challenge: i,
                layer,
            },
        )
    }

    fn task(&self, out: &mut Out, i: usize, task: Task) -> Result<(), NativeError> {
        let (p, ch) = (self.p, &self.p.challenges[i]);
        let path_err = |tree| NativeError::Path { challenge: i, tree };
        match task {
            Task::CommD => {
                out.push(ch.data_leaf);
                let root = comm_d_path(out, ch.data_leaf, &ch.comm_d_path);
                check(&self.opts, root == p.comm_d, path_err(Tree::D))
            }
            Task::Drg(k) => self.column(out, &ch.drg[k], i, Tree::DrgColumn(k)),
            Task::Exp(k) => self.column(out, &ch.exp[k], i, Tree::ExpColumn(k)),
            Task::Node => {
                for b in 0..64 {
                    out.bit((ch.node >> b) & 1 == 1);
                }
                Ok(())
            }
            Task::Label(layer) => self.label(out, ch, i, layer),
            // The labels these two tasks need are recomputed with plain SHA-256 (cheap next to
            // emitting them), so no task waits for another.
            Task::Replica => {
                let layers = self.layout.shape.layers;
                let key = label_value(
                    &p.replica_id,
                    ch.node,
                    layers as u32,
                    &label_parents(ch, layers),
                );
                let encoded = key + ch.data_leaf;
                out.push(encoded);
                check(
                    &self.opts,
                    encoded == ch.replica_leaf,
                    NativeError::Encoding { challenge: i },
                )?;
                let root = tree_path(
                    out,
                    encoded,
                    &ch.comm_r_last_path,
                    &self.layout.tree_hashers,
                );
                check(&self.opts, root == p.comm_r_last, path_err(Tree::R))
            }
            Task::Cx => {
                let labels: Vec<Scalar> = (1..=self.layout.shape.layers)
                    .map(|l| label_value(&p.replica_id, ch.node, l as u32, &label_parents(ch, l)))
                    .collect();
                let hash = self.layout.column_hasher.hash(out, &labels);
                let root = tree_path(out, hash, &ch.c_x.path, &self.layout.tree_hashers);
                check(
                    &self.opts,
                    root == p.comm_c,
                    path_err(Tree::ChallengedColumn),
                )
            }
        }
    }
}

/// The witness of partition `p` (of `layout`'s shape: [`parts::partition`] checked it), on the
/// current rayon pool.
pub(crate) fn generate(
    p: &Partition,
    layout: &Layout,
    opts: Options,
) -> Result<Witness, NativeError> {
    let g = Generator { p, layout, opts };
    let tasks = &layout.tasks;
    // Slot 0 is the prologue, then each challenge's tasks.
    let job = |k: usize| ((k - 1) / tasks.len(), tasks[(k - 1) % tasks.len()].0);
    let sizes: Vec<usize> = std::iter::once(layout.prologue)
        .chain(
            p.challenges
                .iter()
                .flat_map(|_| tasks.iter().map(|&(_, n)| n)),
        )
        .collect();
    let aux = out::fill_slots(
        &sizes,
        |k, out| match k {
            0 => g.prologue(out),
            _ => {
                let (i, task) = job(k);
                g.task(out, i, task)
            }
        },
        |k, written| NativeError::Layout {
            task: match k {
                0 => "the prologue".into(),
                _ => format!("{:?}", job(k)),
            },
            written,
            slot: sizes[k],
        },
    )?;
    Ok(Witness {
        input: inputs(p),
        aux,
    })
}
