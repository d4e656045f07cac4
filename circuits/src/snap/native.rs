//! The SnapDeals witness computed natively: every variable `EmptySectorUpdateCircuit::synthesize`
//! allocates, in bellperson's order, element for element the gadgets' witness-only synthesis
//! (`native_tests.rs` checks that). The aux vector is cut into slots filled in parallel: the
//! head (the public values and `k`/`h_select` bits, phi, comm_c and both roots, the apex leaves,
//! the partition path, both comm_r = H(comm_c, root_r)), each node of the apex tree, the apex
//! root's climb to comm_d_new, each challenge digest, and each challenge (its high bits, rho,
//! the encoding, the tree R old and new paths, the apex leaf's selection and the tree D path up
//! to it; `native/slots.rs` emits each). What slots need from one another (phi, the digests,
//! the apex tree) is computed first without emitting.
//!
//! While it computes, the generator checks what the circuit's constraints would: both comm_r
//! hashes, the apex tree and partition path reaching comm_d_new, and per challenge the encoding
//! label_r_new = label_r_old + label_d_new · rho and its three paths. A real partition's vanilla
//! proof was verified before (`SnapFamily::check`), so a failed check is a bug or tampering,
//! never shipped as a witness.

use blstrs::Scalar;
use cuzk_wire::witness::Witness;
use ff::{Field, PrimeField};
use sha2::{Digest, Sha256};

use crate::native::out::{fill_slots, Out};
use crate::native::paths::{insert_vars, le_254, sha_pair};
use crate::native::poseidon::Poseidon;

mod slots;
use slots::{challenge, climb, head};

/// One challenge's private values: the old and new replica's leaves, the data's, and the
/// siblings of each path (per level, leaf first; the positions come from the challenge).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Challenge {
    pub leaf_r_old: Scalar,
    pub leaf_d_new: Scalar,
    /// The vanilla proof's new leaf, which the encoding must reproduce.
    pub leaf_r_new: Scalar,
    pub path_r_old: Vec<Vec<Scalar>>,
    pub path_r_new: Vec<Vec<Scalar>>,
    /// Tree D siblings from the leaf up to the apex leaves.
    pub path_d: Vec<Scalar>,
}

/// One partition as the circuit takes it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Partition {
    pub k: usize,
    pub comm_r_old: Scalar,
    pub comm_d_new: Scalar,
    pub comm_r_new: Scalar,
    pub comm_c: Scalar,
    pub root_r_old: Scalar,
    pub root_r_new: Scalar,
    pub apex_leaves: Vec<Scalar>,
    /// Tree D siblings from the apex root up to comm_d_new.
    pub partition_path: Vec<Scalar>,
    pub challenges: Vec<Challenge>,
}

/// Why the native generator refused a partition.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NativeError {
    #[error("comm_r_old is not H(comm_c, root_r_old)")]
    CommROld,
    #[error("comm_r_new is not H(comm_c, root_r_new)")]
    CommRNew,
    #[error("the apex leaves and the partition path do not hash to comm_d_new")]
    CommD,
    #[error("challenge {challenge}: the new replica's leaf is not the old one's plus the data's times rho")]
    Encoding { challenge: usize },
    #[error("challenge {challenge}: the tree R old path does not hash to root_r_old")]
    PathROld { challenge: usize },
    #[error("challenge {challenge}: the tree R new path does not hash to root_r_new")]
    PathRNew { challenge: usize },
    #[error("challenge {challenge}: the tree D path does not hash to its apex leaf")]
    PathD { challenge: usize },
    #[error("challenge {challenge}: the tree D path does not end in challenge 0's partition path")]
    PartitionPath { challenge: usize },
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

/// Bits of a field element's canonical value.
const FIELD_BITS: usize = Scalar::NUM_BITS as usize;

/// The circuit's public parameters the generator needs.
#[derive(Clone, Debug)]
pub(crate) struct Params {
    pub challenges: usize,
    /// log2 of the sector's nodes: a challenge's bits, tree D's height.
    pub challenge_bits: usize,
    pub partition_bits: usize,
    pub apex_bits: usize,
    /// The `h` values the circuit selects from, and the index of the one selected.
    pub hs: [usize; 6],
    pub h_index: usize,
}

/// Sizes for one shape.
pub(crate) struct Layout {
    p: Params,
    arities: Vec<usize>,
    hashers: Vec<&'static Poseidon>,
    pair: &'static Poseidon,
    random: &'static Poseidon,
    digests: usize,
    sizes: Vec<usize>,
}

/// What slot `k` of the aux vector holds.
enum Slot {
    Head,
    ApexNode(usize),
    Climb,
    Digest(usize),
    Challenge(usize),
}

