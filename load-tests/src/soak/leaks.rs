//! What a soak leaves behind: live objects and orphaned chunks in the blob and inputs buckets.

use cuzk_common::topology::{blob_shard_bucket, Topology};
use cuzk_wire::job::INPUTS_BUCKET;
use futures::StreamExt;

/// Live blob and staged-input objects, and chunk messages no object names (orphans), left in
/// the buckets.
#[derive(Default)]
pub(super) struct Leaks {
    pub(super) objects: usize,
    pub(super) chunks: u64,
    pub(super) errors: Vec<String>,
}

pub(super) async fn leaks(topology: &Topology) -> Leaks {
    let mut out = Leaks::default();
    let buckets = (0..topology.blobs.count())
        .map(blob_shard_bucket)
        .chain(std::iter::once(INPUTS_BUCKET.to_owned()));
    for bucket in buckets {
        match bucket_contents(&topology.js, &bucket).await {
            Ok((objects, chunks)) => {
                out.objects += objects;
                out.chunks += chunks;
            }
            Err(why) => out.errors.push(format!("{bucket}: {why}")),
        }
    }
    out
}

/// A bucket's live objects and chunk messages, from its stream (no listing consumer).
async fn bucket_contents(
    js: &async_nats::jetstream::Context,
    bucket: &str,
) -> Result<(usize, u64), async_nats::Error> {
    let stream = js.get_stream(format!("OBJ_{bucket}")).await?;
    let mut subjects = Vec::new();
    let mut info = stream.info_with_subjects(format!("$O.{bucket}.>")).await?;
    while let Some(entry) = info.next().await {
        subjects.push(entry?);
    }
    let mut objects = 0;
    let mut chunks = 0;
    for (subject, count) in subjects {
        if subject.starts_with(&format!("$O.{bucket}.C.")) {
            chunks += count as u64;
            continue;
        }
        let message = stream.get_last_raw_message_by_subject(&subject).await?;
        let info: async_nats::jetstream::object_store::ObjectInfo =
            serde_json::from_slice(&message.payload)?;
        objects += usize::from(!info.deleted);
    }
    Ok((objects, chunks))
}
