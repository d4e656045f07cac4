//! A `SubmitProofRequest` checked and turned into a cluster job: a plain function of the
//! request, so every refusal is decided here before anything reaches NATS.
//!
//! PoRep C2: the request carries the C1 output exactly as Curio has it (filecoin-proofs-api
//! JSON, or the lotus wrapper, or filecoin-proofs' own form: `cuzk_circuits::porep_c1` tells
//! them apart); the job carries those bytes unchanged — the synth node detects the form again —
//! with the sector, miner and proof from the request, which must agree with what the C1 output
//! says about itself. WindowPoSt / WinningPoSt: the request's `vanilla_proofs` (one bincode
//! `FallbackPoStSectorProof` per sector) become the job input `{"vanilla_proofs": [base64, …]}`
//! of a `window-post` / `winning-post` job, with proof, miner, randomness and partition as its
//! parameters (`cuzk_circuits::post`). SnapDeals: the request's `vanilla_proofs` (one bincode
//! `PartitionProof` per partition) become the same input of a `snap-deals` job, with the
//! sector size of its `registered_proof` (lotus' `RegisteredUpdateProof`) and the three
//! commitments as its parameters (`cuzk_circuits::snap`).

use bytes::Bytes;
use cuzk_wire::excerpt;
use cuzk_wire::job::{valid_job_id, JobInput, JobSpec, Priority, JOB_SPEC_VERSION};
use sha2::{Digest, Sha256};

use crate::proto::{self, ProofKind, SubmitProofRequest};

/// The kinds a cluster built with Filecoin proofs proves.
const PROVED: &str = "POREP_SEAL_COMMIT, SNAP_DEALS_UPDATE, WINDOW_POST_PARTITION, WINNING_POST";

/// WindowPoSt or WinningPoSt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PostKind {
    Window,
    Winning,
}

/// Why a request is refused; each maps onto one gRPC status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The request cannot be proved as sent (`INVALID_ARGUMENT`).
    #[error("{0}")]
    Invalid(String),
    /// The cluster has no such proof kind (`UNIMPLEMENTED`).
    #[error("{0}")]
    Unimplemented(String),
}

impl From<RequestError> for tonic::Status {
    fn from(e: RequestError) -> tonic::Status {
        match e {
            RequestError::Invalid(m) => tonic::Status::invalid_argument(m),
            RequestError::Unimplemented(m) => tonic::Status::unimplemented(m),
        }
    }
}

/// The job for `request` sent by `owner` (`None`: the gateway is open) and its input bytes:
/// the job id is the request's first ([`attempt_id`] names the others), and the job's `input`
/// is filled in when the bytes are staged.
pub fn job_for(
    request: SubmitProofRequest,
    owner: Option<&str>,
) -> Result<(JobSpec, Bytes), RequestError> {
    if request.request_id.len() > MAX_REQUEST_ID_BYTES {
        return Err(RequestError::Invalid(format!(
            "request_id {} is over {MAX_REQUEST_ID_BYTES} bytes",
            excerpt(&request.request_id)
        )));
    }
    let kind = ProofKind::try_from(request.proof_kind).map_err(|_| {
        RequestError::Unimplemented(format!(
            "proof kind {} is not one of cuzk.v1.ProofKind; this gateway proves {PROVED}",
            request.proof_kind
        ))
    })?;
    let (circuit, params, input) = match kind {
        ProofKind::Unspecified => {
            return Err(RequestError::Invalid(format!(
                "proof_kind is required ({PROVED})"
            )))
        }
        ProofKind::PorepSealCommit => (
            "porep-c2",
            porep_params(&request)?,
            request.vanilla_proof.clone(),
        ),
        ProofKind::SnapDealsUpdate => snap_job(&request)?,
        ProofKind::WindowPostPartition => post_job(PostKind::Window, &request)?,
        ProofKind::WinningPost => post_job(PostKind::Winning, &request)?,
    };
    let priority = priority(kind, request.priority());
    let spec = JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: job_id(owner, &request.request_id),
        circuit: circuit.into(),
        params,
        input: JobInput::None,
        priority,
    };
    Ok((spec, input))
}

