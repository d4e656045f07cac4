//! Refusals per tenant: past `--synth-max-refusals-per-minute` a tenant's refused submissions
//! are answered on its results subject but not recorded, so a flood of bad submissions cannot
//! fill the records bucket; another tenant's refusals are still recorded (each tenant has its
//! own allowance), and a good job of the flooding tenant still runs.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use cuzk_cli::LocalCluster;
use cuzk_common::config::{GpuArgs, ParamArgs, SynthArgs};
use cuzk_common::lifecycle::Ledger;
use cuzk_common::topology::{job_key, results_subject, submit_subject};
use cuzk_wire::job::{JobResult, JobStatus, Priority};
use futures::StreamExt;
use serde_json::json;

const LIMIT: u32 = 3;

async fn cluster() -> LocalCluster {
    cuzk_common::telemetry::init_logging();
    let synth = SynthArgs {
        threads: Some(2),
        max_refusals_per_minute: Some(LIMIT),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let gpu = GpuArgs {
        cpu_threads: Some(2),
        backend: Some(cuzk_common::config::BackendKind::Cpu),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let params = ParamArgs::default().resolve(true).unwrap();
    LocalCluster::start(synth, gpu, params).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refusals_is_answered_but_not_recorded() {
    let cluster = cluster().await;
    let client = &cluster.client;
    let mut answers = client
        .subscribe(results_subject(&job_key(Some("alice"), ">")))
        .await
        .unwrap();
    client.flush().await.unwrap();
    // Bad jobs (an unknown circuit), published as `nats pub` does, all at once.
    let flood = 12;
    for k in 0..flood {
        let bad = support::job(&format!("bad-{k}"), "groth-bogus", json!({}), "");
        let body = serde_json::to_vec(&bad).unwrap();
        let subject = submit_subject(Some("alice"), Priority::Normal);
        client.publish(subject, body.into()).await.unwrap();
    }
    client.flush().await.unwrap();
    let mut answered = HashSet::new();
    while answered.len() < flood {
        let message = tokio::time::timeout(support::TIMEOUT, answers.next())
            .await
            .expect("every refusal is answered")
            .unwrap();
        let result: JobResult = serde_json::from_slice(&message.payload).unwrap();
        assert_eq!(result.status, JobStatus::Failed);
        assert!(result.error.unwrap().contains("groth-bogus"));
        answered.insert(result.job_id);
    }
    let ledger = Ledger::new(&cluster.topology);
    let mut unrecorded = Vec::new();
    for k in 0..flood {
        let id = format!("bad-{k}");
        if ledger
            .get(&job_key(Some("alice"), &id))
            .await
            .unwrap()
            .is_none()
        {
            unrecorded.push(id);
        }
    }
    let recorded = flood - unrecorded.len();
    // The burst, and perhaps one more the allowance earned back meanwhile.
    assert!(
        (LIMIT as usize..=LIMIT as usize + 1).contains(&recorded),
        "{recorded} of {flood} refusals recorded"
    );

    // Bob's allowance is his own: his refusal is recorded (and so holds its id).
    let bad = support::job("bad-0", "groth-bogus", json!({}), "");
    let via = cuzk_cli::submit::Via::Core;
    let result =
        cuzk_cli::submit::submit_and_wait(client, Some("bob"), &bad, via, support::TIMEOUT)
            .await
            .unwrap();
    assert_eq!(result.status, JobStatus::Failed);
    let record = ledger
        .get("bob.bad-0")
        .await
        .unwrap()
        .expect("bob's refusal is recorded");
    assert_eq!(record.tenant.as_deref(), Some("bob"));

    // The flooding tenant's good job still runs, and an unrecorded id may be used again.
    let id = unrecorded.last().expect("some refusals went unrecorded");
    let good = support::job(id, "mimc", json!({"rounds": 64, "partitions": 1}), "x");
    let result = cuzk_cli::submit::submit_and_wait(
        client,
        Some("alice"),
        &good,
        via,
        Duration::from_secs(120),
    )
    .await
    .unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    cluster.stop().await.unwrap();
}
