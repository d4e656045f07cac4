//! Reading objects: each stripe through an ordered push consumer of its own, named and filtered
//! to the stripe's chunks (or by direct gets when the consumer cannot be had), checked against
//! its digest, into memory that grows with the bytes read.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::push::OrderedConfig;
use async_nats::jetstream::object_store::{ObjectInfo, ObjectStore};
use async_nats::jetstream::Context;
use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use super::layout::{stripe_name, Layout};
use super::{bounded, bucket_stream, info, unavailable, AsShards, Leader, ObjectError};
use crate::retry::{retry_retryable as retry, RetryPolicy};
use crate::timing::ms;

/// Stripes of one object read through one connection at once. Each is an ordered consumer
/// pushing into the connection, and four 80 MB blobs read at once through one connection (40
/// consumers) nearly stalled (docs/gpu-runs.md, "32 GiB with two workers per device").
const STRIPES_PER_CONNECTION: usize = 4;

/// Reads a whole (possibly striped) object of `shards` after checking its declared size against
/// `limit` (the caller's cap: a circuit's input cap, the blob limit); every stripe's read is
/// capped at its declared length and the result grows with the bytes read, so a lying head
/// cannot make us allocate what it declares. `readers` are JetStream contexts on one or more connections; stripe `i` is
/// read through `readers[i % len]`.
pub async fn read_bounded(
    shards: &impl AsShards,
    readers: &[Context],
    name: &str,
    limit: u64,
) -> Result<Vec<u8>, ObjectError> {
    let mut bytes = Vec::new();
    read_bounded_into(shards, readers, name, limit, &mut bytes).await?;
    Ok(bytes)
}

/// [`read_bounded`] into `out` (replacing what it held): a buffer used again is memory already
/// mapped, where filling a fresh one spent a large share of a 32 GiB partition's fetch in page
/// faults (docs/gpu-runs.md, "H with six transforms; blobs read into reused buffers"). Each
/// stripe is copied once those before it have arrived, while the rest still stream.
pub async fn read_bounded_into(
    shards: &impl AsShards,
    readers: &[Context],
    name: &str,
    limit: u64,
    out: &mut Vec<u8>,
) -> Result<(), ObjectError> {
    let shards = shards.as_shards();
    if readers.is_empty() {
        return Err(unavailable(name, "no connection to read it through"));
    }
    let started = std::time::Instant::now();
    let head = info(shards.head(), shards.leader(0), name).await?;
    let layout = Layout::from_info(&head, shards.count())?;
    if layout.total() as u64 > limit {
        return Err(ObjectError::TooLarge {
            name: name.into(),
            size: layout.total() as u64,
            limit,
        });
    }
    // A task per stripe, so that stripes are hashed (SHA-256, a few GB/s a core) on all of the
    // runtime's threads rather than one. Dropping the set (an error, or the caller giving up)
    // aborts the rest.
    let slots: Vec<_> = readers
        .iter()
        .map(|_| Arc::new(Semaphore::new(STRIPES_PER_CONNECTION)))
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..layout.stripes() {
        let (store, js) = (
            shards.of(&layout, i).clone(),
            readers[i % readers.len()].clone(),
        );
        let leader = shards
            .leader(layout.shard(i))
            .map(|(js, bucket)| (js.clone(), bucket.to_owned()));
        let slot = slots[i % readers.len()].clone();
        let (stripe, size) = (stripe_name(name, i), layout.range(i).len());
        tasks.spawn(async move {
            let _slot = slot.acquire_owned().await;
            let leader = leader.as_ref().map(|(js, bucket)| (js, bucket.as_str()));
            (i, read_stripe(&store, leader, &js, &stripe, size).await)
        });
    }
    // Stripes are appended in order as they complete, so `out` grows with the bytes actually
    // read (reused capacity aside): a head that declares gigabytes costs nothing until they
    // arrive. A stripe that completes early waits, as the chunks it came in, for those before.
    out.clear();
    let mut early: BTreeMap<usize, Vec<Bytes>> = BTreeMap::new();
    let mut next = 0;
    while let Some(done) = tasks.join_next().await {
        let (i, chunks) = done.map_err(|e| unavailable(name, e))?;
        early.insert(i, chunks?);
        while let Some(chunks) = early.remove(&next) {
            for chunk in chunks {
                out.extend_from_slice(&chunk);
            }
            next += 1;
        }
    }
    // read_stripe checked each stripe's length against its range; a slip is an error all the
    // same, never a short object.
    if out.len() != layout.total() {
        return Err(unavailable(
            name,
            format!(
                "stripes hold {} bytes, expected {}",
                out.len(),
                layout.total()
            ),
        ));
    }
    debug!(
        object = name,
        stripes = layout.stripes(),
        bytes = out.len(),
        read_ms = ms(started.elapsed()),
        "object read"
    );
    Ok(())
}

