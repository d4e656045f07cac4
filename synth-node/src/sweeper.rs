//! The backstop for jobs nothing else will end: every synth node follows the jobs bucket
//! (`cuzk_common::lifecycle::sweep`) and fails jobs with no progress for
//! `--synth-no-progress-timeout` whose messages are gone from the queues, deleting the blobs
//! they left; it also assembles complete jobs and publishes results whose finisher died before
//! it did. Concurrent sweepers are harmless: the ledger ends a job once. It also reclaims chunks
//! no object names (an upload killed midway) from the blob buckets and every inputs bucket, the
//! shared one and each submitter's (`cuzk_common::objects::janitor`).

use std::time::Duration;

use cuzk_common::lifecycle::{sweep::Sweeper, Ledger};
use cuzk_common::objects::janitor::{inputs_buckets, Janitor, ORPHAN_GRACE};
use cuzk_common::topology::{blob_shard_bucket, Topology, INPUTS_BUCKET};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::saver::delete_queued_blobs;

/// How often to look for chunks no object names (reclaimed once unchanged for
/// [`ORPHAN_GRACE`]).
const JANITOR_INTERVAL: Duration = Duration::from_secs(60);

/// How often to sweep: a fraction of the timeout, so a stuck job ends soon after it, and never
/// less often than once a minute.
pub fn interval(no_progress: Duration) -> Duration {
    (no_progress / 4).clamp(Duration::from_millis(500), Duration::from_secs(60))
}

pub async fn run(
    topology: Topology,
    ledger: Ledger,
    no_progress: Duration,
    shutdown: CancellationToken,
) {
    let mut sweeper = Sweeper::new(ledger, no_progress);
    let mut ticker = tokio::time::interval(interval(no_progress));
    let mut janitor = Janitor::default();
    let mut janitor_ticker = tokio::time::interval(JANITOR_INTERVAL);
    // The blob buckets and the inputs buckets: what this role writes and deletes in.
    let blobs: Vec<String> = (0..topology.blobs.count()).map(blob_shard_bucket).collect();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = janitor_ticker.tick() => {
                let inputs = inputs_buckets(&topology.js).await.unwrap_or_else(|e| {
                    debug!(err = %e, "listing the inputs buckets failed; the shared one only");
                    vec![INPUTS_BUCKET.to_owned()]
                });
                let buckets: Vec<String> = blobs.iter().cloned().chain(inputs).collect();
                if let Err(e) = janitor.sweep(&topology.js, &buckets, ORPHAN_GRACE).await {
                    debug!(err = %e, "looking for orphaned chunks failed; trying again next time");
                }
                continue;
            }
            _ = ticker.tick() => {}
        }
        let swept = match sweeper.sweep().await {
            Ok(swept) => swept,
            Err(e) => {
                debug!(err = %e, "sweep failed; trying again next time");
                continue;
            }
        };
        for record in &swept.ended {
            delete_queued_blobs(&topology, record).await;
        }
        if !swept.ended.is_empty() || swept.published > 0 || swept.assembled > 0 {
            warn!(
                ended = swept.ended.len(),
                assembled = swept.assembled,
                published = swept.published,
                waiting = swept.waiting,
                open = swept.open,
                "swept stuck jobs"
            );
        }
    }
}
