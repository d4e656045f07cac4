//! The messages that cross the cluster: the job a client submits (JSON) and the partition work
//! item a synth node hands to GPU nodes (bincode); the job record kept in KV and the result
//! published on `cuzk.results.<job_id>` are `record`'s, named here too.

use std::time::{SystemTime, UNIX_EPOCH};

use bincode::Options;
use serde::{Deserialize, Serialize};

use crate::inputs::InputsDigest;
pub use crate::record::{
    JobRecord, JobResult, JobStatus, PartitionRecord, PartitionStatus, MAX_REASON_BYTES,
    RESULT_VERSION,
};
pub use crate::stage::{JobTimings, PartitionTimings, Stage};

/// The only job spec version this build understands.
pub const JOB_SPEC_VERSION: u32 = 1;
pub const WORK_ITEM_VERSION: u16 = 2;
pub const MAX_JOB_ID_LEN: usize = 64;
/// A work item is a few hundred bytes; anything larger is not ours.
pub const MAX_WORK_ITEM_BYTES: u64 = 64 * 1024;
/// Largest input a synth node takes inline by default (`--synth-max-inline-input`); a job
/// message stays well under the server's 1 MiB `max_payload` even in base64.
pub const DEFAULT_MAX_INLINE_INPUT: usize = 768 * 1024;
/// Header a plain `nats pub -H` can set so that even an unparseable job reports on its own subject.
pub const JOB_ID_HEADER: &str = "Cuzk-Job-Id";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobSpecError {
    #[error("job is not valid JSON: {0}")]
    Json(String),
    #[error("unsupported job spec version {0} (this build speaks version {JOB_SPEC_VERSION})")]
    Version(u32),
    #[error("invalid job id {0:?}: use 1-{MAX_JOB_ID_LEN} characters from [A-Za-z0-9_-]")]
    JobId(String),
    #[error("invalid input: {0}")]
    Input(String),
}

/// Where the circuit's input bytes come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum JobInput {
    #[default]
    None,
    /// UTF-8 text, used as its bytes.
    Utf8(String),
    /// Standard base64.
    Base64(String),
    /// An object in the shared inputs bucket [`INPUTS_BUCKET`] (for inputs larger than a NATS
    /// message).
    Object(String),
    /// An object in a submitter's own inputs bucket, `cuzk-inputs-<submitter>`: NATS
    /// permissions name subjects, and an object's subjects do not carry its name's prefix, so a
    /// bucket per submitter is what keeps submitters out of each other's inputs.
    ObjectIn { bucket: String, name: String },
}

/// The shared inputs bucket (the untenanted path's); a tenant's own is `cuzk-inputs-<tenant>`.
pub const INPUTS_BUCKET: &str = "cuzk-inputs";

/// Whether `name` can be a tenant: 1–32 of `[A-Za-z0-9_-]` (what an inputs bucket's suffix
/// allows, so each tenant has `cuzk-inputs-<tenant>`), and not `high` (the untenanted
/// high-priority subject is `cuzk.jobs.submit.high`).
pub fn valid_tenant(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name != "high"
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `bucket` is an inputs bucket: the shared one, or `cuzk-inputs-<owner>` with the
/// owner's name 1–32 of `[A-Za-z0-9_-]` (bucket names allow no more).
pub fn valid_inputs_bucket(bucket: &str) -> bool {
    match bucket.strip_prefix(INPUTS_BUCKET) {
        Some("") => true,
        Some(rest) => rest.strip_prefix('-').is_some_and(|owner| {
            (1..=32).contains(&owner.len())
                && owner
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        }),
        None => false,
    }
}

/// The only inputs bucket a job of `tenant` may name: the tenant's own, or the shared one for
/// the untenanted path.
pub fn inputs_bucket_of(tenant: Option<&str>) -> String {
    match tenant {
        Some(tenant) => format!("{INPUTS_BUCKET}-{tenant}"),
        None => INPUTS_BUCKET.to_owned(),
    }
}

/// The name a job goes by inside the cluster — its record's key in the jobs bucket, its work
/// items, blobs and results subject: `<tenant>.<job_id>` for a tenant's job, the job id alone
/// for an untenanted one. Job ids are a tenant's own: two tenants' `j1` are two jobs, and a
/// tenant's key is under its own prefix, which the server's permissions pin
/// (deploy/nats/accounts.conf).
pub fn job_key(tenant: Option<&str>, job_id: &str) -> String {
    match tenant {
        Some(tenant) => format!("{tenant}.{job_id}"),
        None => job_id.to_owned(),
    }
}

/// A job key's tenant and job id ([`job_key`]'s inverse: job ids and tenants have no dots).
pub fn split_job_key(key: &str) -> (Option<&str>, &str) {
    match key.split_once('.') {
        Some((tenant, job_id)) => (Some(tenant), job_id),
        None => (None, key),
    }
}

/// Whether `key` is a job key: a job id, or a tenant and a job id.
pub fn valid_job_key(key: &str) -> bool {
    match split_job_key(key) {
        (Some(tenant), job_id) => valid_tenant(tenant) && valid_job_id(job_id),
        (None, job_id) => valid_job_id(job_id),
    }
}

/// The object a client stages a job's large input under, in an inputs bucket (`cuzk submit`,
/// the gateway).
pub fn staged_input_name(job_id: &str) -> String {
    format!("{job_id}.input")
}

/// A job's staged input: the object named for the job ([`staged_input_name`]) in an inputs
/// bucket, deleted when the job ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedInput {
    pub bucket: String,
    pub name: String,
}

