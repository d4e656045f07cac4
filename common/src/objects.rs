//! Object-store access with the cluster's size bounds and retry policy: witness blobs and large
//! job inputs.

use async_nats::jetstream::object_store::{
    DeleteErrorKind, InfoErrorKind, ObjectMetadata, ObjectStore,
};
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::nats::{retry, RetryPolicy};
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

/// Reads a whole object after checking its declared size against `limit`; the read itself is
/// capped too, so a lying header cannot make us allocate more.
pub async fn read_bounded(
    store: &ObjectStore,
    name: &str,
    limit: u64,
) -> Result<Vec<u8>, ObjectError> {
    let info = match store.info(name).await {
        Ok(info) => info,
        Err(e) if e.kind() == InfoErrorKind::NotFound => {
            return Err(ObjectError::NotFound(name.into()))
        }
        Err(e) => return Err(unavailable(name, e)),
    };
    let size = info.size as u64;
    if size > limit {
        return Err(ObjectError::TooLarge {
            name: name.into(),
            size,
            limit,
        });
    }
    retry("read object", RetryPolicy::NETWORK, || {
        bounded(name, size, async {
            let object = store.get(name).await.map_err(|e| unavailable(name, e))?;
            let mut bytes = Vec::with_capacity(size as usize);
            object
                .take(limit + 1)
                .read_to_end(&mut bytes)
                .await
                .map_err(|e| unavailable(name, e))?;
            if bytes.len() as u64 != size {
                return Err(unavailable(
                    name,
                    format!("read {} bytes, expected {size}", bytes.len()),
                ));
            }
            Ok(bytes)
        })
    })
    .await
}

pub async fn put(store: &ObjectStore, name: &str, bytes: &[u8]) -> Result<(), ObjectError> {
    retry("write object", RetryPolicy::NETWORK, || {
        bounded(name, bytes.len() as u64, async {
            let meta = ObjectMetadata {
                name: name.to_owned(),
                chunk_size: Some(BLOB_CHUNK_SIZE),
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

/// Deletes an object; one already gone is fine (a partition proved twice deletes twice).
pub async fn delete(store: &ObjectStore, name: &str) -> Result<(), ObjectError> {
    retry("delete object", RetryPolicy::NETWORK, || async {
        match store.delete(name).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == DeleteErrorKind::NotFound => Ok(()),
            Err(e) => Err(unavailable(name, e)),
        }
    })
    .await
}
