//! `CudaBackend`: the `cuzk_prover::Backend` on one GPU. A shape's key — SRS, constraint
//! matrices, MSM packing maps — is resident in device memory; a partition's witness goes up
//! once, and its evaluations, H and the packed MSM scalars never leave the device.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_prover::backend::{Backend, BackendError, HostPin, MsmResults};
use cuzk_prover::key::Srs;
use cuzk_prover::params::Query;
use cuzk_prover::r1cs::Matrix;
use cuzk_prover::setup::FixedBase;
use cuzk_prover::{KeyInfo, ProvingKey};
use cuzk_wire::blob::CompactWitness;
use cuzk_wire::witness::Witness;

use crate::error::CudaError;
use crate::gpu::{as_bytes, long_rows, Curve, DevBuf, DeviceBases, DeviceMatrix, Gpu};
use crate::plan::Working;

/// Device memory left out of the default budget (the context, the memory pool's slack).
const DEFAULT_RESERVE: u64 = 2 << 30;

/// A shape's proving key on the device.
pub struct CudaKey {
    pub h: DeviceBases,
    pub l: DeviceBases,
    pub a: DeviceBases,
    pub b_g1: DeviceBases,
    pub b_g2: DeviceBases,
    matrices: [DeviceMatrix; 3],
    coeffs: DevBuf,
    a_vars: (DevBuf, usize),
    b_vars: (DevBuf, usize),
    info: KeyInfo,
    bytes: u64,
    accounted: Arc<Mutex<Resident>>,
}

/// What the resident keys of a device hold.
#[derive(Default)]
struct Resident {
    keys: u64,
    /// The largest working set among them.
    working: u64,
}

impl CudaKey {
    /// Device bytes held by this key.
    pub fn device_bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for CudaKey {
    fn drop(&mut self) {
        let mut r = self.accounted.lock().unwrap_or_else(|e| e.into_inner());
        r.keys -= self.bytes;
        // The largest working set of those left is not tracked; keeping the old maximum until
        // the device is empty only makes the next admission conservative.
        if r.keys == 0 {
            r.working = 0;
        }
    }
}

/// A witness on the device: inputs then aux, contiguous.
pub struct DevWitness {
    buf: DevBuf,
    inputs: usize,
    aux: usize,
    /// The device's turn, from its evaluation to the end of its MSMs (or until it is dropped).
    turn: Mutex<Option<Turn>>,
}

impl DevWitness {
    fn new(buf: DevBuf, inputs: usize, aux: usize) -> Self {
        DevWitness {
            buf,
            inputs,
            aux,
            turn: Mutex::new(None),
        }
    }
}

/// One partition at a time between evaluation and MSMs: the working-memory plan counts one
/// partition's evaluations, H and MSM scratch, while workers' uploads overlap it.
#[derive(Default)]
struct Turns {
    busy: Mutex<bool>,
    free: Condvar,
}

/// A partition's turn on the device; handed back when dropped.
struct Turn(Arc<Turns>);

impl Turns {
    fn take(self: &Arc<Self>) -> Turn {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        while *busy {
            busy = self.free.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        *busy = true;
        Turn(self.clone())
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        *self.0.busy.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.0.free.notify_one();
    }
}

/// Scalars on the device; the buffer may be longer than `len` (padding of the domain).
pub struct DevScalars {
    buf: DevBuf,
    len: usize,
}

/// Groth16 proving on one CUDA device.
pub struct CudaBackend {
    gpu: Gpu,
    budget: u64,
    resident: Arc<Mutex<Resident>>,
    /// One proving step at a time on this device (they share the compute stream and scratch).
    job: Mutex<()>,
    turns: Arc<Turns>,
    /// Workers proving on this device: each may hold an uploaded witness.
    workers: usize,
}

impl CudaBackend {
    /// Opens device `ordinal` for `workers` proving workers. `memory_budget_bytes` caps the
    /// device memory proving takes — resident keys plus the working buffers of a partition and
    /// the workers' witnesses (default: the device's memory less 2 GiB).
    pub fn new(
        ordinal: usize,
        memory_budget_bytes: Option<u64>,
        workers: usize,
    ) -> Result<Self, CudaError> {
        let gpu = Gpu::new(ordinal)?;
        let (_free, total) = gpu.mem_info()?;
        let budget = memory_budget_bytes.unwrap_or((total as u64).saturating_sub(DEFAULT_RESERVE));
        Ok(CudaBackend {
            gpu,
            budget,
            resident: Arc::default(),
            job: Mutex::new(()),
            turns: Arc::default(),
            workers: workers.max(1),
        })
    }

