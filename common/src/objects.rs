//! Object-store access with the cluster's size bounds and retry policy: witness blobs and large
//! job inputs. Each stripe of an object is read through an ordered push consumer of its own,
//! named and filtered to the stripe's chunks (what deploy/nats/auth.conf lets the reading roles
//! create), and checked against the SHA-256 digest its writer stored.

use async_nats::jetstream::consumer::push::OrderedConfig;
use async_nats::jetstream::object_store::{
    DeleteErrorKind, InfoErrorKind, ObjectInfo, ObjectMetadata, ObjectStore,
};
use async_nats::jetstream::Context;
use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

use crate::nats::{retry_retryable as retry, RetryPolicy};
use crate::topology::BLOB_CHUNK_SIZE;

#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("object {0} not found (expired or never written)")]
    NotFound(String),
    #[error("object {name} is {size} bytes, over the limit of {limit}")]
    TooLarge { name: String, size: u64, limit: u64 },
    #[error("object store unavailable for {name}: {message}")]
    Unavailable { name: String, message: String },
}

impl cuzk_wire::Retryable for ObjectError {
    fn retryable(&self) -> bool {
        matches!(self, ObjectError::Unavailable { .. })
    }
}

/// Bound on one whole-object transfer: a stalled chunk stream (the object store reads through an
/// ordered consumer, which has no deadline of its own) is retried instead of hanging the caller.
/// 30 s plus one second per 8 MiB: far above any healthy link, far below an operator's patience.
fn transfer_timeout(bytes: u64) -> Duration {
    Duration::from_secs(30 + bytes / (8 << 20))
}

async fn bounded<T>(
    name: &str,
    bytes: u64,
    op: impl std::future::Future<Output = Result<T, ObjectError>>,
) -> Result<T, ObjectError> {
    let limit = transfer_timeout(bytes);
    tokio::time::timeout(limit, op).await.unwrap_or_else(|_| {
        Err(unavailable(
            name,
            format!("transfer timed out after {limit:?}"),
        ))
    })
}

fn unavailable(name: &str, e: impl std::fmt::Display) -> ObjectError {
    ObjectError::Unavailable {
        name: name.to_owned(),
        message: e.to_string(),
    }
}

/// Objects above this size are written as several stripes (objects `NAME`, `NAME.stripe1`, …)
/// moved concurrently: the object store acknowledges chunk by chunk, so one object moves at one
/// round trip per chunk (~300–400 MB/s measured on the H200 host, docs/gpu.md) and stripes are
/// what makes a blob move at GB/s.
pub const STRIPE_BYTES: usize = 8 << 20;
/// At most this many stripes; larger objects get larger stripes.
pub const MAX_STRIPES: usize = 16;
const META_STRIPE_BYTES: &str = "cuzk-stripe-bytes";
const META_TOTAL_BYTES: &str = "cuzk-total-bytes";

/// How an object of `total` bytes is cut: every stripe `stripe_bytes` long but the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    total: usize,
    stripe_bytes: usize,
}

impl Layout {
    fn for_len(total: usize) -> Layout {
        Layout {
            total,
            stripe_bytes: STRIPE_BYTES.max(total.div_ceil(MAX_STRIPES)),
        }
    }

    fn stripes(&self) -> usize {
        self.total.div_ceil(self.stripe_bytes).max(1)
    }

    fn range(&self, stripe: usize) -> std::ops::Range<usize> {
        let start = (stripe * self.stripe_bytes).min(self.total);
        start..(start + self.stripe_bytes).min(self.total)
    }

    /// The head object's description of the whole; an object written without stripes (by an
    /// older node, or by `nats object put`) is one stripe of its own size.
    fn from_info(info: &ObjectInfo) -> Result<Layout, ObjectError> {
        let field = |key: &str| info.metadata.get(key).map(|v| v.parse::<usize>());
        let layout = match (field(META_TOTAL_BYTES), field(META_STRIPE_BYTES)) {
            (None, None) => Layout {
                total: info.size,
                stripe_bytes: info.size.max(1),
            },
            (Some(Ok(total)), Some(Ok(stripe_bytes))) if stripe_bytes > 0 => Layout {
                total,
                stripe_bytes,
            },
            _ => return Err(unavailable(&info.name, "malformed stripe metadata")),
        };
        if layout.stripes() > MAX_STRIPES || layout.range(0).len() != info.size {
            return Err(unavailable(
                &info.name,
                format!(
                    "stripe metadata ({} of {} bytes) does not match its {} bytes",
                    layout.total, layout.stripe_bytes, info.size
                ),
            ));
        }
        Ok(layout)
    }

    fn metadata(&self) -> HashMap<String, String> {
        if self.stripes() == 1 {
            return HashMap::new();
        }
        HashMap::from([
            (META_TOTAL_BYTES.to_owned(), self.total.to_string()),
            (META_STRIPE_BYTES.to_owned(), self.stripe_bytes.to_string()),
        ])
    }
}

