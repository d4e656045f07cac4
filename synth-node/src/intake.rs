//! The synth node's picker side: a job message becomes an admitted job (its record created or
//! resumed, its input loaded) or is refused with the reason. Everything a submission can get
//! wrong is found here, before any synthesis: a subject that is no submit subject, malformed
//! JSON, an unknown circuit or bad parameters, `high` priority on an ordinary subject, an input
//! object in another bucket than the submitter's own, a job over the size cap or a partition
//! over the node's memory budget, a missing input.
//!
//! Who submitted a job is what its subject says (`topology::origin`): NATS tells a subscriber
//! nothing about a message's publisher, but the server lets each user publish on its own
//! tenant's submit subjects only (deploy/nats/accounts.conf). The tenant is recorded with the
//! job and names it everywhere after (its key, `cuzk_wire::job::job_key`).
//!
//! Intake is two steps. [`claim`] judges the message and records the job (or finds who holds
//! its id); the picker waits for it before taking the next message, so one node claims ids in
//! the stream's order and the first submission of an id is the one that stands. Loading the
//! input ([`Claimed::load`]), which can take seconds for a large object, comes after and runs
//! beside the next claims.

use std::sync::Arc;

use base64::Engine;
use cuzk_circuits::CircuitFamily;
use cuzk_common::lifecycle::{Admission, JobShape, Ledger};
use cuzk_common::metrics::JobLabels;
use cuzk_common::objects;
use cuzk_common::policy::StepError;
use cuzk_common::topology::{self, Origin, Topology, INPUTS_BUCKET};
use cuzk_wire::job::{inputs_bucket_of, job_key, JobInput, JobSpec, Priority};
use tracing::info;

use crate::budget::partition_bytes;

/// One delivery of a job message.
#[derive(Debug, Clone)]
pub struct Submission {
    pub seq: u64,
    pub delivered: i64,
    pub published_ms: u64,
    pub subject: String,
}

impl Submission {
    /// Who submitted it; `None` when its subject is no submit subject.
    pub fn origin(&self) -> Option<Origin> {
        topology::origin(&self.subject)
    }

    /// The tenant its subject names (`None`: the untenanted path, or no submit subject: such a
    /// job is refused, and answered as untenanted).
    pub fn tenant(&self) -> Option<String> {
        self.origin().and_then(|o| o.tenant)
    }
}

/// What intake checks a job against.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_job_constraints: u64,
    pub max_inline_input: usize,
    /// The node's memory budget: one partition must fit in it.
    pub memory_budget: u64,
    /// Whether synthetic jobs (random data, for timings) are accepted.
    pub allow_synthetic: bool,
}

/// A job admitted for synthesis.
pub struct Admitted {
    pub spec: JobSpec,
    /// Its key ([`job_key`]: its id under the tenant that submitted it): what its record, work
    /// items and blobs are named by.
    pub key: String,
    pub circuit: Arc<dyn CircuitFamily>,
    /// The `circuit` and `shape` labels of its measurements.
    pub labels: JobLabels,
    pub input: Arc<Vec<u8>>,
    pub seq: u64,
    /// The delivery of the job's message this node holds it by: its record writes are refused
    /// once a later delivery resumes the job.
    pub attempt: u32,
    /// Partitions still to synthesize (all of them, unless the job is resumed).
    pub pending: Vec<usize>,
    /// Bytes each partition holds at its peak.
    pub partition_bytes: u64,
}

/// A job whose record this submission holds, its input not loaded yet (empty).
pub struct Claimed(Admitted);

pub enum Intake {
    /// Boxed: an admitted job is large, the other answer empty.
    Run(Box<Claimed>),
    /// Nothing to do: a duplicate submission, or a job that has already ended.
    Settled,
}

