//! Submission as users do it: nats-py (not our code) publishes the job JSON with a plain core
//! publish and reads the result from the results subject, or sends it as a request (what
//! `nats req` does) and reads the server's acknowledgement — a refusal when the jobs stream is
//! full.

mod support;

use std::process::Command;

use cuzk_circuits::ShapeCache;
use cuzk_wire::job::{JobResult, JobStatus};
use serde_json::json;

/// Runs one of the nats-py scripts in tests/py with `args`; returns its stdout.
async fn python(script: &str, args: Vec<String>) -> Vec<u8> {
    let script = format!("{}/../tests/py/{script}", env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let output =
        tokio::task::spawn_blocking(move || Command::new(python).arg(script).args(args).output())
            .await
            .unwrap()
            .expect("run python3 (nats-py is installed by .ci/run)");
    assert!(
        output.status.success(),
        "nats-py client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_py_submits_and_reads_the_result() {
    let cluster = support::cluster().await;
    let args = vec![cluster.url(), "from-python".into(), "300".into()];
    let stdout = python("submit_job.py", args).await;
    cluster.stop().await.unwrap();
    let result: JobResult = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(result.status, JobStatus::Done);
    assert_eq!(result.partitions, 2);
    let spec = support::job(
        "from-python",
        "mimc",
        json!({"rounds": 500, "partitions": 2}),
        "submitted by nats-py",
    );
    cuzk_cli::verify_job_proof(&spec, &result, &ShapeCache::open_default(true).unwrap()).unwrap();
}

/// `nats req cuzk.jobs.submit` gets the server's acknowledgement: the stream and sequence of a
/// stored job, or the reason it was refused (here: the jobs stream holds one job at most and no
/// synth node takes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_gets_the_acknowledgement_or_the_refusal() {
    let server = cuzk_common::local_nats::NatsServer::start().unwrap();
    let config = cuzk_common::config::NatsArgs {
        urls: Some(vec![server.url()]),
        max_queued_jobs: Some(1),
        limits: Some(cuzk_common::config::LimitsProfile::Local),
        ..Default::default()
    }
    .resolve("request-test")
    .unwrap();
    cuzk_cli::connect(&config).await.unwrap();
    let args = vec![server.url(), "stored".into(), "refused".into()];
    let stdout = python("request_job.py", args).await;
    let replies: Vec<serde_json::Value> = String::from_utf8_lossy(&stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(replies[0]["stream"], "CUZK_JOBS", "{replies:?}");
    assert_eq!(replies[0]["seq"], 1, "{replies:?}");
    let refusal = replies[1]["error"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(refusal.contains("maximum messages"), "{replies:?}");

    // `cuzk submit` publishes through JetStream too, and says so.
    let submit = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args([
            "submit",
            "--nats-url",
            &server.url(),
            "--job-id",
            "also-refused",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&submit.stderr);
    assert!(!submit.status.success(), "{stderr}");
    assert!(
        stderr.contains("the cluster refused the submission")
            && stderr.contains("maximum messages"),
        "{stderr}"
    );
}
