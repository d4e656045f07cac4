//! The ledger with tenants, against a real nats-server: a tenant's job is its id under the
//! tenant (its key, `<tenant>.<job_id>`), so two tenants' `j` are two jobs, each recorded with
//! its tenant and answered on its own results subject; a cancel made of one tenant's id never
//! reaches another's job, running or queued (`unknown`, as an id never submitted); a refusal
//! never deletes an object in another tenant's inputs bucket; a record stored under a key that
//! does not name it is refused; a refusal answered without a record leaves none (and leaves a
//! job that has one alone); a listing of a tenant's jobs holds its own only. What the server
//! enforces on top (who may publish, read and hear what) is `cli/tests/permissions.rs`'s.

use std::time::Duration;

use async_nats::jetstream::{self, Context};
use cuzk_common::lifecycle::{Admission, JobShape, Ledger, RecordError};
use cuzk_common::local_nats::NatsServer;
use cuzk_common::objects;
use cuzk_common::topology::{
    ensure_inputs_bucket, provision, results_subject, submit_subject, Limits, Topology,
    DEFAULT_ACK_WAIT,
};
use cuzk_wire::control::CancelOutcome;
use cuzk_wire::job::{
    inputs_bucket_of, job_key, staged_input_name, unix_ms, JobInput, JobResult, JobSpec, JobStatus,
    Priority, JOB_SPEC_VERSION,
};
use futures::StreamExt;

const SHAPE: JobShape<'static> = JobShape {
    partitions: 2,
    synthetic: false,
    shape_key: "mimc-r4",
};

async fn cluster(server: &NatsServer) -> (async_nats::Client, Context, Topology) {
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topology = provision(&js, 1, DEFAULT_ACK_WAIT, Limits::local())
        .await
        .unwrap();
    for tenant in ["alice", "bob"] {
        let bucket = inputs_bucket_of(Some(tenant));
        ensure_inputs_bucket(&js, &bucket, 1, Limits::local())
            .await
            .unwrap();
    }
    (client, js, topology)
}

fn spec(job_id: &str, input: JobInput) -> JobSpec {
    JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: job_id.into(),
        circuit: "mimc".into(),
        params: serde_json::json!({"rounds": 4, "partitions": 2}),
        input,
        priority: Priority::Normal,
    }
}

/// Publishes `spec` on `tenant`'s submit subject; returns its stream sequence.
async fn submitted(js: &Context, tenant: Option<&str>, spec: &JobSpec) -> u64 {
    let subject = submit_subject(tenant, Priority::Normal);
    let body = serde_json::to_vec(spec).unwrap();
    let ack = js.publish(subject, body.into()).await.unwrap();
    ack.await.unwrap().sequence
}

/// Submits and admits `spec` for `tenant`, as intake does.
async fn admitted(ledger: &Ledger, js: &Context, tenant: Option<&str>, spec: &JobSpec) -> u64 {
    let seq = submitted(js, tenant, spec).await;
    let admission = ledger
        .admit(spec, tenant, SHAPE, seq, unix_ms(), 1)
        .await
        .unwrap();
    assert!(matches!(admission, Admission::New(_)), "{admission:?}");
    seq
}

async fn object_exists(js: &Context, bucket: &str, name: &str) -> bool {
    let store = js.get_object_store(bucket).await.unwrap();
    matches!(store.info(name).await, Ok(info) if !info.deleted)
}

/// The first result heard on `subject` within a few seconds.
async fn heard(sub: &mut async_nats::Subscriber) -> Option<JobResult> {
    let message = tokio::time::timeout(Duration::from_secs(3), sub.next()).await;
    let message = message.ok()??;
    Some(serde_json::from_slice(&message.payload).unwrap())
}

