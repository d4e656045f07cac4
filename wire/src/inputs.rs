//! A partition's public inputs as a work item carries them: their count and a digest. The
//! synth node derives them from the job, not from the witness it synthesizes, and the GPU node
//! proves and verifies a blob only when the blob's inputs have the same digest — so a verified
//! proof is a proof of the job's statement. A digest, not the inputs: a 32 GiB WindowPoSt
//! partition has more inputs than a work item may hold (docs/reliability.md).

use blstrs::Scalar;
use serde::{Deserialize, Serialize};

/// Separates these digests from any other blake3 use.
const CONTEXT: &str = "cuzk 2026 partition public inputs";

/// The count and digest of a partition's public inputs (without ONE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputsDigest {
    pub count: u64,
    pub digest: [u8; 32],
}

impl InputsDigest {
    pub fn of(inputs: &[Scalar]) -> InputsDigest {
        let mut hasher = blake3::Hasher::new_derive_key(CONTEXT);
        hasher.update(&(inputs.len() as u64).to_le_bytes());
        for input in inputs {
            hasher.update(&input.to_bytes_le());
        }
        InputsDigest {
            count: inputs.len() as u64,
            digest: hasher.finalize().into(),
        }
    }
}

impl std::fmt::Display for InputsDigest {
    /// `3 inputs, blake3 0a1b…`: enough to tell two apart in an error message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} inputs, blake3 ", self.count)?;
        for byte in &self.digest[..8] {
            write!(f, "{byte:02x}")?;
        }
        write!(f, "…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_change_of_value_order_or_count_changes_the_digest() {
        let inputs = [Scalar::from(1u64), Scalar::from(2u64), Scalar::from(3u64)];
        let digest = InputsDigest::of(&inputs);
        assert_eq!(digest, InputsDigest::of(&inputs));
        assert_eq!(digest.count, 3);
        let mut changed = inputs;
        changed[2] += Scalar::from(1u64);
        let swapped = [inputs[1], inputs[0], inputs[2]];
        for other in [&changed[..], &swapped[..], &inputs[..2], &[]] {
            assert_ne!(InputsDigest::of(other).digest, digest.digest, "{other:?}");
        }
        let shown = digest.to_string();
        assert!(
            shown.starts_with("3 inputs, blake3 ") && shown.ends_with('…'),
            "{shown}"
        );
    }
}