    /// The underlying device (NTTs, MSMs on device-resident data).
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn device_name(&self) -> &str {
        self.gpu.name()
    }

    /// Bytes of device memory proving may take (keys and working buffers).
    pub fn key_budget(&self) -> u64 {
        self.budget
    }

    /// The device lock. A panic in another proving step leaves nothing that the next one
    /// depends on (every step allocates its own buffers), so a poisoned lock is taken anyway.
    fn lock(&self) -> MutexGuard<'_, ()> {
        self.job.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn upload_matrix(&self, m: &Matrix) -> Result<DeviceMatrix, CudaError> {
        let g = &self.gpu;
        // ~300 K rows of the 32 GiB shape (1.2 MB: inside the memory plan's reserve).
        let long = long_rows(&m.row_ptr);
        Ok(DeviceMatrix {
            row_ptr: g.upload(as_bytes(&m.row_ptr))?,
            cols: g.upload(as_bytes(&m.cols))?,
            coeffs: g.upload(as_bytes(&m.coeffs))?,
            rows: m.rows(),
            long_rows: g.upload(as_bytes(&long))?,
            n_long: long.len(),
        })
    }

    /// The device memory a key of `pk` and its partitions' working buffers take.
    pub fn key_plan(&self, pk: &ProvingKey) -> (u64, Working) {
        let i = &pk.info;
        let vars = i.inputs + i.aux;
        let (a, b) = (pk.a_vars.len(), pk.b_vars.len());
        let working = Working::new(vars, i.m, a, b, self.workers);
        (pk.device_bytes(), working)
    }

    fn load(&self, pk: &ProvingKey) -> Result<CudaKey, CudaError> {
        let (bytes, working) = self.key_plan(pk);
        let need = bytes + working.peak();
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        if need > self.budget {
            return Err(CudaError::Shape(format!(
                "this shape needs {:.1} GiB of device memory ({:.1} GiB of SRS and matrices, {:.1} GiB of working buffers) but the budget is {:.1} GiB",
                gib(need),
                gib(bytes),
                gib(working.peak()),
                gib(self.budget)
            )));
        }
        // Keys share one set of working buffers (one proving step at a time per device).
        let mut resident = self.resident.lock().unwrap_or_else(|e| e.into_inner());
        let total = resident.keys + bytes + resident.working.max(working.peak());
        if total > self.budget {
            return Err(CudaError::OutOfMemory(format!(
                "the proving key needs {:.1} GiB with its working buffers; {:.1} GiB of the {:.1} GiB budget are held by other keys",
                gib(need),
                gib(resident.keys),
                gib(self.budget)
            )));
        }
        let g = &self.gpu;
        let m = &pk.matrices;
        let up = || -> Result<[DeviceBases; 5], CudaError> {
            Ok(match &pk.srs {
                Srs::Memory(p) => [
                    g.upload_g1(&p.h)?,
                    g.upload_g1(&p.l)?,
                    g.upload_g1(&p.a)?,
                    g.upload_g1(&p.b_g1)?,
                    g.upload_g2(&p.b_g2)?,
                ],
                Srs::File(f) => [
                    g.upload_uncompressed(f.raw(Query::H), Curve::G1)?,
                    g.upload_uncompressed(f.raw(Query::L), Curve::G1)?,
                    g.upload_uncompressed(f.raw(Query::A), Curve::G1)?,
                    g.upload_uncompressed(f.raw(Query::BG1), Curve::G1)?,
                    g.upload_uncompressed(f.raw(Query::BG2), Curve::G2)?,
                ],
            })
        };
        let [h, l, a, b_g1, b_g2] = up()?;
        let key = CudaKey {
            h,
            l,
            a,
            b_g1,
            b_g2,
            matrices: [
                self.upload_matrix(&m.a)?,
                self.upload_matrix(&m.b)?,
                self.upload_matrix(&m.c)?,
            ],
            coeffs: g.upload(as_bytes(&m.coeffs))?,
            a_vars: (g.upload(as_bytes(&pk.a_vars))?, pk.a_vars.len()),
            b_vars: (g.upload(as_bytes(&pk.b_vars))?, pk.b_vars.len()),
            info: pk.info.clone(),
            bytes,
            accounted: self.resident.clone(),
        };
        g.synchronize()?;
        // Otherwise a key's first partition pays for page-locking the staging its compact
        // witness goes up through when it is not pinned in place, and for mapping its working
        // buffers into the memory pool (docs/gpu-runs.md, run 8); here the node is still loading.
        g.reserve_staging(working.expand as usize)?;
        // Only for the device's first key: no partition's buffers compete with it yet.
        if resident.keys == 0 {
            if let Err(e) = g.warm_pool(working.peak() as usize) {
                tracing::warn!(device = %g.name(), err = %e, "could not map the working buffers ahead");
            }
        }
        resident.keys += bytes;
        resident.working = resident.working.max(working.peak());
        Ok(key)
    }
}

impl Backend for CudaBackend {
    type Key = CudaKey;
    type Witness = DevWitness;
    type Scalars = DevScalars;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn load_key(&self, key: Arc<ProvingKey>) -> Result<CudaKey, BackendError> {
        let _job = self.lock();
        Ok(self.load(&key)?)
    }