/// Curio's priority as ours: HIGH and CRITICAL are high, LOW and NORMAL normal (the cluster has
/// no lower class), and an unspecified one follows the kind — PoSt has a deadline on chain
/// (WinningPoSt within the epoch), so it is high; PoRep and SnapDeals are normal. A high job is
/// published on the high-priority submit subject (`cuzk_cli::submit::submit_subject`).
fn priority(kind: ProofKind, requested: proto::Priority) -> Priority {
    match requested {
        proto::Priority::High | proto::Priority::Critical => Priority::High,
        proto::Priority::Low | proto::Priority::Normal => Priority::Normal,
        proto::Priority::Unspecified => match kind {
            ProofKind::WindowPostPartition | ProofKind::WinningPost => Priority::High,
            _ => Priority::Normal,
        },
    }
}

/// Longest `request_id` taken: Curio's are `porep-<miner>-<sector>` and the like.
pub const MAX_REQUEST_ID_BYTES: usize = 256;

/// How many jobs one request id may start: a job that failed or was cancelled may be tried
/// again under the same id, each attempt a job of its own.
pub const MAX_ATTEMPTS: u32 = 16;

/// How much of the request id a job id shows.
const READABLE: usize = 32;

/// The first job id of a request: the request id (readable where it can be) and a key, the
/// SHA-256 of the submitting client's name and the request id, so the same client retrying
/// the same request id names the same job on every gateway and after restarts. A client's jobs
/// start `gw_<tag>-`, its tag the SHA-256 of its name: the gateway tells a client's jobs from
/// others' by their ids alone ([`owned_by`]). Without a request id, the key is random.
fn job_id(owner: Option<&str>, request_id: &str) -> String {
    let readable: String = request_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(READABLE)
        .collect();
    let key = match request_id.is_empty() {
        true => format!("{:016x}", rand::random::<u64>()),
        false => {
            let mut hasher = Sha256::new();
            hasher.update(owner.unwrap_or_default());
            hasher.update([0]);
            hasher.update(request_id);
            hex::encode(&hasher.finalize()[..8])
        }
    };
    let mut id = match owner {
        Some(name) => format!("gw_{}-", owner_tag(name)),
        None => "gw-".to_owned(),
    };
    if !readable.is_empty() {
        id.push_str(&readable);
        id.push('-');
    }
    id.push_str(&key);
    debug_assert!(valid_job_id(&attempt_id(&id, MAX_ATTEMPTS - 1)), "{id}");
    id
}

/// The id of attempt `n` (from 0) of the request whose first job id is `first`.
pub fn attempt_id(first: &str, n: u32) -> String {
    match n {
        0 => first.to_owned(),
        n => format!("{first}-{n}"),
    }
}

fn owner_tag(client: &str) -> String {
    hex::encode(&Sha256::digest(client.as_bytes())[..4])
}

/// Whether `job_id` is a job that `client` submitted through a gateway.
pub fn owned_by(job_id: &str, client: &str) -> bool {
    job_id
        .strip_prefix("gw_")
        .and_then(|rest| rest.strip_prefix(owner_tag(client).as_str()))
        .is_some_and(|rest| rest.starts_with('-'))
}

