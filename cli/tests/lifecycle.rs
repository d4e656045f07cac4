//! Every job id gets exactly one answer, seen where clients listen: a plain core subscription to
//! `cuzk.results.<id>`, as well as the durable results stream. Each test sets up a situation
//! that once gave two answers or none, through the cluster's external interfaces only (job
//! JSON, work items, records as stored JSON, cancel requests).

mod support;

use std::time::{Duration, Instant};

use async_nats::Client;
use cuzk_circuits::ShapeCache;
use cuzk_cli::cancel::cancel;
use cuzk_cli::LocalCluster;
use cuzk_common::config::{GpuArgs, ParamArgs, SynthArgs};
use cuzk_common::lifecycle::Ledger;
use cuzk_common::topology::{
    ledger_results_subject, results_subject, INPUTS_BUCKET, RESULTS_STREAM, SUBJECT_SUBMIT,
    WORK_STREAM,
};
use cuzk_wire::blob::{encode_blob, BlobHeaderInfo, EncodeOptions};
use cuzk_wire::control::CancelOutcome;
use cuzk_wire::job::{unix_ms, JobInput, JobRecord, JobResult, JobStatus, PartitionStatus};
use futures::StreamExt;
use serde_json::json;
use support::{job, TIMEOUT};

/// Every message on `cuzk.results.<job_id>` from now on, as a client sees them.
struct Listener(async_nats::Subscriber);

impl Listener {
    async fn new(client: &Client, job_id: &str) -> Listener {
        let sub = client.subscribe(results_subject(job_id)).await.unwrap();
        client.flush().await.unwrap();
        Listener(sub)
    }

    async fn next(&mut self, within: Duration) -> Option<JobResult> {
        let message = tokio::time::timeout(within, self.0.next()).await.ok()??;
        Some(serde_json::from_slice(&message.payload).unwrap())
    }

    /// The one answer: the first result, and no second within `quiet`.
    async fn only(&mut self, quiet: Duration) -> JobResult {
        let first = self.next(TIMEOUT).await.expect("a result");
        if let Some(second) = self.next(quiet).await {
            panic!("a second answer: first {first:?}, then {second:?}");
        }
        first
    }
}

async fn publish(client: &Client, body: Vec<u8>) {
    client.publish(SUBJECT_SUBMIT, body.into()).await.unwrap();
    client.flush().await.unwrap();
}

/// Results the durable stream holds for `job_id`.
async fn stored(cluster: &LocalCluster, job_id: &str) -> u64 {
    let stream = cluster
        .topology
        .js
        .get_stream(RESULTS_STREAM)
        .await
        .unwrap();
    let mut info = stream
        .info_with_subjects(ledger_results_subject(job_id))
        .await
        .unwrap();
    let mut count = 0;
    while let Some(entry) = info.next().await {
        count += entry.unwrap().1 as u64;
    }
    count
}

/// A job record as nodes store it (its JSON form), written directly.
async fn store_record(cluster: &LocalCluster, job_id: &str, record: &serde_json::Value) {
    let value = serde_json::to_vec(record).unwrap();
    cluster
        .topology
        .jobs_kv
        .create(job_id, value.into())
        .await
        .unwrap();
}

fn synth_args(args: &[&str]) -> SynthArgs {
    #[derive(clap::Parser)]
    struct Args {
        #[command(flatten)]
        synth: SynthArgs,
    }
    let argv = ["synth", "--synth-threads", "2"].iter().chain(args);
    <Args as clap::Parser>::parse_from(argv).synth
}

async fn cluster_with_synth(args: &[&str]) -> LocalCluster {
    cuzk_common::telemetry::init_logging();
    let gpu = GpuArgs {
        cpu_threads: Some(2),
        backend: Some(cuzk_common::config::BackendKind::Cpu),
        ..Default::default()
    };
    let params = ParamArgs::default().resolve(true).unwrap();
    LocalCluster::start(
        synth_args(args).resolve().unwrap(),
        gpu.resolve().unwrap(),
        params,
    )
    .await
    .unwrap()
}

