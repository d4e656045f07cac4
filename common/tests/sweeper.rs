//! The sweeper judges a job by its progress, against a real nats-server: a job whose messages
//! still wait in the queues is never ended however long it waits, one whose messages are gone
//! is; the nodes' clocks do not count (only the sweeper's own, since it last saw the record
//! change); and a complete job whose finisher died before assembling it is assembled, not
//! failed.

use std::time::Duration;

use async_nats::jetstream::{self, Context};
use cuzk_common::lifecycle::{sweep::Sweeper, Ledger};
use cuzk_common::local_nats::NatsServer;
use cuzk_common::topology::{
    provision, Limits, Topology, DEFAULT_ACK_WAIT, SUBJECT_SUBMIT, SUBJECT_WORK_NORMAL, WORK_STREAM,
};
use cuzk_wire::job::{unix_ms, JobStatus};
use serde_json::{json, Value};

const NO_PROGRESS: Duration = Duration::from_secs(1);

async fn cluster(server: &NatsServer) -> (Context, Topology, Ledger) {
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(client);
    let topology = provision(&js, 1, DEFAULT_ACK_WAIT, Limits::local())
        .await
        .unwrap();
    let ledger = Ledger::new(&topology);
    (js, topology, ledger)
}

/// An open mimc job's record as a node writes it, `updated_at_ms` on that node's clock.
async fn put_record(
    topology: &Topology,
    job_id: &str,
    status: &str,
    submission_seq: u64,
    updated_at_ms: u64,
    partitions: Value,
) {
    let record = json!({
        "job_id": job_id, "circuit": "mimc", "params": {"rounds": 100, "partitions": 2},
        "status": status, "submission_seq": submission_seq, "submitted_at_ms": updated_at_ms,
        "synth_started_at_ms": updated_at_ms, "updated_at_ms": updated_at_ms,
        "partitions": partitions,
    });
    let body = serde_json::to_vec(&record).unwrap();
    topology.jobs_kv.put(job_id, body.into()).await.unwrap();
}

/// A message's stream sequence once stored.
async fn published(js: &Context, subject: &'static str) -> u64 {
    let ack = js.publish(subject, "held".into()).await.unwrap();
    ack.await.unwrap().sequence
}

async fn status(ledger: &Ledger, job_id: &str) -> JobStatus {
    ledger.get(job_id).await.unwrap().unwrap().status
}

async fn quiet_spell() {
    tokio::time::sleep(NO_PROGRESS + Duration::from_millis(300)).await;
}

/// A job still held in the jobs stream (a synth node waiting for queue room) and one whose
/// partition waits in the work stream (no GPU free) are waiting, not stuck: long past the time
/// without progress they stay open. Once the work item is gone, that job is ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_waiting_in_a_queue_is_not_ended_and_a_lost_one_is() {
    let server = NatsServer::start().unwrap();
    let (js, topology, ledger) = cluster(&server).await;
    let submission = published(&js, SUBJECT_SUBMIT).await;
    let pending = json!([{"status": "pending"}, {"status": "pending"}]);
    put_record(
        &topology,
        "synthesizing",
        "synthesizing",
        submission,
        unix_ms(),
        pending,
    )
    .await;
    let work = published(&js, SUBJECT_WORK_NORMAL).await;
    let queued = json!([
        {"status": "proved", "proof": hex::encode([7u8; 192])},
        {"status": "queued", "work_seq": work},
    ]);
    put_record(&topology, "queued", "proving", 0, unix_ms(), queued).await;

    let mut sweeper = Sweeper::new(ledger.clone(), NO_PROGRESS);
    assert_eq!(sweeper.sweep().await.unwrap().open, 2);
    for _ in 0..2 {
        quiet_spell().await;
        let swept = sweeper.sweep().await.unwrap();
        assert!(swept.ended.is_empty(), "a waiting job was ended: {swept:?}");
        assert_eq!(swept.waiting, 2);
    }
    assert_eq!(
        status(&ledger, "synthesizing").await,
        JobStatus::Synthesizing
    );
    assert_eq!(status(&ledger, "queued").await, JobStatus::Proving);

    // The work item is lost: nothing carries the job any more.
    let stream = js.get_stream(WORK_STREAM).await.unwrap();
    assert!(stream.delete_message(work).await.unwrap());
    let swept = sweeper.sweep().await.unwrap();
    let ended: Vec<_> = swept.ended.iter().map(|r| r.job_id.as_str()).collect();
    assert_eq!(ended, ["queued"]);
    let record = ledger.get("queued").await.unwrap().unwrap();
    assert_eq!(record.status, JobStatus::Failed);
    let error = record.error.unwrap_or_default();
    assert!(error.contains("no progress for 1 s"), "{error}");
    assert_eq!(
        status(&ledger, "synthesizing").await,
        JobStatus::Synthesizing
    );
}

/// A record written by a node whose clock runs an hour behind looks an hour old to the others:
/// the sweeper counts from when it saw the record change, on its own clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_nodes_clock_ends_no_job() {
    let server = NatsServer::start().unwrap();
    let (_js, topology, ledger) = cluster(&server).await;
    let an_hour_behind = unix_ms() - 3_600_000;
    let partitions = json!([{"status": "queued"}, {"status": "queued"}]);
    put_record(
        &topology,
        "skewed",
        "proving",
        0,
        an_hour_behind,
        partitions,
    )
    .await;

    let mut sweeper = Sweeper::new(ledger.clone(), NO_PROGRESS);
    let swept = sweeper.sweep().await.unwrap();
    assert!(swept.ended.is_empty(), "ended on a skewed clock: {swept:?}");
    assert_eq!(status(&ledger, "skewed").await, JobStatus::Proving);
    // Without a message to carry it and without a change for the time, it is ended.
    quiet_spell().await;
    assert_eq!(sweeper.sweep().await.unwrap().ended.len(), 1);
    assert_eq!(status(&ledger, "skewed").await, JobStatus::Failed);
}

/// Every partition proved, the job not ended: the node that recorded the last proof died
/// before assembling. The sweeper assembles it — the client gets its proof, not a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_job_is_assembled_not_failed() {
    let server = NatsServer::start().unwrap();
    let (_js, topology, ledger) = cluster(&server).await;
    let proofs = [hex::encode([1u8; 192]), hex::encode([2u8; 192])];
    let partitions = json!([
        {"status": "proved", "proof": proofs[0], "verified": true},
        {"status": "proved", "proof": proofs[1], "verified": true},
    ]);
    put_record(&topology, "complete", "proving", 0, unix_ms(), partitions).await;

    let mut sweeper = Sweeper::new(ledger.clone(), NO_PROGRESS);
    sweeper.sweep().await.unwrap();
    quiet_spell().await;
    let swept = sweeper.sweep().await.unwrap();
    assert!(swept.ended.is_empty(), "{swept:?}");
    assert_eq!(swept.assembled, 1);
    let answer = ledger.answer("complete").await.unwrap().unwrap();
    assert_eq!(answer.status, JobStatus::Done, "{:?}", answer.error);
    assert_eq!(answer.proof, Some(proofs.concat()));
}
