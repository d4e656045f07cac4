//! Groth16 proving on top of a [`Backend`]: H, the MSMs, then bellperson's exact assembly
//! (bellperson-split §1.3), so a proof equals `create_proof_batch`'s byte for byte for the same
//! `r` and `s`.

use std::time::{Duration, Instant};

use bellperson::groth16::{self, PreparedVerifyingKey, Proof, VerifyingKey};
use bellperson::SynthesisError;
use blstrs::{Bls12, Scalar};
use cuzk_wire::blob::CompactWitness;
use cuzk_wire::job::Stage;
use cuzk_wire::witness::Witness;
use group::Curve;

use crate::backend::{Backend, MsmResults};
use crate::error::BackendError;

/// Wall time of each proving stage ([`Stage`]'s names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProveTimings {
    /// The witness into the backend (host to device for a GPU).
    pub h2d: Duration,
    /// Waiting for the device while another partition is proved on it ([`Backend::wait_turn`]).
    pub turn: Duration,
    /// A·w, B·w, C·w.
    pub spmv: Duration,
    /// The H polynomial (three iNTTs, three coset NTTs, one inverse coset NTT).
    pub h: Duration,
    /// The five MSMs.
    pub msm: Duration,
    /// Everything, including validation and assembly.
    pub total: Duration,
}

impl ProveTimings {
    /// The stages inside a proof, in order, with their times.
    pub fn stages(&self) -> [(Stage, Duration); 5] {
        [
            (Stage::H2d, self.h2d),
            (Stage::Turn, self.turn),
            (Stage::Spmv, self.spmv),
            (Stage::H, self.h),
            (Stage::Msm, self.msm),
        ]
    }
}

/// A witness in a form backends take: scalars ([`Backend::upload`]), or a blob's compact form
/// ([`Backend::upload_compact`]).
pub trait WitnessForm {
    /// Public inputs (ONE included) and aux variables.
    fn lens(&self) -> (usize, usize);
    /// The public inputs a verifier takes (without ONE).
    fn public_inputs(&self) -> &[Scalar];
    fn upload_to<B: Backend>(&self, backend: &B, key: &B::Key) -> Result<B::Witness, BackendError>;
}

impl WitnessForm for Witness {
    fn lens(&self) -> (usize, usize) {
        (self.input.len(), self.aux.len())
    }
    fn public_inputs(&self) -> &[Scalar] {
        Witness::public_inputs(self)
    }
    fn upload_to<B: Backend>(&self, backend: &B, key: &B::Key) -> Result<B::Witness, BackendError> {
        backend.upload(key, self)
    }
}

impl WitnessForm for CompactWitness {
    fn lens(&self) -> (usize, usize) {
        (self.input.len(), self.aux.len())
    }
    fn public_inputs(&self) -> &[Scalar] {
        CompactWitness::public_inputs(self)
    }
    fn upload_to<B: Backend>(&self, backend: &B, key: &B::Key) -> Result<B::Witness, BackendError> {
        backend.upload_compact(key, self)
    }
}

/// Proves one witness of `key`'s shape with blinding factors `r` and `s`.
pub fn prove<B: Backend>(
    backend: &B,
    key: &B::Key,
    witness: &impl WitnessForm,
    r: Scalar,
    s: Scalar,
) -> Result<Proof<Bls12>, BackendError> {
    prove_timed(backend, key, witness, r, s).map(|(proof, _)| proof)
}

/// [`prove`], also reporting per-stage timings. Spans name each stage in the trace (children of
/// the caller's span on this thread; cheap when tracing is off).
pub fn prove_timed<B: Backend>(
    backend: &B,
    key: &B::Key,
    witness: &impl WitnessForm,
    r: Scalar,
    s: Scalar,
) -> Result<(Proof<Bls12>, ProveTimings), BackendError> {
    let start = Instant::now();
    let info = backend.key_info(key);
    info.check_lens(witness.lens())?;
    let w = tracing::info_span!(Stage::H2d.name()).in_scope(|| witness.upload_to(backend, key))?;
    let uploaded = Instant::now();
    tracing::info_span!(Stage::Turn.name()).in_scope(|| backend.wait_turn(&w))?;
    let turn = Instant::now();
    let abc = tracing::info_span!(Stage::Spmv.name()).in_scope(|| backend.evaluate(key, &w))?;
    let evaluated = Instant::now();
    let h = tracing::info_span!(Stage::H.name()).in_scope(|| backend.compute_h(key, abc))?;
    let h_done = Instant::now();
    let msms = tracing::info_span!(Stage::Msm.name()).in_scope(|| backend.msms(key, &w, h))?;
    drop(w);
    let msm_done = Instant::now();
    let proof = assemble(&info.vk, &msms, r, s);
    let timings = ProveTimings {
        h2d: uploaded - start,
        turn: turn - uploaded,
        spmv: evaluated - turn,
        h: h_done - evaluated,
        msm: msm_done - h_done,
        total: start.elapsed(),
    };
    Ok((proof, timings))
}

