//! What a synth node ships for one partition: the circuit's variable assignment. Everything else
//! the prover needs (the A/B/C evaluations, which variables are dense in each MSM) follows from
//! the shape's constraint matrices, which GPU nodes hold.

use blstrs::Scalar;

/// One synthesized circuit's assignment, in bellperson's variable order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Witness {
    /// Public inputs; index 0 is the constant ONE.
    pub input: Vec<Scalar>,
    pub aux: Vec<Scalar>,
}

impl Witness {
    /// Inputs and aux together: the length of the matrices' rows.
    pub fn len(&self) -> usize {
        self.input.len() + self.aux.len()
    }

    pub fn is_empty(&self) -> bool {
        self.input.is_empty() && self.aux.is_empty()
    }

    /// Variable `j` of (inputs ‖ aux).
    #[inline(always)]
    pub fn value(&self, j: usize) -> Scalar {
        match j.checked_sub(self.input.len()) {
            None => self.input[j],
            Some(k) => self.aux[k],
        }
    }

    /// The public inputs a verifier takes (without ONE).
    pub fn public_inputs(&self) -> &[Scalar] {
        self.input.get(1..).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_inputs_then_aux() {
        let w = Witness {
            input: vec![Scalar::from(1u64), Scalar::from(2u64)],
            aux: vec![Scalar::from(3u64)],
        };
        assert_eq!(w.len(), 3);
        assert_eq!(
            (0..3).map(|j| w.value(j)).collect::<Vec<_>>(),
            [1u64, 2, 3].map(Scalar::from)
        );
        assert_eq!(w.public_inputs(), &[Scalar::from(2u64)]);
        assert!(Witness::default().public_inputs().is_empty());
    }
}
