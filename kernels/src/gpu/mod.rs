//! Device side: the embedded fatbin on cudarc, device buffers and pinned staging; the kernels'
//! Rust faces live in the submodules (NTTs and the H pipeline, Pippenger MSMs, the sparse
//! products and gathers).

pub use crate::digits::Accumulation;
pub use account::DeviceMemory;
pub(crate) use msm::{jac_g1, jac_g2};
pub use ntt::NttKind;
pub use pinned::HostPin;
pub use spmv::{long_rows, DeviceMatrix};
pub use stream::{Bases, HostBases, HostMatrix, Scalars};
pub use window::{compact_bytes, WindowBufs, WindowSource};

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blstrs::Scalar;
use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
    DevicePtrMut, LaunchConfig, PinnedHostSlice,
};
use cudarc::nvrtc::Ptx;
use ff::Field;
use rayon::prelude::*;

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

/// A device allocation in bytes, counted against the device's budget until it is dropped.
pub struct DevBuf {
    buf: CudaSlice<u8>,
    _charge: account::Charge,
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

impl Gpu {
    /// The device address `offset` bytes into `buf`, for kernels reading part of it.
    pub fn ptr_at(&self, buf: &DevBuf, offset: usize) -> u64 {
        assert!(offset <= buf.bytes(), "offset past the buffer");
        buf.ptr(&self.stream) + offset as u64
    }
}

/// Affine bases resident on the device.
pub struct DeviceBases {
    pub(crate) buf: Option<DevBuf>,
    pub(crate) len: usize,
    pub(crate) curve: Curve,
}

impl DeviceBases {
    /// The device address of point `i` and the curve: an MSM pass over the points from `i`.
    pub(crate) fn at(&self, gpu: &Gpu, i: usize) -> (u64, Curve) {
        let base = self.buf.as_ref().map_or(0, |b| b.ptr(&gpu.stream));
        (base + (i * self.curve.affine_bytes()) as u64, self.curve)
    }