/// Two tenants' `j` are two jobs: each admitted (neither a duplicate of the other), recorded
/// under its tenant, and answered on its tenant's subject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_job_ids_are_its_own() {
    let server = NatsServer::start().unwrap();
    let (client, js, topology) = cluster(&server).await;
    let ledger = Ledger::new(&topology);
    let mut alices = client.subscribe(results_subject("alice.j")).await.unwrap();
    let mut bobs = client.subscribe(results_subject("bob.j")).await.unwrap();
    client.flush().await.unwrap();
    let j = spec("j", JobInput::None);
    admitted(&ledger, &js, Some("alice"), &j).await;
    admitted(&ledger, &js, Some("bob"), &j).await;
    admitted(&ledger, &js, None, &j).await;
    for (key, tenant) in [
        ("alice.j", Some("alice")),
        ("bob.j", Some("bob")),
        ("j", None),
    ] {
        let record = ledger.get(key).await.unwrap().expect(key);
        assert_eq!(
            (record.job_id.as_str(), record.tenant.as_deref()),
            ("j", tenant)
        );
    }
    ledger.fail("alice.j", "alice's failure").await.unwrap();
    let result = heard(&mut alices).await.expect("alice hears her result");
    assert_eq!(
        (result.job_id.as_str(), result.error.as_deref()),
        ("j", Some("alice's failure"))
    );
    assert!(heard(&mut bobs).await.is_none(), "bob heard alice's result");
    let bob = ledger.get("bob.j").await.unwrap().unwrap();
    assert!(!bob.status.is_final(), "{:?}", bob.status);
}

/// A cancel made of alice's request never reaches bob's job of the same id, running or still
/// queued: it is `unknown`, and bob's jobs go on; bob's own cancels them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cancels_its_own_jobs_only() {
    let server = NatsServer::start().unwrap();
    let (_client, js, topology) = cluster(&server).await;
    let ledger = Ledger::new(&topology);
    admitted(&ledger, &js, Some("bob"), &spec("running", JobInput::None)).await;
    submitted(&js, Some("bob"), &spec("queued", JobInput::None)).await;
    for id in ["running", "queued"] {
        let (outcome, record) = ledger
            .cancel(&job_key(Some("alice"), id), "by alice")
            .await
            .unwrap();
        assert_eq!((outcome, record), (CancelOutcome::Unknown, None), "{id}");
    }
    let running = ledger.get("bob.running").await.unwrap().unwrap();
    assert_eq!(running.status, JobStatus::Synthesizing);
    assert!(ledger.get("bob.queued").await.unwrap().is_none());
    for id in ["running", "queued"] {
        let (outcome, record) = ledger
            .cancel(&job_key(Some("bob"), id), "by bob")
            .await
            .unwrap();
        assert_eq!(outcome, CancelOutcome::Cancelled, "{id}");
        assert_eq!(record.unwrap().tenant.as_deref(), Some("bob"));
    }
}