impl JobInput {
    /// The inputs bucket this input names, if it is an object.
    pub fn bucket(&self) -> Option<&str> {
        match self {
            JobInput::Object(_) => Some(INPUTS_BUCKET),
            JobInput::ObjectIn { bucket, .. } => Some(bucket),
            _ => None,
        }
    }

    /// The input object staged for job `job_id` of `tenant`, if this input is one. Only the
    /// object named for the job in the tenant's own bucket ([`inputs_bucket_of`]) counts: job
    /// ids are used once within a tenant, so no job can name another job's input — nor another
    /// tenant's — for deletion, and objects a submitter named otherwise are theirs to keep.
    pub fn staged(&self, job_id: &str, tenant: Option<&str>) -> Option<StagedInput> {
        let bucket = self.bucket()?;
        let name = match self {
            JobInput::Object(name) | JobInput::ObjectIn { name, .. } => name,
            _ => return None,
        };
        let own = bucket == inputs_bucket_of(tenant);
        (own && *name == staged_input_name(job_id)).then(|| StagedInput {
            bucket: bucket.to_owned(),
            name: name.clone(),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    High,
    #[default]
    Normal,
}

/// A proving job as a client submits it, e.g.
/// `{"version":1,"job_id":"j1","circuit":"sha256","params":{"blocks":2,"partitions":3},"input":{"utf8":"hello"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub version: u32,
    pub job_id: String,
    pub circuit: String,
    #[serde(default)]
    pub params: serde_json::Value,
    #[serde(default)]
    pub input: JobInput,
    #[serde(default)]
    pub priority: Priority,
}

pub fn valid_job_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_JOB_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl JobSpec {
    /// Parses and validates a submitted job. On failure also returns the job id if one could be
    /// recovered, so the failure can be reported on that job's results subject.
    pub fn parse(body: &[u8]) -> Result<JobSpec, (Option<String>, JobSpecError)> {
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| (None, JobSpecError::Json(e.to_string())))?;
        let recovered_id = value
            .get("job_id")
            .and_then(|v| v.as_str())
            .filter(|id| valid_job_id(id))
            .map(str::to_owned);
        let spec: JobSpec = serde_json::from_value(value)
            .map_err(|e| (recovered_id.clone(), JobSpecError::Json(e.to_string())))?;
        if !valid_job_id(&spec.job_id) {
            return Err((None, JobSpecError::JobId(spec.job_id)));
        }
        let fail = |e| (Some(spec.job_id.clone()), e);
        if spec.version != JOB_SPEC_VERSION {
            return Err(fail(JobSpecError::Version(spec.version)));
        }
        let object = match &spec.input {
            JobInput::Object(name) => Some((INPUTS_BUCKET, name)),
            JobInput::ObjectIn { bucket, name } => Some((bucket.as_str(), name)),
            _ => None,
        };
        if let Some((bucket, name)) = object {
            if name.is_empty() || name.len() > 255 {
                return Err(fail(JobSpecError::Input(format!(
                    "bad object name {name:?}"
                ))));
            }
            if !valid_inputs_bucket(bucket) {
                return Err(fail(JobSpecError::Input(format!(
                    "{bucket:?} is not an inputs bucket ({INPUTS_BUCKET} or {INPUTS_BUCKET}-<submitter>)"
                ))));
            }
        }
        Ok(spec)
    }
}

/// Current wall-clock time as Unix milliseconds (timestamps that cross machines).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The partition work item on the work stream (bincode, bounded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkItem {
    pub version: u16,
    /// The job's key ([`job_key`]): what its record is found by.
    pub job_id: String,
    pub partition: u32,
    pub partitions: u32,
    pub circuit: String,
    /// The job's circuit params as canonical JSON text (bincode cannot carry a JSON value).
    pub params_json: String,
    pub shape_key: String,
    pub blob_object: String,
    /// The partition's public inputs as derived from the job: what its proof is verified
    /// against. `None` for a synthetic job, whose proof is never verified.
    pub public_inputs: Option<InputsDigest>,
    pub published_at_ms: u64,
    pub timings: PartitionTimings,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed work item: {0}")]
pub struct WorkItemError(pub String);

fn bincode_options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_limit(MAX_WORK_ITEM_BYTES)
        .reject_trailing_bytes()
}

