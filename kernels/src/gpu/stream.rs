//! MSMs in passes, and the parts of a key that stay in host memory and cross to the device pass
//! by pass: an SRS section's bases go up in double-buffered chunks on the copy stream, the copy
//! of the next chunk overlapping the MSM over this one; a matrix's rows go up in chunks for the
//! SpMV. The host copies are page-locked once per process and shared by every device.

use std::ops::Range;
use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine};
use cudarc::driver::CudaEvent;
use cuzk_prover::key::Srs;
use cuzk_prover::params::Query;
use cuzk_prover::r1cs::{Matrix, ShapeMatrices};
use group::Group;

use super::msm::{check_bases, combine, jac_g1, MsmBuckets, Reducing};
use super::pinned::Shared;
use super::spmv::LONG_ROW;
use super::window::{WindowBufs, WindowSource};
use super::{as_bytes, cfg, grid, Curve, DevBuf, DeviceBases, Gpu, HostPin, Result};
use crate::error::CudaError;
use crate::plan::MATRIX_CHUNK;

/// An SRS section's points in host memory (blst's affine layout, as the device reads them).
pub struct HostBases {
    points: Points,
    _pin: Option<Arc<HostPin>>,
    pinned: bool,
}

enum Points {
    G1(Arc<Vec<G1Affine>>),
    G2(Arc<Vec<G2Affine>>),
}

impl HostBases {
    pub fn curve(&self) -> Curve {
        match self.points {
            Points::G1(_) => Curve::G1,
            Points::G2(_) => Curve::G2,
        }
    }

