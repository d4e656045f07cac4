//! The PoRep shape's matrices, captured challenge by challenge on every core. One sequential
//! capture of a 32 GiB partition was most of its parameter generation's time on the H200 host
//! (docs/gpu-runs.md); its 18 challenges are identical blocks after a short prologue, so each is
//! captured on its own ([`MatrixCs::continuation`]) and the blocks are appended in order. The
//! result equals the sequential capture (test below, and the byte-identity test in
//! cli/tests/porep.rs proves with it).

use cuzk_prover::r1cs::{Counts, MatrixCs};
use cuzk_prover::ShapeMatrices;
use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::MerkleTreeTrait;
use rand::SeedableRng;
use rayon::prelude::*;
use storage_proofs_porep::stacked::{Proof, StackedCircuit};

use super::shape_key;
use super::synthetic::{partition_proofs, random_domain};
use crate::filecoin::SectorSize;
use crate::CircuitError;

type Challenge<Tree> = Proof<Tree, DefaultPieceHasher>;

pub(super) fn blank_matrices<Tree: 'static + MerkleTreeTrait>(
    size: SectorSize,
) -> Result<ShapeMatrices, CircuitError> {
    let err = |reason: String| CircuitError::Params {
        shape: shape_key(size),
        reason,
    };
    // Values are never read; random ones of the real shape keep every gadget on its usual path.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let challenges = partition_proofs::<Tree>(size, &mut rng)?;
    let (replica_id, comm_r) = (random_domain(&mut rng), random_domain(&mut rng));
    let comm_d = random_domain(&mut rng);
    let first = challenges
        .first()
        .ok_or_else(|| err("no challenges".into()))?;
    let (comm_r_last, comm_c) = (first.comm_r_last(), first.comm_c());
    let synthesize = |cs: &mut MatrixCs, proofs: &[Challenge<Tree>]| {
        StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
            cs,
            Some(replica_id),
            Some(comm_d),
            Some(comm_r),
            Some(comm_r_last),
            Some(comm_c),
            proofs.iter().cloned().map(Into::into).collect(),
        )
        .map_err(|e| err(format!("synthesizing the shape: {e}")))
    };
    let mut main = MatrixCs::start();
    synthesize(&mut main, &[])?;
    let prologue = main.counts();
    let block = |at: Counts, challenge: &Challenge<Tree>| {
        let mut cs = MatrixCs::continuation(prologue, at);
        synthesize(&mut cs, std::slice::from_ref(challenge))?;
        Ok::<_, CircuitError>(cs)
    };
    let head = block(prologue, first)?;
    let each = head.counts();
    let rest: Vec<MatrixCs> = challenges[1..]
        .par_iter()
        .enumerate()
        .map(|(i, c)| block(prologue.after(each, i + 1), c))
        .collect::<Result<_, _>>()?;
    for cs in std::iter::once(head).chain(rest) {
        if cs.counts() != each {
            return Err(err(format!(
                "challenges differ in shape: {:?} after {each:?}",
                cs.counts()
            )));
        }
        main.append(cs).map_err(|e| err(e.to_string()))?;
    }
    main.finish().map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::porep::{public_params, Compound, Drg};
    use storage_proofs_core::compound_proof::CompoundProof;

    #[test]
    fn challenge_by_challenge_equals_one_sequential_capture() {
        type Tree = filecoin_proofs::constants::SectorShapeBase;
        let size = SectorSize::S2KiB;
        let pp = public_params::<Tree>(&size.config()).unwrap();
        let blank = <Compound<Tree> as CompoundProof<Drg<'_, Tree>, _>>::blank_circuit(&pp);
        let sequential = cuzk_prover::r1cs::capture(blank).unwrap();
        let parallel = blank_matrices::<Tree>(size).unwrap();
        assert_eq!(parallel.constraints(), sequential.constraints());
        assert!(parallel == sequential, "matrices differ");
    }
}
