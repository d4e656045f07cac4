//! A witness as its blob carries it, decompressed but not expanded: the public inputs (a few)
//! as scalars, the aux still in the compact codec ([`crate::codec`]), chunk after chunk. A PoRep
//! witness takes under 2 bytes a variable in this form against 32 as scalars, so a GPU backend
//! copies it to the device as it is and expands it there; [`CompactWitness::expand`] does the
//! same on the host.

use std::ops::Range;

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::{chunk_error, chunk_ranges, BlobError, VectorKind};
use crate::codec;
use crate::witness::Witness;

/// See the module documentation. Buffers are kept between witnesses: decoding the next blob
/// into the same value writes into memory already mapped (and, where a backend page-locked it,
/// still locked).
#[derive(Clone, Debug, Default)]
pub struct CompactWitness {
    /// Public inputs; index 0 is the constant ONE.
    pub input: Vec<Scalar>,
    pub aux: CompactAux,
}

/// The aux vector in the codec's form: chunk `i` holds elements `i·chunk_elements ..` (the last
/// one fewer), its tags then its value bytes.
#[derive(Clone, Debug, Default)]
pub struct CompactAux {
    len: usize,
    chunk_elements: usize,
    /// The chunks back to back from offset 0, then room kept for later witnesses; initialised
    /// to its whole length, which [`CompactAux::memory`] hands out.
    buf: Vec<u8>,
    /// Where each chunk starts in `buf`, and after the last one where the used bytes end.
    starts: Vec<u64>,
}

impl CompactWitness {
    /// The public inputs a verifier takes (without ONE).
    pub fn public_inputs(&self) -> &[Scalar] {
        self.input.get(1..).unwrap_or_default()
    }

    /// The witness as scalars: the codec's checks (tags, value lengths, canonical values), run
    /// on every core.
    pub fn expand(&self) -> Result<Witness, BlobError> {
        let mut aux = Vec::new();
        super::resize(&mut aux, self.aux.len);
        self.aux.expand_into(&mut aux)?;
        Ok(Witness {
            input: self.input.clone(),
            aux,
        })
    }
}

impl CompactAux {
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn chunk_elements(&self) -> usize {
        self.chunk_elements
    }

    pub fn chunks(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Where each chunk starts in [`CompactAux::bytes`], then their end (`chunks() + 1` offsets).
    pub fn starts(&self) -> &[u64] {
        &self.starts
    }

    /// The chunks' bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.starts.last().map_or(0, |&e| e as usize)]
    }

    /// The chunks' bytes, to alter: checks that feed the expanders forged input.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let end = self.starts.last().map_or(0, |&e| e as usize);
        &mut self.buf[..end]
    }

    /// A copy of the chunks alone, without the room kept beyond them: what a backend keeps of a
    /// witness it expands more than once.
    pub fn trimmed(&self) -> CompactAux {
        CompactAux {
            len: self.len,
            chunk_elements: self.chunk_elements,
            buf: self.bytes().to_vec(),
            starts: self.starts.clone(),
        }
    }

    /// The whole buffer, the room kept beyond [`CompactAux::bytes`] included: what a backend
    /// page-locks. It moves only when a witness needs more room ([`CompactAux::reserve`]).
    pub fn memory(&self) -> &[u8] {
        &self.buf
    }

    /// Grows the buffer to at least `bytes`, writing it through (so it is mapped now, not on
    /// the first decode). Growing moves it.
    pub fn reserve(&mut self, bytes: usize) {
        if self.buf.len() < bytes {
            self.buf.resize(bytes, 0);
        }
    }

    /// Elements of chunk `i` and its bytes.
    pub fn chunk(&self, i: usize) -> (Range<usize>, &[u8]) {
        let range = i * self.chunk_elements..((i + 1) * self.chunk_elements).min(self.len);
        (
            range,
            &self.buf[self.starts[i] as usize..self.starts[i + 1] as usize],
        )
    }

    /// Expands every chunk into `out` (`len()` scalars), in parallel; the first error found
    /// (by chunk) fails it.
    pub fn expand_into(&self, out: &mut [Scalar]) -> Result<(), BlobError> {
        assert_eq!(out.len(), self.len, "an output of the aux's length");
        if self.len == 0 {
            return Ok(());
        }
        out.par_chunks_mut(self.chunk_elements)
            .enumerate()
            .try_for_each(|(i, out)| self.expand_chunk(i, out))
    }

    /// Expands chunk `i` alone: what a backend that refused the chunk reports.
    pub fn check_chunk(&self, i: usize) -> Result<(), BlobError> {
        let mut out = vec![Scalar::ZERO; self.chunk(i).0.len()];
        self.expand_chunk(i, &mut out)
    }

    fn expand_chunk(&self, i: usize, out: &mut [Scalar]) -> Result<(), BlobError> {
        let (range, raw) = self.chunk(i);
        codec::decode_into(raw, out)
            .map_err(|e| chunk_error(VectorKind::Aux, i, range.start as u64, e))
    }

    /// Lays out `len` elements in chunks of `chunk_elements` whose encoded lengths are
    /// `raw_lens` (bounded by the caller), and returns each chunk's bytes to fill.
    pub(super) fn layout(
        &mut self,
        len: usize,
        chunk_elements: usize,
        raw_lens: &[usize],
    ) -> Vec<&mut [u8]> {
        debug_assert_eq!(chunk_ranges(len, chunk_elements).count(), raw_lens.len());
        self.len = len;
        self.chunk_elements = chunk_elements;
        self.starts.clear();
        self.starts.push(0);
        let mut end = 0u64;
        for &n in raw_lens {
            end += n as u64;
            self.starts.push(end);
        }
        self.reserve(end as usize);
        let mut rest = &mut self.buf[..end as usize];
        raw_lens
            .iter()
            .map(|&n| {
                let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(n);
                rest = tail;
                chunk
            })
            .collect()
    }
}
