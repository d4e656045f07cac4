//! The one place that names and provisions the cluster's NATS topology: subjects, streams,
//! consumers, the jobs KV bucket and the object-store buckets. Provisioning is idempotent and
//! works on nats-server 2.9 (which cannot create KV buckets through async-nats) and 2.10+.

use std::time::Duration;

use async_nats::jetstream::{
    self,
    consumer::{pull, AckPolicy, PullConsumer},
    kv,
    object_store::{self, ObjectStore},
    stream::{self, DiscardPolicy, RetentionPolicy, StorageType, Stream},
    Context,
};

use crate::objects::{Shards, MAX_SHARDS};

mod limits;
mod subjects;
pub use limits::{Limits, RECORD_BYTES};
pub use subjects::*;

pub const JOBS_STREAM: &str = "CUZK_JOBS";
pub const WORK_STREAM: &str = "CUZK_WORK";
pub const RESULTS_STREAM: &str = "CUZK_RESULTS";
pub const SYNTH_CONSUMER: &str = "synth";
pub const GPU_HIGH_CONSUMER: &str = "gpu-high";
pub const GPU_NORMAL_CONSUMER: &str = "gpu-normal";
pub const JOBS_BUCKET: &str = "cuzk-jobs";
/// The head bucket of the blobs: every blob's first stripe, and every blob of one stripe.
pub const BLOBS_BUCKET: &str = "cuzk-blobs";
/// Buckets a blob's stripes are spread over, the head bucket included (`objects::Shards`): one
/// bucket's stream is sent from one goroutine of nats-server 2.9, which bounds a one-bucket
/// fetch, and reading several buckets at once scaled with their number (docs/gpu-runs.md, "32
/// GiB with two workers per device" and "Blobs over four buckets").
pub const BLOB_SHARDS: usize = 4;

/// The name of blob bucket `k` of [`BLOB_SHARDS`]: the head, then `cuzk-blobs-1`, … (each named
/// in deploy/nats/auth.conf).
pub fn blob_shard_bucket(k: usize) -> String {
    match k {
        0 => BLOBS_BUCKET.to_owned(),
        k => format!("{BLOBS_BUCKET}-{k}"),
    }
}

/// Blob bucket `k`'s byte limit: an equal share of the operator's `blobs_max_bytes` (the head
/// takes the remainder), so that the limits add up to it — what the servers reserve from
/// `max_file_store`, and what the synth nodes' back-pressure compares the buckets' bytes with
/// ([`blob_fill`]). Equal because every striped blob puts as many bytes into each bucket
/// (common/src/objects/layout.rs); blobs of one stripe (8 MiB or less) all go to the head.
fn blob_shard_max_bytes(total: i64, k: usize) -> i64 {
    let shards = BLOB_SHARDS as i64;
    let share = total / shards + if k == 0 { total % shards } else { 0 };
    // Zero would be no limit at all.
    share.max(1)
}

/// The blob buckets' bytes and limits (`each`) as one: the bytes they hold together — or, where
/// one bucket is fuller than the rest, what they would hold were all as full as it — and their
/// total limit. Blobs spread evenly fill the buckets alike and count as their sum; blobs of one
/// stripe fill the head alone, and counting them four times over holds synthesis back before
/// the head refuses uploads (which fails a job once its deliveries run out).
fn blob_fill(each: &[(u64, u64)]) -> (u64, u64) {
    let bytes = each.iter().fold(0u64, |sum, &(b, _)| sum.saturating_add(b));
    let limit = each.iter().fold(0u64, |sum, &(_, l)| sum.saturating_add(l));
    // A bucket without a limit (u64::MAX) gives no total to scale to.
    if limit == u64::MAX {
        return (bytes, limit);
    }
    let fullest = each
        .iter()
        .map(|&(b, l)| u128::from(b) * u128::from(limit) / u128::from(l.max(1)))
        .max()
        .unwrap_or(0);
    let fullest = u64::try_from(fullest).unwrap_or(u64::MAX);
    (bytes.max(fullest), limit)
}

