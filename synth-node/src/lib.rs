//! The synth node: takes submitted jobs from the jobs stream, synthesizes each partition on a
//! bounded rayon pool, and publishes every partition's witness blob and work item as soon as
//! that partition is done.

mod abandoned;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::PullConsumer, message::PublishMessage, AckKind};
use base64::Engine;
use cuzk_circuits::{CircuitFamily, CircuitSpec, ShapeCache};
use cuzk_common::config::{ParamConfig, SynthConfig};
use cuzk_common::metrics::{metrics, JobLabels, KeyValue};
use cuzk_common::nats::{ms, progress_ticker, pull_one, retry, RetryPolicy};
use cuzk_common::nodes::{self, NodeInfo, NodeLoad};
use cuzk_common::objects;
use cuzk_common::records;
use cuzk_common::telemetry;
use cuzk_common::topology::{
    self, Topology, MAX_DELIVER, SUBJECT_RESULTS_MALFORMED, SUBJECT_WORK_HIGH, SUBJECT_WORK_NORMAL,
};
use cuzk_wire::blob::{self, BlobHeaderInfo, EncodeOptions};
use cuzk_wire::job::{
    unix_ms, JobInput, JobRecord, JobResult, JobSpec, JobStatus, PartitionRecord, PartitionStatus,
    PartitionTimings, Priority, WorkItem, JOB_ID_HEADER, WORK_ITEM_VERSION,
};
use cuzk_wire::Retryable;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, info_span, warn, Instrument};

/// Largest job input accepted through the inputs object store.
pub const MAX_OBJECT_INPUT: u64 = 4 << 30;

/// How one job attempt ended, when it did not simply succeed.
#[derive(Debug, thiserror::Error)]
enum JobError {
    /// The job can never succeed: it is reported failed.
    #[error("{0}")]
    Fatal(String),
    /// A transient condition: the job message is handed back and retried.
    #[error("{0}")]
    Retry(String),
    /// Another submission with this job id exists; the original stands.
    #[error("duplicate submission")]
    Duplicate,
    /// The node is stopping; the job is handed back for another node to resume.
    #[error("shutting down")]
    Shutdown,
}

impl<E: Retryable> From<E> for JobError {
    fn from(e: E) -> Self {
        if e.retryable() {
            JobError::Retry(e.to_string())
        } else {
            JobError::Fatal(e.to_string())
        }
    }
}

pub struct SynthNode {
    topology: Topology,
    config: SynthConfig,
    allow_synthetic: bool,
    /// Shape identities (the matrices' hash, stamped on every blob) and variable counts.
    shapes: Arc<ShapeCache>,
    pool: Arc<rayon::ThreadPool>,
    partitions: Arc<Semaphore>,
    name: String,
    load: Arc<NodeLoad>,
}

/// What every partition task of one job shares.
struct JobContext {
    spec: JobSpec,
    circuit: Arc<dyn CircuitFamily>,
    labels: JobLabels,
    input: Arc<Vec<u8>>,
    submission_seq: u64,
    cancel: CancellationToken,
}

