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
//! The proof types are filecoin-proofs-api's `RegisteredSealProof`: V1, V1_1 and V1_1 with
//! synthetic PoRep share one circuit per sector size (and one parameter file); non-interactive
//! PoRep proves a different circuit and aggregates, so it is refused.
//!
//! A miner is named `f0…`/`t0…` or by its number; its prover id is the payload of its ID
//! address (the actor id as an unsigned LEB128 varint), zero-padded to 32 bytes — what lotus
//! hands filecoin-proofs-api.

use std::borrow::Cow;

use base64::Engine;
use filecoin_proofs::PoRepConfig;
use serde::Deserialize;
use storage_proofs_core::api_version::{ApiFeature, ApiVersion};

use crate::porep::SectorSize;

/// The seal proof versions this cluster proves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProofVersion {
    /// `StackedDrg*V1` (API 1.0, the pre-2020 graph).
    V1,
    /// `StackedDrg*V1_1`.
    V1_1,
    /// `StackedDrg*V1_1_Feat_SyntheticPoRep` (API 1.2).
    V1_1Synthetic,
}

/// A registered seal proof: a sector size and a proof version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SealProof {
    pub size: SectorSize,
    pub version: ProofVersion,
}

impl SealProof {
    /// The proof lotus seals new sectors of `size` with when synthetic PoRep is off.
    pub fn v1_1(size: SectorSize) -> SealProof {
        SealProof {
            size,
            version: ProofVersion::V1_1,
        }
    }

    /// filecoin-proofs-api's name, e.g. `StackedDrg2KiBV1_1_Feat_SyntheticPoRep`.
    pub fn api_name(self) -> String {
        let suffix = match self.version {
            ProofVersion::V1 => "V1",
            ProofVersion::V1_1 => "V1_1",
            ProofVersion::V1_1Synthetic => "V1_1_Feat_SyntheticPoRep",
        };
        format!("StackedDrg{}{suffix}", self.size.name())
    }

    /// Parses filecoin-proofs-api's name of a seal proof.
    pub fn from_api_name(name: &str) -> Result<SealProof, String> {
        let rest = name
            .strip_prefix("StackedDrg")
            .ok_or_else(|| format!("'{name}' is not a StackedDrg seal proof"))?;
        for size in SectorSize::ALL {
            let Some(version) = rest.strip_prefix(size.name()) else {
                continue;
            };
            let version = match version {
                "V1" => ProofVersion::V1,
                "V1_1" => ProofVersion::V1_1,
                "V1_1_Feat_SyntheticPoRep" => ProofVersion::V1_1Synthetic,
                "V1_2_Feat_NonInteractivePoRep" => {
                    return Err(format!(
                        "{name}: non-interactive PoRep (an aggregated proof of a different circuit) is not supported"
                    ))
                }
                _ => break,
            };
            return Ok(SealProof { size, version });
        }
        Err(format!("unknown seal proof '{name}'"))
    }

    /// The proof with filecoin-proofs-api's registered id, the number lotus and Curio send
    /// (non-interactive PoRep, 15 and up, is refused as in [`SealProof::from_api_name`]).
    pub fn from_id(id: u64) -> Result<SealProof, String> {
        let versions = [
            ProofVersion::V1,
            ProofVersion::V1_1,
            ProofVersion::V1_1Synthetic,
        ];
        versions
            .into_iter()
            .flat_map(|version| SectorSize::ALL.map(|size| SealProof { size, version }))
            .find(|proof| proof.id() == id)
            .ok_or_else(|| format!("registered seal proof {id} is not one this cluster proves (StackedDrg V1, V1_1 or V1_1 synthetic: 0-14)"))
    }

