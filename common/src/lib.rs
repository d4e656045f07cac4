//! The cuzk runtime shared by every process: NATS topology and access (streams, buckets, job
//! records, object transfers), configuration, node heartbeats, metrics and telemetry. The plain
//! data these carry lives in `cuzk-wire`.

pub mod config;
pub mod local_nats;
pub mod metrics;
pub mod nats;
pub mod nodes;
pub mod objects;
pub mod records;
pub mod telemetry;
pub mod topology;