/// Judges the job in `body` and records it, or says why not. `job_id` and `labels` are filled
/// in as soon as they are known, so that a failure is reported on the job's own subject and
/// counted under its circuit.
pub async fn claim(
    ledger: &Ledger,
    limits: &Limits,
    body: &[u8],
    submission: &Submission,
    job_id: &mut Option<String>,
    labels: &mut Option<JobLabels>,
) -> Result<Intake, StepError> {
    let spec = match JobSpec::parse(body) {
        Ok(spec) => spec,
        Err((recovered, e)) => {
            if recovered.is_some() {
                *job_id = recovered;
            }
            return Err(StepError::Fatal(e.to_string()));
        }
    };
    *job_id = Some(spec.job_id.clone());
    let Some(origin) = submission.origin() else {
        return Err(StepError::Fatal(format!(
            "this job came on {}, which is no submit subject ({} or {}.<tenant>, each with .high for priority high)",
            submission.subject,
            topology::SUBJECT_SUBMIT,
            topology::SUBJECT_SUBMIT
        )));
    };
    let tenant = origin.tenant.as_deref();
    let key = job_key(tenant, &spec.job_id);
    tracing::Span::current().record("cuzk.job_id", key.as_str());
    // One round trip claims a new job: the record is created without a look first. A duplicate
    // is told apart when the create fails (`Ledger::admit`), or, if it fails a check first, when
    // its refusal meets the original's record (`Ledger::refuse`): either way the original
    // stands and no second answer goes out.
    if spec.priority == Priority::High && !origin.high {
        let high = topology::submit_subject(tenant, Priority::High);
        return Err(StepError::Fatal(format!(
            "priority high must be submitted on {high}, which only roles allowed to use it may publish; \
             this job came on {}",
            submission.subject
        )));
    }
    check_input_bucket(tenant, &spec.input)?;
    let circuit = cuzk_circuits::resolve(&spec.circuit, &spec.params)
        .map_err(|e| StepError::Fatal(e.to_string()))?;
    let job_labels = JobLabels::new(&spec.circuit, &circuit.shape_key());
    *labels = Some(job_labels.clone());
    if circuit.synthetic() && !limits.allow_synthetic {
        return Err(StepError::Fatal(
            "synthetic jobs (random data, for timings) are not accepted here: start the nodes with --allow-synthetic".into(),
        ));
    }
    let bytes = check_size(&*circuit, limits)?;
    check_inline_input(limits, tenant, &spec.input)?;
    let admission = ledger
        .admit(
            &spec,
            tenant,
            JobShape {
                partitions: circuit.partitions(),
                synthetic: circuit.synthetic(),
                shape_key: &circuit.shape_key(),
            },
            submission.seq,
            submission.published_ms,
            submission.delivered as u32,
        )
        .await?;
    let record = match admission {
        Admission::New(record) | Admission::Resume(record) => record,
        Admission::Duplicate(_) => {
            info!(job = %key, seq = submission.seq, "duplicate submission ignored; the original stands");
            return Ok(Intake::Settled);
        }
        Admission::Ended(record) => {
            // An unpublished result of an ended job is the sweeper's to publish, after a grace
            // on its own clock.
            info!(job = %key, published = record.result_published, "submission of an ended job settled");
            return Ok(Intake::Settled);
        }
    };
    let pending = record
        .partitions
        .iter()
        .enumerate()
        .filter(|(_, p)| p.status == cuzk_wire::job::PartitionStatus::Pending)
        .map(|(i, _)| i)
        .collect();
    Ok(Intake::Run(Box::new(Claimed(Admitted {
        spec,
        key,
        circuit,
        labels: job_labels,
        input: Arc::default(),
        seq: submission.seq,
        attempt: submission.delivered as u32,
        pending,
        partition_bytes: bytes,
    }))))
}

impl Claimed {
    /// Loads the job's input; a failure ends the job this submission holds.
    pub async fn load(self, topology: &Topology) -> Result<Admitted, StepError> {
        let Claimed(mut job) = self;
        let cap = input_cap(&*job.circuit);
        job.input = Arc::new(load_input(topology, &job.spec.input, cap).await?);
        Ok(job)
    }
}

/// Refuses a job over the cluster's size cap, or whose partitions cannot fit this node's
/// memory budget; returns the bytes one partition holds.
fn check_size(circuit: &dyn CircuitFamily, limits: &Limits) -> Result<u64, StepError> {
    let shape = circuit.partition_shape();
    let partitions = circuit.partitions() as u64;
    let total = shape.constraints.saturating_mul(partitions);
    if total > limits.max_job_constraints {
        return Err(StepError::Fatal(format!(
            "job too large: {partitions} partitions × {} constraints = {total} constraints, over this cluster's cap of {} (--synth-max-job-constraints)",
            shape.constraints, limits.max_job_constraints
        )));
    }
    let bytes = partition_bytes(shape);
    if bytes > limits.memory_budget {
        return Err(StepError::Fatal(format!(
            "partition too large for the synth nodes: one partition of {} constraints needs {bytes} bytes, over the memory budget of {} (--synth-memory-budget)",
            shape.constraints, limits.memory_budget
        )));
    }
    Ok(bytes)
}

/// Refuses an input object in any bucket but the submitter's own (the shared one for the
/// untenanted path), before anything is read: synth nodes read every inputs bucket, and a
/// tenant must not have another's inputs proved, nor deleted when its job ends.
pub fn check_input_bucket(tenant: Option<&str>, input: &JobInput) -> Result<(), StepError> {
    let own = inputs_bucket_of(tenant);
    match input.bucket() {
        Some(bucket) if bucket != own => Err(StepError::Fatal(format!(
            "input object in bucket {bucket}: {} may name only its own inputs bucket, {own}",
            match tenant {
                Some(tenant) => format!("tenant {tenant}"),
                None => "an untenanted job".to_owned(),
            }
        ))),
        _ => Ok(()),
    }
}