/// A job's staged input is deleted by whoever ends the job (`lifecycle`).
pub use cuzk_wire::job::{
    inputs_bucket_of, job_key, split_job_key, staged_input_name, valid_inputs_bucket, valid_tenant,
    INPUTS_BUCKET,
};
/// Node heartbeats (see `nodes.rs`): an entry lives `NODES_MAX_AGE` unless its node re-puts it.
pub const NODES_BUCKET: &str = "cuzk-nodes";
pub const NODES_MAX_AGE: Duration = Duration::from_secs(30);

/// Largest job message the jobs stream stores (bigger inputs go through the inputs bucket).
pub const MAX_JOB_MESSAGE: i32 = 1024 * 1024;
/// Blobs are deleted once proved; this only reclaims blobs of jobs abandoned mid-way.
pub const BLOB_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// Results are published with the job id as message id: within this window a second
/// publication of the same job's result is dropped by the server.
pub const RESULTS_DEDUP_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Default redelivery delay after a worker stops acknowledging (crashed, partitioned). Workers
/// send progress acks at a third of it, so long proofs never hit it and a crashed worker's
/// partition returns quickly.
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);
/// Deliveries of one message before it is given up (the job then fails with the reason).
pub const MAX_DELIVER: i64 = 5;

/// Heartbeats: one small entry per node.
const NODES_KV_MAX_BYTES: i64 = 16 << 20;
/// More work items than this cannot wait (a byte limit binds first at a few hundred bytes each).
const WORK_MAX_MESSAGES: i64 = 1_000_000;

#[derive(Debug, thiserror::Error)]
#[error("provisioning {what} failed: {message}")]
pub struct TopologyError {
    pub what: String,
    pub message: String,
}

fn failed(what: impl Into<String>) -> impl FnOnce(String) -> TopologyError {
    let what = what.into();
    move |message| TopologyError { what, message }
}

/// Handles to everything the nodes use.
#[derive(Clone)]
pub struct Topology {
    pub js: Context,
    /// The consumers' ack wait (fixed when a consumer is first created).
    pub ack_wait: Duration,
    pub jobs_kv: kv::Store,
    pub nodes_kv: kv::Store,
    /// The [`BLOB_SHARDS`] blob buckets, [`BLOBS_BUCKET`] first.
    pub blobs: Shards,
    pub inputs: ObjectStore,
    /// The JetStream contexts of the connections the node reads blobs through
    /// ([`Topology::add_blob_connection`], `objects::read_bounded`): `js`'s first.
    pub blob_readers: Vec<Context>,
    /// The blob buckets as opened on each of those connections, to write blobs through
    /// (`objects::put_through`): `blobs` first.
    pub blob_writers: Vec<Shards>,
    /// Job records, results and object deletions go through the ledger service
    /// (`lifecycle::service`) rather than straight to their streams (`--nats-ledger-service`).
    pub ledger_service: bool,
}

async fn ensure_stream(js: &Context, config: stream::Config) -> Result<Stream, TopologyError> {
    let name = config.name.clone();
    js.get_or_create_stream(config)
        .await
        .map_err(|e| failed(format!("stream {name}"))(e.to_string()))
}

/// The results stream. One made by an older cuzk stores results where clients listen, without
/// the republish, and nats-server cannot add a republish to an existing stream: refuse to run on
/// it and say how to replace it (every result also lives in its job's record).
async fn ensure_results_stream(js: &Context, config: stream::Config) -> Result<(), TopologyError> {
    let stream = ensure_stream(js, config.clone()).await?;
    let current = &stream.cached_info().config;
    if current.subjects != config.subjects || current.republish != config.republish {
        return Err(failed(format!("stream {RESULTS_STREAM}"))(format!(
            "it was made by an older cuzk (subjects {:?}, no republish to cuzk.results.>); delete \
             it (`nats stream rm {RESULTS_STREAM}`; results stay in the job records) and run \
             `cuzk provision` as admin",
            current.subjects
        )));
    }
    Ok(())
}

