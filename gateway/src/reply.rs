//! Cluster state as Curio's replies: a job's result as `AwaitProofResponse` (timings from the
//! job's stage timings), the cluster as `GetStatusResponse` and as Prometheus text. Plain
//! functions of what was read from NATS.

use std::collections::BTreeMap;

use cuzk_wire::job::{unix_ms, JobRecord, JobResult, JobStatus};
use prometheus::{Encoder, IntGaugeVec, Opts, Registry};

use crate::cluster::ClusterView;
use crate::proto::CancelProofResponse;
use crate::proto::{await_proof_response::Status, AwaitProofResponse, GetStatusResponse};
use crate::proto::{GpuStatus, QueueStatus};
use cuzk_wire::control::{CancelOutcome, CancelReply};

/// The queue name of jobs not yet taken by a synth node (their kind is in the message only).
pub const UNASSIGNED_QUEUE: &str = "UNASSIGNED";

/// The proof kind a circuit proves, as Curio names it.
fn proof_kind(circuit: &str) -> String {
    match circuit {
        "porep-c2" => "POREP_SEAL_COMMIT".into(),
        "window-post" => "WINDOW_POST_PARTITION".into(),
        "winning-post" => "WINNING_POST".into(),
        other => other.into(),
    }
}

/// A finished job as Curio's `AwaitProofResponse`. Times are whole milliseconds: the wait for
/// a synth node plus the mean partition wait for a GPU worker; synthesis (witness generation
/// and encoding) and GPU time summed over partitions; submission to result. `srs_load_ms` is
/// 0: GPU nodes load parameters once, not per job.
pub fn await_response(result: &JobResult) -> AwaitProofResponse {
    let t = &result.timings;
    let partitions = f64::from(result.partitions.max(1));
    let mut reply = AwaitProofResponse {
        job_id: result.job_id.clone(),
        queue_wait_ms: (t.job_queue_ms + t.stages.queue_wait_ms / partitions) as u64,
        synthesis_ms: (t.stages.synth_ms + t.stages.encode_ms) as u64,
        gpu_compute_ms: t.stages.prove_ms as u64,
        total_ms: t.total_ms as u64,
        ..Default::default()
    };
    let proof = match (result.status, result.proof.as_deref().map(hex::decode)) {
        (JobStatus::Done, Some(Ok(proof))) => proof,
        (JobStatus::Done, _) => {
            reply.set_status(Status::Failed);
            reply.error_message = "the cluster reported success without a readable proof".into();
            return reply;
        }
        (JobStatus::Cancelled, _) => {
            reply.set_status(Status::Cancelled);
            reply.error_message = result.error.clone().unwrap_or_else(|| "cancelled".into());
            return reply;
        }
        _ => {
            reply.set_status(Status::Failed);
            reply.error_message = result.error.clone().unwrap_or_else(|| "failed".into());
            return reply;
        }
    };
    if !result.verified {
        reply.set_status(Status::Failed);
        reply.error_message = "the GPU node could not verify the proof it made".into();
        return reply;
    }
    reply.set_status(Status::Completed);
    reply.proof = proof.into();
    reply
}

/// The metadata key of `CancelProof`'s reply that names the job's status after the call
/// (`cancelled`, or how it had ended: Curio's reply has only `was_running`).
pub const JOB_STATUS_METADATA: &str = "cuzk-job-status";

/// A cancel request's answer as `CancelProofResponse`: `was_running` when this call cancelled
/// the job; a job that had ended stays as it was (`was_running` false, its status in the
/// `cuzk-job-status` metadata); an id the cluster does not know is `NOT_FOUND`.
pub fn cancel_response(
    reply: &CancelReply,
) -> Result<tonic::Response<CancelProofResponse>, tonic::Status> {
    let status = match (reply.outcome, reply.status) {
        (CancelOutcome::Unknown, _) | (_, None) => {
            return Err(tonic::Status::not_found(format!(
                "no job {} (never submitted)",
                reply.job_id
            )))
        }
        (_, Some(status)) => status,
    };
    let mut response = tonic::Response::new(CancelProofResponse {
        was_running: reply.outcome == CancelOutcome::Cancelled,
    });
    let value = tonic::metadata::MetadataValue::from_static(status.name());
    response.metadata_mut().insert(JOB_STATUS_METADATA, value);
    Ok(response)
}

/// A job that has not ended within the caller's wait.
pub fn timed_out(job_id: &str) -> AwaitProofResponse {
    let mut reply = AwaitProofResponse {
        job_id: job_id.into(),
        error_message: "the job has not ended yet; await it again".into(),
        ..Default::default()
    };
    reply.set_status(Status::Timeout);
    reply
}