    pub fn curve(&self) -> Curve {
        self.curve
    }

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
    h_product: CudaFunction,
    h_finish: CudaFunction,
    scan_block: CudaFunction,
    scan_add: CudaFunction,
    msm_classify: CudaFunction,
    msm_compact: CudaFunction,
    msm_count: CudaFunction,
    msm_coarse: CudaFunction,
    msm_fine: CudaFunction,
    msm_bin_starts: CudaFunction,
    msm_task_count: CudaFunction,
    msm_task_fill: CudaFunction,
    msm_partial_ranges: CudaFunction,
    spmv_csr: CudaFunction,
    spmv_long_rows: CudaFunction,
    gather_fr: CudaFunction,
    witness_expand: CudaFunction,
    fixed_base_g1: CudaFunction,
    fixed_base_g2: CudaFunction,
    to_affine_g1: CudaFunction,
    to_affine_g2: CudaFunction,
    encode_uncompressed_g1: CudaFunction,
    encode_uncompressed_g2: CudaFunction,
    curve: [CurveFuncs; 2],
    /// The batch-affine G1 accumulation's instances (digits::AFFINE_CHUNKS_PER_THREAD).
    affine: [AffineFunc; 2],
}

/// A batch-affine accumulation instance and how many of its blocks the device runs at once.
struct AffineFunc {
    f: CudaFunction,
    blocks: u32,
}

struct CurveFuncs {
    accumulate: CudaFunction,
    /// A pass's buckets added to an MSM's (kernels/cuda/msm.cuh).
    bucket_add: CudaFunction,
    sum_ranges: CudaFunction,
    gather: CudaFunction,
    reduce_segments: CudaFunction,
    sum_groups: CudaFunction,
    to_jacobian: CudaFunction,
}

/// A device step taking longer than this is logged (`Gpu::note_slow`).
const SLOW_STEP: Duration = Duration::from_millis(300);

struct Twiddles {
    log: u32,
    fwd: DevBuf,
    inv: DevBuf,
}

/// Page-locked staging for scalar uploads, grown on demand and reused.
struct Staging {
    buf: Option<PinnedHostSlice<u8>>,
    /// What last took it: named when another upload waits long for it.
    holder: &'static str,
}

/// One GPU: context, streams, the loaded module and cached tables. A [`Gpu::lane`] of it
/// shares the context, the module, the memory account and the settings, with streams, twiddles
/// and staging of its own.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    copy: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    f: Arc<Funcs>,
    tw: Mutex<Option<Twiddles>>,
    staging: Mutex<Staging>,
    /// Fixed-base tables of the generators (parameter generation only).
    fb: Mutex<Option<fixed_base::Tables>>,
    /// MSM window width set by a benchmark (`set_msm_window`); 0: by size (`window_bits`).
    msm_window: Arc<AtomicU32>,
    /// Whether dense MSMs in passes share one set of buckets (`set_shared_passes`).
    shared_passes: Arc<AtomicBool>,
    /// How G1 MSMs accumulate their buckets (`set_accumulation`, an [`Accumulation`]).
    accumulation: Arc<AtomicU8>,
    /// Every device allocation, against the budget.
    memory: Arc<DeviceMemory>,
    /// Bytes copied from the host to this device, for the node's transfer figures.
    h2d: Arc<AtomicU64>,
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

/// `launch!(gpu, f, cfg; args)` on the compute stream, `launch!(on stream, f, cfg; args)` on another.
macro_rules! launch {
    (on $st:expr, $f:expr, $cfg:expr; $($a:expr),* $(,)?) => {{
        use cudarc::driver::PushKernelArg as _;
        let mut b = $st.launch_builder(&$f);
        $( let v = $a; b.arg(&v); )*
        // SAFETY: each call site passes the arguments its kernel's signature declares, in
        // order, and device buffers sized for the launch (the kernels' contracts in
        // kernels/cuda/).
        #[allow(unused_unsafe)]
        unsafe { b.launch($cfg) }.map(|_| ()).map_err($crate::error::CudaError::from)
    }};
    ($s:expr, $f:expr, $cfg:expr; $($a:expr),* $(,)?) => {{
        use cudarc::driver::PushKernelArg as _;
        let mut b = $s.stream.launch_builder(&$f);
        $( let v = $a; b.arg(&v); )*
        // SAFETY: each call site passes the arguments its kernel's signature declares, in
        // order, and device buffers sized for the launch (the kernels' contracts in
        // kernels/cuda/).
        #[allow(unused_unsafe)]
        unsafe { b.launch($cfg) }.map(|_| ()).map_err($crate::error::CudaError::from)
    }};
}

/// Plain data: every byte of a value is initialized (no padding) and every bit pattern the
/// device writes back is a valid value.
///
/// # Safety
/// Implement only for types with those two properties.
pub(crate) unsafe trait Plain: Copy {}

// SAFETY: integers have no padding and no invalid bit patterns.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}
// SAFETY: as above.
unsafe impl Plain for u64 {}
// SAFETY: blstrs' `Scalar`, `G1Affine` and `G2Affine` are `repr(transparent)` wrappers of
// blst's `repr(C)` structs of u64 limbs (and, for points, of such structs): no padding. The
// device writes back only field elements and points it computed in the same form.
unsafe impl Plain for blstrs::Scalar {}
// SAFETY: as above.
unsafe impl Plain for blstrs::G1Affine {}
// SAFETY: as above.
unsafe impl Plain for blstrs::G2Affine {}

/// Views a slice of plain data as bytes.
pub(crate) fn as_bytes<T: Plain>(v: &[T]) -> &[u8] {
    // SAFETY: `T: Plain` has no padding, so all `size_of_val(v)` bytes are initialized.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn as_bytes_mut<T: Plain>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as above, and any bytes written through the view leave valid `T`s (`Plain`).
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Stream-ordered allocations come from the device's default memory pool; by default it hands
/// memory back to the driver at every synchronisation, so each call would map its scratch
/// buffers anew. Keep freed memory in the pool up to `bytes` instead (best effort): with the
/// budget as the threshold, the pool never keeps more than the budget across a synchronisation.
fn set_pool_threshold(ctx: &Arc<CudaContext>, bytes: u64) {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: a device of this context, and an attribute that takes a u64.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS
        {
            let mut v: u64 = bytes;
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
        // SAFETY: no buffer of this context exists yet, and every later use of a buffer on
        // another stream than its writer's waits on an event recorded after the write.
        unsafe { ctx.disable_event_tracking() };
        set_pool_threshold(&ctx, u64::MAX);
        let stream = ctx.new_stream()?;
        let copy = ctx.new_stream()?;
        let module = ctx.load_module(Ptx::from_binary(FATBIN.to_vec()))?;
        let lf = |n: &str| module.load_function(n).map_err(CudaError::from);
        let cf = |c: Curve| -> Result<CurveFuncs> {
            let s = c.suffix();
            Ok(CurveFuncs {
                accumulate: lf(&format!("msm_accumulate_{s}"))?,
                bucket_add: lf(&format!("msm_bucket_add_{s}"))?,
                sum_ranges: lf(&format!("msm_sum_ranges_{s}"))?,
                gather: lf(&format!("msm_gather_{s}"))?,
                reduce_segments: lf(&format!("msm_reduce_segments_{s}"))?,
                sum_groups: lf(&format!("msm_sum_groups_{s}"))?,
                to_jacobian: lf(&format!("msm_to_jacobian_{s}"))?,
            })
        };
        let sms =
            ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let af = |i: usize| -> Result<AffineFunc> {
            let k = crate::digits::AFFINE_CHUNKS_PER_THREAD[i];
            let f = lf(&format!("msm_accumulate_affine_g1_k{k}"))?;
            let per_sm = f.occupancy_max_active_blocks_per_multiprocessor(
                crate::digits::AFFINE_BLOCK,
                0,
                None,
            )?;
            Ok(AffineFunc {
                f,
                blocks: per_sm * sms.max(0) as u32,
            })
        };
        let f = Arc::new(Funcs {
            ntt_bitrev: lf("ntt_bitrev")?,
            ntt_pass: lf("ntt_pass")?,
            fr_powers: lf("fr_powers")?,
            fr_mul_powers: lf("fr_mul_powers")?,
            fr_scale: lf("fr_scale")?,
            h_product: lf("h_product")?,
            h_finish: lf("h_finish")?,
            scan_block: lf("scan_block")?,
            scan_add: lf("scan_add")?,
            msm_classify: lf("msm_classify")?,
            msm_compact: lf("msm_compact")?,
            msm_count: lf("msm_count")?,
            msm_coarse: lf("msm_coarse")?,
            msm_fine: lf("msm_fine")?,
            msm_bin_starts: lf("msm_bin_starts")?,
            msm_task_count: lf("msm_task_count")?,
            msm_task_fill: lf("msm_task_fill")?,
            msm_partial_ranges: lf("msm_partial_ranges")?,
            spmv_csr: lf("spmv_csr")?,
            spmv_long_rows: lf("spmv_long_rows")?,
            gather_fr: lf("gather_fr")?,
            witness_expand: lf("witness_expand")?,
            fixed_base_g1: lf("fixed_base_g1")?,
            fixed_base_g2: lf("fixed_base_g2")?,
            to_affine_g1: lf("to_affine_g1")?,
            to_affine_g2: lf("to_affine_g2")?,
            encode_uncompressed_g1: lf("encode_uncompressed_g1")?,
            encode_uncompressed_g2: lf("encode_uncompressed_g2")?,
            curve: [cf(Curve::G1)?, cf(Curve::G2)?],
            affine: [af(0)?, af(1)?],
        });
        let name = ctx.name().unwrap_or_else(|_| "unknown".into());
        let (_, total) = ctx.mem_get_info()?;
        Ok(Gpu {
            ctx,
            stream,
            copy,
            _module: module,
            f,
            tw: Mutex::new(None),
            staging: Mutex::new(Staging {
                buf: None,
                holder: "nothing",
            }),
            fb: Mutex::new(None),
            msm_window: Arc::default(),
            shared_passes: Arc::new(AtomicBool::new(true)),
            accumulation: Arc::default(),
            memory: Arc::new(DeviceMemory::new(total as u64)),
            h2d: Arc::default(),
            name,
        })
    }

    /// Another lane on this device: a partition's kernels on its compute stream overlap those
    /// on this one's (and fill the gaps of their host round trips). Buffers are shared freely:
    /// every buffer handed from one lane to another is written by a copy or a kernel its writer
    /// has waited for.
    pub fn lane(&self) -> Result<Gpu> {
        Ok(Gpu {
            ctx: self.ctx.clone(),
            stream: self.ctx.new_stream()?,
            copy: self.ctx.new_stream()?,
            _module: self._module.clone(),
            f: self.f.clone(),
            tw: Mutex::new(None),
            staging: Mutex::new(Staging {
                buf: None,
                holder: "nothing",
            }),
            fb: Mutex::new(None),
            msm_window: self.msm_window.clone(),
            shared_passes: self.shared_passes.clone(),
            accumulation: self.accumulation.clone(),
            memory: self.memory.clone(),
            h2d: self.h2d.clone(),
            name: self.name.clone(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the passes of a dense MSM add up in one set of buckets (the default) or are
    /// each reduced alone, for benchmarks that compare the two.
    pub fn set_shared_passes(&self, on: bool) {
        self.shared_passes.store(on, Ordering::Relaxed);
    }

    /// How G1 MSMs accumulate their buckets ([`Accumulation::BySize`] unless set), for checks
    /// and benchmarks that compare the ways.
    pub fn set_accumulation(&self, a: Accumulation) {
        let v = match a {
            Accumulation::BySize => 0,
            Accumulation::Xyzz => 1,
            Accumulation::Affine(i) => 2 + i as u8,
        };
        self.accumulation.store(v, Ordering::Relaxed);
    }

    pub fn accumulation(&self) -> Accumulation {
        match self.accumulation.load(Ordering::Relaxed) {
            0 => Accumulation::BySize,
            1 => Accumulation::Xyzz,
            v => Accumulation::Affine(v as usize - 2),
        }
    }

    /// Fixes the MSM window width (`None`: chosen by size), for benchmarks that compare widths.
    pub fn set_msm_window(&self, c: Option<u32>) -> Result<()> {
        let c = c.unwrap_or(0);
        if c != 0 && !(crate::digits::MIN_WINDOW..=crate::digits::MAX_WINDOW).contains(&c) {
            return Err(CudaError::Shape(format!(
                "MSM window of {c} bits (from {} to {})",
                crate::digits::MIN_WINDOW,
                crate::digits::MAX_WINDOW
            )));
        }
        self.msm_window.store(c, Ordering::Relaxed);
        Ok(())
    }

    /// (free, total) device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        Ok(self.ctx.mem_get_info()?)
    }

    pub fn synchronize(&self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }

    pub fn alloc(&self, bytes: usize) -> Result<DevBuf> {
        self.alloc_on(&self.stream, bytes)
    }

    /// An allocation ordered on `stream`, refused when it would take the device past its
    /// budget ([`Gpu::set_budget`]).
    fn alloc_on(&self, stream: &Arc<CudaStream>, bytes: usize) -> Result<DevBuf> {
        let charge = self.memory.charge(bytes.max(1) as u64)?;
        // SAFETY: the bytes are written before any kernel or copy reads them.
        let buf = unsafe { stream.alloc::<u8>(bytes.max(1)) }?;
        Ok(DevBuf {
            buf,
            _charge: charge,
        })
    }

    /// Caps the device memory this `Gpu` allocates at `bytes`: an allocation past it fails
    /// with [`CudaError::OutOfMemory`], naming the numbers. The memory pool gives back what it
    /// keeps beyond the cap at each synchronisation.
    pub fn set_budget(&self, bytes: u64) {
        self.memory.set_budget(bytes);
        set_pool_threshold(&self.ctx, bytes);
    }

    pub fn memory(&self) -> &DeviceMemory {
        &self.memory
    }

    /// Bytes copied from the host to this device so far.
    pub fn h2d_bytes(&self) -> u64 {
        self.h2d.load(Ordering::Relaxed)
    }

    /// An asynchronous copy of `src` into `dst` on `stream`, counted.
    fn htod<D: DevicePtrMut<u8>>(
        &self,
        stream: &Arc<CudaStream>,
        src: &[u8],
        dst: &mut D,
    ) -> Result<()> {
        self.h2d.fetch_add(src.len() as u64, Ordering::Relaxed);
        Ok(stream.memcpy_htod(src, dst)?)
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
            self.htod(&self.stream, bytes, &mut b.buf)?;
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

    /// Uploads `parts` back to back into one new buffer on the copy stream, and waits for the
    /// copy: the buffer is ready for any stream. A part in pinned memory ([`Gpu::pin_host`]) is
    /// read where it lies; the others go through the pinned staging area.
    pub fn upload_concat(&self, parts: &[&[Scalar]]) -> Result<DevBuf> {
        let total: usize = parts.iter().map(|p| p.len() * 32).sum();
        let started = Instant::now();
        let mut d = self.alloc_on(&self.copy, total)?;
        self.note_slow("witness allocation", started);
        let started = Instant::now();
        let mut staged = Vec::new();
        let mut off = 0;
        for p in parts {
            let bytes = as_bytes(p);
            if pinned::is_pinned(bytes) {
                let mut view = d.buf.slice_mut(off..off + bytes.len());
                self.htod(&self.copy, bytes, &mut view)?;
            } else if !bytes.is_empty() {
                staged.push((off, bytes));
            }
            off += bytes.len();
        }
        if !staged.is_empty() {
            let bytes = staged.iter().map(|(_, b)| b.len()).sum();
            self.with_staging(bytes, "a witness upload", |pinned| {
                let mut at = 0;
                for (off, b) in &staged {
                    self.stage_upload(pinned, at, b, &mut d, *off)?;
                    at += b.len();
                }
                self.note_slow("copy into the pinned staging", started);
                // Waits for the direct copies too (one stream); the staging is free again after.
                self.copy.synchronize()?;
                Ok(())
            })?;
        } else {
            self.copy.synchronize()?;
        }
        self.note_slow("witness upload", started);
        Ok(d)
    }

    /// Names a device step that took far longer than it should: the two-GPU drain saw partitions
    /// stall for seconds in h2d and SpMV (docs/gpu-runs.md, "32 GiB PoRep partitions end to
    /// end"). Returns the time it was called.
    pub fn note_slow(&self, step: &str, started: Instant) -> Instant {
        let now = Instant::now();
        if now - started > SLOW_STEP {
            tracing::warn!(device = %self.name, step, ms = (now - started).as_millis() as u64,
                "slow device step");
        }
        now
    }

    /// `v` into a new buffer of `len >= v.len()` scalars, zero past `v`, through pinned staging.
    pub fn upload_padded(&self, v: &[Scalar], len: usize) -> Result<DevBuf> {
        let mut d = self.alloc(len * 32)?;
        if v.len() < len {
            let mut tail = d.buf.slice_mut(v.len() * 32..len * 32);
            self.stream.memset_zeros(&mut tail)?;
        }
        // The allocation and zeroing on the compute stream come before the copy.
        self.copy.wait(&self.stream.record_event(None)?)?;
        self.with_staging(v.len() * 32, "a padded upload", |pinned| {
            self.stage_upload(pinned, 0, as_bytes(v), &mut d, 0)?;
            self.copy.synchronize()?;
            Ok(())
        })?;
        Ok(d)
    }

    /// `n` scalars from the start of `src`.
    pub fn download_scalars(&self, src: &DevBuf, n: usize) -> Result<Vec<Scalar>> {
        let mut out = vec![Scalar::ZERO; n];
        self.download_into(src, 0, as_bytes_mut(&mut out))?;
        Ok(out)
    }

    /// Grows the pinned staging to `bytes` now, ahead of the upload that needs it.
    pub fn reserve_staging(&self, bytes: usize) -> Result<()> {
        self.with_staging(bytes, "a reservation", |_| Ok(()))
    }

    /// Maps `bytes` of device memory into the stream-ordered pool now: freed, they stay there
    /// (`keep_pool_memory`) for the buffers of the partitions to come.
    pub fn warm_pool(&self, bytes: usize) -> Result<()> {
        drop(self.alloc(bytes)?);
        self.synchronize()
    }

    /// Runs `f` with a pinned staging buffer of at least `bytes`, for `what`.
    fn with_staging<R>(
        &self,
        bytes: usize,
        what: &'static str,
        f: impl FnOnce(&mut PinnedHostSlice<u8>) -> Result<R>,
    ) -> Result<R> {
        let started = Instant::now();
        // A panic elsewhere while holding the lock leaves a buffer that is still fine to reuse.
        let mut st = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        if started.elapsed() > SLOW_STEP {
            self.note_slow(
                &format!("{what} waiting for the pinned staging after {}", st.holder),
                started,
            );
        }
        st.holder = what;
        if st.buf.as_ref().is_none_or(|b| b.len() < bytes) {
            let started = Instant::now();
            st.buf = None;
            // write-combined page-locked memory: fast to fill and to upload.
            // SAFETY: the bytes are uninitialized until written; an upload (`stage_upload`)
            // reads only the range it has just filled.
            st.buf = Some(unsafe { self.ctx.alloc_pinned::<u8>(bytes.max(1 << 20)) }?);
            self.note_slow(
                &format!("growing the pinned staging to {bytes} bytes for {what}"),
                started,
            );
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
            self.htod(&self.copy, &host[off..off + src.len()], &mut view)?;
        }
        Ok(self.copy.record_event(None)?)
    }
}

// After `launch!`, which they use.
mod account;
mod expand;
mod fixed_base;
mod msm;
mod ntt;
mod pinned;
mod spmv;
mod stream;
mod window;