#[cfg(feature = "porep")]
fn porep_params(request: &SubmitProofRequest) -> Result<serde_json::Value, RequestError> {
    use cuzk_circuits::porep::MAX_C1_BYTES;
    use cuzk_circuits::porep_c1::{self, SealProof};

    let invalid = RequestError::Invalid;
    let c1 = &request.vanilla_proof;
    if c1.is_empty() {
        return Err(invalid(
            "vanilla_proof is empty: a PoRep C2 request carries the C1 output".into(),
        ));
    }
    if c1.len() > MAX_C1_BYTES {
        return Err(invalid(format!(
            "vanilla_proof has {} bytes, over {MAX_C1_BYTES}: not a C1 output",
            c1.len()
        )));
    }
    let proof = SealProof::from_id(request.registered_proof).map_err(invalid)?;
    check_sector_size(request, proof.size.bytes(), &proof.api_name())?;
    let detected = porep_c1::detect(c1)
        .map_err(|e| invalid(format!("vanilla_proof is not a C1 output: {e}")))?;
    if let Some(named) = detected.proof.filter(|named| *named != proof) {
        return Err(invalid(format!(
            "registered_proof {} is {}, but the C1 output is a {} proof",
            request.registered_proof,
            proof.api_name(),
            named.api_name()
        )));
    }
    if let Some(number) = detected
        .sector_number
        .filter(|n| *n != request.sector_number)
    {
        return Err(invalid(format!(
            "sector_number {}, but the C1 output is for sector {number}",
            request.sector_number
        )));
    }
    let mut params = serde_json::json!({
        "sector_size": proof.size.name(),
        "sector_id": request.sector_number,
        "miner": request.miner_id,
    });
    // Only a C1 output that does not name its proof needs the job to.
    if detected.proof.is_none() {
        params["proof"] = proof.api_name().into();
    }
    Ok(params)
}

/// A request's `sector_size` is optional (0), else that of its `registered_proof`.
#[cfg(feature = "porep")]
fn check_sector_size(
    request: &SubmitProofRequest,
    bytes: u64,
    proof: &str,
) -> Result<(), RequestError> {
    if request.sector_size == 0 || request.sector_size == bytes {
        return Ok(());
    }
    Err(RequestError::Invalid(format!(
        "sector_size {} does not match registered_proof {} ({proof})",
        request.sector_size, request.registered_proof
    )))
}

/// The `window-post` / `winning-post` job for a PoSt request: its parameters and input.
#[cfg(feature = "porep")]
fn post_job(
    kind: PostKind,
    request: &SubmitProofRequest,
) -> Result<(&'static str, serde_json::Value, Bytes), RequestError> {
    use cuzk_circuits::post::{self, PostProof, MAX_POST_INPUT_BYTES};

    let invalid = RequestError::Invalid;
    let kind = match kind {
        PostKind::Window => post::PostKind::Window,
        PostKind::Winning => post::PostKind::Winning,
    };
    let proof = PostProof::from_id(request.registered_proof).map_err(invalid)?;
    if proof.kind != kind {
        return Err(invalid(format!(
            "registered_proof {} is {}, not a {} proof",
            request.registered_proof,
            proof.api_name(),
            kind.circuit()
        )));
    }
    check_sector_size(request, proof.size.bytes(), &proof.api_name())?;
    let randomness: [u8; 32] = request.randomness[..].try_into().map_err(|_| {
        invalid(format!(
            "randomness has {} bytes; a PoSt challenge seed has 32",
            request.randomness.len()
        ))
    })?;
    let proofs = &request.vanilla_proofs;
    if proofs.is_empty() {
        return Err(invalid(
            "vanilla_proofs is empty: a PoSt request carries one vanilla proof per sector (field 11)"
                .into(),
        ));
    }
    if kind == post::PostKind::Winning && request.partition_index != 0 {
        return Err(invalid(format!(
            "partition_index {}: WinningPoSt has one partition",
            request.partition_index
        )));
    }
    let max = proof.max_sectors();
    if proofs.len() > max {
        return Err(invalid(format!(
            "{} vanilla proofs; {} takes at most {max}",
            proofs.len(),
            proof.api_name()
        )));
    }
    let input = vanilla_input(proofs, MAX_POST_INPUT_BYTES, "a PoSt job")?;
    let mut params = serde_json::json!({
        "sector_size": proof.size.name(),
        "proof": proof.api_name(),
        "miner": request.miner_id,
        "randomness": hex::encode(randomness),
    });
    if kind == post::PostKind::Window {
        params["partition_index"] = request.partition_index.into();
    }
    Ok((kind.circuit(), params, input))
}

