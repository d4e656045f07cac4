//! [`Dual`]: a backend that runs two backends on the same work and fails on the first step whose
//! outputs differ — the CUDA backend checked against the CPU reference on the device machine,
//! and any engine under test against another.

use std::sync::Arc;

use blstrs::Scalar;
use cuzk_wire::blob::CompactWitness;
use cuzk_wire::witness::Witness;

use crate::backend::{Backend, MsmResults};
use crate::error::BackendError;
use crate::key::{KeyInfo, ProvingKey};

/// Runs `reference` and `candidate` side by side; results come from `reference`.
pub struct Dual<R, C> {
    pub reference: R,
    pub candidate: C,
}

impl<R: Backend, C: Backend> Dual<R, C> {
    fn compare(&self, step: &str, r: &R::Scalars, c: &C::Scalars) -> Result<(), BackendError> {
        let (r, c) = (self.reference.download(r)?, self.candidate.download(c)?);
        if r.len() != c.len() {
            return Err(self.mismatch(step, format!("{} vs {} values", r.len(), c.len())));
        }
        match r.iter().zip(&c).position(|(x, y)| x != y) {
            None => Ok(()),
            Some(i) => Err(self.mismatch(step, format!("first difference at element {i}"))),
        }
    }

    fn mismatch(&self, step: &str, detail: String) -> BackendError {
        BackendError::Mismatch(format!(
            "{step}: {} and {} differ ({detail})",
            self.reference.name(),
            self.candidate.name()
        ))
    }
}

fn pair<A, B>(
    a: Result<A, BackendError>,
    b: Result<B, BackendError>,
) -> Result<(A, B), BackendError> {
    Ok((a?, b?))
}

impl<R: Backend, C: Backend> Backend for Dual<R, C> {
    type Key = (R::Key, C::Key);
    type Witness = (R::Witness, C::Witness);
    type Scalars = (R::Scalars, C::Scalars);

    fn name(&self) -> &'static str {
        "dual"
    }

    fn load_key(&self, key: Arc<ProvingKey>) -> Result<Self::Key, BackendError> {
        pair(
            self.reference.load_key(key.clone()),
            self.candidate.load_key(key),
        )
    }

    fn key_info<'k>(&self, key: &'k Self::Key) -> &'k KeyInfo {
        self.reference.key_info(&key.0)
    }

    fn upload(&self, key: &Self::Key, witness: &Witness) -> Result<Self::Witness, BackendError> {
        pair(
            self.reference.upload(&key.0, witness),
            self.candidate.upload(&key.1, witness),
        )
    }

    fn upload_compact(
        &self,
        key: &Self::Key,
        witness: &CompactWitness,
    ) -> Result<Self::Witness, BackendError> {
        pair(
            self.reference.upload_compact(&key.0, witness),
            self.candidate.upload_compact(&key.1, witness),
        )
    }

    fn wait_turn(&self, w: &Self::Witness) -> Result<(), BackendError> {
        self.reference.wait_turn(&w.0)?;
        self.candidate.wait_turn(&w.1)
    }

    fn evaluate(
        &self,
        key: &Self::Key,
        w: &Self::Witness,
    ) -> Result<[Self::Scalars; 3], BackendError> {
        let [ra, rb, rc] = self.reference.evaluate(&key.0, &w.0)?;
        let [ca, cb, cc] = self.candidate.evaluate(&key.1, &w.1)?;
        self.compare("A·w", &ra, &ca)?;
        self.compare("B·w", &rb, &cb)?;
        self.compare("C·w", &rc, &cc)?;
        Ok([(ra, ca), (rb, cb), (rc, cc)])
    }

    fn compute_h(
        &self,
        key: &Self::Key,
        abc: [Self::Scalars; 3],
    ) -> Result<Self::Scalars, BackendError> {
        let [(ra, ca), (rb, cb), (rc, cc)] = abc;
        let r = self.reference.compute_h(&key.0, [ra, rb, rc])?;
        let c = self.candidate.compute_h(&key.1, [ca, cb, cc])?;
        self.compare("H", &r, &c)?;
        Ok((r, c))
    }

    fn msms(
        &self,
        key: &Self::Key,
        w: &Self::Witness,
        (hr, hc): Self::Scalars,
    ) -> Result<MsmResults, BackendError> {
        let r = self.reference.msms(&key.0, &w.0, hr)?;
        let c = self.candidate.msms(&key.1, &w.1, hc)?;
        let differ = [
            ("H", r.h != c.h),
            ("L", r.l != c.l),
            ("A", r.a != c.a),
            ("B in G1", r.b_g1 != c.b_g1),
            ("B in G2", r.b_g2 != c.b_g2),
        ];
        if let Some((which, _)) = differ.iter().find(|(_, d)| *d) {
            return Err(self.mismatch(&format!("{which} MSM"), "points differ".into()));
        }
        Ok(r)
    }

    fn download(&self, v: &Self::Scalars) -> Result<Vec<Scalar>, BackendError> {
        self.reference.download(&v.0)
    }
}
