//! A proving key: one shape's Groth16 parameters joined with its constraint matrices, and the
//! MSM packing both imply — worked out once per shape here, above the backends, so every engine
//! proves from the same plan.

use std::sync::Arc;

use bellperson::groth16::{Parameters, VerifyingKey};
use blstrs::Bls12;
use cuzk_wire::witness::Witness;
use group::prime::PrimeCurveAffine;

use crate::backend::BackendError;
use crate::ntt::domain_size;
use crate::r1cs::ShapeMatrices;

/// What every backend's key keeps about its shape, whatever else it holds.
#[derive(Clone, Debug)]
pub struct KeyInfo {
    pub inputs: usize,
    pub aux: usize,
    pub constraints: usize,
    /// The evaluation domain: `m = 2^log_m >= constraints`.
    pub m: usize,
    pub log_m: u32,
    /// The matrices' hash, which blobs for this shape carry.
    pub matrices_hash: [u8; 32],
    pub vk: VerifyingKey<Bls12>,
}

impl KeyInfo {
    /// A witness of another shape fails here, naming both lengths.
    pub fn check_witness(&self, w: &Witness) -> Result<(), BackendError> {
        if w.input.len() != self.inputs || w.aux.len() != self.aux {
            return Err(BackendError::Shape(format!(
                "the witness has {} inputs and {} aux variables, the shape's matrices {} and {}",
                w.input.len(),
                w.aux.len(),
                self.inputs,
                self.aux
            )));
        }
        Ok(())
    }
}

/// Parameters and matrices of one shape, checked against each other.
pub struct ProvingKey {
    pub params: Arc<Parameters<Bls12>>,
    pub matrices: Arc<ShapeMatrices>,
    /// Variables whose scalars meet `params.a`, in order.
    pub a_vars: Vec<u32>,
    /// Variables whose scalars meet `params.b_g1` and `params.b_g2`, in order.
    pub b_vars: Vec<u32>,
    pub info: KeyInfo,
}

impl ProvingKey {
    /// Joins `params` and `matrices`, refusing parameters made for another circuit: bellperson's
    /// generator stores A and B without their identity points, so each query's length must equal
    /// the number of variables dense in it, and H holds `m - 1` points.
    pub fn new(
        params: Arc<Parameters<Bls12>>,
        matrices: Arc<ShapeMatrices>,
    ) -> Result<Self, BackendError> {
        let (m, log_m) = domain_size(matrices.constraints())?;
        let a_vars = matrices.a_query_vars();
        let b_vars = matrices.b_query_vars();
        let p = &params;
        let checks = [
            ("IC (public inputs)", p.vk.ic.len(), matrices.inputs),
            ("L (aux variables)", p.l.len(), matrices.aux),
            ("H (domain size - 1)", p.h.len(), m - 1),
            ("A", p.a.len(), a_vars.len()),
            ("B in G1", p.b_g1.len(), b_vars.len()),
            ("B in G2", p.b_g2.len(), b_vars.len()),
        ];
        for (what, have, need) in checks {
            if have != need {
                return Err(BackendError::Shape(format!(
                    "the parameters do not fit the circuit: {what} has {have} points, the matrices need {need}"
                )));
            }
        }
        // bellperson refuses these (a subversion-CRS attack).
        if bool::from(p.vk.delta_g1.is_identity() | p.vk.delta_g2.is_identity()) {
            return Err(BackendError::Shape(
                "verifying key delta is the identity point".into(),
            ));
        }
        let info = KeyInfo {
            inputs: matrices.inputs,
            aux: matrices.aux,
            constraints: matrices.constraints(),
            m,
            log_m,
            matrices_hash: matrices.hash(),
            vk: p.vk.clone(),
        };
        Ok(ProvingKey {
            params,
            matrices,
            a_vars,
            b_vars,
            info,
        })
    }

    /// Bytes a device holds for this key: the SRS (affine points), the matrices and the two
    /// packing maps.
    pub fn device_bytes(&self) -> u64 {
        let p = &self.params;
        let g1 = (p.h.len() + p.l.len() + p.a.len() + p.b_g1.len()) as u64 * 96;
        g1 + p.b_g2.len() as u64 * 192
            + self.matrices.bytes()
            + 4 * (self.a_vars.len() + self.b_vars.len()) as u64
    }
}
