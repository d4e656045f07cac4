//! What `cuzk status` and `cuzk watch` show, and the progress of `cuzk submit --wait`: node
//! heartbeats, queue depths, the jobs in flight (from the jobs KV bucket) and a job's
//! partitions as they are synthesized and proved.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::Duration;

use async_nats::jetstream::kv::{self, Operation};
use cuzk_common::nodes;
use cuzk_common::topology::{Topology, JOBS_BUCKET, JOBS_STREAM, WORK_STREAM};
use cuzk_wire::job::{unix_ms, JobRecord, JobStatus, PartitionStatus};
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};

/// How many of the most recent job-record revisions `cuzk status` reads: bounds the scan on a
/// bucket that keeps a week of jobs. Each job keeps only its latest revision, so this covers the
/// most recently updated jobs.
pub const STATUS_SCAN: u64 = 2000;
/// Failures older than this are not "recent".
const RECENT_FAILURES: Duration = Duration::from_secs(3600);

/// Partitions synthesized (queued or proved) and proved.
pub fn progress(record: &JobRecord) -> (usize, usize) {
    let synthesized = record
        .partitions
        .iter()
        .filter(|p| p.status != PartitionStatus::Pending)
        .count();
    let proved = record
        .partitions
        .iter()
        .filter(|p| p.status == PartitionStatus::Proved)
        .count();
    (synthesized, proved)
}

/// The most recently updated job records, newest first, read from the last [`STATUS_SCAN`]
/// revisions of the jobs bucket.
pub async fn recent_jobs(topology: &Topology) -> anyhow::Result<Vec<JobRecord>> {
    let mut stream = topology.js.get_stream(format!("KV_{JOBS_BUCKET}")).await?;
    let last = stream.info().await?.state.last_sequence;
    let mut jobs = Vec::new();
    if last == 0 {
        return Ok(jobs);
    }
    let mut watch = topology
        .jobs_kv
        .watch_all_from_revision(last.saturating_sub(STATUS_SCAN).max(1))
        .await?;
    // The watch goes on with live updates; stop once the stored revisions are read (`delta` is
    // what is left), or after a quiet second (everything older expired).
    while let Ok(Some(entry)) = tokio::time::timeout(Duration::from_secs(1), watch.next()).await {
        let entry = entry?;
        if entry.operation == Operation::Put {
            if let Ok(record) = serde_json::from_slice::<JobRecord>(&entry.value) {
                jobs.retain(|j: &JobRecord| j.job_id != record.job_id);
                jobs.push(record);
            }
        }
        if entry.delta == 0 || entry.revision >= last {
            break;
        }
    }
    jobs.sort_by_key(|j| std::cmp::Reverse(j.updated_at_ms));
    Ok(jobs)
}

/// `cuzk status` without a job id.
pub async fn cluster_status(topology: &Topology) -> anyhow::Result<String> {
    let mut out = String::new();
    let nodes = nodes::list(topology)
        .await
        .map_err(|e| anyhow::anyhow!("reading node heartbeats: {e}"))?;
    writeln!(out, "nodes ({}):", nodes.len())?;
    let now = unix_ms();
    for n in &nodes {
        writeln!(
            out,
            "  {:<5} {:<28} v{} {}{} workers={} in-flight={} busy={:>3.0}% up {}s (seen {}s ago)",
            n.role,
            n.node,
            n.version,
            n.backend,
            if n.devices > 0 {
                format!("×{}", n.devices)
            } else {
                String::new()
            },
            n.workers,
            n.partitions_in_flight,
            n.busy_fraction * 100.0,
            now.saturating_sub(n.started_at_ms) / 1000,
            now.saturating_sub(n.updated_at_ms) / 1000,
        )?;
    }
    writeln!(out, "queues:")?;
    for name in [JOBS_STREAM, WORK_STREAM] {
        writeln!(
            out,
            "  {name}: {} waiting",
            topology.stream_depth(name).await?
        )?;
    }
    let jobs = recent_jobs(topology).await?;
    let in_flight: Vec<&JobRecord> = jobs.iter().filter(|j| !j.status.is_final()).collect();
    writeln!(out, "jobs in flight ({}):", in_flight.len())?;
    for job in in_flight {
        let (synthesized, proved) = progress(job);
        let states: String = job
            .partitions
            .iter()
            .map(|p| match p.status {
                PartitionStatus::Pending => '.',
                PartitionStatus::Queued => 'q',
                PartitionStatus::Proved => 'P',
            })
            .collect();
        writeln!(
            out,
            "  {:<24} {:<8} {:?} synthesized {synthesized}/{n} proved {proved}/{n} [{states}] age {}s",
            job.job_id,
            job.circuit,
            job.status,
            now.saturating_sub(job.submitted_at_ms) / 1000,
            n = job.partitions.len(),
        )?;
    }
    let cutoff = now.saturating_sub(RECENT_FAILURES.as_millis() as u64);
    let failures: Vec<&JobRecord> = jobs
        .iter()
        .filter(|j| j.status == JobStatus::Failed && j.updated_at_ms >= cutoff)
        .take(10)
        .collect();
    writeln!(out, "recent failures ({}):", failures.len())?;
    for job in failures {
        writeln!(
            out,
            "  {:<24} {}s ago: {}",
            job.job_id,
            now.saturating_sub(job.updated_at_ms) / 1000,
            job.error.as_deref().unwrap_or("?")
        )?;
    }
    write!(out, "(jobs read from the last {STATUS_SCAN} record updates; partitions: . pending, q queued, P proved)")?;
    Ok(out)
}

/// Shows a job's progress until its record is final and returns that record: a progress bar on
/// a terminal, a line per change otherwise (logs, CI).
pub async fn follow(jobs_kv: &kv::Store, job_id: &str) -> anyhow::Result<JobRecord> {
    let mut watch = jobs_kv.watch_with_history(job_id).await?;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] [{bar:30}] {pos}/{len} proved · {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(job_id.to_owned());
        bar.set_message("waiting in the job queue");
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    if bar.is_none() {
        eprintln!("job {job_id}: waiting for a synth node");
    }
    let mut last = None;
    while let Some(entry) = watch.next().await {
        let entry = entry?;
        if entry.operation != Operation::Put {
            continue;
        }
        let record: JobRecord = serde_json::from_slice(&entry.value)?;
        let (synthesized, proved) = progress(&record);
        let n = record.partitions.len();
        let state = (record.status, synthesized, proved);
        if last != Some(state) {
            last = Some(state);
            let status = format!("{:?}", record.status).to_lowercase();
            match &bar {
                Some(bar) => {
                    bar.set_length(n as u64);
                    bar.set_position(proved as u64);
                    bar.set_message(format!("synthesized {synthesized}/{n} · {status}"));
                }
                None => eprintln!(
                    "job {job_id}: {status}: synthesized {synthesized}/{n}, proved {proved}/{n}"
                ),
            }
        }
        if record.status.is_final() {
            if let Some(bar) = &bar {
                bar.finish();
            }
            return Ok(record);
        }
    }
    anyhow::bail!("the jobs bucket watch ended before job {job_id} did")
}
