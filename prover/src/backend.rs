//! The boundary between the proving math (shared) and the engines that run it.
//!
//! A partition goes through four steps, each a method here: upload the witness, evaluate
//! A·w, B·w, C·w (sparse products with the shape's matrices), the H polynomial, the five MSMs.
//! Vectors stay in the backend's own form between steps (device memory for a GPU), so nothing
//! returns to the host until the MSM results. What each MSM multiplies is decided once per shape
//! above the trait ([`ProvingKey`]).

use std::sync::Arc;

use blstrs::{G1Projective, G2Projective, Scalar};
use cuzk_wire::blob::CompactWitness;
use cuzk_wire::witness::Witness;

use crate::key::{KeyInfo, ProvingKey};

// Also importable from here, beside the trait whose methods return it.
pub use crate::error::BackendError;

/// The MSM results of one partition, before randomisation with r and s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmResults {
    pub h: G1Projective,
    pub l: G1Projective,
    /// A over the variables the key's `a_vars` names.
    pub a: G1Projective,
    /// B over `b_g1` with the variables the key's `b_vars` names.
    pub b_g1: G1Projective,
    pub b_g2: G2Projective,
}

/// Host memory a backend holds page-locked ([`Backend::pin`]) until this is dropped.
pub type HostPin = Box<dyn Send + Sync>;

/// An engine that proves Groth16 partitions of shapes it has loaded.
pub trait Backend: Send + Sync + 'static {
    /// A shape's proving key in the backend's form (a GPU keeps SRS and matrices resident).
    type Key: Send + Sync + 'static;
    /// A witness in the backend's form.
    type Witness: Send + 'static;
    /// A scalar vector in the backend's form.
    type Scalars: Send + 'static;

    fn name(&self) -> &'static str;

    /// Prepares a shape once; the backend may keep what it needs and let the rest go.
    fn load_key(&self, key: Arc<ProvingKey>) -> Result<Self::Key, BackendError>;

    fn key_info<'k>(&self, key: &'k Self::Key) -> &'k KeyInfo;

    /// The backend memory proving `key`'s shape takes: the key and, where the backend keeps
    /// them, its working buffers. What a node's key cache budgets with.
    fn memory_for(&self, key: &ProvingKey) -> u64 {
        key.device_bytes()
    }

    /// Bytes copied from host memory to the backend's device so far (0 for the CPU): what the
    /// node reports as its host-to-device traffic.
    fn h2d_bytes(&self) -> u64 {
        0
    }

    /// Takes a witness whose lengths [`KeyInfo::check_lens`] accepted. Borrowed, so the caller
    /// can reuse its (large, already faulted-in) buffers for the next partition.
    fn upload(&self, key: &Self::Key, witness: &Witness) -> Result<Self::Witness, BackendError>;

    /// Takes a witness whose aux is still in the blob's compact codec, its lengths accepted by
    /// [`KeyInfo::check_lens`]. By default it is expanded on the host and then uploaded; a GPU
    /// copies the compact bytes (a sixteenth of the scalars for a PoRep witness) and expands
    /// them on the device. Values the codec refuses fail with [`BackendError::Witness`].
    fn upload_compact(
        &self,
        key: &Self::Key,
        witness: &CompactWitness,
    ) -> Result<Self::Witness, BackendError> {
        self.upload(key, &witness.expand()?)
    }

    /// Page-locks `memory` where the backend uploads from such memory faster (a GPU: DMA from
    /// where it lies), until the returned pin is dropped. `None`: no gain here, or it could not
    /// be had (uploads from it then take their usual path).
    ///
    /// # Safety
    /// `memory` must not be freed or moved while the pin lives.
    unsafe fn pin(&self, _memory: &[u8]) -> Option<HostPin> {
        None
    }

    /// Waits until this witness may use the backend's compute: a device proves one partition
    /// at a time from its evaluation to its MSMs, while other workers' uploads go on. Its own
    /// stage in the timings, so that waiting is not read as SpMV time.
    fn wait_turn(&self, _w: &Self::Witness) -> Result<(), BackendError> {
        Ok(())
    }

    /// `[A·w, B·w, C·w]`, one value per constraint.
    fn evaluate(
        &self,
        key: &Self::Key,
        w: &Self::Witness,
    ) -> Result<[Self::Scalars; 3], BackendError>;

    /// H coefficients `0..m-1` from the evaluations (consumed: a backend may reuse them).
    fn compute_h(
        &self,
        key: &Self::Key,
        abc: [Self::Scalars; 3],
    ) -> Result<Self::Scalars, BackendError>;

    /// The five MSMs over the key's SRS. H is consumed: a backend may free it once its MSM is
    /// done, making room for the others.
    fn msms(
        &self,
        key: &Self::Key,
        w: &Self::Witness,
        h: Self::Scalars,
    ) -> Result<MsmResults, BackendError>;

    /// A vector's values on the host (tests and [`crate::Dual`]).
    fn download(&self, v: &Self::Scalars) -> Result<Vec<Scalar>, BackendError>;
}

/// A shared backend is a backend (several workers or a [`crate::Dual`] hold one device).
impl<B: Backend> Backend for Arc<B> {
    type Key = B::Key;
    type Witness = B::Witness;
    type Scalars = B::Scalars;

    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn load_key(&self, key: Arc<ProvingKey>) -> Result<Self::Key, BackendError> {
        (**self).load_key(key)
    }

    fn key_info<'k>(&self, key: &'k Self::Key) -> &'k KeyInfo {
        (**self).key_info(key)
    }

    fn memory_for(&self, key: &ProvingKey) -> u64 {
        (**self).memory_for(key)
    }

    fn h2d_bytes(&self) -> u64 {
        (**self).h2d_bytes()
    }

    fn upload(&self, key: &Self::Key, witness: &Witness) -> Result<Self::Witness, BackendError> {
        (**self).upload(key, witness)
    }

    fn upload_compact(
        &self,
        key: &Self::Key,
        witness: &CompactWitness,
    ) -> Result<Self::Witness, BackendError> {
        (**self).upload_compact(key, witness)
    }

    unsafe fn pin(&self, memory: &[u8]) -> Option<HostPin> {
        // SAFETY: the caller's promise, passed on.
        unsafe { (**self).pin(memory) }
    }

    fn wait_turn(&self, w: &Self::Witness) -> Result<(), BackendError> {
        (**self).wait_turn(w)
    }

    fn evaluate(
        &self,
        key: &Self::Key,
        w: &Self::Witness,
    ) -> Result<[Self::Scalars; 3], BackendError> {
        (**self).evaluate(key, w)
    }

    fn compute_h(
        &self,
        key: &Self::Key,
        abc: [Self::Scalars; 3],
    ) -> Result<Self::Scalars, BackendError> {
        (**self).compute_h(key, abc)
    }

    fn msms(
        &self,
        key: &Self::Key,
        w: &Self::Witness,
        h: Self::Scalars,
    ) -> Result<MsmResults, BackendError> {
        (**self).msms(key, w, h)
    }

    fn download(&self, v: &Self::Scalars) -> Result<Vec<Scalar>, BackendError> {
        (**self).download(v)
    }
}
