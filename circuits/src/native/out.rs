//! The cursor every emitter writes through, and the one place the aux vector is assembled: its
//! slots are filled in parallel straight into the vector's uninitialized memory (zeroing 4 GB
//! first would cost a whole extra pass over it).

use std::mem::MaybeUninit;

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

/// A bit's variable, indexed by the bit: no branch on data.
static BIT: [Scalar; 2] = [Scalar::ZERO, Scalar::ONE];

/// Writes variables in allocation order into a slot. It never panics: a write past the end is
/// counted, not stored, so [`Out::written`] on an empty slot measures an emitter (the layout
/// uses that), and [`fill_slots`] catches an emitter that wrote another number than its slot.
pub(crate) struct Out<'a> {
    buf: &'a mut [MaybeUninit<Scalar>],
    pos: usize,
    /// Test-only perturbation: flip the next carry bit an addition emits.
    #[cfg(test)]
    pub(crate) flip_carry: bool,
}

impl<'a> Out<'a> {
    fn new(buf: &'a mut [MaybeUninit<Scalar>]) -> Self {
        Out {
            buf,
            pos: 0,
            #[cfg(test)]
            flip_carry: false,
        }
    }

    /// An emitter run that only counts.
    pub(crate) fn counting() -> Out<'static> {
        Out::new(&mut [])
    }

    pub(crate) fn written(&self) -> usize {
        self.pos
    }

    #[inline]
    pub(crate) fn push(&mut self, v: Scalar) {
        if let Some(slot) = self.buf.get_mut(self.pos) {
            slot.write(v);
        }
        self.pos += 1;
    }

    #[inline]
    pub(crate) fn bit(&mut self, b: bool) {
        self.push(BIT[usize::from(b)]);
    }

    /// The bits of `val` selected by `mask`, lowest first.
    #[inline]
    pub(crate) fn bits(&mut self, mut mask: u32, val: u32) {
        while mask != 0 {
            let i = mask.trailing_zeros();
            self.bit((val >> i) & 1 == 1);
            mask &= mask - 1;
        }
    }

    /// `AllocatedNum::to_bits_le`: the 255 bits of the canonical value, lowest first.
    pub(crate) fn field_bits(&mut self, v: &Scalar) {
        self.repr_bits(&v.to_repr());
    }

    /// [`Out::field_bits`] of the value whose repr is `repr`.
    pub(crate) fn repr_bits(&mut self, repr: &[u8; 32]) {
        for i in 0..Scalar::NUM_BITS as usize {
            self.bit((repr[i / 8] >> (i % 8)) & 1 == 1);
        }
    }
}

/// A vector of consecutive slots of `sizes`, slot `k` filled by `emit(k, out)` on the current
/// rayon pool. Fails with `emit`'s error, or with `short(k, written)` for a slot whose emitter
/// wrote another number of variables than its size.
pub(crate) fn fill_slots<E: Send>(
    sizes: &[usize],
    emit: impl Fn(usize, &mut Out) -> Result<(), E> + Sync,
    short: impl Fn(usize, usize) -> E + Sync,
) -> Result<Vec<Scalar>, E> {
    let len = sizes.iter().sum();
    let mut aux = Vec::with_capacity(len);
    let mut rest = &mut aux.spare_capacity_mut()[..len];
    let mut slots = Vec::with_capacity(sizes.len());
    for &size in sizes {
        let (slot, tail) = rest.split_at_mut(size);
        slots.push(slot);
        rest = tail;
    }
    slots
        .into_par_iter()
        .enumerate()
        .with_max_len(1)
        .try_for_each(|(k, slot)| {
            let mut out = Out::new(slot);
            emit(k, &mut out)?;
            if out.pos == out.buf.len() {
                Ok(())
            } else {
                Err(short(k, out.pos))
            }
        })?;
    // SAFETY: the slots tile `0..len`, and each was written at every index below its length:
    // `push` writes index `pos` then increments it, so `pos == len` means `0..len` written.
    unsafe { aux.set_len(len) };
    Ok(aux)
}

/// One slot of `len` variables written by `emit`, or how many it wrote instead.
#[cfg(test)]
pub(crate) fn emitted(len: usize, emit: impl Fn(&mut Out) + Sync) -> Result<Vec<Scalar>, usize> {
    fill_slots(
        &[len],
        |_, out| {
            emit(out);
            Ok(())
        },
        |_, written| written,
    )
}