/// A job of alice's naming bob's staged input is refused (intake's check) and its refusal
/// deletes nothing of bob's: only the object named for a job in its own tenant's bucket is its
/// staged input. Bob's own refusal deletes his.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_never_deletes_another_tenants_input() {
    let server = NatsServer::start().unwrap();
    let (_client, js, topology) = cluster(&server).await;
    let ledger = Ledger::new(&topology);
    let bobs = inputs_bucket_of(Some("bob"));
    let name = staged_input_name("j");
    let store = js.get_object_store(&bobs).await.unwrap();
    objects::put(&store, &name, b"bob's C1 output")
        .await
        .unwrap();
    let input = JobInput::ObjectIn {
        bucket: bobs.clone(),
        name: name.clone(),
    };
    let seq = submitted(&js, Some("alice"), &spec("j", input.clone())).await;
    let refused = JobResult::failed("j", "input object in another tenant's bucket");
    ledger
        .refuse(Some("alice"), &refused, seq, unix_ms())
        .await
        .unwrap();
    let record = ledger.get("alice.j").await.unwrap().unwrap();
    assert_eq!(record.staged_input, None);
    assert!(
        object_exists(&js, &bobs, &name).await,
        "bob's input was deleted"
    );

    let seq = submitted(&js, Some("bob"), &spec("j", input)).await;
    ledger
        .refuse(Some("bob"), &refused, seq, unix_ms())
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while object_exists(&js, &bobs, &name).await {
        assert!(
            std::time::Instant::now() < deadline,
            "bob's own refusal kept his input"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A record stored under a tenant's key that names another tenant (or none) is not that job's:
/// reads and writes through the ledger refuse it as corrupt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_under_a_key_that_does_not_name_it_is_refused() {
    let server = NatsServer::start().unwrap();
    let (_client, js, topology) = cluster(&server).await;
    let ledger = Ledger::new(&topology);
    admitted(&ledger, &js, Some("bob"), &spec("j", JobInput::None)).await;
    let mut forged = ledger.get("bob.j").await.unwrap().unwrap();
    forged.tenant = Some("bob".into());
    let body = serde_json::to_vec(&forged).unwrap();
    topology.jobs_kv.put("alice.j", body.into()).await.unwrap();
    assert!(matches!(
        ledger.get("alice.j").await,
        Err(RecordError::Corrupt { .. })
    ));
    assert!(ledger.cancel("alice.j", "by alice").await.is_err());
    let bob = ledger.get("bob.j").await.unwrap().unwrap();
    assert!(!bob.status.is_final());
}

/// Past its refusal limit a tenant's refusal is answered on its subject and leaves no record
/// (the id is not held); a submission whose id has a record is left to it, unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrecorded_refusal_is_answered_without_a_record() {
    let server = NatsServer::start().unwrap();
    let (client, js, topology) = cluster(&server).await;
    let ledger = Ledger::new(&topology);
    let mut answers = client.subscribe(results_subject("alice.>")).await.unwrap();
    client.flush().await.unwrap();
    let seq = submitted(&js, Some("alice"), &spec("bad", JobInput::None)).await;
    let refused = JobResult::failed("bad", "unknown circuit");
    let unrecorded = ledger
        .refuse_unrecorded(Some("alice"), &refused, seq, unix_ms())
        .await
        .unwrap();
    assert!(unrecorded.is_none());
    assert!(ledger.get("alice.bad").await.unwrap().is_none());
    let answer = heard(&mut answers).await.expect("the refusal is answered");
    assert_eq!(answer.error.as_deref(), Some("unknown circuit"));

    let held = spec("held", JobInput::None);
    admitted(&ledger, &js, Some("alice"), &held).await;
    let again = submitted(&js, Some("alice"), &held).await;
    let refused = JobResult::failed("held", "a duplicate refused");
    let settled = ledger
        .refuse_unrecorded(Some("alice"), &refused, again, unix_ms())
        .await
        .unwrap();
    assert!(
        matches!(settled, Some(Admission::Duplicate(_))),
        "{settled:?}"
    );
    assert!(
        heard(&mut answers).await.is_none(),
        "a duplicate was answered"
    );
    let record = ledger.get("alice.held").await.unwrap().unwrap();
    assert!(!record.status.is_final());
}

/// A tenant's listing holds its own jobs only, without results or proofs; the untenanted one
/// holds every job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_listing_holds_its_own_jobs() {
    let server = NatsServer::start().unwrap();
    let (_client, js, topology) = cluster(&server).await;
    let ledger = Ledger::new(&topology);
    for (tenant, id) in [
        (Some("alice"), "a1"),
        (Some("bob"), "b1"),
        (Some("alice"), "a2"),
    ] {
        admitted(&ledger, &js, tenant, &spec(id, JobInput::None)).await;
    }
    admitted(&ledger, &js, None, &spec("u1", JobInput::None)).await;
    ledger.fail("alice.a1", "done with it").await.unwrap();
    let keys = |jobs: &[cuzk_wire::job::JobRecord]| {
        let mut keys: Vec<String> = jobs.iter().map(|r| r.key()).collect();
        keys.sort();
        keys
    };
    let alice = ledger.listing(Some("alice"), 100, 10).await.unwrap();
    assert_eq!(keys(&alice), ["alice.a1", "alice.a2"]);
    assert!(alice.iter().all(|r| r.result.is_none()));
    let every = ledger.listing(None, 100, 10).await.unwrap();
    assert_eq!(keys(&every), ["alice.a1", "alice.a2", "bob.b1", "u1"]);
    assert_eq!(ledger.listing(Some("bob"), 100, 1).await.unwrap().len(), 1);
}
