//! Shared pieces of the cuzk cluster: wire types and codecs, NATS topology, configuration and
//! telemetry setup.

pub mod blob;
pub mod codec;
pub mod config;
pub mod job;
pub mod local_nats;
pub mod metrics;
pub mod nats;
pub mod nodes;
pub mod objects;
pub mod records;
pub mod telemetry;
pub mod topology;
pub mod witness;
