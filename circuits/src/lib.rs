//! The circuits a synth node can synthesize, resolved by name from a job's [`CircuitSpec`], and
//! a cache of each shape's constraint matrices and Groth16 parameters.

use std::sync::Arc;

use bellperson::SynthesisError;
use blstrs::Scalar;
use cuzk_prover::recording::Assignment;
use cuzk_prover::ShapeMatrices;
use cuzk_wire::witness::Witness;
use serde::{Deserialize, Serialize};

mod cache;
#[cfg(feature = "porep")]
mod fil_params;
#[cfg(feature = "porep")]
pub mod filecoin;
mod mimc;
#[cfg(feature = "porep")]
mod native;
pub mod param_files;
#[cfg(feature = "porep")]
pub mod porep;
#[cfg(feature = "porep")]
pub mod porep_c1;
#[cfg(feature = "porep")]
pub mod post;
mod sha256;
#[cfg(feature = "porep")]
pub mod snap;
#[cfg(feature = "porep")]
mod vanilla;

pub use cache::{ShapeCache, ShapeId, CACHE_ENV, FILECOIN_CACHE_ENV};

/// What to synthesize a partition into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synthesis {
    /// The assignment alone: what synth nodes ship. `capacity` (inputs, aux) pre-sizes it.
    /// A family may compute it natively instead of through its gadgets (PoRep C2 does).
    Witness { capacity: Option<(usize, usize)> },
    /// The assignment alone, always through the circuit's gadgets: the reference a native
    /// [`Synthesis::Witness`] is checked and timed against.
    GadgetWitness { capacity: Option<(usize, usize)> },
    /// Assignment, A/B/C evaluations and densities as bellperson's prover records them: the
    /// reference the witness path is checked and timed against.
    Recording,
}

/// A synthesized partition, in the form [`Synthesis`] asked for.
#[derive(Debug)]
pub enum Synthesized {
    Witness(Witness),
    Recording(Assignment),
}

/// [`run`] on the circuit `build` makes, a panic while building or synthesizing becoming
/// `panicked`: filecoin-proofs asserts rather than returns errors in places, and a panic must
/// fail the job, not the synthesis pool.
#[cfg(feature = "porep")]
pub(crate) fn run_guarded<C: bellperson::Circuit<Scalar>>(
    shape: String,
    partition: usize,
    mode: Synthesis,
    build: impl FnOnce() -> Result<C, CircuitError>,
    panicked: CircuitError,
) -> Result<Synthesized, CircuitError> {
    let guarded = std::panic::AssertUnwindSafe(|| run(shape, partition, mode, build()?));
    std::panic::catch_unwind(guarded).unwrap_or(Err(panicked))
}

/// bellperson's own proof of `circuit` (`create_proof_batch` with the given r, s): what our
/// prover's proof must equal byte for byte. `err` words a failure for the family.
#[cfg(feature = "porep")]
pub(crate) fn bellperson_proof<C: bellperson::Circuit<Scalar> + Send>(
    circuit: C,
    params: &bellperson::groth16::Parameters<blstrs::Bls12>,
    r: Scalar,
    s: Scalar,
    err: impl Fn(String) -> CircuitError,
) -> Result<bellperson::groth16::Proof<blstrs::Bls12>, CircuitError> {
    bellperson::groth16::create_proof_batch(vec![circuit], params, vec![r], vec![s])
        .map_err(|e| err(format!("bellperson could not prove: {e}")))?
        .pop()
        .ok_or_else(|| err("bellperson returned no proof".into()))
}

/// Synthesizes one partition's circuit as `mode` says, naming the shape and partition in any
/// error.
pub(crate) fn run<C: bellperson::Circuit<Scalar>>(
    shape: String,
    partition: usize,
    mode: Synthesis,
    circuit: C,
) -> Result<Synthesized, CircuitError> {
    let wrap = |source| CircuitError::Synthesis {
        shape: shape.clone(),
        partition,
        source,
    };
    match mode {
        Synthesis::Witness { capacity } | Synthesis::GadgetWitness { capacity } => {
            cuzk_prover::synthesize_witness(circuit, capacity)
                .map(Synthesized::Witness)
                .map_err(wrap)
        }
        Synthesis::Recording => cuzk_prover::recording::synthesize(circuit)
            .map(Synthesized::Recording)
            .map_err(wrap),
    }
}

/// The constraint matrices of a circuit instance's shape (values are never read).
pub(crate) fn capture<C: bellperson::Circuit<Scalar>>(
    shape: String,
    circuit: C,
) -> Result<ShapeMatrices, CircuitError> {
    cuzk_prover::r1cs::capture(circuit).map_err(|e| CircuitError::Params {
        shape,
        reason: e.to_string(),
    })
}
pub use mimc::{MimcCircuit, MimcFamily};
pub use sha256::{Sha256Circuit, Sha256Family};

