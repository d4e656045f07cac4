//! Filecoin Proof-of-Spacetime from vanilla proofs: `window-post` (one WindowPoSt partition,
//! what filecoin-proofs' `generate_single_window_post_with_vanilla` proves) and `winning-post`
//! (`generate_winning_post_with_vanilla`). Both take what Curio sends its proving daemon.
//!
//! Job parameters: `{"sector_size": "2KiB"|…|"64GiB", "randomness": "<64 hex digits>",
//! "miner": "f01234"|1234}` (or `"prover_id": "<64 hex>"`), for `window-post` also
//! `"partition_index": n` (default 0), and optionally `"proof": "StackedDrgWindow2KiBV1"` (the
//! default is the version the network uses: WindowPoSt `V1_2`, WinningPoSt `V1`). Input: JSON
//! `{"vanilla_proofs": ["<base64>", …]}`, each entry one sector's `FallbackPoStSectorProof`
//! serialized with bincode, as filecoin-proofs-api's `generate_single_vanilla_proof` returns it
//! (Curio's `vanilla_proofs`): a WindowPoSt partition's sectors (1 up to the partition size), or
//! WinningPoSt's one challenged sector.
//!
//! The witness a synth node ships comes from the native generator (`post/native.rs`), equal
//! to the circuit's witness-only synthesis element for element.
//!
//! A job is one partition whose circuit is `FallbackPoStCompound::circuit` over the vanilla
//! proofs arranged as filecoin-proofs arranges them (`single_partition_vanilla_proofs`,
//! `partition_vanilla_proofs`), which also verifies them: bad vanilla proofs fail the job before
//! any circuit is built. The job's proof (192 bytes) is the `PartitionSnarkProof` /
//! `SnarkProof` filecoin-proofs returns; `verify_window_post` (with the partition's sectors in
//! the partition's place) and `verify_winning_post` accept it. Parameters: Filecoin's published
//! `v28-proof-of-spacetime-fallback-….params`, like PoRep's ([`crate::porep`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use blstrs::Scalar;
use cuzk_prover::setup::FixedBase;
use cuzk_prover::ShapeMatrices;
use cuzk_wire::witness::Witness;
use filecoin_hashers::Hasher;
use filecoin_proofs::{
    as_safe_commitment, partition_vanilla_proofs, single_partition_vanilla_proofs,
    FallbackPoStSectorProof, MerkleTreeTrait,
};
use serde::Deserialize;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::parameter_cache::{
    parameter_cache_params_path, parameter_id, CacheableParameters,
};
use storage_proofs_core::util::NODE_SIZE;
use storage_proofs_post::fallback::{
    self, FallbackPoStCircuit, FallbackPoStCompound, PublicSector,
};

use crate::filecoin::{hex_string, parse_hex32, resolve_prover_id, with_tree, Miner, SectorSize};
use crate::native::paths::tree_arities;
use crate::vanilla::{self, LastInput};
use crate::{CircuitError, CircuitFamily, PartitionShape, Synthesis, Synthesized};

mod fixtures;
mod native;
#[cfg(test)]
mod native_tests;
mod registered;
mod synthetic;
pub use fixtures::{vanilla_proofs, PostSector};
pub use registered::{PostKind, PostProof};
pub use synthetic::SyntheticPost;

/// The most input a PoSt job takes: a 32 GiB WindowPoSt partition (2349 sectors of ~25 KB of
/// vanilla proof, base64 in JSON) is ~80 MB.
pub const MAX_POST_INPUT_BYTES: usize = 256 << 20;

type Domain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
type Compound<Tree> = FallbackPoStCompound<Tree>;
type Circuit<Tree> = FallbackPoStCircuit<Tree>;

fn input_err(kind: PostKind, reason: impl std::fmt::Display) -> CircuitError {
    CircuitError::BadInput {
        circuit: kind.circuit(),
        reason: reason.to_string(),
    }
}

fn shape_key(proof: PostProof) -> String {
    format!("{}-{}", proof.kind.circuit(), proof.size.name())
}

fn params_err(proof: PostProof, reason: impl std::fmt::Display) -> CircuitError {
    CircuitError::Params {
        shape: shape_key(proof),
        reason: reason.to_string(),
    }
}

