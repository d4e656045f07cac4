//! cuzk's own GPU kernels for BLS12-381 Groth16 (NTT over Fr, Pippenger MSM in G1 and G2) on
//! cudarc, and [`CudaBackend`], the `cuzk_prover::Backend` that keeps the SRS on the GPU.
//!
//! The CUDA sources (kernels/cuda) are compiled by build.rs into a fatbin embedded in the crate;
//! without nvcc the crate builds CPU-only and [`CudaBackend::new`] returns
//! [`CudaError::NotBuilt`]. With dynamic loading the same binary starts on a machine without
//! CUDA: [`cuda_available`] checks for the driver before anything touches it.

pub mod consts;
pub mod digits;
pub mod error;
pub mod plan;

#[cfg(cuzk_fatbin)]
pub mod backend;
#[cfg(cuzk_fatbin)]
pub mod gpu;

pub use digits::Accumulation;
pub use error::CudaError;

#[cfg(cuzk_fatbin)]
pub use backend::{CudaBackend, CudaKey, DevScalars, DevWitness};
#[cfg(cuzk_fatbin)]
pub use gpu::{Curve, DevBuf, DeviceBases, DeviceMatrix, Gpu, NttKind};

/// True when kernels are embedded in this build.
pub const KERNELS_BUILT: bool = cfg!(cuzk_fatbin);

/// True when kernels are embedded, a CUDA driver loads and at least one device is present.
pub fn cuda_available() -> bool {
    device_count() > 0
}

/// Why the CUDA backend cannot run here, or `None` when it can: what `--gpu-backend auto` logs
/// when it falls back to the CPU backend.
pub fn cuda_unavailable_reason() -> Option<String> {
    if !KERNELS_BUILT {
        return Some(
            "this build has no GPU kernels (nvcc was not found when it was compiled; \
             run scripts/install-nvcc.sh, then rebuild with NVCC set to the path it prints)"
                .into(),
        );
    }
    #[cfg(cuzk_fatbin)]
    {
        if !gpu::driver_present() {
            return Some("no CUDA driver (libcuda) on this machine".into());
        }
    }
    (device_count() == 0).then(|| "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)".into())
}

/// Number of CUDA devices (0 without kernels, driver or devices).
pub fn device_count() -> usize {
    #[cfg(cuzk_fatbin)]
    {
        gpu::device_count()
    }
    #[cfg(not(cuzk_fatbin))]
    {
        0
    }
}

/// Stand-in when the crate was built without nvcc: an uninhabited type, so code generic over
/// backends compiles the same with or without kernels, and [`CudaBackend::new`] always fails.
#[cfg(not(cuzk_fatbin))]
pub enum CudaBackend {}

#[cfg(not(cuzk_fatbin))]
impl CudaBackend {
    pub fn new(
        _ordinal: usize,
        _memory_budget_bytes: Option<u64>,
        _workers: usize,
    ) -> Result<Self, CudaError> {
        Err(CudaError::NotBuilt)
    }

    pub fn with_lanes(self, _lanes: usize) -> Result<Self, CudaError> {
        match self {}
    }
}

#[cfg(not(cuzk_fatbin))]
impl CudaBackend {
    /// Bytes of device memory resident proving keys may take.
    pub fn key_budget(&self) -> u64 {
        match *self {}
    }

    /// How every lane's G1 MSMs accumulate their buckets.
    pub fn set_accumulation(&self, _: Accumulation) {
        match *self {}
    }

    /// The most device memory allocated at once so far.
    pub fn device_peak(&self) -> u64 {
        match *self {}
    }

    /// One line of how a loaded key is proved within the budget.
    pub fn plan_summary(&self, key: &std::convert::Infallible) -> String {
        match *key {}
    }
}

#[cfg(not(cuzk_fatbin))]
impl cuzk_prover::setup::FixedBase for CudaBackend {
    fn g1(&self, _: &[blstrs::Scalar]) -> Result<Vec<blstrs::G1Affine>, cuzk_prover::BackendError> {
        match *self {}
    }

    fn g2(&self, _: &[blstrs::Scalar]) -> Result<Vec<blstrs::G2Affine>, cuzk_prover::BackendError> {
        match *self {}
    }
}

#[cfg(not(cuzk_fatbin))]
impl cuzk_prover::Backend for CudaBackend {
    type Key = std::convert::Infallible;
    type Witness = std::convert::Infallible;
    type Scalars = std::convert::Infallible;

    fn name(&self) -> &'static str {
        match *self {}
    }

    fn load_key(
        &self,
        _: std::sync::Arc<cuzk_prover::ProvingKey>,
    ) -> Result<Self::Key, cuzk_prover::BackendError> {
        match *self {}
    }

    fn key_info<'k>(&self, key: &'k Self::Key) -> &'k cuzk_prover::KeyInfo {
        match *key {}
    }

    fn upload(
        &self,
        key: &Self::Key,
        _: &cuzk_wire::witness::Witness,
    ) -> Result<Self::Witness, cuzk_prover::BackendError> {
        match *key {}
    }

    fn evaluate(
        &self,
        key: &Self::Key,
        _: &Self::Witness,
    ) -> Result<[Self::Scalars; 3], cuzk_prover::BackendError> {
        match *key {}
    }

    fn compute_h(
        &self,
        key: &Self::Key,
        _: [Self::Scalars; 3],
    ) -> Result<Self::Scalars, cuzk_prover::BackendError> {
        match *key {}
    }

    fn msms(
        &self,
        key: &Self::Key,
        _: &Self::Witness,
        _: Self::Scalars,
    ) -> Result<cuzk_prover::MsmResults, cuzk_prover::BackendError> {
        match *key {}
    }

    fn download(
        &self,
        v: &Self::Scalars,
    ) -> Result<Vec<blstrs::Scalar>, cuzk_prover::BackendError> {
        match *v {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn device_probe_does_not_panic() {
        // On a machine without CUDA this must answer 0, not panic in the loader.
        let n = super::device_count();
        if n == 0 {
            eprintln!("no CUDA device: GPU checks skipped (run cuzk-gpu-check on a GPU machine)");
        }
        assert_eq!(super::cuda_available(), n > 0);
    }
}
