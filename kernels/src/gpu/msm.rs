//! Pippenger MSMs in G1 and G2 over device-resident bases and scalars.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use blst::{blst_fp, blst_fp2};
use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::{CudaEvent, CudaStream};
use group::Group;

use super::{as_bytes, as_bytes_mut, cfg, grid, Curve, DevBuf, DeviceBases, Gpu, Result};
use crate::digits::{
    affine_chunks, affine_chunks_forced, affine_state_bytes, coarse_shift, num_windows,
    shared_window, window_bits, xyzz_chunk, Accumulation, AFFINE_BLOCK, COARSE_ENTRY_BYTES,
    COARSE_PER_THREAD, COARSE_THREADS, SORTED_ENTRY_BYTES,
};
use crate::error::CudaError;

/// An MSM's buckets on the device, every window's.
pub(super) struct MsmBuckets {
    curve: Curve,
    /// The window width.
    c: u32,
    /// What a pass's accumulation fills (only its non-empty buckets).
    pass: DevBuf,
    /// Dense MSMs in passes: the sum of the passes' buckets, reduced once after the last pass.
    /// Otherwise each pass is reduced on its own (`pass`).
    shared: Option<DevBuf>,
}

impl MsmBuckets {
    /// Whether the passes add up in [`Self::shared`] (else each pass is reduced alone).
    pub(super) fn shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Whether the window is narrower than a pass of `n` dense scalars would take (a
    /// witness's pass, mostly zeros and ones): its buckets are then at most half of those the
    /// plan counts for the pass (plan::msm_scratch), so another set fits beside them.
    pub(super) fn narrow(&self, n: usize) -> bool {
        self.c < window_bits(n)
    }
}

/// An MSM's reduction launched on a stream: its window sums, read by [`Gpu::msm_reduced`].
pub(super) struct Reducing {
    jac: DevBuf,
    c: u32,
    nwin: u32,
    /// The buckets it reads, kept until it is done.
    _buckets: DevBuf,
    /// The stream it runs on, waited for before the buckets are freed (on their own stream).
    stream: Arc<CudaStream>,
}

impl Drop for Reducing {
    fn drop(&mut self) {
        // Done already once its sums were read; an abandoned one must not outlive its buckets.
        let _ = self.stream.synchronize();
    }
}

impl Gpu {
    /// Uploads affine bases (blst layout) to the device.
    pub fn upload_g1(&self, bases: &[G1Affine]) -> Result<DeviceBases> {
        assert_eq!(std::mem::size_of::<G1Affine>(), 96);
        self.upload_bases(as_bytes(bases), bases.len(), Curve::G1)
    }

    pub fn upload_g2(&self, bases: &[G2Affine]) -> Result<DeviceBases> {
        assert_eq!(std::mem::size_of::<G2Affine>(), 192);
        self.upload_bases(as_bytes(bases), bases.len(), Curve::G2)
    }

    /// Uploads uncompressed points (a parameter file's query) without holding them on the host:
    /// chunks are parsed straight into pinned staging (on all cores, no subgroup checks) and
    /// copied to their place in one device buffer.
    pub fn upload_uncompressed(&self, raw: &[u8], curve: Curve) -> Result<DeviceBases> {
        const CHUNK: usize = 1 << 20;
        let (file_bytes, ab) = match curve {
            Curve::G1 => (cuzk_prover::params::G1_BYTES, 96),
            Curve::G2 => (cuzk_prover::params::G2_BYTES, 192),
        };
        let len = raw.len() / file_bytes;
        if len == 0 {
            return Ok(DeviceBases {
                buf: None,
                len,
                curve,
            });
        }
        let mut d = self.alloc_on(&self.copy, len * ab)?;
        let corrupt = |e: String| CudaError::Shape(format!("parameter file: {e}"));
        self.with_staging(CHUNK * ab, "parameter points", |pinned| {
            for (i, chunk) in raw.chunks(CHUNK * file_bytes).enumerate() {
                let n = chunk.len() / file_bytes;
                let host = &mut pinned.as_mut_slice()?[..n * ab];
                match curve {
                    Curve::G1 => {
                        cuzk_prover::params::parse_g1_into(chunk, as_points_mut(host), false)
                    }
                    Curve::G2 => {
                        cuzk_prover::params::parse_g2_into(chunk, as_points_mut(host), false)
                    }
                }
                .map_err(corrupt)?;
                let mut view = d.buf.slice_mut(i * CHUNK * ab..i * CHUNK * ab + n * ab);
                self.htod(&self.copy, &pinned.as_slice()?[..n * ab], &mut view)?;
                // The staging buffer is refilled next round.
                self.copy.synchronize()?;
            }
            Ok(())
        })?;
        Ok(DeviceBases {
            buf: Some(d),
            len,
            curve,
        })
    }

