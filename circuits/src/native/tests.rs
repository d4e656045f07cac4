//! The native emitters against bellperson's and neptune's gadgets run in the synth node's
//! `WitnessCs`: SHA-256 over messages of several lengths and constant patterns, Poseidon at
//! every arity the circuits use. Whole partitions are compared beside each generator
//! (`porep/native/circuit_tests.rs`, `post/native_tests.rs`).

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::num::AllocatedNum;
use bellperson::ConstraintSystem;
use blstrs::Scalar;
use cuzk_prover::witness_cs::WitnessCs;
use cuzk_wire::witness::Witness;
use ff::Field;
use filecoin_hashers::poseidon::PoseidonFunction;
use filecoin_hashers::sha256::Sha256Function;
use filecoin_hashers::{HashFunction, PoseidonArity};
use generic_array::typenum::{U11, U2, U8};
use rand::{Rng, RngCore, SeedableRng};

use super::out::{emitted, Out};
use super::paths::{le_254, packed, sha_pair};
use super::poseidon::Poseidon;
use super::sha256::{sha256, Word};

/// The first place two witnesses differ, lengths first; `None` when they are equal.
pub(crate) fn first_difference(native: &Witness, gadget: &Witness) -> Option<String> {
    for (name, a, b) in [
        ("input", &native.input, &gadget.input),
        ("aux", &native.aux, &gadget.aux),
    ] {
        if a.len() != b.len() {
            return Some(format!(
                "{name} lengths differ: native {}, gadget {}",
                a.len(),
                b.len()
            ));
        }
        if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
            return Some(format!(
                "{name}[{i}] differs: native {:?}, gadget {:?}",
                a[i], b[i]
            ));
        }
    }
    None
}

/// A message word described for both sides: value, constant bits, negated allocated bits.
#[derive(Clone, Copy)]
struct Spec {
    val: u32,
    cst: u32,
    neg: u32,
}

impl Spec {
    fn word(self) -> Word {
        Word::mixed(self.val, self.cst).negated(self.neg)
    }

    /// The word's 32 `Boolean`s, most significant first (`UInt32::from_bits_be`'s order).
    fn booleans(self, cs: &mut WitnessCs) -> Vec<Boolean> {
        (0..32)
            .rev()
            .map(|i| {
                let (v, c, n) = (
                    (self.val >> i) & 1,
                    (self.cst >> i) & 1,
                    (self.neg >> i) & 1,
                );
                if c == 1 {
                    Boolean::constant(v == 1)
                } else {
                    let b = Boolean::from(AllocatedBit::alloc(&mut *cs, Some(v == 1)).unwrap());
                    if n == 1 {
                        b.not()
                    } else {
                        b
                    }
                }
            })
            .collect()
    }
}

/// The native emission of `sha256(msg)` equals the gadget's aux, and the digests agree.
fn assert_sha_matches(msg: &[Spec]) {
    let mut cs = WitnessCs::new();
    let bits: Vec<Boolean> = msg.iter().flat_map(|s| s.booleans(&mut cs)).collect();
    let before: u32 = msg.iter().map(|s| (!s.cst).count_ones()).sum();
    let digest = bellperson::gadgets::sha256::sha256(&mut cs, &bits).unwrap();
    let gadget = cs.finish().aux.split_off(before as usize);

    let words: Vec<Word> = msg.iter().map(|s| s.word()).collect();
    let buf = emitted(gadget.len(), |out| {
        sha256(out, &words);
    });
    let buf =
        buf.unwrap_or_else(|n| panic!("{} words: wrote {n}, gadget {}", msg.len(), gadget.len()));
    let ours = sha256(&mut Out::counting(), &words);
    let w = |aux: Vec<Scalar>| Witness { input: vec![], aux };
    assert_eq!(
        first_difference(&w(buf), &w(gadget)),
        None,
        "{} words",
        msg.len()
    );
    let digest: Vec<bool> = digest.iter().map(|b| b.get_value().unwrap()).collect();
    let ours: Vec<bool> = ours
        .iter()
        .flat_map(|w| (0..32).rev().map(move |i| (w.value() >> i) & 1 == 1))
        .collect();
    assert_eq!(ours, digest, "{} words", msg.len());
}

