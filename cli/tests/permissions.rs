//! The shipped least-privilege config (deploy/nats/auth.conf): each role's credentials can do
//! its job — a whole job runs through synth and GPU nodes connected as `synth` and `gpu`,
//! submitted as `submitter` — and are refused what they must not do.

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use cuzk_common::config::{BackendKind, GpuArgs, NatsArgs, NatsConfig, SynthArgs};
use cuzk_common::local_nats::{free_port, NatsServer};
use cuzk_common::topology::{
    BLOBS_BUCKET, JOBS_STREAM, SUBJECT_SUBMIT, SUBJECT_WORK_NORMAL, SYNTH_CONSUMER, WORK_STREAM,
};
use cuzk_wire::job::JobStatus;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn role(url: &str, user: &str) -> NatsConfig {
    NatsArgs {
        urls: Some(vec![url.to_owned()]),
        user: Some(user.to_owned()),
        password: Some(format!("{user}-secret")),
        inbox_prefix: Some(format!("_INBOX_{user}")),
        timeout_secs: Some(3),
        ..Default::default()
    }
    .resolve(user)
    .unwrap()
}

/// A JetStream context that gives up quickly: a permission violation shows only as a timeout.
async fn quick_js(config: &NatsConfig) -> jetstream::Context {
    let client = cuzk_common::nats::connect(config).await.unwrap();
    jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(2))
        .build(client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_can_do_its_job_and_nothing_else() {
    cuzk_common::telemetry::init_logging();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().unwrap();
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/nats/auth.conf"
    ))
    .unwrap();
    let mut config = shipped
        .replace(
            "/var/lib/cuzk/nats",
            &dir.path().join("store").display().to_string(),
        )
        .replace("127.0.0.1:4222", &format!("127.0.0.1:{port}"));
    for user in ["admin", "submitter", "synth", "gpu"] {
        config = config.replace(
            &format!("$CUZK_{}_PASSWORD", user.to_uppercase()),
            &format!("\"{user}-secret\""),
        );
    }
    let conf = dir.path().join("auth.conf");
    std::fs::write(&conf, config).unwrap();
    let _server = NatsServer::start_config(&conf, port, &dir.path().join("nats.log")).unwrap();
    let url = format!("nats://127.0.0.1:{port}");

    cuzk_cli::provision_all(&role(&url, "admin")).await.unwrap();

    let shutdown = CancellationToken::new();
    let (_synth_client, synth_topology) = cuzk_cli::connect(&role(&url, "synth")).await.unwrap();
    let synth = SynthArgs {
        threads: Some(2),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let params = cuzk_common::config::ParamArgs::default().resolve(true);
    let synth = Arc::new(
        cuzk_synth_node::SynthNode::new(synth_topology, synth, &params, "synth-role".into())
            .unwrap(),
    );
    let synth_task = tokio::spawn(synth.run(shutdown.clone()));
    let (_gpu_client, gpu_topology) = cuzk_cli::connect(&role(&url, "gpu")).await.unwrap();
    let gpu = GpuArgs {
        backend: Some(BackendKind::Cpu),
        cpu_threads: Some(2),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let gpu = Arc::new(
        cuzk_gpu_node::GpuNode::new(gpu_topology, gpu, &params, "gpu-role".into()).unwrap(),
    );
    let gpu_task = tokio::spawn(gpu.run(shutdown.clone()));

    let submitter = cuzk_common::nats::connect(&role(&url, "submitter"))
        .await
        .unwrap();
    let spec = support::job(
        "least-privilege",
        "mimc",
        json!({"rounds": 300, "partitions": 2}),
        "roles",
    );
    let result = cuzk_cli::submit_and_wait(&submitter, &spec, support::TIMEOUT)
        .await
        .unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);

    // A GPU node cannot submit jobs or read the jobs stream.
    let gpu_js = quick_js(&role(&url, "gpu")).await;
    let publish = gpu_js.publish(SUBJECT_SUBMIT, "{}".into()).await;
    assert!(
        publish.is_err() || publish.unwrap().await.is_err(),
        "gpu published a job"
    );
    // Stream info (message counts, for the queue-depth gauge) is allowed; messages are not.
    let jobs = gpu_js.get_stream(JOBS_STREAM).await.unwrap();
    assert!(
        jobs.get_raw_message(1).await.is_err(),
        "gpu read a job message"
    );
    assert!(
        jobs.direct_get(1).await.is_err(),
        "gpu read a job message directly"
    );
    let jobs_consumer = gpu_js
        .get_consumer_from_stream::<jetstream::consumer::pull::Config, _, _>(
            SYNTH_CONSUMER,
            JOBS_STREAM,
        )
        .await;
    assert!(jobs_consumer.is_err(), "gpu reached the synth consumer");

    // A submitter cannot read blobs or enqueue work directly.
    let submitter_js = quick_js(&role(&url, "submitter")).await;
    assert!(
        submitter_js.get_object_store(BLOBS_BUCKET).await.is_err(),
        "submitter opened the blobs bucket"
    );
    let work = submitter_js.publish(SUBJECT_WORK_NORMAL, "x".into()).await;
    assert!(
        work.is_err() || work.unwrap().await.is_err(),
        "submitter enqueued work"
    );

    // Worker roles cannot reshape the topology.
    let synth_js = quick_js(&role(&url, "synth")).await;
    assert!(
        synth_js.delete_stream(WORK_STREAM).await.is_err(),
        "synth deleted the work stream"
    );
    let created = synth_js
        .create_stream(jetstream::stream::Config {
            name: "ROGUE".into(),
            ..Default::default()
        })
        .await;
    assert!(created.is_err(), "synth created a stream");

    // Wrong password: refused at connect.
    let mut wrong = role(&url, "gpu");
    wrong.password = Some("guess".into());
    let refused = async_nats::ConnectOptions::with_user_and_password("gpu".into(), "guess".into())
        .connect(wrong.urls[0].as_str())
        .await;
    assert!(refused.is_err(), "a wrong password connected");

    shutdown.cancel();
    synth_task.await.unwrap().unwrap();
    gpu_task.await.unwrap().unwrap();
}
