//! The `porep-c2` family: a job's parameters, its C1 output parsed and checked once, and each
//! partition's circuit, witness and public inputs from it.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use cuzk_prover::ShapeMatrices;
use cuzk_wire::witness::Witness;
use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::{get_seal_inputs, MerkleTreeTrait, SealCommitPhase1Output};
use serde::Deserialize;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::StackedCircuit;

use super::{
    blank_matrices, commitments, input_err, native, parameter_file_name, params_err, replica_id,
    setup, shape_key, Compound, Drg, MAX_C1_BYTES, NAME,
};
use crate::filecoin::{hex_string, resolve_prover_id, with_tree, Miner, SealProof, SectorSize};
use crate::porep_c1::{self, C1Format};
use crate::{parse_params, CircuitError, CircuitFamily, Synthesis, Synthesized};

/// Parsed C1 outputs kept per family, by input hash: a job's partitions are synthesized
/// concurrently from one input, and a node holds at most a few jobs at once.
const PARSED_CACHE: usize = 2;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    sector_size: SectorSize,
    sector_id: u64,
    #[serde(default)]
    prover_id: Option<String>,
    #[serde(default)]
    miner: Option<Miner>,
    #[serde(default)]
    proof: Option<String>,
    /// The C1 is synthetic (`cuzk-porep synthetic-c1`): timings only, its proof proves nothing.
    #[serde(default)]
    synthetic: bool,
}

/// A C1 output in filecoin-proofs' form, with the proof version it was sealed as.
struct C1<Tree: MerkleTreeTrait> {
    proof: SealProof,
    out: SealCommitPhase1Output<Tree>,
}

/// A C1 output parsed and checked against the job, by input hash.
struct Parsed {
    hash: [u8; 32],
    /// `C1<Tree>` for the family's tree shape.
    c1: Arc<dyn Any + Send + Sync>,
}

/// PoRep C2 for one sector size, sector and prover.
pub struct PorepC2Family {
    size: SectorSize,
    sector_id: u64,
    prover_id: [u8; 32],
    /// The proof version the job names, for inputs that do not name theirs.
    proof: Option<SealProof>,
    synthetic: bool,
    parsed: Mutex<VecDeque<Parsed>>,
}

impl std::fmt::Debug for PorepC2Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PorepC2Family")
            .field("size", &self.size)
            .field("sector_id", &self.sector_id)
            .field("prover_id", &hex_string(&self.prover_id))
            .finish()
    }
}

impl PorepC2Family {
    pub fn new(size: SectorSize, sector_id: u64, prover_id: [u8; 32]) -> Self {
        Self {
            size,
            sector_id,
            prover_id,
            proof: None,
            synthetic: false,
            parsed: Mutex::default(),
        }
    }

    pub fn from_params(params: &serde_json::Value) -> Result<Self, CircuitError> {
        let p: Params = parse_params(NAME, params)?;
        let bad = |reason: String| CircuitError::BadParams {
            circuit: NAME,
            reason,
        };
        let prover_id = resolve_prover_id(p.prover_id, p.miner).map_err(bad)?;
        let mut family = Self::new(p.sector_size, p.sector_id, prover_id);
        if let Some(name) = p.proof {
            let proof = SealProof::from_api_name(&name).map_err(bad)?;
            if proof.size != p.sector_size {
                return Err(bad(format!(
                    "'proof' {name} is not for a {} sector",
                    p.sector_size.name()
                )));
            }
            family.proof = Some(proof);
        }
        family.synthetic = p.synthetic;
        Ok(family)
    }

    pub fn sector_size(&self) -> SectorSize {
        self.size
    }

