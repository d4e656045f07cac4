//! PoRep inputs from a real sector, for tests, fixtures and benches: a sector sealed with
//! filecoin-proofs up to Commit-1, and filecoin-proofs' own C2 and verifier to compare with.

use std::fs::{self, File};

use filecoin_proofs::{MerkleTreeTrait, SealCommitPhase1Output};
use rand::RngCore;

use crate::filecoin::{
    fil_err, hex_string, with_tree, FilecoinError, ProofVersion, SealProof, SectorSize,
};

/// A sector sealed through the real API up to Commit-1: what a C2 job needs.
pub struct SealedSector {
    pub size: SectorSize,
    pub proof: SealProof,
    pub sector_id: u64,
    pub prover_id: [u8; 32],
    /// `SealCommitPhase1Output` as filecoin-proofs serializes it to JSON.
    pub c1_json: Vec<u8>,
}

impl SealedSector {
    /// The `porep-c2` job parameters for this sector (its C1 output is in filecoin-proofs'
    /// form, which does not name its proof: a version other than V1_1 is named here).
    pub fn job_params(&self) -> serde_json::Value {
        let mut params = serde_json::json!({
            "sector_size": self.size.name(),
            "sector_id": self.sector_id,
            "prover_id": hex_string(&self.prover_id),
        });
        if self.proof != SealProof::v1_1(self.size) {
            params["proof"] = self.proof.api_name().into();
        }
        params
    }
}

/// Seals a sector of random data in `work_dir` with filecoin-proofs (add_piece, PC1, PC2, C1)
/// and returns its C1 output: as `proof`, or as `StackedDrg*V1_1` given a size. A
/// synthetic-PoRep sector gets its synthetic proofs generated between PC2 and C1, as lotus
/// does. 0.1 s for 2 KiB, ~11 s for 8 MiB, ~13 min for 512 MiB on 2 cores.
pub fn seal_sector(
    proof: impl Into<SealProof>,
    work_dir: &std::path::Path,
    sector_id: u64,
    prover_id: [u8; 32],
    rng: &mut dyn RngCore,
) -> Result<SealedSector, FilecoinError> {
    let proof = proof.into();
    with_tree!(proof.size, Tree => seal::<Tree>(proof, work_dir, sector_id, prover_id, rng))
}

fn seal<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    work_dir: &std::path::Path,
    sector_id: u64,
    prover_id: [u8; 32],
    rng: &mut dyn RngCore,
) -> Result<SealedSector, FilecoinError> {
    use filecoin_proofs::{
        add_piece, generate_piece_commitment, generate_synth_proofs, seal_commit_phase1,
        seal_pre_commit_phase1, seal_pre_commit_phase2, PaddedBytesAmount, UnpaddedBytesAmount,
    };
    let size = proof.size;
    let io = |step: &'static str| {
        move |e: std::io::Error| FilecoinError {
            size: size.name(),
            step,
            reason: e.to_string(),
        }
    };
    let config = proof.config();
    let cache_dir = work_dir.join("cache");
    fs::create_dir_all(&cache_dir).map_err(io("creating the sector cache"))?;
    let piece_len = UnpaddedBytesAmount::from(PaddedBytesAmount(size.bytes()));
    let mut piece = vec![0u8; piece_len.0 as usize];
    rng.fill_bytes(&mut piece);
    let piece_info = generate_piece_commitment(&piece[..], piece_len)
        .map_err(fil_err(size, "piece commitment"))?;
    let staged = work_dir.join("staged");
    let sealed = work_dir.join("sealed");
    let mut staged_file = File::create(&staged).map_err(io("creating the staged sector"))?;
    add_piece(&piece[..], &mut staged_file, piece_len, &[]).map_err(fil_err(size, "add_piece"))?;
    drop(staged_file);
    File::create(&sealed).map_err(io("creating the sealed sector"))?;
    let mut ticket = [0u8; 32];
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut ticket);
    rng.fill_bytes(&mut seed);
    // Both become field elements: keep them below the modulus like lotus' randomness does.
    ticket[31] &= 0x3f;
    seed[31] &= 0x3f;
    let pieces = [piece_info];
    let pc1 = seal_pre_commit_phase1::<_, _, _, Tree>(
        &config,
        &cache_dir,
        &staged,
        &sealed,
        prover_id,
        sector_id.into(),
        ticket,
        &pieces,
    )
    .map_err(fil_err(size, "PC1"))?;
    let pc2 =
        seal_pre_commit_phase2(&config, pc1, &cache_dir, &sealed).map_err(fil_err(size, "PC2"))?;
    if proof.version == ProofVersion::V1_1Synthetic {
        generate_synth_proofs::<_, Tree>(
            &config,
            &cache_dir,
            &sealed,
            prover_id,
            sector_id.into(),
            ticket,
            pc2.clone(),
            &pieces,
        )
        .map_err(fil_err(size, "synthetic proofs"))?;
    }
    let c1 = seal_commit_phase1::<_, Tree>(
        &config,
        &cache_dir,
        &sealed,
        prover_id,
        sector_id.into(),
        ticket,
        seed,
        pc2,
        &pieces,
    )
    .map_err(fil_err(size, "C1"))?;
    let c1_json = serde_json::to_vec(&c1).map_err(|e| FilecoinError {
        size: size.name(),
        step: "serializing C1",
        reason: e.to_string(),
    })?;
    Ok(SealedSector {
        size,
        proof,
        sector_id,
        prover_id,
        c1_json,
    })
}

/// filecoin-proofs' own single-process C2 (`seal_commit_phase2`, which also verifies): the
/// baseline the cluster is compared with. Needs the parameters in the parameter cache.
pub fn seal_commit_phase2(sector: &SealedSector) -> Result<Vec<u8>, FilecoinError> {
    let size = sector.size;
    with_tree!(size, Tree => {
        let c1: SealCommitPhase1Output<Tree> = serde_json::from_slice(&sector.c1_json)
            .map_err(|e| FilecoinError { size: size.name(), step: "parsing C1", reason: e.to_string() })?;
        filecoin_proofs::seal_commit_phase2::<Tree>(&sector.proof.config(), c1, sector.prover_id, sector.sector_id.into())
            .map(|out| out.proof)
            .map_err(fil_err(size, "seal_commit_phase2"))
    })
}

/// `filecoin_proofs::verify_seal` for a C2 proof of `sector` (commitments, ticket and seed
/// from its C1 output; the verifying key from the parameter cache).
pub fn verify_seal(sector: &SealedSector, proof: &[u8]) -> Result<bool, FilecoinError> {
    let size = sector.size;
    with_tree!(size, Tree => {
        let c1: SealCommitPhase1Output<Tree> = serde_json::from_slice(&sector.c1_json)
            .map_err(|e| FilecoinError { size: size.name(), step: "parsing C1", reason: e.to_string() })?;
        filecoin_proofs::verify_seal::<Tree>(
            &sector.proof.config(), c1.comm_r, c1.comm_d, sector.prover_id, sector.sector_id.into(),
            c1.ticket, c1.seed, proof,
        )
        .map_err(fil_err(size, "verify_seal"))
    })
}