    fn key_info<'k>(&self, key: &'k CudaKey) -> &'k KeyInfo {
        &key.info
    }

    fn memory_for(&self, key: &ProvingKey) -> u64 {
        let (bytes, working) = self.key_plan(key);
        bytes + working.peak()
    }

    unsafe fn pin(&self, bytes: &[u8]) -> Option<HostPin> {
        if bytes.is_empty() {
            return None;
        }
        let started = Instant::now();
        // SAFETY: passed on from the caller.
        match unsafe { self.gpu.pin_host(bytes) } {
            Ok(pin) => {
                tracing::debug!(
                    bytes = bytes.len(),
                    ms = started.elapsed().as_millis() as u64,
                    "witness buffer page-locked"
                );
                Some(Box::new(pin))
            }
            Err(e) => {
                tracing::warn!(bytes = bytes.len(), err = %e, "could not page-lock a witness buffer; its uploads go through the staging");
                None
            }
        }
    }

    /// On the copy stream, without the device lock: a worker's upload overlaps another
    /// worker's kernels. From where the witness lies when it is pinned, else through the staging.
    fn upload(&self, _: &CudaKey, w: &Witness) -> Result<DevWitness, BackendError> {
        let buf = self.gpu.upload_concat(&[&w.input, &w.aux])?;
        Ok(DevWitness::new(buf, w.input.len(), w.aux.len()))
    }

    /// As `upload`, the aux's compact bytes expanded on the device; a chunk it refuses is
    /// decoded on the host to say why.
    fn upload_compact(&self, _: &CudaKey, w: &CompactWitness) -> Result<DevWitness, BackendError> {
        match self.gpu.upload_compact(&w.input, &w.aux) {
            Ok(buf) => Ok(DevWitness::new(buf, w.input.len(), w.aux.len())),
            Err(CudaError::RefusedChunk(chunk)) => Err(match w.aux.check_chunk(chunk) {
                Err(why) => BackendError::Witness(why),
                Ok(()) => BackendError::Device(format!(
                    "the device refused compact witness chunk {chunk}, which the host's decoder accepts"
                )),
            }),
            Err(e) => Err(e.into()),
        }
    }

    fn wait_turn(&self, w: &DevWitness) -> Result<(), BackendError> {
        let mut turn = w.turn.lock().unwrap_or_else(|e| e.into_inner());
        if turn.is_none() {
            *turn = Some(self.turns.take());
        }
        Ok(())
    }

    fn evaluate(&self, key: &CudaKey, w: &DevWitness) -> Result<[DevScalars; 3], BackendError> {
        let g = &self.gpu;
        // Callers that skipped `wait_turn` wait here.
        self.wait_turn(w)?;
        let started = Instant::now();
        let _job = self.lock();
        let mut started = g.note_slow("waiting for the device lock", started);
        let m = key.info.m;
        let mut run = || -> Result<[DevScalars; 3], CudaError> {
            let mut out = Vec::with_capacity(3);
            for matrix in &key.matrices {
                let buf = g.alloc(m * 32)?;
                started = g.note_slow("evaluation allocation", started);
                g.spmv(matrix, &key.coeffs, &w.buf, &buf, m)?;
                out.push(DevScalars {
                    buf,
                    len: key.info.constraints,
                });
            }
            let [a, b, c] = <[DevScalars; 3]>::try_from(out).ok().expect("three");
            // Its own stage in the timings, not folded into the next one's first wait.
            g.synchronize()?;
            g.note_slow("SpMV kernels", started);
            Ok([a, b, c])
        };
        Ok(run()?)
    }