    /// The registered proof id (filecoin-proofs-api's `REGISTERED_PROOF_IDS`).
    fn id(self) -> u64 {
        let base = match self.version {
            ProofVersion::V1 => 0,
            ProofVersion::V1_1 => 5,
            ProofVersion::V1_1Synthetic => 10,
        };
        let offset = SectorSize::ALL
            .iter()
            .position(|s| *s == self.size)
            .expect("every size is in ALL") as u64;
        base + offset
    }

    /// The PoRep configuration filecoin-proofs-api seals and verifies this proof with: the
    /// porep id is the proof id (u64 LE) followed by a zero nonce.
    pub fn config(self) -> PoRepConfig {
        let mut porep_id = [0u8; 32];
        porep_id[..8].copy_from_slice(&self.id().to_le_bytes());
        let (version, features) = match self.version {
            ProofVersion::V1 => (ApiVersion::V1_0_0, vec![]),
            ProofVersion::V1_1 => (ApiVersion::V1_1_0, vec![]),
            ProofVersion::V1_1Synthetic => (ApiVersion::V1_2_0, vec![ApiFeature::SyntheticPoRep]),
        };
        PoRepConfig::new_groth16_with_features(self.size.bytes(), porep_id, version, features)
            .expect("synthetic PoRep is supported from API 1.2")
    }
}

/// A size alone means the proof lotus seals new sectors with (synthetic PoRep off).
impl From<SectorSize> for SealProof {
    fn from(size: SectorSize) -> SealProof {
        SealProof::v1_1(size)
    }
}

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

/// The longest miner taken: `f0`/`t0` and the 19 digits of an ID below 2^63.
pub const MAX_MINER_LEN: usize = 21;

/// Why a miner was refused; fatal for the job (the parameters are wrong, retrying cannot help).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MinerError {
    /// Not echoed: the input may be any size.
    #[error(
        "miner is {len} bytes; an ID address (f0…/t0…) or actor id has at most {MAX_MINER_LEN}"
    )]
    TooLong { len: usize },
    #[error("miner '{miner}' is a protocol-{protocol} address; a miner is named by its ID address (f0…/t0…)")]
    NotAnId { miner: String, protocol: char },
    #[error("miner '{0}' is neither an ID address (f0…/t0…) nor a number")]
    Malformed(String),
    #[error("miner '{0}' is out of range (IDs are below 2^63)")]
    OutOfRange(String),
}

/// A miner given as `f0…`/`t0…` (an ID address) or as its actor id.
pub fn parse_miner(miner: &str) -> Result<u64, MinerError> {
    // Bounded first, so that no input is scanned, parsed or echoed in full.
    if miner.len() > MAX_MINER_LEN {
        return Err(MinerError::TooLong { len: miner.len() });
    }
    let digits = match miner.as_bytes() {
        [b'f' | b't' | b'F' | b'T', b'0', ..] => &miner[2..],
        [b'f' | b't' | b'F' | b'T', protocol, ..] => {
            return Err(MinerError::NotAnId {
                miner: miner.into(),
                protocol: *protocol as char,
            })
        }
        _ => miner,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(MinerError::Malformed(miner.into()));
    }
    let id: u64 = digits
        .parse()
        .map_err(|_| MinerError::OutOfRange(miner.into()))?;
    // go-address refuses ID addresses at or above 2^63.
    if id >= 1 << 63 {
        return Err(MinerError::OutOfRange(miner.into()));
    }
    Ok(id)
}