    /// The input's C1 output, parsed and checked once per distinct input.
    fn c1<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
    ) -> Result<Arc<C1<Tree>>, CircuitError> {
        use sha2::{Digest, Sha256};
        let hash: [u8; 32] = Sha256::digest(input).into();
        let cached = |parsed: &VecDeque<Parsed>| {
            parsed
                .iter()
                .find(|p| p.hash == hash)
                .and_then(|p| p.c1.clone().downcast::<C1<Tree>>().ok())
        };
        if let Some(c1) = cached(&self.parsed.lock().expect("parsed cache poisoned")) {
            return Ok(c1);
        }
        // Concurrent partitions of one job may parse the same input twice; that is cheaper
        // than holding the lock through a parse of a large C1.
        let c1 = Arc::new(self.parse_and_check::<Tree>(input)?);
        let mut parsed = self.parsed.lock().expect("parsed cache poisoned");
        if parsed.len() >= PARSED_CACHE {
            parsed.pop_front();
        }
        parsed.push_back(Parsed {
            hash,
            c1: c1.clone(),
        });
        Ok(c1)
    }

    /// The input in any of its forms, in filecoin-proofs' form, with its proof version.
    fn parse<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
    ) -> Result<C1<Tree>, CircuitError> {
        if input.len() > MAX_C1_BYTES {
            return Err(input_err(format!(
                "C1 output is {} bytes; at most {MAX_C1_BYTES} allowed",
                input.len()
            )));
        }
        let detected = porep_c1::detect(input).map_err(input_err)?;
        if detected.marked_synthetic != self.synthetic {
            return Err(input_err(if detected.marked_synthetic {
                "this C1 output is synthetic (random data, made for timings): submit it with \"synthetic\": true in the job's params"
            } else {
                "the job says \"synthetic\": true but its C1 output is not synthetic"
            }));
        }
        if let Some(number) = detected.sector_number {
            if number != self.sector_id {
                return Err(input_err(format!(
                    "the C1 file is for sector {number}, the job for sector {}",
                    self.sector_id
                )));
            }
        }
        let proof = match (detected.proof, self.proof) {
            (Some(named), Some(job)) if named != job => {
                return Err(input_err(format!(
                    "the C1 output is a {} proof, the job says {}",
                    named.api_name(),
                    job.api_name()
                )))
            }
            (Some(proof), _) | (None, Some(proof)) => proof,
            (None, None) => SealProof::v1_1(self.size),
        };
        if proof.size != self.size {
            return Err(input_err(format!(
                "the C1 output is a {} proof; the job says the sector is {}",
                proof.api_name(),
                self.size.name()
            )));
        }
        let out = match detected.format {
            C1Format::FilecoinProofs => serde_json::from_slice(&detected.json).map_err(|e| {
                input_err(format!(
                    "not a C1 output (SealCommitPhase1Output JSON): {e}"
                ))
            })?,
            C1Format::ProofsApi | C1Format::Lotus => {
                let parts = porep_c1::parse_api(&detected.json, self.size).map_err(input_err)?;
                SealCommitPhase1Output {
                    vanilla_proofs: parts.vanilla_proofs,
                    comm_r: parts.comm_r,
                    comm_d: parts.comm_d,
                    replica_id: parts.replica_id,
                    seed: parts.seed,
                    ticket: parts.ticket,
                }
            }
        };
        Ok(C1 { proof, out })
    }

    fn parse_and_check<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
    ) -> Result<C1<Tree>, CircuitError> {
        let parsed = self.parse::<Tree>(input)?;
        let (proof, c1) = (parsed.proof, &parsed.out);
        let size = self.size.name();
        let partitions = self.size.partitions();
        if c1.vanilla_proofs.len() != partitions {
            return Err(input_err(format!(
                "C1 output has {} partitions; a {size} sector has {partitions}",
                c1.vanilla_proofs.len()
            )));
        }
        if self.synthetic {
            // Random contents: no replica id or vanilla proof to check; its shape was checked
            // by parsing and the partition count.
            return Ok(parsed);
        }
        let expected = replica_id::<Tree>(proof, self.sector_id, &self.prover_id, c1);
        if c1.replica_id != expected {
            return Err(input_err(format!(
                "C1 output was not sealed by prover {} as sector {} with {} (replica id differs; a synthetic-PoRep C1 in filecoin-proofs' own form needs the job parameter \"proof\")",
                hex_string(&self.prover_id),
                self.sector_id,
                proof.api_name(),
            )));
        }
        // The vanilla proofs must verify before a circuit is built from them: circuit
        // construction assumes well-formed proofs (it indexes paths by the tree's shape), and
        // this turns a C1 for another sector size or a corrupted one into a clear error.
        let (cpp, pub_in) = setup::<Tree>(proof, c1)?;
        let valid = catch_unwind(AssertUnwindSafe(|| {
            Drg::<Tree>::verify_all_partitions(&cpp.vanilla_params, &pub_in, &c1.vanilla_proofs)
        }));
        match valid {
            Ok(Ok(true)) => Ok(parsed),
            Ok(Ok(false)) => Err(input_err(format!(
                "C1 vanilla proofs do not verify for a {size} sector (wrong sector size or corrupt C1)"
            ))),
            Ok(Err(e)) => Err(input_err(format!(
                "C1 vanilla proofs do not verify for a {size} sector: {e:#}"
            ))),
            Err(_) => Err(input_err(format!(
                "C1 vanilla proofs are malformed for a {size} sector (verifier panicked)"
            ))),
        }
    }

    /// Partition `index`'s circuit, built from the C1 as filecoin-proofs builds it.
    fn circuit<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
        index: usize,
    ) -> Result<StackedCircuit<Tree, DefaultPieceHasher>, CircuitError> {
        let c1 = self.c1::<Tree>(input)?;
        let (cpp, pub_in) = setup::<Tree>(c1.proof, &c1.out)?;
        let proofs = c1.out.vanilla_proofs.get(index).ok_or_else(|| {
            input_err(format!(
                "partition {index} requested but the job has {}",
                c1.out.vanilla_proofs.len()
            ))
        })?;
        <Compound<Tree> as CompoundProof<Drg<'_, Tree>, _>>::circuit(
            &pub_in,
            (),
            proofs,
            &cpp.vanilla_params,
            Some(index),
        )
        .map_err(|e| input_err(format!("cannot build partition {index}'s circuit: {e:#}")))
    }

    fn synthesize_tree<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
        index: usize,
        mode: Synthesis,
    ) -> Result<Synthesized, CircuitError> {
        if let Synthesis::Witness { .. } = mode {
            let opts = native::Options::new(!self.synthetic);
            // Like the gadgets, never let a bug's panic take the synthesis pool down.
            let native = catch_unwind(AssertUnwindSafe(|| {
                self.native_witness::<Tree>(input, index, opts)
            }))
            .unwrap_or_else(|_| {
                Err(CircuitError::Native {
                    shape: shape_key(self.size),
                    partition: index,
                    reason: "the generator panicked".into(),
                })
            })?;
            if let Some(w) = native {
                return Ok(Synthesized::Witness(w));
            }
        }
        crate::run_guarded(
            shape_key(self.size),
            index,
            mode,
            || self.circuit::<Tree>(input, index),
            input_err(format!("partition {index}'s circuit construction panicked")),
        )
    }

    /// Partition `index`'s witness from the native generator, or `None` (logged once) for a
    /// shape it does not know, which the gadgets then synthesize.
    // `pub(super)`, like `native_partition`: the generator's tests in `porep/native/` call them.
    pub(super) fn native_witness<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
        index: usize,
        opts: native::Options,
    ) -> Result<Option<Witness>, CircuitError> {
        let shape = native::parts::Shape::of::<Tree>(&self.size.config())
            .map_err(|e| params_err(self.size, e))?;
        let Some(layout) = native::Layout::new(&shape) else {
            crate::native::through_gadgets(shape_key(self.size));
            return Ok(None);
        };
        let c1 = self.c1::<Tree>(input)?;
        self.native_partition(&c1.out, index, &shape, &layout, opts)
            .map(Some)
    }

    /// Partition `index` of a parsed C1 through the native generator.
    pub(super) fn native_partition<Tree: 'static + MerkleTreeTrait>(
        &self,
        c1: &SealCommitPhase1Output<Tree>,
        index: usize,
        shape: &native::parts::Shape,
        layout: &native::Layout,
        opts: native::Options,
    ) -> Result<Witness, CircuitError> {
        let proofs = c1.vanilla_proofs.get(index).ok_or_else(|| {
            input_err(format!(
                "partition {index} requested but the job has {}",
                c1.vanilla_proofs.len()
            ))
        })?;
        let (comm_r, comm_d) = commitments(c1)?;
        let partition =
            native::parts::partition::<Tree>(proofs, &c1.replica_id, &comm_d, &comm_r, shape)
                .map_err(|e| input_err(format!("partition {index}: {e}")))?;
        native::generate(&partition, layout, opts).map_err(|e| match e {
            native::NativeError::Layout { .. } => CircuitError::Native {
                shape: shape_key(self.size),
                partition: index,
                reason: e.to_string(),
            },
            _ => input_err(format!("partition {index}: {e}")),
        })
    }

    /// bellperson's own proof of partition `index` (`create_proof_batch` with the given r, s):
    /// what our prover's proof must equal byte for byte.
    pub fn bellperson_proof(
        &self,
        input: &[u8],
        index: usize,
        params: &bellperson::groth16::Parameters<blstrs::Bls12>,
        r: Scalar,
        s: Scalar,
    ) -> Result<bellperson::groth16::Proof<blstrs::Bls12>, CircuitError> {
        with_tree!(self.size, Tree => self.bellperson_tree::<Tree>(input, index, params, r, s))
    }

    fn bellperson_tree<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
        index: usize,
        params: &bellperson::groth16::Parameters<blstrs::Bls12>,
        r: Scalar,
        s: Scalar,
    ) -> Result<bellperson::groth16::Proof<blstrs::Bls12>, CircuitError> {
        let circuit = self.circuit::<Tree>(input, index)?;
        crate::bellperson_proof(circuit, params, r, s, input_err)
    }

    fn inputs<Tree: 'static + MerkleTreeTrait>(
        &self,
        input: &[u8],
        index: usize,
    ) -> Result<Vec<Scalar>, CircuitError> {
        let c1 = self.c1::<Tree>(input)?;
        let out = &c1.out;
        let mut all = get_seal_inputs::<Tree>(
            &c1.proof.config(),
            out.comm_r,
            out.comm_d,
            self.prover_id,
            self.sector_id.into(),
            out.ticket,
            out.seed,
        )
        .map_err(|e| input_err(format!("cannot derive the public inputs: {e:#}")))?;
        if index >= all.len() {
            return Err(input_err(format!(
                "partition {index} requested but the job has {}",
                all.len()
            )));
        }
        Ok(all.swap_remove(index))
    }
}