    fn upload_bases(&self, bytes: &[u8], len: usize, curve: Curve) -> Result<DeviceBases> {
        let buf = if len == 0 {
            None
        } else {
            Some(self.upload(bytes)?)
        };
        self.stream.synchronize()?;
        Ok(DeviceBases { buf, len, curve })
    }

    fn scan(&self, inp: u64, out: u64, n: u64) -> Result<()> {
        let nblk = n.div_ceil(2048).max(1);
        if nblk == 1 {
            return launch!(self, self.f.scan_block, cfg(1, 1024, 0); inp, out, n, 0u64);
        }
        let sums = self.alloc((nblk * 4) as usize)?;
        let sums_out = self.alloc((nblk * 4) as usize)?;
        let s = &self.stream;
        launch!(self, self.f.scan_block, cfg(nblk as u32, 1024, 0); inp, out, n, sums.ptr(s))?;
        self.scan(sums.ptr(s), sums_out.ptr(s), nblk)?;
        launch!(self, self.f.scan_add, cfg(grid(n, 256), 256, 0); out, n, sums_out.ptr(s))
    }

    /// Splits per-bucket item counts into tasks of at most `t`: (tasks per bucket, exclusive
    /// offsets, total tasks, most tasks of one bucket).
    fn plan_tasks(&self, counts: &DevBuf, nbt: u32, t: u32) -> Result<(DevBuf, DevBuf, u64, u32)> {
        let s = &self.stream;
        let ntasks = self.alloc(nbt as usize * 4)?;
        let off = self.alloc(nbt as usize * 4)?;
        let maxb = self.alloc_zeroed(4)?;
        launch!(self, self.f.msm_task_count, cfg(grid(nbt as u64, 256), 256, 0);
            counts.ptr(s), nbt, t, ntasks.ptr(s), maxb.ptr(s))?;
        self.scan(ntasks.ptr(s), off.ptr(s), nbt as u64)?;
        let mut v = [0u32; 3];
        self.download_into(&off, (nbt as usize - 1) * 4, as_bytes_mut(&mut v[..1]))?;
        self.download_into(&ntasks, (nbt as usize - 1) * 4, as_bytes_mut(&mut v[1..2]))?;
        self.download_into(&maxb, 0, as_bytes_mut(&mut v[2..]))?;
        Ok((ntasks, off, (v[0] + v[1]) as u64, v[2]))
    }

    /// Window sums of sum_i s_i P_i (scalars on the device, Montgomery form) as raw Jacobian
    /// limbs; the MSM's window width.
    /// `bases` is the device address of `n` affine points of `curve`.
    pub(super) fn msm_windows(
        &self,
        bases: (u64, Curve),
        scalars: u64,
        n: usize,
    ) -> Result<(Vec<u8>, u32, u32)> {
        let (mut buckets, (at, curve)) = (None, bases);
        let resident = (at, curve, None);
        self.msm_accumulate(resident, scalars, n, 1, &mut buckets, &mut || Ok(()))?;
        let buckets = buckets.expect("made by the first pass");
        self.msm_reduce(buckets)
    }

