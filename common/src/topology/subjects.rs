//! The cluster's subjects: where jobs are submitted, results published and control requests
//! sent, and who a message came from by the subject it came on.

use cuzk_wire::job::{job_key, valid_tenant, Priority};

/// Where the untenanted path publishes jobs (`nats pub cuzk.jobs.submit '{...}'`): the admin's,
/// or anyone's on a server without users. A tenant publishes on its own
/// [`submit_subject`], `cuzk.jobs.submit.<tenant>`.
pub const SUBJECT_SUBMIT: &str = "cuzk.jobs.submit";
/// Where untenanted jobs with `"priority": "high"` must be published (a tenant's:
/// `cuzk.jobs.submit.<tenant>.high`): only roles allowed to use high priority may publish there
/// (deploy/nats/accounts.conf); intake refuses high priority elsewhere.
pub const SUBJECT_SUBMIT_HIGH: &str = "cuzk.jobs.submit.high";
pub const SUBJECT_WORK_HIGH: &str = "cuzk.work.high";
pub const SUBJECT_WORK_NORMAL: &str = "cuzk.work.normal";
/// The server announces here (suffixed `.<stream>.<consumer>`) a message that reached
/// `MAX_DELIVER` without an ack.
pub const ADVISORY_MAX_DELIVERIES: &str = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES";
/// Results of untenanted jobs whose submission carried no usable job id (a tenant's:
/// `cuzk.results.<tenant>._malformed`, [`malformed_key`]).
pub const SUBJECT_RESULTS_MALFORMED: &str = "cuzk.results._malformed";
/// The ledger publishes results here, into `CUZK_RESULTS`; the stream republishes each message
/// it stores to `cuzk.results.<job_id>`, where clients listen. A publish retried after a lost
/// ack is dropped by the stream's dedup window before it reaches any subscriber, which a
/// publish straight to `cuzk.results.<job_id>` cannot promise (core subscribers get every
/// publish, stored or not).
pub(super) const LEDGER_RESULTS: &str = "cuzk.ledger.results";

/// Cancel requests (`{"job_id": ...}`, request/reply) of the untenanted path, which name any
/// job by its key; a tenant's go to its own [`cancel_subject`], `cuzk.control.cancel.<tenant>`,
/// and reach only its own jobs. Answered by one synth node of the queue group
/// [`CANCEL_QUEUE`], which ends the job through the ledger and deletes its blobs.
pub const SUBJECT_CANCEL: &str = "cuzk.control.cancel";
pub const CANCEL_QUEUE: &str = "cuzk-cancel";
/// Listings of recent jobs (`{}`, request/reply, `cuzk_wire::control::JobsRequest`): every
/// job's on this untenanted subject (the admin's), a tenant's own on
/// `cuzk.control.jobs.<tenant>` ([`jobs_subject`]). Answered by one synth node of
/// [`JOBS_QUEUE`]: reading the jobs bucket in stream order cannot be limited to a prefix by
/// permissions, so a tenant asks a node that can, and that answers with the tenant's records
/// only.
pub const SUBJECT_JOBS: &str = "cuzk.control.jobs";
pub const JOBS_QUEUE: &str = "cuzk-jobs";
/// Proving-key commands (`cuzk_wire::control::SrsRequest`): every GPU node answers, so the
/// requester gathers replies until it has heard the live GPU nodes or its timeout passes.
pub const SUBJECT_SRS: &str = "cuzk.control.srs";

/// Requests to the ledger service (`lifecycle::service`), one subject per operation
/// (`cuzk.ledger.ops.<op>`, [`ledger_op_subject`]) so the server's permissions give each
/// worker role the operations its work needs and no other. Answered by one service of
/// [`LEDGER_QUEUE`].
pub const SUBJECT_LEDGER_OPS: &str = "cuzk.ledger.ops";
pub const LEDGER_QUEUE: &str = "cuzk-ledger";

/// Where the ledger service takes operation `op` ([`SUBJECT_LEDGER_OPS`]).
pub fn ledger_op_subject(op: &str) -> String {
    format!("{SUBJECT_LEDGER_OPS}.{op}")
}

/// Where the result of the job with key `key` (`cuzk_wire::job::job_key`) reaches clients:
/// `cuzk.results.<job_id>`, or `cuzk.results.<tenant>.<job_id>` for a tenant's job — under
/// the tenant's prefix, which only it may subscribe to.
pub fn results_subject(key: &str) -> String {
    format!("cuzk.results.{key}")
}

/// Where the ledger publishes the result of the job with key `key` (or a
/// [`malformed_key`]) and where the results stream stores it.
pub fn ledger_results_subject(key: &str) -> String {
    format!("{LEDGER_RESULTS}.{key}")
}

/// The key a tenant's (or the untenanted path's) submissions without a usable job id are
/// reported under: `_malformed`, `<tenant>._malformed`.
pub fn malformed_key(tenant: Option<&str>) -> String {
    job_key(tenant, "_malformed")
}

