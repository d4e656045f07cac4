//! Witnesses of a batch made a window at a time: for each pass of a batched MSM, only the
//! stretch of each witness its scalars come from is made on the device, from the witness's
//! compact bytes in host memory (`witness_expand` over the chunks that cover it, kept to the
//! stretch), so a batch holds one window for all its witnesses instead of each expanded whole
//! (3.9 GiB for a 32 GiB partition), and its size no longer depends on the batch's.

use std::ops::Range;

use blstrs::Scalar;
use cuzk_wire::blob::CompactAux;

use super::expand::chunk_run;
use super::{as_bytes, cfg, DevBuf, Gpu, Result};
use crate::error::CudaError;

/// A batch member's witness, as its windows are made from.
// A handful live at a time (one per batch member): their size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum WindowSource<'a> {
    /// The inputs' scalars on the device, the aux in the codec's form in host memory (and its
    /// bytes on the device too, where the batch has room) and its chunks' starts on the device.
    Compact {
        input: DevBuf,
        inputs: usize,
        aux: &'a CompactAux,
        on_device: Option<DevBuf>,
        starts: DevBuf,
    },
    /// Every scalar in host memory (a witness uploaded expanded).
    Scalars(&'a [Scalar]),
}

/// The device buffers a batched MSM makes its windows in, shared by the batch's witnesses:
/// their MSMs of a pass run one after another on the compute stream.
pub struct WindowBufs {
    window: DevBuf,
    staged: DevBuf,
    refused: DevBuf,
}

impl WindowBufs {
    /// The buffer windows are made in (checks read them back).
    pub fn window(&self) -> &DevBuf {
        &self.window
    }
}

impl Gpu {
    /// A witness of `input` and the compact `aux`, every chunk of which is first checked as
    /// an expansion checks it ([`CudaError::RefusedChunk`]): a witness the device refuses then
    /// fails before its batch does. `on_device`: its bytes are copied to the device once, so
    /// that its windows need no copy of their own (which, on the compute stream, would wait
    /// for the next pass's bases on the copy engine).
    pub fn compact_source<'a>(
        &self,
        input: &[Scalar],
        aux: &'a CompactAux,
        on_device: bool,
    ) -> Result<WindowSource<'a>> {
        self.check_compact(aux)?;
        let bytes = match on_device {
            true => Some(self.upload(aux.bytes())?),
            false => None,
        };
        Ok(WindowSource::Compact {
            input: self.upload(as_bytes(input))?,
            inputs: input.len(),
            aux,
            on_device: bytes,
            starts: self.upload(as_bytes(aux.starts()))?,
        })
    }

    /// Buffers for windows of up to `positions` and, for compact witnesses, `staged` bytes of
    /// their chunks at a time.
    pub fn window_bufs(&self, positions: usize, staged: usize) -> Result<WindowBufs> {
        Ok(WindowBufs {
            window: self.alloc(positions * 32)?,
            staged: self.alloc(staged)?,
            // What the expansions lower on a chunk they refuse: never read, every chunk of a
            // compact source was checked when it was made.
            refused: self.alloc(4)?,
        })
    }

    /// Makes witness positions `range` of `w` on the compute stream, position `range.start`
    /// first; returns the window's address.
    pub fn make_window(
        &self,
        w: &WindowSource,
        range: Range<usize>,
        bufs: &mut WindowBufs,
    ) -> Result<u64> {
        let s = &self.stream;
        if range.len() * 32 > bufs.window.bytes() {
            return Err(CudaError::Shape(format!(
                "a window of {} positions in a buffer of {} bytes",
                range.len(),
                bufs.window.bytes()
            )));
        }
        let window = bufs.window.ptr(s);
        match w {
            WindowSource::Scalars(all) => {
                let part = as_bytes(&all[range.clone()]);
                self.copy_to(s, part, &mut bufs.window, "a witness window")?;
            }
            WindowSource::Compact {
                input,
                inputs,
                aux,
                on_device,
                starts,
            } => {
                let inputs = *inputs;
                if range.start < inputs {
                    let end = range.end.min(inputs);
                    let src = input.buf.slice(range.start * 32..end * 32);
                    let mut dst = bufs.window.buf.slice_mut(0..(end - range.start) * 32);
                    s.memcpy_dtod(&src, &mut dst)?;
                }
                if range.end > inputs {
                    let from = range.start.max(inputs);
                    let out = window + ((from - range.start) * 32) as u64;
                    let aux_range = from - inputs..range.end - inputs;
                    match on_device {
                        Some(bytes) => {
                            self.expand_resident(aux, (bytes, starts), aux_range, out, bufs)?
                        }
                        None => self.expand_range(aux, starts, aux_range, out, bufs)?,
                    }
                }
            }
        }
        Ok(window)
    }

    /// Aux elements `range` of `aux` to `out` on the compute stream, from its chunks' bytes
    /// and starts on the device.
    fn expand_resident(
        &self,
        aux: &CompactAux,
        (bytes, starts): (&DevBuf, &DevBuf),
        range: Range<usize>,
        out: u64,
        bufs: &WindowBufs,
    ) -> Result<()> {
        let s = &self.stream;
        let (c0, c1) = chunks_of(aux, range.clone());
        if c0 < c1 {
            launch!(self, self.f.witness_expand, cfg((c1 - c0) as u32, 256, 0);
                bytes.ptr(s), 0u64, starts.ptr(s), c0 as u32, aux.chunk_elements() as u32,
                aux.len() as u64, out, range.start as u64, range.end as u64,
                bufs.refused.ptr(s))?;
        }
        Ok(())
    }

    /// Aux elements `range` of `aux` to `out` on the compute stream, from the chunks that
    /// cover them, through `bufs.staged` a whole number of chunks at a time.
    fn expand_range(
        &self,
        aux: &CompactAux,
        starts_dev: &DevBuf,
        range: Range<usize>,
        out: u64,
        bufs: &mut WindowBufs,
    ) -> Result<()> {
        let s = &self.stream;
        let ce = aux.chunk_elements();
        let (c0, c1) = chunks_of(aux, range.clone());
        let (starts, bytes) = (aux.starts(), aux.bytes());
        let cap = bufs.staged.bytes() as u64;
        let mut first = c0;
        while first < c1 {
            let end = chunk_run(starts, first..c1, cap)?;
            let base = starts[first];
            let part = &bytes[base as usize..starts[end] as usize];
            self.copy_to(s, part, &mut bufs.staged, "a compact window")?;
            launch!(self, self.f.witness_expand, cfg((end - first) as u32, 256, 0);
                bufs.staged.ptr(s), base, starts_dev.ptr(s), first as u32, ce as u32,
                aux.len() as u64, out, range.start as u64, range.end as u64,
                bufs.refused.ptr(s))?;
            first = end;
        }
        Ok(())
    }
}

/// The chunks of `aux` that cover aux elements `range`.
fn chunks_of(aux: &CompactAux, range: Range<usize>) -> (usize, usize) {
    let ce = aux.chunk_elements();
    (range.start / ce, range.end.div_ceil(ce).min(aux.chunks()))
}

/// Bytes of the chunks of `aux` that cover aux elements `range`.
pub fn compact_bytes(aux: &CompactAux, range: Range<usize>) -> u64 {
    let (c0, c1) = chunks_of(aux, range);
    if c0 >= c1 {
        return 0;
    }
    aux.starts()[c1] - aux.starts()[c0]
}
