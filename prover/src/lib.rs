//! Groth16 (BLS12-381) proving split into synthesis ([`recording`]) and the H/MSM stage
//! ([`backend`], with [`cpu`] as the reference engine), matching bellperson 0.27 byte for byte.

pub mod backend;
pub mod cpu;
pub mod groth16;
mod ntt;
pub mod params;
pub mod recording;

pub use backend::{Backend, BackendError, MsmResults};
pub use cpu::CpuBackend;
pub use groth16::{proof_bytes, prove, prove_timed, verify, ProveTimings};
pub use recording::{synthesize, RecordingCs};
