use cuzk_prover::BackendError;

/// Errors of the CUDA backend.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// The crate was built without nvcc: no kernels are embedded.
    #[error("cuzk-kernels was built without nvcc; no GPU kernels are embedded")]
    NotBuilt,
    /// No CUDA driver library could be loaded on this machine.
    #[error("no CUDA driver (libcuda) on this machine")]
    NoDriver,
    #[error("no CUDA device with ordinal {0} ({1} present)")]
    NoDevice(usize, usize),
    /// Device memory (or the configured memory budget) is exhausted.
    #[error("out of device memory: {0}")]
    OutOfMemory(String),
    #[error("CUDA driver error: {0}")]
    Driver(String),
    #[error("input does not fit: {0}")]
    Shape(String),
    /// Raw scalar bytes that are not a canonical field element (>= r).
    #[error("scalar {0} is not canonical (>= r)")]
    NonCanonicalScalar(usize),
    /// A compact witness's chunk the device did not expand: a value, tag or length the codec
    /// does not allow (the host's decoder says which).
    #[error("compact witness chunk {0} refused by the device")]
    RefusedChunk(usize),
}

impl From<CudaError> for BackendError {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::OutOfMemory(m) => BackendError::OutOfMemory(m),
            CudaError::Shape(m) => BackendError::Shape(m),
            CudaError::NonCanonicalScalar(_) | CudaError::RefusedChunk(_) => {
                BackendError::Shape(e.to_string())
            }
            CudaError::NotBuilt | CudaError::NoDriver | CudaError::NoDevice(..) => {
                BackendError::Unavailable(e.to_string())
            }
            CudaError::Driver(m) => BackendError::Device(m),
        }
    }
}

#[cfg(cuzk_fatbin)]
impl From<cudarc::driver::DriverError> for CudaError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        use cudarc::driver::sys::CUresult;
        if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            CudaError::OutOfMemory(e.to_string())
        } else {
            CudaError::Driver(e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_wire::Retryable;

    #[test]
    fn maps_into_backend_errors() {
        assert!(matches!(
            BackendError::from(CudaError::OutOfMemory("x".into())),
            BackendError::OutOfMemory(_)
        ));
        assert!(matches!(
            BackendError::from(CudaError::NoDriver),
            BackendError::Unavailable(_)
        ));
        assert!(matches!(
            BackendError::from(CudaError::Driver("x".into())),
            BackendError::Device(_)
        ));
        assert!(matches!(
            BackendError::from(CudaError::NonCanonicalScalar(3)),
            BackendError::Shape(_)
        ));
        assert!(BackendError::from(CudaError::OutOfMemory("x".into())).retryable());
    }
}