/// Largest job input a circuit accepts.
pub const MAX_INPUT_BYTES: usize = 1 << 20;
/// Most partitions a job may ask for.
pub const MAX_PARTITIONS: usize = 64;

#[cfg(not(feature = "porep"))]
const KNOWN: &[&str] = &["sha256", "mimc"];
#[cfg(feature = "porep")]
const KNOWN: &[&str] = &[
    "sha256",
    "mimc",
    "porep-c2",
    "window-post",
    "winning-post",
    "snap-deals",
];

/// Which circuit a job proves, as given in the job JSON: `{"name": "sha256", "params": {...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CircuitSpec {
    pub name: String,
    #[serde(default)]
    pub params: serde_json::Value,
}

impl CircuitSpec {
    /// The family this spec names ([`resolve`]).
    pub fn family(&self) -> Result<Arc<dyn CircuitFamily>, CircuitError> {
        resolve(&self.name, &self.params)
    }
}

/// Every error here is fatal for the job: retrying cannot help.
#[derive(Debug, thiserror::Error)]
pub enum CircuitError {
    #[error("unknown circuit '{0}'; known: {known}", known = KNOWN.join(", "))]
    UnknownCircuit(String),
    #[error("bad parameters for circuit '{circuit}': {reason}")]
    BadParams {
        circuit: &'static str,
        reason: String,
    },
    #[error("bad input for circuit '{circuit}': {reason}")]
    BadInput {
        circuit: &'static str,
        reason: String,
    },
    #[error("synthesis of {shape} partition {partition} failed: {source}")]
    Synthesis {
        shape: String,
        partition: usize,
        source: SynthesisError,
    },
    #[error("Groth16 parameters for {shape}: {reason}")]
    Params { shape: String, reason: String },
    /// A native witness generator failed itself (a bug, not the input's fault).
    #[error("native witness of {shape} partition {partition}: {reason}")]
    Native {
        shape: String,
        partition: usize,
        reason: String,
    },
}

/// The size of one partition, known from a family's parameters without synthesis: what intake
/// checks against the cluster's caps and what a synth node reserves memory for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionShape {
    pub constraints: u64,
    /// Inputs (ONE included) and aux variables.
    pub variables: u64,
}

/// One circuit family with fixed parameters: every partition has the same shape, so one set of
/// constraint matrices and one Groth16 parameter set (named by [`shape_key`](Self::shape_key))
/// prove them all.
pub trait CircuitFamily: Send + Sync {
    fn name(&self) -> &'static str;
    /// Identifies the shape, e.g. `sha256-b4`.
    fn shape_key(&self) -> String;
    fn partitions(&self) -> usize;
    /// Every partition's size, from the parameters alone (exact, or a close upper estimate).
    fn partition_shape(&self) -> PartitionShape;
    /// Synthesizes partition `index` of the job with input `input`.
    fn synthesize(
        &self,
        input: &[u8],
        index: usize,
        mode: Synthesis,
    ) -> Result<Synthesized, CircuitError>;
    /// The shape's constraint matrices, from an instance that needs no job input.
    fn capture_matrices(&self) -> Result<ShapeMatrices, CircuitError>;
    /// The public inputs of partition `index`, without ONE; computed natively, no synthesis.
    fn public_inputs(&self, input: &[u8], index: usize) -> Result<Vec<Scalar>, CircuitError>;
    /// Whether jobs of this family prove random data (synthetic PoRep C1 outputs, for timings):
    /// nodes take them only when allowed, skip proof verification, and mark the result.
    fn synthetic(&self) -> bool {
        false
    }
    /// A parameter file the family must be proved with (e.g. from a trusted setup), instead
    /// of generated test parameters; relative to the [`ShapeCache`] directory unless absolute.
    /// [`ShapeCache`] loads it and never generates when this is `Some`; a missing file fails
    /// the job.
    fn parameter_file(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// The published digest of [`parameter_file`](Self::parameter_file), checked before its
    /// first use ([`param_files::verify`]).
    fn published_digest(&self) -> Option<&'static str> {
        None
    }

    /// Where [`parameter_file`](Self::parameter_file) comes from, for the error saying it is
    /// missing.
    fn parameter_source(&self) -> String {
        "fetch Filecoin's published parameters into the parameter directory (lotus fetch-params / paramfetch)".into()
    }

    /// Witness-only synthesis of partition `index`.
    fn witness(
        &self,
        input: &[u8],
        index: usize,
        capacity: Option<(usize, usize)>,
    ) -> Result<Witness, CircuitError> {
        match self.synthesize(input, index, Synthesis::Witness { capacity })? {
            Synthesized::Witness(w) => Ok(w),
            Synthesized::Recording(a) => Ok(Witness {
                input: a.input,
                aux: a.aux,
            }),
        }
    }