/// In-flight jobs per proof kind, and how many jobs no synth node has taken yet.
fn queues(view: &ClusterView) -> Vec<QueueStatus> {
    let mut kinds: BTreeMap<String, u32> = BTreeMap::new();
    let mut synthesizing = 0u64;
    for job in view.recent_jobs.iter().filter(|j| !j.status.is_final()) {
        *kinds.entry(proof_kind(&job.circuit)).or_default() += 1;
        synthesizing += u64::from(job.status == JobStatus::Synthesizing);
    }
    // A job message stays in the jobs stream until its synth node is done with it.
    let waiting = view.jobs_stream_depth.saturating_sub(synthesizing);
    let mut queues = vec![QueueStatus {
        proof_kind: UNASSIGNED_QUEUE.into(),
        pending: saturate(waiting),
        in_progress: 0,
    }];
    queues.extend(kinds.into_iter().map(|(proof_kind, n)| QueueStatus {
        proof_kind,
        pending: 0,
        in_progress: n,
    }));
    queues
}

fn saturate(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn count(jobs: &[JobRecord], status: JobStatus) -> u64 {
    jobs.iter().filter(|j| j.status == status).count() as u64
}

/// The cluster as Curio's `GetStatusResponse`: one `GPUStatus` per GPU node (its name says the
/// backend and load), the queues, and the proofs completed and failed among the recent job
/// records. GPU nodes report no memory or parameter residency, so those fields stay empty.
pub fn status_response(view: &ClusterView, uptime_seconds: u64) -> GetStatusResponse {
    let gpus = view
        .nodes
        .iter()
        .filter(|n| n.role == "gpu")
        .enumerate()
        .map(|(ordinal, n)| GpuStatus {
            ordinal: ordinal as u32,
            name: format!(
                "{} ({}×{}, {} workers, {} partitions in flight, {:.0}% busy)",
                n.node,
                n.backend,
                n.devices.max(1),
                n.workers,
                n.partitions_in_flight,
                n.busy_fraction * 100.0
            ),
            ..Default::default()
        })
        .collect();
    GetStatusResponse {
        gpus,
        queues: queues(view),
        total_proofs_completed: count(&view.recent_jobs, JobStatus::Done),
        total_proofs_failed: count(&view.recent_jobs, JobStatus::Failed),
        uptime_seconds,
        ..Default::default()
    }
}

/// The cluster's state as Prometheus gauges (`cuzk_cluster_*`), in the text format.
pub fn cluster_metrics(view: &ClusterView) -> Result<String, prometheus::Error> {
    let registry = Registry::new();
    let gauge =
        |name: &str, help: &str, labels: &[&str]| -> Result<IntGaugeVec, prometheus::Error> {
            let gauge = IntGaugeVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(gauge.clone()))?;
            Ok(gauge)
        };
    let nodes = gauge(
        "cuzk_cluster_nodes",
        "Live nodes (heartbeats) by role.",
        &["role"],
    )?;
    let in_flight = gauge(
        "cuzk_cluster_node_partitions_in_flight",
        "Partitions a node holds.",
        &["role", "node"],
    )?;
    let busy = gauge(
        "cuzk_cluster_node_busy_percent",
        "Share of the last heartbeat interval a GPU node's workers spent proving.",
        &["node"],
    )?;
    let streams = gauge(
        "cuzk_cluster_stream_messages",
        "Messages waiting in a work-queue stream.",
        &["stream"],
    )?;
    let queue = gauge(
        "cuzk_cluster_jobs_queued",
        "Jobs waiting (UNASSIGNED) or in progress, by proof kind.",
        &["proof_kind", "state"],
    )?;
    let jobs = gauge(
        "cuzk_cluster_recent_jobs",
        "Jobs among the most recently updated records, by status.",
        &["status"],
    )?;
    for role in ["synth", "gpu"] {
        nodes.with_label_values(&[role]).set(0);
    }
    for n in &view.nodes {
        nodes.with_label_values(&[n.role.as_str()]).inc();
        in_flight
            .with_label_values(&[n.role.as_str(), n.node.as_str()])
            .set(n.partitions_in_flight as i64);
        if n.role == "gpu" {
            busy.with_label_values(&[n.node.as_str()])
                .set((n.busy_fraction * 100.0).round() as i64);
        }
    }
    let streams_depth = [
        (cuzk_common::topology::JOBS_STREAM, view.jobs_stream_depth),
        (cuzk_common::topology::WORK_STREAM, view.work_stream_depth),
    ];
    for (stream, depth) in streams_depth {
        streams.with_label_values(&[stream]).set(depth as i64);
    }
    for q in queues(view) {
        queue
            .with_label_values(&[q.proof_kind.as_str(), "pending"])
            .set(q.pending.into());
        queue
            .with_label_values(&[q.proof_kind.as_str(), "in_progress"])
            .set(q.in_progress.into());
    }
    for status in [
        JobStatus::Synthesizing,
        JobStatus::Proving,
        JobStatus::Done,
        JobStatus::Failed,
        JobStatus::Cancelled,
    ] {
        jobs.with_label_values(&[status.name()])
            .set(count(&view.recent_jobs, status) as i64);
    }
    let mut text = Vec::new();
    prometheus::TextEncoder::new().encode(&registry.gather(), &mut text)?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// Seconds since `started_ms` (Unix milliseconds).
pub fn seconds_since(started_ms: u64) -> u64 {
    unix_ms().saturating_sub(started_ms) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_common::nodes::NodeInfo;
    use cuzk_wire::job::{JobTimings, PartitionTimings};

    fn record(job_id: &str, status: JobStatus) -> JobRecord {
        serde_json::from_value(serde_json::json!({
            "job_id": job_id, "circuit": "porep-c2", "params": {}, "status": status,
            "submission_seq": 1, "submitted_at_ms": 0, "synth_started_at_ms": 0,
            "updated_at_ms": 0, "partitions": []
        }))
        .unwrap()
    }

    #[test]
    fn results_become_await_replies() {
        let mut done = JobResult::failed("j", "");
        done.status = JobStatus::Done;
        done.error = None;
        done.proof = Some("ab".repeat(192));
        done.partitions = 2;
        done.verified = true;
        done.timings = JobTimings {
            total_ms: 1500.7,
            job_queue_ms: 10.0,
            stages: PartitionTimings {
                synth_ms: 800.0,
                encode_ms: 20.0,
                queue_wait_ms: 30.0,
                prove_ms: 400.0,
                ..Default::default()
            },
            assemble_ms: 1.0,
        };
        let reply = await_response(&done);
        assert_eq!(reply.status(), Status::Completed);
        assert_eq!(reply.proof.len(), 192);
        assert_eq!(
            (
                reply.queue_wait_ms,
                reply.synthesis_ms,
                reply.gpu_compute_ms,
                reply.total_ms
            ),
            (25, 820, 400, 1500)
        );
        let unverified = JobResult {
            verified: false,
            ..done.clone()
        };
        assert_eq!(await_response(&unverified).status(), Status::Failed);
        let failed = await_response(&JobResult::failed("j", "C1 does not verify"));
        assert_eq!(failed.status(), Status::Failed);
        assert_eq!(failed.error_message, "C1 does not verify");
        assert!(failed.proof.is_empty());
        assert_eq!(timed_out("j").status(), Status::Timeout);
        let cancelled = await_response(&JobResult::cancelled("j", "cancelled on request"));
        assert_eq!(cancelled.status(), Status::Cancelled);
    }

    #[test]
    fn cancel_replies_say_what_happened() {
        let reply = |outcome, status| CancelReply {
            job_id: "j".into(),
            outcome,
            status,
            error: None,
        };
        let shaped = |r| {
            let response = cancel_response(&r).unwrap();
            let status = response.metadata().get(JOB_STATUS_METADATA).cloned();
            let status = status.unwrap().to_str().unwrap().to_owned();
            (response.into_inner().was_running, status)
        };
        let cancelled = shaped(reply(CancelOutcome::Cancelled, Some(JobStatus::Cancelled)));
        assert_eq!(cancelled, (true, "cancelled".to_owned()));
        let done = shaped(reply(CancelOutcome::AlreadyEnded, Some(JobStatus::Done)));
        assert_eq!(done, (false, "done".to_owned()));
        let unknown = cancel_response(&reply(CancelOutcome::Unknown, None)).unwrap_err();
        assert_eq!(unknown.code(), tonic::Code::NotFound);
    }

    #[test]
    fn status_counts_queues_nodes_and_jobs() {
        let mut gpu = NodeInfo::starting("gpu-a", "gpu", "cpu", 0, 2);
        gpu.partitions_in_flight = 1;
        let view = ClusterView {
            nodes: vec![NodeInfo::starting("synth-a", "synth", "cpu", 0, 4), gpu],
            jobs_stream_depth: 3,
            work_stream_depth: 1,
            recent_jobs: vec![
                record("a", JobStatus::Synthesizing),
                record("b", JobStatus::Proving),
                record("c", JobStatus::Done),
                record("d", JobStatus::Failed),
            ],
        };
        let status = status_response(&view, 9);
        assert_eq!(status.gpus.len(), 1);
        assert!(
            status.gpus[0].name.starts_with("gpu-a"),
            "{}",
            status.gpus[0].name
        );
        // 3 job messages, one of them being synthesized: 2 wait; 2 jobs in progress.
        let queued: Vec<_> = status
            .queues
            .iter()
            .map(|q| (q.proof_kind.as_str(), q.pending, q.in_progress))
            .collect();
        assert_eq!(
            queued,
            [(UNASSIGNED_QUEUE, 2, 0), ("POREP_SEAL_COMMIT", 0, 2)]
        );
        assert_eq!(
            (status.total_proofs_completed, status.total_proofs_failed),
            (1, 1)
        );
        assert_eq!(status.uptime_seconds, 9);

        let text = cluster_metrics(&view).unwrap();
        for line in [
            "cuzk_cluster_nodes{role=\"gpu\"} 1",
            "cuzk_cluster_stream_messages{stream=\"CUZK_JOBS\"} 3",
            "cuzk_cluster_jobs_queued{proof_kind=\"POREP_SEAL_COMMIT\",state=\"in_progress\"} 2",
            "cuzk_cluster_recent_jobs{status=\"failed\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
