//! Shared pieces of the cuzk cluster: wire types and codecs, NATS topology, configuration and
//! telemetry setup.

pub mod blob;
pub mod codec;
pub mod config;
pub mod job;
pub mod lifecycle;
pub mod local_nats;
pub mod metrics;
pub mod nats;
pub mod nodes;
pub mod objects;
pub mod policy;
pub mod telemetry;
pub mod topology;
pub mod witness;

/// An error that says whether trying the same work again may succeed: a node hands retryable
/// failures back to the queue and fails the job on the others.
pub trait Retryable: std::fmt::Display {
    fn retryable(&self) -> bool;
}
