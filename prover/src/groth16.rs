//! Groth16 proving on top of a [`Backend`]: H, the MSMs, then bellperson's exact assembly
//! (bellperson-split §1.3), so a proof equals `create_proof_batch`'s byte for byte for the same
//! `r` and `s`.

use std::time::{Duration, Instant};

use bellperson::groth16::{self, PreparedVerifyingKey, Proof, VerifyingKey};
use bellperson::SynthesisError;
use blstrs::{Bls12, Scalar};
use cuzk_wire::witness::Assignment;
use group::{prime::PrimeCurveAffine, Curve};

use crate::backend::{Backend, BackendError, MsmResults};

/// Wall time of each proving stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProveTimings {
    /// The H polynomial (three iNTTs, three coset NTTs, one inverse coset NTT).
    pub h: Duration,
    /// The five MSMs.
    pub msm: Duration,
    /// Everything, including validation and assembly.
    pub total: Duration,
}

/// Proves one synthesized circuit with blinding factors `r` and `s`.
pub fn prove<B: Backend>(
    backend: &B,
    srs: &B::Srs,
    vk: &VerifyingKey<Bls12>,
    assignment: Assignment,
    r: Scalar,
    s: Scalar,
) -> Result<Proof<Bls12>, BackendError> {
    prove_timed(backend, srs, vk, assignment, r, s).map(|(proof, _)| proof)
}

/// [`prove`], also reporting per-stage timings.
pub fn prove_timed<B: Backend>(
    backend: &B,
    srs: &B::Srs,
    vk: &VerifyingKey<Bls12>,
    mut assignment: Assignment,
    r: Scalar,
    s: Scalar,
) -> Result<(Proof<Bls12>, ProveTimings), BackendError> {
    let start = Instant::now();
    assignment.check_shape().map_err(BackendError::Shape)?;
    if vk.ic.len() != assignment.input.len() {
        return Err(BackendError::Shape(format!(
            "{} public inputs (with ONE) but the verifying key expects {}",
            assignment.input.len(),
            vk.ic.len()
        )));
    }
    // bellperson refuses these (a subversion-CRS attack); it checks after the MSMs, but the
    // outcome is the same and failing first saves the work.
    if bool::from(vk.delta_g1.is_identity() | vk.delta_g2.is_identity()) {
        return Err(BackendError::Shape(
            "verifying key delta is the identity point".into(),
        ));
    }

    // The constraint evaluations are only needed for H; hand them over so the backend can
    // reuse (or free) them before the MSMs.
    let a = std::mem::take(&mut assignment.a);
    let b = std::mem::take(&mut assignment.b);
    let c = std::mem::take(&mut assignment.c);
    // Spans for the trace (children of the caller's span on this thread); cheap when off.
    let h = tracing::info_span!("compute_h").in_scope(|| backend.compute_h(a, b, c))?;
    let h_done = Instant::now();

    let msms = tracing::info_span!("msms").in_scope(|| backend.msms(srs, &h, &assignment))?;
    drop(h);
    let msm_done = Instant::now();

    let proof = assemble(vk, &msms, r, s);
    let timings = ProveTimings {
        h: h_done - start,
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
    use crate::recording::{synthesize, tests::ToyCircuit};
    use bellperson::groth16::{
        create_proof_batch, generate_random_parameters, prepare_verifying_key,
    };
    use cuzk_wire::Retryable;
    use ff::Field;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;
    use std::sync::Arc;

    #[test]
    fn toy_proofs_match_bellperson_byte_for_byte() {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let blank = ToyCircuit {
            x: Scalar::ZERO,
            y: Scalar::ZERO,
            rounds: 20,
        };
        let params = Arc::new(generate_random_parameters::<Bls12, _, _>(blank, &mut rng).unwrap());
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

        let backend = CpuBackend;
        let srs = backend.load_srs(params.clone()).unwrap();
        for (i, circuit) in circuits.into_iter().enumerate() {
            let inputs = circuit.public_inputs();
            let asg = synthesize(circuit).unwrap();
            let (ours, t) = prove_timed(&backend, &srs, &params.vk, asg, r_s[i], s_s[i]).unwrap();
            assert!(t.total >= t.h + t.msm);
            assert_eq!(
                proof_bytes(&ours),
                proof_bytes(&theirs[i]),
                "proof {i} differs"
            );
            let mut written = Vec::new();
            ours.write(&mut written).unwrap();
            assert_eq!(written, proof_bytes(&ours));
            assert!(verify(&pvk, &ours, &inputs).unwrap());
        }
    }

    #[test]
    fn rejects_mismatched_parameters_without_panicking() {
        let mut rng = ChaCha20Rng::seed_from_u64(12);
        let blank = |rounds| ToyCircuit {
            x: Scalar::ZERO,
            y: Scalar::ZERO,
            rounds,
        };
        let params =
            Arc::new(generate_random_parameters::<Bls12, _, _>(blank(4), &mut rng).unwrap());
        let backend = CpuBackend;
        let srs = backend.load_srs(params.clone()).unwrap();
        let r = Scalar::ONE;

        // More rounds: more aux than L points.
        let asg = synthesize(ToyCircuit {
            x: Scalar::ONE,
            ..blank(5)
        })
        .unwrap();
        let err = prove(&backend, &srs, &params.vk, asg, r, r).unwrap_err();
        assert!(matches!(err, BackendError::Shape(_)), "{err}");
        assert!(!err.retryable());

        // Many more rounds: a larger domain than H has points.
        let asg = synthesize(ToyCircuit {
            x: Scalar::ONE,
            ..blank(40)
        })
        .unwrap();
        assert!(matches!(
            prove(&backend, &srs, &params.vk, asg, r, r),
            Err(BackendError::Shape(_))
        ));

        // A truncated payload.
        let mut asg = synthesize(ToyCircuit {
            x: Scalar::ONE,
            ..blank(4)
        })
        .unwrap();
        asg.c.pop();
        assert!(matches!(
            prove(&backend, &srs, &params.vk, asg, r, r),
            Err(BackendError::Shape(_))
        ));

        // Wrong input count for the verifying key.
        let mut asg = synthesize(ToyCircuit {
            x: Scalar::ONE,
            ..blank(4)
        })
        .unwrap();
        asg.input.push(Scalar::ONE);
        asg.b_input_density.push(false);
        assert!(matches!(
            prove(&backend, &srs, &params.vk, asg, r, r),
            Err(BackendError::Shape(_))
        ));

        // Identity delta.
        let mut vk = params.vk.clone();
        vk.delta_g1 = blstrs::G1Affine::identity();
        let asg = synthesize(ToyCircuit {
            x: Scalar::ONE,
            ..blank(4)
        })
        .unwrap();
        assert!(matches!(
            prove(&backend, &srs, &vk, asg, r, r),
            Err(BackendError::Shape(_))
        ));
    }
}