/// A submission that fails at intake uses its id up: resubmitting the id — even fixed — gets
/// the stored failure at once and nothing new on the subject (docs/reliability.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_that_failed_at_intake_keeps_its_one_answer() {
    let cluster = support::cluster().await;
    let client = &cluster.client;
    for (job_id, bad) in [
        (
            "intake-circuit",
            job("intake-circuit", "groth-bogus", json!({}), ""),
        ),
        ("intake-object", {
            let mut spec = job(
                "intake-object",
                "mimc",
                json!({"rounds": 64, "partitions": 1}),
                "",
            );
            spec.input = JobInput::Object("not-yet-uploaded".into());
            spec
        }),
    ] {
        let mut listener = Listener::new(client, job_id).await;
        publish(client, serde_json::to_vec(&bad).unwrap()).await;
        let failed = listener.next(TIMEOUT).await.expect("the failure");
        assert_eq!(failed.status, JobStatus::Failed, "{failed:?}");

        // Fixed and submitted again with the same id, waiting as `cuzk submit --wait` does.
        let fixed = job(
            job_id,
            "mimc",
            json!({"rounds": 64, "partitions": 1}),
            "fixed",
        );
        let started = Instant::now();
        let again = cuzk_cli::submit_and_wait(client, &fixed, Duration::from_secs(20))
            .await
            .expect("the stored answer, not a wait");
        assert_eq!(again, failed, "the resubmission gets the original answer");
        assert!(started.elapsed() < Duration::from_secs(10));
        if let Some(second) = listener.next(Duration::from_secs(6)).await {
            panic!("{job_id}: a second answer on the subject: {second:?}");
        }
        assert_eq!(stored(&cluster, job_id).await, 1);
    }
    cluster.stop().await.unwrap();
}

/// `submit --wait` on an id whose job has finished returns its stored result at once: the one
/// published, its per-partition timings summed (`timings.stages`) as the record keeps them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_on_a_finished_job_returns_its_result() {
    let cluster = support::cluster().await;
    let spec = job(
        "finished",
        "mimc",
        json!({"rounds": 64, "partitions": 2}),
        "x",
    );
    let mut listener = Listener::new(&cluster.client, "finished").await;
    let first = cuzk_cli::submit_and_wait(&cluster.client, &spec, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(first.status, JobStatus::Done, "{:?}", first.error);
    // A client that reconnects and submits again.
    let again = cuzk_cli::submit_and_wait(&cluster.client, &spec, Duration::from_secs(15))
        .await
        .expect("the finished job's result, not a timeout");
    let kept = JobResult {
        partition_timings: Vec::new(),
        ..first.clone()
    };
    assert_eq!(again, kept);
    assert_eq!(listener.only(Duration::from_secs(5)).await, first);
    cluster.stop().await.unwrap();
}

/// A redelivered work item of a partition already proved (its blob deleted) is acknowledged and
/// skipped; the job completes with its other partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_proved_partition_is_skipped() {
    let cluster = support::cluster().await;
    let params = json!({"rounds": 100, "partitions": 2});
    let family = cuzk_circuits::resolve("mimc", &params).unwrap();
    let job_id = "reproved";
    let now = unix_ms();
    // The record as a GPU node leaves it after proving partition 0 (the stored JSON form).
    let record = json!({
        "job_id": job_id, "circuit": "mimc", "params": params, "status": "proving",
        "submission_seq": 0, "submitted_at_ms": now, "synth_started_at_ms": now,
        "updated_at_ms": now,
        "partitions": [
            {"status": "proved", "proof": "ab".repeat(192), "attempts": 1, "prover": "gpu/0", "verified": true},
            {"status": "queued"},
        ],
    });
    store_record(&cluster, job_id, &record).await;
    let hash = ShapeCache::open_default(true)
        .unwrap()
        .shape_id(&*family)
        .unwrap()
        .hash;
    let info = BlobHeaderInfo::new(job_id, 1, family.shape_key(), hash).unwrap();
    let witness = family.witness(b"in", 1, None).unwrap();
    let blob = encode_blob(
        &info,
        &witness.input,
        &witness.aux,
        &EncodeOptions::default(),
    );
    cuzk_common::objects::put(&cluster.topology.blobs, "reproved/0/1", &blob)
        .await
        .unwrap();
    let mut listener = Listener::new(&cluster.client, job_id).await;
    // Partition 0 again (its blob is gone), then partition 1.
    for partition in [0u32, 1] {
        let blob_object = format!("reproved/0/{partition}");
        let item = (job_id, partition, 2);
        let job_input = (&*family, &params, &b"in"[..]);
        support::queue_work(&cluster, item, job_input, &blob_object).await;
    }
    let result = listener.only(Duration::from_secs(5)).await;
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    assert_eq!(result.partitions, 2);
    assert_eq!(stored(&cluster, job_id).await, 1);
    cluster.stop().await.unwrap();
}

