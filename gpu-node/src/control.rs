//! Proving-key commands (`cuzk.control.srs`, the gateway's `PreloadSRS`/`EvictSRS`): every GPU
//! node loads a shape's key into each of its backends, or drops it, and answers with what it
//! did. Loading goes through the same path as a work item's (`GpuNode::load_key`), so a node
//! without the shape's parameters that may not generate test parameters answers with why.

use std::sync::Arc;
use std::time::Instant;

use cuzk_circuits::{CircuitFamily, CircuitSpec};
use cuzk_common::nats::serve_requests;
use cuzk_common::policy::StepError;
use cuzk_common::topology::SUBJECT_SRS;
use cuzk_prover::Backend;
use cuzk_wire::control::{SrsOp, SrsReply, SrsRequest};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::keys::Keys;
use crate::GpuNode;

/// One backend's proving keys, whatever the backend's type.
pub(crate) trait BackendKeys: Send + Sync {
    /// Loads the family's key; whether it was resident already.
    fn preload(
        &self,
        node: Arc<GpuNode>,
        family: Arc<dyn CircuitFamily>,
    ) -> BoxFuture<'static, Result<bool, StepError>>;
    /// Drops the shape's key; the bytes it held, if it was resident.
    fn evict(&self, shape: String) -> BoxFuture<'static, Option<u64>>;
}

pub(crate) struct OnBackend<B: Backend> {
    pub backend: Arc<B>,
    pub keys: Arc<Keys<B>>,
}

impl<B: Backend> BackendKeys for OnBackend<B> {
    fn preload(
        &self,
        node: Arc<GpuNode>,
        family: Arc<dyn CircuitFamily>,
    ) -> BoxFuture<'static, Result<bool, StepError>> {
        let (backend, keys) = (self.backend.clone(), self.keys.clone());
        Box::pin(async move {
            let resident = keys.contains(&family.shape_key()).await;
            node.load_key(&backend, &keys, family).await?;
            Ok(resident)
        })
    }

    fn evict(&self, shape: String) -> BoxFuture<'static, Option<u64>> {
        let keys = self.keys.clone();
        Box::pin(async move { keys.evict(&shape).await })
    }
}

pub(crate) async fn serve(
    node: Arc<GpuNode>,
    backends: Vec<Arc<dyn BackendKeys>>,
    shutdown: CancellationToken,
) {
    let client = node.topology.js.client();
    serve_requests(client, SUBJECT_SRS, None, shutdown, |payload| {
        let (node, backends) = (&node, &backends);
        async move {
            let mut reply = match SrsRequest::parse(&payload) {
                Ok(command) => answer(node, backends, command).await,
                Err(e) => SrsReply {
                    error: Some(e.to_string()),
                    ..Default::default()
                },
            };
            reply.node = node.name.clone();
            serde_json::to_vec(&reply).expect("replies serialize")
        }
    })
    .await
}

async fn answer(
    node: &Arc<GpuNode>,
    backends: &[Arc<dyn BackendKeys>],
    command: SrsRequest,
) -> SrsReply {
    let spec = CircuitSpec {
        name: command.circuit,
        params: command.params,
    };
    let family = match spec.family() {
        Ok(family) => family,
        Err(e) => {
            return SrsReply {
                error: Some(e.to_string()),
                ..Default::default()
            }
        }
    };
    let mut reply = SrsReply {
        shape: family.shape_key(),
        was_loaded: command.op == SrsOp::Preload,
        ..Default::default()
    };
    let started = Instant::now();
    for backend in backends {
        match command.op {
            SrsOp::Preload => match backend.preload(node.clone(), family.clone()).await {
                Ok(resident) => reply.was_loaded &= resident,
                Err(e) => {
                    reply.error = Some(e.to_string());
                    return reply;
                }
            },
            SrsOp::Evict => {
                if let Some(bytes) = backend.evict(reply.shape.clone()).await {
                    reply.was_loaded = true;
                    reply.freed_bytes += bytes;
                }
            }
        }
    }
    reply.load_ms = started.elapsed().as_millis() as u64;
    info!(shape = %reply.shape, op = ?command.op, was_loaded = reply.was_loaded,
        load_ms = reply.load_ms, freed_bytes = reply.freed_bytes, "proving-key command");
    reply
}
