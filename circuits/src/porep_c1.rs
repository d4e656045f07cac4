//! The Commit-1 outputs operators actually have, and the identifiers that come with them.
//!
//! A C1 output arrives in one of three forms, told apart by their fields (never by a flag):
//!
//! * **filecoin-proofs**: `SealCommitPhase1Output<Tree>` as filecoin-proofs serializes it:
//!   `{"vanilla_proofs": [[…]], "comm_r", "comm_d", "replica_id", "seed", "ticket"}`.
//! * **filecoin-proofs-api**: the same fields plus `"registered_proof"` (e.g.
//!   `"StackedDrg32GiBV1_1"`), with `vanilla_proofs` tagged by the tree shape
//!   (`{"StackedDrg32GiBV1": [[…]]}`).
//! * **lotus / Curio**: `{"SectorNum": n, "Phase1Out": "<base64 of the API form>",
//!   "SectorSize": bytes}` (what lotus-bench and Curio write; Go encodes `[]byte` as base64).
//!
//! The registered proofs a C1 output names, and the miners and prover ids a job names, are
//! shared with the other families and live in [`crate::filecoin`]; the ones other crates
//! import from here are re-exported.

use std::borrow::Cow;

use base64::Engine;
use serde::Deserialize;

use crate::filecoin::SectorSize;
pub use crate::filecoin::{parse_miner, prover_id, SealProof};

/// Which of the three forms a C1 output came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum C1Format {
    FilecoinProofs,
    ProofsApi,
    Lotus,
}

/// A C1 output with what its form says about it. `json` is in the filecoin-proofs form for the
/// first form, the API form otherwise (see [`parse_api`]).
#[derive(Debug)]
pub struct C1Input<'a> {
    pub format: C1Format,
    /// Named by the API form (and so by the lotus wrapper).
    pub proof: Option<SealProof>,
    /// `SectorNum` of the lotus wrapper.
    pub sector_number: Option<u64>,
    /// Marked as random contents made for timings (`crate::porep::SYNTHETIC_KEY`).
    pub marked_synthetic: bool,
    pub json: Cow<'a, [u8]>,
}

/// The fields that tell the forms apart; everything else is skipped unread.
#[derive(Deserialize)]
struct Probe {
    #[serde(rename = "SectorNum")]
    sector_num: Option<u64>,
    #[serde(rename = "Phase1Out")]
    phase1_out: Option<String>,
    #[serde(rename = "SectorSize")]
    sector_size: Option<u64>,
    registered_proof: Option<String>,
    cuzk_synthetic: Option<bool>,
}

fn probe(json: &[u8]) -> Result<Probe, String> {
    serde_json::from_slice(json).map_err(|e| format!("not a C1 output (JSON): {e}"))
}

/// Detects the form of a C1 output and unwraps the lotus wrapper.
pub fn detect(input: &[u8]) -> Result<C1Input<'_>, String> {
    let outer = probe(input)?;
    let Some(phase1_out) = outer.phase1_out else {
        let proof = outer
            .registered_proof
            .as_deref()
            .map(SealProof::from_api_name)
            .transpose()?;
        let format = if proof.is_some() {
            C1Format::ProofsApi
        } else {
            C1Format::FilecoinProofs
        };
        return Ok(C1Input {
            format,
            proof,
            sector_number: None,
            marked_synthetic: outer.cuzk_synthetic == Some(true),
            json: Cow::Borrowed(input),
        });
    };
    let json = base64::engine::general_purpose::STANDARD
        .decode(phase1_out.as_bytes())
        .map_err(|e| format!("Phase1Out of the lotus C1 file is not base64: {e}"))?;
    let inner = probe(&json).map_err(|e| format!("Phase1Out of the lotus C1 file: {e}"))?;
    let name = inner.registered_proof.ok_or_else(|| {
        "Phase1Out of the lotus C1 file has no registered_proof (not filecoin-proofs-api's C1 output)"
            .to_string()
    })?;
    let proof = SealProof::from_api_name(&name)?;
    if let Some(bytes) = outer.sector_size {
        if bytes != proof.size.bytes() {
            return Err(format!(
                "the lotus C1 file says SectorSize {bytes} but its proof is {name}"
            ));
        }
    }
    Ok(C1Input {
        format: C1Format::Lotus,
        proof: Some(proof),
        sector_number: outer.sector_num,
        marked_synthetic: inner.cuzk_synthetic == Some(true),
        json: Cow::Owned(json),
    })
}

