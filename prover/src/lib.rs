//! Groth16 (BLS12-381) proving split into witness synthesis ([`witness_cs`]) and the stages a
//! backend runs ([`backend`]: evaluation through the shape's constraint matrices ([`r1cs`]), H,
//! the MSMs), with [`cpu`] as the reference engine, matching bellperson 0.27 byte for byte.

pub mod backend;
pub mod cpu;
pub mod dual;
mod error;
pub mod groth16;
pub mod key;
mod ntt;
pub mod params;
pub mod r1cs;
pub mod recording;
pub mod setup;
pub mod witness_cs;
mod write_behind;

pub use backend::{Backend, HostPin, MsmResults};
pub use cpu::CpuBackend;
pub use dual::Dual;
pub use error::BackendError;
pub use groth16::{proof_bytes, prove, prove_timed, verify, ProveTimings, WitnessForm};
pub use key::{KeyInfo, ProvingKey};
pub use r1cs::ShapeMatrices;
pub use witness_cs::synthesize_witness;
