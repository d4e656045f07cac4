//! Striped objects against a real nats-server: a large blob goes up as several objects and comes
//! back byte for byte, through one connection or several, leaving no consumer behind; plain
//! objects (written by anything else) still read; a missing or truncated stripe, or one whose
//! chunks are gone, fails the read instead of returning short data; delete removes every stripe.

use std::time::Duration;

use async_nats::jetstream::object_store::{Config, ObjectStore};
use async_nats::jetstream::Context;
use cuzk_common::local_nats::NatsServer;
use cuzk_common::objects::{self, ObjectError, STRIPE_BYTES};
use futures::StreamExt;
use rand::RngCore;

/// The bucket and the JetStream context objects are read through.
async fn store(server: &NatsServer) -> (ObjectStore, Context) {
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let store = js
        .create_object_store(Config {
            bucket: "t".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    (store, js)
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
    let (store, js) = store(&server).await;
    let bytes = random(3 * STRIPE_BYTES + 12345);
    objects::put(&store, "blob", &bytes).await.unwrap();
    assert_eq!(
        names(&store).await,
        ["blob", "blob.stripe1", "blob.stripe2", "blob.stripe3"]
    );
    let back = objects::read_bounded(
        &store,
        std::slice::from_ref(&js),
        "blob",
        bytes.len() as u64,
    )
    .await
    .unwrap();
    assert!(back == bytes, "striped read differs");

    // The limit applies to the whole, not to a stripe.
    let err = objects::read_bounded(
        &store,
        std::slice::from_ref(&js),
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

/// The consumers left on the bucket's stream once the reads' deletes (spawned) have run.
async fn consumers_left(js: &Context) -> Vec<String> {
    let stream = js.get_stream("OBJ_t").await.unwrap();
    for _ in 0..50 {
        let names: Vec<String> = stream.consumer_names().map(|n| n.unwrap()).collect().await;
        if names.is_empty() {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stream.consumer_names().map(|n| n.unwrap()).collect().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripes_read_through_several_connections_leave_no_consumer() {
    let server = NatsServer::start().unwrap();
    let (store, js) = store(&server).await;
    let other = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let bytes = random(5 * STRIPE_BYTES + 7);
    objects::put(&store, "blob", &bytes).await.unwrap();
    let readers = [js.clone(), other];
    let back = objects::read_bounded(&store, &readers, "blob", 1 << 30)
        .await
        .unwrap();
    assert!(back == bytes, "striped read differs");
    assert_eq!(consumers_left(&js).await, Vec::<String>::new());
}

#[tokio::test]
async fn plain_and_small_objects_are_one_object() {
    let server = NatsServer::start().unwrap();
    let (store, js) = store(&server).await;
    let small = random(1000);
    objects::put(&store, "small", &small).await.unwrap();
    // Written by the object store itself, as `nats object put` would.
    let plain = random(STRIPE_BYTES * 2);
    store.put("plain", &mut plain.as_slice()).await.unwrap();
    assert_eq!(names(&store).await, ["plain", "small"]);
    for (name, bytes) in [("small", &small), ("plain", &plain)] {
        let back = objects::read_bounded(&store, std::slice::from_ref(&js), name, 1 << 30)
            .await
            .unwrap();
        assert!(&back == bytes, "{name} differs");
    }
}

#[tokio::test]
async fn a_missing_or_short_stripe_fails_the_read() {
    let server = NatsServer::start().unwrap();
    let (store, js) = store(&server).await;
    let bytes = random(2 * STRIPE_BYTES + 1);
    objects::put(&store, "gone", &bytes).await.unwrap();
    store.delete("gone.stripe2").await.unwrap();
    let err = tokio::time::timeout(
        Duration::from_secs(60),
        objects::read_bounded(&store, std::slice::from_ref(&js), "gone", 1 << 30),
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
    let err = objects::read_bounded(&store, std::slice::from_ref(&js), "short", 1 << 30)
        .await
        .map(|b| b.len())
        .unwrap_err();
    assert!(
        matches!(err, ObjectError::Unavailable { ref message, .. } if message.contains("expected")),
        "{err}"
    );

    // The stripe's info is there but its chunks are gone: refused when the consumer is created
    // (it counts them), not after heartbeating until the transfer timeout.
    objects::put(&store, "purged", &bytes).await.unwrap();
    let nuid = store.info("purged.stripe1").await.unwrap().nuid;
    js.get_stream("OBJ_t")
        .await
        .unwrap()
        .purge()
        .filter(format!("$O.t.C.{nuid}"))
        .await
        .unwrap();
    let err = tokio::time::timeout(
        Duration::from_secs(25),
        objects::read_bounded(&store, std::slice::from_ref(&js), "purged", 1 << 30),
    )
    .await
    .expect("missing chunks must not wait for the transfer timeout")
    .map(|b| b.len())
    .unwrap_err();
    assert!(
        matches!(err, ObjectError::Unavailable { ref message, .. } if message.contains("chunks stored")),
        "{err}"
    );
}