/// The API form's fields, under their JSON names: the vanilla proofs are keyed by their tree
/// shape (`StackedDrg2KiBV1`, … whatever the proof version).
#[derive(Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>, D: Deserialize<'de>"))]
struct ApiC1<T, D> {
    vanilla_proofs: std::collections::BTreeMap<String, T>,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    replica_id: D,
    seed: [u8; 32],
    ticket: [u8; 32],
}

/// The filecoin-proofs fields of an API-form C1 output: `T` the vanilla proofs, `D` the
/// replica id's domain type.
pub struct C1Parts<T, D> {
    pub vanilla_proofs: T,
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    pub replica_id: D,
    pub seed: [u8; 32],
    pub ticket: [u8; 32],
}

/// Parses the API form, checking that its vanilla proofs are tagged for `size`.
pub fn parse_api<T, D>(json: &[u8], size: SectorSize) -> Result<C1Parts<T, D>, String>
where
    T: serde::de::DeserializeOwned,
    D: serde::de::DeserializeOwned,
{
    let c1: ApiC1<T, D> = serde_json::from_slice(json).map_err(|e| {
        format!("not a C1 output (filecoin-proofs-api SealCommitPhase1Output JSON): {e}")
    })?;
    let tag = format!("StackedDrg{}V1", size.name());
    let mut shapes = c1.vanilla_proofs.into_iter();
    let (found, vanilla_proofs) = match (shapes.next(), shapes.next()) {
        (Some(only), None) => only,
        _ => return Err("vanilla_proofs must hold exactly one tree shape".into()),
    };
    if found != tag {
        return Err(format!(
            "vanilla_proofs are tagged {found}; a {} sector's are {tag}",
            size.name()
        ));
    }
    Ok(C1Parts {
        vanilla_proofs,
        comm_r: c1.comm_r,
        comm_d: c1.comm_d,
        replica_id: c1.replica_id,
        seed: c1.seed,
        ticket: c1.ticket,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filecoin::ProofVersion;

    #[test]
    fn forms_are_detected() {
        let fp = br#"{"vanilla_proofs":[],"comm_r":[],"seed":[]}"#;
        let c1 = detect(fp).unwrap();
        assert_eq!((c1.format, c1.proof), (C1Format::FilecoinProofs, None));
        assert_eq!(*c1.json, fp[..]);

        let api =
            br#"{"registered_proof":"StackedDrg2KiBV1_1_Feat_SyntheticPoRep","vanilla_proofs":{}}"#;
        let c1 = detect(api).unwrap();
        assert_eq!(c1.format, C1Format::ProofsApi);
        assert_eq!(c1.proof.unwrap().version, ProofVersion::V1_1Synthetic);

        let b64 = base64::engine::general_purpose::STANDARD.encode(api);
        let lotus = format!(r#"{{"SectorNum":7,"Phase1Out":"{b64}","SectorSize":2048}}"#);
        let c1 = detect(lotus.as_bytes()).unwrap();
        assert_eq!((c1.format, c1.sector_number), (C1Format::Lotus, Some(7)));
        assert_eq!(*c1.json, api[..]);

        let wrong = format!(r#"{{"SectorNum":7,"Phase1Out":"{b64}","SectorSize":8388608}}"#);
        assert!(detect(wrong.as_bytes())
            .unwrap_err()
            .contains("SectorSize 8388608"));
        let e = detect(br#"{"SectorNum":7,"Phase1Out":"!!","SectorSize":2048}"#).unwrap_err();
        assert!(e.contains("not base64"), "{e}");
        let bare = base64::engine::general_purpose::STANDARD.encode(br#"{"vanilla_proofs":[]}"#);
        let e = detect(format!(r#"{{"Phase1Out":"{bare}"}}"#).as_bytes()).unwrap_err();
        assert!(e.contains("no registered_proof"), "{e}");
        assert!(detect(b"[1,2]").unwrap_err().contains("not a C1 output"));
    }
}