/// A job whose messages are gone (a max-deliveries advisory nobody saw) does not stay open: the
/// sweeper fails it after the configured time without progress, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_without_progress_is_ended_by_the_sweeper() {
    let cluster = cluster_with_synth(&["--synth-no-progress-timeout-secs", "2"]).await;
    let job_id = "stuck";
    let then = unix_ms() - 600_000;
    let record = json!({
        "job_id": job_id, "circuit": "mimc", "params": {"rounds": 100, "partitions": 1},
        "status": "proving", "submission_seq": 0, "submitted_at_ms": then,
        "synth_started_at_ms": then, "updated_at_ms": then,
        "partitions": [{"status": "queued"}],
    });
    let mut listener = Listener::new(&cluster.client, job_id).await;
    store_record(&cluster, job_id, &record).await;
    let result = listener.only(Duration::from_secs(5)).await;
    assert_eq!(result.status, JobStatus::Failed);
    let error = result.error.unwrap_or_default();
    assert!(error.contains("no progress for 2 s"), "{error}");
    assert_eq!(stored(&cluster, job_id).await, 1);
    cluster.stop().await.unwrap();
}

/// The job's record as the ledger reads it.
/// A cancel of an id nobody submitted answers `unknown`, with no status.
async fn never_submitted_is_unknown(client: &Client) {
    let unknown = cancel(client, None, "never-submitted", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (unknown.outcome, unknown.status),
        (CancelOutcome::Unknown, None)
    );
}

async fn record(cluster: &LocalCluster, job_id: &str) -> Option<JobRecord> {
    Ledger::new(&cluster.topology).get(job_id).await.unwrap()
}