    /// Accumulates the `n` terms s_i P_i of one pass of an MSM (`passes` passes of about `n`
    /// points each) into buckets, made by the first pass, or by each pass where they are not
    /// [shared](MsmBuckets::shared). Passes of dense scalars (H's) share the buckets of the whole
    /// MSM's window where they are large enough ([`shared_window`]); passes of a witness's
    /// scalars, mostly zeros and ones whose other scalars the first pass may not represent,
    /// each take the window of their own other scalars. `settle` runs before the sort's
    /// buffers are allocated where the window is not [narrow](MsmBuckets::narrow): the pass
    /// then takes all the scratch the plan counts for it. Where the bases are still crossing
    /// to the device, `ready` is their copy's event: only the accumulation reads them, so the
    /// sort runs while they cross.
    pub(super) fn msm_accumulate(
        &self,
        (bases, curve, ready): (u64, Curve, Option<&CudaEvent>),
        scalars: u64,
        n: usize,
        passes: usize,
        buckets: &mut Option<MsmBuckets>,
        settle: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let cf = &self.f.curve[curve as usize];
        let s = &self.stream;
        let n32 = n as u32;
        // Zeros take no part and ones need no digits (a witness is mostly bits: 46–47 % ones
        // and 2–3 % other values in the PoRep partitions of docs/porep.md); the window fits the rest.
        let (ones, dense) = (self.alloc((n + 1) * 4)?, self.alloc((n + 1) * 4)?);
        launch!(self, self.f.msm_classify, cfg(grid(n as u64 + 1, 256), 256, 0);
            scalars, n32, ones.ptr(s), dense.ptr(s))?;
        self.scan(ones.ptr(s), ones.ptr(s), n as u64 + 1)?;
        self.scan(dense.ptr(s), dense.ptr(s), n as u64 + 1)?;
        let mut class = [0u32; 2];
        self.download_into(&ones, n * 4, as_bytes_mut(&mut class[..1]))?;
        self.download_into(&dense, n * 4, as_bytes_mut(&mut class[1..]))?;
        let [n_ones, m] = class;
        let window = match (&*buckets, self.msm_window.load(Relaxed)) {
            (Some(b), _) => b.c,
            (None, 0) => window_bits(m as usize),
            (None, c) => c,
        };
        if window >= window_bits(n) {
            settle()?;
        }
        let compact = |pos: &DevBuf, len: u32| -> Result<DevBuf> {
            let out = self.alloc(len as usize * 4)?;
            launch!(self, self.f.msm_compact, cfg(grid(n as u64, 256), 256, 0);
                n32, pos.ptr(s), out.ptr(s))?;
            Ok(out)
        };
        // The dense scalars' indices (none when all are dense: the passes walk 0..n).
        let idx = if m < n32 {
            Some(compact(&dense, m)?)
        } else {
            None
        };
        drop(dense);
        let one_list = if n_ones > 0 {
            Some(compact(&ones, n_ones)?)
        } else {
            None
        };
        drop(ones);
        let idx_ptr = idx.as_ref().map_or(0, |d| d.ptr(s));

        let xb = curve.xyzz_bytes();
        if buckets.is_none() {
            let shared = match passes > 1 && 2 * m as usize >= n {
                true if self.shared_passes.load(Relaxed) => shared_window(n, n * passes),
                _ => None,
            };
            let share = shared.is_some();
            let c = match self.msm_window.load(Relaxed) {
                0 => shared.unwrap_or_else(|| window_bits(m as usize)),
                c => c,
            };
            let nbt = (num_windows(c) << (c - 1)) as usize;
            *buckets = Some(MsmBuckets {
                curve,
                c,
                pass: self.alloc_zeroed(nbt * xb)?,
                shared: if share {
                    Some(self.alloc_zeroed(nbt * xb)?)
                } else {
                    None
                },
            });
        }
        let acc = buckets.as_mut().expect("made above");
        let c = acc.c;
        let nwin = num_windows(c);
        let nb = 1u32 << (c - 1);
        let nbt = nwin * nb;
        // Sort by (window, bucket): counts and ranks, offsets, then through coarse bins to each
        // entry's place (kernels/cuda/msm.cuh, msm_count). Bucket 0 (window 0, digit 1) begins
        // with the ones.
        let mut counts = self.alloc_zeroed(nbt as usize * 4)?;
        if n_ones > 0 {
            self.stream
                .memcpy_htod(as_bytes(&[n_ones]), &mut counts.buf.slice_mut(0..4))?;
        }
        let offsets = self.alloc(nbt as usize * 4)?;
        let ranks = self.alloc(m as usize * nwin as usize * 4)?;
        if m > 0 {
            launch!(self, self.f.msm_count, cfg(grid(m as u64, 256), 256, 0);
                scalars, idx_ptr, m, c, nwin, counts.ptr(s), ranks.ptr(s))?;
        }
        self.scan(counts.ptr(s), offsets.ptr(s), nbt as u64)?;
        let mut last = [0u32; 2];
        self.download_into(
            &offsets,
            (nbt as usize - 1) * 4,
            as_bytes_mut(&mut last[..1]),
        )?;
        self.download_into(
            &counts,
            (nbt as usize - 1) * 4,
            as_bytes_mut(&mut last[1..]),
        )?;
        let total = last[0] as u64 + last[1] as u64;
        let shift = coarse_shift(nbt);
        let nbins = nbt >> shift;
        let bins = self.alloc(nbins as usize * 4)?;
        launch!(self, self.f.msm_bin_starts, cfg(grid(nbins as u64, 256), 256, 0);
            offsets.ptr(s), nbt, shift, n_ones, bins.ptr(s))?;
        let coarse = self.alloc((total * COARSE_ENTRY_BYTES) as usize)?;
        if m > 0 {
            let blocks = (m as usize).div_ceil((COARSE_THREADS * COARSE_PER_THREAD) as usize);
            launch!(self, self.f.msm_coarse, cfg(blocks as u32, COARSE_THREADS, (nb >> shift) * 4);
                scalars, idx_ptr, m, c, nwin, shift, ranks.ptr(s), offsets.ptr(s), bins.ptr(s),
                coarse.ptr(s))?;
        }
        drop((ranks, bins, idx));
        let mut sorted = self.alloc((total * SORTED_ENTRY_BYTES) as usize)?;
        let placed = total - n_ones as u64;
        if placed > 0 {
            launch!(self, self.f.msm_fine, cfg(grid(placed, 256), 256, 0);
                self.ptr_at(&coarse, n_ones as usize * 8), placed as u32, sorted.ptr(s))?;
        }
        drop(coarse);
        if let Some(ones) = one_list {
            self.stream
                .memcpy_dtod(&ones.buf, &mut sorted.buf.slice_mut(0..n_ones as usize * 4))?;
        }

        // Equal-length chunks of the sorted entries: one a thread (XYZZ), or a wave of threads
        // stepping several each (batch-affine, G1).
        let wave = self
            .f
            .affine
            .each_ref()
            .map(|a| (a.blocks * AFFINE_BLOCK) as u64);
        let affine = match (curve, self.accumulation()) {
            (Curve::G2, _) | (_, Accumulation::Xyzz) => None,
            (Curve::G1, Accumulation::BySize) => affine_chunks(total, wave),
            (Curve::G1, Accumulation::Affine(i)) => Some(affine_chunks_forced(total, wave, i)),
        };
        let chunk = affine.map_or_else(|| xyzz_chunk(total), |(_, len)| len) as u32;
        let nchunks = total.div_ceil(chunk as u64);
        let buckets = &acc.pass;
        let mut vals = self.alloc((2 * nchunks as usize).max(1) * xb)?;
        let (cnt, off) = (self.alloc(nbt as usize * 4)?, self.alloc(nbt as usize * 4)?);
        let maxc = self.alloc_zeroed(4)?;
        launch!(self, self.f.msm_partial_ranges, cfg(grid(nbt as u64, 256), 256, 0);
            offsets.ptr(s), counts.ptr(s), nbt, chunk, cnt.ptr(s), off.ptr(s), maxc.ptr(s))?;
        if let Some(ev) = ready {
            s.wait(ev)?;
        }
        match affine {
            _ if total == 0 => {}
            Some((i, _)) => {
                // Allocated here, not in the plan's scratch: affine_chunks keeps it and the
                // partial slots within the XYZZ partials and the coarse pairs the plan counts.
                let chains = self.alloc(affine_state_bytes(i, wave[i]) as usize)?;
                launch!(self, self.f.affine[i].f, cfg(self.f.affine[i].blocks, AFFINE_BLOCK, 0);
                    bases, sorted.ptr(s), offsets.ptr(s), nbt,
                    total as u32, chunk, buckets.ptr(s), vals.ptr(s), chains.ptr(s))?
            }
            None => launch!(self, cf.accumulate, cfg(grid(nchunks, 128), 128, 0);
                bases, sorted.ptr(s), offsets.ptr(s), nbt,
                total as u32, chunk, buckets.ptr(s), vals.ptr(s))?,
        }
        drop(sorted);
        let mut max_tasks = 0u32;
        self.download_into(&maxc, 0, as_bytes_mut(std::slice::from_mut(&mut max_tasks)))?;
        // Reduce each crossing bucket's partials in parallel, level by level (a skewed bucket,
        // e.g. all scalars equal, has many partials), until every bucket has at most one.
        let (mut cnt, mut off) = (cnt, off);
        while max_tasks > 1 {
            let t2 = 16u32;
            let (cnt2, off2, total2, max2) = self.plan_tasks(&cnt, nbt, t2)?;
            let tasks2 = self.alloc((total2 as usize).max(1) * 8)?;
            launch!(self, self.f.msm_task_fill, cfg(grid(nbt as u64, 256), 256, 0);
                off.ptr(s), cnt.ptr(s), off2.ptr(s), nbt, t2, tasks2.ptr(s))?;
            let vals2 = self.alloc((total2 as usize).max(1) * xb)?;
            launch!(self, cf.sum_ranges, cfg(grid(total2, 128), 128, 0);
                vals.ptr(s), tasks2.ptr(s), total2 as u32, vals2.ptr(s))?;
            (vals, cnt, off, max_tasks) = (vals2, cnt2, off2, max2);
        }
        launch!(self, cf.gather, cfg(grid(nbt as u64, 128), 128, 0);
            vals.ptr(s), off.ptr(s), cnt.ptr(s), nbt, buckets.ptr(s))?;
        if let Some(total) = &acc.shared {
            launch!(self, cf.bucket_add, cfg(grid(nbt as u64, 128), 128, 0);
                total.ptr(s), buckets.ptr(s), counts.ptr(s), nbt)?;
        }
        drop((vals, cnt, off, counts, offsets));
        Ok(())
    }