impl SynthNode {
    pub fn new(
        topology: Topology,
        config: SynthConfig,
        params: &ParamConfig,
        name: String,
    ) -> anyhow::Result<SynthNode> {
        let dir = match &params.cache {
            Some(dir) => dir.clone(),
            None => ShapeCache::default_dir()?,
        };
        // Synth nodes never load parameters: no host key budget, no test parameters.
        let shapes = Arc::new(ShapeCache::new(dir, false, 0));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads)
            .thread_name(|i| format!("synth-{i}"))
            .build()?;
        Ok(SynthNode {
            partitions: Arc::new(Semaphore::new(config.partitions_in_flight)),
            shapes,
            allow_synthetic: params.allow_synthetic,
            topology,
            config,
            pool: Arc::new(pool),
            name,
            load: Arc::default(),
        })
    }

    /// Pulls and processes jobs until `shutdown`; in-flight jobs are then handed back.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        let consumer = self.topology.synth_consumer().await?;
        let jobs = Arc::new(Semaphore::new(self.config.jobs_in_flight));
        let mut tasks = JoinSet::new();
        let heartbeat =
            NodeInfo::starting(&self.name, "synth", "cpu", 0, self.config.threads as u32);
        let heartbeat = tokio::spawn(nodes::heartbeat(
            self.topology.clone(),
            heartbeat,
            self.load.clone(),
            shutdown.clone(),
        ));
        let abandoned = tokio::spawn(abandoned::watch(self.topology.clone(), shutdown.clone()));
        cuzk_common::metrics::set_ready(true);
        info!(node = %self.name, config = ?self.config, "synth node started");
        loop {
            let permit = tokio::select! {
                _ = shutdown.cancelled() => break,
                permit = jobs.clone().acquire_owned() => permit?,
            };
            let message = tokio::select! {
                _ = shutdown.cancelled() => break,
                message = next_message(&consumer) => message,
            };
            match message {
                Ok(Some(message)) => {
                    let node = self.clone();
                    let cancel = shutdown.child_token();
                    tasks.spawn(async move {
                        node.handle(message, cancel).await;
                        drop(permit);
                    });
                }
                Ok(None) => {}
                Err(e) => {
                    warn!(err = %e, "pulling jobs failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            while tasks.try_join_next().is_some() {}
        }
        cuzk_common::metrics::set_ready(false);
        info!(
            in_flight = tasks.len(),
            "synth node stopping; handing back in-flight jobs"
        );
        while tasks.join_next().await.is_some() {}
        let _ = heartbeat.await;
        let _ = abandoned.await;
        Ok(())
    }

    async fn handle(self: Arc<Self>, message: jetstream::Message, cancel: CancellationToken) {
        let (seq, delivered, published_ms) = match message.info() {
            Ok(info) => (
                info.stream_sequence,
                info.delivered,
                (info.published.unix_timestamp_nanos() / 1_000_000) as u64,
            ),
            Err(e) => {
                warn!(err = %e, "job message without JetStream metadata; dropping");
                return;
            }
        };
        let message = Arc::new(message);
        let ticker = tokio::spawn(progress_ticker(
            message.clone(),
            self.topology.progress_interval(),
        ));
        let header_id = message
            .headers
            .as_ref()
            .and_then(|h| h.get(JOB_ID_HEADER))
            .map(|v| v.as_str().to_owned())
            .filter(|id| cuzk_wire::job::valid_job_id(id));
        let mut job_id = header_id.clone();
        // The job's span on this node (OpenTelemetry's messaging `process` span); a
        // submitter's `traceparent` header makes it part of the caller's trace, otherwise it
        // is the root of the job's trace.
        let span = telemetry::process_span(&message);
        telemetry::set_parent(&span, message.headers.as_ref());
        if let Some(id) = &job_id {
            span.record("cuzk.job_id", id.as_str());
        }
        let mut queue_wait = None;
        if let Some(published) = telemetry::published_at(&message) {
            let now = std::time::SystemTime::now();
            telemetry::record_wait(&span, "job.queue_wait", published, now);
            queue_wait = now.duration_since(published).ok();
        }
        let mut labels = None;
        let outcome = self
            .process(
                &message.payload,
                seq,
                published_ms,
                &mut job_id,
                &mut labels,
                cancel,
            )
            .instrument(span.clone())
            .await;
        ticker.abort();
        let labels = labels.unwrap_or_else(JobLabels::unknown);
        if let Some(wait) = queue_wait.filter(|_| delivered == 1) {
            metrics().stage("job_queue", &labels, wait);
        }

        // Failure reports belong to the job's trace too.
        let ack = async { match outcome {
            Ok(()) => AckKind::Ack,
            Err(JobError::Duplicate) => {
                info!(job_id = job_id.as_deref().unwrap_or("?"), seq, "duplicate submission ignored; the original stands");
                AckKind::Ack
            }
            Err(JobError::Shutdown) => AckKind::Nak(None),
            Err(JobError::Retry(reason)) if delivered < MAX_DELIVER => {
                metrics().error("synth", "retry", &labels);
                warn!(job_id = job_id.as_deref().unwrap_or("?"), %reason, delivered, "job attempt failed; will retry");
                AckKind::Nak(Some(RetryPolicy::NETWORK.delay(delivered as u32 + 2)))
            }
            Err(JobError::Retry(reason)) => {
                self.fail(job_id.as_deref(), seq, &labels, format!("gave up after {delivered} attempts: {reason}")).await
            }
            Err(JobError::Fatal(reason)) => self.fail(job_id.as_deref(), seq, &labels, reason).await,
        } }
        .instrument(span)
        .await;
        if let Err(e) = message.ack_with(ack).await {
            warn!(err = %e, seq, "acknowledging job message failed; it will be redelivered");
        }
    }

    /// Reports a job as failed. Returns how to settle its message: consumed once the failure is
    /// published, retried later if even that was impossible.
    async fn fail(
        &self,
        job_id: Option<&str>,
        seq: u64,
        labels: &JobLabels,
        reason: String,
    ) -> AckKind {
        warn!(job_id = job_id.unwrap_or("?"), seq, %reason, "job failed");
        metrics().error("synth", "fatal", labels);
        metrics().job("failed", labels);
        let reported = match job_id {
            Some(id) => {
                records::report_result(&self.topology, &JobResult::failed(id, reason)).await
            }
            None => {
                let result = JobResult::failed("", format!("job message {seq} rejected: {reason}"));
                records::publish_result(
                    &self.topology,
                    SUBJECT_RESULTS_MALFORMED,
                    &format!("malformed-{seq}"),
                    &result,
                )
                .await
            }
        };
        match reported {
            Ok(()) => AckKind::Ack,
            Err(e) => {
                warn!(err = %e, "could not report the failure; the job will be retried");
                AckKind::Nak(Some(Duration::from_secs(5)))
            }
        }
    }

    async fn process(
        self: &Arc<Self>,
        body: &[u8],
        seq: u64,
        published_ms: u64,
        job_id: &mut Option<String>,
        labels: &mut Option<JobLabels>,
        cancel: CancellationToken,
    ) -> Result<(), JobError> {
        let spec = match JobSpec::parse(body) {
            Ok(spec) => spec,
            Err((recovered, e)) => {
                if recovered.is_some() {
                    *job_id = recovered;
                }
                if let Some(id) = job_id.as_deref() {
                    self.check_duplicate(id, seq).await?;
                }
                return Err(JobError::Fatal(e.to_string()));
            }
        };
        *job_id = Some(spec.job_id.clone());
        tracing::Span::current().record("cuzk.job_id", spec.job_id.as_str());
        let existing = self.check_duplicate(&spec.job_id, seq).await?;
        if existing.as_ref().is_some_and(|r| r.status.is_final()) {
            return Ok(());
        }
        let circuit = cuzk_circuits::resolve(&CircuitSpec {
            name: spec.circuit.clone(),
            params: spec.params.clone(),
        })
        .map_err(|e| JobError::Fatal(e.to_string()))?;
        let job_labels = JobLabels::new(&spec.circuit, &circuit.shape_key());
        *labels = Some(job_labels.clone());
        if circuit.synthetic() && !self.allow_synthetic {
            return Err(JobError::Fatal(
                "synthetic jobs (random data, for timings) are not accepted here: start the nodes with --allow-synthetic".into(),
            ));
        }
        let input = self.load_input(&spec.input).await?;
        let record = match existing {
            Some(record) => record,
            None => {
                self.create_record(&spec, circuit.partitions(), seq, published_ms)
                    .await?
            }
        };
        info!(job_id = %spec.job_id, circuit = %spec.circuit, partitions = circuit.partitions(),
            resumed = record.partitions.iter().any(|p| p.status != PartitionStatus::Pending),
            "synthesizing job");

        let job = Arc::new(JobContext {
            spec,
            circuit,
            labels: job_labels,
            input: Arc::new(input),
            submission_seq: seq,
            cancel: cancel.clone(),
        });
        let mut tasks = JoinSet::new();
        for (index, partition) in record.partitions.iter().enumerate() {
            if partition.status == PartitionStatus::Pending {
                let node = self.clone();
                let job = job.clone();
                let span =
                    info_span!("partition", cuzk.job_id = %job.spec.job_id, cuzk.partition = index);
                tasks.spawn(async move { node.partition(&job, index).await }.instrument(span));
            }
        }
        let mut first_error = None;
        while let Some(joined) = tasks.join_next().await {
            let outcome = joined
                .unwrap_or_else(|e| Err(JobError::Fatal(format!("partition task died: {e}"))));
            if let Err(e) = outcome {
                // One fatal partition dooms the job: stop its siblings.
                cancel.cancel();
                first_error.get_or_insert(e);
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        records::update(&self.topology.jobs_kv, &job.spec.job_id, |record| {
            let advance = record.status == JobStatus::Synthesizing;
            if advance {
                record.status = JobStatus::Proving;
            }
            advance
        })
        .await?;
        Ok(())
    }

    /// Returns the job's record if this message created it (a redelivery to resume), fails with
    /// `Duplicate` if another submission did.
    async fn check_duplicate(&self, job_id: &str, seq: u64) -> Result<Option<JobRecord>, JobError> {
        match records::load(&self.topology.jobs_kv, job_id).await? {
            Some((record, _)) if record.submission_seq != seq => Err(JobError::Duplicate),
            Some((record, _)) => Ok(Some(record)),
            None => Ok(None),
        }
    }

    async fn create_record(
        &self,
        spec: &JobSpec,
        partitions: usize,
        seq: u64,
        published_ms: u64,
    ) -> Result<JobRecord, JobError> {
        let now = unix_ms();
        let record = JobRecord {
            job_id: spec.job_id.clone(),
            circuit: spec.circuit.clone(),
            params: spec.params.clone(),
            status: JobStatus::Synthesizing,
            submission_seq: seq,
            submitted_at_ms: published_ms,
            synth_started_at_ms: now,
            updated_at_ms: now,
            partitions: vec![PartitionRecord::default(); partitions],
            error: None,
            result: None,
        };
        if records::create(&self.topology.jobs_kv, &record).await? {
            Ok(record)
        } else {
            // A racing submission with the same id got there first.
            self.check_duplicate(&spec.job_id, seq)
                .await?
                .ok_or(JobError::Duplicate)
        }
    }

    async fn load_input(&self, input: &JobInput) -> Result<Vec<u8>, JobError> {
        let limit = self.config.max_inline_input;
        let too_large = |len: usize| {
            JobError::Fatal(format!(
                "inline input of {len} bytes exceeds the limit of {limit}; upload it to the {} object store bucket and pass {{\"object\": NAME}}",
                topology::INPUTS_BUCKET
            ))
        };
        match input {
            JobInput::None => Ok(Vec::new()),
            JobInput::Utf8(text) if text.len() > limit => Err(too_large(text.len())),
            JobInput::Utf8(text) => Ok(text.as_bytes().to_vec()),
            JobInput::Base64(text) if text.len() / 4 * 3 > limit => {
                Err(too_large(text.len() / 4 * 3))
            }
            JobInput::Base64(text) => base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| JobError::Fatal(format!("input is not valid base64: {e}"))),
            JobInput::Object(name) => {
                Ok(objects::read_bounded(&self.topology.inputs, name, MAX_OBJECT_INPUT).await?)
            }
        }
    }

    /// Waits while the work queue is full, so synthesis never runs far ahead of the GPUs.
    async fn wait_for_queue_room(&self, cancel: &CancellationToken) -> Result<(), JobError> {
        let mut waited = false;
        loop {
            let queued = self
                .topology
                .queued_partitions()
                .await
                .map_err(|e| JobError::Retry(e.to_string()))?;
            if queued < self.config.max_queued_partitions {
                return Ok(());
            }
            if !waited {
                info!(
                    queued,
                    limit = self.config.max_queued_partitions,
                    "work queue full; waiting"
                );
                waited = true;
            }
            tokio::select! {
                _ = cancel.cancelled() => return Err(JobError::Shutdown),
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
    }

    async fn partition(self: &Arc<Self>, job: &JobContext, index: usize) -> Result<(), JobError> {
        let _permit = tokio::select! {
            _ = job.cancel.cancelled() => return Err(JobError::Shutdown),
            permit = self.partitions.clone().acquire_owned() => permit.expect("semaphore open"),
        };
        let _held = self.load.hold("synth");
        self.wait_for_queue_room(&job.cancel)
            .instrument(info_span!("queue_room_wait"))
            .await?;
        let job_id = job.spec.job_id.clone();
        if let Some((record, _)) = records::load(&self.topology.jobs_kv, &job_id).await? {
            if record.status == JobStatus::Failed {
                return Err(JobError::Fatal(
                    record.error.unwrap_or_else(|| "job failed".into()),
                ));
            }
        }

        let mut timings = PartitionTimings::default();
        // The shape's matrices are captured once per shape and machine (cached on disk).
        let (circuit, shapes) = (job.circuit.clone(), self.shapes.clone());
        let shape = self
            .on_pool(move || shapes.shape_id(&*circuit))
            .instrument(info_span!("shape"))
            .await?
            .map_err(|e| JobError::Fatal(format!("partition {index}: {e}")))?;
        let started = Instant::now();
        let (circuit, input) = (job.circuit.clone(), job.input.clone());
        let capacity = Some((shape.inputs, shape.aux));
        let witness = self
            .on_pool(move || circuit.witness(&input, index, capacity))
            .instrument(info_span!("synthesize"))
            .await?
            .map_err(|e| JobError::Fatal(format!("partition {index}: {e}")))?;
        metrics().stage("synth", &job.labels, started.elapsed());
        timings.synth_ms = ms(started.elapsed());

        let started = Instant::now();
        let header = BlobHeaderInfo::new(
            job_id.as_str(),
            index as u32,
            job.circuit.shape_key(),
            shape.hash,
        )
        .map_err(|e| JobError::Fatal(e.to_string()))?;
        let options = EncodeOptions {
            level: self.config.zstd_level,
            ..Default::default()
        };
        let (bytes, stats) = self
            .on_pool(move || {
                blob::encode_blob_with_stats(&header, &witness.input, &witness.aux, &options)
            })
            .instrument(info_span!("encode"))
            .await?;
        metrics().stage("encode", &job.labels, started.elapsed());
        timings.encode_ms = ms(started.elapsed());
        timings.blob_bytes = bytes.len() as u64;
        timings.raw_bytes = stats.raw_bytes;
        let m = metrics();
        let up = |form| {
            [
                KeyValue::new("direction", "up"),
                KeyValue::new("form", form),
            ]
        };
        m.blob_bytes
            .add(timings.blob_bytes, &job.labels.with(&up("wire")));
        m.blob_bytes
            .add(timings.raw_bytes, &job.labels.with(&up("raw")));
        m.codec_ratio.record(
            timings.raw_bytes as f64 / timings.blob_bytes.max(1) as f64,
            &job.labels.with(&[]),
        );

        let started = Instant::now();
        let object = blob_object_name(&job_id, index, job.submission_seq);
        objects::put(&self.topology.blobs, &object, &bytes)
            .instrument(info_span!("upload", cuzk.blob_bytes = bytes.len()))
            .await?;
        drop(bytes);
        metrics().stage("upload", &job.labels, started.elapsed());
        timings.upload_ms = ms(started.elapsed());

        let item = WorkItem {
            version: WORK_ITEM_VERSION,
            job_id: job_id.clone(),
            partition: index as u32,
            partitions: job.circuit.partitions() as u32,
            circuit: job.spec.circuit.clone(),
            params_json: job.spec.params.to_string(),
            shape_key: job.circuit.shape_key(),
            blob_object: object,
            published_at_ms: unix_ms(),
            timings,
        };
        self.publish_work(&item, job.spec.priority, job.submission_seq)
            .await?;
        records::update(&self.topology.jobs_kv, &job_id, |record| {
            let Some(partition) = record.partitions.get_mut(index) else {
                return false;
            };
            let first = partition.status == PartitionStatus::Pending;
            if first {
                partition.status = PartitionStatus::Queued;
                partition.timings = timings;
            }
            first
        })
        .await?;
        info!(
            synth_ms = timings.synth_ms,
            encode_ms = timings.encode_ms,
            upload_ms = timings.upload_ms,
            blob_bytes = timings.blob_bytes,
            raw_bytes = timings.raw_bytes,
            "partition queued"
        );
        Ok(())
    }

    async fn publish_work(
        &self,
        item: &WorkItem,
        priority: Priority,
        seq: u64,
    ) -> Result<(), JobError> {
        let subject = match priority {
            Priority::High => SUBJECT_WORK_HIGH,
            Priority::Normal => SUBJECT_WORK_NORMAL,
        };
        let payload = bytes::Bytes::from(item.encode());
        // The message id makes a republish after a timeout or a resumed job a no-op.
        let msg_id = format!("{}.{}.{seq}", item.job_id, item.partition);
        // The GPU node's spans for this partition become children of this one.
        let span = telemetry::send_span(subject, &msg_id, payload.len());
        let mut headers = async_nats::HeaderMap::new();
        telemetry::inject(&span, &mut headers);
        retry("publish work item", RetryPolicy::NETWORK, || async {
            let publish = PublishMessage::build()
                .headers(headers.clone())
                .payload(payload.clone())
                .message_id(msg_id.as_str());
            self.topology
                .js
                .send_publish(subject, publish)
                .await?
                .await
                .map(|_| ())
                .map_err(async_nats::Error::from)
        })
        .instrument(span)
        .await
        .map_err(|e| JobError::Retry(format!("publishing work item: {e}")))
    }

    /// Runs CPU-heavy work on the synthesis pool without blocking the async runtime.
    async fn on_pool<T, F>(&self, work: F) -> Result<T, JobError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.pool.spawn(move || {
            let _ = tx.send(work());
        });
        rx.await
            .map_err(|_| JobError::Fatal("synthesis panicked".into()))
    }
}

/// Blob names carry the submission sequence so a resubmitted job id never meets stale blobs.
pub fn blob_object_name(job_id: &str, partition: usize, seq: u64) -> String {
    format!("{job_id}/{seq}/{partition}")
}

/// Pulls one job, waiting a few seconds at most so shutdown is noticed.
async fn next_message(
    consumer: &PullConsumer,
) -> Result<Option<jetstream::Message>, async_nats::Error> {
    pull_one(consumer, Duration::from_secs(5)).await
}