/// The prover id filecoin-proofs-api is given for a miner: its ID address payload (the id as
/// an unsigned LEB128 varint) followed by zeros.
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut rest = miner_id;
    for byte in out.iter_mut() {
        *byte = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest == 0 {
            break;
        }
        *byte |= 0x80;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miners_and_prover_ids() {
        assert_eq!(parse_miner("f01234"), Ok(1234));
        assert_eq!(parse_miner("t01000"), Ok(1000));
        assert_eq!(parse_miner("42"), Ok(42));
        assert!(parse_miner("f1abc")
            .unwrap_err()
            .to_string()
            .contains("protocol-1"));
        assert!(parse_miner("f0").is_err());
        assert!(parse_miner("x01234").is_err());
        assert!(parse_miner("f09223372036854775808")
            .unwrap_err()
            .to_string()
            .contains("2^63"));
        assert_eq!(parse_miner("f09223372036854775807"), Ok((1 << 63) - 1));
        // Known ID-address payloads: 0 → 00, 127 → 7f, 128 → 80 01, 1234 → d2 09.
        assert_eq!(prover_id(0)[..2], [0x00, 0x00]);
        assert_eq!(prover_id(127)[..2], [0x7f, 0x00]);
        assert_eq!(prover_id(128)[..3], [0x80, 0x01, 0x00]);
        assert_eq!(prover_id(1234)[..3], [0xd2, 0x09, 0x00]);
        assert_eq!(
            prover_id((1 << 63) - 1)[..10],
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00]
        );
    }

    #[test]
    fn over_long_miners_are_refused_by_their_length() {
        let long = format!("f0{}1234", "0".repeat(100_000));
        assert_eq!(
            parse_miner(&long),
            Err(MinerError::TooLong { len: 100_006 })
        );
        assert_eq!(
            parse_miner(&"0".repeat(MAX_MINER_LEN + 1)),
            Err(MinerError::TooLong {
                len: MAX_MINER_LEN + 1
            })
        );
        // Every circuit naming a miner refuses it when the job is resolved, with a short reason.
        let randomness = "00".repeat(32);
        for (name, params) in [
            (
                "porep-c2",
                serde_json::json!({"sector_size": "2KiB", "sector_id": 1, "miner": long}),
            ),
            (
                "window-post",
                serde_json::json!({"sector_size": "2KiB", "randomness": randomness, "miner": long}),
            ),
            (
                "winning-post",
                serde_json::json!({"sector_size": "2KiB", "randomness": randomness, "miner": long}),
            ),
        ] {
            let spec = crate::CircuitSpec {
                name: name.into(),
                params,
            };
            let e = crate::resolve(&spec).err().unwrap();
            assert!(matches!(e, crate::CircuitError::BadParams { .. }), "{name}");
            let e = e.to_string();
            assert!(e.contains("100006 bytes") && e.len() < 200, "{name}: {e}");
        }
    }

    #[test]
    fn proof_names_ids_and_configs() {
        for size in SectorSize::ALL {
            for version in [
                ProofVersion::V1,
                ProofVersion::V1_1,
                ProofVersion::V1_1Synthetic,
            ] {
                let proof = SealProof { size, version };
                assert_eq!(SealProof::from_api_name(&proof.api_name()), Ok(proof));
                assert_eq!(SealProof::from_id(proof.id()), Ok(proof));
                assert_eq!(usize::from(proof.config().partitions), size.partitions());
            }
        }
        let synth = SealProof::from_api_name("StackedDrg32GiBV1_1_Feat_SyntheticPoRep").unwrap();
        assert_eq!(synth.id(), 13);
        // lotus' abi.RegisteredSealProof numbers: 2 KiB V1_1 is 5; NI-PoRep (15+) is refused.
        assert_eq!(
            SealProof::from_id(5),
            Ok(SealProof::v1_1(SectorSize::S2KiB))
        );
        assert!(SealProof::from_id(15).is_err());
        assert!(synth.config().feature_enabled(ApiFeature::SyntheticPoRep));
        assert_eq!(
            SealProof::v1_1(SectorSize::S2KiB).config().porep_id[..8],
            5u64.to_le_bytes()
        );
        let e =
            SealProof::from_api_name("StackedDrg2KiBV1_2_Feat_NonInteractivePoRep").unwrap_err();
        assert!(e.contains("not supported"), "{e}");
        assert!(SealProof::from_api_name("StackedDrg4KiBV1_1").is_err());
        assert!(SealProof::from_api_name("StackedDrg2KiBV9").is_err());
    }

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
