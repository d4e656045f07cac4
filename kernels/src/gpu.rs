//! Device side: the embedded fatbin on cudarc, NTTs, the H pipeline and Pippenger MSMs.

use std::sync::{Arc, Mutex, PoisonError};

use blst::{blst_fp, blst_fp2};
use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
    LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use ff::{Field, PrimeField};
use group::Group;
use rayon::prelude::*;

use crate::digits::{num_windows, window_bits};
use crate::error::CudaError;

static FATBIN: &[u8] = include_bytes!(env!("CUZK_FATBIN"));

pub(crate) type Result<T> = std::result::Result<T, CudaError>;

/// Which group an MSM runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Curve {
    G1,
    G2,
}

impl Curve {
    /// Bytes of one affine base (blst layout: x, y in Montgomery form; identity = all zero).
    pub fn affine_bytes(self) -> usize {
        match self {
            Curve::G1 => 96,
            Curve::G2 => 192,
        }
    }
    fn xyzz_bytes(self) -> usize {
        2 * self.affine_bytes()
    }
    fn suffix(self) -> &'static str {
        match self {
            Curve::G1 => "g1",
            Curve::G2 => "g2",
        }
    }
}

/// A device allocation in bytes.
pub struct DevBuf {
    buf: CudaSlice<u8>,
}

impl DevBuf {
    pub fn ptr(&self, s: &CudaStream) -> u64 {
        let (p, _sync) = self.buf.device_ptr(s);
        p
    }
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }
}

/// Affine bases resident on the device.
pub struct DeviceBases {
    pub(crate) buf: Option<DevBuf>,
    pub(crate) len: usize,
    pub(crate) curve: Curve,
}

impl DeviceBases {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn bytes(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.bytes())
    }
}

struct Funcs {
    ntt_bitrev: CudaFunction,
    ntt_pass: CudaFunction,
    fr_powers: CudaFunction,
    fr_mul_powers: CudaFunction,
    fr_scale: CudaFunction,
    h_pointwise: CudaFunction,
    scan_block: CudaFunction,
    scan_add: CudaFunction,
    msm_digits: CudaFunction,
    msm_scatter: CudaFunction,
    msm_task_count: CudaFunction,
    msm_task_fill: CudaFunction,
    msm_partial_ranges: CudaFunction,
    curve: [CurveFuncs; 2],
}

struct CurveFuncs {
    accumulate: CudaFunction,
    sum_ranges: CudaFunction,
    gather: CudaFunction,
    reduce_segments: CudaFunction,
    sum_groups: CudaFunction,
    to_jacobian: CudaFunction,
}

struct Twiddles {
    log: u32,
    fwd: DevBuf,
    inv: DevBuf,
}

/// Page-locked staging for scalar uploads, grown on demand and reused.
struct Staging {
    buf: Option<PinnedHostSlice<u8>>,
}

/// One GPU: context, streams, the loaded module and cached tables.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    copy: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    f: Funcs,
    tw: Mutex<Option<Twiddles>>,
    staging: Mutex<Staging>,
    name: String,
}

fn grid(n: u64, block: u32) -> u32 {
    n.div_ceil(block as u64).max(1).min(u32::MAX as u64) as u32
}

fn cfg(grid: u32, block: u32, smem: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: smem,
    }
}

macro_rules! launch {
    ($s:expr, $f:expr, $cfg:expr; $($a:expr),* $(,)?) => {{
        let mut b = $s.stream.launch_builder(&$f);
        $( let v = $a; b.arg(&v); )*
        #[allow(unused_unsafe)]
        unsafe { b.launch($cfg) }.map(|_| ()).map_err(CudaError::from)
    }};
}