/// Waits until the work queue is empty: every work item taken and settled.
async fn work_drained(cluster: &LocalCluster) {
    let deadline = Instant::now() + TIMEOUT;
    while cluster.topology.stream_depth(WORK_STREAM).await.unwrap() > 0 {
        assert!(Instant::now() < deadline, "work items left in the queue");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A job cancelled while partitions wait for the GPU: one `cancelled` answer on the subject,
/// the record final `cancelled` and unchanged by what was in flight, no blob left, its other
/// work items acknowledged and skipped; cancelling again changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_answers_once_and_drops_its_pending_partitions() {
    let cluster = support::cluster().await;
    let job_id = "cancelled";
    let spec = job(
        job_id,
        "mimc",
        json!({"rounds": 20000, "partitions": 8}),
        "x",
    );
    let mut listener = Listener::new(&cluster.client, job_id).await;
    publish(&cluster.client, serde_json::to_vec(&spec).unwrap()).await;
    // Cancel once a partition is queued (a blob stored) and before the job can end.
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let queued = record(&cluster, job_id).await.is_some_and(|r| {
            r.partitions
                .iter()
                .any(|p| p.status == PartitionStatus::Queued)
        });
        if queued {
            break;
        }
        assert!(Instant::now() < deadline, "no partition was queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reply = cancel(&cluster.client, None, job_id, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (reply.outcome, reply.status),
        (CancelOutcome::Cancelled, Some(JobStatus::Cancelled))
    );
    let result = listener.only(Duration::from_secs(3)).await;
    assert_eq!(result.status, JobStatus::Cancelled, "{result:?}");
    let cancelled = record(&cluster, job_id).await.unwrap();
    assert_eq!(cancelled.status, JobStatus::Cancelled);
    let proved = |r: &JobRecord| {
        r.partitions
            .iter()
            .filter(|p| p.status == PartitionStatus::Proved)
            .count()
    };
    assert!(proved(&cancelled) < 8, "every partition was proved first");

    work_drained(&cluster).await;
    assert_eq!(support::blobs_left(&cluster.topology).await, 0);
    let after = record(&cluster, job_id).await.unwrap();
    assert_eq!(
        (after.status, proved(&after), after.result_published),
        (JobStatus::Cancelled, proved(&cancelled), true),
        "work in flight changed the cancelled record"
    );
    let again = cancel(&cluster.client, None, job_id, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(again.outcome, CancelOutcome::AlreadyEnded);
    if let Some(second) = listener.next(Duration::from_secs(3)).await {
        panic!("a second answer: {second:?}");
    }
    assert_eq!(stored(&cluster, job_id).await, 1);
    cluster.stop().await.unwrap();
}

/// Cancelling a job that is done changes nothing and says so; an unknown id is unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_finished_job_changes_nothing() {
    let cluster = support::cluster().await;
    let spec = job(
        "done-first",
        "mimc",
        json!({"rounds": 64, "partitions": 2}),
        "x",
    );
    let mut listener = Listener::new(&cluster.client, "done-first").await;
    let done = cuzk_cli::submit_and_wait(&cluster.client, &spec, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(done.status, JobStatus::Done, "{:?}", done.error);
    let reply = cancel(&cluster.client, None, "done-first", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (reply.outcome, reply.status),
        (CancelOutcome::AlreadyEnded, Some(JobStatus::Done))
    );
    assert_eq!(listener.only(Duration::from_secs(3)).await, done);
    let record = record(&cluster, "done-first").await.unwrap();
    assert_eq!(record.status, JobStatus::Done);
    assert_eq!(stored(&cluster, "done-first").await, 1);

    never_submitted_is_unknown(&cluster.client).await;
    cluster.stop().await.unwrap();
}

/// A job still waiting in the jobs stream behind another (no synth node runs; only the cancel
/// service answers): the cancel ends it — one `cancelled` answer on a core subscription, its
/// staged input deleted — and the synth node started afterwards acknowledges its message and
/// skips it: no second answer. An id never submitted stays `unknown`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_no_synth_node_has_taken_is_cancelled_once() {
    use cuzk_common::topology::{staged_input_name, JOBS_STREAM};
    cuzk_common::telemetry::init_logging();
    let server = cuzk_common::local_nats::NatsServer::start().unwrap();
    let (client, topology) = cuzk_cli::connect_url(&server.url(), "test").await.unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let answering = tokio::spawn(cuzk_synth_node::cancel::serve(
        topology.clone(),
        Ledger::new(&topology),
        shutdown.clone(),
    ));
    let js = &topology.js;
    let before = job("before", "mimc", json!({"rounds": 64, "partitions": 1}), "");
    cuzk_cli::submit::publish_job(js, None, &before)
        .await
        .unwrap();
    let job_id = "queued";
    let mut listener = Listener::new(&client, job_id).await;
    let mut spec = job(job_id, "mimc", json!({"rounds": 64, "partitions": 2}), "");
    let input = vec![b'x'; 800 << 10];
    let timeout = Duration::from_secs(10);
    spec.input = cuzk_cli::submit::stage_input(&client, timeout, INPUTS_BUCKET, job_id, &input)
        .await
        .unwrap();
    assert_eq!(spec.input, JobInput::Object(staged_input_name(job_id)));
    cuzk_cli::submit::publish_job(js, None, &spec)
        .await
        .unwrap();

    let reply = cancel(&client, None, job_id, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (reply.outcome, reply.status),
        (CancelOutcome::Cancelled, Some(JobStatus::Cancelled))
    );
    let answer = listener.next(TIMEOUT).await.expect("a result");
    assert_eq!(answer.status, JobStatus::Cancelled);
    // A deleted object's info is its tombstone.
    let staged = topology.inputs.info(&staged_input_name(job_id)).await;
    assert!(
        !matches!(staged, Ok(info) if !info.deleted),
        "the staged input is still there"
    );
    never_submitted_is_unknown(&client).await;

    let params = ParamArgs::default().resolve(true).unwrap();
    let synth = synth_args(&[]).resolve().unwrap();
    let node = cuzk_synth_node::SynthNode::new(topology.clone(), synth, &params, "late".into());
    let node = tokio::spawn(std::sync::Arc::new(node.unwrap()).run(shutdown.clone()));
    let started = Instant::now();
    while topology.stream_depth(JOBS_STREAM).await.unwrap() > 0 {
        assert!(
            started.elapsed() < TIMEOUT,
            "the job messages were not acknowledged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if let Some(second) = listener.next(Duration::from_secs(3)).await {
        panic!("a second answer: first {answer:?}, then {second:?}");
    }
    let record = Ledger::new(&topology).get(job_id).await.unwrap().unwrap();
    assert_eq!(record.status, JobStatus::Cancelled);
    assert!(record.partitions.is_empty(), "a synth node took the job");
    shutdown.cancel();
    node.await.unwrap().unwrap();
    answering.await.unwrap();
}

/// A synth node claims a new job with one KV round trip: the record is created, nothing is read
/// first. Counted where the server sees it: every record write (`$KV.cuzk-jobs.<id>`) and every
/// read (a direct get or a get through the stream's leader) of the job's key, on a core
/// subscription, up to the claim's create.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_costs_one_kv_round_trip() {
    let cluster = cluster_with_synth(&[]).await;
    let client = &cluster.client;
    // One subscription to everything, so writes and reads keep the order the server saw them
    // in (separate subscriptions each keep their own order only).
    let mut spy = client.subscribe(">").await.unwrap();
    client.flush().await.unwrap();
    let jobs = 12;
    let mut listeners = Vec::new();
    for i in 0..jobs {
        let id = format!("claim-{i}");
        listeners.push(Listener::new(client, &id).await);
        let spec = job(&id, "mimc", json!({"rounds": 16, "partitions": 1}), "x");
        publish(client, serde_json::to_vec(&spec).unwrap()).await;
    }
    for listener in &mut listeners {
        assert_eq!(
            listener.next(TIMEOUT).await.expect("a result").status,
            JobStatus::Done
        );
    }
    // Per job: the reads of its key before its first write, and that write.
    let mut trips: std::collections::HashMap<String, (usize, bool)> = Default::default();
    while let Ok(Some(message)) = tokio::time::timeout(Duration::from_millis(500), spy.next()).await
    {
        let subject = message.subject.as_str();
        let read = subject.starts_with("$JS.API.DIRECT.GET.KV_cuzk-jobs")
            || subject == "$JS.API.STREAM.MSG.GET.KV_cuzk-jobs";
        if !read && !subject.starts_with("$KV.cuzk-jobs.") {
            continue;
        }
        let (key, write) = match subject.strip_prefix("$KV.cuzk-jobs.") {
            Some(key) => (key.to_owned(), true),
            None => {
                // A read names its key in the subject (direct get of the last message) or in
                // its request body (`last_by_subj`).
                let named = subject
                    .split_once("$KV.cuzk-jobs.")
                    .map(|(_, key)| key.to_owned())
                    .or_else(|| {
                        let body: serde_json::Value =
                            serde_json::from_slice(&message.payload).ok()?;
                        let subj = body["last_by_subj"].as_str()?;
                        Some(subj.strip_prefix("$KV.cuzk-jobs.")?.to_owned())
                    });
                match named {
                    Some(key) => (key, false),
                    None => continue,
                }
            }
        };
        let entry = trips.entry(key).or_default();
        if !entry.1 {
            entry.0 += 1;
            entry.1 = write;
        }
    }
    let mut per_claim: Vec<usize> = (0..jobs)
        .map(|i| {
            let (count, created) = trips[&format!("claim-{i}")];
            assert!(created, "claim-{i}: no record write seen");
            count
        })
        .collect();
    per_claim.sort_unstable();
    assert_eq!(
        per_claim[jobs / 2],
        1,
        "median KV round trips per claim (each claim's: {per_claim:?})"
    );
    assert!(
        per_claim.iter().all(|&n| n == 1),
        "KV round trips per claim: {per_claim:?}"
    );
}
