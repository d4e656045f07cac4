//! The backstop for jobs nothing else will end: every synth node follows the jobs bucket
//! (`cuzk_common::lifecycle::sweep`) and fails jobs with no progress for
//! `--synth-no-progress-timeout` whose messages are gone from the queues, deleting the blobs
//! they left; it also assembles complete jobs and publishes results whose finisher died before
//! it did. Concurrent sweepers are harmless: the ledger ends a job once. Unless the ledger
//! service does (`--nats-ledger-service`), it also reclaims chunks no object names (an upload
//! killed midway) from the blob buckets and every inputs bucket, the shared one and each
//! submitter's (`cuzk_common::objects::janitor`).

use std::time::Duration;

use cuzk_common::lifecycle::{sweep::Sweeper, Ledger};
use cuzk_common::topology::Topology;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

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
    let janitor = (!topology.ledger_service).then(|| {
        tokio::spawn(cuzk_common::objects::janitor::run(
            topology.js.clone(),
            topology.blobs.count(),
            shutdown.clone(),
        ))
    });
    let mut sweeper = Sweeper::new(ledger.clone(), no_progress);
    let mut ticker = tokio::time::interval(interval(no_progress));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
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
            ledger.delete_queued_blobs(record).await;
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
    if let Some(janitor) = janitor {
        let _ = janitor.await;
    }
}