/// filecoin-proofs' public parameters of the proof's circuit (the same for every version).
fn public_params<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
) -> Result<fallback::PublicParams, CircuitError> {
    let config = proof.config();
    let pp = match proof.kind {
        PostKind::Window => filecoin_proofs::parameters::window_post_public_params::<Tree>(&config),
        PostKind::Winning => {
            filecoin_proofs::parameters::winning_post_public_params::<Tree>(&config)
        }
    };
    pp.map_err(|e| params_err(proof, format!("{e:#}")))
}

/// The published name of the proof's Groth16 parameter file (`v28-proof-of-spacetime-…`).
pub fn parameter_file_name(proof: PostProof) -> Result<String, CircuitError> {
    with_tree!(proof.size, Tree => {
        let pp = public_params::<Tree>(proof)?;
        Ok(parameter_id(&<Compound<Tree> as CacheableParameters<Circuit<Tree>, _>>::cache_identifier(&pp)))
    })
}

/// Where filecoin-proofs itself looks for that file (`FIL_PROOFS_PARAMETER_CACHE`).
pub fn parameter_path(proof: PostProof) -> Result<PathBuf, CircuitError> {
    with_tree!(proof.size, Tree => {
        let pp = public_params::<Tree>(proof)?;
        Ok(parameter_cache_params_path(&<Compound<Tree> as CacheableParameters<Circuit<Tree>, _>>::cache_identifier(&pp)))
    })
}

/// INSECURE, TEST-ONLY parameters for `proof`'s circuit under its published name, with the
/// `.vk` and `.meta` filecoin-proofs derives from them
/// (see [`crate::porep::generate_test_parameters`]).
pub fn generate_test_parameters(
    proof: PostProof,
    shapes: &crate::ShapeCache,
    engine: &dyn FixedBase,
    force: bool,
) -> Result<PathBuf, CircuitError> {
    let path = parameter_path(proof)?;
    let family = PostFamily::new(proof, [0; 32], [0; 32], 0);
    crate::fil_params::install_test_parameters(&family, &path, shapes, engine, force, || {
        with_tree!(proof.size, Tree => {
            let pp = public_params::<Tree>(proof).map_err(|e| e.to_string())?;
            Compound::<Tree>::verifying_key::<rand::rngs::OsRng>(None, &pp)
                .map_err(|e| format!("cannot write the verifying key: {e:#}"))?;
            let blank = Compound::<Tree>::blank_circuit(&pp);
            <Compound<Tree> as CacheableParameters<Circuit<Tree>, _>>::get_param_metadata(blank, &pp)
                .map_err(|e| format!("cannot write the metadata: {e:#}"))?;
        });
        Ok(())
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    sector_size: SectorSize,
    randomness: String,
    #[serde(default)]
    prover_id: Option<String>,
    #[serde(default)]
    miner: Option<Miner>,
    #[serde(default)]
    partition_index: Option<u32>,
    #[serde(default)]
    proof: Option<String>,
}

/// The partition, checked: public inputs as the prover builds them, and its vanilla proof
/// arranged for the circuit.
struct Partition<Tree: MerkleTreeTrait> {
    pub_inputs: fallback::PublicInputs<Domain<Tree>>,
    proof: fallback::Proof<Tree::Proof>,
}

/// One PoSt partition of one prover and randomness.
pub struct PostFamily {
    proof: PostProof,
    prover_id: [u8; 32],
    randomness: [u8; 32],
    partition_index: usize,
    /// The last input's checked partition (`Partition<Tree>`).
    parsed: LastInput,
}

impl std::fmt::Debug for PostFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostFamily")
            .field("proof", &self.proof.api_name())
            .field("prover_id", &hex_string(&self.prover_id))
            .field("randomness", &hex_string(&self.randomness))
            .field("partition_index", &self.partition_index)
            .finish()
    }
}

impl PostFamily {
    pub fn new(
        proof: PostProof,
        prover_id: [u8; 32],
        randomness: [u8; 32],
        partition_index: usize,
    ) -> Self {
        Self {
            proof,
            prover_id,
            randomness,
            partition_index,
            parsed: LastInput::default(),
        }
    }

