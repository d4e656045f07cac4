//! What crosses the wire between cuzk's processes, as plain data: job specs, work items and
//! results (`job`), per-partition witness blobs (`blob`) with their compact scalar codec
//! (`codec`), and the witness they carry (`witness`). Nothing here talks to NATS.

pub mod blob;
pub mod codec;
pub mod control;
pub mod job;
pub mod witness;

/// An error that says whether trying the same work again may succeed: a node hands retryable
/// failures back to the queue and fails the job on the others.
pub trait Retryable: std::fmt::Display {
    fn retryable(&self) -> bool;
}
