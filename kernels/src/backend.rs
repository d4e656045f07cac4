//! `CudaBackend`: the `cuzk_prover::Backend` on one GPU. A shape's key — SRS, constraint
//! matrices, MSM packing maps — is resident in device memory; a partition's witness goes up
//! once, and its evaluations, H and the packed MSM scalars never leave the device.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_prover::backend::{Backend, BackendError, MsmResults};
use cuzk_prover::r1cs::Matrix;
use cuzk_prover::setup::FixedBase;
use cuzk_prover::{KeyInfo, ProvingKey};
use cuzk_wire::witness::Witness;

use crate::error::CudaError;
use crate::gpu::{as_bytes, DevBuf, DeviceBases, DeviceMatrix, Gpu};

/// Device memory kept free for the NTT/MSM working buffers when no budget is given.
const DEFAULT_RESERVE: u64 = 8 << 30;

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
    accounted: Arc<AtomicU64>,
}

impl CudaKey {
    /// Device bytes held by this key.
    pub fn device_bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for CudaKey {
    fn drop(&mut self) {
        self.accounted.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

/// A witness on the device: inputs then aux, contiguous.
pub struct DevWitness {
    buf: DevBuf,
    inputs: usize,
    aux: usize,
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
    resident: Arc<AtomicU64>,
    /// One proving step at a time on this device (they share the compute stream and scratch).
    job: Mutex<()>,
}

impl CudaBackend {
    /// Opens device `ordinal`. `memory_budget_bytes` caps the device memory resident keys may
    /// take (default: the device's memory less 8 GiB of working space).
    pub fn new(ordinal: usize, memory_budget_bytes: Option<u64>) -> Result<Self, CudaError> {
        let gpu = Gpu::new(ordinal)?;
        let (_free, total) = gpu.mem_info()?;
        let budget = memory_budget_bytes.unwrap_or((total as u64).saturating_sub(DEFAULT_RESERVE));
        Ok(CudaBackend {
            gpu,
            budget,
            resident: Arc::new(AtomicU64::new(0)),
            job: Mutex::new(()),
        })
    }

    /// The underlying device (NTTs, MSMs on device-resident data).
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn device_name(&self) -> &str {
        self.gpu.name()
    }

    /// Bytes of device memory resident proving keys may take.
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
        Ok(DeviceMatrix {
            row_ptr: g.upload(as_bytes(&m.row_ptr))?,
            cols: g.upload(as_bytes(&m.cols))?,
            coeffs: g.upload(as_bytes(&m.coeffs))?,
            rows: m.rows(),
        })
    }

    fn load(&self, pk: &ProvingKey) -> Result<CudaKey, CudaError> {
        let bytes = pk.device_bytes();
        let before = self.resident.fetch_add(bytes, Ordering::SeqCst);
        if before + bytes > self.budget {
            self.resident.fetch_sub(bytes, Ordering::SeqCst);
            return Err(CudaError::OutOfMemory(format!(
                "the proving key needs {bytes} bytes; {before} of the {} byte budget already resident",
                self.budget
            )));
        }
        let g = &self.gpu;
        let p = &pk.params;
        let m = &pk.matrices;
        let up = || -> Result<CudaKey, CudaError> {
            Ok(CudaKey {
                h: g.upload_g1(&p.h)?,
                l: g.upload_g1(&p.l)?,
                a: g.upload_g1(&p.a)?,
                b_g1: g.upload_g1(&p.b_g1)?,
                b_g2: g.upload_g2(&p.b_g2)?,
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
            })
        };
        let key = up();
        if key.is_err() {
            self.resident.fetch_sub(bytes, Ordering::SeqCst);
        }
        let key = key?;
        g.synchronize()?;
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

    /// Through pinned staging on the copy stream, without the device lock: a worker's upload
    /// overlaps another worker's kernels.
    fn upload(&self, _: &CudaKey, w: Witness) -> Result<DevWitness, BackendError> {
        let buf = self.gpu.upload_concat(&[&w.input, &w.aux])?;
        Ok(DevWitness {
            buf,
            inputs: w.input.len(),
            aux: w.aux.len(),
        })
    }

    fn evaluate(&self, key: &CudaKey, w: &DevWitness) -> Result<[DevScalars; 3], BackendError> {
        let _job = self.lock();
        let g = &self.gpu;
        let m = key.info.m;
        let run = || -> Result<[DevScalars; 3], CudaError> {
            let mut out = Vec::with_capacity(3);
            for matrix in &key.matrices {
                let buf = g.alloc(m * 32)?;
                g.spmv(matrix, &key.coeffs, &w.buf, &buf, m)?;
                out.push(DevScalars {
                    buf,
                    len: key.info.constraints,
                });
            }
            let [a, b, c] = <[DevScalars; 3]>::try_from(out).ok().expect("three");
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
            Ok(MsmResults {
                h: g.msm_g1_device(&key.h, &h.buf, h.len)?,
                l: g.msm_g1_ptr(&key.l, aux_at, w.aux)?,
                a: g.msm_g1_device(&key.a, &a_s, key.a_vars.1)?,
                b_g1: g.msm_g1_device(&key.b_g1, &b_s, key.b_vars.1)?,
                b_g2: g.msm_g2_device(&key.b_g2, &b_s, key.b_vars.1)?,
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
}