async fn ensure_object_store(
    js: &Context,
    bucket: &str,
    max_age: Duration,
    max_bytes: i64,
    replicas: usize,
) -> Result<ObjectStore, TopologyError> {
    if let Ok(store) = js.get_object_store(bucket).await {
        return Ok(store);
    }
    let config = object_store::Config {
        bucket: bucket.to_owned(),
        max_age,
        max_bytes,
        num_replicas: replicas,
        storage: StorageType::File,
        ..Default::default()
    };
    match js.create_object_store(config).await {
        Ok(store) => Ok(store),
        // Another node may have created it between our two calls.
        Err(create_err) => js
            .get_object_store(bucket)
            .await
            .map_err(|_| failed(format!("object store {bucket}"))(create_err.to_string())),
    }
}

/// Creates (or finds) every stream and bucket. Safe to call from every node at start-up.
pub async fn provision(
    js: &Context,
    replicas: usize,
    ack_wait: Duration,
    limits: Limits,
) -> Result<Topology, TopologyError> {
    limits.check()?;
    if replicas > 1 {
        let version = js.client().server_info().version;
        if !keeps_concurrent_updates(&version) {
            tracing::warn!(
                server = %version,
                "nats-server before 2.9.21 may accept two updates of one record made from the same revision in a replicated bucket, the later overwriting the earlier: the ledger reads each write back and applies it again where it did not stick, but an update still in flight when it looks can be lost (a job never answered). Run nats-server 2.9.21 or later (docs/deploy.md)"
            );
        }
    }
    ensure_stream(
        js,
        stream::Config {
            name: JOBS_STREAM.into(),
            subjects: vec!["cuzk.jobs.>".into()],
            retention: RetentionPolicy::WorkQueue,
            storage: StorageType::File,
            num_replicas: replicas,
            max_message_size: MAX_JOB_MESSAGE,
            max_messages: limits.max_queued_jobs,
            max_bytes: limits.jobs_max_bytes,
            discard: DiscardPolicy::New,
            max_age: limits.retention(),
            ..Default::default()
        },
    )
    .await?;
    ensure_stream(
        js,
        stream::Config {
            name: WORK_STREAM.into(),
            subjects: vec!["cuzk.work.>".into()],
            retention: RetentionPolicy::WorkQueue,
            storage: StorageType::File,
            num_replicas: replicas,
            max_messages: WORK_MAX_MESSAGES,
            max_bytes: limits.work_max_bytes,
            discard: DiscardPolicy::New,
            max_age: BLOB_MAX_AGE,
            ..Default::default()
        },
    )
    .await?;
    ensure_results_stream(
        js,
        stream::Config {
            name: RESULTS_STREAM.into(),
            subjects: vec![format!("{}.>", subjects::LEDGER_RESULTS)],
            republish: Some(stream::Republish {
                source: format!("{}.>", subjects::LEDGER_RESULTS),
                destination: "cuzk.results.>".into(),
                headers_only: false,
            }),
            retention: RetentionPolicy::Limits,
            storage: StorageType::File,
            num_replicas: replicas,
            max_age: limits.retention(),
            max_bytes: limits.results_max_bytes,
            discard: DiscardPolicy::Old,
            duplicate_window: RESULTS_DEDUP_WINDOW,
            ..Default::default()
        },
    )
    .await?;
    let jobs_kv = ensure_records(js, records_config(&limits, replicas)).await?;
    // Heartbeats: only the latest per node, in memory, gone after NODES_MAX_AGE.
    let nodes_kv = ensure_kv(
        js,
        kv_config(NODES_BUCKET, NODES_MAX_AGE, NODES_KV_MAX_BYTES, replicas),
        StorageType::Memory,
    )
    .await?;
    let mut blobs = Vec::with_capacity(BLOB_SHARDS);
    for k in 0..BLOB_SHARDS {
        let bucket = blob_shard_bucket(k);
        let max_bytes = blob_shard_max_bytes(limits.blobs_max_bytes, k);
        let store = ensure_object_store(js, &bucket, BLOB_MAX_AGE, max_bytes, replicas).await?;
        blobs.push((bucket, store));
    }
    let blobs = Shards::named(js, blobs)
        .ok_or_else(|| failed("blob buckets")(format!("{BLOB_SHARDS} is over {MAX_SHARDS}")))?;
    let inputs = ensure_inputs_bucket(js, INPUTS_BUCKET, replicas, limits).await?;
    Ok(Topology {
        js: js.clone(),
        ack_wait,
        jobs_kv,
        nodes_kv,
        blob_writers: vec![blobs.clone()],
        blobs,
        inputs,
        blob_readers: vec![js.clone()],
        ledger_service: false,
    })
}