/// Where `tenant` (`None`: the untenanted path) submits jobs of `priority`:
/// `cuzk.jobs.submit[.high]`, or `cuzk.jobs.submit.<tenant>[.high]`. The server lets each
/// user publish on its own only (deploy/nats/accounts.conf), so the subject says who
/// submitted: NATS tells a subscriber nothing else about a message's publisher.
pub fn submit_subject(tenant: Option<&str>, priority: Priority) -> String {
    let base = match tenant {
        Some(tenant) => format!("{SUBJECT_SUBMIT}.{tenant}"),
        None => SUBJECT_SUBMIT.to_owned(),
    };
    match priority {
        Priority::High => format!("{base}.high"),
        Priority::Normal => base,
    }
}

/// Who submitted a job message, from the subject it came on ([`submit_subject`]'s inverse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `None`: the untenanted path.
    pub tenant: Option<String>,
    /// It came on a high-priority subject.
    pub high: bool,
}

/// The submitter of a message on `subject`; `None` for a subject of the jobs stream that is
/// no submit subject (only the admin may publish one).
pub fn origin(subject: &str) -> Option<Origin> {
    let rest = subject.strip_prefix(SUBJECT_SUBMIT)?;
    let tokens: Vec<&str> = match rest {
        "" => Vec::new(),
        rest => rest.strip_prefix('.')?.split('.').collect(),
    };
    let (tenant, high) = match tokens[..] {
        [] => (None, false),
        ["high"] => (None, true),
        [tenant] => (Some(tenant), false),
        [tenant, "high"] => (Some(tenant), true),
        _ => return None,
    };
    if tenant.is_some_and(|t| !valid_tenant(t)) {
        return None;
    }
    Some(Origin {
        tenant: tenant.map(str::to_owned),
        high,
    })
}

/// Where `tenant` (`None`: the untenanted path) sends cancel requests.
pub fn cancel_subject(tenant: Option<&str>) -> String {
    match tenant {
        Some(tenant) => format!("{SUBJECT_CANCEL}.{tenant}"),
        None => SUBJECT_CANCEL.to_owned(),
    }
}

/// Where `tenant` (`None`: the untenanted path) asks for its recent jobs.
pub fn jobs_subject(tenant: Option<&str>) -> String {
    match tenant {
        Some(tenant) => format!("{SUBJECT_JOBS}.{tenant}"),
        None => SUBJECT_JOBS.to_owned(),
    }
}

/// The tenant a control request on `subject` came from, under the untenanted `base`
/// ([`SUBJECT_CANCEL`], [`SUBJECT_JOBS`]): `Some(None)` on `base` itself, `Some(Some(t))` on
/// `base.<t>`, `None` on anything else.
pub fn control_tenant<'a>(base: &str, subject: &'a str) -> Option<Option<&'a str>> {
    match subject.strip_prefix(base)? {
        "" => Some(None),
        rest => {
            let tenant = rest.strip_prefix('.')?;
            valid_tenant(tenant).then_some(Some(tenant))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each tenant's subjects parse back to it; `high` stays the untenanted priority subject,
    /// and nothing else under `cuzk.jobs.submit` passes for a submit subject.
    #[test]
    fn submit_subjects_name_their_tenant() {
        for tenant in [None, Some("alice"), Some("submit")] {
            for (priority, high) in [(Priority::Normal, false), (Priority::High, true)] {
                let subject = submit_subject(tenant, priority);
                let origin = origin(&subject).unwrap();
                assert_eq!(origin.tenant.as_deref(), tenant, "{subject}");
                assert_eq!(origin.high, high, "{subject}");
            }
        }
        assert_eq!(
            submit_subject(Some("alice"), Priority::High),
            "cuzk.jobs.submit.alice.high"
        );
        assert_eq!(submit_subject(None, Priority::Normal), SUBJECT_SUBMIT);
        assert_eq!(submit_subject(None, Priority::High), SUBJECT_SUBMIT_HIGH);
        for other in [
            "cuzk.jobs.rogue",
            "cuzk.jobs.submitx",
            "cuzk.jobs.submit.alice.low",
            "cuzk.jobs.submit.a.b.high",
            "cuzk.jobs.submit.a*b",
        ] {
            assert_eq!(origin(other), None, "{other}");
        }
        assert_eq!(control_tenant(SUBJECT_CANCEL, SUBJECT_CANCEL), Some(None));
        let alice = cancel_subject(Some("alice"));
        assert_eq!(control_tenant(SUBJECT_CANCEL, &alice), Some(Some("alice")));
        assert_eq!(control_tenant(SUBJECT_CANCEL, "cuzk.control.cancelx"), None);
        assert_eq!(control_tenant(SUBJECT_JOBS, "cuzk.control.jobs.a.b"), None);
        assert_eq!(
            results_subject(&job_key(Some("alice"), "j")),
            "cuzk.results.alice.j"
        );
        assert_eq!(malformed_key(Some("alice")), "alice._malformed");
    }
}
