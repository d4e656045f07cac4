//! Poseidon as neptune's legacy gadget (`neptune::circuit::poseidon_hash`, what filecoin-hashers
//! and the column hashes call) allocates it in an ordinary constraint system: the same rounds
//! over the same optimized constants (compressed round keys, pre-sparse and sparse matrices),
//! with every value the gadget allocates emitted in its order:
//! * first full round: the domain tag's S-box is a constant; each input `x` gives
//!   `(x + pre)^2`, its square, and `(x + pre) * that + post`;
//! * every later S-box (the other full rounds, the partial rounds' first element) allocates
//!   its input (a linear combination until then), `l^2`, `l^4` and `l^4 * l (+ key)`;
//! * the result: element 1 of the final state.

use std::sync::OnceLock;

use blstrs::Scalar;
use ff::Field;
use filecoin_hashers::{POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_8};

use super::out::Out;

/// The widest permutation used (arity 11: the 32/64 GiB column hash).
const MAX_WIDTH: usize = 12;

/// One arity's constants, copied out of neptune's `PoseidonConstants`.
pub(crate) struct Poseidon {
    width: usize,
    tag: Scalar,
    half_full_rounds: usize,
    partial_rounds: usize,
    round_keys: Vec<Scalar>,
    mds: Vec<Vec<Scalar>>,
    pre_sparse: Vec<Vec<Scalar>>,
    /// (w_hat, v_rest) of each partial round.
    sparse: Vec<(Vec<Scalar>, Vec<Scalar>)>,
}

macro_rules! copy_constants {
    ($c:expr) => {{
        let c = &*$c;
        Poseidon {
            width: c.mds_matrices.m.len(),
            tag: c.domain_tag,
            half_full_rounds: c.half_full_rounds,
            partial_rounds: c.partial_rounds,
            round_keys: c.compressed_round_constants.clone(),
            mds: c.mds_matrices.m.clone(),
            pre_sparse: c.pre_sparse_matrix.clone(),
            sparse: c
                .sparse_matrixes
                .iter()
                .map(|s| (s.w_hat.clone(), s.v_rest.clone()))
                .collect(),
        }
    }};
}

impl Poseidon {
    /// The constants filecoin's circuits use for `arity` inputs, if it is one they use.
    pub(crate) fn for_arity(arity: usize) -> Option<&'static Poseidon> {
        static A2: OnceLock<Poseidon> = OnceLock::new();
        static A8: OnceLock<Poseidon> = OnceLock::new();
        static A11: OnceLock<Poseidon> = OnceLock::new();
        match arity {
            2 => Some(A2.get_or_init(|| copy_constants!(POSEIDON_CONSTANTS_2))),
            8 => Some(A8.get_or_init(|| copy_constants!(POSEIDON_CONSTANTS_8))),
            11 => Some(A11.get_or_init(|| copy_constants!(POSEIDON_CONSTANTS_11))),
            _ => None,
        }
    }

    /// The arity-2 constants SnapDeals derives its randomness with (phi, rho, the challenge
    /// digests): arity 2's rounds under a custom domain tag.
    pub(crate) fn gen_randomness() -> &'static Poseidon {
        static R: OnceLock<Poseidon> = OnceLock::new();
        R.get_or_init(|| {
            copy_constants!(storage_proofs_update::constants::POSEIDON_CONSTANTS_GEN_RANDOMNESS)
        })
    }

    pub(crate) fn arity(&self) -> usize {
        self.width - 1
    }

    /// Variables one hash allocates.
    pub(crate) fn vars(&self) -> usize {
        let full_rounds = 2 * self.half_full_rounds;
        3 * self.arity() + (full_rounds - 1) * 4 * self.width + 4 * self.partial_rounds + 1
    }

    /// Hashes `inputs` (exactly `arity` of them), emitting the gadget's variables.
    pub(crate) fn hash(&self, out: &mut Out, inputs: &[Scalar]) -> Scalar {
        let w = self.width;
        let mut s = [Scalar::ZERO; MAX_WIDTH];
        s[0] = self.tag;
        s[1..w].copy_from_slice(inputs);
        let mut key = 0;
        let mut round = 0;

        // First full round: keys added before and after the S-box.
        let (pre, post) = (&self.round_keys[..w], &self.round_keys[w..2 * w]);
        key += 2 * w;
        let x = s[0] + pre[0];
        s[0] = x.square().square() * x + post[0];
        for i in 1..w {
            let x = s[i] + pre[i];
            let x2 = x.square();
            let x4 = x2.square();
            let x5 = x4 * x + post[i];
            out.push(x2);
            out.push(x4);
            out.push(x5);
            s[i] = x5;
        }
        self.mix(&mut s, &mut round);

        let full_round = |s: &mut [Scalar; MAX_WIDTH], out: &mut Out, keys: Option<&[Scalar]>| {
            for i in 0..w {
                s[i] = sbox(out, s[i], keys.map(|k| k[i]));
            }
        };
        for _ in 1..self.half_full_rounds {
            full_round(&mut s, out, Some(&self.round_keys[key..key + w]));
            key += w;
            self.mix(&mut s, &mut round);
        }
        for _ in 0..self.partial_rounds {
            s[0] = sbox(out, s[0], Some(self.round_keys[key]));
            key += 1;
            self.mix(&mut s, &mut round);
        }
        for _ in 1..self.half_full_rounds {
            full_round(&mut s, out, Some(&self.round_keys[key..key + w]));
            key += w;
            self.mix(&mut s, &mut round);
        }
        // The terminal round has no key after its S-boxes.
        full_round(&mut s, out, None);
        self.mix(&mut s, &mut round);

        out.push(s[1]);
        s[1]
    }

    /// The linear layer after round `round`: the pre-sparse matrix before the partial rounds,
    /// their sparse matrices during them, the MDS matrix otherwise.
    fn mix(&self, s: &mut [Scalar; MAX_WIDTH], round: &mut usize) {
        let w = self.width;
        let sparse_from = self.half_full_rounds - 1;
        let r = *round;
        *round += 1;
        let dense = |s: &mut [Scalar; MAX_WIDTH], m: &[Vec<Scalar>]| {
            let mut t = [Scalar::ZERO; MAX_WIDTH];
            for (j, tj) in t.iter_mut().enumerate().take(w) {
                *tj = (0..w).map(|i| s[i] * m[i][j]).sum();
            }
            *s = t;
        };
        if r == sparse_from {
            dense(s, &self.pre_sparse);
        } else if r > sparse_from && r < self.half_full_rounds + self.partial_rounds {
            let (w_hat, v_rest) = &self.sparse[r - sparse_from - 1];
            let first: Scalar = (0..w).map(|i| s[i] * w_hat[i]).sum();
            for j in 1..w {
                s[j] += s[0] * v_rest[j - 1];
            }
            s[0] = first;
        } else {
            dense(s, &self.mds);
        }
    }
}

/// A later-round S-box: `l` (allocated from its linear combination), `l^2`, `l^4`,
/// `l^4 * l + key`.
fn sbox(out: &mut Out, l: Scalar, key: Option<Scalar>) -> Scalar {
    let l2 = l.square();
    let l4 = l2.square();
    let mut l5 = l4 * l;
    if let Some(k) = key {
        l5 += k;
    }
    out.push(l);
    out.push(l2);
    out.push(l4);
    out.push(l5);
    l5
}