/// Whether nats-server `version` checks an update's expected revision within the write's
/// consensus (2.9.21 and later), so that of two updates of a replicated record made from the
/// same revision only one is accepted.
pub fn keeps_concurrent_updates(version: &str) -> bool {
    let mut parts = version
        .trim_start_matches('v')
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let v = [(); 3].map(|_| parts.next().unwrap_or(0));
    v >= [2, 9, 21]
}

/// Creates (or finds) an inputs bucket: the shared one, or a submitter's own
/// (`cuzk provision --nats-inputs-bucket cuzk-inputs-<submitter>`).
pub async fn ensure_inputs_bucket(
    js: &Context,
    bucket: &str,
    replicas: usize,
    limits: Limits,
) -> Result<ObjectStore, TopologyError> {
    if !valid_inputs_bucket(bucket) {
        return Err(failed(format!("object store {bucket}"))(format!(
            "not an inputs bucket name ({INPUTS_BUCKET} or {INPUTS_BUCKET}-<submitter>)"
        )));
    }
    let max_age = limits.retention();
    ensure_object_store(js, bucket, max_age, limits.inputs_max_bytes, replicas).await
}

/// An inputs bucket, found (never created) for reading or deleting a job's input: a bucket that
/// does not exist is `NotFound`, like a missing object. An object a server's direct get does not
/// find is looked up on the bucket's leader, as for blobs (`objects::Shards::named`).
pub async fn open_inputs_bucket(
    js: &Context,
    bucket: &str,
) -> Result<Shards, crate::objects::ObjectError> {
    use crate::objects::ObjectError;
    use async_nats::jetstream::context::GetStreamErrorKind;
    use async_nats::jetstream::ErrorCode;
    let unavailable = |e: String| ObjectError::Unavailable {
        name: bucket.to_owned(),
        message: e,
    };
    let stream = format!("OBJ_{bucket}");
    match js.get_stream(&stream).await {
        Ok(_) => {}
        Err(e) => {
            return Err(match e.kind() {
                GetStreamErrorKind::JetStream(j)
                    if j.error_code() == ErrorCode::STREAM_NOT_FOUND =>
                {
                    ObjectError::NotFound(format!("bucket {bucket}"))
                }
                _ => unavailable(e.to_string()),
            })
        }
    }
    let store = js
        .get_object_store(bucket)
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    Ok(inputs_shards(js, bucket, store))
}

/// Inputs bucket `bucket` (opened as `store`) as a set of one whose missing objects are
/// confirmed missing by its stream's leader.
pub fn inputs_shards(js: &Context, bucket: &str, store: ObjectStore) -> Shards {
    Shards::named(js, vec![(bucket.to_owned(), store)]).expect("one bucket is a valid set")
}

/// A KV bucket's backing stream, made exactly as async-nats would make it (by hand because
/// `create_key_value` fails against nats-server 2.9): one message per key, the latest.
fn kv_config(bucket: &str, max_age: Duration, max_bytes: i64, replicas: usize) -> stream::Config {
    stream::Config {
        name: format!("KV_{bucket}"),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        max_age,
        max_bytes,
        storage: StorageType::File,
        num_replicas: replicas,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: DiscardPolicy::New,
        ..Default::default()
    }
}

