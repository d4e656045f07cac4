//! Reclaims chunk sets no object names: what an upload killed midway leaves (its chunks went
//! out, its metadata message never did), or a delete that died between its two steps. Left
//! alone they would hold a bucket's bytes — and the synth nodes' back-pressure — for the
//! bucket's whole age limit.
//!
//! A chunk set is orphaned when no live metadata message names its nuid and it has not grown
//! for [`ORPHAN_GRACE`], as seen by this janitor's own clock across two looks (an upload in
//! progress keeps adding chunks; the nodes' and servers' clocks need not agree). Uploads write
//! their chunks before their metadata, so a set is judged only after the metadata has been
//! read.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use async_nats::jetstream::stream::Stream;
use async_nats::jetstream::Context;
use futures::TryStreamExt;
use serde::Deserialize;

use super::ObjectError;
use cuzk_wire::job::{valid_inputs_bucket, INPUTS_BUCKET};

/// How long a chunk set without an object must stay unchanged before it is purged: far longer
/// than the gap between two chunks of a live upload.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(300);

/// Every inputs bucket on the server: the shared one and each submitter's own
/// (`cuzk-inputs-<submitter>`, made by `cuzk provision` at any time), found by listing the
/// streams on each look.
pub async fn inputs_buckets(js: &Context) -> Result<Vec<String>, ObjectError> {
    let names: Vec<String> = js
        .stream_names()
        .try_collect()
        .await
        .map_err(|e| fault(INPUTS_BUCKET, e))?;
    let mut buckets: Vec<String> = names
        .iter()
        .filter_map(|n| n.strip_prefix("OBJ_"))
        .filter(|b| valid_inputs_bucket(b))
        .map(str::to_owned)
        .collect();
    buckets.sort();
    Ok(buckets)
}

/// How often to look for chunks no object names (reclaimed once unchanged for
/// [`ORPHAN_GRACE`]).
const INTERVAL: Duration = Duration::from_secs(60);

/// Looks at the `blob_buckets` blob buckets and every inputs bucket once every [`INTERVAL`]
/// until `shutdown`, purging the chunk sets orphaned for [`ORPHAN_GRACE`]. Run by whoever may
/// purge them: synth nodes, or the ledger service where they may not.
pub async fn run(js: Context, blob_buckets: usize, shutdown: tokio_util::sync::CancellationToken) {
    let mut janitor = Janitor::default();
    let mut ticker = tokio::time::interval(INTERVAL);
    let blobs: Vec<String> = (0..blob_buckets)
        .map(crate::topology::blob_shard_bucket)
        .collect();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let inputs = inputs_buckets(&js).await.unwrap_or_else(|e| {
            tracing::debug!(err = %e, "listing the inputs buckets failed; the shared one only");
            vec![INPUTS_BUCKET.to_owned()]
        });
        let buckets: Vec<String> = blobs.iter().cloned().chain(inputs).collect();
        if let Err(e) = janitor.sweep(&js, &buckets, ORPHAN_GRACE).await {
            tracing::debug!(err = %e, "looking for orphaned chunks failed; trying again next time");
        }
    }
}

/// The fields of an object's metadata message that tie it to its chunks.
#[derive(Deserialize)]
struct Named {
    nuid: String,
    #[serde(default)]
    deleted: bool,
}

/// Remembers, per chunk set without an object, its last chunk and since when it has not
/// changed.
#[derive(Default)]
pub struct Janitor {
    seen: HashMap<String, (u64, Instant)>,
}

impl Janitor {
    /// Looks at each bucket once; purges the chunk sets orphaned for `grace`. Returns how many
    /// it purged.
    pub async fn sweep(
        &mut self,
        js: &Context,
        buckets: &[String],
        grace: Duration,
    ) -> Result<usize, ObjectError> {
        let mut purged = 0;
        let mut present = HashSet::new();
        for bucket in buckets {
            let stream = js
                .get_stream(format!("OBJ_{bucket}"))
                .await
                .map_err(|e| fault(bucket, e))?;
            let chunks = subjects(&stream, bucket, &format!("$O.{bucket}.C.>")).await?;
            let live = live_nuids(&stream, bucket).await?;
            for subject in chunks {
                let nuid = subject.rsplit('.').next().unwrap_or_default();
                if live.contains(nuid) {
                    continue;
                }
                let last = match stream.direct_get_last_for_subject(subject.as_str()).await {
                    Ok(message) => message.sequence,
                    // Purged meanwhile (a delete finishing).
                    Err(_) => continue,
                };
                present.insert(subject.clone());
                match self.seen.get(&subject) {
                    Some(&(seq, since)) if seq == last && since.elapsed() >= grace => {
                        stream
                            .purge()
                            .filter(subject.as_str())
                            .await
                            .map_err(|e| fault(bucket, e))?;
                        tracing::warn!(bucket, %subject, "purged the chunks of an object that never was");
                        self.seen.remove(&subject);
                        present.remove(&subject);
                        purged += 1;
                    }
                    Some(&(seq, _)) if seq == last => {}
                    _ => {
                        self.seen.insert(subject, (last, Instant::now()));
                    }
                }
            }
        }
        self.seen.retain(|subject, _| present.contains(subject));
        Ok(purged)
    }
}

fn fault(bucket: &str, e: impl std::fmt::Display) -> ObjectError {
    ObjectError::Unavailable {
        name: bucket.to_owned(),
        message: e.to_string(),
    }
}

/// The subjects of `stream` under `filter` that hold messages.
async fn subjects(stream: &Stream, bucket: &str, filter: &str) -> Result<Vec<String>, ObjectError> {
    let listed = stream
        .info_with_subjects(filter)
        .await
        .map_err(|e| fault(bucket, e))?;
    listed
        .map_ok(|(subject, _)| subject)
        .try_collect()
        .await
        .map_err(|e| fault(bucket, e))
}

/// The nuids of the objects the bucket holds (not deleted).
async fn live_nuids(stream: &Stream, bucket: &str) -> Result<HashSet<String>, ObjectError> {
    let mut live = HashSet::new();
    for subject in subjects(stream, bucket, &format!("$O.{bucket}.M.>")).await? {
        let Ok(message) = stream.direct_get_last_for_subject(subject.as_str()).await else {
            continue;
        };
        if let Ok(named) = serde_json::from_slice::<Named>(&message.payload) {
            if !named.deleted {
                live.insert(named.nuid);
            }
        }
    }
    Ok(live)
}