/// A stripe's chunks, `size` bytes in all.
async fn read_stripe(
    store: &ObjectStore,
    leader: Leader<'_>,
    js: &Context,
    name: &str,
    size: usize,
) -> Result<Vec<Bytes>, ObjectError> {
    retry("read object", RetryPolicy::NETWORK, || {
        bounded(name, size as u64, async {
            let info = info(store, leader, name).await?;
            if info.size != size {
                return Err(unavailable(
                    name,
                    format!("stripe holds {} bytes, expected {size}", info.size),
                ));
            }
            read_chunks(js, &info).await
        })
    })
    .await
}

/// How long a stripe's read waits for its consumer to be created: a few milliseconds while the
/// cluster is whole. nats-server before 2.12 may place the consumer on any server of the
/// stream's, a dead one too, and then the create is never answered: waited out to the request
/// timeout (10 s), a blob of a dozen stripes nearly always met one while a server was down.
const CONSUMER_CREATE_DEADLINE: Duration = Duration::from_secs(1);

/// Reads a stripe's chunks through an ordered push consumer of its own: the server streams them
/// to our inbox under flow control, where a direct get per chunk waited a round trip each and
/// striped blobs fetched markedly slower (docs/gpu-runs.md, "32 GiB with two workers per
/// device"). The consumer is named, so that the create request's subject carries the filter
/// (`$JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>`, which nats-server 2.9 checks against the
/// config): auth.conf allows chunk filters only. A consumer not created within
/// [`CONSUMER_CREATE_DEADLINE`] is given up for direct gets.
async fn read_chunks(js: &Context, info: &ObjectInfo) -> Result<Vec<Bytes>, ObjectError> {
    let name = info.name.as_str();
    let mut chunks = Chunks::new(info);
    if info.chunks == 0 {
        return chunks.finish();
    }
    let started = std::time::Instant::now();
    let stream = format!("OBJ_{}", info.bucket);
    let config = OrderedConfig {
        name: Some(format!("cuzk-read-{:016x}", rand::random::<u64>())),
        deliver_subject: js.client().new_inbox(),
        filter_subject: format!("$O.{}.C.{}", info.bucket, info.nuid),
        ..Default::default()
    };
    // Before the create, so that one given up on is deleted too if it comes to exist.
    let _delete = DeleteOnDrop {
        js: js.clone(),
        stream: stream.clone(),
        consumer: config.name.clone().unwrap_or_default(),
    };
    let create = js.create_consumer_on_stream(config, &stream);
    let consumer = match tokio::time::timeout(CONSUMER_CREATE_DEADLINE, create).await {
        Ok(created) => created.map_err(|e| unavailable(name, e))?,
        Err(_) => {
            warn!(object = name, %stream, "no consumer within {CONSUMER_CREATE_DEADLINE:?}; reading by direct gets");
            return read_chunks_direct(js, info).await;
        }
    };
    // Checked before waiting on the stream: a stripe whose chunks are gone would otherwise only
    // heartbeat until the transfer timeout.
    let stored = consumer.cached_info().num_pending;
    if stored != info.chunks as u64 {
        return Err(unavailable(
            name,
            format!("{stored} chunks stored, expected {}", info.chunks),
        ));
    }
    let created = started.elapsed();
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| unavailable(name, e))?;
    let mut first = None;
    loop {
        let chunk = messages
            .next()
            .await
            .ok_or_else(|| unavailable(name, "chunk stream ended"))?
            .map_err(|e| unavailable(name, e))?;
        let last = chunk.info().map_err(|e| unavailable(name, e))?.pending == 0;
        first.get_or_insert_with(|| started.elapsed());
        chunks.push(chunk.message.payload)?;
        if last {
            // Where a stripe's time goes: the consumer's creation, the wait for its first chunk
            // and the stream of the rest (docs/gpu-runs.md reads these to place the fetch's floor).
            debug!(
                stripe = name,
                bytes = info.size,
                create_ms = ms(created),
                first_chunk_ms = ms(first.unwrap_or_default()),
                total_ms = ms(started.elapsed()),
                "stripe read"
            );
            return chunks.finish();
        }
    }
}