/// The job records bucket. A full bucket drops its oldest record (discard old) instead of
/// refusing a write: refusing would stop every new job, refusal and cancellation at once, while
/// the oldest record is that of a job that ended long ago. Each job keeps one message, its
/// latest record, rewritten at every step, so the oldest messages are the records least
/// recently written; a live job's record is rewritten as its partitions move, and the sweeper
/// ends one without progress within `--synth-no-progress-timeout` (an hour by default).
/// Sized for [`Limits::retention_days`] of [`Limits::jobs_per_hour`] (at least a day,
/// [`Limits::check`]), the bucket reaches a live record only if the farm ends far more jobs per
/// hour than configured. The age limit removes records of the retention period's end.
pub fn records_config(limits: &Limits, replicas: usize) -> stream::Config {
    stream::Config {
        discard: DiscardPolicy::Old,
        ..kv_config(
            JOBS_BUCKET,
            limits.retention(),
            limits.records_max_bytes(),
            replicas,
        )
    }
}

/// Creates (or finds) the records bucket. One made by an older cuzk refuses writes when full,
/// or is smaller than these limits ask: it is updated in place where this user may, else
/// refused with the way out.
async fn ensure_records(js: &Context, config: stream::Config) -> Result<kv::Store, TopologyError> {
    let stream = ensure_stream(js, config.clone()).await?;
    let current = &stream.cached_info().config;
    let smaller = current.max_bytes >= 0 && current.max_bytes < config.max_bytes;
    if current.discard != DiscardPolicy::Old || smaller {
        let wanted = stream::Config {
            max_bytes: config.max_bytes.max(current.max_bytes),
            ..config.clone()
        };
        if let Err(e) = js.update_stream(&wanted).await {
            return Err(failed(format!("kv bucket {JOBS_BUCKET}"))(format!(
                "it refuses new records when full or holds fewer than these limits ask ({}                  bytes, discard {:?}), and updating it failed ({e}): run `cuzk provision` as admin",
                current.max_bytes, current.discard
            )));
        }
    }
    open_kv(js, JOBS_BUCKET).await
}

async fn ensure_kv(
    js: &Context,
    config: stream::Config,
    storage: StorageType,
) -> Result<kv::Store, TopologyError> {
    let bucket = config.name.trim_start_matches("KV_").to_owned();
    ensure_stream(js, stream::Config { storage, ..config }).await?;
    open_kv(js, &bucket).await
}

async fn open_kv(js: &Context, bucket: &str) -> Result<kv::Store, TopologyError> {
    js.get_key_value(bucket)
        .await
        .map_err(|e| failed(format!("kv bucket {bucket}"))(e.to_string()))
}

async fn ensure_consumer(
    js: &Context,
    stream: &str,
    config: pull::Config,
) -> Result<PullConsumer, TopologyError> {
    let name = config.durable_name.clone().unwrap_or_default();
    let what = format!("consumer {stream}/{name}");
    let stream = js
        .get_stream(stream)
        .await
        .map_err(|e| failed(what.clone())(e.to_string()))?;
    stream
        .get_or_create_consumer(&name, config)
        .await
        .map_err(|e| failed(what)(e.to_string()))
}

fn work_consumer_config(durable: &str, filter: &str, ack_wait: Duration) -> pull::Config {
    pull::Config {
        durable_name: Some(durable.into()),
        filter_subject: filter.into(),
        ack_policy: AckPolicy::Explicit,
        ack_wait,
        max_deliver: MAX_DELIVER,
        // Cluster-wide cap on partitions held by GPU workers; each worker holds at most
        // 1 + prefetch of them.
        max_ack_pending: 1024,
        ..Default::default()
    }
}