    pub fn from_params(kind: PostKind, params: &serde_json::Value) -> Result<Self, CircuitError> {
        let p: Params = crate::parse_params(kind.circuit(), params)?;
        let bad = |reason: String| CircuitError::BadParams {
            circuit: kind.circuit(),
            reason,
        };
        let prover_id = resolve_prover_id(p.prover_id, p.miner).map_err(bad)?;
        let randomness = parse_hex32(&p.randomness).ok_or_else(|| {
            bad(format!(
                "'randomness' must be 64 hex digits (32 bytes), got {}",
                cuzk_wire::excerpt(&p.randomness)
            ))
        })?;
        let proof = match p.proof {
            None => PostProof::current(kind, p.sector_size),
            Some(name) => {
                let proof = PostProof::from_api_name(&name).map_err(bad)?;
                if (proof.kind, proof.size) != (kind, p.sector_size) {
                    return Err(bad(format!(
                        "'proof' {name} is not a {} proof for a {} sector",
                        kind.circuit(),
                        p.sector_size.name()
                    )));
                }
                proof
            }
        };
        let partition_index = match (kind, p.partition_index) {
            (PostKind::Winning, Some(_)) => {
                return Err(bad("WinningPoSt has no 'partition_index'".into()))
            }
            (_, index) => index.unwrap_or(0) as usize,
        };
        Ok(Self::new(proof, prover_id, randomness, partition_index))
    }

    pub fn proof(&self) -> PostProof {
        self.proof
    }

    fn err(&self, reason: impl std::fmt::Display) -> CircuitError {
        input_err(self.proof.kind, reason)
    }

