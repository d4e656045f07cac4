//! The cursor every emitter writes through: one task's slice of the pre-sized aux vector.

use blstrs::Scalar;
use ff::Field;

/// Writes variables in allocation order into a slice. It never panics: a write past the end is
/// counted, not stored, so a count that differs from the slice is caught by the caller.
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
}
