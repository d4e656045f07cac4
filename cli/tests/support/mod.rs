//! Shared setup for the integration tests: a local cluster with small thread counts.

#![allow(dead_code)] // each test binary uses a different subset

pub mod shipped;

use std::time::Duration;

use cuzk_cli::LocalCluster;
use cuzk_common::config::{GpuArgs, ParamArgs, SynthArgs};
use cuzk_wire::job::{JobInput, JobResult, JobSpec, JobStatus, Priority, JOB_SPEC_VERSION};
use futures::StreamExt;

pub const TIMEOUT: Duration = Duration::from_secs(300);

pub async fn cluster() -> LocalCluster {
    cluster_with(GpuArgs::default()).await
}

/// A local cluster on the CPU backend with 2 threads per node; `gpu` adds GPU-node settings.
pub async fn cluster_with(gpu: GpuArgs) -> LocalCluster {
    cuzk_common::telemetry::init_logging();
    let synth = SynthArgs {
        threads: Some(2),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let gpu = GpuArgs {
        cpu_threads: gpu.cpu_threads.or(Some(2)),
        backend: gpu.backend.or(Some(cuzk_common::config::BackendKind::Cpu)),
        ..gpu
    }
    .resolve()
    .unwrap();
    // Test parameters are generated where missing, as `cuzk local` does.
    let params = ParamArgs::default().resolve(true).unwrap();
    LocalCluster::start(synth, gpu, params)
        .await
        .expect("local cluster")
}

pub fn job(job_id: &str, circuit: &str, params: serde_json::Value, input: &str) -> JobSpec {
    JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: job_id.into(),
        circuit: circuit.into(),
        params,
        input: JobInput::Utf8(input.into()),
        priority: Priority::Normal,
    }
}

/// Publishes raw bytes on the submit subject (a plain core publish, like `nats pub`), optionally
/// with headers, and waits for the first message on `results_subject`.
pub async fn submit_raw(
    client: &async_nats::Client,
    body: &[u8],
    headers: Option<async_nats::HeaderMap>,
    results_subject: &str,
) -> JobResult {
    let mut results = client.subscribe(results_subject.to_owned()).await.unwrap();
    let subject = cuzk_common::topology::SUBJECT_SUBMIT;
    match headers {
        Some(h) => client
            .publish_with_headers(subject, h, body.to_vec().into())
            .await
            .unwrap(),
        None => client.publish(subject, body.to_vec().into()).await.unwrap(),
    }
    client.flush().await.unwrap();
    let message = tokio::time::timeout(TIMEOUT, results.next())
        .await
        .expect("result in time")
        .unwrap();
    serde_json::from_slice(&message.payload).unwrap()
}

