//! The ledger service on a real nats-server: a job through it end to end, answered once, and
//! each refusal — what keeps a worker that may only ask from doing what it could not do itself.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::lifecycle::blobs::blob_object_name;
use crate::lifecycle::machine::tests::{proof, shape, spec};
use crate::lifecycle::ops::Op;
use crate::lifecycle::{Admission, Ledger, Proved, RecordError};
use crate::local_nats::NatsServer;
use crate::objects;
use crate::topology::{ledger_op_subject, provision, results_subject, Limits, Topology};
use cuzk_wire::job::{JobResult, JobSpec, JobStatus, PartitionTimings};

/// A server with the cluster's streams, a ledger service on it, and the topology a worker that
/// goes through the service has.
async fn cluster() -> (NatsServer, Topology, CancellationToken) {
    let server = NatsServer::start().unwrap();
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut topology = provision(&js, 1, Duration::from_secs(30), Limits::local())
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    tokio::spawn(super::serve(topology.clone(), shutdown.clone()));
    topology.ledger_service = true;
    (server, topology, shutdown)
}

/// A job admitted and both its partitions queued, through `worker`.
async fn queued_job(worker: &Ledger, job_id: &str, seq: u64) {
    let spec = JobSpec {
        job_id: job_id.into(),
        ..spec()
    };
    let admitted = worker.admit(&spec, None, shape(2), seq, 100, 1);
    assert!(matches!(admitted.await.unwrap(), Admission::New(_)));
    for index in 0..2 {
        let timings = PartitionTimings::default();
        let queued = worker.queued(job_id, index, timings, 10 + index as u64, 1);
        assert!(queued.await.unwrap().is_some());
    }
    worker.synthesized(job_id).await.unwrap();
}

/// Whether the blob `name` is stored (a deleted object's info is its tombstone).
async fn stored(topology: &Topology, name: &str) -> bool {
    let info = topology.blobs.head().info(name).await;
    info.is_ok_and(|info| !info.deleted)
}

fn refused<T: std::fmt::Debug>(outcome: Result<T, RecordError>, what: &str) {
    assert!(
        matches!(outcome, Err(RecordError::Refused(_))),
        "{what}: {outcome:?}"
    );
}

/// Every step of a job asked of the service; the last proof's request assembles the job and
/// the one result reaches a client's core subscription once. A step asked again (an answer
/// lost) finds its work done.
#[tokio::test]
async fn a_job_through_the_service_is_answered_once() {
    let (_server, topology, shutdown) = cluster().await;
    let worker = Ledger::new(&topology);
    let client = topology.js.client();
    let mut heard = client.subscribe(results_subject("j")).await.unwrap();
    client.flush().await.unwrap();

    queued_job(&worker, "j", 7).await;
    for index in 0..2 {
        let proved = worker.proved("j", index, &proof(index as u8)).await;
        assert_eq!(proved.unwrap(), Proved::Recorded);
    }
    assert_eq!(
        worker.proved("j", 1, &proof(1)).await.unwrap(),
        Proved::JobEnded
    );

    let first = tokio::time::timeout(Duration::from_secs(5), heard.next())
        .await
        .expect("the result reaches the client")
        .unwrap();
    let result: JobResult = serde_json::from_slice(&first.payload).unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    let second = tokio::time::timeout(Duration::from_secs(1), heard.next()).await;
    assert!(second.is_err(), "a second result reached the client");
    let record = worker.get("j").await.unwrap().unwrap();
    assert!(record.status == JobStatus::Done && record.result_published);
    shutdown.cancel();
}

/// What the service refuses: a result that completes a job or names another, a blob a queued
/// partition still needs (deleted once it is proved), a key that is no job's, an operation
/// asked on another's subject, a request past the size limit. The job is as it was.
#[tokio::test]
async fn the_service_applies_only_the_state_machines_transitions() {
    let (_server, topology, shutdown) = cluster().await;
    let worker = Ledger::new(&topology);
    queued_job(&worker, "k", 9).await;

    let mut done = JobResult::failed("k", "");
    (done.status, done.error) = (JobStatus::Done, None);
    refused(worker.finish("k", &done).await, "a done result");
    let other = JobResult::failed("other", "no");
    refused(worker.finish("k", &other).await, "another job's result");
    refused(worker.synthesized("no/such key").await, "not a job key");

    let blob = blob_object_name("k", 0, 9);
    objects::put(&topology.blobs, &blob, b"witness")
        .await
        .unwrap();
    refused(worker.delete_blob(&blob).await, "a queued partition's blob");
    assert!(stored(&topology, &blob).await);
    refused(worker.delete_blob("k").await, "not a blob's name");
    assert_eq!(
        worker.proved("k", 0, &proof(0)).await.unwrap(),
        Proved::Recorded
    );
    worker
        .delete_blob(&blob)
        .await
        .expect("a proved partition's blob");
    assert!(!stored(&topology, &blob).await);

    let client = topology.js.client();
    let ask = |subject: String, body: Vec<u8>| {
        let client = client.clone();
        async move {
            let reply = client.request(subject, body.into()).await.unwrap();
            serde_json::from_slice::<Result<Value, RecordError>>(&reply.payload).unwrap()
        }
    };
    let finish = Op::Finish {
        key: "k".into(),
        result: JobResult::failed("k", "forged"),
    };
    let body = serde_json::to_vec(&finish).unwrap();
    refused(
        ask(ledger_op_subject("proved"), body).await,
        "finish on proved's subject",
    );
    refused(
        ask(ledger_op_subject("finish"), vec![b' '; 300 << 10]).await,
        "a request past the limit",
    );
    refused(
        ask(ledger_op_subject("finish"), b"{\"op\":\"purge\"}".to_vec()).await,
        "no operation",
    );

    let record = worker.get("k").await.unwrap().unwrap();
    assert_eq!(record.status, JobStatus::Proving);
    shutdown.cancel();
}
