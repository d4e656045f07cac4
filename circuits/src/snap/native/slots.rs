//! The slots of the native SnapDeals witness, each emitted in bellperson's allocation order with
//! the checks its constraints make.

use blstrs::Scalar;
use ff::Field;

use super::{Derived, Layout, NativeError, Options, Partition};
use crate::native::out::Out;
use crate::native::paths::{insert, sha_pair};

pub(super) fn check(opts: Options, ok: bool, err: NativeError) -> Result<(), NativeError> {
    if ok || opts.unchecked {
        Ok(())
    } else {
        Err(err)
    }
}

pub(super) fn head(
    out: &mut Out,
    p: &Partition,
    layout: &Layout,
    opts: Options,
) -> Result<(), NativeError> {
    let kh = layout.k_and_h_select(p.k);
    out.push(Scalar::from(kh));
    for i in 0..layout.p.partition_bits + layout.p.hs.len() {
        out.bit((kh >> i) & 1 == 1);
    }
    out.push(Scalar::from(p.k as u64));
    for v in [p.comm_r_old, p.comm_d_new, p.comm_r_new] {
        out.push(v);
    }
    layout.random.hash(out, &super::phi_inputs(p, opts));
    for v in [p.comm_c, p.root_r_old, p.root_r_new] {
        out.push(v);
    }
    for v in p.apex_leaves.iter().chain(&p.partition_path) {
        out.push(*v);
    }
    let old = layout.pair.hash(out, &[p.comm_c, p.root_r_old]);
    let new = layout.pair.hash(out, &[p.comm_c, p.root_r_new]);
    check(opts, old == p.comm_r_old, NativeError::CommROld)?;
    check(opts, new == p.comm_r_new, NativeError::CommRNew)
}

/// The apex root up the partition path, the partition's bits placing it.
pub(super) fn climb(
    out: &mut Out,
    p: &Partition,
    d: &Derived,
    opts: Options,
) -> Result<(), NativeError> {
    let mut cur = d.apex[d.apex.len() - 1];
    for (i, sibling) in p.partition_path.iter().enumerate() {
        let children = insert(out, cur, (p.k >> i) & 1, &[*sibling]);
        cur = sha_pair(out, &children[0], &children[1]);
    }
    check(opts, cur == p.comm_d_new, NativeError::CommD)
}

/// A tree R path from `leaf`: every sibling, then per level the insertion at the challenge's
/// bits and the hash; returns the root it computes.
fn tree_r_path(
    out: &mut Out,
    leaf: Scalar,
    c: u64,
    path: &[Vec<Scalar>],
    layout: &Layout,
) -> Scalar {
    for s in path.iter().flatten() {
        out.push(*s);
    }
    let (mut cur, mut shift) = (leaf, 0);
    for (siblings, hasher) in path.iter().zip(&layout.hashers) {
        let arity = hasher.arity();
        let index = (c >> shift) as usize & (arity - 1);
        shift += arity.trailing_zeros();
        let children = insert(out, cur, index, siblings);
        cur = hasher.hash(out, &children);
    }
    cur
}

/// Challenge `i`: its high bits and rho, the encoding, its tree R old and new paths, the apex
/// leaf's selection and the tree D path up to it.
pub(super) fn challenge(
    out: &mut Out,
    p: &Partition,
    i: usize,
    layout: &Layout,
    d: &Derived,
    opts: Options,
) -> Result<(), NativeError> {
    let (ch, c) = (&p.challenges[i], layout.challenge(p.k, &d.digests, i));
    // Each h's high bits, times its select bit; then their sum.
    for (n, &h) in layout.p.hs.iter().enumerate() {
        let high = Scalar::from(c >> (layout.p.challenge_bits - h));
        out.push(high);
        out.push(if n == layout.p.h_index {
            high
        } else {
            Scalar::ZERO
        });
    }
    out.push(layout.high(c));
    let rho = layout.rho(out, d, c);
    out.push(ch.leaf_r_old);
    out.push(ch.leaf_d_new);
    let data_rho = ch.leaf_d_new * rho;
    out.push(data_rho);
    let leaf_r_new = ch.leaf_r_old + data_rho;
    out.push(leaf_r_new);
    check(
        opts,
        leaf_r_new == ch.leaf_r_new,
        NativeError::Encoding { challenge: i },
    )?;
    let old = tree_r_path(out, ch.leaf_r_old, c, &ch.path_r_old, layout);
    check(
        opts,
        old == p.root_r_old,
        NativeError::PathROld { challenge: i },
    )?;
    let new = tree_r_path(out, leaf_r_new, c, &ch.path_r_new, layout);
    check(
        opts,
        new == p.root_r_new,
        NativeError::PathRNew { challenge: i },
    )?;
    // `select` picks the apex leaf by the bits above the path, highest first.
    let len = layout.path_d_len();
    let apex_index = (c >> len) as usize & (layout.apex_leaves() - 1);
    let mut state = p.apex_leaves.clone();
    for b in (0..layout.p.apex_bits).rev() {
        let (low, high) = state.split_at(state.len() / 2);
        state = if (apex_index >> b) & 1 == 1 {
            high
        } else {
            low
        }
        .to_vec();
        for v in &state {
            out.push(*v);
        }
    }
    for s in &ch.path_d {
        out.push(*s);
    }
    let mut cur = ch.leaf_d_new;
    for (l, sibling) in ch.path_d.iter().enumerate() {
        let children = insert(out, cur, (c >> l) as usize & 1, &[*sibling]);
        cur = sha_pair(out, &children[0], &children[1]);
    }
    check(
        opts,
        cur == p.apex_leaves[apex_index],
        NativeError::PathD { challenge: i },
    )
}
