//! SnapDeals inputs from a real sector, for tests and fixtures: a sector sealed with
//! filecoin-proofs (the sector key), new data encoded into it (`encode_into`), and the vanilla
//! partition proofs Curio would send (`generate_partition_proofs`, serialized with bincode as
//! filecoin-proofs-api serializes them).

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use filecoin_proofs::{
    add_piece, encode_into, generate_partition_proofs, generate_piece_commitment,
    verify_empty_sector_update_proof, MerkleTreeTrait, PaddedBytesAmount, SectorUpdateConfig,
    UnpaddedBytesAmount,
};
use rand::RngCore;
use storage_proofs_update::constants::TreeRHasher;

use super::SnapFamily;
use crate::filecoin::{fil_err, hex_string, with_tree, FilecoinError, SectorSize};
use crate::post::PostSector;

/// A sector key with new data encoded into it: what a SnapDeals prover has.
#[derive(Clone, Debug)]
pub struct UpdatedSector {
    pub size: SectorSize,
    pub comm_r_old: [u8; 32],
    pub comm_r_new: [u8; 32],
    pub comm_d_new: [u8; 32],
    /// The sector key (the sealed sector before the update) and its cache.
    pub key: PostSector,
    pub replica: PathBuf,
    pub replica_cache: PathBuf,
    /// One bincode `PartitionProof` per partition.
    pub vanilla_proofs: Vec<Vec<u8>>,
}

impl UpdatedSector {
    /// The `snap-deals` job parameters for this update.
    pub fn job_params(&self) -> serde_json::Value {
        serde_json::json!({
            "sector_size": self.size.name(),
            "comm_r_old": hex_string(&self.comm_r_old),
            "comm_r_new": hex_string(&self.comm_r_new),
            "comm_d_new": hex_string(&self.comm_d_new),
        })
    }

    pub fn family(&self) -> SnapFamily {
        SnapFamily::new(self.size, self.comm_r_old, self.comm_r_new, self.comm_d_new)
    }

    /// filecoin-proofs' `verify_empty_sector_update_proof` of `proof` for this update (the
    /// verifying key from the parameter cache).
    pub fn verify(&self, proof: &[u8]) -> Result<bool, FilecoinError> {
        with_tree!(self.size, Tree => verify_empty_sector_update_proof::<Tree>(
            &self.size.config(), proof, self.comm_r_old, self.comm_r_new, self.comm_d_new,
        ))
        .map_err(fil_err(self.size, "verify_empty_sector_update_proof"))
    }
}

/// Seals a sector of random data in `dir` as the sector key, encodes a random piece into it as
/// a replica update and makes the update's vanilla proofs. 2 KiB: well under a second.
pub fn update_sector(
    size: SectorSize,
    dir: &Path,
    rng: &mut dyn RngCore,
) -> Result<UpdatedSector, FilecoinError> {
    with_tree!(size, Tree => update::<Tree>(size, dir, rng))
}

fn update<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    dir: &Path,
    rng: &mut dyn RngCore,
) -> Result<UpdatedSector, FilecoinError> {
    let io = |step: &'static str| {
        move |e: std::io::Error| FilecoinError {
            size: size.name(),
            step,
            reason: e.to_string(),
        }
    };
    let key = PostSector::seal(size, &dir.join("key"), 1, rng)?;
    let update_dir = dir.join("update");
    let replica_cache = update_dir.join("cache");
    fs::create_dir_all(&replica_cache).map_err(io("creating the update's cache"))?;
    let piece_len = UnpaddedBytesAmount::from(PaddedBytesAmount(size.bytes()));
    let mut piece = vec![0u8; piece_len.0 as usize];
    rng.fill_bytes(&mut piece);
    let piece_info = generate_piece_commitment(&piece[..], piece_len)
        .map_err(fil_err(size, "piece commitment"))?;
    let staged = update_dir.join("staged");
    let mut staged_file = File::create(&staged).map_err(io("creating the staged data"))?;
    add_piece(&piece[..], &mut staged_file, piece_len, &[]).map_err(fil_err(size, "add_piece"))?;
    drop(staged_file);
    // encode_into maps the new replica: it must have the sector's length already.
    let replica = update_dir.join("sealed");
    File::create(&replica)
        .and_then(|f| f.set_len(size.bytes()))
        .map_err(io("creating the new replica"))?;
    let config = SectorUpdateConfig::from_porep_config(&size.config());
    let encoded = encode_into::<Tree>(
        &config,
        &replica,
        &replica_cache,
        &key.replica,
        &key.cache_dir,
        &staged,
        &[piece_info],
    )
    .map_err(fil_err(size, "encode_into"))?;
    let proofs = generate_partition_proofs::<Tree>(
        config,
        key.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &key.replica,
        &key.cache_dir,
        &replica,
        &replica_cache,
    )
    .map_err(fil_err(size, "generate_partition_proofs"))?;
    let vanilla_proofs = proofs
        .iter()
        .map(|p| {
            bincode::serialize(p).map_err(|e| FilecoinError {
                size: size.name(),
                step: "serializing a partition proof",
                reason: e.to_string(),
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(UpdatedSector {
        size,
        comm_r_old: key.comm_r,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
        key,
        replica,
        replica_cache,
        vanilla_proofs,
    })
}
