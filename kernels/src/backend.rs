//! `CudaBackend`: the `cuzk_prover::Backend` on one GPU, SRS resident in device memory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bellperson::groth16::Parameters;
use blstrs::{Bls12, Scalar};
use cuzk_prover::backend::{Backend, BackendError, MsmResults};
use cuzk_wire::witness::Assignment;

use crate::error::CudaError;
use crate::gpu::{DeviceBases, Gpu};

/// Device memory kept free for the NTT/MSM working buffers when no budget is given.
const DEFAULT_RESERVE: u64 = 8 << 30;

/// The five query vectors of one parameter set, resident on the GPU.
pub struct CudaSrs {
    pub h: DeviceBases,
    pub l: DeviceBases,
    pub a: DeviceBases,
    pub b_g1: DeviceBases,
    pub b_g2: DeviceBases,
    params: Arc<Parameters<Bls12>>,
    bytes: u64,
    accounted: Arc<AtomicU64>,
}

impl CudaSrs {
    /// Device bytes held by this SRS.
    pub fn device_bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for CudaSrs {
    fn drop(&mut self) {
        self.accounted.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

/// Groth16 NTTs and MSMs on one CUDA device.
pub struct CudaBackend {
    gpu: Gpu,
    budget: u64,
    resident: Arc<AtomicU64>,
    /// One proving job at a time on this device (they share streams and staging memory).
    job: Mutex<()>,
}

impl CudaBackend {
    /// Opens device `ordinal`. `memory_budget_bytes` caps the device memory the resident SRS
    /// may take (default: the device's memory less 8 GiB of working space).
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

    pub fn memory_budget(&self) -> u64 {
        self.budget
    }

    fn load(&self, params: Arc<Parameters<Bls12>>) -> Result<CudaSrs, CudaError> {
        let bytes = ((params.h.len() + params.l.len() + params.a.len() + params.b_g1.len()) * 96
            + params.b_g2.len() * 192) as u64;
        let before = self.resident.fetch_add(bytes, Ordering::SeqCst);
        if before + bytes > self.budget {
            self.resident.fetch_sub(bytes, Ordering::SeqCst);
            return Err(CudaError::OutOfMemory(format!(
                "SRS needs {bytes} bytes; {before} of the {} byte budget already resident",
                self.budget
            )));
        }
        let up = || -> Result<[DeviceBases; 5], CudaError> {
            Ok([
                self.gpu.upload_g1(&params.h)?,
                self.gpu.upload_g1(&params.l)?,
                self.gpu.upload_g1(&params.a)?,
                self.gpu.upload_g1(&params.b_g1)?,
                self.gpu.upload_g2(&params.b_g2)?,
            ])
        };
        match up() {
            Ok([h, l, a, b_g1, b_g2]) => Ok(CudaSrs {
                h,
                l,
                a,
                b_g1,
                b_g2,
                params,
                bytes,
                accounted: self.resident.clone(),
            }),
            Err(e) => {
                self.resident.fetch_sub(bytes, Ordering::SeqCst);
                Err(e)
            }
        }
    }
}

pub use cuzk_prover::cpu::push_dense;

impl Backend for CudaBackend {
    type Srs = CudaSrs;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn load_srs(&self, params: Arc<Parameters<Bls12>>) -> Result<CudaSrs, BackendError> {
        let _job = self.job.lock().unwrap();
        Ok(self.load(params)?)
    }

    fn compute_h(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, BackendError> {
        let _job = self.job.lock().unwrap();
        Ok(self.gpu.compute_h(&a, &b, &c)?)
    }

    fn msms(
        &self,
        srs: &CudaSrs,
        h: &[Scalar],
        assignment: &Assignment,
    ) -> Result<MsmResults, BackendError> {
        cuzk_prover::cpu::check_query_sizes(&srs.params, assignment)?;
        if h.len() != srs.h.len() {
            return Err(BackendError::Shape(format!(
                "{} H coefficients but the parameters have {} H points",
                h.len(),
                srs.h.len()
            )));
        }
        let mut a_s = assignment.input.clone();
        push_dense(&mut a_s, &assignment.aux, &assignment.a_aux_density);
        let mut b_s = Vec::new();
        push_dense(&mut b_s, &assignment.input, &assignment.b_input_density);
        push_dense(&mut b_s, &assignment.aux, &assignment.b_aux_density);

        let _job = self.job.lock().unwrap();
        let g = &self.gpu;
        let run = || -> Result<MsmResults, CudaError> {
            let d = g.upload_many(&[h, &assignment.aux, &a_s, &b_s])?;
            Ok(MsmResults {
                h: g.msm_g1_device(&srs.h, &d[0], h.len())?,
                l: g.msm_g1_device(&srs.l, &d[1], assignment.aux.len())?,
                a: g.msm_g1_device(&srs.a, &d[2], a_s.len())?,
                b_g1: g.msm_g1_device(&srs.b_g1, &d[3], b_s.len())?,
                b_g2: g.msm_g2_device(&srs.b_g2, &d[3], b_s.len())?,
            })
        };
        Ok(run()?)
    }
}
