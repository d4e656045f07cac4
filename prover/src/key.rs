//! A proving key: one shape's Groth16 parameters joined with its constraint matrices, and the
//! MSM packing both imply — worked out once per shape here, above the backends, so every engine
//! proves from the same plan.
//!
//! The parameters are in memory, or a mapped file ([`Srs`]): a 32 GiB PoRep SRS is 44 GiB, and a
//! GPU backend streams it to the device without ever holding it on the host.

use std::sync::Arc;

use bellperson::groth16::{Parameters, VerifyingKey};
use blstrs::Bls12;
use group::prime::PrimeCurveAffine;

use crate::error::BackendError;
use crate::ntt::domain_size;
use crate::params::{ParamsFile, Query};
use crate::r1cs::ShapeMatrices;

/// Where a key's query points are.
#[derive(Clone)]
pub enum Srs {
    Memory(Arc<Parameters<Bls12>>),
    /// A bellperson parameter file, mapped; whoever loads the key parses what it needs.
    File(Arc<ParamsFile>),
}

impl Srs {
    pub fn vk(&self) -> &VerifyingKey<Bls12> {
        match self {
            Srs::Memory(p) => &p.vk,
            Srs::File(f) => f.vk(),
        }
    }

    /// Points in query `q`.
    pub fn len(&self, q: Query) -> usize {
        match self {
            Srs::Memory(p) => match q {
                Query::H => p.h.len(),
                Query::L => p.l.len(),
                Query::A => p.a.len(),
                Query::BG1 => p.b_g1.len(),
                Query::BG2 => p.b_g2.len(),
            },
            Srs::File(f) => f.len(q),
        }
    }

    /// The parameters in memory (parsed on all cores from a file, without the subgroup checks:
    /// files are checked when they are first admitted).
    pub fn parameters(&self) -> Result<Arc<Parameters<Bls12>>, BackendError> {
        match self {
            Srs::Memory(p) => Ok(p.clone()),
            Srs::File(f) => f
                .read(false)
                .map(Arc::new)
                .map_err(|e| BackendError::Shape(e.to_string())),
        }
    }
}

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
    /// A witness of another shape, `(inputs, aux)` variables, fails here, naming both lengths.
    pub fn check_lens(&self, (inputs, aux): (usize, usize)) -> Result<(), BackendError> {
        if inputs != self.inputs || aux != self.aux {
            return Err(BackendError::Shape(format!(
                "the witness has {inputs} inputs and {aux} aux variables, the shape's matrices {} and {}",
                self.inputs, self.aux
            )));
        }
        Ok(())
    }
}

/// Parameters and matrices of one shape, checked against each other.
pub struct ProvingKey {
    pub srs: Srs,
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
        Self::with_srs(Srs::Memory(params), matrices)
    }

    /// [`Self::new`] for any [`Srs`].
    pub fn with_srs(srs: Srs, matrices: Arc<ShapeMatrices>) -> Result<Self, BackendError> {
        let (m, log_m) = domain_size(matrices.constraints())?;
        let a_vars = matrices.a_query_vars();
        let b_vars = matrices.b_query_vars();
        let vk = srs.vk();
        let checks = [
            ("IC (public inputs)", vk.ic.len(), matrices.inputs),
            ("L (aux variables)", srs.len(Query::L), matrices.aux),
            ("H (domain size - 1)", srs.len(Query::H), m - 1),
            ("A", srs.len(Query::A), a_vars.len()),
            ("B in G1", srs.len(Query::BG1), b_vars.len()),
            ("B in G2", srs.len(Query::BG2), b_vars.len()),
        ];
        for (what, have, need) in checks {
            if have != need {
                return Err(BackendError::Shape(format!(
                    "the parameters do not fit the circuit: {what} has {have} points, the matrices need {need}"
                )));
            }
        }
        // bellperson refuses these (a subversion-CRS attack).
        if bool::from(vk.delta_g1.is_identity() | vk.delta_g2.is_identity()) {
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
            vk: vk.clone(),
        };
        Ok(ProvingKey {
            srs,
            matrices,
            a_vars,
            b_vars,
            info,
        })
    }

    /// Bytes a device holds for this key: the SRS (affine points), the matrices and the two
    /// packing maps.
    pub fn device_bytes(&self) -> u64 {
        let g1: usize = [Query::H, Query::L, Query::A, Query::BG1]
            .iter()
            .map(|&q| self.srs.len(q))
            .sum();
        g1 as u64 * 96
            + self.srs.len(Query::BG2) as u64 * 192
            + self.matrices.bytes()
            + 4 * (self.a_vars.len() + self.b_vars.len()) as u64
    }
}
