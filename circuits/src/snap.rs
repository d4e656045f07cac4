//! Filecoin SnapDeals (`snap-deals`): the SNARK of an empty-sector update, from the vanilla
//! partition proofs Curio sends its proving daemon — what filecoin-proofs'
//! `generate_empty_sector_update_proof_with_vanilla` proves.
//!
//! Job parameters: `{"sector_size": "2KiB"|…|"64GiB", "comm_r_old": "<64 hex>", "comm_r_new":
//! "<64 hex>", "comm_d_new": "<64 hex>"}`: the sector key's (old) sealed commitment and the
//! updated replica's sealed and unsealed commitments, each a field element (Curio's
//! `comm_r_old`, `comm_r_new`, `comm_d_new`). Input: JSON `{"vanilla_proofs": ["<base64>", …]}`,
//! one entry per SnapDeals partition in partition order (1 for 2 KiB, 4 for 8 MiB, 16 from
//! 512 MiB up), each a `PartitionProof` serialized with bincode, as filecoin-proofs-api's
//! `generate_partition_proofs` returns them (Curio's `vanilla_proofs`).
//!
//! Job partition `k` is SnapDeals partition `k`: `EmptySectorUpdateCompound::circuit` over
//! vanilla proof `k`, as `prove_with_vanilla` builds it. Before any circuit is built every
//! vanilla proof is verified against the commitments (filecoin-proofs' `verify_partition_proofs`
//! check, partition by partition so the error names the partition). The job's proof is the
//! partition proofs concatenated (192 bytes each), the `EmptySectorUpdateProof` filecoin-proofs
//! returns; `verify_empty_sector_update_proof` accepts it. Every update proof version
//! (`StackedDrg<size>V1`) has the same circuit: only the sector size matters. Parameters:
//! Filecoin's published `v28-empty-sector-update-….params`, like PoRep's ([`crate::porep`]).
//!
//! A partition's witness ([`Synthesis::Witness`]) comes from a native generator
//! (`snap/native.rs`); the gadgets stay the reference and the fallback for a shape it does not
//! know.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use blstrs::Scalar;
use cuzk_prover::setup::FixedBase;
use cuzk_prover::ShapeMatrices;
use ff::PrimeField;
use filecoin_hashers::Domain;
use filecoin_proofs::MerkleTreeTrait;
use serde::Deserialize;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::parameter_cache::{
    parameter_cache_params_path, parameter_id, CacheableParameters,
};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::constants::{
    h_default, partition_count, TreeDDomain, TreeRDomain, TreeRHasher,
};
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof,
    PublicInputs, PublicParams,
};

use crate::filecoin::{hex_string, parse_hex32, with_tree, SectorSize};
use crate::vanilla::{self, LastInput};
use crate::{CircuitError, CircuitFamily, PartitionShape, Synthesis, Synthesized};

mod fixtures;
mod native;
mod partition;
mod synthetic;
pub use fixtures::{update_sector, UpdatedSector};
pub use synthetic::SyntheticSnap;

const NAME: &str = "snap-deals";

/// The most input a SnapDeals job takes: a 32 GiB sector's 16 partition proofs are ~8 MB of
/// bincode (86 challenges of three Merkle paths each), ~11 MB as base64 in JSON.
pub const MAX_SNAP_INPUT_BYTES: usize = 64 << 20;

type Compound<Tree> = EmptySectorUpdateCompound<Tree>;
type Circuit<Tree> = EmptySectorUpdateCircuit<Tree>;

fn input_err(reason: impl std::fmt::Display) -> CircuitError {
    CircuitError::BadInput {
        circuit: NAME,
        reason: reason.to_string(),
    }
}

fn shape_key(size: SectorSize) -> String {
    format!("{NAME}-{}", size.name())
}

/// filecoin-proofs-api's name of the update proof for `size`, e.g. `StackedDrg32GiBV1`.
pub fn api_name(size: SectorSize) -> String {
    format!("StackedDrg{}V1", size.name())
}

/// The sector size of lotus' `abi.RegisteredUpdateProof` number (what Curio puts in
/// `registered_proof`): 0–4 are `StackedDrg{2KiB,8MiB,512MiB,32GiB,64GiB}V1`.
pub fn size_of_update_proof(id: u64) -> Result<SectorSize, String> {
    usize::try_from(id)
        .ok()
        .and_then(|i| SectorSize::ALL.get(i).copied())
        .ok_or_else(|| {
            format!("registered update proof {id} is unknown (lotus' RegisteredUpdateProof 0–4)")
        })
}

