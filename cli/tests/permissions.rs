//! The shipped least-privilege users (deploy/nats/accounts.conf, which the shipped servers
//! include): each role's credentials can do its job — a whole job, its input uploaded to the inputs bucket by the submitter, runs
//! through synth and GPU nodes connected as `synth` and `gpu`, and a gateway connected as
//! `gateway` serves Curio's calls (a PoSt job submitted at high priority with its input staged,
//! awaited, cancelled; status; a proving-key preload), a synth node writes a blob striped over
//! the blob buckets and a GPU node reads it through two connections and has it deleted; the
//! workers change records, publish results and delete objects through the ledger service,
//! connected as `ledger` — and are refused what they must not do, on every blob bucket. Every refusal is checked twice: refused under the shipped config, and allowed under
//! a copy that gives every user every subject, so no check passes for another reason (a
//! message that is not there, an API the stream does not offer).
//!
//! The client users are tenants (submitter, priority, gateway): each submits, cancels, reads and
//! lists as itself only. One tenant cannot publish on another's subjects, read another's
//! records or results, list or cancel another's jobs (refused by the server), and what it can
//! send — a job naming another tenant's inputs bucket, a cancel of an id another tenant uses —
//! is refused with the reason or answered `unknown` by the synth node, while the same done for
//! its own jobs works.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::push, stream};
use cuzk_common::config::{BackendKind, GpuArgs, NatsArgs, NatsConfig, SynthArgs};
use cuzk_common::local_nats::{free_port, NatsServer};
use cuzk_common::objects::{self, Shards};
use cuzk_common::topology::{
    blob_shard_bucket, cancel_subject, jobs_subject, ledger_op_subject, ledger_results_subject,
    results_subject, submit_subject, BLOBS_BUCKET, BLOB_SHARDS, GPU_NORMAL_CONSUMER, INPUTS_BUCKET,
    JOBS_BUCKET, JOBS_STREAM, RESULTS_STREAM, SUBJECT_CANCEL, SUBJECT_JOBS, SUBJECT_SRS,
    SUBJECT_SUBMIT, SUBJECT_SUBMIT_HIGH, SUBJECT_WORK_NORMAL, SYNTH_CONSUMER,
};
use cuzk_wire::control::CancelOutcome;
use cuzk_wire::job::{JobInput, JobStatus, Priority};
use futures::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use support::shipped::ROLES as USERS;
/// Each submitter's own inputs bucket, as deploy/nats/accounts.conf names them.
const SUBMITTER_INPUTS: &str = "cuzk-inputs-submitter";
const PRIORITY_INPUTS: &str = "cuzk-inputs-priority";
const GATEWAY_INPUTS: &str = "cuzk-inputs-gateway";

/// The users that are tenants of their own name.
const TENANTS: [&str; 3] = ["submitter", "priority", "gateway"];

fn role(url: &str, user: &str) -> NatsConfig {
    NatsArgs {
        urls: Some(vec![url.to_owned()]),
        limits: Some(cuzk_common::config::LimitsProfile::Local),
        user: Some(user.to_owned()),
        password: Some(format!("{user}-secret").into()),
        inbox_prefix: Some(format!("_INBOX_{user}")),
        timeout: Some(cuzk_common::config::Span::secs(3)),
        tenant: TENANTS.contains(&user).then(|| user.to_owned()),
        // Workers change records, publish results and delete objects through the ledger service.
        ledger_service: Some(matches!(user, "synth" | "gpu")),
        ..Default::default()
    }
    .resolve(user)
    .unwrap()
}

/// A JetStream context that gives up quickly: a permission violation shows only as a timeout.
async fn quick_js(url: &str, user: &str) -> jetstream::Context {
    let client = cuzk_common::nats::connect(&role(url, user)).await.unwrap();
    jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(2))
        .build(client)
}

/// The shipped config with its store, port and passwords made local; `loosened` replaces every
/// user's permissions with all subjects.
fn server(dir: &Path, loosened: bool) -> (NatsServer, String) {
    let port = free_port().unwrap();
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nats");
    let read = |name: &str| std::fs::read_to_string(deploy.join(name)).unwrap();
    // The shipped users on a plaintext loopback server: what is tested is what each may do once
    // logged in (the shipped servers' TLS is tested in secure_server.rs and secure_cluster.rs).
    let store = dir.join("store");
    let mut config = format!(
        "listen: 127.0.0.1:{port}\njetstream {{ store_dir: \"{}\" }}\n{}",
        store.display(),
        read("accounts.conf")
    );
    for user in USERS {
        config = config.replace(
            &format!("$CUZK_{}_PASSWORD", user.to_uppercase()),
            &format!("\"{user}-secret\""),
        );
    }
    if loosened {
        config = loosen(&config);
    }
    let conf = dir.join("auth.conf");
    std::fs::write(&conf, config).unwrap();
    let server = NatsServer::start_config(&conf, port, &dir.join("nats.log")).unwrap();
    (server, format!("nats://127.0.0.1:{port}"))
}

