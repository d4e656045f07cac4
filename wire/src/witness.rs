//! What bellperson's prover needs from one synthesized circuit (design §3.3): the payload a synth
//! node ships to a GPU node.

use blstrs::Scalar;

/// A growable bit vector recording, per variable, whether it appears in a linear combination.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    words: Vec<u64>,
    len: usize,
}

impl Density {
    pub fn new() -> Self {
        Self::default()
    }

    /// All `len` bits cleared.
    pub fn zeros(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    pub fn from_words(words: Vec<u64>, len: usize) -> Option<Self> {
        if words.len() != len.div_ceil(64) {
            return None;
        }
        let tail_bits = len % 64;
        if tail_bits != 0 && words.last().is_some_and(|w| w >> tail_bits != 0) {
            return None;
        }
        Some(Self { words, len })
    }

    pub fn words(&self) -> &[u64] {
        &self.words
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, bit: bool) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        if bit {
            self.words[self.len / 64] |= 1 << (self.len % 64);
        }
        self.len += 1;
    }

    pub fn set(&mut self, index: usize) {
        assert!(
            index < self.len,
            "density index {index} out of range {}",
            self.len
        );
        self.words[index / 64] |= 1 << (index % 64);
    }

    pub fn get(&self, index: usize) -> bool {
        index < self.len && self.words[index / 64] >> (index % 64) & 1 == 1
    }

    pub fn count_ones(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.len).map(|i| self.get(i))
    }
}

/// One circuit's recorded assignment and constraint evaluations, mirroring bellperson's
/// `ProvingAssignment` after synthesis (including the trailing `input_i * 0 = 0` constraints).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assignment {
    /// Public inputs; index 0 is the constant ONE.
    pub input: Vec<Scalar>,
    pub aux: Vec<Scalar>,
    /// Per-constraint evaluations of the A, B and C linear combinations.
    pub a: Vec<Scalar>,
    pub b: Vec<Scalar>,
    pub c: Vec<Scalar>,
    pub a_aux_density: Density,
    pub b_input_density: Density,
    pub b_aux_density: Density,
}

impl Assignment {
    pub fn num_constraints(&self) -> usize {
        self.a.len()
    }

    /// Checks the internal shape invariants; a decoded blob must pass this before proving.
    pub fn check_shape(&self) -> Result<(), String> {
        let n = self.a.len();
        if self.b.len() != n || self.c.len() != n {
            return Err(format!(
                "constraint vectors differ in length: a={} b={} c={}",
                n,
                self.b.len(),
                self.c.len()
            ));
        }
        if self.input.is_empty() {
            return Err("no public inputs (ONE is missing)".into());
        }
        if n < self.input.len() {
            return Err("fewer constraints than inputs".into());
        }
        if self.a_aux_density.len() != self.aux.len() || self.b_aux_density.len() != self.aux.len()
        {
            return Err("aux density length differs from aux count".into());
        }
        if self.b_input_density.len() != self.input.len() {
            return Err("input density length differs from input count".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn density_push_get_count() {
        let mut d = Density::new();
        for i in 0..130 {
            d.push(i % 3 == 0);
        }
        assert_eq!(d.len(), 130);
        assert_eq!(d.count_ones(), 44);
        assert!(d.get(129) && !d.get(128) && !d.get(500));
        let round = Density::from_words(d.words().to_vec(), d.len()).unwrap();
        assert_eq!(round, d);
    }

    #[test]
    fn density_rejects_stray_tail_bits() {
        assert!(Density::from_words(vec![1 << 5], 5).is_none());
        assert!(Density::from_words(vec![1 << 4], 5).is_some());
        assert!(Density::from_words(vec![0, 0], 5).is_none());
    }
}