impl CircuitFamily for PorepC2Family {
    fn name(&self) -> &'static str {
        NAME
    }

    fn shape_key(&self) -> String {
        shape_key(self.size)
    }

    fn partitions(&self) -> usize {
        self.size.partitions()
    }

    /// Measured by synthesizing the blank circuit (docs/porep.md); 64 GiB (not measured) is
    /// estimated from 32 GiB plus its tree's extra level.
    fn partition_shape(&self) -> crate::PartitionShape {
        let (constraints, variables) = match self.size {
            SectorSize::S2KiB => (2_687_961, 2_685_673),
            SectorSize::S8MiB => (3_844_969, 3_842_449),
            SectorSize::S512MiB => (4_423_473, 4_420_837),
            SectorSize::S32GiB => (130_278_869, 130_169_893),
            SectorSize::S64GiB => (134_200_000, 134_100_000),
        };
        crate::PartitionShape {
            constraints,
            variables,
        }
    }

    fn synthesize(
        &self,
        input: &[u8],
        index: usize,
        mode: Synthesis,
    ) -> Result<Synthesized, CircuitError> {
        with_tree!(self.size, Tree => self.synthesize_tree::<Tree>(input, index, mode))
    }

    fn capture_matrices(&self) -> Result<ShapeMatrices, CircuitError> {
        blank_matrices(self.size)
    }

    fn public_inputs(&self, input: &[u8], index: usize) -> Result<Vec<Scalar>, CircuitError> {
        with_tree!(self.size, Tree => self.inputs::<Tree>(input, index))
    }

    fn synthetic(&self) -> bool {
        self.synthetic
    }

    fn parameter_file(&self) -> Option<PathBuf> {
        // Computing the name cannot fail for a supported size; if it ever did, the cache would
        // refuse to generate parameters for the shape, with a clear error.
        parameter_file_name(self.size).ok().map(PathBuf::from)
    }

    fn published_digest(&self) -> Option<&'static str> {
        crate::fil_params::published_digest(&parameter_file_name(self.size).ok()?)
    }

    fn parameter_source(&self) -> String {
        format!(
            "fetch Filecoin's published parameters into the parameter directory (lotus fetch-params / paramfetch), or, for tests only, generate INSECURE ones with `cuzk-porep params --sector-size {}`",
            self.size.name()
        )
    }
}