    /// The window sums of an MSM's buckets (see [`Self::msm_windows`]).
    pub(super) fn msm_reduce(&self, acc: MsmBuckets) -> Result<(Vec<u8>, u32, u32)> {
        let reducing = self.msm_reduce_launch(acc)?;
        self.msm_reduced(reducing)
    }

    /// Launches the reduction of an MSM's buckets on this `Gpu`'s stream, which must see
    /// them written (the same stream, or one that waited for theirs).
    pub(super) fn msm_reduce_launch(&self, acc: MsmBuckets) -> Result<Reducing> {
        let (curve, c) = (acc.curve, acc.c);
        let cf = &self.f.curve[curve as usize];
        let s = &self.stream;
        let xb = curve.xyzz_bytes();
        let nwin = num_windows(c);
        let nb = 1u32 << (c - 1);
        let buckets = acc.shared.unwrap_or(acc.pass);

        // Weighted per-window reduction, then group sums down to one point per window.
        let seg_len = 32u32;
        let nseg = nb.div_ceil(seg_len);
        let mut cur = self.alloc((nwin * nseg) as usize * xb)?;
        launch!(self, cf.reduce_segments, cfg(grid((nwin * nseg) as u64, 64), 64, 0);
            buckets.ptr(s), nb, nwin, seg_len, nseg, cur.ptr(s))?;
        let mut per = nseg;
        while per > 1 {
            let gsz = 32u32;
            let per_out = per.div_ceil(gsz);
            let next = self.alloc((nwin * per_out) as usize * xb)?;
            launch!(self, cf.sum_groups, cfg(grid((nwin * per_out) as u64, 64), 64, 0);
                cur.ptr(s), per, gsz, per_out, nwin, next.ptr(s))?;
            cur = next;
            per = per_out;
        }
        let jac = self.alloc(nwin as usize * xb / 4 * 3)?;
        launch!(self, cf.to_jacobian, cfg(1, 64, 0); cur.ptr(s), nwin, jac.ptr(s))?;
        Ok(Reducing {
            jac,
            c,
            nwin,
            _buckets: buckets,
            stream: self.stream.clone(),
        })
    }