/// Reads a stripe's chunks by direct gets, one after another: a round trip per chunk, but
/// answered by any live server holding the stream, with no consumer to place.
async fn read_chunks_direct(js: &Context, info: &ObjectInfo) -> Result<Vec<Bytes>, ObjectError> {
    let name = info.name.as_str();
    let stream = bucket_stream(js, &info.bucket, name).await?;
    let subject = format!("$O.{}.C.{}", info.bucket, info.nuid);
    let mut chunks = Chunks::new(info);
    let mut next = 1;
    for _ in 0..info.chunks {
        let chunk = stream
            .direct_get_next_for_subject(subject.as_str(), Some(next))
            .await
            .map_err(|e| unavailable(name, e))?;
        next = chunk.sequence + 1;
        chunks.push(chunk.payload)?;
    }
    chunks.finish()
}

/// A stripe's chunks as they arrive: never more than its declared length, hashed as they come
/// (while the next is on its way), checked whole at the end.
struct Chunks<'a> {
    info: &'a ObjectInfo,
    chunks: Vec<Bytes>,
    len: usize,
    digest: Sha256,
}

impl<'a> Chunks<'a> {
    fn new(info: &'a ObjectInfo) -> Self {
        Chunks {
            info,
            chunks: Vec::new(),
            len: 0,
            digest: Sha256::new(),
        }
    }

    fn push(&mut self, chunk: Bytes) -> Result<(), ObjectError> {
        self.len += chunk.len();
        if self.len > self.info.size {
            return Err(unavailable(
                &self.info.name,
                format!("chunks exceed the declared {} bytes", self.info.size),
            ));
        }
        self.digest.update(&chunk);
        self.chunks.push(chunk);
        Ok(())
    }

    /// The stripe's length and the SHA-256 digest its writer stored.
    fn finish(self) -> Result<Vec<Bytes>, ObjectError> {
        let (name, size) = (self.info.name.as_str(), self.info.size);
        if self.len != size {
            return Err(unavailable(
                name,
                format!("read {} bytes, expected {size}", self.len),
            ));
        }
        let digest = format!(
            "SHA-256={}",
            base64::engine::general_purpose::URL_SAFE.encode(self.digest.finalize())
        );
        if self.info.digest.as_deref().is_some_and(|d| d != digest) {
            return Err(unavailable(name, "digest mismatch"));
        }
        Ok(self.chunks)
    }
}

/// Deletes a stripe's consumer however its read ends (done, failed, timed out): left alone, the
/// server keeps each for its 30 s inactivity threshold, one per stripe read. A consumer the
/// ordered stream replaced after a gap (`<name>_<n>`) is left to that threshold.
struct DeleteOnDrop {
    js: Context,
    stream: String,
    consumer: String,
}

impl Drop for DeleteOnDrop {
    fn drop(&mut self) {
        let js = self.js.clone();
        let stream = std::mem::take(&mut self.stream);
        let consumer = std::mem::take(&mut self.consumer);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { js.delete_consumer_from_stream(consumer, stream).await });
        }
    }
}