    /// Witness-only synthesis of partition `index` through the circuit's gadgets (see
    /// [`Synthesis::GadgetWitness`]).
    fn gadget_witness(
        &self,
        input: &[u8],
        index: usize,
        capacity: Option<(usize, usize)>,
    ) -> Result<Witness, CircuitError> {
        match self.synthesize(input, index, Synthesis::GadgetWitness { capacity })? {
            Synthesized::Witness(w) => Ok(w),
            Synthesized::Recording(a) => Ok(Witness {
                input: a.input,
                aux: a.aux,
            }),
        }
    }

    /// The reference synthesis of partition `index` (see [`Synthesis::Recording`]).
    fn recording(&self, input: &[u8], index: usize) -> Result<Assignment, CircuitError> {
        match self.synthesize(input, index, Synthesis::Recording)? {
            Synthesized::Recording(a) => Ok(a),
            Synthesized::Witness(_) => Err(CircuitError::Synthesis {
                shape: self.shape_key(),
                partition: index,
                source: SynthesisError::AssignmentMissing,
            }),
        }
    }
}

/// The circuit family a job asks for, with its parameters validated.
pub fn resolve(
    name: &str,
    params: &serde_json::Value,
) -> Result<Arc<dyn CircuitFamily>, CircuitError> {
    match name {
        "sha256" => Ok(Arc::new(Sha256Family::from_params(params)?)),
        "mimc" => Ok(Arc::new(MimcFamily::from_params(params)?)),
        #[cfg(feature = "porep")]
        "porep-c2" => Ok(Arc::new(porep::PorepC2Family::from_params(params)?)),
        #[cfg(feature = "porep")]
        "window-post" => Ok(Arc::new(post::PostFamily::from_params(
            post::PostKind::Window,
            params,
        )?)),
        #[cfg(feature = "porep")]
        "winning-post" => Ok(Arc::new(post::PostFamily::from_params(
            post::PostKind::Winning,
            params,
        )?)),
        #[cfg(feature = "porep")]
        "snap-deals" => Ok(Arc::new(snap::SnapFamily::from_params(params)?)),
        other => Err(CircuitError::UnknownCircuit(other.to_string())),
    }
}

/// Names [`resolve`] accepts.
pub fn known_circuits() -> &'static [&'static str] {
    KNOWN
}

/// Parses a family's JSON parameters, turning serde's message into a [`CircuitError`].
fn parse_params<T: serde::de::DeserializeOwned>(
    circuit: &'static str,
    params: &serde_json::Value,
) -> Result<T, CircuitError> {
    serde_json::from_value(params.clone()).map_err(|e| CircuitError::BadParams {
        circuit,
        reason: e.to_string(),
    })
}

fn check_range(
    circuit: &'static str,
    field: &str,
    value: usize,
    max: usize,
) -> Result<(), CircuitError> {
    if (1..=max).contains(&value) {
        Ok(())
    } else {
        Err(CircuitError::BadParams {
            circuit,
            reason: format!("'{field}' must be in 1..={max}, got {value}"),
        })
    }
}

/// The checks every family applies to a partition request.
fn check_request(
    circuit: &'static str,
    partitions: usize,
    input: &[u8],
    index: usize,
) -> Result<(), CircuitError> {
    if input.len() > MAX_INPUT_BYTES {
        return Err(CircuitError::BadInput {
            circuit,
            reason: format!(
                "input is {} bytes; at most {MAX_INPUT_BYTES} allowed",
                input.len()
            ),
        });
    }
    if index >= partitions {
        return Err(CircuitError::BadInput {
            circuit,
            reason: format!("partition {index} requested but the job has {partitions}"),
        });
    }
    Ok(())
}

