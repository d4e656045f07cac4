//! Striped objects against a real nats-server: a large blob goes up as several objects and comes
//! back byte for byte, through one connection or several, leaving no consumer behind, into a
//! fresh buffer or a reused one; plain
//! objects (written by anything else) still read; a missing or truncated stripe, or one whose
//! chunks are gone, fails the read instead of returning short data; delete removes every stripe.
//! Spread over several buckets: each holds its share of the stripes, objects written to one
//! bucket still read, a head naming more buckets than the reader has is refused.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_nats::jetstream::object_store::{Config, ObjectMetadata, ObjectStore};
use async_nats::jetstream::Context;
use cuzk_common::local_nats::NatsServer;
use cuzk_common::objects::{self, ObjectError, Shards, STRIPE_BYTES};
use futures::StreamExt;
use rand::RngCore;

/// Buckets `t`, `t-1`, … (`n` of them) and the JetStream context objects are read through.
async fn buckets(server: &NatsServer, n: usize) -> (Vec<ObjectStore>, Context) {
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut stores = Vec::new();
    for k in 0..n {
        let bucket = match k {
            0 => "t".to_owned(),
            k => format!("t-{k}"),
        };
        let config = Config {
            bucket,
            ..Default::default()
        };
        stores.push(js.create_object_store(config).await.unwrap());
    }
    (stores, js)
}

/// One bucket, as a set of one, and the JetStream context.
async fn store(server: &NatsServer) -> (ObjectStore, Shards, Context) {
    let (mut stores, js) = buckets(server, 1).await;
    let store = stores.remove(0);
    (store.clone(), Shards::one(store), js)
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
    let (store, one, js) = store(&server).await;
    let bytes = random(3 * STRIPE_BYTES + 12345);
    objects::put(&one, "blob", &bytes).await.unwrap();
    assert_eq!(
        names(&store).await,
        ["blob", "blob.stripe1", "blob.stripe2", "blob.stripe3"]
    );
    let back = objects::read_bounded(&one, std::slice::from_ref(&js), "blob", bytes.len() as u64)
        .await
        .unwrap();
    assert!(back == bytes, "striped read differs");

    // The limit applies to the whole, not to a stripe.
    let err = objects::read_bounded(
        &one,
        std::slice::from_ref(&js),
        "blob",
        bytes.len() as u64 - 1,
    )
    .await
    .map(|b| b.len())
    .unwrap_err();
    assert!(matches!(err, ObjectError::TooLarge { .. }), "{err}");

    objects::delete(&one, "blob").await.unwrap();
    assert!(names(&store).await.is_empty());
    // Deleting again is fine (a partition proved twice).
    objects::delete(&one, "blob").await.unwrap();
}

