//! A `SubmitProofRequest` checked and turned into a cluster job: a plain function of the
//! request, so every refusal is decided here before anything reaches NATS.
//!
//! Only PoRep C2 exists in the cluster. Its request carries the C1 output exactly as Curio has
//! it (filecoin-proofs-api JSON, or the lotus wrapper, or filecoin-proofs' own form:
//! `cuzk_circuits::porep_c1` tells them apart); the job carries those bytes unchanged — the
//! synth node detects the form again — with the sector, miner and proof from the request, which
//! must agree with what the C1 output says about itself.

use bytes::Bytes;
use cuzk_wire::job::{valid_job_id, JobInput, JobSpec, Priority, JOB_SPEC_VERSION, MAX_JOB_ID_LEN};

use crate::proto::{self, ProofKind, SubmitProofRequest};

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

/// The job for `request` and its input bytes (the job's `input` is filled in when the bytes
/// are staged).
pub fn job_for(request: SubmitProofRequest) -> Result<(JobSpec, Bytes), RequestError> {
    let kind = ProofKind::try_from(request.proof_kind).map_err(|_| {
        RequestError::Unimplemented(format!(
            "proof kind {} is not one of cuzk.v1.ProofKind; this gateway proves POREP_SEAL_COMMIT",
            request.proof_kind
        ))
    })?;
    let missing = |what: &str| {
        RequestError::Unimplemented(format!(
            "{} ({what}) is not implemented by this cluster: it proves POREP_SEAL_COMMIT only",
            kind.as_str_name()
        ))
    };
    let params = match kind {
        ProofKind::Unspecified => {
            return Err(RequestError::Invalid(
                "proof_kind is required (POREP_SEAL_COMMIT)".into(),
            ))
        }
        ProofKind::PorepSealCommit => porep_params(&request)?,
        ProofKind::SnapDealsUpdate => return Err(missing("SnapDeals empty-sector update")),
        ProofKind::WindowPostPartition => return Err(missing("WindowPoSt")),
        ProofKind::WinningPost => return Err(missing("WinningPoSt")),
    };
    let priority = match request.priority() {
        proto::Priority::High | proto::Priority::Critical => Priority::High,
        _ => Priority::Normal,
    };
    let spec = JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: job_id(&request.request_id),
        circuit: "porep-c2".into(),
        params,
        input: JobInput::None,
        priority,
    };
    Ok((spec, request.vanilla_proof))
}

/// A fresh job id that shows the caller's request id where it can: a retried request is a new
/// job (a request that failed must be able to run again), so the id is not the dedup key.
fn job_id(request_id: &str) -> String {
    let suffix = format!("{:016x}", rand::random::<u64>());
    let keep = MAX_JOB_ID_LEN - suffix.len() - 4;
    let readable: String = request_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(keep)
        .collect();
    let id = format!("gw-{readable}-{suffix}");
    debug_assert!(valid_job_id(&id), "{id}");
    id
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
    if request.sector_size != 0 && request.sector_size != proof.size.bytes() {
        return Err(invalid(format!(
            "sector_size {} does not match registered_proof {} ({})",
            request.sector_size,
            request.registered_proof,
            proof.api_name()
        )));
    }
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
        let (spec, input) = job_for(porep(lotus(7))).unwrap();
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
        // A retried request is a new job.
        assert_ne!(job_for(porep(lotus(7))).unwrap().0.job_id, spec.job_id);
        // filecoin-proofs' own form names no proof: the job does.
        let (spec, _) = job_for(porep(Bytes::from_static(br#"{"vanilla_proofs":[[]]}"#))).unwrap();
        assert_eq!(spec.params["proof"], "StackedDrg2KiBV1_1");
        // Long or odd request ids still give a valid id.
        let mut odd = porep(lotus(7));
        odd.request_id = "ü/".repeat(100);
        assert!(valid_job_id(&job_for(odd).unwrap().0.job_id));
    }

    #[test]
    fn bad_requests_are_refused_with_the_reason() {
        let invalid = |request: SubmitProofRequest, expected: &str| match job_for(request) {
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
        for (kind, name) in [
            (ProofKind::SnapDealsUpdate as i32, "SNAP_DEALS_UPDATE"),
            (
                ProofKind::WindowPostPartition as i32,
                "WINDOW_POST_PARTITION",
            ),
            (ProofKind::WinningPost as i32, "WINNING_POST"),
            (42, "42"),
        ] {
            match job_for(SubmitProofRequest {
                proof_kind: kind,
                ..porep(lotus(7))
            }) {
                Err(RequestError::Unimplemented(m)) => assert!(m.contains(name), "{m}"),
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}
