//! The cuzk runtime shared by every process: NATS topology and access (streams, buckets, object
//! transfers), the job lifecycle (the ledger that alone writes job records and publishes
//! results), the failure policy, configuration, node heartbeats, metrics and telemetry. The
//! plain data these carry lives in `cuzk-wire`.

pub mod config;
pub mod lifecycle;
pub mod listen;
pub mod local_nats;
pub mod metrics;
pub mod nats;
pub mod nodes;
pub mod objects;
pub mod policy;
pub mod retry;
pub mod telemetry;
pub mod timing;
pub mod topology;