/// A 32-byte seed bound to a purpose, the job input and the partition index, so that every
/// node derives the same witness and different partitions differ.
fn partition_seed(domain: &str, input: &[u8], index: usize) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update((domain.len() as u64).to_le_bytes());
    h.update(domain.as_bytes());
    h.update((input.len() as u64).to_le_bytes());
    h.update(input);
    h.update((index as u64).to_le_bytes());
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str, params: serde_json::Value) -> CircuitSpec {
        CircuitSpec {
            name: name.into(),
            params,
        }
    }

    fn err(spec: &CircuitSpec) -> String {
        match spec.family() {
            Ok(_) => panic!("{spec:?} resolved"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn registry_errors_are_clear() {
        assert_eq!(
            err(&spec("foo", json!({}))),
            format!("unknown circuit 'foo'; known: {}", KNOWN.join(", "))
        );
        let e = err(&spec(
            "sha256",
            json!({"blocks": 4, "partitions": 2, "extra": 1}),
        ));
        assert!(e.contains("unknown field `extra`"), "{e}");
        let e = err(&spec("sha256", json!({"blocks": "4", "partitions": 2})));
        assert!(e.contains("invalid type"), "{e}");
        let e = err(&spec("sha256", json!({"blocks": 65, "partitions": 2})));
        assert!(e.contains("'blocks' must be in 1..=64, got 65"), "{e}");
        let e = err(&spec("sha256", json!({"blocks": 1, "partitions": 0})));
        assert!(e.contains("'partitions' must be in 1..=64, got 0"), "{e}");
        let e = err(&spec("sha256", json!({"blocks": 1})));
        assert!(e.contains("missing field `partitions`"), "{e}");
        let e = err(&spec(
            "mimc",
            json!({"rounds": (1 << 22) + 1, "partitions": 1}),
        ));
        assert!(e.contains("'rounds' must be in 1..=4194304"), "{e}");
        let e = err(&spec("mimc", serde_json::Value::Null));
        assert!(e.starts_with("bad parameters for circuit 'mimc'"), "{e}");
        assert_eq!(known_circuits()[..2], ["sha256", "mimc"]);

        let spec: CircuitSpec =
            serde_json::from_str(r#"{"name":"mimc","params":{"rounds":8,"partitions":3}}"#)
                .unwrap();
        let family = spec.family().unwrap();
        assert_eq!((family.name(), family.partitions()), ("mimc", 3));
        assert_eq!(family.shape_key(), "mimc-r8");
    }

    #[test]
    fn partition_shapes_match_synthesis() {
        for (name, params) in [
            ("mimc", json!({"rounds": 1, "partitions": 1})),
            ("mimc", json!({"rounds": 300, "partitions": 1})),
            ("sha256", json!({"blocks": 1, "partitions": 1})),
            ("sha256", json!({"blocks": 3, "partitions": 1})),
            ("sha256", json!({"blocks": 4, "partitions": 1})),
        ] {
            let family = spec(name, params.clone()).family().unwrap();
            let a = family.recording(b"shape", 0).unwrap();
            let shape = family.partition_shape();
            let variables = (a.input.len() + a.aux.len()) as u64;
            assert_eq!(
                shape.constraints,
                a.num_constraints() as u64,
                "{name} {params}"
            );
            assert_eq!(shape.variables, variables, "{name} {params}");
        }
    }

    #[test]
    fn rejects_bad_requests() {
        let family = resolve("mimc", &json!({"rounds": 4, "partitions": 2})).unwrap();
        let big = vec![0u8; MAX_INPUT_BYTES + 1];
        let e = family.witness(&big, 0, None).unwrap_err();
        assert!(matches!(e, CircuitError::BadInput { .. }), "{e}");
        assert!(family.public_inputs(&big, 0).is_err());
        assert!(family.witness(&big[..MAX_INPUT_BYTES], 1, None).is_ok());
        let e = family.witness(b"x", 2, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad input for circuit 'mimc': partition 2 requested but the job has 2"
        );
    }
}

/// Byte identity with bellperson, shared by the families' tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use bellperson::groth16::{
        create_proof_batch, generate_random_parameters, prepare_verifying_key,
    };
    use bellperson::Circuit;
    use blstrs::Bls12;
    use cuzk_prover::{proof_bytes, prove, verify, Backend, CpuBackend, ProvingKey};
    use ff::Field;
    use rand::SeedableRng;

    /// Proves partitions `0..circuits.len()` of `input` through witness-only synthesis and the
    /// captured matrices, with bellperson's own parameters for `blank`, and checks every proof
    /// equals `create_proof_batch`'s for the same r, s and verifies.
    pub fn assert_matches_bellperson<C: Circuit<Scalar> + Clone + Send>(
        family: &dyn CircuitFamily,
        blank: C,
        circuits: Vec<C>,
        input: &[u8],
    ) {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(31);
        let params = Arc::new(generate_random_parameters::<Bls12, _, _>(blank, &mut rng).unwrap());
        let n = circuits.len();
        let r_s: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let s_s: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let theirs = create_proof_batch(circuits, &*params, r_s.clone(), s_s.clone()).unwrap();
        let pvk = prepare_verifying_key(&params.vk);
        let matrices = Arc::new(family.capture_matrices().unwrap());
        let key = ProvingKey::new(params, matrices).unwrap();
        let key = CpuBackend.load_key(Arc::new(key)).unwrap();
        for k in 0..n {
            let w = family.witness(input, k, None).unwrap();
            let ours = prove(&CpuBackend, &key, &w, r_s[k], s_s[k]).unwrap();
            assert_eq!(proof_bytes(&ours), proof_bytes(&theirs[k]), "partition {k}");
            assert!(verify(&pvk, &ours, &family.public_inputs(input, k).unwrap()).unwrap());
        }
    }
}
