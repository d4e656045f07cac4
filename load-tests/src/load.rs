//! Drives a bounded job stream at a cluster: open loop (a fixed submission rate, whatever the
//! cluster does) or closed loop (a fixed number of jobs in flight), with a sampler recording
//! queue depths and prover busy counters while it runs.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cuzk_circuits::ShapeCache;
use cuzk_common::topology::{job_key, results_subject, submit_subject, JOBS_STREAM, WORK_STREAM};
use cuzk_wire::job::{JobResult, JobSpec, JobStatus};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::cluster::{http_get, prover_busy, Target};

#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Open { rate: f64 },
    Closed { concurrency: usize },
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Open { rate } => write!(f, "open loop at {rate} jobs/s"),
            Mode::Closed { concurrency } => write!(f, "closed loop, {concurrency} in flight"),
        }
    }
}

pub struct RunConfig {
    pub template: JobSpec,
    pub jobs: usize,
    pub mode: Mode,
    /// No submission after this long.
    pub submit_for: Duration,
    /// The run ends after this long whatever is still in flight.
    pub timeout: Duration,
    pub warmup: usize,
    pub sample: Duration,
    pub verify: bool,
}

/// One timed job.
#[derive(Clone, Debug)]
pub struct JobOutcome {
    pub job_id: String,
    /// Seconds from the run's start.
    pub submitted_s: f64,
    pub completed_s: Option<f64>,
    pub result: Option<JobResult>,
}

impl JobOutcome {
    pub fn latency_s(&self) -> Option<f64> {
        self.completed_s.map(|c| c - self.submitted_s)
    }

    pub fn done(&self) -> bool {
        self.result
            .as_ref()
            .is_some_and(|r| r.status == JobStatus::Done)
    }
}

/// Counters at one instant of the run.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    pub t_s: f64,
    pub jobs_done: usize,
    pub partitions_done: usize,
    /// Messages waiting in CUZK_WORK / CUZK_JOBS (`None`: not readable).
    pub work_depth: Option<u64>,
    pub jobs_depth: Option<u64>,
    /// Cumulative prover busy seconds by worker (`node/worker`), since the run started.
    pub busy: BTreeMap<String, f64>,
}

/// Everything one run measured.
pub struct RunData {
    pub label: String,
    pub description: String,
    pub circuit: String,
    pub params: serde_json::Value,
    pub partitions: usize,
    pub mode: Mode,
    pub outcomes: Vec<JobOutcome>,
    pub samples: Vec<Sample>,
    /// Every worker seen in the busy counters, in order.
    pub workers: Vec<String>,
}

