//! Bad input ends the job as `failed` with a clear message on its results subject, and the
//! nodes keep serving: a good job after all the bad ones still succeeds.

mod support;

use std::time::Duration;

use async_nats::HeaderMap;
use cuzk_circuits::{CircuitFamily, ShapeCache};
use cuzk_cli::submit_and_wait;
use cuzk_common::lifecycle::{Admission, JobShape, Ledger};
use cuzk_common::objects;
use cuzk_common::topology::{results_subject, SUBJECT_RESULTS_MALFORMED};
use cuzk_wire::blob::{encode_blob, BlobHeaderInfo, EncodeOptions};
use cuzk_wire::job::{unix_ms, JobStatus, JOB_ID_HEADER};
use futures::StreamExt;
use serde_json::json;
use support::{blobs_left, cluster, job, submit_raw, TIMEOUT};

fn assert_failed(result: &cuzk_wire::job::JobResult, needle: &str) {
    assert_eq!(result.status, JobStatus::Failed, "{result:?}");
    let error = result.error.as_deref().unwrap_or_default();
    assert!(
        error.contains(needle),
        "error {error:?} should mention {needle:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_submissions_fail_cleanly() {
    let cluster = cluster().await;
    let client = &cluster.client;

    let result = submit_raw(
        client,
        b"{this is not json",
        None,
        SUBJECT_RESULTS_MALFORMED,
    )
    .await;
    assert_failed(&result, "not valid JSON");

    let mut headers = HeaderMap::new();
    headers.insert(JOB_ID_HEADER, "hdr-1");
    let result = submit_raw(client, b"[1,2", Some(headers), &results_subject("hdr-1")).await;
    assert_failed(&result, "not valid JSON");

    // High priority is for roles allowed to publish on cuzk.jobs.submit.high.
    let body = br#"{"version":1,"job_id":"hi","circuit":"mimc","params":{"rounds":8,"partitions":1},"priority":"high"}"#;
    let result = submit_raw(client, body, None, &results_subject("hi")).await;
    assert_failed(
        &result,
        "priority high must be submitted on cuzk.jobs.submit.high",
    );

    let body = br#"{"version":1,"job_id":"unknown-field","circuit":"mimc","colour":"red"}"#;
    let result = submit_raw(client, body, None, &results_subject("unknown-field")).await;
    assert_failed(&result, "colour");

    let result = submit_and_wait(client, &job("nope", "groth-bogus", json!({}), ""), TIMEOUT)
        .await
        .unwrap();
    assert_failed(&result, "unknown circuit 'groth-bogus'");

    let result = submit_and_wait(
        client,
        &job("badp", "sha256", json!({"blocks": 0, "partitions": 1}), ""),
        TIMEOUT,
    )
    .await
    .unwrap();
    assert_failed(&result, "blocks");

    let result = submit_and_wait(
        client,
        &job("badt", "mimc", json!({"rounds": "many"}), ""),
        TIMEOUT,
    )
    .await
    .unwrap();
    assert_failed(&result, "bad parameters");

    let oversized = "x".repeat(800 * 1024);
    let result = submit_and_wait(
        client,
        &job(
            "big",
            "mimc",
            json!({"rounds": 10, "partitions": 1}),
            &oversized,
        ),
        TIMEOUT,
    )
    .await
    .unwrap();
    assert_failed(&result, "exceeds the limit");

    let mut missing = job(
        "missing-obj",
        "mimc",
        json!({"rounds": 10, "partitions": 1}),
        "",
    );
    missing.input = cuzk_wire::job::JobInput::Object("no-such-object".into());
    let result = submit_and_wait(client, &missing, TIMEOUT).await.unwrap();
    assert_failed(&result, "not found");

    let good = job(
        "after-bad",
        "mimc",
        json!({"rounds": 64, "partitions": 1}),
        "ok",
    );
    let result = submit_and_wait(client, &good, TIMEOUT).await.unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_job_ids_keep_the_original() {
    let cluster = cluster().await;
    let client = &cluster.client;
    let mut original = job("dup", "mimc", json!({"rounds": 200, "partitions": 2}), "");
    // The original's input takes a while to load and the duplicate's none: the first
    // submission must still be the one that stands.
    let input: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    objects::put(&cluster.topology.inputs, "dup-input", &input)
        .await
        .unwrap();
    original.input = cuzk_wire::job::JobInput::Object("dup-input".into());
    let duplicate = job(
        "dup",
        "mimc",
        json!({"rounds": 300, "partitions": 1}),
        "two",
    );

    let mut results = client.subscribe(results_subject("dup")).await.unwrap();
    for spec in [&original, &duplicate, &original] {
        client
            .publish(
                cuzk_common::topology::SUBJECT_SUBMIT,
                serde_json::to_vec(spec).unwrap().into(),
            )
            .await
            .unwrap();
    }
    client.flush().await.unwrap();
    let first = tokio::time::timeout(TIMEOUT, results.next())
        .await
        .unwrap()
        .unwrap();
    let first: cuzk_wire::job::JobResult = serde_json::from_slice(&first.payload).unwrap();
    assert_eq!(first.status, JobStatus::Done, "{:?}", first.error);
    assert_eq!(
        first.partitions, 2,
        "the original submission's params were used"
    );
    // Submitting again after completion changes nothing either.
    client
        .publish(
            cuzk_common::topology::SUBJECT_SUBMIT,
            serde_json::to_vec(&duplicate).unwrap().into(),
        )
        .await
        .unwrap();
    let extra = tokio::time::timeout(Duration::from_secs(8), results.next()).await;
    assert!(
        extra.is_err(),
        "a duplicate produced a second result: {extra:?}"
    );
    let record = Ledger::new(&cluster.topology)
        .get("dup")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.params, original.params);
    cluster.stop().await.unwrap();
}

/// Publishes a work item for a one-partition job whose blob is `blob`, as a synth node would.
async fn inject_partition(
    cluster: &cuzk_cli::LocalCluster,
    job_id: &str,
    blob: &[u8],
    family: &dyn CircuitFamily,
    params: serde_json::Value,
) {
    let spec = job(job_id, family.name(), params.clone(), "");
    let shape = JobShape {
        partitions: 1,
        synthetic: false,
        shape_key: &family.shape_key(),
    };
    let admitted = Ledger::new(&cluster.topology)
        .admit(&spec, None, shape, 0, unix_ms(), 1)
        .await
        .unwrap();
    assert!(matches!(admitted, Admission::New(_)), "{admitted:?}");
    let object = format!("{job_id}/0/0");
    objects::put(&cluster.topology.blobs, &object, blob)
        .await
        .unwrap();
    let job_input = (family, &params, &b""[..]);
    support::queue_work(cluster, (job_id, 0, 1), job_input, &object).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_and_truncated_blobs_fail_the_job() {
    let cluster = cluster().await;
    let params = json!({"rounds": 100, "partitions": 1});
    let family = cuzk_circuits::resolve("mimc", &params).unwrap();
    let witness = family.witness(b"blob", 0, None).unwrap();
    let hash = ShapeCache::open_default(true)
        .unwrap()
        .shape_id(&*family)
        .unwrap()
        .hash;
    let encode = |info: &BlobHeaderInfo| {
        encode_blob(
            info,
            &witness.input,
            &witness.aux,
            &EncodeOptions::default(),
        )
    };

    type Damage = fn(Vec<u8>) -> Vec<u8>;
    let cases: [(&str, Damage, &str); 3] = [
        ("truncated", |b| b[..b.len() / 2].to_vec(), "truncated"),
        (
            "flipped",
            |mut b| {
                let last = b.len() - 1;
                b[last] ^= 0x40;
                b
            },
            "checksum",
        ),
        ("garbage", |b| vec![0x5a; b.len()], "bad magic"),
    ];
    // The result of a job whose one partition is `blob`, queued directly.
    let result_of = |job_id: &'static str, blob: Vec<u8>| {
        let (cluster, family, params) = (&cluster, &family, params.clone());
        async move {
            let mut results = cluster
                .client
                .subscribe(results_subject(job_id))
                .await
                .unwrap();
            inject_partition(cluster, job_id, &blob, &**family, params).await;
            let message = tokio::time::timeout(TIMEOUT, results.next())
                .await
                .unwrap()
                .unwrap();
            serde_json::from_slice::<cuzk_wire::job::JobResult>(&message.payload).unwrap()
        }
    };
    for (job_id, damage, needle) in cases {
        let info = BlobHeaderInfo::new(job_id, 0, family.shape_key(), hash).unwrap();
        assert_failed(&result_of(job_id, damage(encode(&info))).await, needle);
    }

    // Valid blobs that do not belong: another job's, and one synthesized against other
    // constraint matrices (a synth node running other circuit code).
    let mut other_matrices = hash;
    other_matrices[0] ^= 1;
    let misfits = [
        ("mixup", "someone-else", hash, "not this work item"),
        (
            "other-matrices",
            "other-matrices",
            other_matrices,
            "constraint matrices",
        ),
    ];
    for (job_id, blob_job, shape_hash, needle) in misfits {
        let info = BlobHeaderInfo::new(blob_job, 0, family.shape_key(), shape_hash).unwrap();
        assert_failed(&result_of(job_id, encode(&info)).await, needle);
    }

    assert_eq!(
        blobs_left(&cluster.topology).await,
        0,
        "failed jobs' blobs are deleted"
    );
    let good = job(
        "still-alive",
        "mimc",
        json!({"rounds": 64, "partitions": 1}),
        "ok",
    );
    let result = submit_and_wait(&cluster.client, &good, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    cluster.stop().await.unwrap();
}

/// `cuzk submit --c1` checks the C1 file against its flags before it connects or uploads.
#[cfg(feature = "porep")]
#[test]
fn submit_refuses_a_c1_file_that_contradicts_its_flags() {
    let work = tempfile::tempdir().unwrap();
    let api = br#"{"registered_proof":"StackedDrg2KiBV1_1","vanilla_proofs":{}}"#;
    let phase1 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, api);
    let file = work.path().join("c1.json");
    std::fs::write(
        &file,
        json!({"SectorNum": 3, "Phase1Out": phase1, "SectorSize": 2048}).to_string(),
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args([
            "submit",
            "--nats-url",
            "nats://127.0.0.1:1",
            "--miner",
            "f01",
        ])
        .arg("--c1")
        .arg(&file)
        .args(["--sector", "4"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("for sector 3"), "{stderr}");
}

/// A forged input head, written by nats-py (`tests/py/forge_head.py`) straight to the object
/// store's meta subject as anyone allowed to stage inputs could: a 1-byte object whose head
/// claims hundreds of MB in 12 stripes. The synth node (a process of its own, so that its peak
/// RSS is its alone) refuses a head that declares more than the job's circuit takes (sha256:
/// `cuzk_circuits::MAX_INPUT_BYTES`) before reading it, naming both numbers, and allocates
/// nothing for stripes it never gets when the claim is within the cap (porep-c2's 512 MiB).
#[cfg(feature = "porep")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_input_head_allocates_nothing() {
    let server = cuzk_common::local_nats::NatsServer::start().unwrap();
    let url = server.url();
    let (client, topology) = cuzk_cli::connect_url(&url, "forge-test").await.unwrap();
    let mut synth = tokio::process::Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["synth-node", "--nats-url", &url, "--synth-threads", "2"])
        .kill_on_drop(true)
        .spawn()
        .expect("start a synth node");
    let pid = synth.id().unwrap();
    let started = std::time::Instant::now();
    while !cuzk_common::nodes::list(&topology)
        .await
        .unwrap()
        .iter()
        .any(|n| n.role == "synth")
    {
        assert!(started.elapsed() < TIMEOUT, "the synth node never came up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let before = support::peak_rss(pid);

    let forge = |total: u64, names: &[&str]| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/py/forge_head.py");
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        let output = std::process::Command::new(python)
            .arg(script)
            .args([url.as_str(), cuzk_common::topology::INPUTS_BUCKET])
            .arg(total.to_string())
            .args(names)
            .output()
            .expect("run python3 (nats-py: scripts/ensure-deps.sh --tests)");
        assert!(
            output.status.success(),
            "forge_head.py failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        eprint!("forged: {}", String::from_utf8_lossy(&output.stdout));
    };
    let run = |kind: &'static str, params: serde_json::Value, names: Vec<String>| {
        let client = client.clone();
        async move {
            let jobs = names.iter().map(|name| {
                let mut spec = job(&format!("forged-{name}"), kind, params.clone(), "");
                spec.input = cuzk_wire::job::JobInput::Object(name.clone());
                let client = client.clone();
                async move { submit_and_wait(&client, &spec, TIMEOUT).await.unwrap() }
            });
            futures::future::join_all(jobs).await
        }
    };

    // Over the circuit's cap: refused from the head.
    let names: Vec<String> = (0..3).map(|i| format!("sha-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    forge(12 << 26, &refs);
    let params = json!({"blocks": 1, "partitions": 1});
    for result in run("sha256", params, names).await {
        let cap = cuzk_circuits::MAX_INPUT_BYTES;
        assert_failed(
            &result,
            &format!("declares {} bytes, over the limit of {cap}", 12 << 26),
        );
    }
    // Within the cap: nothing is allocated for the stripes that are never found.
    let names: Vec<String> = (0..3).map(|i| format!("c1-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    forge(480 << 20, &refs);
    let params = json!({"sector_size": "2KiB", "sector_id": 7, "prover_id": "00".repeat(32)});
    for result in run("porep-c2", params, names).await {
        assert_failed(&result, "not found");
    }

    let grown = support::peak_rss(pid).saturating_sub(before);
    eprintln!("synth node peak RSS grew by {} MiB", grown >> 20);
    assert!(
        grown <= 128 << 20,
        "the synth node's peak RSS grew by {} MiB on forged heads",
        grown >> 20
    );
    synth.kill().await.unwrap();
}

/// A valid, self-consistent blob synthesized from another input than the job's (what a
/// synthesis bug makes): its proof verifies against the blob's own public inputs, but those are
/// not the job's, so the partition fails and the job never reads `verified`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_proving_another_statement_fails_the_job() {
    let cluster = cluster().await;
    let params = json!({"rounds": 100, "partitions": 1});
    let family = cuzk_circuits::resolve("mimc", &params).unwrap();
    let job_id = "other-statement";
    let witness = family.witness(b"not the job's input", 0, None).unwrap();
    let hash = ShapeCache::open_default(true)
        .unwrap()
        .shape_id(&*family)
        .unwrap()
        .hash;
    let info = BlobHeaderInfo::new(job_id, 0, family.shape_key(), hash).unwrap();
    let blob = encode_blob(
        &info,
        &witness.input,
        &witness.aux,
        &EncodeOptions::default(),
    );
    let mut results = cluster
        .client
        .subscribe(results_subject(job_id))
        .await
        .unwrap();
    inject_partition(&cluster, job_id, &blob, &*family, params).await;
    let message = tokio::time::timeout(TIMEOUT, results.next())
        .await
        .unwrap()
        .unwrap();
    let result: cuzk_wire::job::JobResult = serde_json::from_slice(&message.payload).unwrap();
    assert_failed(&result, "differ from those derived from the job");
    assert!(!result.verified);
    cluster.stop().await.unwrap();
}