impl Layout {
    /// The layout of `p` over tree R levels of `arities` (leaf first), or `None` where an arity
    /// has no Poseidon constants or insertion network here, or the shape is not one the circuit
    /// can have.
    pub(crate) fn new(p: Params, arities: &[usize]) -> Option<Layout> {
        let hashers = arities
            .iter()
            .map(|&a| Poseidon::for_arity(a))
            .collect::<Option<Vec<_>>>()?;
        let path_r = arities
            .iter()
            .zip(&hashers)
            .map(|(&a, h)| Some(a - 1 + insert_vars(a)? + h.vars()))
            .sum::<Option<usize>>()?;
        let tree_bits: usize = arities.iter().map(|a| a.trailing_zeros() as usize).sum();
        let sans_partition = p.challenge_bits.checked_sub(p.partition_bits)?;
        let path_d = sans_partition.checked_sub(p.apex_bits)?;
        if tree_bits != p.challenge_bits
            || p.h_index >= p.hs.len()
            || p.hs.iter().any(|&h| h == 0 || h > p.challenge_bits)
            || !(1..=Scalar::CAPACITY as usize).contains(&sans_partition)
            || p.challenge_bits >= 64
        {
            return None;
        }
        let (pair, random) = (Poseidon::for_arity(2)?, Poseidon::gen_randomness());
        let mut counting = Out::counting();
        sha_pair(&mut counting, &Scalar::ZERO, &Scalar::ZERO);
        let sha = counting.written();
        let apex = 1 << p.apex_bits;
        let digests = p
            .challenges
            .div_ceil(Scalar::CAPACITY as usize / sans_partition);
        let head = 1
            + (p.partition_bits + p.hs.len())
            + 1
            + 3
            + random.vars()
            + 3
            + apex
            + p.partition_bits
            + 2 * pair.vars();
        let challenge = 2 * p.hs.len()
            + 1
            + random.vars()
            + 4
            + 2 * path_r
            + (apex - 1)
            + path_d * (1 + insert_vars(2)? + sha);
        let mut sizes = vec![head];
        sizes.extend(vec![sha; apex - 1]);
        sizes.push(p.partition_bits * (insert_vars(2)? + sha));
        sizes.extend(vec![1 + random.vars() + FIELD_BITS; digests]);
        sizes.extend(vec![challenge; p.challenges]);
        Some(Layout {
            p,
            arities: arities.to_vec(),
            hashers,
            pair,
            random,
            digests,
            sizes,
        })
    }

    fn apex_leaves(&self) -> usize {
        1 << self.p.apex_bits
    }

    /// Tree D levels from a challenged leaf to its apex leaf.
    fn path_d_len(&self) -> usize {
        self.p.challenge_bits - self.p.partition_bits - self.p.apex_bits
    }

    fn slot(&self, k: usize) -> Slot {
        let nodes = self.apex_leaves() - 1;
        match k {
            0 => Slot::Head,
            k if k <= nodes => Slot::ApexNode(k - 1),
            k if k == nodes + 1 => Slot::Climb,
            k if k < nodes + 2 + self.digests => Slot::Digest(k - nodes - 2),
            k => Slot::Challenge(k - nodes - 2 - self.digests),
        }
    }

    fn check_shape(&self, p: &Partition) -> Result<(), NativeError> {
        let shape = |reason: String| Err(NativeError::Shape(reason));
        if p.k >> self.p.partition_bits != 0 {
            return shape(format!(
                "partition {} of {}",
                p.k,
                1 << self.p.partition_bits
            ));
        }
        if p.apex_leaves.len() != self.apex_leaves() {
            return shape(format!(
                "{} apex leaves, the circuit has {}",
                p.apex_leaves.len(),
                self.apex_leaves()
            ));
        }
        if p.partition_path.len() != self.p.partition_bits {
            return shape(format!(
                "a partition path of {} levels, the circuit's has {}",
                p.partition_path.len(),
                self.p.partition_bits
            ));
        }
        if p.challenges.len() != self.p.challenges {
            return shape(format!(
                "{} challenges, the circuit has {}",
                p.challenges.len(),
                self.p.challenges
            ));
        }
        let fits = |path: &[Vec<Scalar>]| {
            path.len() == self.arities.len()
                && path
                    .iter()
                    .zip(&self.arities)
                    .all(|(l, &a)| l.len() + 1 == a)
        };
        let bad = p.challenges.iter().position(|c| {
            !fits(&c.path_r_old) || !fits(&c.path_r_new) || c.path_d.len() != self.path_d_len()
        });
        match bad {
            Some(c) => shape(format!(
                "challenge {c}: the paths do not have the sector size's levels"
            )),
            None => Ok(()),
        }
    }

    /// `k_and_h_select`, the first public input after one.
    fn k_and_h_select(&self, k: usize) -> u64 {
        k as u64 | ((1 << self.p.h_index) << self.p.partition_bits)
    }

