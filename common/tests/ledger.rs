//! The job ledger over weeks, against a real nats-server: the records bucket holds the retention
//! period's jobs at the configured rate, a full bucket drops its oldest finished records instead
//! of refusing a new job, a job's staged input is deleted however the job ends, and a result
//! gone from the results stream is still answered from the job's record; and every result is
//! published once, counted before the results stream deduplicates it.

use std::time::Duration;

use async_nats::jetstream::{self, Context};
use cuzk_common::lifecycle::{
    machine, sweep::Sweeper, Admission, JobShape, Ledger, Proved, ProvedPartition, PUBLISH_GRACE,
};
use cuzk_common::local_nats::NatsServer;
use cuzk_common::objects;
use cuzk_common::topology::{
    ledger_results_subject, provision, staged_input_name, Limits, Topology, DEFAULT_ACK_WAIT,
    JOBS_BUCKET, RECORD_BYTES, RESULTS_STREAM, SUBJECT_SUBMIT,
};
use cuzk_wire::control::CancelOutcome;
use cuzk_wire::job::{
    unix_ms, JobInput, JobResult, JobSpec, JobStatus, PartitionStatus, PartitionTimings, Priority,
    JOB_SPEC_VERSION,
};

async fn cluster(server: &NatsServer, limits: Limits) -> (Context, Topology) {
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(client);
    let topology = provision(&js, 1, DEFAULT_ACK_WAIT, limits).await.unwrap();
    (js, topology)
}

/// A milliseconds figure as the nodes measure them.
fn measured(nanos: u64) -> f64 {
    Duration::from_nanos(nanos).as_secs_f64() * 1e3
}

fn porep_32gib(job_id: &str, input: JobInput) -> JobSpec {
    JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: job_id.into(),
        circuit: "porep-c2".into(),
        params: serde_json::json!({"sector_size": "32GiB", "sector_id": 123_456, "miner": "f01234567"}),
        input,
        priority: Priority::Normal,
    }
}

const SHAPE: JobShape<'static> = JobShape {
    partitions: 10,
    synthetic: false,
    shape_key: "porep-c2-32GiB",
};

/// Admits a 10-partition 32 GiB PoRep job and records its synthesis.
async fn admitted(ledger: &Ledger, spec: &JobSpec, seq: u64) {
    let admission = ledger
        .admit(spec, None, SHAPE, seq, unix_ms(), 1)
        .await
        .unwrap();
    assert!(matches!(admission, Admission::New(_)), "{admission:?}");
    for k in 0..10u64 {
        let timings = PartitionTimings {
            synth_ms: measured(25_123_456_789 + k * 7_654_321),
            encode_ms: measured(3_210_987_654 + k * 1_234_567),
            upload_ms: measured(1_987_654_321 + k * 2_345_678),
            blob_bytes: 1_987_654_321 + k * 12_345,
            raw_bytes: 16_912_345_678 + k * 67_890,
            ..Default::default()
        };
        ledger
            .queued(&spec.job_id, k as usize, timings, 1_000_000 + k, 1)
            .await
            .unwrap();
    }
    ledger.synthesized(&spec.job_id).await.unwrap();
}

/// Proves every partition of an admitted job: the last proof assembles, ends and reports it.
async fn proved(ledger: &Ledger, job_id: &str) {
    for k in 0..10u64 {
        let timings = PartitionTimings {
            queue_wait_ms: measured(45_678_901_234 + k * 3_456_789),
            fetch_ms: measured(2_345_678_901 + k * 4_567_890),
            decode_ms: measured(1_456_789_012 + k * 5_678_901),
            h2d_ms: measured(512_345_678 + k * 678_901),
            msm_ms: measured(1_234_567_890 + k * 123_456),
            prove_ms: measured(2_987_654_321 + k * 234_567),
            ..Default::default()
        };
        let partition = ProvedPartition {
            proof: hex::encode([0xa0 + k as u8; 192]),
            timings,
            attempts: 1,
            prover: format!("gpu-host-017/{}", k % 8),
            verified: true,
        };
        ledger.proved(job_id, k as usize, &partition).await.unwrap();
    }
}

/// A finished 10-partition 32 GiB PoRep job, run through the ledger as the nodes run it.
async fn finished(ledger: &Ledger, job_id: &str, seq: u64) {
    let input = JobInput::Object(staged_input_name(job_id));
    admitted(ledger, &porep_32gib(job_id, input), seq).await;
    proved(ledger, job_id).await;
}

