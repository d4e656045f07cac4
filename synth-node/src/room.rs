//! Room in the blob buckets: a partition waits for it before it is synthesized, so synthesis
//! never runs far ahead of the GPUs, and again when a full bucket refuses its upload — several
//! partitions, on this node or others, can see the same room and fill it together.

use std::time::Duration;

use cuzk_common::policy::StepError;
use cuzk_common::retry::RetryPolicy;
use cuzk_common::topology::Topology;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// How often the buckets' fill is read while waiting.
const POLL: Duration = Duration::from_millis(250);

/// The pause after a refused upload, before the fill is read again (jittered, so that nodes
/// refused together do not write together again).
const REFUSED: RetryPolicy = RetryPolicy {
    attempts: 1,
    initial: Duration::from_secs(2),
    max: Duration::from_secs(2),
};

/// The blob buckets as one partition's upload sees them, until the partition is cancelled.
pub struct Room<'a> {
    pub topology: &'a Topology,
    /// Bytes queued in the blob buckets above which no partition is synthesized.
    pub max_queued_bytes: u64,
    pub cancel: &'a CancellationToken,
}

impl Room<'_> {
    /// Waits while the blob buckets hold `max_queued_bytes` or more (together, or the fullest
    /// counted for all: `Topology::queued_blob_bytes`) — or have no room left for a blob of
    /// `bytes`.
    pub async fn wait(&self, bytes: u64) -> Result<(), StepError> {
        let mut waited = false;
        loop {
            let (queued, bucket) = self
                .topology
                .queued_blob_bytes()
                .await
                .map_err(|e| StepError::Retry(e.to_string()))?;
            // A lone blob larger than what is left goes anyway once the buckets are empty.
            let limit = self.max_queued_bytes.min(bucket.saturating_sub(bytes));
            if queued < limit || queued == 0 {
                return Ok(());
            }
            if !waited {
                info!(queued, limit, "work queue full; waiting");
                waited = true;
            }
            self.pause(POLL).await?;
        }
    }

    /// After a bucket refused a blob of `bytes` for lack of room: a pause, then [`Room::wait`].
    pub async fn after_refusal(&self, bytes: u64) -> Result<(), StepError> {
        self.pause(REFUSED.jittered(0)).await?;
        self.wait(bytes).await
    }

    async fn pause(&self, pause: Duration) -> Result<(), StepError> {
        tokio::select! {
            _ = self.cancel.cancelled() => Err(StepError::Shutdown),
            _ = tokio::time::sleep(pause) => Ok(()),
        }
    }
}