/// Views a slice of plain-old-data field/curve elements as bytes.
pub(crate) fn as_bytes<T>(v: &[T]) -> &[u8] {
    // SAFETY: only used on blstrs Scalar / G1Affine / G2Affine, `repr(transparent)` wrappers of
    // blst's `repr(C)` limb structs with no padding.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn as_bytes_mut<T>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as above; every bit pattern written comes from the device's field elements.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Table lo[j] = base^j (j < 4096), hi[j] = scale · base^(4096 j) (j < ceil(n / 4096)).
fn pow_tables(base: Scalar, scale: Scalar, n: u64) -> (Vec<Scalar>, Vec<Scalar>) {
    let mut lo = Vec::with_capacity(4096);
    let mut acc = Scalar::ONE;
    for _ in 0..4096 {
        lo.push(acc);
        acc *= base;
    }
    let step = acc; // base^4096
    let nh = n.div_ceil(4096).max(1) as usize;
    let mut hi = Vec::with_capacity(nh);
    let mut acc = scale;
    for _ in 0..nh {
        hi.push(acc);
        acc *= step;
    }
    (lo, hi)
}

/// Stream-ordered allocations come from the device's default memory pool; by default it hands
/// memory back to the driver at every synchronisation, so each call would map its scratch
/// buffers anew. Keep freed memory in the pool instead (best effort).
fn keep_pool_memory(ctx: &Arc<CudaContext>) {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS
        {
            let mut v: u64 = u64::MAX;
            let _ = sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut v as *mut u64).cast(),
            );
        }
    }
}

pub fn driver_present() -> bool {
    // SAFETY: only probes whether the library can be opened.
    unsafe { sys::is_culib_present() }
}

pub fn device_count() -> usize {
    if !driver_present() {
        return 0;
    }
    CudaContext::device_count()
        .map(|n| n.max(0) as usize)
        .unwrap_or(0)
}