/// Every `permissions: { ... }` block replaced by one allowing everything.
fn loosen(config: &str) -> String {
    let mut out = String::new();
    let mut rest = config;
    while let Some(at) = rest.find("permissions:") {
        out.push_str(&rest[..at]);
        let block = &rest[at..];
        let open = block.find('{').unwrap();
        let mut depth = 0;
        let end = block[open..]
            .char_indices()
            .find_map(|(i, c)| {
                depth += match c {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                (depth == 0).then_some(open + i + 1)
            })
            .unwrap();
        out.push_str(r#"permissions: { publish: ">", subscribe: ">" }"#);
        rest = &block[end..];
    }
    out.push_str(rest);
    assert_ne!(out, config, "nothing was loosened");
    out
}

/// The permission violations the server has logged so far.
fn violations(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|line| line.contains("Violation"))
        .map(str::to_owned)
        .collect()
}

/// What the negative checks act on: a job message waiting in the jobs stream (no synth node
/// runs yet) and a stored result of tenant `priority`'s, at known sequences; and job records of
/// `priority`'s and of the untenanted path (written by the admin as the ledger writes them).
struct Targets {
    job_seq: u64,
    result_seq: u64,
}

/// Another tenant's job the checks reach for, and an untenanted one.
const PRIORITYS_JOB: &str = "priority.target";
const UNTENANTED_JOB: &str = "target";

async fn prepare(url: &str) -> Targets {
    for bucket in [SUBMITTER_INPUTS, PRIORITY_INPUTS, GATEWAY_INPUTS] {
        let admin = NatsConfig {
            inputs_bucket: bucket.into(),
            ..role(url, "admin")
        };
        cuzk_cli::provision_all(&admin).await.unwrap();
    }
    let admin = quick_js(url, "admin").await;
    let records = admin.get_key_value(JOBS_BUCKET).await.unwrap();
    for key in [PRIORITYS_JOB, UNTENANTED_JOB] {
        let (tenant, job_id) = cuzk_wire::job::split_job_key(key);
        let record = json!({
            "job_id": job_id, "tenant": tenant, "circuit": "mimc", "params": {},
            "status": "failed", "submission_seq": 0, "submitted_at_ms": 0,
            "synth_started_at_ms": 0, "updated_at_ms": 0, "partitions": [],
        });
        records.put(key, record.to_string().into()).await.unwrap();
    }
    let job_seq = admin
        .publish(SUBJECT_SUBMIT, "{}".into())
        .await
        .unwrap()
        .await
        .unwrap()
        .sequence;
    let result_seq = admin
        .publish(ledger_results_subject(PRIORITYS_JOB), "{}".into())
        .await
        .unwrap()
        .await
        .unwrap()
        .sequence;
    Targets {
        job_seq,
        result_seq,
    }
}

/// Whether an object put into `bucket` was stored.
async fn uploaded(js: &jetstream::Context, bucket: &str) -> bool {
    match js.get_object_store(bucket).await {
        Ok(store) => store.put("intruder", &mut &b"x"[..]).await.is_ok(),
        Err(_) => false,
    }
}

/// Whether `js`'s role reads the job record under `key`.
async fn reads_record(js: &jetstream::Context, key: &str) -> bool {
    match js.get_key_value(JOBS_BUCKET).await {
        Ok(kv) => matches!(kv.entry(key).await, Ok(Some(_))),
        Err(_) => false,
    }
}

/// Whether `js`'s role reads the job records in stream order (what a listing would need: the
/// filter travels in the request's payload, where permissions cannot see it).
async fn scans_records(js: &jetstream::Context) -> bool {
    match js.get_stream_no_info(format!("KV_{JOBS_BUCKET}")).await {
        Ok(stream) => stream
            .direct_get_next_for_subject(format!("$KV.{JOBS_BUCKET}.>"), Some(1))
            .await
            .is_ok(),
        Err(_) => false,
    }
}

/// Whether the submitter gets any record by a direct get of a key under its own prefix that
/// names another record's sequence in its payload: what a tenant's records permission rests on
/// is that the server reads the subject of such a request only (nats-server 2.9 answers `408
/// Bad Request` to one with a payload).
async fn smuggles_a_record(url: &str) -> bool {
    let mut stream = quick_js(url, "admin")
        .await
        .get_stream(format!("KV_{JOBS_BUCKET}"))
        .await
        .unwrap();
    let last = stream.info().await.unwrap().state.last_sequence;
    assert!(last >= 2, "prepare wrote the records");
    let submitter = client(url, "submitter").await;
    let subject = format!("$JS.API.DIRECT.GET.KV_{JOBS_BUCKET}.$KV.{JOBS_BUCKET}.submitter.x");
    for seq in 1..=last {
        let body = format!("{{\"seq\":{seq}}}");
        let asked = submitter.request(subject.clone(), body.into());
        match tokio::time::timeout(Duration::from_secs(3), asked).await {
            Ok(Ok(reply)) if reply.status.is_none() && !reply.payload.is_empty() => return true,
            _ => {}
        }
    }
    false
}

/// Whether a JetStream publish was stored.
async fn published(js: &jetstream::Context, subject: &str) -> bool {
    match js.publish(subject.to_owned(), "x".into()).await {
        Ok(ack) => ack.await.is_ok(),
        Err(_) => false,
    }
}

/// Whether a core message `from` publishes on `subject` reaches a subscriber of `to`'s: a
/// refused publish or subscription is only logged by the server, so look for the message.
async fn delivered(url: &str, from: &str, to: &str, subject: &str) -> bool {
    let (sender, receiver) = (client(url, from).await, client(url, to).await);
    let mut sub = receiver.subscribe(subject.to_owned()).await.unwrap();
    receiver.flush().await.unwrap();
    // async-nats' flush does not wait for the server: the subscription may be registered after
    // a first publish from the other connection (seen missing on a loaded box), so publish
    // again until one arrives or the wait is over.
    let publishing = async {
        loop {
            let _ = sender.publish(subject.to_owned(), "{}".into()).await;
            let _ = sender.flush().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let arrived = tokio::select! {
        arrived = tokio::time::timeout(Duration::from_secs(3), sub.next()) => arrived,
        never = publishing => never,
    };
    matches!(arrived, Ok(Some(_)))
}

async fn client(url: &str, user: &str) -> async_nats::Client {
    cuzk_common::nats::connect(&role(url, user)).await.unwrap()
}

/// Each check: what a role must not be able to do, and whether it managed to.
async fn negative_checks(url: &str, t: &Targets) -> Vec<(String, bool)> {
    let gpu = quick_js(url, "gpu").await;
    let submitter = quick_js(url, "submitter").await;
    let synth = quick_js(url, "synth").await;
    let gateway = quick_js(url, "gateway").await;
    let stream = |js: &jetstream::Context, name: &str| {
        let (js, name) = (js.clone(), name.to_owned());
        async move { js.get_stream_no_info(name).await.unwrap() }
    };
    let ephemeral_push = |deliver: &str| push::Config {
        deliver_subject: deliver.to_owned(),
        ..Default::default()
    };
    // As `objects::read_bounded` creates them: named, so that the filter is in the subject.
    let named_push = |filter: &str| push::Config {
        name: Some("rogue".into()),
        deliver_subject: "_INBOX_gpu.rogue".into(),
        filter_subject: filter.to_owned(),
        ..Default::default()
    };
    let priority = quick_js(url, "priority").await;
    let checks = vec![
        ("gpu submits a job", published(&gpu, SUBJECT_SUBMIT).await),
        (
            "gpu submits a tenant's job",
            published(&gpu, &submit_subject(Some("submitter"), Priority::Normal)).await,
        ),
        (
            "gpu reads a job message",
            stream(&gpu, JOBS_STREAM)
                .await
                .get_raw_message(t.job_seq)
                .await
                .is_ok(),
        ),
        (
            "gpu uses the synth consumer",
            stream(&gpu, JOBS_STREAM)
                .await
                .consumer_info(SYNTH_CONSUMER)
                .await
                .is_ok(),
        ),
        (
            "gpu creates an unfiltered consumer on the blobs bucket",
            stream(&gpu, &format!("OBJ_{BLOBS_BUCKET}"))
                .await
                .create_consumer(ephemeral_push("_INBOX_gpu.rogue"))
                .await
                .is_ok(),
        ),
        (
            "gpu creates a blobs consumer of object metadata",
            stream(&gpu, &format!("OBJ_{BLOBS_BUCKET}"))
                .await
                .create_consumer(named_push(&format!("$O.{BLOBS_BUCKET}.M.x")))
                .await
                .is_ok(),
        ),
        (
            "gpu creates a chunk consumer on the inputs bucket",
            stream(&gpu, &format!("OBJ_{INPUTS_BUCKET}"))
                .await
                .create_consumer(named_push(&format!("$O.{INPUTS_BUCKET}.C.x")))
                .await
                .is_ok(),
        ),
        (
            "gpu creates a consumer on the results stream",
            stream(&gpu, RESULTS_STREAM)
                .await
                .create_consumer(named_push(&ledger_results_subject("x")))
                .await
                .is_ok(),
        ),
        (
            "submitter opens the blobs bucket",
            submitter.get_object_store(BLOBS_BUCKET).await.is_ok(),
        ),
        (
            "submitter enqueues work",
            published(&submitter, SUBJECT_WORK_NORMAL).await,
        ),
        (
            "submitter publishes a result",
            published(&submitter, &ledger_results_subject("forged")).await,
        ),
        (
            "submitter uploads into another submitter's inputs bucket",
            uploaded(&submitter, PRIORITY_INPUTS).await,
        ),
        (
            "submitter uploads into the shared inputs bucket",
            uploaded(&submitter, INPUTS_BUCKET).await,
        ),
        (
            "submitter submits with high priority",
            published(
                &submitter,
                &submit_subject(Some("submitter"), Priority::High),
            )
            .await,
        ),
        (
            "submitter submits with high priority untenanted",
            published(&submitter, SUBJECT_SUBMIT_HIGH).await,
        ),
        // Tenants: each its own subjects, records and results only.
        (
            "submitter submits as priority",
            published(
                &submitter,
                &submit_subject(Some("priority"), Priority::Normal),
            )
            .await,
        ),
        (
            "submitter submits untenanted",
            published(&submitter, SUBJECT_SUBMIT).await,
        ),
        (
            "priority submits as submitter",
            published(
                &priority,
                &submit_subject(Some("submitter"), Priority::High),
            )
            .await,
        ),
        (
            "submitter reads priority's job record",
            reads_record(&submitter, PRIORITYS_JOB).await,
        ),
        (
            "submitter reads an untenanted job record",
            reads_record(&submitter, UNTENANTED_JOB).await,
        ),
        (
            "submitter reads the job records in stream order",
            scans_records(&submitter).await,
        ),
        (
            "submitter reads priority's stored result",
            stream(&submitter, RESULTS_STREAM)
                .await
                .get_raw_message(t.result_seq)
                .await
                .is_ok(),
        ),
        (
            "submitter hears priority's results",
            delivered(url, "admin", "submitter", &results_subject("priority.x")).await,
        ),
        (
            "submitter hears untenanted results",
            delivered(url, "admin", "submitter", &results_subject("x")).await,
        ),
        (
            "submitter cancels priority's jobs",
            delivered(url, "submitter", "admin", &cancel_subject(Some("priority"))).await,
        ),
        (
            "submitter cancels any job untenanted",
            delivered(url, "submitter", "admin", SUBJECT_CANCEL).await,
        ),
        (
            "submitter lists priority's jobs",
            delivered(url, "submitter", "admin", &jobs_subject(Some("priority"))).await,
        ),
        (
            "submitter lists every job",
            delivered(url, "submitter", "admin", SUBJECT_JOBS).await,
        ),
        (
            "submitter receives priority's cancel requests",
            delivered(url, "admin", "submitter", &cancel_subject(Some("priority"))).await,
        ),
        (
            "gateway reads priority's job record",
            reads_record(&gateway, PRIORITYS_JOB).await,
        ),
        (
            "gateway reads the job records in stream order",
            scans_records(&gateway).await,
        ),
        (
            "gateway reads priority's stored result",
            stream(&gateway, RESULTS_STREAM)
                .await
                .get_raw_message(t.result_seq)
                .await
                .is_ok(),
        ),
        (
            "gateway hears priority's results",
            delivered(url, "admin", "gateway", &results_subject("priority.x")).await,
        ),
        (
            "gateway submits as priority",
            published(&gateway, &submit_subject(Some("priority"), Priority::High)).await,
        ),
        (
            "gpu sends a tenant's cancel request",
            delivered(url, "gpu", "admin", &cancel_subject(Some("submitter"))).await,
        ),
        ("submitter writes a job record", {
            let kv = submitter.get_key_value(JOBS_BUCKET).await.unwrap();
            kv.put("forged", "{}".into()).await.is_ok()
        }),
        (
            // (Into the jobs stream: stored results replayed as job submissions.)
            "synth creates a push consumer delivering results where it likes",
            stream(&synth, RESULTS_STREAM)
                .await
                .create_consumer(ephemeral_push("cuzk.jobs.rogue"))
                .await
                .is_ok(),
        ),
        (
            "synth deletes a stored result",
            stream(&synth, RESULTS_STREAM)
                .await
                .delete_message(t.result_seq)
                .await
                .is_ok(),
        ),
        (
            // Past the results stream's dedup: what a retried publish would do.
            "synth sends a result straight to the clients' subject",
            delivered(url, "synth", "submitter", &results_subject("x")).await,
        ),
        (
            "gpu sends a cancel request",
            delivered(url, "gpu", "admin", SUBJECT_CANCEL).await,
        ),
        (
            "submitter receives cancel requests (and could answer them)",
            delivered(url, "admin", "submitter", SUBJECT_CANCEL).await,
        ),
        (
            "submitter sends proving-key commands",
            delivered(url, "submitter", "admin", SUBJECT_SRS).await,
        ),
        (
            "gateway reads a job message",
            stream(&gateway, JOBS_STREAM)
                .await
                .get_raw_message(t.job_seq)
                .await
                .is_ok(),
        ),
        (
            "gateway uses a GPU consumer",
            stream(&gateway, cuzk_common::topology::WORK_STREAM)
                .await
                .consumer_info(GPU_NORMAL_CONSUMER)
                .await
                .is_ok(),
        ),
        (
            "gateway enqueues work",
            published(&gateway, SUBJECT_WORK_NORMAL).await,
        ),
        (
            "gateway publishes a result",
            published(&gateway, &ledger_results_subject("forged")).await,
        ),
        (
            "gateway sends a result straight to the clients' subject",
            delivered(url, "gateway", "submitter", &results_subject("x")).await,
        ),
        ("gateway writes a job record", {
            let kv = gateway.get_key_value(JOBS_BUCKET).await.unwrap();
            kv.put("forged", "{}".into()).await.is_ok()
        }),
        (
            "gateway receives cancel requests (and could answer them)",
            delivered(url, "admin", "gateway", SUBJECT_CANCEL).await,
        ),
        (
            "gateway receives proving-key commands",
            delivered(url, "admin", "gateway", SUBJECT_SRS).await,
        ),
        (
            "synth creates a stream",
            synth
                .create_stream(stream::Config {
                    name: "ROGUE".into(),
                    ..Default::default()
                })
                .await
                .is_ok(),
        ),
        // Workers change records and publish results only through the ledger service, and ask
        // it only their role's operations.
        ("synth writes a job record", {
            let kv = synth.get_key_value(JOBS_BUCKET).await.unwrap();
            kv.put("forged", "{}".into()).await.is_ok()
        }),
        ("gpu writes a job record", {
            let kv = gpu.get_key_value(JOBS_BUCKET).await.unwrap();
            kv.put("forged", "{}".into()).await.is_ok()
        }),
        (
            "synth publishes a result",
            published(&synth, &ledger_results_subject("forged")).await,
        ),
        (
            "gpu publishes a result",
            published(&gpu, &ledger_results_subject("forged")).await,
        ),
        (
            "gpu asks the ledger service to end a job",
            delivered(url, "gpu", "ledger", &ledger_op_subject("finish")).await,
        ),
        (
            "gpu asks the ledger service to admit a job",
            delivered(url, "gpu", "ledger", &ledger_op_subject("admit")).await,
        ),
        (
            "gateway asks the ledger service to cancel a job",
            delivered(url, "gateway", "ledger", &ledger_op_subject("cancel")).await,
        ),
        (
            "submitter asks the ledger service to delete a blob",
            delivered(
                url,
                "submitter",
                "ledger",
                &ledger_op_subject("delete_blob"),
            )
            .await,
        ),
        (
            "synth receives the ledger service's requests (and could answer them)",
            delivered(url, "gpu", "synth", &ledger_op_subject("proved")).await,
        ),
    ];
    let mut checks: Vec<(String, bool)> = checks
        .into_iter()
        .map(|(check, allowed)| (check.to_owned(), allowed))
        .collect();
    // The head bucket's checks above, on each of the other blob buckets: each is named in
    // accounts.conf on its own. At once, since a refusal shows only as a timeout.
    let shards: Vec<String> = (1..BLOB_SHARDS).map(blob_shard_bucket).collect();
    let (gpu_js, submitter_js, gateway_js) = (&gpu, &submitter, &gateway);
    let (stream_of, named, ephemeral) = (&stream, &named_push, &ephemeral_push);
    let shard_checks = shards.iter().map(|bucket| async move {
        let on = format!("OBJ_{bucket}");
        let (unfiltered, metadata, opened) = tokio::join!(
            async {
                let stream = stream_of(gpu_js, &on).await;
                stream
                    .create_consumer(ephemeral("_INBOX_gpu.rogue"))
                    .await
                    .is_ok()
            },
            async {
                let stream = stream_of(gpu_js, &on).await;
                let consumer = named(&format!("$O.{bucket}.M.x"));
                stream.create_consumer(consumer).await.is_ok()
            },
            async { submitter_js.get_object_store(bucket).await.is_ok() },
        );
        [
            (
                format!("gpu creates an unfiltered consumer on {bucket}"),
                unfiltered,
            ),
            (
                format!("gpu creates a {bucket} consumer of object metadata"),
                metadata,
            ),
            (format!("submitter opens {bucket}"), opened),
        ]
    });
    checks.extend(
        futures::future::join_all(shard_checks)
            .await
            .into_iter()
            .flatten(),
    );
    // Destructive ones last: under the loosened config they succeed.
    let purges = shards.iter().map(|bucket| async move {
        let stream = stream_of(gateway_js, &format!("OBJ_{bucket}")).await;
        (
            format!("gateway purges {bucket}"),
            stream.purge().await.is_ok(),
        )
    });
    checks.extend(futures::future::join_all(purges).await);
    checks.push((
        "gpu purges the job records".into(),
        stream(&gpu, &format!("KV_{JOBS_BUCKET}"))
            .await
            .purge()
            .await
            .is_ok(),
    ));
    checks.push((
        "gpu purges the results".into(),
        stream(&gpu, RESULTS_STREAM).await.purge().await.is_ok(),
    ));
    // A worker deletes nothing itself: the ledger service deletes what a job no longer needs.
    for (user, js) in [("synth", &synth), ("gpu", &gpu)] {
        for bucket in [BLOBS_BUCKET, INPUTS_BUCKET, SUBMITTER_INPUTS] {
            checks.push((
                format!("{user} purges {bucket}"),
                stream(js, &format!("OBJ_{bucket}"))
                    .await
                    .purge()
                    .await
                    .is_ok(),
            ));
        }
    }
    checks.push((
        "gateway purges the blobs bucket".into(),
        stream(&gateway, &format!("OBJ_{BLOBS_BUCKET}"))
            .await
            .purge()
            .await
            .is_ok(),
    ));
    // Synth and GPU nodes delete an ended job's staged input (a purge of its chunks), but
    // write no input.
    checks.push((
        "synth uploads into the inputs bucket".into(),
        uploaded(&synth, INPUTS_BUCKET).await,
    ));
    checks.push((
        "synth deletes the work stream".into(),
        synth
            .delete_stream(cuzk_common::topology::WORK_STREAM)
            .await
            .is_ok(),
    ));
    checks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_can_do_its_job_and_nothing_else() {
    cuzk_common::telemetry::init_logging();
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = server(dir.path(), false);
    let targets = prepare(&url).await;
    for (check, allowed) in negative_checks(&url, &targets).await {
        assert!(!allowed, "shipped config: {check}");
    }
    assert!(
        !smuggles_a_record(&url).await,
        "a tenant read another's record through its own prefix"
    );

    // From here on nothing may be refused: what the nodes do in the background (heartbeats,
    // the sweeper, queue depths) included.
    let log = dir.path().join("nats.log");
    let refusals_before = violations(&log);
    assert!(
        !refusals_before.is_empty(),
        "the server logs the refusals above"
    );
    let shutdown = CancellationToken::new();
    let (_ledger_client, ledger_topology) = cuzk_cli::connect(&role(&url, "ledger")).await.unwrap();
    let ledger_task = tokio::spawn(cuzk_common::lifecycle::service::serve(
        ledger_topology,
        shutdown.clone(),
    ));
    let (_synth_client, synth_topology) = cuzk_cli::connect(&role(&url, "synth")).await.unwrap();
    let synth = SynthArgs {
        threads: Some(2),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let params = cuzk_common::config::ParamArgs::default()
        .resolve(true)
        .unwrap();
    let synth = Arc::new(
        cuzk_synth_node::SynthNode::new(synth_topology, synth, &params, "synth-role".into())
            .unwrap(),
    );
    let synth_task = tokio::spawn(synth.run(shutdown.clone()));
    let submitter = cuzk_common::nats::connect(&role(&url, "submitter"))
        .await
        .unwrap();
    let priority = cuzk_common::nats::connect(&role(&url, "priority"))
        .await
        .unwrap();
    let via = cuzk_cli::submit::Via::JetStream;

    // Before any GPU node runs, priority's job is admitted and waits for one. The submitter
    // cannot reach it: its cancel of that id is of its own (unknown) job, its listing does not
    // show it; priority's listing does.
    let victim = support::job(
        "victim",
        "mimc",
        json!({"rounds": 300, "partitions": 2}),
        "v",
    );
    let running = tokio::spawn({
        let (priority, victim) = (priority.clone(), victim.clone());
        async move {
            let tenant = Some("priority");
            cuzk_cli::submit::submit_and_wait(&priority, tenant, &victim, via, support::TIMEOUT)
                .await
        }
    });
    let priority_records = own_records(&priority).await;
    while priority_records
        .get("priority.victim")
        .await
        .unwrap()
        .is_none()
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reply = cuzk_cli::cancel::cancel(&submitter, Some("submitter"), "victim", LISTED)
        .await
        .expect("a synth node answers the submitter's cancel request");
    assert_eq!(reply.outcome, CancelOutcome::Unknown, "{reply:?}");
    let listed = cuzk_cli::status::listing(&priority, Some("priority"), LISTED)
        .await
        .unwrap();
    // (With the record `prepare` wrote for it.)
    assert_eq!(keys(&listed), ["priority.victim", PRIORITYS_JOB]);
    let listed = cuzk_cli::status::listing(&submitter, Some("submitter"), LISTED)
        .await
        .unwrap();
    assert!(listed.is_empty(), "{:?}", keys(&listed));

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
    let result = running.await.unwrap().unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);

    // The submitter uploads the input to its bucket and submits through JetStream, waiting.
    let js = jetstream::new(submitter.clone());
    let inputs = js.get_object_store(SUBMITTER_INPUTS).await.unwrap();
    inputs
        .put("roles-input", &mut &b"roles"[..])
        .await
        .expect("the submitter uploads inputs");
    let mut spec = support::job(
        "least-privilege",
        "mimc",
        json!({"rounds": 300, "partitions": 2}),
        "",
    );
    spec.input = JobInput::ObjectIn {
        bucket: SUBMITTER_INPUTS.into(),
        name: "roles-input".into(),
    };
    let tenant = Some("submitter");
    let result =
        cuzk_cli::submit::submit_and_wait(&submitter, tenant, &spec, via, support::TIMEOUT)
            .await
            .unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    // High priority, for the priority role: under the same job id, its own job (a tenant's
    // ids are its own), not a duplicate of the submitter's.
    spec.priority = Priority::High;
    spec.input = JobInput::Utf8("priority".into());
    let result = cuzk_cli::submit::submit_and_wait(
        &priority,
        Some("priority"),
        &spec,
        via,
        support::TIMEOUT,
    )
    .await
    .unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    // Each reads its own record, which names it.
    let record = own_records(&submitter)
        .await
        .get("submitter.least-privilege")
        .await
        .unwrap()
        .expect("the submitter reads its record");
    assert_eq!(record.tenant.as_deref(), Some("submitter"));
    let record = priority_records
        .get("priority.least-privilege")
        .await
        .unwrap();
    assert_eq!(record.unwrap().tenant.as_deref(), Some("priority"));
    // A submitter cancels (a synth node answers on the submitter's inbox): its job has ended.
    let reply = cuzk_cli::cancel::cancel(&submitter, tenant, "least-privilege", LISTED)
        .await
        .expect("a synth node answers the cancel request");
    assert_eq!(
        (reply.outcome, reply.status),
        (CancelOutcome::AlreadyEnded, Some(JobStatus::Done))
    );
    let listed = cuzk_cli::status::listing(&submitter, tenant, LISTED)
        .await
        .unwrap();
    assert_eq!(keys(&listed), ["submitter.least-privilege"]);

    // A job naming another tenant's inputs bucket is refused with the reason, before a read:
    // priority's staged object is neither proved nor deleted.
    let priority_js = jetstream::new(priority.clone());
    let theirs = priority_js.get_object_store(PRIORITY_INPUTS).await.unwrap();
    theirs
        .put("stolen.input", &mut &b"priority's"[..])
        .await
        .unwrap();
    let mut stolen = support::job(
        "stolen",
        "mimc",
        json!({"rounds": 300, "partitions": 2}),
        "",
    );
    stolen.input = JobInput::ObjectIn {
        bucket: PRIORITY_INPUTS.into(),
        name: "stolen.input".into(),
    };
    let result =
        cuzk_cli::submit::submit_and_wait(&submitter, tenant, &stolen, via, support::TIMEOUT)
            .await
            .unwrap();
    assert_eq!(result.status, JobStatus::Failed);
    let error = result.error.unwrap_or_default();
    assert!(
        error.contains("may name only its own inputs bucket, cuzk-inputs-submitter"),
        "{error}"
    );
    let info = theirs.info("stolen.input").await.unwrap();
    assert!(!info.deleted, "another tenant's staged input was deleted");

    gateway_serves_curio(&url).await;
    gpu_reads_a_striped_blob(&url).await;

    let refused = &violations(&log)[refusals_before.len()..];
    assert!(
        refused.is_empty(),
        "the server refused the roles' own work: {refused:#?}"
    );

    // Wrong password: refused at connect; the right one connects (the check's control).
    for (password, admitted) in [("guess", false), ("gpu-secret", true)] {
        let connected =
            async_nats::ConnectOptions::with_user_and_password("gpu".into(), password.into())
                .connect(url.as_str())
                .await;
        assert_eq!(connected.is_ok(), admitted, "password {password}");
    }
    shutdown.cancel();
    synth_task.await.unwrap().unwrap();
    gpu_task.await.unwrap().unwrap();
    ledger_task.await.unwrap().unwrap();
}

/// How long a control request may wait for its answer here.
const LISTED: Duration = Duration::from_secs(5);

/// The job records a client role reads: its own, one by one.
async fn own_records(client: &async_nats::Client) -> cuzk_common::lifecycle::Ledger {
    let js = jetstream::new(client.clone());
    let kv = js.get_key_value(JOBS_BUCKET).await.unwrap();
    cuzk_common::lifecycle::Ledger::open(js, kv)
}

fn keys(records: &[cuzk_wire::job::JobRecord]) -> Vec<String> {
    records.iter().map(|r| r.key()).collect()
}

/// The blob buckets as `js`'s role finds them (as a node's topology does).
async fn blob_buckets(js: &jetstream::Context) -> Shards {
    let mut stores = Vec::new();
    for k in 0..BLOB_SHARDS {
        stores.push(js.get_object_store(blob_shard_bucket(k)).await.unwrap());
    }
    Shards::new(stores).unwrap()
}

/// A blob written as a synth node writes it, large enough to put a stripe into every blob
/// bucket, read back as a GPU node reads it: through two connections as `gpu`, each stripe
/// through an ordered consumer of its own on its bucket; then deleted from every bucket by the
/// ledger service at the GPU node's request, as a proved partition's blob is (its job has no
/// record: nothing needs it).
async fn gpu_reads_a_striped_blob(url: &str) {
    const BLOB: &str = "roles-striped/1/0";
    let synth = quick_js(url, "synth").await;
    let bytes: Vec<u8> = (0..2 * objects::STRIPE_BYTES + 1)
        .map(|i| (i % 251) as u8)
        .collect();
    objects::put(&blob_buckets(&synth).await, BLOB, &bytes)
        .await
        .expect("the synth role writes a striped blob");
    let gpu = role(url, "gpu");
    let mut readers = Vec::new();
    for _ in 0..2 {
        let client = cuzk_common::nats::connect(&gpu).await.unwrap();
        let js = cuzk_common::topology::jetstream_context(client, gpu.timeout);
        readers.push(js);
    }
    let shards = blob_buckets(&readers[0]).await;
    let stripe = |k: usize| match k {
        0 => BLOB.to_owned(),
        k => format!("{BLOB}.stripe{k}"),
    };
    // A deleted object's info is its tombstone.
    let stored = |bucket: &jetstream::object_store::ObjectStore, k: usize| {
        let (bucket, name) = (bucket.clone(), stripe(k));
        async move { bucket.info(name).await.is_ok_and(|info| !info.deleted) }
    };
    for (k, bucket) in shards.iter().enumerate() {
        assert!(
            stored(bucket, k).await,
            "stripe {k} is not in blob bucket {k}"
        );
    }
    let read = objects::read_bounded(&shards, &readers, BLOB, bytes.len() as u64);
    let back = read.await.expect("the gpu role reads a striped blob");
    assert!(back == bytes, "the striped blob read back differs");
    let (_client, topology) = cuzk_cli::connect(&gpu).await.unwrap();
    cuzk_common::lifecycle::Ledger::new(&topology)
        .delete_blob(BLOB)
        .await
        .expect("the ledger service deletes a striped blob for the gpu role");
    for (k, bucket) in shards.iter().enumerate() {
        assert!(
            !stored(bucket, k).await,
            "stripe {k} is left in blob bucket {k}"
        );
    }
}

/// A gateway connected as `gateway`, called as Curio calls it (the service in process: the
/// NATS side is what the permissions decide): a WindowPoSt request without a priority goes to
/// its tenant's high-priority subject with its input staged in its inputs bucket, its result
/// (failed: the vanilla proofs are not proofs) is awaited, the ended job's cancel is answered,
/// the cluster's status is read — its own jobs only: the other tenants' done jobs are not
/// counted — and a proving-key preload reaches the GPU node and is answered.
async fn gateway_serves_curio(url: &str) {
    use cuzk_gateway::proto::proving_engine_server::ProvingEngine;
    use cuzk_gateway::proto::{self, await_proof_response::Status};
    use tonic::Request;

    let (connection, topology) = cuzk_cli::connect(&role(url, "gateway")).await.unwrap();
    let timeout = Duration::from_secs(5);
    let bucket = GATEWAY_INPUTS.to_owned();
    let tenant = Some("gateway".to_owned());
    let cluster =
        cuzk_cli::gateway::NatsCluster::new(connection, topology, timeout, bucket, tenant);
    let config = cuzk_common::config::GatewayArgs::default()
        .resolve()
        .unwrap();
    let access = cuzk_gateway::Access::open();
    let gateway = cuzk_gateway::Gateway::new(Arc::new(cluster), config, access);

    let admin = client(url, "admin").await;
    let mut high = admin
        .subscribe(submit_subject(Some("gateway"), Priority::High))
        .await
        .unwrap();
    admin.flush().await.unwrap();
    let request = proto::SubmitProofRequest {
        request_id: "wdpost-roles".into(),
        proof_kind: proto::ProofKind::WindowPostPartition as i32,
        registered_proof: 10,
        miner_id: 1234,
        randomness: vec![1; 32].into(),
        // Over what a job message carries inline: staged in the inputs bucket.
        vanilla_proofs: vec![vec![7u8; 420 << 10].into(); 2],
        ..Default::default()
    };
    let job_id = gateway
        .submit_proof(Request::new(request))
        .await
        .expect("the gateway role submits")
        .into_inner()
        .job_id;
    let submitted = tokio::time::timeout(support::TIMEOUT, high.next())
        .await
        .expect("the PoSt job arrives on the high-priority subject")
        .unwrap();
    let spec: cuzk_wire::job::JobSpec = serde_json::from_slice(&submitted.payload).unwrap();
    assert_eq!(
        (spec.job_id.as_str(), spec.priority),
        (job_id.as_str(), Priority::High)
    );
    let staged = JobInput::ObjectIn {
        bucket: GATEWAY_INPUTS.into(),
        name: format!("{job_id}.input"),
    };
    assert_eq!(spec.input, staged);

    let awaited = proto::AwaitProofRequest {
        job_id: job_id.clone(),
        timeout_ms: support::TIMEOUT.as_millis() as u64,
    };
    let reply = gateway
        .await_proof(Request::new(awaited))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.status(), Status::Failed, "{}", reply.error_message);
    let cancel = proto::CancelProofRequest {
        job_id: job_id.clone(),
    };
    let cancelled = gateway.cancel_proof(Request::new(cancel)).await.unwrap();
    assert!(!cancelled.into_inner().was_running);
    let status = gateway
        .get_status(Request::new(proto::GetStatusRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.gpus.len(), 1, "{status:?}");
    assert_eq!(
        (status.total_proofs_failed, status.total_proofs_completed),
        (1, 0),
        "{status:?}"
    );

    let circuit_id = json!({"circuit": "mimc", "params": {"rounds": 300, "partitions": 2}});
    let preload = proto::PreloadSrsRequest {
        circuit_id: circuit_id.to_string(),
    };
    let loaded = gateway.preload_srs(Request::new(preload)).await.unwrap();
    // The job above loaded the key: the GPU node had it.
    assert!(loaded.into_inner().already_loaded);
}

/// The same checks against a copy of the config that allows everyone everything: each one
/// now succeeds, so each refusal above is the config's doing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_turns_into_success_under_a_loosened_config() {
    cuzk_common::telemetry::init_logging();
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = server(dir.path(), true);
    let targets = prepare(&url).await;
    for (check, allowed) in negative_checks(&url, &targets).await {
        assert!(allowed, "loosened config: {check} was still refused");
    }
}
