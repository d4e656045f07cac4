//! The cursor every emitter writes through: one task's slice of the pre-sized aux vector.

use blstrs::Scalar;
use ff::{Field, PrimeField};

/// Writes variables in allocation order into a slice. It never panics: a write past the end is
/// counted, not stored, so [`Out::written`] on an empty slice measures an emitter (the layout
/// uses that), and a task whose count differs from its slot is caught by its caller.
pub(crate) struct Out<'a> {
    buf: &'a mut [Scalar],
    pos: usize,
    /// Test-only perturbation: flip the next carry bit an addition emits.
    #[cfg(test)]
    pub(crate) flip_carry: bool,
}

impl<'a> Out<'a> {
    pub(crate) fn new(buf: &'a mut [Scalar]) -> Self {
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

    /// Whether exactly the slice was filled.
    pub(crate) fn is_full(&self) -> bool {
        self.pos == self.buf.len()
    }

    #[inline]
    pub(crate) fn push(&mut self, v: Scalar) {
        if let Some(slot) = self.buf.get_mut(self.pos) {
            *slot = v;
        }
        self.pos += 1;
    }

    #[inline]
    pub(crate) fn bit(&mut self, b: bool) {
        self.push(if b { Scalar::ONE } else { Scalar::ZERO });
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
