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
mod tests {
    use super::*;
    use base64::Engine;

    const API: &[u8] = br#"{"registered_proof":"StackedDrg2KiBV1_1","vanilla_proofs":{}}"#;

    fn lotus(sector: u64) -> Bytes {
        let b64 = base64::engine::general_purpose::STANDARD.encode(API);
        format!(r#"{{"SectorNum":{sector},"Phase1Out":"{b64}","SectorSize":2048}}"#).into()
    }

    fn porep(c1: Bytes) -> SubmitProofRequest {
        SubmitProofRequest {
            request_id: "porep-1234-7".into(),
            proof_kind: ProofKind::PorepSealCommit as i32,
            sector_size: 2048,
            registered_proof: 5,
            vanilla_proof: c1,
            sector_number: 7,
            miner_id: 1234,
            ..Default::default()
        }
    }

    #[test]
    fn a_curio_porep_request_becomes_a_porep_c2_job() {
        let (spec, input) = job_for(porep(lotus(7)), None).unwrap();
        assert_eq!(spec.circuit, "porep-c2");
        assert_eq!(
            spec.params,
            serde_json::json!({"sector_size": "2KiB", "sector_id": 7, "miner": 1234})
        );
        assert_eq!(input, lotus(7));
        assert!(
            spec.job_id.starts_with("gw-porep-1234-7-"),
            "{}",
            spec.job_id
        );
        assert!(valid_job_id(&spec.job_id));
        // A retried request names the same job; another client's, or another request id, not.
        assert_eq!(
            job_for(porep(lotus(7)), None).unwrap().0.job_id,
            spec.job_id
        );
        let curio = job_for(porep(lotus(7)), Some("curio")).unwrap().0.job_id;
        assert_eq!(
            job_for(porep(lotus(7)), Some("curio")).unwrap().0.job_id,
            curio
        );
        assert_ne!(curio, spec.job_id);
        assert!(owned_by(&curio, "curio") && !owned_by(&curio, "other"));
        assert!(!owned_by(&spec.job_id, "curio"));
        assert!(owned_by(&attempt_id(&curio, 3), "curio"));
        let mut other = porep(lotus(7));
        other.request_id = "porep-1234-8".into();
        assert_ne!(job_for(other, None).unwrap().0.job_id, spec.job_id);
        // filecoin-proofs' own form names no proof: the job does.
        let (spec, _) = job_for(
            porep(Bytes::from_static(br#"{"vanilla_proofs":[[]]}"#)),
            None,
        )
        .unwrap();
        assert_eq!(spec.params["proof"], "StackedDrg2KiBV1_1");
        // Long or odd request ids still give a valid id.
        let mut odd = porep(lotus(7));
        odd.request_id = "ü/".repeat(64);
        let long_owner = "n".repeat(64);
        let id = job_for(odd.clone(), Some(&long_owner)).unwrap().0.job_id;
        assert!(valid_job_id(&attempt_id(&id, MAX_ATTEMPTS - 1)), "{id}");
        // A request id is bounded before anything is made of it, and only a prefix is echoed.
        odd.request_id = "x".repeat(48 << 20);
        match job_for(odd, None) {
            Err(RequestError::Invalid(m)) => {
                assert!(m.len() < 120 && m.contains("50331648 bytes"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_requests_are_refused_with_the_reason() {
        let invalid = |request: SubmitProofRequest, expected: &str| match job_for(request, None) {
            Err(RequestError::Invalid(m)) => assert!(m.contains(expected), "{m}"),
            other => panic!("expected INVALID_ARGUMENT ({expected}), got {other:?}"),
        };
        invalid(
            porep(Bytes::from_static(b"\x00not json")),
            "not a C1 output",
        );
        invalid(porep(Bytes::new()), "empty");
        invalid(porep(lotus(8)), "for sector 8");
        invalid(
            SubmitProofRequest {
                registered_proof: 8,
                ..porep(lotus(7))
            },
            "StackedDrg32GiBV1_1",
        );
        invalid(
            SubmitProofRequest {
                registered_proof: 99,
                ..porep(lotus(7))
            },
            "99",
        );
        invalid(
            SubmitProofRequest {
                sector_size: 4096,
                ..porep(lotus(7))
            },
            "sector_size 4096",
        );
        invalid(
            SubmitProofRequest {
                proof_kind: 0,
                ..porep(lotus(7))
            },
            "proof_kind",
        );
    }

    #[test]
    fn kinds_the_cluster_lacks_are_unimplemented() {
        match job_for(
            SubmitProofRequest {
                proof_kind: 42,
                ..porep(lotus(7))
            },
            None,
        ) {
            Err(RequestError::Unimplemented(m)) => {
                assert!(m.contains("42") && m.contains("SNAP_DEALS_UPDATE"), "{m}")
            }
            other => panic!("42: {other:?}"),
        }
    }

    fn window(proofs: usize) -> SubmitProofRequest {
        SubmitProofRequest {
            request_id: "wdpost-1234-3".into(),
            proof_kind: ProofKind::WindowPostPartition as i32,
            registered_proof: 10,
            vanilla_proofs: vec![Bytes::from_static(&[1, 2, 3]); proofs],
            miner_id: 1234,
            randomness: vec![0x2a; 32].into(),
            partition_index: 3,
            ..Default::default()
        }
    }

    #[test]
    fn curio_post_requests_become_post_jobs() {
        let (spec, input) = job_for(window(2), None).unwrap();
        assert_eq!(spec.circuit, "window-post");
        assert_eq!(
            spec.params,
            serde_json::json!({"sector_size": "2KiB", "proof": "StackedDrgWindow2KiBV1_2",
                "miner": 1234, "randomness": "2a".repeat(32), "partition_index": 3})
        );
        let input: serde_json::Value = serde_json::from_slice(&input).unwrap();
        assert_eq!(
            input,
            serde_json::json!({"vanilla_proofs": ["AQID", "AQID"]})
        );
        // The job's parameters are what the family takes.
        cuzk_circuits::resolve(&spec.circuit, &spec.params).unwrap();
        let winning = SubmitProofRequest {
            proof_kind: ProofKind::WinningPost as i32,
            registered_proof: 3,
            sector_size: 32 << 30,
            partition_index: 0,
            ..window(1)
        };
        let (spec, _) = job_for(winning, None).unwrap();
        assert_eq!(spec.circuit, "winning-post");
        assert_eq!(spec.params["proof"], "StackedDrgWinning32GiBV1");
        assert!(spec.params.get("partition_index").is_none());
    }

    #[test]
    fn priorities_follow_curio_and_the_proof_kind() {
        let with = |request: SubmitProofRequest, priority: proto::Priority| {
            let mut request = request;
            request.set_priority(priority);
            job_for(request, None).unwrap().0.priority
        };
        let winning = SubmitProofRequest {
            proof_kind: ProofKind::WinningPost as i32,
            registered_proof: 0,
            partition_index: 0,
            ..window(1)
        };
        use proto::Priority as Curio;
        for post in [window(1), winning] {
            assert_eq!(with(post.clone(), Curio::Unspecified), Priority::High);
            assert_eq!(with(post.clone(), Curio::Critical), Priority::High);
            assert_eq!(with(post.clone(), Curio::Normal), Priority::Normal);
            assert_eq!(with(post, Curio::Low), Priority::Normal);
        }
        assert_eq!(with(porep(lotus(7)), Curio::Unspecified), Priority::Normal);
        assert_eq!(with(porep(lotus(7)), Curio::High), Priority::High);
        assert_eq!(with(porep(lotus(7)), Curio::Low), Priority::Normal);
    }

    #[test]
    fn bad_post_requests_are_refused_with_the_reason() {
        let invalid = |request: SubmitProofRequest, expected: &str| match job_for(request, None) {
            Err(RequestError::Invalid(m)) => assert!(m.contains(expected), "{m}"),
            other => panic!("expected INVALID_ARGUMENT ({expected}), got {other:?}"),
        };
        invalid(window(0), "vanilla_proofs is empty");
        invalid(
            window(3),
            "3 vanilla proofs; StackedDrgWindow2KiBV1_2 takes at most 2",
        );
        invalid(
            SubmitProofRequest {
                randomness: vec![1; 31].into(),
                ..window(1)
            },
            "randomness has 31 bytes",
        );
        invalid(
            SubmitProofRequest {
                registered_proof: 0,
                ..window(1)
            },
            "StackedDrgWinning2KiBV1, not a window-post proof",
        );
        invalid(
            SubmitProofRequest {
                registered_proof: 15,
                ..window(1)
            },
            "15",
        );
        invalid(
            SubmitProofRequest {
                sector_size: 8 << 20,
                ..window(1)
            },
            "sector_size 8388608",
        );
        invalid(
            SubmitProofRequest {
                proof_kind: ProofKind::WinningPost as i32,
                registered_proof: 0,
                ..window(1)
            },
            "partition_index 3",
        );
    }

    /// What Curio's snap prove task sends (`lib/ffi` in Curio): Curio's default priority.
    fn snap(proofs: usize) -> SubmitProofRequest {
        SubmitProofRequest {
            request_id: "ps-snap-1234-9-77".into(),
            proof_kind: ProofKind::SnapDealsUpdate as i32,
            registered_proof: 0,
            priority: proto::Priority::Normal as i32,
            vanilla_proofs: vec![Bytes::from_static(&[1, 2, 3]); proofs],
            sector_number: 9,
            miner_id: 1234,
            comm_r_old: vec![1; 32].into(),
            comm_r_new: vec![2; 32].into(),
            comm_d_new: vec![3; 32].into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_curio_snap_request_becomes_a_snap_deals_job() {
        let (spec, input) = job_for(snap(1), None).unwrap();
        assert_eq!(spec.circuit, "snap-deals");
        assert_eq!(spec.priority, Priority::Normal);
        assert_eq!(
            spec.params,
            serde_json::json!({"sector_size": "2KiB", "comm_r_old": "01".repeat(32),
                "comm_r_new": "02".repeat(32), "comm_d_new": "03".repeat(32)})
        );
        let input: serde_json::Value = serde_json::from_slice(&input).unwrap();
        assert_eq!(input, serde_json::json!({"vanilla_proofs": ["AQID"]}));
        cuzk_circuits::resolve(&spec.circuit, &spec.params).unwrap();
        let big = SubmitProofRequest {
            registered_proof: 3,
            sector_size: 32 << 30,
            priority: 0,
            ..snap(16)
        };
        let (spec, _) = job_for(big, None).unwrap();
        assert_eq!(spec.params["sector_size"], "32GiB");
        assert_eq!(spec.priority, Priority::Normal);
    }

    #[test]
    fn bad_snap_requests_are_refused_with_the_reason() {
        let invalid = |request: SubmitProofRequest, expected: &str| match job_for(request, None) {
            Err(RequestError::Invalid(m)) => assert!(m.contains(expected), "{m}"),
            other => panic!("expected INVALID_ARGUMENT ({expected}), got {other:?}"),
        };
        invalid(snap(0), "0 vanilla proofs; StackedDrg2KiBV1 takes 1");
        invalid(snap(2), "2 vanilla proofs; StackedDrg2KiBV1 takes 1");
        invalid(
            SubmitProofRequest {
                registered_proof: 5,
                ..snap(1)
            },
            "registered update proof 5 is unknown",
        );
        invalid(
            SubmitProofRequest {
                sector_size: 4096,
                ..snap(1)
            },
            "sector_size 4096",
        );
        invalid(
            SubmitProofRequest {
                comm_r_old: vec![1; 31].into(),
                ..snap(1)
            },
            "comm_r_old has 31 bytes",
        );
        invalid(
            SubmitProofRequest {
                comm_d_new: Bytes::new(),
                ..snap(1)
            },
            "comm_d_new has 0 bytes",
        );
        invalid(
            SubmitProofRequest {
                comm_r_new: vec![0xff; 32].into(),
                ..snap(1)
            },
            "'comm_r_new'",
        );
    }
}