/// Refuses an inline input over the limit before the job is recorded.
fn check_inline_input(
    limits: &Limits,
    tenant: Option<&str>,
    input: &JobInput,
) -> Result<(), StepError> {
    let limit = limits.max_inline_input;
    let len = match input {
        JobInput::Utf8(text) => text.len(),
        JobInput::Base64(text) => text.len() / 4 * 3,
        JobInput::None | JobInput::Object(_) | JobInput::ObjectIn { .. } => 0,
    };
    if len > limit {
        let how = match tenant {
            Some(_) => "{\"object_in\": {\"bucket\": ..., \"name\": NAME}}",
            None => "{\"object\": NAME}",
        };
        return Err(StepError::Fatal(format!(
            "inline input of {len} bytes exceeds the limit of {limit}; upload it to the {} object store bucket and pass {how}",
            inputs_bucket_of(tenant)
        )));
    }
    Ok(())
}

/// The largest input `circuit` takes: what its synthesis would refuse anyway, so an input
/// object declaring more is refused from its head, before a byte of it is read.
pub fn input_cap(circuit: &dyn CircuitFamily) -> u64 {
    let cap = match circuit.name() {
        #[cfg(feature = "porep")]
        "porep-c2" => cuzk_circuits::porep::MAX_C1_BYTES,
        #[cfg(feature = "porep")]
        "window-post" | "winning-post" => cuzk_circuits::post::MAX_POST_INPUT_BYTES,
        #[cfg(feature = "porep")]
        "snap-deals" => cuzk_circuits::snap::MAX_SNAP_INPUT_BYTES,
        _ => cuzk_circuits::MAX_INPUT_BYTES,
    };
    cap as u64
}

/// The input's bytes (inline sizes were checked by [`claim`]); an input object's head must
/// declare at most `cap` bytes.
async fn load_input(topology: &Topology, input: &JobInput, cap: u64) -> Result<Vec<u8>, StepError> {
    match input {
        JobInput::None => Ok(Vec::new()),
        JobInput::Utf8(text) => Ok(text.as_bytes().to_vec()),
        JobInput::Base64(text) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| StepError::Fatal(format!("input is not valid base64: {e}"))),
        JobInput::Object(name) => {
            let readers = std::slice::from_ref(&topology.js);
            let shared =
                topology::inputs_shards(&topology.js, INPUTS_BUCKET, topology.inputs.clone());
            Ok(objects::read_bounded(&shared, readers, name, cap).await?)
        }
        JobInput::ObjectIn { bucket, name } => {
            let store = topology::open_inputs_bucket(&topology.js, bucket).await?;
            let readers = std::slice::from_ref(&topology.js);
            Ok(objects::read_bounded(&store, readers, name, cap).await?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_job_constraints: 1_000_000,
            max_inline_input: 1024,
            memory_budget: 1 << 30,
            allow_synthetic: false,
        }
    }

    #[test]
    fn the_size_cap_names_the_numbers() {
        let big = cuzk_circuits::MimcFamily::new(100_000, 8).unwrap();
        let e = check_size(&big, &limits()).unwrap_err().to_string();
        assert!(
            e.contains("8 partitions × 200002 constraints = 1600016 constraints, over this cluster's cap of 1000000"),
            "{e}"
        );
        let ok = cuzk_circuits::MimcFamily::new(100_000, 4).unwrap();
        assert_eq!(check_size(&ok, &limits()).unwrap(), 2 * 32 * 200_003);
        let small_budget = Limits {
            memory_budget: 1 << 20,
            ..limits()
        };
        let e = check_size(&ok, &small_budget).unwrap_err().to_string();
        assert!(e.contains("over the memory budget of 1048576"), "{e}");
    }

    /// An input object is taken from the submitter's own bucket only: a tenant's from
    /// `cuzk-inputs-<tenant>`, the untenanted path's from the shared one; anything else is
    /// refused with the reason, before a read.
    #[test]
    fn input_objects_come_from_the_submitters_own_bucket() {
        let object_in = |bucket: &str| JobInput::ObjectIn {
            bucket: bucket.into(),
            name: "x".into(),
        };
        let shared = JobInput::Object("x".into());
        assert!(check_input_bucket(Some("alice"), &object_in("cuzk-inputs-alice")).is_ok());
        assert!(check_input_bucket(None, &shared).is_ok());
        assert!(check_input_bucket(None, &object_in("cuzk-inputs")).is_ok());
        assert!(check_input_bucket(Some("alice"), &JobInput::Utf8("x".into())).is_ok());
        for (tenant, input) in [
            (Some("alice"), object_in("cuzk-inputs-bob")),
            (Some("alice"), shared.clone()),
            (None, object_in("cuzk-inputs-bob")),
        ] {
            let e = check_input_bucket(tenant, &input).unwrap_err().to_string();
            assert!(e.contains("may name only its own inputs bucket"), "{e}");
        }
        let e = check_input_bucket(Some("alice"), &object_in("cuzk-inputs-bob")).unwrap_err();
        assert!(e.to_string().contains("cuzk-inputs-alice"), "{e}");
    }

    #[test]
    fn an_input_object_is_capped_at_what_its_circuit_takes() {
        let mimc = cuzk_circuits::MimcFamily::new(64, 1).unwrap();
        assert_eq!(input_cap(&mimc), cuzk_circuits::MAX_INPUT_BYTES as u64);
    }
}
