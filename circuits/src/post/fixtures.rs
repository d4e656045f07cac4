//! PoSt inputs from real sectors, for tests and fixtures: a sector sealed with filecoin-proofs,
//! and the vanilla proofs Curio would send for it (filecoin-proofs'
//! `generate_fallback_sector_challenges` and `generate_single_vanilla_proof`, serialized with
//! bincode as filecoin-proofs-api serializes them).

use std::path::{Path, PathBuf};

use filecoin_proofs::{
    generate_fallback_sector_challenges, generate_single_vanilla_proof, MerkleTreeTrait,
    PrivateReplicaInfo,
};
use rand::RngCore;
use storage_proofs_core::sector::SectorId;

use super::PostProof;
use crate::filecoin::{fil_err, with_tree, FilecoinError, SectorSize};
use crate::porep;

/// A sealed sector, as a PoSt prover has it.
#[derive(Clone, Debug)]
pub struct PostSector {
    pub size: SectorSize,
    pub sector_id: u64,
    pub comm_r: [u8; 32],
    pub cache_dir: PathBuf,
    pub replica: PathBuf,
}

impl PostSector {
    /// Seals a sector of random data in `dir` (add_piece, PC1, PC2; [`porep::seal_sector`]).
    pub fn seal(
        size: SectorSize,
        dir: &Path,
        sector_id: u64,
        rng: &mut dyn RngCore,
    ) -> Result<Self, FilecoinError> {
        let sealed = porep::seal_sector(size, dir, sector_id, [1; 32], rng)?;
        let c1: serde_json::Value =
            serde_json::from_slice(&sealed.c1_json).map_err(|e| FilecoinError {
                size: size.name(),
                step: "reading comm_r",
                reason: e.to_string(),
            })?;
        let comm_r = serde_json::from_value(c1["comm_r"].clone()).map_err(|e| FilecoinError {
            size: size.name(),
            step: "reading comm_r",
            reason: e.to_string(),
        })?;
        Ok(Self {
            size,
            sector_id,
            comm_r,
            cache_dir: dir.join("cache"),
            replica: dir.join("sealed"),
        })
    }
}

/// Each sector's vanilla proof for `proof`, `randomness` and `prover_id`, challenged as the
/// sectors of one partition (WindowPoSt) or as the one winning sector: what Curio hands over.
pub fn vanilla_proofs(
    proof: PostProof,
    sectors: &[PostSector],
    randomness: [u8; 32],
    prover_id: [u8; 32],
) -> Result<Vec<Vec<u8>>, FilecoinError> {
    with_tree!(proof.size, Tree => vanilla::<Tree>(proof, sectors, randomness, prover_id))
}

fn vanilla<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    sectors: &[PostSector],
    randomness: [u8; 32],
    prover_id: [u8; 32],
) -> Result<Vec<Vec<u8>>, FilecoinError> {
    let size = proof.size;
    let config = proof.config();
    let ids: Vec<SectorId> = sectors
        .iter()
        .map(|s| SectorId::from(s.sector_id))
        .collect();
    let challenges =
        generate_fallback_sector_challenges::<Tree>(&config, &randomness, &ids, prover_id)
            .map_err(fil_err(size, "PoSt challenges"))?;
    sectors
        .iter()
        .zip(ids)
        .map(|(sector, id)| {
            let replica = PrivateReplicaInfo::<Tree>::new(
                sector.replica.clone(),
                sector.comm_r,
                sector.cache_dir.clone(),
            )
            .map_err(fil_err(size, "opening the replica"))?;
            let vanilla =
                generate_single_vanilla_proof::<Tree>(&config, id, &replica, &challenges[&id])
                    .map_err(fil_err(size, "vanilla PoSt proof"))?;
            bincode::serialize(&vanilla).map_err(|e| FilecoinError {
                size: size.name(),
                step: "serializing the vanilla proof",
                reason: e.to_string(),
            })
        })
        .collect()
}
