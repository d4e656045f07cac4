//! Kill anything mid-job and lose nothing. Each test runs the cluster as separate processes
//! (`cuzk synth-node`, `cuzk gpu-node`, nats-server, and `cuzk ledger` where the nodes go
//! through it), injects a fault, and asserts that every submitted job is reported exactly once
//! — counted where clients listen (a plain core subscription to `cuzk.results.>`) and in the
//! durable results stream — that every proof verifies, that the blob bucket ends empty, and,
//! where the fault forces one, that the redelivery happened (the attempt counts in the job
//! records).

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk_circuits::ShapeCache;
use cuzk_cli::launcher::{LaunchSpec, ProcessCluster, Role};
use cuzk_common::config::NatsArgs;
use cuzk_common::lifecycle::Ledger;
use cuzk_common::topology::{
    ledger_results_subject, Topology, RESULTS_STREAM, SUBJECT_SUBMIT, WORK_STREAM,
};
use cuzk_wire::job::{JobInput, JobRecord, JobResult, JobSpec, JobStatus};
use futures::StreamExt;
use serde_json::json;
use support::{blobs_left, job};

const CUZK: &str = env!("CARGO_BIN_EXE_cuzk");
const DEADLINE: Duration = Duration::from_secs(240);

fn spec(servers: usize, synth: usize, gpu: usize) -> LaunchSpec {
    LaunchSpec {
        servers,
        synth_nodes: synth,
        gpu_nodes: gpu,
        threads: 1,
        ack_wait_secs: 3,
        ..Default::default()
    }
}

async fn client_for(cluster: &ProcessCluster) -> (async_nats::Client, Topology) {
    let urls = cluster.servers.iter().map(|s| s.url()).collect();
    let config = NatsArgs {
        urls: Some(urls),
        limits: Some(cuzk_common::config::LimitsProfile::Local),
        replicas: Some(cluster.replicas()),
        ack_wait: Some(cuzk_common::config::Span::secs(3)),
        ..Default::default()
    }
    .resolve("fault-test")
    .unwrap();
    cuzk_cli::connect(&config).await.unwrap()
}

/// Jobs long enough (several partitions of ~40 k constraints) that a fault lands mid-job.
fn good_jobs(prefix: &str, count: usize) -> Vec<JobSpec> {
    (0..count)
        .map(|i| {
            job(
                &format!("{prefix}-{i}"),
                "mimc",
                json!({"rounds": 20000, "partitions": 3}),
                &format!("in-{i}"),
            )
        })
        .collect()
}

/// Results as a client receives them: every message on `cuzk.results.>` on a plain core
/// subscription, counted per job id. The stream deduplicates by message id; this does not.
#[derive(Clone)]
struct Heard(Arc<Mutex<HashMap<String, usize>>>);

impl Heard {
    async fn start(client: &async_nats::Client) -> Heard {
        let mut sub = client.subscribe("cuzk.results.>").await.unwrap();
        client.flush().await.unwrap();
        let heard = Heard(Arc::default());
        let counts = heard.0.clone();
        tokio::spawn(async move {
            while let Some(message) = sub.next().await {
                let id = message
                    .subject
                    .trim_start_matches("cuzk.results.")
                    .to_owned();
                *counts.lock().unwrap().entry(id).or_default() += 1;
            }
        });
        heard
    }

    fn count(&self, job_id: &str) -> usize {
        self.0.lock().unwrap().get(job_id).copied().unwrap_or(0)
    }
}

async fn records(topology: &Topology, jobs: &[JobSpec]) -> Vec<JobRecord> {
    let ledger = Ledger::new(topology);
    let mut records = Vec::new();
    for spec in jobs {
        records.push(ledger.get(&spec.job_id).await.unwrap().expect("a record"));
    }
    records
}

/// Most deliveries any partition of `jobs` took before it was proved.
async fn most_partition_attempts(topology: &Topology, jobs: &[JobSpec]) -> u32 {
    let records = records(topology, jobs).await;
    let attempts = records
        .iter()
        .flat_map(|r| r.partitions.iter().map(|p| p.attempts));
    attempts.max().unwrap_or(0)
}

async fn submit(client: &async_nats::Client, jobs: &[JobSpec]) {
    for spec in jobs {
        client
            .publish(SUBJECT_SUBMIT, serde_json::to_vec(spec).unwrap().into())
            .await
            .unwrap();
    }
    client.flush().await.unwrap();
}