    fn compute_h(&self, key: &CudaKey, abc: [DevScalars; 3]) -> Result<DevScalars, BackendError> {
        let _job = self.lock();
        let [a, b, c] = abc.map(|v| v.buf);
        let buf = self.gpu.h_device([a, b, c], key.info.log_m)?;
        Ok(DevScalars {
            buf,
            len: key.info.m - 1,
        })
    }

    fn msms(
        &self,
        key: &CudaKey,
        w: &DevWitness,
        h: &DevScalars,
    ) -> Result<MsmResults, BackendError> {
        let _job = self.lock();
        let g = &self.gpu;
        let run = || -> Result<MsmResults, CudaError> {
            let a_s = g.gather(&w.buf, &key.a_vars.0, key.a_vars.1)?;
            let b_s = g.gather(&w.buf, &key.b_vars.0, key.b_vars.1)?;
            let aux_at = g.ptr_at(&w.buf, w.inputs * 32);
            // Each MSM returns its point to the host, so the clocks between them are its time.
            let mut clock = Instant::now();
            let mut lap = || {
                let now = Instant::now();
                let ms = (now - clock).as_secs_f64() * 1e3;
                clock = now;
                ms
            };
            lap();
            let h = g.msm_g1_device(&key.h, &h.buf, h.len)?;
            let h_ms = lap();
            let l = g.msm_g1_ptr(&key.l, aux_at, w.aux)?;
            let l_ms = lap();
            let a = g.msm_g1_device(&key.a, &a_s, key.a_vars.1)?;
            let a_ms = lap();
            let b_g1 = g.msm_g1_device(&key.b_g1, &b_s, key.b_vars.1)?;
            let b_g1_ms = lap();
            let b_g2 = g.msm_g2_device(&key.b_g2, &b_s, key.b_vars.1)?;
            let b_g2_ms = lap();
            tracing::debug!(device = %g.name(), h_ms, l_ms, a_ms, b_g1_ms, b_g2_ms, "MSM times");
            // The next partition's evaluation may start.
            drop(w.turn.lock().unwrap_or_else(|e| e.into_inner()).take());
            Ok(MsmResults {
                h,
                l,
                a,
                b_g1,
                b_g2,
            })
        };
        Ok(run()?)
    }

    fn download(&self, v: &DevScalars) -> Result<Vec<Scalar>, BackendError> {
        let _job = self.lock();
        Ok(self.gpu.download_scalars(&v.buf, v.len)?)
    }
}

/// Parameter generation's query points on the device.
impl FixedBase for CudaBackend {
    fn g1(&self, scalars: &[Scalar]) -> Result<Vec<G1Affine>, BackendError> {
        let _job = self.lock();
        Ok(self.gpu.fixed_base_g1(scalars)?)
    }

    fn g2(&self, scalars: &[Scalar]) -> Result<Vec<G2Affine>, BackendError> {
        let _job = self.lock();
        Ok(self.gpu.fixed_base_g2(scalars)?)
    }

    fn g1_uncompressed(&self, scalars: &[Scalar], out: &mut Vec<u8>) -> Result<(), BackendError> {
        let _job = self.lock();
        Ok(self.gpu.fixed_base_uncompressed(Curve::G1, scalars, out)?)
    }

    fn g2_uncompressed(&self, scalars: &[Scalar], out: &mut Vec<u8>) -> Result<(), BackendError> {
        let _job = self.lock();
        Ok(self.gpu.fixed_base_uncompressed(Curve::G2, scalars, out)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn one_turn_at_a_time() {
        let turns = Arc::new(Turns::default());
        let first = turns.take();
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let turns = turns.clone();
            std::thread::spawn(move || {
                let _second = turns.take();
                tx.send(()).unwrap();
            })
        };
        // The second partition waits while the first holds its turn ...
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        // ... and gets it once the first hands it back.
        drop(first);
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        waiter.join().unwrap();
        drop(turns.take());
    }
}
