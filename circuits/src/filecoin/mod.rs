//! The Filecoin plumbing the PoRep, PoSt and SnapDeals families share: sector sizes and their
//! tree shapes (`with_tree!`), registered seal proofs, miners and prover ids, hex parameters,
//! and the errors of filecoin-proofs' own API. It imports none of the families: they import
//! it, rather than each other, for what they share.

mod miner;
mod sector;

pub use miner::{parse_miner, prover_id, MinerError, MAX_MINER_LEN};
pub(crate) use miner::{resolve_prover_id, Miner};
pub use sector::{ProofVersion, SealProof, SectorSize};

/// Runs `$body` with `$tree` bound to the Merkle tree shape of `$size` (filecoin-proofs'
/// `SectorShape*` types): every filecoin-proofs call is generic over it (PoSt's too).
macro_rules! with_tree {
    ($size:expr, $tree:ident => $body:expr) => {
        match $size {
            $crate::filecoin::SectorSize::S2KiB
            | $crate::filecoin::SectorSize::S8MiB
            | $crate::filecoin::SectorSize::S512MiB => {
                type $tree = filecoin_proofs::constants::SectorShapeBase;
                $body
            }
            $crate::filecoin::SectorSize::S32GiB => {
                type $tree = filecoin_proofs::constants::SectorShape32GiB;
                $body
            }
            $crate::filecoin::SectorSize::S64GiB => {
                type $tree = filecoin_proofs::constants::SectorShape64GiB;
                $body
            }
        }
    };
}
pub(crate) use with_tree;

/// Sealing, C2 or verification through filecoin-proofs' own API (fixtures, tests, benches).
#[derive(Debug, thiserror::Error)]
#[error("{step} for a {size} sector failed: {reason}")]
pub struct FilecoinError {
    pub(crate) size: &'static str,
    pub(crate) step: &'static str,
    pub(crate) reason: String,
}

pub(crate) fn fil_err(
    size: SectorSize,
    step: &'static str,
) -> impl Fn(anyhow::Error) -> FilecoinError {
    move |e| FilecoinError {
        size: size.name(),
        step,
        reason: format!("{e:#}"),
    }
}

pub(crate) fn hex_string(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}