/// Waits until `lines` occurrences of `needle` appear in a node's log.
async fn wait_for_log(cluster: &ProcessCluster, node: &str, needle: &str) {
    let deadline = Instant::now() + DEADLINE;
    while !cluster.log(node).contains(needle) {
        assert!(
            Instant::now() < deadline,
            "{node} never logged {needle:?}:\n{}",
            cluster.log(node)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Results stored per job id in the durable results stream. The test's own client rides out
/// the faults too, so a failed query is retried.
async fn stored_results(topology: &Topology) -> HashMap<String, usize> {
    for _ in 0..20 {
        match try_stored_results(topology).await {
            Ok(counts) => return counts,
            Err(e) => eprintln!("results query failed ({e}); retrying"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the results stream stayed unreachable");
}

async fn try_stored_results(
    topology: &Topology,
) -> Result<HashMap<String, usize>, async_nats::Error> {
    let stream = topology.js.get_stream(RESULTS_STREAM).await?;
    let mut info = stream
        .info_with_subjects(ledger_results_subject(">"))
        .await?;
    let mut counts = HashMap::new();
    while let Some(entry) = info.next().await {
        let (subject, count) = entry?;
        counts.insert(
            subject
                .trim_start_matches(&ledger_results_subject(""))
                .to_owned(),
            count,
        );
    }
    Ok(counts)
}

async fn last_result(topology: &Topology, job_id: &str) -> JobResult {
    let stream = topology.js.get_stream(RESULTS_STREAM).await.unwrap();
    let message = stream
        .get_last_raw_message_by_subject(&ledger_results_subject(job_id))
        .await
        .unwrap();
    serde_json::from_slice(&message.payload).unwrap()
}

/// Every job reported exactly once with the expected outcome; good jobs' proofs verify; no blob
/// is left behind; no node died.
async fn assert_all_reported_once(
    cluster: &mut ProcessCluster,
    topology: &Topology,
    heard: &Heard,
    good: &[JobSpec],
    poison: &[&str],
) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let counts = stored_results(topology).await;
        let done = good
            .iter()
            .map(|j| j.job_id.as_str())
            .chain(poison.iter().copied())
            .all(|id| counts.contains_key(id));
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "jobs missing results after {DEADLINE:?}: have {counts:?}\n{}",
            cluster.log_tails(6000)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Give a late duplicate (a redelivered partition assembling again) the chance to show.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let counts = stored_results(topology).await;
    let cache = ShapeCache::open_default(true).unwrap();
    let ids = good
        .iter()
        .map(|j| j.job_id.as_str())
        .chain(poison.iter().copied());
    for id in ids {
        assert_eq!(heard.count(id), 1, "job {id}: answers heard on its subject");
    }
    for spec in good {
        assert_eq!(
            counts.get(&spec.job_id),
            Some(&1),
            "job {} reported {:?} times",
            spec.job_id,
            counts.get(&spec.job_id)
        );
        let result = last_result(topology, &spec.job_id).await;
        assert_eq!(
            result.status,
            JobStatus::Done,
            "{}: {:?}",
            spec.job_id,
            result.error
        );
        cuzk_cli::verify_job_proof(spec, &result, &cache).unwrap();
    }
    for id in poison {
        assert_eq!(
            counts.get(*id),
            Some(&1),
            "poison job {id} reported {:?} times",
            counts.get(*id)
        );
        assert_eq!(last_result(topology, id).await.status, JobStatus::Failed);
    }
    assert_eq!(blobs_left(topology).await, 0, "blobs left behind");
    if let Err(e) = cluster.all_nodes_running() {
        panic!("a node died: {e}");
    }
}

fn cuzk() -> &'static Path {
    Path::new(CUZK)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_node_killed_mid_partition() {
    let mut cluster = ProcessCluster::start(spec(1, 1, 2), cuzk()).unwrap();
    let (client, topology) = client_for(&cluster).await;
    let heard = Heard::start(&client).await;
    let jobs = good_jobs("gpu-kill", 3);
    submit(&client, &jobs).await;
    // "proving key loaded" is logged right before a worker proves its first partition.
    let victim = cluster.nodes(Role::Gpu)[0].clone();
    wait_for_log(&cluster, &victim, "proving key loaded").await;
    cluster.kill_node(&victim).unwrap();
    assert_all_reported_once(&mut cluster, &topology, &heard, &jobs, &[]).await;
    // The partition the victim was proving came back to the other node.
    let attempts = most_partition_attempts(&topology, &jobs).await;
    assert!(
        attempts >= 2,
        "no partition was redelivered (most attempts {attempts})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synth_node_killed_mid_job() {
    let mut cluster = ProcessCluster::start(
        LaunchSpec {
            synth_args: vec!["--synth-partitions-in-flight".into(), "1".into()],
            ..spec(1, 1, 1)
        },
        cuzk(),
    )
    .unwrap();
    let (client, topology) = client_for(&cluster).await;
    let heard = Heard::start(&client).await;
    let jobs = good_jobs("synth-kill", 2);
    submit(&client, &jobs).await;
    let victim = cluster.nodes(Role::Synth)[0].clone();
    wait_for_log(&cluster, &victim, "partition queued").await;
    cluster.kill_node(&victim).unwrap();
    cluster.add_node(Role::Synth).unwrap();
    assert_all_reported_once(&mut cluster, &topology, &heard, &jobs, &[]).await;
    // The job the victim held was delivered again to its successor, which resumed it.
    let records = records(&topology, &jobs).await;
    let most = records.iter().map(|r| r.intake_attempts).max().unwrap_or(0);
    assert!(
        most >= 2,
        "no job message was redelivered (most deliveries {most})"
    );
}

/// The nodes go through a ledger service, which is killed once a partition is queued and
/// started again a few seconds later: the operations asked meanwhile wait for it (each retried
/// with backoff), and every job is answered once, its blobs deleted by the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_service_killed_mid_run() {
    let launch = LaunchSpec {
        ledger_services: 1,
        ..spec(1, 1, 1)
    };
    let mut cluster = ProcessCluster::start(launch, cuzk()).unwrap();
    let (client, topology) = client_for(&cluster).await;
    let heard = Heard::start(&client).await;
    let jobs = good_jobs("ledger-kill", 3);
    submit(&client, &jobs).await;
    let synth = cluster.nodes(Role::Synth)[0].clone();
    wait_for_log(&cluster, &synth, "partition queued").await;
    let victim = cluster.nodes(Role::Ledger)[0].clone();
    cluster.kill_node(&victim).unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    cluster.add_node(Role::Ledger).unwrap();
    assert_all_reported_once(&mut cluster, &topology, &heard, &jobs, &[]).await;
    let served = cluster.log(&cluster.nodes(Role::Ledger)[0]);
    assert!(
        served.contains("job ended"),
        "the restarted ledger service ended no job:\n{served}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_of_three_killed_mid_run() {
    let mut cluster = ProcessCluster::start(spec(3, 1, 1), cuzk()).unwrap();
    let (client, topology) = client_for(&cluster).await;
    let heard = Heard::start(&client).await;
    let jobs = good_jobs("server-kill", 3);
    submit(&client, &jobs).await;
    let gpu = cluster.nodes(Role::Gpu)[0].clone();
    wait_for_log(&cluster, &gpu, "partition proved").await;
    // The server that leads the work queue's stream, as the servers say.
    let leader = stream_leader(&topology, WORK_STREAM, None).await;
    let index: usize = leader.trim_start_matches('n').parse().unwrap();
    cluster.servers[index].kill();
    // The servers name another leader for it (or the test times out).
    stream_leader(&topology, WORK_STREAM, Some(&leader)).await;
    assert_all_reported_once(&mut cluster, &topology, &heard, &jobs, &[]).await;
}

/// The name of the server leading `stream` (`n0`, `n1`… in `start_cluster`), asked until the
/// cluster names one other than `not`.
async fn stream_leader(topology: &Topology, stream: &str, not: Option<&str>) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let leader = async {
            let mut stream = topology.js.get_stream(stream).await.ok()?;
            stream.info().await.ok()?.cluster.clone()?.leader
        };
        match leader.await {
            Some(leader) if !leader.is_empty() && Some(leader.as_str()) != not => return leader,
            _ => {}
        }
        let other = not.map(|n| format!(" other than {n}")).unwrap_or_default();
        assert!(Instant::now() < deadline, "{stream} has no leader{other}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_server_restarted_mid_run() {
    let mut cluster = ProcessCluster::start(spec(1, 1, 1), cuzk()).unwrap();
    let (client, topology) = client_for(&cluster).await;
    let heard = Heard::start(&client).await;
    let jobs = good_jobs("restart", 3);
    submit(&client, &jobs).await;
    let gpu = cluster.nodes(Role::Gpu)[0].clone();
    wait_for_log(&cluster, &gpu, "partition proved").await;
    cluster.servers[0].kill();
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.servers[0].restart().unwrap();
    assert_all_reported_once(&mut cluster, &topology, &heard, &jobs, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_job_among_good_ones() {
    let mut cluster = ProcessCluster::start(spec(1, 1, 1), cuzk()).unwrap();
    let (client, topology) = client_for(&cluster).await;
    let heard = Heard::start(&client).await;
    let good = good_jobs("healthy", 2);
    let mut poison = job(
        "poison",
        "mimc",
        json!({"rounds": 100, "partitions": 2}),
        "",
    );
    poison.input = JobInput::Object("never-uploaded".into());
    submit(&client, &[good[0].clone(), poison, good[1].clone()]).await;
    assert_all_reported_once(&mut cluster, &topology, &heard, &good, &["poison"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_gpu_node_without_losing_work() {
    let mut cluster = ProcessCluster::start(spec(1, 1, 2), cuzk()).unwrap();
    let (client, topology) = client_for(&cluster).await;
    let heard = Heard::start(&client).await;
    let jobs = good_jobs("drain", 2);
    submit(&client, &jobs).await;
    let victim = cluster.nodes(Role::Gpu)[0].clone();
    wait_for_log(&cluster, &victim, "proving key loaded").await;
    let status = cluster.stop_node(&victim, Duration::from_secs(60)).unwrap();
    assert!(status.success(), "graceful stop exited with {status}");
    assert_all_reported_once(&mut cluster, &topology, &heard, &jobs, &[]).await;
}

/// A partition whose every delivery dies with its worker (simulated here by a "worker" that
/// takes it and never answers) must not hang the job: after the last delivery the job fails
/// with the reason, exactly once, and the message and blob are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_that_kills_every_worker_fails_the_job() {
    use std::sync::Arc;

    use cuzk_common::config::SynthArgs;
    use cuzk_common::local_nats::NatsServer;
    use cuzk_common::nats::pull_one;
    use tokio_util::sync::CancellationToken;

    cuzk_common::telemetry::init_logging();
    let server = NatsServer::start().unwrap();
    let config = NatsArgs {
        urls: Some(vec![server.url()]),
        limits: Some(cuzk_common::config::LimitsProfile::Local),
        ack_wait: Some(cuzk_common::config::Span::secs(3)),
        ..Default::default()
    }
    .resolve("abandon-test")
    .unwrap();
    let topology = cuzk_cli::provision_all(&config).await.unwrap();
    let (_client, synth_topology) = cuzk_cli::connect(&config).await.unwrap();
    let synth = SynthArgs {
        threads: Some(1),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let params = cuzk_common::config::ParamArgs::default()
        .resolve(true)
        .unwrap();
    let synth = Arc::new(
        cuzk_synth_node::SynthNode::new(synth_topology, synth, &params, "synth".into()).unwrap(),
    );
    let shutdown = CancellationToken::new();
    let synth_task = tokio::spawn(synth.run(shutdown.clone()));

    let client = topology.js.client();
    let mut results = client.subscribe("cuzk.results.doomed").await.unwrap();
    submit(
        &client,
        &[job(
            "doomed",
            "mimc",
            json!({"rounds": 50, "partitions": 1}),
            "x",
        )],
    )
    .await;
    let [_, normal] = topology.gpu_consumers().await.unwrap();
    for delivery in 1..=cuzk_common::topology::MAX_DELIVER {
        let message = pull_one(&normal, Duration::from_secs(20)).await.unwrap();
        assert!(message.is_some(), "delivery {delivery} never came");
    }
    // The server notices the exhaustion when it next tries to deliver, i.e. while a worker
    // is waiting for work, as GPU workers always are.
    assert!(
        pull_one(&normal, Duration::from_secs(8))
            .await
            .unwrap()
            .is_none(),
        "a sixth delivery"
    );
    let result = tokio::time::timeout(Duration::from_secs(30), results.next())
        .await
        .expect("failure reported")
        .unwrap();
    let result: JobResult = serde_json::from_slice(&result.payload).unwrap();
    assert_eq!(result.status, JobStatus::Failed);
    assert!(
        result
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("abandoned after 5 deliveries"),
        "{:?}",
        result.error
    );
    assert_eq!(stored_results(&topology).await.get("doomed"), Some(&1));
    assert_eq!(blobs_left(&topology).await, 0);
    let mut work = topology
        .js
        .get_stream(cuzk_common::topology::WORK_STREAM)
        .await
        .unwrap();
    assert_eq!(
        work.info().await.unwrap().state.messages,
        0,
        "the abandoned work item was removed"
    );
    shutdown.cancel();
    synth_task.await.unwrap().unwrap();
}