impl Topology {
    /// Moves blobs through `js`'s connection too: a striped blob's stripes are read and written
    /// through the connections in turn (`objects::read_bounded`, `objects::put_through`).
    pub async fn add_blob_connection(&mut self, js: Context) -> Result<(), TopologyError> {
        let mut stores = Vec::with_capacity(self.blobs.count());
        for k in 0..self.blobs.count() {
            let bucket = blob_shard_bucket(k);
            let store = js.get_object_store(&bucket).await;
            let store =
                store.map_err(|e| failed(format!("object store {bucket}"))(e.to_string()))?;
            stores.push((bucket, store));
        }
        let shards =
            Shards::named(&js, stores).ok_or_else(|| failed("blob buckets")("none".into()))?;
        self.blob_writers.push(shards);
        self.blob_readers.push(js);
        Ok(())
    }

    /// The synth nodes' shared durable consumer of submitted jobs.
    pub async fn synth_consumer(&self) -> Result<PullConsumer, TopologyError> {
        ensure_consumer(
            &self.js,
            JOBS_STREAM,
            pull::Config {
                durable_name: Some(SYNTH_CONSUMER.into()),
                ack_policy: AckPolicy::Explicit,
                ack_wait: self.ack_wait,
                max_deliver: MAX_DELIVER,
                max_ack_pending: 1024,
                ..Default::default()
            },
        )
        .await
    }

    /// The GPU workers' shared durable consumers, high priority first.
    pub async fn gpu_consumers(&self) -> Result<[PullConsumer; 2], TopologyError> {
        let high = ensure_consumer(
            &self.js,
            WORK_STREAM,
            work_consumer_config(GPU_HIGH_CONSUMER, SUBJECT_WORK_HIGH, self.ack_wait),
        )
        .await?;
        let normal = ensure_consumer(
            &self.js,
            WORK_STREAM,
            work_consumer_config(GPU_NORMAL_CONSUMER, SUBJECT_WORK_NORMAL, self.ack_wait),
        )
        .await?;
        Ok([high, normal])
    }

    /// How often a worker confirms it is still working on a message.
    pub fn progress_interval(&self) -> Duration {
        self.ack_wait / 3
    }

    /// Messages waiting in a stream (published, not yet acknowledged, for work queues).
    pub async fn stream_depth(&self, name: &str) -> Result<u64, TopologyError> {
        Ok(self.stream_info(name).await?.state.messages)
    }

    /// A stream's configuration and state.
    async fn stream_info(&self, name: &str) -> Result<stream::Info, TopologyError> {
        let mut stream = self
            .js
            .get_stream(name)
            .await
            .map_err(|e| failed(format!("stream {name}"))(e.to_string()))?;
        stream
            .info()
            .await
            .cloned()
            .map_err(|e| failed(format!("stream {name} info"))(e.to_string()))
    }

    /// The records bucket's byte limit and how many finished 32 GiB jobs' records it holds
    /// ([`RECORD_BYTES`] each): what `cuzk provision` reports.
    pub async fn records_capacity(&self) -> Result<(u64, u64), TopologyError> {
        let name = format!("KV_{JOBS_BUCKET}");
        let info = self.stream_info(&name).await?;
        let bytes = u64::try_from(info.config.max_bytes).unwrap_or(u64::MAX);
        Ok((bytes, bytes / RECORD_BYTES))
    }

    /// Bytes of witness blobs waiting to be proved (blobs are deleted once proved) over all the
    /// blob buckets, and the most they hold together (see [`blob_fill`]).
    pub async fn queued_blob_bytes(&self) -> Result<(u64, u64), TopologyError> {
        let shards = (0..BLOB_SHARDS).map(|k| self.blob_bucket_bytes(blob_shard_bucket(k)));
        let each = futures::future::try_join_all(shards).await?;
        Ok(blob_fill(&each))
    }