/// The records bucket's stream: (records held, bytes).
async fn records_state(js: &Context) -> (u64, u64) {
    let mut stream = js.get_stream(format!("KV_{JOBS_BUCKET}")).await.unwrap();
    let state = &stream.info().await.unwrap().state;
    (state.messages, state.bytes)
}

/// Sized for a day of 20 jobs an hour (480), the bucket holds at least 480 finished 32 GiB
/// jobs; the stream bytes a record takes there, against the default limits, give the default
/// bucket's capacity. Records are written until the bucket starts dropping its oldest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_records_bucket_holds_the_retention_period_of_jobs() {
    let server = NatsServer::start().unwrap();
    let limits = Limits {
        retention_days: 1,
        jobs_per_hour: 20,
        ..Limits::local()
    };
    let (js, topology) = cluster(&server, limits).await;
    let ledger = Ledger::new(&topology);
    let mut written = 0;
    loop {
        finished(&ledger, &format!("fill-{written:05}"), written + 1).await;
        written += 1;
        if records_state(&js).await.0 < written {
            break;
        }
        assert!(written < 10 * limits.retained_jobs(), "never full");
    }
    let (held, bytes) = records_state(&js).await;
    // Held one short of full: the last record dropped the oldest.
    let per_record = bytes.div_ceil(held);
    let default = Limits::default();
    let default_jobs = default.records_max_bytes() as u64 / per_record;
    println!(
        "full after {written} jobs: {held} records, {bytes} bytes, {per_record} bytes per \
         record; the default bucket ({} bytes) holds {default_jobs} such jobs",
        default.records_max_bytes()
    );
    assert!(held >= limits.retained_jobs(), "{held} records held");
    assert!(per_record <= RECORD_BYTES, "{per_record} bytes per record");
    assert!(default.retained_jobs() >= 325_000);
    assert!(default_jobs >= 325_000, "{default_jobs}");
}

/// A bucket full of finished jobs takes a new job: the oldest record goes, the newest stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_records_bucket_still_takes_a_new_job() {
    let server = NatsServer::start().unwrap();
    let limits = Limits {
        retention_days: 1,
        jobs_per_hour: 1,
        ..Limits::local()
    };
    let (js, topology) = cluster(&server, limits).await;
    let ledger = Ledger::new(&topology);
    let mut written = 0;
    while records_state(&js).await.0 == written {
        finished(&ledger, &format!("old-{written:03}"), written + 1).await;
        written += 1;
    }
    let spec = porep_32gib("new", JobInput::Object(staged_input_name("new")));
    let admission = ledger
        .admit(&spec, None, SHAPE, 9_999, unix_ms(), 1)
        .await
        .unwrap();
    assert!(matches!(admission, Admission::New(_)), "{admission:?}");
    assert!(
        ledger.get("old-000").await.unwrap().is_none(),
        "the oldest went"
    );
    let last = format!("old-{:03}", written - 1);
    assert!(ledger.get(&last).await.unwrap().is_some());
    let refused = JobResult::failed("refused", "unknown circuit");
    let admission = ledger
        .refuse(None, &refused, 10_000, unix_ms())
        .await
        .unwrap();
    assert!(
        matches!(admission, Admission::Ended(_)),
        "a refusal is recorded"
    );
}

/// Stages `<job_id>.input` and a job message naming it; returns the message's sequence.
async fn staged(topology: &Topology, js: &Context, job_id: &str) -> (JobSpec, u64) {
    let name = staged_input_name(job_id);
    objects::put(&topology.inputs, &name, b"a C1 output")
        .await
        .unwrap();
    let spec = porep_32gib(job_id, JobInput::Object(name));
    let body = serde_json::to_vec(&spec).unwrap();
    let ack = js.publish(SUBJECT_SUBMIT, body.into()).await.unwrap();
    (spec, ack.await.unwrap().sequence)
}

async fn input_exists(topology: &Topology, name: &str) -> bool {
    match topology.inputs.info(name).await {
        Ok(info) => !info.deleted,
        Err(_) => false,
    }
}

