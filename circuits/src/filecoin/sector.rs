//! The sector sizes Filecoin seals, which every family is parameterized by, and the registered
//! seal proofs of each, filecoin-proofs-api's `RegisteredSealProof`: V1, V1_1 and V1_1 with
//! synthetic PoRep share one circuit per sector size (and one parameter file); non-interactive
//! PoRep proves a different circuit and aggregates, so it is refused. The two are together
//! because a size's PoRep configuration, which SnapDeals builds on too, is its V1_1 proof's.

use std::str::FromStr;

use filecoin_proofs::PoRepConfig;
use serde::Deserialize;
use storage_proofs_core::api_version::{ApiFeature, ApiVersion};

/// The sector sizes Filecoin seals, with the proof ids lotus uses for them
/// (`RegisteredSealProof::StackedDrg*V1_1`, whose porep id is the id as u64 LE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
pub enum SectorSize {
    #[serde(rename = "2KiB")]
    S2KiB,
    #[serde(rename = "8MiB")]
    S8MiB,
    #[serde(rename = "512MiB")]
    S512MiB,
    #[serde(rename = "32GiB")]
    S32GiB,
    #[serde(rename = "64GiB")]
    S64GiB,
}

impl SectorSize {
    pub const ALL: [SectorSize; 5] = [
        Self::S2KiB,
        Self::S8MiB,
        Self::S512MiB,
        Self::S32GiB,
        Self::S64GiB,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::S2KiB => "2KiB",
            Self::S8MiB => "8MiB",
            Self::S512MiB => "512MiB",
            Self::S32GiB => "32GiB",
            Self::S64GiB => "64GiB",
        }
    }

    pub fn bytes(self) -> u64 {
        match self {
            Self::S2KiB => 2 << 10,
            Self::S8MiB => 8 << 20,
            Self::S512MiB => 512 << 20,
            Self::S32GiB => 32 << 30,
            Self::S64GiB => 64 << 30,
        }
    }

    /// The PoRep configuration of `StackedDrg*V1_1` for this size: every proof version of a
    /// size has the same circuit, public parameters and parameter file.
    pub fn config(self) -> PoRepConfig {
        SealProof::v1_1(self).config()
    }

    pub fn partitions(self) -> usize {
        usize::from(self.config().partitions)
    }
}

impl FromStr for SectorSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|size| size.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let known: Vec<_> = Self::ALL.iter().map(|s| s.name()).collect();
                format!("unknown sector size '{s}'; known: {}", known.join(", "))
            })
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
