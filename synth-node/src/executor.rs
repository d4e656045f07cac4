//! The synth node's executor: one partition from circuit and input to an encoded witness blob,
//! a plain function that needs no NATS. A panic inside synthesis or encoding becomes the
//! partition's fatal error instead of taking the process down with it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use cuzk_circuits::CircuitFamily;
use cuzk_common::metrics::{metrics, KeyValue};
use cuzk_common::nats::ms;
use cuzk_common::policy::StepError;
use cuzk_wire::blob::{self, BlobHeaderInfo, EncodeOptions};
use cuzk_wire::job::PartitionTimings;
use tracing::info_span;

/// A partition ready for upload.
pub struct Synthesized {
    pub blob: Vec<u8>,
    pub timings: PartitionTimings,
}

/// Synthesizes partition `index` of `job_id` and encodes its blob.
pub fn run(
    circuit: &dyn CircuitFamily,
    input: &[u8],
    job_id: &str,
    index: usize,
    options: &EncodeOptions,
) -> Result<Synthesized, StepError> {
    catch_unwind(AssertUnwindSafe(|| {
        synthesize_and_encode(circuit, input, job_id, index, options)
    }))
    .unwrap_or_else(|panic| {
        metrics().error("synth", "panic");
        Err(StepError::panicked(
            &format!("partition {index}: synthesis"),
            &*panic,
        ))
    })
}

fn synthesize_and_encode(
    circuit: &dyn CircuitFamily,
    input: &[u8],
    job_id: &str,
    index: usize,
    options: &EncodeOptions,
) -> Result<Synthesized, StepError> {
    let mut timings = PartitionTimings::default();
    let started = Instant::now();
    let assignment = info_span!("synthesize")
        .in_scope(|| circuit.synthesize_partition(input, index))
        .map_err(|e| StepError::Fatal(format!("partition {index}: {e}")))?;
    metrics().stage("synth", started.elapsed());
    timings.synth_ms = ms(started.elapsed());

    let started = Instant::now();
    let header = BlobHeaderInfo::new(job_id, index as u32, circuit.shape_key())
        .map_err(|e| StepError::Fatal(e.to_string()))?;
    let (blob, stats) = info_span!("encode")
        .in_scope(|| blob::encode_blob_with_stats(&header, &assignment, options));
    drop(assignment);
    metrics().stage("encode", started.elapsed());
    timings.encode_ms = ms(started.elapsed());
    timings.blob_bytes = blob.len() as u64;
    timings.raw_bytes = stats.raw_bytes;
    let m = metrics();
    let up = |form| {
        [
            KeyValue::new("direction", "up"),
            KeyValue::new("form", form),
        ]
    };
    m.blob_bytes.add(timings.blob_bytes, &up("wire"));
    m.blob_bytes.add(timings.raw_bytes, &up("raw"));
    m.codec_ratio.record(
        timings.raw_bytes as f64 / timings.blob_bytes.max(1) as f64,
        &[],
    );
    Ok(Synthesized { blob, timings })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::groth16::Parameters;
    use blstrs::{Bls12, Scalar};
    use cuzk_circuits::{CircuitError, PartitionShape};
    use cuzk_wire::witness::Assignment;

    /// A circuit whose synthesis panics, as a bug in a gadget would.
    struct Panics;

    impl CircuitFamily for Panics {
        fn name(&self) -> &'static str {
            "panics"
        }
        fn shape_key(&self) -> String {
            "panics".into()
        }
        fn partitions(&self) -> usize {
            1
        }
        fn partition_shape(&self) -> PartitionShape {
            PartitionShape {
                constraints: 1,
                variables: 1,
            }
        }
        fn synthesize_partition(&self, _: &[u8], _: usize) -> Result<Assignment, CircuitError> {
            // The way real gadgets fail: inside the rayon pool, from a parallel iterator.
            use rayon::prelude::*;
            (0..4)
                .into_par_iter()
                .for_each(|i| assert!(i < 2, "gadget bug {i}"));
            unreachable!()
        }
        fn public_inputs(&self, _: &[u8], _: usize) -> Result<Vec<Scalar>, CircuitError> {
            Ok(Vec::new())
        }
        fn generate_test_params(
            &self,
            _: &mut dyn rand::RngCore,
        ) -> Result<Parameters<Bls12>, CircuitError> {
            unreachable!()
        }
    }

    #[test]
    fn a_panicking_circuit_fails_the_partition_not_the_process() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // The node runs the executor as a task on its pool (`SynthNode::on_pool`).
        pool.spawn(move || {
            let _ = tx.send(run(&Panics, b"", "j", 0, &EncodeOptions::default()));
        });
        let outcome = rx.recv().expect("the pool survived and answered");
        let Err(StepError::Fatal(reason)) = outcome else {
            panic!("expected a fatal error");
        };
        assert!(
            reason.contains("synthesis panicked: gadget bug"),
            "{reason}"
        );
        // The pool still works.
        let (tx, rx) = std::sync::mpsc::channel();
        pool.spawn(move || tx.send(7).unwrap());
        assert_eq!(rx.recv().unwrap(), 7);
    }

    #[test]
    fn a_real_partition_is_synthesized_and_encoded() {
        let family = cuzk_circuits::MimcFamily::new(16, 1).unwrap();
        let done = run(&family, b"in", "j", 0, &EncodeOptions::default()).unwrap();
        let (header, assignment) =
            blob::decode_blob(&done.blob, &blob::DecodeLimits::default()).unwrap();
        assert_eq!((header.job_id.as_str(), header.partition), ("j", 0));
        assert_eq!(assignment.num_constraints(), 34);
        assert_eq!(done.timings.blob_bytes, done.blob.len() as u64);
    }
}
