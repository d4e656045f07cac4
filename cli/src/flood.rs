//! A flood against a process cluster: many small jobs submitted in one burst, then a run of
//! maximum-size jobs (exactly at the synth nodes' size cap) and a few just over it. Answers are
//! counted where clients listen (a core subscription to `cuzk.results.>`), and every node's
//! peak resident memory is read from the kernel. `cuzk-load flood` prints the figures; a small
//! version runs in CI (cli/tests/flood.rs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::Client;
use cuzk_common::topology::jetstream_context;
use cuzk_wire::job::{JobResult, JobSpec, JobStatus};
use futures::StreamExt;

use crate::launcher::{ProcessCluster, Role};
use crate::submit::submit_subject;

pub struct FloodSpec {
    /// The small job, submitted `small_jobs` times within `burst`.
    pub small: JobSpec,
    pub small_jobs: usize,
    pub burst: Duration,
    /// A job exactly at the size cap, submitted `big_jobs` times after the burst.
    pub big: JobSpec,
    pub big_jobs: usize,
    /// A job just over the cap, submitted `over_cap_jobs` times: each must be refused.
    pub over_cap: JobSpec,
    pub over_cap_jobs: usize,
    /// Answers still missing after this long count as lost.
    pub timeout: Duration,
}

#[derive(Debug, Default)]
pub struct FloodReport {
    pub submitted: usize,
    /// Refused by the server at submission (the jobs stream full).
    pub refused_at_submit: usize,
    pub done: usize,
    /// Over-cap jobs failed at intake naming the numbers.
    pub refused_over_cap: usize,
    /// Answers other than the expected ones.
    pub unexpected: Vec<String>,
    pub lost: usize,
    pub duplicated: usize,
    pub elapsed: Duration,
    /// Peak resident memory of each node: name, role, bytes.
    pub peaks: Vec<(String, Role, u64)>,
    /// A node that exited during the run.
    pub exited: Option<String>,
}

/// What each job id is expected to end as.
#[derive(Clone, Copy, PartialEq)]
enum Expect {
    Done,
    TooLarge,
}

pub async fn run(
    cluster: &mut ProcessCluster,
    client: &Client,
    spec: &FloodSpec,
) -> anyhow::Result<FloodReport> {
    let tag = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
    let heard: Arc<Mutex<HashMap<String, Vec<JobResult>>>> = Arc::default();
    let mut sub = client.subscribe("cuzk.results.>").await?;
    client.flush().await?;
    let listener = tokio::spawn({
        let heard = heard.clone();
        async move {
            while let Some(message) = sub.next().await {
                if let Ok(result) = serde_json::from_slice::<JobResult>(&message.payload) {
                    let mut heard = heard.lock().expect("not poisoned");
                    heard.entry(result.job_id.clone()).or_default().push(result);
                }
            }
        }
    });

    let js = jetstream_context(client.clone(), Duration::from_secs(30));
    let mut expected: HashMap<String, Expect> = HashMap::new();
    let mut acks: Vec<(String, PublishAckFuture)> = Vec::new();
    let started = Instant::now();
    let waves = [
        (&spec.small, spec.small_jobs, "s", Expect::Done, spec.burst),
        (&spec.big, spec.big_jobs, "b", Expect::Done, Duration::ZERO),
        (
            &spec.over_cap,
            spec.over_cap_jobs,
            "o",
            Expect::TooLarge,
            Duration::ZERO,
        ),
    ];
    for (template, count, kind, expect, spread) in waves {
        let wave = Instant::now();
        for i in 0..count {
            let mut job = template.clone();
            job.job_id = format!("flood-{tag}-{kind}{i}");
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(async_nats::header::NATS_MESSAGE_ID, job.job_id.as_str());
            let body = serde_json::to_vec(&job)?;
            let ack = js
                .publish_with_headers(submit_subject(None, &job), headers, body.into())
                .await?;
            acks.push((job.job_id.clone(), ack));
            expected.insert(job.job_id, expect);
            // Spread the wave evenly over its duration.
            let due = wave + spread.mul_f64((i + 1) as f64 / count.max(1) as f64);
            tokio::time::sleep_until(due.into()).await;
        }
    }
    let mut report = FloodReport {
        submitted: expected.len(),
        ..Default::default()
    };
    for (job_id, ack) in acks {
        if let Err(e) = ack.await {
            tracing::warn!(%job_id, err = %e, "submission refused");
            expected.remove(&job_id);
            report.refused_at_submit += 1;
        }
    }

    let deadline = started + spec.timeout;
    loop {
        let answered = {
            let heard = heard.lock().expect("not poisoned");
            expected.keys().filter(|id| heard.contains_key(*id)).count()
        };
        if answered == expected.len() || Instant::now() > deadline {
            break;
        }
        if let Err(exited) = cluster.all_nodes_running() {
            report.exited = Some(exited);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    report.elapsed = started.elapsed();
    // A late second answer has a moment to show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    listener.abort();
    report.peaks = cluster.peak_rss();
    if report.exited.is_none() {
        report.exited = cluster.all_nodes_running().err();
    }
    let heard = heard.lock().expect("not poisoned");
    for (job_id, expect) in &expected {
        let answers = heard.get(job_id).map(Vec::as_slice).unwrap_or_default();
        match answers {
            [] => report.lost += 1,
            [first, rest @ ..] => {
                report.duplicated += usize::from(!rest.is_empty());
                let error = first.error.as_deref().unwrap_or_default();
                match (expect, first.status) {
                    (Expect::Done, JobStatus::Done) => report.done += 1,
                    (Expect::TooLarge, JobStatus::Failed) if error.contains("job too large") => {
                        report.refused_over_cap += 1
                    }
                    _ => report
                        .unexpected
                        .push(format!("{job_id}: {:?} {error}", first.status)),
                }
            }
        }
    }
    Ok(report)
}

impl FloodReport {
    /// Every job answered once as expected, no node exited, every synth node under `budget`.
    pub fn passed(&self, synth_budget: u64) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.unexpected.is_empty()
            && self.exited.is_none()
            && self
                .peaks
                .iter()
                .all(|(_, role, peak)| *role != Role::Synth || *peak <= synth_budget)
    }

    pub fn table(&self, synth_budget: u64) -> String {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let mut out = format!(
            "submitted {} · refused at submission {} · done {} · refused over the cap {} · \
             unexpected {} · lost {} · duplicated {} · {:.1} s · nodes exited: {}\n",
            self.submitted,
            self.refused_at_submit,
            self.done,
            self.refused_over_cap,
            self.unexpected.len(),
            self.lost,
            self.duplicated,
            self.elapsed.as_secs_f64(),
            self.exited.as_deref().unwrap_or("none"),
        );
        out.push_str(&format!(
            "{:<14} {:>14} {:>14}\n",
            "node", "peak RSS MiB", "budget MiB"
        ));
        for (name, role, peak) in &self.peaks {
            let budget = match role {
                Role::Synth => format!("{:.0}", mib(synth_budget)),
                Role::Gpu | Role::Ledger => "-".into(),
            };
            out.push_str(&format!("{name:<14} {:>14.1} {budget:>14}\n", mib(*peak)));
        }
        for line in self.unexpected.iter().take(10) {
            out.push_str(&format!("unexpected: {line}\n"));
        }
        out
    }
}
