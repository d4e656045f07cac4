//! Which PoSt proof a job proves: filecoin-proofs-api's `RegisteredPoStProof`, by lotus' number
//! (what Curio puts in `registered_proof`) or by name, and the `PoStConfig` filecoin-proofs
//! derives from it.

use filecoin_proofs::constants::{
    WINDOW_POST_CHALLENGE_COUNT, WINDOW_POST_SECTOR_COUNT, WINNING_POST_CHALLENGE_COUNT,
    WINNING_POST_SECTOR_COUNT,
};
use filecoin_proofs::{PoStConfig, PoStType};
use storage_proofs_core::api_version::ApiVersion;

use crate::filecoin::SectorSize;

/// WindowPoSt (one partition of a deadline) or WinningPoSt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PostKind {
    Window,
    Winning,
}

impl PostKind {
    /// The circuit name jobs use.
    pub fn circuit(self) -> &'static str {
        match self {
            Self::Window => "window-post",
            Self::Winning => "winning-post",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Self::Window => "Window",
            Self::Winning => "Winning",
        }
    }
}

/// A registered PoSt proof: kind, sector size and version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PostProof {
    pub kind: PostKind,
    pub size: SectorSize,
    /// WindowPoSt with the grindability fix (lotus' `V1_1`, filecoin-proofs-api's `V1_2`, API
    /// version 1.2): challenges no longer depend on a sector's index. WinningPoSt has V1 only.
    pub v1_2: bool,
}

impl PostProof {
    /// What a job gets when it names no proof: the version the network uses today.
    pub fn current(kind: PostKind, size: SectorSize) -> Self {
        Self {
            kind,
            size,
            v1_2: kind == PostKind::Window,
        }
    }

    /// lotus' `abi.RegisteredPoStProof` numbers, as Curio sends them: 0–4 WinningPoSt V1,
    /// 5–9 WindowPoSt V1, 10–14 WindowPoSt V1_1 (filecoin-proofs-api's `V1_2`), each run of
    /// five by sector size 2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB.
    pub fn from_id(id: u64) -> Result<Self, String> {
        let size = SectorSize::ALL[(id % 5) as usize];
        match id / 5 {
            0 => Ok(Self::current(PostKind::Winning, size)),
            1 => Ok(Self {
                kind: PostKind::Window,
                size,
                v1_2: false,
            }),
            2 => Ok(Self::current(PostKind::Window, size)),
            _ => Err(format!(
                "registered PoSt proof {id} is unknown (lotus' RegisteredPoStProof 0–14)"
            )),
        }
    }

    /// filecoin-proofs-api's name, e.g. `StackedDrgWindow32GiBV1_2`.
    pub fn api_name(self) -> String {
        let version = if self.v1_2 { "V1_2" } else { "V1" };
        format!(
            "StackedDrg{}{}{version}",
            self.kind.word(),
            self.size.name()
        )
    }

    pub fn from_api_name(name: &str) -> Result<Self, String> {
        (0..15)
            .filter_map(|id| Self::from_id(id).ok())
            .find(|p| p.api_name() == name)
            .ok_or_else(|| {
                format!("unknown PoSt proof {name:?}; e.g. StackedDrgWindow32GiBV1_2, StackedDrgWinning32GiBV1")
            })
    }

    /// The configuration filecoin-proofs-api's `as_v1_config` gives this proof.
    pub fn config(self) -> PoStConfig {
        let sector_size = filecoin_proofs::SectorSize(self.size.bytes());
        match self.kind {
            PostKind::Winning => PoStConfig {
                sector_size,
                challenge_count: WINNING_POST_CHALLENGE_COUNT,
                sector_count: WINNING_POST_SECTOR_COUNT,
                typ: PoStType::Winning,
                priority: true,
                api_version: ApiVersion::V1_0_0,
            },
            PostKind::Window => PoStConfig {
                sector_size,
                challenge_count: WINDOW_POST_CHALLENGE_COUNT,
                sector_count: *WINDOW_POST_SECTOR_COUNT
                    .read()
                    .expect("WINDOW_POST_SECTOR_COUNT poisoned")
                    .get(&self.size.bytes())
                    .expect("every SectorSize has a WindowPoSt sector count"),
                typ: PoStType::Window,
                priority: true,
                api_version: if self.v1_2 {
                    ApiVersion::V1_2_0
                } else {
                    ApiVersion::V1_0_0
                },
            },
        }
    }

    /// How many vanilla (sector) proofs one job of this proof takes at most: a WindowPoSt
    /// partition's sectors, or WinningPoSt's one challenged sector.
    pub fn max_sectors(self) -> usize {
        self.config().sector_count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lotus_numbers_and_names_round_trip() {
        assert_eq!(
            PostProof::from_id(3).unwrap().api_name(),
            "StackedDrgWinning32GiBV1"
        );
        assert_eq!(
            PostProof::from_id(8).unwrap().api_name(),
            "StackedDrgWindow32GiBV1"
        );
        assert_eq!(
            PostProof::from_id(13).unwrap().api_name(),
            "StackedDrgWindow32GiBV1_2"
        );
        assert_eq!(
            PostProof::from_id(10).unwrap(),
            PostProof::current(PostKind::Window, SectorSize::S2KiB)
        );
        for id in 0..15 {
            let p = PostProof::from_id(id).unwrap();
            assert_eq!(PostProof::from_api_name(&p.api_name()), Ok(p));
        }
        assert!(PostProof::from_id(15).unwrap_err().contains("15"));
        assert!(PostProof::from_api_name("StackedDrgWinning2KiBV1_2").is_err());
        let window = PostProof::from_id(13).unwrap().config();
        assert_eq!((window.sector_count, window.challenge_count), (2349, 10));
        let winning = PostProof::from_id(0).unwrap().config();
        assert_eq!((winning.sector_count, winning.challenge_count), (1, 66));
    }
}
