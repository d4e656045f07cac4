//! The GPU node's executor: one partition's proof from its assignment, a plain function over a
//! [`Backend`] that needs no NATS. A panic inside the backend fails this partition only: the
//! worker, and the device it holds, go on with the next.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bellperson::groth16::{PreparedVerifyingKey, Proof};
use blstrs::{Bls12, Scalar};
use cuzk_common::metrics::JobLabels;
use cuzk_common::policy::StepError;
use cuzk_prover::{Backend, ProveTimings, WitnessForm};
use cuzk_wire::inputs::InputsDigest;
use cuzk_wire::Retryable;

/// What a proof is verified against: the shape's verifying key and the partition's public
/// inputs as the synth node derived them from the job (the work item's).
#[derive(Clone, Copy)]
pub struct Verify<'a> {
    pub pvk: &'a PreparedVerifyingKey<Bls12>,
    pub job_inputs: &'a InputsDigest,
}

/// Why a partition's proof is not taken as verified. Each is fatal: proving the same blob
/// again gives the same answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("partition {partition}: the blob's public inputs ({blob}) differ from those derived from the job ({job}): its witness proves another statement")]
    InputsMismatch {
        partition: u32,
        blob: InputsDigest,
        job: InputsDigest,
    },
    #[error("partition {partition}: the work item carries no public inputs derived from the job, so its proof cannot be verified")]
    NoJobInputs { partition: u32 },
    #[error(
        "partition {partition} proof does not verify: the parameters do not match the circuit"
    )]
    Rejected { partition: u32 },
}

impl Retryable for VerifyError {
    fn retryable(&self) -> bool {
        false
    }
}

