//! The split pipeline end to end on a real nats-server: jobs in through a plain publish,
//! partitions through the synth node, the work queue and the (CPU-backend) GPU node, proofs out
//! on the results subject, checked with bellperson's verifier.

mod support;

use cuzk_circuits::ShapeCache;
use cuzk_cli::{submit_and_wait, verify_job_proof};
use cuzk_common::lifecycle::Ledger;
use cuzk_wire::job::{JobStatus, PartitionStatus};
use serde_json::json;
use support::{blobs_left, blobs_now, cluster, cluster_with, job, TIMEOUT};

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
