//! Object-store access with the cluster's size bounds and retry policy: witness blobs and large
//! job inputs. A large object is cut into stripes spread over a set of buckets ([`Shards`],
//! layout.rs). Each stripe is read through an ordered push consumer of its own on its bucket's
//! stream, named and filtered to the stripe's chunks (what deploy/nats/auth.conf lets the reading
//! roles create), and checked against the SHA-256 digest its writer stored.

use async_nats::jetstream::object_store::{
    DeleteErrorKind, InfoErrorKind, ObjectInfo, ObjectMetadata, ObjectStore, PutErrorKind,
};
use async_nats::jetstream::Context;
use base64::Engine;
use bytes::Bytes;
use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use crate::retry::{retry_retryable as retry, retry_when, RetryPolicy};

pub mod janitor;
mod layout;
mod read;

use layout::{stripe_name, Layout};
pub use layout::{MAX_SHARDS, MAX_STRIPES, STRIPE_BYTES};
pub use read::{read_bounded, read_bounded_into};

/// Object-store chunk size: under the default 1 MiB `max_payload`, large to cut per-chunk acks.
pub const BLOB_CHUNK_SIZE: usize = 1024 * 1024 - 4096;

#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("object {0} not found (expired or never written)")]
    NotFound(String),
    /// Fatal: the object's head declares more than the reader's cap; nothing was allocated.
    #[error("object {name} declares {size} bytes, over the limit of {limit}")]
    TooLarge { name: String, size: u64, limit: u64 },
    #[error("object store unavailable for {name}: {message}")]
    Unavailable { name: String, message: String },
    /// Retryable once there is room: the bucket, or the server's store, refused the write for
    /// lack of it, so a write at once would be refused again.
    #[error("no room for object {name}: {message}")]
    Full { name: String, message: String },
    /// Retryable: a node that knows the buckets (one of the writer's version) may read it.
    #[error("object {name} is spread over {shards} buckets; this node knows {known}")]
    UnknownShards {
        name: String,
        shards: usize,
        known: usize,
    },
}

impl cuzk_wire::Retryable for ObjectError {
    fn retryable(&self) -> bool {
        matches!(
            self,
            ObjectError::Unavailable { .. }
                | ObjectError::Full { .. }
                | ObjectError::UnknownShards { .. }
        )
    }
}

/// The buckets objects are spread over, the head bucket first: stripe `i` of an object written
/// over `n` of them lives in bucket `i % n`, and the head object (stripe 0) says `n`. Witness
/// blobs use several (topology.rs, `BLOB_SHARDS`): nats-server 2.9 sends all of one stream's
/// messages from one goroutine, which caps one bucket's reads. Inputs use one.
#[derive(Clone)]
pub struct Shards {
    stores: Vec<ObjectStore>,
    /// The connection the buckets were opened on and their names, where known: an object a
    /// replica's direct get does not find is then looked up on the stream's leader (see
    /// [`info`]).
    leader: Option<(Context, Vec<String>)>,
}

/// Where a "not found" from a direct get is confirmed: a bucket's stream by name, through a
/// connection.
type Leader<'a> = Option<(&'a Context, &'a str)>;

impl Shards {
    /// The set, head bucket first; `None` unless it holds 1 to [`MAX_SHARDS`] buckets.
    pub fn new(stores: Vec<ObjectStore>) -> Option<Shards> {
        (1..=MAX_SHARDS).contains(&stores.len()).then_some(Shards {
            stores,
            leader: None,
        })
    }

    /// The set of the buckets `names`, opened on `js` (head first), whose missing objects are
    /// confirmed missing by each stream's leader.
    pub fn named(js: &Context, buckets: Vec<(String, ObjectStore)>) -> Option<Shards> {
        let (names, stores) = buckets.into_iter().unzip();
        let mut shards = Shards::new(stores)?;
        shards.leader = Some((js.clone(), names));
        Some(shards)
    }

    pub fn one(store: ObjectStore) -> Shards {
        Shards {
            stores: vec![store],
            leader: None,
        }
    }

    /// How many buckets: what this node writes over, and the most it can read from.
    pub fn count(&self) -> usize {
        self.stores.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &ObjectStore> {
        self.stores.iter()
    }

    /// The first bucket: every object's head, and every object of one stripe.
    pub fn head(&self) -> &ObjectStore {
        &self.stores[0]
    }

    /// The bucket holding `stripe`; `layout` is this set's own (`Layout::for_len`) or one
    /// `Layout::from_info` checked against it, so the index is in range.
    fn of(&self, layout: &Layout, stripe: usize) -> &ObjectStore {
        &self.stores[layout.shard(stripe)]
    }

    /// Where bucket `index`'s missing objects are confirmed, if anywhere.
    fn leader(&self, index: usize) -> Leader<'_> {
        self.leader
            .as_ref()
            .map(|(js, names)| (js, names[index].as_str()))
    }
}

