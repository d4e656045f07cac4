//! The PoSt witness computed natively: every variable `FallbackPoStCircuit::synthesize`
//! allocates, in bellperson's order, element for element the witness-only synthesis of the
//! gadget circuit (`native_tests.rs` checks that). Per sector: comm_r_last, comm_c, comm_r and
//! H(comm_c, comm_r_last); then per challenge the leaf and its tree R path (index bits,
//! siblings, insertion, Poseidon per level). Each sector's head and each challenge's path is one
//! slot of the aux vector, filled on some rayon thread.
//!
//! While it computes, the generator checks what the circuit's constraints would: comm_r =
//! H(comm_c, comm_r_last) and every path hashes to comm_r_last. A real partition's vanilla
//! proofs were verified before (`PostFamily::check`), so a failed check is a bug or tampering,
//! never shipped as a witness.

use blstrs::Scalar;
use cuzk_wire::witness::Witness;
use ff::Field;
use filecoin_hashers::Hasher;
use filecoin_proofs::MerkleTreeTrait;
use storage_proofs_core::merkle::MerkleProofTrait;
use storage_proofs_post::fallback::{self, PublicSector};

use crate::native::out::{fill_slots, Out};
use crate::native::paths::{fr, path, path_input, tree_level_vars, tree_path, Path};
use crate::native::poseidon::Poseidon;

/// One challenged leaf of a sector and its tree R path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Leaf {
    pub value: Scalar,
    pub path: Path,
}

/// One sector of a partition, as the circuit takes it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sector {
    pub comm_r: Scalar,
    pub comm_c: Scalar,
    pub comm_r_last: Scalar,
    pub leaves: Vec<Leaf>,
}

/// Why the native generator refused a partition.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NativeError {
    #[error("sector {sector}: comm_r is not H(comm_c, comm_r_last)")]
    CommR { sector: usize },
    #[error(
        "sector {sector}, challenge {challenge}: the tree R path does not hash to comm_r_last"
    )]
    Path { sector: usize, challenge: usize },
    #[error("{0}")]
    Shape(String),
    /// A bug, never input: a slot was written with another number of variables than it holds.
    #[error("native witness layout error: slot {slot} got {written} variables, it holds {len}")]
    Layout {
        slot: usize,
        written: usize,
        len: usize,
    },
}

/// Sizes for one shape: the partition's sectors and challenges, and its tree's levels.
pub(crate) struct Layout {
    sectors: usize,
    challenges: usize,
    arities: Vec<usize>,
    tree_hashers: Vec<&'static Poseidon>,
    pair_hasher: &'static Poseidon,
    /// comm_r_last, comm_c, comm_r, H(comm_c, comm_r_last).
    head: usize,
    /// The leaf, then its path.
    leaf: usize,
}

impl Layout {
    /// The layout of `sectors` × `challenges` paths over a tree of `arities` (leaf first), or
    /// `None` where an arity has no Poseidon constants or insertion network here.
    pub(crate) fn new(sectors: usize, challenges: usize, arities: &[usize]) -> Option<Layout> {
        let tree_hashers = arities
            .iter()
            .map(|&a| Poseidon::for_arity(a))
            .collect::<Option<Vec<_>>>()?;
        let path_vars = arities
            .iter()
            .map(|&a| tree_level_vars(a))
            .sum::<Option<usize>>()?;
        let pair_hasher = Poseidon::for_arity(2)?;
        Some(Layout {
            sectors,
            challenges,
            arities: arities.to_vec(),
            tree_hashers,
            pair_hasher,
            head: 3 + pair_hasher.vars(),
            leaf: 1 + path_vars,
        })
    }

    /// Slot `k`'s sector and, for a path, its challenge.
    fn slot(&self, k: usize) -> (usize, Option<usize>) {
        let per_sector = 1 + self.challenges;
        match k % per_sector {
            0 => (k / per_sector, None),
            c => (k / per_sector, Some(c - 1)),
        }
    }

    fn check_shape(&self, sectors: &[Sector]) -> Result<(), NativeError> {
        let shape = |reason: String| Err(NativeError::Shape(reason));
        if sectors.len() != self.sectors {
            return shape(format!(
                "{} sectors, the circuit has {}",
                sectors.len(),
                self.sectors
            ));
        }
        for (i, s) in sectors.iter().enumerate() {
            if s.leaves.len() != self.challenges {
                return shape(format!(
                    "sector {i} has {} challenges, the circuit {}",
                    s.leaves.len(),
                    self.challenges
                ));
            }
            let fits = |leaf: &Leaf| {
                leaf.path.len() == self.arities.len()
                    && leaf
                        .path
                        .iter()
                        .zip(&self.arities)
                        .all(|(level, &a)| level.siblings.len() + 1 == a && level.index < a)
            };
            if let Some(c) = s.leaves.iter().position(|l| !fits(l)) {
                return shape(format!(
                    "sector {i}, challenge {c}: the path does not have the sector size's levels"
                ));
            }
        }
        Ok(())
    }
}

