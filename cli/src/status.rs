//! What `cuzk status` and `cuzk watch` show, and the progress of `cuzk submit --wait`: node
//! heartbeats, queue depths, the jobs in flight (from the jobs KV bucket) and a job's
//! partitions as they are synthesized and proved.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::Duration;

use cuzk_common::lifecycle::Ledger;
use cuzk_common::nodes;
use cuzk_common::topology::{Topology, JOBS_STREAM, WORK_STREAM};
use cuzk_wire::job::{unix_ms, JobRecord, JobStatus, PartitionStatus};
use indicatif::{ProgressBar, ProgressStyle};

/// How many of the most recent job-record writes `cuzk status` reads: bounds the scan on a
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
    let jobs = Ledger::new(topology).recent(STATUS_SCAN).await?;
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
            job.key(),
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
            job.key(),
            now.saturating_sub(job.updated_at_ms) / 1000,
            job.error.as_deref().unwrap_or("?")
        )?;
    }
    write!(out, "(jobs read from the last {STATUS_SCAN} record updates; partitions: . pending, q queued, P proved)")?;
    Ok(out)
}

/// A tenant's most recently updated jobs (`None`: every job, the admin's), as a synth node
/// lists them on `cuzk.control.jobs.<tenant>`: a tenant may read its own records one by one but
/// not the bucket in stream order. Records come without results and partition proofs.
pub async fn listing(
    client: &async_nats::Client,
    tenant: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<Vec<JobRecord>> {
    use anyhow::Context as _;
    let subject = cuzk_common::topology::jobs_subject(tenant);
    let asked = client.request(subject.clone(), "{}".into());
    let reply = tokio::time::timeout(timeout, asked)
        .await
        .with_context(|| format!("no synth node answered on {subject} within {timeout:?}"))?
        .with_context(|| format!("asking {subject}"))?;
    let reply = cuzk_wire::control::JobsReply::parse(&reply.payload)?;
    if let Some(error) = reply.error {
        anyhow::bail!("listing jobs failed: {error}");
    }
    Ok(reply.jobs)
}

/// How often a follower reads the job's record.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// Shows the progress of the job with key `job_id` (`<tenant>.<id>` for a tenant's,
/// `cuzk_wire::job::job_key`) until its record is final and returns that record: a progress
/// bar on a terminal, a line per change otherwise (logs, CI). Reads the record through the
/// ledger every quarter second (no consumer, so a client role needs only to read its records).
pub async fn follow(ledger: &Ledger, job_id: &str) -> anyhow::Result<JobRecord> {
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
    let mut ticker = tokio::time::interval(FOLLOW_EVERY);
    loop {
        ticker.tick().await;
        let Some(record) = ledger.get(job_id).await? else {
            continue;
        };
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
}
