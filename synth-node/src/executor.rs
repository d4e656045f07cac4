//! The synth node's executor: one partition from circuit and input to an encoded witness blob,
//! a plain function that needs no NATS. A panic inside synthesis or encoding becomes the
//! partition's fatal error instead of taking the process down with it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use cuzk_circuits::{CircuitFamily, ShapeCache};
use cuzk_common::metrics::{metrics, JobLabels, KeyValue};
use cuzk_common::policy::StepError;
use cuzk_wire::blob::{self, BlobHeaderInfo, EncodeOptions};
use cuzk_wire::inputs::InputsDigest;
use cuzk_wire::job::{PartitionTimings, Stage};
use tracing::info_span;

/// A partition ready for upload.
pub struct Encoded {
    pub blob: Vec<u8>,
    pub timings: PartitionTimings,
    /// The partition's public inputs derived from the job, for its work item; `None` for a
    /// synthetic job, whose proof is never verified.
    pub public_inputs: Option<InputsDigest>,
}

/// What the executor needs besides the partition: the shapes' identities (the constraint
/// matrices' hash every blob carries, captured once per shape and machine) and the encoding.
pub struct Context<'a> {
    pub shapes: &'a ShapeCache,
    pub options: &'a EncodeOptions,
    /// The `circuit` and `shape` labels of the measurements.
    pub labels: &'a JobLabels,
}

/// Synthesizes partition `index` of `job_id` (witness only), encodes its blob and derives its
/// public inputs from the job.
pub fn run(
    circuit: &dyn CircuitFamily,
    input: &[u8],
    job_id: &str,
    index: usize,
    cx: &Context<'_>,
) -> Result<Encoded, StepError> {
    catch_unwind(AssertUnwindSafe(|| {
        synthesize_and_encode(circuit, input, job_id, index, cx)
    }))
    .unwrap_or_else(|panic| {
        metrics().error("synth", "panic", cx.labels);
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
    cx: &Context<'_>,
) -> Result<Encoded, StepError> {
    let fatal =
        |e: cuzk_circuits::CircuitError| StepError::Fatal(format!("partition {index}: {e}"));
    // The shape's matrices are captured once per shape and machine (cached on disk).
    let shape = info_span!("shape")
        .in_scope(|| cx.shapes.shape_id(circuit))
        .map_err(fatal)?;
    let mut timings = PartitionTimings::default();
    let started = Instant::now();
    let capacity = Some((shape.inputs, shape.aux));
    let witness = info_span!(Stage::Synth.name())
        .in_scope(|| circuit.witness(input, index, capacity))
        .map_err(fatal)?;
    metrics().partition_stage(&mut timings, Stage::Synth, cx.labels, started.elapsed());
    // From the job's public values by the proof system's own derivation, never from the
    // witness: what the GPU node verifies the proof against. After synthesis, so that the
    // input's parse, which synthesis caches, stays timed as synthesis.
    let public_inputs = if circuit.synthetic() {
        None
    } else {
        let inputs = info_span!("public_inputs")
            .in_scope(|| circuit.public_inputs(input, index))
            .map_err(fatal)?;
        Some(InputsDigest::of(&inputs))
    };

    let started = Instant::now();
    let header = BlobHeaderInfo::new(job_id, index as u32, circuit.shape_key(), shape.hash)
        .map_err(|e| StepError::Fatal(e.to_string()))?;
    let (blob, stats) = info_span!(Stage::Encode.name()).in_scope(|| {
        blob::encode_blob_with_stats(&header, &witness.input, &witness.aux, cx.options)
    });
    drop(witness);
    metrics().partition_stage(&mut timings, Stage::Encode, cx.labels, started.elapsed());
    timings.blob_bytes = blob.len() as u64;
    timings.raw_bytes = stats.raw_bytes;
    let m = metrics();
    let up = |form| {
        [
            KeyValue::new("direction", "up"),
            KeyValue::new("form", form),
        ]
    };
    m.blob_bytes
        .add(timings.blob_bytes, &cx.labels.with(&up("wire")));
    m.blob_bytes
        .add(timings.raw_bytes, &cx.labels.with(&up("raw")));
    m.codec_ratio.record(
        timings.raw_bytes as f64 / timings.blob_bytes.max(1) as f64,
        &cx.labels.with(&[]),
    );
    Ok(Encoded {
        blob,
        timings,
        public_inputs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::Scalar;
    use cuzk_circuits::{CircuitError, MimcFamily, PartitionShape, Synthesis};
    use cuzk_prover::ShapeMatrices;

    /// A circuit whose synthesis panics, as a bug in a gadget would; its shape is MiMC's.
    struct Panics(MimcFamily);

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
            self.0.partition_shape()
        }
        fn synthesize(
            &self,
            _: &[u8],
            _: usize,
            _: Synthesis,
        ) -> Result<cuzk_circuits::Synthesized, CircuitError> {
            // The way real gadgets fail: inside the rayon pool, from a parallel iterator.
            use rayon::prelude::*;
            (0..4)
                .into_par_iter()
                .for_each(|i| assert!(i < 2, "gadget bug {i}"));
            unreachable!()
        }
        fn capture_matrices(&self) -> Result<ShapeMatrices, CircuitError> {
            self.0.capture_matrices()
        }
        fn public_inputs(&self, _: &[u8], _: usize) -> Result<Vec<Scalar>, CircuitError> {
            Ok(Vec::new())
        }
    }

    fn with_context<T>(f: impl FnOnce(&Context<'_>) -> T) -> T {
        let dir = tempfile::tempdir().unwrap();
        let shapes = ShapeCache::new(dir.path(), false, 0);
        f(&Context {
            shapes: &shapes,
            options: &EncodeOptions::default(),
            labels: &JobLabels::unknown(),
        })
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
            let circuit = Panics(MimcFamily::new(4, 1).unwrap());
            let _ = tx.send(with_context(|cx| run(&circuit, b"", "j", 0, cx)));
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
        let family = MimcFamily::new(16, 1).unwrap();
        let done = with_context(|cx| run(&family, b"in", "j", 0, cx)).unwrap();
        let (header, witness) =
            blob::decode_blob(&done.blob, &blob::DecodeLimits::default()).unwrap();
        assert_eq!((header.job_id.as_str(), header.partition), ("j", 0));
        assert_eq!(witness.input.len() + witness.aux.len(), 35);
        assert_eq!(done.timings.blob_bytes, done.blob.len() as u64);
        let job = family.public_inputs(b"in", 0).unwrap();
        assert_eq!(done.public_inputs, Some(InputsDigest::of(&job)));
    }
}