/// How to generate.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Options {
    /// Check what the constraints would (off only for synthetic partitions).
    pub unchecked: bool,
    /// Test-only perturbation: hash (comm_r_last, comm_c) where the circuit hashes (comm_c,
    /// comm_r_last): the same variable count, other values.
    #[cfg(test)]
    pub swap_pair: bool,
}

impl Options {
    /// For synthetic partitions, whose witnesses satisfy nothing.
    pub(crate) fn unchecked() -> Self {
        Options {
            unchecked: true,
            #[cfg(test)]
            swap_pair: false,
        }
    }
}

fn check(opts: Options, ok: bool, err: NativeError) -> Result<(), NativeError> {
    if ok || opts.unchecked {
        Ok(())
    } else {
        Err(err)
    }
}

fn head(
    out: &mut Out,
    s: &Sector,
    i: usize,
    layout: &Layout,
    opts: Options,
) -> Result<(), NativeError> {
    for v in [s.comm_r_last, s.comm_c, s.comm_r] {
        out.push(v);
    }
    #[allow(unused_mut)]
    let mut pair = [s.comm_c, s.comm_r_last];
    #[cfg(test)]
    if opts.swap_pair {
        pair.reverse();
    }
    let hash = layout.pair_hasher.hash(out, &pair);
    check(opts, hash == s.comm_r, NativeError::CommR { sector: i })
}

/// The witness of a partition's `sectors` (the circuit's, padding included), on the current
/// rayon pool.
pub(crate) fn generate(
    sectors: &[Sector],
    layout: &Layout,
    opts: Options,
) -> Result<Witness, NativeError> {
    layout.check_shape(sectors)?;
    let sizes: Vec<usize> = (0..sectors.len())
        .flat_map(|_| std::iter::once(layout.head).chain(vec![layout.leaf; layout.challenges]))
        .collect();
    let aux = fill_slots(
        &sizes,
        |k, out| match layout.slot(k) {
            (i, None) => head(out, &sectors[i], i, layout, opts),
            (i, Some(c)) => {
                let (s, leaf) = (&sectors[i], &sectors[i].leaves[c]);
                out.push(leaf.value);
                let root = tree_path(out, leaf.value, &leaf.path, &layout.tree_hashers);
                check(
                    opts,
                    root == s.comm_r_last,
                    NativeError::Path {
                        sector: i,
                        challenge: c,
                    },
                )
            }
        },
        |k, written| NativeError::Layout {
            slot: k,
            written,
            len: sizes[k],
        },
    )?;
    let mut input = vec![Scalar::ONE];
    for s in sectors {
        input.push(s.comm_r);
        input.extend(s.leaves.iter().map(|l| path_input(&l.path)));
    }
    Ok(Witness { input, aux })
}

type Domain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// The circuit's sectors as `FallbackPoStCompound::circuit` takes them: the vanilla proof's
/// sectors in order, each with its public sector, the last public sector standing for the
/// padding.
pub(crate) fn sectors<Tree: MerkleTreeTrait>(
    public: &[PublicSector<Domain<Tree>>],
    proof: &fallback::Proof<Tree::Proof>,
    arities: &[usize],
) -> Result<Vec<Sector>, String> {
    let last = public.last().ok_or("the partition has no sectors")?;
    proof
        .sectors
        .iter()
        .enumerate()
        .map(|(i, sp)| {
            let public = public.get(i).unwrap_or(last);
            let leaves = sp
                .inclusion_proofs
                .iter()
                .enumerate()
                .map(|(c, p)| {
                    Ok(Leaf {
                        value: fr(&p.leaf())?,
                        path: path(p, arities, &format!("sector {i}'s challenge {c} path"))?,
                    })
                })
                .collect::<Result<_, String>>()?;
            Ok(Sector {
                comm_r: fr(&public.comm_r)?,
                comm_c: fr(&sp.comm_c)?,
                comm_r_last: fr(&sp.comm_r_last)?,
                leaves,
            })
        })
        .collect()
}