    /// The input's partition, decoded and checked once per distinct input.
    fn partition<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
    ) -> Result<Arc<Partition<Tree>>, CircuitError> {
        self.parsed
            .get_or_check(input, || self.check::<Tree>(input))
    }

    /// The vanilla proofs in the input, decoded with bounded reads.
    fn decode<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
    ) -> Result<Vec<FallbackPoStSectorProof<Tree>>, CircuitError> {
        let circuit = self.proof.kind.circuit();
        let entries = vanilla::entries(circuit, input, MAX_POST_INPUT_BYTES)?;
        let (count, max) = (entries.len(), self.proof.max_sectors());
        let expected = match self.proof.kind {
            PostKind::Window => (1..=max).contains(&count),
            PostKind::Winning => count == max,
        };
        if !expected {
            return Err(self.err(format!(
                "{count} vanilla proofs; {} takes {} per job",
                self.proof.api_name(),
                match self.proof.kind {
                    PostKind::Window => format!("1 to {max} (the partition's sectors)"),
                    PostKind::Winning => format!("{max} (the challenged sector)"),
                }
            )));
        }
        let what = format!(
            "a {} sector proof (bincode FallbackPoStSectorProof)",
            self.proof.size.name()
        );
        entries
            .iter()
            .enumerate()
            .map(|(i, entry)| vanilla::decode(circuit, i, entry, &what))
            .collect()
    }

    /// Decodes the input and arranges and verifies its vanilla proofs as filecoin-proofs does
    /// before proving; its assertions become errors.
    fn check<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
    ) -> Result<Partition<Tree>, CircuitError> {
        let vanilla = self.decode::<Tree>(input)?;
        let randomness = as_safe_commitment(&self.randomness, "randomness")
            .map_err(|e| self.err(format!("{e:#}")))?;
        let prover_id = as_safe_commitment(&self.prover_id, "prover_id")
            .map_err(|e| self.err(format!("{e:#}")))?;
        let pp = public_params::<Tree>(self.proof)?;
        let config = self.proof.config();
        let sectors = vanilla
            .iter()
            .map(|p| PublicSector {
                id: p.sector_id,
                comm_r: p.comm_r,
            })
            .collect();
        let arranged = catch_unwind(AssertUnwindSafe(|| match self.proof.kind {
            PostKind::Window => {
                let pub_inputs = fallback::PublicInputs {
                    randomness,
                    prover_id,
                    sectors,
                    k: Some(self.partition_index),
                };
                single_partition_vanilla_proofs(&config, &pp, &pub_inputs, &vanilla)
                    .map(|proof| Partition { pub_inputs, proof })
            }
            PostKind::Winning => {
                let pub_inputs = fallback::PublicInputs {
                    randomness,
                    prover_id,
                    sectors,
                    k: None,
                };
                partition_vanilla_proofs(&config, &pp, &pub_inputs, 1, &vanilla).and_then(
                    |mut proofs| {
                        let proof = proofs
                            .pop()
                            .ok_or_else(|| anyhow::anyhow!("no partition proof"))?;
                        Ok(Partition { pub_inputs, proof })
                    },
                )
            }
        }));
        let what = match self.proof.kind {
            PostKind::Window => format!(
                "WindowPoSt vanilla proofs do not verify for partition {} with this randomness",
                self.partition_index
            ),
            PostKind::Winning => {
                "WinningPoSt vanilla proof does not verify with this randomness".into()
            }
        };
        match arranged {
            Ok(Ok(partition)) => Ok(partition),
            Ok(Err(e)) => Err(self.err(format!(
                "{what} ({}, {} sector): {e:#}",
                self.proof.api_name(),
                self.proof.size.name()
            ))),
            Err(_) => Err(self.err(format!("{what}: malformed (the verifier panicked)"))),
        }
    }

    /// The partition's circuit, as `FallbackPoStCompound::prove_with_vanilla` builds it (its
    /// one vanilla proof is partition 0 of what it is given).
    fn circuit<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
    ) -> Result<Circuit<Tree>, CircuitError> {
        let partition = self.partition::<Tree>(input)?;
        let pp = public_params::<Tree>(self.proof)?;
        Compound::<Tree>::circuit(
            &partition.pub_inputs,
            Default::default(),
            &partition.proof,
            &pp,
            Some(0),
        )
        .map_err(|e| self.err(format!("cannot build the circuit: {e:#}")))
    }

    fn synthesize_tree<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
        index: usize,
        mode: Synthesis,
    ) -> Result<Synthesized, CircuitError> {
        self.check_index(index)?;
        if let Synthesis::Witness { .. } = mode {
            // Like the gadgets, never let a bug's panic take the synthesis pool down.
            let native = catch_unwind(AssertUnwindSafe(|| self.native_witness::<Tree>(input)))
                .unwrap_or_else(|_| Err(self.native_err("the generator panicked")))?;
            if let Some(w) = native {
                return Ok(Synthesized::Witness(w));
            }
        }
        crate::run_guarded(
            shape_key(self.proof),
            index,
            mode,
            || self.circuit::<Tree>(input),
            self.err("circuit construction panicked"),
        )
    }

    fn native_err(&self, reason: impl std::fmt::Display) -> CircuitError {
        CircuitError::Native {
            shape: shape_key(self.proof),
            partition: 0,
            reason: reason.to_string(),
        }
    }

    /// The partition's witness from the native generator, or `None` (logged once) for a tree
    /// shape it does not know, which the gadgets then synthesize.
    fn native_witness<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
    ) -> Result<Option<Witness>, CircuitError> {
        let pp = public_params::<Tree>(self.proof)?;
        let arities = tree_arities::<Tree>(pp.sector_size as usize / NODE_SIZE);
        let Some(layout) = native::Layout::new(pp.sector_count, pp.challenge_count, &arities)
        else {
            crate::native::through_gadgets(shape_key(self.proof));
            return Ok(None);
        };
        let partition = self.partition::<Tree>(input)?;
        let sectors =
            native::sectors::<Tree>(&partition.pub_inputs.sectors, &partition.proof, &arities)
                .map_err(|e| self.err(e))?;
        native::generate(&sectors, &layout, native::Options::default())
            .map(Some)
            .map_err(|e| match e {
                native::NativeError::Layout { .. } => self.native_err(e),
                _ => self.err(e),
            })
    }

    fn check_index(&self, index: usize) -> Result<(), CircuitError> {
        if index == 0 {
            Ok(())
        } else {
            Err(self.err(format!("partition {index} requested but the job has 1")))
        }
    }

    /// The public inputs the verifier derives: `verify_window_post` takes every sector of the
    /// deadline and checks partition k against chunk k, so the partition's sectors stand in
    /// chunk `partition_index` (the chunks before it are never read); `verify_winning_post`
    /// lists the challenged sector once per challenge.
    fn inputs<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
    ) -> Result<Vec<Scalar>, CircuitError> {
        let partition = self.partition::<Tree>(input)?;
        let pp = public_params::<Tree>(self.proof)?;
        let given = &partition.pub_inputs.sectors;
        let (sectors, k) = match self.proof.kind {
            PostKind::Window => {
                let before = self.partition_index * pp.sector_count;
                let mut sectors = vec![given[0].clone(); before];
                sectors.extend(given.iter().cloned());
                (sectors, self.partition_index)
            }
            PostKind::Winning => (vec![given[0].clone(); pp.sector_count], 0),
        };
        let pub_inputs = fallback::PublicInputs {
            sectors,
            k: None,
            ..partition.pub_inputs.clone()
        };
        catch_unwind(AssertUnwindSafe(|| {
            Compound::<Tree>::generate_public_inputs(&pub_inputs, &pp, Some(k))
        }))
        .map_err(|_| self.err("public input derivation panicked"))?
        .map_err(|e| self.err(format!("cannot derive the public inputs: {e:#}")))
    }

    /// bellperson's own proof of the partition (`create_proof_batch` with the given r, s):
    /// what our prover's proof must equal byte for byte.
    pub fn bellperson_proof(
        &self,
        input: &[u8],
        params: &bellperson::groth16::Parameters<blstrs::Bls12>,
        r: Scalar,
        s: Scalar,
    ) -> Result<bellperson::groth16::Proof<blstrs::Bls12>, CircuitError> {
        with_tree!(self.proof.size, Tree => {
            let circuit = self.circuit::<Tree>(input)?;
            crate::bellperson_proof(circuit, params, r, s, |e| self.err(e))
        })
    }
}