/// However a job ends — done, failed, cancelled while running or while still queued, refused at
/// intake — the input staged for it is gone; an object it named otherwise is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_input_is_deleted_when_its_job_ends() {
    let server = NatsServer::start().unwrap();
    let (js, topology) = cluster(&server, Limits::local()).await;
    let ledger = Ledger::new(&topology);

    let (spec, seq) = staged(&topology, &js, "done").await;
    admitted(&ledger, &spec, seq).await;
    assert!(
        input_exists(&topology, "done.input").await,
        "kept while running"
    );
    proved(&ledger, "done").await;

    let (spec, seq) = staged(&topology, &js, "failed").await;
    admitted(&ledger, &spec, seq).await;
    ledger.fail("failed", "a partition failed").await.unwrap();

    let (spec, seq) = staged(&topology, &js, "cancelled").await;
    admitted(&ledger, &spec, seq).await;
    let (outcome, _) = ledger.cancel("cancelled", "by request").await.unwrap();
    assert_eq!(outcome, CancelOutcome::Cancelled);

    staged(&topology, &js, "queued").await;
    let (outcome, _) = ledger.cancel("queued", "by request").await.unwrap();
    assert_eq!(outcome, CancelOutcome::Cancelled);

    let (_, seq) = staged(&topology, &js, "refused").await;
    let refused = JobResult::failed("refused", "unknown circuit");
    ledger.refuse(None, &refused, seq, unix_ms()).await.unwrap();

    // A refusal under another job's sequence leaves that job's input alone.
    let (_, seq) = staged(&topology, &js, "waiting").await;
    let stranger = JobResult::failed("stranger", "unknown circuit");
    ledger
        .refuse(None, &stranger, seq, unix_ms())
        .await
        .unwrap();
    assert!(input_exists(&topology, "waiting.input").await);

    objects::put(&topology.inputs, "shared.c1", b"kept")
        .await
        .unwrap();
    let spec = porep_32gib("other", JobInput::Object("shared.c1".into()));
    admitted(&ledger, &spec, 0).await;
    ledger.fail("other", "a partition failed").await.unwrap();

    for job_id in ["done", "failed", "cancelled", "queued", "refused"] {
        let record = ledger.get(job_id).await.unwrap().unwrap();
        assert!(
            record.status.is_final() && record.result_published,
            "{job_id}"
        );
        let name = staged_input_name(job_id);
        assert!(
            !input_exists(&topology, &name).await,
            "{name} is still there"
        );
    }
    assert!(input_exists(&topology, "shared.c1").await);
}

/// The results stream drops its oldest result when full; the job's record still answers with
/// the proof.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_gone_from_the_results_stream_is_answered_from_the_record() {
    let server = NatsServer::start().unwrap();
    let limits = Limits {
        results_max_bytes: 64 << 10,
        ..Limits::local()
    };
    let (js, topology) = cluster(&server, limits).await;
    let ledger = Ledger::new(&topology);
    finished(&ledger, "first", 1).await;
    for k in 0..20 {
        finished(&ledger, &format!("later-{k}"), k + 2).await;
    }
    let stream = js.get_stream(RESULTS_STREAM).await.unwrap();
    let gone = stream
        .get_last_raw_message_by_subject(&ledger_results_subject("first"))
        .await;
    assert!(gone.is_err(), "the first result is still in the stream");
    let answer = ledger.answer("first").await.unwrap().expect("an answer");
    assert_eq!(answer.status, JobStatus::Done);
    assert_eq!(answer.proof.unwrap().len(), 10 * 192 * 2);
    assert!(ledger.answer("never").await.unwrap().is_none());
}

/// Results per job id heard on a subject, counted by a core subscription: on
/// `cuzk.ledger.results.>` that is every publication the ledger makes, before the results
/// stream deduplicates them; on `cuzk.results.>`, what clients hear.
struct Count(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>);

impl Count {
    async fn start(client: &async_nats::Client, prefix: &'static str) -> Count {
        let mut sub = client.subscribe(format!("{prefix}.>")).await.unwrap();
        client.flush().await.unwrap();
        let count = Count(std::sync::Arc::default());
        let counts = count.0.clone();
        tokio::spawn(async move {
            use futures::StreamExt;
            while let Some(message) = sub.next().await {
                let id = message.subject[prefix.len() + 1..].to_owned();
                *counts.lock().unwrap().entry(id).or_default() += 1;
            }
        });
        count
    }

