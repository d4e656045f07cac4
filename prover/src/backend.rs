//! The boundary between the proving math (shared) and the engines that run NTTs and MSMs.

use std::sync::Arc;

use bellperson::groth16::Parameters;
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use cuzk_wire::witness::Assignment;

/// Errors a backend reports. `retryable` tells the caller whether the same work may succeed on
/// another attempt (a transient device condition) or never will (bad input, wrong parameters).
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("out of device memory: {0}")]
    OutOfMemory(String),
    #[error("device error: {0}")]
    Device(String),
    #[error("input does not fit the parameters: {0}")]
    Shape(String),
    #[error("backend unavailable: {0}")]
    Unavailable(String),
}

impl cuzk_wire::Retryable for BackendError {
    fn retryable(&self) -> bool {
        matches!(self, BackendError::OutOfMemory(_) | BackendError::Device(_))
    }
}

/// The MSM results of one partition, before randomisation with r and s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmResults {
    pub h: G1Projective,
    pub l: G1Projective,
    /// A over inputs (full) plus aux (filtered by `a_aux_density`).
    pub a: G1Projective,
    /// B over `b_g1` with inputs then aux filtered by the B densities.
    pub b_g1: G1Projective,
    pub b_g2: G2Projective,
}

/// An engine that computes the H polynomial and the five MSMs of a Groth16 proof.
///
/// The SRS is prepared once per circuit shape (`load_srs`) and reused for every partition, so
/// a device backend can keep it resident.
pub trait Backend: Send + Sync + 'static {
    /// The backend's form of the proving key's query vectors.
    type Srs: Send + Sync + 'static;

    fn name(&self) -> &'static str;

    fn load_srs(&self, params: Arc<Parameters<Bls12>>) -> Result<Self::Srs, BackendError>;

    /// H coefficients `0..m-1` from the constraint evaluations (design §3.3). The vectors are
    /// consumed: a backend may reuse them as scratch space.
    fn compute_h(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, BackendError>;

    /// The five MSMs over the SRS with `h` and the assignment's inputs, aux and densities.
    fn msms(
        &self,
        srs: &Self::Srs,
        h: &[Scalar],
        assignment: &Assignment,
    ) -> Result<MsmResults, BackendError>;
}