/// bellperson's assembly:
/// `A = α + A_msm + rδ`, `B = β₂ + B2_msm + sδ₂`,
/// `C = s·A_msm + r·B1_msm + rs·δ₁ + s·α + r·β₁ + H + L`.
fn assemble(vk: &VerifyingKey<Bls12>, m: &MsmResults, r: Scalar, s: Scalar) -> Proof<Bls12> {
    let g_a = vk.delta_g1 * r + vk.alpha_g1 + m.a;
    let g_b = vk.delta_g2 * s + vk.beta_g2 + m.b_g2;
    let g_c =
        m.a * s + m.b_g1 * r + vk.delta_g1 * (r * s) + vk.alpha_g1 * s + vk.beta_g1 * r + m.h + m.l;
    Proof {
        a: g_a.to_affine(),
        b: g_b.to_affine(),
        c: g_c.to_affine(),
    }
}

/// Checks `proof` against the prepared verifying key and the public inputs (without ONE).
pub fn verify(
    pvk: &PreparedVerifyingKey<Bls12>,
    proof: &Proof<Bls12>,
    public_inputs: &[Scalar],
) -> Result<bool, SynthesisError> {
    groth16::verify_proof(pvk, proof, public_inputs)
}

/// The 192-byte encoding of `Proof::write`: compressed A (48) ‖ B (96) ‖ C (48).
pub fn proof_bytes(proof: &Proof<Bls12>) -> [u8; 192] {
    let mut out = [0u8; 192];
    out[..48].copy_from_slice(&proof.a.to_compressed());
    out[48..144].copy_from_slice(&proof.b.to_compressed());
    out[144..].copy_from_slice(&proof.c.to_compressed());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuBackend;
    use crate::dual::Dual;
    use crate::key::ProvingKey;
    use crate::r1cs::capture;
    use crate::recording::tests::ToyCircuit;
    use crate::witness_cs::synthesize_witness;
    use bellperson::groth16::{
        create_proof_batch, generate_random_parameters, prepare_verifying_key, Parameters,
    };
    use cuzk_wire::Retryable;
    use ff::Field;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;
    use std::sync::Arc;

    fn blank(rounds: usize) -> ToyCircuit {
        ToyCircuit {
            x: Scalar::ZERO,
            y: Scalar::ZERO,
            rounds,
        }
    }

    fn key(params: &Arc<Parameters<Bls12>>, rounds: usize) -> Arc<ProvingKey> {
        Arc::new(
            ProvingKey::new(params.clone(), Arc::new(capture(blank(rounds)).unwrap())).unwrap(),
        )
    }

    fn compact(w: &Witness) -> CompactWitness {
        use cuzk_wire::blob::{decode_blob_compact_into, encode_blob, BlobHeaderInfo};
        let info = BlobHeaderInfo::new("j", 0, "toy", [0; 32]).unwrap();
        let blob = encode_blob(&info, &w.input, &w.aux, &Default::default());
        let mut compact = CompactWitness::default();
        decode_blob_compact_into(&blob, &Default::default(), &mut compact).unwrap();
        compact
    }

    #[test]
    fn toy_proofs_match_bellperson_byte_for_byte() {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let params =
            Arc::new(generate_random_parameters::<Bls12, _, _>(blank(20), &mut rng).unwrap());
        let pvk = prepare_verifying_key(&params.vk);
        let circuits: Vec<ToyCircuit> = (0..3u64)
            .map(|i| ToyCircuit {
                x: Scalar::from(i + 2),
                y: Scalar::from(7 * i + 1),
                rounds: 20,
            })
            .collect();
        let r_s: Vec<Scalar> = (0..3).map(|_| Scalar::random(&mut rng)).collect();
        let s_s: Vec<Scalar> = (0..3).map(|_| Scalar::random(&mut rng)).collect();
        let theirs =
            create_proof_batch(circuits.clone(), &*params, r_s.clone(), s_s.clone()).unwrap();

        // The CPU backend, and the CPU backend checked against itself through `Dual`.
        let cpu = CpuBackend;
        let cpu_key = cpu.load_key(key(&params, 20)).unwrap();
        let dual = Dual {
            reference: CpuBackend,
            candidate: CpuBackend,
        };
        let dual_key = dual.load_key(key(&params, 20)).unwrap();
        for (i, circuit) in circuits.into_iter().enumerate() {
            let inputs = circuit.public_inputs();
            let w = synthesize_witness(circuit, None).unwrap();
            let (ours, t) = prove_timed(&cpu, &cpu_key, &w, r_s[i], s_s[i]).unwrap();
            assert!(t.total >= t.h2d + t.spmv + t.h + t.msm);
            assert_eq!(
                proof_bytes(&ours),
                proof_bytes(&theirs[i]),
                "proof {i} differs"
            );
            let via_dual = prove(&dual, &dual_key, &w, r_s[i], s_s[i]).unwrap();
            assert_eq!(proof_bytes(&via_dual), proof_bytes(&ours));
            // The same witness as a blob carries it, kept compact until the backends take it.
            let compact = compact(&w);
            assert_eq!(WitnessForm::public_inputs(&compact), &inputs[..]);
            let via_compact = prove(&dual, &dual_key, &compact, r_s[i], s_s[i]).unwrap();
            assert_eq!(proof_bytes(&via_compact), proof_bytes(&ours));
            let mut written = Vec::new();
            ours.write(&mut written).unwrap();
            assert_eq!(written, proof_bytes(&ours));
            assert!(verify(&pvk, &ours, &inputs).unwrap());
        }
    }

    /// The CPU backend with one A·w value off by one: what a broken engine looks like.
    struct Broken;

    impl Backend for Broken {
        type Key = <CpuBackend as Backend>::Key;
        type Witness = Witness;
        type Scalars = Vec<Scalar>;
        fn name(&self) -> &'static str {
            "broken"
        }
        fn load_key(&self, key: Arc<ProvingKey>) -> Result<Self::Key, BackendError> {
            CpuBackend.load_key(key)
        }
        fn key_info<'k>(&self, key: &'k Self::Key) -> &'k crate::KeyInfo {
            CpuBackend.key_info(key)
        }
        fn upload(&self, key: &Self::Key, w: &Witness) -> Result<Witness, BackendError> {
            CpuBackend.upload(key, w)
        }
        fn evaluate(&self, key: &Self::Key, w: &Witness) -> Result<[Vec<Scalar>; 3], BackendError> {
            let mut abc = CpuBackend.evaluate(key, w)?;
            abc[0][3] += Scalar::ONE;
            Ok(abc)
        }
        fn compute_h(
            &self,
            key: &Self::Key,
            abc: [Vec<Scalar>; 3],
        ) -> Result<Vec<Scalar>, BackendError> {
            CpuBackend.compute_h(key, abc)
        }
        fn msms(
            &self,
            key: &Self::Key,
            w: &Witness,
            h: Vec<Scalar>,
        ) -> Result<MsmResults, BackendError> {
            CpuBackend.msms(key, w, h)
        }
        fn download(&self, v: &Vec<Scalar>) -> Result<Vec<Scalar>, BackendError> {
            CpuBackend.download(v)
        }
    }

    #[test]
    fn dual_catches_a_broken_backend() {
        let mut rng = ChaCha20Rng::seed_from_u64(13);
        let params =
            Arc::new(generate_random_parameters::<Bls12, _, _>(blank(6), &mut rng).unwrap());
        let dual = Dual {
            reference: CpuBackend,
            candidate: Broken,
        };
        let key = dual.load_key(key(&params, 6)).unwrap();
        let w = synthesize_witness(
            ToyCircuit {
                x: Scalar::ONE,
                ..blank(6)
            },
            None,
        )
        .unwrap();
        let err = prove(&dual, &key, &w, Scalar::ONE, Scalar::ONE).unwrap_err();
        assert_eq!(
            err.to_string(),
            "backends disagree: A·w: cpu and broken differ (first difference at element 3)"
        );
        assert!(!err.retryable());
    }

    #[test]
    fn rejects_mismatched_parameters_and_witnesses_without_panicking() {
        let mut rng = ChaCha20Rng::seed_from_u64(12);
        let params =
            Arc::new(generate_random_parameters::<Bls12, _, _>(blank(4), &mut rng).unwrap());
        let shape_err = |r: Result<ProvingKey, BackendError>| match r {
            Err(e @ BackendError::Shape(_)) => e.to_string(),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("accepted"),
        };
        // More rounds: more aux than L points; many more: a larger domain than H has points.
        for rounds in [5, 40] {
            let e = shape_err(ProvingKey::new(
                params.clone(),
                Arc::new(capture(blank(rounds)).unwrap()),
            ));
            assert!(e.contains("the parameters do not fit the circuit"), "{e}");
        }
        // Identity delta.
        let mut bad = (*params).clone();
        bad.vk.delta_g1 = group::prime::PrimeCurveAffine::identity();
        let e = shape_err(ProvingKey::new(
            Arc::new(bad),
            Arc::new(capture(blank(4)).unwrap()),
        ));
        assert!(e.contains("delta"), "{e}");

        // A witness of another length names both.
        let backend = CpuBackend;
        let key = backend.load_key(key(&params, 4)).unwrap();
        let mut w = synthesize_witness(
            ToyCircuit {
                x: Scalar::ONE,
                ..blank(4)
            },
            None,
        )
        .unwrap();
        w.aux.pop();
        let err = prove(&backend, &key, &w, Scalar::ONE, Scalar::ONE).unwrap_err();
        assert!(!err.retryable());
        assert_eq!(
            err.to_string(),
            "input does not fit the parameters: the witness has 3 inputs and 5 aux variables, the shape's matrices 3 and 6"
        );
        let err = prove(&backend, &key, &compact(&w), Scalar::ONE, Scalar::ONE).unwrap_err();
        assert!(err.to_string().contains("5 aux variables"), "{err}");
        let invalid = BackendError::from(cuzk_wire::blob::BlobError::ChecksumMismatch);
        assert!(!invalid.retryable());
    }
}