    pub fn len(&self) -> usize {
        match &self.points {
            Points::G1(p) => p.len(),
            Points::G2(p) => p.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn bytes(&self) -> &[u8] {
        match &self.points {
            Points::G1(p) => as_bytes(p),
            Points::G2(p) => as_bytes(p),
        }
    }
}

/// Host copies of SRS sections by source, shared by every device while any key holds them;
/// made under the registry's lock, so two devices never make the same one twice.
static HOST_BASES: Shared<String, HostBases> = Shared::new();

/// Where an MSM's bases are.
#[derive(Clone, Copy)]
pub enum Bases<'a> {
    Device(&'a DeviceBases),
    Host(&'a HostBases),
}

impl Bases<'_> {
    fn curve_len(&self) -> (Curve, usize) {
        match self {
            Bases::Device(d) => (d.curve(), d.len()),
            Bases::Host(h) => (h.curve(), h.len()),
        }
    }
}

/// The bases of [`Gpu::msm_passes`]' passes: resident, or host bases with their two device
/// buffers and the copy events the compute stream waits for.
enum Source<'a> {
    Device(&'a DeviceBases),
    Host(&'a HostBases, [DevBuf; 2], [Option<CudaEvent>; 2]),
}

/// Where an MSM's scalars are on the device: from an address, or gathered from a witness at
/// the indices of a list (the A and B queries' variables); or made a pass at a time from a
/// witness in host memory, each pass's stretch of it in a window (`windows[i]`, witness
/// positions) and read there in order (L) or gathered at `indices`.
#[derive(Clone, Copy)]
pub enum Scalars<'a> {
    At(u64),
    Gather {
        witness: u64,
        indices: u64,
    },
    Window {
        from: &'a WindowSource<'a>,
        windows: &'a [Range<usize>],
        indices: Option<u64>,
    },
}

impl Gpu {
    /// Section `q` of `srs` in page-locked host memory, made once per process: a file's points
    /// are parsed on every core (no subgroup checks: files are checked when first admitted),
    /// points already in memory are locked where they are.
    pub fn host_bases(&self, srs: &Srs, q: Query) -> Result<Arc<HostBases>> {
        let source = match srs {
            Srs::Memory(p) => {
                let at = match q {
                    Query::H => Arc::as_ptr(&p.h) as usize,
                    Query::L => Arc::as_ptr(&p.l) as usize,
                    Query::A => Arc::as_ptr(&p.a) as usize,
                    Query::BG1 => Arc::as_ptr(&p.b_g1) as usize,
                    Query::BG2 => Arc::as_ptr(&p.b_g2) as usize,
                };
                format!("memory {at:#x}")
            }
            Srs::File(f) => format!("{} {q:?}", f.path().display()),
        };
        HOST_BASES.get_or_make(source, || {
            let points = match srs {
                Srs::Memory(p) => match q {
                    Query::H => Points::G1(p.h.clone()),
                    Query::L => Points::G1(p.l.clone()),
                    Query::A => Points::G1(p.a.clone()),
                    Query::BG1 => Points::G1(p.b_g1.clone()),
                    Query::BG2 => Points::G2(p.b_g2.clone()),
                },
                Srs::File(f) => {
                    let corrupt = |e: String| CudaError::Shape(format!("parameter file: {e}"));
                    let points = match q {
                        Query::BG2 => Points::G2(Arc::new(
                            cuzk_prover::params::parse_g2(f.raw(q), false).map_err(corrupt)?,
                        )),
                        _ => Points::G1(Arc::new(
                            cuzk_prover::params::parse_g1(f.raw(q), false).map_err(corrupt)?,
                        )),
                    };
                    f.release(q);
                    points
                }
            };
            let mut host = HostBases {
                points,
                _pin: None,
                pinned: false,
            };
            // SAFETY: the points are never moved or freed while `host` holds them and the pin.
            host._pin = unsafe { self.pin_shared(host.bytes(), "SRS points") };
            host.pinned = host._pin.is_some();
            Ok(Arc::new(host))
        })
    }

    /// `sum_i s_i P_i` over `n` points, `chunk` points a pass ([`Gpu::msm_batch`] of one).
    pub(crate) fn msm_passes<G: Group>(
        &self,
        bases: Bases<'_>,
        scalars: Scalars,
        n: usize,
        chunk: usize,
        conv: fn(&[u8]) -> G,
    ) -> Result<G> {
        let passes = crate::plan::fixed_passes(n, chunk);
        let mut sums = self.msm_batch(bases, &[scalars], n, &passes, None, conv)?;
        Ok(sums.pop().expect("one sum for one set of scalars"))
    }

    /// `sum_i s_i P_i` over `n` points for each set of scalars of `batch`, in `passes` (ranges
    /// of points, in order, covering all `n`), every pass's bases serving the whole batch; the
    /// passes of each set share one set of buckets where its scalars are dense
    /// (`Gpu::msm_accumulate`). Bases in host memory go up a pass at a time into two device
    /// buffers: the copy of pass i+1 runs on the copy stream while pass i's MSMs run (each
    /// waits on the host until its accumulation, the one kernel reading the bases, is done, so
    /// when pass i starts, the buffer pass i-1 read is free to be filled again). Scalars made
    /// in windows ([`Scalars::Window`]) share the buffers `windows`, sized by the caller.
    pub(crate) fn msm_batch<G: Group>(
        &self,
        bases: Bases<'_>,
        batch: &[Scalars],
        n: usize,
        ranges: &[Range<usize>],
        mut windows: Option<&mut WindowBufs>,
        conv: fn(&[u8]) -> G,
    ) -> Result<Vec<G>> {
        let (curve, len) = bases.curve_len();
        check_bases((curve, len), curve, n)?;
        if n == 0 || batch.is_empty() {
            return Ok(vec![G::identity(); batch.len()]);
        }
        if ranges.first().map(|r| r.start) != Some(0) || ranges.last().map(|r| r.end) != Some(n) {
            return Err(CudaError::Shape(format!(
                "MSM passes that do not cover its {n} points"
            )));
        }
        let chunk = ranges.iter().map(|r| r.len()).max().unwrap_or(1).max(1);
        let pb = curve.affine_bytes();
        let passes = ranges.len();
        let range = |i: usize| ranges[i].clone();
        // Where each pass's bases come from: host bases into two buffers (a second only when
        // there is a second pass).
        let mut source = match bases {
            Bases::Device(d) => Source::Device(d),
            Bases::Host(h) => {
                let second = if passes > 1 { chunk * pb } else { 0 };
                let mut bufs = [
                    self.alloc_on(&self.copy, chunk * pb)?,
                    self.alloc_on(&self.copy, second)?,
                ];
                let first = self.copy_points(h, range(0), &mut bufs[0])?;
                Source::Host(h, bufs, [Some(first), None])
            }
        };
        // One buffer for gathered scalars: the batch's MSMs of a pass run one after another.
        let gathers = |s: &Scalars| {
            matches!(
                s,
                Scalars::Gather { .. }
                    | Scalars::Window {
                        indices: Some(_),
                        ..
                    }
            )
        };
        let gathered = match batch.iter().any(gathers) {
            true => Some(self.alloc(chunk * 32)?),
            false => None,
        };
        let s = &self.stream;
        let reduced = |(raw, c, nwin): (Vec<u8>, u32, u32)| combine(&raw, c, nwin, conv);
        let mut sums = vec![G::identity(); batch.len()];
        let mut buckets: Vec<Option<MsmBuckets>> = batch.iter().map(|_| None).collect();
        // A pass of a witness's scalars is reduced on its own, by kernels of few threads whose
        // time is their latency (a few ms a pass, more in G2): they run on a second stream
        // while the next accumulation runs on this one. One reduction at a time is in flight,
        // of buckets narrower than the plan counts for a pass ([`MsmBuckets::narrow`]).
        let mut side: Option<Gpu> = None;
        let mut reducing: Option<(usize, Reducing)> = None;
        for i in 0..passes {
            let r = range(i);
            let (at, ready) = match &mut source {
                Source::Device(d) => (d.at(self, r.start).0, None),
                Source::Host(h, bufs, ready) => {
                    if i + 1 < passes {
                        let next = (i + 1) % 2;
                        ready[next] = Some(self.copy_points(h, range(i + 1), &mut bufs[next])?);
                    }
                    (bufs[i % 2].ptr(s), ready[i % 2].as_ref())
                }
            };
            for (k, (scalars, acc)) in batch.iter().zip(&mut buckets).enumerate() {
                let gather = |witness: u64, indices: u64| -> Result<u64> {
                    let out = gathered.as_ref().expect("made for gathered scalars");
                    let m = r.len() as u64;
                    launch!(self, self.f.gather_fr, cfg(grid(m, 256).min(1 << 16), 256, 0);
                        witness, indices + (r.start * 4) as u64, out.ptr(s), m)?;
                    Ok(out.ptr(s))
                };
                let sc = match *scalars {
                    Scalars::At(p) => p + (r.start * 32) as u64,
                    Scalars::Gather { witness, indices } => gather(witness, indices)?,
                    Scalars::Window {
                        from,
                        windows: stretches,
                        indices,
                    } => {
                        let bufs = windows.as_deref_mut().ok_or_else(|| {
                            CudaError::Shape("scalars made in windows without their buffers".into())
                        })?;
                        let w = stretches[i].clone();
                        let at = self.make_window(from, w.clone(), bufs)?;
                        match indices {
                            // The window holds positions from w.start on.
                            Some(indices) => gather(at - (w.start * 32) as u64, indices)?,
                            None => at,
                        }
                    }
                };
                // A pass that takes all its scratch waits for the reduction in flight first.
                let mut settle = || -> Result<()> {
                    if let (Some((j, done)), Some(side)) = (reducing.take(), &side) {
                        sums[j] += reduced(side.msm_reduced(done)?);
                    }
                    Ok(())
                };
                let bases = (at, curve, ready);
                self.msm_accumulate(bases, sc, r.len(), passes, acc, &mut settle)?;
                if let Some(alone) = acc.take_if(|b| !b.shared()) {
                    settle()?;
                    if alone.narrow(r.len()) {
                        if side.is_none() {
                            side = Some(self.lane()?);
                        }
                        let side = side.as_ref().expect("made above");
                        side.stream.wait(&self.stream.record_event(None)?)?;
                        reducing = Some((k, side.msm_reduce_launch(alone)?));
                    } else {
                        sums[k] += reduced(self.msm_reduce(alone)?);
                    }
                }
            }
        }
        if let (Some((j, done)), Some(side)) = (reducing, &side) {
            sums[j] += reduced(side.msm_reduced(done)?);
        }
        for (sum, acc) in sums.iter_mut().zip(buckets) {
            if let Some(shared) = acc {
                *sum += reduced(self.msm_reduce(shared)?);
            }
        }
        Ok(sums)
    }

    /// A G1 MSM in passes of `chunk` points, as a streaming plan runs it (here over resident
    /// bases), for checks and benchmarks of the passes.
    pub fn msm_g1_passes(
        &self,
        bases: &DeviceBases,
        scalars: &DevBuf,
        n: usize,
        chunk: usize,
    ) -> Result<G1Projective> {
        let at = Scalars::At(scalars.ptr(&self.stream));
        self.msm_passes(Bases::Device(bases), at, n, chunk, jac_g1)
    }

    /// G1 MSMs of several sets of scalars over resident bases, in passes of `chunk` points
    /// that serve them all, as a batch of a streaming plan runs them, for checks.
    pub fn msm_g1_batch_passes(
        &self,
        bases: &DeviceBases,
        scalars: &[&DevBuf],
        n: usize,
        chunk: usize,
    ) -> Result<Vec<G1Projective>> {
        let batch: Vec<Scalars> = scalars
            .iter()
            .map(|s| Scalars::At(s.ptr(&self.stream)))
            .collect();
        let passes = crate::plan::fixed_passes(n, chunk);
        self.msm_batch(Bases::Device(bases), &batch, n, &passes, None, jac_g1)
    }

    /// Points `r` of `h` into `buf` on the copy stream; the event the compute stream waits for.
    fn copy_points(&self, h: &HostBases, r: Range<usize>, buf: &mut DevBuf) -> Result<CudaEvent> {
        let pb = h.curve().affine_bytes();
        let src = &h.bytes()[r.start * pb..r.end * pb];
        self.copy_in(src, h.pinned, buf, "streamed SRS points")
    }

    /// `src` to the start of `dst` on the copy stream: by DMA from where it lies when pinned,
    /// else through the pinned staging (and waited for, so the staging is free again).
    fn copy_in(
        &self,
        src: &[u8],
        pinned: bool,
        dst: &mut DevBuf,
        what: &'static str,
    ) -> Result<CudaEvent> {
        if pinned {
            self.htod(&self.copy, src, &mut dst.buf.slice_mut(0..src.len()))?;
        } else {
            self.with_staging(src.len(), what, |p| {
                self.stage_upload(p, 0, src, dst, 0)?;
                Ok(self.copy.synchronize()?)
            })?;
        }
        Ok(self.copy.record_event(None)?)
    }
}

/// A constraint matrix in host memory, for SpMV in passes of whole rows.
pub struct HostMatrix {
    matrices: Arc<ShapeMatrices>,
    which: usize,
    passes: Vec<MatrixPass>,
    /// Every pass's rows of [`LONG_ROW`] entries or more, relative to its first row.
    long: DevBuf,
    _pins: Vec<Arc<HostPin>>,
    pinned: bool,
}

struct MatrixPass {
    rows: Range<usize>,
    entries: Range<usize>,
    long: Range<usize>,
}

impl HostMatrix {
    fn matrix(&self) -> &Matrix {
        match self.which {
            0 => &self.matrices.a,
            1 => &self.matrices.b,
            _ => &self.matrices.c,
        }
    }

    pub fn rows(&self) -> usize {
        self.matrix().rows()
    }
}

/// Passes of whole rows, each with at most `entries_bytes` of columns and coefficients and
/// half as many bytes of row offsets (a single longer row is a pass of its own).
fn matrix_passes(row_ptr: &[u32], entries_bytes: u64) -> Vec<(Range<usize>, Range<usize>)> {
    let rows = row_ptr.len().saturating_sub(1);
    // Columns and coefficients take 8 bytes an entry; row offsets 4 bytes a row.
    let max_entries = (entries_bytes / 8).max(1) as usize;
    let max_rows = max_entries;
    let mut out = Vec::new();
    let mut start = 0;
    while start < rows {
        let e0 = row_ptr[start] as usize;
        let mut end = start + 1;
        while end < rows && end - start < max_rows && row_ptr[end + 1] as usize - e0 <= max_entries
        {
            end += 1;
        }
        out.push((start..end, e0..row_ptr[end] as usize));
        start = end;
    }
    out
}

impl Gpu {
    /// Matrix `which` (0: A, 1: B, 2: C) of `matrices`, left in host memory (page-locked once
    /// per process) for [`Gpu::spmv_streamed`].
    pub fn host_matrix(&self, matrices: &Arc<ShapeMatrices>, which: usize) -> Result<HostMatrix> {
        let m = [&matrices.a, &matrices.b, &matrices.c][which];
        let mut passes = Vec::new();
        let mut long = Vec::new();
        for (rows, entries) in matrix_passes(&m.row_ptr, MATRIX_CHUNK) {
            let first = long.len();
            long.extend(
                rows.clone()
                    .filter(|&r| m.row_ptr[r + 1] - m.row_ptr[r] >= LONG_ROW)
                    .map(|r| (r - rows.start) as u32),
            );
            passes.push(MatrixPass {
                rows,
                entries,
                long: first..long.len(),
            });
        }
        // SAFETY: the vectors are never moved or freed while the matrices' Arc, held below, lives.
        let pins: Vec<Arc<HostPin>> =
            [as_bytes(&m.row_ptr), as_bytes(&m.cols), as_bytes(&m.coeffs)]
                .into_iter()
                .filter_map(|b| unsafe { self.pin_shared(b, "constraint matrix") })
                .collect();
        let pinned = pins.len()
            == [&m.row_ptr, &m.cols, &m.coeffs]
                .iter()
                .filter(|v| !v.is_empty())
                .count();
        Ok(HostMatrix {
            matrices: matrices.clone(),
            which,
            passes,
            long: self.upload(as_bytes(&long))?,
            _pins: pins,
            pinned,
        })
    }

    /// [`Gpu::spmv`] with the matrix in host memory: its rows go up a pass at a time into two
    /// sets of buffers, the copy of the next pass overlapping this pass's kernels.
    pub fn spmv_streamed(
        &self,
        m: &HostMatrix,
        table: &DevBuf,
        w: &DevBuf,
        out: &DevBuf,
        n_out: usize,
    ) -> Result<()> {
        let host = m.matrix();
        let s = &self.stream;
        if m.passes.is_empty() {
            // No rows: the kernel only zeroes the domain.
            return launch!(self, self.f.spmv_csr, cfg(grid(n_out as u64, 256).min(1 << 16), 256, 0);
                0u64, 0u64, 0u64, table.ptr(s), w.ptr(s), out.ptr(s), 0u32, n_out as u64, LONG_ROW);
        }
        let max_rows = m.passes.iter().map(|p| p.rows.len()).max().unwrap_or(0);
        let max_entries = m.passes.iter().map(|p| p.entries.len()).max().unwrap_or(0);
        let mut bufs = Vec::with_capacity(2);
        // A second set only when there is a second pass.
        for _ in 0..m.passes.len().min(2) {
            bufs.push([
                self.alloc_on(&self.copy, (max_rows + 1) * 4)?,
                self.alloc_on(&self.copy, max_entries * 4)?,
                self.alloc_on(&self.copy, max_entries * 4)?,
            ]);
        }
        let mut ready: [Option<CudaEvent>; 2] = [None, None];
        let mut done: [Option<CudaEvent>; 2] = [None, None];
        let copy =
            |i: usize, set: &mut [DevBuf; 3], after: Option<&CudaEvent>| -> Result<CudaEvent> {
                let p = &m.passes[i];
                if let Some(ev) = after {
                    // The kernels that read this set two passes ago.
                    self.copy.wait(ev)?;
                }
                let parts = [
                    as_bytes(&host.row_ptr[p.rows.start..=p.rows.end]),
                    as_bytes(&host.cols[p.entries.clone()]),
                    as_bytes(&host.coeffs[p.entries.clone()]),
                ];
                let mut ev = None;
                for (src, dst) in parts.into_iter().zip(set.iter_mut()) {
                    ev = Some(self.copy_in(src, m.pinned, dst, "streamed matrix rows")?);
                }
                Ok(ev.expect("three parts"))
            };
        ready[0] = Some(copy(0, &mut bufs[0], None)?);
        let last = m.passes.len() - 1;
        for (i, p) in m.passes.iter().enumerate() {
            if i < last {
                let j = (i + 1) % 2;
                ready[j] = Some(copy(i + 1, &mut bufs[j], done[j].as_ref())?);
            }
            s.wait(ready[i % 2].as_ref().expect("copied"))?;
            let [row_ptr, cols, coeffs] = &bufs[i % 2];
            // Entry k of the matrix is at k - (the pass's first entry) in the pass's buffers;
            // the kernels index by k.
            let shift = (p.entries.start * 4) as u64;
            let (cols, coeffs) = (
                cols.ptr(s).wrapping_sub(shift),
                coeffs.ptr(s).wrapping_sub(shift),
            );
            let at = self.ptr_at(out, p.rows.start * 32);
            let rows = p.rows.len();
            // The last pass also zeroes the padding of the domain.
            let n = if i == last {
                n_out - p.rows.start
            } else {
                rows
            };
            launch!(self, self.f.spmv_csr, cfg(grid(n as u64, 256).min(1 << 16), 256, 0);
                row_ptr.ptr(s), cols, coeffs, table.ptr(s), w.ptr(s), at, rows as u32, n as u64, LONG_ROW)?;
            if !p.long.is_empty() {
                let long = self.ptr_at(&m.long, p.long.start * 4);
                let nl = p.long.len();
                launch!(self, self.f.spmv_long_rows, cfg(grid(nl as u64 * 32, 256).min(1 << 16), 256, 0);
                    row_ptr.ptr(s), cols, coeffs, table.ptr(s), w.ptr(s), at, long, nl as u32)?;
            }
            done[i % 2] = Some(s.record_event(None)?);
        }
        // The buffers are freed on the copy stream: it must not free them under the kernels.
        s.synchronize()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_passes_cover_every_row_in_order_within_their_bytes() {
        // Rows of 0..7 entries, and one long row of 100.
        let mut row_ptr = vec![0u32];
        for r in 0..1000u32 {
            let n = if r == 500 { 100 } else { r % 8 };
            row_ptr.push(row_ptr.last().unwrap() + n);
        }
        let passes = matrix_passes(&row_ptr, 8 * 64);
        let mut next = 0;
        for (rows, entries) in &passes {
            assert_eq!(rows.start, next);
            assert!(!rows.is_empty());
            assert_eq!(entries.start, row_ptr[rows.start] as usize);
            assert_eq!(entries.end, row_ptr[rows.end] as usize);
            assert!(
                entries.len() <= 64 || rows.len() == 1,
                "{rows:?} {entries:?}"
            );
            next = rows.end;
        }
        assert_eq!(next, 1000);
        assert!(passes.iter().any(|(r, e)| r.len() == 1 && e.len() == 100));
        assert!(matrix_passes(&[0], 64).is_empty());
    }
}