/// Objects left in the blob buckets once deletions settle: blobs are deleted right after a
/// job's result is published, so give that a moment.
pub async fn blobs_left(topology: &cuzk_common::topology::Topology) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        // A failed count (the client reconnecting, a bucket's stream electing a leader after a
        // fault) is retried.
        match blobs_now(topology).await {
            Ok(0) => return 0,
            Ok(left) if std::time::Instant::now() > deadline => return left,
            Err(why) if std::time::Instant::now() > deadline => {
                panic!("the blob buckets stayed unreachable: {why}")
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Asserts that job `job_id`'s input went through the inputs bucket (its record names the
/// staged object) and that the object is deleted once the job has ended. The result is published
/// before the input is deleted, so give the deletion a moment.
pub async fn staged_input_released(topology: &cuzk_common::topology::Topology, job_id: &str) {
    let record = cuzk_common::lifecycle::Ledger::new(topology)
        .get(job_id)
        .await
        .unwrap()
        .expect("the job has a record");
    assert_eq!(
        record.staged_input.map(|s| s.name),
        Some(cuzk_wire::job::staged_input_name(job_id)),
        "the input went through the inputs bucket"
    );
    let name = cuzk_wire::job::staged_input_name(job_id);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // A deleted object's info is its tombstone.
    while matches!(topology.inputs.info(&name).await, Ok(info) if !info.deleted) {
        assert!(
            std::time::Instant::now() < deadline,
            "the staged input outlived its job"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Objects in the blob buckets now. Each bucket is counted on its
/// own clock, all at once, so one slow bucket does not starve the others of the time to answer.
pub async fn blobs_now(topology: &cuzk_common::topology::Topology) -> Result<usize, String> {
    let buckets = (0..topology.blobs.count()).map(cuzk_common::topology::blob_shard_bucket);
    let counts = buckets.map(|b| async move { count_blobs(&topology.js, &b).await });
    let counts = futures::future::join_all(counts).await;
    counts.into_iter().sum()
}

/// A bucket's live objects, read from the bucket's stream by requests its leader answers. Not by
/// listing the bucket: a listing's consumer may be placed on a killed server (nats-server before
/// 2.12 places one on any of the stream's servers), and then the listing never answers.
async fn count_blobs(js: &async_nats::jetstream::Context, bucket: &str) -> Result<usize, String> {
    let counting = async {
        let stream = js.get_stream(format!("OBJ_{bucket}")).await?;
        let mut live = 0;
        for subject in subjects(&stream, &format!("$O.{bucket}.M.>")).await? {
            let message = stream.get_last_raw_message_by_subject(&subject).await?;
            let info: async_nats::jetstream::object_store::ObjectInfo =
                serde_json::from_slice(&message.payload)?;
            live += usize::from(!info.deleted);
        }
        Ok::<_, async_nats::Error>(live)
    };
    match tokio::time::timeout(Duration::from_secs(5), counting).await {
        Ok(Ok(count)) => Ok(count),
        Ok(Err(error)) => Err(format!("{bucket}: {error}")),
        Err(_) => Err(format!("{bucket}: counting took over 5 s")),
    }
}

/// The subjects under `filter` that hold messages in `stream`.
async fn subjects(
    stream: &async_nats::jetstream::stream::Stream,
    filter: &str,
) -> Result<Vec<String>, async_nats::Error> {
    let mut found = Vec::new();
    let mut listing = stream.info_with_subjects(filter).await?;
    while let Some(entry) = listing.next().await {
        found.push(entry?.0);
    }
    Ok(found)
}

/// Publishes a partition's work item as a synth node does, its blob at `blob_object`, with
/// the public inputs derived from the job's `input`.
pub async fn queue_work(
    cluster: &cuzk_cli::LocalCluster,
    (job_id, partition, partitions): (&str, u32, u32),
    (family, params, input): (&dyn cuzk_circuits::CircuitFamily, &serde_json::Value, &[u8]),
    blob_object: &str,
) {
    let inputs = family.public_inputs(input, partition as usize).unwrap();
    let item = cuzk_wire::job::WorkItem {
        version: cuzk_wire::job::WORK_ITEM_VERSION,
        job_id: job_id.into(),
        partition,
        partitions,
        circuit: family.name().into(),
        params_json: params.to_string(),
        shape_key: family.shape_key(),
        blob_object: blob_object.into(),
        public_inputs: Some(cuzk_wire::inputs::InputsDigest::of(&inputs)),
        published_at_ms: cuzk_wire::job::unix_ms(),
        timings: Default::default(),
    };
    let subject = cuzk_common::topology::SUBJECT_WORK_NORMAL;
    let js = &cluster.topology.js;
    js.publish(subject, item.encode().into())
        .await
        .unwrap()
        .await
        .unwrap();
}

/// Submits each job and checks that it fails with an error containing its expected text.
pub async fn each_fails(client: &async_nats::Client, bad: &[(JobSpec, &str)]) {
    for (spec, expected) in bad {
        let result = cuzk_cli::submit_and_wait(client, spec, TIMEOUT)
            .await
            .unwrap();
        assert_eq!(result.status, JobStatus::Failed, "{}", spec.job_id);
        let error = result.error.unwrap_or_default();
        assert!(error.contains(expected), "{}: {error}", spec.job_id);
    }
}

/// A process's peak resident memory (`VmHWM` of `/proc/<pid>/status`), bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM in the process status");
    kib << 10
}

/// Runs `openssl` in `dir` (certificates made at test time) and returns what it printed.
pub fn openssl(dir: &std::path::Path, args: &[&str]) -> String {
    let output = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