/// Proves `witness` with the shape's `key`. With `verify`, the witness's public inputs must be
/// the job's (checked first, so no proof is made of another statement) and the proof must
/// verify against them.
pub fn prove<B: Backend>(
    backend: &B,
    key: &B::Key,
    verify: Option<Verify<'_>>,
    witness: &impl WitnessForm,
    (r, s): (Scalar, Scalar),
    partition: u32,
    labels: &JobLabels,
) -> Result<(Proof<Bls12>, ProveTimings), StepError> {
    let public_inputs = witness.public_inputs().to_vec();
    if let Some(verify) = verify {
        let blob = InputsDigest::of(&public_inputs);
        if blob != *verify.job_inputs {
            return Err(VerifyError::InputsMismatch {
                partition,
                blob,
                job: *verify.job_inputs,
            }
            .into());
        }
    }
    let proved = catch_unwind(AssertUnwindSafe(|| {
        cuzk_prover::prove_timed(backend, key, witness, r, s)
    }))
    .map_err(|panic| {
        cuzk_common::metrics::metrics().error("gpu", "panic", labels);
        StepError::panicked(&format!("partition {partition}: proving"), &*panic)
    })?;
    let (proof, timings) = proved?;
    if let Some(verify) = verify {
        // The blob's inputs have the job's digest: verifying against them is verifying
        // against the job's.
        if !matches!(
            cuzk_prover::verify(verify.pvk, &proof, &public_inputs),
            Ok(true)
        ) {
            return Err(VerifyError::Rejected { partition }.into());
        }
    }
    Ok((proof, timings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex, PoisonError};

    use bellperson::groth16::prepare_verifying_key;
    use cuzk_circuits::{CircuitFamily, MimcFamily, ShapeCache};
    use cuzk_prover::{BackendError, CpuBackend, KeyInfo, MsmResults, ProvingKey};
    use cuzk_wire::witness::Witness;
    use ff::Field;

    /// The CPU backend behind a device-style lock, panicking once while holding it: what a
    /// kernel bug or a driver surprise does to a GPU worker.
    struct PanicsOnce {
        inner: CpuBackend,
        device: Mutex<()>,
        armed: AtomicBool,
    }

    type Inner = CpuBackend;

    impl Backend for PanicsOnce {
        type Key = <Inner as Backend>::Key;
        type Witness = <Inner as Backend>::Witness;
        type Scalars = <Inner as Backend>::Scalars;
        fn name(&self) -> &'static str {
            "panics-once"
        }
        fn load_key(&self, key: Arc<ProvingKey>) -> Result<Self::Key, BackendError> {
            self.inner.load_key(key)
        }
        fn key_info<'k>(&self, key: &'k Self::Key) -> &'k KeyInfo {
            self.inner.key_info(key)
        }
        fn upload(&self, key: &Self::Key, w: &Witness) -> Result<Self::Witness, BackendError> {
            self.inner.upload(key, w)
        }
        fn evaluate(
            &self,
            key: &Self::Key,
            w: &Self::Witness,
        ) -> Result<[Self::Scalars; 3], BackendError> {
            self.inner.evaluate(key, w)
        }
        fn compute_h(
            &self,
            key: &Self::Key,
            abc: [Self::Scalars; 3],
        ) -> Result<Self::Scalars, BackendError> {
            // As kernels/src/backend.rs does: a lock poisoned by an earlier panic still guards
            // the device; the panic did not leave it half-used.
            let _device = self.device.lock().unwrap_or_else(PoisonError::into_inner);
            if self.armed.swap(false, Ordering::SeqCst) {
                panic!("kernel launch failed");
            }
            self.inner.compute_h(key, abc)
        }
        fn msms(
            &self,
            key: &Self::Key,
            w: &Self::Witness,
            h: Self::Scalars,
        ) -> Result<MsmResults, BackendError> {
            self.inner.msms(key, w, h)
        }
        fn download(&self, v: &Self::Scalars) -> Result<Vec<Scalar>, BackendError> {
            self.inner.download(v)
        }
    }

    #[test]
    fn a_panic_fails_one_partition_and_the_next_one_proves() {
        let dir = tempfile::tempdir().unwrap();
        let shapes = ShapeCache::new(dir.path(), true, 0);
        let family = MimcFamily::new(32, 2).unwrap();
        let pk = shapes.proving_key(&family).unwrap();
        let pvk = prepare_verifying_key(&pk.info.vk);
        let backend = PanicsOnce {
            inner: CpuBackend,
            device: Mutex::new(()),
            armed: AtomicBool::new(true),
        };
        let key = backend.load_key(pk).unwrap();
        let witness = |i| family.witness(b"x", i, None).unwrap();
        let job_inputs = |i| InputsDigest::of(&family.public_inputs(b"x", i).unwrap());
        let (first_inputs, next_inputs) = (job_inputs(0), job_inputs(1));
        let verify = |job_inputs| {
            Some(Verify {
                pvk: &pvk,
                job_inputs,
            })
        };
        let labels = JobLabels::unknown();
        let first = prove(
            &backend,
            &key,
            verify(&first_inputs),
            &witness(0),
            rs(),
            0,
            &labels,
        );
        let Err(StepError::Fatal(reason)) = first else {
            panic!("the panic must fail the partition");
        };
        assert!(
            reason.contains("partition 0: proving panicked: kernel launch failed"),
            "{reason}"
        );
        assert!(
            backend.device.is_poisoned(),
            "the panic happened under the device lock"
        );
        prove(
            &backend,
            &key,
            verify(&next_inputs),
            &witness(1),
            rs(),
            1,
            &labels,
        )
        .expect("the next partition on the same device proves and verifies");
    }

    fn rs() -> (Scalar, Scalar) {
        (
            Scalar::random(rand::rngs::OsRng),
            Scalar::random(rand::rngs::OsRng),
        )
    }

    /// A witness of another input than the job's is self-consistent — its proof verifies
    /// against its own public inputs — but it proves another statement: against the job's
    /// inputs it is refused, fatally, before it is proved.
    #[test]
    fn a_self_consistent_witness_of_another_statement_is_not_verified() {
        let dir = tempfile::tempdir().unwrap();
        let family = MimcFamily::new(32, 1).unwrap();
        let pk = ShapeCache::new(dir.path(), true, 0)
            .proving_key(&family)
            .unwrap();
        let pvk = prepare_verifying_key(&pk.info.vk);
        let key = CpuBackend.load_key(pk).unwrap();
        let labels = JobLabels::unknown();
        let other = family.witness(b"not the job's input", 0, None).unwrap();
        let blob = InputsDigest::of(other.public_inputs());
        let job = InputsDigest::of(&family.public_inputs(b"job", 0).unwrap());
        let against = |job_inputs| {
            Some(Verify {
                pvk: &pvk,
                job_inputs,
            })
        };
        prove(&CpuBackend, &key, against(&blob), &other, rs(), 0, &labels)
            .expect("the witness is self-consistent");
        let refused = prove(&CpuBackend, &key, against(&job), &other, rs(), 0, &labels);
        let Err(e) = refused else {
            panic!("a proof of another statement was verified");
        };
        let expected = VerifyError::InputsMismatch {
            partition: 0,
            blob,
            job,
        };
        assert_eq!(e, StepError::Fatal(expected.to_string()));
        assert!(
            e.to_string()
                .contains("differ from those derived from the job"),
            "{e}"
        );
        let own = family.witness(b"job", 0, None).unwrap();
        prove(&CpuBackend, &key, against(&job), &own, rs(), 0, &labels)
            .expect("the job's own witness proves and verifies");
    }
}