    /// One blob bucket's bytes and byte limit.
    async fn blob_bucket_bytes(&self, bucket: String) -> Result<(u64, u64), TopologyError> {
        let name = format!("OBJ_{bucket}");
        let info = self.stream_info(&name).await?;
        let limit = u64::try_from(info.config.max_bytes).unwrap_or(u64::MAX);
        Ok((info.state.bytes, limit))
    }
}

/// A JetStream context whose API calls and publish acks time out instead of hanging.
pub fn jetstream_context(client: async_nats::Client, timeout: Duration) -> Context {
    jetstream::ContextBuilder::new()
        .timeout(timeout)
        .build(client)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_nats::NatsServer;

    #[test]
    fn servers_that_keep_concurrent_updates_apart_are_told_from_older_ones() {
        for old in ["2.9.10", "2.9.20", "v2.8.4", "2.9", "garbage"] {
            assert!(!keeps_concurrent_updates(old), "{old}");
        }
        for fixed in ["2.9.21", "2.10.0", "2.12.8", "v2.11.3-RC.1", "3.0.0"] {
            assert!(keeps_concurrent_updates(fixed), "{fixed}");
        }
    }

    #[test]
    fn blob_limits_share_the_total() {
        for total in [1, 3, 1 << 30, (16 << 30) + 3] {
            let shares: Vec<i64> = (0..BLOB_SHARDS)
                .map(|k| blob_shard_max_bytes(total, k))
                .collect();
            assert!(shares.iter().all(|&s| s >= 1), "{total}: {shares:?}");
            if total >= BLOB_SHARDS as i64 {
                assert_eq!(shares.iter().sum::<i64>(), total, "{shares:?}");
            }
        }
    }

    /// Even buckets count as their sum; a head fuller than the rest as four of it; buckets
    /// without a limit as their sum.
    #[test]
    fn the_fullest_blob_bucket_counts_for_all() {
        let even = [(10, 100), (10, 100), (10, 100), (10, 100)];
        assert_eq!(blob_fill(&even), (40, 400));
        let head = [(60, 100), (0, 100), (0, 100), (0, 100)];
        assert_eq!(blob_fill(&head), (240, 400));
        let unlimited = [(60, u64::MAX), (5, 100)];
        assert_eq!(blob_fill(&unlimited), (65, u64::MAX));
        assert_eq!(blob_fill(&[]), (0, 0));
    }

    /// A records bucket made by an older cuzk (discard new, 1 GiB) is updated in place to drop
    /// its oldest records and to hold what the limits ask.
    #[tokio::test]
    async fn an_older_records_bucket_is_updated() {
        let server = NatsServer::start().unwrap();
        let client = async_nats::connect(server.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let limits = Limits::local();
        let older = stream::Config {
            discard: DiscardPolicy::New,
            max_bytes: 1 << 20,
            ..records_config(&limits, 1)
        };
        js.create_stream(older).await.unwrap();
        provision(&js, 1, DEFAULT_ACK_WAIT, limits).await.unwrap();
        let mut records = js.get_stream(format!("KV_{JOBS_BUCKET}")).await.unwrap();
        let config = records.info().await.unwrap().config.clone();
        assert_eq!(config.discard, DiscardPolicy::Old);
        assert_eq!(config.max_bytes, limits.records_max_bytes());
    }

    /// A results stream made by an older cuzk (results stored where clients listen) is refused
    /// with the way out (`lifecycle/publish.rs` tests the layout a fresh provisioning makes).
    #[tokio::test]
    async fn an_older_results_stream_is_refused_with_the_fix() {
        let server = NatsServer::start().unwrap();
        let client = async_nats::connect(server.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        js.create_stream(stream::Config {
            name: RESULTS_STREAM.into(),
            subjects: vec!["cuzk.results.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        let err = provision(&js, 1, DEFAULT_ACK_WAIT, Limits::local())
            .await
            .err()
            .expect("an older results stream is refused");
        assert!(err.message.contains("nats stream rm CUZK_RESULTS"), "{err}");
    }
}
