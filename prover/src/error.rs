//! [`BackendError`] in a module of its own: the key, matrix and setup code that the
//! [`Backend`](crate::Backend) trait takes report it too, and naming it from the trait's module
//! made them and the trait depend on each other.

use cuzk_wire::blob::BlobError;

/// Errors a backend reports. `retryable` tells the caller whether the same work may succeed on
/// another attempt (a transient device condition) or never will (bad input, wrong parameters).
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    #[error("out of device memory: {0}")]
    OutOfMemory(String),
    #[error("device error: {0}")]
    Device(String),
    #[error("input does not fit the parameters: {0}")]
    Shape(String),
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    /// Two engines run side by side ([`crate::Dual`]) disagreed.
    #[error("backends disagree: {0}")]
    Mismatch(String),
    /// A compact witness's values are not what the codec allows (a value >= r, a bad tag).
    #[error("invalid witness: {0}")]
    Witness(#[from] BlobError),
}

impl cuzk_wire::Retryable for BackendError {
    fn retryable(&self) -> bool {
        matches!(self, BackendError::OutOfMemory(_) | BackendError::Device(_))
    }
}
