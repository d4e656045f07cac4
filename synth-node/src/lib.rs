//! The synth node: a picker takes jobs from the jobs stream while there is room to keep every
//! core busy (`intake`), the executor synthesizes and encodes each partition on a bounded
//! rayon pool (`executor`), and the saver uploads its blob and queues its work item
//! (`saver`), each partition waiting for room in the blob buckets first (`room`). Every partition reserves its bytes from the node's memory budget first
//! (`budget`). How each message ends is the shared failure policy's call
//! (`cuzk_common::policy`); job records change only through the ledger
//! (`cuzk_common::lifecycle`).

mod abandoned;
pub mod budget;
pub mod cancel;
pub mod executor;
pub mod intake;
mod jobs;
pub mod refusals;
mod room;
pub mod saver;
mod sweeper;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use cuzk_circuits::ShapeCache;
use cuzk_common::config::{ParamConfig, SynthConfig};
use cuzk_common::lifecycle::Ledger;
use cuzk_common::metrics::{metrics, JobLabels};
use cuzk_common::nats::{progress_ticker, pull_one};
use cuzk_common::nodes::{self, NodeInfo, NodeLoad};
use cuzk_common::policy::{self, Decision, Settle, StepError};
use cuzk_common::telemetry;
use cuzk_common::topology::{Topology, MAX_DELIVER};
use cuzk_wire::blob::EncodeOptions;
use cuzk_wire::job::{JobResult, Stage, JOB_ID_HEADER};
use tokio::sync::{oneshot, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, info_span, warn, Instrument};

use crate::budget::{Backlog, MemoryBudget, Waiting};
use crate::intake::{Admitted, Intake, Limits, Submission};
use crate::refusals::{RefusalLimit, Verdict};
use crate::room::Room;

pub use cuzk_common::lifecycle::blobs::blob_object_name;