    fn of(&self) -> std::collections::BTreeMap<String, usize> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

/// Every way a job ends publishes its result once — counted on the ledger's raw publications,
/// where a second publication would show even though the stream drops it — including a result
/// whose finisher died between ending the job and publishing, which the sweeper publishes once
/// its grace has passed on its own clock, whatever clock stamped the record; ending a job again
/// publishes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_result_is_published_once_before_deduplication() {
    let server = NatsServer::start().unwrap();
    let (js, topology) = cluster(&server, Limits::local()).await;
    let client = async_nats::connect(server.url()).await.unwrap();
    let raw = Count::start(&client, "cuzk.ledger.results").await;
    let heard = Count::start(&client, "cuzk.results").await;
    let ledger = Ledger::new(&topology);

    finished(&ledger, "done", 1).await;
    let (spec, seq) = (porep_32gib("failed", JobInput::None), 2);
    admitted(&ledger, &spec, seq).await;
    ledger.fail("failed", "a partition failed").await.unwrap();
    ledger.fail("failed", "and another").await.unwrap();
    ledger.fail("done", "too late").await.unwrap();

    // The finishers of "orphan" and "ahead" made their records final, then died before
    // publishing; "orphan"'s finisher stamped it long ago, "ahead"'s with a clock a day ahead.
    // Neither stamp is this sweeper's clock: each is published once the sweeper itself has
    // seen the record unchanged for the grace. "noted"'s finisher published, then died (or
    // lost its server) before noting it: the sweeper notes it and publishes nothing.
    let day = 24 * 3600 * 1000;
    for (id, stamped, seq) in [
        (
            "orphan",
            unix_ms() - PUBLISH_GRACE.as_millis() as u64 - 1_000,
            3,
        ),
        ("ahead", unix_ms() + day, 4),
        ("noted", unix_ms(), 5),
    ] {
        let result = JobResult::failed(id, "a partition failed");
        let record = serde_json::json!({
            "job_id": id, "circuit": "mimc", "params": {}, "status": "failed",
            "submission_seq": seq, "submitted_at_ms": stamped, "synth_started_at_ms": stamped,
            "updated_at_ms": stamped, "partitions": [], "error": "a partition failed",
            "result": result, "result_published": false,
        });
        let body = serde_json::to_vec(&record).unwrap();
        topology.jobs_kv.put(id, body.into()).await.unwrap();
        if id == "noted" {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
            let result = serde_json::to_vec(&result).unwrap();
            let subject = ledger_results_subject(id);
            let ack = js.publish_with_headers(subject, headers, result.into());
            ack.await.unwrap().await.unwrap();
        }
    }
    let grace = Duration::from_millis(500);
    let mut sweeper =
        Sweeper::new(ledger.clone(), Duration::from_secs(3600)).with_publish_grace(grace);
    assert_eq!(
        sweeper.sweep().await.unwrap().published,
        0,
        "published before the sweeper's own grace"
    );
    tokio::time::sleep(grace).await;
    assert_eq!(sweeper.sweep().await.unwrap().published, 3);
    assert_eq!(sweeper.sweep().await.unwrap().published, 0);
    for id in ["orphan", "ahead", "noted"] {
        assert!(ledger.get(id).await.unwrap().unwrap().result_published);
    }

    tokio::time::sleep(Duration::from_millis(500)).await;
    let once: std::collections::BTreeMap<String, usize> = [
        ("done", 1),
        ("failed", 1),
        ("orphan", 1),
        ("ahead", 1),
        ("noted", 1),
    ]
    .into_iter()
    .map(|(id, n)| (id.to_owned(), n))
    .collect();
    assert_eq!(
        raw.of(),
        once,
        "the ledger's publications, before deduplication"
    );
    assert_eq!(heard.of(), once, "what clients heard");
}

/// With 10,000 submissions waiting in the jobs stream, 10,000 cancels of ids nobody submitted
/// are answered `unknown` within 10 s together: each reads only the messages stored since the
/// last, not the queue. A waiting job is still found and cancelled, behind all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancels_of_unknown_ids_do_not_scan_the_queue() {
    const QUEUED: usize = 10_000;
    let server = NatsServer::start().unwrap();
    let (js, topology) = cluster(&server, Limits::local()).await;
    let ledger = Ledger::new(&topology);
    // In batches: the context holds back publishes while too many acks are unread.
    for batch in (0..QUEUED).collect::<Vec<_>>().chunks(1_000) {
        let mut acks = Vec::new();
        for k in batch {
            let spec = porep_32gib(&format!("queued-{k:05}"), JobInput::None);
            let body = serde_json::to_vec(&spec).unwrap();
            acks.push(js.publish(SUBJECT_SUBMIT, body.into()).await.unwrap());
        }
        for ack in acks {
            ack.await.unwrap();
        }
    }
    let started = std::time::Instant::now();
    for k in 0..QUEUED {
        let (outcome, _) = ledger
            .cancel(&format!("never-{k}"), "by request")
            .await
            .unwrap();
        assert_eq!(outcome, CancelOutcome::Unknown);
    }
    let took = started.elapsed();
    // The target is 10 s on a quiet machine (docs/reliability.md has the times measured); the
    // bound leaves room for a busy one and still fails a scan of the queue per cancel.
    assert!(
        took <= Duration::from_secs(30),
        "{QUEUED} unknown cancels took {took:?}"
    );
    let last = format!("queued-{:05}", QUEUED - 1);
    let (outcome, _) = ledger.cancel(&last, "by request").await.unwrap();
    assert_eq!(outcome, CancelOutcome::Cancelled);
    println!("{QUEUED} cancels of unknown ids behind {QUEUED} waiting jobs: {took:?}");
}