#[test]
fn sha256_matches_the_gadget() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let mut spec = |cst: u32, neg: u32| Spec {
        val: rng.next_u32(),
        cst,
        neg,
    };
    // Allocated words (padding makes the last block constant), a constant block, and the label
    // layout (each field element's top bit constant, layer and padding constant).
    for words in [0, 1, 5, 14, 16, 21] {
        let msg: Vec<Spec> = (0..words).map(|_| spec(0, 0)).collect();
        assert_sha_matches(&msg);
    }
    assert_sha_matches(&(0..16).map(|_| spec(u32::MAX, 0)).collect::<Vec<_>>());
    let field = |rng: &mut dyn FnMut(u32, u32) -> Spec| -> Vec<Spec> {
        (0..8)
            .map(|i| rng(if i == 7 { 0x80 } else { 0 }, 0))
            .collect()
    };
    let mut label = field(&mut spec);
    label.extend([spec(u32::MAX, 0), spec(0, 0), spec(0, 0)]);
    label.extend((0..5).map(|_| Spec {
        val: 0,
        cst: u32::MAX,
        neg: 0,
    }));
    for _ in 0..37 {
        label.extend(field(&mut spec));
    }
    assert_sha_matches(&label);
    // Mixed constant and negated bits reach every folding rule of ch, maj and xor.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6);
    for words in [3, 16, 40] {
        let msg: Vec<Spec> = (0..words)
            .map(|_| Spec {
                val: rng.next_u32(),
                cst: rng.next_u32() & rng.next_u32(),
                neg: rng.next_u32(),
            })
            .collect();
        assert_sha_matches(&msg);
    }
}

/// A tree D level's hash (two nodes' bits, SHA-256, packing) equals filecoin-hashers' gadget.
#[test]
fn sha_pair_matches_the_gadget() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for _ in 0..3 {
        let (a, b) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let mut cs = WitnessCs::new();
        let nums = [a, b].map(|v| AllocatedNum::alloc(&mut cs, || Ok(v)).unwrap());
        let root = Sha256Function::hash_multi_leaf_circuit::<U2, _>(&mut cs, &nums, 0).unwrap();
        let gadget = cs.finish().aux.split_off(2);
        let buf = emitted(gadget.len(), |out| {
            sha_pair(out, &a, &b);
        });
        assert_eq!(buf, Ok(gadget));
        assert_eq!(
            Some(sha_pair(&mut Out::counting(), &a, &b)),
            root.get_value()
        );
    }
}

fn assert_poseidon_matches<A: PoseidonArity>(rng: &mut impl Rng) {
    let arity = A::to_usize();
    let inputs: Vec<Scalar> = (0..arity).map(|_| Scalar::random(&mut *rng)).collect();
    let mut cs = WitnessCs::new();
    let nums: Vec<_> = inputs
        .iter()
        .map(|&v| AllocatedNum::alloc(&mut cs, || Ok(v)).unwrap())
        .collect();
    let hash = PoseidonFunction::hash_multi_leaf_circuit::<A, _>(&mut cs, &nums, 0).unwrap();
    let gadget = cs.finish().aux.split_off(arity);

    let p = Poseidon::for_arity(arity).unwrap();
    assert_eq!(p.vars(), gadget.len(), "arity {arity}");
    let buf = emitted(gadget.len(), |out| {
        p.hash(out, &inputs);
    });
    let w = |aux: Vec<Scalar>| Witness { input: vec![], aux };
    assert_eq!(
        first_difference(&w(buf.unwrap()), &w(gadget)),
        None,
        "arity {arity}"
    );
    assert_eq!(
        Some(p.hash(&mut Out::counting(), &inputs)),
        hash.get_value()
    );
}

/// Poseidon at arity 2 (comm_r, 64 GiB's top tree, 2-layer columns), 8 (trees R and C) and 11
/// (11-layer columns), against neptune's gadget as filecoin-hashers calls it.
#[test]
fn poseidon_matches_the_gadget() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
    for _ in 0..2 {
        assert_poseidon_matches::<U2>(&mut rng);
        assert_poseidon_matches::<U8>(&mut rng);
        assert_poseidon_matches::<U11>(&mut rng);
    }
}

#[test]
fn packing_is_the_little_endian_number_below_2_254() {
    let mut bytes = [0xffu8; 32];
    let v = le_254(bytes);
    bytes[31] = 0x3f;
    assert_eq!(Some(v), Option::from(Scalar::from_bytes_le(&bytes)));
    assert_eq!(packed(&[Word::constant(0); 8]), Scalar::ZERO);
}

/// A slot is returned only when its emitter wrote exactly its length.
#[test]
fn slots_must_be_filled_exactly() {
    let two = |out: &mut Out| {
        out.bit(true);
        out.bit(false);
    };
    assert_eq!(emitted(2, two), Ok(vec![Scalar::ONE, Scalar::ZERO]));
    assert_eq!(emitted(3, two), Err(2));
    assert_eq!(emitted(1, two), Err(2));
}
