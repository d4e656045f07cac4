//! A witness uploaded in the blob's compact form and expanded on the device (`witness_expand`,
//! kernels/cuda/expand.cuh): for a 32 GiB PoRep partition ~0.2 GB crosses PCIe instead of the
//! 4.2 GB of scalars, and the host never writes those.

use std::ops::Range;
use std::sync::Arc;

use blstrs::Scalar;
use cudarc::driver::CudaStream;
use cuzk_wire::blob::CompactAux;

use super::{as_bytes, cfg, pinned, DevBuf, Gpu, Result};
use crate::error::CudaError;
use crate::plan::EXPAND_BATCH;

impl Gpu {
    /// `input`, then `aux` expanded, back to back into one new buffer, on the copy stream, and
    /// waits for it: the buffer is ready for any stream. The aux goes up in batches of whole
    /// chunks of at most [`EXPAND_BATCH`] bytes, from where it lies when that is pinned
    /// ([`Gpu::pin_host`]), else through the pinned staging. A chunk the codec does not allow
    /// fails with [`CudaError::RefusedChunk`] (the lowest such).
    pub fn upload_compact(&self, input: &[Scalar], aux: &CompactAux) -> Result<DevBuf> {
        self.upload_compact_batched(input, aux, EXPAND_BATCH)
    }

    /// [`Gpu::upload_compact`] in batches of at most `batch` bytes (checks take small ones, to
    /// cover several); a chunk larger than that is refused as a shape error.
    pub fn upload_compact_batched(
        &self,
        input: &[Scalar],
        aux: &CompactAux,
        batch: u64,
    ) -> Result<DevBuf> {
        let c = &self.copy;
        let inputs = input.len() * 32;
        let mut d = self.alloc_on(c, inputs + aux.len() * 32)?;
        if !input.is_empty() {
            self.htod(c, as_bytes(input), &mut d.buf.slice_mut(0..inputs))?;
        }
        let out = d.ptr(c) + inputs as u64;
        self.expand_chunks(aux, batch, out)?;
        Ok(d)
    }

    /// Checks every chunk of `aux` as [`Gpu::upload_compact`] does, writing nothing.
    pub fn check_compact(&self, aux: &CompactAux) -> Result<()> {
        self.expand_chunks(aux, EXPAND_BATCH, 0)
    }

    /// Every chunk of `aux` expanded to `out` (0: checked only) on the copy stream, in batches
    /// of whole chunks of at most `batch` bytes, and waited for.
    fn expand_chunks(&self, aux: &CompactAux, batch: u64, out: u64) -> Result<()> {
        let c = &self.copy;
        let chunks = aux.chunks();
        if chunks == 0 {
            c.synchronize()?;
            return Ok(());
        }
        let (bytes, starts) = (aux.bytes(), aux.starts());
        let mut dstarts = self.alloc_on(c, starts.len() * 8)?;
        self.htod(c, as_bytes(starts), &mut dstarts.buf)?;
        let mut refused = self.alloc_on(c, 4)?;
        self.htod(c, &u32::MAX.to_le_bytes(), &mut refused.buf)?;
        let mut staged = self.alloc_on(c, (bytes.len() as u64).min(batch) as usize)?;
        let mut first = 0;
        while first < chunks {
            let end = chunk_run(starts, first..chunks, batch)?;
            let base = starts[first];
            let part = &bytes[base as usize..starts[end] as usize];
            self.copy_to(c, part, &mut staged, "a compact witness")?;
            launch!(on c, self.f.witness_expand, cfg((end - first) as u32, 256, 0);
                staged.ptr(c), base, dstarts.ptr(c), first as u32, aux.chunk_elements() as u32,
                aux.len() as u64, out, 0u64, aux.len() as u64, refused.ptr(c))?;
            first = end;
        }
        let mut lowest = [0u8; 4];
        c.memcpy_dtoh(&refused.buf, &mut lowest)?;
        c.synchronize()?;
        drop((staged, dstarts, refused));
        match u32::from_le_bytes(lowest) {
            u32::MAX => Ok(()),
            chunk => Err(CudaError::RefusedChunk(chunk as usize)),
        }
    }
}

/// The end of the run of whole chunks from `chunks.start` (before `chunks.end`) whose bytes
/// (`starts`) fit in `cap` together: at least one chunk, or a shape error.
pub(super) fn chunk_run(starts: &[u64], chunks: Range<usize>, cap: u64) -> Result<usize> {
    let (first, base) = (chunks.start, starts[chunks.start]);
    (first + 1..=chunks.end)
        .take_while(|&e| starts[e] - base <= cap)
        .last()
        .ok_or_else(|| {
            CudaError::Shape(format!(
                "compact chunk {first} of {} bytes exceeds the {cap} bytes it goes up through",
                starts[first + 1] - base
            ))
        })
}

impl Gpu {
    /// `src` to the start of `dst` on `st`: by DMA from where it lies when pinned, else through
    /// the pinned staging once `st`'s earlier work (which may read `dst`) is done, waited for
    /// (the staging is free for others once the copy has read it).
    pub(super) fn copy_to(
        &self,
        st: &Arc<CudaStream>,
        src: &[u8],
        dst: &mut DevBuf,
        what: &'static str,
    ) -> Result<()> {
        if pinned::is_pinned(src) {
            return self.htod(st, src, &mut dst.buf.slice_mut(0..src.len()));
        }
        st.synchronize()?;
        self.with_staging(src.len(), what, |host| {
            self.stage_upload(host, 0, src, dst, 0)?;
            Ok(self.copy.synchronize()?)
        })
    }
}