/// Constraints and variables of a PoSt circuit, linear in its sectors and challenges: measured
/// on blank circuits of one and two sectors and challenges for the size's tree (milliseconds),
/// once per process.
fn shape_of(proof: PostProof) -> PartitionShape {
    static SHAPES: OnceLock<Mutex<Vec<(PostProof, PartitionShape)>>> = OnceLock::new();
    let shapes = SHAPES.get_or_init(Mutex::default);
    if let Some((_, s)) = shapes
        .lock()
        .expect("shapes poisoned")
        .iter()
        .find(|(p, _)| (p.kind, p.size) == (proof.kind, proof.size))
    {
        return *s;
    }
    let pp = with_tree!(proof.size, Tree => public_params::<Tree>(proof))
        .expect("every PoSt proof has public parameters");
    let count = |sector_count: usize, challenge_count: usize| -> [u64; 2] {
        let small = fallback::PublicParams {
            sector_count,
            challenge_count,
            ..pp.clone()
        };
        let m = with_tree!(proof.size, Tree => {
            cuzk_prover::r1cs::capture(Compound::<Tree>::blank_circuit(&small))
        })
        .expect("a blank PoSt circuit synthesizes");
        [m.constraints() as u64, (m.inputs + m.aux) as u64]
    };
    let (one, two_challenges, two_sectors) = (count(1, 1), count(1, 2), count(2, 1));
    let total = |i: usize| {
        let per_challenge = two_challenges[i] - one[i];
        let per_sector = two_sectors[i] - one[i] - per_challenge;
        let fixed = one[i] - per_sector - per_challenge;
        let (s, c) = (pp.sector_count as u64, pp.challenge_count as u64);
        fixed + s * (per_sector + c * per_challenge)
    };
    let shape = PartitionShape {
        constraints: total(0),
        variables: total(1),
    };
    shapes.lock().expect("shapes poisoned").push((proof, shape));
    shape
}

impl CircuitFamily for PostFamily {
    fn name(&self) -> &'static str {
        self.proof.kind.circuit()
    }

    fn shape_key(&self) -> String {
        shape_key(self.proof)
    }

    fn partitions(&self) -> usize {
        1
    }

    fn partition_shape(&self) -> PartitionShape {
        shape_of(self.proof)
    }

    fn synthesize(
        &self,
        input: &[u8],
        index: usize,
        mode: Synthesis,
    ) -> Result<Synthesized, CircuitError> {
        with_tree!(self.proof.size, Tree => self.synthesize_tree::<Tree>(input, index, mode))
    }

    fn capture_matrices(&self) -> Result<ShapeMatrices, CircuitError> {
        with_tree!(self.proof.size, Tree => {
            let pp = public_params::<Tree>(self.proof)?;
            crate::capture(shape_key(self.proof), Compound::<Tree>::blank_circuit(&pp))
        })
    }

    fn public_inputs(&self, input: &[u8], index: usize) -> Result<Vec<Scalar>, CircuitError> {
        self.check_index(index)?;
        with_tree!(self.proof.size, Tree => self.inputs::<Tree>(input))
    }

    fn parameter_file(&self) -> Option<PathBuf> {
        // Cannot fail for a supported size; if it did, the cache would refuse to prove the
        // shape with a clear error rather than generate parameters for it.
        parameter_file_name(self.proof).ok().map(PathBuf::from)
    }

    fn published_digest(&self) -> Option<&'static str> {
        crate::fil_params::published_digest(&parameter_file_name(self.proof).ok()?)
    }
}

#[cfg(test)]
mod tests;