fn stripe_name(name: &str, stripe: usize) -> String {
    match stripe {
        0 => name.to_owned(),
        i => format!("{name}.stripe{i}"),
    }
}

async fn info(store: &ObjectStore, name: &str) -> Result<ObjectInfo, ObjectError> {
    retry("object info", RetryPolicy::NETWORK, || async {
        match store.info(name).await {
            // A deleted object's info is its tombstone.
            Ok(info) if info.deleted => Err(ObjectError::NotFound(name.into())),
            Ok(info) => Ok(info),
            Err(e) if e.kind() == InfoErrorKind::NotFound => {
                Err(ObjectError::NotFound(name.into()))
            }
            Err(e) => Err(unavailable(name, e)),
        }
    })
    .await
}

/// Stripes of one object read through one connection at once. Each is an ordered consumer
/// pushing into the connection: four 80 MB blobs read at once through one connection (40
/// consumers) fell to 17 MB/s (docs/gpu.md, run 14).
const STRIPES_PER_CONNECTION: usize = 4;

/// Reads a whole (possibly striped) object of `store` after checking its declared size against
/// `limit`; every stripe's read is capped at its declared length, so a lying header cannot make
/// us allocate more. `readers` are JetStream contexts on one or more connections; stripe `i` is
/// read through `readers[i % len]`.
pub async fn read_bounded(
    store: &ObjectStore,
    readers: &[Context],
    name: &str,
    limit: u64,
) -> Result<Vec<u8>, ObjectError> {
    if readers.is_empty() {
        return Err(unavailable(name, "no connection to read it through"));
    }
    let layout = Layout::from_info(&info(store, name).await?)?;
    if layout.total as u64 > limit {
        return Err(ObjectError::TooLarge {
            name: name.into(),
            size: layout.total as u64,
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
        let (store, js) = (store.clone(), readers[i % readers.len()].clone());
        let slot = slots[i % readers.len()].clone();
        let (stripe, size) = (stripe_name(name, i), layout.range(i).len());
        tasks.spawn(async move {
            let _slot = slot.acquire_owned().await;
            (i, read_stripe(&store, &js, &stripe, size).await)
        });
    }
    let mut stripes = vec![Vec::new(); layout.stripes()];
    while let Some(done) = tasks.join_next().await {
        let (i, chunks) = done.map_err(|e| unavailable(name, e))?;
        stripes[i] = chunks?;
    }
    let mut bytes = Vec::with_capacity(layout.total);
    for chunk in stripes.iter().flatten() {
        bytes.extend_from_slice(chunk);
    }
    Ok(bytes)
}

/// A stripe's chunks, `size` bytes in all.
async fn read_stripe(
    store: &ObjectStore,
    js: &Context,
    name: &str,
    size: usize,
) -> Result<Vec<Bytes>, ObjectError> {
    retry("read object", RetryPolicy::NETWORK, || {
        bounded(name, size as u64, async {
            let info = info(store, name).await?;
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

/// Reads a stripe's chunks through an ordered push consumer of its own: the server streams them
/// to our inbox under flow control, where a direct get per chunk waited a round trip each
/// (16-core H200 box, 80 MB blobs, 1–16 connections: 580–765 MB/s against 490–705 by direct
/// gets). The consumer is named, so that the create request's subject carries the filter
/// (`$JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>`, which nats-server 2.9 checks against the
/// config): auth.conf allows chunk filters only.
async fn read_chunks(js: &Context, info: &ObjectInfo) -> Result<Vec<Bytes>, ObjectError> {
    let name = info.name.as_str();
    let mut chunks = Chunks::new(info);
    if info.chunks == 0 {
        return chunks.finish();
    }
    let stream = format!("OBJ_{}", info.bucket);
    let config = OrderedConfig {
        name: Some(format!("cuzk-read-{:016x}", rand::random::<u64>())),
        deliver_subject: js.client().new_inbox(),
        filter_subject: format!("$O.{}.C.{}", info.bucket, info.nuid),
        ..Default::default()
    };
    let consumer = js
        .create_consumer_on_stream(config, &stream)
        .await
        .map_err(|e| unavailable(name, e))?;
    let _delete = DeleteOnDrop {
        js: js.clone(),
        stream,
        consumer: consumer.cached_info().name.clone(),
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
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| unavailable(name, e))?;
    loop {
        let chunk = messages
            .next()
            .await
            .ok_or_else(|| unavailable(name, "chunk stream ended"))?
            .map_err(|e| unavailable(name, e))?;
        let last = chunk.info().map_err(|e| unavailable(name, e))?.pending == 0;
        chunks.push(chunk.message.payload)?;
        if last {
            return chunks.finish();
        }
    }
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

/// Writes `bytes` as one object, striped when large; all stripes go up at once.
pub async fn put(store: &ObjectStore, name: &str, bytes: &[u8]) -> Result<(), ObjectError> {
    let layout = Layout::for_len(bytes.len());
    futures::future::try_join_all((0..layout.stripes()).map(|i| {
        let metadata = if i == 0 {
            layout.metadata()
        } else {
            HashMap::new()
        };
        put_stripe(
            store,
            stripe_name(name, i),
            &bytes[layout.range(i)],
            metadata,
        )
    }))
    .await
    .map(|_| ())
}

async fn put_stripe(
    store: &ObjectStore,
    name: String,
    bytes: &[u8],
    metadata: HashMap<String, String>,
) -> Result<(), ObjectError> {
    let name = name.as_str();
    retry("write object", RetryPolicy::NETWORK, || {
        bounded(name, bytes.len() as u64, async {
            let meta = ObjectMetadata {
                name: name.to_owned(),
                chunk_size: Some(BLOB_CHUNK_SIZE),
                metadata: metadata.clone(),
                ..Default::default()
            };
            let mut reader = bytes;
            store
                .put(meta, &mut reader)
                .await
                .map(|_| ())
                .map_err(|e| unavailable(name, e))
        })
    })
    .await
}

/// Deletes an object and its stripes; one already gone is fine (a partition proved twice
/// deletes twice). The head goes last, so a delete retried after a failure still finds the
/// stripes; stripes orphaned anyway expire with the bucket's age limit.
pub async fn delete(store: &ObjectStore, name: &str) -> Result<(), ObjectError> {
    let stripes = match info(store, name).await {
        Ok(info) => Layout::from_info(&info).map_or(1, |l| l.stripes()),
        Err(ObjectError::NotFound(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    for stripe in (0..stripes).rev() {
        delete_one(store, &stripe_name(name, stripe)).await?;
    }
    Ok(())
}

async fn delete_one(store: &ObjectStore, name: &str) -> Result<(), ObjectError> {
    retry("delete object", RetryPolicy::NETWORK, || async {
        match store.delete(name).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == DeleteErrorKind::NotFound => Ok(()),
            Err(e) => Err(unavailable(name, e)),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(size: usize, metadata: HashMap<String, String>) -> ObjectInfo {
        ObjectInfo {
            name: "o".into(),
            description: None,
            metadata,
            headers: None,
            options: None,
            bucket: "b".into(),
            nuid: "n".into(),
            size,
            chunks: 1,
            modified: None,
            digest: None,
            deleted: false,
        }
    }

    #[test]
    fn layouts_cover_every_byte_once() {
        for total in [
            0,
            1,
            STRIPE_BYTES - 1,
            STRIPE_BYTES,
            STRIPE_BYTES + 1,
            79_339_268,
            1 << 30,
        ] {
            let l = Layout::for_len(total);
            assert!(l.stripes() <= MAX_STRIPES, "{total}");
            let mut next = 0;
            for i in 0..l.stripes() {
                let r = l.range(i);
                assert_eq!(r.start, next, "{total}");
                assert!(!r.is_empty() || total == 0, "{total}: stripe {i} empty");
                next = r.end;
            }
            assert_eq!(next, total);
            let head = info(l.range(0).len(), l.metadata());
            let read = Layout::from_info(&head).unwrap();
            assert_eq!(read.stripes(), l.stripes(), "{total}");
            for i in 0..l.stripes() {
                assert_eq!(read.range(i), l.range(i), "{total}");
            }
        }
    }

    #[test]
    fn plain_objects_are_one_stripe() {
        let l = Layout::from_info(&info(5, HashMap::new())).unwrap();
        assert_eq!((l.stripes(), l.range(0)), (1, 0..5));
    }

    #[test]
    fn lying_stripe_metadata_is_refused() {
        let bad = [
            vec![(META_TOTAL_BYTES, "100".to_string())],
            vec![
                (META_TOTAL_BYTES, "x".into()),
                (META_STRIPE_BYTES, "10".into()),
            ],
            vec![
                (META_TOTAL_BYTES, "100".into()),
                (META_STRIPE_BYTES, "0".into()),
            ],
            // 1000 stripes: over the bound.
            vec![
                (META_TOTAL_BYTES, "1000".into()),
                (META_STRIPE_BYTES, "1".into()),
            ],
            // The head is 10 bytes but claims 20-byte stripes.
            vec![
                (META_TOTAL_BYTES, "100".into()),
                (META_STRIPE_BYTES, "20".into()),
            ],
        ];
        for meta in bad {
            let meta: HashMap<_, _> = meta.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            assert!(
                Layout::from_info(&info(10, meta.clone())).is_err(),
                "{meta:?}"
            );
        }
    }
}