    /// The window sums of a reduction launched on this `Gpu`'s stream, once it is done; its
    /// buckets are freed then.
    pub(super) fn msm_reduced(&self, r: Reducing) -> Result<(Vec<u8>, u32, u32)> {
        let mut out = vec![0u8; r.jac.bytes()];
        self.download_into(&r.jac, 0, &mut out)?;
        Ok((out, r.c, r.nwin))
    }

    /// MSM with scalars already on the device (Montgomery form, `n <= bases.len()`).
    pub fn msm_g1_device(
        &self,
        bases: &DeviceBases,
        scalars: &DevBuf,
        n: usize,
    ) -> Result<G1Projective> {
        self.msm_g1_ptr(bases, scalars.ptr(&self.stream), n)
    }

    /// [`Self::msm_g1_device`] with the scalars at a device address (inside a larger buffer).
    pub fn msm_g1_ptr(&self, bases: &DeviceBases, scalars: u64, n: usize) -> Result<G1Projective> {
        check_msm(bases, Curve::G1, n)?;
        if n == 0 {
            return Ok(G1Projective::identity());
        }
        let (raw, c, nwin) = self.msm_windows(bases.at(self, 0), scalars, n)?;
        Ok(combine(&raw, c, nwin, jac_g1))
    }

    pub fn msm_g2_device(
        &self,
        bases: &DeviceBases,
        scalars: &DevBuf,
        n: usize,
    ) -> Result<G2Projective> {
        check_msm(bases, Curve::G2, n)?;
        if n == 0 {
            return Ok(G2Projective::identity());
        }
        let (raw, c, nwin) = self.msm_windows(bases.at(self, 0), scalars.ptr(&self.stream), n)?;
        Ok(combine(&raw, c, nwin, jac_g2))
    }

