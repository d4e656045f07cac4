//! Curio's proving API, `cuzk.v1.ProvingEngine` (gRPC), in front of the cluster: `cuzk gateway
//! --listen ADDR` points Curio's `[Cuzk] Address` at a farm instead of one box. The proto in
//! `proto/cuzk/v1/proving.proto` is Curio's (same package, services, messages, field names and
//! numbers), so Curio's generated client works unchanged. docs/gateway.md says which calls and
//! proof kinds are complete.
//!
//! The gateway keeps no state: jobs, results and the cluster's state live in NATS, reached
//! through [`Cluster`], so any number of gateways can serve one cluster; who submitted a job
//! shows in its id (`request.rs`). Whoever reaches the port meets its limits (`limits.rs`) and,
//! where configured, TLS and authentication (`auth.rs`).

mod auth;
mod cluster;
mod describe;
mod limits;
mod listen;
mod reply;
mod request;
mod service;
mod srs;

pub use auth::{Access, AuthError};
pub use cluster::{Cluster, ClusterError, ClusterView};
pub use describe::describe;
pub use listen::{serve, ListenAddr, ServeError};
pub use request::{job_for, RequestError};
pub use service::Gateway;

/// The messages and service generated from the proto.
pub mod proto {
    tonic::include_proto!("cuzk.v1");
    /// The proto's descriptor set, for the reflection service and listings.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("cuzk_v1_descriptor");
}