/// A job resumed by a later delivery of its message (the first holder's hold lapsed) is that
/// delivery's: the first holder's record writes are refused, and it learns so from the record
/// they return; the new holder's are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_delivery_fences_the_first_holders_writes() {
    let server = NatsServer::start().unwrap();
    let (_js, topology) = cluster(&server, Limits::local()).await;
    let ledger = Ledger::new(&topology);
    let spec = porep_32gib("fenced", JobInput::None);
    let first = ledger
        .admit(&spec, None, SHAPE, 7, unix_ms(), 1)
        .await
        .unwrap();
    assert!(matches!(first, Admission::New(_)), "{first:?}");
    let second = ledger
        .admit(&spec, None, SHAPE, 7, unix_ms(), 2)
        .await
        .unwrap();
    assert!(matches!(second, Admission::Resume(_)), "{second:?}");
    let timings = PartitionTimings::default();
    let stale = ledger
        .queued("fenced", 0, timings, 100, 1)
        .await
        .unwrap()
        .unwrap();
    assert!(
        machine::superseded(&stale, 1),
        "the first holder was not told"
    );
    assert_eq!(stale.partitions[0].status, PartitionStatus::Pending);
    let held = ledger
        .queued("fenced", 0, timings, 200, 2)
        .await
        .unwrap()
        .unwrap();
    assert!(!machine::superseded(&held, 2));
    assert_eq!(
        (held.partitions[0].status, held.partitions[0].work_seq),
        (PartitionStatus::Queued, 200)
    );
}

/// A server restarted into the cluster answers direct gets while it catches up, with the
/// records it held before it went down — stood in for by a responder on the bucket's direct
/// gets that answers with a job's record as it was when admitted, every partition queued. A
/// node's ledger reads from the stream's leader and sees the job as it is; before, a GPU node
/// that read such a record fetched the blob of a partition already proved, which its prover
/// had deleted, and failed a good job ("not found"), and one that read no record skipped its
/// work item (a job never answered). A client's ledger reads by direct gets and meets the old
/// record: that is what shows the stand-in answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_reads_records_as_they_are_past_a_lagging_server() {
    use futures::StreamExt;
    let server = NatsServer::start().unwrap();
    let (js, topology) = cluster(&server, Limits::local()).await;
    let (node, client) = (Ledger::new(&topology), Ledger::reader(&topology));
    let input = JobInput::Object(staged_input_name("lag"));
    admitted(&node, &porep_32gib("lag", input), 1).await;
    let subject = format!("$KV.{JOBS_BUCKET}.lag");
    let stream = js.get_stream(format!("KV_{JOBS_BUCKET}")).await.unwrap();
    let old = stream
        .get_last_raw_message_by_subject(&subject)
        .await
        .unwrap();
    let lagging = async_nats::connect(server.url()).await.unwrap();
    let mut gets = lagging
        .subscribe(format!("$JS.API.DIRECT.GET.KV_{JOBS_BUCKET}.>"))
        .await
        .unwrap();
    let answers = lagging.clone();
    tokio::spawn(async move {
        while let Some(get) = gets.next().await {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Stream", format!("KV_{JOBS_BUCKET}").as_str());
            headers.insert("Nats-Subject", subject.as_str());
            headers.insert("Nats-Sequence", old.sequence.to_string().as_str());
            headers.insert("Nats-Time-Stamp", "2026-12-06T00:00:00Z");
            let reply = get.reply.unwrap();
            let _ = answers
                .publish_with_headers(reply, headers, old.payload.clone())
                .await;
        }
    });
    lagging.flush().await.unwrap();
    let first = ProvedPartition {
        proof: hex::encode([0xa0; 192]),
        timings: PartitionTimings::default(),
        attempts: 1,
        prover: "gpu-host-017/0".into(),
        verified: true,
    };
    node.proved("lag", 0, &first).await.unwrap();
    for _ in 0..200 {
        let record = node.get("lag").await.unwrap().unwrap();
        assert_eq!(
            machine::partition_state(&record, 0),
            Proved::AlreadyProved,
            "a node read the lagging server's record"
        );
    }
    // The server's own answer usually comes first; a few in a hundred are the stand-in's.
    let mut reads = 0;
    loop {
        let seen = client.get("lag").await.unwrap().unwrap();
        if machine::partition_state(&seen, 0) == Proved::Recorded {
            break;
        }
        reads += 1;
        assert!(
            reads < 5_000,
            "the stand-in answered no direct get: nothing is tested"
        );
    }
    tokio::time::timeout(Duration::from_secs(30), proved(&node, "lag"))
        .await
        .expect("the node's ledger could not finish the job past the lagging server");
    let record = node.get("lag").await.unwrap().unwrap();
    assert_eq!(record.status, JobStatus::Done);
}