    /// Uploads scalars through the pinned staging buffer.
    pub fn upload_scalars(&self, scalars: &[Scalar]) -> Result<DevBuf> {
        let mut d = self.alloc(scalars.len() * 32)?;
        self.with_staging(scalars.len() * 32, "a scalar upload", |p| {
            let ev = self.stage_upload(p, 0, as_bytes(scalars), &mut d, 0)?;
            self.stream.wait(&ev)?;
            self.copy.synchronize()?;
            Ok(())
        })?;
        Ok(d)
    }

    pub fn msm_g1(&self, bases: &DeviceBases, scalars: &[Scalar]) -> Result<G1Projective> {
        check_msm(bases, Curve::G1, scalars.len())?;
        let d = self.upload_scalars(scalars)?;
        self.msm_g1_device(bases, &d, scalars.len())
    }

    pub fn msm_g2(&self, bases: &DeviceBases, scalars: &[Scalar]) -> Result<G2Projective> {
        check_msm(bases, Curve::G2, scalars.len())?;
        let d = self.upload_scalars(scalars)?;
        self.msm_g2_device(bases, &d, scalars.len())
    }

    /// Uploads several scalar vectors in one pinned staging area; the compute stream waits for
    /// each before any later kernel, while the next vector's copy proceeds.
    pub fn upload_many(&self, vecs: &[&[Scalar]]) -> Result<Vec<DevBuf>> {
        let total: usize = vecs.iter().map(|v| v.len() * 32).sum();
        let mut out: Vec<DevBuf> = vecs
            .iter()
            .map(|v| self.alloc(v.len() * 32))
            .collect::<Result<_>>()?;
        self.with_staging(total, "scalar uploads", |p| {
            let mut off = 0;
            let mut evs = Vec::new();
            for (v, d) in vecs.iter().zip(out.iter_mut()) {
                evs.push(self.stage_upload(p, off, as_bytes(v), d, 0)?);
                off += v.len() * 32;
            }
            for ev in &evs {
                self.stream.wait(ev)?;
            }
            self.copy.synchronize()?;
            Ok(())
        })?;
        Ok(out)
    }
}

/// Views pinned staging bytes as points (blstrs affine points are `repr(transparent)` over
/// blst's `repr(C)` limb structs; the staging buffer is page-aligned).
fn as_points_mut<T>(bytes: &mut [u8]) -> &mut [T] {
    assert_eq!(bytes.len() % std::mem::size_of::<T>(), 0);
    assert_eq!(bytes.as_ptr() as usize % std::mem::align_of::<T>(), 0);
    // SAFETY: size and alignment checked above; every bit pattern written is a parsed point.
    unsafe {
        std::slice::from_raw_parts_mut(
            bytes.as_mut_ptr().cast::<T>(),
            bytes.len() / std::mem::size_of::<T>(),
        )
    }
}

fn check_msm(bases: &DeviceBases, curve: Curve, n: usize) -> Result<()> {
    check_bases((bases.curve, bases.len), curve, n)
}

/// An MSM of `n` scalars of `curve` over bases `(their curve, how many)`.
pub(super) fn check_bases((have, len): (Curve, usize), curve: Curve, n: usize) -> Result<()> {
    if have != curve {
        return Err(CudaError::Shape(format!(
            "{have:?} bases used for a {curve:?} MSM"
        )));
    }
    if n > len {
        return Err(CudaError::Shape(format!(
            "{n} scalars but only {len} bases"
        )));
    }
    if n >= 1 << 31 {
        return Err(CudaError::Shape(format!("MSM of {n} points exceeds 2^31")));
    }
    Ok(())
}

fn fp_from(raw: &[u8]) -> blst_fp {
    let l: [u64; 6] =
        std::array::from_fn(|i| u64::from_le_bytes(raw[8 * i..8 * i + 8].try_into().unwrap()));
    blst_fp { l }
}

pub(crate) fn jac_g1(raw: &[u8]) -> G1Projective {
    let f = |i: usize| Fp::from(fp_from(&raw[48 * i..48 * i + 48]));
    G1Projective::from_raw_unchecked(f(0), f(1), f(2))
}

pub(crate) fn jac_g2(raw: &[u8]) -> G2Projective {
    let f = |i: usize| {
        Fp2::from(blst_fp2 {
            fp: [
                fp_from(&raw[96 * i..96 * i + 48]),
                fp_from(&raw[96 * i + 48..96 * i + 96]),
            ],
        })
    };
    G2Projective::from_raw_unchecked(f(0), f(1), f(2))
}

/// sum_w 2^(c·w) W_w from the window sums (Horner, top window first).
pub(super) fn combine<G: Group>(raw: &[u8], c: u32, nwin: u32, conv: impl Fn(&[u8]) -> G) -> G {
    let sz = raw.len() / nwin as usize;
    let mut acc = G::identity();
    for w in (0..nwin as usize).rev() {
        for _ in 0..c {
            acc = acc.double();
        }
        acc += conv(&raw[w * sz..(w + 1) * sz]);
    }
    acc
}
