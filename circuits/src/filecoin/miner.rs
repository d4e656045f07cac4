//! Miners and the prover ids they stand for, as PoRep and PoSt jobs name them. A miner is named
//! `f0…`/`t0…` or by its number; its prover id is the payload of its ID address (the actor id as
//! an unsigned LEB128 varint), zero-padded to 32 bytes — what lotus hands filecoin-proofs-api.

use serde::Deserialize;

use super::parse_hex32;

/// A miner as JSON: `"f01234"`, `"t01234"`, `"1234"` or `1234`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum Miner {
    Id(u64),
    Name(String),
}

/// The prover id a job names, by exactly one of its `prover_id` (hex) and `miner` parameters.
pub(crate) fn resolve_prover_id(
    prover_id: Option<String>,
    miner: Option<Miner>,
) -> Result<[u8; 32], String> {
    match (prover_id, miner) {
        (Some(hex), None) => parse_hex32(&hex).ok_or_else(|| {
            format!(
                "'prover_id' must be 64 hex digits, got {}",
                cuzk_wire::excerpt(&hex)
            )
        }),
        (None, Some(miner)) => {
            let id = match miner {
                Miner::Id(id) => parse_miner(&id.to_string()),
                Miner::Name(name) => parse_miner(&name),
            };
            // `self::`: the `prover_id` parameter shadows the function.
            Ok(self::prover_id(id.map_err(|e| e.to_string())?))
        }
        _ => Err("give exactly one of 'miner' and 'prover_id'".into()),
    }
}

/// The longest miner taken: `f0`/`t0` and the 19 digits of an ID below 2^63.
pub const MAX_MINER_LEN: usize = 21;

/// Why a miner was refused; fatal for the job (the parameters are wrong, retrying cannot help).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MinerError {
    /// Not echoed: the input may be any size.
    #[error(
        "miner is {len} bytes; an ID address (f0…/t0…) or actor id has at most {MAX_MINER_LEN}"
    )]
    TooLong { len: usize },
    #[error("miner '{miner}' is a protocol-{protocol} address; a miner is named by its ID address (f0…/t0…)")]
    NotAnId { miner: String, protocol: char },
    #[error("miner '{0}' is neither an ID address (f0…/t0…) nor a number")]
    Malformed(String),
    #[error("miner '{0}' is out of range (IDs are below 2^63)")]
    OutOfRange(String),
}

/// A miner given as `f0…`/`t0…` (an ID address) or as its actor id.
pub fn parse_miner(miner: &str) -> Result<u64, MinerError> {
    // Bounded first, so that no input is scanned, parsed or echoed in full.
    if miner.len() > MAX_MINER_LEN {
        return Err(MinerError::TooLong { len: miner.len() });
    }
    let digits = match miner.as_bytes() {
        [b'f' | b't' | b'F' | b'T', b'0', ..] => &miner[2..],
        [b'f' | b't' | b'F' | b'T', protocol, ..] => {
            return Err(MinerError::NotAnId {
                miner: miner.into(),
                protocol: *protocol as char,
            })
        }
        _ => miner,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(MinerError::Malformed(miner.into()));
    }
    let id: u64 = digits
        .parse()
        .map_err(|_| MinerError::OutOfRange(miner.into()))?;
    // go-address refuses ID addresses at or above 2^63.
    if id >= 1 << 63 {
        return Err(MinerError::OutOfRange(miner.into()));
    }
    Ok(id)
}

/// The prover id filecoin-proofs-api is given for a miner: its ID address payload (the id as
/// an unsigned LEB128 varint) followed by zeros.
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut rest = miner_id;
    for byte in out.iter_mut() {
        *byte = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest == 0 {
            break;
        }
        *byte |= 0x80;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miners_and_prover_ids() {
        assert_eq!(parse_miner("f01234"), Ok(1234));
        assert_eq!(parse_miner("t01000"), Ok(1000));
        assert_eq!(parse_miner("42"), Ok(42));
        assert!(parse_miner("f1abc")
            .unwrap_err()
            .to_string()
            .contains("protocol-1"));
        assert!(parse_miner("f0").is_err());
        assert!(parse_miner("x01234").is_err());
        assert!(parse_miner("f09223372036854775808")
            .unwrap_err()
            .to_string()
            .contains("2^63"));
        assert_eq!(parse_miner("f09223372036854775807"), Ok((1 << 63) - 1));
        // Known ID-address payloads: 0 → 00, 127 → 7f, 128 → 80 01, 1234 → d2 09.
        assert_eq!(prover_id(0)[..2], [0x00, 0x00]);
        assert_eq!(prover_id(127)[..2], [0x7f, 0x00]);
        assert_eq!(prover_id(128)[..3], [0x80, 0x01, 0x00]);
        assert_eq!(prover_id(1234)[..3], [0xd2, 0x09, 0x00]);
        assert_eq!(
            prover_id((1 << 63) - 1)[..10],
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00]
        );
    }

    #[test]
    fn over_long_miners_are_refused_by_their_length() {
        let long = format!("f0{}1234", "0".repeat(100_000));
        assert_eq!(
            parse_miner(&long),
            Err(MinerError::TooLong { len: 100_006 })
        );
        assert_eq!(
            parse_miner(&"0".repeat(MAX_MINER_LEN + 1)),
            Err(MinerError::TooLong {
                len: MAX_MINER_LEN + 1
            })
        );
        // Every circuit naming a miner refuses it when the job is resolved, with a short reason.
        let randomness = "00".repeat(32);
        for (name, params) in [
            (
                "porep-c2",
                serde_json::json!({"sector_size": "2KiB", "sector_id": 1, "miner": long}),
            ),
            (
                "window-post",
                serde_json::json!({"sector_size": "2KiB", "randomness": randomness, "miner": long}),
            ),
            (
                "winning-post",
                serde_json::json!({"sector_size": "2KiB", "randomness": randomness, "miner": long}),
            ),
        ] {
            let spec = crate::CircuitSpec {
                name: name.into(),
                params,
            };
            let e = spec.family().err().unwrap();
            assert!(matches!(e, crate::CircuitError::BadParams { .. }), "{name}");
            let e = e.to_string();
            assert!(e.contains("100006 bytes") && e.len() < 200, "{name}: {e}");
        }
    }
}