/// A replicated bucket on nats-server before 2.9.21 may accept two updates of one record from
/// the same revision, the later overwriting the earlier. Two partitions of a job proved at the
/// same instant by two nodes (on connections to different servers of three) were then both
/// accepted, neither node saw the job complete, and it was never answered (soaks on 2.9.10).
/// On a server that checks updates within their consensus every job ends done. (On 2.9.10,
/// 37 of the 60 jobs were left incomplete; with the ledger reading each write back and applying
/// it again where it did not stick, 1 of 60 — an update still in flight when it looked — so
/// the test needs a fixed server, and says so where it has none: scripts/test.sh runs it
/// against 2.12.8 too.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn partitions_proved_at_once_in_a_replicated_bucket_all_count() {
    use cuzk_common::local_nats::start_cluster;
    use cuzk_common::topology::keeps_concurrent_updates;
    let dir = tempfile::tempdir().unwrap();
    let servers = start_cluster(3, dir.path()).unwrap();
    let mut ledgers = Vec::new();
    for server in &servers[..2] {
        let client = async_nats::connect(server.url()).await.unwrap();
        let version = client.server_info().version;
        if !keeps_concurrent_updates(&version) {
            eprintln!("skipped: nats-server {version} may accept two updates from one revision");
            return;
        }
        let js = jetstream::new(client);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let topology = loop {
            // The cluster elects its leader first.
            match provision(&js, 3, DEFAULT_ACK_WAIT, Limits::local()).await {
                Ok(topology) => break topology,
                Err(e) if std::time::Instant::now() > deadline => panic!("no buckets: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        };
        ledgers.push(Ledger::new(&topology));
    }
    let shape = JobShape {
        partitions: 2,
        ..SHAPE
    };
    let jobs = 60;
    let mut incomplete = Vec::new();
    for i in 0..jobs {
        let job_id = format!("pair-{i}");
        let spec = porep_32gib(&job_id, JobInput::Object(staged_input_name(&job_id)));
        let (first, second) = (&ledgers[0], &ledgers[1]);
        first
            .admit(&spec, None, shape, i + 1, unix_ms(), 1)
            .await
            .unwrap();
        for k in 0..2 {
            let timings = PartitionTimings::default();
            first
                .queued(&job_id, k, timings, 100 + k as u64, 1)
                .await
                .unwrap();
        }
        first.synthesized(&job_id).await.unwrap();
        let proof = |k: u8| ProvedPartition {
            proof: hex::encode([0xb0 + k; 192]),
            timings: PartitionTimings::default(),
            attempts: 1,
            prover: format!("gpu-{k}/0"),
            verified: true,
        };
        let (p0, p1) = (proof(0), proof(1));
        let (a, b) = tokio::join!(
            first.proved(&job_id, 0, &p0),
            second.proved(&job_id, 1, &p1)
        );
        a.unwrap();
        b.unwrap();
        let record = first.get(&job_id).await.unwrap().unwrap();
        if record.status != JobStatus::Done {
            incomplete.push(job_id);
        }
    }
    assert!(
        incomplete.is_empty(),
        "jobs left incomplete: {incomplete:?}"
    );
}