/// Submits `config.jobs` jobs (after the warm-up) and collects their results and the samples.
pub async fn drive(
    target: &Target,
    config: &RunConfig,
    verify_with: Option<&ShapeCache>,
    label: &str,
) -> anyhow::Result<RunData> {
    let family = cuzk_circuits::resolve(&config.template.circuit, &config.template.params)?;
    let partitions = family.partitions();
    let tag = format!("{:08x}", rand::random::<u32>());

    for index in 0..config.warmup {
        let mut spec = config.template.clone();
        spec.job_id = format!("warm-{tag}-{index}");
        let tenant = target.tenant.as_deref();
        let via = cuzk_cli::submit::Via::Core;
        let result =
            cuzk_cli::submit::submit_and_wait(&target.client, tenant, &spec, via, config.timeout)
                .await
                .with_context(|| format!("warm-up job\n{}", target.log_tails()))?;
        anyhow::ensure!(
            result.status == JobStatus::Done,
            "warm-up job failed: {:?}",
            result.error
        );
    }

    // Subscribed before the first submission, so no result can be missed: every result this
    // client may hear (a tenant's own, under its prefix).
    let every = results_subject(&job_key(target.tenant.as_deref(), ">"));
    let mut results = target.client.subscribe(every).await?;
    target.client.flush().await?;

    let jobs_done = Arc::new(AtomicUsize::new(0));
    let partitions_done = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let start = Instant::now();
    let baseline = scrape(&target.gpu_metrics).await;
    // A user without `$JS.API.STREAM.INFO` gets no answer, only a timeout: find out once, not
    // on every sample.
    let js = match tokio::time::timeout(
        Duration::from_secs(2),
        stream_depth(&target.js, WORK_STREAM),
    )
    .await
    {
        Ok(Some(_)) => Some(target.js.clone()),
        _ => {
            eprintln!("warning: cannot read the work stream's depth (permissions?); not sampling queue depths");
            None
        }
    };
    let sampler = tokio::spawn(sample_loop(
        js.clone(),
        target.gpu_metrics.clone(),
        baseline.clone(),
        config.sample,
        start,
        jobs_done.clone(),
        partitions_done.clone(),
        stop.clone(),
    ));

    let mut outcomes: Vec<JobOutcome> = Vec::with_capacity(config.jobs);
    let mut pending: HashMap<String, usize> = HashMap::new();
    let submit =
        |index: usize, outcomes: &mut Vec<JobOutcome>, pending: &mut HashMap<String, usize>| {
            let mut spec = config.template.clone();
            spec.job_id = format!("load-{tag}-{index}");
            pending.insert(spec.job_id.clone(), outcomes.len());
            outcomes.push(JobOutcome {
                job_id: spec.job_id.clone(),
                submitted_s: start.elapsed().as_secs_f64(),
                completed_s: None,
                result: None,
            });
            // A plain core publish, exactly what `nats pub cuzk.jobs.submit[.<tenant>] '{…}'`
            // sends.
            let subject = submit_subject(target.tenant.as_deref(), spec.priority);
            serde_json::to_vec(&spec).map(|body| (subject, body))
        };

    let submit_until = start + config.submit_for;
    let deadline = tokio::time::Instant::from_std(start + config.timeout);
    let mut ticker = match config.mode {
        Mode::Open { rate } => Some(tokio::time::interval(Duration::from_secs_f64(1.0 / rate))),
        Mode::Closed { .. } => None,
    };
    if let Mode::Closed { concurrency } = config.mode {
        for _ in 0..concurrency.min(config.jobs) {
            let (subject, body) = submit(outcomes.len(), &mut outcomes, &mut pending)?;
            target.client.publish(subject, body.into()).await?;
        }
        target.client.flush().await?;
    }
    let mut lost = false;
    loop {
        let may_submit = outcomes.len() < config.jobs && Instant::now() < submit_until;
        if pending.is_empty() && !may_submit {
            break;
        }
        tokio::select! {
            _ = async { ticker.as_mut().expect("open loop").tick().await }, if ticker.is_some() && may_submit => {
                let (subject, body) = submit(outcomes.len(), &mut outcomes, &mut pending)?;
                target.client.publish(subject, body.into()).await?;
                target.client.flush().await?;
            }
            message = results.next() => {
                let message = message.context("results subscription closed")?;
                let Ok(result) = serde_json::from_slice::<JobResult>(&message.payload) else { continue };
                // Results of other clients' jobs, and duplicates, are not ours to count.
                let Some(index) = pending.remove(&result.job_id) else { continue };
                let outcome = &mut outcomes[index];
                outcome.completed_s = Some(start.elapsed().as_secs_f64());
                if result.status == JobStatus::Done {
                    partitions_done.fetch_add(partitions, Ordering::Relaxed);
                }
                jobs_done.fetch_add(1, Ordering::Relaxed);
                outcome.result = Some(result);
                if matches!(config.mode, Mode::Closed { .. }) && outcomes.len() < config.jobs && Instant::now() < submit_until {
                    let (subject, body) = submit(outcomes.len(), &mut outcomes, &mut pending)?;
                    target.client.publish(subject, body.into()).await?;
                    target.client.flush().await?;
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                lost = true;
                break;
            }
        }
    }
    stop.cancel();
    let mut samples = sampler.await?;
    // A final sample after the last result: the last proof's busy time is counted by then.
    samples.push(
        take_sample(
            js.as_ref(),
            &target.gpu_metrics,
            &baseline,
            start,
            &jobs_done,
            &partitions_done,
        )
        .await,
    );
    if lost {
        eprintln!(
            "warning: {} job(s) without a result after {:?}; counted as lost",
            pending.len(),
            config.timeout
        );
    }

    if config.verify {
        let cache = verify_with.context("--verify needs the parameter cache")?;
        for outcome in outcomes.iter().filter(|o| o.done()) {
            let mut spec = config.template.clone();
            spec.job_id = outcome.job_id.clone();
            cuzk_cli::verify_job_proof(&spec, outcome.result.as_ref().expect("done"), cache)
                .with_context(|| format!("job {}", outcome.job_id))?;
        }
    }

    let mut workers: Vec<String> = Vec::new();
    for sample in &samples {
        for worker in sample.busy.keys() {
            if !workers.contains(worker) {
                workers.push(worker.clone());
            }
        }
    }
    workers.sort();
    Ok(RunData {
        label: label.to_owned(),
        description: target.description.clone(),
        circuit: config.template.circuit.clone(),
        params: config.template.params.clone(),
        partitions,
        mode: config.mode,
        outcomes,
        samples,
        workers,
    })
}

/// Cumulative busy seconds of every GPU worker, keyed `node/worker`.
async fn scrape(endpoints: &[crate::cluster::Endpoint]) -> BTreeMap<String, f64> {
    let mut busy = BTreeMap::new();
    for endpoint in endpoints {
        match http_get(&endpoint.addr, "/metrics").await {
            Ok((200, body)) => {
                for (worker, seconds) in prover_busy(&body) {
                    busy.insert(format!("{}/{worker}", endpoint.node), seconds);
                }
            }
            Ok((status, _)) => eprintln!("warning: {} /metrics answered {status}", endpoint.addr),
            Err(e) => eprintln!("warning: scraping {}: {e:#}", endpoint.addr),
        }
    }
    busy
}

async fn stream_depth(js: &async_nats::jetstream::Context, name: &str) -> Option<u64> {
    let mut stream = js.get_stream(name).await.ok()?;
    stream.info().await.ok().map(|info| info.state.messages)
}

async fn take_sample(
    js: Option<&async_nats::jetstream::Context>,
    endpoints: &[crate::cluster::Endpoint],
    baseline: &BTreeMap<String, f64>,
    start: Instant,
    jobs_done: &AtomicUsize,
    partitions_done: &AtomicUsize,
) -> Sample {
    let busy = scrape(endpoints)
        .await
        .into_iter()
        .map(|(worker, seconds)| {
            let since_start = seconds - baseline.get(&worker).copied().unwrap_or(0.0);
            (worker, since_start)
        })
        .collect();
    Sample {
        t_s: start.elapsed().as_secs_f64(),
        jobs_done: jobs_done.load(Ordering::Relaxed),
        partitions_done: partitions_done.load(Ordering::Relaxed),
        work_depth: match js {
            Some(js) => stream_depth(js, WORK_STREAM).await,
            None => None,
        },
        jobs_depth: match js {
            Some(js) => stream_depth(js, JOBS_STREAM).await,
            None => None,
        },
        busy,
    }
}

#[allow(clippy::too_many_arguments)]
async fn sample_loop(
    js: Option<async_nats::jetstream::Context>,
    endpoints: Vec<crate::cluster::Endpoint>,
    baseline: BTreeMap<String, f64>,
    period: Duration,
    start: Instant,
    jobs_done: Arc<AtomicUsize>,
    partitions_done: Arc<AtomicUsize>,
    stop: CancellationToken,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return samples,
            _ = ticker.tick() => {
                samples.push(take_sample(js.as_ref(), &endpoints, &baseline, start, &jobs_done, &partitions_done).await);
            }
        }
    }
}