pub struct SynthNode {
    topology: Topology,
    ledger: Ledger,
    config: SynthConfig,
    allow_synthetic: bool,
    /// Shape identities (the matrices' hash, stamped on every blob) and variable counts.
    shapes: Arc<ShapeCache>,
    pool: Arc<rayon::ThreadPool>,
    /// CPU slots: partitions synthesized or encoded at once.
    slots: Arc<Semaphore>,
    memory: MemoryBudget,
    backlog: Backlog,
    name: String,
    load: Arc<NodeLoad>,
    /// Refusals recorded per tenant.
    refusals: RefusalLimit,
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
            // The executor catches its own panics; this keeps any other one from aborting the
            // process (rayon's default for a panic in a spawned task).
            .panic_handler(|panic| {
                tracing::error!(panic = %policy::panic_message(&*panic), "a synthesis task panicked");
            })
            .build()?;
        Ok(SynthNode {
            ledger: Ledger::new(&topology),
            allow_synthetic: params.allow_synthetic,
            shapes,
            slots: Arc::new(Semaphore::new(config.partitions_in_flight)),
            memory: MemoryBudget::new(
                config.memory_budget - cuzk_common::config::SYNTH_PROCESS_ALLOWANCE,
            ),
            backlog: Backlog::default(),
            refusals: RefusalLimit::new(config.max_refusals_per_minute),
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
        let background = [
            tokio::spawn(nodes::heartbeat(
                self.topology.clone(),
                heartbeat,
                self.load.clone(),
                shutdown.clone(),
            )),
            tokio::spawn(abandoned::watch(
                self.topology.clone(),
                self.ledger.clone(),
                shutdown.clone(),
            )),
            tokio::spawn(sweeper::run(
                self.topology.clone(),
                self.ledger.clone(),
                self.config.no_progress_timeout,
                shutdown.clone(),
            )),
            tokio::spawn(cancel::serve(
                self.topology.clone(),
                self.ledger.clone(),
                shutdown.clone(),
            )),
            tokio::spawn(jobs::serve(
                self.topology.clone(),
                self.ledger.clone(),
                shutdown.clone(),
            )),
        ];
        cuzk_common::metrics::set_ready(true);
        info!(node = %self.name, config = ?self.config, "synth node started");
        loop {
            // Take another job only while fewer partitions wait than there are threads to run
            // them: many small jobs keep every core busy, one large job is not joined by more.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.backlog.wait_below(self.config.threads) => {}
            }
            let permit = tokio::select! {
                _ = shutdown.cancelled() => break,
                permit = jobs.clone().acquire_owned() => permit?,
            };
            let message = tokio::select! {
                _ = shutdown.cancelled() => break,
                message = pull_one(&consumer, Duration::from_secs(5)) => message,
            };
            match message {
                Ok(Some(message)) => {
                    let node = self.clone();
                    let cancel = shutdown.child_token();
                    // Counts as one waiting partition until intake knows the job's.
                    let waiting = self.backlog.add(1);
                    let (claimed, claim_done) = oneshot::channel();
                    tasks.spawn(async move {
                        node.handle(message, waiting, claimed, cancel).await;
                        drop(permit);
                    });
                    // The next message waits until this one's id is claimed (or the message
                    // is settled without a claim), so ids are claimed in the stream's order.
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = claim_done => {}
                    }
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
        for task in background {
            let _ = task.await;
        }
        Ok(())
    }

    async fn handle(
        self: Arc<Self>,
        message: jetstream::Message,
        waiting: Waiting,
        claimed: oneshot::Sender<()>,
        cancel: CancellationToken,
    ) {
        let submission = match message.info() {
            Ok(info) => Submission {
                seq: info.stream_sequence,
                delivered: info.delivered,
                published_ms: (info.published.unix_timestamp_nanos() / 1_000_000) as u64,
                subject: message.subject.to_string(),
            },
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
        let mut job_id = message
            .headers
            .as_ref()
            .and_then(|h| h.get(JOB_ID_HEADER))
            .map(|v| v.as_str().to_owned())
            .filter(|id| cuzk_wire::job::valid_job_id(id));
        // The job's span on this node (OpenTelemetry's messaging `process` span); a
        // submitter's `traceparent` header makes it part of the caller's trace, otherwise it
        // is the root of the job's trace.
        let span = telemetry::process_span(&message);
        telemetry::set_parent(&span, message.headers.as_ref());
        if let Some(id) = &job_id {
            let key = cuzk_wire::job::job_key(submission.tenant().as_deref(), id);
            span.record("cuzk.job_id", key.as_str());
        }
        let mut queue_wait = None;
        if let Some(published) = telemetry::published_at(&message) {
            let now = std::time::SystemTime::now();
            telemetry::record_wait(&span, Stage::JobQueue.name(), published, now);
            queue_wait = now.duration_since(published).ok();
        }
        let mut labels = None;
        let mut claimed = Some(claimed);
        let outcome = self
            .process(
                &message.payload,
                &submission,
                (&mut job_id, &mut labels),
                (waiting, &mut claimed),
                cancel,
            )
            .instrument(span.clone())
            .await;
        ticker.abort();
        let labels = labels.unwrap_or_else(JobLabels::unknown);
        if let Some(wait) = queue_wait.filter(|_| submission.delivered == 1) {
            metrics().stage(Stage::JobQueue, &labels, wait);
        }

        let settle = async {
            match policy::decide(outcome, submission.delivered, MAX_DELIVER) {
                Decision::Settle(settle) => {
                    if let Settle::Nak(Some(_)) = settle {
                        metrics().error("synth", "retry", &labels);
                        warn!(
                            job_id = job_id.as_deref().unwrap_or("?"),
                            "job attempt failed; will retry"
                        );
                    }
                    settle
                }
                Decision::FailJob(reason) => {
                    self.fail(job_id.as_deref(), &submission, &labels, reason)
                        .await
                }
            }
        }
        .instrument(span)
        .await;
        // A refusal is recorded (and so holds the id) before the next message is claimed.
        drop(claimed);
        match settle.ack_kind() {
            Some(kind) => {
                if let Err(e) = message.ack_with(kind).await {
                    warn!(err = %e, seq = submission.seq, "acknowledging job message failed; it will be redelivered");
                }
            }
            None => info!(
                job_id = job_id.as_deref().unwrap_or("?"),
                seq = submission.seq,
                "a later delivery holds this job; left to it"
            ),
        }
    }

    /// Ends a submission as failed (the job's record first, then its result), or, past its
    /// tenant's refusal limit, answers it without a record ([`refusals`]).
    async fn fail(
        &self,
        job_id: Option<&str>,
        submission: &Submission,
        labels: &JobLabels,
        reason: String,
    ) -> Settle {
        let tenant = submission.tenant();
        let tenant = tenant.as_deref();
        let job = job_id.map(|id| cuzk_wire::job::job_key(tenant, id));
        warn!(job = job.as_deref().unwrap_or("?"), seq = submission.seq, %reason, "job failed");
        metrics().error("synth", "fatal", labels);
        let reported = match job_id {
            Some(id) => {
                self.refuse(tenant, &JobResult::failed(id, reason), submission)
                    .await
            }
            None => {
                let malformed = self
                    .ledger
                    .report_malformed(tenant, submission.seq, &reason);
                malformed.await
            }
        };
        if let Err(e) = &reported {
            warn!(err = %e, "could not report the failure; the job will be retried");
        }
        policy::after_failing(reported.is_ok())
    }

    /// Records a refused submission, or answers it only once its tenant is past its limit.
    async fn refuse(
        &self,
        tenant: Option<&str>,
        result: &JobResult,
        submission: &Submission,
    ) -> Result<(), cuzk_common::lifecycle::RecordError> {
        let (seq, at) = (submission.seq, submission.published_ms);
        let verdict = self.refusals.take(tenant, std::time::Instant::now());
        let nth = match verdict {
            Verdict::Record => {
                metrics().refusal(tenant, true);
                return self
                    .ledger
                    .refuse(tenant, result, seq, at)
                    .await
                    .map(|_| ());
            }
            Verdict::AnswerOnly { nth } => nth,
        };
        // A submission whose id has a record is settled there: nothing new is written.
        if self
            .ledger
            .refuse_unrecorded(tenant, result, seq, at)
            .await?
            .is_none()
        {
            metrics().refusal(tenant, false);
            let per_minute = self.config.max_refusals_per_minute;
            let job = cuzk_wire::job::job_key(tenant, &result.job_id);
            if nth == 1 {
                warn!(tenant = tenant.unwrap_or("-"), %job, per_minute,
                    "refusals over this tenant's limit: answered, not recorded (counted in cuzk_refusals_total)");
            } else {
                tracing::debug!(tenant = tenant.unwrap_or("-"), %job, nth, "refusal answered, not recorded");
            }
        }
        Ok(())
    }

    async fn process(
        self: &Arc<Self>,
        body: &[u8],
        submission: &Submission,
        (job_id, labels): (&mut Option<String>, &mut Option<JobLabels>),
        (mut waiting, claimed): (Waiting, &mut Option<oneshot::Sender<()>>),
        cancel: CancellationToken,
    ) -> Result<(), StepError> {
        let limits = Limits {
            max_job_constraints: self.config.max_job_constraints,
            max_inline_input: self.config.max_inline_input,
            memory_budget: self.memory.total(),
            allow_synthetic: self.allow_synthetic,
        };
        let intake = intake::claim(&self.ledger, &limits, body, submission, job_id, labels);
        let job = match intake.await? {
            Intake::Run(job) => job,
            Intake::Settled => return Ok(()),
        };
        drop(claimed.take());
        let job = Arc::new(job.load(&self.topology).await?);
        // The placeholder share becomes the job's pending partitions.
        drop(waiting);
        waiting = self.backlog.add(job.pending.len());
        info!(job = %job.key, circuit = %job.spec.circuit, partitions = job.circuit.partitions(),
            pending = job.pending.len(), partition_bytes = job.partition_bytes, "synthesizing job");

        let mut tasks = JoinSet::new();
        for &index in &job.pending {
            let node = self.clone();
            let job = job.clone();
            let share = waiting.take_one();
            let cancel = cancel.clone();
            let span = info_span!("partition", cuzk.job_id = %job.key, cuzk.partition = index);
            tasks.spawn(
                async move { node.partition(&job, index, share, &cancel).await }.instrument(span),
            );
        }
        let mut first_error = None;
        while let Some(joined) = tasks.join_next().await {
            let outcome = joined
                .unwrap_or_else(|e| Err(StepError::Fatal(format!("partition task died: {e}"))));
            if let Err(e) = outcome {
                // One fatal partition dooms the job: stop its siblings.
                cancel.cancel();
                first_error.get_or_insert(e);
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        self.ledger.synthesized(&job.key).await?;
        Ok(())
    }

    /// One partition: memory, then a CPU slot, then room in the queue; synthesize and encode
    /// on the pool; upload and queue it with the CPU slot given back.
    async fn partition(
        self: &Arc<Self>,
        job: &Admitted,
        index: usize,
        waiting: Option<Waiting>,
        cancel: &CancellationToken,
    ) -> Result<(), StepError> {
        let _memory = tokio::select! {
            _ = cancel.cancelled() => return Err(StepError::Shutdown),
            reserved = self.memory.reserve(job.partition_bytes) => reserved,
        };
        let slot = tokio::select! {
            _ = cancel.cancelled() => return Err(StepError::Shutdown),
            slot = self.slots.clone().acquire_owned() => slot.expect("semaphore open"),
        };
        drop(waiting);
        let _held = self.load.hold("synth");
        let room = Room {
            topology: &self.topology,
            max_queued_bytes: self.config.max_queued_bytes,
            cancel,
        };
        let blob = budget::blob_bound(job.circuit.partition_shape().variables);
        room.wait(blob)
            .instrument(info_span!("queue_room_wait"))
            .await?;
        // The job may have ended meanwhile: failed by a sibling partition, or cancelled.
        if !saver::still_running(&self.ledger, job, index).await? {
            return Ok(());
        }
        // Its key: what the blob's header names, as its work item does.
        let job_id = job.key.clone();
        let (circuit, input, shapes, labels) = (
            job.circuit.clone(),
            job.input.clone(),
            self.shapes.clone(),
            job.labels.clone(),
        );
        let options = EncodeOptions {
            level: self.config.zstd_level,
            ..Default::default()
        };
        // Spans do not follow work onto the pool's threads: the executor's stages are children
        // of this partition's span.
        let span = tracing::Span::current();
        let done = self
            .on_pool(move || {
                let cx = executor::Context {
                    shapes: &shapes,
                    options: &options,
                    labels: &labels,
                };
                span.in_scope(|| executor::run(&*circuit, &input, &job_id, index, &cx))
            })
            .await??;
        drop(slot);
        saver::save(&self.ledger, job, index, done, &room).await
    }

    /// Runs CPU-heavy work on the synthesis pool without blocking the async runtime.
    async fn on_pool<T, F>(&self, work: F) -> Result<T, StepError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.pool.spawn(move || {
            let _ = tx.send(work());
        });
        rx.await
            .map_err(|_| StepError::Fatal("synthesis task died".into()))
    }
}
