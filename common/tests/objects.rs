//! Striped objects against a real nats-server: a large blob goes up as several objects and comes
//! back byte for byte; plain objects (written by anything else) still read; a missing or
//! truncated stripe fails the read instead of returning short data; delete removes every stripe.

use std::time::Duration;

use async_nats::jetstream::object_store::{Config, ObjectStore};
use async_nats::jetstream::stream::Stream;
use cuzk_common::local_nats::NatsServer;
use cuzk_common::objects::{self, ObjectError, STRIPE_BYTES};
use futures::StreamExt;
use rand::RngCore;

/// The bucket and its stream (objects are read chunk by chunk from the stream).
async fn store(server: &NatsServer) -> (ObjectStore, Stream<()>) {
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let store = js
        .create_object_store(Config {
            bucket: "t".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    (store, js.get_stream_no_info("OBJ_t").await.unwrap())
}

async fn names(store: &ObjectStore) -> Vec<String> {
    let mut list = store.list().await.unwrap();
    let mut names = Vec::new();
    while let Some(info) = list.next().await {
        names.push(info.unwrap().name);
    }
    names.sort();
    names
}

fn random(len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes
}

#[tokio::test]
async fn a_large_object_is_striped_and_read_back_whole() {
    let server = NatsServer::start().unwrap();
    let (store, stream) = store(&server).await;
    let bytes = random(3 * STRIPE_BYTES + 12345);
    objects::put(&store, "blob", &bytes).await.unwrap();
    assert_eq!(
        names(&store).await,
        ["blob", "blob.stripe1", "blob.stripe2", "blob.stripe3"]
    );
    let back = objects::read_bounded(
        &store,
        std::slice::from_ref(&stream),
        "blob",
        bytes.len() as u64,
    )
    .await
    .unwrap();
    assert!(back == bytes, "striped read differs");

    // The limit applies to the whole, not to a stripe.
    let err = objects::read_bounded(
        &store,
        std::slice::from_ref(&stream),
        "blob",
        bytes.len() as u64 - 1,
    )
    .await
    .map(|b| b.len())
    .unwrap_err();
    assert!(matches!(err, ObjectError::TooLarge { .. }), "{err}");

    objects::delete(&store, "blob").await.unwrap();
    assert!(names(&store).await.is_empty());
    // Deleting again is fine (a partition proved twice).
    objects::delete(&store, "blob").await.unwrap();
}

#[tokio::test]
async fn plain_and_small_objects_are_one_object() {
    let server = NatsServer::start().unwrap();
    let (store, stream) = store(&server).await;
    let small = random(1000);
    objects::put(&store, "small", &small).await.unwrap();
    // Written by the object store itself, as `nats object put` would.
    let plain = random(STRIPE_BYTES * 2);
    store.put("plain", &mut plain.as_slice()).await.unwrap();
    assert_eq!(names(&store).await, ["plain", "small"]);
    for (name, bytes) in [("small", &small), ("plain", &plain)] {
        let back = objects::read_bounded(&store, std::slice::from_ref(&stream), name, 1 << 30)
            .await
            .unwrap();
        assert!(&back == bytes, "{name} differs");
    }
}

#[tokio::test]
async fn a_missing_or_short_stripe_fails_the_read() {
    let server = NatsServer::start().unwrap();
    let (store, stream) = store(&server).await;
    let bytes = random(2 * STRIPE_BYTES + 1);
    objects::put(&store, "gone", &bytes).await.unwrap();
    store.delete("gone.stripe2").await.unwrap();
    let err = tokio::time::timeout(
        Duration::from_secs(60),
        objects::read_bounded(&store, std::slice::from_ref(&stream), "gone", 1 << 30),
    )
    .await
    .expect("a missing stripe must not hang the read")
    .map(|b| b.len())
    .unwrap_err();
    assert!(matches!(err, ObjectError::NotFound(_)), "{err}");

    objects::put(&store, "short", &bytes).await.unwrap();
    store
        .put("short.stripe1", &mut &bytes[..100])
        .await
        .unwrap();
    let err = objects::read_bounded(&store, std::slice::from_ref(&stream), "short", 1 << 30)
        .await
        .map(|b| b.len())
        .unwrap_err();
    assert!(
        matches!(err, ObjectError::Unavailable { ref message, .. } if message.contains("expected")),
        "{err}"
    );
}
