//! Listing requests (`cuzk.control.jobs.<tenant>`, `cuzk_wire::control::JobsRequest`): one synth
//! node of the queue group answers with the tenant's most recently updated jobs. The records
//! bucket can be read in stream order only by requests whose filter travels in their payload,
//! which the server's permissions cannot limit to a tenant's keys; so a tenant may read its own
//! records one by one (direct gets under its prefix) and asks here for a listing, which the
//! server lets only its user ask. The untenanted `cuzk.control.jobs` (the admin's) lists every
//! job.

use cuzk_common::lifecycle::Ledger;
use cuzk_common::nats::serve_requests_on;
use cuzk_common::topology::{control_tenant, Topology, JOBS_QUEUE, SUBJECT_JOBS};
use cuzk_wire::control::{JobsReply, JobsRequest, MAX_LISTED_JOBS};
use tokio_util::sync::CancellationToken;

/// Record writes a listing looks through (`cuzk status`'s scan).
pub const LISTING_SCAN: u64 = 2000;

/// A listing's reply stays under this, well within a server's default 1 MiB message: the
/// oldest records are left out past it.
const MAX_REPLY_BYTES: usize = 512 << 10;

pub async fn serve(topology: Topology, ledger: Ledger, shutdown: CancellationToken) {
    let client = topology.js.client();
    let subjects = [SUBJECT_JOBS.to_owned(), format!("{SUBJECT_JOBS}.*")];
    serve_requests_on(
        client,
        &subjects,
        Some(JOBS_QUEUE),
        shutdown,
        |subject, payload| {
            let ledger = &ledger;
            async move { encode(answer(ledger, &subject, &payload).await) }
        },
    )
    .await
}

async fn answer(ledger: &Ledger, subject: &str, request: &[u8]) -> JobsReply {
    let refused = |error: String| JobsReply {
        jobs: Vec::new(),
        error: Some(error),
    };
    if let Err(e) = JobsRequest::parse(request) {
        return refused(e.to_string());
    }
    let Some(tenant) = control_tenant(SUBJECT_JOBS, subject) else {
        return refused(format!("{subject} is no listing subject"));
    };
    match ledger.listing(tenant, LISTING_SCAN, MAX_LISTED_JOBS).await {
        Ok(jobs) => JobsReply { jobs, error: None },
        Err(e) => refused(e.to_string()),
    }
}

/// The reply as JSON, its oldest records left out while it is over [`MAX_REPLY_BYTES`].
fn encode(mut reply: JobsReply) -> Vec<u8> {
    loop {
        let bytes = serde_json::to_vec(&reply).expect("replies serialize");
        if bytes.len() <= MAX_REPLY_BYTES || reply.jobs.is_empty() {
            return bytes;
        }
        let keep = reply.jobs.len() * MAX_REPLY_BYTES / bytes.len();
        reply.jobs.truncate(keep.min(reply.jobs.len() - 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_wire::job::{JobRecord, JobStatus};

    #[test]
    fn a_large_listing_drops_its_oldest() {
        let record = |k: usize| JobRecord {
            job_id: format!("j{k}"),
            tenant: None,
            circuit: "mimc".into(),
            params: serde_json::json!({"pad": "x".repeat(10_000)}),
            status: JobStatus::Done,
            submission_seq: 1,
            submitted_at_ms: 0,
            synth_started_at_ms: 0,
            updated_at_ms: 0,
            partitions: Vec::new(),
            error: None,
            result: None,
            result_published: true,
            intake_attempts: 1,
            synthetic: false,
            shape: String::new(),
            staged_input: None,
        };
        let reply = JobsReply {
            jobs: (0..MAX_LISTED_JOBS).map(record).collect(),
            error: None,
        };
        let bytes = encode(reply);
        assert!(bytes.len() <= MAX_REPLY_BYTES, "{}", bytes.len());
        let back = JobsReply::parse(&bytes).unwrap();
        assert!(back.jobs.len() > 10, "{}", back.jobs.len());
        assert_eq!(back.jobs[0].job_id, "j0", "the newest kept");
    }
}