/// The job input `{"vanilla_proofs": [base64, …]}` of `proofs`, if at most `max` bytes.
#[cfg(feature = "porep")]
fn vanilla_input(proofs: &[Bytes], max: usize, job: &str) -> Result<Bytes, RequestError> {
    use base64::Engine;
    let raw: usize = proofs.iter().map(|p| p.len()).sum();
    // base64 grows the proofs by a third; the JSON around them is small.
    if raw / 3 * 4 + 64 * proofs.len() > max {
        return Err(RequestError::Invalid(format!(
            "vanilla_proofs hold {raw} bytes, over what {job} takes ({max} bytes as base64)"
        )));
    }
    let b64 = &base64::engine::general_purpose::STANDARD;
    let input = serde_json::json!({
        "vanilla_proofs": proofs.iter().map(|p| b64.encode(p)).collect::<Vec<_>>()
    });
    Ok(serde_json::to_vec(&input)
        .expect("JSON of strings serializes")
        .into())
}

/// The `snap-deals` job for a SnapDeals request: its parameters and input.
#[cfg(feature = "porep")]
fn snap_job(
    request: &SubmitProofRequest,
) -> Result<(&'static str, serde_json::Value, Bytes), RequestError> {
    use cuzk_circuits::snap::{self, SnapFamily, MAX_SNAP_INPUT_BYTES};

    let invalid = RequestError::Invalid;
    let size = snap::size_of_update_proof(request.registered_proof).map_err(invalid)?;
    let name = snap::api_name(size);
    check_sector_size(request, size.bytes(), &name)?;
    let proofs = &request.vanilla_proofs;
    let partitions = snap::partitions(size);
    if proofs.len() != partitions {
        return Err(invalid(format!(
            "{} vanilla proofs; {name} takes {partitions}, one PartitionProof per partition (field 11)",
            proofs.len()
        )));
    }
    let commitment = |field: &str, bytes: &Bytes| {
        if bytes.len() == 32 {
            Ok(hex::encode(bytes))
        } else {
            Err(invalid(format!(
                "{field} has {} bytes; a SnapDeals commitment has 32",
                bytes.len()
            )))
        }
    };
    let params = serde_json::json!({
        "sector_size": size.name(),
        "comm_r_old": commitment("comm_r_old", &request.comm_r_old)?,
        "comm_r_new": commitment("comm_r_new", &request.comm_r_new)?,
        "comm_d_new": commitment("comm_d_new", &request.comm_d_new)?,
    });
    // Refused here rather than in synthesis: commitments that are not field elements.
    SnapFamily::from_params(&params).map_err(|e| invalid(e.to_string()))?;
    let input = vanilla_input(proofs, MAX_SNAP_INPUT_BYTES, "a SnapDeals job")?;
    Ok(("snap-deals", params, input))
}

#[cfg(not(feature = "porep"))]
fn post_job(
    _: PostKind,
    _: &SubmitProofRequest,
) -> Result<(&'static str, serde_json::Value, Bytes), RequestError> {
    Err(RequestError::Unimplemented(
        "PoSt: this gateway was built without Filecoin proofs (feature `porep`)".into(),
    ))
}

#[cfg(not(feature = "porep"))]
fn snap_job(
    _: &SubmitProofRequest,
) -> Result<(&'static str, serde_json::Value, Bytes), RequestError> {
    Err(RequestError::Unimplemented(
        "SNAP_DEALS_UPDATE: this gateway was built without Filecoin proofs (feature `porep`)"
            .into(),
    ))
}

#[cfg(not(feature = "porep"))]
fn porep_params(_: &SubmitProofRequest) -> Result<serde_json::Value, RequestError> {
    Err(RequestError::Unimplemented(
        "POREP_SEAL_COMMIT: this gateway was built without PoRep (feature `porep`)".into(),
    ))
}

#[cfg(all(test, feature = "porep"))]
mod tests;