/// What [`put`], [`read_bounded`] and [`delete`] take: a set of buckets, or a single bucket
/// (the inputs buckets), which is a set of one.
pub trait AsShards {
    fn as_shards(&self) -> Cow<'_, Shards>;
}

impl AsShards for Shards {
    fn as_shards(&self) -> Cow<'_, Shards> {
        Cow::Borrowed(self)
    }
}

impl AsShards for ObjectStore {
    fn as_shards(&self) -> Cow<'_, Shards> {
        Cow::Owned(Shards::one(self.clone()))
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

/// What nats-server answers a write that does not fit: a stream at its byte limit (discard
/// new), or a server whose store is full.
const NO_ROOM: [&str; 2] = ["maximum bytes exceeded", "insufficient resources"];

/// A failed write: [`ObjectError::Full`] where the server refused it for lack of room.
fn refused(name: &str, e: impl std::fmt::Display) -> ObjectError {
    let message = e.to_string();
    if NO_ROOM.iter().any(|m| message.contains(m)) {
        ObjectError::Full {
            name: name.to_owned(),
            message,
        }
    } else {
        unavailable(name, message)
    }
}

async fn info(
    store: &ObjectStore,
    leader: Leader<'_>,
    name: &str,
) -> Result<ObjectInfo, ObjectError> {
    retry("object info", RetryPolicy::NETWORK, || async {
        match store.info(name).await {
            // A deleted object's info is its tombstone.
            Ok(info) if info.deleted => Err(ObjectError::NotFound(name.into())),
            Ok(info) => Ok(info),
            Err(e) if e.kind() == InfoErrorKind::NotFound => match leader {
                Some((js, bucket)) => leader_info(js, bucket, name).await,
                None => Err(ObjectError::NotFound(name.into())),
            },
            Err(e) => Err(unavailable(name, e)),
        }
    })
    .await
}

/// An object's info as the bucket stream's leader has it. A direct get is answered by any
/// server holding the stream, one that is still catching up after a restart too, and that one
/// answers "not found" for an object written while it was down: a blob read then failed its
/// job, and a delete took the object for gone and leaked it (docs/reliability.md, "Soak").
async fn leader_info(js: &Context, bucket: &str, name: &str) -> Result<ObjectInfo, ObjectError> {
    use async_nats::jetstream::stream::LastRawMessageErrorKind;
    let stream = bucket_stream(js, bucket, name).await?;
    match stream
        .get_last_raw_message_by_subject(&meta_subject(bucket, name))
        .await
    {
        Ok(message) => {
            let info: ObjectInfo = serde_json::from_slice(&message.payload)
                .map_err(|e| unavailable(name, format!("metadata: {e}")))?;
            if info.deleted {
                Err(ObjectError::NotFound(name.into()))
            } else {
                Ok(info)
            }
        }
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
            Err(ObjectError::NotFound(name.into()))
        }
        Err(e) => Err(unavailable(name, e)),
    }
}

/// A bucket's stream, without a round trip for its info.
async fn bucket_stream(
    js: &Context,
    bucket: &str,
    name: &str,
) -> Result<async_nats::jetstream::stream::Stream<()>, ObjectError> {
    js.get_stream_no_info(format!("OBJ_{bucket}"))
        .await
        .map_err(|e| unavailable(name, e))
}

/// The subject of an object's metadata, as the object store names it.
fn meta_subject(bucket: &str, name: &str) -> String {
    let encoded = base64::engine::general_purpose::URL_SAFE.encode(name);
    format!("$O.{bucket}.M.{encoded}")
}

/// Writes `bytes` as one object, striped over `shards` when large, through one connection.
pub async fn put(shards: &impl AsShards, name: &str, bytes: &[u8]) -> Result<(), ObjectError> {
    let shards = shards.as_shards().into_owned();
    put_through(&[shards], name, Bytes::copy_from_slice(bytes)).await
}

/// Writes `bytes` as one object, striped when large, all stripes at once: `writers` are the same
/// buckets opened on one or more connections, and stripe `i` goes up through `writers[i % len]`.
/// One connection's publishes share its socket and the one server goroutine that reads it, and
/// the object store hashes a stripe as it sends it: a task per stripe spreads both.
pub async fn put_through(writers: &[Shards], name: &str, bytes: Bytes) -> Result<(), ObjectError> {
    let Some(head) = writers.first() else {
        return Err(unavailable(name, "no connection to write it through"));
    };
    if writers.iter().any(|w| w.count() != head.count()) {
        return Err(unavailable(
            name,
            "its writers do not open the same buckets",
        ));
    }
    let layout = Layout::for_len(bytes.len(), head.count());
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..layout.stripes() {
        let metadata = if i == 0 {
            layout.metadata()
        } else {
            HashMap::new()
        };
        let store = writers[i % writers.len()].of(&layout, i).clone();
        let (stripe, part) = (stripe_name(name, i), bytes.slice(layout.range(i)));
        tasks.spawn(async move { put_stripe(&store, &stripe, &part, metadata).await });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| unavailable(name, e))??;
    }
    Ok(())
}