    /// Challenge `c`'s index in the sector, from its digest.
    fn challenge(&self, k: usize, digests: &[Scalar], c: usize) -> u64 {
        let bits = self.p.challenge_bits - self.p.partition_bits;
        let per_digest = Scalar::CAPACITY as usize / bits;
        let repr = digests[c / per_digest].to_repr();
        let from = (c % per_digest) * bits;
        let low = (0..bits).fold(0u64, |v, i| {
            let b = from + i;
            v | (u64::from((repr[b / 8] >> (b % 8)) & 1) << i)
        });
        low | ((k as u64) << bits)
    }

    /// The `h` high bits of challenge `c`, as `get_challenge_high_bits` selects them.
    fn high(&self, c: u64) -> Scalar {
        Scalar::from(c >> (self.p.challenge_bits - self.p.hs[self.p.h_index]))
    }

    /// The new replica's leaves the encoding gives `p`'s challenges (what a real partition's
    /// vanilla proof carries).
    pub(crate) fn encoded_leaves(&self, p: &Partition) -> Vec<Scalar> {
        let d = self.derive(p, Options::default());
        (0..p.challenges.len().min(self.p.challenges))
            .map(|i| {
                let rho = self.rho(&mut Out::counting(), &d, self.challenge(p.k, &d.digests, i));
                p.challenges[i].leaf_r_old + p.challenges[i].leaf_d_new * rho
            })
            .collect()
    }

    fn rho(&self, out: &mut Out, d: &Derived, c: u64) -> Scalar {
        self.random.hash(out, &[d.phi, self.high(c)])
    }

    /// The values slots share, computed without emitting.
    fn derive(&self, p: &Partition, opts: Options) -> Derived {
        let counting = &mut Out::counting();
        let phi = self.random.hash(counting, &phi_inputs(p, opts));
        let digests = (0..self.digests)
            .map(|j| {
                let index = Scalar::from((p.k * self.digests + j) as u64);
                self.random.hash(counting, &[p.comm_r_new, index])
            })
            .collect();
        let mut apex = p.apex_leaves.clone();
        for n in 0..self.apex_leaves() - 1 {
            apex.push(sha2_pair(&apex[2 * n], &apex[2 * n + 1]));
        }
        Derived { phi, digests, apex }
    }
}

/// phi's preimage: H(comm_d_new, comm_r_old).
fn phi_inputs(p: &Partition, opts: Options) -> [Scalar; 2] {
    #[allow(unused_mut)]
    let mut inputs = [p.comm_d_new, p.comm_r_old];
    #[cfg(test)]
    if opts.swap_phi {
        inputs.reverse();
    }
    #[cfg(not(test))]
    let _ = opts;
    inputs
}

/// Tree D's hash of two nodes, natively: SHA-256 of their bytes, packed as the circuit packs it.
fn sha2_pair(a: &Scalar, b: &Scalar) -> Scalar {
    let mut h = Sha256::new();
    h.update(a.to_repr());
    h.update(b.to_repr());
    le_254(h.finalize().into())
}

/// phi, the challenge digests, and the apex tree row by row (the leaves first; node `n`'s
/// children are `2n` and `2n + 1`).
struct Derived {
    phi: Scalar,
    digests: Vec<Scalar>,
    apex: Vec<Scalar>,
}

/// How to generate.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Options {
    /// Check what the constraints would (off only for synthetic partitions).
    pub unchecked: bool,
    /// Test-only perturbation: phi = H(comm_r_old, comm_d_new) where the circuit hashes
    /// (comm_d_new, comm_r_old): the same variable count, other values.
    #[cfg(test)]
    pub swap_phi: bool,
}

impl Options {
    /// For synthetic partitions, whose witnesses satisfy nothing.
    pub(crate) fn unchecked() -> Self {
        Options {
            unchecked: true,
            #[cfg(test)]
            swap_phi: false,
        }
    }
}

/// The witness of partition `p`, on the current rayon pool.
pub(crate) fn generate(
    p: &Partition,
    layout: &Layout,
    opts: Options,
) -> Result<Witness, NativeError> {
    layout.check_shape(p)?;
    let d = layout.derive(p, opts);
    let aux = fill_slots(
        &layout.sizes,
        |k, out| match layout.slot(k) {
            Slot::Head => head(out, p, layout, opts),
            Slot::ApexNode(n) => {
                sha_pair(out, &d.apex[2 * n], &d.apex[2 * n + 1]);
                Ok(())
            }
            Slot::Climb => climb(out, p, &d, opts),
            Slot::Digest(j) => {
                let index = Scalar::from((p.k * layout.digests + j) as u64);
                out.push(index);
                let digest = layout.random.hash(out, &[p.comm_r_new, index]);
                out.field_bits(&digest);
                Ok(())
            }
            Slot::Challenge(i) => challenge(out, p, i, layout, &d, opts),
        },
        |k, written| NativeError::Layout {
            slot: k,
            written,
            len: layout.sizes[k],
        },
    )?;
    let input = vec![
        Scalar::ONE,
        Scalar::from(layout.k_and_h_select(p.k)),
        p.comm_r_old,
        p.comm_d_new,
        p.comm_r_new,
    ];
    Ok(Witness { input, aux })
}