/// Partitions of a `size` update proof (`storage_proofs_update::constants::partition_count`).
pub fn partitions(size: SectorSize) -> usize {
    partition_count(nodes(size))
}

fn nodes(size: SectorSize) -> usize {
    (size.bytes() / 32) as usize
}

fn public_params(size: SectorSize) -> PublicParams {
    PublicParams::from_sector_size(size.bytes())
}

/// The published name of the Groth16 parameter file of `size`'s update circuit.
pub fn parameter_file_name(size: SectorSize) -> String {
    with_tree!(size, Tree => parameter_id(
        &<Compound<Tree> as CacheableParameters<Circuit<Tree>, _>>::cache_identifier(&public_params(size))
    ))
}

/// Where filecoin-proofs itself looks for that file (`FIL_PROOFS_PARAMETER_CACHE`).
pub fn parameter_path(size: SectorSize) -> PathBuf {
    with_tree!(size, Tree => parameter_cache_params_path(
        &<Compound<Tree> as CacheableParameters<Circuit<Tree>, _>>::cache_identifier(&public_params(size))
    ))
}

/// INSECURE, TEST-ONLY parameters for `size`'s update circuit under its published name, with
/// the `.vk` and `.meta` filecoin-proofs derives from them (see
/// [`crate::porep::generate_test_parameters`]).
pub fn generate_test_parameters(
    size: SectorSize,
    shapes: &crate::ShapeCache,
    engine: &dyn FixedBase,
    force: bool,
) -> Result<PathBuf, CircuitError> {
    let family = SnapFamily::new(size, [1; 32], [1; 32], [1; 32]);
    let path = parameter_path(size);
    crate::fil_params::install_test_parameters(&family, &path, shapes, engine, force, || {
        with_tree!(size, Tree => {
            let pp = public_params(size);
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
    comm_r_old: String,
    comm_r_new: String,
    comm_d_new: String,
}

/// The input's vanilla proofs, decoded and verified.
struct Checked<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    proofs: Vec<PartitionProof<Tree>>,
}

/// One sector's update proof: every partition of it.
pub struct SnapFamily {
    size: SectorSize,
    comm_r_old: [u8; 32],
    comm_r_new: [u8; 32],
    comm_d_new: [u8; 32],
    /// The last input's vanilla proofs (`Checked<Tree>`).
    parsed: LastInput,
}

impl std::fmt::Debug for SnapFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapFamily")
            .field("size", &self.size)
            .field("comm_r_old", &hex_string(&self.comm_r_old))
            .field("comm_r_new", &hex_string(&self.comm_r_new))
            .field("comm_d_new", &hex_string(&self.comm_d_new))
            .finish()
    }
}

impl SnapFamily {
    /// Commitments must be field elements ([`from_params`](Self::from_params) checks).
    pub fn new(
        size: SectorSize,
        comm_r_old: [u8; 32],
        comm_r_new: [u8; 32],
        comm_d_new: [u8; 32],
    ) -> Self {
        Self {
            size,
            comm_r_old,
            comm_r_new,
            comm_d_new,
            parsed: LastInput::default(),
        }
    }

    pub fn from_params(params: &serde_json::Value) -> Result<Self, CircuitError> {
        let p: Params = crate::parse_params(NAME, params)?;
        let commitment = |name: &str, hex: &str| {
            let bytes = parse_hex32(hex).ok_or_else(|| {
                format!(
                    "'{name}' must be 64 hex digits (32 bytes), got {}",
                    cuzk_wire::excerpt(hex)
                )
            })?;
            if bytes == [0; 32] || Option::<Scalar>::from(Scalar::from_repr(bytes)).is_none() {
                return Err(format!(
                    "'{name}' {hex} is not a commitment (a non-zero BLS12-381 field element, little-endian)"
                ));
            }
            Ok(bytes)
        };
        let checked = || -> Result<_, String> {
            Ok(Self::new(
                p.sector_size,
                commitment("comm_r_old", &p.comm_r_old)?,
                commitment("comm_r_new", &p.comm_r_new)?,
                commitment("comm_d_new", &p.comm_d_new)?,
            ))
        };
        checked().map_err(|reason| CircuitError::BadParams {
            circuit: NAME,
            reason,
        })
    }

    pub fn sector_size(&self) -> SectorSize {
        self.size
    }

    /// The vanilla public inputs filecoin-proofs proves and verifies against.
    fn pub_inputs(&self, k: usize) -> PublicInputs {
        let domain = |bytes: &[u8; 32]| {
            TreeRDomain::try_from_bytes(bytes).expect("32 bytes are a Poseidon domain element")
        };
        PublicInputs {
            k,
            comm_r_old: domain(&self.comm_r_old),
            comm_d_new: TreeDDomain::try_from_bytes(&self.comm_d_new)
                .expect("32 bytes are a SHA-256 domain element"),
            comm_r_new: domain(&self.comm_r_new),
            h: h_default(nodes(self.size)),
        }
    }

    fn checked<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        &self,
        input: &[u8],
    ) -> Result<Arc<Checked<Tree>>, CircuitError> {
        self.parsed
            .get_or_check(input, || self.check::<Tree>(input))
    }

    /// Decodes the input's partition proofs and verifies each as filecoin-proofs'
    /// `verify_partition_proofs` does (`EmptySectorUpdate::verify` per partition); its
    /// assertions become errors.
    fn check<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        &self,
        input: &[u8],
    ) -> Result<Checked<Tree>, CircuitError> {
        let size = self.size.name();
        let entries = vanilla::entries(NAME, input, MAX_SNAP_INPUT_BYTES)?;
        let expected = partitions(self.size);
        if entries.len() != expected {
            return Err(input_err(format!(
                "{} vanilla proofs; a {size} sector's update proof has {expected} partitions",
                entries.len()
            )));
        }
        let what = format!("a {size} partition proof (bincode PartitionProof)");
        let proofs = entries
            .iter()
            .enumerate()
            .map(|(k, entry)| vanilla::decode::<PartitionProof<Tree>>(NAME, k, entry, &what))
            .collect::<Result<Vec<_>, _>>()?;
        let pp = public_params(self.size);
        for (k, proof) in proofs.iter().enumerate() {
            let verified = catch_unwind(AssertUnwindSafe(|| {
                EmptySectorUpdate::<Tree>::verify(&pp, &self.pub_inputs(k), proof)
            }));
            let what = format!("vanilla proof of partition {k} does not verify for this {size} sector's comm_r_old, comm_r_new and comm_d_new");
            match verified {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return Err(input_err(what)),
                Ok(Err(e)) => return Err(input_err(format!("{what}: {e:#}"))),
                Err(_) => {
                    return Err(input_err(format!(
                        "{what}: malformed (the verifier panicked)"
                    )))
                }
            }
        }
        Ok(Checked { proofs })
    }

    fn check_index(&self, index: usize) -> Result<(), CircuitError> {
        let partitions = partitions(self.size);
        if index < partitions {
            Ok(())
        } else {
            Err(input_err(format!(
                "partition {index} requested but the job has {partitions}"
            )))
        }
    }

    /// Partition `index`'s circuit, as `prove_with_vanilla` builds it.
    fn circuit<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        &self,
        input: &[u8],
        index: usize,
    ) -> Result<Circuit<Tree>, CircuitError> {
        self.check_index(index)?;
        let checked = self.checked::<Tree>(input)?;
        // `prove_with_vanilla` is handed k = the partition count and overrides it per partition.
        Compound::<Tree>::circuit(
            &self.pub_inputs(partitions(self.size)),
            (),
            &checked.proofs[index],
            &public_params(self.size),
            Some(index),
        )
        .map_err(|e| input_err(format!("cannot build partition {index}'s circuit: {e:#}")))
    }

    fn synthesize_tree<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        &self,
        input: &[u8],
        index: usize,
        mode: Synthesis,
    ) -> Result<Synthesized, CircuitError> {
        if let Synthesis::Witness { .. } = mode {
            // Like the gadgets, never let a bug's panic take the synthesis pool down.
            let native = catch_unwind(AssertUnwindSafe(|| {
                self.native_witness::<Tree>(input, index)
            }))
            .unwrap_or_else(|_| Err(self.native_err(index, "the generator panicked")))?;
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

    fn native_err(&self, index: usize, reason: impl std::fmt::Display) -> CircuitError {
        CircuitError::Native {
            shape: shape_key(self.size),
            partition: index,
            reason: reason.to_string(),
        }
    }

    /// Partition `index` in the native generator's form, with its layout, or `None` (logged
    /// once) for a shape the generator does not know.
    fn native_partition<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        &self,
        input: &[u8],
        index: usize,
    ) -> Result<Option<(native::Partition, native::Layout)>, CircuitError> {
        self.check_index(index)?;
        let pp = public_params(self.size);
        let Some(layout) = partition::layout::<Tree>(&pp, h_default(pp.sector_nodes)) else {
            crate::native::through_gadgets(shape_key(self.size));
            return Ok(None);
        };
        let checked = self.checked::<Tree>(input)?;
        let field = |bytes: &[u8; 32]| {
            Option::<Scalar>::from(Scalar::from_repr(*bytes))
                .ok_or_else(|| input_err("a commitment is not a field element"))
        };
        let public = partition::Public {
            k: index,
            comm_r_old: field(&self.comm_r_old)?,
            comm_d_new: field(&self.comm_d_new)?,
            comm_r_new: field(&self.comm_r_new)?,
        };
        let p = partition::read(&public, &checked.proofs[index], &pp)
            .map_err(|e| input_err(format!("partition {index}: {e}")))?;
        Ok(Some((p, layout)))
    }

    /// Partition `index`'s witness from the native generator, or `None` for a shape it does
    /// not know, which the gadgets then synthesize.
    fn native_witness<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        &self,
        input: &[u8],
        index: usize,
    ) -> Result<Option<cuzk_wire::witness::Witness>, CircuitError> {
        let Some((p, layout)) = self.native_partition::<Tree>(input, index)? else {
            return Ok(None);
        };
        native::generate(&p, &layout, native::Options::default())
            .map(Some)
            .map_err(|e| match e {
                native::NativeError::Layout { .. } => self.native_err(index, e),
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
        with_tree!(self.size, Tree => {
            let circuit = self.circuit::<Tree>(input, index)?;
            crate::bellperson_proof(circuit, params, r, s, input_err)
        })
    }
}

/// Constraints and variables of a partition, measured on blank circuits of one and two
/// challenges and scaled to the size's challenge count (the circuit is its apex tree and
/// partition path plus the same gadget per challenge; `snap/tests.rs` checks the method
/// against the whole 2 KiB circuit). Measuring takes ~9 s per size from 512 MiB up on 2
/// cores, too long for a job's intake.
fn shape_of(size: SectorSize) -> PartitionShape {
    let (constraints, variables) = match size {
        SectorSize::S2KiB => (1_705_044, 1_703_574),
        SectorSize::S8MiB => (10_007_508, 9_998_044),
        SectorSize::S512MiB => (57_446_508, 57_397_350),
        SectorSize::S32GiB => (81_044_392, 80_973_390),
        SectorSize::S64GiB => (85_000_994, 84_926_122),
    };
    PartitionShape {
        constraints,
        variables,
    }
}

impl CircuitFamily for SnapFamily {
    fn name(&self) -> &'static str {
        NAME
    }

    fn shape_key(&self) -> String {
        shape_key(self.size)
    }

    fn partitions(&self) -> usize {
        partitions(self.size)
    }

    fn partition_shape(&self) -> PartitionShape {
        shape_of(self.size)
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
        with_tree!(self.size, Tree => crate::capture(
            shape_key(self.size),
            Compound::<Tree>::blank_circuit(&public_params(self.size)),
        ))
    }

    /// From the commitments alone: the verifier's, `generate_public_inputs` for partition
    /// `index` (the vanilla proofs are not needed, so the input is not read).
    fn public_inputs(&self, _input: &[u8], index: usize) -> Result<Vec<Scalar>, CircuitError> {
        self.check_index(index)?;
        let pub_inputs = self.pub_inputs(partitions(self.size));
        with_tree!(self.size, Tree => catch_unwind(AssertUnwindSafe(|| {
            Compound::<Tree>::generate_public_inputs(&pub_inputs, &public_params(self.size), Some(index))
        })))
        .map_err(|_| input_err("public input derivation panicked"))?
        .map_err(|e| input_err(format!("cannot derive the public inputs: {e:#}")))
    }

    fn parameter_file(&self) -> Option<PathBuf> {
        Some(PathBuf::from(parameter_file_name(self.size)))
    }

    fn published_digest(&self) -> Option<&'static str> {
        crate::fil_params::published_digest(&parameter_file_name(self.size))
    }
}

#[cfg(test)]
mod native_tests;
#[cfg(test)]
mod tests;
