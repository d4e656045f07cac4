//! The GPU node's executor: one partition's proof from its assignment, a plain function over a
//! [`Backend`] that needs no NATS. A panic inside the backend fails this partition only: the
//! worker, and the device it holds, go on with the next.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bellperson::groth16::{PreparedVerifyingKey, Proof};
use blstrs::{Bls12, Scalar};
use cuzk_common::metrics::JobLabels;
use cuzk_common::policy::StepError;
use cuzk_prover::{Backend, ProveTimings, WitnessForm};

/// Proves `witness` with the shape's `key`, and checks the proof against `pvk` when given.
pub fn prove<B: Backend>(
    backend: &B,
    key: &B::Key,
    pvk: Option<&PreparedVerifyingKey<Bls12>>,
    witness: &impl WitnessForm,
    (r, s): (Scalar, Scalar),
    partition: u32,
    labels: &JobLabels,
) -> Result<(Proof<Bls12>, ProveTimings), StepError> {
    let public_inputs = witness.public_inputs().to_vec();
    let proved = catch_unwind(AssertUnwindSafe(|| {
        cuzk_prover::prove_timed(backend, key, witness, r, s)
    }))
    .map_err(|panic| {
        cuzk_common::metrics::metrics().error("gpu", "panic", labels);
        StepError::panicked(&format!("partition {partition}: proving"), &*panic)
    })?;
    let (proof, timings) = proved?;
    if let Some(pvk) = pvk {
        if !matches!(cuzk_prover::verify(pvk, &proof, &public_inputs), Ok(true)) {
            return Err(StepError::Fatal(format!(
                "partition {partition} proof does not verify: the parameters do not match the circuit"
            )));
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
        let rs = || {
            (
                Scalar::random(rand::rngs::OsRng),
                Scalar::random(rand::rngs::OsRng),
            )
        };
        let witness = |i| family.witness(b"x", i, None).unwrap();
        let labels = JobLabels::unknown();
        let first = prove(&backend, &key, Some(&pvk), &witness(0), rs(), 0, &labels);
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
        prove(&backend, &key, Some(&pvk), &witness(1), rs(), 1, &labels)
            .expect("the next partition on the same device proves and verifies");
    }
}
