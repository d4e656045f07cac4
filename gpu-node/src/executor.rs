//! The GPU node's executor: one partition's proof from its assignment, a plain function over a
//! [`Backend`] that needs no NATS. A panic inside the backend fails this partition only: the
//! worker, and the device it holds, go on with the next.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bellperson::groth16::{PreparedVerifyingKey, Proof, VerifyingKey};
use blstrs::{Bls12, Scalar};
use cuzk_common::policy::StepError;
use cuzk_prover::{Backend, ProveTimings};
use cuzk_wire::witness::Assignment;

/// Proves `assignment` with `srs`/`vk`, and checks the proof against `pvk` when given.
pub fn prove<B: Backend>(
    backend: &B,
    srs: &B::Srs,
    vk: &VerifyingKey<Bls12>,
    pvk: Option<&PreparedVerifyingKey<Bls12>>,
    assignment: Assignment,
    (r, s): (Scalar, Scalar),
    partition: u32,
) -> Result<(Proof<Bls12>, ProveTimings), StepError> {
    let public_inputs = assignment.input.get(1..).unwrap_or_default().to_vec();
    let proved = catch_unwind(AssertUnwindSafe(|| {
        cuzk_prover::prove_timed(backend, srs, vk, assignment, r, s)
    }))
    .map_err(|panic| {
        cuzk_common::metrics::metrics().error("gpu", "panic");
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

    use bellperson::groth16::{prepare_verifying_key, Parameters};
    use cuzk_circuits::{CircuitFamily, MimcFamily};
    use cuzk_prover::{BackendError, CpuBackend, MsmResults};
    use ff::Field;

    /// The CPU backend behind a device-style lock, panicking once while holding it: what a
    /// kernel bug or a driver surprise does to a GPU worker.
    struct PanicsOnce {
        inner: CpuBackend,
        device: Mutex<()>,
        armed: AtomicBool,
    }

    impl Backend for PanicsOnce {
        type Srs = <CpuBackend as Backend>::Srs;
        fn name(&self) -> &'static str {
            "panics-once"
        }
        fn load_srs(&self, params: Arc<Parameters<Bls12>>) -> Result<Self::Srs, BackendError> {
            self.inner.load_srs(params)
        }
        fn compute_h(
            &self,
            a: Vec<Scalar>,
            b: Vec<Scalar>,
            c: Vec<Scalar>,
        ) -> Result<Vec<Scalar>, BackendError> {
            // As kernels/src/backend.rs does: a lock poisoned by an earlier panic still guards
            // the device; the panic did not leave it half-used.
            let _device = self.device.lock().unwrap_or_else(PoisonError::into_inner);
            if self.armed.swap(false, Ordering::SeqCst) {
                panic!("kernel launch failed");
            }
            self.inner.compute_h(a, b, c)
        }
        fn msms(
            &self,
            srs: &Self::Srs,
            h: &[Scalar],
            assignment: &Assignment,
        ) -> Result<MsmResults, BackendError> {
            self.inner.msms(srs, h, assignment)
        }
    }

    #[test]
    fn a_panic_fails_one_partition_and_the_next_one_proves() {
        let family = MimcFamily::new(32, 2).unwrap();
        let params = Arc::new(family.generate_test_params(&mut rand::rngs::OsRng).unwrap());
        let backend = PanicsOnce {
            inner: CpuBackend,
            device: Mutex::new(()),
            armed: AtomicBool::new(true),
        };
        let srs = backend.load_srs(params.clone()).unwrap();
        let pvk = prepare_verifying_key(&params.vk);
        let rs = || {
            (
                Scalar::random(rand::rngs::OsRng),
                Scalar::random(rand::rngs::OsRng),
            )
        };
        let first = prove(
            &backend,
            &srs,
            &params.vk,
            Some(&pvk),
            family.synthesize_partition(b"x", 0).unwrap(),
            rs(),
            0,
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
            &srs,
            &params.vk,
            Some(&pvk),
            family.synthesize_partition(b"x", 1).unwrap(),
            rs(),
            1,
        )
        .expect("the next partition on the same device proves and verifies");
    }
}