impl WorkItem {
    pub fn encode(&self) -> Vec<u8> {
        bincode_options()
            .serialize(self)
            .expect("work item fits its size limit")
    }

    pub fn decode(bytes: &[u8]) -> Result<WorkItem, WorkItemError> {
        if bytes.len() as u64 > MAX_WORK_ITEM_BYTES {
            return Err(WorkItemError(format!(
                "{} bytes exceeds the limit",
                bytes.len()
            )));
        }
        let item: WorkItem = bincode_options()
            .deserialize(bytes)
            .map_err(|e| WorkItemError(e.to_string()))?;
        if item.version != WORK_ITEM_VERSION {
            return Err(WorkItemError(format!(
                "unsupported version {}",
                item.version
            )));
        }
        if !valid_job_key(&item.job_id) || item.partition >= item.partitions {
            return Err(WorkItemError(
                "job id or partition index out of range".into(),
            ));
        }
        Ok(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_spec() {
        let spec = JobSpec::parse(
            br#"{"version":1,"job_id":"j-1","circuit":"sha256","params":{"blocks":2},"input":{"utf8":"hi"},"priority":"high"}"#,
        )
        .unwrap();
        assert_eq!(spec.job_id, "j-1");
        assert_eq!(spec.input, JobInput::Utf8("hi".into()));
        assert_eq!(spec.priority, Priority::High);
    }

    #[test]
    fn defaults_apply() {
        let spec = JobSpec::parse(br#"{"version":1,"job_id":"a","circuit":"mimc"}"#).unwrap();
        assert_eq!(spec.input, JobInput::None);
        assert_eq!(spec.priority, Priority::Normal);
        assert!(spec.params.is_null());
    }

    #[test]
    fn rejections_keep_the_job_id_when_possible() {
        let (id, err) = JobSpec::parse(b"{not json").unwrap_err();
        assert_eq!(id, None);
        assert!(matches!(err, JobSpecError::Json(_)));

        let (id, err) =
            JobSpec::parse(br#"{"version":1,"job_id":"ok","circuit":"x","bogus":1}"#).unwrap_err();
        assert_eq!(id.as_deref(), Some("ok"));
        assert!(err.to_string().contains("bogus"));

        let (id, err) = JobSpec::parse(br#"{"version":2,"job_id":"v","circuit":"x"}"#).unwrap_err();
        assert_eq!((id.as_deref(), err), (Some("v"), JobSpecError::Version(2)));

        let (id, err) =
            JobSpec::parse(br#"{"version":1,"job_id":"a.b","circuit":"x"}"#).unwrap_err();
        assert_eq!(id, None);
        assert!(matches!(err, JobSpecError::JobId(_)));
        assert!(!valid_job_id(&"x".repeat(65)));
    }

    #[test]
    fn inputs_come_from_inputs_buckets_only() {
        let with = |input: &str| {
            JobSpec::parse(
                format!(r#"{{"version":1,"job_id":"i","circuit":"x","input":{input}}}"#).as_bytes(),
            )
        };
        let spec = with(r#"{"object_in":{"bucket":"cuzk-inputs-alice","name":"c1.json"}}"#);
        assert_eq!(
            spec.unwrap().input,
            JobInput::ObjectIn {
                bucket: "cuzk-inputs-alice".into(),
                name: "c1.json".into()
            }
        );
        for bucket in [
            "cuzk-blobs",
            "cuzk-blobs-1",
            "cuzk-inputs-",
            "cuzk-inputsx",
            "cuzk-inputs-a.b",
        ] {
            let input = format!(r#"{{"object_in":{{"bucket":"{bucket}","name":"n"}}}}"#);
            let (_, err) = with(&input).unwrap_err();
            assert!(
                err.to_string().contains("not an inputs bucket"),
                "{bucket}: {err}"
            );
        }
        assert!(valid_inputs_bucket(INPUTS_BUCKET));
        assert!(!valid_inputs_bucket(&format!(
            "cuzk-inputs-{}",
            "a".repeat(33)
        )));
    }

    /// A tenant's job is named under its tenant; the name splits back; a tenant's name is an
    /// inputs bucket's suffix and never `high`.
    #[test]
    fn job_keys_name_the_tenant() {
        assert_eq!(job_key(Some("alice"), "j1"), "alice.j1");
        assert_eq!(job_key(None, "j1"), "j1");
        assert_eq!(split_job_key("alice.j1"), (Some("alice"), "j1"));
        assert_eq!(split_job_key("j1"), (None, "j1"));
        assert!(valid_job_key("alice.j1") && valid_job_key("j1"));
        for bad in ["alice.", ".j1", "a.b.c", "high.j1", "a b.j1", ""] {
            assert!(!valid_job_key(bad), "{bad:?}");
        }
        assert!(valid_tenant("alice_2-x") && !valid_tenant("high") && !valid_tenant(""));
        assert!(!valid_tenant(&"a".repeat(33)) && !valid_tenant("a.b"));
        assert_eq!(inputs_bucket_of(Some("alice")), "cuzk-inputs-alice");
        assert_eq!(inputs_bucket_of(None), INPUTS_BUCKET);
    }

    /// Only the object named for the job, in its tenant's own bucket, is the job's staged input
    /// (deleted when the job ends): never one in another tenant's bucket.
    #[test]
    fn a_staged_input_is_in_the_tenants_own_bucket() {
        let in_bucket = |bucket: &str, name: &str| JobInput::ObjectIn {
            bucket: bucket.into(),
            name: name.into(),
        };
        let own = in_bucket("cuzk-inputs-alice", "j.input");
        assert_eq!(
            own.staged("j", Some("alice")),
            Some(StagedInput {
                bucket: "cuzk-inputs-alice".into(),
                name: "j.input".into()
            })
        );
        assert_eq!(
            own.staged("j", Some("bob")),
            None,
            "another tenant's bucket"
        );
        assert_eq!(
            own.staged("j", None),
            None,
            "untenanted: the shared bucket only"
        );
        assert_eq!(own.staged("k", Some("alice")), None, "another job's object");
        let shared = JobInput::Object("j.input".into());
        assert_eq!(shared.staged("j", None).unwrap().bucket, INPUTS_BUCKET);
        assert_eq!(shared.staged("j", Some("alice")), None);
        assert_eq!(
            in_bucket(INPUTS_BUCKET, "j.input").staged("j", None),
            shared.staged("j", None)
        );
        assert_eq!(JobInput::Utf8("x".into()).bucket(), None);
    }

    #[test]
    fn work_item_roundtrip_and_bounds() {
        let item = WorkItem {
            version: WORK_ITEM_VERSION,
            job_id: "j".into(),
            partition: 1,
            partitions: 3,
            circuit: "sha256".into(),
            params_json: "{}".into(),
            shape_key: "sha256-b1".into(),
            blob_object: "j/1".into(),
            public_inputs: Some(InputsDigest::of(&[blstrs::Scalar::from(7u64)])),
            published_at_ms: 5,
            timings: PartitionTimings {
                synth_ms: 1.5,
                ..Default::default()
            },
        };
        let bytes = item.encode();
        assert_eq!(WorkItem::decode(&bytes).unwrap(), item);
        let tenants = WorkItem {
            job_id: "alice.j".into(),
            ..item.clone()
        };
        assert_eq!(WorkItem::decode(&tenants.encode()).unwrap(), tenants);
        for cut in 0..bytes.len() {
            assert!(WorkItem::decode(&bytes[..cut]).is_err());
        }
        let mut huge_len = bytes.clone();
        huge_len[2] = 0xfd; // varint marker claiming an 8-byte string length
        assert!(WorkItem::decode(&huge_len).is_err());
        let bad = WorkItem {
            partition: 3,
            ..item
        };
        assert!(WorkItem::decode(&bad.encode()).is_err());
    }
}
