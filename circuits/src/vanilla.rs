//! The job input of the families proved from vanilla proofs (PoSt in `post.rs`, SnapDeals in
//! `snap.rs`): JSON `{"vanilla_proofs": ["<base64>", …]}`, each entry a filecoin-proofs value
//! serialized with bincode as filecoin-proofs-api serializes it (what Curio sends in
//! `SubmitProofRequest.vanilla_proofs`); and the one checked form of the last input a family
//! saw, so that a job's partitions decode and verify it once.

use std::any::Any;
use std::sync::{Arc, Mutex};

use base64::Engine;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::CircuitError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    vanilla_proofs: Vec<String>,
}

/// The input's entries, still base64, with the input's size bounded by `max_bytes`.
pub(crate) fn entries(
    circuit: &'static str,
    input: &[u8],
    max_bytes: usize,
) -> Result<Vec<String>, CircuitError> {
    let err = |reason: String| CircuitError::BadInput { circuit, reason };
    if input.len() > max_bytes {
        return Err(err(format!(
            "input is {} bytes; at most {max_bytes} allowed",
            input.len()
        )));
    }
    let parsed: Input = serde_json::from_slice(input).map_err(|e| {
        err(format!(
            "input is not {{\"vanilla_proofs\": [\"<base64>\", …]}}: {e}"
        ))
    })?;
    Ok(parsed.vanilla_proofs)
}

/// Entry `index` decoded: base64, then bincode with filecoin-proofs-api's options
/// (`bincode::deserialize`) and every length bounded by the bytes actually there. `what` names
/// the expected value in the error, e.g. "a 2KiB sector proof (bincode FallbackPoStSectorProof)".
pub(crate) fn decode<T: DeserializeOwned>(
    circuit: &'static str,
    index: usize,
    entry: &str,
    what: &str,
) -> Result<T, CircuitError> {
    use bincode::Options;
    let err = |reason: String| CircuitError::BadInput { circuit, reason };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(entry)
        .map_err(|e| err(format!("vanilla proof {index} is not base64: {e}")))?;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit(bytes.len() as u64)
        .deserialize(&bytes)
        .map_err(|e| err(format!("vanilla proof {index} is not {what}: {e}")))
}

/// The checked form of the last input a family was given, by input hash: a job's partitions
/// are synthesized from one input, and each would otherwise decode and verify it again.
#[derive(Default)]
pub(crate) struct LastInput(Mutex<Option<Hashed>>);

/// An input's hash and its checked form.
type Hashed = ([u8; 32], Arc<dyn Any + Send + Sync>);

impl LastInput {
    /// `input`'s checked form: the cached one if `input` was the last seen, else `check`'s.
    pub(crate) fn get_or_check<T: Any + Send + Sync>(
        &self,
        input: &[u8],
        check: impl FnOnce() -> Result<T, CircuitError>,
    ) -> Result<Arc<T>, CircuitError> {
        use sha2::{Digest, Sha256};
        let hash: [u8; 32] = Sha256::digest(input).into();
        let cached = self.0.lock().expect("input cache poisoned").clone();
        if let Some(checked) = cached
            .filter(|(h, _)| *h == hash)
            .and_then(|(_, c)| c.downcast::<T>().ok())
        {
            return Ok(checked);
        }
        // Concurrent partitions may check the same input twice; that is cheaper than holding
        // the lock through a check of a large input.
        let checked = Arc::new(check()?);
        *self.0.lock().expect("input cache poisoned") = Some((hash, checked.clone()));
        Ok(checked)
    }
}

/// The job input of `proofs` (tests of the families).
#[cfg(test)]
pub(crate) fn input(proofs: &[Vec<u8>]) -> Vec<u8> {
    let b64: Vec<_> = proofs
        .iter()
        .map(|p| base64::engine::general_purpose::STANDARD.encode(p))
        .collect();
    serde_json::to_vec(&serde_json::json!({ "vanilla_proofs": b64 })).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_bounded_and_decoded() {
        let e = entries("x", &[b' '; 11], 10).unwrap_err().to_string();
        assert!(e.contains("input is 11 bytes; at most 10 allowed"), "{e}");
        let e = entries("x", br#"{"proofs": []}"#, 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("input is not {\"vanilla_proofs\""), "{e}");
        let got = entries("x", br#"{"vanilla_proofs": ["AQAAAAAAAAAC"]}"#, 100).unwrap();
        // bincode of a Vec<u8> of one byte: a u64 length, then the byte.
        assert_eq!(decode::<Vec<u8>>("x", 0, &got[0], "a list").unwrap(), [2]);
        // A length beyond the bytes there is refused, not allocated.
        let huge = base64::engine::general_purpose::STANDARD.encode(u64::MAX.to_le_bytes());
        let e = decode::<Vec<u8>>("x", 3, &huge, "a list")
            .unwrap_err()
            .to_string();
        assert!(e.contains("vanilla proof 3 is not a list"), "{e}");
        let e = decode::<Vec<u8>>("x", 1, "***", "a list")
            .unwrap_err()
            .to_string();
        assert!(e.contains("vanilla proof 1 is not base64"), "{e}");
    }

    #[test]
    fn the_last_input_is_checked_once() {
        let cache = LastInput::default();
        let mut checks = 0;
        for input in [&b"a"[..], b"a", b"b", b"a"] {
            let got = cache
                .get_or_check(input, || {
                    checks += 1;
                    Ok(input.to_vec())
                })
                .unwrap();
            assert_eq!(&got[..], input);
        }
        assert_eq!(checks, 3);
        let e = cache
            .get_or_check::<u8>(b"c", || {
                Err(CircuitError::BadInput {
                    circuit: "x",
                    reason: "no".into(),
                })
            })
            .unwrap_err();
        assert!(e.to_string().contains("no"));
    }
}
