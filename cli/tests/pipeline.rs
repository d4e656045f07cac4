//! The split pipeline end to end on a real nats-server: jobs in through a plain publish,
//! partitions through the synth node, the work queue and the (CPU-backend) GPU node, proofs out
//! on the results subject, checked with bellperson's verifier.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_circuits::ShapeCache;
use cuzk_cli::{submit_and_wait, verify_job_proof};
use cuzk_common::config::{BackendKind, GpuArgs, ParamArgs, SynthArgs};
use cuzk_common::lifecycle::Ledger;
use cuzk_common::local_nats::NatsServer;
use cuzk_common::topology::{blob_shard_bucket, BLOB_SHARDS, WORK_STREAM};
use cuzk_wire::job::{JobRecord, JobResult, JobStatus, PartitionStatus};
use futures::StreamExt;
use serde_json::json;
use support::{blobs_left, blobs_now, cluster, cluster_with, job, TIMEOUT};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_partition_jobs_come_back_verified() {
    let cluster = cluster().await;
    let cache = ShapeCache::open_default(true).unwrap();
    let jobs = [
        job(
            "mimc-3",
            "mimc",
            json!({"rounds": 1000, "partitions": 3}),
            "first",
        ),
        job(
            "sha-2",
            "sha256",
            json!({"blocks": 1, "partitions": 2}),
            "second",
        ),
    ];
    for spec in &jobs {
        let result = submit_and_wait(&cluster.client, spec, TIMEOUT)
            .await
            .unwrap();
        assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
        assert!(result.verified);
        assert_eq!(result.partition_timings.len(), result.partitions as usize);
        assert!(result
            .partition_timings
            .iter()
            .all(|t| t.blob_bytes > 0 && t.prove_ms > 0.0));
        verify_job_proof(spec, &result, &cache).unwrap();

        let record = Ledger::new(&cluster.topology)
            .get(&spec.job_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(record.status, JobStatus::Done);
        assert!(record
            .partitions
            .iter()
            .all(|p| p.status == PartitionStatus::Proved));
        assert_eq!(
            record.result.as_ref().and_then(|r| r.proof.clone()),
            result.proof
        );
    }
    assert_eq!(
        blobs_left(&cluster.topology).await,
        0,
        "proved blobs are deleted"
    );
    cluster.stop().await.unwrap();
}

/// What `blobs_left` (here and in the fault tests) counts: a blob nobody deleted, once per
/// stripe; a deleted blob is not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blobs_left_sees_a_live_blob() {
    let cluster = cluster().await;
    let topology = &cluster.topology;
    assert_eq!(blobs_now(topology).await, Ok(0));
    let striped = vec![7u8; 3 * cuzk_common::objects::STRIPE_BYTES];
    cuzk_common::objects::put(&topology.blobs, "kept", &striped)
        .await
        .unwrap();
    let stripes = blobs_now(topology).await.unwrap();
    assert!(stripes > 1, "a striped blob counts its stripes: {stripes}");
    cuzk_common::objects::put(&topology.blobs, "deleted", b"gone")
        .await
        .unwrap();
    cuzk_common::objects::delete(&topology.blobs, "deleted")
        .await
        .unwrap();
    assert_eq!(blobs_now(topology).await, Ok(stripes));
    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_result_does_not_verify() {
    let cluster = cluster().await;
    let cache = ShapeCache::open_default(true).unwrap();
    let spec = job(
        "tamper",
        "mimc",
        json!({"rounds": 300, "partitions": 2}),
        "x",
    );
    let mut result = submit_and_wait(&cluster.client, &spec, TIMEOUT)
        .await
        .unwrap();
    cluster.stop().await.unwrap();
    verify_job_proof(&spec, &result, &cache).unwrap();
    // Swap the two partition proofs: each is valid, but not for the other's public inputs.
    let proof = result.proof.take().unwrap();
    let (first, second) = proof.split_at(384);
    result.proof = Some(format!("{second}{first}"));
    assert!(verify_job_proof(&spec, &result, &cache).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_node_proves_with_a_parameter_file_from_a_path() {
    use bellperson::groth16::{prepare_verifying_key, verify_proof, Proof};
    use cuzk_common::config::GpuArgs;
    use rand::SeedableRng;

    let params_json = json!({"rounds": 77, "partitions": 2});
    let family = cuzk_circuits::resolve("mimc", &params_json).unwrap();
    // Parameters unlike the cache's (another seed): proofs verify only if the file was used.
    let matrices = family.capture_matrices().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ceremony.params");
    let (vk, _) = cuzk_prover::setup::generate(
        &matrices,
        &mut rand_chacha::ChaCha20Rng::seed_from_u64(7),
        &cuzk_prover::setup::CpuFixedBase::new(),
        &mut std::fs::File::create(&path).unwrap(),
    )
    .unwrap();

    let cluster = cluster_with(GpuArgs {
        params_files: Some(vec![format!("{}={}", family.shape_key(), path.display())
            .parse()
            .unwrap()]),
        ..Default::default()
    })
    .await;
    let spec = job("from-file", "mimc", params_json, "file");
    let result = submit_and_wait(&cluster.client, &spec, TIMEOUT)
        .await
        .unwrap();
    cluster.stop().await.unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    let pvk = prepare_verifying_key(&vk);
    let proof = hex::decode(result.proof.unwrap()).unwrap();
    for (index, bytes) in proof.chunks(192).enumerate() {
        let proof = Proof::read(bytes).unwrap();
        let inputs = family.public_inputs(b"file", index).unwrap();
        assert!(verify_proof(&pvk, &proof, &inputs).unwrap());
    }
}

/// Two partitions synthesized at once both find the blob buckets empty, and the head bucket
/// holds one of their blobs: the second upload is refused for lack of room. The synth node
/// waits for room with the job's message in hand — not handed back, so no delivery is spent —
/// and once a GPU node has proved the first partition and deleted its blob, the second goes up
/// and the job is proved. (Handed back, the refusals spent the job's deliveries and failed it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_blob_bucket_holds_an_upload_back_without_failing_its_job() {
    cuzk_common::telemetry::init_logging();
    let server = NatsServer::start().unwrap();
    let (client, topology) = cuzk_cli::connect_url(&server.url(), "test").await.unwrap();
    let params = ParamArgs::default().resolve(true).unwrap();
    let shutdown = CancellationToken::new();
    let synth = SynthArgs {
        threads: Some(2),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let synth = cuzk_synth_node::SynthNode::new(topology.clone(), synth, &params, "s".into());
    let synth = tokio::spawn(Arc::new(synth.unwrap()).run(shutdown.clone()));
    let ledger = Ledger::new(&topology);
    let shape = json!({"rounds": 4096, "partitions": 1});

    // One blob of the shape, measured; then the queue is emptied and each blob bucket made
    // to hold one and a half such blobs.
    let probe = job("probe", "mimc", shape.clone(), "probe");
    cuzk_cli::submit::publish_job(&topology.js, None, &probe)
        .await
        .unwrap();
    let queued = until(&ledger, "probe", |r| {
        let first = r.partitions.first()?;
        (first.status == PartitionStatus::Queued).then_some(first.timings.blob_bytes)
    })
    .await;
    assert!(
        queued < 512 << 10,
        "one chunk, so a refused upload leaves nothing behind"
    );
    for bucket in (0..BLOB_SHARDS).map(blob_shard_bucket) {
        let mut stream = topology
            .js
            .get_stream(format!("OBJ_{bucket}"))
            .await
            .unwrap();
        stream.purge().await.unwrap();
        let mut config = stream.info().await.unwrap().config.clone();
        config.max_bytes = (queued * 3 / 2) as i64;
        topology.js.update_stream(config).await.unwrap();
    }
    topology
        .js
        .get_stream(WORK_STREAM)
        .await
        .unwrap()
        .purge()
        .await
        .unwrap();

    let two = job(
        "two",
        "mimc",
        json!({"rounds": 4096, "partitions": 2}),
        "two",
    );
    let mut answers = client
        .subscribe(cuzk_common::topology::results_subject("two"))
        .await
        .unwrap();
    client.flush().await.unwrap();
    cuzk_cli::submit::publish_job(&topology.js, None, &two)
        .await
        .unwrap();
    until(&ledger, "two", |r| {
        r.partitions
            .iter()
            .any(|p| p.status == PartitionStatus::Queued)
            .then_some(())
    })
    .await;
    // Longer than an upload's own retries (about 10 s): a refusal that handed the message
    // back would have been redelivered by now.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let waiting = ledger.get("two").await.unwrap().unwrap();
    assert!(!waiting.status.is_final(), "{waiting:?}");
    let queued_now = waiting
        .partitions
        .iter()
        .filter(|p| p.status == PartitionStatus::Queued);
    assert_eq!(
        queued_now.count(),
        1,
        "the bucket held two blobs: {waiting:?}"
    );
    assert_eq!(
        waiting.intake_attempts, 1,
        "the job's message was handed back"
    );

    let gpu = GpuArgs {
        cpu_threads: Some(2),
        backend: Some(BackendKind::Cpu),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let gpu = cuzk_gpu_node::GpuNode::new(topology.clone(), gpu, &params, "g".into()).unwrap();
    let gpu = tokio::spawn(Arc::new(gpu).run(shutdown.clone()));
    let answer = tokio::time::timeout(TIMEOUT, answers.next())
        .await
        .unwrap()
        .unwrap();
    let answer: JobResult = serde_json::from_slice(&answer.payload).unwrap();
    assert_eq!(answer.status, JobStatus::Done, "{:?}", answer.error);
    verify_job_proof(&two, &answer, &ShapeCache::open_default(true).unwrap()).unwrap();
    let record = ledger.get("two").await.unwrap().unwrap();
    assert_eq!(record.intake_attempts, 1);
    shutdown.cancel();
    synth.await.unwrap().unwrap();
    gpu.await.unwrap().unwrap();
}

/// Waits for `job_id`'s record to give `what`.
async fn until<T>(ledger: &Ledger, job_id: &str, what: impl Fn(&JobRecord) -> Option<T>) -> T {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(found) = ledger.get(job_id).await.unwrap().as_ref().and_then(&what) {
            return found;
        }
        assert!(Instant::now() < deadline, "{job_id}: not in time");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
