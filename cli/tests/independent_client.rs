//! Submission as users do it: nats-py (not our code) publishes the job JSON with a plain core
//! publish and reads the result from the results subject.

mod support;

use std::process::Command;

use cuzk_circuits::ShapeCache;
use cuzk_wire::job::{JobResult, JobStatus};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_py_submits_and_reads_the_result() {
    let cluster = support::cluster().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/py/submit_job.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let url = cluster.url();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args([script, &url, "from-python", "300"])
            .output()
    })
    .await
    .unwrap()
    .expect("run python3 (nats-py is installed by .ci/run)");
    cluster.stop().await.unwrap();
    assert!(
        output.status.success(),
        "nats-py client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: JobResult = serde_json::from_slice(&output.stdout).unwrap();
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