impl Gpu {
    pub fn new(ordinal: usize) -> Result<Self> {
        if !driver_present() {
            return Err(CudaError::NoDriver);
        }
        let count = device_count();
        if ordinal >= count {
            return Err(CudaError::NoDevice(ordinal, count));
        }
        let ctx = CudaContext::new(ordinal)?;
        // All cross-stream ordering is explicit (events below).
        unsafe { ctx.disable_event_tracking() };
        keep_pool_memory(&ctx);
        let stream = ctx.new_stream()?;
        let copy = ctx.new_stream()?;
        let module = ctx.load_module(Ptx::from_binary(FATBIN.to_vec()))?;
        let lf = |n: &str| module.load_function(n).map_err(CudaError::from);
        let cf = |c: Curve| -> Result<CurveFuncs> {
            let s = c.suffix();
            Ok(CurveFuncs {
                accumulate: lf(&format!("msm_accumulate_{s}"))?,
                sum_ranges: lf(&format!("msm_sum_ranges_{s}"))?,
                gather: lf(&format!("msm_gather_{s}"))?,
                reduce_segments: lf(&format!("msm_reduce_segments_{s}"))?,
                sum_groups: lf(&format!("msm_sum_groups_{s}"))?,
                to_jacobian: lf(&format!("msm_to_jacobian_{s}"))?,
            })
        };
        let f = Funcs {
            ntt_bitrev: lf("ntt_bitrev")?,
            ntt_pass: lf("ntt_pass")?,
            fr_powers: lf("fr_powers")?,
            fr_mul_powers: lf("fr_mul_powers")?,
            fr_scale: lf("fr_scale")?,
            h_pointwise: lf("h_pointwise")?,
            scan_block: lf("scan_block")?,
            scan_add: lf("scan_add")?,
            msm_digits: lf("msm_digits")?,
            msm_scatter: lf("msm_scatter")?,
            msm_task_count: lf("msm_task_count")?,
            msm_task_fill: lf("msm_task_fill")?,
            msm_partial_ranges: lf("msm_partial_ranges")?,
            curve: [cf(Curve::G1)?, cf(Curve::G2)?],
        };
        let name = ctx.name().unwrap_or_else(|_| "unknown".into());
        Ok(Gpu {
            ctx,
            stream,
            copy,
            _module: module,
            f,
            tw: Mutex::new(None),
            staging: Mutex::new(Staging { buf: None }),
            name,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// (free, total) device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        Ok(self.ctx.mem_get_info()?)
    }

    pub fn synchronize(&self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }

    pub fn alloc(&self, bytes: usize) -> Result<DevBuf> {
        let buf = unsafe { self.stream.alloc::<u8>(bytes.max(1)) }?;
        Ok(DevBuf { buf })
    }

    fn alloc_zeroed(&self, bytes: usize) -> Result<DevBuf> {
        let mut buf = self.alloc(bytes)?;
        self.stream.memset_zeros(&mut buf.buf)?;
        Ok(buf)
    }

    /// Synchronous upload of host bytes (pageable) on the compute stream.
    pub fn upload(&self, bytes: &[u8]) -> Result<DevBuf> {
        let mut b = self.alloc(bytes.len())?;
        if !bytes.is_empty() {
            self.stream.memcpy_htod(bytes, &mut b.buf)?;
        }
        Ok(b)
    }

    fn download_into(&self, src: &DevBuf, offset: usize, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let view = src.buf.slice(offset..offset + dst.len());
        self.stream.memcpy_dtoh(&view, dst)?;
        self.stream.synchronize()?;
        Ok(())
    }

    /// Runs `f` with a pinned staging buffer of at least `bytes`.
    fn with_staging<R>(
        &self,
        bytes: usize,
        f: impl FnOnce(&mut PinnedHostSlice<u8>) -> Result<R>,
    ) -> Result<R> {
        let mut st = self.staging.lock().unwrap_or_else(PoisonError::into_inner);
        if st.buf.as_ref().is_none_or(|b| b.len() < bytes) {
            st.buf = None;
            // write-combined page-locked memory: fast to fill and to upload.
            st.buf = Some(unsafe { self.ctx.alloc_pinned::<u8>(bytes.max(1 << 20)) }?);
        }
        f(st.buf.as_mut().unwrap())
    }

    /// Copies host bytes into the staging buffer at `off` (parallel) and uploads them on the copy
    /// stream into `dst`; returns an event the compute stream can wait on.
    fn stage_upload(
        &self,
        pinned: &mut PinnedHostSlice<u8>,
        off: usize,
        src: &[u8],
        dst: &mut DevBuf,
        dst_off: usize,
    ) -> Result<CudaEvent> {
        if !src.is_empty() {
            {
                let host = pinned.as_mut_slice()?;
                host[off..off + src.len()]
                    .par_chunks_mut(1 << 22)
                    .zip(src.par_chunks(1 << 22))
                    .for_each(|(d, s)| d.copy_from_slice(s));
            }
            let host = pinned.as_slice()?;
            let mut view = dst.buf.slice_mut(dst_off..dst_off + src.len());
            self.copy
                .memcpy_htod(&host[off..off + src.len()], &mut view)?;
        }
        Ok(self.copy.record_event(None)?)
    }

    // ---------------------------------------------------------------- NTT

    fn twiddles(&self, logn: u32) -> Result<std::sync::MutexGuard<'_, Option<Twiddles>>> {
        let mut tw = self.tw.lock().unwrap_or_else(PoisonError::into_inner);
        if tw.as_ref().is_none_or(|t| t.log < logn) {
            *tw = None;
            let log = logn.max(1);
            let half = 1u64 << (log - 1);
            let w = cuzk_prover::cpu::omega(log);
            let make = |base: Scalar| -> Result<DevBuf> {
                let out = self.alloc((half * 32) as usize)?;
                let (lo, hi) = pow_tables(base, Scalar::ONE, half);
                let dlo = self.upload(as_bytes(&lo))?;
                let dhi = self.upload(as_bytes(&hi))?;
                let s = &self.stream;
                launch!(self, self.f.fr_powers, cfg(grid(half, 256).min(1 << 16), 256, 0);
                    out.ptr(s), half, dlo.ptr(s), dhi.ptr(s))?;
                self.stream.synchronize()?;
                Ok(out)
            };
            let fwd = make(w)?;
            let inv = make(w.invert().unwrap())?;
            *tw = Some(Twiddles { log, fwd, inv });
        }
        Ok(tw)
    }

    /// Natural-order in-place (inverse) transform without the 1/n factor.
    fn ntt_core(&self, x: u64, logn: u32, inverse: bool) -> Result<()> {
        if logn == 0 {
            return Ok(());
        }
        let n = 1u64 << logn;
        let tw = self.twiddles(logn)?;
        let t = tw.as_ref().unwrap();
        let table = if inverse { &t.inv } else { &t.fwd };
        let s = &self.stream;
        launch!(self, self.f.ntt_bitrev, cfg(grid(n, 256).min(1 << 16), 256, 0); x, logn)?;
        let mut s0 = 0u32;
        while s0 < logn {
            let lb = s0.min(3);
            let k = (10 - lb).min(logn - s0);
            let e = 1u64 << (k + lb);
            launch!(self, self.f.ntt_pass, cfg((n / e) as u32, 256, (e * 32) as u32);
                x, table.ptr(s), logn, t.log, s0, k, lb)?;
            s0 += k;
        }
        Ok(())
    }

    fn mul_powers(&self, x: u64, n: u64, base: Scalar, scale: Scalar) -> Result<(DevBuf, DevBuf)> {
        let (lo, hi) = pow_tables(base, scale, n);
        let dlo = self.upload(as_bytes(&lo))?;
        let dhi = self.upload(as_bytes(&hi))?;
        let s = &self.stream;
        launch!(self, self.f.fr_mul_powers, cfg(grid(n, 256).min(1 << 16), 256, 0);
            x, n, dlo.ptr(s), dhi.ptr(s))?;
        // keep the tables alive until the kernel has run
        Ok((dlo, dhi))
    }

    /// Runs one of the four transforms on a power-of-two vector held on the device.
    pub fn transform_device(&self, x: &DevBuf, logn: u32, kind: NttKind) -> Result<()> {
        let n = 1u64 << logn;
        let p = x.ptr(&self.stream);
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let n_inv = Scalar::from(n).invert().unwrap();
        // Tables the launches read stay alive until the stream is synchronised below.
        let _keep = match kind {
            NttKind::Forward => {
                self.ntt_core(p, logn, false)?;
                None
            }
            NttKind::Inverse => {
                self.ntt_core(p, logn, true)?;
                let c = self.upload(as_bytes(&[n_inv]))?;
                launch!(self, self.f.fr_scale, cfg(grid(n, 256).min(1 << 16), 256, 0);
                    p, n, c.ptr(&self.stream))?;
                Some((c, None))
            }
            NttKind::Coset => {
                let t = self.mul_powers(p, n, g, Scalar::ONE)?;
                self.ntt_core(p, logn, false)?;
                Some((t.0, Some(t.1)))
            }
            NttKind::InverseCoset => {
                self.ntt_core(p, logn, true)?;
                let t = self.mul_powers(p, n, g.invert().unwrap(), n_inv)?;
                Some((t.0, Some(t.1)))
            }
        };
        self.stream.synchronize()?;
        Ok(())
    }

    /// Host-to-host transform (upload, transform, download); `v.len()` must be a power of two.
    pub fn transform(&self, v: &mut [Scalar], kind: NttKind) -> Result<()> {
        if !v.len().is_power_of_two() {
            return Err(CudaError::Shape(format!(
                "NTT length {} is not a power of two",
                v.len()
            )));
        }
        let logn = v.len().trailing_zeros();
        let x = self.upload(as_bytes(v))?;
        self.transform_device(&x, logn, kind)?;
        self.download_into(&x, 0, as_bytes_mut(v))
    }

    /// The H polynomial (design §3.3): returns m - 1 coefficients. a, b, c stay on the device
    /// between the seven transforms; uploads go through pinned memory on the copy stream so the
    /// next vector's upload overlaps the current vector's transforms.
    pub fn compute_h(&self, a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<Vec<Scalar>> {
        let n = a.len();
        if b.len() != n || c.len() != n {
            return Err(CudaError::Shape(format!(
                "constraint vectors differ in length: a={} b={} c={}",
                n,
                b.len(),
                c.len()
            )));
        }
        let (m, logm) =
            cuzk_prover::cpu::domain_size(n).map_err(|e| CudaError::Shape(e.to_string()))?;
        let m64 = m as u64;
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let m_inv = Scalar::from(m64).invert().unwrap();
        let z_inv = (g.pow_vartime([m64]) - Scalar::ONE).invert().unwrap();
        let bytes = m * 32;
        let mut bufs = [self.alloc(bytes)?, self.alloc(bytes)?, self.alloc(bytes)?];
        for d in bufs.iter_mut() {
            if n < m {
                let mut tail = d.buf.slice_mut(n * 32..bytes);
                self.stream.memset_zeros(&mut tail)?;
            }
        }
        // the zero tails must be written before the uploads land (different streams)
        let ev = self.stream.record_event(None)?;
        self.copy.wait(&ev)?;
        let (to_lo, to_hi) = pow_tables(g, m_inv, m64);
        let (from_lo, from_hi) = pow_tables(g.invert().unwrap(), m_inv, m64);
        let tabs: Vec<DevBuf> = [&to_lo, &to_hi, &from_lo, &from_hi]
            .iter()
            .map(|t| self.upload(as_bytes(t)))
            .collect::<Result<_>>()?;
        let zbuf = self.upload(as_bytes(&[z_inv]))?;
        let s = &self.stream;
        let gr = grid(m64, 256).min(1 << 16);
        self.with_staging(3 * n * 32, |pinned| {
            for (i, v) in [a, b, c].into_iter().enumerate() {
                let ev = self.stage_upload(pinned, i * n * 32, as_bytes(v), &mut bufs[i], 0)?;
                self.stream.wait(&ev)?;
                let p = bufs[i].ptr(s);
                self.ntt_core(p, logm, true)?;
                launch!(self, self.f.fr_mul_powers, cfg(gr, 256, 0); p, m64, tabs[0].ptr(s), tabs[1].ptr(s))?;
                self.ntt_core(p, logm, false)?;
            }
            let (pa, pb, pc) = (bufs[0].ptr(s), bufs[1].ptr(s), bufs[2].ptr(s));
            launch!(self, self.f.h_pointwise, cfg(gr, 256, 0); pa, pb, pc, m64, zbuf.ptr(s))?;
            self.ntt_core(pa, logm, true)?;
            launch!(self, self.f.fr_mul_powers, cfg(gr, 256, 0); pa, m64, tabs[2].ptr(s), tabs[3].ptr(s))?;
            // the staging buffer may be reused once the uploads are done
            self.copy.synchronize()?;
            Ok(())
        })?;
        let mut h = vec![Scalar::ZERO; m - 1];
        self.download_into(&bufs[0], 0, as_bytes_mut(&mut h))?;
        Ok(h)
    }

    // ---------------------------------------------------------------- MSM

    /// Uploads affine bases (blst layout) to the device.
    pub fn upload_g1(&self, bases: &[G1Affine]) -> Result<DeviceBases> {
        assert_eq!(std::mem::size_of::<G1Affine>(), 96);
        self.upload_bases(as_bytes(bases), bases.len(), Curve::G1)
    }

    pub fn upload_g2(&self, bases: &[G2Affine]) -> Result<DeviceBases> {
        assert_eq!(std::mem::size_of::<G2Affine>(), 192);
        self.upload_bases(as_bytes(bases), bases.len(), Curve::G2)
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
    fn msm_windows(
        &self,
        bases: &DeviceBases,
        scalars: u64,
        n: usize,
    ) -> Result<(Vec<u8>, u32, u32)> {
        let curve = bases.curve;
        let cf = &self.f.curve[curve as usize];
        let s = &self.stream;
        let c = window_bits(n);
        let nwin = num_windows(c);
        let nb = 1u32 << (c - 1);
        let nbt = nwin * nb;
        let n32 = n as u32;
        // Counting sort by (window, bucket): digits with their rank in the bucket, offsets,
        // then every entry straight to its place.
        let digits = self.alloc(n * nwin as usize * 8)?;
        let counts = self.alloc_zeroed(nbt as usize * 4)?;
        let offsets = self.alloc(nbt as usize * 4)?;
        let sorted = self.alloc(n * nwin as usize * 4)?;
        launch!(self, self.f.msm_digits, cfg(grid(n as u64, 256), 256, 0);
            scalars, n32, c, nwin, digits.ptr(s), counts.ptr(s))?;
        self.scan(counts.ptr(s), offsets.ptr(s), nbt as u64)?;
        launch!(self, self.f.msm_scatter, cfg(grid(n as u64, 256), 256, 0);
            digits.ptr(s), n32, c, nwin, offsets.ptr(s), sorted.ptr(s))?;
        drop(digits);

        // Equal-length chunks of the sorted entries, one per thread; L is as long as keeps a few
        // waves of threads in flight (long chunks leave fewer crossing buckets to reduce).
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
        let chunk = (total / 200_000).clamp(8, 128) as u32;
        let nchunks = total.div_ceil(chunk as u64);
        let xb = curve.xyzz_bytes();
        let buckets = self.alloc_zeroed(nbt as usize * xb)?;
        let mut vals = self.alloc((2 * nchunks as usize).max(1) * xb)?;
        let (cnt, off) = (self.alloc(nbt as usize * 4)?, self.alloc(nbt as usize * 4)?);
        let maxc = self.alloc_zeroed(4)?;
        launch!(self, self.f.msm_partial_ranges, cfg(grid(nbt as u64, 256), 256, 0);
            offsets.ptr(s), counts.ptr(s), nbt, chunk, cnt.ptr(s), off.ptr(s), maxc.ptr(s))?;
        if total > 0 {
            launch!(self, cf.accumulate, cfg(grid(nchunks, 128), 128, 0);
                bases.buf.as_ref().unwrap().ptr(s), sorted.ptr(s), offsets.ptr(s), nbt,
                total as u32, chunk, buckets.ptr(s), vals.ptr(s))?;
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
        drop((vals, cnt, off));

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
        let mut out = vec![0u8; nwin as usize * xb / 4 * 3];
        self.download_into(&jac, 0, &mut out)?;
        drop((counts, offsets, buckets));
        Ok((out, c, nwin))
    }

    /// MSM with scalars already on the device (Montgomery form, `n <= bases.len()`).
    pub fn msm_g1_device(
        &self,
        bases: &DeviceBases,
        scalars: &DevBuf,
        n: usize,
    ) -> Result<G1Projective> {
        check_msm(bases, Curve::G1, n)?;
        if n == 0 {
            return Ok(G1Projective::identity());
        }
        let (raw, c, nwin) = self.msm_windows(bases, scalars.ptr(&self.stream), n)?;
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
        let (raw, c, nwin) = self.msm_windows(bases, scalars.ptr(&self.stream), n)?;
        Ok(combine(&raw, c, nwin, jac_g2))
    }

    /// Uploads scalars through the pinned staging buffer.
    pub fn upload_scalars(&self, scalars: &[Scalar]) -> Result<DevBuf> {
        let mut d = self.alloc(scalars.len() * 32)?;
        self.with_staging(scalars.len() * 32, |p| {
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
        self.with_staging(total, |p| {
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

/// Which transform `transform` runs (bellperson's fft / ifft / coset_fft / icoset_fft).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NttKind {
    Forward,
    Inverse,
    Coset,
    InverseCoset,
}

fn check_msm(bases: &DeviceBases, curve: Curve, n: usize) -> Result<()> {
    if bases.curve != curve {
        return Err(CudaError::Shape(format!(
            "{:?} bases used for a {curve:?} MSM",
            bases.curve
        )));
    }
    if n > bases.len {
        return Err(CudaError::Shape(format!(
            "{n} scalars but only {} bases",
            bases.len
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

fn jac_g1(raw: &[u8]) -> G1Projective {
    let f = |i: usize| Fp::from(fp_from(&raw[48 * i..48 * i + 48]));
    G1Projective::from_raw_unchecked(f(0), f(1), f(2))
}

fn jac_g2(raw: &[u8]) -> G2Projective {
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
fn combine<G: Group>(raw: &[u8], c: u32, nwin: u32, conv: impl Fn(&[u8]) -> G) -> G {
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