/// The consumers left on a bucket's stream once the reads' deletes (spawned) have run.
async fn consumers_left(js: &Context, stream: &str) -> Vec<String> {
    let stream = js.get_stream(stream).await.unwrap();
    for _ in 0..50 {
        let names: Vec<String> = stream.consumer_names().map(|n| n.unwrap()).collect().await;
        if names.is_empty() {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stream.consumer_names().map(|n| n.unwrap()).collect().await
}

/// A reused buffer holds exactly the object afterwards, whatever it held before (longer or
/// shorter): the GPU node reads every blob into one of a few such buffers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_buffer_holds_exactly_the_object_read_into_it() {
    let server = NatsServer::start().unwrap();
    let (_, one, js) = store(&server).await;
    let (long, short) = (random(3 * STRIPE_BYTES + 5), random(STRIPE_BYTES / 2));
    objects::put(&one, "long", &long).await.unwrap();
    objects::put(&one, "short", &short).await.unwrap();
    let readers = std::slice::from_ref(&js);
    let mut buf = vec![0xAB; 4 * STRIPE_BYTES];
    for (name, want) in [("short", &short), ("long", &long), ("short", &short)] {
        objects::read_bounded_into(&one, readers, name, 1 << 30, &mut buf)
            .await
            .unwrap();
        assert!(buf == *want, "{name} read into a reused buffer differs");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripes_move_through_several_connections_leave_no_consumer() {
    let server = NatsServer::start().unwrap();
    let (_, one, js) = store(&server).await;
    let other = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let bytes = random(5 * STRIPE_BYTES + 7);
    let on_other = Shards::one(other.get_object_store("t").await.unwrap());
    let writers = [one.clone(), on_other];
    objects::put_through(&writers, "blob", bytes.clone().into())
        .await
        .unwrap();
    let readers = [js.clone(), other];
    let back = objects::read_bounded(&one, &readers, "blob", 1 << 30)
        .await
        .unwrap();
    assert!(back == bytes, "striped read differs");
    assert_eq!(consumers_left(&js, "OBJ_t").await, Vec::<String>::new());
}

#[tokio::test]
async fn plain_and_small_objects_are_one_object() {
    let server = NatsServer::start().unwrap();
    let (store, one, js) = store(&server).await;
    let small = random(1000);
    objects::put(&one, "small", &small).await.unwrap();
    // Written by the object store itself, as `nats object put` would.
    let plain = random(STRIPE_BYTES * 2);
    store.put("plain", &mut plain.as_slice()).await.unwrap();
    assert_eq!(names(&store).await, ["plain", "small"]);
    for (name, bytes) in [("small", &small), ("plain", &plain)] {
        let back = objects::read_bounded(&one, std::slice::from_ref(&js), name, 1 << 30)
            .await
            .unwrap();
        assert!(&back == bytes, "{name} differs");
    }
}

#[tokio::test]
async fn a_missing_or_short_stripe_fails_the_read() {
    let server = NatsServer::start().unwrap();
    let (store, one, js) = store(&server).await;
    let bytes = random(2 * STRIPE_BYTES + 1);
    objects::put(&one, "gone", &bytes).await.unwrap();
    store.delete("gone.stripe2").await.unwrap();
    let err = tokio::time::timeout(
        Duration::from_secs(60),
        objects::read_bounded(&one, std::slice::from_ref(&js), "gone", 1 << 30),
    )
    .await
    .expect("a missing stripe must not hang the read")
    .map(|b| b.len())
    .unwrap_err();
    assert!(matches!(err, ObjectError::NotFound(_)), "{err}");

    objects::put(&one, "short", &bytes).await.unwrap();
    store
        .put("short.stripe1", &mut &bytes[..100])
        .await
        .unwrap();
    let err = objects::read_bounded(&one, std::slice::from_ref(&js), "short", 1 << 30)
        .await
        .map(|b| b.len())
        .unwrap_err();
    assert!(
        matches!(err, ObjectError::Unavailable { ref message, .. } if message.contains("expected")),
        "{err}"
    );

    // The stripe's info is there but its chunks are gone: refused when the consumer is created
    // (it counts them), not after heartbeating until the transfer timeout.
    objects::put(&one, "purged", &bytes).await.unwrap();
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
        objects::read_bounded(&one, std::slice::from_ref(&js), "purged", 1 << 30),
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

/// Over four buckets: stripe `i` in bucket `i % 4`, each bucket holding as many, the head naming
/// the four; read back whole through two connections, leaving no consumer on any bucket; delete
/// empties every bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_is_spread_over_four_buckets_and_deleted_from_each() {
    let server = NatsServer::start().unwrap();
    let (stores, js) = buckets(&server, 4).await;
    let shards = Shards::new(stores.clone()).unwrap();
    let bytes = random(5 * STRIPE_BYTES + 7);
    objects::put(&shards, "blob", &bytes).await.unwrap();

    let other = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let readers = [js.clone(), other];
    let back = objects::read_bounded(&shards, &readers, "blob", bytes.len() as u64)
        .await
        .unwrap();
    assert!(back == bytes, "read over four buckets differs");
    for stream in ["OBJ_t", "OBJ_t-1", "OBJ_t-2", "OBJ_t-3"] {
        assert_eq!(consumers_left(&js, stream).await, Vec::<String>::new());
    }

    // (Listed after the check above: a listing leaves a consumer of its own.) Six stripes'
    // worth, rounded up to eight so that the buckets hold two each.
    let expected: [&[&str]; 4] = [
        &["blob", "blob.stripe4"],
        &["blob.stripe1", "blob.stripe5"],
        &["blob.stripe2", "blob.stripe6"],
        &["blob.stripe3", "blob.stripe7"],
    ];
    for (store, expected) in stores.iter().zip(expected) {
        assert_eq!(names(store).await, expected);
    }
    let head = stores[0].info("blob").await.unwrap();
    assert_eq!(head.metadata["cuzk-stripe-buckets"], "4");

    objects::delete(&shards, "blob").await.unwrap();
    for store in &stores {
        assert!(names(store).await.is_empty());
    }
    objects::delete(&shards, "blob").await.unwrap();
}

/// Objects written before there were several buckets — striped into the head bucket alone, or
/// put whole by the object store itself — read and delete through a reader of four.
#[tokio::test]
async fn objects_of_one_bucket_read_through_four() {
    let server = NatsServer::start().unwrap();
    let (stores, js) = buckets(&server, 4).await;
    let shards = Shards::new(stores.clone()).unwrap();
    let bytes = random(3 * STRIPE_BYTES + 1);
    objects::put(&Shards::one(stores[0].clone()), "old", &bytes)
        .await
        .unwrap();
    stores[0].put("plain", &mut &bytes[..]).await.unwrap();
    assert_eq!(
        names(&stores[0]).await,
        ["old", "old.stripe1", "old.stripe2", "old.stripe3", "plain"]
    );
    for name in ["old", "plain"] {
        let back = objects::read_bounded(&shards, std::slice::from_ref(&js), name, 1 << 30)
            .await
            .unwrap();
        assert!(back == bytes, "{name} differs");
        objects::delete(&shards, name).await.unwrap();
    }
    assert!(names(&stores[0]).await.is_empty());
}

/// A head naming more buckets than the reader has — written by a node with more, or forged —
/// is refused before anything is read.
#[tokio::test]
async fn a_head_naming_more_buckets_than_the_reader_has_is_refused() {
    let server = NatsServer::start().unwrap();
    let (stores, js) = buckets(&server, 4).await;
    let bytes = random(2 * STRIPE_BYTES + 1);
    objects::put(&Shards::new(stores.clone()).unwrap(), "wide", &bytes)
        .await
        .unwrap();
    let two = Shards::new(stores[..2].to_vec()).unwrap();
    let forged = ObjectMetadata {
        name: "forged".into(),
        metadata: HashMap::from([
            ("cuzk-total-bytes".into(), "20".into()),
            ("cuzk-stripe-bytes".into(), "10".into()),
            ("cuzk-stripe-buckets".into(), "1000".into()),
        ]),
        ..Default::default()
    };
    stores[0].put(forged, &mut &[0u8; 10][..]).await.unwrap();
    for (name, claimed) in [("wide", 4), ("forged", 1000)] {
        let err = objects::read_bounded(&two, std::slice::from_ref(&js), name, 1 << 30)
            .await
            .map(|b| b.len())
            .unwrap_err();
        assert!(
            matches!(err, ObjectError::UnknownShards { shards, known: 2, .. } if shards == claimed),
            "{name}: {err}"
        );
    }
}

/// With one server of three killed, a striped object in a bucket of three replicas still reads
/// in seconds: a stripe whose consumer went to the dead server (nats-server before 2.12 places it
/// on any of the stream's) is read by direct gets instead of waiting out the request timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_ride_out_a_dead_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut servers = cuzk_common::local_nats::start_cluster(3, dir.path()).unwrap();
    let urls = servers[..2].iter().map(|s| s.url().parse().unwrap());
    let urls: Vec<async_nats::ServerAddr> = urls.collect();
    let client = async_nats::connect(urls).await.unwrap();
    // The nodes' request timeout (`nats.timeout` in common/src/config/nats.rs).
    let js = cuzk_common::topology::jetstream_context(client, Duration::from_secs(10));
    let config = Config {
        bucket: "t".into(),
        num_replicas: 3,
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let store = loop {
        // The cluster elects its leader first.
        match js.create_object_store(config.clone()).await {
            Ok(store) => break store,
            Err(e) if Instant::now() > deadline => panic!("no bucket: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    };
    let one = Shards::one(store);
    let bytes = random(4 * STRIPE_BYTES);
    objects::put(&one, "blob", &bytes).await.unwrap();
    let mut stream = js.get_stream("OBJ_t").await.unwrap();
    servers[2].kill();
    // Requests in flight at the kill die with it and wait out their timeout; time the reads
    // that start once the others have taken over the stream.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let leader = tokio::time::timeout(Duration::from_secs(2), stream.info()).await;
        match leader.ok().and_then(|i| i.ok()?.cluster.clone()?.leader) {
            Some(leader) if leader != "n2" && !leader.is_empty() => break,
            _ => assert!(Instant::now() < deadline, "OBJ_t has no leader but n2"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Six reads of four stripes: each stripe's consumer lands on the dead server one time in
    // three.
    for read in 0..6 {
        let started = Instant::now();
        let back = objects::read_bounded(&one, std::slice::from_ref(&js), "blob", 1 << 30)
            .await
            .unwrap();
        assert!(back == bytes, "read {read} differs");
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "read {read} took {took:?}");
    }
}

/// Chunks no object names — an upload killed before its metadata went out, a delete that died
/// halfway — are purged once they have not changed for the grace time; a chunk set still
/// growing and every live object are left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_chunks_are_reclaimed_and_live_objects_kept() {
    let server = NatsServer::start().unwrap();
    let (store, shards, js) = store(&server).await;
    let live = random(3 * STRIPE_BYTES / 2);
    objects::put(&shards, "live", &live).await.unwrap();
    let killed = "$O.t.C.upload-killed-midway";
    let growing = "$O.t.C.upload-still-going";
    for subject in [killed, killed, growing] {
        js.publish(subject, random(1024).into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let buckets = ["t".to_owned()];
    let mut janitor = objects::janitor::Janitor::default();
    let grace = Duration::from_millis(300);
    assert_eq!(
        janitor.sweep(&js, &buckets, grace).await.unwrap(),
        0,
        "first look"
    );
    tokio::time::sleep(grace).await;
    js.publish(growing, random(1024).into())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(janitor.sweep(&js, &buckets, grace).await.unwrap(), 1);
    let stream = js.get_stream("OBJ_t").await.unwrap();
    let left = |subject: &'static str| {
        let stream = stream.clone();
        async move { stream.direct_get_last_for_subject(subject).await.is_ok() }
    };
    assert!(
        !left(killed).await,
        "the killed upload's chunks are still there"
    );
    assert!(left(growing).await, "a growing chunk set was purged");
    tokio::time::sleep(grace).await;
    assert_eq!(janitor.sweep(&js, &buckets, grace).await.unwrap(), 1);
    assert!(!left(growing).await);
    // The live object, striped over several objects, reads back whole.
    let mut back = Vec::new();
    objects::read_bounded_into(
        &shards,
        std::slice::from_ref(&js),
        "live",
        u64::MAX,
        &mut back,
    )
    .await
    .unwrap();
    assert_eq!(back, live);
    assert_eq!(names(&store).await.len(), 2, "{:?}", names(&store).await);
}

/// The janitor finds every inputs bucket, a submitter's own among them, and reclaims an upload
/// killed midway there as in the shared one; other buckets are not inputs buckets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_in_a_submitters_inputs_bucket_are_reclaimed() {
    use cuzk_common::topology::{ensure_inputs_bucket, Limits};
    let server = NatsServer::start().unwrap();
    let (_store, _shards, js) = store(&server).await;
    for bucket in ["cuzk-inputs", "cuzk-inputs-alice"] {
        ensure_inputs_bucket(&js, bucket, 1, Limits::local())
            .await
            .unwrap();
    }
    let buckets = objects::janitor::inputs_buckets(&js).await.unwrap();
    assert_eq!(buckets, ["cuzk-inputs", "cuzk-inputs-alice"]);
    let killed = "$O.cuzk-inputs-alice.C.upload-killed-midway";
    js.publish(killed, random(1024).into())
        .await
        .unwrap()
        .await
        .unwrap();
    let mut janitor = objects::janitor::Janitor::default();
    let grace = Duration::from_millis(300);
    assert_eq!(janitor.sweep(&js, &buckets, grace).await.unwrap(), 0);
    tokio::time::sleep(grace).await;
    assert_eq!(janitor.sweep(&js, &buckets, grace).await.unwrap(), 1);
    let stream = js.get_stream("OBJ_cuzk-inputs-alice").await.unwrap();
    assert!(stream.direct_get_last_for_subject(killed).await.is_err());
}

/// A server that answers direct gets for a bucket without holding its newest objects — a
/// replica catching up after a restart — stood in for by a mirror that serves direct gets
/// (`mirror_direct`) and holds none of the objects (it mirrors one subject they never use).
/// Reads and deletes of objects it cannot see must still find them on the stream's leader:
/// before, a read failed "not found" and a delete took the object for gone and left it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_a_lagging_server_does_not_see_are_read_and_deleted() {
    let server = NatsServer::start().unwrap();
    let (mut stores, js) = buckets(&server, 1).await;
    let store = stores.remove(0);
    let shards = Shards::named(&js, vec![("t".to_owned(), store.clone())]).unwrap();
    past_a_lagging_server(&js, "t", &store, &shards).await;
}

/// The same for jobs' staged inputs, in an inputs bucket opened as a synth node opens it to read
/// a job's input and as the node that ends the job opens it to delete the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_a_lagging_server_does_not_see_are_read_and_deleted() {
    use cuzk_common::topology::{ensure_inputs_bucket, open_inputs_bucket, Limits};
    let server = NatsServer::start().unwrap();
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let bucket = "cuzk-inputs-t";
    let store = ensure_inputs_bucket(&js, bucket, 1, Limits::local())
        .await
        .unwrap();
    let shards = open_inputs_bucket(&js, bucket).await.unwrap();
    past_a_lagging_server(&js, bucket, &store, &shards).await;
}

/// Writes objects to `bucket` (opened as `store`, and as `shards` by the code under test) beside
/// a mirror that answers direct gets and holds none of them, then reads and deletes each.
async fn past_a_lagging_server(js: &Context, bucket: &str, store: &ObjectStore, shards: &Shards) {
    use async_nats::jetstream::stream::{Config as StreamConfig, Source};
    // A mirror joins the direct gets' queue group only once it has taken a message from its
    // source (nats-server 2.10 and later; 2.9 at once), so it takes one on a subject no object
    // uses, which is then purged from the bucket.
    let marker = format!("$O.{bucket}.C.lagging-marker");
    let mut mirror = js
        .create_stream(StreamConfig {
            name: "LAGGING".into(),
            mirror: Some(Source {
                name: format!("OBJ_{bucket}"),
                filter_subject: Some(marker.clone()),
                ..Default::default()
            }),
            mirror_direct: true,
            allow_direct: true,
            ..Default::default()
        })
        .await
        .unwrap();
    js.publish(marker.clone(), "x".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while mirror.info().await.unwrap().state.messages == 0 {
        assert!(Instant::now() < deadline, "the mirror took no message");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let source = js.get_stream(format!("OBJ_{bucket}")).await.unwrap();
    source.purge().filter(marker).await.unwrap();
    let bytes = random(1000);
    let count = 24;
    for i in 0..count {
        objects::put(shards, &format!("o{i}"), &bytes)
            .await
            .unwrap();
    }
    // Direct gets go to one of the two at random: without the leader's word about one in two
    // lookups would miss.
    let mut unseen = 0;
    for i in 0..count {
        unseen += usize::from(store.info(format!("o{i}")).await.is_err());
    }
    assert!(
        unseen > 0,
        "the mirror answered no direct get: nothing is tested"
    );
    for i in 0..count {
        let back =
            objects::read_bounded(shards, std::slice::from_ref(js), &format!("o{i}"), 1 << 20)
                .await
                .unwrap_or_else(|e| panic!("o{i}: {e}"));
        assert_eq!(back, bytes);
    }
    for i in 0..count {
        objects::delete(shards, &format!("o{i}")).await.unwrap();
    }
    let mut subjects = source
        .info_with_subjects(format!("$O.{bucket}.C.>"))
        .await
        .unwrap();
    let mut chunks = 0;
    while let Some(entry) = subjects.next().await {
        chunks += entry.unwrap().1;
    }
    assert_eq!(chunks, 0, "chunks left behind by deletes");
}