async fn put_stripe(
    store: &ObjectStore,
    name: &str,
    bytes: &[u8],
    metadata: HashMap<String, String>,
) -> Result<(), ObjectError> {
    // A refusal for lack of room goes back at once: room comes from readers, not from retries.
    let worth_retrying = |e: &ObjectError| !matches!(e, ObjectError::Full { .. });
    let write = || {
        bounded(name, bytes.len() as u64, async {
            let meta = ObjectMetadata {
                name: name.to_owned(),
                chunk_size: Some(BLOB_CHUNK_SIZE),
                metadata: metadata.clone(),
                ..Default::default()
            };
            let mut reader = bytes;
            match store.put(meta, &mut reader).await {
                Ok(_) => Ok(()),
                // Written; only the chunks of the object it replaced (a redelivered job
                // writing its partition again) are left, to the janitor, which reclaims chunks
                // no object names: a worker that may not purge gets here on every rewrite
                // (deploy/nats/accounts.conf).
                Err(e) if e.kind() == PutErrorKind::PurgeOldChunks => {
                    tracing::debug!(object = name, err = %e, "the replaced object's chunks are left to the janitor");
                    Ok(())
                }
                Err(e) => Err(refused(name, e)),
            }
        })
    };
    retry_when("write object", RetryPolicy::NETWORK, write, worth_retrying).await
}

/// Deletes an object and its stripes, each from its bucket; one already gone is fine (a
/// partition proved twice deletes twice). The head goes last, so a delete retried after a
/// failure still finds the stripes; stripes orphaned anyway (behind a head this node cannot
/// read, of which only the head is deleted) expire with their bucket's age limit.
pub async fn delete(shards: &impl AsShards, name: &str) -> Result<(), ObjectError> {
    let shards = shards.as_shards();
    let layout = match info(shards.head(), shards.leader(0), name).await {
        Ok(info) => Layout::from_info(&info, shards.count()).ok(),
        Err(ObjectError::NotFound(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let Some(layout) = layout else {
        return delete_one(shards.head(), shards.leader(0), name).await;
    };
    for stripe in (0..layout.stripes()).rev() {
        let (store, leader) = (
            shards.of(&layout, stripe),
            shards.leader(layout.shard(stripe)),
        );
        delete_one(store, leader, &stripe_name(name, stripe)).await?;
    }
    Ok(())
}

async fn delete_one(
    store: &ObjectStore,
    leader: Leader<'_>,
    name: &str,
) -> Result<(), ObjectError> {
    retry("delete object", RetryPolicy::NETWORK, || async {
        match store.delete(name).await {
            Ok(()) => Ok(()),
            // The object store looks the object up by a direct get first (see `leader_info`).
            Err(e) if e.kind() == DeleteErrorKind::NotFound => match leader {
                Some((js, bucket)) => match leader_info(js, bucket, name).await {
                    Ok(info) => tombstone(js, bucket, info).await,
                    Err(ObjectError::NotFound(_)) => Ok(()),
                    Err(e) => Err(e),
                },
                None => Ok(()),
            },
            Err(e) => Err(unavailable(name, e)),
        }
    })
    .await
}

/// Deletes an object as the object store does (its metadata replaced by a tombstone, then its
/// chunks purged), from `info` as the stream's leader has it.
async fn tombstone(js: &Context, bucket: &str, mut info: ObjectInfo) -> Result<(), ObjectError> {
    let name = info.name.clone();
    info.chunks = 0;
    info.size = 0;
    info.deleted = true;
    let body = serde_json::to_vec(&info).map_err(|e| unavailable(&name, e))?;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(async_nats::header::NATS_ROLLUP, "sub");
    let ack = js
        .publish_with_headers(meta_subject(bucket, &name), headers, body.into())
        .await
        .map_err(|e| unavailable(&name, e))?;
    ack.await.map_err(|e| unavailable(&name, e))?;
    bucket_stream(js, bucket, &name)
        .await?
        .purge()
        .filter(format!("$O.{bucket}.C.{}", info.nuid))
        .await
        .map_err(|e| unavailable(&name, e))?;
    Ok(())
}
